"""Global names of PyTorch's `torch` namespace that are about types and the runtime, not ops:
dtype limits and promotion (`finfo`, `iinfo`, `promote_types`, `result_type`, `can_cast`), type
predicates (`is_tensor`, `is_storage`, `numel`), thread pools (`get_num_threads`, `set_num_threads`, on
threadpoolctl) and the deterministic-algorithms switch.
"""
from __future__ import annotations

import builtins
import math
import os
import warnings

import numpy as np

from . import _dtype as dt
from ._tensor import Tensor, type_name


# ---------------------------------------------------------------------- dtype limits
class finfo:
    """Machine limits of a float dtype, as PyTorch's `torch.finfo`: bits, eps, max, min, tiny (=
    smallest_normal), resolution (10**-digits) and dtype (its name). `finfo()` describes the default dtype."""

    def __init__(self, type=None) -> None:
        d = dt.get_default_dtype() if type is None else dt.as_dtype(type)
        if not d.is_floating_point:
            raise TypeError(f"ember.finfo() requires a floating point input type, got {d}. Use ember.iinfo to handle "
                            f"integer types")
        if d is dt.bfloat16:
            import ml_dtypes
            f = ml_dtypes.finfo(d.np)
        else:
            f = np.finfo(d.np)
        self.bits = d.itemsize * 8
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.tiny = self.smallest_normal = float(f.smallest_normal)
        self.resolution = float(10.0 ** -int(f.precision))
        self.dtype = d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype, as PyTorch's `torch.iinfo`: bits, min, max and dtype (its name)."""

    def __init__(self, type) -> None:
        d = dt.as_dtype(type)
        if d.is_floating_point or d is dt.bool:
            raise TypeError(f"ember.iinfo() requires an integer input type, got {d}. Use ember.finfo to handle "
                            f"float types")
        i = np.iinfo(d.np)
        self.bits, self.min, self.max, self.dtype = d.itemsize * 8, int(i.min), int(i.max), d.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# ---------------------------------------------------------------------- promotion
def promote_types(type1, type2) -> dt.dtype:
    """The smallest dtype to which both dtypes convert without leaving their category (bool < integer < float),
    as PyTorch's: int8 with uint8 is int16, float16 with bfloat16 is float32, an integer with a float the float."""
    return dt.FROM_NP[dt.promote_types(dt.np_dtype(type1), dt.np_dtype(type2))]


def result_type(tensor1, tensor2) -> dt.dtype:
    """The dtype of an arithmetic op on the two operands (tensors or Python numbers), as PyTorch's: a tensor with
    dimensions outranks a 0-d tensor, which outranks a Python number, unless the lower one is of a higher category."""
    ops = []
    for name, v in (("tensor1", tensor1), ("tensor2", tensor2)):
        if isinstance(v, Tensor):
            ops.append(np.empty((1,) * builtins.min(v.ndim, 1), v._data.dtype))
        elif isinstance(v, (builtins.bool, builtins.int, builtins.float)):
            ops.append(v)
        else:
            raise TypeError(f"result_type(): argument '{name}' must be a Tensor or a Number, not {type_name(v)}")
    return dt.FROM_NP[dt.result_type(*ops)]


def can_cast(from_, to) -> builtins.bool:
    """Whether a cast is allowed by PyTorch's casting rule for in-place and `out=` results: never to a lower
    category (float to integer, integer to bool); within a category any width."""
    return dt._category(dt.np_dtype(from_)) <= dt._category(dt.np_dtype(to))


# ---------------------------------------------------------------------- type predicates
def is_tensor(obj) -> builtins.bool:
    """True when obj is an ember Tensor (Parameters included)."""
    return isinstance(obj, Tensor)


def is_storage(obj) -> builtins.bool:
    """Always False: ember has no storage objects (a tensor's memory is its NumPy array; `docs/coverage.md`)."""
    return False


def numel(input: Tensor) -> builtins.int:
    """The number of elements of a tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"numel(): argument 'input' (position 1) must be Tensor, not {type_name(input)}")
    return input.numel()


# ---------------------------------------------------------------------- threads
def _pools():
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl


_LIMITS = None  # the threadpoolctl limiter of the last set_num_threads (kept alive: it holds the setting)
_INTEROP_WARNED = False


def get_num_threads() -> builtins.int:
    """The threads an op may use: the size of the BLAS/OpenMP pools NumPy (and numba, if loaded) run on, read
    through threadpoolctl; without threadpoolctl, OMP_NUM_THREADS or the CPU count."""
    tp = _pools()
    if tp is not None:
        sizes = [p["num_threads"] for p in tp.threadpool_info()]
        if sizes:
            return builtins.max(sizes)
    env = os.environ.get("OMP_NUM_THREADS", "")
    return builtins.int(env) if env.isdigit() and builtins.int(env) > 0 else (os.cpu_count() or 1)


def set_num_threads(n: builtins.int) -> None:
    """Limit every thread pool ember's ops run on — OpenBLAS/MKL (matmul, linalg), OpenMP, and numba's when
    numba is loaded — to `n` threads, through threadpoolctl (`pip install threadpoolctl`)."""
    global _LIMITS
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int) or n <= 0:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n!r}")
    tp = _pools()
    if tp is None:
        raise RuntimeError("ember.set_num_threads needs the threadpoolctl package to reach NumPy's BLAS and OpenMP "
                           "thread pools: pip install threadpoolctl (or set OMP_NUM_THREADS before starting Python)")
    try:  # numba first: setting its threads may load its threading layer (an OpenMP runtime) for the limit below
        import sys
        numba = sys.modules.get("numba")
        if numba is not None:
            numba.set_num_threads(builtins.min(n, numba.config.NUMBA_NUM_THREADS))
    except Exception:  # noqa: BLE001 - numba's pool may be unavailable (no threading layer): BLAS is limited anyway
        pass
    _LIMITS = tp.threadpool_limits(limits=n)


def get_num_interop_threads() -> builtins.int:
    """1: ember runs one op at a time (it has no pool of threads running independent ops side by side)."""
    return 1


def set_num_interop_threads(n: builtins.int) -> None:
    """Accepted for PyTorch scripts; ember has no inter-op pool (`get_num_interop_threads()` is 1), so a value
    other than 1 warns that it changes nothing."""
    global _INTEROP_WARNED
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int) or n <= 0:
        raise RuntimeError(f"set_num_interop_threads expects a positive integer, got {n!r}")
    if n != 1 and not _INTEROP_WARNED:
        _INTEROP_WARNED = True
        warnings.warn("ember.set_num_interop_threads: ember runs one op at a time and has no inter-op thread pool, "
                      "so this setting changes nothing; set_num_threads sets the threads each op uses",
                      UserWarning, stacklevel=2)


# ---------------------------------------------------------------------- determinism
class _Determinism:
    enabled = False
    warn_only = False


DETERMINISM = _Determinism()


def use_deterministic_algorithms(mode: builtins.bool, *, warn_only: builtins.bool = False) -> None:
    """Require deterministic algorithms, as PyTorch's switch. ember's CPU ops are all deterministic (NumPy
    computes the same result from the same inputs); on CUDA the ops that accumulate with atomic adds (the
    scatter/index-add family and their gradients: embedding, gather, indexing) then raise RuntimeError, or warn
    with warn_only=True, as PyTorch's do (`check_deterministic`)."""
    if not isinstance(mode, builtins.bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type_name(mode)}")
    DETERMINISM.enabled, DETERMINISM.warn_only = mode, builtins.bool(warn_only) and mode


def are_deterministic_algorithms_enabled() -> builtins.bool:
    return DETERMINISM.enabled


def is_deterministic_algorithms_warn_only_enabled() -> builtins.bool:
    return DETERMINISM.warn_only


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default": off, 1/"warn": warn on a nondeterministic op, 2/"error": raise (PyTorch's levels)."""
    levels = {"default": 0, "warn": 1, "error": 2}
    level = levels.get(debug_mode, debug_mode)
    if level not in (0, 1, 2):
        raise RuntimeError(f"invalid debug mode {debug_mode!r}: expected 0, 1, 2, 'default', 'warn' or 'error'")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> builtins.int:
    return 0 if not DETERMINISM.enabled else 1 if DETERMINISM.warn_only else 2


def check_deterministic(op: str) -> None:
    """Called by a CUDA op that accumulates with atomic adds (its result's rounding depends on the order the
    GPU's threads run in): under `use_deterministic_algorithms(True)` raise as PyTorch does, or warn."""
    if DETERMINISM.enabled:
        msg = (f"{op} on CUDA does not have a deterministic implementation (it accumulates with atomic adds), but "
               f"you set 'ember.use_deterministic_algorithms(True)'. Run it on the CPU, or pass warn_only=True")
        if DETERMINISM.warn_only:
            warnings.warn(msg, UserWarning, stacklevel=3)
        else:
            raise RuntimeError(msg)


# ---------------------------------------------------------------------- other global switches
_MATMUL_PRECISION = ["highest"]
_WARN_ALWAYS = [False]


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's switch that lets float32 matmuls use TF32 or bfloat16 on hardware that has them ("high",
    "medium"). ember's CPU matmuls are NumPy's BLAS in float32 and its CUDA ones CuPy's at CuPy's defaults, so
    every setting computes as "highest"; the setting is kept, as PyTorch keeps it on a CPU, and read back."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision(): invalid precision {precision!r}; expected 'highest', "
                           f"'high' or 'medium'")
    _MATMUL_PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]


def set_flush_denormal(mode: builtins.bool) -> builtins.bool:
    """Returns False: ember cannot switch the CPU's flush-to-zero mode (NumPy does not expose it), which is
    PyTorch's answer on a CPU that does not support it."""
    return False


def set_warn_always(b: builtins.bool) -> None:
    """PyTorch's switch to repeat its warn-once warnings; ember's warn-once messages then warn every time."""
    _WARN_ALWAYS[0] = builtins.bool(b)


def is_warn_always_enabled() -> builtins.bool:
    return _WARN_ALWAYS[0]


def typename(obj) -> str:
    """The type of obj as a string: PyTorch's legacy name for a tensor ('torch.FloatTensor'), else the
    qualified class name."""
    if isinstance(obj, Tensor):
        return obj.type()
    t = obj if isinstance(obj, type) else type(obj)
    mod = t.__module__
    return t.__qualname__ if mod in ("builtins", None) else f"{mod}.{t.__qualname__}"


def set_anomaly_enabled(enabled: builtins.bool, check_nan: builtins.bool = True) -> None:
    """Turn anomaly detection (`ember.autograd.detect_anomaly`) on or off for the rest of the program."""
    from .autograd.grad_mode import MODE
    MODE.anomaly = builtins.bool(enabled) and builtins.bool(check_nan)


def is_anomaly_enabled() -> builtins.bool:
    from .autograd.grad_mode import MODE
    return builtins.bool(MODE.anomaly)


is_anomaly_check_nan_enabled = is_anomaly_enabled


def detach(input: Tensor) -> Tensor:
    """`input.detach()`: a tensor sharing input's data, outside the graph."""
    if not isinstance(input, Tensor):
        raise TypeError(f"detach(): argument 'input' (position 1) must be Tensor, not {type_name(input)}")
    return input.detach()


# the constants `torch` exports
pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None
