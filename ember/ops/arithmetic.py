"""Elementwise binary arithmetic, comparison and logic, with broadcasting and PyTorch's type promotion.

Binary ops go through `binary`, which promotes dtypes as PyTorch does, runs the op's
forward on arrays and records a `BinaryOp` node whose gradients are reduced back to
each input's shape and dtype (`sum_to`) after backward.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import TENSOR_TYPES, Tensor, make
from ..backend import on_device_of
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .registry import Exports
from .._capture import traced

_new = object.__new__
_ndarray = np.ndarray
_generic = np.generic
_SCALARS = (int, float, bool)


# ---------------------------------------------------------------------- promotion and broadcasting
def _operand(v, op: str):
    """A Tensor or a Python number; arrays and NumPy scalars become Tensors."""
    if isinstance(v, Tensor) or type(v) in _SCALARS:
        return v
    if isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "__cuda_array_interface__") or hasattr(v, "__ember_array__"):
        return _array_operand(v, op)
    if isinstance(v, (int, float)):  # subclasses (e.g. IntEnum)
        return float(v) if isinstance(v, float) else int(v)
    raise TypeError(f"{op}(): unsupported operand type {type(v).__name__}; expected a Tensor or a number")


@traced
def _array_operand(v, op: str) -> Tensor:
    """An array or NumPy scalar operand as a Tensor (a constant: a capture records it as a call)."""
    from .._tensor import to_array
    return make(to_array(v, None, op))


def _promoted(x, y, op: str):
    """Arrays (or Python numbers) x, y cast to PyTorch's result dtype of the pair."""
    xa, ya = type(x) is not _ndarray and not hasattr(x, "dtype"), type(y) is not _ndarray and not hasattr(y, "dtype")
    target = dt.result_type(x, y)
    if not xa and x.dtype != target:
        x = x.astype(target)
    if not ya and y.dtype != target:
        y = y.astype(target)
    elif ya and dt.is_float(target) and isinstance(y, bool):
        y = float(y)
    if xa and dt.is_float(target) and isinstance(x, bool):
        x = float(x)
    return x, y


def check_broadcast(x, y, op: str) -> None:
    """After an op failed with a ValueError: PyTorch's error for operands on two devices or shapes that do not
    broadcast (CuPy reports arrays on two GPUs as a ValueError too)."""
    backend.check_same_device(op, (x, y))
    try:
        np.broadcast_shapes(np.shape(x), np.shape(y))
    except ValueError:
        raise RuntimeError(f"{op}(): the size of tensor a {list(np.shape(x))} must match the size of tensor b "
                           f"{list(np.shape(y))} at a non-singleton dimension (shapes cannot be broadcast together)") from None


class BinaryOp(Op):
    """An elementwise op of two operands (Tensors or numbers) that broadcast."""

    saves_inputs = False
    reduces_grads = True  # operands broadcast and are promoted: their gradients are reduced back (Op._reduce)
    rounds_scalars = True  # 16-bit floats: a Python float operand is rounded to their dtype first (`dispatch`)
    # `forward(x, y)`: in most subclasses the NumPy ufunc itself (`forward = np.add`): a ufunc is not a
    # method, so `node.forward(x, y)` calls it directly, with no Python frame between the op and NumPy


def binary(cls, a, b, name: str) -> Tensor:
    """Apply a BinaryOp to a and b (at least one a Tensor): promote, compute, record."""
    if not isinstance(a, Tensor):
        a = _operand(a, name)
    if not isinstance(b, Tensor):
        b = _operand(b, name)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    x = a._data if ta else a
    y = b._data if tb else b
    if ta and tb:
        if x.__class__ is not y.__class__:
            backend.check_same_device(name, (x, y))
        if x.dtype is not y.dtype:
            x, y = _promoted(x, y, name)
    elif ta:
        if not dt.is_float(x.dtype) or y.__class__ is bool:
            x, y = _promoted(x, y, name)
    else:
        if not dt.is_float(y.dtype) or x.__class__ is bool:
            x, y = _promoted(x, y, name)
    try:
        return dispatch(_new(cls), (a, b), (x, y))
    except ValueError:
        check_broadcast(x, y, name)
        raise
    except OverflowError:
        # a Python int outside an integer tensor's range (uint8 + -3) wraps around, as in PyTorch
        d = x.dtype if hasattr(x, "dtype") else y.dtype
        # as a NumPy scalar, which a device array accepts as it is (no allocation on any device)
        x, y = (np.asarray(v).astype(d)[()] if v.__class__ is int else v for v in (x, y))
        return dispatch(_new(cls), (a, b), (x, y))


def _binop(cls, name: str, slow=None):
    """The operator function of a BinaryOp, with the type checks of the common case inline:
    float tensors of one dtype, or a float tensor and a Python number, need no promotion and go
    straight to `dispatch`. Everything else, errors included, goes to `slow` (default: `binary`,
    which promotes and raises ember's errors)."""
    if slow is None:
        def slow(input, other):
            return binary(cls, input, other, name)

    def op(input, other):
        # (NumPy keeps a Python number "weak", as PyTorch does, so no promotion work is needed)
        ic, oc = input.__class__, other.__class__
        if ic is Tensor:
            x = input._data
            if oc is Tensor:
                y = other._data
                d = x.dtype
                if d is not y.dtype or d.kind != "f":
                    return slow(input, other)
            elif (oc is float or oc is int) and x.dtype.kind == "f":
                y = other
            else:
                return slow(input, other)
        elif oc is Tensor and (ic is float or ic is int):
            x, y = input, other._data
            if y.dtype.kind != "f":
                return slow(input, other)
        else:
            return slow(input, other)
        try:
            return dispatch(_new(cls), (input, other), (x, y))
        except (ValueError, TypeError):
            return slow(input, other)  # raises ember's error

    op.__name__ = op.__qualname__ = name
    op.__doc__ = cls.__doc__
    return op


def _array(r):
    """A ufunc's result as an array (NumPy gives a scalar for 0-d operands)."""
    return np.asarray(r) if isinstance(r, _generic) else r


def tangent_or_zeros(t, x: Tensor) -> Tensor:
    """In `jvp`: input x's tangent `t`, or zeros shaped as x where it has none (the number 0)."""
    if isinstance(t, Tensor):
        return t
    with on_device_of(x._data):
        return make(backend.array_module(x._data).zeros(x._data.shape, x._data.dtype))


# ---------------------------------------------------------------------- differentiable binary ops
class Add(BinaryOp):
    """z = x + y;  dz/dx = 1, dz/dy = 1."""

    forward = np.add

    jvp = Op.elementwise_jvp  # (x op y)' = dz/dx x' + dz/dy y'

    def backward(self, gz):
        return gz, gz


class Sub(BinaryOp):
    """z = x - y;  dz/dx = 1, dz/dy = -1."""

    forward = np.subtract

    jvp = Op.elementwise_jvp  # (x op y)' = dz/dx x' + dz/dy y'

    def backward(self, gz):
        return gz, (-gz if self.needs(1) else None)


class Mul(BinaryOp):
    """z = x * y;  dz/dx = y, dz/dy = x."""

    saves_inputs = True
    rounds_scalars = False  # (16-bit floats: a Python number takes part unrounded, as in PyTorch's kernel)

    forward = np.multiply

    jvp = Op.elementwise_jvp  # (x op y)' = dz/dx x' + dz/dy y'

    def backward(self, gz, x, y):
        nx = self.next
        return (gz * y if nx[0] is not None else None), (gz * x if nx[1] is not None else None)

    def fast_backward(self, gz, x, y):
        """`backward` on the arrays, in gz's dtype (ember's promotion: an integer or narrower float factor
        does not widen it); broadcast inputs are summed back by `_reduce` as for `backward`. It skips two
        Mul ops: ~1.2 µs per call, most of this backward on small tensors (the 100-op chain)."""
        g = gz._data
        if g.dtype.kind != "f" or g.dtype.itemsize == 2:  # (16-bit floats: `backward`'s ops round as PyTorch's)
            return self.backward(gz, x, y)
        nx = self.next
        gx = gy = None
        if nx[0] is not None:
            gx = make(_array(np.multiply(g, y._data if y.__class__ in TENSOR_TYPES else y, dtype=g.dtype)))
        if nx[1] is not None:
            gy = make(_array(np.multiply(g, x._data if x.__class__ in TENSOR_TYPES else x, dtype=g.dtype)))
        return gx, gy


class Div(BinaryOp):
    """z = x / y;  dz/dx = 1/y, dz/dy = -x/y²."""

    saves_inputs = True
    rounds_scalars = False  # (16-bit floats: a Python number takes part unrounded, as in PyTorch's kernel)

    def forward(self, x, y):
        if getattr(x, "dtype", None) is not None and not dt.is_float(x.dtype) and (getattr(y, "dtype", None) is None or not dt.is_float(y.dtype)):
            # true division of integers gives the default float dtype (both sides: NumPy's int32 / float32 is float64)
            x = x.astype(dt.NP_DEFAULT_FLOAT)
            if getattr(y, "dtype", None) is not None:
                y = y.astype(dt.NP_DEFAULT_FLOAT)
        elif getattr(y, "dtype", None) is not None and not dt.is_float(y.dtype) and not isinstance(x, float):
            y = y.astype(dt.NP_DEFAULT_FLOAT)
        return x / y

    jvp = Op.elementwise_jvp  # (x op y)' = dz/dx x' + dz/dy y'

    def backward(self, gz, x, y):
        gx = gz / y if self.needs(0) else None
        gy = -gz * x / (y * y) if self.needs(1) else None
        return gx, gy


class Pow(BinaryOp):
    """z = x ** y;  dz/dx = y·x^(y-1), dz/dy = z·ln x (taken as 0 where x = 0 and y ≥ 0, as PyTorch does)."""

    saves_inputs = True

    def forward(self, x, y):
        if _is_bool(x) and _is_bool(y):
            if y.__class__ is not bool:
                raise NotImplementedError("pow(): not implemented for two bool tensors; convert them with .int() first")
            if y:
                return x.copy()  # x ** True = x, x ** False = True (as PyTorch, bool result)
            with on_device_of(x):
                return backend.array_module(x).ones_like(x)
        if isinstance(y, int) and not isinstance(y, bool) and y < 0 and getattr(x, "dtype", np.dtype("f")).kind in "iub":
            raise RuntimeError("pow(): Integers to negative integer powers are not allowed.")
        if (hasattr(y, "dtype") and y.dtype.kind == "i" and (isinstance(x, int) or getattr(x, "dtype", np.dtype("f")).kind in "iub")
                and y.size and (y < 0).any()):
            return _int_pow_negative(x, y)
        if (y.__class__ is int and 3 <= y <= 4 and x.__class__ is not int and x.__class__ is not float
                and dt.is_float(x.dtype)):
            # NumPy's float power goes to libm's pow, whose integer-exponent path for a negative base costs ~60 ns an
            # element (x ** 3 on 1M floats: 62 ms, x * x * x: 0.2 ms): the cube and fourth power by products, as
            # PyTorch's pow kernel does (within an ulp of pow; NumPy already special-cases 2, 0.5, -1)
            x2 = x * x
            return x2 * x if y == 3 else x2 * x2
        return x ** y

    jvp = Op.elementwise_jvp  # z' = dz/dx x' + dz/dy y', with backward's conventions at the singular points

    def backward(self, gz, x, y):
        # PyTorch's conventions at the singular points: dz/dx = 0 where y = 0 (also at x = 0), and
        # dz/dy = 0 where x = 0 and y >= 0 (z ln x would be 0 * -inf); for y < 0 it is -inf there.
        gx = gy = None
        if self.needs(0):
            if isinstance(y, (int, float)):
                gx = gz * (y * x ** (y - 1)) if y != 0 else gz * 0.0
            else:
                gx = gz * where(y == 0, 0.0, y * x ** (y - 1))
        if self.needs(1):
            if isinstance(x, (int, float)):
                if x == 0:
                    gy = gz * where(y >= 0, 0.0, float("-inf"))
                else:
                    gy = gz * (x ** y) * (math.log(x) if x > 0 else float("nan"))
            else:
                zero = (x == 0) & (y >= 0)
                safe = where(zero, 1.0, x)  # keeps ln out of the masked points, so double backward has no 0 * inf
                gy = gz * where(zero, 0.0, (x ** y) * safe.log())
        return gx, gy


class Maximum(BinaryOp):
    """z = max(x, y);  the gradient goes to the larger input (split equally on ties, as PyTorch does)."""

    saves_inputs = True

    forward = np.maximum

    jvp = Op.elementwise_jvp  # z' = the larger input's tangent (the mean of both on a tie, as backward splits gz)

    def backward(self, gz, x, y):
        return _minmax_grads(self, gz, x, y, x < y, x > y)


class Minimum(BinaryOp):
    """z = min(x, y);  the gradient goes to the smaller input (split equally on ties)."""

    saves_inputs = True

    forward = np.minimum

    jvp = Op.elementwise_jvp  # z' = the smaller input's tangent (the mean of both on a tie)

    def backward(self, gz, x, y):
        return _minmax_grads(self, gz, x, y, x > y, x < y)


def _minmax_grads(node, gz, x, y, x_loses, y_loses):
    """PyTorch's rule: each input gets gz unless it lost, half of it on a tie; where either is NaN neither lost,
    so both get gz (the result is NaN there either way)."""
    share = where(x == y, 0.5, 1.0).to(gz.dtype)
    gx = gz * where(x_loses, 0.0, share).to(gz.dtype) if node.needs(0) else None
    gy = gz * where(y_loses, 0.0, share).to(gz.dtype) if node.needs(1) else None
    return gx, gy


class Remainder(BinaryOp):
    """z = x mod y (sign of y, as Python and PyTorch);  dz/dx = 1, dz/dy = -floor(x / y)."""

    saves_inputs = True

    def forward(self, x, y):
        _check_int_zero(y, x, "remainder")
        return np.mod(x, y)

    jvp = Op.elementwise_jvp  # z' = x' - floor(x / y) y'

    def backward(self, gz, x, y):
        return gz, (-gz * (x / y).floor() if self.needs(1) else None)


class Fmod(BinaryOp):
    """z = x - trunc(x / y)·y (sign of x, as C's fmod);  dz/dx = 1, dz/dy = -trunc(x / y)."""

    saves_inputs = True

    def forward(self, x, y):
        _check_int_zero(y, x, "fmod")
        return np.fmod(x, y)

    jvp = Op.elementwise_jvp  # z' = x' - trunc(x / y) y'

    def backward(self, gz, x, y):
        return gz, (-gz * (x / y).trunc() if self.needs(1) else None)


class Atan2(BinaryOp):
    """z = atan2(x, y), the angle of the point (y, x) (x is the ordinate);  with r = 1/(x² + y²),
    dz/dx = y·r, dz/dy = -x·r. At the origin r is taken as 0 (so both gradients are ±0), as PyTorch does."""

    saves_inputs = True

    def forward(self, x, y):
        # integer and bool operands give the default float dtype, as in PyTorch (NumPy would give float64)
        if (getattr(x, "dtype", None) is None or not dt.is_float(x.dtype)) and (getattr(y, "dtype", None) is None or not dt.is_float(y.dtype)):
            if getattr(x, "dtype", None) is not None:
                x = x.astype(dt.NP_DEFAULT_FLOAT)
            if getattr(y, "dtype", None) is not None:
                y = y.astype(dt.NP_DEFAULT_FLOAT)
        return np.arctan2(x, y)

    jvp = Op.elementwise_jvp  # z' = (y x' - x y') / (x² + y²)

    def backward(self, gz, x, y):
        # integer inputs are computed in the gradient's float dtype (x·x would overflow an int32)
        if isinstance(x, Tensor) and not dt.is_float(x._data.dtype):
            x = x.to(gz.dtype)
        if isinstance(y, Tensor) and not dt.is_float(y._data.dtype):
            y = y.to(gz.dtype)
        denom = x * x + y * y
        recip = where(denom == 0, 0.0, denom.reciprocal()) if isinstance(denom, Tensor) else (1.0 / denom if denom else 0.0)
        gx = gz * y * recip if self.needs(0) else None
        gy = gz * -x * recip if self.needs(1) else None
        return gx, gy


def _int_pow_negative(x, y):
    """Integer x ** y where some exponents are negative (a tensor exponent: PyTorch defines it, NumPy raises):
    the truncated integer power, so 1 ** -n = 1, (-1) ** -n = ±1 by parity, anything else (0 included) gives 0."""
    xp = backend.array_module(y)
    with on_device_of(y):
        neg = y < 0
        z = np.power(x, xp.where(neg, 0, y).astype(y.dtype, copy=False))
        small = xp.where(x == 1, 1, xp.where(x == -1, xp.where(y % 2 == 0, 1, -1), 0))
        return xp.where(neg, small, z).astype(z.dtype, copy=False)


def _is_bool(v) -> bool:
    return v.__class__ is bool or getattr(v, "dtype", None) == np.bool_


def _check_int_zero(y, x, op):
    if _is_bool(x) and _is_bool(y):
        raise NotImplementedError(f"{op}(): not implemented for two bool operands; convert them with .int() first")
    ints = getattr(x, "dtype", None) is not None and x.dtype.kind in "iub" or isinstance(x, int)
    if ints and (getattr(y, "dtype", None) is not None and y.dtype.kind in "iub" or isinstance(y, int)):
        # an empty operand means an empty result: nothing is divided, so nothing can fail (as PyTorch)
        # a Python bool from a device array synchronises, acceptable for an integer division's check
        if np.size(x) and np.size(y) and bool((y == 0).any() if hasattr(y, "any") else y == 0):
            raise RuntimeError(f"ZeroDivisionError: integer {op} by zero")


# ---------------------------------------------------------------------- non-differentiable binary ops
class _NonDiff(BinaryOp):
    """Ops with no gradient: the result never requires grad."""

    def jvp(self, t, x, y):
        # piecewise constant (comparisons, floor division, bitwise ops): a float result's tangent is zero wherever
        # it is defined (PyTorch's div(rounding_mode='floor')); a bool or integer result carries none
        return 0


def _nondiff(cls, a, b, name: str) -> Tensor:
    prev = MODE.grad
    MODE.grad = False
    try:
        return binary(cls, a, b, name)
    finally:
        MODE.grad = prev


def _fn_op(fn, name: str, check_zero: bool = False):
    def forward(self, x, y):
        if check_zero:
            _check_int_zero(y, x, name)
        return fn(x, y)
    return type(name.title().replace("_", ""), (_NonDiff,), {"forward": forward})


FloorDivide = _fn_op(np.floor_divide, "floor_divide", check_zero=True)
Eq, Ne = _fn_op(np.equal, "eq"), _fn_op(np.not_equal, "ne")
Lt, Le = _fn_op(np.less, "lt"), _fn_op(np.less_equal, "le")
Gt, Ge = _fn_op(np.greater, "gt"), _fn_op(np.greater_equal, "ge")


def _logical(fn, name: str):
    def forward(self, x, y):
        for v in (x, y):
            k = getattr(v, "dtype", None)
            if (k is not None and dt.is_float(k)) or isinstance(v, float):
                raise TypeError(f"{name}(): bitwise and logical operators need bool or integer tensors, got a float operand; "
                                f"use logical_{name.split('_')[-1]}() or compare first")
        return fn(x, y)
    return type(name.title().replace("_", ""), (_NonDiff,), {"forward": forward})


BitwiseAnd, BitwiseOr, BitwiseXor = (_logical(np.bitwise_and, "bitwise_and"), _logical(np.bitwise_or, "bitwise_or"),
                                     _logical(np.bitwise_xor, "bitwise_xor"))
LogicalAnd, LogicalOr, LogicalXor = (_fn_op(np.logical_and, "logical_and"), _fn_op(np.logical_or, "logical_or"),
                                     _fn_op(np.logical_xor, "logical_xor"))


# ---------------------------------------------------------------------- sum_to and where
_GEMV_MIN = 4096  # below this size np.sum is as fast and the GEMV setup dominates


_ONES: dict = {}


def ones_vector(n: int, dtype) -> np.ndarray:
    """A read-only vector of n ones, cached per dtype (grown as needed) for GEMV sums."""
    v = _ONES.get(dtype)
    if v is None or v.size < n:
        v = np.ones(max(n, 2 * (0 if v is None else v.size)), dtype)
        v.flags.writeable = False
        _ONES[dtype] = v
    return v[:n]


def sum_array(x, axes: tuple, keepdim: bool):
    """x summed over sorted `axes`, bool/int accumulating in int64 and float16 in float32 (PyTorch's rules: a float16
    sum or mean whose partial sums pass 65504 is still right when the result fits), with a GEMV fast path."""
    if x.dtype.kind in "biu":
        return x.sum(axis=axes, dtype=dt.NP_INT64, keepdims=keepdim)
    if x.dtype == np.float16:
        return x.sum(axis=axes, dtype=np.float32, keepdims=keepdim).astype(np.float16)
    n = len(axes)
    if (0 < n < x.ndim and axes[-1] == n - 1 and x.size >= _GEMV_MIN and type(x) is np.ndarray
            and dt.is_float(x.dtype) and x.dtype.itemsize >= 4 and x.flags.c_contiguous):
        # sums over leading axes (column sums of a tall array): one GEMV is far faster than
        # np.sum(axis=0), which strides across rows (float32 (100352, 16): 2.0 ms against 0.08 ms for
        # `ones @ x`, measured with timeit on the 2-core reference machine, NumPy 2.x with OpenBLAS)
        rest = x.shape[n:]
        out = ones_vector(math.prod(x.shape[:n]), x.dtype) @ x.reshape(-1, math.prod(rest))
        return out.reshape((1,) * n + rest if keepdim else rest)
    return x.sum(axis=None if n == x.ndim else axes, keepdims=keepdim)


class SumTo(Op):
    """z = g summed over the broadcast dimensions so that z.shape == shape;  dz/dg: broadcast back."""

    saves_inputs = False

    def forward(self, g, shape):
        self.in_shape = g.shape
        lead = g.ndim - len(shape)
        if lead < 0:
            raise RuntimeError(f"sum_to: cannot reduce shape {list(g.shape)} to the larger shape {list(shape)}")
        axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
        if not axes:
            return g.reshape(shape)
        return sum_array(g, axes, True).reshape(shape)

    jvp = Op.linear_jvp  # linear: the tangent summed the same way

    def backward(self, gz):
        return broadcast_to(gz, self.in_shape)


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Reduce g (a broadcast result) to `shape` by summing the broadcast dimensions."""
    if g.shape == tuple(shape):
        return g
    return SumTo.apply(g, tuple(shape))


class BroadcastTo(Op):
    """z = x broadcast to `shape` (a read-only view);  dz/dx = sum_to(gz, x.shape)."""

    saves_inputs = False

    def forward(self, x, shape):
        self.in_shape = x.shape
        try:
            return backend.array_module(x).broadcast_to(x, shape)
        except ValueError:
            raise RuntimeError(f"expand/broadcast_to: the expanded size of the tensor must match the existing size "
                               f"at non-singleton dimensions: cannot broadcast {list(x.shape)} to {list(shape)}") from None

    jvp = Op.linear_jvp  # linear: the tangent broadcast the same way

    def backward(self, gz):
        return sum_to(gz, self.in_shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return BroadcastTo.apply(x, shape)


class Where(Op):
    """z = cond ? x : y;  dz/dx = cond, dz/dy = not cond."""

    def forward(self, cond, x, y):
        return backend.array_module(cond).where(cond, x, y)

    jvp = Op.linear_jvp  # z' = cond ? x' : y' (the condition is kept)

    def backward(self, gz, cond, x, y):
        gx = sum_to(where(cond, gz, 0.0), x.shape) if self.needs(1) else None
        gy = sum_to(where(cond, 0.0, gz), y.shape) if self.needs(2) else None
        return None, gx, gy


@traced
def _condition(cond, like) -> Tensor:
    """A Python/NumPy condition as a bool-able Tensor on `like`'s device (a capture records it as a call)."""
    cond = np.asarray(cond)
    return make(cond if like is None else backend.transfer(cond, backend.device_of(like)))


def where(condition, input=None, other=None) -> Tensor:
    """Elementwise `input` where `condition` else `other`; `where(condition)` gives the indices of true elements."""
    if input is None and other is None:
        from .indexing import nonzero
        return nonzero(condition, as_tuple=True)
    # constants (a Python/NumPy condition, scalar input/other) are made on the device of the tensors given
    like = next((t._data for t in (condition, input, other) if isinstance(t, Tensor)), None)
    xp = np if like is None else backend.array_module(like)
    cond = condition
    if not isinstance(cond, Tensor):
        cond = _condition(cond, like)
    if cond._data.dtype != np.bool_:
        if cond._data.dtype != np.uint8:
            raise RuntimeError(f"where(): expected condition to be a bool tensor, got a tensor with dtype {cond.dtype}")
        # PyTorch still accepts a uint8 mask (deprecated, with a warning), read as nonzero = True
        import warnings
        warnings.warn("where(): received a uint8 condition tensor; this is deprecated, use a bool condition instead",
                      UserWarning, stacklevel=2)
        cond = make(cond._data != 0)
    x, y = _operand(input, "where"), _operand(other, "where")
    xd, yd = (x._data if isinstance(x, Tensor) else x), (y._data if isinstance(y, Tensor) else y)
    target = dt.result_type(xd, yd)
    try:
        np.broadcast_shapes(cond.shape, np.shape(xd), np.shape(yd))
    except ValueError:
        raise RuntimeError(f"where(): condition {list(cond.shape)}, input {list(np.shape(xd))} and other "
                           f"{list(np.shape(yd))} cannot be broadcast together") from None
    with on_device_of(like):
        x, y = ((v if v._data.dtype == target else v.to(dt.FROM_NP[target])) if isinstance(v, Tensor)
                else make(xp.asarray(v, target)) for v in (x, y))
    return Where.apply(cond, x, y)


# ---------------------------------------------------------------------- public functions
def add(input, other, *, alpha=1) -> Tensor:
    """input + alpha * other."""
    return _add(input, other if alpha == 1 else other * alpha)


def check_bool_sub(a, b) -> None:
    if (a._data.dtype == np.bool_ if isinstance(a, Tensor) else _is_bool(a)) or \
            (b._data.dtype == np.bool_ if isinstance(b, Tensor) else _is_bool(b)):
        raise RuntimeError("sub(): subtraction, the `-` operator, with a bool tensor or bool value is not supported; "
                           "to invert a mask use `~` or logical_not(), to compare two masks use `^` or logical_xor()")


def sub(input, other, *, alpha=1) -> Tensor:
    """input - alpha * other."""
    check_bool_sub(input, other)
    return binary(Sub, input, other if alpha == 1 else other * alpha, "sub")


def mul(input, other) -> Tensor:
    return _mul(input, other)


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """input / other; rounding_mode 'floor' or 'trunc' rounds the quotient (no gradient)."""
    if rounding_mode is None:
        return _div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        q = _nondiff(Div, input, other, "div")
        t = input if isinstance(input, Tensor) else other
        r = q.trunc()  # (piecewise constant: a zero tangent under forward AD, as floor's)
        return r if q._data.dtype == t._data.dtype or dt.is_float(t._data.dtype) else r.to(dt.FROM_NP[t._data.dtype])
    raise ValueError(f"div(): rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


divide, multiply, subtract = div, mul, sub


def true_divide(input, other) -> Tensor:
    return binary(Div, input, other, "true_divide")


def pow(input, exponent) -> Tensor:
    return _pow(input, exponent)


def maximum(input, other) -> Tensor:
    return binary(Maximum, input, other, "maximum")


def minimum(input, other) -> Tensor:
    return binary(Minimum, input, other, "minimum")


def remainder(input, other) -> Tensor:
    return binary(Remainder, input, other, "remainder")


def fmod(input, other) -> Tensor:
    """Remainder with the sign of the dividend (C's fmod): x - trunc(x / y) * y."""
    return binary(Fmod, input, other, "fmod")


def atan2(input, other) -> Tensor:
    """Elementwise arctangent of input / other, in (-π, π], with the quadrant taken from both signs
    (input is the ordinate y, other the abscissa x). Broadcasts; integer inputs give the default float dtype."""
    return binary(Atan2, input, other, "atan2")


arctan2 = atan2


def atan2_(self: Tensor, other) -> Tensor:
    """In-place atan2: self becomes atan2(self, other); self must be floating point and of the broadcast shape."""
    from .inplace import check_writable, commit, refuse_view_write, old_input
    check_writable(self, "atan2_")
    if MODE.grad and (self._requires_grad or (isinstance(other, Tensor) and other._requires_grad)):
        if self._base is not None:
            refuse_view_write(self, "atan2_")
        return commit(self, binary(Atan2, old_input(self, Atan2), other, "atan2_"), "atan2_")
    return commit(self, binary(Atan2, self, other, "atan2_"), "atan2_")


def floor_divide(input, other) -> Tensor:
    return _nondiff(FloorDivide, input, other, "floor_divide")


def eq(input, other) -> Tensor:
    return _nondiff(Eq, input, other, "eq")


def ne(input, other) -> Tensor:
    return _nondiff(Ne, input, other, "ne")


def lt(input, other) -> Tensor:
    return _nondiff(Lt, input, other, "lt")


def le(input, other) -> Tensor:
    return _nondiff(Le, input, other, "le")


def gt(input, other) -> Tensor:
    return _nondiff(Gt, input, other, "gt")


def ge(input, other) -> Tensor:
    return _nondiff(Ge, input, other, "ge")


def bitwise_and(input, other) -> Tensor:
    return _nondiff(BitwiseAnd, input, other, "bitwise_and")


def bitwise_or(input, other) -> Tensor:
    return _nondiff(BitwiseOr, input, other, "bitwise_or")


def bitwise_xor(input, other) -> Tensor:
    return _nondiff(BitwiseXor, input, other, "bitwise_xor")


def logical_and(input, other) -> Tensor:
    return _nondiff(LogicalAnd, input, other, "logical_and")


def logical_or(input, other) -> Tensor:
    return _nondiff(LogicalOr, input, other, "logical_or")


def logical_xor(input, other) -> Tensor:
    return _nondiff(LogicalXor, input, other, "logical_xor")


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements."""
    backend.check_same_device("equal", (input._data, other._data))
    return input.shape == other.shape and bool(backend.array_module(input._data).array_equal(input._data, other._data))


def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """input + weight * (end - input)."""
    return input + weight * (end - input)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (`isclose`), as a Python bool."""
    return bool(_isclose(input, other, rtol, atol, equal_nan, "allclose").all())


@traced
def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|input - other| ≤ atol + rtol·|other| elementwise (a bool tensor; input and other broadcast and have one
    dtype). Infinities are close only to themselves; NaN to nothing, or to NaN when equal_nan. Integer and bool
    tensors are compared in the default float dtype, as in PyTorch."""
    return make(_isclose(input, other, rtol, atol, equal_nan, "isclose"))


def _isclose(input, other, rtol, atol, equal_nan, op: str):
    for pos, (name, v) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(v).__name__}")
    if not isinstance(equal_nan, bool):
        raise TypeError(f"{op}(): argument 'equal_nan' must be bool, not {type(equal_nan).__name__}")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not isinstance(tol, (int, float)) or isinstance(tol, bool):
            raise TypeError(f"{op}(): argument '{name}' must be a number, not {type(tol).__name__}")
        if tol < 0:
            raise RuntimeError(f"{op}(): {name} must be greater than or equal to zero, but got {tol}")
    x, y = input._data, other._data
    if x.dtype != y.dtype:
        raise RuntimeError(f"{op}(): input ({input.dtype}) and other ({other.dtype}) must have the same dtype "
                           f"({dt.FROM_NP[x.dtype]} did not match {dt.FROM_NP[y.dtype]}); convert one with .to()")
    backend.check_same_device(op, (x, y))
    check_broadcast(x, y, op)
    xp = backend.array_module(x)
    with on_device_of(x):
        close = x == y
        if equal_nan and dt.is_float(x.dtype):
            close |= xp.isnan(x) & xp.isnan(y)
        if rtol == 0 and atol == 0:
            return xp.asarray(close)
        if not dt.is_float(x.dtype) or x.dtype.itemsize < 4:  # integers and bool (and 16-bit floats: in float32)
            f = dt.NP_DEFAULT_FLOAT if not dt.is_float(x.dtype) else np.float32
            x, y = x.astype(f), y.astype(f)
        with np.errstate(all="ignore"):
            actual = xp.abs(x - y)
            close |= xp.isfinite(actual) & (actual <= atol + xp.abs(rtol * y))
        return xp.asarray(close)


_add, _mul, _div, _pow = _binop(Add, "add"), _binop(Mul, "mul"), _binop(Div, "div"), _binop(Pow, "pow")
_sub = _binop(Sub, "sub", slow=lambda a, b: sub(a, b))


# ---------------------------------------------------------------------- operators on Tensor
_COMPARABLE = (Tensor, int, float, np.ndarray, np.generic)


def _comparison(fn):
    """The operator form of a comparison: NotImplemented for a foreign operand (None, a string), so that
    Python falls back to identity for == and != and raises TypeError for <, as it does for PyTorch tensors."""
    def op(input, other):
        if not isinstance(other, _COMPARABLE) and not hasattr(other, "__cuda_array_interface__"):
            return NotImplemented
        return fn(input, other)
    op.__name__ = op.__qualname__ = fn.__name__
    return op


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=("add", "allclose", "arctan2", "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "div", "divide", "eq",
               "equal", "floor_divide", "fmod", "ge", "gt", "isclose", "le", "lerp", "logical_and", "logical_or",
               "logical_xor", "lt", "maximum", "minimum", "mul", "multiply", "ne", "pow", "remainder", "sub",
               "subtract", "true_divide", "where"),
    methods=("add", "sub", "mul", "div", "true_divide", "pow", "maximum", "minimum", "remainder", "fmod", "floor_divide",
             "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
             "logical_xor", "equal", "lerp", "allclose", "isclose", "atan2", "arctan2", "atan2_"),
    aliases={
        "__add__": _add, "__radd__": lambda a, b: _add(b, a),
        "__sub__": _sub, "__rsub__": lambda a, b: _sub(b, a),
        "__mul__": _mul, "__rmul__": lambda a, b: _mul(b, a),
        "__truediv__": _div, "__rtruediv__": lambda a, b: _div(b, a),
        "__pow__": _pow, "__rpow__": lambda a, b: _pow(b, a),
        "__floordiv__": floor_divide, "__rfloordiv__": lambda a, b: floor_divide(b, a),
        "__mod__": remainder, "__rmod__": lambda a, b: remainder(b, a),
        "__eq__": _comparison(eq), "__ne__": _comparison(ne), "__lt__": _comparison(lt),
        "__le__": _comparison(le), "__gt__": _comparison(gt), "__ge__": _comparison(ge),
        "__and__": lambda a, b: bitwise_and(a, b), "__rand__": lambda a, b: bitwise_and(a, b),
        "__or__": lambda a, b: bitwise_or(a, b), "__ror__": lambda a, b: bitwise_or(a, b),
        "__xor__": lambda a, b: bitwise_xor(a, b), "__rxor__": lambda a, b: bitwise_xor(a, b),
        "multiply": mul, "subtract": sub, "divide": div, "arctan2_": atan2_,
        "greater": gt, "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
        "where": lambda self, condition, other: where(condition, self, other),
    })
