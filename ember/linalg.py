"""`ember.linalg`: PyTorch's `torch.linalg` namespace.

The ops (their forward, gradients, checks and errors) live in ember/ops/linalg_ext.py and ember/ops/linalg.py
(matmul); the functions that PyTorch also has at the top level (torch.det, torch.matrix_exp, ...) are bound from
there. This module adds the torch.linalg versions of the names whose top-level twin differs (linalg.svd returns
Vh where torch.svd returns V, linalg.cross defaults to dim=-1, linalg.cholesky names itself in its errors, ...)
and the functions that only torch.linalg has, built from those ops: norms, cond, matrix_rank, tensorinv,
tensorsolve, vander, vecdot.

The one deviation from PyTorch: ember has no complex dtype, so `eig` and `eigvals` return real tensors when every
eigenvalue is real and raise a RuntimeError saying that the result is complex otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from ._tensor import Tensor, normalize_dim
from .ops import reduce
from .ops.arithmetic import where
from .ops.linalg import matmul
from .ops.linalg_ext import (_INT64, SVD, EigvalsH, Inv, LinAlgError, SlogDet, SVDVals, _cholesky, _const, _cross,
                             _floating, _int_arg, _lu_solve, _lu_solve_args, _matrices, _no_grad, _number, _qr,
                             _same_dtype, _tensor, _tname, _tolerances, _value, cholesky_ex, det, eig, eigh, eigvals,
                             eigvalsh, inv, inv_ex, lstsq, lu, lu_factor, lu_factor_ex, matrix_exp, matrix_power,
                             multi_dot, pinv, solve, solve_ex, solve_triangular, svdvals)
from .ops.linalg_ext import diagonal as _diagonal
from .ops.reduce import return_types
from .ops.shape import cat, movedim

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp",
           "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]


# ---------------------------------------------------------------------- the torch.linalg twins of top-level names
def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """torch.linalg.cholesky: L (lower triangular, positive diagonal) with A = L Lᵀ, from A's lower triangle
    (upper=True: U = Lᵀ with A = Uᵀ U, from A's upper triangle). Raises LinAlgError naming the leading minor
    that is not positive-definite."""
    A = _matrices(A, "linalg.cholesky", square=True)
    return _cholesky(A, bool(upper), "linalg.cholesky")


def slogdet(A: Tensor) -> tuple:
    """torch.linalg.slogdet: (sign, log|det A|) as `return_types.linalg_slogdet`."""
    A = _matrices(A, "linalg.slogdet", square=True)
    return return_types.linalg_slogdet(*SlogDet.apply(A))


def qr(A: Tensor, mode: str = "reduced") -> tuple:
    """torch.linalg.qr: (Q, R) as `return_types.linalg_qr`, A = QR with orthonormal columns of Q and upper
    triangular R; mode 'reduced' (k = min(m, n) columns), 'complete' (Q square) or 'r' (R only; Q empty)."""
    return return_types.linalg_qr(*_qr(A, mode, "linalg.qr"))


def svd(A: Tensor, full_matrices: bool = True, *, driver=None) -> tuple:
    """torch.linalg.svd: (U, S, Vh) as `return_types.linalg_svd` with A = U diag(S) Vh, S descending
    (full_matrices=False: k = min(m, n) singular vectors). `driver` is accepted (CUDA-only in PyTorch)."""
    A = _matrices(A, "linalg.svd")
    return return_types.linalg_svd(*SVD.apply(A, bool(full_matrices)))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """torch.linalg.lu_solve: X with AX = B (left=False: XA = B; adjoint: Aᵀ in place of A) from lu_factor's
    (LU, pivots). Differentiable in LU and B."""
    LU, pivots, B = _lu_solve_args(LU, pivots, B, "linalg.lu_solve", left)
    return _lu_solve(LU, pivots, B, bool(left), bool(adjoint))


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """torch.linalg.cross: the cross product along `dim` (size 3); other dims broadcast."""
    return _cross(_tensor(input, "linalg.cross", "input"), _tensor(other, "linalg.cross", "other"), dim,
                  "linalg.cross")


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch.linalg.diagonal: diagonal() with the matrices in the last two dims by default."""
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """Σ x·y along `dim` (x and y broadcast)."""
    fn = "linalg.vecdot"
    x, y = _tensor(x, fn, "x"), _tensor(y, fn, "y")
    _floating(x, fn)
    _same_dtype(fn, x, y, ("x", "y"))
    return reduce.sum(x * y, dim)


# ---------------------------------------------------------------------- norms
def _norm_input(x: Tensor, fn: str, dtype) -> Tensor:
    _floating(x, fn)
    if dtype is not None:
        target = dt.as_dtype(dtype)
        if np.dtype(dt.np_dtype(target)).itemsize < x._data.dtype.itemsize:
            raise RuntimeError(f"{fn}: the dtype of the input ({_tname(x)}) should be convertible without narrowing to "
                               f"the specified dtype ({_tname(np.dtype(dt.np_dtype(target)))})")
        x = x.to(target)
    return x


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """(Σ|x|^ord)^(1/ord) over `dim` (all elements when None); ord ±inf: max/min |x|, 0: number of nonzeros.
    The gradient at 0 is 0 (PyTorch's subgradient); ties of ±inf share it evenly."""
    x = _tensor(x, "linalg.vector_norm", "x")
    if not _number(ord):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
    x = _norm_input(x, "linalg.vector_norm", dtype)
    ord = float(ord)
    axes = reduce._axes(dim, x._data.ndim, "linalg.vector_norm")
    if (ord < 0 or math.isinf(ord)) and any(x.shape[a] == 0 for a in axes):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because the "
                               f"operation does not have an identity")
    return reduce.norm(x, ord, tuple(axes), keepdim)


_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """Matrix norms over the two dims `dim`: 'fro' (√Σa²), 'nuc' (Σσ), ±2 (max/min σ), ±1 (max/min column sum of
    |a|), ±inf (max/min row sum of |a|). Gradients as the compositions (svdvals, abs, sum, amax/amin) give."""
    fn = "linalg.matrix_norm"
    A = _matrices(A, fn, floating=False)
    if not (ord in _MATRIX_ORDS and (isinstance(ord, str) or _number(ord))):
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    A = _norm_input(A, fn, dtype)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {dim}")
    nd = A._data.ndim
    d1, d2 = normalize_dim(dim[0], nd, fn), normalize_dim(dim[1], nd, fn)
    if d1 == d2:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return reduce.norm(A, 2.0, (d1, d2), keepdim)
    if A.shape[d1] == 0 or A.shape[d2] == 0:  # (PyTorch: 0 for an empty matrix, whatever the order)
        return reduce.sum(A.abs(), (d1, d2), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(movedim(A, (d1, d2), (-2, -1)))
        r = reduce.sum(s, -1) if ord == "nuc" else (reduce.amax(s, -1) if ord == 2 else reduce.amin(s, -1))
        if keepdim:
            for d in sorted((d1, d2)):
                r = r.unsqueeze(d)
        return r
    # ±1: the max/min over columns (d2) of the sums down a column (over d1); ±inf: rows and columns swapped
    inner, outer = (d1, d2) if abs(ord) == 1 else (d2, d1)
    sums = reduce.sum(A.abs(), inner, keepdim=True)
    r = reduce.amax(sums, outer, keepdim=True) if ord > 0 else reduce.amin(sums, outer, keepdim=True)
    return r if keepdim else r.squeeze((d1, d2))


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """torch.linalg.norm: with `dim` an int or 1-tuple a vector norm, a 2-tuple a matrix norm (a string ord: a
    matrix norm); without `dim`, the 2-norm of all elements when ord is None, else the vector norm of a 1-D A or
    the matrix norm of a 2-D A."""
    fn = "linalg.norm"
    A = _tensor(A, fn, "A")
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype=dtype)
        if A._data.ndim not in (1, 2):
            raise RuntimeError(f"{fn}: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                               f"{A._data.ndim}D.")
        dim = (-2, -1) if A._data.ndim == 2 or isinstance(ord, str) else None
        if dim is None:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if isinstance(ord, str):  # ('fro', 'nuc': matrix norms only)
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype)
    dims = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
    if len(dims) == 1:
        return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    if len(dims) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    raise RuntimeError(f"{fn}: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number ‖A‖_p ‖A⁻¹‖_p: σ_max/σ_min for p None or 2 (σ_min/σ_max for -2, any (m, n)); the
    matrix_norm orders 'fro', 'nuc', ±1, ±inf for square A (inf where A is singular)."""
    fn = "linalg.cond"
    A = _tensor(A, fn, "A")
    if A._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor must have at least 2 dimensions.")
    if not (p is None or (p in _MATRIX_ORDS and (isinstance(p, str) or _number(p)))):
        raise RuntimeError(f"{fn} got an invalid norm type: {p}")
    _floating(A, fn)
    if p in (None, 2, -2):
        s = svdvals(A)
        if s.shape[-1] == 0:
            return reduce.sum(s, -1)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}(ord={p}): A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    r = matrix_norm(A, p) * matrix_norm(Inv.apply(A, None), p)
    return where(r != r, math.inf, r)  # (NaN: a singular A)


# ---------------------------------------------------------------------- rank, tensor equations, Vandermonde matrices
def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False, tol=None) -> Tensor:
    """The number of singular values (hermitian: |eigenvalues|) above max(atol, rtol·σ_max), int64; rtol defaults
    to eps·max(m, n) unless atol > 0. `tol` (deprecated in PyTorch) is atol with rtol = 0."""
    A = _tensor(A, "linalg.matrix_rank", "A")
    if A._data.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if A._data.dtype.kind != "f" or A._data.dtype == np.float16:
        raise RuntimeError(f"linalg.matrix_rank: expected a float or double tensor, got {_tname(A)}")
    if tol is not None:
        atol, rtol = tol, 0.0
    atol_a, rtol_a = _tolerances(A, atol, rtol)
    s = _no_grad(EigvalsH, A, "L").abs() if hermitian else _no_grad(SVDVals, A)
    return _value("rank", s, atol_a, rtol_a)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of A seen as a map from its last dims to its first `ind` dims: shape A.shape[ind:] +
    A.shape[:ind], with tensordot(tensorinv(A), A, ind) the identity."""
    fn = "linalg.tensorinv"
    A = _tensor(A, fn, "A")
    ind = _int_arg(ind, fn, "ind", 2)
    if ind <= 0:
        raise RuntimeError(f"{fn}: Expected a strictly positive integer for 'ind', but got {ind}")
    lead, rest = A.shape[:ind], A.shape[ind:]
    if math.prod(lead) != math.prod(rest) or ind > A._data.ndim:
        raise RuntimeError(f"{fn}: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(rest)} != {math.prod(lead)}")
    n = math.prod(lead)
    return inv(A.reshape(n, n)).reshape(rest + lead)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B; `dims`: dims of A moved to the end first. X has the shape of A's
    dims after B's."""
    fn = "linalg.tensorsolve"
    A, B = _tensor(A, fn, "A"), _tensor(B, fn, "B")
    if dims is not None:
        ds = [normalize_dim(d, A._data.ndim, fn) for d in (dims if isinstance(dims, (tuple, list)) else (dims,))]
        A = movedim(A, ds, list(range(A._data.ndim - len(ds), A._data.ndim)))
    k = B._data.ndim
    lead, rest = A.shape[:k], A.shape[k:]
    if lead != B.shape or math.prod(lead) != math.prod(rest):
        raise RuntimeError(f"{fn}: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != {math.prod(lead)} "
                           f"(A {list(A.shape)}, B {list(B.shape)})")
    n = math.prod(lead)
    return solve(A.reshape(n, n), B.reshape(n)).reshape(rest)


def vander(x: Tensor, N=None) -> Tensor:
    """The Vandermonde matrix [x⁰, x¹, ..., x^(N-1)] along a new last dim (N defaults to x's last size)."""
    fn = "linalg.vander"
    x = _tensor(x, fn, "x")
    if x._data.dtype.kind == "b":
        raise RuntimeError(f"{fn} supports floating point, complex, and integer tensors, but got Bool")
    if x._data.ndim == 0:
        raise RuntimeError(f"{fn}: x must have at least 1 dimension, got a 0-d tensor")
    n = x.shape[-1] if N is None else _int_arg(N, fn, "N", 2)
    if n <= 1:
        raise RuntimeError(f"{fn}: N must be greater than 1, got {n}")
    ones = _const(np.ones(x.shape + (1,), x._data.dtype if x._data.dtype.kind == "f" else _INT64))
    powers = reduce.cumprod(x.unsqueeze(-1).expand(x.shape + (n - 1,)), -1)
    return cat([ones, powers.to(ones.dtype)], -1)
