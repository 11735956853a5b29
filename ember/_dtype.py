"""ember dtypes and PyTorch's type-promotion rules.

An ember dtype is a thin named handle on a NumPy dtype. Tensors store plain NumPy
(or CuPy) arrays; `Tensor.dtype` maps the array's dtype back to the ember handle.
"""
from __future__ import annotations

import builtins

import numpy as np
from ._capture import opaque

try:  # bfloat16 is ml_dtypes' NumPy dtype (the one JAX uses): an install requirement, but ember imports without it
    import ml_dtypes as _ml_dtypes
    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _ml_dtypes = _BF16 = None


class dtype:
    """A tensor element type (`ember.float32`, `ember.int64`, ...)."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_rank")

    def __init__(self, name: str, np_type, rank: int) -> None:
        self.name = name
        # bfloat16 without ml_dtypes has no NumPy dtype: `as_dtype` then says how to get one
        self.np = np.dtype(np_type) if np_type is not None else None
        # NumPy files bfloat16 under kind "V" (a user-defined dtype): `is_float` knows it is a float
        self.is_floating_point = name == "bfloat16" or self.np.kind == "f"
        self.is_signed = self.is_floating_point or self.np.kind == "i"
        self.itemsize = 2 if self.np is None else self.np.itemsize
        self._rank = rank  # order within a category, for promotion

    @property
    def is_complex(self) -> builtins.bool:
        return False  # ember has no complex dtypes

    def to_real(self) -> "dtype":
        return self

    def to_complex(self) -> "dtype":
        raise TypeError(f"{self!r}.to_complex(): ember has no complex dtypes")

    def __repr__(self) -> str:
        return "ember." + self.name

    def __reduce__(self):  # pickles (e.g. to DataLoader workers) as the singleton
        return (as_dtype, (self.name,))


bool = dtype("bool", np.bool_, 0)
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 2)
int32 = dtype("int32", np.int32, 3)
int64 = dtype("int64", np.int64, 4)
float16 = dtype("float16", np.float16, 1)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 3)
bfloat16 = dtype("bfloat16", _BF16, 1)
# PyTorch's aliases
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(half=float16, float=float32, double=float64, short=int16, int=int32, long=int64)
FROM_NP = {d.np: d for d in ALL if d.np is not None}
# the 16-bit floats, whose ops compute in float32 and round once (as PyTorch's CPU kernels do; see
# `autograd.function.dispatch`)
LOW_FLOATS = frozenset(d.np for d in (float16, bfloat16) if d.np is not None)
_DEFAULT_FLOAT = float32
NP_DEFAULT_FLOAT = np.dtype(np.float32)
NP_INT64 = np.dtype(np.int64)
NP_BOOL = np.dtype(np.bool_)


def get_default_dtype() -> dtype:
    return _DEFAULT_FLOAT


@opaque
def set_default_dtype(d: dtype) -> None:
    """Set the dtype of float tensors created from Python floats and of float factories (any float dtype:
    float32, float64, float16 or bfloat16, as PyTorch allows)."""
    global _DEFAULT_FLOAT, NP_DEFAULT_FLOAT
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got {d}")
    _DEFAULT_FLOAT, NP_DEFAULT_FLOAT = d, d.np


def is_float(d: np.dtype) -> builtins.bool:
    """Whether a NumPy/CuPy dtype is a float dtype, bfloat16 included (NumPy gives bfloat16 kind "V")."""
    return d.kind == "f" or d == _BF16


def low_precision_used() -> None:
    """Note that a 16-bit float dtype is in use: from now on `dispatch` checks op inputs for them."""
    from .autograd.grad_mode import _Mode
    if not _Mode.lowp:  # (called on every 16-bit dtype lookup: set once)
        _Mode.lowp = _Mode.extra = True


def _check_bf16(d: dtype) -> dtype:
    if d.np is None:
        raise TypeError("ember.bfloat16 needs the ml_dtypes package (NumPy's bfloat16): pip install ml_dtypes")
    return d


def as_dtype(d) -> dtype:
    """Normalise an ember dtype, NumPy dtype, Python type or dtype name to an ember dtype."""
    if type(d) is dtype:
        if d.itemsize == 2 and d.is_floating_point:
            low_precision_used()
            return _check_bf16(d)
        return d
    if d is builtins.float:
        return float64  # as in PyTorch: dtype=float means double
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool
    if isinstance(d, str):
        name = d[6:] if d.startswith("ember.") else d[6:] if d.startswith("torch.") else d
        if name in _BY_NAME:
            return as_dtype(_BY_NAME[name])
        raise TypeError(f"unknown dtype name {d!r}; valid names are: {', '.join(sorted(_BY_NAME))}")
    try:
        return as_dtype(FROM_NP[np.dtype(d)])
    except (TypeError, KeyError):
        raise TypeError(
            f"dtype must be an ember dtype such as ember.float32 (one of {', '.join(x.name for x in ALL)}), "
            f"got {d!r}") from None


def np_dtype(d) -> np.dtype:
    return as_dtype(d).np


def _category(d: np.dtype) -> builtins.int:
    return 0 if d.kind == "b" else 2 if d.kind == "f" or d == _BF16 else 1


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's promote_types: within a category the wider type wins; across
    categories (bool < integer < float) the higher category's type wins unchanged;
    float16 with bfloat16 gives float32 (neither holds the other)."""
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2 and a.itemsize == b.itemsize == 2:
        return np.dtype(np.float32)
    if a.kind == "u" or b.kind == "u":  # uint8 with a signed int
        return np.promote_types(a, b) if max(a.itemsize, b.itemsize) > 1 else np.dtype(np.int16)
    return a if a.itemsize >= b.itemsize else b


def _combine(higher, lower):
    # PyTorch's combine_categories: an operand of a lower priority class (0-dim tensor,
    # Python scalar) only changes the result when it is of a higher category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if is_float(higher):
        return higher
    if higher.kind == "b" or is_float(lower):
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> np.dtype:
    """PyTorch's result_type over arrays and Python scalars (dimensioned arrays take
    priority over 0-d arrays, which take priority over Python numbers)."""
    dim = zero = wrapped = None
    for o in operands:
        if isinstance(o, np.ndarray) or hasattr(o, "__cuda_array_interface__") or hasattr(o, "__ember_array__"):
            if o.ndim:
                dim = o.dtype if dim is None else promote_types(dim, o.dtype)
            else:
                zero = o.dtype if zero is None else promote_types(zero, o.dtype)
        else:
            d = scalar_dtype(o)
            wrapped = d if wrapped is None else promote_types(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def scalar_dtype(v) -> np.dtype:
    """The dtype a Python number takes in an operation (floats: the default dtype)."""
    if isinstance(v, builtins.bool) or isinstance(v, np.bool_):
        return NP_BOOL
    if isinstance(v, (builtins.int, np.integer)):
        return NP_INT64
    if isinstance(v, (builtins.float, np.floating)):
        return NP_DEFAULT_FLOAT
    raise TypeError(f"unsupported operand of type {type(v).__name__}: expected a Tensor or a Python number")
