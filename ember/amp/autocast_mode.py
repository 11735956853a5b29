"""Autocast (`ember.autocast`, as `torch.autocast`): regions of a program where each op runs in the precision its
op family needs.

Inside `with ember.autocast("cpu"):` (bfloat16 by default; `"cuda"`: float16) every op applied to tensors of that
device is looked up, by its op class, in the device's policy table below (PyTorch's autocast op lists mapped onto
ember's ops):

- LOWER (matmul, linear, convolutions, attention, ...): its float inputs are cast to the autocast dtype, so the op
  runs and returns in 16 bits;
- FP32 (losses, linear algebra; on CUDA also softmax, sum, exp/log/pow, layer_norm, ...): its 16-bit float inputs
  are cast to float32, where range or accuracy matters;
- PROMOTE (cat, stack, ...): its float inputs are cast to the widest of their types (float32 if any is);
- any other op runs in its inputs' dtypes, as outside a region.

float64 tensors and tensors of another device are never cast. A cast is a recorded op (`Cast`), so gradients flow
back through it: a float32 parameter used by a bfloat16 matmul receives a float32 gradient. With `cache_enabled`,
the cast of a parameter (a float32 leaf that requires grad) to the autocast dtype is kept until the outermost region
exits, so a weight used by several ops is cast once.

The seam: `autograd.function.dispatch` calls `cast_inputs` for every op application while `MODE.autocast` is not
None, which is while autocast is enabled for some device in the thread (`MODE.autocast` is then this thread's
`_State`). The state is thread-local, as in PyTorch: a new thread starts with autocast off.
"""
from __future__ import annotations

import collections.abc
import functools
import threading
import warnings
from typing import Callable

import numpy as np

from .. import _capture
from .. import _dtype as dt
from .._tensor import TENSOR_TYPES, Tensor
from ..autograd.grad_mode import MODE
from ..ops.arithmetic import Atan2, Div, Pow
from ..ops.elementwise_ext import Acos, Asin, Cosh, Erfinv, Quantile, Sinh
from ..ops.indexing import IndexPut
from ..ops.indexing_ext import IndexCopy
from ..ops.linalg import AddMatmul, Einsum, Matmul, Tensordot
from ..ops.linalg_ext import (QR, SVD, CdistMM, Cholesky, CholeskySolve, Cross, Eig, Eigh, Eigvals, EigvalsH, Inv,
                              Lstsq, LUFactor, PairDist, Pinv, Solve, SolveTriangular, SVDVals)
from ..ops.nn_activation import LogSoftmax, Softmax, Softplus
from ..ops.nn_attention import Attention
from ..ops.nn_conv import Conv, ConvTranspose
from ..ops.nn_interpolate import Resample
from ..ops.nn_loss import BinaryCrossEntropy, CrossEntropy
from ..ops.nn_misc import Linear
from ..ops.nn_more import CTCLoss, Prelu
from ..ops.nn_norm import Normalize
from ..ops.nn_rnn import RNNLayer
from ..ops.nn_spatial import Conv3, Conv3T, WindowMax, WindowSum
from ..ops.reduce import Cumprod, Cumsum, LogSumExp, Norm, Prod, Sum
from ..ops.shape import Cat, Stack
from ..ops.unary import Cast, Exp, Expm1, Log, Log1p, Log2, Log10, Reciprocal, Rsqrt, Tan

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]

LOWER, FP32, PROMOTE = "lower", "fp32", "promote"
DEVICES = ("cpu", "cuda")
_F32 = np.dtype(np.float32)
_ELIGIBLE = frozenset(d.np for d in (dt.float16, dt.bfloat16, dt.float32) if d.np is not None)  # float64: never cast


# ---------------------------------------------------------------------- the policies
# A rule is a policy, or a function (node, inputs, arrays) -> policy or None for an op class that serves several of
# PyTorch's ops of which only some are listed.
def _lstm_layer(node, inputs, arrays):
    """CPU: PyTorch autocasts its LSTM layer (mkldnn_rnn_layer), not GRU or the cells."""
    return LOWER if arrays[8] == "LSTM" else None


def _pool3d(node, inputs, arrays):
    """CPU: max_pool3d, adaptive_max_pool3d, fractional_max_pool3d and avg_pool3d run in float32 (not the 1-d
    poolings that share their window ops)."""
    return FP32 if arrays[0].ndim == 5 else None


def _layer_group_norm(node, inputs, arrays):
    """CUDA: layer_norm and group_norm run in float32; batch_norm (whose affine parameters `Normalize` reshapes to
    a per-channel view) is not listed. (`cast_args(Normalize, input, weight, bias)` from layer_norm: float32.)"""
    return FP32 if len(arrays) < 6 or arrays[5] is None else None


def _rdiv(node, inputs, arrays):
    """CUDA: `number / tensor` (__rtruediv__) runs in float32; tensor / tensor and tensor / number do not."""
    return FP32 if inputs[0].__class__ not in TENSOR_TYPES else None


def _bce_banned(node, inputs, arrays):
    raise RuntimeError(
        "ember.nn.functional.binary_cross_entropy and ember.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using ember.nn.functional.binary_cross_entropy_with_logits\n"
        "or ember.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast.")


# PyTorch's AutocastCPU lists (torch 2.13): "CPU Ops that can autocast to bfloat16 / to float32", promote.
# Matmul also serves mv, dot and vdot, which PyTorch leaves in their inputs' dtype on the CPU.
CPU_POLICY: dict = {
    # conv1d/2d/3d, conv_transpose1d/2d/3d, bmm, mm, matmul, baddbmm, addmm, addbmm, linear, prelu,
    # scaled_dot_product_attention, the LSTM layer; einsum and tensordot run through bmm/mm
    Matmul: LOWER, AddMatmul: LOWER, Linear: LOWER, Einsum: LOWER, Tensordot: LOWER, Conv: LOWER,
    ConvTranspose: LOWER, Conv3: LOWER, Conv3T: LOWER, Prelu: LOWER, Attention: LOWER, RNNLayer: _lstm_layer,
    # prod, quantile, cdist, the decompositions and solvers, cross_entropy, binary_cross_entropy, ctc_loss, 3-d pooling
    Prod: FP32, Quantile: FP32, PairDist: FP32, CdistMM: FP32, Cholesky: FP32, CholeskySolve: FP32, Inv: FP32,
    Pinv: FP32, Solve: FP32, SolveTriangular: FP32, LUFactor: FP32, QR: FP32, SVD: FP32, SVDVals: FP32, Eig: FP32,
    Eigvals: FP32, Eigh: FP32, EigvalsH: FP32, Lstsq: FP32, CrossEntropy: FP32, BinaryCrossEntropy: FP32,
    CTCLoss: FP32, WindowMax: _pool3d, WindowSum: _pool3d,
    Cat: PROMOTE, Stack: PROMOTE, IndexCopy: PROMOTE,
}

# PyTorch's AutocastCUDA lists: "CUDA Ops that can autocast to float16 / to float32", promote, and the one banned op.
CUDA_POLICY: dict = {
    # matmul, mm, mv, bmm, addmm, baddbmm, addbmm, linear, einsum, conv*, conv_transpose*, prelu, the RNN cells and
    # layers (cuDNN), scaled_dot_product_attention
    Matmul: LOWER, AddMatmul: LOWER, Linear: LOWER, Einsum: LOWER, Conv: LOWER, ConvTranspose: LOWER, Conv3: LOWER,
    Conv3T: LOWER, Prelu: LOWER, Attention: LOWER, RNNLayer: LOWER,
    # acos, asin, cosh, erfinv, exp, expm1, log, log10, log2, log1p, reciprocal, rsqrt, sinh, tan, pow, __rdiv__,
    # softplus, layer_norm, group_norm, norm, cdist, pdist, logsumexp, sum, prod, cumsum, cumprod, softmax,
    # log_softmax, cross_entropy (log_softmax + nll_loss), the upsampling modes
    Acos: FP32, Asin: FP32, Cosh: FP32, Erfinv: FP32, Exp: FP32, Expm1: FP32, Log: FP32, Log10: FP32, Log2: FP32,
    Log1p: FP32, Reciprocal: FP32, Rsqrt: FP32, Sinh: FP32, Tan: FP32, Pow: FP32, Div: _rdiv, Softplus: FP32,
    Normalize: _layer_group_norm, Norm: FP32, PairDist: FP32, CdistMM: FP32, LogSumExp: FP32, Sum: FP32,
    Prod: FP32, Cumsum: FP32, Cumprod: FP32, Softmax: FP32, LogSoftmax: FP32, CrossEntropy: FP32, Resample: FP32,
    BinaryCrossEntropy: _bce_banned,
    # atan2, cross, tensordot, index_put (addcmul/addcdiv/bilinear: their ember ops promote by themselves)
    Atan2: PROMOTE, Cross: PROMOTE, Tensordot: PROMOTE, IndexPut: PROMOTE,
}

POLICIES = {"cpu": CPU_POLICY, "cuda": CUDA_POLICY}
_LISTED = frozenset(CPU_POLICY) | frozenset(CUDA_POLICY)  # (most ops are in neither: one set test lets them pass)
_DEFAULT_DTYPE = {"cpu": dt.bfloat16, "cuda": dt.float16}
_SUPPORTED = (dt.bfloat16, dt.float16)  # the dtypes a CPU region may use (CUDA checks bfloat16 support only)


# ---------------------------------------------------------------------- this thread's state
class _State(threading.local):
    """This thread's autocast settings: per device whether it is enabled and its dtype, the cache switch, the
    nesting depth of `autocast` regions and the cached casts."""

    def __init__(self) -> None:
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = dict(_DEFAULT_DTYPE)
        self.low = {d: t.np for d, t in _DEFAULT_DTYPE.items()}  # the NumPy dtype of each device's autocast dtype
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}  # (id(parameter), dtype) -> (parameter, its version then, its cast)


_STATE = _State()


def _refresh() -> None:
    """Point `dispatch` at the state while some device has autocast enabled, else take autocast off its path."""
    s = _STATE
    MODE.autocast = s if (s.enabled["cpu"] or s.enabled["cuda"]) else None
    MODE.refresh()


def _device_type(fn: str, device_type) -> str:
    """'cpu' or 'cuda' from a device type string (an index, as in 'cuda:0', is allowed and left out)."""
    if not isinstance(device_type, str):
        raise TypeError(f"{fn}(): argument 'device_type' (position 1) must be str, not {type(device_type).__name__}")
    kind = device_type.split(":")[0]
    if kind not in DEVICES:
        raise RuntimeError(f"{fn}(): unsupported autocast device_type '{device_type}'; ember autocasts on 'cpu' and "
                           f"'cuda'")
    return kind


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can be used on `device_type` ('cpu' and 'cuda' in ember)."""
    return isinstance(device_type, str) and device_type.split(":")[0] in DEVICES


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is enabled for `device_type` in this thread. Without an argument: CUDA's (PyTorch's legacy
    meaning of `torch.is_autocast_enabled()`)."""
    return _STATE.enabled["cuda" if device_type is None else _device_type("is_autocast_enabled", device_type)]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Enable or disable autocast for `device_type` in this thread, at once (what `autocast` does on entry and
    restores on exit). `set_autocast_enabled(enabled)`, PyTorch's legacy form, sets CUDA's."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    device_type = _device_type("set_autocast_enabled", device_type)
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position 2) must be bool, not "
                        f"{type(enabled).__name__}")
    _STATE.enabled[device_type] = enabled
    _refresh()


def get_autocast_dtype(device_type: str) -> dt.dtype:
    """The dtype that LOWER ops use under autocast on `device_type` (default: bfloat16 on 'cpu', float16 on 'cuda')."""
    return _STATE.dtype[_device_type("get_autocast_dtype", device_type)]


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype of `device_type`'s autocast in this thread (what `autocast(dtype=...)` does on entry)."""
    device_type = _device_type("set_autocast_dtype", device_type)
    d = dt.as_dtype(dtype)
    _STATE.dtype[device_type] = d
    _STATE.low[device_type] = d.np


def is_autocast_cache_enabled() -> bool:
    return _STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Forget the cached casts of parameters (done when the outermost `autocast` region exits)."""
    _STATE.cache.clear()


def autocast_increment_nesting() -> int:
    """Count one more open `autocast` region in this thread; returns the new depth."""
    _STATE.nesting += 1
    return _STATE.nesting


def autocast_decrement_nesting() -> int:
    """Count one region fewer; returns the new depth (0: the outermost region exits)."""
    _STATE.nesting -= 1
    return _STATE.nesting


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"ember.{old} is deprecated. Please use ember.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled() -> bool:
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return _STATE.enabled["cpu"]


def set_autocast_cpu_enabled(enabled: bool) -> None:
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype() -> dt.dtype:
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return _STATE.dtype["cpu"]


def set_autocast_cpu_dtype(dtype) -> None:
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> dt.dtype:
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return _STATE.dtype["cuda"]


def set_autocast_gpu_dtype(dtype) -> None:
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


# ---------------------------------------------------------------------- the region
class autocast:
    """A context manager and decorator that runs its region in mixed precision on `device_type` ('cpu' or 'cuda').

    dtype: the dtype of LOWER ops (default `get_autocast_dtype(device_type)`: bfloat16 on the CPU, float16 on
    CUDA). A CPU region supports bfloat16 and float16; any other dtype warns and disables autocast, as does a CUDA
    region without CUDA; bfloat16 on a CUDA device without it raises. enabled=False makes a region that turns
    autocast off (nested in an enabled one, it restores full precision). cache_enabled (default
    `is_autocast_cache_enabled()`): keep each parameter's cast for the rest of the outermost region.
    Regions nest: each restores on exit what it changed; the cache is cleared when the outermost exits.
    Wrap the forward pass and the loss; call backward outside the region (as in PyTorch)."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}' (ember autocasts "
                               f"on 'cpu' and 'cuda')")
        self.device = device_type
        self._kind = kind = device_type.split(":")[0]
        self.fast_dtype = get_autocast_dtype(kind) if dtype is None else dt.as_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if enabled:
            if kind == "cuda":
                from .. import cuda
                if not cuda.is_available():
                    warnings.warn("CUDA is not available. Disabling autocast.", UserWarning, stacklevel=2)
                    enabled = False
                elif self.fast_dtype is dt.bfloat16 and not cuda.is_bf16_supported():
                    raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to float16.")
            elif self.fast_dtype not in _SUPPORTED:
                warnings.warn(f"In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              f"CPU Autocast only supports dtypes of {', '.join(map(str, _SUPPORTED))} currently.",
                              UserWarning, stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        self._saved: list = []  # what each open `with` of this object changed (a decorated function may recurse)

    def _enter(self) -> tuple:
        s, dev = _STATE, self._kind
        if _capture.ACTIVE is not None:
            # a replay would not pass through `dispatch`, where the casts happen: capture breaks here (ember.lazy
            # computes what is pending, then runs the region's ops at once)
            _capture.refuse("an autocast region")
        saved = (s.enabled[dev], s.dtype[dev], s.cache_enabled)
        s.enabled[dev] = self._enabled
        set_autocast_dtype(dev, self.fast_dtype)
        s.nesting += 1
        s.cache_enabled = self._cache_enabled
        _refresh()
        return saved

    def _exit(self, saved: tuple) -> None:
        s, dev = _STATE, self._kind
        s.nesting -= 1
        if s.nesting == 0:
            s.cache.clear()
        s.enabled[dev] = saved[0]
        set_autocast_dtype(dev, saved[1])
        s.cache_enabled = saved[2]
        _refresh()

    def __enter__(self) -> "autocast":
        self._saved.append(self._enter())
        return self

    def __exit__(self, *exc) -> bool:
        self._exit(self._saved.pop())
        return False

    def __call__(self, func: Callable) -> Callable:
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean to "
                            f"use autocast as a context manager? For example:\n"
                            f"    with ember.autocast(device_type=...):\n"
                            f"        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            saved = self._enter()  # (on the stack, not on self: the function may run in several threads at once)
            try:
                return func(*args, **kwargs)
            finally:
                self._exit(saved)
        return decorate_autocast


# ---------------------------------------------------------------------- the casts (called by dispatch)
def cast_inputs(node, inputs: tuple, arrays) -> tuple:
    """`dispatch`'s autocast step for one op application: the op's inputs and their arrays, with its float inputs
    cast by the policy of its op class on its device (the inputs themselves when there is nothing to cast).
    arrays[i] belongs to inputs[i] for i < len(inputs); later arrays are constants and stay."""
    if node.__class__ not in _LISTED:
        return inputs, arrays
    for a in inputs:
        if a.__class__ in TENSOR_TYPES:
            dev = "cpu" if isinstance(a._data, np.ndarray) else "cuda"
            break
    else:
        return inputs, arrays
    s = MODE.autocast
    if not s.enabled[dev]:
        return inputs, arrays
    rule = POLICIES[dev].get(node.__class__)
    if rule is None:
        return inputs, arrays
    if rule.__class__ is not str:
        rule = rule(node, inputs, arrays)
        if rule is None:
            return inputs, arrays
    low = s.low[dev]
    target = low if rule is LOWER else _F32 if rule is FP32 else _widest(node, dev, low, inputs)
    cached = rule is LOWER and s.cache_enabled and MODE.grad
    new_inputs = new_arrays = None
    for i, t in enumerate(inputs):
        if t.__class__ in TENSOR_TYPES:
            d = t._data
            if d.dtype != target and d.dtype in _ELIGIBLE and _on(d, dev):
                c = _cached_cast(s, t, target) if cached and t._requires_grad else Cast.apply(t, target)
                if new_inputs is None:
                    new_inputs, new_arrays = list(inputs), list(arrays)
                new_inputs[i], new_arrays[i] = c, c._data
    if new_inputs is None:
        return inputs, arrays
    return tuple(new_inputs), tuple(new_arrays)


def cast_args(op: type, *args) -> tuple:
    """`args` as `cast_inputs` would hand them to an application of `op`: for the public function of an op that
    checks its tensors' dtypes before `dispatch` (linear, matmul, conv, ...), so that the checks see the dtypes the
    op will run in (PyTorch autocasts before an op's own checks). Call it while `MODE.autocast` is not None."""
    arrays = tuple([a._data if a.__class__ in TENSOR_TYPES else a for a in args])
    return cast_inputs(object.__new__(op), args, arrays)[0]


def _on(a, dev: str) -> bool:
    return isinstance(a, np.ndarray) is (dev == "cpu")


def _widest(node, dev: str, low: np.dtype, inputs: tuple) -> np.dtype:
    """PROMOTE's target: float32 if an input is, else the autocast dtype (float64 inputs are left out). As in
    PyTorch, another 16-bit float type met before any float32 input is an error."""
    target = low
    for t in inputs:
        if t.__class__ in TENSOR_TYPES and _on(t._data, dev):
            d = t._data.dtype
            if d not in _ELIGIBLE:
                continue
            if d == _F32 or target == _F32:
                target = _F32
            elif d != low:
                name = type(node).__name__.lower()
                raise RuntimeError(f"{name}(): under {dev} autocast to {dt.FROM_NP[low]}, its inputs may be float32 "
                                   f"or {dt.FROM_NP[low]}, not {dt.FROM_NP[d]}: cast them to one dtype first")
    return target


def _cached_cast(s: _State, t: Tensor, target: np.dtype) -> Tensor:
    """The cast of t, a tensor that requires grad, reused within the outermost region when t is a float32 leaf
    (a parameter) that has not changed since (PyTorch's weight cache; ember also checks the version counter, so
    a parameter updated in place inside the region is cast again)."""
    if t._edge is not None or t._base is not None or t._data.dtype != _F32:
        return Cast.apply(t, target)
    key = (id(t), target)
    hit = s.cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._vc:
        return hit[2]
    c = Cast.apply(t, target)
    s.cache[key] = (t, t._vc, c)
    return c


# ---------------------------------------------------------------------- custom Functions
def _cast(value, device_type: str, dtype):
    """value with its float tensors of `device_type` (not float64) cast to dtype, through lists, tuples and dicts."""
    if isinstance(value, Tensor):
        d = value._data
        if d.dtype in _ELIGIBLE and _on(d, device_type):
            return value.to(dtype)
        return value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs=None) -> Callable:
    """Decorate the `forward` of an `ember.autograd.Function`. cast_inputs=None: forward's ops run under the
    autocast state of the caller (and `custom_bwd` gives backward the same state). cast_inputs=dtype: inside an
    enabled region, forward gets its float tensors of `device_type` cast to dtype and runs with autocast off;
    outside one, it runs as it is."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """Decorate the `backward` of an `ember.autograd.Function` whose forward has `custom_fwd`: backward runs with
    the autocast state forward ran with."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
