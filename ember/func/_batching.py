"""vmap's machinery: batched arrays, and the batching of op applications in `dispatch`.

Inside `vmap(f)`, f sees *logical* tensors: each example's tensor, without the mapped dimension. Such
a tensor is an ordinary Tensor whose array is a `BatchedArray`: a stand-in that knows the logical
shape and dtype and holds the *physical* array, all examples stacked along a leading batch dimension.
f's Python code (shape checks, argument parsing, the ops' functions) runs once, on the logical
shapes; when an op application reaches `dispatch`, `batch_dispatch` replaces each batched argument by
its physical tensor and applies the op's *batching rule*: how to run the op once on the physical
arrays (an elementwise op: align the ranks so that the batch dimensions broadcast; a reduction: shift
its axes past the batch dimension; a view: put the batch size in front of its shape; ...). The physical
application is recorded by reverse mode and carries forward-mode tangents like any other, so
gradients and tangents of batched computations come out batched. Ops with no rule fall back to a
loop over the examples (one application per example, then a stack), with a warning naming the op.

Nested vmaps are nested stand-ins: the physical array of an inner level's stand-in is the outer
level's stand-in, whose own physical array has the outer batch dimension in front of the inner one.
Each `batch_dispatch` unwraps one level (the innermost present) and dispatches again: the outer level
is batched by the same code one call down.

What cannot be batched fails loudly: Python code that reads a batched tensor's values (`.item()`,
`bool(x)`, a boolean mask, `nonzero`) raises, as PyTorch's vmap does for data-dependent control flow.
"""
from __future__ import annotations

import math
import operator
import threading
import warnings

import numpy as np

from .. import backend
from .._tensor import TENSOR_TYPES, Tensor, make
from ..autograd.grad_mode import MODE

_ndarray = np.ndarray


class VmapError(RuntimeError):
    """What vmap cannot batch (data-dependent Python code, mismatched batch sizes, ...)."""


# ---------------------------------------------------------------------- levels
class _Levels(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # [(level id, batch size, randomness)], outermost first


LEVELS = _Levels()
_next_level = [0]


def enter(size: int, randomness: str) -> int:
    _next_level[0] += 1
    level = _next_level[0]
    LEVELS.stack.append((level, size, randomness))
    MODE.vmap = len(LEVELS.stack)
    MODE.refresh()
    return level


def leave(level: int) -> None:
    assert LEVELS.stack and LEVELS.stack[-1][0] == level
    LEVELS.stack.pop()
    MODE.vmap = len(LEVELS.stack)
    MODE.refresh()


def _size_of(level: int) -> int:
    for lv, size, _ in LEVELS.stack:
        if lv == level:
            return size
    raise VmapError(f"vmap: a batched tensor of a vmap level that has ended (level {level}) was used; return it from "
                    f"the vmapped function instead of keeping it in an outer variable")


def randomness() -> str | None:
    return LEVELS.stack[-1][2] if LEVELS.stack else None


# ---------------------------------------------------------------------- the stand-in array
def _data_dependent(what: str) -> VmapError:
    return VmapError(f"vmap: {what} needs the values of a batched tensor in Python, which vmap cannot batch "
                     f"(data-dependent control flow or a value-dependent shape: .item(), bool(), a boolean mask, "
                     f"nonzero, ...). Compute it outside the vmapped function, or loop over the batch instead.")


class BatchedArray:
    """The array of a logical tensor inside vmap: `shape`/`dtype`/`ndim` are one example's; `phys` holds all
    examples, batch dimension first (a NumPy or CuPy array, or the next outer level's BatchedArray); `level`
    is the vmap level it belongs to; `leaf` is the physical leaf tensor of a batched leaf that requires grad
    (made by `ember.func.grad`), so that its gradient reaches the right tensor."""

    __slots__ = ("phys", "level", "shape", "dtype", "ndim", "size", "itemsize", "leaf", "__weakref__")
    __ember_array__ = True  # what ember's array tests (`_dtype.result_type`, `_operand`) accept as an array

    def __init__(self, phys, level: int, leaf: Tensor | None = None) -> None:
        self.phys = phys
        self.level = level
        self.shape = tuple(phys.shape[1:])
        self.dtype = phys.dtype
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.itemsize = phys.dtype.itemsize
        self.leaf = leaf

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def batch(self) -> int:
        return self.phys.shape[0]

    @property
    def flags(self):
        return self.phys.flags  # (contiguous examples stacked are contiguous: what reshape's view test asks)

    @property
    def strides(self) -> tuple:
        return tuple(self.phys.strides[1:])

    @property
    def T(self):
        raise _data_dependent("the array attribute 'T'")

    def __repr__(self) -> str:
        return f"<BatchedArray level {self.level} of {self.batch} examples of shape {self.shape}, {self.dtype}>"

    # what Python code may do with an op's array without reading its values
    def astype(self, dtype, copy: bool = True, **kw) -> "BatchedArray":
        return BatchedArray(self.phys.astype(dtype, copy=copy), self.level)

    def reshape(self, shape, *more, **kw) -> "BatchedArray":
        shape = (shape,) + more if more else (tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
        return BatchedArray(self.phys.reshape((self.batch,) + shape, **kw), self.level)

    def copy(self, order: str = "C") -> "BatchedArray":
        return BatchedArray(self.phys.copy(), self.level)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        raise _data_dependent("converting to a NumPy array")

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise _data_dependent(f"the array attribute {name!r}")

    def __bool__(self):
        raise _data_dependent("bool()")

    def __float__(self):
        raise _data_dependent("float()")

    def __int__(self):
        raise _data_dependent("int()")

    def __index__(self):
        raise _data_dependent("an index")

    def __iter__(self):
        raise _data_dependent("iterating over an array")

    def __getitem__(self, idx):
        raise _data_dependent("indexing an op's array in Python")

    def __setitem__(self, idx, value) -> None:
        # an in-place write of a whole result (`t._data[...] = r`, inplace.commit): written into every example
        if idx is Ellipsis or idx == slice(None):
            self.phys[...] = _aligned_phys(value, self)
            return
        raise _data_dependent("writing part of an op's array in Python")

    # reductions along axes (argmax in max(dim), all/any, an index's bounds) give one result per example
    def _reduce(self, name: str, axis=None, dtype=None, out=None, keepdims: bool = False, **kw) -> "BatchedArray":
        if out is not None:
            raise _data_dependent(f"the array method {name} with out=")
        if dtype is not None:
            kw["dtype"] = dtype
        p = self.phys
        if axis is None and name in ("argmax", "argmin"):  # the flat index within each example
            r = getattr(p.reshape((self.batch, -1)), name)(axis=1)
            return BatchedArray(r.reshape((self.batch,) + (1,) * self.ndim) if keepdims else r, self.level)
        axis = tuple(range(self.ndim)) if axis is None else axis
        return BatchedArray(getattr(p, name)(axis=_shift_axes(axis, self.ndim), keepdims=keepdims, **kw), self.level)

    def squeeze(self, axis=None) -> "BatchedArray":
        axis = tuple(k for k, n in enumerate(self.shape) if n == 1) if axis is None else axis
        return BatchedArray(self.phys.squeeze(_shift_axes(axis, self.ndim)), self.level)

    # elementwise NumPy math on stand-ins (a dropout mask `u < p`, a cast) runs on the physical arrays
    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        if method in ("reduce", "accumulate") and len(args) == 1 and not kwargs.get("out"):
            a = args[0]  # np.maximum.accumulate(x, axis): along the same logical axis of every example
            axis = kwargs.pop("axis", 0)
            axis = tuple(range(a.ndim)) if axis is None else axis
            r = getattr(ufunc, method)(a.phys, axis=_shift_axes(axis, a.ndim), **kwargs)
            return BatchedArray(r, a.level)
        if method != "__call__":
            raise _data_dependent(f"numpy.{ufunc.__name__}.{method}")
        level = max(a.level for a in args if a.__class__ is BatchedArray)
        rank = max(np.ndim(a) if a.__class__ is not BatchedArray else a.ndim for a in args)
        phys = [_phys_aligned(a, level, rank) for a in args]
        out = kwargs.pop("out", None)
        if out is not None:
            kwargs["out"] = tuple(_phys_aligned(o, level, o.ndim if o.__class__ is BatchedArray else np.ndim(o))
                                  for o in out)
            ufunc(*phys, **kwargs)
            return out[0] if len(out) == 1 else out
        r = ufunc(*phys, **kwargs)
        return tuple(BatchedArray(x, level) for x in r) if isinstance(r, tuple) else BatchedArray(r, level)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.copyto:
            dst, src = args[0], args[1]
            if dst.__class__ is not BatchedArray:
                raise _data_dependent("numpy.copyto of a batched array into an array that is not")
            if "where" in kwargs:
                kwargs = dict(kwargs, where=_aligned_phys(kwargs["where"], dst))
            _xp(dst.phys).copyto(dst.phys, _aligned_phys(src, dst), **kwargs)
            return None
        meta = _METADATA.get(func)
        if meta is not None:  # what the logical shape tells
            return meta(*args, **kwargs)
        if func is np.may_share_memory or func is np.shares_memory:
            phys = [a.phys if a.__class__ is BatchedArray else a for a in args]
            return getattr(_xp(phys[0]), func.__name__)(*phys, **kwargs)
        if func is np.nan_to_num and args[0].__class__ is BatchedArray:  # elementwise
            p = args[0].phys
            return BatchedArray(_xp(p).nan_to_num(p, *args[1:], **kwargs), args[0].level)
        if func is np.where and len(args) == 3:  # elementwise, as a ufunc
            level = max(a.level for a in args if a.__class__ is BatchedArray)
            rank = max(a.ndim if a.__class__ is BatchedArray else np.ndim(a) for a in args)
            phys = [_phys_aligned(a, level, rank) for a in args]
            return BatchedArray(_xp(phys[0]).where(*phys), level)
        if func is np.broadcast_to and args[0].__class__ is BatchedArray:
            a = args[0]
            shape = tuple(args[1] if len(args) > 1 else kwargs["shape"])
            p = _phys_aligned(a, a.level, len(shape))
            return BatchedArray(_xp(p).broadcast_to(p, (a.batch,) + shape), a.level)
        if func is np.count_nonzero and args[0].__class__ is BatchedArray:
            a = args[0]
            axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
            axis = tuple(range(a.ndim)) if axis is None else axis
            return BatchedArray(_xp(a.phys).count_nonzero(a.phys, axis=_shift_axes(axis, a.ndim)), a.level)
        raise _data_dependent(f"numpy.{func.__name__}")


def _xp(p):
    """The array module for physical array `p`: NumPy's functions for an outer level's stand-in (which batches them
    through `__array_function__`), else p's own module (CuPy's functions for a CUDA array)."""
    return np if p.__class__ is BatchedArray else backend.array_module(p)


def _shift_axes(axis, ndim: int):
    """Logical axes (an int or a tuple; negative ones count from the end) as the physical ones."""
    if isinstance(axis, (tuple, list)):
        return tuple(_shift_axes(a, ndim) for a in axis)
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim + 1


def _reduction(name: str):
    return lambda self, axis=None, *args, **kwargs: self._reduce(name, axis, *args, **kwargs)


for _name in ("sum", "prod", "mean", "min", "max", "all", "any", "argmax", "argmin"):
    setattr(BatchedArray, _name, _reduction(_name))
_METADATA = {np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
             np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
             np.result_type: lambda *a: np.result_type(*(x.dtype if x.__class__ is BatchedArray else x for x in a))}


def _ufunc_dunder(ufunc, reflected: bool = False):
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


for _name, _uf in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                   ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power), ("and", np.bitwise_and),
                   ("or", np.bitwise_or), ("xor", np.bitwise_xor)):
    setattr(BatchedArray, f"__{_name}__", _ufunc_dunder(_uf))
    setattr(BatchedArray, f"__r{_name}__", _ufunc_dunder(_uf, True))
for _name, _uf in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                   ("eq", np.equal), ("ne", np.not_equal)):
    setattr(BatchedArray, f"__{_name}__", _ufunc_dunder(_uf))
BatchedArray.__neg__ = lambda self: np.negative(self)
BatchedArray.__invert__ = lambda self: np.invert(self)
BatchedArray.__hash__ = object.__hash__
del _name, _uf


def _device_of(a: BatchedArray):
    p = a.phys
    while p.__class__ is BatchedArray:
        p = p.phys
    return backend.device_of(p)


def _module_of(a: BatchedArray):
    raise _data_dependent("array-module operations")


backend.register_array_type(BatchedArray, _device_of, np)


def _phys_aligned(a, level: int, rank: int):
    """The physical array of `a` for an elementwise operation of logical rank `rank` at `level`: a stand-in of
    that level as (batch, 1, ..., 1, *shape); anything else (a plain array, a number, an outer level's stand-in)
    as it is, which broadcasts against that."""
    if a.__class__ is BatchedArray and a.level == level:
        p = a.phys
        if a.ndim < rank:
            p = p.reshape((p.shape[0],) + (1,) * (rank - a.ndim) + tuple(a.shape))
        return p
    return a


def _aligned_phys(value, dst: BatchedArray):
    """`value` (a stand-in of dst's level, or anything that broadcasts) as an array broadcasting to dst.phys."""
    return _phys_aligned(value, dst.level, dst.ndim)


# ---------------------------------------------------------------------- logical <-> physical tensors
def is_batched(t, level: int | None = None) -> bool:
    d = t._data
    return d.__class__ is BatchedArray and (level is None or d.level == level)


def physical(t: Tensor) -> Tensor:
    """The physical tensor of a logical tensor whose array is a BatchedArray: the same place in the graph (its
    edge, or the physical leaf), and its forward-mode tangents made physical too."""
    a = t._data
    if t._edge is not None:
        p = make(a.phys, True, t._edge)
    elif t._requires_grad:
        if a.leaf is None:
            raise VmapError("vmap: requires_grad_() on a batched tensor inside vmap is not supported: differentiate "
                            "with ember.func.grad / vjp inside vmap instead")
        p = a.leaf
    else:
        p = make(a.phys)
    _carry_tangents(t, p, lambda tan: physical_like(tan, a))
    return p


def _carry_tangents(src: Tensor, dst: Tensor, convert) -> None:
    """dst takes src's forward-mode tangents at the open levels, each passed through `convert`."""
    fw = getattr(src, "_fw", None)
    if fw and MODE.fw:
        from ..autograd import forward_ad
        for lv in MODE.fw:
            tan = fw.get(lv)
            if tan is not None:
                forward_ad.set_tangent(dst, lv, convert(tan))


def physical_like(t: Tensor, like: BatchedArray) -> Tensor:
    """`t` as a physical tensor of `like`'s level: its physical tensor if it is batched there, else expanded."""
    if t._data.__class__ is BatchedArray and t._data.level == like.level:
        return physical(t)
    return t.unsqueeze(0).expand((like.batch,) + tuple(t.shape))


def logical(p, level: int):
    """A physical result (a Tensor, a tuple of them, or anything else) as logical tensors of `level`."""
    if p.__class__ is tuple or p.__class__ is list:
        return type(p)(logical(x, level) for x in p)
    if p.__class__ not in TENSOR_TYPES:
        return p
    shape = p._data.shape
    if not shape or shape[0] != _size_of(level):  # (a rule's slip would otherwise mislabel the examples)
        raise VmapError(f"vmap: internal error: a physical result of shape {list(shape)} has no batch dimension of "
                        f"size {_size_of(level)} in front; please report this with the op that produced it")
    leaf = p if (p._requires_grad and p._edge is None) else None
    t = make(BatchedArray(p._data, level, leaf), p._requires_grad, p._edge)
    _carry_tangents(p, t, lambda tan: logical(tan, level))
    return t


def to_level(t: Tensor, level: int, size: int) -> Tensor:
    """A logical tensor of `level` for `t`: itself when it is batched there, else every example a copy of it."""
    a = t._data
    if a.__class__ is BatchedArray:
        if a.level == level:
            return t
        if a.level > level:  # t's outermost wrapper is an inner level: `level` goes beneath it (levels stay nested
            return logical(to_level(physical(t), level, size), a.level)  # outermost first, as everywhere)
    return logical(t.unsqueeze(0).expand((size,) + tuple(t.shape)), level)


# ---------------------------------------------------------------------- dispatch
RULES: dict = {}  # Op class -> rule(node, level, size, inputs, arrays, attrs) -> result, or NotImplemented
_warned: set = set()


def batch_dispatch(node, inputs: tuple, arrays: tuple, attrs):
    """`dispatch` of an application with batched arguments: the innermost level present is unwrapped, the op runs
    once on the physical arrays by its batching rule (or once per example), and the result is logical again."""
    from ..autograd.function import dispatch
    level = _innermost(arrays, -1)
    for a in inputs:  # (a batched tensor among the inputs whose array the caller replaced: an index, say)
        if a.__class__ in TENSOR_TYPES and a._data.__class__ is BatchedArray and a._data.level > level:
            level = a._data.level
    if attrs:  # (constant arrays passed as attributes: a mask, an index grid)
        level = _innermost(attrs.values(), level)
    if level < 0:
        return None
    size = _size_of(level)
    if not RULES:
        from . import _rules  # noqa: F401  (fills RULES)
    rule = RULES.get(node.__class__)
    if rule is None:
        rule = _default_rule(node.__class__)
    if rule is not None and attrs and not getattr(rule, "batched_attrs", False) \
            and _innermost(attrs.values(), -1) == level:
        rule = None  # a rule reads its attributes as constants: batched ones need a rule written for them
    if rule is not None:
        r = rule(node, level, size, inputs, arrays, attrs)
        if r is not NotImplemented:
            return r
    return _per_example(node, level, size, inputs, arrays, attrs, dispatch)


def _innermost(values, level: int) -> int:
    """The innermost vmap level among the BatchedArrays in `values` (looking into tuples and lists), or `level`."""
    for a in values:
        if a.__class__ is BatchedArray:
            if a.level > level:
                level = a.level
        elif a.__class__ is tuple or a.__class__ is list:
            level = _innermost(a, level)
    return level


def _example(a, level: int, b: int):
    """Constant `a` (an array, or a tuple or list holding arrays) for example b of `level`: its BatchedArrays of that
    level indexed at b."""
    if a.__class__ is BatchedArray:
        return _at_example(a.phys, b) if a.level == level else a
    if a.__class__ is tuple or a.__class__ is list:
        return type(a)(_example(x, level, b) for x in a)
    return a


def _at_example(p, b: int, axis: int = 0):
    """Physical array `p` at example b of its leading (logical) dim; an outer level's stand-in stays one."""
    if p.__class__ is BatchedArray:
        return BatchedArray(_at_example(p.phys, b, axis + 1), p.level)
    return p[(slice(None),) * axis + (b,)]


def _default_rule(cls):
    from ..autograd.function import Op
    from ..ops.arithmetic import BinaryOp
    if issubclass(cls, BinaryOp) or getattr(cls, "jvp", None) is Op.elementwise_jvp or getattr(cls, "elementwise", False):
        return elementwise
    return None


def phys_args(level: int, inputs: tuple, arrays: tuple):
    """The physical (inputs, arrays) of an application at `level`, the batched ones with their batch dimension
    first; plus which positions of `arrays` are batched."""
    new_in, new_ar, batched = list(inputs), list(arrays), [False] * len(arrays)
    n = len(inputs)
    for i, a in enumerate(arrays):
        if a.__class__ is not BatchedArray or a.level != level:
            continue
        batched[i] = True
        if i < n and inputs[i].__class__ in TENSOR_TYPES and inputs[i]._data.__class__ is BatchedArray \
                and inputs[i]._data.level == level:
            p = physical(inputs[i])
            new_in[i] = p
            pd = p._data
            new_ar[i] = pd if a is inputs[i]._data else _rederive(a, inputs[i]._data, pd)
        else:
            new_ar[i] = a.phys
            if i < n and inputs[i] is a:  # a constant array passed as an input (an index): physical there too
                new_in[i] = a.phys
    for i in range(n):  # an input whose array slot holds something else (the caller passed a derived constant)
        x = inputs[i]
        if x.__class__ in TENSOR_TYPES and x._data.__class__ is BatchedArray and x._data.level == level \
                and new_in[i] is x:
            new_in[i] = physical(x)
    return tuple(new_in), new_ar, batched


def _rederive(a: BatchedArray, logical_arr: BatchedArray, phys):
    """The caller derived `a` from the input's stand-in `logical_arr` (a cast, a copy): the same of `phys`."""
    if a.dtype != logical_arr.dtype:
        return phys.astype(a.dtype)
    return a.phys


def _per_example(node, level, size, inputs, arrays, attrs, dispatch):
    """The fallback: the op once per example (its physical arguments indexed at b), results stacked."""
    name = node.name()[:-len("Backward")] if node.name().endswith("Backward") else node.name()
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"There is a performance drop because we have not yet implemented the batching rule for "
                      f"{name}. vmap runs it once per example (a Python loop over the {size} examples).",
                      UserWarning, stacklevel=4)
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    n = len(inputs)
    results = []
    for b in range(size):
        ins, ars = list(p_in), list(p_ar)
        for i, isb in enumerate(batched):
            if not isb:
                ars[i] = _example(p_ar[i], level, b)  # (a tuple of constants holding batched arrays: an index)
                continue
            if i < n and p_in[i].__class__ in TENSOR_TYPES and p_in[i]._data is p_ar[i]:
                ins[i] = p_in[i][b]
                ars[i] = ins[i]._data
            else:
                ars[i] = _at_example(p_ar[i], b)
        for i in range(n):
            x = ins[i]
            if x.__class__ in TENSOR_TYPES:
                if x is p_in[i] and x is not inputs[i]:
                    ins[i] = x[b]  # (a physical input whose array slot the caller filled otherwise)
            elif i < len(ars) and x is p_ar[i]:
                ins[i] = ars[i]  # a constant passed as input and array alike
            else:
                ins[i] = _example(x, level, b)
        ex_attrs = {k: _example(v, level, b) for k, v in attrs.items()} if attrs else attrs
        results.append(dispatch(object.__new__(node.__class__), tuple(ins), tuple(ars), ex_attrs))
    from ..ops.shape import stack
    first = results[0] if results[0].__class__ is tuple else (results[0],)
    for r in results[1:]:
        if any(a.shape != b.shape for a, b in zip(first, r if r.__class__ is tuple else (r,))):
            raise _data_dependent(f"{name}, whose result's shape differs between examples,")
    if results[0].__class__ is tuple:
        out = tuple(stack([r[k] for r in results]) for k in range(len(results[0])))
    else:
        out = stack(results)
    return logical(out, level)


def elementwise(node, level, size, inputs, arrays, attrs):
    """An elementwise op (broadcasting its operands): the batched operands as (batch, 1, ..., 1, *shape) at the
    operands' largest rank, so that the batch dimensions line up and the rest broadcast as before."""
    from ..autograd.function import dispatch
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    rank = 0
    for a in arrays:
        r = a.ndim if a.__class__ is BatchedArray and a.level == level else (
            a.ndim if hasattr(a, "ndim") and not isinstance(a, (int, float, bool)) else 0)
        rank = max(rank, r)
    n = len(inputs)
    for i, isb in enumerate(batched):
        if not isb:
            continue
        lrank = arrays[i].ndim
        if lrank < rank:
            shape = (size,) + (1,) * (rank - lrank) + tuple(arrays[i].shape)
            if i < n and p_in[i].__class__ in TENSOR_TYPES and p_in[i]._data is p_ar[i]:
                p_in = p_in[:i] + (p_in[i].reshape(shape),) + p_in[i + 1:]
                p_ar[i] = p_in[i]._data
            else:
                p_ar[i] = p_ar[i].reshape(shape)
    return logical(dispatch(object.__new__(node.__class__), tuple(p_in), tuple(p_ar), attrs), level)


# ---------------------------------------------------------------------- random draws
class _BatchedDraws:
    """The generator that random ops draw from inside vmap(randomness="different"): each draw is one per example,
    a BatchedArray of the innermost level."""

    def __init__(self, gen, level: int, size: int) -> None:
        self.gen, self.level, self.size = gen, level, size
        self.device = gen.device

    def random(self, shape: tuple, dtype=np.float64):
        return BatchedArray(self.gen.random((self.size,) + tuple(shape), dtype), self.level)

    def standard_normal(self, shape: tuple, dtype=np.float64):
        return BatchedArray(self.gen.standard_normal((self.size,) + tuple(shape), dtype), self.level)

    def integers(self, low: int, high: int, shape: tuple):
        return BatchedArray(self.gen.integers(low, high, (self.size,) + tuple(shape)), self.level)

    def __getattr__(self, name: str):
        raise VmapError(f"vmap(randomness='different'): this random operation (through Generator.{name}) cannot be "
                        f"drawn per example yet; use randomness='same' or draw outside vmap")


def random_draws(gen, op: str):
    """The generator a random op draws from while vmap levels are open: per the innermost level's randomness,
    PyTorch's error, the generator itself (one draw shared by every example) or per-example draws."""
    level, size, mode = LEVELS.stack[-1]
    if mode == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                           "'same' or 'different' randomness flags on vmap or perform the randomness operation out "
                           "of vmap")
    if mode == "same":
        return gen
    return _BatchedDraws(gen, level, size)
