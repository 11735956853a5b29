"""nn ops without a family of their own: linear, bilinear, embedding, one_hot, cosine_similarity, normalize.

`linear` is the hottest op of a training step: its forward is one GEMM (x @ Wᵀ) plus an in-place
bias add, and its backward is two GEMMs (gx = gz @ W, gW = gzᵀ @ x over the flattened leading dims)
and a column sum (one GEMV). A plain backward runs them straight on the arrays; with create_graph
they are ember ops (Matmul, LinearWeightGrad, sum_to), so higher derivatives work.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .. import _capture, backend
from .._tensor import Tensor, bump_version, make
from ..autograd import forward_ad
from ..autograd.function import Op
from ..autograd.grad_mode import MODE, no_grad
from .arithmetic import ones_vector, sum_to, where
from .indexing import add_rows
from .linalg import Matmul, c_type_name, matmul
from .reduce import norm
from .shape import broadcast_tensors
from .sparse_ops import GatherRows, ScatterRows, SpMM, rows_product, sparse_rows
from .._capture import traced

__all__ = ["linear", "bilinear", "embedding", "embedding_bag", "one_hot", "cosine_similarity", "normalize"]


def _need_tensor(op: str, name: str, v, pos: int) -> None:
    if not isinstance(v, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(v).__name__}")


def _float_name(d: np.dtype) -> str:
    return str(dt.FROM_NP[d]).replace("ember.", "")


def _adds_to(shape: tuple, out_shape: tuple) -> bool:
    """Whether an array of `shape` broadcasts to out_shape without enlarging it."""
    try:
        return np.broadcast_shapes(out_shape, shape) == out_shape
    except ValueError:
        return False


# ---------------------------------------------------------------------- linear
class Linear(Op):
    """z = x @ Wᵀ + b for x (..., in), W (out, in), b broadcastable to z;
    dx = gz @ W, dW = gzᵀ @ x (leading dims flattened), db = gz summed to b's shape."""

    def forward(self, x, w, b):
        if x.ndim == 2:
            out = x @ w.T
        elif x.ndim > 2 and x.flags.c_contiguous and x.shape[-1]:
            # one (rows, in) @ (in, out) GEMM instead of NumPy's loop of small ones over the leading dims
            out = (x.reshape(-1, x.shape[-1]) @ w.T).reshape(x.shape[:-1] + (w.shape[0],))
        else:
            out = np.matmul(x, w.T)
        if b is not None:
            out += b  # the GEMM's result is ours: add the bias in place
        return out

    def jvp(self, t, x, w, b):
        """z' = x' Wᵀ + x W'ᵀ + b' (bilinear in x and W)."""
        tx, tw, tb = t
        z = Linear.apply(tx, w, None) if isinstance(tx, Tensor) else 0
        if isinstance(tw, Tensor):
            z = z + Linear.apply(x, tw, None)
        return z + tb if isinstance(tb, Tensor) else z

    def backward(self, gz, x, w, b):
        # first-order backward: the three products straight on the arrays (unless they carry forward-AD tangents)
        if not MODE.grad and not (MODE.fw and any(forward_ad.is_dual(a) for a in (gz, x, w))):
            return _linear_grads(self, gz._data, x._data, w._data, b)
        gx = Matmul.apply(gz, w) if self.needs(0) else None
        gw = LinearWeightGrad.apply(gz, x) if self.needs(1) else None
        gb = sum_to(gz, b.shape) if b is not None and self.needs(2) else None
        return gx, gw, gb


def _rows(a: np.ndarray) -> np.ndarray:
    """`a` as a matrix of rows (leading dims flattened); `reshape(-1, 0)` is ambiguous, hence the size-0 case."""
    k = a.shape[-1]
    return a.reshape(-1, k) if k else a.reshape(math.prod(a.shape[:-1]), 0)


def _linear_grads(node: Linear, g, x, w, b) -> tuple:
    """Linear's gradients as arrays (the same products as its backward, without recording ops)."""
    m = g.shape[-1]
    g2 = _rows(g)
    gx = gw = gb = None
    if node.needs(0):
        r = g2 @ w
        gx = make(r if r.shape == x.shape else r.reshape(x.shape))  # (a reshape view would be copied on .grad)
    if node.needs(1):
        gw = make(_weight_grad(g2, _rows(x)))
    if b is not None and node.needs(2):
        if b.shape == (m,):
            # column sums as one GEMV with the host's cached ones (a plain sum on other devices)
            gb = make(ones_vector(g2.shape[0], g.dtype) @ g2 if g2.__class__ is np.ndarray else g2.sum(0))
        else:
            gb = sum_to(make(g), b.shape)
    return gx, gw, gb


def _weight_grad(g2, x2):
    """g2ᵀ @ x2 for rows (M, out) and (M, in). A single row is an outer product: one broadcast multiply,
    ~5x faster than OpenBLAS's GEMM with an inner dimension of 1 (measured 90 vs 430 µs at 512 x 784)."""
    if g2.shape[0] == 1 and type(g2) is np.ndarray:
        return np.multiply(g2.reshape(-1, 1), x2)
    return g2.T @ x2


class LinearWeightGrad(Op):
    """r = gzᵀ @ x with gz (..., out), x (..., in) flattened to rows: Linear's weight gradient;
    dr/dgz = x @ grᵀ (a linear of x by gr), dr/dx = gz @ gr."""

    def forward(self, gz, x):
        return _weight_grad(_rows(gz), _rows(x))

    def jvp(self, t, gz, x):
        """r' = gz'ᵀ x + gzᵀ x' (bilinear in gz and x)."""
        tg, tx = t
        z = LinearWeightGrad.apply(tg, x) if isinstance(tg, Tensor) else 0
        return z + LinearWeightGrad.apply(gz, tx) if isinstance(tx, Tensor) else z

    def backward(self, gr, gz, x):
        return (Linear.apply(x, gr, None) if self.needs(0) else None), (Matmul.apply(gz, gr) if self.needs(1) else None)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x Wᵀ + b: input (*, in_features), weight (out_features, in_features), bias (out_features) or None."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor) and (bias is None or isinstance(bias, Tensor))):
        _need_tensor("linear", "input", input, 1)
        _need_tensor("linear", "weight", weight, 2)
        _need_tensor("linear", "bias", bias, 3)  # (reached only when bias is not None)
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, weight, bias = cast_args(Linear, input, weight, bias)
    x, w = input._data, weight._data
    if x.dtype is not w.dtype or not dt.is_float(x.dtype):
        if x.dtype != w.dtype:
            raise RuntimeError(f"linear(): expected input and weight to have the same dtype, but got: "
                               f"{c_type_name(x)} != {c_type_name(w)}; convert one with .to(dtype)")
        if not dt.is_float(x.dtype):
            raise RuntimeError(f"linear(): not implemented for {_float_name(x.dtype)} tensors; use float tensors")
    if x.ndim == 0 or w.ndim == 0 or w.ndim > 2:
        if w.ndim > 2:
            raise RuntimeError(f"linear(): weight must be a matrix (out_features, in_features), got a {w.ndim}-D "
                               f"tensor of shape {list(w.shape)}")
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {x.ndim}D and {w.ndim}D")
    if x.shape[-1] != w.shape[-1]:
        rows = math.prod(x.shape[:-1])
        wt = "x".join(str(s) for s in w.shape[::-1])
        raise RuntimeError(f"linear(): mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and {wt}): "
                           f"input's last dimension ({x.shape[-1]}) must equal weight's in_features ({w.shape[-1]}); "
                           f"input shape {list(x.shape)}, weight shape {list(w.shape)}")
    if bias is not None:
        bd = bias._data
        if bd.dtype != x.dtype:
            raise RuntimeError(f"linear(): expected bias to have the dtype of input and weight ({c_type_name(x)}), "
                               f"got {c_type_name(bd)}")
        out_shape = x.shape[:-1] + w.shape[:-1]
        if bd.shape != out_shape[-1:] and not _adds_to(bd.shape, out_shape):
            raise RuntimeError(f"linear(): bias of shape {list(bd.shape)} cannot be added to the output of shape "
                               f"{list(out_shape)}; expected a bias of shape [{out_shape[-1] if out_shape else ''}]")
    if w.ndim == 1:  # (..., k) @ (k,): a matrix-vector product, rare enough for the general ops
        out = matmul(input, weight)
        return out if bias is None else out + bias
    return Linear.apply(input, weight, bias)


# ---------------------------------------------------------------------- bilinear
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y_o = x1ᵀ A_o x2 + b_o: input1 (*, in1), input2 (*, in2), weight (out, in1, in2), bias (out) or None."""
    for i, (name, v) in enumerate((("input1", input1), ("input2", input2), ("weight", weight)), 1):
        _need_tensor("bilinear", name, v, i)
    a, c, w = input1._data, input2._data, weight._data
    if w.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out_features, in1_features, in2_features), got shape "
                           f"{list(w.shape)}")
    if a.ndim == 0 or a.ndim != c.ndim:
        raise RuntimeError(f"bilinear(): input1 and input2 must have the same number of dimensions (at least 1), got "
                           f"shapes {list(a.shape)} and {list(c.shape)}")
    if a.shape[:-1] != c.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(a.shape[:-1])} and "
                           f"{list(c.shape[:-1])}")
    if a.shape[-1] != w.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {a.shape[-1]} but expected "
                           f"{w.shape[1]} (weight shape {list(w.shape)})")
    if c.shape[-1] != w.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {c.shape[-1]} but expected "
                           f"{w.shape[2]} (weight shape {list(w.shape)})")
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != w.shape[0]):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {list(bias.shape)} but expected "
                           f"[{w.shape[0]}]")
    o, h1, h2 = w.shape
    lead = a.shape[:-1]
    x1 = input1.reshape(-1, h1)
    x2 = input2.reshape(-1, h2)
    # x1 (M, h1) @ W viewed as (h1, o·h2): one GEMM, then a row-wise dot with x2
    t = (x1 @ weight.permute(1, 0, 2).reshape(h1, o * h2)).reshape(-1, o, h2)
    out = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(lead + (o,))


# ---------------------------------------------------------------------- embedding
def _counts(idx, n: int):
    """How often each of the n rows occurs in idx, as a divisor (1 where a row does not occur)."""
    c = backend.array_module(idx).bincount(idx.reshape(-1), minlength=n)
    np.maximum(c, 1, out=c)
    return c


class Embedding(Op):
    """z = W[idx] (rows of the weight);  dz/dW: gz's rows added into the rows they came from (none into
    padding_idx; each divided by the row's count in idx when scale_grad_by_freq); with `sparse`, the same
    as a sparse COO tensor holding one entry per index (`sparse_rows_grad`)."""

    saves_inputs = False

    def forward(self, w, idx, padding_idx, scale, sparse=False):
        self.idx, self.n, self.pad, self.scale, self.sparse = idx, w.shape[0], padding_idx, scale, sparse
        return w[idx]

    jvp = Op.linear_jvp  # z' = W'[idx]: linear in W (padding_idx and scaling act on the gradient only)

    def backward(self, gz):
        if self.sparse:
            return sparse_rows_grad(gz, self.idx, self.n, self.pad, self.scale), None, None, None
        return EmbeddingBackward.apply(gz, self.idx, self.n, self.pad, self.scale), None, None, None


def sparse_rows_grad(g: Tensor, idx, n: int, pad: int | None, scale: bool) -> Tensor:
    """The gradient of W[idx] for an n-row W as PyTorch's sparse embedding gradient: an uncoalesced sparse COO
    tensor with an entry per index (those equal to padding_idx left out) holding g's row for it."""
    if scale:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    rows = idx.reshape(-1)
    g = g.reshape((rows.size,) + tuple(g.shape[idx.ndim:]))
    if pad is not None:
        keep = np.flatnonzero(rows != pad)
        if keep.size < rows.size:
            rows, g = rows[keep], g[keep]
    return sparse_rows(g, rows, (n,) + tuple(g.shape[1:]))


class EmbeddingBackward(Op):
    """r = zeros(n, ...) with g's rows added at idx (padding row zero, rows divided by their counts);
    a linear map whose adjoint, its derivative, is EmbeddingGather."""

    saves_inputs = False

    def forward(self, g, idx, n, pad, scale):
        self.idx, self.pad, self.scale = idx, pad, scale
        rows = idx.reshape(-1)
        out = backend.array_module(g).zeros((n,) + g.shape[idx.ndim:], g.dtype)
        add_rows(out, rows, g.reshape((rows.size,) + out.shape[1:]))
        if scale:
            out /= _counts(idx, n).astype(g.dtype).reshape((n,) + (1,) * (out.ndim - 1))
        if pad is not None:
            out[pad] = 0
        return out

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gr):
        return EmbeddingGather.apply(gr, self.idx, self.pad, self.scale), None, None, None, None


class EmbeddingGather(Op):
    """r = g[idx] (rows at padding_idx zero, rows divided by their counts): the adjoint of EmbeddingBackward."""

    saves_inputs = False

    def forward(self, g, idx, pad, scale):
        self.idx, self.n, self.pad, self.scale = idx, g.shape[0], pad, scale
        out = g[idx]
        if scale:
            out /= _counts(idx, g.shape[0]).astype(g.dtype)[idx].reshape(idx.shape + (1,) * (out.ndim - idx.ndim))
        if pad is not None:
            out[idx == pad] = 0
        return out

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz):
        return EmbeddingBackward.apply(gz, self.idx, self.n, self.pad, self.scale), None, None, None


def _renorm_rows(weight: Tensor, idx, max_norm: float, norm_type: float) -> None:
    """Scale, in place, the rows of weight used by idx whose norm exceeds max_norm to norm max_norm (PyTorch's
    embedding_renorm_: factor max_norm / (norm + 1e-7))."""
    w = weight._data
    am = backend.array_module(w)
    rows = am.unique(idx)
    sel = w[rows]
    norms = am.linalg.norm(sel.astype(np.float64, copy=False).reshape(len(rows), -1), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        if _capture.ACTIVE is not None:
            _capture.writing(weight)
        factor = (max_norm / (norms[big] + 1e-7)).astype(w.dtype)
        w[rows[big]] = sel[big] * factor.reshape((-1,) + (1,) * (w.ndim - 1))
        bump_version(weight)


def padding_index(padding_idx: int | None, n: int) -> int | None:
    """`padding_idx` as a row number of an n-row embedding (negative counts from the end), checked."""
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:
        raise AssertionError(f"Padding_idx must be within num_embeddings: got padding_idx={padding_idx} for "
                             f"{n} embeddings")
    return padding_idx + n if padding_idx < 0 else padding_idx


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, embedding_dim) picked by the integer tensor `input`: shape (*input, dim).

    padding_idx: that row gets no gradient. max_norm: rows used whose norm_type-norm exceeds max_norm are rescaled
    in place to that norm first. scale_grad_by_freq: each row's gradient is divided by how often it occurs in input.
    sparse: weight's gradient is a sparse COO tensor (an entry per index, padding_idx's left out), for
    optim.SGD or optim.SparseAdam; PyTorch's error with scale_grad_by_freq.
    """
    _need_tensor("embedding", "input", input, 1)
    _need_tensor("embedding", "weight", weight, 2)
    idx, w = input._data, weight._data
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"embedding(): expected the indices (argument 'input') to have one of the scalar types "
                           f"Long, Int; but got {_float_name(idx.dtype)} instead; convert them with .long()")
    if w.ndim != 2:
        raise RuntimeError(f"embedding(): 'weight' must be 2-D (num_embeddings, embedding_dim), got shape "
                           f"{list(w.shape)}")
    if idx.__class__ is not w.__class__:
        backend.check_same_device("embedding", (w, idx))
    n = w.shape[0]
    padding_idx = padding_index(padding_idx, n)
    lo, hi = backend.index_bounds(idx) if idx.size else (0, 0)
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        raise IndexError(f"embedding(): index out of range in self: index {int(bad)} for a weight of {n} rows "
                         f"(valid indices 0..{n - 1})")
    if max_norm is not None:
        _renorm_rows(weight, idx, float(max_norm), float(norm_type))
    return Embedding.apply(weight, idx, padding_idx, bool(scale_grad_by_freq), sparse=bool(sparse))


# ---------------------------------------------------------------------- embedding_bag
class _Bags:
    """The bags of one embedding_bag call, from its indices and offsets (whole-array, no loop over bags).

    rows: the weight row of each entry that counts (entries equal to padding_idx, and those past the last
        bag, do not), in bag order; entries: their positions in the flattened input (None: the first len(rows));
    bag: each one's bag (non-decreasing); counts, starts: each bag's number of entries and the first one's
        position in rows; nonempty: the bags with entries; width: the common bag size when every bag has it
        (a 2-D input with nothing left out), else None.
    """

    __slots__ = ("rows", "entries", "bag", "counts", "starts", "nonempty", "n_bags", "width")

    def __init__(self, idx, offsets, pad: int | None, last: bool) -> None:
        flat = idx.reshape(-1)
        if offsets is None:  # a 2-D input: one bag per row
            b, width = idx.shape
            counts = np.full(b, width, np.int64)
        else:
            off = offsets.astype(np.int64, copy=False)
            ends = off[1:] if last or not off.size else np.append(off[1:], flat.size)
            b, width = ends.size, None
            counts = ends - off[:b]
            flat = flat[:ends[-1] if b else 0]
        bag = np.repeat(np.arange(b), counts)
        entries = None
        if pad is not None:
            keep = flat != pad
            if not keep.all():
                entries = np.flatnonzero(keep)
                flat, bag, width = flat[entries], bag[entries], None
                counts = np.bincount(bag, minlength=b)
        self.rows, self.entries, self.bag, self.counts = flat.astype(np.int64, copy=False), entries, bag, counts
        self.starts = np.cumsum(counts) - counts
        self.nonempty = np.flatnonzero(counts)
        self.n_bags, self.width = b, width

    def positions(self):
        """The positions in the flattened input of the entries that count."""
        return np.arange(self.rows.size) if self.entries is None else self.entries

    def max(self, x):
        """The max over each bag of x's rows (one row per entry that counts), per column; 0 for an empty bag."""
        if self.width is not None and self.width:  # equal bags: one reduction along the bag axis
            return x.reshape((self.n_bags, self.width) + x.shape[1:]).max(1)
        z = np.zeros((self.n_bags,) + x.shape[1:], x.dtype)
        if self.nonempty.size:
            z[self.nonempty] = np.maximum.reduceat(x, self.starts[self.nonempty], axis=0)
        return z

    def argmax(self, x, z):
        """For each nonempty bag and column, the first row of x holding the bag's max z there."""
        nz = self.nonempty
        n = x.shape[0]
        if not nz.size:
            return np.zeros((0,) + x.shape[1:], np.int64)
        if self.width is not None:
            x3 = x.reshape((self.n_bags, self.width) + x.shape[1:])
            first = (np.arange(self.n_bags) * self.width).reshape((-1,) + (1,) * (x.ndim - 1))
            return (x3 == z[:, None]).argmax(1) + first
        hit = x == np.repeat(z[nz], self.counts[nz], axis=0)
        arg = np.minimum.reduceat(np.where(hit, np.arange(n).reshape((-1,) + (1,) * (x.ndim - 1)), n), self.starts[nz],
                                  axis=0)
        return np.minimum(arg, n - 1)  # (a NaN max matches no row: its gradient goes to the bag's last)


class ScatterAt(Op):
    """z = zeros(shape) with x added at the positions `at` (a tuple of index arrays of x's shape);
    dz/dx = gz[at] (`GatherAt`)."""

    saves_inputs = False

    def forward(self, x, at, shape):
        self.at = at
        out = np.zeros(shape, x.dtype)
        np.add.at(out, at, x)
        return out

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return GatherAt.apply(gz, at=self.at)


class GatherAt(Op):
    """z = x[at];  dz/dx = zeros of x's shape with gz added at `at` (`ScatterAt`)."""

    saves_inputs = False

    def forward(self, x, at):
        self.at, self.shape = at, x.shape
        return x[at]

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return ScatterAt.apply(gz, at=self.at, shape=self.shape)


class EmbeddingBag(Op):
    """z[b] = Σ_{i∈b} c_i·W[idx_i] (sum; c: per_sample_weights, else 1), (1/|b|)·Σ_{i∈b} W[idx_i] (mean) or
    max_{i∈b} W[idx_i] per column (max), over bag b's entries other than padding_idx's; 0 for an empty bag.
    Sum and mean are the product C @ W of the sparse (bags, num_embeddings) matrix C with entries c_i (or 1/|b|)
    at (b, idx_i), so W[idx] is never built (`rows_product`).

    dW = Cᵀ @ gz (each row's part divided by its count in the input with scale_grad_by_freq; with `sparse`, a
    sparse COO tensor with an entry per counted entry), or, for max, gz[b, j] at the row that held each max;
    dc_i = gz[b]·W[idx_i]."""

    def forward(self, w, idx, offsets, psw, mode, pad, last, scale, sparse):
        self.bags = bags = _Bags(idx, offsets, pad, last)
        self.mode, self.scale, self.sparse = mode, scale, sparse
        if mode == "max":
            z = bags.max(w[bags.rows])
            self.z = z.copy()  # (the result is the caller's to change; the argmax in backward needs the maxima)
            return z
        return rows_product(bags.n_bags, bags.bag, bags.rows, self._entry_weights(psw, w.dtype), w, sorted_rows=True)

    def _entry_weights(self, psw, dtype):
        """c_i for every entry that counts (a mean's 1/|b| included); None when they are all 1."""
        bags = self.bags
        c = None if psw is None else psw.reshape(-1)[bags.positions()]
        if self.mode == "mean":
            inv = (1 / np.maximum(bags.counts, 1)).astype(dtype)[bags.bag]
            c = inv if c is None else c * inv
        return c

    def jvp(self, t, w, idx, offsets, psw):
        """sum, mean: z' = C W' + C' W (C bilinear in W and per_sample_weights, whose tangent is C's);
        max: z'[b, j] = W'[the row that held bag b's max in column j, j] (0 for an empty bag)."""
        tw, tp = t[0], t[3]
        if self.mode == "max":
            return self._max_tangent(tw, w) if isinstance(tw, Tensor) else 0
        z = self.reapply(tw, None, None, None) if isinstance(tw, Tensor) else 0
        return z + self.reapply(None, None, None, tp) if isinstance(tp, Tensor) else z

    def _max_tangent(self, tw: Tensor, w: Tensor) -> Tensor:
        bags = self.bags
        nz = bags.nonempty
        arg = bags.argmax(w._data[bags.rows], self.z)  # (nonempty bags, dim): the entry holding each max
        cols = np.broadcast_to(np.arange(w.shape[1]), arg.shape)
        g = GatherAt.apply(tw, at=(bags.rows[arg], cols))
        if nz.size == bags.n_bags:
            return g
        return ScatterAt.apply(g, at=(np.broadcast_to(nz[:, None], arg.shape), cols), shape=(bags.n_bags, w.shape[1]))

    def backward(self, gz, w, idx, offsets, psw):
        bags, n = self.bags, w.shape[0]
        if self.mode == "max":
            nz = bags.nonempty
            arg = bags.argmax(w._data[bags.rows], self.z)
            cols = np.broadcast_to(np.arange(gz.shape[1]), arg.shape)
            g = gz if nz.size == bags.n_bags else gz[nz]
            return ScatterAt.apply(g, at=(bags.rows[arg], cols), shape=tuple(w.shape)), None, None, None
        c = self._entry_weights(None, gz._data.dtype)  # (the constant part; per_sample_weights join as a tensor)
        if psw is not None:
            at = bags.positions()
            ps = psw.reshape(-1)[at]
            c = ps if c is None else ps * make(c)
        gw = gpsw = None
        if psw is not None and self.needs(3):  # dc_i = gz[b]·W[idx_i], at entry i's place in per_sample_weights
            gc = (GatherRows.apply(gz, rows=bags.bag) * GatherRows.apply(w, rows=bags.rows)).sum(-1)
            gpsw = ScatterRows.apply(gc, rows=at, n=psw.numel()).reshape(psw.shape)
        if self.needs(0):
            if self.sparse:  # an entry per counted entry: c_i·gz[b] at row idx_i
                ge = GatherRows.apply(gz, rows=bags.bag)
                if c is not None:
                    ge = ge * (c if isinstance(c, Tensor) else make(c)).unsqueeze(-1)
                gw = sparse_rows_grad(ge, bags.rows, n, None, self.scale)
            else:
                if self.scale:  # each row's gradient over its count in the input: the entries' weights over it
                    per_row = (1 / np.maximum(np.bincount(bags.rows, minlength=n), 1)).astype(gz._data.dtype)[bags.rows]
                    c = per_row if c is None else c * (make(per_row) if isinstance(c, Tensor) else per_row)
                gw = SpMM.apply(c, gz, rows=bags.rows, cols=bags.bag, n=n, sorted_rows=False)
        return gw, None, None, gpsw


def _index_dtype_error(name: str, t: Tensor) -> RuntimeError:
    return RuntimeError(f"embedding_bag(): expected tensor for argument '{name}' to have one of the following scalar "
                        f"types: Long, Int; but got {t.dtype} instead; convert it with .long()")


def _check_offsets(off: np.ndarray, n: int, last: bool) -> None:
    """PyTorch's checks on offsets: the first is 0, the last at most the input's length; and non-decreasing."""
    if not off.size:
        return
    if off[0] != 0:
        raise RuntimeError(f"embedding_bag(): offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                           f"start from position 0. However, got {int(off[0])}")
    if off[-1] > n:
        raise RuntimeError(f"embedding_bag(): offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {int(off[-1])}")
    down = np.flatnonzero(off[1:] < off[:-1])
    if down.size:
        i = int(down[0]) + 1
        raise RuntimeError(f"embedding_bag(): offsets must be non-decreasing, but offsets[{i}] = {int(off[i])} is less "
                           f"than offsets[{i - 1}] = {int(off[i - 1])}")


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of rows of `weight` (num_embeddings, embedding_dim), without building the
    (bags, bag size, dim) tensor: shape (bags, embedding_dim).

    Bags: the rows of a 2-D `input` (offsets None), or slices of a 1-D `input` starting at `offsets` (the last
    running to the end, or, with include_last_offset, offsets' last entry closing the last bag). Entries equal
    to padding_idx are left out (mean divides by the entries that count); an empty bag gives zeros.
    per_sample_weights (mode 'sum' only, input's shape) scale each entry's row. max_norm, norm_type,
    scale_grad_by_freq and sparse as in `embedding` (mode 'max' takes neither of the last two).
    """
    _need_tensor("embedding_bag", "input", input, 1)
    _need_tensor("embedding_bag", "weight", weight, 2)
    if per_sample_weights is not None:
        _need_tensor("embedding_bag", "per_sample_weights", per_sample_weights, 9)
        if per_sample_weights.shape != input.shape:
            raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                             f"must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                             f"length sequences. However, found offsets of type {type(offsets).__name__}")
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        _need_tensor("embedding_bag", "offsets", offsets, 3)
        if offsets.dim() != 1:
            raise ValueError(f"offsets has to be a 1D Tensor, got one of shape {list(offsets.shape)}")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                      f"GitHub.")
        if per_sample_weights.dtype != weight.dtype:
            raise RuntimeError(f"embedding_bag(): expected per_sample_weights to have the weight's dtype {weight.dtype}, "
                               f"got {per_sample_weights.dtype}")
    idx, w = input._data, weight._data
    if idx.dtype not in (np.int64, np.int32):
        raise _index_dtype_error("indices", input)
    if offsets is not None and offsets._data.dtype not in (np.int64, np.int32):
        raise _index_dtype_error("offsets", offsets)
    if idx.__class__ is not w.__class__:
        backend.check_same_device("embedding_bag", (w, idx))
    n = w.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise RuntimeError(f"embedding_bag(): padding_idx must be within the number of embeddings, {-n} through "
                               f"{n - 1}, but got {padding_idx}")
        padding_idx %= n
    if offsets is not None:
        _check_offsets(offsets._data, idx.size, include_last_offset)
    flat = idx.reshape(-1)
    if flat.size:
        bad = np.flatnonzero((flat < 0) | (flat >= n))
        if bad.size:
            raise RuntimeError(f"embedding_bag(): Index {int(bad[0])} of input takes value {int(flat[bad[0]])} which is "
                               f"not in the valid range [0, {n})")
    if max_norm is not None:
        _renorm_rows(weight, flat, float(max_norm), float(norm_type))
    return EmbeddingBag.apply(weight, input, offsets, per_sample_weights, mode=mode, pad=padding_idx,
                              last=bool(include_last_offset) and offsets is not None, scale=bool(scale_grad_by_freq),
                              sparse=bool(sparse))


# ---------------------------------------------------------------------- one_hot
@traced
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor of shape (*tensor.shape, num_classes) with 1 at each value's class; num_classes=-1: max + 1."""
    _need_tensor("one_hot", "tensor", tensor, 1)
    idx = tensor._data
    if idx.dtype != np.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (int64), got "
                           f"{_float_name(idx.dtype)}; convert it with .long()")
    if num_classes == -1:
        if idx.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor; pass num_classes")
        num_classes = int(idx.max()) + 1
    if idx.size:
        if idx.min() < 0:
            raise RuntimeError(f"Class values must be non-negative: one_hot got {int(idx.min())}")
        if idx.max() >= num_classes:
            raise RuntimeError(f"Class values must be smaller than num_classes: one_hot got {int(idx.max())} with "
                               f"num_classes={num_classes}")
    am = backend.array_module(idx)
    out = am.zeros(idx.shape + (num_classes,), np.int64)
    am.put_along_axis(out, idx[..., None], 1, axis=-1)
    return make(out)


# ---------------------------------------------------------------------- cosine_similarity, normalize
class _FloorValue(Op):
    """z = max(x, eps) in value, with the gradient of x itself (dz/dx = 1): PyTorch clamps the norms in
    cosine_similarity outside autograd, and this keeps both its values and its gradients. Its forward mode does
    see the clamp (no_grad does not stop it): z' = x' where x ≥ eps, else 0, the true derivative."""

    saves_inputs = False

    def forward(self, x, eps):
        return np.maximum(x, x.dtype.type(eps))

    def jvp(self, t, x, eps):
        return where(make(x._data >= eps), t[0], 0.0)  # (the mask is piecewise constant: no derivative of its own)

    def backward(self, gz):
        return gz, None


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Σ (x1/‖x1‖)(x2/‖x2‖) along dim, each norm floored at eps; x1 and x2 broadcast to a common shape."""
    _need_tensor("cosine_similarity", "x1", x1, 1)
    _need_tensor("cosine_similarity", "x2", x2, 2)
    if not dt.is_float(x1._data.dtype) and not dt.is_float(x2._data.dtype):
        raise RuntimeError(f"cosine_similarity(): expected common dtype to be floating point, yet common dtype is "
                           f"{_float_name(np.result_type(x1._data.dtype, x2._data.dtype))}")
    try:
        a, b = broadcast_tensors(x1, x2)
    except RuntimeError as e:
        raise RuntimeError(f"cosine_similarity(): x1 of shape {list(x1.shape)} and x2 of shape {list(x2.shape)} do "
                           f"not broadcast: {e}") from None
    if a._data.dtype != b._data.dtype:
        common = dt.FROM_NP[np.result_type(a._data.dtype, b._data.dtype)]
        a, b = a.to(common), b.to(common)
    n1 = _FloorValue.apply(norm(a, 2, dim, keepdim=True), eps)
    n2 = _FloorValue.apply(norm(b, 2, dim, keepdim=True), eps)
    return ((a / n1) * (b / n2)).sum(dim)


def normalize(input: Tensor, p: float = 2.0, dim=1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """input / max(‖input‖_p, eps) along dim (an int or a tuple)."""
    _need_tensor("normalize", "input", input, 1)
    r = input / norm(input, p, dim, keepdim=True).clamp_min(eps)
    if out is not None:
        if _capture.ACTIVE is not None:
            _capture.writing(out)
        with no_grad():
            out._data[...] = r._data
        bump_version(out)
        if MODE.fw:  # out carries r's tangents, as after an in-place write
            forward_ad.take_tangents(out, r)
        return out
    return r
