"""Indexing: `x[i]`, `x[i] = v`, gather/scatter, index_select/index_add, masked_fill/select, take, nonzero.

An index is parsed once into `(pre, main, kind)`: `pre` is a basic NumPy index applied first
(or None), `main` the index applied to its result, `kind` 0 for basic indexing (the result is
a NumPy view that shares the input's version counter), 1 for advanced indexing with boolean
masks only, 2 when integer arrays are involved (positions may repeat, so gradients add up).
PyTorch applies integer indices as selects before tensor indices, which NumPy does not (it
treats an int next to an array as an advanced index): `pre` carries those ints.

Every backward here is itself an ember op whose backward is the forward again
(getitem <-> index placement, gather <-> scatter_add, index_select <-> index_add,
take <-> put), so higher-order derivatives come for free.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, normalize_dim, to_array, bump_version, make
from ..backend import on_device_of
from ..autograd.function import Op, dispatch
from ..autograd.forward_ad import is_dual
from ..autograd.grad_mode import MODE
from . import arithmetic as A
from .arithmetic import tangent_or_zeros
from .inplace import check_writable, commit, old_input
from .inplace import as_view
from .registry import Exports
from .. import _capture

__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "masked_fill", "masked_select",
           "take_along_dim", "take", "nonzero", "argwhere"]

_new = object.__new__
_ndarray = np.ndarray
_HOST = np.empty(0)  # the indexed array's stand-in when an index is parsed for the CPU without one
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), None and long, int, byte or bool tensors are valid "
              "indices (got {})")


# ---------------------------------------------------------------------- parsing an index
def _index_item(it, base):
    """An index element other than int/slice/None/Ellipsis/bool: an int, an integer array or a bool mask,
    as an array on the device of `base` (the indexed array)."""
    if isinstance(it, Tensor):
        a = it._data
        if a.dtype == np.uint8:  # PyTorch's legacy byte masks
            a = a.astype(np.bool_)
    elif isinstance(it, _ndarray) or hasattr(it, "__cuda_array_interface__"):
        a = it
    elif isinstance(it, (list, tuple)):
        try:
            a = np.asarray(_unwrap(it))
        except ValueError:
            raise IndexError(f"an index sequence must be rectangular, got {it!r}") from None
        if a.size == 0 and dt.is_float(a.dtype):
            a = a.astype(np.int64)  # [] is an empty integer index
    elif hasattr(it, "__index__"):
        return operator.index(it)
    else:
        raise IndexError(_BAD_INDEX.format(type(it).__name__))
    k = a.dtype.kind
    if k in "iu" and a.ndim == 0:
        return int(a)  # a 0-d integer tensor indexes like an int (a view)
    if k == "b" or k in "iu":
        return _on_device_of(a, base)
    raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {dt.FROM_NP.get(a.dtype, a.dtype)}")


class _ArrayIndexError(IndexError):
    """An integer index tensor out of range: PyTorch finds it only after an index put's dtype check."""


def _on_device_of(a, base):
    """Index array `a` moved to base's device: as PyTorch, CPU indices may index a CUDA tensor, not the reverse."""
    if a.__class__ is _ndarray:
        return a if base.__class__ is _ndarray else backend.transfer(a, backend.device_of(base))
    dev = backend.device_of(base)
    if backend.device_of(a) != dev:
        raise RuntimeError(f"indices should be either on cpu or on the same device as the indexed tensor ({dev}); "
                           f"got indices on {backend.device_of(a)}")
    return a


def _unwrap(seq):
    return [x._data if isinstance(x, Tensor) else _unwrap(x) if isinstance(x, (list, tuple)) else x for x in seq]


def _parse(index, shape: tuple, base=None) -> tuple:
    """(pre, main, kind) for `index` on an array of `shape` (`base`, the indexed array: index arrays are put on
    its device; None: the CPU), with PyTorch's errors."""
    if base is None:
        base = _HOST
    if type(index) is not tuple:
        # a list holding slices/None/... can only mean a tuple (PyTorch's legacy reading of such lists)
        if type(index) is list and any(e is None or e is Ellipsis or type(e) is slice for e in index):
            index = tuple(index)
        else:
            index = (index,)
    ndim = len(shape)
    items = []
    consumed = n_int = adv = 0
    ellipsis = False
    for it in index:
        t = type(it)
        if t is slice:
            if it.step is not None and operator.index(it.step) <= 0:
                raise ValueError(f"step must be greater than zero (got slice step {it.step}); ember, like PyTorch, "
                                 f"has no negative-step views: use flip()")
            consumed += 1
        elif t is int:
            consumed += 1
            n_int += 1
        elif it is None:
            pass
        elif it is Ellipsis:
            if ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis = True
        elif t is bool or t is np.bool_:
            it = np.bool_(it)  # a 0-d mask: inserts a dimension of size 1 (True) or 0 (False)
            adv = adv or 1
        else:
            it = _index_item(it, base)
            if type(it) is int:
                consumed += 1
                n_int += 1
            elif it.dtype.kind == "b":
                consumed += it.ndim
                adv = adv or 1
            else:
                consumed += 1
                adv = 2
        items.append(it)
    if consumed > ndim:
        if ndim == 0 and n_int:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                             "C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    d = 0
    for k, it in enumerate(items):
        t = type(it)
        if t is slice:
            d += 1
        elif t is int:
            size = shape[d]
            if not -size <= it < size:
                raise IndexError(f"index {it} is out of bounds for dimension {d} with size {size}")
            d += 1
        elif it is Ellipsis:
            d += ndim - consumed
        elif it is None:
            pass
        elif it.dtype.kind == "b":
            m = it.ndim
            if it.shape != shape[d:d + m]:
                j = next(j for j in range(m) if it.shape[j] != shape[d + j])
                raise IndexError(f"The shape of the mask {list(it.shape)} at index {j} does not match the shape of the "
                                 f"indexed tensor {list(shape)} at index {d + j}")
            d += m
        else:
            size = shape[d]
            if it.size:
                lo, hi = backend.index_bounds(it)
                if hi >= size or lo < -size:
                    err = _ArrayIndexError(f"index {hi if hi >= size else lo} is out of bounds for dimension {d} with "
                                           f"size {size}")
                    err.dim, err.need = d, max(hi + 1, -lo)  # what the dim would need to hold the index
                    raise err
                if lo < 0:  # non-negative indices make the gradient's sort-and-sum path valid
                    items[k] = backend.array_module(it).where(it < 0, it + size, it)
            d += 1
    if adv and ellipsis and consumed == ndim:
        # an ellipsis standing for no dimension does not separate tensor indices in PyTorch (it does in NumPy)
        del items[next(k for k, it in enumerate(items) if it is Ellipsis)]
        ellipsis = False
    if not adv:
        if not ellipsis:
            items.append(Ellipsis)  # so that a full integer index gives a 0-d view, not a NumPy scalar
        return None, tuple(items), 0
    if not n_int:
        return None, tuple(items) if ellipsis else tuple(items) + (Ellipsis,), adv
    pre, main = [], []
    for it in items:
        t = type(it)
        if t is int:
            pre.append(it)
        elif t is slice:
            pre.append(it)
            main.append(slice(None))
        elif it is None:
            main.append(None)
        elif it is Ellipsis:
            pre.append(it)
            main.append(it)
        else:
            pre.extend([slice(None)] * it.ndim if it.dtype.kind == "b" else [slice(None)])
            main.append(it)
    if not ellipsis:
        pre.append(Ellipsis)
        main.append(Ellipsis)
    return tuple(pre), tuple(main), adv


def _select(a, idx):
    pre, main, _ = idx
    return (a if pre is None else a[pre])[main]


def _rows_index(idx):
    """The integer array when `idx` is one integer array on dimension 0 (x[ids]: the embedding case), else None."""
    pre, main, kind = idx
    if kind == 2 and pre is None and len(main) == 2 and main[1] is Ellipsis and main[0].dtype.kind != "b":
        return main[0]
    return None


def _add_at(out, index, src) -> None:
    """out[index] += src, repeated indices accumulating. On CUDA this is atomic adds, whose float rounding depends
    on the threads' order: under `ember.use_deterministic_algorithms(True)` it raises (or warns) as PyTorch does."""
    xp = backend.array_module(out)
    if xp is not np and dt.is_float(out.dtype):
        from .._runtime import check_deterministic
        check_deterministic("index accumulation (index_add_/scatter_add_/index_put_ with accumulate, or the "
                            "gradient of indexing, gather or embedding)")
    xp.add.at(out, index, src)


def add_rows(out, rows, src) -> None:
    """out[rows[i]] += src[i] over i, adding repeated rows (rows non-negative and 1-D)."""
    if (src.ndim >= 2 and rows.size >= 64 and src.size >= 16 * rows.size and dt.is_float(out.dtype)):
        # sort + segment sums beats np.add.at about 2x when each row is a vector (embedding gradients)
        xp = backend.array_module(out)
        order = xp.argsort(rows)
        s = rows[order]
        with on_device_of(out):
            first = xp.ones(1, np.bool_)
        starts = xp.flatnonzero(xp.concatenate((first, s[1:] != s[:-1])))
        out[s[starts]] += xp.add.reduceat(src[order], starts, axis=0)
    else:
        _add_at(out, rows, src)


# ---------------------------------------------------------------------- getitem / setitem ops
class GetItem(Op):
    """z = x[index];  dz/dx = zeros of x's shape with gz placed (added, where indices repeat) at index."""

    saves_inputs = False

    def forward(self, x, idx):
        self.shape, self.idx = x.shape, idx
        return _select(x, idx)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return IndexBackward.apply(gz, shape=self.shape, idx=self.idx)


class IndexBackward(Op):
    """z = zeros(shape) with g added at index (the gradient of getitem);  dz/dg = gz[index]."""

    saves_inputs = False

    def forward(self, g, shape, idx):
        self.idx = idx
        xp = backend.array_module(g)
        with on_device_of(g):
            z = xp.zeros(shape, g.dtype)
        pre, main, kind = idx
        v = z if pre is None else z[pre]
        if kind == 2:
            rows = _rows_index(idx)
            if rows is not None:
                add_rows(v, rows.reshape(-1), g.reshape((rows.size,) + v.shape[1:]))
            else:
                _add_at(v, main, g)
        else:
            v[main] = g
        return z

    jvp = Op.linear_jvp

    def backward(self, gz):
        return GetItem.apply(gz, idx=self.idx)


class IndexPut(Op):
    """z = x with z[index] = v;  dz/dx = gz with the indexed region zeroed, dz/dv = gz[index] summed to v's shape."""

    saves_inputs = False

    def forward(self, x, v, idx):
        self.idx, self.vshape = idx, np.shape(v)
        out = x.copy()
        _put(out, idx, v)
        return out

    def jvp(self, t, x, v):
        # z' = x' with z'[index] = v' (0 for a constant v)
        return IndexPut.apply(tangent_or_zeros(t[0], x), t[1] if isinstance(t[1], Tensor) else 0, idx=self.idx)

    def backward(self, gz):
        gx = IndexPut.apply(gz, 0, idx=self.idx) if self.needs(0) else None
        gv = None
        if self.needs(1):
            gv = GetItem.apply(gz, idx=self.idx)
            k = len(self.vshape) - gv.ndim
            if k > 0:  # v had extra leading size-1 dims, which NumPy assignment drops
                gv = A.sum_to(gv, self.vshape[k:])
                gv = GetItem.apply(gv, idx=(None, (None,) * k + (Ellipsis,), 0))
            else:
                gv = A.sum_to(gv, self.vshape)
        return gx, gv


def _put(out, idx, v) -> None:
    pre, main, _ = idx
    view = out if pre is None else out[pre]
    try:
        view[main] = v
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(v))} cannot be broadcast to indexing "
                           f"result of shape {list(view[main].shape)}") from None


def _fast_index(index, shape, base=None):
    """The parsed index (index arrays on the device of `base`, the indexed array); the common cases (an int,
    a plain slice, a tuple of those) skip the general parser."""
    t = type(index)
    if t is int and shape:
        n = shape[0]
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {n}")
        return None, (index, Ellipsis), 0
    if t is slice and index.step is None:
        return None, (index, Ellipsis), 0
    if t is tuple and len(index) <= len(shape):  # ints and plain slices only, e.g. x[:, 0]
        for k, it in enumerate(index):
            ti = type(it)
            if ti is int:
                if not -shape[k] <= it < shape[k]:
                    break
            elif ti is not slice or it.step is not None:
                break
        else:
            return None, index + (Ellipsis,), 0
    return _parse(index, shape, base)


def getitem(self: Tensor, index) -> Tensor:
    """x[index] with PyTorch's semantics: basic indices give a view, tensor/list/mask indices a copy."""
    idx = _fast_index(index, self._data.shape, self._data)
    if (self._requires_grad and MODE.grad) or _capture.ACTIVE is not None or (MODE.fw and is_dual(self)) or MODE.vmap:
        # (a capture records it; forward AD gives it its tangent; vmap batches it)
        r = dispatch(_new(GetItem), (self,), (self._data, idx))
    else:
        r = make(_select(self._data, idx))  # GetItem.forward without the work it does for backward
    if idx[2] == 0:  # a view: shares the version counter, so in-place writes to either are seen by both
        as_view(r, self)
    return r


def _masked_fill_write(idx, value: Tensor) -> bool:
    """Whether PyTorch writes `t[idx] = value` as a masked fill (which casts value): a one-element value and
    a single boolean-tensor index of 1+ dims (ints and slices beside it allowed; a Python bool in a tuple
    counts as an index tensor)."""
    if value._data.size != 1:
        return False
    tensors = [it for it in idx[1] if hasattr(it, "dtype")]  # arrays of any device, and np.bool_
    # a 0-d bool tensor indexes like a Python bool inside a tuple: as an integer index tensor
    return len(tensors) == 1 and tensors[0].dtype == np.bool_ and tensors[0].ndim > 0


def _dtype_mismatch(self: Tensor, value: Tensor):
    raise RuntimeError(f"__setitem__: index put requires the source and destination dtypes match, got {self.dtype} for "
                       f"the destination and {value.dtype} for the source (an advanced-index write does not cast: "
                       f"convert the value with .to({self.dtype}))")


def _check_value_fits(index, shape: tuple, value, err: _ArrayIndexError, base=None) -> None:
    """PyTorch reports a value that does not broadcast to the indexing result before an out-of-range index
    tensor: find the result's shape as if the offending dims were large enough, and raise that error first."""
    shape = list(shape)
    for _ in range(len(shape) + 1):
        shape[err.dim] = max(shape[err.dim], err.need)
        try:
            pre, main, _ = _fast_index(index, tuple(shape), base)
            break
        except _ArrayIndexError as again:
            err = again
    else:
        return
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), tuple(shape), (0,) * len(shape))  # no memory
    result = (dummy if pre is None else dummy[pre])[main].shape
    vshape = np.shape(value._data if isinstance(value, Tensor) else value)
    try:
        fits = np.broadcast_shapes(vshape, result) == result
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be broadcast to indexing "
                           f"result of shape {list(result)}")


def setitem(self: Tensor, index, value) -> None:
    """x[index] = value (broadcast): in place; under autograd the tensor takes the result's place in the graph."""
    try:
        idx = _fast_index(index, self._data.shape, self._data)
    except _ArrayIndexError as e:
        if isinstance(value, Tensor) and value._data.dtype != self._data.dtype:
            _dtype_mismatch(self, value)
        _check_value_fits(index, self._data.shape, value, e, self._data)
        raise
    check_writable(self, "__setitem__")
    if isinstance(value, Tensor):
        if value._data.__class__ is _ndarray and self._data.__class__ is not _ndarray and value._data.ndim == 0:
            value = value.to(self.device)  # PyTorch writes a CPU scalar tensor into a tensor of any device
        # t[True] = v alone is a plain copy in PyTorch (casts); only a real index put refuses other dtypes
        if idx[2] and value._data.dtype != self._data.dtype and type(index) is not bool \
                and not _masked_fill_write(idx, value):
            _dtype_mismatch(self, value)
        graph = (MODE.grad and (self._requires_grad or value._requires_grad)
                 or MODE.fw and (is_dual(self) or is_dual(value))) and dt.is_float(self._data.dtype) \
            or bool(MODE.vmap)  # (vmap batches the write as an op)
        if graph and value._data.dtype != self._data.dtype:
            value = value.to(self.dtype)
        if not graph and value._data.__class__ is not self._data.__class__:
            backend.check_same_device("__setitem__", (self._data, value._data))
        v = value if graph else value._data
    else:
        graph = MODE.grad and self._requires_grad or MODE.fw and is_dual(self) or MODE.vmap
        v = value if type(value) in (int, float, bool) else to_array(value, self._data.dtype, "__setitem__")
        if v.__class__ is not self._data.__class__ and v.__class__ not in (int, float, bool):
            v = _on_device_of(v, self._data)  # a list or NumPy value written into a device tensor
    if not graph:
        if _capture.ACTIVE is None:
            _put(self._data, idx, v)
            bump_version(self)
            return
        v = value if isinstance(value, Tensor) else v  # a capture records the put and the write
    commit(self, IndexPut.apply(old_input(self, IndexPut), v, idx=idx), "__setitem__")


# ---------------------------------------------------------------------- gather / scatter
def _grid(index, dim: int) -> tuple:
    """The full advanced index of gather/scatter: `index` along dim, the positions of index elsewhere."""
    n, xp = index.ndim, backend.array_module(index)
    with on_device_of(index):
        return tuple(index if k == dim else xp.arange(s).reshape((s,) + (1,) * (n - 1 - k))
                     for k, s in enumerate(index.shape))


def _scatter_into(out, grid, ishape, src, reduce) -> None:
    if getattr(src, "shape", ishape) != ishape:
        src = src[tuple(slice(0, s) for s in ishape)]  # only the leading index-shaped block of src is used
    if reduce is None:
        out[grid] = src
    elif reduce == "add":
        _add_at(out, grid, src)
    else:
        _multiply_at(backend.array_module(out), out, grid, ishape, src)


def _multiply_at(xp, out, grid, ishape, src) -> None:
    """out[grid] *= src for a C-contiguous out, a position named k times multiplied by all k of its values
    (np.multiply.at).

    CuPy has no multiply.at (a GPU has no atomic multiply), so on a device the products go in rounds:
    each round multiplies in the first not-yet-applied value of every position still pending, and there
    are as many rounds as the most repeated position has repeats."""
    if xp is np:
        np.multiply.at(out, grid, src)
        return
    with on_device_of(out):
        flat = out.reshape(-1)  # a view: out is a fresh copy
        pos = 0
        for k, g in enumerate(grid):  # the flat position of every scattered element
            pos = pos + g * int(np.prod(out.shape[k + 1:], dtype=np.int64))
        pos = xp.broadcast_to(xp.asarray(pos, dtype=np.int64), ishape).reshape(-1)
        vals = xp.broadcast_to(xp.asarray(src, dtype=out.dtype), ishape).reshape(-1)
        while pos.size:
            at, first = xp.unique(pos, return_index=True)
            flat[at] = flat[at] * vals[first]
            pending = xp.ones(pos.size, dtype=bool)
            pending[first] = False
            pos, vals = pos[pending], vals[pending]


def _zeros_like_grad(g: Tensor, shape: tuple) -> Tensor:
    """Zeros of `shape` with g's dtype, on g's device."""
    with on_device_of(g._data):
        return make(backend.array_module(g._data).zeros(shape, g._data.dtype))


class Gather(Op):
    """z[i][j] = x[index[i][j]][j] (dim 0);  dz/dx = scatter_add(zeros, dim, index, gz)."""

    saves_inputs = False

    def forward(self, x, dim, grid, ishape):
        self.shape, self.dim, self.grid, self.ishape = x.shape, dim, grid, ishape
        return x[grid]

    jvp = Op.linear_jvp

    def backward(self, gz):
        zeros = _zeros_like_grad(gz, self.shape)
        return Scatter.apply(zeros, gz, dim=self.dim, grid=self.grid, ishape=self.ishape, reduce="add")


class Scatter(Op):
    """z = x with src written (reduce None), added ('add') or multiplied ('multiply') at index along dim.

    dz/dx = gz with the written positions zeroed (reduce None) or gz ('add');
    dz/dsrc = gather(gz, dim, index), zero-padded to src's shape."""

    saves_inputs = False

    def forward(self, x, src, dim, grid, ishape, reduce=None):
        self.dim, self.grid, self.ishape, self.reduce = dim, grid, ishape, reduce
        self.src_shape = np.shape(src)
        out = x.copy()
        _scatter_into(out, grid, ishape, src, reduce)
        return out

    def jvp(self, t, x, src):
        # z' = x' with src' written (or added) at index: linear in (x, src), a constant src has tangent 0
        if self.reduce == "multiply":
            return Op.jvp(self, t, x, src)  # not implemented, nor in PyTorch: its error
        ts = tangent_or_zeros(t[1], src) if isinstance(src, Tensor) else 0
        return Scatter.apply(tangent_or_zeros(t[0], x), ts, dim=self.dim, grid=self.grid, ishape=self.ishape,
                             reduce=self.reduce)

    def backward(self, gz):
        if self.reduce == "multiply":
            raise RuntimeError("scatter(): the derivative for reduce='multiply' is not implemented (nor in PyTorch)")
        gx = gsrc = None
        if self.needs(0):
            gx = gz if self.reduce == "add" else Scatter.apply(gz, 0, dim=self.dim, grid=self.grid, ishape=self.ishape)
        if self.needs(1):
            gsrc = Gather.apply(gz, dim=self.dim, grid=self.grid, ishape=self.ishape)
            if self.src_shape != self.ishape:
                pad = (None, tuple(slice(0, s) for s in self.ishape) + (Ellipsis,), 0)
                gsrc = IndexBackward.apply(gsrc, shape=self.src_shape, idx=pad)
        return gx, gsrc


def _check(x, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


def _int_index(index, op: str, what: str = "int32/int64") -> np.ndarray:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    a = index._data
    if a.dtype != np.int64 and not (a.dtype == np.int32 and "32" in what):
        raise RuntimeError(f"{op}(): Expected dtype {what} for index, got {index.dtype}")
    return a


def _check_range(a, size: int, dim: int, op: str, negative: bool = False) -> np.ndarray:
    """a, with PyTorch's RuntimeError for an index outside [0, size) ([-size, size) when negative is allowed)."""
    if a.size:
        lo, hi = backend.index_bounds(a)
        low = -size if negative else 0
        if hi >= size or lo < low:
            raise RuntimeError(f"{op}(): index {hi if hi >= size else lo} is out of bounds for dimension {dim} with size {size}")
        if lo < 0:
            a = backend.array_module(a).where(a < 0, a + size, a)
    return a


def _gather_args(x: Tensor, dim, index: Tensor, op: str):
    x = _check(x, op)
    a = _int_index(index, op)
    backend.check_same_device(op, (x._data, a))
    d = normalize_dim(dim, x.ndim, op)
    if a.ndim != x.ndim:
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as input tensor "
                           f"(index has {a.ndim}, input has {x.ndim})")
    return x, a, d


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """out[i][j][k] = input[index[i][j][k]][j][k] (for dim 0); index may be smaller than input off `dim`."""
    x, a, d = _gather_args(input, dim, index, "gather")
    for k in range(x.ndim):
        if k != d and a.shape[k] > x.shape[k]:
            raise RuntimeError(f"gather(): Size does not match at dimension {k} expected index {list(a.shape)} to be "
                               f"no larger than self {list(x.shape)} apart from dimension {d}")
    a = _check_range(a, x.shape[d] if x.ndim else 1, d, "gather")
    return Gather.apply(x, dim=d, grid=_grid(a, d), ishape=a.shape)


def _scatter_args(input: Tensor, dim, index: Tensor, src, op: str):
    x, a, d = _gather_args(input, dim, index, op)
    if isinstance(src, Tensor):
        if src._data.dtype != x._data.dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype (got {x.dtype} and {src.dtype})")
        if src.ndim != x.ndim:
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as src tensor "
                               f"(index has {a.ndim}, src has {src.ndim})")
    sshape = src.shape if isinstance(src, Tensor) else None
    for k in range(x.ndim):
        if (k != d and a.shape[k] > x.shape[k]) or (sshape is not None and a.shape[k] > sshape[k]):
            raise RuntimeError(f"{op}(): Expected index {list(a.shape)} to be no larger than self {list(x.shape)} apart "
                               f"from dimension {d}" + (f" and to be no larger size than src {list(sshape)}" if sshape else ""))
    a = _check_range(a, x.shape[d] if x.ndim else 1, d, op)
    return x, d, _grid(a, d), a.shape


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """A copy of input with src (a Tensor or a number) written at index along dim:
    out[index[i][j]][j] = src[i][j] (for dim 0); reduce='add' or 'multiply' combines instead of writing."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter(): missing the values to scatter: pass src (a Tensor) or value (a number)")
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"scatter(): reduce argument must be either add or multiply, got {reduce!r}")
    if not isinstance(src, Tensor) and not isinstance(src, (int, float, bool)):
        raise TypeError(f"scatter(): src must be a Tensor or a number, not {type(src).__name__}")
    x, d, grid, ishape = _scatter_args(input, dim, index, src, "scatter")
    return Scatter.apply(x, src, dim=d, grid=grid, ishape=ishape, reduce=reduce)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of input with src added at index along dim (repeated indices add up):
    out[index[i][j]][j] += src[i][j] (for dim 0)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add(): argument 'src' must be Tensor, not {type(src).__name__}")
    x, d, grid, ishape = _scatter_args(input, dim, index, src, "scatter_add")
    return Scatter.apply(x, src, dim=d, grid=grid, ishape=ishape, reduce="add")


def _inplace(self: Tensor, fn, cls, op: str, *args, **kwargs) -> Tensor:
    """Run the out-of-place `fn` for an in-place method and commit the result into self (see ops/inplace.py)."""
    check_writable(self, op)
    return commit(self, fn(old_input(self, cls), *args, **kwargs), op)


def scatter_(self: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """In-place scatter."""
    return _inplace(self, scatter, Scatter, "scatter_", dim, index, src, value=value, reduce=reduce)


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """In-place scatter_add."""
    return _inplace(self, scatter_add, Scatter, "scatter_add_", dim, index, src)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Values of input at `indices` along dim (input and indices broadcast off dim); dim None: of the flattened input."""
    x = _check(input, "take_along_dim")
    a = _int_index(indices, "take_along_dim", "int64")
    backend.check_same_device("take_along_dim", (x._data, a))
    if dim is None:
        a = _check_range(a.reshape(-1), x._data.size, 0, "take_along_dim")
        return Take.apply(x, index=a)
    d = normalize_dim(dim, x.ndim, "take_along_dim")
    if a.ndim != x.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of dimensions, but got "
                           f"{x.ndim} dimensions for input, and {a.ndim} dimensions for indices")
    try:  # broadcast everywhere but along dim
        b = list(np.broadcast_shapes(*(tuple(1 if k == d else n for k, n in enumerate(s)) for s in (x.shape, a.shape))))
    except ValueError:
        raise RuntimeError(f"take_along_dim(): input {list(x.shape)} and indices {list(a.shape)} cannot be broadcast "
                           f"together apart from dimension {d}") from None
    xs, ishape = list(b), list(b)
    if x.ndim:
        xs[d], ishape[d] = x.shape[d], a.shape[d]
    x = A.broadcast_to(x, tuple(xs))
    a = _check_range(backend.array_module(a).broadcast_to(a, tuple(ishape)), x.shape[d] if x.ndim else 1, d,
                     "take_along_dim", negative=True)
    return Gather.apply(x, dim=d, grid=_grid(a, d), ishape=a.shape)


# ---------------------------------------------------------------------- take
class Take(Op):
    """z = x.flatten()[index] (z has index's shape);  dz/dx = zeros with gz added at index."""

    saves_inputs = False

    def forward(self, x, index):
        self.shape, self.index = x.shape, index
        return backend.array_module(x).take(x, index)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Put.apply(gz, shape=self.shape, index=self.index)


class Put(Op):
    """z = zeros(shape) with g added at the flat positions `index` (the gradient of take);  dz/dg = take(gz, index)."""

    saves_inputs = False

    def forward(self, g, shape, index):
        self.index = index
        n = int(np.prod(shape))
        xp = backend.array_module(g)
        with on_device_of(g):
            if dt.is_float(g.dtype):
                z = xp.bincount(index.reshape(-1), weights=g.reshape(-1), minlength=n).astype(g.dtype, copy=False)
            else:
                z = xp.zeros(n, g.dtype)
                xp.add.at(z, index.reshape(-1), g.reshape(-1))
        return z.reshape(shape)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Take.apply(gz, index=self.index)


def take(input: Tensor, index: Tensor) -> Tensor:
    """input treated as 1-D, read at `index` (negative counts from the end); the result has index's shape."""
    x = _check(input, "take")
    if not isinstance(index, Tensor):
        raise TypeError(f"take(): argument 'index' must be Tensor, not {type(index).__name__}")
    a = index._data
    backend.check_same_device("take", (x._data, a))
    if a.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {index.dtype}")
    n = x._data.size
    if a.size:
        lo, hi = backend.index_bounds(a)
        if hi >= n or lo < -n:
            raise IndexError(f"take(): out of range: tried to access index {hi if hi >= n else lo} on a tensor of {n} elements.")
        if lo < 0:
            a = backend.array_module(a).where(a < 0, a + n, a)
    return Take.apply(x, index=a)


# ---------------------------------------------------------------------- index_select / index_add
class IndexSelect(Op):
    """z = x[..., index, ...] (index along dim);  dz/dx = index_add(zeros, dim, index, gz)."""

    saves_inputs = False

    def forward(self, x, dim, index):
        self.shape, self.dim, self.index = x.shape, dim, index
        if x.ndim == 0:
            return x.reshape(1)[index].reshape(())
        return backend.array_module(x).take(x, index, axis=dim)

    jvp = Op.linear_jvp

    def backward(self, gz):
        zeros = _zeros_like_grad(gz, self.shape)
        return IndexAdd.apply(zeros, gz, dim=self.dim, index=self.index)


class IndexAdd(Op):
    """z = x with alpha * src added along dim at index (repeats add up);  dz/dx = gz, dz/dsrc = alpha * index_select(gz)."""

    saves_inputs = False

    def forward(self, x, src, dim, index, alpha=1):
        self.dim, self.index, self.alpha = dim, index, alpha
        out = x.copy()
        _index_add_into(out, dim, index, src if alpha == 1 else src * alpha)
        return out

    jvp = Op.linear_jvp  # z' = x' + alpha src' at index

    def backward(self, gz):
        gsrc = None
        if self.needs(1):
            gsrc = IndexSelect.apply(gz, dim=self.dim, index=self.index)
            if self.alpha != 1:
                gsrc = gsrc * self.alpha
        return (gz if self.needs(0) else None), gsrc


def _index_add_into(out, dim: int, index, src) -> None:
    if out.ndim == 0:
        out[()] += src.sum()
        return
    xp = backend.array_module(out)
    add_rows(xp.moveaxis(out, dim, 0), index, xp.moveaxis(src, dim, 0))


def _select_args(x, dim, index, op: str):
    a = _int_index(index, op)
    backend.check_same_device(op, (x._data, a))
    if a.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got shape {list(a.shape)}")
    d = normalize_dim(dim, x.ndim, op)
    return a.reshape(-1), d, (x.shape[d] if x.ndim else 1)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of input at the positions `index` (a vector) along dim."""
    x = _check(input, "index_select")
    a, d, size = _select_args(x, dim, index, "index_select")
    lo, hi = backend.index_bounds(a) if a.size else (0, 0)
    if lo < 0 or hi >= size:
        bad = hi if hi >= size else lo
        msg = f"index_select(): index out of range in self: index {bad} for dimension {d} with size {size}"
        # PyTorch (CPU) checks dim 1 of a 2+-d tensor, and empty 2+-d tensors, with RuntimeError
        raise (RuntimeError if x.ndim > 1 and (d == 1 or x._data.size == 0) else IndexError)(msg)
    if x.ndim == 0 and a.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {a.size} value(s)")
    return IndexSelect.apply(x, dim=d, index=a)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of input with alpha * source[i] added at position index[i] along dim (repeats add up)."""
    x = _check(input, "index_add")
    if not isinstance(source, Tensor):
        raise TypeError(f"index_add(): argument 'source' must be Tensor, not {type(source).__name__}")
    a, d, size = _select_args(x, dim, index, "index_add")
    if source._data.dtype != x._data.dtype:
        raise RuntimeError(f"index_add(): self ({x.dtype}) and source ({source.dtype}) must have the same scalar type")
    sshape = source.shape if source.ndim else (1,)
    xshape = x.shape if x.ndim else (1,)
    if len(sshape) != len(xshape) or any(s != t for k, (s, t) in enumerate(zip(sshape, xshape)) if k != d):
        raise RuntimeError(f"index_add(): source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(x.shape)} source.shape = {list(source.shape)}")
    if sshape[d] != a.size:
        raise RuntimeError(f"index_add(): Number of indices ({a.size}) should be equal to source.size(dim): "
                           f"({sshape[d]}), for dim: {d}")
    lo, hi = backend.index_bounds(a) if a.size else (0, 0)
    if lo < 0 or hi >= size:
        bad = hi if hi >= size else lo
        # PyTorch (CPU) hands dim 0 / the last dim of a 2+-d tensor with int64 indices and alpha 1 to
        # scatter_add (RuntimeError); every other case checks the index itself (IndexError)
        if x.ndim > 1 and d in (0, x.ndim - 1) and a.dtype == np.int64 and alpha == 1:
            raise RuntimeError(f"index_add(): index {bad} is out of bounds for dimension {d} with size {size}")
        raise IndexError(f"index_add(): index out of range in self: index {bad} for dimension {d} with size {size} "
                         f"(negative indices are not allowed)")
    return IndexAdd.apply(x, source, dim=d, index=a, alpha=alpha)


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """In-place index_add."""
    return _inplace(self, index_add, IndexAdd, "index_add_", dim, index, source, alpha=alpha)


# ---------------------------------------------------------------------- masks
def _mask(mask, op: str) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}(): argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask._data.dtype != np.bool_:
        raise RuntimeError(f"{op} only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    return mask


class MaskedFill(Op):
    """z = value where mask else x (mask broadcasts);  dz/dx = gz where not mask, dz/dvalue = Σ gz over the mask."""

    saves_inputs = False

    def forward(self, x, v, mask):
        self.mask, self.xshape = mask, x.shape
        return backend.array_module(x).where(mask, v, x)

    def jvp(self, t, x, v):
        # z' = v' where mask else x' (0 for a constant value)
        return MaskedFill.apply(tangent_or_zeros(t[0], x), t[1] if isinstance(t[1], Tensor) else 0, mask=self.mask)

    def backward(self, gz):
        gx = gv = None
        if self.needs(0):
            gx = A.sum_to(MaskedFill.apply(gz, 0, mask=self.mask), self.xshape)
        if self.needs(1):
            gv = A.sum_to(MaskedFill.apply(gz, 0, mask=~self.mask), ())
        return gx, gv


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """input where not mask, else value (a number or a 0-d tensor, which then gets the sum of gz over the mask).
    The result has the broadcast shape of input and mask and input's dtype."""
    x = _check(input, "masked_fill")
    m = _mask(mask, "masked_fill_")
    try:
        np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise RuntimeError(f"masked_fill(): the mask of shape {list(m.shape)} cannot be broadcast to the input's shape "
                           f"{list(x.shape)}") from None
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        v = value.to(x.dtype)
    elif isinstance(value, (int, float, bool, np.number)):
        with on_device_of(x._data):
            v = backend.array_module(x._data).asarray(value).astype(x._data.dtype)
    else:
        raise TypeError(f"masked_fill(): value must be a number or a 0-d Tensor, not {type(value).__name__}")
    backend.check_same_device("masked_fill", (x._data, m._data))
    return MaskedFill.apply(x, v, mask=m._data)


def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    """In-place masked_fill (mask must broadcast to self's shape)."""
    if not (MODE.grad and (self._requires_grad or (isinstance(value, Tensor) and value._requires_grad))
            or MODE.fw and (is_dual(self) or is_dual(value))):
        check_writable(self, "masked_fill_")
        m = _mask(mask, "masked_fill_")
        if isinstance(value, Tensor) and value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        try:
            ok = np.broadcast_shapes(self.shape, m.shape) == self.shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"masked_fill_: the mask of shape {list(m.shape)} cannot be broadcast to the tensor's "
                               f"shape {list(self.shape)}")
        backend.check_same_device("masked_fill_", (self._data, m._data))
        v = value if not isinstance(value, Tensor) else value._data if value._data.__class__ is self._data.__class__ \
            else value.item()  # a 0-d value from another device (PyTorch allows a CPU scalar tensor)
        xp = backend.array_module(self._data)
        if _capture.ACTIVE is not None:
            _capture.writing(self)
        with on_device_of(self._data):
            xp.copyto(self._data, xp.asarray(v).astype(self._data.dtype), where=m._data)
        bump_version(self)
        return self
    return _inplace(self, masked_fill, MaskedFill, "masked_fill_", mask, value)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The 1-D tensor of input's entries where mask is True (input and mask broadcast)."""
    x = _check(input, "masked_select")
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_select(): argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask._data.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    try:
        shape = np.broadcast_shapes(x.shape, mask.shape)
    except ValueError:
        raise RuntimeError(f"masked_select(): the mask of shape {list(mask.shape)} and the input of shape "
                           f"{list(x.shape)} cannot be broadcast together") from None
    backend.check_same_device("masked_select", (x._data, mask._data))
    return getitem(A.broadcast_to(x, shape), backend.array_module(mask._data).broadcast_to(mask._data, shape))


# ---------------------------------------------------------------------- nonzero
def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The indices of the non-zero entries: an int64 tensor of shape (n, ndim), or (as_tuple) one 1-D tensor per dim."""
    a = _check(input, "nonzero")._data
    xp = backend.array_module(a)
    if as_tuple:
        return tuple(make(i.astype(np.int64, copy=False)) for i in xp.nonzero(a.reshape(1) if a.ndim == 0 else a))
    return make(xp.argwhere(a).astype(np.int64, copy=False))


def argwhere(input: Tensor) -> Tensor:
    """nonzero(input): the (n, ndim) int64 indices of the non-zero entries."""
    return nonzero(input)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=__all__ + ["scatter_", "scatter_add_", "index_add_", "masked_fill_"],
    aliases={"__getitem__": getitem, "__setitem__": setitem})
