"""ember.linalg and the classic linear-algebra names (ember/ops/linalg_ext.py, ember/linalg.py).

PyTorch parity of values and gradients (random cotangent, float64 and float32), finite-difference checks with
double backward, batching and broadcasting, named tuples, integer/empty/non-contiguous inputs, the LinAlgError
messages for singular and non-positive-definite inputs, and the NumPy-only fallbacks (no SciPy). Each case is a
function of (module, *tensors) so the same code runs on ember and on PyTorch.
"""
import math
import pickle

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember
from ember.ops import linalg_ext

# PyTorch warns that torch.cholesky, torch.qr, torch.svd, ... are deprecated: the parity tests call them on purpose
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")
def mat(*shape, seed=0, dtype=np.float64):
    """Well-conditioned square (or rectangular) matrices: uniform entries plus 2·I on the square part."""
    a = rand(*shape, seed=seed)
    k = min(shape[-2:])
    a[..., range(k), range(k)] += 2.0
    return a.astype(dtype)


def spd(*shape, seed=0, dtype=np.float64):
    """Symmetric positive-definite matrices."""
    a = rand(*shape, seed=seed)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def real_eig(n, seed=0, batch=(), dtype=np.float64):
    """Non-symmetric matrices with real, well-separated eigenvalues: S diag(1..n) S⁻¹."""
    s = mat(*batch, n, n, seed=seed)
    d = np.arange(1.0, n + 1) * 1.5
    return ((s * d[..., None, :]) @ np.linalg.inv(s)).astype(dtype)


def M(*shape):
    return lambda seed, dtype: mat(*shape, seed=seed, dtype=dtype)


def R(*shape, k=0):
    return lambda seed, dtype: rand(*shape, seed=seed + k, dtype=dtype)


def P(*shape):
    return lambda seed, dtype: spd(*shape, seed=seed, dtype=dtype)


def chol(*shape):
    """Cholesky factors (lower triangular) of symmetric positive-definite matrices."""
    return lambda seed, dtype: np.linalg.cholesky(spd(*shape, seed=seed + 1)).astype(dtype)


def sym(m, x):
    return (x + x.mT) / 2


def fix_signs(m, u, *rest):
    """Singular/eigen-vectors with a fixed sign: column k of u (and row k of a Vh, column k of a V in rest) times the
    sign of u's first row. LAPACK builds may pick opposite signs; the gauge-fixed result is comparable, and
    differentiable as the product with a piecewise-constant sign."""
    s = m.sign(u[..., :1, :])
    return (u * s,) + tuple(r * (s.mT if vh else s) for r, vh in rest)


def svd_fixed(m, r):
    u, s, vh = r
    u, vh = fix_signs(m, u, (vh, True))
    return u, s, vh


# name -> (fn(m, *xs), makers of the inputs: (seed, dtype) -> array)
CASES = {
    "det": (lambda m, x: m.linalg.det(x), [M(2, 3, 3)]),
    "det_top": (lambda m, x: m.det(x), [M(4, 4)]),
    "det_method": (lambda m, x: x.det(), [M(2, 2)]),
    "slogdet": (lambda m, x: m.linalg.slogdet(x), [M(2, 3, 3)]),
    "slogdet_top": (lambda m, x: m.slogdet(-x), [M(3, 3)]),
    "logdet": (lambda m, x: m.logdet(x), [M(2, 3, 3)]),
    "inv": (lambda m, x: m.linalg.inv(x), [M(2, 3, 3)]),
    "inverse": (lambda m, x: x.inverse(), [M(4, 4)]),
    "inv_ex": (lambda m, x: m.linalg.inv_ex(x), [M(2, 3, 3)]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [M(2, 3, 3), R(3, 2, k=1)]),
    "solve_vec": (lambda m, a, b: m.linalg.solve(a, b), [M(2, 3, 3), R(2, 3, k=1)]),
    "solve_1d": (lambda m, a, b: m.linalg.solve(a, b), [M(2, 3, 3), R(3, k=1)]),
    "solve_right": (lambda m, a, b: m.linalg.solve(a, b, left=False), [M(3, 3), R(2, 4, 3, k=1)]),
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b), [M(3, 3), R(3, 2, k=1)]),
    "solve_triangular_upper": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), [M(2, 3, 3), R(3, 2, k=1)]),
    "solve_triangular_lower_unit": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
                                    [M(3, 3), R(2, 3, 2, k=1)]),
    "solve_triangular_right": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, left=False),
                               [M(3, 3), R(4, 3, k=1)]),
    "triangular_solve": (lambda m, b, a: m.triangular_solve(b, a), [R(3, 2, k=1), M(3, 3)]),
    "triangular_solve_t_unit": (lambda m, b, a: b.triangular_solve(a, False, True, True), [R(2, 3, 2, k=1), M(3, 3)]),
    "cholesky": (lambda m, a: m.linalg.cholesky(sym(m, a)), [P(2, 3, 3)]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(sym(m, a), upper=True), [P(3, 3)]),
    "cholesky_top": (lambda m, a: sym(m, a).cholesky(), [P(4, 4)]),
    "cholesky_ex": (lambda m, a: m.linalg.cholesky_ex(sym(m, a)), [P(3, 3)]),
    "cholesky_solve": (lambda m, b, l: m.cholesky_solve(b, l.tril()), [R(2, 3, 2), chol(3, 3)]),
    "cholesky_solve_upper": (lambda m, b, l: b.cholesky_solve(l.mT.triu(), True), [R(3, 2), chol(3, 3)]),
    "cholesky_inverse": (lambda m, l: m.cholesky_inverse(l.tril()), [chol(2, 3, 3)]),
    "qr": (lambda m, a: m.linalg.qr(a), [M(2, 4, 3)]),
    "qr_square": (lambda m, a: m.linalg.qr(a), [M(3, 3)]),
    "qr_wide": (lambda m, a: m.linalg.qr(a), [M(2, 3, 5)]),
    "qr_complete_wide": (lambda m, a: m.linalg.qr(a, mode="complete"), [M(2, 4)]),
    "qr_top": (lambda m, a: a.qr(), [M(5, 3)]),
    "svd": (lambda m, a: svd_fixed(m, m.linalg.svd(a, full_matrices=False)), [M(2, 4, 3)]),
    "svd_wide": (lambda m, a: svd_fixed(m, m.linalg.svd(a, full_matrices=False)), [M(3, 5)]),
    "svd_full_square": (lambda m, a: svd_fixed(m, m.linalg.svd(a)), [M(3, 3)]),
    "svd_top": (lambda m, a: _svd_top_fixed(m, m.svd(a)), [M(4, 3)]),
    "svd_U_S": (lambda m, a: svd_fixed(m, m.linalg.svd(a, full_matrices=False))[:2], [M(4, 3)]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [M(2, 3, 4)]),
    "eigh": (lambda m, a: _eigh_fixed(m, m.linalg.eigh(sym(m, a))), [M(2, 3, 3)]),
    "eigh_U": (lambda m, a: _eigh_fixed(m, m.linalg.eigh(sym(m, a), UPLO="U")), [M(4, 4)]),
    "eigh_values_only": (lambda m, a: m.linalg.eigh(sym(m, a))[0], [M(3, 3)]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(sym(m, a)), [M(2, 3, 3)]),
    "eig": (lambda m, a: _eigh_fixed(m, _real(m.linalg.eig(a))), [lambda s, d: real_eig(3, s, (2,), d)]),
    "eigvals": (lambda m, a: _real(m.linalg.eigvals(a)), [lambda s, d: real_eig(3, s, (), d)]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [M(2, 4, 3)]),
    "pinv_wide": (lambda m, a: m.linalg.pinv(a), [M(3, 5)]),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(sym(m, a), hermitian=True), [M(3, 3)]),
    "pinverse": (lambda m, a: a.pinverse(), [M(3, 2)]),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [M(5, 3), R(5, 2, k=1)]),
    "lstsq_gelsd": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), [M(2, 5, 3), R(2, 5, 2, k=1)]),
    "lstsq_gels_vec": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gels"), [M(5, 3), R(5, k=1)]),
    "lstsq_under": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelss"), [M(2, 4), R(2, 3, k=1)]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [R(2, 3, 3)]),
    "matrix_exp_large": (lambda m, a: (4 * a).matrix_exp(), [R(4, 4)]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, 5), [R(2, 3, 3)]),
    "matrix_power_neg": (lambda m, a: a.matrix_power(-2), [M(3, 3)]),
    "matrix_power_0": (lambda m, a: m.linalg.matrix_power(a, 0), [R(2, 3, 3)]),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [R(2, 5), R(5, 3, k=1), R(3, 4, k=2)]),
    "multi_dot_vectors": (lambda m, a, b, c, e: m.linalg.multi_dot([a, b, c, e]),
                          [R(5), R(5, 3, k=1), R(3, 4, k=2), R(4, k=3)]),
    "chain_matmul": (lambda m, a, b: m.chain_matmul(a, b), [R(2, 5), R(5, 3, k=1)]),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), [R(2, 4, 3), R(1, 4, 3, k=1)]),
    "cross_top_dim": (lambda m, a, b: a.cross(b, dim=0), [R(3, 2), R(3, 2, k=1)]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b, dim=0), [R(3, 4), R(3, 1, k=1)]),
    "diagonal_view": (lambda m, a: m.linalg.diagonal(a, offset=1) * 2, [R(2, 3, 4)]),
    "diagonal_dims": (lambda m, a: m.diagonal(a, -1, 2, 0), [R(3, 2, 4)]),
    "diag_embed": (lambda m, a: m.diag_embed(a, 1, 0, 2), [R(2, 3)]),
    "diag_1d": (lambda m, a: m.diag(a, -1), [R(3)]),
    "diag_2d": (lambda m, a: a.diag(1), [R(3, 4)]),
    "diagflat": (lambda m, a: m.diagflat(a, 2), [R(2, 2)]),
    "trace": (lambda m, a: m.trace(a), [R(3, 4)]),
    "kron": (lambda m, a, b: m.kron(a, b), [R(2, 3), R(2, 1, 2, k=1)]),
    "inner": (lambda m, a, b: m.inner(a, b), [R(2, 3), R(4, 3, k=1)]),
    "vdot": (lambda m, a, b: a.vdot(b), [R(4), R(4, k=1)]),
    "addmv": (lambda m, c, a, b: m.addmv(c, a, b, beta=0.5, alpha=2), [R(1), R(2, 3, k=1), R(3, k=2)]),
    "addr": (lambda m, c, a, b: c.addr(a, b, alpha=3), [R(2, 3), R(2, k=1), R(3, k=2)]),
    "addbmm": (lambda m, c, a, b: m.addbmm(c, a, b, beta=2), [R(2, 4), R(3, 2, 5, k=1), R(3, 5, 4, k=2)]),
    "cdist": (lambda m, a, b: m.cdist(a, b), [R(2, 4, 3), R(5, 3, k=1)]),
    "cdist_mm": (lambda m, a, b: m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), [R(4, 3), R(1, 5, 3, k=1)]),
    "cdist_p1": (lambda m, a, b: m.cdist(a, b, 1), [R(4, 3), R(5, 3, k=1)]),
    "cdist_p3": (lambda m, a, b: m.cdist(a, b, p=3), [R(4, 3), R(5, 3, k=1)]),
    "cdist_p_half": (lambda m, a, b: m.cdist(a, b, p=0.5), [R(4, 3), R(5, 3, k=1)]),
    "cdist_inf": (lambda m, a, b: m.cdist(a, b, math.inf), [R(4, 3), R(5, 3, k=1)]),
    "cdist_p0": (lambda m, a, b: m.cdist(a, b, 0), [R(4, 3), R(5, 3, k=1)]),
    "pdist": (lambda m, a: m.nn.functional.pdist(a) if m is torch else linalg_ext.pdist(a), [R(5, 3)]),
    "pdist_p1": (lambda m, a: m.pdist(a, 1), [R(4, 3)]),
    "dist": (lambda m, a, b: m.dist(a, b, 3), [R(2, 3), R(3, k=1)]),
    "dist_inf": (lambda m, a, b: a.dist(b, math.inf), [R(2, 3), R(3, k=1)]),
    "norm_default": (lambda m, a: m.linalg.norm(a), [R(2, 3, 4)]),
    "norm_vec_ord": (lambda m, a: m.linalg.norm(a, 3), [R(5)]),
    "norm_mat_nuc": (lambda m, a: m.linalg.norm(a, "nuc"), [R(3, 4)]),
    "norm_dim": (lambda m, a: m.linalg.norm(a, -1, dim=1, keepdim=True), [R(3, 4)]),
    "norm_dims": (lambda m, a: m.linalg.norm(a, math.inf, dim=(2, 0)), [R(3, 4, 2)]),
    "vector_norm_2": (lambda m, a: m.linalg.vector_norm(a, dim=(0, 2)), [R(3, 4, 2)]),
    "vector_norm_inf": (lambda m, a: m.linalg.vector_norm(a, -math.inf, 1, True), [R(3, 4)]),
    "vector_norm_0_5": (lambda m, a: m.linalg.vector_norm(a, 0.5), [R(3, 4)]),
    "matrix_norm_fro": (lambda m, a: m.linalg.matrix_norm(a, keepdim=True), [R(2, 3, 4)]),
    "matrix_norm_nuc_keep": (lambda m, a: m.linalg.matrix_norm(a, "nuc", dim=(0, 2), keepdim=True), [R(3, 2, 4)]),
    "matrix_norm_2": (lambda m, a: m.linalg.matrix_norm(a, 2), [R(2, 3, 4)]),
    "matrix_norm_-2": (lambda m, a: m.linalg.matrix_norm(a, -2), [R(2, 3, 4)]),
    "matrix_norm_1": (lambda m, a: m.linalg.matrix_norm(a, 1), [R(2, 3, 4)]),
    "matrix_norm_-1": (lambda m, a: m.linalg.matrix_norm(a, -1, keepdim=True), [R(2, 3, 4)]),
    "matrix_norm_inf": (lambda m, a: m.linalg.matrix_norm(a, math.inf, dim=(-1, -2)), [R(2, 3, 4)]),
    "matrix_norm_-inf": (lambda m, a: m.linalg.matrix_norm(a, -math.inf), [R(2, 3, 4)]),
    "cond": (lambda m, a: m.linalg.cond(a), [M(2, 3, 4)]),
    "cond_-2": (lambda m, a: m.linalg.cond(a, -2), [M(3, 3)]),
    "cond_fro": (lambda m, a: m.linalg.cond(a, "fro"), [M(2, 3, 3)]),
    "cond_1": (lambda m, a: m.linalg.cond(a, 1), [M(3, 3)]),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a),
                    [lambda s, d: np.stack([mat(3, 4, seed=s, dtype=d), np.ones((3, 4), d)])]),
    "matrix_rank_tol": (lambda m, a: m.linalg.matrix_rank(a, atol=0.5, hermitian=True),
                        [lambda s, d: np.diag([3.0, 0.4, -2.0]).astype(d)]),
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a.reshape(6, 2, 3), ind=1), [M(6, 6)]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(2, 3, 6), b), [M(6, 6), R(2, 3, k=1)]),
    "tensorsolve_dims": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(6, 2, 3), b, dims=(0,)),
                         [M(6, 6), R(2, 3, k=1)]),
    "vander": (lambda m, a: m.linalg.vander(a), [R(2, 4)]),
    "vander_N": (lambda m, a: m.linalg.vander(a, N=2), [R(3)]),
    "lu_factor": (lambda m, a: m.linalg.lu_factor(a), [R(2, 4, 4)]),
    "lu_factor_ex": (lambda m, a: m.linalg.lu_factor_ex(a), [R(3, 3)]),
    "lu": (lambda m, a: m.linalg.lu(a), [R(2, 3, 3)]),
    "lu_solve": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b), [
        R(2, 3, 3), R(3, 2, k=1)]),
    "lu_solve_adjoint_right": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, left=False, adjoint=True), [
        R(3, 3), R(2, 4, 3, k=1)]),
    "lu_solve_adjoint": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, adjoint=True), [
        R(4, 4), R(4, 2, k=1)]),
    "lu_solve_top": (lambda m, a, b: b.lu_solve(*m.linalg.lu_factor(a)), [
        R(3, 3), R(3, 2, k=1)]),
}


def _eigh_fixed(m, r):
    w, v = r
    return w, fix_signs(m, v)[0]


def _svd_top_fixed(m, r):
    u, s, v = r
    u, v = fix_signs(m, u, (v, False))
    return u, s, v


def _real(r):
    """torch.linalg.eig's complex result as real tensors (the ember result passes through)."""
    if torch is not None and isinstance(r, torch.Tensor):
        return r.real
    if torch is not None and isinstance(r, tuple) and isinstance(r[0], torch.Tensor):
        return tuple(t.real for t in r)
    return r


# outputs PyTorch and ember agree on only up to float32 rounding amplified by the conditioning
LOOSE32 = {"matrix_exp_large": 2e-3, "cond": 1e-3, "cond_-2": 1e-3, "cond_fro": 1e-3, "cond_1": 1e-3,
           "matrix_power_neg": 1e-3, "eig": 1e-3, "eigvals": 1e-3, "lstsq_gelsd": 1e-3, "lstsq_under": 1e-3,
           "pinv_wide": 1e-3, "svd_wide": 1e-3, "cdist_p_half": 1e-3, "cdist_mm": 1e-3, "eigh": 1e-3, "eigh_U": 1e-3}


# PyTorch cannot differentiate these (its cond backward trips over an in-place op): values only; the gradient is
# checked by test_gradcheck
TORCH_NO_GRAD = {"cond_fro", "cond_1"}
# PyTorch 2.13's forward-mode rules of these are wrong (checked against central differences: triangular_solve
# uses the whole of A's tangent although only one triangle is read, off by 0.59 on the test case;
# cholesky_inverse's gives -0.064 where differences and its own cholesky_solve(I, L) give -0.041): ember's
# tangents are checked against central differences (test_gradcheck) instead of against PyTorch's
TORCH_WRONG_JVP = {"triangular_solve", "triangular_solve_t_unit", "cholesky_inverse"}


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_parity(name, dtype):
    fn, makers = CASES[name]
    arrays = [mk(3, dtype) for mk in makers]
    tol = LOOSE32.get(name, 3e-4) if dtype == np.float32 else 1e-7

    def torch_fn(*xs):
        out = fn(torch, *xs)
        return out.detach() if name in TORCH_NO_GRAD else out
    compare_torch(lambda *xs: fn(ember, *xs), torch_fn, *arrays, rtol=tol, atol=tol,
                  check_jvp=name not in TORCH_WRONG_JVP)


# piecewise-linear or piecewise-constant functions (max/min of |x|, counts, ranks): no finite-difference check
NOT_SMOOTH = {"cdist_inf", "cdist_p0", "dist_inf", "norm_dims", "vector_norm_inf", "matrix_norm_1", "matrix_norm_-1",
              "matrix_norm_inf", "matrix_norm_-inf", "cond_1", "matrix_rank", "matrix_rank_tol"}
NOT_DIFFERENTIABLE = {"lu": {0}, "lstsq_gelsd": {3}, "lstsq_under": {3}}  # (P; the singular values, as PyTorch)
FIRST_ORDER_ONLY = {"matrix_exp_large", "lstsq_gelsd", "lstsq_under", "svd_wide", "pinv_wide"}  # (speed)


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_SMOOTH))
def test_gradcheck(name):
    fn, makers = CASES[name]
    arrays = [mk(5, np.float64) for mk in makers]

    def f(*xs):
        out = fn(ember, *xs)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(o for i, o in enumerate(outs)
                     if o.dtype.is_floating_point and o.numel() and i not in NOT_DIFFERENTIABLE.get(name, ()))
    check_grad(f, *arrays, gradgrad=name not in FIRST_ORDER_ONLY)


# ---------------------------------------------------------------------- one-triangle inputs; special points
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,fn", [
    ("eigh", lambda m, a: _eigh_fixed(m, m.linalg.eigh(a))),
    ("eigvalsh_U", lambda m, a: m.linalg.eigvalsh(a, UPLO="U")),
    ("cholesky", lambda m, a: m.linalg.cholesky(a)),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(a, upper=True)),
])
def test_parity_symmetric_input(name, fn, dtype):
    """A symmetric input differentiated as it is: PyTorch's gradient is the symmetric one; the random cotangent
    checks the whole matrix."""
    tol = 1e-3 if dtype == np.float32 else 1e-8
    compare_torch(lambda a: fn(ember, a), lambda a: fn(torch, a), spd(2, 3, 3, seed=4, dtype=dtype), rtol=tol, atol=tol)


@requires_torch
@pytest.mark.parametrize("upper", [False, True])
def test_parity_cholesky_solve_gradient_of_every_entry(upper):
    """cholesky_solve reads one triangle of L, but PyTorch's gradient is that of (L Lᵀ)⁻¹B in every entry of L."""
    L = np.linalg.cholesky(spd(2, 3, 3, seed=5))
    L = np.swapaxes(L, -1, -2).copy() if upper else L
    compare_torch(lambda b, l: ember.cholesky_solve(b, l, upper), lambda b, l: torch.cholesky_solve(b, l, upper),
                  rand(2, 3, 2, seed=6), L)


@requires_torch
def test_det_gradient_near_singular_matches_torch():
    """Rank-deficient by one (det ≈ 1e-16, not exactly 0): both give the adjugate."""
    u, v = rand(3, 2, seed=1), rand(2, 3, seed=2)
    compare_torch(lambda a: ember.linalg.det(a), lambda a: torch.linalg.det(a), u @ v, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 4.0]]), np.diag([2.0, 3.0, 0.0]),
                               np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])])
def test_det_gradient_exactly_singular_is_the_adjugate(a):
    """At det = 0 exactly, d det/dA = adj(A)ᵀ (from the SVD). PyTorch 2.13 returns zeros there (a documented
    deviation: ember gives the derivative)."""
    x = ember.tensor(a, requires_grad=True)
    ember.linalg.det(x).backward()
    adj_t = np.array([[np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) * (-1) ** (i + j) for j in range(len(a))]
                      for i in range(len(a))])
    np.testing.assert_allclose(x.grad.numpy(), adj_t, atol=1e-12)
    eps = 1e-6  # a finite difference agrees
    for i, j in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i, j] = eps
        fd = (np.linalg.det(a + d) - np.linalg.det(a - d)) / (2 * eps)
        assert abs(fd - x.grad.numpy()[i, j]) < 1e-6


def test_svdvals_repeated_values_gradient_is_finite():
    x = ember.eye(3, dtype=ember.float64).requires_grad_()
    ember.linalg.svdvals(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.eye(3))


def test_norm_gradients_at_zero_are_zero():
    for fn in (lambda x: ember.linalg.vector_norm(x), lambda x: ember.linalg.matrix_norm(x),
               lambda x: ember.linalg.vector_norm(x, 0.5), lambda x: ember.cdist(x, x.detach()).sum(),
               lambda x: ember.cdist(x, x.detach(), compute_mode="use_mm_for_euclid_dist").sum()):
        x = ember.zeros(2, 3, dtype=ember.float64, requires_grad=True)
        fn(x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), 0)


@requires_torch
@pytest.mark.parametrize("p", [2.0, 1.0, math.inf, 3.0])
def test_cdist_coincident_points_and_ties(p):
    """Zero distances (a row repeated) and ties of the inf-norm: PyTorch's subgradients."""
    a = np.array([[1.0, -1.0, 0.0], [0.5, 0.5, 0.5], [1.0, -1.0, 0.0]])
    compare_torch(lambda x, y: ember.cdist(x, y, p), lambda x, y: torch.cdist(x, y, p), a, a[:2] * 1.0)
    compare_torch(lambda x: ember.pdist(x, p), lambda x: torch.pdist(x, p), a)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cdist_large_uses_the_matrix_product(dtype):
    """More than 25 rows: the default compute_mode takes the GEMM form, as PyTorch."""
    compare_torch(lambda x, y: ember.cdist(x, y), lambda x, y: torch.cdist(x, y), rand(2, 30, 4, seed=1, dtype=dtype),
                  rand(26, 4, seed=2, dtype=dtype), rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-5)


# ---------------------------------------------------------------------- odd inputs: non-contiguous, empty, integer
@requires_torch
@pytest.mark.parametrize("name", ["inv", "solve", "det", "cholesky", "svd", "qr", "eigh", "pinv", "matrix_exp",
                                  "solve_triangular_upper", "cdist", "kron", "cross", "lstsq"])
def test_parity_noncontiguous(name):
    fn, makers = CASES[name]
    arrays = [noncontig(mk(6, np.float64)) for mk in makers]
    compare_torch(lambda *xs: fn(ember, *xs), lambda *xs: fn(torch, *xs), *arrays, rtol=1e-7, atol=1e-9)


EMPTY = [
    ("inv", lambda m, a: m.linalg.inv(a), (2, 0, 0)),
    ("det", lambda m, a: m.linalg.det(a), (0, 0)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a), (3, 0, 0)),
    ("solve", lambda m, a: m.linalg.solve(a, a), (0, 0)),
    ("cholesky", lambda m, a: m.linalg.cholesky(a), (0, 3, 3)),
    ("svd", lambda m, a: m.linalg.svd(a, full_matrices=False), (2, 0, 3)),
    ("svdvals", lambda m, a: m.linalg.svdvals(a), (3, 0)),
    ("qr", lambda m, a: m.linalg.qr(a), (3, 0)),
    ("eigh", lambda m, a: m.linalg.eigh(a), (0, 0)),
    ("matrix_exp", lambda m, a: m.linalg.matrix_exp(a), (0, 2, 2)),
    ("matrix_norm", lambda m, a: m.linalg.matrix_norm(a, 2), (0, 3)),
    ("matrix_norm_1", lambda m, a: m.linalg.matrix_norm(a, 1), (0, 3)),
    ("vector_norm", lambda m, a: m.linalg.vector_norm(a), (0, 3)),
    ("cdist", lambda m, a: m.cdist(a, a[:1] if a.shape[0] else a), (0, 3)),
    ("pinv", lambda m, a: m.linalg.pinv(a), (0, 3)),
    ("trace", lambda m, a: m.trace(a), (0, 3)),
    ("kron", lambda m, a: m.kron(a, a), (0, 3)),
]


@requires_torch
@pytest.mark.parametrize("name,fn,shape", EMPTY, ids=[e[0] for e in EMPTY])
def test_parity_empty(name, fn, shape):
    compare_torch(lambda a: fn(ember, a), lambda a: fn(torch, a), np.zeros(shape))


@requires_torch
@pytest.mark.parametrize("name,fn", [
    ("matrix_power", lambda m, a: m.linalg.matrix_power(a, 3)),
    ("matrix_power_0", lambda m, a: a.matrix_power(0)),
    ("kron", lambda m, a: m.kron(a, a[:1])),
    ("kron_bool", lambda m, a: m.kron(a > 0, a < 2)),
    ("trace", lambda m, a: a.trace()),
    ("diag", lambda m, a: m.diag(a, 1)),
    ("diag_embed", lambda m, a: m.diag_embed(a)),
    ("diagonal", lambda m, a: m.diagonal(a, -1)),
    ("cross", lambda m, a: m.linalg.cross(a, a.flip(0), dim=0)),
    ("vander", lambda m, a: m.linalg.vander(a[0])),
    ("multi_dot", lambda m, a: m.linalg.multi_dot([a, a, a])),
    ("inner", lambda m, a: m.inner(a, a)),
    ("vdot", lambda m, a: m.vdot(a[0], a[1])),
    ("addmv", lambda m, a: m.addmv(a[0], a, a[1], beta=2, alpha=3)),
    ("addr", lambda m, a: m.addr(a, a[0], a[1])),
])
def test_integer_inputs(name, fn):
    """Products, powers and diagonals take integer tensors (exact int64 results, as PyTorch)."""
    a = np.arange(-4, 5).reshape(3, 3) % 5 - 1
    e, t = fn(ember, ember.tensor(a)), fn(torch, torch.tensor(a))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_diagonal_is_a_writable_view():
    x = ember.zeros(3, 4)
    d = x.diagonal(1)
    d.fill_(2.0)
    assert x[0, 1].item() == 2.0 and x[2, 3].item() == 2.0 and x.sum().item() == 6.0
    assert d._version == x._version
    y = ember.linalg.diagonal(ember.zeros(2, 3, 3))
    assert y.shape == (2, 3) and y._base is not None


# ---------------------------------------------------------------------- named tuples, values of the _ex variants
def test_named_tuples():
    a = ember.tensor(mat(3, 3))
    for r, typ, fields in [
        (ember.linalg.slogdet(a), "linalg_slogdet", ("sign", "logabsdet")),
        (ember.slogdet(a), "slogdet", ("sign", "logabsdet")),
        (ember.linalg.inv_ex(a), "linalg_inv_ex", ("inverse", "info")),
        (ember.linalg.cholesky_ex(a @ a.mT), "linalg_cholesky_ex", ("L", "info")),
        (ember.linalg.solve_ex(a, a), "linalg_solve_ex", ("result", "info")),
        (ember.linalg.qr(a), "linalg_qr", ("Q", "R")),
        (ember.qr(a), "qr", ("Q", "R")),
        (ember.linalg.svd(a), "linalg_svd", ("U", "S", "Vh")),
        (ember.svd(a), "svd", ("U", "S", "V")),
        (ember.linalg.eigh(a), "linalg_eigh", ("eigenvalues", "eigenvectors")),
        (ember.linalg.eig(ember.tensor(real_eig(3))), "linalg_eig", ("eigenvalues", "eigenvectors")),
        (ember.linalg.lstsq(a, a), "linalg_lstsq", ("solution", "residuals", "rank", "singular_values")),
        (ember.linalg.lu_factor(a), "linalg_lu_factor", ("LU", "pivots")),
        (ember.linalg.lu_factor_ex(a), "linalg_lu_factor_ex", ("LU", "pivots", "info")),
        (ember.linalg.lu(a), "linalg_lu", ("P", "L", "U")),
        (ember.triangular_solve(a, a), "triangular_solve", ("solution", "cloned_coefficient")),
    ]:
        assert type(r) is getattr(ember.return_types, typ) and r._fields == fields
        assert repr(r).startswith(f"ember.return_types.{typ}(\n{fields[0]}=")
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is type(r)


def test_ex_variants_report_info_without_raising():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    batch = ember.tensor(np.stack([np.eye(2), s, 2 * np.eye(2)]))
    inv, info = ember.linalg.inv_ex(batch)
    assert info.dtype == ember.int32 and info.tolist() == [0, 2, 0]
    np.testing.assert_allclose(inv.numpy()[[0, 2]], [np.eye(2), np.eye(2) / 2])
    assert np.isnan(inv.numpy()[1]).all()
    x, info = ember.linalg.solve_ex(batch, ember.ones(2, 1, dtype=ember.float64))
    assert info.tolist() == [0, 2, 0] and np.isnan(x.numpy()[1]).all()
    np.testing.assert_allclose(x.numpy()[2], [[0.5], [0.5]])
    lu, piv, info = ember.linalg.lu_factor_ex(ember.tensor(s))
    np.testing.assert_array_equal(lu.numpy(), [[2.0, 4.0], [0.5, 0.0]])
    assert piv.tolist() == [2, 2] and piv.dtype == ember.int32 and info.item() == 2
    for a, want_l, want_info in [(np.array([[1.0, 2.0], [2.0, 1.0]]), [[1, 0], [2, -3]], 2),
                                 (np.array([[4.0, 2, 0], [2, 1, 0], [0, 0, 1]]), [[2, 0, 0], [1, 0, 0], [0, 0, 1]], 2)]:
        L, info = ember.linalg.cholesky_ex(ember.tensor(a))  # LAPACK's partial factor, as PyTorch returns it
        np.testing.assert_allclose(L.numpy(), want_l)
        assert info.item() == want_info and info.dtype == ember.int32
    L, info = ember.linalg.cholesky_ex(ember.tensor(np.stack([spd(3, 3), -np.eye(3)])))
    assert info.tolist() == [0, 1]
    np.testing.assert_allclose(L.numpy()[0], np.linalg.cholesky(spd(3, 3)))


def test_lstsq_outputs():
    a, b = ember.tensor(mat(2, 5, 3, seed=1)), ember.tensor(rand(2, 5, seed=2))
    r = ember.linalg.lstsq(a, b, driver="gelsd")  # B as a batch of vectors
    assert r.solution.shape == (2, 3) and r.residuals.shape == (2, 1) and r.rank.tolist() == [3, 3]
    assert r.singular_values.shape == (2, 3) and r.rank.dtype == ember.int64
    r = ember.linalg.lstsq(a, b)  # gelsy: no residuals, no singular values
    assert r.residuals.shape == (0,) and r.singular_values.shape == (0,) and r.rank.shape == (2,)
    r = ember.linalg.lstsq(ember.ones(5, 3, dtype=ember.float64), ember.ones(5, 2, dtype=ember.float64), driver="gelss")
    assert r.rank.item() == 1 and r.residuals.shape == (0,)  # (rank-deficient: no residuals)
    np.testing.assert_allclose(r.solution.numpy(), np.full((3, 2), 1 / 3))  # the minimum-norm solution


def test_matrix_rank_and_tolerances():
    a = ember.tensor(np.diag([1.0, 1e-3, 0.0]))
    assert ember.linalg.matrix_rank(a).item() == 2
    assert ember.linalg.matrix_rank(a, atol=1e-2).item() == 1
    assert ember.linalg.matrix_rank(a, rtol=1e-2).item() == 1
    assert ember.linalg.matrix_rank(a, tol=1e-4).item() == 2
    assert ember.linalg.matrix_rank(-a, hermitian=True).item() == 2
    np.testing.assert_allclose(ember.linalg.pinv(a, atol=1e-2).numpy(), np.diag([1.0, 0, 0]))
    np.testing.assert_allclose(ember.pinverse(a, rcond=1e-2).numpy(), np.diag([1.0, 0, 0]))
    np.testing.assert_allclose(ember.linalg.cond(a[:2, :2]).item(), 1e3)
    assert ember.linalg.cond(ember.tensor(np.array([[1.0, 2.0], [2.0, 4.0]])), "fro").item() == math.inf


def test_svd_compute_uv_false_and_some():
    a = ember.tensor(mat(4, 2))
    u, s, v = ember.svd(a, compute_uv=False)
    assert u.shape == (4, 4) and v.shape == (2, 2) and not u.numpy().any()
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(mat(4, 2), compute_uv=False))
    u, s, v = ember.svd(a, some=False)
    assert u.shape == (4, 4) and v.shape == (2, 2)
    q, r = ember.qr(a, some=False)
    assert q.shape == (4, 4) and r.shape == (4, 2)
    q, r = ember.linalg.qr(a, mode="r")
    assert q.shape == (0,) and r.shape == (2, 2)


def test_matrix_exp_batch_of_mixed_scales():
    """Each matrix gets its own scaling (one needs none, one many squarings) and the result is exact to rounding."""
    a = np.stack([np.diag([1e-4, -1e-4]), np.array([[0.0, 30.0], [-30.0, 0.0]]), np.array([[2.0, 1.0], [0.0, 2.0]])])
    want = np.stack([np.diag(np.exp([1e-4, -1e-4])), [[np.cos(30), np.sin(30)], [-np.sin(30), np.cos(30)]],
                     np.exp(2) * np.array([[1.0, 1.0], [0.0, 1.0]])])
    np.testing.assert_allclose(ember.linalg.matrix_exp(ember.tensor(a)).numpy(), want, rtol=1e-12, atol=1e-12)


def test_cross_default_dim_warns_and_picks_the_first_size_3_dim():
    a, b = rand(4, 3, 3, seed=1), rand(4, 3, 3, seed=2)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        r = ember.cross(ember.tensor(a), ember.tensor(b))
    np.testing.assert_allclose(r.numpy(), np.cross(a, b, axis=1))


def test_namespace():
    import ember.nn.functional as F
    for name in ["norm", "vector_norm", "matrix_norm", "inv", "inv_ex", "det", "slogdet", "solve", "solve_ex",
                 "solve_triangular", "cholesky", "cholesky_ex", "qr", "svd", "svdvals", "eig", "eigvals", "eigh",
                 "eigvalsh", "pinv", "lstsq", "matrix_rank", "matrix_power", "matrix_exp", "multi_dot", "cross",
                 "vecdot", "diagonal", "matmul", "cond", "tensorinv", "tensorsolve", "vander", "lu_factor",
                 "lu_factor_ex", "lu", "lu_solve", "LinAlgError"]:
        assert hasattr(ember.linalg, name), name
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    assert ember.linalg.svd.__name__ == "svd"
    assert getattr(F, "pdist", linalg_ext.pdist) is linalg_ext.pdist  # (bound by nn.functional once wired)


# ---------------------------------------------------------------------- the NumPy-only paths (no SciPy)
def test_lu_without_scipy_matches_lapack(monkeypatch):
    pytest.importorskip("scipy")
    a = rand(2, 50, 50, seed=3)
    a[1, :, 7] = 0  # a singular one: info is its first zero pivot, 8
    want = linalg_ext._lu_arrays(a)  # (SciPy's getrf per matrix at this size)
    monkeypatch.setattr(linalg_ext, "_scipy_getrf", lambda dtype: None)
    got = linalg_ext._lu_arrays(a)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], atol=1e-10)
    assert got[2].tolist() == want[2].tolist() == [0, 8]


def test_solve_triangular_without_scipy(monkeypatch):
    a, b = mat(4, 4, seed=1), rand(4, 3, seed=2)
    monkeypatch.setattr(linalg_ext, "_scipy_trsm", lambda: None)
    for upper in (True, False):
        for unit in (True, False):
            t = np.triu(a) if upper else np.tril(a)
            if unit:
                np.fill_diagonal(t, 1)
            got = linalg_ext._solve_triangular(a, b, upper, unit)
            np.testing.assert_allclose(got, np.linalg.solve(t, b), atol=1e-12)
    a, b = mat(20, 4, 4, seed=3), rand(20, 4, 2, seed=4)  # (a batch of 16 or more: substitution over the batch)
    for upper, unit in ((True, False), (False, True)):
        t = np.triu(a) if upper else np.tril(a)
        if unit:
            t[:, range(4), range(4)] = 1
        np.testing.assert_allclose(linalg_ext._solve_triangular(a, b, upper, unit), np.linalg.solve(t, b), atol=1e-12)
    a, b = mat(4, 4, seed=1), rand(4, 3, seed=2)
    z = np.triu(a)
    z[1, 1] = 0  # a zero on the diagonal: inf/NaN as LAPACK's trsm, no error
    r = ember.linalg.solve_triangular(ember.tensor(z), ember.tensor(b), upper=True).numpy()
    assert not np.isfinite(r[:2]).all() and np.isfinite(r[2:]).all()


# ---------------------------------------------------------------------- errors
def _value_of(fn):
    """Call fn and read its result, so that an error of a deferred op (EMBER_LAZY) surfaces here."""
    def run(lib):
        out = fn(lib)
        for o in out if isinstance(out, tuple) else (out,):
            o.tolist()
    return run


SING = [[1.0, 2.0], [2.0, 4.0]]
NOT_PD = [[1.0, 2.0], [2.0, 1.0]]

ERRORS = [
    ("inv singular", lambda m: m.linalg.inv(m.tensor(SING)), RuntimeError,
     r"^linalg\.inv: The diagonal element 2 is zero, the inversion could not be completed because the input matrix "
     r"is singular\.$"),
    ("inv singular batch", lambda m: m.inverse(m.tensor([np.eye(2).tolist(), SING, SING])), RuntimeError,
     r"^linalg\.inv: \(Batch element 1\): The diagonal element 2 is zero"),
    ("inv third pivot", lambda m: m.linalg.inv(m.tensor(np.diag([1.0, 2.0, 0.0]))), RuntimeError, r"element 3 is zero"),
    ("inv_ex check_errors", lambda m: m.linalg.inv_ex(m.tensor(SING), check_errors=True), RuntimeError,
     r"linalg\.inv_ex: The diagonal element 2 is zero"),
    ("cholesky not pd", lambda m: m.linalg.cholesky(m.tensor(NOT_PD)), RuntimeError,
     r"^linalg\.cholesky: The factorization could not be completed because the input is not positive-definite "
     r"\(the leading minor of order 2 is not positive-definite\)\.$"),
    ("cholesky batch", lambda m: m.linalg.cholesky(m.tensor([np.eye(2).tolist(), NOT_PD])), RuntimeError,
     r"^linalg\.cholesky: \(Batch element 1\): The factorization could not be completed.*order 2"),
    ("cholesky upper reads the upper triangle", lambda m: m.linalg.cholesky(m.tensor([[4.0, 100.0], [1.0, 3.0]]),
                                                                            upper=True), RuntimeError, r"order 2"),
    ("torch.cholesky", lambda m: m.cholesky(m.tensor(NOT_PD)), RuntimeError, r"^cholesky: The factorization"),
    ("cholesky_ex check_errors", lambda m: m.linalg.cholesky_ex(-m.eye(2), check_errors=True), RuntimeError,
     r"order 1 is not positive-definite"),
    ("solve singular", lambda m: m.linalg.solve(m.tensor([np.eye(2).tolist(), SING]), m.ones(2, 1)),
     RuntimeError, r"linalg\.solve: \(Batch element 1\): The solver failed because the input matrix is singular\."),
    ("matrix_power singular", lambda m: m.linalg.matrix_power(m.tensor(SING), -1), RuntimeError,
     r"linalg\.inv: The diagonal"),
    ("lu_factor singular", lambda m: m.linalg.lu_factor(m.tensor(SING)), RuntimeError,
     r"linalg\.lu_factor: U\[2,2\] is zero"),
    ("lu_factor no pivot", lambda m: m.linalg.lu_factor(m.eye(2), pivot=False), RuntimeError,
     r"LU without pivoting is not implemented on the CPU"),
    ("int input", lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.int64)), RuntimeError,
     r"linalg\.inv: Expected a floating point or complex tensor as input\. Got Long"),
    ("half input", lambda m: m.linalg.det(m.ones(2, 2, dtype=m.float16)), RuntimeError,
     r"linalg\.det: Low precision dtypes not supported\. Got Half"),
    ("bool input", lambda m: m.linalg.svd(m.ones(2, 2, dtype=m.bool)), RuntimeError, r"linalg\.svd: .*Got Bool"),
    ("non-square", lambda m: m.linalg.det(m.ones(2, 3)), RuntimeError,
     r"linalg\.det: A must be batches of square matrices, but they are 2 by 3 matrices"),
    ("1-D", lambda m: m.linalg.cholesky(m.ones(3)), RuntimeError,
     r"linalg\.cholesky: The input tensor A must have at least 2 dimensions"),
    ("solve dtypes", lambda m: m.linalg.solve(m.eye(2, dtype=m.float64), m.ones(2)), RuntimeError,
     r"linalg\.solve: Expected A and B to have the same dtype, but found A of type Double and B of type Float"),
    ("solve shapes", lambda m: m.linalg.solve(m.eye(3), m.ones(4, 2)), RuntimeError,
     r"linalg\.solve: Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x2\)"),
    ("solve right shapes", lambda m: m.linalg.solve(m.eye(3), m.ones(3, 2), left=False), RuntimeError,
     r"equation XA = B \(3x3 and 3x2\)"),
    ("solve batch", lambda m: m.linalg.solve(m.eye(3).expand(2, 3, 3), m.ones(4, 3, 1)), RuntimeError,
     r"The size of tensor a \((2|4)\) must match the size of tensor b \((4|2)\) at non-singleton dimension 0"),
    ("solve_triangular 1-D B", lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2), upper=True), RuntimeError,
     r"linalg\.solve_triangular: The input tensor B must have at least 2 dimensions"),
    ("solve_triangular upper is required", lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2, 2)), TypeError,
     r"upper"),
    ("triangular_solve shapes", lambda m: m.triangular_solve(m.ones(3, 1), m.eye(2)), RuntimeError,
     r"Incompatible matrix sizes for triangular_solve: each A matrix is 2 by 2 but each b matrix is 3 by 1"),
    ("cholesky_solve shapes", lambda m: m.cholesky_solve(m.ones(3, 2), m.eye(2)), RuntimeError,
     r"Incompatible matrix sizes for cholesky_solve"),
    ("cholesky_solve 1-D", lambda m: m.cholesky_solve(m.ones(2), m.eye(2)), RuntimeError, r"at least 2 dimensions"),
    ("qr mode", lambda m: m.linalg.qr(m.eye(2), mode="x"), RuntimeError, r"qr received unrecognized mode 'x'"),
    ("eigh UPLO", lambda m: m.linalg.eigh(m.eye(2), UPLO="X"), RuntimeError,
     r"Expected UPLO argument to be 'L' or 'U'"),
    ("lstsq driver", lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(3, 1), driver="x"), RuntimeError,
     r"parameter `driver` should be one of \(gels, gelsy, gelsd, gelss\)"),
    ("lstsq rows", lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(4, 2)), RuntimeError,
     r"input\.size\(-2\) should match other\.size\(-2\)"),
    ("lstsq dtypes", lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(3, 2, dtype=m.float64)), RuntimeError,
     r"lstsq: Expected input and other to have the same dtype"),
    ("pinv int", lambda m: m.linalg.pinv(m.ones(2, 2, dtype=m.int64)), RuntimeError,
     r"linalg\.pinv\(Long\{\[2, 2\]\}\)"),
    ("matrix_power float n", lambda m: m.linalg.matrix_power(m.eye(2), 1.5), TypeError,
     r"argument 'n' \(position 2\) must be int, not float"),
    ("matrix_power non-square", lambda m: m.linalg.matrix_power(m.ones(2, 3), 2), RuntimeError,
     r"linalg\.matrix_power: A must be batches of square matrices"),
    ("matrix_norm ord", lambda m: m.linalg.matrix_norm(m.ones(2, 2), 3), RuntimeError,
     r"linalg\.matrix_norm: Order 3 not supported"),
    ("matrix_norm dims", lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=(0, 0)), RuntimeError,
     r"linalg\.matrix_norm: dims must be different\. Got \(0, 0\)"),
    ("matrix_norm narrowing", lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.float64), dtype=m.float32),
     RuntimeError, r"should be convertible without narrowing"),
    ("vector_norm str", lambda m: m.linalg.vector_norm(m.ones(3), "fro"), TypeError,
     r"'ord' .* must be Number, not str"),
    ("vector_norm int", lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.int64)), RuntimeError,
     r"linalg\.vector_norm: Expected a floating point or complex tensor as input\. Got Long"),
    ("vector_norm empty inf", lambda m: m.linalg.vector_norm(m.ones(0), math.inf), RuntimeError,
     r"cannot compute the inf norm on an empty tensor"),
    ("norm 3-D with ord", lambda m: m.linalg.norm(m.ones(2, 2, 2), "fro"), RuntimeError,
     r"linalg\.(norm|matrix_norm)"),
    ("norm 3 dims", lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=(0, 1, 2)), RuntimeError,
     r"linalg\.norm: If dim is specified, it must be of length 1 or 2\. Got \[0, 1, 2\]"),
    ("cond ord", lambda m: m.linalg.cond(m.eye(2), 3), RuntimeError, r"linalg\.cond got an invalid norm type: 3"),
    ("cond non-square", lambda m: m.linalg.cond(m.ones(2, 3), "fro"), RuntimeError,
     r"linalg\.cond\(ord=fro\): A must be batches of square matrices, but they are 2 by 3 matrices"),
    ("cross size", lambda m: m.linalg.cross(m.ones(2, 4), m.ones(2, 4)), RuntimeError,
     r"linalg\.cross: inputs dimension -1 must have length 3\. Got 4 and 4"),
    ("cross ndim", lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3)), RuntimeError,
     r"linalg\.cross: inputs must have the same number of dimensions"),
    ("cross no size 3", lambda m: m.cross(m.ones(4, 2), m.ones(4, 2)), RuntimeError,
     r"no dimension of size 3 in input"),
    ("cdist mode", lambda m: m.cdist(m.ones(3, 2), m.ones(3, 2), compute_mode="x"), ValueError,
     r"x is not a valid value for compute_mode"),
    ("cdist p", lambda m: m.cdist(m.ones(3, 2), m.ones(3, 2), p=-1), RuntimeError,
     r"cdist only supports non-negative p values"),
    ("cdist columns", lambda m: m.cdist(m.ones(3, 2), m.ones(3, 4)), RuntimeError,
     r"X1 and X2 must have the same number of columns\. X1: 2 X2: 4"),
    ("cdist 1-D", lambda m: m.cdist(m.ones(3), m.ones(3)), RuntimeError, r"cdist only supports at least 2D tensors"),
    ("cdist int", lambda m: m.cdist(m.ones(3, 2, dtype=m.int64), m.ones(3, 2, dtype=m.int64)), RuntimeError,
     r"cdist only supports floating-point dtypes, X1 got: Long"),
    ("pdist 1-D", lambda m: m.pdist(m.ones(3)), RuntimeError, r"pdist only supports 2D tensors, got: 1D"),
    ("pdist p", lambda m: m.pdist(m.ones(3, 2), -1), RuntimeError, r"pdist only supports non-negative p values"),
    ("multi_dot one", lambda m: m.linalg.multi_dot([m.eye(2)]), RuntimeError, r"expected at least 2 tensors but got 1"),
    ("multi_dot last 3-D", lambda m: m.linalg.multi_dot([m.eye(3), m.ones(2, 3, 3)]), RuntimeError,
     r"the last tensor must be 1D or 2D but got 3D"),
    ("multi_dot shapes", lambda m: m.linalg.multi_dot([m.eye(3), m.eye(4)]), RuntimeError,
     r"tensors 0 and 1 with shapes \[3, 3\] and \[4, 4\] cannot be multiplied"),
    ("multi_dot dtypes", lambda m: m.linalg.multi_dot([m.eye(3), m.eye(3, dtype=m.float64)]), RuntimeError,
     r"all tensors must have be the same dtype but tensor 0 is float and tensor 1 double"),
    ("trace 3-D", lambda m: m.trace(m.ones(2, 2, 2)), RuntimeError,
     r"trace: expected a matrix, but got tensor with dim 3"),
    ("diag 3-D", lambda m: m.diag(m.ones(2, 2, 2)), RuntimeError, r"diag\(\): Supports 1D or 2D tensors\. Got 3D"),
    ("diagonal same dims", lambda m: m.diagonal(m.ones(2, 3), dim1=1, dim2=1), RuntimeError,
     r"diagonal dimensions cannot be identical 1, 1"),
    ("diag_embed dims", lambda m: m.diag_embed(m.ones(2), dim1=5), IndexError, r"Dimension out of range"),
    ("inner shapes", lambda m: m.inner(m.ones(2, 3), m.ones(4, 2)), RuntimeError,
     r"inner\(\) the last dimension must match on both input tensors but got shapes \[2, 3\] and \[4, 2\]"),
    ("vdot 2-D", lambda m: m.vdot(m.ones(3, 1), m.ones(3, 1)), RuntimeError, r"1D tensors expected, but got 2D and 2D"),
    ("vdot sizes", lambda m: m.vdot(m.ones(2), m.ones(3)), RuntimeError, r"inconsistent tensor size"),
    ("addmv shapes", lambda m: m.addmv(m.ones(2), m.ones(2, 3), m.ones(4)), RuntimeError,
     r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    ("addr vec1", lambda m: m.addr(m.ones(2, 3), m.ones(2, 1), m.ones(3)), RuntimeError,
     r"addr: Expected 1-D argument vec1, but got 2-D"),
    ("addbmm batches", lambda m: m.addbmm(m.ones(2, 4), m.ones(5, 2, 3), m.ones(4, 3, 4)), RuntimeError,
     r"batch1 and batch2 must have same number of batches, got 5 and 4"),
    ("tensorinv shape", lambda m: m.linalg.tensorinv(m.ones(4, 6, 8, 2), ind=2), RuntimeError,
     r"prod\(self\.shape\[ind:\]\) == prod\(self\.shape\[:ind\]\), but got 16 != 24"),
    ("tensorsolve shape", lambda m: m.linalg.tensorsolve(m.ones(6, 2, 3), m.ones(5)), RuntimeError,
     r"prod\(self\.shape\[other\.ndim:\]\) == prod\(self\.shape\[:other\.ndim\]\)"),
    ("vander N", lambda m: m.linalg.vander(m.ones(3), N=0), RuntimeError, r"N must be greater than 1"),
    ("vander bool", lambda m: m.linalg.vander(m.ones(2, dtype=m.bool)), RuntimeError,
     r"linalg\.vander supports floating point, complex, and integer tensors, but got Bool"),
    ("lu_solve pivots dtype", lambda m: m.linalg.lu_solve(m.eye(2), m.tensor([1, 2]), m.ones(2, 1)), RuntimeError,
     r"pivots should be a Tensor of scalar type torch\.int32"),
    ("lu_solve shapes", lambda m: m.linalg.lu_solve(m.eye(2), m.tensor([1, 2], dtype=m.int32), m.ones(3, 1)),
     RuntimeError, r"linalg\.lu_solve: Incompatible shapes of A and B for the equation AX = B \(2x2 and 3x1\)"),
    ("qr r backward", lambda m: m.linalg.qr(m.eye(2).requires_grad_(), mode="r")[1].sum().backward(), RuntimeError,
     r"The derivative of linalg\.qr depends on Q, which is not computed when mode='r'"),
    ("qr complete backward", lambda m: m.linalg.qr(m.ones(3, 2).requires_grad_(), mode="complete")[0].sum().backward(),
     RuntimeError, r"not differentiable when mode='complete' and nrows > ncols"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(case):
    _, fn, exc, match = case
    from helpers import raises_like_torch
    raises_like_torch(_value_of(fn), ember, exc, match)
    if torch is not None:
        raises_like_torch(_value_of(fn), torch, exc)


def test_singular_errors_are_linalg_errors():
    with pytest.raises(ember.linalg.LinAlgError):
        _value_of(lambda m: m.linalg.inv(m.tensor(SING)))(ember)
    with pytest.raises(ember.linalg.LinAlgError):
        _value_of(lambda m: m.linalg.cholesky(m.tensor(NOT_PD)))(ember)


def test_eig_complex_is_a_clear_error():
    rot = ember.tensor([[0.0, 1.0], [-1.0, 0.0]])
    for fn in (ember.linalg.eig, ember.linalg.eigvals):
        with pytest.raises(RuntimeError, match=r"linalg\.eig(vals)?: the result is complex.*no complex dtype"):
            _value_of(lambda m: fn(rot))(ember)
