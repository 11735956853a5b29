"""The CUDA backend: CuPy arrays as ember's device arrays.

Everything ember asks of CuPy beyond its NumPy-compatible namespace goes through this class:
device selection, host/device copies, pinned host memory, synchronisation, memory statistics,
random states and the special functions that live in `cupyx`. Tests install a CPU stand-in with
the same interface (`tests/_fakecuda.py`), so this file runs in CI without a GPU.
"""
from __future__ import annotations

import numpy as np

from . import device


class CudaBackend:
    """CuPy (`cp`, `cpx` = cupyx) seen by ember. Constructing it raises when there is no GPU."""

    def __init__(self, cp, cpx) -> None:
        self.cp, self.cpx = cp, cpx
        self.ndarray = cp.ndarray
        self.count = int(cp.cuda.runtime.getDeviceCount())  # raises CUDARuntimeError without a driver/GPU
        if self.count < 1:
            raise RuntimeError("no CUDA device found")
        self.devices = [device("cuda", i) for i in range(self.count)]
        self._ctx = [cp.cuda.Device(i) for i in range(self.count)]
        self.fake = bool(getattr(cp, "_ember_fake", False))
        self._erf = None

    # ------------------------------------------------------------------ devices
    def device_of(self, a) -> device:
        return self.devices[a.device.id]

    def current(self) -> int:
        return self.cp.cuda.Device().id

    def use(self, index: int | None):
        """A context manager making device `index` current (None: the current one)."""
        return self.cp.cuda.Device(self.current() if index is None else index)

    def set_current(self, index: int) -> None:
        self.cp.cuda.Device(index).use()

    def synchronize(self, index: int | None = None) -> None:
        with self.use(index):
            self.cp.cuda.Device().synchronize()

    def properties(self, index: int) -> dict:
        return self.cp.cuda.runtime.getDeviceProperties(index)

    # ------------------------------------------------------------------ copies
    def upload(self, host: np.ndarray, index: int | None, non_blocking: bool = False):
        """Host -> device. From pinned memory with non_blocking, the copy is queued on the current
        stream and this returns at once (as in PyTorch); otherwise it is synchronous."""
        with self.use(index):
            if non_blocking and self.is_pinned(host):
                out = self.cp.empty(host.shape, host.dtype)
                out.set(np.ascontiguousarray(host), stream=self.cp.cuda.get_current_stream())
                return out
            return self.cp.asarray(host)

    def download(self, a, non_blocking: bool = False) -> np.ndarray:
        return a.get()

    def copy_between(self, a, index: int):
        with self.use(index):
            return self.cp.array(a, copy=True)

    # ------------------------------------------------------------------ pinned host memory
    def pinned_empty(self, shape: tuple, dtype) -> np.ndarray:
        return self.cpx.empty_pinned(shape, dtype=dtype)

    def is_pinned(self, host: np.ndarray) -> bool:
        check = getattr(self.cpx, "_is_pinned", None)
        if check is not None:
            return check(host)
        if host.size == 0:
            return False
        try:
            attrs = self.cp.cuda.runtime.pointerGetAttributes(host.__array_interface__["data"][0])
        except Exception:
            return False
        return getattr(attrs, "type", 0) == 1  # cudaMemoryTypeHost: page-locked host memory

    # ------------------------------------------------------------------ memory
    def memory_allocated(self, index: int | None) -> int:
        with self.use(index):
            return int(self.cp.get_default_memory_pool().used_bytes())

    def memory_reserved(self, index: int | None) -> int:
        with self.use(index):
            return int(self.cp.get_default_memory_pool().total_bytes())

    def empty_cache(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()

    # ------------------------------------------------------------------ randomness
    def random_state(self, seed: int, index: int):
        """A CuPy RandomState on device `index` (cuRAND XORWOW), seeded."""
        with self.use(index):
            return self.cp.random.RandomState(seed & ((1 << 63) - 1))

    # ------------------------------------------------------------------ functions outside CuPy's NumPy namespace
    def erf(self, x):
        if self._erf is None:
            import importlib
            self._erf = (self.cpx.scipy.special.erf if self.fake else
                         importlib.import_module("cupyx.scipy.special").erf)
        return self._erf(x)
