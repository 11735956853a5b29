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
from ..autograd.function import Op
from ..autograd.grad_mode import MODE, no_grad
from .arithmetic import ones_vector, sum_to
from .indexing import add_rows
from .linalg import Matmul, c_type_name, matmul
from .reduce import norm
from .shape import broadcast_tensors
from .._capture import traced

__all__ = ["linear", "bilinear", "embedding", "one_hot", "cosine_similarity", "normalize"]


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

    def backward(self, gz, x, w, b):
        if not MODE.grad:  # first-order backward: the three products straight on the arrays
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

    def backward(self, gr, gz, x):
        return (Linear.apply(x, gr, None) if self.needs(0) else None), (Matmul.apply(gz, gr) if self.needs(1) else None)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x Wᵀ + b: input (*, in_features), weight (out_features, in_features), bias (out_features) or None."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor) and (bias is None or isinstance(bias, Tensor))):
        _need_tensor("linear", "input", input, 1)
        _need_tensor("linear", "weight", weight, 2)
        _need_tensor("linear", "bias", bias, 3)  # (reached only when bias is not None)
    x, w = input._data, weight._data
    if x.dtype is not w.dtype or x.dtype.kind != "f":
        if x.dtype != w.dtype:
            raise RuntimeError(f"linear(): expected input and weight to have the same dtype, but got: "
                               f"{c_type_name(x)} != {c_type_name(w)}; convert one with .to(dtype)")
        if x.dtype.kind != "f":
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
    padding_idx; each divided by the row's count in idx when scale_grad_by_freq)."""

    saves_inputs = False

    def forward(self, w, idx, padding_idx, scale):
        self.idx, self.n, self.pad, self.scale = idx, w.shape[0], padding_idx, scale
        return w[idx]

    def backward(self, gz):
        return EmbeddingBackward.apply(gz, self.idx, self.n, self.pad, self.scale), None, None, None


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
    sparse: accepted for compatibility; ember has no sparse tensors, so the gradient is dense (same values).
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
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx.min() if idx.min() < 0 else idx.max()
        raise IndexError(f"embedding(): index out of range in self: index {int(bad)} for a weight of {n} rows "
                         f"(valid indices 0..{n - 1})")
    if max_norm is not None:
        _renorm_rows(weight, idx, float(max_norm), float(norm_type))
    return Embedding.apply(weight, idx, padding_idx, bool(scale_grad_by_freq))


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
    cosine_similarity outside autograd, and this keeps both its values and its gradients."""

    saves_inputs = False

    def forward(self, x, eps):
        return np.maximum(x, x.dtype.type(eps))

    def backward(self, gz):
        return gz, None


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Σ (x1/‖x1‖)(x2/‖x2‖) along dim, each norm floored at eps; x1 and x2 broadcast to a common shape."""
    _need_tensor("cosine_similarity", "x1", x1, 1)
    _need_tensor("cosine_similarity", "x2", x2, 2)
    if x1._data.dtype.kind != "f" and x2._data.dtype.kind != "f":
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
        return out
    return r
