"""Linear algebra beyond products: factorizations, solvers, inverses, determinants, spectral decompositions,
matrix functions, norms, distances, diagonals and the classic names (det, inverse, svd, qr, cdist, kron, ...).

The top-level functions and Tensor methods (`torch.det`, `torch.svd`, `Tensor.cholesky_solve`, ...) are bound
from here; `ember.linalg` (ember/linalg.py) is the `torch.linalg` namespace over these ops, with the functions
only torch.linalg has (norms, cond, matrix_rank, ...).

Every matrix function works on the last two dims and broadcasts the leading (batch) dims, as PyTorch does.
A forward is one of NumPy's batched LAPACK routines (np.linalg.inv, solve, cholesky, qr, svd, eigh, eig, det,
slogdet) on the whole batch. NumPy has no LU and no triangular solve: those are elimination and substitution
vectorized over the batch (`_getrf`, `_solve_upper`), or SciPy's LAPACK where it is installed and faster
(`_lu_arrays`, `_solve_triangular`). A backward is the standard closed form written with ember ops, e.g. for
Z = A⁻¹: dA = -Zᵀ gZ Zᵀ, for X = A⁻¹B: dB = A⁻ᵀ gX and dA = -dB Xᵀ, so that double backward works.
Results that are decompositions (qr, svd, eigh, eig) are one node with several outputs; backward reads
them as graph tensors (`_outputs`) so that their own derivatives are taken into account. A forward derivative
(`jvp`) is the matching perturbation formula, also with ember ops: d(A⁻¹) = -A⁻¹ dA A⁻¹, d det A =
det A·tr(A⁻¹dA), dL = L Φ(L⁻¹ dA L⁻ᵀ) for Cholesky, the QR, SVD, eigh, eig and LU perturbations, exp(A)'s
from the block matrix [[A, dA], [0, A]]; PyTorch's conventions throughout (the whole tangent dA is used even
where the forward reads one triangle of A; the extra singular vectors of full_matrices get zero tangents).

Failures are PyTorch's: a singular or non-positive-definite input raises `LinAlgError` (a RuntimeError)
naming the function, the batch element and the failing pivot, found from an LU or Cholesky factorization
vectorized over the batch (`_getrf`, `_cholesky_partial`), never from a loop over the batch.

One deviation: ember has no complex dtype, so `eig`/`eigvals` return real tensors when every eigenvalue is
real and raise a RuntimeError (saying that the result is complex) otherwise.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Slot, Tensor, make, normalize_dim
from ..autograd import forward_ad
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from . import reduce
from .arithmetic import sum_to, where
from .indexing import index_select, take_along_dim
from .inplace import as_view
from .linalg import Matmul, addmm, c_type_name, mv, outer, tensordot
from .reduce import return_types
from .registry import Exports
from .shape import cat

__all__ = ["det", "logdet", "slogdet", "inverse", "pinverse", "trace", "diag", "diag_embed", "diagonal", "diagflat",
           "kron", "cdist", "pdist", "dist", "cross", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd",
           "matrix_power", "matrix_exp", "chain_matmul", "inner", "vdot", "addmv", "addr", "addbmm", "triangular_solve",
           "lu_solve"]
_METHODS = ["det", "logdet", "slogdet", "inverse", "pinverse", "trace", "diag", "diag_embed", "diagonal", "diagflat",
            "kron", "dist", "cross", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd", "matrix_power",
            "matrix_exp", "inner", "vdot", "addmv", "addr", "addbmm", "triangular_solve", "lu_solve"]

_new = object.__new__


class LinAlgError(RuntimeError):
    """A linear-algebra routine could not complete on its input (a singular or non-positive-definite matrix)."""


_named = reduce.register_return_type  # ember.return_types.<name>


_SLOGDET = _named("slogdet", ("sign", "logabsdet"))
_INV_EX = _named("linalg_inv_ex", ("inverse", "info"))
_CHOLESKY_EX = _named("linalg_cholesky_ex", ("L", "info"))
_SOLVE_EX = _named("linalg_solve_ex", ("result", "info"))
_QR = _named("qr", ("Q", "R"))
_SVD = _named("svd", ("U", "S", "V"))
_EIG = _named("linalg_eig", ("eigenvalues", "eigenvectors"))
_EIGH = _named("linalg_eigh", ("eigenvalues", "eigenvectors"))
_LSTSQ = _named("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_LU_FACTOR = _named("linalg_lu_factor", ("LU", "pivots"))
_LU_FACTOR_EX = _named("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_LU = _named("linalg_lu", ("P", "L", "U"))
_TRIANGULAR_SOLVE = _named("triangular_solve", ("solution", "cloned_coefficient"))
for _name, _fields in (("linalg_slogdet", ("sign", "logabsdet")), ("linalg_qr", ("Q", "R")),
                       ("linalg_svd", ("U", "S", "Vh"))):
    _named(_name, _fields)  # (returned by ember/linalg.py as return_types.<name>)

# PyTorch's scalar type names, used in its dtype messages
_TNAME = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
          "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


# ---------------------------------------------------------------------- argument checks
def _tname(t) -> str:
    d = t._data.dtype if isinstance(t, Tensor) else t
    return _TNAME.get(d.name, d.name)


def _tensor(x, fn: str, arg: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    return x


def _floating(x: Tensor, fn: str) -> None:
    """PyTorch's linalg kernels take float32/float64 (complex too; ember has none)."""
    d = x._data.dtype
    if d == np.float16:
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got Half")
    if d.kind != "f":
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got {_tname(d)}")


def _matrices(x, fn: str, arg: str = "A", square: bool = False, floating: bool = True) -> Tensor:
    """x checked as a (batch of) matrices: at least 2-D, square when asked, float32/float64 when asked."""
    x = _tensor(x, fn, arg)
    if x._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor {arg} must have at least 2 dimensions.")
    if square and x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{fn}: {arg} must be batches of square matrices, but they are {x.shape[-2]} by "
                           f"{x.shape[-1]} matrices")
    if floating:
        _floating(x, fn)
    return x


def _same_dtype(fn: str, a: Tensor, b: Tensor, names=("A", "B")) -> None:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"{fn}: Expected {names[0]} and {names[1]} to have the same dtype, but found {names[0]} of "
                           f"type {_tname(a)} and {names[1]} of type {_tname(b)} instead")


def _batch_shape(fn: str, *shapes) -> tuple:
    """The broadcast of batch shapes, or PyTorch's broadcasting message naming the function."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        pass
    n = max(len(s) for s in shapes)
    a, b = ((1,) * (n - len(s)) + tuple(s) for s in shapes[:2])
    d = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y and x != 1 and y != 1)
    raise RuntimeError(f"{fn}: the batch dimensions {list(shapes[0])} and {list(shapes[1])} cannot be broadcast: "
                       f"The size of tensor a ({a[d]}) must match the size of tensor b ({b[d]}) at non-singleton "
                       f"dimension {d}")


def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:
    """PyTorch's rule for B as a (batch of) vector(s) in solve/lstsq: 1-D, or A's shape without its last dim."""
    return B._data.ndim == 1 or (B._data.ndim == A._data.ndim - 1 and B.shape == A.shape[:-1])


def _int_arg(v, fn: str, arg: str, pos: int) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be int, not {type(v).__name__}")
    return v.__index__()


def _first_failure(info: np.ndarray, batched: bool) -> tuple:
    """(prefix, info value) of the first failing matrix: PyTorch's "(Batch element k): " for batched inputs."""
    flat = info.reshape(-1)
    k = int(np.flatnonzero(flat)[0])
    return (f"(Batch element {k}): " if batched else ""), int(flat[k])


def _singular(fn: str, info: np.ndarray, batched: bool) -> LinAlgError:
    if not info.any():  # (LAPACK's pivot was exactly zero where elimination's rounding left a tiny one)
        return LinAlgError(f"{fn}: The inversion could not be completed because the input matrix is singular.")
    prefix, i = _first_failure(info, batched)
    return LinAlgError(f"{fn}: {prefix}The diagonal element {i} is zero, the inversion could not be completed because "
                       f"the input matrix is singular.")


def _not_pd(fn: str, info: np.ndarray, batched: bool) -> LinAlgError:
    prefix, i = _first_failure(info, batched)
    return LinAlgError(f"{fn}: {prefix}The factorization could not be completed because the input is not "
                       f"positive-definite (the leading minor of order {i} is not positive-definite).")


# ---------------------------------------------------------------------- array-level factorizations
def _getrf(a: np.ndarray) -> tuple:
    """(LU, pivots, info) of a stack of matrices (B, m, n) by Gaussian elimination with partial pivoting, one
    column at a time over the whole batch: LAPACK getrf's result (pivots 1-based, info the first zero pivot)."""
    A = a.astype(a.dtype, copy=True)
    B, m, n = A.shape
    k = min(m, n)
    rows = np.arange(B)
    piv = np.empty((B, k), _INT32)
    info = np.zeros(B, _INT32)
    for j in range(k):
        p = j + np.argmax(np.abs(A[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        top = A[rows, j].copy()
        A[rows, j] = A[rows, p]
        A[rows, p] = top
        d = A[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        # a zero pivot leaves its column as it is (it is zero below the pivot anyway), as LAPACK does
        A[:, j + 1:, j] /= np.where(zero, 1, d)[:, None]
        A[:, j + 1:, j + 1:] -= A[:, j + 1:, j, None] * A[:, j, None, j + 1:]
    return A, piv, info


def _lu_arrays(a: np.ndarray) -> tuple:
    """(LU, pivots int32 1-based, info int32) of every matrix in a (..., m, n), as LAPACK getrf.

    NumPy exposes no LU, so small matrices are eliminated column by column over the whole batch (`_getrf`);
    for larger ones (where a matrix's O(n³) work dwarfs a call's overhead) SciPy's getrf runs per matrix
    when SciPy is installed."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    flat = a.reshape((-1, m, n))
    getrf = _scipy_getrf(a.dtype) if min(m, n) >= 48 else None
    if getrf is None:
        lu, piv, info = _getrf(flat)
    else:
        lu = np.empty_like(flat)
        piv = np.empty((flat.shape[0], min(m, n)), _INT32)
        info = np.zeros(flat.shape[0], _INT32)
        for i in range(flat.shape[0]):  # (large matrices only: see above)
            lu[i], p, inf = getrf(flat[i])
            piv[i] = p + 1
            info[i] = inf if inf > 0 else 0
    return lu.reshape(a.shape), piv.reshape(batch + (min(m, n),)), info.reshape(batch)


def _scipy_getrf(dtype):
    try:
        from scipy.linalg import lapack
    except ImportError:
        return None
    return lapack.dgetrf if dtype == np.float64 else lapack.sgetrf


def _scipy_trsm():
    try:
        from scipy.linalg import solve_triangular
    except ImportError:
        return None
    return solve_triangular


def _lu_info(a: np.ndarray) -> np.ndarray:
    """The first zero pivot (1-based; 0: none) of each square matrix's LU factorization (batch shape), where NumPy's
    LAPACK call refused a singular matrix: by elimination over the whole batch, or, should its rounding find no
    exact zero where LAPACK's blocked factorization did, by `_lu_arrays` (LAPACK's own getrf, with SciPy)."""
    n = a.shape[-1]
    info = _getrf(a.reshape((-1, n, n)))[2].reshape(a.shape[:-2])
    return info if info.any() else _lu_arrays(a)[2]


def _cholesky_partial(a: np.ndarray) -> tuple:
    """(L, info) of every matrix of a (..., n, n) from its lower triangle, column by column over the whole batch as
    LAPACK potf2 does: where the leading minor of order j is not positive-definite, info = j, L[j, j] keeps
    a_jj - Σ_k l_jk² and the columns after it keep a's values."""
    n = a.shape[-1]
    L = np.tril(a).reshape((-1, n, n))
    info = np.zeros(L.shape[0], _INT32)
    active = np.ones(L.shape[0], bool)
    for j in range(n):
        row = L[:, j, :j]
        d = L[:, j, j] - np.einsum("bk,bk->b", row, row)
        fail = active & ~(d > 0)  # (NaN fails too)
        info[fail] = j + 1
        active &= ~fail
        r = np.sqrt(np.where(active, d, 1))
        L[:, j, j] = np.where(active, r, np.where(fail, d, L[:, j, j]))
        col = (L[:, j + 1:, j] - np.einsum("bik,bk->bi", L[:, j + 1:, :j], row)) / r[:, None]
        L[:, j + 1:, j] = np.where(active[:, None], col, L[:, j + 1:, j])
    return L.reshape(a.shape), info.reshape(a.shape[:-2])


def _solve_upper(u: np.ndarray, b: np.ndarray) -> np.ndarray:
    """U⁻¹B by back substitution, a row at a time over the whole batch (a zero on the diagonal gives inf/NaN, as
    LAPACK's trsm)."""
    shape = np.broadcast_shapes(u.shape[:-2], b.shape[:-2])
    u = np.broadcast_to(u, shape + u.shape[-2:])
    x = np.array(np.broadcast_to(b, shape + b.shape[-2:]), dtype=np.result_type(u, b))
    n = u.shape[-1]
    for i in range(n - 1, -1, -1):
        if i + 1 < n:
            x[..., i, :] -= np.einsum("...k,...kj->...j", u[..., i, i + 1:], x[..., i + 1:, :])
        x[..., i, :] /= u[..., i, i, None]
    return x


_SUBSTITUTION_BATCH = 16  # from this many matrices on, substitution over the batch beats np.linalg.solve (measured)


def _solve_triangular(a: np.ndarray, b: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    """A⁻¹B reading only A's upper (lower) triangle, with ones on the diagonal when `unit`.

    A 2-D system goes to SciPy's trsm when installed. NumPy has no batched triangular solve: a batch of 16 or
    more systems is solved by substitution over the whole batch (n steps; 2-3x faster than np.linalg.solve's
    batched LU, whatever n), fewer by np.linalg.solve given the triangle as an upper triangular matrix (a lower
    one with rows and columns reversed), whose partial pivoting then never swaps rows: its LU is the triangle
    itself and the result is back substitution. A zero on the diagonal gives inf/NaN, as LAPACK's trsm."""
    trsm = _scipy_trsm() if a.ndim == 2 and b.ndim == 2 else None
    if trsm is not None:
        return trsm(a, b, lower=not upper, unit_diagonal=unit, check_finite=False)
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        np.einsum("...ii->...i", t)[...] = 1
    if not upper:
        t, b = t[..., ::-1, ::-1], b[..., ::-1, :]
    if math.prod(np.broadcast_shapes(t.shape[:-2], b.shape[:-2])) >= _SUBSTITUTION_BATCH:
        x = _solve_upper(t, b)
    else:
        try:
            x = np.linalg.solve(t, b)
        except np.linalg.LinAlgError:
            x = _solve_upper(t, b)
    return x if upper else x[..., ::-1, :]


# Padé approximants of exp of degree m: coefficients b_0..b_m and the largest 1-norm each is accurate for in
# double precision (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005)
_PADE = {
    3: (1.495585217958292e-2, (120., 60., 12., 1.)),
    5: (2.539398330063230e-1, (30240., 15120., 3360., 420., 30., 1.)),
    7: (9.504178996162932e-1, (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)),
    9: (2.097847961257068e0, (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
                              3960., 90., 1.)),
    13: (5.371920351148152e0, (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
                               129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
                               40840800., 960960., 16380., 182., 1.)),
}


def _expm(a: np.ndarray) -> np.ndarray:
    """exp(A) of every matrix in a by scaling and squaring with a Padé approximant (Al-Mohy & Higham, 2009).

    The degree is chosen from η = max(‖A⁴‖^¼, ‖A⁶‖^⅙) (1-norms; a bound on ‖Aᵏ‖^(1/k) for the k that matter, often
    far below ‖A‖ for non-normal A): the lowest degree accurate for the largest η of the batch. Past degree 13's
    range each matrix is scaled by 2^-s (s per matrix) and squared back s times (a squaring masked per matrix)."""
    n = a.shape[-1]
    if a.size == 0:
        return a.copy()
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    with np.errstate(divide="ignore", over="ignore"):
        eta = np.maximum(np.abs(a4).sum(axis=-2).max(axis=-1) ** 0.25, np.abs(a6).sum(axis=-2).max(axis=-1) ** (1 / 6))
    m = next((d for d in (3, 5, 7, 9) if eta.max() <= _PADE[d][0]), 13)
    s = np.zeros(eta.shape, np.int64)
    if m == 13:
        with np.errstate(divide="ignore"):
            s = np.maximum(0, np.ceil(np.log2(eta / _PADE[13][0]))).astype(np.int64)
        if s.any():
            f = np.ldexp(1.0, -s).astype(a.dtype)[..., None, None]
            a, a2, a4, a6 = a * f, a2 * f ** 2, a4 * f ** 4, a6 * f ** 6
    b = _PADE[m][1]
    eye = np.eye(n, dtype=a.dtype)
    if m < 13:
        powers = [eye, a2, a4, a6, a4 @ a4][:m // 2 + 1]
        u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
        v = sum(b[2 * k] * p for k, p in enumerate(powers))
    else:
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for i in range(int(s.max(initial=0))):
        sq = r @ r
        r = np.where((s > i)[..., None, None], sq, r) if s.ndim else sq
    return r


def _perm_from_pivots(piv: np.ndarray, m: int) -> np.ndarray:
    """The row order perm (…, m) with P⁻¹B = B[perm] for LAPACK's sequential row swaps (pivots 1-based)."""
    perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
    rows = np.indices(piv.shape[:-1])
    for j in range(piv.shape[-1]):
        p = piv[..., j].astype(np.intp) - 1
        pj = perm[..., j].copy()
        perm[..., j] = perm[(*rows, p)]
        perm[(*rows, p)] = pj
    return perm


# ---------------------------------------------------------------------- non-differentiable results
def _inv_info(a, z):
    """info of inv_ex/solve_ex: the first zero pivot of each matrix whose result is not finite."""
    info = np.zeros(a.shape[:-2], _INT32)
    bad = ~np.isfinite(z).all(axis=(-2, -1))
    if bad.any():
        info[bad] = _lu_info(np.broadcast_to(a, bad.shape + a.shape[-2:])[bad])
    return info


def _chol_info(L):
    """info of cholesky_ex: the order of the first leading minor that is not positive-definite (0: none)."""
    bad = ~(np.diagonal(L, axis1=-2, axis2=-1) > 0)  # (NaN is not positive either)
    first = np.argmax(bad, axis=-1) + 1 if L.shape[-1] else np.zeros(L.shape[:-2], _INT64)
    return np.where(bad.any(-1), first, 0).astype(_INT32)


def _rank(s, atol, rtol):
    """The number of singular values above max(atol, rtol·σ_max) (s sorted descending or any order)."""
    smax = s.max(axis=-1, initial=0)
    tol = np.maximum(atol, rtol * smax)
    return (s > tol[..., None]).sum(axis=-1, dtype=_INT64)


def _pivots_to_p(piv, m, dtype):
    """The permutation matrix P of A = P L U from LAPACK pivots."""
    perm = _perm_from_pivots(piv, m)
    p = np.zeros(piv.shape[:-1] + (m, m), dtype)
    np.put_along_axis(p, perm[..., None, :], 1, axis=-2)
    return p


def _unperm(piv, m):
    """The row order that undoes `_perm_from_pivots` (P X = X[unperm])."""
    return np.argsort(_perm_from_pivots(piv, m), axis=-1)


_RULES = {"inv_info": _inv_info, "chol_info": _chol_info, "rank": _rank, "perm": _perm_from_pivots,
          "unperm": _unperm, "p_matrix": _pivots_to_p}


class Value(Op):
    """A non-differentiable result computed from arrays by a named rule (an info code, a rank, a permutation)."""

    saves_inputs = False

    def forward(self, *args, rule):
        return np.asarray(_RULES[rule](*args))

    def backward(self, gz):
        raise RuntimeError("Value: the result is not differentiable")  # never recorded (applied with grad mode off)


def _detached(args: tuple) -> tuple:
    """args with their tensors detached: what is computed from them is not differentiable, so it gets neither a
    graph node nor a tangent (also where lazy mode runs it later, under the grad mode or forward AD of then)."""
    return tuple([a.detach() if isinstance(a, Tensor) else a for a in args])


def _value(rule: str, *args) -> Tensor:
    """An info code, a rank or a permutation (never differentiable) computed by `rule` (`_RULES`)."""
    args = _detached(args)
    return dispatch(_new(Value), args, tuple(a._data if isinstance(a, Tensor) else a for a in args), {"rule": rule})


def _no_grad(cls, *args) -> Tensor:
    """cls applied without derivatives: the cheaper forward of a function whose result needs no gradient."""
    return cls.apply(*_detached(args))


def _wants_grad(*ts) -> bool:
    """Whether a result computed from ts needs a derivative: a gradient (reverse mode) or a tangent (forward)."""
    if MODE.grad and any(isinstance(t, Tensor) and t._requires_grad for t in ts):
        return True
    return bool(MODE.fw) and any(forward_ad.is_dual(t) for t in ts)


# ---------------------------------------------------------------------- helpers for backward (ember ops)
def _outputs(node: Op, arrays: tuple, inputs: tuple) -> tuple:
    """The first outputs of a node with several outputs (their arrays) as graph tensors, so that a derivative taken
    through them (create_graph=True) includes the outputs' own dependence on the input. Forward over reverse (a
    backward run under forward AD, its input dual): the op applied again to its inputs, whose outputs carry their
    tangents too (the node then saved its inputs: `_keep_inputs`)."""
    if inputs and MODE.fw and any(forward_ad.is_dual(a) for a in inputs):
        return type(node).apply(*inputs)[:len(arrays)]
    return tuple(make(a, True, Slot(node, i)) for i, a in enumerate(arrays))


def _keep_inputs(node: Op) -> None:
    """In `forward` of a node that reads its outputs in backward (`_outputs`): under forward AD, keep its inputs
    for a backward run under forward AD too."""
    if MODE.fw:
        node.saves_inputs = True


def _const(a) -> Tensor:
    return make(np.asarray(a))


def _eye(n: int, like: Tensor) -> Tensor:
    return _const(np.eye(n, dtype=like._data.dtype))


def _off_diagonal_inverse(e: Tensor) -> Tensor:
    """F with F_ij = 1/e_ij off the diagonal and 0 on it (e's diagonal replaced by 1 first, so no 1/0 reaches
    the graph: a derivative of F stays finite there)."""
    n = e.shape[-1]
    mask = _const(np.eye(n, dtype=bool))
    return where(mask, 0.0, 1.0 / where(mask, 1.0, e))


def _zeros_like(t: Tensor) -> Tensor:
    return _const(np.zeros(t.shape, t._data.dtype))


# ---------------------------------------------------------------------- diagonals
class Diagonal(Op):
    """z = the diagonal `offset` of x over dims (d1, d2), appended as the last dim (a view of x unless `copy`);
    dz/dx = gz written onto that diagonal of zeros."""

    saves_inputs = False

    def forward(self, x, offset, d1, d2, copy):
        self.shape, self.offset, self.d1, self.d2 = x.shape, offset, d1, d2
        v = np.diagonal(x, offset, d1, d2)
        if copy:
            return v.copy()
        if x.flags.writeable:
            v.flags.writeable = True  # (NumPy's diagonal view is read-only; PyTorch's can be written through)
        return v

    def backward(self, gz):
        return DiagEmbed.apply(gz, self.shape, self.offset, self.d1, self.d2)

    def jvp(self, t, x, offset, d1, d2, copy):
        return self.reapply(*t)  # linear: the same diagonal of x'


class DiagEmbed(Op):
    """z = zeros of `shape` with g (its last dim) written on the diagonal `offset` over dims (d1, d2);
    dz/dg = that diagonal of gz."""

    saves_inputs = False

    def forward(self, g, shape, offset, d1, d2):
        self.offset, self.d1, self.d2 = offset, d1, d2
        out = np.zeros(shape, g.dtype)
        v = np.diagonal(out, offset, d1, d2)
        v.flags.writeable = True
        v[...] = g
        return out

    def backward(self, gz):
        return Diagonal.apply(gz, self.offset, self.d1, self.d2, True)

    def jvp(self, t, g, shape, offset, d1, d2):
        return self.reapply(*t)  # linear: g' on the same diagonal


def _diag_dims(ndim: int, dim1, dim2, fn: str) -> tuple:
    d1, d2 = normalize_dim(dim1, ndim, fn), normalize_dim(dim2, ndim, fn)
    if d1 == d2:
        raise RuntimeError(f"{fn}(): diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A view of the diagonal `offset` (>0 above, <0 below the main one) of the matrices over dims (dim1, dim2),
    appended as the last dim; empty when the offset lies outside the matrix."""
    x = _tensor(input, "diagonal")
    d1, d2 = _diag_dims(x._data.ndim, dim1, dim2, "diagonal")
    return as_view(Diagonal.apply(x, _int_arg(offset, "diagonal", "offset", 2), d1, d2, False), x)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (over dims dim1, dim2 of a result with one more dim) whose diagonal `offset` holds input's last
    dim and whose other entries are zero."""
    x = _tensor(input, "diag_embed")
    n = x._data.ndim + 1
    d1, d2 = _diag_dims(n, dim1, dim2, "diag_embed")
    offset = _int_arg(offset, "diag_embed", "offset", 2)
    size = x.shape[-1] + abs(offset) if x._data.ndim else 1 + abs(offset)
    rest = iter(x.shape[:-1])
    shape = tuple(size if i in (d1, d2) else next(rest) for i in range(n))
    return DiagEmbed.apply(x if x._data.ndim else x.reshape(1), shape, offset, d1, d2)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-D input: the square matrix with input on its diagonal `diagonal`; 2-D input: that diagonal (a copy)."""
    x = _tensor(input, "diag")
    k = _int_arg(diagonal, "diag", "diagonal", 2)
    if x._data.ndim == 1:
        return diag_embed(x, k, 0, 1)
    if x._data.ndim == 2:
        return Diagonal.apply(x, k, 0, 1, True)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x._data.ndim}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The square matrix with the flattened input on its diagonal `offset`."""
    x = _tensor(input, "diagflat")
    return diag_embed(x.reshape(-1), _int_arg(offset, "diagflat", "offset", 2), 0, 1)


def trace(input: Tensor) -> Tensor:
    """Σᵢ A_ii of a matrix (integer input: an int64 sum, as sum)."""
    x = _tensor(input, "trace")
    if x._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x._data.ndim}")
    if x._data.dtype.kind == "b":
        raise RuntimeError("trace: \"trace\" not implemented for 'Bool'; convert the input with .long() first")
    return reduce.sum(Diagonal.apply(x, 0, 0, 1, False))


# ---------------------------------------------------------------------- determinants
class Det(Op):
    """z = det(A) (LU);  dA = gz·adj(A)ᵀ: gz·z·A⁻ᵀ when A is invertible, else from the SVD A = U S Vᵀ:
    adj(A)ᵀ = det(U) det(V) U diag(Π_{j≠i} s_j) Vᵀ, which is the derivative at singular matrices too.
    Forward: z' = tr(adj(A) A') = z·tr(A⁻¹A') when A is invertible."""

    saves_output = True

    def forward(self, a):
        return np.asarray(np.linalg.det(a))  # (a NumPy scalar for one matrix)

    def backward(self, gz, a):
        z = self.output()
        if a.shape[-1] == 0:
            return _zeros_like(a)
        if bool((z._data != 0).all()):
            return (gz * z)[..., None, None] * Inv.apply(a, None).mT
        return gz[..., None, None] * _adjugate_t(a)

    def jvp(self, t, a):
        z = self.output()
        if a.shape[-1] == 0:
            return 0
        if bool((z._data != 0).all()):
            return z * _trace(Solve.apply(a, t[0], None))
        return reduce.sum(_adjugate_t(a) * t[0], (-2, -1))


def _adjugate_t(a: Tensor) -> Tensor:
    """adj(A)ᵀ from the SVD A = U S Vᵀ: det(U) det(V) U diag(Π_{j≠i} s_j) Vᵀ (defined at singular A too)."""
    u, s, vh = SVD.apply(a, False)
    n = s.shape[-1]
    others = reduce.prod(where(_const(np.eye(n, dtype=bool)), 1.0, s[..., None, :].expand(s.shape + (n,))), -1)
    sign = Det.apply(u) * Det.apply(vh)
    return sign[..., None, None] * ((u * others[..., None, :]) @ vh)


def _trace(x: Tensor) -> Tensor:
    """tr X of each matrix of a batch."""
    return reduce.sum(Diagonal.apply(x, 0, x.ndim - 2, x.ndim - 1, False), -1)


class SlogDet(Op):
    """(sign, log|det A|);  dA = g_logabsdet·A⁻ᵀ (the sign is piecewise constant: no gradient);
    forward: sign' = 0, log|det A|' = tr(A⁻¹A')."""

    def forward(self, a):
        sign, logabs = np.linalg.slogdet(a)
        return np.asarray(sign), np.asarray(logabs)  # (NumPy scalars for one matrix)

    def backward(self, grads, a):
        g = grads[1]
        if g is None:
            return None
        return g[..., None, None] * Inv.apply(a, None).mT

    def jvp(self, t, a):
        return 0, _trace(Solve.apply(a, t[0], None))


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix (1 for 0x0)."""
    A = _matrices(A, "linalg.det", square=True)
    return Det.apply(A)


def slogdet(A: Tensor) -> tuple:
    """(sign, log|det A|) as `return_types.slogdet`: the determinant without overflow (sign 0, -inf: singular)."""
    A = _matrices(A, "linalg.slogdet", square=True)
    return _SLOGDET(*SlogDet.apply(A))


def logdet(input: Tensor) -> Tensor:
    """log det A: NaN where det A < 0, -inf where A is singular."""
    A = _matrices(input, "logdet", square=True)
    sign, logabs = SlogDet.apply(A)
    return where(sign < 0, math.nan, logabs)


# ---------------------------------------------------------------------- inverses and solvers
class Inv(Op):
    """Z = A⁻¹;  dA = -Zᵀ gZ Zᵀ;  Z' = -Z A' Z. `fn`: the function named by the error on a singular matrix
    (None: its inverse is NaN instead, for inv_ex)."""

    saves_inputs = False
    saves_output = True

    def forward(self, a, fn):
        try:
            return np.linalg.inv(a)
        except np.linalg.LinAlgError:
            info = _lu_info(a)
            if fn is not None:
                raise _singular(fn, info, a.ndim > 2) from None
            z = np.full(a.shape, np.nan, a.dtype)
            good = info == 0
            if good.any():
                z[good] = np.linalg.inv(a[good])
            return z

    def backward(self, gz):
        zt = self.output().mT
        return -(zt @ gz @ zt), None

    def jvp(self, t, a, fn):
        z = self.output()
        return -(z @ t[0] @ z)


class Solve(Op):
    """X = A⁻¹B (B: (..., n, k); batch dims broadcast);  dB = A⁻ᵀ gX, dA = -dB Xᵀ;  X' = A⁻¹(B' − A'X).
    `fn` as for Inv."""

    saves_output = True
    reduces_grads = True

    def forward(self, a, b, fn):
        try:
            return np.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a = np.broadcast_to(a, shape + a.shape[-2:])
            info = _lu_info(a)
            if fn is not None:
                prefix = _first_failure(info, a.ndim > 2)[0] if info.any() else ""
                raise LinAlgError(f"{fn}: {prefix}The solver failed because the input matrix is singular.") from None
            x = np.full(shape + b.shape[-2:], np.nan, np.result_type(a, b))
            good = info == 0
            if good.any():
                x[good] = np.linalg.solve(a[good], np.broadcast_to(b, shape + b.shape[-2:])[good])
            return x

    def backward(self, gz, a, b, fn):
        gb = Solve.apply(a.mT, gz, None)
        ga = -(gb @ self.output().mT) if self.needs(0) else None
        return ga, gb, None

    def jvp(self, t, a, b, fn):
        return Solve.apply(a, _minus_product(t[1], t[0], self.output()), None)


class SolveTriangular(Op):
    """X = A⁻¹B for A's upper (lower) triangle, unitriangular: ones on its diagonal;  dB = A⁻ᵀ gX,
    dA = -dB Xᵀ on the triangle that was read (without the diagonal when unitriangular);
    X' = A⁻¹(B' − T(A')X), T(A') the part of A' on that triangle."""

    saves_output = True
    reduces_grads = True

    def forward(self, a, b, upper, unit):
        return _solve_triangular(a, b, upper, unit)

    def backward(self, gz, a, b, upper, unit):
        gb = SolveTriangular.apply(a.mT, gz, not upper, unit)
        ga = None
        if self.needs(0):
            g = -(gb @ self.output().mT)
            ga = g.triu(int(unit)) if upper else g.tril(-int(unit))
        return ga, gb, None, None

    def jvp(self, t, a, b, upper, unit):
        ta = t[0]
        if isinstance(ta, Tensor):
            ta = ta.triu(int(unit)) if upper else ta.tril(-int(unit))
        return SolveTriangular.apply(a, _minus_product(t[1], ta, self.output()), upper, unit)


def _minus_product(tb, ta, x: Tensor):
    """B' − A'X, either tangent possibly 0 (the right-hand side of a solve's tangent)."""
    if not isinstance(ta, Tensor):
        return tb
    return -(ta @ x) if not isinstance(tb, Tensor) else tb - ta @ x


def inv(A: Tensor) -> Tensor:
    """A⁻¹ of each square matrix; a singular one raises LinAlgError naming its zero pivot."""
    return Inv.apply(_matrices(A, "linalg.inv", square=True), "linalg.inv")


def inverse(input: Tensor) -> Tensor:
    """A⁻¹ (torch.inverse: linalg.inv)."""
    return inv(input)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple:
    """(A⁻¹, info) as `return_types.linalg_inv_ex`: info (int32, batch shape) is 0, or the 1-based index of a zero
    pivot of A's LU where A is singular (the inverse is then NaN; check_errors=True raises instead)."""
    A = _matrices(A, "linalg.inv", square=True)
    z = Inv.apply(A, "linalg.inv_ex" if check_errors else None)
    return _INV_EX(z, _value("inv_info", A, z))


def _solve_args(A, B, fn: str, left: bool) -> tuple:
    """(A, B as (..., n, k), vector case) after PyTorch's checks for AX = B (XA = B when not left)."""
    A = _matrices(A, fn, square=True)
    B = _tensor(B, fn, "B")
    _same_dtype(fn, A, B)
    vector = _is_vector_rhs(A, B)
    if vector:
        if not left:
            raise RuntimeError(f"{fn}: Vector broadcasting of the left hand side is not supported for left=False. In "
                               f"this case linalg.solve is equivalent to B / A.squeeze(-1)")
        B = B.unsqueeze(-1)
    if B._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    _batch_shape(fn, A.shape[:-2], B.shape[:-2])
    return A, B, vector


def _solve(A, B, left: bool, fn) -> Tensor:
    if left:
        return Solve.apply(A, B, fn)
    return Solve.apply(A.mT, B.mT, fn).mT


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with AX = B (left=False: XA = B) for square A; B is a (batch of) vector(s) when it is 1-D or has A's
    shape without its last dim. Batch dims broadcast; a singular A raises LinAlgError."""
    A, B2, vector = _solve_args(A, B, "linalg.solve", left)
    x = _solve(A, B2, left, "torch.linalg.solve")
    return x.squeeze(-1) if vector else x


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> tuple:
    """(X, info) as `return_types.linalg_solve_ex`; info as in inv_ex (X is NaN where A is singular)."""
    A, B2, vector = _solve_args(A, B, "linalg.solve_ex", left)
    x = _solve(A, B2, left, "linalg.solve_ex" if check_errors else None)
    info = _value("inv_info", A, x if left else x.mT)
    return _SOLVE_EX(x.squeeze(-1) if vector else x, info)


def _tri_args(A, B, fn: str, left: bool) -> tuple:
    A = _matrices(A, fn, square=True)
    B = _tensor(B, fn, "B")
    if B._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    _batch_shape(fn, A.shape[:-2], B.shape[:-2])
    if B._data.dtype != A._data.dtype:  # (PyTorch computes in A's dtype)
        B = B.to(A.dtype)
    return A, B


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """X with AX = B (left=False: XA = B) reading only A's upper (upper=True) or lower triangle; unitriangular:
    A's diagonal is taken as ones. A zero on the diagonal gives inf/NaN (no error), as in PyTorch."""
    A, B = _tri_args(A, B, "linalg.solve_triangular", left)
    if left:
        return SolveTriangular.apply(A, B, bool(upper), bool(unitriangular))
    return SolveTriangular.apply(A.mT, B.mT, not upper, bool(unitriangular)).mT


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> tuple:
    """(X, A's copy) as `return_types.triangular_solve`, X with op(A) X = b, op(A) = Aᵀ when transpose
    (deprecated in PyTorch for linalg.solve_triangular)."""
    A = _matrices(A, "triangular_solve", square=True)
    b = _tensor(b, "triangular_solve", "b")
    if b._data.ndim < 2:
        raise RuntimeError(f"triangular_solve: The input tensor b must have at least 2 dimensions.")
    if b.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for triangular_solve: each A matrix is {A.shape[-2]} by "
                           f"{A.shape[-1]} but each b matrix is {b.shape[-2]} by {b.shape[-1]}")
    _same_dtype("triangular_solve", b, A, ("b", "A"))
    _batch_shape("triangular_solve", A.shape[:-2], b.shape[:-2])
    T = A.mT if transpose else A
    x = SolveTriangular.apply(T, b, bool(upper) != bool(transpose), bool(unitriangular))
    return _TRIANGULAR_SOLVE(x, A.expand(x.shape[:-2] + A.shape[-2:]).clone())  # (A broadcast to the batch)


# ---------------------------------------------------------------------- Cholesky
class Cholesky(Op):
    """L with A = L Lᵀ from A's lower triangle (upper: U = Lᵀ for the L of Aᵀ, so that A's upper triangle is the
    one read, as LAPACK's uplo='U');  with Φ(X) = X's lower triangle, diagonal halved, S = L⁻ᵀ Φ(Lᵀ gL) L⁻¹ and
    dA = (S + Sᵀ)/2;  L' = L Φ(L⁻¹ A' L⁻ᵀ) and U' = L'ᵀ, from the whole A' as given (PyTorch's convention).
    `fn` as for Inv (None: the partial factor of LAPACK)."""

    saves_inputs = False
    saves_output = True

    def forward(self, a, fn, upper):
        self.upper = upper
        if upper:
            a = np.swapaxes(a, -1, -2)
        try:
            L = np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            L, info = _cholesky_partial(a)
            if fn is not None:
                raise _not_pd(fn, info, a.ndim > 2) from None
            good = info == 0
            if good.any():
                L[good] = np.linalg.cholesky(a[good])
        return np.swapaxes(L, -1, -2) if upper else L

    def backward(self, gL):
        L = self.output()
        if self.upper:
            L, gL = L.mT, gL.mT
        s = SolveTriangular.apply(L.mT, _phi(L.mT @ gL), True, False)  # L⁻ᵀ Φ
        s = SolveTriangular.apply(L.mT, s.mT, True, False).mT  # (L⁻ᵀ Φ) L⁻¹
        return 0.5 * (s + s.mT), None, None  # (symmetric: the same for A and Aᵀ)

    def jvp(self, t, a, fn, upper):
        L = self.output().mT if upper else self.output()
        x = SolveTriangular.apply(L, t[0], False, False)  # L⁻¹ A'
        x = SolveTriangular.apply(L, x.mT, False, False).mT  # (L⁻¹ A') L⁻ᵀ
        dl = L @ _phi(x)
        return dl.mT if upper else dl


def _phi(x: Tensor) -> Tensor:
    """Φ(X): X's lower triangle with its diagonal halved."""
    return x.tril(-1) + 0.5 * diag_embed(Diagonal.apply(x, 0, x.ndim - 2, x.ndim - 1, False))


def _cholesky(A: Tensor, upper: bool, fn) -> Tensor:
    """The Cholesky factor of A's lower (upper) triangle; `fn` names the function in errors (see Cholesky)."""
    return Cholesky.apply(A, fn, upper)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky (deprecated in PyTorch for linalg.cholesky): the same factor, errors named 'cholesky'."""
    A = _matrices(input, "cholesky", square=True)
    return _cholesky(A, bool(upper), "cholesky")


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple:
    """(L, info) as `return_types.linalg_cholesky_ex`: info is 0, or the order of the first leading minor that is
    not positive-definite (L is then LAPACK's partial factor); check_errors=True raises instead."""
    A = _matrices(A, "linalg.cholesky", square=True)
    L = _cholesky(A, bool(upper), "linalg.cholesky_ex" if check_errors else None)
    return _CHOLESKY_EX(L, _value("chol_info", L))


class CholeskySolve(Op):
    """X = (L Lᵀ)⁻¹ B for lower triangular L (upper: (Uᵀ U)⁻¹ B);  dB = (L Lᵀ)⁻¹ gX, and with C = dB Xᵀ + X dBᵀ:
    dL = -C L (upper: dU = -U C), the derivative of (L Lᵀ)⁻¹ B with respect to every entry of L, as PyTorch;
    forward, with A = L Lᵀ:  X' = A⁻¹(B' − A'X), A' = L'Lᵀ + L L'ᵀ (upper: U'ᵀU + UᵀU')."""

    saves_output = True
    reduces_grads = True

    def forward(self, b, l, upper):
        if upper:
            return _solve_triangular(l, _solve_triangular(np.swapaxes(l, -1, -2), b, False, False), True, False)
        return _solve_triangular(np.swapaxes(l, -1, -2), _solve_triangular(l, b, False, False), True, False)

    def backward(self, gz, b, l, upper):
        gb = CholeskySolve.apply(gz, l, upper)
        gl = None
        if self.needs(1):
            c = gb @ self.output().mT
            c = c + c.mT
            gl = -(l @ c) if upper else -(c @ l)
        return gb, gl, None

    def jvp(self, t, b, l, upper):
        tl = t[1]
        if isinstance(tl, Tensor):
            p = tl.mT @ l if upper else tl @ l.mT
            tl = p + p.mT  # A'
        return CholeskySolve.apply(_minus_product(t[0], tl, self.output()), l, upper)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """X with A X = B for A = L Lᵀ given its Cholesky factor L = input2 (upper=True: A = Uᵀ U); B = input."""
    B = _tensor(input, "cholesky_solve", "input")
    L = _matrices(input2, "cholesky_solve", "input2", square=True)
    if B._data.ndim < 2:
        raise RuntimeError(f"cholesky_solve: b should have at least 2 dimensions, but has {B._data.ndim} dimensions "
                           f"instead")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
                           f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    if B._data.dtype != L._data.dtype:
        raise RuntimeError(f"cholesky_solve: Expected b and A to have the same dtype, but found b of type {_tname(B)} "
                           f"and A of type {_tname(L)} instead.")
    _batch_shape("cholesky_solve", B.shape[:-2], L.shape[:-2])
    return CholeskySolve.apply(B, L, bool(upper))


def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """(L Lᵀ)⁻¹ from the Cholesky factor L = input (upper=True: (Uᵀ U)⁻¹)."""
    L = _matrices(input, "cholesky_inverse", square=True)
    eye = _eye(L.shape[-1], L)
    return CholeskySolve.apply(eye, L, bool(upper))


# ---------------------------------------------------------------------- QR
class QR(Op):
    """A = QR (Householder; reduced: Q (m, k), R (k, n), k = min(m, n); complete: Q (m, m); 'r': R only).

    Backward (Walter & Lehmann; PyTorch's), for m ≥ n with M = R gRᵀ − gQᵀ Q:
    dA = (gQ + Q copyltu(M)) R⁻ᵀ, copyltu(M) the symmetric matrix with M's lower triangle. For m < n,
    A = [X | Y] with X = Q U square, R = [U | V], V = Qᵀ Y: dY = Q gV and dX is the square case with
    gQ + Y gVᵀ in place of gQ."""

    saves_inputs = False

    def forward(self, a, mode):
        _keep_inputs(self)
        self.mode, self.m, self.n = mode, a.shape[-2], a.shape[-1]
        if mode == "r":
            self.q, self.r = None, np.linalg.qr(a, mode="r")
            return np.zeros((0,), a.dtype), self.r
        self.q, self.r = np.linalg.qr(a, mode=mode)
        return self.q, self.r

    def backward(self, grads, *inputs):
        self._differentiable()
        q, r = _outputs(self, (self.q, self.r), inputs)
        gq, gr = grads
        gq = _zeros_like(q) if gq is None else gq
        gr = _zeros_like(r) if gr is None else gr
        m, n = self.m, self.n
        if m >= n:
            return _qr_backward_tall(q, r, gq, gr)
        y = q @ r[..., :, m:]  # (A's last n - m columns: Y = Q V)
        gv = gr[..., :, m:]
        gx = _qr_backward_tall(q, r[..., :, :m], gq + y @ gv.mT, gr[..., :, :m])
        return cat([gx, q @ gv], -1)

    def jvp(self, t, a, mode):
        """m ≥ n: see `_qr_jvp_tall`. m < n: A = [X | Y] = Q [U | V]: (Q', U') are the square case's for X' and
        V' = Qᵀ (Y' − Q'V)."""
        self._differentiable()
        q, r = self.result()
        da, m = t[0], self.m
        if m >= self.n:
            return _qr_jvp_tall(q, r, da)
        dq, du = _qr_jvp_tall(q, r[..., :, :m], da[..., :, :m])
        return dq, cat([du, q.mT @ (da[..., :, m:] - dq @ r[..., :, m:])], -1)

    def _differentiable(self) -> None:
        """PyTorch's errors where Q is not computed or not determined by A."""
        if self.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                               "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
        if self.mode == "complete" and self.m > self.n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")


def _qr_backward_tall(q: Tensor, r: Tensor, gq: Tensor, gr: Tensor) -> Tensor:
    """dA of A = QR for m ≥ n (R square): (gQ + Q copyltu(R gRᵀ − gQᵀ Q)) R⁻ᵀ."""
    m = r @ gr.mT - gq.mT @ q
    b = gq + q @ (m.tril(-1) + m.tril().mT)
    return SolveTriangular.apply(r, b.mT, True, False).mT  # b R⁻ᵀ = (R⁻¹ bᵀ)ᵀ


def _qr_jvp_tall(q: Tensor, r: Tensor, da: Tensor) -> tuple:
    """(Q', R') of A = QR for m ≥ n: X = Qᵀ A' R⁻¹ = QᵀQ' + R'R⁻¹ is a skew-symmetric Ω = QᵀQ' plus an upper
    triangular R'R⁻¹, so Ω = tril(X, -1) − tril(X, -1)ᵀ, R' = (X − Ω) R and Q' = A'R⁻¹ − Q (X − Ω)."""
    dar = SolveTriangular.apply(r.mT, da.mT, False, False).mT  # A' R⁻¹ = (R⁻ᵀ A'ᵀ)ᵀ, Rᵀ lower triangular
    x = q.mT @ dar
    low = x.tril(-1)
    upper = x - (low - low.mT)
    return dar - q @ upper, upper @ r


def _qr(A: Tensor, mode: str, fn: str):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or "
                           f"'complete'")
    return QR.apply(_matrices(A, fn), mode)


def qr(input: Tensor, some: bool = True) -> tuple:
    """torch.qr: (Q, R) as `return_types.qr`; some=False gives the complete decomposition."""
    return _QR(*_qr(input, "reduced" if some else "complete", "linalg.qr"))


# ---------------------------------------------------------------------- SVD
class SVD(Op):
    """A = U diag(S) Vh, S descending. Backward (Townsend), k = min(m, n), with F_ij = 1/(s_j² − s_i²) (i ≠ j),
    J = Uᵀ gU, K = Vᵀ gV (gV = gVhᵀ):
        dA = U [(F ∘ (J − Jᵀ)) S + diag(gS) + S (F ∘ (K − Kᵀ))] Vᵀ + (I − UUᵀ) gU S⁻¹ Vᵀ + U S⁻¹ gVᵀ (I − VVᵀ).
    With only gS it is U diag(gS) Vᵀ (finite for repeated singular values). Full matrices of a non-square A:
    the extra singular vectors are arbitrary, so their gradients are ignored and their tangents are zero (as
    PyTorch). Forward: see `_svd_jvp`."""

    saves_inputs = False

    def forward(self, a, full):
        _keep_inputs(self)
        self.u, self.s, self.vh = np.linalg.svd(a, full_matrices=full)
        return self.u, self.s, self.vh

    def backward(self, grads, *inputs):
        gu, gs, gvh = grads
        u, s, vh = _outputs(self, (self.u, self.s, self.vh), inputs)
        k = s.shape[-1]
        if u.shape[-1] != k:  # full_matrices: only the first k singular vectors are defined
            u, gu = u[..., :, :k], (None if gu is None else gu[..., :, :k])
        if vh.shape[-2] != k:
            vh, gvh = vh[..., :k, :], (None if gvh is None else gvh[..., :k, :])
        return _svd_backward(u, s, vh, gu, gs, gvh)

    def jvp(self, t, a, full):
        u, s, vh = self.result()
        k = s.shape[-1]
        extra_u, extra_v = u.shape[-1] > k, vh.shape[-2] > k  # (full_matrices of a non-square A)
        du, ds, dvh = _svd_jvp(u[..., :, :k] if extra_u else u, s, vh[..., :k, :] if extra_v else vh, t[0])
        if extra_u:
            du = cat([du, _zeros_like(u[..., :, k:])], -1)
        if extra_v:
            dvh = cat([dvh, _zeros_like(vh[..., k:, :])], -2)
        return du, ds, dvh


def _svd_backward(u: Tensor, s: Tensor, vh: Tensor, gu, gs, gvh) -> Tensor:
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    if gu is None and gvh is None:
        return (u * (gs if gs is not None else _zeros_like(s))[..., None, :]) @ vh
    s2 = s * s
    f = _off_diagonal_inverse(s2[..., None, :] - s2[..., :, None])
    inner = diag_embed(gs) if gs is not None else 0.0
    v = vh.mT
    if gu is not None:
        j = u.mT @ gu
        inner = inner + (f * (j - j.mT)) * s[..., None, :]
    if gvh is not None:
        gv = gvh.mT
        kk = v.mT @ gv
        inner = inner + s[..., :, None] * (f * (kk - kk.mT))
    ga = u @ inner @ vh
    if gu is not None and m > k:
        ga = ga + ((gu - u @ j) / s[..., None, :]) @ vh
    if gvh is not None and n > k:
        ga = ga + (u / s[..., None, :]) @ (gv - v @ kk).mT
    return ga


def _svd_jvp(u: Tensor, s: Tensor, vh: Tensor, da: Tensor) -> tuple:
    """(U', S', Vh') of the reduced SVD A = U S Vᵀ. With P = Uᵀ A' V = ΩS + S' − SΩ' (Ω = UᵀU' and Ω' = VᵀV'
    skew-symmetric) and F_ij = 1/(s_j² − s_i²) (i ≠ j, 0 on the diagonal):  S' = diag(P),
    Ω = F ∘ (P S + S Pᵀ), Ω' = F ∘ (S P + Pᵀ S);  U' = U Ω + (I − UUᵀ) A' V S⁻¹ (m > k) and
    V' = V Ω' + (I − VVᵀ) A'ᵀ U S⁻¹ (n > k)."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v = vh.mT
    av = da @ v
    p = u.mT @ av
    s2 = s * s
    f = _off_diagonal_inverse(s2[..., None, :] - s2[..., :, None])
    ps, sp = p * s[..., None, :], s[..., :, None] * p  # P S, S P
    du = u @ (f * (ps + ps.mT))
    dv = v @ (f * (sp + sp.mT))
    if m > k:
        du = du + (av - u @ p) / s[..., None, :]
    if n > k:
        dv = dv + (da.mT @ u - v @ p.mT) / s[..., None, :]
    return du, Diagonal.apply(p, 0, p.ndim - 2, p.ndim - 1, True), dv.mT


class SVDVals(Op):
    """The singular values alone (no singular vectors: several times cheaper); used where no gradient is needed."""

    saves_inputs = False

    def forward(self, a):
        return np.linalg.svd(a, compute_uv=False)

    def backward(self, gz):
        raise RuntimeError("SVDVals: applied only where no gradient is needed")


def svdvals(A: Tensor, *, driver=None) -> Tensor:
    """The singular values of each matrix, descending (their gradient is U diag(gS) Vh)."""
    A = _matrices(A, "linalg.svd")
    if _wants_grad(A):
        return SVD.apply(A, False)[1]
    return SVDVals.apply(A)


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> tuple:
    """torch.svd: (U, S, V) as `return_types.svd`, A = U diag(S) Vᵀ (V, not Vh); some=False: full U, V;
    compute_uv=False: S only, with U and V zero-filled (m, m) and (n, n) matrices."""
    A = _matrices(input, "linalg.svd")
    if not compute_uv:
        m, n = A.shape[-2:]
        batch = A.shape[:-2]
        return _SVD(_const(np.zeros(batch + (m, m), A._data.dtype)), svdvals(A),
                    _const(np.zeros(batch + (n, n), A._data.dtype)))
    u, s, vh = SVD.apply(A, not some)
    return _SVD(u, s, vh.mT)


# ---------------------------------------------------------------------- symmetric and general eigenproblems
class Eigh(Op):
    """A = V diag(w) Vᵀ for symmetric A (its UPLO triangle read), w ascending. Backward, with
    F_ij = 1/(w_j − w_i) (i ≠ j) and X = Vᵀ gV:  dA = V (diag(gw) + F ∘ (X − Xᵀ)/2) Vᵀ (symmetric).
    Forward, with P = Vᵀ A' V (the whole A', as PyTorch):  w' = diag(P), V' = V (F ∘ P)."""

    saves_inputs = False

    def forward(self, a, uplo):
        _keep_inputs(self)
        self.w, self.v = np.linalg.eigh(a, UPLO=uplo)
        return self.w, self.v

    def backward(self, grads, *inputs):
        gw, gv = grads
        w, v = _outputs(self, (self.w, self.v), inputs)
        if gv is None:
            return (v * gw[..., None, :]) @ v.mT
        x = v.mT @ gv
        inner = _off_diagonal_inverse(w[..., None, :] - w[..., :, None]) * (0.5 * (x - x.mT))
        if gw is not None:
            inner = inner + diag_embed(gw)
        return v @ inner @ v.mT

    def jvp(self, t, a, uplo):
        w, v = self.result()
        p = v.mT @ t[0] @ v
        f = _off_diagonal_inverse(w[..., None, :] - w[..., :, None])
        return Diagonal.apply(p, 0, p.ndim - 2, p.ndim - 1, True), v @ (f * p)


class EigvalsH(Op):
    """The eigenvalues alone of symmetric matrices; used where no gradient is needed."""

    saves_inputs = False

    def forward(self, a, uplo):
        return np.linalg.eigvalsh(a, UPLO=uplo)

    def backward(self, gz):
        raise RuntimeError("EigvalsH: applied only where no gradient is needed")


def _uplo(UPLO) -> str:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO


def eigh(A: Tensor, UPLO: str = "L") -> tuple:
    """(eigenvalues ascending, orthonormal eigenvectors as columns) of symmetric matrices as
    `return_types.linalg_eigh`, reading A's lower (UPLO='L') or upper ('U') triangle."""
    A = _matrices(A, "linalg.eigh", square=True)
    return _EIGH(*Eigh.apply(A, _uplo(UPLO)))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of symmetric matrices."""
    A = _matrices(A, "linalg.eigh", square=True)
    if _wants_grad(A):
        return Eigh.apply(A, _uplo(UPLO))[0]
    return EigvalsH.apply(A, _uplo(UPLO))


def _complex_error(fn: str) -> RuntimeError:
    return RuntimeError(f"{fn}: the result is complex: some eigenvalues of the input have a nonzero imaginary part, "
                        f"and ember has no complex dtype (ember's one deviation from PyTorch here: real eigenvalues "
                        f"and eigenvectors are returned only when every eigenvalue of the batch is real). For a "
                        f"symmetric matrix use linalg.eigh.")


class Eig(Op):
    """A V = V diag(w) with real eigenvalues (unit-norm eigenvectors). Backward (PyTorch's), E_ij = w_j − w_i,
    X = Vᵀ gV:  dA = V⁻ᵀ (diag(gw) + (X − VᵀV diag(X)) / E) Vᵀ, the division off the diagonal only.
    Forward, with P = V⁻¹ A' V:  w' = diag(P), and with D = V (P / E) (off the diagonal) the tangent that keeps
    each column at unit norm:  V' = D − V diag(VᵀD)."""

    saves_inputs = False

    def forward(self, a, fn):
        w, v = np.linalg.eig(a)
        if w.dtype.kind == "c":
            raise _complex_error(fn)
        _keep_inputs(self)
        self.w, self.v = w, v
        return w, v

    def backward(self, grads, *inputs):
        gw, gv = grads
        w, v = _outputs(self, (self.w, self.v), inputs)
        inner = diag_embed(gw) if gw is not None else 0.0
        if gv is not None:
            x = v.mT @ gv
            x = x - (v.mT @ v) * Diagonal.apply(x, 0, x.ndim - 2, x.ndim - 1, False)[..., None, :]
            inner = inner + _off_diagonal_inverse(w[..., None, :] - w[..., :, None]) * x
        return Solve.apply(v.mT, inner @ v.mT, None)

    def jvp(self, t, a, fn):
        w, v = self.result()
        p = Solve.apply(v, t[0] @ v, None)
        d = v @ (_off_diagonal_inverse(w[..., None, :] - w[..., :, None]) * p)
        dv = d - v * Diagonal.apply(v.mT @ d, 0, d.ndim - 2, d.ndim - 1, False)[..., None, :]
        return Diagonal.apply(p, 0, p.ndim - 2, p.ndim - 1, True), dv


class Eigvals(Op):
    """The real eigenvalues alone; used where no gradient is needed."""

    saves_inputs = False

    def forward(self, a, fn):
        w = np.linalg.eigvals(a)
        if w.dtype.kind == "c":
            raise _complex_error(fn)
        return w

    def backward(self, gz):
        raise RuntimeError("Eigvals: applied only where no gradient is needed")


def eig(A: Tensor) -> tuple:
    """(eigenvalues, unit-norm eigenvectors as columns) as `return_types.linalg_eig`, as real tensors when every
    eigenvalue is real; a RuntimeError saying the result is complex otherwise (ember has no complex dtype)."""
    A = _matrices(A, "linalg.eig", square=True)
    return _EIG(*Eig.apply(A, "linalg.eig"))


def eigvals(A: Tensor) -> Tensor:
    """The eigenvalues of each square matrix, when all are real (see eig)."""
    A = _matrices(A, "linalg.eigvals", square=True)
    if _wants_grad(A):
        return Eig.apply(A, "linalg.eigvals")[0]
    return Eigvals.apply(A, "linalg.eigvals")


# ---------------------------------------------------------------------- pseudo-inverse and least squares
def _tolerances(A: Tensor, atol, rtol):
    """PyTorch's (atol, rtol) of pinv/matrix_rank as arrays: rtol defaults to eps·max(m, n) unless atol > 0."""
    a = A._data
    atol_a = np.asarray(0.0 if atol is None else (atol._data if isinstance(atol, Tensor) else atol), a.dtype)
    if rtol is None:
        positive = atol is not None and bool((atol_a > 0).all())
        rtol = 0.0 if positive else np.finfo(a.dtype).eps * max(a.shape[-2:])
    rtol_a = np.asarray(rtol._data if isinstance(rtol, Tensor) else rtol, a.dtype)
    return atol_a, rtol_a


class Pinv(Op):
    """P = A⁺ from the SVD (hermitian: eigh) with singular values ≤ max(atol, rtol·σ_max) dropped. For A of
    constant rank (Golub & Pereyra):  dA = −Pᵀ gP Pᵀ + (I − AP) gPᵀ P Pᵀ + Pᵀ P gPᵀ (I − PA), and
    P' = −P A' P + P Pᵀ A'ᵀ (I − AP) + (I − PA) A'ᵀ Pᵀ P."""

    saves_output = True

    def forward(self, a, atol, rtol, hermitian):
        if hermitian:
            w, v = np.linalg.eigh(a)
            keep = np.abs(w) > np.maximum(atol, rtol * np.abs(w).max(axis=-1, initial=0))[..., None]
            winv = np.where(keep, 1 / np.where(keep, w, 1), 0).astype(a.dtype)
            return (v * winv[..., None, :]) @ np.swapaxes(v, -1, -2)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        keep = s > np.maximum(atol, rtol * s.max(axis=-1, initial=0))[..., None]
        sinv = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(a.dtype)
        return np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * np.swapaxes(u, -1, -2))

    def backward(self, gz, a, atol, rtol, hermitian):
        return _pinv_backward(a, self.output(), gz), None, None, None

    def jvp(self, t, a, atol, rtol, hermitian):
        return _pinv_jvp(a, self.output(), t[0])


def _pinv_backward(a: Tensor, p: Tensor, g: Tensor) -> Tensor:
    """The gradient of A ↦ A⁺ for the cotangent g (see Pinv)."""
    pt = p.mT
    gt = g.mT
    return -(pt @ g @ pt) + (gt - a @ (p @ gt)) @ (p @ pt) + (pt @ p) @ (gt - (gt @ p) @ a)


def _pinv_jvp(a: Tensor, p: Tensor, da: Tensor) -> Tensor:
    """The tangent of A ↦ A⁺ along A' (see Pinv)."""
    pt, dat = p.mT, da.mT
    return -(p @ da @ p) + (p @ pt) @ (dat - (dat @ a) @ p) + (dat - p @ (a @ dat)) @ (pt @ p)


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse A⁺ (n, m) of each (m, n) matrix, from the singular values above
    max(atol, rtol·σ_max); rtol defaults to eps·max(m, n) unless atol > 0. hermitian: A symmetric (eigh)."""
    a = _tensor(A, "linalg.pinv", "A")
    if a._data.ndim < 2 or a._data.dtype.kind != "f" or a._data.dtype == np.float16:
        raise RuntimeError(f"linalg.pinv({_tname(a)}{{{list(a.shape)}}}): expected a tensor with 2 or more dimensions "
                           f"of float, double, cfloat or cdouble types")
    atol_a, rtol_a = _tolerances(a, atol, rtol)
    return Pinv.apply(a, atol_a, rtol_a, bool(hermitian))


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


class Lstsq(Op):
    """X = A⁺B, the minimum-norm least-squares solution (A⁺ from the SVD, singular values ≤ rcond·σ_max dropped),
    with the residuals ‖AX − B‖² (per column), rank and singular values that PyTorch's `driver` reports.
    dB = A⁺ᵀ gX and dA is the pseudo-inverse's gradient (Pinv) for gP = gX Bᵀ; the residuals (returned only where
    A has full rank n < m, so Aᵀ(AX − B) = 0) add dA = 2 (AX − B) diag(g_res) Xᵀ and dB = −2 (AX − B) diag(g_res).
    The rank and singular values are not differentiable. Forward: X' = P'B + PB' (P' the pseudo-inverse's
    tangent), and for the residuals res' = 2 Σ_rows (AX − B) ∘ (A'X − B') (the term A X' is orthogonal to AX − B)."""

    def forward(self, a, b, rcond, driver):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        keep = s > (rcond * s.max(axis=-1, initial=0))[..., None]
        sinv = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(a.dtype)
        x = np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * (np.swapaxes(u, -1, -2) @ b))
        rank = np.asarray(keep.sum(axis=-1, dtype=_INT64))
        m, n = a.shape[-2:]
        empty = np.zeros((0,), a.dtype)
        res = empty
        if driver != "gelsy" and m > n and bool((rank == n).all()):
            res = ((a @ x - b) ** 2).sum(axis=-2)
        self.x = x
        return (x, res, rank if driver != "gels" else np.zeros((0,), _INT64),
                s if driver in ("gelsd", "gelss") else empty)

    def backward(self, grads, a, b, rcond, driver):
        gx, gres = grads[0], grads[1]
        ga = gb = None
        if gx is not None:
            p = Pinv.apply(a, np.zeros((), a._data.dtype), np.asarray(rcond, a._data.dtype), False)
            gb = p.mT @ gx
            ga = _pinv_backward(a, p, gx @ b.mT)
        if gres is not None and gres.numel():
            x = _outputs(self, (self.x,), (a, b, rcond, driver))[0]
            r = (a @ x - b) * gres[..., None, :]
            ga = 2 * (r @ x.mT) + (0 if ga is None else ga)
            gb = -2 * r + (0 if gb is None else gb)
        return (sum_to(ga, a.shape) if ga is not None and self.needs(0) else None,
                sum_to(gb, b.shape) if gb is not None and self.needs(1) else None, None, None)

    def jvp(self, t, a, b, rcond, driver):
        ta, tb = t[0], t[1]
        x, res = self.result()[:2]
        p = Pinv.apply(a, np.zeros((), a._data.dtype), np.asarray(rcond, a._data.dtype), False)
        dx = _pinv_jvp(a, p, ta) @ b if isinstance(ta, Tensor) else None
        if isinstance(tb, Tensor):
            dx = p @ tb if dx is None else dx + p @ tb
        dres = 0
        if res.numel():
            dr = ta @ x if isinstance(ta, Tensor) else None  # A'X − B'
            if isinstance(tb, Tensor):
                dr = -tb if dr is None else dr - tb
            dres = 2 * reduce.sum((a @ x - b) * dr, -2)
        return dx, dres, None, None


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None) -> tuple:
    """(solution, residuals, rank, singular_values) as `return_types.linalg_lstsq`: X minimising ‖AX − B‖ (the
    minimum-norm one), computed from the SVD for every driver (ember has no LAPACK gels/gelsy). As PyTorch:
    residuals (squared, per column) only for drivers other than 'gelsy' when m > n and every A has full rank;
    rank for drivers other than 'gels'; singular values for 'gelsd'/'gelss'; otherwise empty tensors."""
    fn = "torch.linalg.lstsq"
    A, B = _tensor(A, fn, "A"), _tensor(B, fn, "B")
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError(f"{fn}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A._data.ndim < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    if A._data.dtype.kind != "f" or A._data.dtype == np.float16:
        raise RuntimeError(f"{fn}: Expected a floating point (float or double) tensor as input. Got {_tname(A)}")
    if A._data.dtype != B._data.dtype:
        raise RuntimeError(f"{fn}: Expected input and other to have the same dtype, but got input's dtype "
                           f"{_tname(A)} and other's dtype {_tname(B)}")
    vector = _is_vector_rhs(A, B)
    if vector:
        B = B.unsqueeze(-1)
    if B._data.ndim < 2 or B.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-2) (A {list(A.shape)}, B {list(B.shape)})")
    _batch_shape(fn, A.shape[:-2], B.shape[:-2])
    if rcond is None:
        rcond = np.finfo(A._data.dtype).eps * max(A.shape[-2:])
    x, res, rank, sv = Lstsq.apply(A, B, float(rcond), driver or "gelsy")
    return _LSTSQ(x.squeeze(-1) if vector else x, res, rank.detach(), sv.detach())


# ---------------------------------------------------------------------- matrix functions
class MatrixExp(Op):
    """exp(A) = Σ Aᵏ/k! (scaling and squaring, Padé);  dA = the upper-right block of exp([[Aᵀ, gZ], [0, Aᵀ]]);
    Z' = the upper-right block of exp([[A, A'], [0, A]])."""

    def forward(self, a):
        return _expm(a)

    def backward(self, gz, a):
        n = a.shape[-1]
        at = a.mT
        block = cat([cat([at, gz], -1), cat([_zeros_like(at), at], -1)], -2)
        return MatrixExp.apply(block)[..., :n, n:]

    def jvp(self, t, a):
        n = a.shape[-1]
        block = cat([cat([a, t[0]], -1), cat([_zeros_like(a), a], -1)], -2)
        return MatrixExp.apply(block)[..., :n, n:]


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix."""
    return MatrixExp.apply(_matrices(A, "linalg.matrix_exp", square=True))


class IdentityLike(Op):
    """z = I of A's shape (A⁰); dz/dA = 0, z' = 0."""

    saves_inputs = False

    def forward(self, a):
        self.shape = a.shape
        return np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()

    def backward(self, gz):
        return _const(np.zeros(self.shape, gz._data.dtype))

    def jvp(self, t, a):
        return 0


def matrix_power(A: Tensor, n: int) -> Tensor:
    """Aⁿ by repeated squaring (n < 0: (A⁻¹)^|n|, n = 0: the identity); integer matrices for n ≥ 0."""
    A = _matrices(A, "linalg.matrix_power", floating=False)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    n = _int_arg(n, "linalg_matrix_power", "n", 2)
    if n == 0:
        return IdentityLike.apply(A)
    if n < 0:
        A, n = inv(A), -n
    result = None
    while n:
        if n & 1:
            result = A if result is None else Matmul.apply(result, A)
        n >>= 1
        if n:
            A = Matmul.apply(A, A)
    return result


def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices in the cheapest order (dynamic programming on the shapes); the first
    (last) may be 1-D, a row (column) vector removed from the result."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"multi_dot(): argument 'tensors' must be a list or tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    ts = [_tensor(t, "multi_dot", f"tensors[{i}]") for i, t in enumerate(tensors)]
    for i, t in enumerate(ts):
        nd = t._data.ndim
        if i == 0 and nd not in (1, 2):
            raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {nd}D")
        if i == n - 1 and nd not in (1, 2):
            raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {nd}D")
        if 0 < i < n - 1 and nd != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {nd}D")
        if t._data.dtype != ts[0]._data.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{c_type_name(ts[0]._data)} and tensor {i} {c_type_name(t._data)}")
    first_vec, last_vec = ts[0]._data.ndim == 1, ts[-1]._data.ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i in range(n - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                               f"{list(tensors[i + 1].shape)} cannot be multiplied")
    dims = [t.shape[0] for t in ts] + [ts[-1].shape[1]]
    split = _chain_order(dims)

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return ts[i]
        k = split[i][j]
        return Matmul.apply(product(i, k), product(k + 1, j))

    r = product(0, n - 1)
    if first_vec and last_vec:
        return r.reshape(())
    if first_vec:
        return r.squeeze(0)
    return r.squeeze(-1) if last_vec else r


def _chain_order(dims: list) -> list:
    """split[i][j]: where the cheapest product of matrices i..j (shapes dims[i] x dims[i+1], ...) splits."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def chain_matmul(*matrices) -> Tensor:
    """The product of 2-D matrices in the cheapest order (deprecated in PyTorch for linalg.multi_dot)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, t in enumerate(matrices):
        if _tensor(t, "chain_matmul", f"matrices[{i}]")._data.ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor dimension is {t._data.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


def _number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


# ---------------------------------------------------------------------- LU
class LUFactor(Op):
    """(LU, pivots) with P A = L U, L unit lower triangular (below LU's diagonal), U upper (on and above it).
    Backward for square A (PyTorch's): with Φ = tril(Lᵀ gL, -1) + triu(gU Uᵀ),  dA = P L⁻ᵀ Φ U⁻ᵀ.
    Forward, any shape: see `_lu_jvp`."""

    saves_inputs = False

    def forward(self, a):
        _keep_inputs(self)
        lu, piv, info = _lu_arrays(a)
        self.lu, self.piv = lu, piv
        return lu, piv, info

    def backward(self, grads, *inputs):
        g = grads[0]
        if g is None:
            return None
        lu = _outputs(self, (self.lu,), inputs)[0]
        m, n = lu.shape[-2:]
        if m != n:
            raise RuntimeError("linalg.lu_factor: ember differentiates the LU decomposition of square matrices only")
        eye = _eye(n, lu)
        L, U = lu.tril(-1) + eye, lu.triu()
        phi = (L.mT @ g.tril(-1)).tril(-1) + (g.triu() @ U.mT).triu()
        x = SolveTriangular.apply(L.mT, phi, True, True)  # L⁻ᵀ Φ
        x = SolveTriangular.apply(U, x.mT, True, False).mT  # (L⁻ᵀ Φ) U⁻ᵀ
        return _unpermute(x, self.piv)

    def jvp(self, t, a):
        lu = self.result()[0]
        return _lu_jvp(lu, _gather_rows(t[0], _value("perm", _const(self.piv), lu.shape[-2]))), None, None


def _lu_jvp(lu: Tensor, pda: Tensor) -> Tensor:
    """The tangent of the packed LU of A = P L U given pda = Pᵀ A'. For the leading k x k block (k = min(m, n)),
    X = L⁻¹ (PᵀA')₁₁ U⁻¹ = L⁻¹L' + U'U⁻¹ splits into a strictly lower and an upper part: L' = L tril(X, -1),
    U' = triu(X) U. The rows of a tall A below it: L₂' = ((PᵀA')₂₁ − L₂U') U⁻¹; the columns of a wide A right of
    it: U₂' = L⁻¹ ((PᵀA')₁₂ − L'U₂)."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    lu1 = lu[..., :k, :k]  # L (unit lower, diagonal implied) and U of the leading block, packed
    x = SolveTriangular.apply(lu1, pda[..., :k, :k], False, True)  # L⁻¹ (PᵀA')₁₁
    x = SolveTriangular.apply(lu1.mT, x.mT, False, False).mT  # ... U⁻¹ = (U⁻ᵀ (...)ᵀ)ᵀ
    dl = (lu1.tril(-1) + _eye(k, lu)) @ x.tril(-1)
    du = x.triu() @ lu1.triu()
    d = dl + du
    if m > k:
        rest = pda[..., k:, :] - lu[..., k:, :] @ du
        d = cat([d, SolveTriangular.apply(lu1.mT, rest.mT, False, False).mT], -2)
    if n > k:
        rest = pda[..., :, k:] - dl @ lu[..., :, k:]
        d = cat([d, SolveTriangular.apply(lu1, rest, False, True)], -1)
    return d


def _unpermute(x: Tensor, piv) -> Tensor:
    """P X for the P of A = P L U given by LAPACK pivots: X's rows put back in A's row order."""
    return _gather_rows(x, _value("unperm", piv if isinstance(piv, Tensor) else _const(piv), x.shape[-2]))


def _gather_rows(x: Tensor, order: Tensor) -> Tensor:
    """x[..., order[...], :] with the batch dims of x and order broadcast."""
    batch = _batch_shape("gather", x.shape[:-2], order.shape[:-1])
    x = x.expand(batch + x.shape[-2:])
    idx = order.expand(batch + order.shape[-1:])[..., :, None].expand(batch + (order.shape[-1], x.shape[-1]))
    return take_along_dim(x, idx, -2)


def _lu_factor(A, fn: str, pivot: bool):
    A = _matrices(A, fn)
    if not pivot:
        raise RuntimeError(f"{fn}: LU without pivoting is not implemented on the CPU")
    lu, piv, info = LUFactor.apply(A)
    return lu, piv.detach(), info.detach()


def lu_factor(A: Tensor, *, pivot: bool = True) -> tuple:
    """(LU, pivots) as `return_types.linalg_lu_factor`: P A = L U packed in one matrix (L's unit diagonal
    implied), pivots int32 1-based (row i was swapped with row pivots[i]). A zero pivot raises RuntimeError."""
    lu, piv, info = _lu_factor(A, "linalg.lu_factor", pivot)
    bad = info._data != 0
    if bad.any():
        prefix, i = _first_failure(info._data, lu._data.ndim > 2)
        raise RuntimeError(f"torch.linalg.lu_factor: {prefix}U[{i},{i}] is zero and using it on lu_solve would result "
                           f"in a division by zero. If you still want to perform the factorization, consider calling "
                           f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return _LU_FACTOR(lu, piv)


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> tuple:
    """(LU, pivots, info) as `return_types.linalg_lu_factor_ex`; info the first zero pivot (1-based) or 0."""
    lu, piv, info = _lu_factor(A, "linalg.lu_factor_ex", pivot)
    if check_errors and (info._data != 0).any():
        raise _singular("linalg.lu_factor_ex", info._data, lu._data.ndim > 2)
    return _LU_FACTOR_EX(lu, piv, info)


def lu(A: Tensor, *, pivot: bool = True) -> tuple:
    """(P, L, U) as `return_types.linalg_lu` with A = P L U: P (m, m) a permutation, L (m, k) unit lower
    triangular, U (k, n) upper triangular, k = min(m, n)."""
    lu_, piv, _ = _lu_factor(A, "linalg.lu", pivot)
    m, n = lu_.shape[-2:]
    k = min(m, n)
    L = lu_[..., :, :k].tril(-1) + _const(np.eye(m, k, dtype=lu_._data.dtype))
    U = lu_[..., :k, :].triu()
    return _LU(_value("p_matrix", piv, m, lu_._data.dtype), L, U)


def _lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, left: bool, adjoint: bool) -> Tensor:
    if not left:  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        return _lu_solve(LU, pivots, B.mT, True, not adjoint).mT
    if not adjoint:  # A = P L U: X = U⁻¹ L⁻¹ Pᵀ B
        perm = _value("perm", pivots, LU.shape[-1])
        y = SolveTriangular.apply(LU, _gather_rows(B, perm), False, True)
        return SolveTriangular.apply(LU, y, True, False)
    # Aᵀ = Uᵀ Lᵀ Pᵀ: X = P L⁻ᵀ U⁻ᵀ B
    y = SolveTriangular.apply(LU.mT, B, False, False)
    return _unpermute(SolveTriangular.apply(LU.mT, y, True, True), pivots)


def _lu_solve_args(LU, pivots, B, fn: str, left: bool) -> tuple:
    LU = _matrices(LU, fn, "LU", square=True)
    B = _tensor(B, fn, "B")
    pivots = _tensor(pivots, fn, "pivots")
    if pivots._data.dtype != _INT32:
        raise RuntimeError(f"{fn}: pivots should be a Tensor of scalar type torch.int32")
    if pivots.shape != LU.shape[:-1]:
        raise RuntimeError(f"{fn}: Expected pivots of shape {list(LU.shape[:-1])} (LU {list(LU.shape)}), but got "
                           f"{list(pivots.shape)}")
    if B._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    _same_dtype(fn, LU, B, ("LU", "B"))
    _batch_shape(fn, LU.shape[:-2], B.shape[:-2])
    return LU, pivots, B


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch.lu_solve (deprecated in PyTorch for linalg.lu_solve): X with A X = b from (LU_data, LU_pivots)."""
    LU, pivots, B = _lu_solve_args(LU_data, LU_pivots, b, "lu_solve", True)
    return _lu_solve(LU, pivots, B, True, False)


# ---------------------------------------------------------------------- products
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: (a ⊗ b)[i·n + k, j·m + l] = a[i, j]·b[k, l], in any number of dims (the tensor with
    fewer dims gets leading 1s). Built from a broadcast product, so its gradient is the matching sums."""
    a, b = _tensor(input, "kron", "input"), _tensor(other, "kron", "other")
    nd = max(a._data.ndim, b._data.ndim)
    sa = (1,) * (nd - a._data.ndim) + a.shape
    sb = (1,) * (nd - b._data.ndim) + b.shape
    ai = a.reshape(tuple(x for s in sa for x in (s, 1)))
    bi = b.reshape(tuple(x for s in sb for x in (1, s)))
    return (ai * bi).reshape(tuple(p * q for p, q in zip(sa, sb)))


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Σ over the last dim of input ⊗ other (a product with a 0-d tensor: elementwise)."""
    a, b = _tensor(input, "inner", "input"), _tensor(other, "inner", "other")
    if a._data.ndim == 0 or b._data.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(a.shape)} and {list(b.shape)}")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"inner(): both inputs should have same dtype, but got {_tname(a)} and {_tname(b)}")
    return tensordot(a, b, ([-1], [-1]))


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Σᵢ xᵢ·yᵢ of two 1-D tensors (conjugating x for complex input in PyTorch; ember is real)."""
    a, b = _tensor(input, "vdot", "input"), _tensor(other, "vdot", "other")
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"vdot(): 1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D tensors")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"vdot(): expected both vectors to have same dtype, but found {_tname(a)} and {_tname(b)}")
    if a.shape != b.shape:
        raise RuntimeError(f"vdot(): inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                           f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                           f"respectively")
    return Matmul.apply(a, b)


def _scaled_sum(input: Tensor, prod: Tensor, beta, alpha) -> Tensor:
    """beta·input + alpha·prod; with beta = 0 input is not read (NaN in it does not propagate), as PyTorch."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return (input if beta == 1 else input * beta) + prod


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·(mat @ vec) for mat (n, m), vec (m,); input broadcasts to (n,)."""
    input, mat, vec = (_tensor(t, "addmv", n) for t, n in ((input, "input"), (mat, "mat"), (vec, "vec")))
    if mat._data.ndim != 2 or vec._data.ndim != 1 or mat.shape[1] != vec.shape[0] or not _broadcasts(
            input.shape, (mat.shape[0],)):
        raise RuntimeError(f"addmv(): size mismatch, got input ({'x'.join(map(str, input.shape))}), mat "
                           f"({'x'.join(map(str, mat.shape))}), vec ({'x'.join(map(str, vec.shape))})")
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


def _broadcasts(shape: tuple, to: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, to) == tuple(to)
    except ValueError:
        return False


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·(vec1 ⊗ vec2); input broadcasts to (n, m)."""
    input, vec1, vec2 = (_tensor(t, "addr", n) for t, n in ((input, "input"), (vec1, "vec1"), (vec2, "vec2")))
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v._data.ndim}-D")
    shape = (vec1.shape[0], vec2.shape[0])
    if not _broadcasts(input.shape, shape):
        raise RuntimeError(f"addr: input of shape {list(input.shape)} cannot be broadcast to the result shape "
                           f"{list(shape)}")
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·Σ_b batch1[b] @ batch2[b], as one GEMM: (n, b·k) @ (b·k, m)."""
    input, b1, b2 = (_tensor(t, "addbmm", n) for t, n in ((input, "input"), (batch1, "batch1"), (batch2, "batch2")))
    for name, t in (("batch1", b1), ("batch2", b2)):
        if t._data.ndim != 3:
            raise RuntimeError(f"addbmm: {name} must be a 3D tensor, got {t._data.ndim}-D")
    if b1.shape[0] != b2.shape[0]:
        raise RuntimeError(f"addbmm: batch1 and batch2 must have same number of batches, got {b1.shape[0]} and "
                           f"{b2.shape[0]}")
    if b1.shape[2] != b2.shape[1]:
        raise RuntimeError(f"addbmm: Incompatible matrix sizes for bmm ({b1.shape[1]}x{b1.shape[2]} and "
                           f"{b2.shape[1]}x{b2.shape[2]})")
    b, n, k = b1.shape
    m = b2.shape[2]
    return addmm(input, b1.permute(1, 0, 2).reshape(n, b * k), b2.reshape(b * k, m), beta=beta, alpha=alpha)


# ---------------------------------------------------------------------- cross products and dot products
class Cross(Op):
    """z = x × y along `axis` (size 3; x and y broadcast);  dx = y × gz, dy = gz × x;  z' = x' × y + x × y'."""

    reduces_grads = True
    jvp = Op.multilinear_jvp

    def forward(self, x, y, axis):
        return np.cross(x, y, axisa=axis, axisb=axis, axisc=axis)

    def backward(self, gz, x, y, axis):
        return (Cross.apply(y, gz, axis) if self.needs(0) else None,
                Cross.apply(gz, x, axis) if self.needs(1) else None, None)


def _cross(a: Tensor, b: Tensor, dim, fn: str) -> Tensor:
    if a._data.ndim != b._data.ndim:
        raise RuntimeError(f"{fn}: inputs must have the same number of dimensions.")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"{fn}: expected both inputs to have the same dtype, but got {_tname(a)} and {_tname(b)}")
    batch = _batch_shape(fn, a.shape, b.shape)
    if dim is None:  # torch.cross's deprecated default: the first dim of size 3
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated. Please either pass the dim "
                      "explicitly or simply use torch.linalg.cross. The default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=3)
        dim = next((i for i, s in enumerate(batch) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"{fn}: no dimension of size 3 in input")
    d = normalize_dim(dim, a._data.ndim, fn)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{fn}: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}")
    return Cross.apply(a, b, d)


def cross(input: Tensor, other: Tensor, dim=None) -> Tensor:
    """torch.cross: the cross product along `dim` (None: the first dim of size 3, deprecated in PyTorch)."""
    return _cross(_tensor(input, "cross", "input"), _tensor(other, "cross", "other"), dim, "linalg.cross")


# ---------------------------------------------------------------------- distances
class PairDist(Op):
    """z = ‖a − b‖_p over the last dim (a, b broadcast); with d = a − b, da = w·gz and db = −w·gz where
    w = sign(d)|d|^(p−1)/z^(p−1) (p = 2: d/z; p = 1: sign(d); p = ∞: sign(d)·[|d| = z]; p = 0: 0), 0 where z = 0
    or d = 0: PyTorch's subgradients for cdist and pdist. Forward: z' = Σ w ∘ (a' − b') over the last dim."""

    saves_output = True
    reduces_grads = True

    def forward(self, a, b, p):
        d = np.abs(a - b)
        if p == 2:
            return np.sqrt(np.einsum("...i,...i->...", d, d))
        if p == 1:
            return d.sum(-1)
        if p == math.inf:
            return d.max(-1, initial=0)
        if p == 0:
            return (d != 0).sum(-1).astype(d.dtype)
        return (d ** p).sum(-1) ** (1 / p)

    def backward(self, gz, a, b, p):
        ga = self._weight(a, b, p) * gz[..., None]
        return ga, -ga, None

    def jvp(self, t, a, b, p):
        ta, tb = t[0], t[1]
        dd = (ta - tb if isinstance(tb, Tensor) else ta) if isinstance(ta, Tensor) else -tb
        return reduce.sum(self._weight(a, b, p) * dd, -1)

    def _weight(self, a: Tensor, b: Tensor, p: float) -> Tensor:
        """w = dz/da (see the class docstring)."""
        d = a - b
        z = self.output()[..., None]
        if p == 0:
            return d * 0.0
        if p == 1:
            return d.sign()
        if p == math.inf:
            return d.sign() * (d.abs() == z).to(d.dtype)
        zero = z == 0
        zs = where(zero, 1.0, z)
        if p == 2:
            w = d / zs
        else:
            ad = d.abs()
            w = d.sign() * where(ad == 0, 0.0, where(ad == 0, 1.0, ad) ** (p - 1)) / zs ** (p - 1)
        return where(zero, 0.0, w)


class CdistMM(Op):
    """z_ij = ‖x_i − y_j‖₂ = √max(‖x_i‖² + ‖y_j‖² − 2 x_i·y_j, 0) (one GEMM); with W = gz/z (0 where z = 0):
    dx = x ⊙ rowsum(W) − W y,  dy = y ⊙ colsum(W) − Wᵀ x;  z'_ij = (x_i − y_j)·(x_i' − y_j') / z_ij (0 where
    z = 0) = (x_i·x_i' − y_j·x_i' − x_i·y_j' + y_j·y_j') / z_ij."""

    saves_output = True
    reduces_grads = True

    def forward(self, x, y):
        d = x @ np.swapaxes(y, -1, -2)
        d *= -2
        d += np.einsum("...i,...i->...", x, x)[..., :, None]
        d += np.einsum("...i,...i->...", y, y)[..., None, :]
        np.maximum(d, 0, out=d)
        return np.sqrt(d, out=d)

    def backward(self, gz, x, y):
        z = self.output()
        zero = z == 0
        w = where(zero, 0.0, gz / where(zero, 1.0, z))
        gx = x * reduce.sum(w, -1, keepdim=True) - w @ y if self.needs(0) else None
        gy = y * reduce.sum(w, -2).unsqueeze(-1) - w.mT @ x if self.needs(1) else None
        return gx, gy

    def jvp(self, t, x, y):
        tx, ty = t
        num = None
        if isinstance(tx, Tensor):
            num = reduce.sum(x * tx, -1).unsqueeze(-1) - tx @ y.mT
        if isinstance(ty, Tensor):
            part = reduce.sum(y * ty, -1).unsqueeze(-2) - x @ ty.mT
            num = part if num is None else num + part
        z = self.output()
        zero = z == 0
        return where(zero, 0.0, num / where(zero, 1.0, z))


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distances between the rows of x1 (..., P, M) and of x2 (..., R, M): (..., P, R), batch dims
    broadcast. For p = 2, compute_mode picks the matrix-product form (‖x‖² + ‖y‖² − 2x·y: fast, less exact for
    close points): always, never, or when P > 25 or R > 25 (the default)."""
    x1, x2 = _tensor(x1, "cdist", "x1"), _tensor(x2, "cdist", "x2")
    for name, t in (("X1", x1), ("X2", x2)):
        if t._data.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t._data.ndim}D")
        if t._data.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_tname(t)}")
    if x1._data.dtype != x2._data.dtype:
        raise RuntimeError(f"cdist: expected both inputs to have the same dtype, but got {_tname(x1)} and {_tname(x2)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: "
                           f"{x2.shape[-1]}")
    if not _number(p) or p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode (expected one of {_CDIST_MODES})")
    _batch_shape("cdist", x1.shape[:-2], x2.shape[:-2])
    p = float(p)
    P, R = x1.shape[-2], x2.shape[-2]
    if p == 2 and (compute_mode == _CDIST_MODES[1] or (compute_mode == _CDIST_MODES[0] and (P > 25 or R > 25))):
        return CdistMM.apply(x1, x2)
    return PairDist.apply(x1.unsqueeze(-2), x2.unsqueeze(-3), p)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between every pair of rows i < j of a (N, M) input, in row-major order of the pairs:
    (N(N−1)/2,). Also bound as ember.nn.functional.pdist."""
    x = _tensor(input, "pdist")
    if x._data.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x._data.ndim}D")
    if x._data.dtype.kind != "f":
        raise RuntimeError(f"pdist only supports floating-point dtypes, got: {_tname(x)}")
    if not _number(p) or p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    i, j = np.triu_indices(x.shape[0], 1)
    return PairDist.apply(index_select(x, 0, _const(i)), index_select(x, 0, _const(j)), float(p))


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """‖input − other‖_p over all elements of their broadcast (norm's gradient)."""
    a, b = _tensor(input, "dist", "input"), _tensor(other, "dist", "other")
    for t in (a, b):
        if t._data.dtype.kind != "f":
            raise RuntimeError(f"dist(): input dtype should be either floating point or complex. Got {_tname(t)} "
                               f"instead.")
    return reduce.norm(a - b, p)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
# (the torch.linalg names that differ from these are defined above with a leading underscore; ember/linalg.py
# exports them under their PyTorch names)
EXPORTS = Exports(globals(), functions=__all__, methods=_METHODS)
