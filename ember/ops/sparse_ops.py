"""Sparse COO tensors (PyTorch's `torch.sparse_coo` layout): the type, its constructor, its methods.

A sparse COO tensor of shape (*S, *D) holds `nnz` entries: `indices` (sparse_dim, nnz), int64, are their
positions in the S ("sparse") dimensions and `values` (nnz, *D) the dense block at each. Entries may repeat
a position (an *uncoalesced* tensor: its value there is the sum of those entries); `coalesce()` sums them
and sorts the positions, as PyTorch.

Representation. A sparse tensor is a `SparseTensor`, a Tensor subclass without state of its own, whose
array `_data` is a `SparseCOO` (indices, values, shape, coalesced). The stand-in answers what every tensor
is asked (shape, dtype, ndim, size, its device is the CPU) and refuses everything else with a
NotImplementedError that says to call `.to_dense()`: a dense op that receives a sparse tensor never computes
a silent wrong answer from it.

Autograd. Two ops carry gradients across the boundary between a sparse tensor and its values:

    Build    values (nnz, *D) -> the sparse tensor of those entries;  d/dvalues = the upstream gradient
             at each entry's position (`Lookup`: a sparse or dense gradient read at positions)
    Entries  sparse tensor -> its values;  d/dsparse = a sparse tensor on its positions

and the sparse operations are compositions of them with ember's dense ops on the values (a product by a
scalar, a concatenation, segment sums that coalesce, a sparse matrix's product with dense rows), so their
gradients, higher ones included, are those ops' own. One kernel, `rows_product` (a sparse matrix times the
rows of a dense array), does every sum over entries: coalescing, to_dense, sparse @ dense, embedding_bag.

A gradient with respect to a sparse tensor is a coalesced sparse tensor on its positions (`Entries.backward`):
the functions here depend on a sparse tensor only through the sum of its entries at each position, so every
entry at a position has the same gradient.

Forward mode. The tangent of a sparse tensor is the sparse tensor of its values' tangents on the same entries
(`Build.jvp`), so `Entries` reads a tangent's values entry for entry; every other op here is linear in its
inputs (the tangent is the op applied to the tangents) or, for SpMM, bilinear (the product rule). PyTorch
has no forward-mode formulas for its sparse ops at all (its sparse constructor, to_sparse and sparse products
raise): these rules are ember's, checked against finite differences only.

Sparse ops run eagerly, outside the capture seam (`_apply`): under ember.compile's capture they break the
graph, and in lazy mode they first compute what is pending.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _capture, backend
from .. import _dtype as dt
from .._tensor import TENSOR_TYPES, Tensor, bump_version, make, normalize_dim
from ..autograd import engine
from ..autograd.forward_ad import propagate
from ..autograd.function import Op, record
from ..autograd.grad_mode import MODE
from .indexing import add_rows
from .linalg import addmm as _dense_addmm, matmul as _dense_matmul, mm as _dense_mm
from .registry import Exports

__all__ = ["sparse_coo_tensor", "sparse_coo", "strided", "layout", "mm", "matmul", "addmm"]

_new = object.__new__
_INT64 = np.dtype(np.int64)


# ---------------------------------------------------------------------- layouts
class layout:
    """A tensor's memory layout (PyTorch's `torch.layout`): `ember.strided` (dense) or `ember.sparse_coo`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # (pickled and copied as the module's own object)


strided = layout("strided")
sparse_coo = layout("sparse_coo")


# ---------------------------------------------------------------------- the array of a sparse tensor
def _dense_needed(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} is not supported for sparse COO tensors (layout=ember.sparse_coo): convert the tensor with "
        f".to_dense() first, or use what sparse tensors support (+, -, * by a scalar, @, .sum(), .coalesce(), "
        f"ember.sparse.mm/addmm/sum)")


class SparseCOO:
    """The `_data` of a sparse tensor: indices (sparse_dim, nnz) int64, values (nnz, *dense shape), the
    tensor's shape and whether it is coalesced (positions sorted and unique). Shaped like an array for the
    questions every tensor is asked; any other use as an array raises (see the module docstring)."""

    __slots__ = ("indices", "values", "shape", "coalesced")

    def __init__(self, indices: np.ndarray, values: np.ndarray, shape: tuple, coalesced: bool) -> None:
        self.indices, self.values, self.shape = indices, values, tuple(shape)
        self.coalesced = bool(coalesced) or indices.shape[1] <= 1  # (one entry or none: coalesced, as PyTorch)

    dtype = property(lambda self: self.values.dtype)
    itemsize = property(lambda self: self.values.itemsize)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))  # elements of the dense tensor it stands for
    nbytes = property(lambda self: self.indices.nbytes + self.values.nbytes)
    sparse_dim = property(lambda self: self.indices.shape[0])
    nnz = property(lambda self: self.indices.shape[1])

    def __array__(self, dtype=None, copy=None):
        raise _dense_needed("Conversion to a NumPy array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc in (np.add, np.subtract, np.matmul):  # a dense op reached with a sparse operand
            raise NotImplementedError(
                f"{ufunc.__name__}() of a dense and a sparse COO tensor through the dense op is not supported: use "
                f"the operators with a plain dense tensor (dense + sparse, dense @ sparse) or ember.mm/matmul/addmm, "
                f"which take sparse operands (a Tensor subclass such as nn.Parameter on the left of + or @ does not "
                f"defer to the sparse operand), or convert with .to_dense()")
        raise _dense_needed(f"{ufunc.__name__}()")

    def __array_function__(self, func, types, args, kwargs):
        raise _dense_needed(f"{func.__name__}()")

    def __getitem__(self, key):
        raise _dense_needed("Indexing")

    def __setitem__(self, key, value) -> None:
        # the one array write with a sparse meaning: `a[...] = 0` (Module.zero_grad) leaves no entries
        if key is not Ellipsis or np.ndim(value) != 0 or value != 0:
            raise _dense_needed("Writing into the array")
        self.indices = np.empty((self.sparse_dim, 0), _INT64)
        self.values = self.values[:0].copy()
        self.coalesced = True

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise _dense_needed(f"The array attribute {name!r}")

    def __repr__(self) -> str:
        return f"<SparseCOO of shape {self.shape}, {self.dtype}, nnz={self.nnz}>"


backend.register_array_type(SparseCOO, backend.CPU, np)  # (sparse tensors live on the CPU)


# ---------------------------------------------------------------------- positions
def _linear(indices: np.ndarray, sparse_shape: tuple) -> np.ndarray:
    """Each entry's position as one index into the flattened sparse dimensions (row-major)."""
    if len(sparse_shape) == 0:
        return np.zeros(indices.shape[1], _INT64)
    lin = indices[0]
    for d in range(1, len(sparse_shape)):  # (a loop over the few sparse dims)
        lin = lin * sparse_shape[d] + indices[d]
    return lin


def _plan(indices: np.ndarray, sparse_shape: tuple):
    """How to coalesce entries at `indices`: (order, starts, inverse, positions), where entries in `order`
    have sorted positions, each run of one position starts at `starts`, entry e goes to unique position
    `inverse[e]`, and `positions` (sparse_dim, m) are the unique positions, sorted."""
    lin = _linear(indices, sparse_shape)
    order = np.argsort(lin, kind="stable")
    s = lin[order]
    new = np.empty(s.size, np.bool_)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    inverse = np.empty(s.size, _INT64)
    inverse[order] = np.cumsum(new) - 1
    return order, starts, inverse, indices[:, order[starts]]


def _lookup(g, indices: np.ndarray) -> np.ndarray:
    """The value of g (a dense array or a SparseCOO) at each position of `indices`: (nnz, *dense shape)."""
    nnz, sd = indices.shape[1], indices.shape[0]
    if g.__class__ is not SparseCOO:
        if sd == 0:
            return np.broadcast_to(g, (nnz,) + g.shape).copy()
        return g[tuple(indices)]
    out = np.zeros((nnz,) + g.values.shape[1:], g.dtype)
    if g.nnz and nnz:
        sparse_shape = g.shape[:sd]
        gi, gv = g.indices, g.values
        if not g.coalesced:
            _, starts, inverse, gi = _plan(gi, sparse_shape)
            gv = rows_product(starts.size, inverse, None, None, gv)
        have = _linear(gi, sparse_shape)  # sorted and unique
        want = _linear(indices, sparse_shape)
        at = np.minimum(np.searchsorted(have, want), have.size - 1)
        found = have[at] == want
        out[found] = gv[at[found]]
    return out


# ---------------------------------------------------------------------- applying sparse ops
class SparseTensor(Tensor):
    """A tensor of layout `ember.sparse_coo` (see the module docstring); `isinstance(t, ember.Tensor)` holds,
    as for PyTorch's sparse tensors."""

    __slots__ = ()
    seen = False  # True once a sparse tensor was made: optimizers look for sparse gradients only then


def _apply(cls: type, *args, **attrs) -> Tensor:
    """Apply a sparse op (an Op whose forward takes or returns SparseCOO arrays) now, recording it for backward
    as `dispatch` would, and giving it its tangents under forward AD. Sparse ops bypass the capture seam: a
    capture breaks the graph at them (a replay could not reproduce a tensor it did not record) and lazy mode
    computes what is pending first."""
    if _capture.ACTIVE is not None:
        _capture.refuse(f"a sparse tensor op ({cls.__name__}): sparse tensors run eagerly")
    node = _new(cls)
    arrays = tuple([a._data if a.__class__ in TENSOR_TYPES else a for a in args])
    out = node.forward(*arrays, **attrs)
    recording = MODE.grad and any(a.__class__ in TENSOR_TYPES and a._requires_grad for a in args)
    result = record(node, args, out) if recording else make(out)
    if out.__class__ is SparseCOO:
        result.__class__ = SparseTensor
        SparseTensor.seen = True
    if MODE.fw:
        propagate(node, args, arrays, attrs, result)
    return result


def _sparse(data: SparseCOO, requires_grad: bool = False) -> SparseTensor:
    """A new leaf sparse tensor on `data`."""
    SparseTensor.seen = True
    return make(data, requires_grad, None, SparseTensor)


class Build(Op):
    """z = the sparse tensor whose entries are `values` at `indices` (shape `shape`);
    dz/dvalues = the upstream gradient at each entry's position. `label` names the operation it completes
    (its grad_fn's name: MulBackward for s * 2, as PyTorch)."""

    saves_inputs = False

    def forward(self, values, indices, shape, coalesced, label):
        self.indices, self.label = indices, label
        return SparseCOO(indices, values, shape, coalesced)

    def name(self) -> str:
        return self.label + "Backward"

    def backward(self, g):
        return _apply(Lookup, g, indices=self.indices)

    def jvp(self, t, values):
        a = self.result()._data
        return _build(t[0], a.indices, a.shape, a.coalesced, self.label)  # values' on the same entries


class Entries(Op):
    """z = the values of a sparse tensor's entries, (nnz, *dense shape);
    dz/dsparse = the sparse tensor with gz at their positions, one entry per position (see the module docstring)."""

    saves_inputs = False

    def forward(self, s):
        self.indices, self.shape, self.coalesced = s.indices, s.shape, s.coalesced
        return s.values

    def backward(self, gz):
        if self.coalesced:
            return _build(gz, self.indices, self.shape, True)
        order, starts, _, positions = _plan(self.indices, self.shape[:self.indices.shape[0]])
        return _build(gz[order[starts]], positions, self.shape, True)

    def jvp(self, t, s):
        return _entries(t[0])  # (s's tangent has s's entries: see the module docstring)


class Lookup(Op):
    """z[e] = g at position indices[:, e] (g sparse: the sum of its entries there, 0 where it has none);
    dz/dg = the entries gz at those positions (a sparse tensor, or its dense form when g was dense)."""

    saves_inputs = False

    def forward(self, g, indices):
        self.indices, self.shape, self.dense = indices, g.shape, g.__class__ is not SparseCOO
        return _lookup(g, indices)

    def backward(self, gz):
        s = _build(gz, self.indices, self.shape, False)
        return to_dense(s) if self.dense else s

    def jvp(self, t, g):
        return _apply(Lookup, t[0], indices=self.indices)


# ---------------------------------------------------------------------- the one kernel: a sparse matrix times rows
def rows_product(n: int, rows: np.ndarray, cols, v, x: np.ndarray, sorted_rows: bool = False) -> np.ndarray:
    """z = A @ x for the sparse (n, len(x)) matrix A with entries v at (rows, cols):
    z[r] = Σ_{e: rows[e]=r} v[e]·x[cols[e]] (v None: ones; cols None: the identity, cols[e] = e). Segment sums,
    row scatters, coalescing, sparse products and embedding_bag are all this one product.

    Rows of vectors go through SciPy's CSR product where SciPy is installed (`_csr_product`: one C loop, 10-80x
    NumPy's segment sums when the rows are many and short); scalars (x 1-D), and everything without SciPy, through
    `_numpy_product` (one add.at for scalars; tests hold the two equal). `sorted_rows`: rows is non-decreasing
    (a coalesced matrix, bags in order), which saves a sort."""
    if _SPARSE_LIB is not None and x.ndim > 1 and x.dtype.kind == "f":
        return _csr_product(n, rows, cols, v, x, sorted_rows)
    return _numpy_product(n, rows, cols, v, x, sorted_rows)


def _scipy_sparse():
    try:
        from scipy import sparse
    except ImportError:
        return None
    return sparse


_SPARSE_LIB = _scipy_sparse()


def _csr_product(n: int, rows, cols, v, x, sorted_rows: bool) -> np.ndarray:
    nnz = rows.size
    if cols is None:
        cols = np.arange(nnz)
    data = np.ones(nnz, x.dtype) if v is None else v.astype(x.dtype, copy=False)
    if sorted_rows:
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        a = _SPARSE_LIB.csr_matrix((data, cols, indptr), shape=(n, x.shape[0]))
    else:  # (SciPy's COO -> CSR conversion is a counting sort: ~10x np.argsort)
        a = _SPARSE_LIB.coo_matrix((data, (rows, cols)), shape=(n, x.shape[0])).tocsr()
    flat = x.reshape(x.shape[0], -1) if x.ndim > 2 else x
    out = np.asarray(a @ flat)
    return out.reshape((n,) + x.shape[1:]).astype(x.dtype, copy=False)


def _numpy_product(n: int, rows, cols, v, x, sorted_rows: bool) -> np.ndarray:
    p = x if cols is None else x[cols]
    if v is not None:
        p = p * v.reshape((-1,) + (1,) * (x.ndim - 1))
    out = np.zeros((n,) + x.shape[1:], x.dtype)
    if p.ndim == 1:
        np.add.at(out, rows, p)  # (NumPy 2's scalar add.at: faster than a bincount, and any dtype)
    elif sorted_rows and rows.size:
        new = np.empty(rows.size, np.bool_)
        new[:1] = True
        np.not_equal(rows[1:], rows[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        out[rows[starts]] = np.add.reduceat(p, starts, axis=0)
    else:
        add_rows(out, rows, p)
    return out


class GatherRows(Op):
    """z = x[rows] (whole rows of x along dim 0);  dz/dx = gz's rows added back at `rows` (`ScatterRows`)."""

    saves_inputs = False

    def forward(self, x, rows):
        self.rows, self.n = rows, x.shape[0]
        return x[rows]

    def backward(self, gz):
        return ScatterRows.apply(gz, rows=self.rows, n=self.n)

    jvp = Op.linear_jvp


class ScatterRows(Op):
    """z = n rows of zeros with x's rows added at `rows` (repeats summed);  dz/dx = gz[rows] (`GatherRows`)."""

    saves_inputs = False

    def forward(self, x, rows, n):
        self.rows = rows
        return rows_product(n, rows, None, None, x)

    def backward(self, gz):
        return GatherRows.apply(gz, rows=self.rows)

    jvp = Op.linear_jvp


class SegmentSum(Op):
    """z[k] = the sum of x's rows in run k of `order` (runs begin at `starts`): coalescing entries;
    dz/dx = gz[inverse] (inverse[e]: the run of row e)."""

    saves_inputs = False

    def forward(self, x, order, starts, inverse):
        self.inverse = inverse
        return rows_product(starts.size, inverse[order], order, None, x, sorted_rows=True)

    def backward(self, gz):
        return GatherRows.apply(gz, rows=self.inverse)

    jvp = Op.linear_jvp


class DenseAddSparse(Op):
    """z = d + s for a dense d and a sparse s of d's shape, given by its entries v at positions `lin` of its
    m sparse positions (the result has dtype `dtype`);  dz/dd = gz,  dz/dv = gz at those positions."""

    saves_inputs = False

    def forward(self, d, v, lin, m, dtype):
        self.lin, self.m, self.rest, self.dtypes = lin, m, v.shape[1:], (d.dtype, v.dtype)
        out = d.astype(dtype, copy=True)
        add_rows(out.reshape((m,) + v.shape[1:]), lin, v.astype(dtype, copy=False))
        return out

    def backward(self, gz):
        gd = gz.to(dt.FROM_NP[self.dtypes[0]]) if self.needs(0) else None
        gv = GatherRows.apply(gz.reshape((self.m,) + self.rest), rows=self.lin) if self.needs(1) else None
        return gd, None if gv is None else gv.to(dt.FROM_NP[self.dtypes[1]])

    jvp = Op.linear_jvp  # d' + s(v')


class SpMM(Op):
    """z = A @ d for a sparse matrix A (n, k), given by its entries v at (rows, cols) (v an array: constant
    entries), and a dense d, (k, m) or (k,);  dz/dv[e] = gz[rows[e]] · d[cols[e]],  dz/dd = Aᵀ @ gz (the same op
    with rows and cols swapped);  z' = A(v') @ d + A(v) @ d'."""

    jvp = Op.multilinear_jvp

    def forward(self, v, d, rows, cols, n, sorted_rows):
        self.rows, self.cols = rows, cols
        return rows_product(n, rows, cols, v, d, sorted_rows)

    def backward(self, gz, v, d):
        gv = gd = None
        if self.needs(0):
            gr, dc = GatherRows.apply(gz, rows=self.rows), GatherRows.apply(d, rows=self.cols)
            gv = (gr * dc).sum(-1) if d.dim() == 2 else gr * dc
        if self.needs(1):
            gd = SpMM.apply(v, gz, rows=self.cols, cols=self.rows, n=d.shape[0], sorted_rows=False)
        return gv, gd


# ---------------------------------------------------------------------- building blocks on tensors
def _entries(s: Tensor) -> Tensor:
    """The values of s's entries as a tensor (nnz, *dense shape), differentiable with respect to s."""
    return _apply(Entries, s)


def _build(values: Tensor, indices: np.ndarray, shape: tuple, coalesced: bool,
           label: str = "SparseCooTensorWithDimsAndTensors") -> Tensor:
    return _apply(Build, values, indices=indices, shape=tuple(shape), coalesced=coalesced, label=label)


def _need_sparse(x, op: str) -> SparseCOO:
    if x.__class__ is not SparseTensor:
        raise RuntimeError(f"{op} expected sparse coordinate tensor layout but got Strided")
    return x._data


def _read(t: Tensor, what: str) -> None:
    """Python reads t's values (indices, nonzeros): a capture breaks there, lazy mode computes t."""
    if _capture.ACTIVE is not None:
        _capture.read(t, what)


def _promote(a: Tensor, b: Tensor) -> tuple:
    """a and b cast to their common dtype (PyTorch's promotion)."""
    d = dt.promote_types(a._data.dtype, b._data.dtype)
    return (a if a._data.dtype == d else a.to(dt.FROM_NP[d])), (b if b._data.dtype == d else b.to(dt.FROM_NP[d]))


def _coalesced(s: Tensor) -> Tensor:
    """s with each position's entries summed into one, positions sorted (differentiable)."""
    a = s._data
    if a.coalesced:
        return s
    order, starts, inverse, positions = _plan(a.indices, a.shape[:a.sparse_dim])
    v = SegmentSum.apply(_entries(s), order=order, starts=starts, inverse=inverse)
    return _build(v, positions, a.shape, True, "Coalesce")


def sparse_rows(values: Tensor, rows: np.ndarray, shape: tuple) -> Tensor:
    """The sparse tensor of `shape` with one entry per row index: values[i] at row rows[i], uncoalesced (as
    PyTorch's sparse embedding gradients). Its values are a copy: the tensor owns them."""
    return _build(values.clone(), np.array(rows, _INT64).reshape(1, -1), shape, False)


# ---------------------------------------------------------------------- the constructor
def _index_array(indices) -> np.ndarray:
    if isinstance(indices, Tensor):
        _read(indices, "sparse_coo_tensor(indices)")
        a = indices._data
    else:
        a = np.asarray(indices)
    if a.dtype.kind not in "iuf" or a.dtype.kind == "f" and a.size and not np.all(a == np.trunc(a)):
        raise RuntimeError(f"sparse_coo_tensor(): indices must be integers (int64), got {a.dtype}")
    if a.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor(): indices must be a 2-D tensor of shape (sparse_dim, nnz), got "
                           f"shape {list(a.shape)}")
    return a.astype(_INT64, copy=False)


def _check_positions(indices: np.ndarray, sizes: tuple) -> None:
    """PyTorch's invariant checks: every position within `sizes` (the sparse dimensions)."""
    if indices.shape[1] == 0:
        return
    lo, hi = indices.min(1), indices.max(1)
    for d, size in enumerate(sizes):  # (a loop over the few sparse dims)
        if lo[d] < 0:
            raise RuntimeError(f"sparse_coo_tensor(): found negative index {int(lo[d])} for dim {d}")
        if hi[d] >= size:
            raise RuntimeError(f"sparse_coo_tensor(): size is inconsistent with indices: for dim {d}, size is {size} "
                               f"but found index {int(hi[d])}")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory: bool = False,
                      requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> Tensor:
    """A sparse COO tensor with entries `values` (nnz, *dense shape) at `indices` (sparse_dim, nnz).

    size: (*sparse sizes, *dense sizes); inferred (each sparse size one past the largest index) when None.
    Repeated positions are allowed (the tensor is uncoalesced: its value there is their sum) unless
    is_coalesced=True says the positions are sorted and unique. Positions are always checked to lie within
    size (PyTorch checks only with check_invariants=True); check_invariants=True also checks is_coalesced.
    A `values` tensor that requires grad makes the result differentiable with respect to it.
    """
    from .._creation import tensor as _tensor
    idx = _index_array(indices)
    if isinstance(values, Tensor):
        if dtype is not None:
            values = values.to(dtype)
    else:
        values = _tensor(values, dtype=dtype)
    if values.device.type != "cpu" or device is not None and backend.resolve(device).type != "cpu":
        raise NotImplementedError(f"sparse_coo_tensor(): ember's sparse tensors live on the CPU; got "
                                  f"device={device if device is not None else values.device}")
    sd, nnz = idx.shape
    if values.dim() == 0 or values.shape[0] != nnz:
        got = values.shape[0] if values.dim() else "a 0-d tensor"
        raise RuntimeError(f"sparse_coo_tensor(): indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {got}")
    dense = tuple(values.shape[1:])
    if size is None:
        size = (tuple(int(m) + 1 for m in idx.max(1)) if nnz else (0,) * sd) + dense
    else:
        from .._tensor import shape_arg
        size = shape_arg((size,), "sparse_coo_tensor")
        if len(size) != sd + len(dense):
            raise RuntimeError(f"sparse_coo_tensor(): 'len(size) == sparse_dim + dense_dim' is not satisfied: "
                               f"len(size) = {len(size)}, sparse_dim = {sd}, dense_dim = {len(dense)}")
        if size[sd:] != dense:
            raise RuntimeError(f"sparse_coo_tensor(): values has incorrect size, expected {[nnz, *size[sd:]]}, "
                               f"got {[nnz, *dense]}")
    _check_positions(idx, size[:sd])
    coalesced = bool(is_coalesced)
    if coalesced and check_invariants and nnz > 1:
        lin = _linear(idx, size[:sd])
        if not np.all(lin[1:] > lin[:-1]):
            raise RuntimeError("sparse_coo_tensor(): is_coalesced=True, but the indices are not sorted and unique; "
                               "pass is_coalesced=None or call .coalesce() on the result")
    s = _build(values, idx, size, coalesced)
    if requires_grad and s.is_leaf:
        s.requires_grad_(True)
    return s


# ---------------------------------------------------------------------- conversions (Tensor methods)
def to_dense(self: Tensor, dtype=None, *, masked_grad=None) -> Tensor:
    """The dense (strided) tensor holding the sum of the entries at each position (self when already dense)."""
    out = self
    if self.__class__ is SparseTensor:
        a = self._data
        sd = a.sparse_dim
        rows = ScatterRows.apply(_entries(self), rows=_linear(a.indices, a.shape[:sd]), n=math.prod(a.shape[:sd]))
        out = rows.reshape(a.shape)
    return out if dtype is None else out.to(dtype)


def to_sparse(self: Tensor, sparse_dim: int | None = None, *, layout=None, blocksize=None, dense_dim=None) -> Tensor:
    """This tensor as a sparse COO tensor with `sparse_dim` sparse dimensions (default: all): an entry for each
    position whose dense block (the trailing dims) has a nonzero, coalesced. Differentiable."""
    if layout is not None and layout is not sparse_coo or blocksize is not None:
        raise NotImplementedError(f"to_sparse(): ember supports the sparse_coo layout only, got layout={layout}, "
                                  f"blocksize={blocksize}")
    nd = self.dim()
    if dense_dim is not None:
        if sparse_dim is not None:
            raise RuntimeError("to_sparse(): pass sparse_dim or dense_dim, not both")
        sparse_dim = nd - dense_dim
    if self.__class__ is SparseTensor:
        if sparse_dim is not None and sparse_dim != self._data.sparse_dim:
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument !=self.sparse_dim() "
                               "is not supported")
        return self
    sd = nd if sparse_dim is None else sparse_dim
    if not 0 <= sd <= nd:
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{nd}] range, but {sd} is given")
    if sd == 0 and nd > 0:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when self.dim()>0")
    if self.device.type != "cpu":
        raise NotImplementedError(f"to_sparse(): ember's sparse tensors live on the CPU; this tensor is on {self.device}")
    _read(self, "to_sparse()")
    x = self._data
    nonzero = x != 0
    if nd > sd:
        nonzero = nonzero.any(axis=tuple(range(sd, nd)))
    lin = np.flatnonzero(nonzero)
    idx = np.array(np.unravel_index(lin, x.shape[:sd]), _INT64) if sd else np.empty((0, lin.size), _INT64)
    rows = self.reshape((math.prod(x.shape[:sd]),) + x.shape[sd:])
    return _build(GatherRows.apply(rows, rows=lin), idx, x.shape, True, "ToSparse")


def to_sparse_coo(self: Tensor) -> Tensor:
    """`to_sparse()` (PyTorch's name for the COO layout explicitly)."""
    return to_sparse(self)


def coalesce(self: Tensor) -> Tensor:
    """The coalesced form: one entry per position (duplicates summed), positions sorted; self when already."""
    _need_sparse(self, "coalesce")
    return _coalesced(self)


def is_coalesced(self: Tensor) -> bool:
    return _need_sparse(self, "is_coalesced").coalesced


def indices(self: Tensor) -> Tensor:
    """The positions (sparse_dim, nnz) of a coalesced sparse tensor (int64, sharing its memory)."""
    a = _need_sparse(self, "indices")
    if not a.coalesced:
        raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
    return make(a.indices)


def values(self: Tensor) -> Tensor:
    """The values (nnz, *dense shape) of a coalesced sparse tensor, differentiable (sharing its memory)."""
    if self.__class__ is not SparseTensor:
        raise RuntimeError("values expected sparse tensor layout but got Strided")
    if not self._data.coalesced:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return _entries(self)


def _indices(self: Tensor) -> Tensor:
    """The positions of the entries, coalesced or not (int64, sharing memory)."""
    if self.__class__ is not SparseTensor:
        raise NotImplementedError("_indices(): expected a sparse COO tensor, got a dense (strided) one")
    return make(self._data.indices)


def _values(self: Tensor) -> Tensor:
    """The values of the entries, coalesced or not, outside autograd (sharing memory), as PyTorch's `_values()`."""
    if self.__class__ is not SparseTensor:
        raise NotImplementedError("_values(): expected a sparse COO tensor, got a dense (strided) one")
    return make(self._data.values)


def sparse_dim(self: Tensor) -> int:
    """The number of sparse dimensions (0 for a dense tensor)."""
    return self._data.sparse_dim if self.__class__ is SparseTensor else 0


def dense_dim(self: Tensor) -> int:
    """The number of dense dimensions (all of a dense tensor's)."""
    return self._data.ndim - self._data.sparse_dim if self.__class__ is SparseTensor else self.dim()


def _nnz(self: Tensor) -> int:
    if self.__class__ is not SparseTensor:
        raise NotImplementedError("_nnz(): expected a sparse COO tensor, got a dense (strided) one")
    return self._data.nnz


def sparse_mask(self: Tensor, mask: Tensor) -> Tensor:
    """The sparse tensor with mask's positions (as mask lists them) holding self's values there. Differentiable
    with respect to self."""
    if not isinstance(mask, Tensor) or mask.__class__ is not SparseTensor:
        raise RuntimeError(f"sparse_mask(): mask must be a sparse COO tensor, got "
                           f"{'a dense (strided) tensor' if isinstance(mask, Tensor) else type(mask).__name__}")
    m = mask._data
    if tuple(self.shape) != m.shape:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(self.shape)} but "
                           f"mask has size {list(m.shape)}")
    if self.__class__ is not SparseTensor:
        _read(self, "sparse_mask()")
    return _build(_apply(Lookup, self, indices=m.indices), m.indices, m.shape, m.coalesced, "SparseMask")


# ---------------------------------------------------------------------- arithmetic
def _add_error() -> RuntimeError:
    return RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")


def _sparse_add(a: Tensor, b: Tensor, alpha) -> Tensor:
    """a + alpha·b for two sparse tensors: the entries of both (coalesced when both were)."""
    x, y = a._data, b._data
    if x.shape != y.shape:
        raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but {list(x.shape)} != {list(y.shape)}")
    if x.sparse_dim != y.sparse_dim:
        raise RuntimeError(f"add: expected 'self' and 'other' to have same density, but 'self' has {x.sparse_dim} "
                           f"sparse dimensions while 'other' has {y.sparse_dim} sparse dimensions")
    va, vb = _entries(a), _entries(b)
    if alpha != 1:
        vb = vb * alpha
    va, vb = _promote(va, vb)
    from .shape import cat
    s = _build(cat([va, vb]), np.concatenate([x.indices, y.indices], axis=1), x.shape, False, "Add")
    return _coalesced(s) if x.coalesced and y.coalesced else s


def _dense_add(d: Tensor, s: Tensor, alpha=1) -> Tensor:
    """d + alpha·s for a dense d and a sparse s of the same shape: a dense tensor."""
    a = s._data
    if tuple(d.shape) != a.shape:
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has size {list(d.shape)} while "
                           f"other has size {list(a.shape)} (FYI: dense-sparse addition does not currently support "
                           f"broadcasting)")
    if d.device.type != "cpu":
        raise RuntimeError(f"add(): the dense operand is on {d.device}, the sparse one on the CPU")
    v = _entries(s)
    if alpha != 1:
        v = v * alpha
    sd = a.sparse_dim
    dtype = dt.promote_types(d._data.dtype, v._data.dtype)
    return DenseAddSparse.apply(d, v, lin=_linear(a.indices, a.shape[:sd]), m=math.prod(a.shape[:sd]), dtype=dtype)


def _scaled(s: Tensor, c, divide: bool = False, label: str = "Mul") -> Tensor:
    """s·c (or s/c) for a number or a 0-d dense tensor c: the same positions, scaled values."""
    v = _entries(s)
    return _build(v / c if divide else v * c, s._data.indices, s._data.shape, s._data.coalesced, label)


def _is_scalar(c) -> bool:
    return isinstance(c, (int, float)) or isinstance(c, Tensor) and c.__class__ is not SparseTensor and c.dim() == 0


def _mul(s: Tensor, other) -> Tensor:
    """s * other: other a number, a 0-d tensor, a dense tensor of s's shape or a sparse one (then the result
    keeps s's positions, holding zeros where other has none)."""
    if _is_scalar(other):
        return _scaled(s, other)
    if not isinstance(other, Tensor):
        return NotImplemented
    if tuple(other.shape) != s._data.shape:
        raise NotImplementedError(f"mul(): a sparse tensor of shape {list(s.shape)} times a tensor of shape "
                                  f"{list(other.shape)}: only a number, a 0-d tensor or a tensor of the same shape "
                                  f"(no broadcasting) is supported")
    c = _coalesced(s) if other.__class__ is SparseTensor else s
    a = c._data
    if other.__class__ is not SparseTensor:
        _read(other, "mul()")
    return _build(_entries(c) * _apply(Lookup, other, indices=a.indices), a.indices, a.shape, a.coalesced, "Mul")


def _div(s: Tensor, other) -> Tensor:
    if not _is_scalar(other):
        if isinstance(other, Tensor):
            raise NotImplementedError(f"div(): a sparse tensor can be divided by a number or a 0-d tensor only, got a "
                                      f"tensor of shape {list(other.shape)}")
        return NotImplemented
    return _scaled(s, other, divide=True, label="Div")


# ---------------------------------------------------------------------- products
def _spmm(s: Tensor, d: Tensor, op: str, vector_ok: bool = True) -> Tensor:
    """s @ d for a sparse matrix s (2 sparse dims) and a dense d, (k, m) or (k,) when vector_ok."""
    a = s._data
    if a.ndim != 2 or a.sparse_dim != 2:
        raise RuntimeError(f"{op}(): expected a sparse matrix (2 sparse dimensions), got a sparse tensor of shape "
                           f"{list(a.shape)} with {a.sparse_dim} sparse dimensions")
    if not isinstance(d, Tensor):
        raise TypeError(f"{op}(): the dense operand must be a Tensor, not {type(d).__name__}")
    if d.__class__ is SparseTensor:
        raise NotImplementedError(f"{op}(): a product of two sparse tensors is not supported; convert one with "
                                  f".to_dense()")
    if d.dim() != 2 and not (vector_ok and d.dim() == 1):
        raise RuntimeError(f"{op}(): the dense operand must be a matrix{' or a vector' if vector_ok else ''}, got a "
                           f"{d.dim()}-D tensor of shape {list(d.shape)}")
    if d.shape[0] != a.shape[1]:
        other = "x".join(map(str, d.shape))
        raise RuntimeError(f"{op}(): mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and {other})")
    if d._data.dtype != a.dtype:
        raise RuntimeError(f"{op}(): expected the sparse and dense operands to have the same dtype, but got "
                           f"{dt.FROM_NP[a.dtype]} and {d.dtype}")
    if d.device.type != "cpu":
        raise RuntimeError(f"{op}(): the dense operand is on {d.device}, the sparse one on the CPU")
    return SpMM.apply(_entries(s), d, rows=a.indices[0], cols=a.indices[1], n=a.shape[0], sorted_rows=a.coalesced)


def _transposed(s: Tensor) -> Tensor:
    """sᵀ for a sparse matrix (2 sparse dims)."""
    a = s._data
    if a.ndim != 2 or a.sparse_dim != 2:
        raise NotImplementedError(f"t(): only sparse matrices (2 sparse dimensions) can be transposed, got shape "
                                  f"{list(a.shape)} with {a.sparse_dim} sparse dimensions")
    return _build(_entries(s), a.indices[::-1].copy(), a.shape[::-1], False, "T")


def _product(a: Tensor, b: Tensor, op: str, vector_ok: bool = True) -> Tensor:
    """a @ b where one of them is sparse: sparse @ dense directly, dense @ sparse as (sᵀ @ dᵀ)ᵀ."""
    if a.__class__ is SparseTensor:
        return _spmm(a, b, op, vector_ok)
    if not isinstance(a, Tensor):
        raise TypeError(f"{op}(): the dense operand must be a Tensor, not {type(a).__name__}")
    if a.dim() == 1 and vector_ok:
        return _spmm(_transposed(b), a, op)
    if a.dim() != 2:
        raise RuntimeError(f"{op}(): the dense operand must be a matrix, got shape {list(a.shape)}")
    return _spmm(_transposed(b), a.t(), op).t()


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """input @ mat2 for matrices; either may be sparse (a sparse matrix has 2 sparse dimensions)."""
    if input.__class__ is SparseTensor or mat2.__class__ is SparseTensor:
        return _product(input, mat2, "mm", vector_ok=False)
    return _dense_mm(input, mat2)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with broadcasting (`ember.linalg`'s rules); a sparse matrix operand multiplies a dense
    matrix or vector."""
    if input.__class__ is SparseTensor or other.__class__ is SparseTensor:
        return _product(input, other, "matmul")
    return _dense_matmul(input, other)


def sparse_addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1.0, alpha=1.0) -> Tensor:
    """beta·input + alpha·(mat1 @ mat2) for a sparse mat1 and dense mat2; input broadcasts to the product
    (beta=0 ignores it, NaNs included, as PyTorch)."""
    out = _product(mat1, mat2, "addmm", vector_ok=False)
    if alpha != 1:
        out = out * alpha
    if beta != 0:
        if not isinstance(input, Tensor) or input.__class__ is SparseTensor:
            raise TypeError(f"addmm(): input must be a dense Tensor, not {type(input).__name__}")
        try:
            fits = np.broadcast_shapes(tuple(input.shape), tuple(out.shape)) == tuple(out.shape)
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(f"addmm(): input of shape {list(input.shape)} does not broadcast to the product's shape "
                               f"{list(out.shape)}")
        out = out + (input if beta == 1 else input * beta)
    return out


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·(mat1 @ mat2); mat1 or mat2 may be sparse."""
    if mat1.__class__ is SparseTensor or mat2.__class__ is SparseTensor:
        return sparse_addmm(input, mat1, mat2, beta=beta, alpha=alpha)
    return _dense_addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def sparse_mm(mat1: Tensor, mat2: Tensor, reduce: str | None = None) -> Tensor:
    """mat1 @ mat2 where mat1 (or mat2) is a sparse matrix and the other a dense matrix: a dense matrix.
    The gradient with respect to the sparse operand is sparse, on its positions (PyTorch's `torch.sparse.mm`)."""
    if reduce is not None:
        raise NotImplementedError(f"sparse.mm(): reduce={reduce!r} is not supported (sparse CSR only in PyTorch)")
    if mat1.__class__ is not SparseTensor and mat2.__class__ is not SparseTensor:
        raise RuntimeError("sparse.mm(): expected a sparse COO operand, got two dense (strided) tensors; use ember.mm")
    return _product(mat1, mat2, "sparse.mm", vector_ok=False)


def sparse_sum(input: Tensor, dim=None, dtype=None) -> Tensor:
    """Σ of a sparse tensor's values: over everything (a dense 0-d tensor) or over `dim` (an int or a list):
    a dense tensor when every sparse dimension is summed, else a coalesced sparse tensor."""
    a = _need_sparse(input, "sparse.sum(): input")
    v = _entries(input)
    if dtype is not None:
        v = v.to(dtype)
    if dim is None:
        return v.sum()
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    norm = [normalize_dim(d, a.ndim, "sum") for d in dims]
    for d in norm:
        if norm.count(d) > 1:
            raise RuntimeError(f"sum(): dim {d} appears multiple times in the list of dims")
    sd = a.sparse_dim
    dense_axes = tuple(d - sd + 1 for d in norm if d >= sd)
    if dense_axes:
        v = v.sum(dense_axes)
    keep = [d for d in range(sd) if d not in norm]
    if not keep:
        return v.sum(0)
    sizes = tuple(a.shape[d] for d in keep)
    order, starts, inverse, positions = _plan(a.indices[keep], sizes)
    shape = sizes + tuple(n for d, n in enumerate(a.shape) if d >= sd and d not in norm)
    return _build(SegmentSum.apply(v, order=order, starts=starts, inverse=inverse), positions, shape, True, "Sum")


# ---------------------------------------------------------------------- the sparse tensor's own methods
def _plain(a: np.ndarray) -> str:
    """`tensor([...])` of an array, without suffixes (the sparse tensor's repr names its dtype once)."""
    from .._format import _OPT, _PREFIX, _Formatter, _body, _summarized
    if a.size == 0:
        return f"tensor([], size={tuple(a.shape)})"
    summarize = a.size > _OPT.threshold
    return _PREFIX + _body(a, _Formatter(_summarized(a) if summarize else a), len(_PREFIX), summarize) + ")"


def _repr(t: SparseTensor) -> str:
    from .._format import _OPT
    a = t._data
    ind = _plain(a.indices).replace("\n", "\n" + " " * len("tensor(indices="))
    val = _plain(a.values).replace("\n", "\n" + " " * len("       values="))
    suffixes = [f"size={a.shape}", f"nnz={a.nnz}"]
    if a.dtype not in (dt.NP_DEFAULT_FLOAT, dt.NP_INT64, dt.NP_BOOL):
        suffixes.append(f"dtype={t.dtype}")
    suffixes.append("layout=ember.sparse_coo")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    out, last = f"tensor(indices={ind},\n       values={val},\n       " + suffixes[0], 7 + len(suffixes[0])
    for s in suffixes[1:]:  # a suffix that would overflow the line goes on the next one, as PyTorch does
        if last + len(s) + 2 > _OPT.linewidth:
            out += ",\n       " + s
            last = 7 + len(s)
        else:
            out += ", " + s
            last += len(s) + 2
    return out + ")"


def _rebuild_sparse(indices, values, shape, coalesced, requires_grad):
    return _sparse(SparseCOO(indices, values, shape, coalesced), requires_grad)


def _as(dtype):
    def method(self, memory_format=None):
        return self.to(dtype)
    return method


def _sparse_to(self, *args, **kwargs) -> Tensor:
    """`to(dtype)` and friends (a new sparse tensor with cast values; self when nothing changes)."""
    v = _entries(self)
    w = v.to(*args, **kwargs)
    if w.device.type != "cpu":
        raise NotImplementedError(f"to(): ember's sparse tensors live on the CPU; cannot move one to {w.device}")
    a = self._data
    return self if w is v else _build(w, a.indices, a.shape, a.coalesced, "ToCopy")


def _sparse_clone(self, *, memory_format=None) -> Tensor:
    a = self._data
    return _build(_entries(self).clone(), a.indices.copy(), a.shape, a.coalesced, "Clone")


def _sparse_detach(self) -> Tensor:
    t = _sparse(self._data)
    t._base = self._base if self._base is not None else self  # (one version counter, as Tensor.detach)
    return t


def _sparse_zero_(self) -> Tensor:
    """Remove every entry (in place), as PyTorch's zero_() on a sparse tensor."""
    if self._requires_grad and self._edge is None and MODE.grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    a = self._data
    self._data = SparseCOO(np.empty((a.sparse_dim, 0), _INT64), a.values[:0].copy(), a.shape, True)
    bump_version(self)
    return self


def _sparse_sum_method(self, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    if keepdim:
        raise NotImplementedError("sum(): keepdim=True is not supported for sparse tensors")
    return sparse_sum(self, dim, dtype)


def _no_numpy(self, *args, **kwargs):
    raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")


def _no_tolist(self):
    raise RuntimeError("tolist(): a sparse COO tensor has no dense storage to read; call .to_dense() first")


def _sparse_item(self):
    if self._data.size != 1:
        raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
    return to_dense(self).item()


def _sparse_bool(self) -> bool:
    if self._data.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(_sparse_item(self))


def _sparse_deepcopy(self, memo):
    if not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           "at the moment.")
    a = self._data
    t = _sparse(SparseCOO(a.indices.copy(), a.values.copy(), a.shape, a.coalesced), self._requires_grad)
    if self._grad is not None:
        t._grad = self._grad.__deepcopy__(memo)
    memo[id(self)] = t
    return t


def _sparse_reduce_ex(self, protocol):
    a = self._data
    return (_rebuild_sparse, (a.indices, a.values, a.shape, a.coalesced, self._requires_grad))


def _sparse_radd(self, other):
    if isinstance(other, Tensor) and other.__class__ is not SparseTensor:
        return _dense_add(other, self)
    raise _add_error()


def _sparse_rsub(self, other):
    if isinstance(other, Tensor) and other.__class__ is not SparseTensor:
        return _dense_add(other, self, alpha=-1)
    raise _add_error()


def _sparse_add_method(self, other, *, alpha=1):
    if other.__class__ is SparseTensor:
        return _sparse_add(self, other, alpha)
    raise _add_error()


def _rmatmul(self, other):
    return _product(other, self, "matmul") if isinstance(other, Tensor) else NotImplemented


def _matmul(self, other):
    return _product(self, other, "matmul") if isinstance(other, Tensor) else NotImplemented


for _name, _value in {
    "layout": sparse_coo, "is_sparse": True,
    "__repr__": _repr, "__reduce_ex__": _sparse_reduce_ex, "__deepcopy__": _sparse_deepcopy,
    "__add__": _sparse_add_method, "add": _sparse_add_method, "__radd__": _sparse_radd,
    "__sub__": lambda self, other: _sparse_add_method(self, other, alpha=-1),
    "sub": lambda self, other, *, alpha=1: _sparse_add_method(self, other, alpha=-alpha), "__rsub__": _sparse_rsub,
    "__mul__": _mul, "mul": _mul, "__rmul__": _mul, "__truediv__": _div, "div": _div,
    "__neg__": lambda self: _scaled(self, -1, label="Neg"), "neg": lambda self: _scaled(self, -1, label="Neg"),
    "__matmul__": _matmul, "__rmatmul__": _rmatmul, "t": _transposed,
    "sum": _sparse_sum_method, "to": _sparse_to, "clone": _sparse_clone, "detach": _sparse_detach,
    "data": property(lambda self: _sparse(self._data), Tensor._set_data, Tensor._del_data),
    "zero_": _sparse_zero_, "float": _as(dt.float32), "double": _as(dt.float64), "half": _as(dt.float16),
    "long": _as(dt.int64), "int": _as(dt.int32), "bool": _as(dt.bool),
    "numpy": _no_numpy, "__array__": _no_numpy, "tolist": _no_tolist, "item": _sparse_item,
    "__bool__": _sparse_bool, "_scalar": lambda self, op: to_dense(self)._scalar(op),
    "is_contiguous": lambda self, memory_format=None: False,
}.items():
    setattr(SparseTensor, _name, _value)
del _name, _value

engine.SPARSE = SparseTensor  # the engine sums gradients that are sparse tensors out of place


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(), functions=__all__,
    methods=("to_dense", "to_sparse", "to_sparse_coo", "coalesce", "is_coalesced", "indices", "values", "_indices",
             "_values", "sparse_dim", "dense_dim", "_nnz", "sparse_mask", "mm", "matmul", "addmm"),
    aliases={"layout": strided, "is_sparse": False})
