"""More elementwise math, PyTorch's: inverse trigonometric and hyperbolic functions, the gamma family (lgamma,
digamma, polygamma, mvlgamma), erfinv, Bessel i0, sinc, logit, xlogy, hypot, logaddexp, copysign, float_power,
fmax/fmin, gcd/lcm, ldexp, frexp, nextafter, igamma; the NaN-ignoring reductions nansum/nanmean, std_mean and
var_mean, quantile and nanquantile; addcmul/addcdiv, diff, trapezoid and cumulative_trapezoid.

Also the ops behind `ember.special` (ember/special.py): erfcx, the normal distribution's ndtr, log_ndtr and
ndtri, the exponentially scaled Bessel functions, entr, xlog1py, Hurwitz's zeta, the SciPy-backed Bessel and
Airy functions, and the classical orthogonal polynomials.

The numerics are raw-array functions in ops/special.py (SciPy's ufuncs where installed, NumPy otherwise); each
op here reads like its derivative on paper, its backward written with ember ops so that it differentiates again.
Integer and bool inputs of float-valued functions are promoted to the default float dtype, as in PyTorch.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .._capture import traced
from .._tensor import Tensor, make, normalize_dim, type_name
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from ..backend import array_module
from . import special as S
from .arithmetic import BinaryOp, binary, where
from .inplace import unary_in_place
from . import reduce as _reduce
from .reduce import _axes, _correction, _keep, mean, return_types, std, sum_array, var
from .registry import Exports
# unary.py's functions whose in-place forms (`x.expm1_()`, ...) this module declares (see EXPORTS)
from .unary import (Erf, Expm1, Log1p, Log2, Log10, Rsqrt, Tan, Trunc, _as_array, _check, _float, erf, expm1, fix, log1p,
                    log2, log10, rsqrt, sign, tan)

__all__ = ["asin", "acos", "atan", "arcsin", "arccos", "arctan", "asinh", "acosh", "atanh", "arcsinh", "arccosh",
           "arctanh", "sinh", "cosh", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc",
           "logit", "frac", "sgn", "deg2rad", "rad2deg", "exp2", "signbit", "isneginf", "isposinf", "isreal",
           "positive", "xlogy", "hypot", "logaddexp", "logaddexp2", "heaviside", "copysign", "float_power", "fmax",
           "fmin", "gcd", "lcm", "ldexp", "frexp", "nextafter", "igamma", "igammac", "rsub", "nansum", "nanmean",
           "std_mean", "var_mean", "quantile", "nanquantile", "addcmul", "addcdiv", "diff", "trapezoid", "trapz",
           "cumulative_trapezoid"]

_new = object.__new__
_SQRT_PI = math.sqrt(math.pi)
_LN2 = math.log(2.0)


# ---------------------------------------------------------------------- helpers
def _unary(cls, name: str):
    """The function `name(input)` of a one-input float op: integer and bool inputs become the default float dtype."""
    def fn(input: Tensor) -> Tensor:
        x = _check(input, name)
        if not dt.is_float(x._data.dtype):
            x = _float(x)
        return dispatch(_new(cls), (x,), (x._data,))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = cls.__doc__
    return fn


def _no_grad(cls, inputs: tuple, arrays: tuple):
    """Apply an op whose result has no derivative (an integer, or a function PyTorch does not differentiate):
    grad mode off, so the result never requires grad."""
    prev = MODE.grad
    MODE.grad = False
    try:
        return dispatch(_new(cls), inputs, arrays)
    finally:
        MODE.grad = prev


def _safe(x: Tensor, at: Tensor) -> Tensor:
    """x with 1 where the mask `at` holds: a denominator that keeps a masked-out 0/0 (and its derivative, under
    double backward) out of a `where`."""
    return where(at, 1.0, x)


def _is_int(v) -> bool:
    """An integer or bool array or Python number (a float-valued op promotes such operands)."""
    d = getattr(v, "dtype", None)
    return (d.kind in "biu") if d is not None else isinstance(v, (bool, int))


def _as_float(x, y):
    """The operands of a float-valued binary op (xlogy, copysign, ...) as arrays of one float dtype: the default
    float dtype when both are integer or bool, as PyTorch gives (mixed operands were promoted by `binary`); a
    Python number takes the array's dtype (so that NumPy's float64 scalars from it do not widen the result)."""
    if _is_int(x) and _is_int(y):
        f = dt.NP_DEFAULT_FLOAT
        x = x.astype(f) if hasattr(x, "dtype") else float(x)
        y = y.astype(f) if hasattr(y, "dtype") else float(y)
    if not hasattr(x, "dtype"):
        x = array_module(y).asarray(x, y.dtype)
    elif not hasattr(y, "dtype"):
        y = array_module(x).asarray(y, x.dtype)
    return x, y


def _need_tensor(v, op: str, arg: str = "other", pos: int = 2) -> Tensor:
    if not isinstance(v, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type_name(v)}")
    return v


def _no_ints(op: str, *ts) -> None:
    """PyTorch has no integer kernel for hypot, logaddexp, nextafter, igamma, frac: NotImplementedError."""
    for t in ts:
        if isinstance(t, Tensor) and not dt.is_float(t._data.dtype):
            raise NotImplementedError(f"{op}(): not implemented for {t.dtype} tensors; convert the input to a floating "
                                      f"dtype first (e.g. .float())")


_named = _reduce.register_return_type  # ember.return_types.<name>


_named("frexp", ("mantissa", "exponent"))


def _scalar_pair(a, b, op: str) -> None:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}(): expected at least one Tensor argument, got {type_name(a)} and {type_name(b)}")


# ---------------------------------------------------------------------- inverse trigonometric and hyperbolic
class Asin(Op):
    """z = arcsin x;  dz/dx = 1/√(1 - x²)."""

    def forward(self, x):
        return np.arcsin(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (1 - x * x).rsqrt()


class Acos(Op):
    """z = arccos x;  dz/dx = -1/√(1 - x²)."""

    def forward(self, x):
        return np.arccos(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return -gz * (1 - x * x).rsqrt()


class Atan(Op):
    """z = arctan x;  dz/dx = 1/(1 + x²)."""

    def forward(self, x):
        return np.arctan(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / (1 + x * x)


class Asinh(Op):
    """z = arsinh x;  dz/dx = 1/√(x² + 1)."""

    def forward(self, x):
        return np.arcsinh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (x * x + 1).rsqrt()


class Acosh(Op):
    """z = arcosh x;  dz/dx = 1/√(x² - 1)."""

    def forward(self, x):
        return np.arccosh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (x * x - 1).rsqrt()


class Atanh(Op):
    """z = artanh x;  dz/dx = 1/(1 - x²)."""

    def forward(self, x):
        return np.arctanh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz / (1 - x * x)


class Sinh(Op):
    """z = sinh x;  dz/dx = cosh x."""

    def forward(self, x):
        return np.sinh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * cosh(x)


class Cosh(Op):
    """z = cosh x;  dz/dx = sinh x."""

    def forward(self, x):
        return np.cosh(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * sinh(x)


asin, acos, atan = _unary(Asin, "asin"), _unary(Acos, "acos"), _unary(Atan, "atan")
asinh, acosh, atanh = _unary(Asinh, "asinh"), _unary(Acosh, "acosh"), _unary(Atanh, "atanh")
sinh, cosh = _unary(Sinh, "sinh"), _unary(Cosh, "cosh")
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


# ---------------------------------------------------------------------- error function family
class Erfc(Op):
    """z = erfc x = 1 - erf x (without the cancellation of 1 - erf for large x);  dz/dx = -2/√π · e^(-x²)."""

    def forward(self, x):
        return S.erfc_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * ((-x * x).exp() * (-2 / _SQRT_PI))


class Erfinv(Op):
    """z = erf⁻¹ x;  dz/dx = √π/2 · e^(z²)."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return S.erfinv_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        z = self.output()
        return gz * ((z * z).exp() * (_SQRT_PI / 2))


class Erfcx(Op):
    """z = erfcx x = e^(x²)·erfc x;  dz/dx = 2x·z - 2/√π."""

    saves_output = True

    def forward(self, x):
        return S.erfcx_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (2 * x * self.output() - 2 / _SQRT_PI)


class Ndtr(Op):
    """z = Φ(x), the standard normal CDF;  dz/dx = φ(x) = e^(-x²/2)/√(2π)."""

    def forward(self, x):
        return S.ndtr_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * ((x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi)))


class LogNdtr(Op):
    """z = ln Φ(x);  dz/dx = φ(x)/Φ(x) = e^(-x²/2 - z)/√(2π) (no underflow for x → -∞)."""

    saves_output = True

    def forward(self, x):
        return S.log_ndtr_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * ((x * x * -0.5 - self.output()).exp() * (1 / math.sqrt(2 * math.pi)))


class Ndtri(Op):
    """z = Φ⁻¹(p);  dz/dp = 1/φ(z) = √(2π)·e^(z²/2)."""

    saves_inputs, saves_output = False, True

    def forward(self, p):
        return S.ndtri_array(p)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        z = self.output()
        return gz * ((z * z * 0.5).exp() * math.sqrt(2 * math.pi))


erfc = _unary(Erfc, "erfc")
erfinv = _unary(Erfinv, "erfinv")
erfcx, ndtr = _unary(Erfcx, "erfcx"), _unary(Ndtr, "ndtr")
log_ndtr, ndtri = _unary(LogNdtr, "log_ndtr"), _unary(Ndtri, "ndtri")


# ---------------------------------------------------------------------- gamma family
class Lgamma(Op):
    """z = ln|Γ(x)|;  dz/dx = ψ(x)."""

    def forward(self, x):
        return S.lgamma_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * digamma(x)


class Digamma(Op):
    """z = ψ(x) = d ln Γ(x)/dx;  dz/dx = ψ'(x) = polygamma(1, x)."""

    def forward(self, x):
        return S.digamma_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * polygamma(1, x)


class Polygamma(Op):
    """z = ψ⁽ⁿ⁾(x);  dz/dx = ψ⁽ⁿ⁺¹⁾(x)."""

    def forward(self, x, n):
        return S.polygamma_array(n, x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, n):
        return gz * polygamma(n + 1, x), None


lgamma, digamma = _unary(Lgamma, "lgamma"), _unary(Digamma, "digamma")


def polygamma(n: int, input: Tensor) -> Tensor:
    """ψ⁽ⁿ⁾(input), the n-th derivative of the digamma function (n = 0: digamma itself)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type_name(n)}")
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n})")
    x = _check(input, "polygamma")
    if not dt.is_float(x._data.dtype):
        x = _float(x)
    return Polygamma.apply(x, int(n))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension p: ln Γ_p(x) = p(p-1)/4 · ln π + Σ_(j<p) ln Γ(x - j/2)
    (defined for x > (p-1)/2; as PyTorch, other x are not refused: ln|Γ| is summed there too)."""
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type_name(p)}")
    if p < 1:
        raise RuntimeError(f"mvlgamma(): p has to be greater than or equal to 1 (got p={p})")
    x = _check(input, "mvlgamma")
    if x._data.dtype == np.bool_:
        raise RuntimeError("mvlgamma(): The input tensor may not be a boolean tensor (convert it with .float())")
    if not dt.is_float(x._data.dtype):
        x = _float(x)
    # the p shifted arguments along a new last axis, summed: one lgamma over x.shape + (p,)
    offsets = make(array_module(x._data).asarray(np.arange(p) * -0.5, x._data.dtype))
    return lgamma(x.unsqueeze(-1) + offsets).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


# ---------------------------------------------------------------------- Bessel functions of imaginary argument
class I0(Op):
    """z = I₀(x);  dz/dx = I₁(x)."""

    def forward(self, x):
        return S.i0_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * i1(x)


class I0e(Op):
    """z = e^-|x|·I₀(x);  dz/dx = I₁e(x) - sgn(x)·z."""

    saves_output = True

    def forward(self, x):
        return S.i0e_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * (i1e(x) - sign(x) * self.output())


class I1(Op):
    """z = I₁(x);  dz/dx = I₀(x) - z/x (1/2 at 0)."""

    saves_output = True

    def forward(self, x):
        return S.i1_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        at0 = x == 0
        return gz * where(at0, 0.5, i0(x) - self.output() / _safe(x, at0))


class I1e(Op):
    """z = e^-|x|·I₁(x);  dz/dx = I₀e(x) - z·(sgn(x) + 1/x) (1/2 at 0)."""

    saves_output = True

    def forward(self, x):
        return S.i1e_array(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        at0 = x == 0
        return gz * where(at0, 0.5, i0e(x) - self.output() * (sign(x) + 1 / _safe(x, at0)))


i0, i0e, i1, i1e = _unary(I0, "i0"), _unary(I0e, "i0e"), _unary(I1, "i1"), _unary(I1e, "i1e")


# ---------------------------------------------------------------------- other unary functions
class Sinc(Op):
    """z = sin(πx)/(πx) (1 at 0);  dz/dx = (cos(πx) - z)/x (0 at 0)."""

    saves_output = True

    def forward(self, x):
        with np.errstate(invalid="ignore"):  # sin(±inf) (NumPy's sinc is Python code: outside ember's filter)
            return array_module(x).sinc(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        at0 = x == 0
        return gz * where(at0, 0.0, ((x * math.pi).cos() - self.output()) / _safe(x, at0))


class Logit(Op):
    """z = ln(x/(1-x)), x first clamped to [eps, 1-eps] when eps is given;  dz/dx = 1/(x(1-x)), 0 where the
    clamp is active."""

    def forward(self, x, eps):
        if eps is not None:
            xp = array_module(x)
            x = xp.where(x < eps, eps, xp.where(x > 1 - eps, 1 - eps, x)).astype(x.dtype, copy=False)
        return np.log(x / (1 - x))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, eps):
        g = gz / (x * (1 - x))
        return (g if eps is None else where((x < eps) | (x > 1 - eps), 0.0, g)), None


class Frac(Op):
    """z = x - trunc(x);  dz/dx = 1."""

    saves_inputs = False

    def forward(self, x):
        return x - np.trunc(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz


class Exp2(Op):
    """z = 2^x;  dz/dx = z·ln 2."""

    saves_inputs, saves_output = False, True

    def forward(self, x):
        return np.exp2(x)

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz * (self.output() * _LN2)


class Entr(Op):
    """z = -x·ln x (0 at 0, -inf below 0);  dz/dx = -(ln x + 1)."""

    def forward(self, x):
        xp = array_module(x)
        with np.errstate(all="ignore"):
            z = -x * np.log(xp.where(x > 0, x, 1))
        return xp.where(x < 0, -np.inf, z).astype(x.dtype, copy=False)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return -gz * (x.log() + 1)


sinc, exp2, entr = _unary(Sinc, "sinc"), _unary(Exp2, "exp2"), _unary(Entr, "entr")


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """ln(p/(1-p)), the inverse of sigmoid; with eps, input is first clamped to [eps, 1 - eps] (eps < 0: no clamp)."""
    x = _check(input, "logit")
    if not dt.is_float(x._data.dtype):
        x = _float(x)
    if eps is not None and eps < 0:
        eps = None
    return Logit.apply(x, None if eps is None else float(eps))


def frac(input: Tensor) -> Tensor:
    """The fractional part, x - trunc(x) (sign of x)."""
    x = _check(input, "frac")
    _no_ints("frac", x)
    return Frac.apply(x)


class Sgn(Op):
    """z = the sign of x (-1, 0 or 1; 0 at NaN, as PyTorch's sgn and sign);  dz/dx = 0."""

    saves_inputs = False

    def forward(self, x):
        if x.dtype == np.bool_:
            return x.copy()
        z = np.sign(x)
        return array_module(x).where(np.isnan(z), 0, z).astype(x.dtype, copy=False) if dt.is_float(x.dtype) else z

    def jvp(self, t, x):
        return 0  # (a zero tangent)

    def backward(self, gz):
        return gz * 0.0


def sgn(input: Tensor) -> Tensor:
    """The sign (-1, 0, 1) of each element (the sign of a real number; 0 at NaN); zero gradient."""
    x = _check(input, "sgn")
    return Sgn.apply(x)


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians: x·π/180."""
    x = _check(input, "deg2rad")
    return (x if dt.is_float(x._data.dtype) else _float(x)) * (math.pi / 180)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees: x·180/π."""
    x = _check(input, "rad2deg")
    return (x if dt.is_float(x._data.dtype) else _float(x)) * (180 / math.pi)


def positive(input: Tensor) -> Tensor:
    """input itself (the unary `+`); refused for bool tensors, as in PyTorch."""
    x = _check(input, "positive")
    if x._data.dtype == np.bool_:
        raise RuntimeError("positive(): the `+` operator, on a bool tensor is not supported.")
    return x


@traced
def signbit(input: Tensor) -> Tensor:
    """Whether the sign bit is set (True for -0.0 and negative values, also for -NaN)."""
    x = _check(input, "signbit")._data
    return make(_as_array(np.signbit(x)) if x.dtype != np.bool_ else array_module(x).zeros(x.shape, np.bool_))


@traced
def isneginf(input: Tensor) -> Tensor:
    x = _check(input, "isneginf")._data
    return make(_as_array(x == -np.inf) if dt.is_float(x.dtype) else array_module(x).zeros(x.shape, np.bool_))


@traced
def isposinf(input: Tensor) -> Tensor:
    x = _check(input, "isposinf")._data
    return make(_as_array(x == np.inf) if dt.is_float(x.dtype) else array_module(x).zeros(x.shape, np.bool_))


@traced
def isreal(input: Tensor) -> Tensor:
    """True everywhere: ember's tensors are real."""
    x = _check(input, "isreal")._data
    return make(array_module(x).ones(x.shape, np.bool_))


class Frexp(Op):
    """(mantissa, exponent) with x = mantissa·2^exponent, 0.5 ≤ |mantissa| < 1; no derivative (as PyTorch)."""

    saves_inputs = False

    def forward(self, x):
        m, e = np.frexp(x)
        return m, e.astype(np.int32, copy=False)

    def jvp(self, t, x):
        return None, None  # no derivative (the results do not require grad either): no tangents


def frexp(input: Tensor):
    """The mantissa (input's dtype) and int32 exponent of each element: `return_types.frexp(mantissa, exponent)`."""
    x = _check(input, "frexp")
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"frexp(): only supports floating-point dtypes, got {x.dtype}")
    return return_types.frexp(*_no_grad(Frexp, (x,), (x._data,)))


# ---------------------------------------------------------------------- binary functions
def _x_log(x, y, log1p: bool):
    """x·ln y (x·ln(1 + y) when `log1p`) on arrays, 0 where x = 0 unless y is NaN. The masked write is made only
    where some x is 0 (rare): a where() over the whole array would cost more than the product."""
    with np.errstate(all="ignore"):
        z = x * (np.log1p(y) if log1p else np.log(y))
    hit = x == 0
    if hit.any():
        z = array_module(z).where(hit & ~np.isnan(y), 0, z)
    return z


class Xlogy(BinaryOp):
    """z = x·ln y, 0 where x = 0 (unless y is NaN);  dz/dx = ln y (0 where x = 0 and y ≤ 0), dz/dy = x/y."""

    saves_inputs = True
    log1p = False  # Xlog1py: z = x·ln(1 + y)

    def forward(self, x, y):
        x, y = _as_float(x, y)
        return _x_log(x, y, self.log1p)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        gx = _XlogyGradX.apply(gz, x, y, self.log1p) if self.needs(0) else None
        return gx, (gz * x / (1 + y if self.log1p else y) if self.needs(1) else None)


class Xlog1py(Xlogy):
    """z = x·ln(1 + y), 0 where x = 0 (unless y is NaN);  dz/dx = ln(1 + y) (0 where x = 0 and y ≤ -1),
    dz/dy = x/(1 + y)."""

    log1p = True


class _XlogyGradX(Op):
    """Xlogy's dz/dx times gz, in one op: r = xlogy(gz, y) (gz·ln y, 0 where gz = 0), 0 where x = 0 and y ≤ 0 (for
    xlog1py: ln(1 + y), y ≤ -1), PyTorch's rule;  dr/dgz = r's rule applied to 1, dr/dy = gz/y (gz/(1 + y)) off
    the zeroed points, dr/dx = 0."""

    reduces_grads = True  # (x and y may broadcast against gz)

    def forward(self, gz, x, y, log1p):
        if not hasattr(y, "dtype"):  # a Python number: in gz's dtype (NumPy's float64 scalar would widen r)
            y = array_module(gz).asarray(y, gz.dtype)
        r = _x_log(gz, y, log1p)
        off = (x == 0) & (y <= (-1 if log1p else 0))
        if off.any():
            r = array_module(r).where(off, 0, r)
        return r

    def jvp(self, t, gz, x, y, log1p):
        """r' = r's rule applied to gz' + y'·gz/y (0 at the zeroed points); x' does not count."""
        r = _XlogyGradX.apply(t[0], x, y, log1p) if isinstance(t[0], Tensor) else 0
        return r + self._dy(t[2], gz, x, y, log1p) if isinstance(t[2], Tensor) else r

    def backward(self, g, gz, x, y, log1p):
        gy = self._dy(g, gz, x, y, log1p) if self.needs(2) else None  # (y is a Tensor here)
        return (_XlogyGradX.apply(g, x, y, log1p) if self.needs(0) else None), None, gy, None

    @staticmethod
    def _dy(g, gz, x, y, log1p):
        """g·dr/dy = g·gz/y (g·gz/(1 + y)), 0 where r is zeroed (gz = 0, or x = 0 and y ≤ 0 (≤ -1))."""
        off = ((gz == 0) & ~y.isnan()) | ((x == 0) & (y <= (-1 if log1p else 0)))
        return where(off, 0.0, g * gz / (1 + y if log1p else y))


class Hypot(BinaryOp):
    """z = √(x² + y²);  dz/dx = x/z, dz/dy = y/z."""

    saves_inputs, saves_output = True, True
    forward = np.hypot

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        g = gz / self.output()
        return (g * x if self.needs(0) else None), (g * y if self.needs(1) else None)


class LogAddExp(BinaryOp):
    """z = ln(e^x + e^y);  dz/dx = 1/(1 + e^(y-x)), dz/dy = 1/(1 + e^(x-y))."""

    saves_inputs = True
    forward = np.logaddexp

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        return ((gz / (1 + (y - x).exp())) if self.needs(0) else None,
                (gz / (1 + (x - y).exp())) if self.needs(1) else None)


class LogAddExp2(BinaryOp):
    """z = log₂(2^x + 2^y);  dz/dx = 1/(1 + 2^(y-x)), dz/dy = 1/(1 + 2^(x-y))."""

    saves_inputs = True
    forward = np.logaddexp2

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        return ((gz / (1 + exp2(y - x))) if self.needs(0) else None,
                (gz / (1 + exp2(x - y))) if self.needs(1) else None)


class Copysign(BinaryOp):
    """z = |x| with the sign of y;  dz/dx = z/x (0 at x = 0), dz/dy = 0."""

    saves_inputs, saves_output = True, True

    def forward(self, x, y):
        return np.copysign(*_as_float(x, y))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        gx = None
        if self.needs(0):
            at0 = x == 0
            gx = gz * where(at0, 0.0, self.output() / _safe(x, at0))
        return gx, (gz * 0.0 if self.needs(1) else None)


class Fmax(BinaryOp):
    """z = max(x, y), the other operand where one is NaN;  the gradient goes to x where x ≥ y or y is NaN, else
    to y (PyTorch's rule: no split on ties)."""

    saves_inputs = True
    forward = np.fmax

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        return _pick(self, gz, (x >= y) | y.isnan())


class Fmin(BinaryOp):
    """z = min(x, y), the other operand where one is NaN;  the gradient goes to x where x ≤ y or y is NaN, else
    to y."""

    saves_inputs = True
    forward = np.fmin

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        return _pick(self, gz, (x <= y) | y.isnan())


def _pick(node, gz: Tensor, to_x: Tensor):
    return ((where(to_x, gz, 0.0) if node.needs(0) else None),
            (where(to_x, 0.0, gz) if node.needs(1) else None))


class Ldexp(BinaryOp):
    """z = x·2^y;  dz/dx = 2^y, dz/dy = z·ln 2."""

    saves_inputs, saves_output = True, True

    def forward(self, x, y):
        x, y = _as_float(x, y)
        return (x * np.exp2(y)).astype(np.result_type(x.dtype, y.dtype), copy=False)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, y):
        return ((gz * exp2(y)) if self.needs(0) else None,
                (gz * self.output() * _LN2) if self.needs(1) else None)


class Nextafter(BinaryOp):
    """z = the next float after x towards y;  dz/dx = 1, dz/dy = 0 (as PyTorch)."""

    forward = np.nextafter

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz, (gz * 0.0 if self.needs(1) else None)


class Heaviside(BinaryOp):
    """z = 0 for x < 0, `values` at x = 0, 1 for x > 0 (0 at NaN); PyTorch has no derivative for it."""

    saves_inputs = False

    def forward(self, x, values):
        return array_module(x).where(x == 0, values, x > 0).astype(x.dtype, copy=False)

    def jvp(self, t, x, values):
        raise NotImplementedError(_NO_HEAVISIDE_DERIVATIVE)  # (the type of PyTorch's forward-mode refusal)

    def backward(self, gz):
        raise RuntimeError(_NO_HEAVISIDE_DERIVATIVE)


_NO_HEAVISIDE_DERIVATIVE = ("heaviside(): the derivative for heaviside is not implemented (it is 0 almost everywhere; "
                            "use a smooth step such as sigmoid(x / t) if a gradient is wanted)")


class Igamma(BinaryOp):
    """z = P(a, x), the regularized lower incomplete gamma function (`upper`: Q = 1 - P);
    dz/dx = ±x^(a-1)·e^-x / Γ(a); no derivative in a (as PyTorch)."""

    saves_inputs = True

    def forward(self, a, x, upper):
        return S.gammainc_array(a, x, upper, "ember.igammac" if upper else "ember.igamma")

    jvp = Op.elementwise_jvp

    def backward(self, gz, a, x, upper):
        if self.needs(0):
            raise NotImplementedError(f"the derivative for '{'igammac' if upper else 'igamma'}: input' is not "
                                      f"implemented.")
        g = gz * ((a - 1) * x.log() - x - lgamma(a)).exp()
        return None, (-g if upper else g), None


class Zeta(BinaryOp):
    """z = ζ(x, q) = Σ_k (q + k)^-x, Hurwitz's zeta function;  dz/dq = -x·ζ(x + 1, q); no derivative in x
    (as PyTorch)."""

    saves_inputs = True

    def forward(self, x, q):
        return S.zeta_array(*_as_float(x, q))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, q):
        if self.needs(0):
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        return None, gz * -x * zeta(x + 1, q)


class Gcd(BinaryOp):
    """The greatest common divisor (non-negative) of integers; no derivative."""

    def forward(self, x, y):
        return np.gcd(*_integers(x, y, "gcd"))


class Lcm(BinaryOp):
    """The least common multiple (non-negative) of integers; no derivative."""

    def forward(self, x, y):
        return np.lcm(*_integers(x, y, "lcm"))


def _integers(x, y, op: str):
    for v in (x, y):
        d = getattr(v, "dtype", None)
        if (d is not None and d.kind not in "iu") or isinstance(v, (bool, float)):
            kind = dt.FROM_NP[d] if d is not None else type_name(v)
            raise NotImplementedError(f"{op}(): not implemented for {kind} operands; {op} takes integer tensors")
    return x, y


def xlogy(input, other) -> Tensor:
    """input·ln(other), taken as 0 where input is 0 (unless other is NaN). One of the two may be a number."""
    _scalar_pair(input, other, "xlogy")
    return binary(Xlogy, input, other, "xlogy")


def xlog1py(input, other) -> Tensor:
    """input·ln(1 + other), taken as 0 where input is 0 (unless other is NaN). One of the two may be a number."""
    _scalar_pair(input, other, "xlog1py")
    return binary(Xlog1py, input, other, "xlog1py")


def _float_binary(cls, name: str, doc: str):
    """A binary float op of two Tensors (PyTorch has no integer kernel and no number operand for it)."""
    def fn(input: Tensor, other: Tensor) -> Tensor:
        _check(input, name)
        _need_tensor(other, name)
        _no_ints(name, input, other)
        return binary(cls, input, other, name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


hypot = _float_binary(Hypot, "hypot", "√(input² + other²), without overflow.")
logaddexp = _float_binary(LogAddExp, "logaddexp", "ln(e^input + e^other), without overflow.")
logaddexp2 = _float_binary(LogAddExp2, "logaddexp2", "log₂(2^input + 2^other), without overflow.")
nextafter = _float_binary(Nextafter, "nextafter", "The next representable float after input in the direction of other.")


def copysign(input: Tensor, other) -> Tensor:
    """|input| with the sign of other (a Tensor or a number; its sign bit, so -0.0 counts as negative)."""
    _check(input, "copysign")
    return binary(Copysign, input, other, "copysign")


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise maximum; where exactly one of the two is NaN, the other value (NumPy's fmax)."""
    _check(input, "fmax")
    return binary(Fmax, input, _need_tensor(other, "fmax"), "fmax")


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise minimum; where exactly one of the two is NaN, the other value (NumPy's fmin)."""
    _check(input, "fmin")
    return binary(Fmin, input, _need_tensor(other, "fmin"), "fmin")


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """input·2^other (a floating result: the default float dtype for integer operands)."""
    _check(input, "ldexp")
    return binary(Ldexp, input, _need_tensor(other, "ldexp"), "ldexp")


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The Heaviside step: 0 where input < 0, `values` where input == 0, 1 where input > 0."""
    _check(input, "heaviside")
    _need_tensor(values, "heaviside", "values")
    if input._data.dtype != values._data.dtype:
        raise RuntimeError(f"heaviside(): input ({input.dtype}) and values ({values.dtype}) must have the same dtype; "
                           f"heaviside is not yet implemented for tensors with different dtypes")
    return binary(Heaviside, input, values, "heaviside")


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise greatest common divisor of two integer tensors (gcd(0, 0) = 0)."""
    _check(input, "gcd")
    return _no_grad_binary(Gcd, input, _need_tensor(other, "gcd"), "gcd")


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise least common multiple of two integer tensors (0 if either is 0)."""
    _check(input, "lcm")
    return _no_grad_binary(Lcm, input, _need_tensor(other, "lcm"), "lcm")


def _no_grad_binary(cls, a, b, name: str) -> Tensor:
    prev = MODE.grad
    MODE.grad = False
    try:
        return binary(cls, a, b, name)
    finally:
        MODE.grad = prev


def _igamma(input: Tensor, other: Tensor, upper: bool) -> Tensor:
    name = "igammac" if upper else "igamma"
    _check(input, name)
    _need_tensor(other, name)
    _no_ints(name, input, other)
    S.special_fn("gammaincc" if upper else "gammainc", f"ember.{name}", other._data)  # (raises now, even if deferred)
    if input._data.dtype != other._data.dtype:
        d = np.result_type(input._data.dtype, other._data.dtype)
        input, other = input.to(dt.FROM_NP[d]), other.to(dt.FROM_NP[d])
    return Igamma.apply(input, other, upper)


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """P(input, other) = γ(a, x)/Γ(a), the regularized lower incomplete gamma function (a = input > 0, x ≥ 0).
    Needs SciPy."""
    return _igamma(input, other, False)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """Q(input, other) = Γ(a, x)/Γ(a) = 1 - P, the regularized upper incomplete gamma function. Needs SciPy."""
    return _igamma(input, other, True)


def zeta(input, other) -> Tensor:
    """Hurwitz's zeta function ζ(input, other) = Σ_k (other + k)^-input (one of the two may be a number)."""
    _scalar_pair(input, other, "zeta")
    return binary(Zeta, input, other, "zeta")


def float_power(input, exponent) -> Tensor:
    """input ** exponent computed in float64 (the result is float64 whatever the operands' dtypes)."""
    _scalar_pair(input, exponent, "float_power")
    a = input.to(dt.float64) if isinstance(input, Tensor) else float(input)
    b = exponent.to(dt.float64) if isinstance(exponent, Tensor) else float(exponent)
    return a ** b


def float_power_(self: Tensor, exponent) -> Tensor:
    """In-place float_power: self must be float64 (the result's dtype)."""
    if self._data.dtype != np.float64:
        raise RuntimeError(f"float_power_(): the base given to float_power_ has dtype {self.dtype} but the operation's "
                           f"result requires dtype ember.float64; convert it first (e.g. x = x.double())")
    return _float_power_inplace(self, exponent)


def rsub(input: Tensor, other, *, alpha=1) -> Tensor:
    """other - alpha·input (subtraction with the operands reversed)."""
    from .arithmetic import sub
    _check(input, "rsub")
    return sub(other, input, alpha=alpha)


_float_power_inplace = unary_in_place(float_power, "float_power", Op)


# ---------------------------------------------------------------------- NaN-ignoring reductions, moments
class NanSum(Op):
    """z = Σ x over `axes`, NaNs counted as 0;  dz/dx = gz broadcast back, 0 at the NaNs."""

    def forward(self, x, axes, keepdim):
        if dt.is_float(x.dtype):
            x = array_module(x).where(np.isnan(x), 0, x)
        return sum_array(x, axes, keepdim)

    def jvp(self, t, x, axes, keepdim):
        """z' = Σ x' over `axes`, 0 at x's NaNs."""
        return _reduce.sum(where(x.isnan(), 0.0, t[0]), axes, keepdim)

    def backward(self, gz, x, axes, keepdim):
        # a product, not a `where`: an infinite gz (nanmean of an all-NaN slice divides by 0) gives NaN, as PyTorch
        return _keep(gz, x.shape, axes, keepdim) * (~x.isnan()).to(gz.dtype), None, None


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Σ input over `dim` (int, tuple, or None for all) treating NaN as 0; integers sum to int64."""
    x = _check(input, "nansum")
    if dtype is not None:
        x = x.to(dtype)
    return NanSum.apply(x, _axes(dim, x._data.ndim, "nansum"), keepdim)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the non-NaN elements over `dim` (NaN where all are NaN)."""
    x = _check(input, "nanmean")
    if dtype is not None:
        x = x.to(dtype)
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {x.dtype} "
                           f"(pass dtype=ember.float32, or use mean for integers)")
    count = (~x.isnan()).sum(dim, keepdim)
    return nansum(x, dim, keepdim) / count


def std_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None) -> tuple[Tensor, Tensor]:
    """(std, mean) over `dim`, as a tuple, with std's correction rules (correction=1 by default)."""
    dim, c = _correction("std_mean", dim, unbiased, correction)
    return std(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim)


def var_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None) -> tuple[Tensor, Tensor]:
    """(var, mean) over `dim`, as a tuple, with var's correction rules (correction=1 by default)."""
    dim, c = _correction("var_mean", dim, unbiased, correction)
    return var(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim)


# ---------------------------------------------------------------------- quantiles
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_PARTITION_MAX = 16  # distinct order statistics up to which a partition beats a full sort


class Quantile(Op):
    """z = the q-quantiles of x along `axis` (of all of x when None): with r = q·(n - 1) (n: the non-NaN count
    for nanquantile), z = (1 - w)·x₍ₗₒ₎ + w·x₍ₕᵢ₎ where x₍ₖ₎ is the k-th smallest, lo/hi the ranks below/above r
    and w the interpolation's weight (r - lo for linear; 0.5 for midpoint; 0 with lo = hi for lower, higher,
    nearest). A row holding NaN gives NaN (quantile).
    dz/dx = gz·(1 - w) at x₍ₗₒ₎ and gz·w at x₍ₕᵢ₎ (`_PutAdd`);  dz/dq = gz·(x₍ₕᵢ₎ - x₍ₗₒ₎)·(n - 1) (linear)."""

    def forward(self, x, q, axis, interpolation, ignore_nan, out_shape):
        xp = array_module(x)
        d = x.dtype
        if axis is None:
            rows = x.reshape(1, -1)
            flat = xp.arange(x.size).reshape(rows.shape)
        else:  # (rows, n): axis last; `flat` maps each (row, position) to its index in x flattened
            rows = xp.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
            flat = xp.moveaxis(xp.arange(x.size).reshape(x.shape), axis, -1).reshape(rows.shape)
        n = rows.shape[1]
        nan = xp.isnan(rows)
        has_nan = nan.any(axis=1, keepdims=True)
        count = (n - nan.sum(axis=1, keepdims=True)) if ignore_nan else xp.full((rows.shape[0], 1), n)
        # ranks in x's dtype, as PyTorch computes them (a float32 rank may round up to the next integer)
        last = xp.maximum(count - 1, 0).astype(d)
        ranks = q.reshape(1, -1).astype(d) * last  # (rows, Q)
        if not ignore_nan:
            ranks = xp.where(has_nan, d.type(n - 1), ranks)  # the row's result is a NaN, sorted last
        lo, hi = xp.floor(ranks), xp.ceil(ranks)
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        elif interpolation == "nearest":
            lo = hi = xp.round(ranks)  # half to even, as PyTorch
        if interpolation == "linear":
            w = ranks - lo
        else:
            w = xp.full(ranks.shape, 0.5 if interpolation == "midpoint" else 0, d)
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        kth = xp.unique(xp.concatenate([lo.ravel(), hi.ravel()]))
        if kth.size <= _PARTITION_MAX:  # the few order statistics needed (NaNs go last, as in a sort)
            order = xp.argpartition(rows, kth, axis=1)
        else:
            order = xp.argsort(rows, axis=1, kind="stable")
        at_lo, at_hi = xp.take_along_axis(order, lo, 1), xp.take_along_axis(order, hi, 1)
        self.lo = xp.take_along_axis(flat, at_lo, 1).T  # (Q, rows): output order
        self.hi = xp.take_along_axis(flat, at_hi, 1).T
        self.w, self.lo_rank, self.last = w.T, lo.T.astype(d), last.T
        self.x_shape = x.shape
        a, b = xp.take_along_axis(rows, at_lo, 1).T, xp.take_along_axis(rows, at_hi, 1).T
        # lerp, as PyTorch evaluates it (from the nearer end)
        z = xp.where(self.w < 0.5, a + self.w * (b - a), b - (b - a) * (1 - self.w))
        return z.reshape(out_shape).astype(d, copy=False)

    def jvp(self, t, x, q, axis, interpolation, ignore_nan, out_shape):
        """z' = (1 - w)·x'₍ₗₒ₎ + w·x'₍ₕᵢ₎ + q'·dz/dq."""
        linear = interpolation == "linear"
        w, n_1 = self._weights(q, out_shape, linear)
        tz = 0
        if isinstance(t[0], Tensor):
            tz = _Take.apply(t[0], self.lo, out_shape) * (1 - w) + _Take.apply(t[0], self.hi, out_shape) * w
        if linear and isinstance(t[1], Tensor):
            # dz/dq = (x₍ₕᵢ₎ - x₍ₗₒ₎)·(n - 1), unmasked (unlike backward's): NaN in a row holding NaN, as PyTorch's
            tq = t[1].reshape(tuple(q.shape) + (1,) * (len(out_shape) - q.ndim))
            tz = tz + tq * (_Take.apply(x, self.hi, out_shape) - _Take.apply(x, self.lo, out_shape)) * n_1
        return tz

    def backward(self, gz, x, q, axis, interpolation, ignore_nan, out_shape):
        q_slope = self.needs(1) and interpolation == "linear"
        w, n_1 = self._weights(q, out_shape, q_slope)
        gx = gq = None
        if self.needs(0):
            gx = _PutAdd.apply(gz * (1 - w), self.lo, self.x_shape) + _PutAdd.apply(gz * w, self.hi, self.x_shape)
        if q_slope:
            # no slope where the rank is pinned to one element (an integer rank; a row holding NaN, whose rank is
            # not q's): a `where`, so that NaN - NaN there does not leak into the sum
            pinned = make((self.lo == self.hi).reshape(out_shape))
            spread = _Take.apply(x, self.hi, out_shape) - _Take.apply(x, self.lo, out_shape)
            gq = (gz * where(pinned, 0.0, spread) * n_1).reshape(self.lo.shape).sum(1).reshape(q.shape)
        return gx, gq, None, None, None, None

    def _weights(self, q, out_shape: tuple, of_q: bool):
        """(w, n - 1) in the result's shape. `of_q`: w as the function q·(n-1) - lo of q (linear interpolation; the
        same values), so that what is made of it differentiates in q too."""
        w = make(self.w.reshape(out_shape))
        n_1 = make(array_module(self.last).broadcast_to(self.last, self.lo.shape).reshape(out_shape))
        if of_q:
            qb = q.reshape(tuple(q.shape) + (1,) * (len(out_shape) - q.ndim))
            w = qb * n_1 - make(self.lo_rank.reshape(out_shape))
        return w, n_1


class _PutAdd(Op):
    """z = zeros of `shape` with g added at the flat positions idx (repeats add up);  dz/dg = gz at idx (`_Take`)."""

    saves_inputs = False

    def forward(self, g, idx, shape):
        self.idx, self.g_shape = idx, g.shape
        z = array_module(g).bincount(idx.ravel(), g.ravel(), math.prod(shape))
        return z.astype(g.dtype, copy=False).reshape(shape)

    def jvp(self, t, *inputs):
        return self.reapply(*t)  # (linear in g)

    def backward(self, gz):
        return _Take.apply(gz, self.idx, self.g_shape), None, None


class _Take(Op):
    """z = t at the flat positions idx, shaped `shape`;  dz/dt = gz added back at idx (`_PutAdd`)."""

    saves_inputs = False

    def forward(self, t, idx, shape):
        self.idx, self.t_shape = idx, t.shape
        return t.reshape(-1)[idx].reshape(shape)

    def jvp(self, t, *inputs):
        return self.reapply(*t)  # (linear in t)

    def backward(self, gz):
        return _PutAdd.apply(gz, self.idx, self.t_shape), None, None


def _quantile(input, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    op = "nanquantile" if ignore_nan else "quantile"
    x = _check(input, op)
    if x._data.dtype not in (np.float32, np.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
                           f"{interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor, got a tensor of shape {list(q.shape)}")
        if q._data.dtype != x._data.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor ({x.dtype}), got {q.dtype}")
        qa = q._data
        if qa.size and not bool(((qa >= 0) & (qa <= 1)).all()):
            raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
        scalar = q.ndim == 0
    elif isinstance(q, (int, float)) and not isinstance(q, bool):
        if not 0 <= q <= 1:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
        q, scalar = float(q), True
    else:
        raise TypeError(f"{op}(): argument 'q' must be a float or a Tensor, not {type_name(q)}")
    if x._data.size == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    if dim is None:
        axis, reduced = None, ((1,) * x.ndim if keepdim else ())
    else:
        axis = normalize_dim(dim, x.ndim, op)
        reduced = tuple(1 if i == axis else s for i, s in enumerate(x.shape) if keepdim or i != axis)
        if x.ndim == 0:
            axis = None
    qarr = q if isinstance(q, Tensor) else make(array_module(x._data).asarray(q, x._data.dtype))
    out_shape = reduced if scalar else (qarr.shape[0],) + reduced
    return Quantile.apply(x, qarr, axis, interpolation, ignore_nan, out_shape)


def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The q-quantiles of input along `dim` (of all elements when None); q a number or a 0-d/1-D tensor in [0, 1]
    (a 1-D q puts its dimension first in the result). A slice holding NaN gives NaN. interpolation, between the
    order statistics around the rank q·(n-1): linear, lower, higher, midpoint or nearest."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """quantile over the non-NaN elements of each slice (NaN where all are NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ---------------------------------------------------------------------- compositions: addcmul, diff, trapezoid
def _value_for(value, *ts: Tensor):
    """addcmul/addcdiv's `value` for integer tensors is an integer: PyTorch truncates a float value there."""
    if all(not dt.is_float(t._data.dtype) for t in ts) and isinstance(value, float):
        return int(value)
    return value


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value·tensor1·tensor2 (broadcast)."""
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _need_tensor(t, "addcmul", name, ("input", "tensor1", "tensor2").index(name) + 1)
    value = _value_for(value, input, tensor1, tensor2)
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else prod * value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value·tensor1/tensor2 (broadcast; true division, so integer tensor1 and tensor2 are refused)."""
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _need_tensor(t, "addcdiv", name, ("input", "tensor1", "tensor2").index(name) + 1)
    if not dt.is_float(tensor1._data.dtype) and not dt.is_float(tensor2._data.dtype):
        raise RuntimeError("addcdiv(): integer division with addcdiv is no longer supported (tensor1 and tensor2 are "
                           f"{tensor1.dtype} and {tensor2.dtype}); for the old behaviour use "
                           "(input + value * ember.trunc(tensor1 / tensor2)).to(input.dtype), else convert tensor1 "
                           "or tensor2 to a floating dtype")
    quot = tensor1 / tensor2
    return input + (quot if value == 1 else quot * value)


def _slice(x: Tensor, d: int, start, stop) -> Tensor:
    return x[(slice(None),) * d + (slice(start, stop),)]


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along dim: out[i] = x[i+1] - x[i], applied n times, after prepend and append
    (tensors with input's number of dims) are joined to input along dim. Bool tensors use xor."""
    from .shape import cat
    x = _check(input, "diff")
    if x.ndim == 0:
        raise RuntimeError("diff(): expects input to be at least one-dimensional")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"diff(): argument 'n' must be int, not {type_name(n)}")
    if n < 0:
        raise RuntimeError(f"diff(): order must be non-negative but got {n}")
    d = normalize_dim(dim, x.ndim, "diff")
    parts = []
    for name, t in (("prepend", prepend), (None, x), ("append", append)):
        if name is None:
            parts.append(x)
        elif t is not None:
            _need_tensor(t, "diff", name)
            if t.ndim != x.ndim:
                raise RuntimeError(f"diff(): expects prepend or append to be the same dimension as input ({name} has "
                                   f"{t.ndim} dims, input {x.ndim})")
            parts.append(t)
    if len(parts) > 1:
        x = cat(parts, d)
    for _ in range(n):
        if x.shape[d] == 0:
            break
        a, b = _slice(x, d, 1, None), _slice(x, d, None, -1)
        x = (a ^ b) if x._data.dtype == np.bool_ else a - b
    return x


def _trapezoid_spacing(y: Tensor, x: Tensor, d: int, op: str) -> Tensor:
    """The spacings x[i+1] - x[i] laid out to broadcast against y's intervals along d (a 1-D x runs along d)."""
    _need_tensor(x, op, "x")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{op}(): There must be one `x` value for each sample point (x has {x.shape[0]}, y has "
                               f"{y.shape[d]} along dim {d})")
        return diff(x).reshape((-1,) + (1,) * (y.ndim - 1 - d))
    xd = d - y.ndim + x.ndim
    if xd < 0 or x.shape[xd] != y.shape[d]:
        raise RuntimeError(f"{op}(): There must be one `x` value for each sample point (x of shape {list(x.shape)}, "
                           f"y of shape {list(y.shape)}, dim {d})")
    return diff(x, dim=xd)


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """∫ y along dim by the trapezoidal rule: Σ (y[i] + y[i+1])/2 · Δᵢ, with Δᵢ = x[i+1] - x[i] for sample points
    x (1-D along dim, or broadcasting with y), else the constant spacing dx (default 1)."""
    y = _check(y, "trapezoid")
    if x is not None and dx is not None:
        raise TypeError("trapezoid(): give either the sample points x or the spacing dx, not both")
    if y.ndim == 0:
        raise IndexError("trapezoid(): Dimension out of range: y must have at least one dimension")
    d = normalize_dim(dim, y.ndim, "trapezoid")
    if not dt.is_float(y._data.dtype):
        y = _float(y)
    if y.shape[d] == 0:
        return y.sum(d) * 0
    mid = _slice(y, d, 1, None) + _slice(y, d, None, -1)
    if x is None:
        return mid.sum(d) * (0.5 * (1 if dx is None else dx))
    return (mid * _trapezoid_spacing(y, x, d, "trapezoid")).sum(d) * 0.5


def trapz(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """trapezoid under its older name (x, or dx, keyword-only)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral of y along dim (one element fewer than y there)."""
    from .reduce import cumsum
    y = _check(y, "cumulative_trapezoid")
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid(): give either the sample points x or the spacing dx, not both")
    if y.ndim == 0:
        raise IndexError("cumulative_trapezoid(): Dimension out of range: y must have at least one dimension")
    d = normalize_dim(dim, y.ndim, "cumulative_trapezoid")
    if not dt.is_float(y._data.dtype):
        y = _float(y)
    if y.shape[d] == 0:
        return y
    mid = _slice(y, d, 1, None) + _slice(y, d, None, -1)
    step = (0.5 * (1 if dx is None else dx)) if x is None else _trapezoid_spacing(y, x, d, "cumulative_trapezoid") * 0.5
    return cumsum(mid * step, d)


# ---------------------------------------------------------------------- no derivative in PyTorch: Bessel, Airy, polynomials
class _ScipyUnary(Op):
    """z = scipy.special.<name>(x) (Bessel J, Y, K and Airy functions); PyTorch does not differentiate these."""

    saves_inputs = False

    def forward(self, x, name, api):
        return S.scipy_unary_array(name, api, x)

    def jvp(self, t, *inputs):
        return None  # no derivative (the result does not require grad either): no tangent


class _SphericalJ0(Op):
    """z = sin(x)/x; PyTorch does not differentiate it."""

    saves_inputs = False

    def forward(self, x):
        return S.spherical_j0_array(x)

    def jvp(self, t, *inputs):
        return None  # no derivative (the result does not require grad either): no tangent


class _Polynomial(Op):
    """z = p_n(x) for a classical orthogonal polynomial family; PyTorch does not differentiate these."""

    saves_inputs = False

    def forward(self, x, n, kind):
        return S.polynomial_array(kind, x, n)

    def jvp(self, t, *inputs):
        return None  # no derivative (the result does not require grad either): no tangent


def scipy_unary(name: str, scipy_name: str):
    """ember.special.<name>(input) through scipy.special.<scipy_name> (RuntimeError without SciPy)."""
    api = f"ember.special.{name}"

    def fn(input: Tensor) -> Tensor:
        x = _check(input, name)
        S.special_fn(scipy_name, api, x._data)  # (raises now, even when the op is deferred)
        if not dt.is_float(x._data.dtype):
            x = _float(x)
        return _no_grad(_ScipyUnary, (x, scipy_name, api), (x._data, scipy_name, api))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"scipy.special.{scipy_name} (needs SciPy); no gradient, as in PyTorch."
    return fn


def spherical_bessel_j0(input: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, sin(x)/x; no gradient, as in PyTorch."""
    x = _check(input, "spherical_bessel_j0")
    if not dt.is_float(x._data.dtype):
        x = _float(x)
    return _no_grad(_SphericalJ0, (x,), (x._data,))


def polynomial(kind: str):
    """ember.special.<kind>_polynomial_<letter>(input, n): the degree-n polynomial at input (input and n broadcast:
    each a Tensor or a number; n is truncated to an integer, and negative degrees give 0)."""
    name = kind.replace("_", "_polynomial_", 1) if not kind.startswith("shifted_") else \
        "shifted_" + kind[len("shifted_"):].replace("_", "_polynomial_", 1)

    def fn(input, n) -> Tensor:
        _scalar_pair(input, n, name)
        xa = input._data if isinstance(input, Tensor) else input
        na = n._data if isinstance(n, Tensor) else n
        d = dt.result_type(xa, na)  # PyTorch's promotion of the pair (a float result: the default float dtype)
        if not dt.is_float(d):
            d = dt.NP_DEFAULT_FLOAT
        if isinstance(input, Tensor):
            x = input if input._data.dtype == d else input.to(dt.FROM_NP[d])
        else:  # a number: the tensor n sets the device
            x = make(array_module(na).asarray(input, d))
        return _no_grad(_Polynomial, (x, n, kind), (x._data, na, kind))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = polynomial.__doc__.replace("<kind>_polynomial_<letter>", name)
    return fn


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """x.polygamma(n) = polygamma(n, x)."""
    return polygamma(n, self)


EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=[n for n in __all__ if n not in ("std_mean", "var_mean", "trapezoid", "trapz", "cumulative_trapezoid",
                                             "rsub", "polygamma")],
    aliases={"polygamma": _polygamma_method, "polygamma_": unary_in_place(_polygamma_method, "polygamma", Polygamma),
             "float_power_": float_power_},
    # Tensor.<name>_ (e.g. x.lgamma_()), built by inplace.unary_in_place from the function and its Op class; the
    # compositions (addcmul, ...) name Op: their old values are kept for the gradient (Op.saves_inputs)
    in_place={"asin": Asin, "acos": Acos, "atan": Atan, "arcsin": Asin, "arccos": Acos, "arctan": Atan,
              "asinh": Asinh, "acosh": Acosh, "atanh": Atanh, "arcsinh": Asinh, "arccosh": Acosh, "arctanh": Atanh,
              "sinh": Sinh, "cosh": Cosh, "erfc": Erfc, "erfinv": Erfinv, "lgamma": Lgamma, "digamma": Digamma,
              "mvlgamma": Op, "i0": I0, "sinc": Sinc, "logit": Logit, "frac": Frac, "sgn": Sgn, "deg2rad": Op,
              "rad2deg": Op, "exp2": Exp2, "xlogy": Xlogy, "hypot": Hypot, "heaviside": Heaviside,
              "copysign": Copysign, "gcd": Gcd, "lcm": Lcm, "ldexp": Ldexp, "nextafter": Nextafter, "igamma": Igamma,
              "igammac": Igamma, "addcmul": Op, "addcdiv": Op,
              # unary.py's functions that had no in-place form
              "erf": Erf, "expm1": Expm1, "log1p": Log1p, "log2": Log2, "log10": Log10, "rsqrt": Rsqrt, "tan": Tan,
              "fix": Trunc})
