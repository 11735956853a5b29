"""`ember.cuda`: CUDA devices through CuPy, as `torch.cuda`.

CuPy is optional (`pip install 'ember[gpu]'` plus the `cupy-cuda12x`/`cupy-cuda13x` wheel for the
driver). It is imported on the first query, not with ember. Without CuPy, or with CuPy but no usable
GPU, `is_available()` is False, `device_count()` is 0, and anything that needs a device raises one
RuntimeError saying why.

Ops run on CuPy's current device, as kernels do in CuPy: a process uses one GPU at a time
(`set_device`, or `with ember.cuda.device(i):`), the pattern of one process per GPU.
"""
from __future__ import annotations

from . import backend
from .backend import device as _device


def _backend():
    return backend.cuda_backend()


def is_available() -> bool:
    """True when CuPy is installed and sees at least one CUDA device."""
    return _backend() is not None


def is_initialized() -> bool:
    return backend.CUDA is not backend.UNSET and backend.CUDA is not None


def init() -> None:
    backend.require_cuda()


def device_count() -> int:
    be = _backend()
    return 0 if be is None else be.count


def _index(d) -> int:
    """A device index from an int, 'cuda:N', a device or None (the current device)."""
    be = backend.require_cuda()
    if d is None:
        return be.current()
    if isinstance(d, int):
        dev = _device("cuda", d)
    else:
        dev = _device(d)
        if dev.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {dev}")
    return backend.resolve(dev).index


def current_device() -> int:
    return backend.require_cuda().current()


def set_device(d) -> None:
    """Make device `d` current: tensors created with device='cuda' go there and ops run there."""
    backend.require_cuda().set_current(_index(d))


class device:
    """Context manager that makes device `d` current for its block (`with ember.cuda.device(1):`)."""

    def __init__(self, d) -> None:
        self.idx = None if d is None else _index(d)
        self._ctx = None

    def __enter__(self):
        if self.idx is not None:
            self._ctx = backend.require_cuda().use(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
            self._ctx = None


def synchronize(d=None) -> None:
    """Wait until every kernel queued on device `d` (default: the current one) has finished."""
    backend.require_cuda().synchronize(_index(d))


def get_device_name(d=None) -> str:
    name = backend.require_cuda().properties(_index(d))["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(d=None) -> tuple[int, int]:
    p = backend.require_cuda().properties(_index(d))
    return int(p["major"]), int(p["minor"])


def memory_allocated(d=None) -> int:
    """Bytes held by live CUDA arrays on the device (CuPy's memory pool, used part); 0 before CUDA is
    first used, or without CUDA, as in PyTorch (so memory logging runs unchanged on a CPU machine)."""
    if not is_initialized():
        return 0
    return backend.CUDA.memory_allocated(_index(d))


def memory_reserved(d=None) -> int:
    """Bytes the memory pool holds from the driver, used or cached for reuse (0 as `memory_allocated`)."""
    if not is_initialized():
        return 0
    return backend.CUDA.memory_reserved(_index(d))


def empty_cache() -> None:
    """Return the memory pools' cached, unused blocks to the driver."""
    if is_initialized():
        backend.CUDA.empty_cache()


# ---------------------------------------------------------------------------- random numbers
def _gens():
    from ._creation import cuda_generators
    return cuda_generators()


def default_generator(d=None):
    """The default Generator of CUDA device `d` (ember.Generator with device 'cuda:N')."""
    return _gens()[_index(d)]


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (lazily, when CUDA is unavailable: a no-op then)."""
    if is_available():
        default_generator().manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator; remembered for devices first used later."""
    from ._creation import seed_cuda
    seed_cuda(seed)


def seed() -> None:
    if is_available():
        default_generator().seed()


def seed_all() -> None:
    if is_available():
        for g in _gens():
            g.seed()


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The state of a CUDA device's generator as a uint8 Tensor (see `Generator.get_state`)."""
    return default_generator(device).get_state()


def set_rng_state(new_state, device="cuda") -> None:
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in _gens()]


def set_rng_state_all(new_states) -> None:
    for g, s in zip(_gens(), new_states):
        g.set_state(s)
