"""Forward-mode AD of the linear-algebra and sparse ops (ember/ops/linalg.py, linalg_ext.py, sparse_ops.py) where
tests/test_linalg*.py and tests/test_sparse.py do not reach it: the LU of rectangular matrices (whose reverse mode
ember does not have), full_matrices SVD of rectangular matrices, det at singular matrices, QR's errors, the sparse
ops (PyTorch has no forward mode for them: finite differences only), and forward over reverse (Hessian-vector
products through the rules' own derivatives).
"""
import numpy as np
import pytest
from helpers import compare_torch_jvp, leaf, rand, requires_torch, torch

import ember
from ember.autograd import forward_ad as fw


def mat(*shape, seed=0):
    """Well-conditioned (square part: + 2·I) float64 matrices."""
    a = rand(*shape, seed=seed)
    k = min(shape[-2:])
    a[..., range(k), range(k)] += 2.0
    return a


def forward_gradcheck(fn, *arrays):
    """The forward-mode Jacobian of fn against central differences (reverse mode is checked elsewhere; forward AD
    runs eagerly, so this runs the same under EMBER_TEST_COMPILE)."""
    xs = [leaf(a) for a in arrays]
    assert ember.autograd.gradcheck(fn, xs, check_forward_ad=True, check_backward_ad=False)


# ---------------------------------------------------------------------- LU of any shape
LU_SHAPES = [(2, 3, 3), (2, 5, 3), (3, 2, 4), (4, 2)]


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_forward(shape):
    """P A = L U: the tangent of the packed LU (and of L, U) for square, tall and wide, batched matrices."""
    forward_gradcheck(lambda a: ember.linalg.lu_factor(a).LU, rand(*shape, seed=1))
    forward_gradcheck(lambda a: ember.linalg.lu(a)[1:], rand(*shape, seed=2))


@requires_torch
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_forward_parity(shape):
    compare_torch_jvp(lambda a: ember.linalg.lu_factor(a).LU, lambda a: torch.linalg.lu_factor(a).LU,
                      rand(*shape, seed=1))
    compare_torch_jvp(lambda a: ember.linalg.lu(a), lambda a: torch.linalg.lu(a), rand(*shape, seed=2))


# ---------------------------------------------------------------------- SVD with full matrices
def _gauge(m, u, s, vh):
    """Singular vectors with the sign of U's first row made positive (LAPACK builds may pick either sign)."""
    k = s.shape[-1]
    sign = m.sign(u[..., :1, :k])
    return u[..., :, :k] * sign, s, vh[..., :k, :] * sign.mT, u[..., :, k:], vh[..., k:, :]


@requires_torch
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 5)])
def test_svd_full_matrices_forward_parity(shape):
    """The extra singular vectors of a rectangular matrix are arbitrary: their tangents are zero, as PyTorch's."""
    compare_torch_jvp(lambda a: _gauge(ember, *ember.linalg.svd(a)), lambda a: _gauge(torch, *torch.linalg.svd(a)),
                      mat(*shape, seed=3))


# ---------------------------------------------------------------------- det where A is singular
def test_det_forward_at_singular_matrices():
    """det' = tr(adj(A) A'), from the SVD where det A = 0 (the rank-n−1 one has a nonzero derivative)."""
    a = mat(3, 3, 3, seed=4)
    a[1, 2] = a[1, 0] + a[1, 1]  # singular, rank 2
    a[2, :, 0] = 0.0  # singular
    forward_gradcheck(ember.linalg.det, a)


# ---------------------------------------------------------------------- QR's errors
@pytest.mark.parametrize("shape,mode,match", [((4, 3), "complete", "not differentiable when mode='complete'"),
                                               ((3, 3), "r", "depends on Q, which is not computed")])
def test_qr_forward_errors(shape, mode, match):
    with fw.dual_level():
        a = fw.make_dual(ember.tensor(mat(*shape)), ember.ones(*shape, dtype=ember.float64))
        with pytest.raises(RuntimeError, match=match):
            ember.linalg.qr(a, mode=mode)


# ---------------------------------------------------------------------- sparse ops
I2 = ember.tensor([[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]])  # a repeated position: uncoalesced
J2 = ember.tensor([[2, 0, 1], [3, 0, 2]])
I1 = ember.tensor([[1, 0, 1, 3]])  # one sparse dim, a dense dim of 2


def _s(v, i=I2):
    return ember.sparse_coo_tensor(i, v, (3, 4) if i is not I1 else (4, 2))


SPARSE = {  # name -> (fn, input shapes); every input is float64
    "mask": (lambda d: d.sparse_mask(_s(ember.ones(5, dtype=ember.float64))).to_dense(), [(3, 4)]),
    "add": (lambda v, w: (_s(v) + _s(w, J2)).to_dense(), [(5,), (3,)]),
    "add_coalesced": (lambda v, w: (_s(v).coalesce() - _s(w, J2).coalesce()).to_dense(), [(5,), (3,)]),
    "scale": (lambda v: (-_s(v) / 2).t().to_dense(), [(5,)]),
    "clone_values": (lambda v: _s(v).clone().coalesce().values(), [(5,)]),
    "dense_add": (lambda v, d: d - _s(v) * 3, [(5,), (3, 4)]),
    "mul_dense": (lambda v, d: (_s(v) * d).to_dense(), [(5,), (3, 4)]),
    "mul_sparse": (lambda v, w: (_s(v) * _s(w, J2)).to_dense(), [(5,), (3,)]),
    "spmv": (lambda v, x: _s(v) @ x, [(5,), (4,)]),
    "vec_sp": (lambda v, x: x @ _s(v), [(5,), (3,)]),
    "addmm": (lambda c, v, d: ember.sparse.addmm(c, _s(v), d, beta=0.5, alpha=2.0), [(3, 1), (5,), (4, 2)]),
    "sum_all": (lambda v: ember.sparse.sum(_s(v, I1)), [(4, 2)]),
    "sum_dense_dim": (lambda v: ember.sparse.sum(_s(v, I1), 1).to_dense(), [(4, 2)]),
    "to_sparse_hybrid": (lambda x: ember.sparse.sum(x.to_sparse(1), 0) * 2, [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_sparse_forward(name):
    fn, shapes = SPARSE[name]
    forward_gradcheck(fn, *[rand(*s, seed=k) for k, s in enumerate(shapes)])


def test_sparse_tangent_lies_on_the_entries():
    """A sparse tensor built from dual values carries the sparse tensor of their tangents on the same entries."""
    v, tv = rand(5, seed=1), rand(5, seed=2)
    with fw.dual_level():
        s = _s(fw.make_dual(ember.tensor(v), ember.tensor(tv)))
        dense = s.to_dense()
        tangent = fw.unpack_dual(dense).tangent
    expect = np.zeros((3, 4))
    np.add.at(expect, tuple(I2.numpy()), tv)
    np.testing.assert_allclose(tangent.numpy(), expect)


# ---------------------------------------------------------------------- forward over reverse
HVP = {  # scalar functions of one matrix: their Hessian-vector products through jvp of grad
    "inv": lambda a: (ember.linalg.inv(a) ** 2).sum(),
    "det": lambda a: ember.linalg.det(a),
    "slogdet": lambda a: ember.linalg.slogdet(a)[1],
    "solve_triangular": lambda a: ember.linalg.solve_triangular(a, a.mT, upper=True).sum(),
    "cholesky": lambda a: ember.linalg.cholesky(a @ a.mT).sum(),
    "qr": lambda a: (ember.linalg.qr(a)[1] ** 2).sum(),
    "svdvals": lambda a: ember.linalg.svdvals(a).sum(),
    "eigh": lambda a: (ember.linalg.eigh(a + a.mT)[0] ** 3).sum(),
    "pinv": lambda a: ember.linalg.pinv(a).sum(),
    "matrix_exp": lambda a: ember.linalg.matrix_exp(a).sum(),
    "einsum": lambda a: ember.einsum("ij,jk,ki->", a, a, a),
    "cdist": lambda a: ember.cdist(a, a.flip(0) + 1).sum(),
}


@pytest.mark.parametrize("name", sorted(HVP))
def test_forward_over_reverse(name):
    """jvp(grad f)(A; V) = H V, equal to the reverse-over-reverse product ∇⟨∇f(A), V⟩."""
    f = HVP[name]
    a, v = ember.tensor(mat(3, 3, seed=5)), ember.tensor(rand(3, 3, seed=6))
    _, hv = ember.func.jvp(ember.func.grad(f), (a,), (v,))
    x = a.detach().requires_grad_()
    (g,) = ember.autograd.grad(f(x), x, create_graph=True)
    (expect,) = ember.autograd.grad((g * v).sum(), x)
    np.testing.assert_allclose(hv.numpy(), expect.numpy(), rtol=1e-7, atol=1e-9)
