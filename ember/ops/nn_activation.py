"""Activation functions, softmax / log-softmax and dropout (re-exported by `ember.nn.functional`).

Each op computes its forward on raw arrays and writes its backward with ember ops on the
saved input (or output), so second derivatives come for free. Softmax and log-softmax have
fused backward ops (`SoftmaxGrad`, `LogSoftmaxGrad`) that are Ops themselves, so they
differentiate again. Dropout keeps its scaled mask as a constant: its backward is one multiply.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _creation, backend
from .._tensor import Tensor, normalize_dim, make
from ..autograd.function import Op, dispatch
from .arithmetic import where
from .inplace import unary_in_place
from .reduce import sum as _sum
from .special import erf_array
from .unary import erf, sigmoid, tanh
from .unary import relu as _relu
from .registry import Exports
from .._capture import traced
from .. import _dtype as dt

_new = object.__new__

__all__ = ["relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "gelu", "silu",
           "mish", "softplus", "hardtanh", "hardtanh_", "sigmoid", "tanh", "softmax", "log_softmax", "logsigmoid",
           "dropout", "dropout2d"]

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
# SELU's constants (Klambauer et al., 2017)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# ---------------------------------------------------------------------- argument checks
def _check(x, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


def _float_input(x, op: str) -> Tensor:
    """Smooth activations are defined on floating tensors only (PyTorch raises NotImplementedError too)."""
    x = _check(x, op)
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} tensors; convert the input to a floating "
                                  f"dtype first (e.g. x.float())")
    return x


def _run(cls, x: Tensor, inplace: bool, op: str, *consts) -> Tensor:
    """Apply the Op, or its in-place form (written back into x, x taking the result's place in the graph)."""
    if inplace:
        return unary_in_place(lambda t: cls.apply(t, *consts), op, cls)(x)
    if not consts:
        return dispatch(_new(cls), (x,), (x._data,))
    return cls.apply(x, *consts)


# ---------------------------------------------------------------------- piecewise-linear activations
class Hardtanh(Op):
    """z = clip(x, lo, hi);  dz/dx = 0 where x <= lo or x >= hi, else 1 (strict, and NaN passes, as PyTorch)."""

    def forward(self, x, lo, hi):
        z = x.clip(lo, hi)
        return z if z.dtype == x.dtype else z.astype(x.dtype)  # an integer input stays integer

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, lo, hi):
        return gz * ~((x <= lo) | (x >= hi)), None, None


class LeakyRelu(Op):
    """z = x if x > 0 else a·x;  dz/dx = 1 if x > 0 else a."""

    def forward(self, x, slope):
        return backend.array_module(x).where(x > 0, x, x * slope)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, slope):
        return where(x > 0, gz, gz * slope), None


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """min(max(x, min_val), max_val)."""
    x = _check(input, "hardtanh")
    if min_val > max_val:
        raise ValueError(f"hardtanh(): min_val cannot be greater than max_val (got min_val={min_val}, max_val={max_val})")
    return _run(Hardtanh, x, inplace, "hardtanh", min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return _run(Hardtanh, _check(input, "relu6"), inplace, "relu6", 0, 6)


def relu_(input: Tensor) -> Tensor:
    return _check(input, "relu_").relu_()


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return _check(input, "relu").relu_() if inplace else _relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x if x > 0 else negative_slope·x."""
    return _run(LeakyRelu, _float_input(input, "leaky_relu"), inplace, "leaky_relu", negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


# ---------------------------------------------------------------------- exponential-linear family
class Elu(Op):
    """z = s·x if x > 0 else s·α·(e^(c·x) - 1);  dz/dx = s if x > 0 else s·α·c·e^(c·x).
    ELU: s = c = 1; SELU: fixed α and s."""

    def forward(self, x, alpha, scale, input_scale):
        neg = np.expm1(np.minimum(x, 0) * input_scale)  # min(x, 0): no overflow where the branch is unused
        neg *= alpha * scale
        return backend.array_module(x).where(x > 0, x * scale if scale != 1 else x, neg)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, alpha, scale, input_scale):
        neg = (x.clamp(max=0) * input_scale).exp() * (alpha * scale * input_scale)
        return where(x > 0, gz * scale if scale != 1 else gz, gz * neg), None, None, None


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha·(e^x - 1)."""
    return _run(Elu, _float_input(input, "elu"), inplace, "elu", alpha, 1.0, 1.0)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale·(x if x > 0 else alpha·(e^x - 1)), with SELU's fixed alpha ≈ 1.6733 and scale ≈ 1.0507."""
    return _run(Elu, _float_input(input, "selu"), inplace, "selu", _SELU_ALPHA, _SELU_SCALE, 1.0)


# ---------------------------------------------------------------------- smooth activations
class GeluErf(Op):
    """z = x·Φ(x), Φ the standard normal CDF;  dz/dx = Φ(x) + x·φ(x)."""

    def forward(self, x):
        z = erf_array(x * _SQRT1_2)
        z += 1
        z *= x
        z *= 0.5
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        cdf = (erf(x * _SQRT1_2) + 1.0) * 0.5
        pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
        return gz * (cdf + x * pdf)


class GeluTanh(Op):
    """z = x/2·(1 + tanh u), u = k(x + c·x³);  dz/dx = (1 + tanh u)/2 + x/2·(1 - tanh² u)·k(1 + 3c·x²)."""

    def forward(self, x):
        z = np.tanh((x + _GELU_C * x * x * x) * _GELU_K)
        z += 1
        z *= x
        z *= 0.5
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        x2 = x * x
        t = tanh((x + x2 * x * _GELU_C) * _GELU_K)
        return gz * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x2 * (3 * _GELU_C) + 1.0) * _GELU_K))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x·Φ(x) (approximate='none'), or its tanh approximation (approximate='tanh')."""
    x = _float_input(input, "gelu")
    if approximate == "none":
        return dispatch(_new(GeluErf), (x,), (x._data,))
    if approximate == "tanh":
        return dispatch(_new(GeluTanh), (x,), (x._data,))
    raise RuntimeError(f"gelu(): approximate argument must be either 'none' or 'tanh', got {approximate!r}")


def _sigmoid_array(x):
    """1/(1 + e^-x) as (1 + tanh(x/2))/2: never overflows."""
    s = np.tanh(x * 0.5)
    s += 1
    s *= 0.5
    return s


class Silu(Op):
    """z = x·σ(x);  dz/dx = σ(x)·(1 + x·(1 - σ(x)))."""

    def forward(self, x):
        return x * _sigmoid_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        s = sigmoid(x)
        return gz * (s * (x * (1.0 - s) + 1.0))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x·sigmoid(x) (also called swish)."""
    return _run(Silu, _float_input(input, "silu"), inplace, "silu")


def _softplus_array(x):
    """ln(1 + e^x) without overflow (logaddexp(x, 0) = max(x, 0) + ln(1 + e^-|x|))."""
    return np.logaddexp(x, x.dtype.type(0))


class Mish(Op):
    """z = x·tanh(softplus(x));  dz/dx = t + x·(1 - t²)·σ(x), t = tanh(softplus(x))."""

    def forward(self, x):
        return x * np.tanh(_softplus_array(x))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        t = tanh(dispatch(_new(Softplus1), (x,), (x._data,)))
        return gz * (t + x * (1.0 - t * t) * sigmoid(x))


class Softplus1(Op):
    """z = ln(1 + e^x);  dz/dx = σ(x)."""

    def forward(self, x):
        return _softplus_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * sigmoid(x)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·tanh(softplus(x))."""
    return _run(Mish, _float_input(input, "mish"), inplace, "mish")


class Softplus(Op):
    """z = ln(1 + e^(βx))/β, or x where βx > threshold;  dz/dx = σ(βx), or 1 there."""

    def forward(self, x, beta, threshold):
        bx = x * beta
        return backend.array_module(x).where(bx > threshold, x, _softplus_array(bx) / beta if beta != 1 else _softplus_array(bx))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, beta, threshold):
        bx = x * beta if beta != 1 else x
        return where(bx > threshold, gz, gz * sigmoid(bx)), None, None


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """ln(1 + e^(beta·x))/beta; linear (x) where beta·x > threshold, for numerical stability."""
    return Softplus.apply(_float_input(input, "softplus"), beta, threshold)


class LogSigmoid(Op):
    """z = ln σ(x) = min(x, 0) - ln(1 + e^-|x|) (stable for any x);  dz/dx = σ(-x)."""

    def forward(self, x):
        z = np.minimum(x, 0)
        z -= np.log1p(np.exp(-np.abs(x)))
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * sigmoid(-x)


def logsigmoid(input: Tensor) -> Tensor:
    """ln(1/(1 + e^-x)), finite for any finite x."""
    x = _float_input(input, "logsigmoid")
    return dispatch(_new(LogSigmoid), (x,), (x._data,))


# ---------------------------------------------------------------------- softmax and log-softmax
def _vector(fn):
    """Run a forward over `axis` on a 0-d array as on a 1-element vector (NumPy has no axis 0 there)."""
    def forward(self, *arrays):
        *arrays, axis = arrays
        if arrays[0].ndim == 0:
            return fn(self, *[a.reshape(1) for a in arrays], 0).reshape(())
        return fn(self, *arrays, axis)
    forward.__doc__ = fn.__doc__
    return forward


class _MaxShifted(Op):
    """Softmax and LogSoftmax: forward shifts x by its max m along `axis` (so nothing overflows) and `_finish`es
    that in place; backward reads only the saved output."""

    saves_inputs, saves_output = False, True

    @_vector
    def forward(self, x, axis):
        self.axis = axis
        if x.size == 0:
            return x.copy()
        return self._finish(x - x.max(axis=axis, keepdims=True), axis)


class Softmax(_MaxShifted):
    """y = e^(x - m) / Σ e^(x - m) along `axis` (m = max, so nothing overflows);  dx = y·(g - Σ g·y)."""

    @staticmethod
    def _finish(y, axis):
        np.exp(y, out=y)
        y /= y.sum(axis=axis, keepdims=True)
        return y

    def jvp(self, t, x, axis):
        """y' = y·(x' - Σ x'·y): the map of backward (softmax's Jacobian is symmetric)."""
        return SoftmaxGrad.apply(t[0], self.result(), self.axis)

    def backward(self, gz):
        return SoftmaxGrad.apply(gz, self.output(), self.axis)


class SoftmaxGrad(Op):
    """Softmax's backward as one op: r = y·(g - s), s = Σ g·y along `axis`.
    dr/dg·u = y·(u - Σ u·y) (the same map: the Jacobian is symmetric);  dr/dy·u = u·(g - s) - g·Σ u·y."""

    @_vector
    def forward(self, g, y, axis):
        t = g * y
        if t.size:
            t -= y * t.sum(axis=axis, keepdims=True)
        return t

    def jvp(self, t, g, y, axis):
        """r' = y·(g' - Σ g'·y) + y'·(g - s) - y·Σ g·y'."""
        r = SoftmaxGrad.apply(t[0], y, axis) if isinstance(t[0], Tensor) else 0
        if isinstance(t[1], Tensor):
            r = r + t[1] * (g - _sum(g * y, axis, keepdim=True)) - y * _sum(g * t[1], axis, keepdim=True)
        return r

    def backward(self, gr, g, y, axis):
        gg = SoftmaxGrad.apply(gr, y, axis) if self.needs(0) else None
        gy = None
        if self.needs(1):
            s = _sum(g * y, axis, keepdim=True)
            gy = gr * (g - s) - g * _sum(gr * y, axis, keepdim=True)
        return gg, gy, None


class LogSoftmax(_MaxShifted):
    """y = x - m - ln Σ e^(x - m) along `axis` (m = max);  dx = g - e^y·Σ g."""

    @staticmethod
    def _finish(y, axis):
        y -= np.log(np.exp(y).sum(axis=axis, keepdims=True))
        return y

    def jvp(self, t, x, axis):
        """y' = x' - Σ x'·e^y."""
        return t[0] - _sum(t[0] * self.result().exp(), self.axis, keepdim=True)

    def backward(self, gz):
        return LogSoftmaxGrad.apply(gz, self.output(), self.axis)


class LogSoftmaxGrad(Op):
    """Log-softmax's backward as one op: r = g - e^y·Σ g along `axis`.
    dr/dg·u = u - Σ u·e^y;  dr/dy·u = -u·e^y·Σ g."""

    @_vector
    def forward(self, g, y, axis):
        r = np.exp(y)
        r *= g.sum(axis=axis, keepdims=True)
        np.subtract(g, r, out=r)
        return r

    def jvp(self, t, g, y, axis):
        """r' = g' - e^y·Σ g' - y'·e^y·Σ g."""
        p = y.exp()
        r = t[0] - p * _sum(t[0], axis, keepdim=True) if isinstance(t[0], Tensor) else 0
        return r - t[1] * p * _sum(g, axis, keepdim=True) if isinstance(t[1], Tensor) else r

    def backward(self, gr, g, y, axis):
        p = y.exp()
        gg = gr - _sum(gr * p, axis, keepdim=True) if self.needs(0) else None
        gy = -(gr * p) * _sum(g, axis, keepdim=True) if self.needs(1) else None
        return gg, gy, None


def _softmax_args(input, dim, dtype, op: str, stacklevel: int) -> tuple:
    x = _check(input, op)
    if dim is None:
        nd = x._data.ndim
        dim = 0 if nd in (0, 1, 3) else 1  # PyTorch's legacy implicit choice
        warnings.warn(f"{op}(): implicit dimension choice is deprecated (dim={dim} was chosen for a {nd}-d input); "
                      f"pass dim=X explicitly.", UserWarning, stacklevel=stacklevel)
    axis = normalize_dim(dim, x._data.ndim, op)  # the dim is checked before the dtype, as in PyTorch
    if dtype is not None:
        x = x.to(dtype)
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} tensors; convert the input to a floating "
                                  f"dtype first, or pass dtype=ember.float32")
    return x, axis


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """e^x / Σ e^x along `dim` (computed with the max subtracted: finite for any finite input).
    `dtype` casts the input first. dim=None picks a dimension as PyTorch's deprecated rule does, with a warning."""
    x, d = _softmax_args(input, dim, dtype, "softmax", _stacklevel)
    return Softmax.apply(x, d)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """x - ln Σ e^x along `dim` (stable log-sum-exp). `dtype` casts the input first; dim=None as in softmax."""
    x, d = _softmax_args(input, dim, dtype, "log_softmax", _stacklevel)
    return LogSoftmax.apply(x, d)


# ---------------------------------------------------------------------- dropout
class Dropout(Op):
    """z = x·mask, mask = keep/(1 - p) (a constant, possibly broadcast over features);  dz/dx = gz·mask."""

    saves_inputs = False

    def forward(self, x, mask):
        self.mask = mask
        return x * mask

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        """dx = gz·mask (the mask a constant: differentiable in gz)."""
        return gz * make(self.mask), None

    def fast_backward(self, gz):
        """`backward` on the arrays: it skips the mask's Tensor and the Mul op, ~0.6 µs per call: 23% of
        this backward at ResMLP's (128, 50), 7% at (128, 512)."""
        r = gz._data * self.mask
        return make(np.asarray(r) if r.__class__ is not np.ndarray and isinstance(r, np.generic) else r), None


def check_dropout_p(p, op: str) -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}(): dropout probability p has to be between 0 and 1, but got p={p!r}")
    return float(p)


@traced
def dropout_mask(shape: tuple, p: float, dtype: np.dtype, device: backend.device = backend.CPU):
    """keep/(1 - p) with keep ~ Bernoulli(1 - p), drawn on `device` from its default generator (a mask
    drawn on the host would cost a transfer per step)."""
    if p == 1.0:
        return backend.module_for(device).zeros(shape, dtype)
    r = _creation.generator_for(device).random(shape, dtype)
    return np.multiply(r >= p, 1.0 / (1.0 - p), dtype=dtype)


@traced
def _mask_for(x: Tensor, p: float, keep: int):
    """`dropout_mask` for x: over its first `keep` dims, broadcast over the rest. (Taking x, not its shape,
    lets a compiled program draw the mask of each call's batch size.)"""
    xd = x._data
    shape = xd.shape[:keep] + (1,) * (xd.ndim - keep)
    return dropout_mask(shape, p, xd.dtype, backend.CPU if xd.__class__ is np.ndarray else backend.device_of(xd))


def _dropout(x: Tensor, p: float, training: bool, inplace: bool, keep: int, op: str) -> Tensor:
    if not training:
        return x
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"{op}(): dropout in training mode needs a floating tensor (the kept values are scaled by "
                           f"1/(1-p)), got {x.dtype}; convert the input with x.float()")
    mask = _mask_for(x, p, keep)
    if inplace:
        return unary_in_place(lambda t: Dropout.apply(t, mask), op, Dropout)(x)
    return Dropout.apply(x, mask)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) in training; the identity otherwise."""
    x = _check(input, "dropout")
    p = check_dropout_p(p, "dropout")
    return _dropout(x, p, training, inplace, x._data.ndim, "dropout")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels (input[n, c]) with probability p and scale the rest by 1/(1-p), in training.

    As in PyTorch, a 3-d input is read as (N, C, L) (channel-wise 1-d dropout), with a warning."""
    x = _check(input, "dropout2d")
    p = check_dropout_p(p, "dropout2d")
    nd = x._data.ndim
    if nd not in (3, 4):
        warnings.warn(f"dropout2d(): received a {nd}-d input; dropout2d is meant for 3-d or 4-d inputs (channel-wise "
                      f"dropout of 2-d feature maps), other ranks are deprecated. Use dropout() instead.",
                      UserWarning, stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d(): received a 3-d input, read as (N, C, L) with channel-wise 1-d dropout over C "
                      "(PyTorch's behaviour); use dropout1d for that, or add a batch dimension for an unbatched (C, H, W).",
                      UserWarning, stacklevel=2)
    if nd < 2 and training:
        raise RuntimeError(f"dropout2d(): feature dropout requires at least 2 dimensions in the input, got shape "
                           f"{list(x.shape)}")
    return _dropout(x, p, training, inplace, 2, "dropout2d")


def _softmax_method(self: Tensor, dim: int, dtype=None) -> Tensor:
    """Tensor.softmax(dim): softmax along dim (as torch.softmax)."""
    return softmax(self, dim, dtype=dtype)


def _log_softmax_method(self: Tensor, dim: int, dtype=None) -> Tensor:
    """Tensor.log_softmax(dim): log-softmax along dim (as torch.log_softmax)."""
    return log_softmax(self, dim, dtype=dtype)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
# (the rest of this module is ember.nn.functional's, exported there)
EXPORTS = Exports(
    globals(),
    functions=("softmax", "log_softmax"),
    aliases={"softmax": _softmax_method, "log_softmax": _log_softmax_method})
