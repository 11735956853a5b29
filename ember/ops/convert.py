"""Conversions and copies: `to`, `float()`/`double()`/..., `clone`, `cpu`/`cuda`, `new_*` factories,
and NumPy ufuncs applied to Tensors."""
from __future__ import annotations

import numpy as np

from .. import _creation as C
from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, make
from ..backend import on_device_of
from ..autograd.function import Op
from . import arithmetic as A
from . import unary as U
from .. import _memory_format as MF
from .registry import Exports


class Clone(Op):
    """z = a copy of x (laid out in a memory format: ember/_memory_format.py);  dz/dx = 1."""

    saves_inputs = False

    def forward(self, x, fmt=None):
        return x.copy() if fmt is None else MF.lay_out(x, fmt, "clone")

    jvp = Op.linear_jvp  # the tangent copied the same way

    def backward(self, gz):
        return gz


class ToDevice(Op):
    """z = x on another device;  dz/dx = gz moved back."""

    saves_inputs = False

    def forward(self, x, dev, non_blocking=False):
        self.src = backend.device_of(x)
        return backend.transfer(x, dev, non_blocking)

    jvp = Op.linear_jvp  # the tangent moved along

    def backward(self, gz):
        return to(gz, self.src)


def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy of input, differentiable; memory_format (default preserve_format) sets the copy's layout."""
    fmt = MF.check(memory_format, "clone")
    return Clone.apply(input) if fmt is MF.preserve_format and input._data.flags.c_contiguous else \
        Clone.apply(input, fmt)


def to(self: Tensor, *args, dtype=None, device=None, copy: bool = False, non_blocking: bool = False, memory_format=None) -> Tensor:
    """`to(dtype)`, `to(device)`, `to(device, dtype)` or `to(other_tensor)`: self when nothing changes (unless copy)."""
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, backend.device) or isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda"):
            device = a
        elif isinstance(a, str):  # PyTorch reads a string here as a device; ember also takes a dtype name
            try:
                dtype = dt.as_dtype(a)
            except TypeError:
                raise RuntimeError(f"to(): {a!r} is neither a device (expected 'cpu', 'cuda' or 'cuda:N') nor a "
                                   f"dtype name such as 'float32'") from None
        elif a is not None:
            dtype = a
    t = self
    if device is not None:
        dev = backend.resolve(device)
        if dev != t.device:
            t = ToDevice.apply(t, dev, non_blocking)
    if dtype is not None:
        t = U.to_dtype(t, dtype)
    if copy and t is self:
        t = clone(self)
    if memory_format is not None and memory_format is not MF.preserve_format:
        fmt = MF.check(memory_format, "to")
        if not MF.is_in(t._data, fmt):
            t = clone(t, memory_format=fmt)
    return t


def pin_memory(self: Tensor, device=None) -> Tensor:
    """A copy of this CPU tensor in page-locked host memory, from which `.to('cuda', non_blocking=True)`
    copies asynchronously. Needs a CUDA device, as in PyTorch."""
    if self.device.type != "cpu":
        raise RuntimeError(f"pin_memory(): cannot pin '{self.device}' memory: only dense CPU tensors can be pinned")
    be = backend.require_cuda()
    if be.is_pinned(self._data):
        return self
    out = be.pinned_empty(self._data.shape, self._data.dtype)
    out[...] = self._data
    t = make(out)
    t._requires_grad = False
    return t


def is_pinned(self: Tensor, device=None) -> bool:
    """True when this CPU tensor lives in page-locked host memory (False without CUDA)."""
    if self.device.type != "cpu" or backend.cuda_backend() is None:
        return False
    return backend.CUDA.is_pinned(self._data)


def type_(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    """With no argument: the legacy type name ('torch.FloatTensor', 'torch.cuda.FloatTensor': PyTorch's
    strings, so that code comparing them keeps working); else `to(dtype)`, where dtype may also be such a
    name or a legacy type (`t.type(ember.LongTensor)`)."""
    from .._legacy import dtype_of_type, type_name
    if dtype is None:
        return type_name(self.dtype, self.device.type == "cuda")
    d, cuda = dtype_of_type(dtype)
    if cuda is not None and cuda != (self.device.type == "cuda"):
        return to(self, "cuda" if cuda else "cpu", dtype=d, non_blocking=non_blocking)
    return U.to_dtype(self, d)


def as_tensor_like(value, like: Tensor) -> Tensor:
    """`value` (number, array or Tensor) as a tensor of like's dtype, on like's device."""
    if isinstance(value, Tensor):
        return value
    with on_device_of(like._data):
        return make(backend.array_module(like._data).asarray(value, like._data.dtype))


# NumPy ufuncs called on Tensors (np.add(a, t), np_array * t, np.exp(t)) run as ember ops.
_UFUNC_OPS = {
    np.add: A.add, np.subtract: A.sub, np.multiply: A.mul, np.true_divide: A.div, np.power: A.pow,
    np.maximum: A.maximum, np.minimum: A.minimum, np.floor_divide: A.floor_divide, np.remainder: A.remainder,
    np.arctan2: A.atan2,
    np.equal: A.eq, np.not_equal: A.ne, np.less: A.lt, np.less_equal: A.le, np.greater: A.gt,
    np.greater_equal: A.ge, np.bitwise_and: A.bitwise_and, np.bitwise_or: A.bitwise_or,
    np.bitwise_xor: A.bitwise_xor, np.logical_and: A.logical_and, np.logical_or: A.logical_or,
    np.exp: U.exp, np.log: U.log, np.sqrt: U.sqrt, np.sin: U.sin, np.cos: U.cos, np.tan: U.tan, np.tanh: U.tanh,
    np.negative: U.neg, np.absolute: U.abs, np.sign: U.sign, np.floor: U.floor, np.ceil: U.ceil,
    np.expm1: U.expm1, np.log1p: U.log1p, np.square: U.square, np.reciprocal: U.reciprocal,
}


def numpy_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    if ufunc is np.matmul and method == "__call__" and not kwargs:
        from .linalg import matmul
        return matmul(*[i if isinstance(i, Tensor) else as_tensor_like(i, next(t for t in inputs if isinstance(t, Tensor)))
                        for i in inputs])
    fn = _UFUNC_OPS.get(ufunc)
    if fn is not None and method == "__call__" and not kwargs:
        return fn(*inputs)
    # anything else computes on the arrays and gives an array, as for any array-like
    arrays = [i.numpy() if isinstance(i, Tensor) else i for i in inputs]
    if "out" in kwargs:
        kwargs["out"] = tuple(o.numpy() if isinstance(o, Tensor) else o for o in kwargs["out"])
    return getattr(ufunc, method)(*arrays, **kwargs)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
def _as(dtype):
    """The Tensor method converting to `dtype` (`x.float()`, `x.long()`, ...)."""
    def method(self, memory_format=None):
        return to(U.to_dtype(self, dtype), memory_format=memory_format)
    return method


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    return to(self, "cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}",
              non_blocking=non_blocking, memory_format=memory_format)


def _new_like(fn):
    """The Tensor method `new_<fn>(*size, ...)`: a new tensor with this one's dtype and device by default."""
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        return fn(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
    return method


EXPORTS = Exports(
    globals(),
    functions=("clone",),
    methods=("to", "clone", "pin_memory", "is_pinned"),
    aliases={
        "type": type_,
        "float": _as(dt.float32), "double": _as(dt.float64), "half": _as(dt.float16), "bfloat16": _as(dt.bfloat16), "long": _as(dt.int64),
        "int": _as(dt.int32), "short": _as(dt.int16), "byte": _as(dt.uint8), "char": _as(dt.int8),
        "bool": _as(dt.bool),
        "cpu": lambda self, memory_format=None: to(self, "cpu", memory_format=memory_format),
        "cuda": _cuda,
        "type_as": lambda self, other: to(self, other.dtype),
        "new_zeros": _new_like(C.zeros), "new_ones": _new_like(C.ones), "new_empty": _new_like(C.empty),
        "new_full": lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: C.full(
            size, fill_value, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad),
        "new_tensor": lambda self, data, dtype=None, device=None, requires_grad=False: C.tensor(
            data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad),
    })
