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
        self._nccl = None

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

    def stream_ptr(self) -> int:
        """The current device's current stream, as the handle NCCL takes."""
        return self.cp.cuda.get_current_stream().ptr

    def record_event(self):
        """An event recorded now on the current stream (`.done` says whether the work before it finished)."""
        ev = self.cp.cuda.Event(disable_timing=True)
        ev.record(self.cp.cuda.get_current_stream())
        return ev

    # ------------------------------------------------------------------ NCCL
    def nccl(self):
        """CuPy's NCCL bindings (`cupy.cuda.nccl`), or a string saying why they cannot be used."""
        if self._nccl is None:
            import importlib
            import warnings
            try:
                with warnings.catch_warnings():  # CuPy warns when it cannot load libnccl: the string says it instead
                    warnings.simplefilter("ignore")
                    mod = self.cp.cuda.nccl if self.fake else importlib.import_module("cupy.cuda.nccl")
            except Exception as e:  # noqa: BLE001 - any import failure means "no NCCL"
                mod = f"cupy.cuda.nccl cannot be imported ({type(e).__name__}: {e})"
            else:
                if not getattr(mod, "available", False) or not hasattr(mod, "NcclCommunicator"):
                    mod = ("CuPy cannot load the NCCL library (pip install 'ember[nccl]', or 'ember[nccl-cuda13]' "
                           "with cupy-cuda13x)")
            self._nccl = mod
        return self._nccl

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
