"""More indexing, shape and tensor-attribute ops: index_fill/index_copy/index_reduce, scatter_reduce,
masked_scatter, put, index_put, unfold/as_strided (strided views), the *_scatter family, splits and stacks,
index generators (tril_indices, combinations, unravel_index, ...), in-place forms of the comparisons and of
several binary ops, in-place metadata changes (unsqueeze_, t_, resize_, ...), and the small attributes
PyTorch tensors carry (stride, storage_offset, H, itemsize, is_signed, ...).

Most ops here are compositions of the indexing and shape ops (`indexing.py`, `shape.py`), which already
have backwards; the few new Op classes follow the same pattern, each backward made of ember ops so that
double backward works.

"Storage" in ember: a tensor's memory is its NumPy array; a view's storage is its base tensor's array
(`Tensor._base`). `stride()`, `storage_offset()` and `as_strided` read and build geometry against that
array, in elements, as PyTorch does against its storage.
"""
from __future__ import annotations

import collections
import math
import warnings

import numpy as np

from .. import _capture
from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, bump_version, constant, make, normalize_dim, type_name
from ..backend import on_device_of
from ..autograd.function import Op
from ..autograd.forward_ad import is_dual, take_tangents
from ..autograd.grad_mode import MODE
from .._capture import traced
from . import arithmetic as A
from . import reduce as R
from . import shape as S
from .convert import clone
from .indexing import (GetItem, IndexBackward, IndexPut, IndexSelect, MaskedFill, Put, Take, _grid,
                       _inplace, _multiply_at, _parse, _put, _scatter_args, getitem)
from .inplace import as_view, check_writable, commit, old_input, unary_in_place, fill_, zero_
from .registry import Exports
from .unary import bitwise_not, logical_not, to_dtype

__all__ = ["index_fill", "index_copy", "index_reduce", "scatter_reduce", "masked_scatter", "put", "index_put",
           "index_put_", "as_strided", "as_strided_", "select", "select_scatter", "slice_scatter", "diagonal_scatter",
           "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes", "column_stack", "row_stack", "block_diag",
           "meshgrid", "cartesian_prod", "combinations", "rot90", "narrow_copy", "repeat_interleave", "tril_indices",
           "triu_indices", "unravel_index", "isin", "vander", "aminmax", "renorm", "bitwise_left_shift",
           "bitwise_right_shift", "fill", "fill_", "zero_", "scalar_tensor", "empty_strided", "frombuffer", "asarray",
           "adjoint", "get_device", "is_floating_point", "is_complex", "is_conj", "is_neg", "is_signed",
           "is_inference", "conj", "resolve_conj", "resolve_neg", "is_nonzero", "is_same_size", "resize_as_",
           "greater", "greater_equal", "less", "less_equal", "not_equal"]

_INT64 = np.dtype(np.int64)
_ALL = (None, (Ellipsis,), 0)  # the parsed index of every element (t[...])

# PyTorch's scalar-type names, as its error messages write them
_SNAME = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
          "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _sname(t) -> str:
    """PyTorch's name of a tensor's (or NumPy dtype's) scalar type: Float, Long, Bool, ..."""
    d = t._data.dtype if isinstance(t, Tensor) else np.dtype(t)
    return _SNAME.get(dt.FROM_NP[d].name if d in dt.FROM_NP else d.name, str(d))


# ---------------------------------------------------------------------- argument checks
def _tensor(x, op: str, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type_name(x)}")
    return x


def _int(v, op: str, name: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type_name(v)}")
    return v.__index__()


def _ints(v, op: str, name: str) -> tuple:
    """A shape-like argument (an int, or a sequence of ints) as a tuple of ints."""
    if isinstance(v, Tensor) or not isinstance(v, (tuple, list)):
        return (_int(v, op, name),)
    return tuple(_int(e, op, name) for e in v)


def _vector_index(index, size: int, dim: int, op: str, *, dtypes=("int64",), negative: bool = False,
                  oob=IndexError, oob_msg: str | None = None) -> np.ndarray:
    """The 0-d or 1-d integer `index` of an index_* op as a flat non-negative int64 array, with PyTorch's errors:
    a dtype outside `dtypes`, more than one dimension, or a position outside [0, size) ([-size, size) when
    `negative`; the negative ones are wrapped)."""
    index = _tensor(index, op, "index")
    a = index._data
    if dt.FROM_NP.get(a.dtype, None) is None or dt.FROM_NP[a.dtype].name not in dtypes:
        want = " or ".join(d.replace("int64", "Long").replace("int32", "Int") for d in dtypes)
        raise RuntimeError(f"{op}(): Expected a {want} tensor for index, but got {_sname(index)}")
    if a.ndim > 1:
        raise RuntimeError(f"{op}(): Index should have dimension 1 or 0 (got {a.ndim}, shape {list(a.shape)})")
    a = a.reshape(-1)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if hi >= size or lo < (-size if negative else 0):
            bad = hi if hi >= size else lo
            raise oob(oob_msg or f"{op}(): index {bad} is out of bounds for dimension {dim} with size {size}")
        if lo < 0:
            a = backend.array_module(a).where(a < 0, a + size, a)
    return a.astype(_INT64, copy=False)


def _rows(a, dim: int):
    """Array `a` with `dim` moved first (a view): index_* ops write rows of it."""
    if dim == 0 and a.ndim:
        return a
    return backend.array_module(a).moveaxis(a, dim, 0) if a.ndim else a.reshape(1)


def _no_grad_args(*args) -> bool:
    """Whether none of `args` (and the Tensors in sequences among them) takes part in autograd now."""
    if not MODE.grad:
        return True
    for a in args:
        if isinstance(a, Tensor):
            if a._requires_grad:
                return False
        elif isinstance(a, (tuple, list)) and not _no_grad_args(*a):
            return False
    return True


def _any_dual(*args) -> bool:
    """Whether one of `args` (or a Tensor in a sequence among them) carries a forward-AD tangent."""
    for a in args:
        if isinstance(a, Tensor):
            if is_dual(a):
                return True
        elif isinstance(a, (tuple, list)) and _any_dual(*a):
            return True
    return False


def _in_place(self: Tensor, op: str, cls, fn, args: tuple, write) -> Tensor:
    """`self.<op>(*args)`: straight into self's array with `write(array)` when neither autograd nor a capture
    (compile, lazy) needs to see the write; else `fn(self, *args)` computed out of place and committed (self
    takes the result's place in the graph, see ops/inplace.py). `cls` is fn's Op class (is the old value saved?)."""
    check_writable(self, op)
    if _capture.ACTIVE is None and _no_grad_args(self, *args) and not (MODE.fw and _any_dual(self, *args)):
        write(self._data)
        bump_version(self)
        return self
    return commit(self, fn(old_input(self, cls), *args), op)


def _overwrite(self: Tensor, r: Tensor, op: str) -> Tensor:
    """Write the values of `r` (which do not depend differentiably on self: a comparison, a bitwise op) into
    self. Under autograd self stays in the graph with a zero gradient for its old value, as in PyTorch."""
    if r.shape != self.shape:
        raise RuntimeError(f"{op}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(r.shape)}")
    _check_cast(r._data.dtype, self._data.dtype, op)
    if (MODE.grad and self._requires_grad) or _capture.ACTIVE is not None:
        return commit(self, IndexPut.apply(self, r, idx=_ALL), op)
    return commit(self, r, op)


def _category(d: np.dtype) -> int:
    return 0 if d.kind == "b" else 1 if d.kind in "iu" else 2


def _check_cast(src: np.dtype, dst: np.dtype, op: str) -> None:
    """PyTorch's canCast: a result may be written into a tensor of its category or a higher one
    (bool < integer < float), never a lower one."""
    if _category(src) > _category(dst):
        raise RuntimeError(f"{op}: result type {_sname(src)} can't be cast to the desired output type {_sname(dst)}")


# ---------------------------------------------------------------------- index_fill / index_copy
def _fill_value(x: Tensor, value, op: str):
    """index_fill's value: a number (as a 0-d array of x's dtype) or a 0-d Tensor (cast to x's dtype, so a
    gradient reaches it)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with {value.ndim} "
                               f"dimension(s).")
        return to_dtype(value, x.dtype)
    if isinstance(value, (bool, int, float, np.number)):
        with on_device_of(x._data):
            return backend.array_module(x._data).asarray(value).astype(x._data.dtype)
    raise TypeError(f"{op}(): argument 'value' must be a number or a 0-d Tensor, not {type_name(value)}")


def _index_fill_args(x, dim, index, op: str):
    d = normalize_dim(dim, x.ndim, op)
    if _tensor(index, op, "index")._data.dtype != _INT64:
        raise IndexError(f"{op}(): Expected dtype int64 for index, got {index.dtype}")
    return d, _vector_index(index, x.shape[d] if x.ndim else 1, d, op, negative=True)


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of input with every slice at `index` along `dim` set to `value` (a number or a 0-d tensor, which
    then gets the sum of the gradient over the filled positions, each counted once);  dz/dx = gz off those slices."""
    x = _tensor(input, "index_fill")
    d, a = _index_fill_args(x, dim, index, "index_fill_")
    v = _fill_value(x, value, "index_fill_")
    xp = backend.array_module(x._data)
    with on_device_of(x._data):
        hit = xp.zeros(x.shape[d] if x.ndim else 1, np.bool_)
    hit[a] = True
    mask = hit.reshape(tuple(-1 if k == d else 1 for k in range(x.ndim)))  # broadcasts along dim only
    return MaskedFill.apply(x, v, mask=mask)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place index_fill."""
    def write(arr):
        d, a = _index_fill_args(self, dim, index, "index_fill_")
        v = _fill_value(self, value, "index_fill_")
        _rows(arr, d)[a] = v._data if isinstance(v, Tensor) else v
    return _in_place(self, "index_fill_", MaskedFill, index_fill, (dim, index, value), write)


class IndexCopy(Op):
    """z = x with z[..., index[i], ...] = src[..., i, ...] along dim;
    dz/dx = gz with those slices zeroed, dz/dsrc = index_select(gz, dim, index)."""

    saves_inputs = False

    def forward(self, x, src, dim, index):
        self.dim, self.index, self.src_shape = dim, index, src.shape
        out = x.copy()
        _rows(out, dim)[index] = _rows(src.reshape(x.shape[:dim] + (-1,) + x.shape[dim + 1:]), dim)
        return out

    jvp = Op.linear_jvp

    def backward(self, gz):
        gx = gsrc = None
        if self.needs(0):
            gx = IndexCopy.apply(gz, S._zeros(gz, self.src_shape), dim=self.dim, index=self.index)
        if self.needs(1):
            gsrc = IndexSelect.apply(gz, dim=self.dim, index=self.index)
            if gsrc.shape != self.src_shape:  # (a 0-d input and source)
                gsrc = S.View.apply(gsrc, self.src_shape)
        return gx, gsrc


def _same_slices(x: Tensor, src: Tensor, d: int, op: str) -> None:
    """PyTorch's check that src has x's shape but along `dim` (0-d tensors count as shape (1,))."""
    xs, ss = x.shape or (1,), src.shape or (1,)
    if len(xs) != len(ss) or any(a != b for k, (a, b) in enumerate(zip(xs, ss)) if k != d):
        raise RuntimeError(f"{op}(): Source/destination tensor must have same slice shapes: self has shape "
                           f"{list(x.shape)}, source has shape {list(src.shape)} (they may differ only at dimension "
                           f"{d})")


def _index_copy_args(x, dim, index, source, op: str):
    src = _tensor(source, op, "source")
    d = normalize_dim(dim, x.ndim, op)
    size = x.shape[d] if x.ndim else 1
    a = _vector_index(index, size, d, op)
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): self and source expected to have the same dtype, but got (self) {_sname(x)} and "
                           f"(source) {_sname(src)}")
    n = src.shape[d] if src.ndim else 1
    if n != a.size:
        raise IndexError(f"{op}(): Number of indices ({a.size}) should be equal to source.size(dim) ({n})")
    _same_slices(x, src, d, op)
    backend.check_same_device(op, (x._data, src._data))
    return src, d, a


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of input with source's slice i written at position index[i] along `dim` (with repeated indices,
    one of the writes wins, as in PyTorch)."""
    x = _tensor(input, "index_copy")
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        x, source = cast_args(IndexCopy, x, source)
    src, d, a = _index_copy_args(x, dim, index, source, "index_copy_")
    return IndexCopy.apply(x, src, dim=d, index=a)


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """In-place index_copy."""
    def write(arr):
        src, d, a = _index_copy_args(self, dim, index, source, "index_copy_")
        s = src._data
        _rows(arr, d)[a] = _rows(s.reshape(arr.shape[:d] + (-1,) + arr.shape[d + 1:]), d)
    return _in_place(self, "index_copy_", IndexCopy, index_copy, (dim, index, source), write)


# ---------------------------------------------------------------------- scatter_reduce / index_reduce
_REDUCE_ALIASES = {"max": "amax", "min": "amin"}  # PyTorch's scatter_reduce also takes these spellings


def _flat_positions(grid, shape: tuple, ishape: tuple):
    """The flat (C-order) position in an array of `shape` of each element of the scatter index `grid` (int64, of
    the index's shape)."""
    xp = backend.array_module(grid[0]) if grid else np
    pos = xp.zeros((), _INT64) if not grid else None  # (a 0-d tensor: its one position)
    for k, g in enumerate(grid):
        step = math.prod(shape[k + 1:])
        term = g if step == 1 else g * step
        pos = term if pos is None else pos + term
    return xp.broadcast_to(pos.astype(_INT64, copy=False), ishape)


def _identity(reduce: str, dtype: np.dtype):
    """The value a reduction starts from when include_self=False (the old values do not count)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt.is_float(dtype):
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce_at(flat, pos, vals, reduce: str, include_self: bool):
    """flat[pos[i]] combined with vals[i] for every i (`reduce` over repeats), in place; returns the number of
    values reduced into each position (for 'mean'; None otherwise). One ufunc.at per call: NumPy's unbuffered
    in-place reduction, as fast as a bincount."""
    xp = backend.array_module(flat)
    if not include_self:
        flat[pos] = _identity(reduce, flat.dtype)
    if reduce == "prod":
        _multiply_at(xp, flat, (pos,), pos.shape, vals)
        return None
    ufunc = {"sum": xp.add, "mean": xp.add, "amax": xp.maximum, "amin": xp.minimum}[reduce]
    if flat.dtype.kind == "b" and reduce == "sum":
        ufunc = xp.logical_or
    ufunc.at(flat, pos, vals)
    if reduce != "mean":
        return None
    with on_device_of(flat):
        count = xp.zeros(flat.shape, flat.dtype if flat.dtype.kind == "f" else _INT64)
    xp.add.at(count, pos, 1)
    total = count + 1 if include_self else xp.where(count == 0, 1, count)
    if flat.dtype.kind == "f":
        xp.true_divide(flat, total, out=flat, casting="unsafe")
    else:
        flat[...] = xp.floor_divide(flat, total)  # integer mean rounds down, as PyTorch
    return count


class _Delayed(Op):
    """z = x; its backward raises `message`: a gradient that can be used once but not differentiated again
    (PyTorch's DelayedError)."""

    saves_inputs = False

    def forward(self, x, message):
        self.message = message
        return x

    def jvp(self, t, x, message):
        return t[0]

    def backward(self, gz):
        raise RuntimeError(self.message)


class ScatterReduce(Op):
    """z = x with src reduced into it at index along dim: out[index[i][j]][j] ⊕= src[i][j] (dim 0), ⊕ one of
    sum, prod, mean, amax, amin; include_self=False leaves x's old values out wherever something is scattered.

    Gradients (PyTorch's): sum: dz/dx = 1, dz/dsrc = gather(gz). mean: both divided by the number of values
    averaged. prod: dz/dx = z / x, dz/dsrc = z / src, with the zeros handled exactly (a position with a single
    zero keeps the product of the others). amax/amin: gz shared evenly among the x and src elements equal to
    the result. With include_self=False x's gradient is zero where something was scattered.
    The gathers and scatter-adds of backward go through flat positions (take/bincount): several times faster
    than indexing with one array per dimension."""

    saves_output = True

    def forward(self, x, src, dim, grid, ishape, reduce, include_self, op):
        self.dim, self.grid, self.ishape, self.reduce, self.include_self, self.op = (
            dim, grid, ishape, reduce, include_self, op)
        out = x.copy()
        vals = src if src.shape == ishape else src[tuple(slice(0, s) for s in ishape)]
        self.pos = _flat_positions(grid, x.shape, ishape)
        pos = self.pos.reshape(-1)
        count = _reduce_at(out.reshape(-1), pos, vals.reshape(-1), reduce, include_self)
        xp = backend.array_module(x)
        if not include_self:
            with on_device_of(x):
                hit = xp.zeros(x.size, np.bool_)
            hit[pos] = True
            self.hit = hit.reshape(x.shape)
        if reduce == "mean":  # how many values each position averages (1 where nothing was scattered)
            n = count.reshape(x.shape) + (1 if include_self else 0)
            self.n = xp.where(n == 0, 1, n).astype(x.dtype, copy=False)
        return out

    def _gather(self, t: Tensor) -> Tensor:
        """t (x's shape) read at the scattered positions: gather(t, dim, index)."""
        return Take.apply(t, index=self.pos)

    def _scatter_add(self, base: Tensor, t: Tensor) -> Tensor:
        """base (x's shape) with t (index's shape) added at the scattered positions: scatter_add."""
        return base + Put.apply(t, shape=base.shape, index=self.pos)

    def _again(self, x, src) -> Tensor:
        return ScatterReduce.apply(x, src, dim=self.dim, grid=self.grid, ishape=self.ishape, reduce=self.reduce,
                                   include_self=self.include_self, op=self.op)

    def _leading(self, t: Tensor) -> Tensor:
        """t (src's shape) restricted to its leading index-shaped block, the part that is scattered."""
        if t.shape == self.ishape:
            return t
        return GetItem.apply(t, idx=(None, tuple(slice(0, n) for n in self.ishape) + (Ellipsis,), 0))

    def _factors(self, x: Tensor, s: Tensor) -> tuple:
        """(dz/dx, dz/ds) for prod, amax and amin, each shaped as its input (s: src's leading block); dz/ds_i is
        the derivative of z at the position s_i is scattered to. prod: Π of the other factors (z / s_i unless
        s_i = 0: for the one zero of a position, the product with it taken as 1; for several, 0). amax/amin:
        1/k at the k elements (of x and s) equal to the result, 0 elsewhere. Before include_self's mask."""
        z = self.output()
        if self.reduce == "prod":
            masked_x = A.where(x == 0, 1.0, x)
            zero = s == 0
            single = zero & (self._gather(self._scatter_add(S._zeros(z, x.shape), zero.to(z.dtype))) == 1)
            ds = A.where(single, self._gather(self._again(x, A.where(single, 1.0, s))),
                         self._gather(z) / A.where(zero, 1.0, s))
            return self._again(masked_x, s) / masked_x, ds
        x_hit = (x == z).to(z.dtype)
        s_hit = (s == self._gather(z)).to(z.dtype)
        n = self._scatter_add(x_hit, s_hit)
        return x_hit / n, s_hit / self._gather(n)

    def _zeros_meet(self, s: Tensor) -> bool:
        """Whether two or more zeros of s are scattered to one position (a branch on the values)."""
        at = self.pos[s._data == 0]
        return at.size != backend.array_module(at).unique(at).size

    def jvp(self, t, x, src):
        """sum and mean: linear in (x, src). prod, amax, amin: z' = dz/dx x' + the sum of dz/ds_i s_i' over the
        values s_i scattered to each position."""
        if self.reduce in ("sum", "mean"):
            return self.reapply(*t)
        dx, ds = self._factors(x, self._leading(src))
        tz = 0
        if isinstance(t[0], Tensor):
            tz = t[0] * (dx if self.include_self else MaskedFill.apply(dx, 0, mask=self.hit))
        if isinstance(t[1], Tensor):
            tz = tz + Put.apply(self._leading(t[1]) * ds, shape=x.shape, index=self.pos)
        return tz

    def backward(self, gz, x, src):
        if self.needs(1) and src.shape != self.ishape:
            raise RuntimeError(f"{self.op}(): the gradient of src is only defined when src has the index's shape "
                               f"(got src {list(src.shape)}, index {list(self.ishape)}), as in PyTorch; pass "
                               f"src[:{', :'.join(str(s) for s in self.ishape)}]")
        reduce, gx, gsrc = self.reduce, None, None
        if reduce == "sum":
            gx, gsrc = gz, self._gather(gz) if self.needs(1) else None
        elif reduce == "mean":
            g = gz / make(self.n)
            gx, gsrc = g, self._gather(g) if self.needs(1) else None
        else:
            s = self._leading(src)
            dx, ds = self._factors(x, s)
            gx = gz * dx
            if self.needs(1):
                gsrc = self._gather(gz) * ds
                if reduce == "prod" and self._zeros_meet(s):
                    gsrc = _Delayed.apply(gsrc, f"{self.op}(): Double backward is unsupported for src when >1 zeros in "
                                                f"src are scattered to the same position in self")
        if not self.include_self:
            gx = MaskedFill.apply(gx, 0, mask=self.hit)
        return (gx if self.needs(0) else None), gsrc


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce(x: Tensor, src: Tensor, d: int, grid, ishape, reduce: str, include_self: bool, op: str) -> Tensor:
    if reduce == "mean" and x._data.dtype.kind == "b":
        raise NotImplementedError(f"{op}(): reduce='mean' is not implemented for bool tensors; convert with .long()")
    return ScatterReduce.apply(x, src, dim=d, grid=grid, ishape=ishape, reduce=reduce,
                               include_self=bool(include_self), op=op)


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """A copy of input with src reduced into it at index along dim: out[index[i][j]][j] = reduce(out[...],
    src[i][j]) for dim 0, `reduce` one of 'sum', 'prod', 'mean', 'amax', 'amin' over every value sent to a
    position (and the old value unless include_self=False). Integer 'mean' rounds down."""
    _tensor(input, "scatter_reduce")
    _tensor(src, "scatter_reduce", "src")
    r = _REDUCE_ALIASES.get(reduce, reduce)
    if r not in _REDUCTIONS:
        raise RuntimeError(f"scatter_reduce(): reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    x, d, grid, ishape = _scatter_args(input, dim, index, src, "scatter_reduce")
    return _scatter_reduce(x, src, d, grid, ishape, r, include_self, "scatter_reduce")


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In-place scatter_reduce."""
    return _inplace(self, scatter_reduce, ScatterReduce, "scatter_reduce_", dim, index, src, reduce,
                    include_self=include_self)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")
_WARNED = set()


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """A copy of input with source's slice i reduced into position index[i] along `dim`: `reduce` one of
    'prod', 'mean', 'amax', 'amin' over every slice sent to a position (and the old one unless
    include_self=False). It is scatter_reduce with the index repeated across the other dimensions."""
    x = _tensor(input, "index_reduce")
    src = _tensor(source, "index_reduce", "source")
    if "index_reduce" not in _WARNED:  # (PyTorch warns once too)
        _WARNED.add("index_reduce")
        warnings.warn("index_reduce() is in beta and the API may change at any time.", UserWarning, stacklevel=2)
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = normalize_dim(dim, x.ndim, "index_reduce_")
    size = x.shape[d] if x.ndim else 1
    a = _vector_index(index, size, d, "index_reduce_", dtypes=("int64", "int32"),
                      oob_msg="index_reduce_(): index out of range in self (index values must be in "
                              f"[0, {size}) for dimension {d})")
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_sname(x)}) and source ({_sname(src)}) must have the same "
                           f"scalar type")
    n = src.shape[d] if src.ndim else 1
    _same_slices(x, src, d, "index_reduce_")
    if n != a.size:
        raise RuntimeError(f"index_reduce_(): Number of indices ({a.size}) should be equal to source.size(dim): "
                           f"({n}), for dim: {d}")
    backend.check_same_device("index_reduce_", (x._data, src._data))
    if x.ndim == 0:
        x1, s1 = S.View.apply(x, (1,)), S.View.apply(src, (1,))
        return S.View.apply(index_reduce(x1, 0, make(a), s1, reduce, include_self=include_self), ())
    shape = src.shape
    full = backend.array_module(a).broadcast_to(a.reshape(tuple(-1 if k == d else 1 for k in range(len(shape)))),
                                               shape)
    return _scatter_reduce(x, src, d, _grid(full, d), shape, reduce, include_self, "index_reduce")


def index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    """In-place index_reduce."""
    return _inplace(self, index_reduce, ScatterReduce, "index_reduce_", dim, index, source, reduce,
                    include_self=include_self)


# ---------------------------------------------------------------------- masked_scatter, put, index_put
class MaskedScatter(Op):
    """z = x (broadcast with mask) with the positions where mask is True filled, in row-major order, by the
    first k = mask.sum() elements of src;  dz/dx = gz where not mask, dz/dsrc = gz[mask] in src's first k
    elements (zero in the rest)."""

    saves_inputs = False

    def forward(self, x, src, mask):
        xp = backend.array_module(x)
        shape = np.broadcast_shapes(x.shape, mask.shape)
        self.mask, self.x_shape, self.src_shape = xp.broadcast_to(mask, shape), x.shape, src.shape
        self.k = int(xp.count_nonzero(self.mask))
        out = xp.broadcast_to(x, shape).copy()
        out[self.mask] = src.reshape(-1)[:self.k]
        return out

    jvp = Op.linear_jvp

    def backward(self, gz):
        gx = gsrc = None
        if self.needs(0):
            gx = A.sum_to(MaskedFill.apply(gz, 0, mask=self.mask), self.x_shape)
        if self.needs(1):
            g = GetItem.apply(gz, idx=(None, (self.mask, Ellipsis), 1))  # the k masked values, in order
            n = math.prod(self.src_shape)
            g = IndexBackward.apply(g, shape=(n,), idx=(None, (slice(0, self.k), Ellipsis), 0))  # padded to src
            gsrc = S.View.apply(g, self.src_shape)
        return gx, gsrc


def _masked_scatter_args(x: Tensor, mask, source, op: str, in_place: bool):
    mask = _tensor(mask, op, "mask")
    src = _tensor(source, op, "source")
    if mask._data.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {_sname(mask)}")
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {_sname(x)} and "
                           f"{_sname(src)}")
    try:
        shape = np.broadcast_shapes(x.shape, mask.shape)
    except ValueError:
        shape = None
    if shape is None or (in_place and shape != x.shape):
        raise RuntimeError(f"{op}(): the mask of shape {list(mask.shape)} cannot be broadcast to the "
                           f"{'tensor' if in_place else 'input'}'s shape {list(x.shape)}")
    backend.check_same_device(op, (x._data, mask._data, src._data))
    k = int(backend.array_module(mask._data).count_nonzero(mask._data))
    if k > src._data.size:
        raise RuntimeError(f"{op}(): Number of elements of source < number of ones in mask ({src._data.size} < {k})")
    return mask, src


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of input (broadcast with mask) whose positions where mask is True take, in row-major order, the
    leading elements of source (which needs at least mask.sum() elements)."""
    x = _tensor(input, "masked_scatter")
    mask, src = _masked_scatter_args(x, mask, source, "masked_scatter", False)
    return MaskedScatter.apply(x, src, mask=mask._data)


def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In-place masked_scatter (mask must broadcast to self's shape)."""
    m, src = _masked_scatter_args(self, mask, source, "masked_scatter_", True)

    def write(arr):
        mb = backend.array_module(arr).broadcast_to(m._data, arr.shape)
        arr[mb] = src._data.reshape(-1)[:int(mb.sum())]
    return _in_place(self, "masked_scatter_", MaskedScatter, masked_scatter, (mask, source), write)


class PutInto(Op):
    """z = x with z.flatten()[index] = src.flatten() (accumulate: += src, repeats adding up);
    dz/dx = gz (accumulate) or gz with the written positions zeroed, dz/dsrc = gz.flatten()[index]."""

    saves_inputs = False

    def forward(self, x, src, index, accumulate):
        self.index, self.accumulate, self.src_shape = index, accumulate, src.shape
        out = x.copy()
        _put_flat(out.reshape(-1), index, src.reshape(-1), accumulate)  # (a fresh copy: its flat view writes through)
        return out

    jvp = Op.linear_jvp

    def backward(self, gz):
        gx = gsrc = None
        if self.needs(0):
            gx = gz if self.accumulate else PutInto.apply(gz, S._zeros(gz, self.src_shape), index=self.index,
                                                          accumulate=False)
        if self.needs(1):
            gsrc = S.View.apply(Take.apply(gz, index=self.index), self.src_shape)
        return gx, gsrc


def _put_flat(flat, index, values, accumulate: bool) -> None:
    if accumulate:
        backend.array_module(flat).add.at(flat, index, values)
    else:
        flat[index] = values


def _put_args(x: Tensor, index, source, op: str):
    index = _tensor(index, op, "index")
    src = _tensor(source, op, "source")
    if index._data.dtype != _INT64:
        raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {_sname(index)}")
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{_sname(x)} and source.dtype = {_sname(src)}")
    if src._data.size != index._data.size:
        raise IndexError(f"{op}(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {src._data.size}, index.numel() = {index._data.size}")
    backend.check_same_device(op, (x._data, index._data, src._data))
    n = x._data.size
    a = index._data.reshape(-1)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if hi >= n or lo < -n:
            raise IndexError(f"{op}(): out of range: tried to access index {hi if hi >= n else lo} on a tensor of {n} "
                             f"elements.")
        if lo < 0:
            a = backend.array_module(a).where(a < 0, a + n, a)
    return src, a


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of input with source's elements written at the flat positions `index` (input read as 1-D;
    negative positions count from the end); accumulate=True adds them instead (repeats add up)."""
    x = _tensor(input, "put")
    src, a = _put_args(x, index, source, "put_")
    return PutInto.apply(x, src, index=a, accumulate=bool(accumulate))


def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place put."""
    def write(arr):
        src, a = _put_args(self, index, source, "put_")
        if arr.flags.c_contiguous:
            _put_flat(arr.reshape(-1), a, src._data.reshape(-1), bool(accumulate))
        else:  # (reshape would copy)
            rows = backend.array_module(arr).unravel_index(a, arr.shape)
            if accumulate:
                backend.array_module(arr).add.at(arr, rows, src._data.reshape(-1))
            else:
                arr[rows] = src._data.reshape(-1)
    return _in_place(self, "put_", PutInto, put, (index, source, accumulate), write)


def _index_put_args(x: Tensor, indices, values, op: str):
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): argument 'indices' must be tuple of Tensors, not {type_name(indices)}")
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 'indices', but got {type_name(t)}")
    v = _tensor(values, op, "values")
    if len(indices) > max(x.ndim, 1) and not any(t._data.dtype == np.bool_ for t in indices):
        raise IndexError(f"{op}(): too many indices for tensor of dimension {x.ndim} (got {len(indices)})")
    idx = _parse(tuple(indices), x.shape, x._data)
    if v._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): Index put requires the source and destination dtypes match, got {_sname(x)} for "
                           f"the destination and {_sname(v)} for the source.")
    backend.check_same_device(op, (x._data, v._data))
    pre, main, _ = idx
    # the indexing result's shape, read off a zero-memory stand-in of x (on x's device, as the index arrays are)
    xp = backend.array_module(x._data)
    with on_device_of(x._data):
        dummy = xp.lib.stride_tricks.as_strided(xp.zeros(1, np.int8), x.shape, (0,) * x.ndim)
    rshape = (dummy if pre is None else dummy[pre])[main].shape
    try:
        ok = np.broadcast_shapes(v.shape, rshape) == rshape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(v.shape)} cannot be broadcast to indexing "
                           f"result of shape {list(rshape)}")
    return idx, v, rshape


def index_put(input: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of input with `out[indices] = values` (indices: a tuple of index tensors, as in x[i, j]; values
    broadcast to the indexed shape); accumulate=True adds instead (repeated positions add up)."""
    x = _tensor(input, "index_put")
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        x, values = cast_args(IndexPut, x, values)
    idx, v, rshape = _index_put_args(x, indices, values, "index_put")
    if not accumulate:
        return IndexPut.apply(x, v, idx=idx)
    return x + IndexBackward.apply(A.broadcast_to(v, rshape), shape=x.shape, idx=idx)


def index_put_(self: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    """In-place index_put."""
    def write(arr):
        idx, v, _ = _index_put_args(self, indices, values, "index_put_")
        if not accumulate:
            _put(arr, idx, v._data)
            return
        pre, main, kind = idx
        view = arr if pre is None else arr[pre]
        if kind == 2:
            backend.array_module(arr).add.at(view, main, v._data)
        else:  # (no position repeats)
            view[main] += v._data
    return _in_place(self, "index_put_", IndexPut, index_put, (indices, values, accumulate), write)


# ---------------------------------------------------------------------- storage geometry and strided views
def _address(a) -> int:
    return a.__array_interface__["data"][0] if a.__class__ is np.ndarray else a.data.ptr


def _extent(a) -> tuple[int, int]:
    """(lowest address, number of elements spanned) of array a's memory."""
    lo = hi = _address(a)
    for n, s in zip(a.shape, a.strides):
        if n > 1:
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
    return lo, (0 if a.size == 0 else (hi - lo) // a.itemsize + 1)


def _storage(t: Tensor) -> tuple:
    """(owner, offset): the tensor whose array is t's storage (t's base; t itself when it is not a view, or when
    its memory is not its base's) and t's offset into that storage, in elements."""
    _capture.settle(t)
    owner = t if t._base is None else t._base
    _capture.settle(owner)
    a, root = t._data, owner._data
    lo, n = _extent(root)
    offset, rem = divmod(_address(a) - lo, a.itemsize)
    if root.dtype != a.dtype or rem or not 0 <= offset <= n:
        return t, 0
    return owner, offset


def _flat(root):
    """The memory of array `root` as a 1-D array (from its lowest address, every element it spans)."""
    lo, n = _extent(root)
    for k, s in enumerate(root.strides):  # start from the lowest address
        if s < 0:
            root = root[(slice(None),) * k + (slice(None, None, -1),)]
    return backend.array_module(root).lib.stride_tricks.as_strided(root, (n,), (root.itemsize,))


def _strides(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def _flat_pos(size: tuple, stride: tuple, offset: int, like):
    """offset + Σ_k i_k·stride_k for every index (i_0, i_1, ...) of a tensor of `size`: positions in a storage."""
    xp = backend.array_module(like)
    with on_device_of(like):
        pos = xp.full(size, offset, _INT64)
        for k, (n, s) in enumerate(zip(size, stride)):
            pos += xp.arange(n, dtype=_INT64).reshape((n,) + (1,) * (len(size) - k - 1)) * s
    return pos


class AsStrided(Op):
    """z = the storage elements at offset + Σ_k i_k·stride_k (a view of x's storage: the array of `owner`, x's base
    or x itself, passed as an input so that a deferred run reads that very memory);
    dz/dx = gz summed into the storage (a location read by several outputs gets their sum), read at x's own
    elements (divided among the elements of x that share one location)."""

    saves_inputs = False

    def forward(self, x, owner, size, stride, offset, x_pos):
        storage = _flat(owner)
        self.extent, self.x_pos = storage.shape[0], x_pos
        self.pos = _flat_pos(size, stride, offset, x)
        return backend.array_module(x).lib.stride_tricks.as_strided(
            storage[offset:], size, tuple(s * x.itemsize for s in stride))

    def jvp(self, t, x, owner, *geometry):
        """The tangent of the storage, known at x's elements (0 elsewhere: the rest of owner's tangent is not x's),
        read at the view's positions; an element of x that shares its location with others gives it their mean."""
        tx = t[0]
        if not isinstance(tx, Tensor):
            return 0
        storage = Put.apply(tx, shape=(self.extent,), index=self.x_pos)
        shared = self._shared(tx)
        if shared is not None:
            storage = storage / make(shared)
        return Take.apply(storage, index=self.pos)

    def backward(self, gz):
        g = Take.apply(Put.apply(gz, shape=(self.extent,), index=self.pos), index=self.x_pos)
        shared = self._shared(gz)
        if shared is not None:
            g = g / make(shared[self.x_pos])
        return g, None

    def _shared(self, like: Tensor):
        """How many elements of x each storage location holds (at least 1), in like's dtype; None when x does not
        overlap itself."""
        xp = backend.array_module(like._data)
        flat = self.x_pos.reshape(-1)
        if not flat.size or xp.unique(flat).size == flat.size:
            return None
        with on_device_of(like._data):
            return xp.maximum(xp.bincount(flat, minlength=self.extent), 1).astype(like._data.dtype)


def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view of input's storage with the given size, stride (in elements) and storage offset (default:
    input's own): element (i_0, i_1, ...) is storage[storage_offset + Σ i_k·stride_k]."""
    x = _tensor(input, "as_strided")
    size, stride = _ints(size, "as_strided", "size"), _ints(stride, "as_strided", "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided(): mismatch in length of strides and shape: size {list(size)}, stride "
                           f"{list(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"as_strided(): sizes must be non-negative, got {list(size)}")
    owner, own = _storage(x)
    offset = own if storage_offset is None else _int(storage_offset, "as_strided", "storage_offset")
    if offset < 0:
        raise RuntimeError(f"as_strided(): invalid storage offset {offset}")
    need = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    extent = _extent(owner._data)[1]
    if need > extent:
        isz = x._data.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {isz} requiring a storage size of {need * isz} are out of bounds for storage of "
                           f"size {extent * isz}")
    x_pos = _flat_pos(x.shape, _strides(x._data), own, x._data)
    return as_view(AsStrided.apply(x, owner, size, stride, offset, x_pos), x)


def stride(self: Tensor, dim: int | None = None):
    """The step in elements between neighbours along each dimension (a tuple), or along `dim`."""
    _capture.settle(self)
    s = _strides(self._data)
    return s if dim is None else s[normalize_dim(dim, self._data.ndim, "stride")]


def storage_offset(self: Tensor) -> int:
    """The position (in elements) of this tensor's first element in its storage (its base's memory)."""
    return _storage(self)[1]


class Unfold(Op):
    """z[..., i, ..., k] = x[..., i·step + k, ...]: every window of `size` along `dim`, stepping by `step`, with the
    window as a new last dimension (a view);  dz/dx = each window's gradient added back where it was read."""

    saves_inputs = False

    def forward(self, x, dim, size, step):
        self.shape, self.dim, self.size, self.step = x.shape, dim, size, step
        if x.ndim == 0:
            return x.reshape(size)
        n, st = x.shape[dim], x.strides
        m = (n - size) // step + 1
        return backend.array_module(x).lib.stride_tricks.as_strided(
            x, x.shape[:dim] + (m,) + x.shape[dim + 1:] + (size,),
            st[:dim] + (st[dim] * step,) + st[dim + 1:] + (st[dim],))

    jvp = Op.linear_jvp

    def backward(self, gz):
        return UnfoldBackward.apply(gz, self.shape, self.dim, self.size, self.step)


class UnfoldBackward(Op):
    """z = zeros of `shape` with each window of g (Unfold's layout) added at its place;  dz/dg = unfold(gz)."""

    saves_inputs = False

    def forward(self, g, shape, dim, size, step):
        self.dim, self.size, self.step = dim, size, step
        xp = backend.array_module(g)
        with on_device_of(g):
            z = xp.zeros(shape, g.dtype)
        if not shape:
            z[()] = g.reshape(())
            return z
        zd, gd = xp.moveaxis(z, dim, -1), xp.moveaxis(g, dim, -2)  # (..., n) and (..., m, size)
        m, st = gd.shape[-2], zd.strides
        # window i's positions [lo, lo + w) land at i·step + lo: for each block of `step` window positions, one add
        # that touches every window once (w <= step: no element twice), ceil(size / step) adds in all. A full block
        # (w == step) is a plain slice of z, added as one long row (gd's block copied flat first): for 1000x1000
        # float32 in windows of 16 by 8, 2.1 ms against 3.4 ms for an add per window position
        for lo in range(0, size, step):
            w = min(step, size - lo)
            if w == step:
                zd[..., lo:lo + m * step] += gd[..., lo:lo + w].reshape(gd.shape[:-2] + (m * w,))
            else:
                dst = xp.lib.stride_tricks.as_strided(zd[..., lo:], zd.shape[:-1] + (m, w),
                                                      st[:-1] + (st[-1] * step, st[-1]))
                dst += gd[..., lo:lo + w]
        return z

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Unfold.apply(gz, self.dim, self.size, self.step)


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A view of every slice of `size` elements along `dimension`, `step` apart, as a new last dimension:
    shape (..., (n - size) // step + 1, ..., size)."""
    n_dim = self._data.ndim
    d = normalize_dim(dimension, n_dim, "unfold")
    size, step = _int(size, "unfold", "size"), _int(step, "unfold", "step")
    n = self.shape[d] if n_dim else 1
    if size < 0:
        raise RuntimeError(f"unfold(): size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"unfold(): maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold(): step is {step} but must be > 0")
    return as_view(Unfold.apply(self, d, size, step), self)


# ---------------------------------------------------------------------- select and the *_scatter ops
def _select_index(x: Tensor, dim, index, op: str) -> tuple[int, int]:
    if x.ndim == 0:
        raise IndexError(f"{op}() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, x.ndim, op)
    i = _int(index, op, "index")
    n = x.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size {list(x.shape)} at dimension {d}")
    return d, i % n


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The view input[..., index, ...] with `dim` removed (a negative index counts from the end)."""
    x = _tensor(input, "select")
    d, i = _select_index(x, dim, index, "select")
    return getitem(x, (slice(None),) * d + (i,))


def _scatter_into(x: Tensor, src, idx, slice_shape: tuple, op: str) -> Tensor:
    """x with src written at the basic index idx (whose result has slice_shape); src is cast to x's dtype."""
    src = _tensor(src, op, "src")
    if src.shape != slice_shape:
        raise RuntimeError(f"{op}(): expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(slice_shape)}")
    backend.check_same_device(op, (x._data, src._data))
    return IndexPut.apply(x, to_dtype(src, x.dtype), idx=idx)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of input with input[..., index, ...] (along `dim`) replaced by src;  dz/dsrc = select(gz)."""
    x = _tensor(input, "select_scatter")
    d, i = _select_index(x, dim, index, "select_scatter")
    return _scatter_into(x, src, (None, (slice(None),) * d + (i, Ellipsis), 0), x.shape[:d] + x.shape[d + 1:],
                         "select_scatter")


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """A copy of input with the slice start:end:step along `dim` replaced by src (of that slice's shape)."""
    x = _tensor(input, "slice_scatter")
    if x.ndim == 0:
        raise RuntimeError("slice_scatter(): cannot slice a 0-dim tensor")
    d = normalize_dim(dim, x.ndim, "slice_scatter")
    step = _int(step, "slice_scatter", "step")
    if step <= 0:
        raise RuntimeError(f"slice_scatter(): slice step must be positive, got {step}")
    s = slice(None if start is None else _int(start, "slice_scatter", "start"),
              None if end is None else _int(end, "slice_scatter", "end"), step)
    n = len(range(*s.indices(x.shape[d])))
    return _scatter_into(x, src, (None, (slice(None),) * d + (s, Ellipsis), 0), x.shape[:d] + (n,) + x.shape[d + 1:],
                         "slice_scatter")


def _diagonal(a, offset: int, d1: int, d2: int):
    """The diagonal of array a over dims d1, d2 as a writable view, PyTorch's layout: the other dims in order,
    then the diagonal."""
    n1, n2 = a.shape[d1], a.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = a[(slice(None),) * d1 + (slice(max(0, -offset), None),)] if length else a
    start = start[(slice(None),) * d2 + (slice(max(0, offset), None),)] if length else a
    rest = [k for k in range(a.ndim) if k not in (d1, d2)]
    return backend.array_module(a).lib.stride_tricks.as_strided(
        start, tuple(a.shape[k] for k in rest) + (length,),
        tuple(a.strides[k] for k in rest) + (a.strides[d1] + a.strides[d2],))


class Diagonal(Op):
    """z = the diagonal of x over (dim1, dim2) at `offset`, as its last dimension (a copy: used by backward only);
    dz/dx = gz written back onto that diagonal of zeros."""

    saves_inputs = False

    def forward(self, x, offset, d1, d2):
        self.shape, self.offset, self.d1, self.d2 = x.shape, offset, d1, d2
        return _diagonal(x, offset, d1, d2).copy()

    jvp = Op.linear_jvp

    def backward(self, gz):
        return DiagonalScatter.apply(S._zeros(gz, self.shape), gz, self.offset, self.d1, self.d2)


class DiagonalScatter(Op):
    """z = x with its diagonal over (dim1, dim2) at `offset` replaced by src;
    dz/dx = gz with that diagonal zeroed, dz/dsrc = the diagonal of gz."""

    saves_inputs = False

    def forward(self, x, src, offset, d1, d2):
        self.src_shape, self.offset, self.d1, self.d2 = src.shape, offset, d1, d2
        out = x.copy()
        _diagonal(out, offset, d1, d2)[...] = src
        return out

    jvp = Op.linear_jvp

    def backward(self, gz):
        gx = gsrc = None
        if self.needs(0):
            gx = DiagonalScatter.apply(gz, S._zeros(gz, self.src_shape), self.offset, self.d1, self.d2)
        if self.needs(1):
            gsrc = Diagonal.apply(gz, self.offset, self.d1, self.d2)
        return gx, gsrc


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of input with its diagonal over (dim1, dim2) at `offset` (above the main one when positive)
    replaced by src, laid out as torch.diagonal returns it (the other dims, then the diagonal)."""
    x = _tensor(input, "diagonal_scatter")
    src = _tensor(src, "diagonal_scatter", "src")
    if x.ndim < 2:
        raise RuntimeError(f"diagonal_scatter(): input must have at least 2 dimensions, got {x.ndim}")
    d1, d2 = normalize_dim(dim1, x.ndim, "diagonal_scatter"), normalize_dim(dim2, x.ndim, "diagonal_scatter")
    if d1 == d2:
        raise RuntimeError(f"diagonal_scatter(): diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _int(offset, "diagonal_scatter", "offset")
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), x.shape, (0,) * x.ndim)  # x's shape, no memory
    want = _diagonal(dummy, offset, d1, d2).shape
    if src.shape != want:
        raise RuntimeError(f"diagonal_scatter(): expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(want)}")
    backend.check_same_device("diagonal_scatter", (x._data, src._data))
    return DiagonalScatter.apply(x, to_dtype(src, x.dtype), offset, d1, d2)


# ---------------------------------------------------------------------- in-place changes of shape (metadata)
def _view_in_place(self: Tensor, op: str, fn, *args) -> Tensor:
    """self becomes the view fn(self, *args) of its own memory (PyTorch's in-place view ops, e.g. unsqueeze_):
    the same storage and version counter, a new shape; under autograd it takes the view's place in the graph."""
    if MODE.grad and self._requires_grad and self._edge is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation.")
    if _capture.ACTIVE is not None:
        _capture.refuse(f"{op} (an in-place change of a tensor's shape)")
    r = fn(self, *args)
    _capture.settle(r)
    self._data = r._data
    if r._requires_grad:
        self._edge, self._requires_grad = r._edge, True
    if MODE.fw:  # the view's tangent (self's, viewed the same way) becomes self's
        take_tangents(self, r)
    bump_version(self)
    return self


def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """In-place unsqueeze: a size-1 dimension inserted at `dim`."""
    return _view_in_place(self, "unsqueeze_", S.unsqueeze, dim)


def squeeze_(self: Tensor, dim=None) -> Tensor:
    """In-place squeeze: size-1 dimensions (those in `dim` when given) removed."""
    return _view_in_place(self, "squeeze_", S.squeeze, dim)


def t_(self: Tensor) -> Tensor:
    """In-place t(): a matrix transposed (0-d and 1-d tensors unchanged)."""
    if self._data.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self._data.ndim}D")
    return _view_in_place(self, "t_", S.t)


def transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """In-place transpose: dims dim0 and dim1 swapped."""
    return _view_in_place(self, "transpose_", S.transpose, dim0, dim1)


def as_strided_(self: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """In-place as_strided: self becomes the given view of its storage."""
    return _view_in_place(self, "as_strided_", as_strided, size, stride, storage_offset)


def resize_(self: Tensor, *sizes, memory_format=None) -> Tensor:
    """self reshaped to `sizes`, contiguous, over its storage from its offset on: the values it keeps are the
    first elements of that storage; when the storage is too small, new uninitialised memory replaces it (the
    old values copied to its start). Not for tensors that require grad."""
    shape = _ints(sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes, "resize_", "size")
    if any(n < 0 for n in shape):
        raise RuntimeError(f"resize_(): sizes must be non-negative, got {list(shape)}")
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if _capture.ACTIVE is not None:
        _capture.refuse("resize_() (an in-place change of a tensor's shape)")
    owner, offset = _storage(self)
    storage = _flat(owner._data)
    n = math.prod(shape)
    if offset + n <= storage.shape[0]:
        self._data = storage[offset:offset + n].reshape(shape)
    else:  # new storage; this tensor no longer shares memory with its base
        xp = backend.array_module(self._data)
        with on_device_of(self._data):
            new = xp.empty(n, self._data.dtype)
        kept = storage[offset:]
        new[:kept.shape[0]] = kept
        if self._base is not None:
            self._vc, self._base = self._version, None
        self._data = new.reshape(shape)
    bump_version(self)
    return self


def resize_as_(self: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """resize_ to the_template's shape."""
    return resize_(self, _tensor(the_template, "resize_as_", "the_template").shape)


# ---------------------------------------------------------------------- splitting
def _narrow_pieces(x: Tensor, d: int, bounds: list) -> tuple:
    """The pieces x[..., a:b, ...] along d for (a, b) in bounds (normalised: 0 <= a <= b <= n), as views: from
    one Split node when they tile the dimension in order, else one narrow each (pieces may overlap)."""
    if all(b0[1] == b1[0] for b0, b1 in zip(bounds, bounds[1:])) and bounds[0][0] == 0 and bounds[-1][1] == x.shape[d]:
        return S.Split.apply(x, tuple(b - a for a, b in bounds), d)
    return tuple(S.narrow(x, d, a, b - a) for a, b in bounds)


def tensor_split(input: Tensor, indices_or_sections=None, dim: int = 0, *, sections=None, indices=None,
                 tensor_indices_or_sections=None) -> tuple:
    """Views of input along `dim`: `sections` (an int) pieces as equal as possible (the first n % sections one
    longer), or the pieces between the given `indices` (Python slice bounds: input[:i0], input[i0:i1], ...,
    input[ik:]); a tensor argument is read as sections when 0-d, as indices when 1-d."""
    x = _tensor(input, "tensor_split")
    given = [v for v in (indices_or_sections, sections, indices, tensor_indices_or_sections) if v is not None]
    if len(given) != 1:
        raise TypeError("tensor_split(): expected exactly one of indices_or_sections, sections, indices or "
                        "tensor_indices_or_sections")
    arg = given[0]
    if x.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    if isinstance(arg, Tensor):
        if arg._data.dtype != _INT64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{_sname(arg)}")
        if arg.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {arg.ndim} dims")
        arg = arg.tolist()
    d = normalize_dim(dim, x.ndim, "tensor_split")
    n = x.shape[d]
    if isinstance(arg, (tuple, list)):
        cuts = [_int(i, "tensor_split", "indices") for i in arg]
        starts, ends = [0] + cuts, cuts + [n]
        bounds = []
        for a, b in zip(starts, ends):
            a, b, _ = slice(a, b).indices(n)
            bounds.append((a, max(a, b)))
        return _narrow_pieces(x, d, bounds)
    k = _int(arg, "tensor_split", "sections")
    if k <= 0:
        raise RuntimeError(f"tensor_split(): number of sections must be larger than 0, got {k}")
    q, r = divmod(n, k)
    return S.Split.apply(x, (q + 1,) * r + (q,) * (k - r), d)


def _split_like_numpy(x: Tensor, arg, d: int, need: int, op: str) -> tuple:
    if x.ndim < need:
        raise RuntimeError(f"torch.{op} requires a tensor with at least {need} dimension{'s' if need > 1 else ''}, "
                           f"but got a tensor with {x.ndim} dimensions!")
    if not isinstance(arg, (tuple, list, Tensor)):
        k = _int(arg, op, "indices_or_sections")
        if k == 0 or x.shape[d] % k:
            raise RuntimeError(f"torch.{op} attempted to split along dimension {d}, but the size of the dimension "
                               f"{x.shape[d]} is not divisible by the split_size {k}!")
    return tensor_split(x, arg, d)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 1 (dim 0 for 1-D input); an int must divide that dimension evenly."""
    x = _tensor(input, "hsplit")
    return _split_like_numpy(x, indices_or_sections, 1 if x.ndim > 1 else 0, 1, "hsplit")


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 0 of a tensor of 2+ dims; an int must divide that dimension evenly."""
    return _split_like_numpy(_tensor(input, "vsplit"), indices_or_sections, 0, 2, "vsplit")


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 2 of a tensor of 3+ dims; an int must divide that dimension evenly."""
    return _split_like_numpy(_tensor(input, "dsplit"), indices_or_sections, 2, 3, "dsplit")


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Views of input along `dim` of the given sizes (which must add up to its length)."""
    x = _tensor(input, "split_with_sizes")
    if not isinstance(split_sizes, (tuple, list)):
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' must be a sequence of ints, not "
                        f"{type_name(split_sizes)}")
    return S.split(x, list(split_sizes), dim)


# ---------------------------------------------------------------------- joining and combining
def column_stack(tensors) -> Tensor:
    """The tensors side by side as columns: 0-d and 1-d ones become columns (n, 1), then all are joined on dim 1."""
    ts = S._tensor_list(tensors, "column_stack")
    if not ts:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return S.cat([S._reshape(t, (t._data.size, 1), "column_stack", False) if t.ndim <= 1 else t for t in ts], 1)


row_stack = S.vstack


class BlockDiag(Op):
    """z = the inputs (each as a matrix: 0-d -> 1x1, 1-d -> 1xn) along the diagonal of a block matrix, zeros
    elsewhere;  dz/dxi = gz's block i."""

    saves_inputs = False

    def forward(self, *arrays, dtype):
        xp = backend.array_module(arrays[0])
        self.shapes = [a.shape for a in arrays]
        self.dtypes = [a.dtype for a in arrays]
        mats = [a.reshape((1, 1) if a.ndim == 0 else (1, -1) if a.ndim == 1 else a.shape) for a in arrays]
        self.corners = []
        r = c = 0
        for m in mats:
            self.corners.append((r, c, r + m.shape[0], c + m.shape[1]))
            r, c = r + m.shape[0], c + m.shape[1]
        with on_device_of(arrays[0]):
            out = xp.zeros((r, c), dtype)
        for m, (r0, c0, r1, c1) in zip(mats, self.corners):
            out[r0:r1, c0:c1] = m
        return out

    def jvp(self, t, *inputs):
        return self.reapply(*S._tangents(self, t, inputs))  # the tangents as blocks

    def backward(self, gz):
        grads = []
        for i, ((r0, c0, r1, c1), shape, d) in enumerate(zip(self.corners, self.shapes, self.dtypes)):
            if not self.needs(i):
                grads.append(None)
                continue
            g = S.View.apply(GetItem.apply(gz, idx=(None, (slice(r0, r1), slice(c0, c1), Ellipsis), 0)), shape)
            grads.append(g if g._data.dtype == d else to_dtype(g, dt.FROM_NP[d]))
        return tuple(grads)


def block_diag(*tensors) -> Tensor:
    """The block-diagonal matrix with the given tensors (0-d, 1-d or 2-d) as its blocks; dtypes are promoted."""
    ts = S._tensor_list(list(tensors), "block_diag")
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
    if not ts:
        return constant(np.zeros((1, 0), dt.NP_DEFAULT_FLOAT))
    backend.check_same_device("block_diag", [t._data for t in ts])
    d = S._promoted_dtype(ts)
    return BlockDiag.apply(*ts, dtype=d if d is not None else ts[0]._data.dtype)


def _same_kind_list(tensors, op: str) -> list:
    ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else list(tensors)
    ts = S._tensor_list(ts, op)
    if not ts:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    if any(t._data.dtype != ts[0]._data.dtype for t in ts):
        raise RuntimeError(f"{op} expects all tensors to have the same dtype, got "
                           f"{[str(t.dtype) for t in ts]}")
    backend.check_same_device(op, [t._data for t in ts])
    return ts


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids: for 1-d (or 0-d) tensors of lengths n0, n1, ..., the i-th result repeats tensor i along
    dimension i of a grid of shape (n0, n1, ...) ('ij'); indexing='xy' swaps the first two dimensions (Cartesian
    order). The results are views (expanded), as in PyTorch."""
    ts = _same_kind_list(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                               f"shape {list(t.shape)} at position {i}")
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(ts)
    for t, a in zip(ts, axes):
        shape[a] = t._data.size
    out = []
    for t, a in zip(ts, axes):
        v = S._reshape(t, tuple(-1 if k == a else 1 for k in range(len(ts))), "meshgrid", False)
        out.append(S._expand(v, tuple(shape), "meshgrid"))
    return tuple(out)


def cartesian_prod(*tensors) -> Tensor:
    """The Cartesian product of 1-d tensors as rows of a (N, k) tensor, in lexicographic order (like
    itertools.product); a single tensor comes back as it is."""
    ts = _same_kind_list(tensors, "meshgrid")
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod(): Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return S.stack([S.flatten(g) for g in grids], 1)


def _combination_index(n: int, r: int, with_replacement: bool) -> np.ndarray:
    """Every r-combination of range(n) (with repeats: non-decreasing) as rows of an int64 array, in lexicographic
    order."""
    if r == 2:
        return np.stack(np.triu_indices(n, 0 if with_replacement else 1), 1).astype(_INT64)
    grid = np.indices((n,) * r).reshape(r, -1).T  # every r-tuple, lexicographically (n**r rows, as PyTorch builds)
    step = grid[:, 1:] - grid[:, :-1]
    keep = (step >= 0).all(1) if with_replacement else (step > 0).all(1)
    return grid[keep].astype(_INT64)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of the elements of 1-d input, as rows (like itertools.combinations, or
    combinations_with_replacement); r = 0 gives an empty 1-d tensor."""
    x = _tensor(input, "combinations")
    if x.ndim != 1:
        raise RuntimeError(f"combinations(): Expect a 1D vector, but got shape {list(x.shape)}")
    r = _int(r, "combinations", "r")
    if r < 0:
        raise RuntimeError(f"combinations(): Expect a non-negative number, but got {r}")
    if r == 0:
        return getitem(x, slice(0, 0))
    idx = _combination_index(x.shape[0], r, bool(with_replacement))
    if x._data.__class__ is not np.ndarray:
        idx = backend.transfer(idx, backend.device_of(x._data))
    return getitem(x, constant(idx))


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """input rotated by k·90° in the plane of `dims`, from dims[0] towards dims[1] (k < 0: the other way)."""
    x = _tensor(input, "rot90")
    dims = _ints(dims, "rot90", "dims")
    if len(dims) != 2:
        raise RuntimeError(f"rot90(): expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"rot90(): expected total dims >= 2, but got total dims = {x.ndim}")
    if dims[0] == dims[1] or abs(dims[0] - dims[1]) == x.ndim:
        raise RuntimeError(f"rot90(): expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = "
                           f"{dims[1]}")
    d0, d1 = normalize_dim(dims[0], x.ndim, "rot90"), normalize_dim(dims[1], x.ndim, "rot90")
    k = _int(k, "rot90", "k") % 4
    if k == 1:
        return S.transpose(S.flip(x, (d1,)), d0, d1)
    if k == 2:
        return S.flip(x, (d0, d1))
    if k == 3:
        return S.transpose(S.flip(x, (d0,)), d0, d1)
    return clone(x)


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A copy of narrow(input, dim, start, length)."""
    return clone(S.narrow(_tensor(input, "narrow_copy"), dim, start, length))


def sum_to_size(self: Tensor, *size) -> Tensor:
    """self summed over the dimensions it was broadcast along from `size` (size must expand to self's shape)."""
    shape = _ints(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size, "sum_to_size", "size")
    mine = self.shape
    lead = len(mine) - len(shape)
    if lead < 0 or any(s != 1 and s != mine[lead + k] for k, s in enumerate(shape)):
        raise RuntimeError(f"sum_to_size(): size {{{list(shape)}}} is not expandable to size {{{list(mine)}}}.")
    return A.sum_to(self, shape)


class RepeatInterleave(Op):
    """z = x with its slice i along dim repeated repeats[i] times;  dz/dx = the gradients of the copies of
    each slice added up (a reshape and sum when every slice repeats r times, else segment sums). `total`, the
    result's length along dim, is an argument so that the result's shape follows from the arguments (lazy mode
    learns shapes from them; the counts array itself is read as a shape)."""

    saves_inputs = False

    def forward(self, x, repeats, dim, total):
        self.dim, self.shape, self.repeats = dim, x.shape, repeats
        xp = backend.array_module(x)
        return xp.repeat(x, repeats if xp is np or isinstance(repeats, int) else repeats.tolist(), axis=dim)

    jvp = Op.linear_jvp

    def backward(self, gz):
        d, r = self.dim, self.repeats
        if isinstance(r, int):  # view gz as (..., n, r, ...) and sum the r copies
            split = self.shape[:d] + (self.shape[d], r) + self.shape[d + 1:]
            return S.View.apply(A.sum_to(S.View.apply(gz, split), split[:d + 1] + (1,) + split[d + 2:]), self.shape)
        return SumRepeats.apply(gz, r, d, self.shape[d])


class SumRepeats(Op):
    """z[..., i, ...] = the sum of the repeats[i] consecutive slices of g that repeat_interleave made of slice i,
    along dim (its adjoint);  dz/dg = repeat_interleave(gz, repeats, dim)."""

    saves_inputs = False

    def forward(self, g, repeats, dim, n):
        self.repeats, self.dim, self.total = repeats, dim, g.shape[dim]
        xp = backend.array_module(g)
        gm = xp.moveaxis(g, dim, 0)  # (sum(repeats), ...): the copies, slice by slice
        with on_device_of(g):
            counts = xp.asarray(repeats, dtype=_INT64)
            out = xp.zeros((n,) + gm.shape[1:], g.dtype)
            first = xp.cumsum(counts) - counts  # where the copies of each slice start
            top = int(counts.max()) if n else 0
            if top <= 64:
                # add the j-th copies of every slice that has one, for j = 0, 1, ...: those slices are a prefix of the
                # slices ordered by count. A loop over at most 64 copy numbers: for rows of 1000 floats, 1.5M of
                # them, 1.3 ms, against 3.2 ms for the flat add.at below and 9.6 ms for add.reduceat along dim 0
                order = xp.argsort(-counts, kind="stable")
                have = xp.searchsorted(-counts[order], -xp.arange(top), side="left").tolist()
                for j, m in enumerate(have):
                    rows = order[:m]
                    out[rows] += gm[first[rows] + j]
            else:  # any counts: one unbuffered add at flat positions
                inner = math.prod(gm.shape[1:])
                owner = xp.repeat(xp.arange(n, dtype=_INT64), counts)
                pos = (owner[:, None] * inner + xp.arange(inner, dtype=_INT64)).reshape(-1)
                xp.add.at(out.reshape(-1), pos, gm.reshape(-1))
        return xp.moveaxis(out, 0, dim)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return RepeatInterleave.apply(gz, self.repeats, self.dim, self.total)


def _repeats(repeats, op: str):
    """repeats as an int or a 1-d int64 array of non-negative counts."""
    if isinstance(repeats, Tensor):
        a = repeats._data
        if a.dtype.kind not in "iu":
            raise NotImplementedError(f"{op}(): repeats must be an integer tensor, got {repeats.dtype}")
        if a.ndim > 1:
            raise RuntimeError(f"{op}(): repeats must be 0-dim or 1-dim tensor, got shape {list(a.shape)}")
        if a.size and int(a.min()) < 0:
            raise RuntimeError(f"{op}(): repeats can not be negative")
        if a.size == 1:
            return int(a.reshape(-1)[0])
        return backend.to_host(a).reshape(-1).astype(_INT64, copy=False)  # (the result's length is needed now)
    r = _int(repeats, op, "repeats")
    if r < 0:
        raise RuntimeError(f"{op}(): Repeats must be non-negative, got {r}")
    return r


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Each slice of input along `dim` repeated `repeats` times (an int, or one count per slice); dim None works
    on the flattened input. repeat_interleave(counts) alone gives arange(len(counts)) repeated by counts."""
    x = _tensor(input, "repeat_interleave")
    if repeats is None:  # the one-argument form: input holds the counts
        if x.ndim != 1:
            raise RuntimeError(f"repeat_interleave only accept 1D vector as repeat, got shape {list(x.shape)}")
        r = _repeats(x, "repeat_interleave")
        with on_device_of(x._data):
            ar = backend.array_module(x._data).arange(x.shape[0], dtype=_INT64)
        return repeat_interleave(constant(ar), x, 0, output_size=output_size)
    r = _repeats(repeats, "repeat_interleave")
    if dim is None:
        x, d = S.flatten(x), 0
    else:
        if x.ndim == 0:
            raise IndexError("repeat_interleave(): Dimension out of range: a 0-dim input takes dim=None")
        d = normalize_dim(dim, x.ndim, "repeat_interleave")
    n = x.shape[d]
    if not isinstance(r, int) and r.size != n:
        raise RuntimeError(f"repeat_interleave(): repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {r.size} and input.size({d}) = {n}")
    total = r * n if isinstance(r, int) else int(r.sum())
    if output_size is not None and _int(output_size, "repeat_interleave", "output_size") != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got {output_size}")
    return RepeatInterleave.apply(x, r, d, total)


# ---------------------------------------------------------------------- index generators and set tests
def _index_dtype(dtype, op: str) -> np.dtype:
    d = _INT64 if dtype is None else dt.np_dtype(dtype)
    if d not in (np.dtype(np.int32), _INT64):
        raise NotImplementedError(f'"{op}" not implemented for \'{_sname(d)}\': the dtype must be ember.int64 or '
                                  f'ember.int32')
    return d


def _triangle_indices(row, col, offset, dtype, device, op: str, lower: bool) -> Tensor:
    row, col, offset = _int(row, op, "row"), _int(col, op, "col"), _int(offset, op, "offset")
    for name, v in (("row", row), ("col", col)):
        if v < 0:
            raise RuntimeError(f"{op}(): {name} must be non-negative, got {v}")
    d = _index_dtype(dtype, op)
    rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    arr = np.stack((rows, cols)).astype(d)
    return make(arr if device is None else backend.transfer(arr, backend.resolve(device)))


@traced
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle (j - i <= offset) of a row x col matrix, row by row."""
    return _triangle_indices(row, col, offset, dtype, device, "tril_indices", True)


@traced
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle (j - i >= offset) of a row x col matrix, row by row."""
    return _triangle_indices(row, col, offset, dtype, device, "triu_indices", False)


@traced
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates, in an array of `shape`, of the flat (row-major) positions `indices`: a tuple of int64
    tensors shaped as indices. As PyTorch, positions are not range-checked: they wrap (modulo each size)."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): expected 'indices' to be an integer tensor, got {type_name(indices)}")
    a = indices._data
    if a.dtype.kind not in "iu":
        raise TypeError(f"unravel_index(): expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = _ints(shape, "unravel_index", "shape")
    if any(n < 0 for n in shape):
        raise ValueError(f"unravel_index(): 'shape' cannot have negative values, but got {tuple(shape)}")
    if 0 in shape:
        raise ValueError(f"unravel_index(): 'shape' cannot have zero sizes (nothing to index), got {tuple(shape)}")
    xp = backend.array_module(a)
    rest = a.astype(_INT64)
    coords = []
    for n in reversed(shape):  # floor division and modulo, last dimension first
        coords.append(xp.asarray(xp.mod(rest, n)))
        rest = xp.floor_divide(rest, n)
    return tuple(make(c) for c in reversed(coords))


@traced
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of `elements` (a tensor or a number) is in `test_elements` (a tensor or a number),
    as a bool tensor of elements' shape (invert=True: is not in). Values compare after type promotion."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin(): expected 'elements' or 'test_elements' to be a Tensor, got {type_name(elements)} "
                        f"and {type_name(test_elements)}")
    like = elements if isinstance(elements, Tensor) else test_elements
    a = elements._data if isinstance(elements, Tensor) else elements
    b = test_elements._data if isinstance(test_elements, Tensor) else test_elements
    for v in (a, b):
        if getattr(v, "dtype", None) == np.bool_ or isinstance(v, bool):
            raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    if isinstance(elements, Tensor) and isinstance(test_elements, Tensor):
        backend.check_same_device("isin", (a, b))
    xp = backend.array_module(like._data)
    with on_device_of(like._data):
        return make(xp.asarray(xp.isin(a, b, assume_unique=bool(assume_unique), invert=bool(invert))))


class Vander(Op):
    """z[i, j] = x[i] ** j for j < N (increasing powers, computed by a cumulative product: exact at 0);
    dz[i, j]/dx[i] = j · x[i] ** (j - 1), itself a Vandermonde matrix (so double backward works)."""

    def forward(self, x, n):
        xp = backend.array_module(x)
        with on_device_of(x):
            out = xp.ones((x.shape[0], n), x.dtype)
        if n > 1:
            xp.cumprod(xp.broadcast_to(x[:, None], (x.shape[0], n - 1)), axis=1, out=out[:, 1:])
        return out

    def jvp(self, t, x, n):
        # z'[i, j] = j x[i] ** (j - 1) x'[i]: column 0 (j = 0) has tangent 0
        if n <= 1:
            return 0
        dz = self._dz(x, n) * S.View.apply(t[0], (x.shape[0], 1))
        return IndexBackward.apply(dz, shape=(x.shape[0], n), idx=_AFTER_FIRST_COLUMN)

    def backward(self, gz, x, n):
        if n <= 1:
            return S._zeros(gz, x.shape)
        return R.sum(GetItem.apply(gz, idx=_AFTER_FIRST_COLUMN) * self._dz(x, n), 1)

    def _dz(self, x: Tensor, n: int) -> Tensor:
        """dz[i, j]/dx[i] = j · x[i] ** (j - 1) for j = 1 .. n - 1 (column 0 is constant)."""
        with on_device_of(x._data):
            j = constant(backend.array_module(x._data).arange(1, n, dtype=x._data.dtype))
        return Vander.apply(x, n - 1) * j


_AFTER_FIRST_COLUMN = (None, (slice(None), slice(1, None), Ellipsis), 0)  # the parsed index [:, 1:]


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of 1-d x: column j holds x ** (N - 1 - j) (increasing: x ** j), N columns (default
    len(x)); integer and bool x give int64."""
    x = _tensor(x, "vander", "x")
    if x.ndim != 1:
        raise RuntimeError(f"vander(): x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else _int(N, "vander", "N")
    if n < 0:
        raise RuntimeError(f"vander(): N must be non-negative, got {n}")
    if x._data.dtype.kind in "biu":
        x = to_dtype(x, dt.int64)
    if n <= 1:  # ones: no gradient, as in PyTorch
        with on_device_of(x._data):
            return constant(backend.array_module(x._data).ones((x.shape[0], n), x._data.dtype))
    out = Vander.apply(x, n)
    return out if increasing else S.flip(out, (1,))


# ---------------------------------------------------------------------- more in-place ops
def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Write fill_value on the main diagonal (all dims must be equal beyond 2-d); for a tall matrix, wrap=True
    starts the diagonal again every (cols + 1) rows, as NumPy's fill_diagonal."""
    shape = self.shape
    if len(shape) < 2:
        raise RuntimeError(f"fill_diagonal_(): dimensions must larger than 1, got a {len(shape)}-d tensor")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError(f"fill_diagonal_(): all dimensions of input must be of equal length, got shape "
                           f"{list(shape)}")
    if isinstance(fill_value, Tensor) or not isinstance(fill_value, (bool, int, float, np.number)):
        raise TypeError(f"fill_diagonal_(): argument 'fill_value' must be a number, not {type_name(fill_value)}")
    if len(shape) == 2:
        h, w = shape
        end = h * w if wrap else min(h, w) * w
        pos = np.arange(0, end, w + 1)
    else:
        n = shape[0]
        pos = np.arange(n) * sum(n ** k for k in range(len(shape)))
    rows = np.unravel_index(pos, shape)
    if self._data.__class__ is not np.ndarray:
        rows = tuple(backend.transfer(r, backend.device_of(self._data)) for r in rows)

    def write(arr):
        arr[rows] = fill_value

    def graph(x, value):
        return IndexPut.apply(x, value, idx=(None, rows + (Ellipsis,), 2))
    return _in_place(self, "fill_diagonal_", IndexPut, graph, (fill_value,), write)


def _aminmax_type():
    cls = collections.namedtuple("aminmax", ["min", "max"])
    cls.__module__, cls.__qualname__ = R.__name__, "return_types.aminmax"  # (picklable as reduce's others)
    cls.__repr__ = lambda self: f"ember.return_types.aminmax(\nmin={self.min!r},\nmax={self.max!r})"
    return cls


R.return_types.aminmax = _aminmax_type()  # ember.return_types.aminmax, beside max's and sort's


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """The smallest and the largest value (over `dim`, or every element): return_types.aminmax(min, max). Each
    gradient is shared evenly among the elements equal to the result, as amin's and amax's."""
    x = _tensor(input, "aminmax")
    if dim is None:
        if x._data.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        axes = tuple(range(x.ndim))
    else:
        d = normalize_dim(dim, x.ndim, "aminmax")
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {d} to have non-zero size.")
        axes = (d,) if x.ndim else ()
    lo = R._apply(R.AMax, x, axes, bool(keepdim), False)
    hi = R._apply(R.AMax, x, axes, bool(keepdim), True)
    return R.return_types.aminmax(lo, hi)


def renorm(input: Tensor, p, dim: int, maxnorm) -> Tensor:
    """input with every slice along `dim` (input.select(dim, i)) whose p-norm exceeds maxnorm scaled down to
    norm maxnorm: x · maxnorm / (‖x_i‖ + 1e-7) there, x elsewhere; the gradient is this formula's."""
    x = _tensor(input, "renorm")
    if x.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {x.ndim} dimensions")
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"renorm(): expected a floating point input, got {x.dtype}")
    if isinstance(p, bool) or not isinstance(p, (int, float, np.number)) or p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported (got p={p})")
    if isinstance(maxnorm, bool) or not isinstance(maxnorm, (int, float, np.number)) or maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = normalize_dim(dim, x.ndim, "renorm")
    norms = R.norm(x, p, tuple(k for k in range(x.ndim) if k != d), keepdim=True)
    return x * A.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


# ---------------------------------------------------------------------- shifts and in-place forms of binary ops
class _Shift(A._NonDiff):
    """x << y or x >> y on integers (PyTorch's rules: a shift by a negative amount or by the width or more gives 0,
    or -1 for a right shift of a negative number)."""

    def forward(self, x, y):
        for v in (x, y):
            if getattr(v, "dtype", None) is not None and dt.is_float(v.dtype) or isinstance(v, float):
                name = "lshift" if self.left else "rshift"
                raise NotImplementedError(f'"{name}_cpu" not implemented for \'Float\': bitwise shifts need integer '
                                          f'tensors')
        xp = backend.array_module(x if hasattr(x, "dtype") else y)
        dtype = (x if hasattr(x, "dtype") else y).dtype
        if dtype == np.bool_:  # (two bool operands: shift as integers)
            dtype = _INT64
        x, y = xp.asarray(x, dtype), xp.asarray(y, dtype)
        bits = dtype.itemsize * 8
        out_of_range = (y < 0) | (y >= bits)
        safe = xp.where(out_of_range, 0, y)
        if self.left:
            return xp.where(out_of_range, 0, xp.left_shift(x, safe)).astype(dtype, copy=False)
        return xp.where(out_of_range, xp.where(x < 0, -1, 0), xp.right_shift(x, safe)).astype(dtype, copy=False)


class _LeftShift(_Shift):
    left = True


class _RightShift(_Shift):
    left = False


def bitwise_left_shift(input, other) -> Tensor:
    """input << other, elementwise, for integer tensors (shifting by the bit width or more gives 0)."""
    return A._nondiff(_LeftShift, input, other, "bitwise_left_shift")


def bitwise_right_shift(input, other) -> Tensor:
    """input >> other, elementwise, arithmetic for signed integers (a shift past the width gives 0 or -1)."""
    return A._nondiff(_RightShift, input, other, "bitwise_right_shift")


def _overwrite_method(fn, name: str):
    """The in-place method `name` of a non-differentiable function (comparisons, logic, bitwise ops): self takes
    fn(self, ...)'s values, cast to its dtype."""
    def method(self: Tensor, *args) -> Tensor:
        check_writable(self, name)
        return _overwrite(self, fn(self, *args), name)
    method.__name__ = method.__qualname__ = name
    return method


def _binary_method(fn, cls, name: str):
    """The in-place method `name` of a differentiable function of self and other operands (lerp_, fmod_, ...):
    computed out of place and written back (commit)."""
    def method(self: Tensor, *args) -> Tensor:
        check_writable(self, name)
        graph = not _no_grad_args(self, *args) or _capture.ACTIVE is not None
        r = fn(old_input(self, cls) if graph else self, *args)
        _check_cast(r._data.dtype, self._data.dtype, name)
        return commit(self, r, name)
    method.__name__ = method.__qualname__ = name
    return method


def _cumulative_method(fn, cls, name: str):
    """cumsum_/cumprod_: in place along dim; a `dtype` other than self's is PyTorch's error."""
    base = unary_in_place(fn, name[:-1], cls)

    def method(self: Tensor, dim: int, *, dtype=None) -> Tensor:
        if dtype is not None and dt.np_dtype(dtype) != self._data.dtype:
            raise RuntimeError(f"{name}: Bad in-place call: input tensor dtype {self.dtype} and output tensor dtype "
                               f"{dt.as_dtype(dtype)} should match")
        return base(self, dim)
    method.__name__ = method.__qualname__ = name
    return method


def fill(input: Tensor, value) -> Tensor:
    """A tensor of input's shape and dtype filled with value (a number or a 0-d tensor, which then gets the sum of
    the gradient); input's gradient is zero."""
    x = _tensor(input, "fill")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               f"dimensions.")
        value = to_dtype(value, x.dtype)
    elif not isinstance(value, (bool, int, float, np.number)):
        raise TypeError(f"fill(): argument 'value' must be a number or a 0-d Tensor, not {type_name(value)}")
    return IndexPut.apply(x, value, idx=_ALL)


# ---------------------------------------------------------------------- factories
def _requires_grad(t: Tensor, requires_grad, op: str) -> Tensor:
    if requires_grad.__class__ is not bool:
        raise TypeError(f"{op}(): argument 'requires_grad' must be bool, not {type_name(requires_grad)}")
    return t.requires_grad_(True) if requires_grad else t


def _factory_dtype(dtype) -> np.dtype:
    return dt.NP_DEFAULT_FLOAT if dtype is None else dt.np_dtype(dtype)


@traced
def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False, layout=None,
                  pin_memory=None) -> Tensor:
    """A 0-d tensor holding the number s, of the default float dtype unless `dtype` says otherwise."""
    if isinstance(s, Tensor):
        s = s.item()
    if not isinstance(s, (bool, int, float, np.number)):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not {type_name(s)}")
    arr = np.asarray(s).astype(_factory_dtype(dtype))
    if device is not None:
        arr = backend.transfer(arr, backend.resolve(device))
    return _requires_grad(make(arr), requires_grad, "scalar_tensor")


def _strided_empty(size, stride, dtype, device, op: str):
    size, stride = _ints(size, op, "size"), _ints(stride, op, "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"{op}(): dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"{op}(): sizes and strides must be non-negative, got sizes={list(size)} and "
                           f"strides={list(stride)}")
    d = _factory_dtype(dtype)
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    dev = None if device is None else backend.resolve(device)
    xp = np if dev is None else backend.module_for(dev)
    if dev is None:
        buf = np.empty(extent, d)
    else:
        with backend.on(dev):
            buf = xp.empty(extent, d)
    return xp.lib.stride_tricks.as_strided(buf, size, tuple(s * d.itemsize for s in stride))


@traced
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of `size` laid out with the given strides (in elements) over new memory."""
    return _requires_grad(make(_strided_empty(size, stride, dtype, device, "empty_strided")), requires_grad,
                          "empty_strided")


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, layout=None, device=None,
                      requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """empty_strided with this tensor's dtype and device unless given."""
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


_FROMBUFFER_WARNED = []


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-d tensor over the memory of an object with the buffer protocol (bytes, bytearray, memoryview, array):
    `count` elements of `dtype` (-1: all) from byte `offset` on; it shares that memory."""
    try:
        nbytes = memoryview(buffer).nbytes
    except TypeError:
        raise ValueError(f"frombuffer(): object does not implement Python buffer protocol "
                         f"({type_name(buffer)})") from None
    d = dt.np_dtype(dtype)
    count, offset = _int(count, "frombuffer", "count"), _int(offset, "frombuffer", "offset")
    if nbytes == 0 or count == 0:
        raise ValueError(f"frombuffer(): both buffer length ({nbytes}) and count ({count}) must not be 0")
    if not 0 <= offset < nbytes:
        raise ValueError(f"frombuffer(): offset ({offset} bytes) must be non-negative and no greater than buffer "
                         f"length ({nbytes} bytes) minus 1")
    if count < 0:
        if (nbytes - offset) % d.itemsize:
            raise ValueError(f"frombuffer(): buffer length ({nbytes - offset} bytes) after offset ({offset} bytes) "
                             f"must be a multiple of element size ({d.itemsize})")
    elif offset + count * d.itemsize > nbytes:
        raise ValueError(f"frombuffer(): requested buffer length ({count} * {d.itemsize} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length ({nbytes} bytes)")
    arr = np.frombuffer(buffer, d, count, offset)
    if not arr.flags.writeable and not _FROMBUFFER_WARNED:
        _FROMBUFFER_WARNED.append(True)
        warnings.warn("frombuffer(): the given buffer is not writable (e.g. bytes): the tensor shares its memory, and "
                      "in-place writes to it raise; copy it into a bytearray first to get a writable tensor. This "
                      "warning is shown once.", UserWarning, stacklevel=2)
    return _requires_grad(make(arr), requires_grad, "frombuffer")


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool | None = None) -> Tensor:
    """obj as a tensor, sharing its memory when it can (a Tensor, a NumPy array, an object with the buffer
    protocol) unless copy=True; copy=False refuses to copy. A tensor keeps its place in the graph (a conversion
    or copy is differentiable); requires_grad True/False sets the flag on the result (False detaches it)."""
    from .. import _creation as C
    if isinstance(obj, Tensor):
        r = obj
        want = None if dtype is None else dt.as_dtype(dtype)
        dev = None if device is None else backend.resolve(device)
        if (want is not None and want != r.dtype) or (dev is not None and dev != r.device):
            if copy is False:
                what = (f"dtype '{_sname(r)}' into dtype '{_sname(want.np)}'" if want is not None and want != r.dtype
                        else f"device '{r.device}' into device '{dev}'")
                raise ValueError(f"asarray(): can't alias tensor with {what} (copy=False)")
            r = r.to(device=dev, dtype=want)
        if copy and r is obj:
            r = clone(obj)
    else:
        is_array = isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__")
        if not is_array and not isinstance(obj, (list, tuple, bool, int, float, complex, np.generic)):
            try:
                memoryview(obj)
            except TypeError:
                pass
            else:  # a buffer: its bytes as `dtype` (the default float dtype unless given)
                r = frombuffer(obj, dtype=dtype or dt.get_default_dtype())
                return _asarray_grad(clone(r) if copy else r, requires_grad)
        if not is_array:
            if copy is False:
                raise ValueError("asarray(): can't alias arbitrary sequence into a tensor (copy=False)")
            return _asarray_grad(C.tensor(obj, dtype=dtype, device=device), requires_grad)
        arr = obj
        d = arr.dtype if dtype is None else dt.np_dtype(dtype)
        if arr.dtype not in dt.FROM_NP:
            raise TypeError(f"asarray(): unsupported array dtype {arr.dtype}; use one of "
                            f"{', '.join(x.name for x in dt.ALL)}")
        if d != arr.dtype and copy is False:
            raise ValueError(f"asarray(): can't alias tensor with dtype '{_sname(arr.dtype)}' into dtype "
                             f"'{_sname(d)}' (copy=False)")
        r = make(arr.astype(d, copy=bool(copy)) if d != arr.dtype or copy else arr)
        if device is not None:
            r = r.to(device)
    return _asarray_grad(r, requires_grad)


def _asarray_grad(r: Tensor, requires_grad) -> Tensor:
    if requires_grad is None:
        return r
    if requires_grad:
        return r if r._requires_grad else r.requires_grad_(True)
    return r.requires_grad_(False) if r._edge is None else r.detach()


# ---------------------------------------------------------------------- attributes
def _H(self: Tensor) -> Tensor:
    """The conjugate transpose of a matrix (the transpose: ember is real); a 0-d tensor is its own."""
    n = self._data.ndim
    if n == 0:
        return self
    if n != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {n}-D tensor."
                           + (" For batches of matrices, consider using tensor.mH" if n > 2 else ""))
    return S.t(self)


def _matrix_transpose(self: Tensor, what: str) -> Tensor:
    n = self._data.ndim
    if n < 2:
        raise RuntimeError(f"tensor.{what} is only supported on matrices or batches of matrices. Got {n}-D tensor.")
    return S.transpose(self, -2, -1)


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (a view; the transpose, ember being real)."""
    return _matrix_transpose(_tensor(input, "adjoint"), "adjoint()")


def _mH(self: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (mT: ember is real)."""
    return _matrix_transpose(self, "mH")


def get_device(input: Tensor) -> int:
    """The CUDA device index of input, -1 on the CPU."""
    dev = _tensor(input, "get_device").device
    return -1 if dev.type == "cpu" else (dev.index or 0)


def is_floating_point(input: Tensor) -> bool:
    return dt.is_float(_tensor(input, "is_floating_point")._data.dtype)


def is_complex(input: Tensor) -> bool:
    """False: ember has no complex dtypes."""
    _tensor(input, "is_complex")
    return False


def is_conj(input: Tensor) -> bool:
    """False: ember has no lazily conjugated tensors."""
    _tensor(input, "is_conj")
    return False


def is_neg(input: Tensor) -> bool:
    """False: ember has no lazily negated tensors."""
    _tensor(input, "is_neg")
    return False


def is_signed(input: Tensor) -> bool:
    """Whether input's dtype holds negative values (not bool and not uint8)."""
    return _tensor(input, "is_signed").dtype.is_signed


def is_inference(input: Tensor) -> bool:
    """False: ember's inference_mode is no_grad and makes no separate inference tensors."""
    _tensor(input, "is_inference")
    return False


def conj(input: Tensor) -> Tensor:
    """input itself (the conjugate of a real tensor)."""
    return _tensor(input, "conj")


def resolve_conj(input: Tensor) -> Tensor:
    """input itself (ember never holds a pending conjugation)."""
    return _tensor(input, "resolve_conj")


def resolve_neg(input: Tensor) -> Tensor:
    """input itself (ember never holds a pending negation)."""
    return _tensor(input, "resolve_neg")


def is_nonzero(input: Tensor) -> bool:
    """The truth of a one-element tensor (RuntimeError for none or several elements)."""
    x = _tensor(input, "is_nonzero")
    n = x._data.size
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"is_nonzero(): Boolean value of Tensor with {what} is ambiguous (shape {list(x.shape)})")
    return bool(x.item())


def is_same_size(input: Tensor, other: Tensor) -> bool:
    return _tensor(input, "is_same_size").shape == _tensor(other, "is_same_size", "other").shape


def dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple:
    """The dims from outermost to innermost in memory (by decreasing stride, ties in dim order); with
    ambiguity_check=True, a RuntimeError when that order is not unique (equal strides, size-1 dims)."""
    s = stride(self)
    order = tuple(sorted(range(len(s)), key=lambda k: -s[k]))
    if ambiguity_check and (len(set(s)) != len(s) or 1 in self.shape):
        raise RuntimeError(f"dim_order(): The tensor does not have unique dim order (shape {list(self.shape)}, "
                           f"strides {list(s)}), or cannot map to exact one of the given memory formats.")
    return order


def _python_elementwise(self: Tensor, op: str, fn, *others) -> Tensor:
    if self._requires_grad:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() instead.")
    if self.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors (this one is on {self.device})")
    check_writable(self, op)
    if _capture.ACTIVE is not None:
        _capture.writing(self)
        _capture.settle(self)
    a = self._data
    # a Python call per element is the contract of apply_/map_ (as in PyTorch: not for speed)
    vals = np.vectorize(fn, otypes=[a.dtype])(a, *others) if a.size else a
    a[...] = vals
    bump_version(self)
    return self


def apply_(self: Tensor, callable) -> Tensor:
    """Replace every element v by callable(v) (a Python call per element; CPU tensors that need no grad)."""
    return _python_elementwise(self, "apply_", callable)


def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:
    """Replace every element v by callable(v, w), w the matching element of `tensor` (broadcast to self's shape,
    of self's dtype)."""
    other = _tensor(tensor, "map_", "other")
    if other._data.dtype != self._data.dtype:
        raise TypeError(f"map_: expected {self.type()} for 'other' (got {other.type()})")
    try:
        ok = np.broadcast_shapes(other.shape, self.shape) == self.shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"map_(): the tensor of shape {list(other.shape)} cannot be broadcast to self's shape "
                           f"{list(self.shape)}")
    return _python_elementwise(self, "map_", callable, np.broadcast_to(other.numpy(force=True), self.shape))


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
_lshift_, _rshift_ = (_overwrite_method(bitwise_left_shift, "bitwise_left_shift_"),
                      _overwrite_method(bitwise_right_shift, "bitwise_right_shift_"))
_and_, _or_, _xor_ = (_overwrite_method(A.bitwise_and, "bitwise_and_"), _overwrite_method(A.bitwise_or, "bitwise_or_"),
                      _overwrite_method(A.bitwise_xor, "bitwise_xor_"))
_COMPARISONS_ = {name + "_": _overwrite_method(fn, name + "_") for name, fn in (
    ("eq", A.eq), ("ne", A.ne), ("lt", A.lt), ("le", A.le), ("gt", A.gt), ("ge", A.ge), ("greater", A.gt),
    ("greater_equal", A.ge), ("less", A.lt), ("less_equal", A.le), ("not_equal", A.ne),
    ("logical_and", A.logical_and), ("logical_or", A.logical_or), ("logical_xor", A.logical_xor),
    ("logical_not", logical_not), ("bitwise_not", bitwise_not), ("floor_divide", A.floor_divide))}
greater, greater_equal, less, less_equal, not_equal = A.gt, A.ge, A.lt, A.le, A.ne
swapaxes_ = swapdims_ = transpose_

EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=("index_fill", "index_fill_", "index_copy", "index_copy_", "index_reduce", "index_reduce_",
             "scatter_reduce", "scatter_reduce_", "masked_scatter", "masked_scatter_", "put", "put_", "index_put",
             "index_put_", "unfold", "as_strided", "as_strided_", "stride", "storage_offset", "select",
             "select_scatter", "slice_scatter", "diagonal_scatter", "unsqueeze_", "squeeze_", "t_", "transpose_",
             "swapaxes_", "swapdims_", "resize_", "resize_as_", "tensor_split", "hsplit", "vsplit", "dsplit",
             "split_with_sizes", "rot90", "narrow_copy", "sum_to_size", "repeat_interleave", "new_empty_strided",
             "fill_diagonal_", "aminmax", "renorm", "bitwise_left_shift", "bitwise_right_shift", "adjoint",
             "get_device", "is_signed", "is_complex", "is_conj", "is_neg", "is_inference", "conj", "resolve_conj",
             "resolve_neg", "is_nonzero", "is_same_size", "dim_order", "apply_", "map_"),
    aliases={
        **_COMPARISONS_,
        "bitwise_and_": _and_, "bitwise_or_": _or_, "bitwise_xor_": _xor_,
        "bitwise_left_shift_": _lshift_, "bitwise_right_shift_": _rshift_,
        "__iand__": _and_, "__ior__": _or_, "__ixor__": _xor_, "__ilshift__": _lshift_, "__irshift__": _rshift_,
        "__lshift__": bitwise_left_shift, "__rlshift__": lambda a, b: bitwise_left_shift(b, a),
        "__rshift__": bitwise_right_shift, "__rrshift__": lambda a, b: bitwise_right_shift(b, a),
        "remainder_": _binary_method(A.remainder, A.Remainder, "remainder_"),
        "fmod_": _binary_method(A.fmod, A.Fmod, "fmod_"),
        "true_divide_": _binary_method(A.true_divide, A.Div, "true_divide_"),
        "lerp_": _binary_method(A.lerp, None, "lerp_"),
        "cumsum_": _cumulative_method(R.cumsum, R.Cumsum, "cumsum_"),
        "cumprod_": _cumulative_method(R.cumprod, R.Cumprod, "cumprod_"),
        "renorm_": unary_in_place(renorm, "renorm", None),
        "tril_": unary_in_place(S.tril, "tril", S.Tril), "triu_": unary_in_place(S.triu, "triu", S.Triu),
        "H": property(_H), "mH": property(_mH),
        "itemsize": property(lambda self: self._data.itemsize, doc="The size of one element in bytes."),
        "nbytes": property(lambda self: self._data.size * self._data.itemsize,
                           doc="numel() * itemsize: the bytes the tensor's elements take (not its storage's)."),
        "is_cpu": property(lambda self: self.device.type == "cpu", doc="Whether the tensor lives on the CPU."),
    })
