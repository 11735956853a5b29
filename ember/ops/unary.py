"""Elementwise unary math. Each op reads like its derivative on paper.

Ops that are functions of their result (exp, tanh, sigmoid, sqrt, ...) save the output
and read it in backward through `self.output()`, a Tensor whose grad_fn is the node
itself, so second derivatives stay exact.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, make
from ..autograd.function import Op, dispatch
from .arithmetic import where
from .registry import Exports
from .special import erf_array
from .._capture import traced

_new = object.__new__


def _float(x: Tensor) -> Tensor:
    """Integer and bool inputs of float functions are promoted to the default float dtype, as in PyTorch."""
    return x if dt.is_float(x._data.dtype) else x.to(dt.get_default_dtype())


def _check(x, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


class Neg(Op):
    """z = -x;  dz/dx = -1."""

    saves_inputs = False

    def forward(self, x):
        if x.dtype.kind == "b":  # RuntimeError, as in PyTorch; `kind` is the cheapest robust dtype test
            raise RuntimeError("neg(): negation, the `-` operator, on a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        return -x

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return -gz


class Exp(Op):
    """z = e^x;  dz/dx = z."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.exp(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz * self.output()


class Expm1(Op):
    """z = e^x - 1;  dz/dx = z + 1."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.expm1(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz * (self.output() + 1)


class Log(Op):
    """z = ln x;  dz/dx = 1/x."""

    def forward(self, x):
        return np.log(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / x


class Log2(Op):
    """z = log2 x;  dz/dx = 1/(x ln 2)."""

    def forward(self, x):
        return np.log2(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / (x * math.log(2.0))


class Log10(Op):
    """z = log10 x;  dz/dx = 1/(x ln 10)."""

    def forward(self, x):
        return np.log10(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / (x * math.log(10.0))


class Log1p(Op):
    """z = ln(1 + x);  dz/dx = 1/(1 + x)."""

    def forward(self, x):
        return np.log1p(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / (x + 1)


class Sqrt(Op):
    """z = √x;  dz/dx = 1/(2z)."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.sqrt(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz / (2 * self.output())


class Rsqrt(Op):
    """z = 1/√x;  dz/dx = -z³/2."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return 1 / np.sqrt(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        z = self.output()
        return gz * (-0.5 * z * z * z)


class Reciprocal(Op):
    """z = 1/x;  dz/dx = -z²."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return 1 / x

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        z = self.output()
        return -gz * z * z


class Square(Op):
    """z = x²;  dz/dx = 2x."""

    def forward(self, x):
        return x * x

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (2 * x)


class Sin(Op):
    """z = sin x;  dz/dx = cos x."""

    def forward(self, x):
        return np.sin(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * x.cos()


class Cos(Op):
    """z = cos x;  dz/dx = -sin x."""

    def forward(self, x):
        return np.cos(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return -gz * x.sin()


class Tan(Op):
    """z = tan x;  dz/dx = 1 + z²."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.tan(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        z = self.output()
        return gz * (1 + z * z)


class Tanh(Op):
    """z = tanh x;  dz/dx = 1 - z²."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.tanh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return TanhGrad.apply(gz, self.output())


class TanhGrad(Op):
    """Tanh's backward fused into one op: r = gz·(1 - z²);  dr/dgz = 1 - z², dr/dz = -2·gz·z."""

    def forward(self, gz, z):
        t = gz * z
        return gz - t * z  # no Python scalar: NumPy's scalar handling costs more than a tiny op

    jvp = Op.elementwise_jvp

    def backward(self, gr, gz, z):
        return (TanhGrad.apply(gr, z) if self.needs(0) else None), (gr * gz * z * -2 if self.needs(1) else None)


class Sigmoid(Op):
    """z = 1/(1 + e^-x), computed as (1 + tanh(x/2))/2, which never overflows;  dz/dx = z(1 - z)."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        z = np.tanh(x * 0.5)
        z += 1
        z *= 0.5
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return SigmoidGrad.apply(gz, self.output())


class SigmoidGrad(Op):
    """Sigmoid's backward fused into one op: r = gz·z(1 - z);  dr/dgz = z(1 - z), dr/dz = gz(1 - 2z)."""

    def forward(self, gz, z):
        t = gz * z
        return t - t * z  # = gz·z(1 - z), without a Python scalar (slower than a tiny op in NumPy)

    jvp = Op.elementwise_jvp

    def backward(self, gr, gz, z):
        return (SigmoidGrad.apply(gr, z) if self.needs(0) else None), (gr * gz * (1 - 2 * z) if self.needs(1) else None)


class Relu(Op):
    """z = max(x, 0);  dz/dx = 1 where z > 0, else 0."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        if x.dtype.kind == "b":
            raise RuntimeError("relu(): bool inputs are not supported (got an ember.bool tensor); "
                               "convert it with .to(ember.float32) or .long() first")
        return np.maximum(x, 0)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        """dx = gz·[z > 0]: one ReluGrad op, itself differentiable in gz (double backward)."""
        return ReluGrad.apply(gz, self.output())

    def fast_backward(self, gz):
        """`backward` on the arrays: it skips a Tensor and an op application, ~0.8 µs per call: 11% of this
        backward at ResMLP's (128, 100), 4.5% at (128, 512); with Dropout's, 4% of a W2 step."""
        r = gz._data * relu_mask(self.out)
        return make(np.asarray(r) if r.__class__ is not np.ndarray and isinstance(r, np.generic) else r)


def relu_mask(z):
    """Where ReLU passes its gradient: not z <= 0 (PyTorch's threshold rule, so a NaN output passes it)."""
    m = z <= 0
    return np.logical_not(m, out=m) if type(m) is np.ndarray else ~m


class ReluGrad(Op):
    """Relu's backward as one op: r = gz except where z <= 0 (0 there);  dr/dgz: the same mask, dr/dz = 0 (a.e.)."""

    def forward(self, gz, z):
        return gz * relu_mask(z)

    def jvp(self, t, gz, z):
        """r' = gz'·[z > 0]: the mask is piecewise constant in z."""
        return ReluGrad.apply(t[0], z) if isinstance(t[0], Tensor) else 0

    def backward(self, gr, gz, z):
        return (ReluGrad.apply(gr, z) if self.needs(0) else None), None


class Abs(Op):
    """z = |x|;  dz/dx = sign(x) (0 at 0)."""

    def forward(self, x):
        if x.dtype.kind == "b":
            raise _not_for_bool("abs")
        return np.abs(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * x.sign()


class Erf(Op):
    """z = erf(x);  dz/dx = 2/√π · e^(-x²)."""

    def forward(self, x):
        return erf_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * ((-x * x).exp() * (2.0 / math.sqrt(math.pi)))


def _not_for_bool(op: str) -> NotImplementedError:
    """PyTorch's error for a bool input to an op that has no bool kernel (abs, floor, ...)."""
    return NotImplementedError(f"{op}(): not implemented for ember.bool tensors; "
                               "convert the input to an integer or floating dtype first")


def _copy_non_float(x: np.ndarray, op: str) -> np.ndarray:
    """floor/ceil/trunc/round of an integer array is the array itself; a bool one is refused, as in PyTorch."""
    if x.dtype.kind == "b":
        raise _not_for_bool(op)
    return x.copy()


class _Piecewise(Op):
    """Piecewise-constant functions (floor, ceil, round, trunc, sign): zero gradient."""

    saves_inputs = False

    def jvp(self, t, *inputs):
        return 0  # (a zero tangent)

    def backward(self, gz):
        return gz * 0.0


class Sign(_Piecewise):
    def forward(self, x):
        return np.sign(x)


class Floor(_Piecewise):
    def forward(self, x):
        return np.floor(x) if dt.is_float(x.dtype) else _copy_non_float(x, "floor")


class Ceil(_Piecewise):
    def forward(self, x):
        return np.ceil(x) if dt.is_float(x.dtype) else _copy_non_float(x, "ceil")


class Trunc(_Piecewise):
    def forward(self, x):
        return np.trunc(x) if dt.is_float(x.dtype) else _copy_non_float(x, "trunc")


class Round(_Piecewise):
    def forward(self, x, decimals=0):
        return backend.array_module(x).round(x, decimals) if dt.is_float(x.dtype) else _copy_non_float(x, "round")


class Clamp(Op):
    """z = min(max(x, lo), hi) with scalar bounds;  dz/dx = 1 where lo ≤ x ≤ hi, else 0."""

    def forward(self, x, lo, hi):
        return backend.array_module(x).clip(x, lo, hi)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, lo, hi):
        keep = (x >= lo) if lo is not None else None
        if hi is not None:
            keep = (x <= hi) if keep is None else keep & (x <= hi)
        return gz * keep, None, None


class ClampTensor(Op):
    """z = min(max(x, lo), hi) with Tensor bounds (either may be None or a number), all broadcast together;
    dz/dx = 1 where lo ≤ x ≤ hi; dz/dlo = 1 where x < lo (and lo < hi); dz/dhi = 1 where x > hi (or hi < lo, where
    the upper bound wins). Where x is NaN no gradient flows (PyTorch's rules)."""

    reduces_grads = True  # the bounds broadcast against x: their gradients are summed back (Op._reduce)

    def forward(self, x, lo, hi):
        z = x if lo is None else np.maximum(x, lo)
        return z if hi is None else np.minimum(z, hi)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, lo, hi):
        # each gradient is gz times a mask (as Clamp's: a product costs a third of a where() on large tensors)
        gx = glo = ghi = None
        if self.needs(0):
            gx = gz * (x >= lo if hi is None else x <= hi if lo is None else (x >= lo) & (x <= hi))
        if lo is not None and self.needs(1):
            glo = gz * ((x < lo) if hi is None else (x < lo) & (lo < hi))
        if hi is not None and self.needs(2):
            ghi = gz * ((x > hi) if lo is None else (x > hi) | (hi < lo))
        return gx, glo, ghi


class Cast(Op):
    """z = x converted to another dtype;  dz/dx = gz converted back (no gradient for non-float results)."""

    saves_inputs = False
    keeps_dtype = True  # (a 16-bit float input is converted as it is, not widened first: see `dispatch`)

    def forward(self, x, np_dtype):
        self.in_dtype = x.dtype
        return x.astype(np_dtype)

    def jvp(self, t, x, np_dtype):
        """z' = x' converted to z's dtype."""
        return t[0].to(self.result().dtype) if isinstance(t[0], Tensor) else 0

    def backward(self, gz):
        return gz.to(dt.FROM_NP[self.in_dtype])


def _as_array(r):
    """A ufunc's result as an array: NumPy gives a scalar for a 0-d input (CuPy an array)."""
    return np.asarray(r) if isinstance(r, np.generic) else r


# ---------------------------------------------------------------------- public functions
def _unary(cls, name: str, to_float: bool = True):
    def fn(input: Tensor) -> Tensor:
        x = _check(input, name)
        if to_float and not dt.is_float(x._data.dtype):
            x = _float(x)
        return dispatch(_new(cls), (x,), (x._data,))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = cls.__doc__
    return fn


exp, expm1, log, log2, log10, log1p = (_unary(Exp, "exp"), _unary(Expm1, "expm1"), _unary(Log, "log"),
                                       _unary(Log2, "log2"), _unary(Log10, "log10"), _unary(Log1p, "log1p"))
sqrt, rsqrt, reciprocal = _unary(Sqrt, "sqrt"), _unary(Rsqrt, "rsqrt"), _unary(Reciprocal, "reciprocal")
sin, cos, tan, tanh, sigmoid = (_unary(Sin, "sin"), _unary(Cos, "cos"), _unary(Tan, "tan"), _unary(Tanh, "tanh"),
                                _unary(Sigmoid, "sigmoid"))
erf = _unary(Erf, "erf")
neg = _unary(Neg, "neg", to_float=False)
relu = _unary(Relu, "relu", to_float=False)
abs = _unary(Abs, "abs", to_float=False)
square = _unary(Square, "square", to_float=False)
sign = _unary(Sign, "sign", to_float=False)
floor, ceil, trunc = _unary(Floor, "floor", False), _unary(Ceil, "ceil", False), _unary(Trunc, "trunc", False)
negative, absolute, fix = neg, abs, trunc


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even (as PyTorch); zero gradient."""
    return Round.apply(_check(input, "round"), decimals=decimals)


def erfc(input: Tensor) -> Tensor:
    return 1 - erf(input)


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """min(max(input, min), max): clamp into [min, max]. Either bound may be None, a number or a Tensor that
    broadcasts with input (the result takes the broadcast shape and the promoted dtype of the three); where
    min > max the result is max."""
    x = _check(input, "clamp")
    if min is None and max is None:
        raise RuntimeError("clamp(): At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(x, min, max)
    if not dt.is_float(x._data.dtype) and (isinstance(min, float) or isinstance(max, float)):
        x = _float(x)
    return Clamp.apply(x, min, max)


def _clamp_tensor(x: Tensor, lo, hi) -> Tensor:
    """clamp with at least one Tensor bound: promote the three to one dtype, check that they broadcast."""
    bounds = [b for b in (lo, hi) if b is not None]
    for b in bounds:
        if not isinstance(b, (Tensor, int, float)):
            raise TypeError(f"clamp(): min and max must be Tensors or numbers, got {type(b).__name__}")
    arrays = [t._data if isinstance(t, Tensor) else t for t in (x, *bounds)]
    backend.check_same_device("clamp", [a for a in arrays if not isinstance(a, (int, float))])
    target = dt.result_type(*arrays)
    try:
        np.broadcast_shapes(*[np.shape(a) for a in arrays])
    except ValueError:
        lo_shape, hi_shape = (list(np.shape(b._data if isinstance(b, Tensor) else b)) for b in (lo, hi))
        raise RuntimeError(f"clamp(): input {list(x.shape)}, min {lo_shape if lo is not None else None} and max "
                           f"{hi_shape if hi is not None else None} cannot be broadcast together") from None
    x, lo, hi = (t.to(dt.FROM_NP[target]) if isinstance(t, Tensor) and t._data.dtype != target else t
                 for t in (x, lo, hi))
    return ClampTensor.apply(x, lo, hi)


clip = clamp


def clamp_min(input: Tensor, min) -> Tensor:
    return clamp(input, min=min)


def clamp_max(input: Tensor, max) -> Tensor:
    return clamp(input, max=max)


def to_dtype(x: Tensor, dtype) -> Tensor:
    """x converted to `dtype` (differentiable between float types); x itself when nothing changes."""
    d = dt.np_dtype(dtype)
    if x._data.dtype == d:
        return x
    if not dt.is_float(d):
        return _astype(x, d)
    return Cast.apply(x, d)


@traced
def _astype(x: Tensor, d: np.dtype) -> Tensor:
    """x converted to a non-float dtype: no gradient (a capture records it as a call)."""
    return make(x._data.astype(d))


@traced
def logical_not(input: Tensor) -> Tensor:
    return make(_as_array(np.logical_not(input._data)))


@traced
def bitwise_not(input: Tensor) -> Tensor:
    if dt.is_float(input._data.dtype):
        raise TypeError(f"bitwise_not(): the ~ operator needs a bool or integer tensor, got {input.dtype}; "
                        f"for a float mask compare first (e.g. ~(x > 0))")
    return make(_as_array(np.invert(input._data)))


@traced
def isnan(input: Tensor) -> Tensor:
    return make(_as_array(np.isnan(input._data)))


@traced
def isinf(input: Tensor) -> Tensor:
    return make(_as_array(np.isinf(input._data)))


@traced
def isfinite(input: Tensor) -> Tensor:
    return make(_as_array(np.isfinite(input._data)))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    mask = isfinite(input)
    fixed = make(backend.array_module(input._data).nan_to_num(input._data, nan=nan, posinf=posinf, neginf=neginf))
    return where(mask, input, fixed)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=("abs", "absolute", "bitwise_not", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos", "erf", "erfc",
               "exp", "expm1", "fix", "floor", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10",
               "logical_not", "nan_to_num", "neg", "negative", "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sign",
               "sin", "sqrt", "square", "tan", "tanh", "trunc"),
    methods=("exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh",
             "sigmoid", "erf", "erfc", "neg", "negative", "relu", "abs", "absolute", "square", "sign", "floor", "ceil",
             "trunc", "fix", "round", "clamp", "clip", "clamp_min", "clamp_max", "logical_not", "bitwise_not", "isnan",
             "isinf", "isfinite", "nan_to_num"),
    aliases={"__neg__": neg, "__abs__": abs, "__invert__": bitwise_not, "__pos__": lambda self: self,
             "positive": lambda self: self},
    # Tensor.<name>_ (e.g. x.exp_()), built by inplace.unary_in_place from the function and its Op class
    in_place={"clamp": Clamp, "clip": Clamp, "relu": Relu, "exp": Exp, "log": Log, "sqrt": Sqrt, "neg": Neg,
              "abs": Abs, "sigmoid": Sigmoid, "tanh": Tanh, "floor": Floor, "ceil": Ceil, "round": Round,
              "trunc": Trunc, "sign": Sign, "reciprocal": Reciprocal, "square": Square, "sin": Sin, "cos": Cos,
              "clamp_min": Clamp, "clamp_max": Clamp})
