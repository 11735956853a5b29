"""matmul / mm / bmm / mv / dot / outer / einsum / tensordot / addmm / baddbmm: gradients, PyTorch parity, errors."""
import numpy as np
import pytest

import ember
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

DTYPES = [np.float64, np.float32]


def pair(sa, sb, dtype=np.float64):
    return rand(*sa, seed=1, dtype=dtype), rand(*sb, seed=2, dtype=dtype)


# ---------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3,), (3,)),  # dot -> 0-d
    ((2, 3), (3,)),  # mv
    ((3,), (3, 4)),  # row vector, then removed
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),  # batch of rows @ weight: folded into one GEMM
    ((2, 2, 3), (3,)),
    ((3,), (2, 3, 4)),
    ((2, 3), (4, 3, 2)),  # 2-D operand broadcast over a batch
    ((2, 1, 2, 3), (3, 3, 2)),  # batch dims broadcast both ways
    ((1, 2, 3), (4, 3, 2)),
    ((2, 2, 3), (2, 3, 4)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_grad(sa, sb):
    check_grad(ember.matmul, *pair(sa, sb))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_torch(sa, sb, dtype):
    compare_torch(lambda a, b: a @ b, lambda a, b: a @ b, *pair(sa, sb, dtype))


NONCONTIG = [
    lambda: (rand(3, 2, seed=1).T, rand(4, 3, seed=2).T),  # transposed matrices
    lambda: (noncontig(rand(2, 2, 3, seed=1)), rand(3, 4, seed=2)),  # strided batch: no folding
    lambda: (rand(2, 3, 2, seed=1).transpose(0, 2, 1), noncontig(rand(3, 4, seed=2))),
    lambda: (noncontig(rand(3, seed=1)), rand(2, 4, 3, seed=2).transpose(0, 2, 1)),
]


@pytest.mark.parametrize("make", NONCONTIG)
def test_matmul_noncontiguous_grad(make):
    check_grad(ember.matmul, *make())


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make", NONCONTIG)
def test_matmul_noncontiguous_torch(make, dtype):
    a, b = (x.astype(dtype) for x in make())
    compare_torch(ember.matmul, torch.matmul, a, b)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_noncontiguous_upstream_grad(dtype):
    # the gradient reaching matmul is a transposed view: backward must not assume a contiguous gz
    compare_torch(lambda x, w: ember.einsum("bnm->bmn", x @ w), lambda x, w: (x @ w).transpose(1, 2),
                  *pair((2, 3, 4), (4, 5), dtype))


@requires_torch
@pytest.mark.parametrize("sa,sb", [((2, 2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3,)), ((2, 3), (4, 3, 2))])
def test_matmul_one_input_needs_grad(sa, sb):
    a, b = pair(sa, sb)
    for needs in ((True, False), (False, True)):
        x, w = ember.from_numpy(a.copy()), ember.from_numpy(b.copy())
        tx, tw = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        for e, t, r in ((x, tx, needs[0]), (w, tw, needs[1])):
            e.requires_grad_(r), t.requires_grad_(r)
        c = rand(*(tx @ tw).shape, seed=3)
        (x @ w).backward(ember.from_numpy(c))
        (tx @ tw).backward(torch.from_numpy(c))
        for e, t in ((x, tx), (w, tw)):
            if t.requires_grad:
                np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10)
            else:
                assert e.grad is None


def test_matmul_double_backward_through_grad():
    x = ember.from_numpy(rand(2, 3, seed=1)).requires_grad_()
    w = ember.from_numpy(rand(3, 4, seed=2)).requires_grad_()
    (gx,) = ember.autograd.grad((x @ w).sum(), [x], create_graph=True)
    (gw,) = ember.autograd.grad((gx * gx).sum(), [w])
    # gx = 1 @ wᵀ (each row = row sums of w), so d/dw sum(gx²) = 2 · n_rows · rowsum(w) broadcast over columns
    expected = 2 * 2 * np.repeat(rand(3, 4, seed=2).sum(1, keepdims=True), 4, axis=1)
    np.testing.assert_allclose(gw.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_matmul_integers(dtype):
    a = np.arange(6, dtype=dtype).reshape(2, 3)
    b = np.arange(12, dtype=dtype).reshape(3, 4)
    r = ember.from_numpy(a) @ ember.from_numpy(b)
    assert r.dtype == ember.tensor(np.zeros(1, dtype)).dtype
    np.testing.assert_array_equal(r.numpy(), a @ b)


def test_matmul_float32_stays_float32():
    r = ember.from_numpy(rand(2, 2, 3, dtype=np.float32)) @ ember.from_numpy(rand(3, 4, dtype=np.float32))
    assert r.dtype == ember.float32 and r.shape == (2, 2, 4)


def test_matmul_operators_and_methods():
    a, b = pair((2, 3), (3, 4))
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    expected = a @ b
    for r in (x @ y, x.matmul(y), y.__rmatmul__(x), ember.matmul(x, y), x.mm(y), ember.mm(x, y)):
        np.testing.assert_allclose(r.numpy(), expected, rtol=1e-12)
    with pytest.raises(TypeError):
        x @ 2
    with pytest.raises(TypeError):
        [[1.0, 2.0]] @ x
    with pytest.raises(TypeError, match="matmul"):
        ember.matmul(x, 2)


def test_matmul_empty():
    r = ember.zeros(2, 0) @ ember.zeros(0, 3)
    np.testing.assert_array_equal(r.numpy(), np.zeros((2, 3), np.float32))
    assert (ember.zeros(2, 2, 0) @ ember.zeros(0, 3)).shape == (2, 2, 3)


# ---------------------------------------------------------------------- mm, bmm, mv, dot, outer
TWO_OPERAND = [
    ("mm", ember.mm, lambda t: torch.mm, (2, 3), (3, 4)),
    ("bmm", ember.bmm, lambda t: torch.bmm, (2, 2, 3), (2, 3, 4)),
    ("mv", ember.mv, lambda t: torch.mv, (2, 3), (3,)),
    ("dot", ember.dot, lambda t: torch.dot, (3,), (3,)),
    ("outer", ember.outer, lambda t: torch.outer, (3,), (4,)),
    ("ger", ember.ger, lambda t: torch.outer, (2,), (3,)),
    ("mm_T", ember.mm, lambda t: torch.mm, "T", None),
]


def _operands(sa, sb, dtype=np.float64):
    if sa == "T":  # transposed (non-contiguous) matrices
        return rand(3, 2, seed=1, dtype=dtype).T, rand(4, 3, seed=2, dtype=dtype).T
    return pair(sa, sb, dtype)


@pytest.mark.parametrize("name,fn,tfn,sa,sb", TWO_OPERAND, ids=[c[0] for c in TWO_OPERAND])
def test_products_grad(name, fn, tfn, sa, sb):
    check_grad(fn, *_operands(sa, sb))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fn,tfn,sa,sb", TWO_OPERAND, ids=[c[0] for c in TWO_OPERAND])
def test_products_torch(name, fn, tfn, sa, sb, dtype):
    compare_torch(fn, tfn(None), *_operands(sa, sb, dtype))


def test_product_methods():
    a, b = pair((2, 3), (3,))
    x, v = ember.from_numpy(a), ember.from_numpy(b)
    np.testing.assert_allclose(x.mv(v).numpy(), a @ b)
    np.testing.assert_allclose(v.dot(v).numpy(), b @ b)
    np.testing.assert_allclose(v.outer(v).numpy(), np.outer(b, b))
    np.testing.assert_allclose(v.ger(v).numpy(), np.outer(b, b))
    bb = ember.from_numpy(rand(2, 2, 3))
    np.testing.assert_allclose(bb.bmm(ember.from_numpy(rand(2, 3, 2))).numpy(), rand(2, 2, 3) @ rand(2, 3, 2))


@requires_torch
def test_outer_promotes_dtypes():
    a, b = np.arange(3), rand(4, dtype=np.float32)
    compare_torch(ember.outer, torch.outer, a, b)


# ---------------------------------------------------------------------- addmm, baddbmm
ADD = [
    ("addmm_row", "addmm", (3,), (2, 4), (4, 3), {}),
    ("addmm_full", "addmm", (2, 3), (2, 4), (4, 3), {"beta": 0.5, "alpha": 2.0}),
    ("addmm_col", "addmm", (2, 1), (2, 4), (4, 3), {"alpha": -1.5}),
    ("addmm_scalar", "addmm", (), (2, 4), (4, 3), {"beta": 3}),
    ("baddbmm", "baddbmm", (2, 2, 3), (2, 2, 4), (2, 4, 3), {}),
    ("baddbmm_bcast", "baddbmm", (3,), (2, 2, 4), (2, 4, 3), {"beta": 0.25, "alpha": 0.5}),
]


@pytest.mark.parametrize("name,op,si,sa,sb,kw", ADD, ids=[c[0] for c in ADD])
def test_addmm_grad(name, op, si, sa, sb, kw):
    check_grad(lambda c, a, b: getattr(ember, op)(c, a, b, **kw), rand(*si, seed=3), *pair(sa, sb))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,op,si,sa,sb,kw", ADD, ids=[c[0] for c in ADD])
def test_addmm_torch(name, op, si, sa, sb, kw, dtype):
    compare_torch(lambda c, a, b: getattr(c, op)(a, b, **kw), lambda c, a, b: getattr(torch, op)(c, a, b, **kw),
                  rand(*si, seed=3, dtype=dtype), *pair(sa, sb, dtype))


@requires_torch
def test_addmm_beta_zero_ignores_input():
    c = np.full(3, np.nan)
    a, b = pair((2, 4), (4, 3))
    compare_torch(lambda c, a, b: ember.addmm(c, a, b, beta=0), lambda c, a, b: torch.addmm(c, a, b, beta=0), c, a, b)


@requires_torch
@pytest.mark.parametrize("kw", [{"alpha": 0.5}, {"beta": 0.5}, {"alpha": 2, "beta": 3}])
def test_addmm_integers_truncate_scalars(kw):
    c, a, b = np.arange(3), np.arange(8).reshape(2, 4), np.arange(12).reshape(4, 3)
    r = ember.addmm(ember.from_numpy(c), ember.from_numpy(a), ember.from_numpy(b), **kw)
    t = torch.addmm(torch.from_numpy(c), torch.from_numpy(a), torch.from_numpy(b), **kw)
    np.testing.assert_array_equal(r.numpy(), t.numpy())


# ---------------------------------------------------------------------- einsum
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # matrix multiply
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),  # batch matmul
    ("i,j->ij", [(3,), (4,)]),  # outer
    ("ii->", [(3, 3)]),  # trace
    ("ii->i", [(3, 3)]),  # diagonal
    ("ij->ji", [(2, 3)]),  # transpose
    ("ij->", [(2, 3)]),  # sum
    ("ij->j", [(2, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),  # bilinear
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),  # ellipsis
    ("...ij,...jk->...ik", [(1, 2, 3), (4, 3, 2)]),  # ellipsis dims broadcast
    ("...ij,jk", [(2, 2, 3), (3, 4)]),  # implicit with ellipsis
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit mode
    ("ba", [(3, 2)]),  # implicit: sorted labels -> transpose
    ("ii", [(3, 3)]),  # implicit trace
    ("i,i->", [(3,), (3,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("i,i->i", [(1,), (3,)]),  # size-1 label broadcast
    ("ij,j->i", [(2, 1), (3,)]),
    ("iij->ij", [(2, 2, 3)]),
    ("iji->j", [(3, 2, 3)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij,jk->", [(2, 3), (3, 4)]),
    ("i...->...", [(2, 3)]),
    ("i...->i", [(2, 3)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)]),
    ("Ab,bA->A", [(2, 3), (3, 2)]),
    ("i j , j k -> i k", [(2, 3), (3, 4)]),  # spaces
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),  # chain: optimized contraction order
]
EINSUM_IDS = [f"{e}|{len(s)}" for e, s in EINSUM]


def _einsum_operands(shapes, dtype=np.float64):
    return [rand(*s, seed=i + 1, dtype=dtype) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=EINSUM_IDS)
def test_einsum_grad(eq, shapes):
    check_grad(lambda *ops: ember.einsum(eq, *ops), *_einsum_operands(shapes))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eq,shapes", EINSUM, ids=EINSUM_IDS)
def test_einsum_torch(eq, shapes, dtype):
    compare_torch(lambda *ops: ember.einsum(eq, *ops), lambda *ops: torch.einsum(eq, *ops),
                  *_einsum_operands(shapes, dtype))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_einsum_noncontiguous(dtype):
    a, b = rand(3, 2, seed=1, dtype=dtype).T, noncontig(rand(3, 4, seed=2, dtype=dtype))
    compare_torch(lambda a, b: ember.einsum("ij,jk->ik", a, b), lambda a, b: torch.einsum("ij,jk->ik", a, b), a, b)
    check_grad(lambda a, b: ember.einsum("ij,jk->ki", a, b), rand(3, 2, seed=1).T, noncontig(rand(3, 4, seed=2)))


def test_einsum_operand_list_and_sublist_forms():
    a, b = pair((2, 3), (3, 4))
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    for r in (ember.einsum("ij,jk->ik", [x, y]), ember.einsum("ij,jk", (x, y)),
              ember.einsum(x, [0, 1], y, [1, 2], [0, 2]), ember.einsum(x, [0, 1], y, [1, 2])):
        np.testing.assert_allclose(r.numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(ember.einsum(x, [Ellipsis, 1], [Ellipsis]).numpy(), a.sum(1), rtol=1e-12)


def test_einsum_integers():
    a = np.arange(6).reshape(2, 3)
    r = ember.einsum("ij,kj->ik", ember.from_numpy(a), ember.from_numpy(a))
    assert r.dtype == ember.int64
    np.testing.assert_array_equal(r.numpy(), a @ a.T)


def test_einsum_permutation_is_a_view():
    # as in PyTorch, a transpose or diagonal by einsum shares memory (and the version counter) with its input
    x = ember.from_numpy(rand(3, 3))
    t, d = ember.einsum("ij->ji", x), ember.einsum("ii->i", x)
    x.add_(1.0)
    np.testing.assert_allclose(t.numpy(), x.numpy().T)
    np.testing.assert_allclose(d.numpy(), np.diag(x.numpy()))
    assert t._version == x._version == 1 and t._base is x


def test_einsum_saved_operand_modified_raises():
    a, b = pair((2, 3), (3, 4))
    x, y = ember.from_numpy(a).requires_grad_(), ember.from_numpy(b)
    r = ember.einsum("ij,jk->ik", x, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        r.sum().backward()


# ---------------------------------------------------------------------- tensordot
TENSORDOT = [
    ((2, 3), (3, 4), 1),
    ((2, 3, 4), (3, 4, 2), 2),
    ((2, 3), (4,), 0),
    ((2, 3, 4), (4, 2, 3), ([1, 2], [2, 0])),
    ((3, 2), (3, 4), ([0], [0])),
    ((2, 3), (3, 4), ([-1], [-2])),
    ((2, 3), (3, 2), [[0, 1], [1, 0]]),  # full contraction -> 0-d
]


@pytest.mark.parametrize("sa,sb,dims", TENSORDOT, ids=[str(c) for c in TENSORDOT])
def test_tensordot_grad(sa, sb, dims):
    check_grad(lambda a, b: ember.tensordot(a, b, dims), *pair(sa, sb))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb,dims", TENSORDOT, ids=[str(c) for c in TENSORDOT])
def test_tensordot_torch(sa, sb, dims, dtype):
    compare_torch(lambda a, b: ember.tensordot(a, b, dims), lambda a, b: torch.tensordot(a, b, dims),
                  *pair(sa, sb, dtype))


def test_tensordot_tensor_dims_and_default():
    a, b = pair((2, 3, 4), (3, 4, 5))
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    expected = np.tensordot(a, b, 2)
    np.testing.assert_allclose(ember.tensordot(x, y).numpy(), expected, rtol=1e-12)
    dims = ember.tensor([[1, 2], [0, 1]])
    np.testing.assert_allclose(ember.tensordot(x, y, dims=dims).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(ember.tensordot(x, y, dims=ember.tensor(2)).numpy(), expected, rtol=1e-12)


# ---------------------------------------------------------------------- bad inputs
def T(*shape, dtype=ember.float32):
    return ember.ones(*shape, dtype=dtype)


BAD = [
    # (exception, message regex, call)
    (RuntimeError, r"expected m1 and m2 to have the same dtype, but got: float != double",
     lambda: T(2, 3) @ T(3, 2, dtype=ember.float64)),
    (RuntimeError, r"float != double", lambda: ember.mm(T(2, 3), T(3, 2, dtype=ember.float64))),
    (RuntimeError, r"dot\(\).*same dtype.*float and double", lambda: ember.dot(T(3), T(3, dtype=ember.float64))),
    (RuntimeError, r"both arguments to matmul need to be at least 1D, but they are 0D and 2D",
     lambda: ember.tensor(1.0) @ T(2, 3)),
    (RuntimeError, r"matmul\(\): mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)", lambda: T(2, 3) @ T(4, 5)),
    (RuntimeError, r"matmul\(\): mat1 and mat2 shapes cannot be multiplied \(2x2x3 and 4x5\)",
     lambda: T(2, 2, 3) @ T(4, 5)),
    (RuntimeError, r"matmul\(\): mat1 and mat2 shapes cannot be multiplied \(2x3 and 4\)", lambda: T(2, 3) @ T(4)),
    (RuntimeError, r"matmul\(\): mat1 and mat2 shapes cannot be multiplied \(3 and 4x5\)", lambda: T(3) @ T(4, 5)),
    (RuntimeError, r"matmul\(\): inconsistent tensor size.*\[3\] and \[4\]", lambda: T(3) @ T(4)),
    (RuntimeError, r"matmul\(\): the batch dimensions of shapes \[2, 2, 3\] and \[3, 3, 4\] cannot be broadcast",
     lambda: T(2, 2, 3) @ T(3, 3, 4)),
    (NotImplementedError, r"matmul\(\): not implemented for 'Bool'",
     lambda: T(2, 2, dtype=ember.bool) @ T(2, 2, dtype=ember.bool)),
    (TypeError, r"matmul\(\): argument 'other' \(position 2\) must be Tensor, not int", lambda: ember.matmul(T(2), 2)),
    (RuntimeError, r"mm\(\): self must be a matrix", lambda: ember.mm(T(3), T(3, 2))),
    (RuntimeError, r"mm\(\): mat2 must be a matrix", lambda: ember.mm(T(2, 3), T(3))),
    (RuntimeError, r"mm\(\): mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)", lambda: ember.mm(T(2, 3), T(4, 2))),
    (RuntimeError, r"bmm\(\): batch1 must be a 3D tensor", lambda: ember.bmm(T(2, 3), T(3, 2))),
    (RuntimeError, r"bmm\(\): batch2 must be a 3D tensor", lambda: ember.bmm(T(2, 2, 3), T(3, 2))),
    (RuntimeError, r"bmm\(\): Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[3, 3\]",
     lambda: ember.bmm(T(2, 2, 3), T(3, 3, 2))),
    (RuntimeError, r"bmm\(\): Expected size .* \[2, 3\] but got: \[2, 4\]", lambda: ember.bmm(T(2, 2, 3), T(2, 4, 2))),
    (RuntimeError, r"bmm\(\): .*same dtype", lambda: ember.bmm(T(2, 2, 3), T(2, 3, 2, dtype=ember.float64))),
    (RuntimeError, r"mv\(\): expected a matrix and a vector, but got shapes \[3\] and \[3\]", lambda: ember.mv(T(3), T(3))),
    (RuntimeError, r"mv\(\): size mismatch, got mat \(2x3\) and vec \(4\)", lambda: ember.mv(T(2, 3), T(4))),
    (RuntimeError, r"dot\(\): 1D tensors expected, but got 2D and 1D tensors", lambda: ember.dot(T(2, 3), T(3))),
    (RuntimeError, r"dot\(\): inconsistent tensor size.*\[3\].*\[4\]", lambda: ember.dot(T(3), T(4))),
    (RuntimeError, r"outer\(\): Expected 1-D argument self, but got 2-D", lambda: ember.outer(T(3, 2), T(4))),
    (RuntimeError, r"outer\(\): Expected 1-D argument vec2, but got 0-D", lambda: ember.outer(T(3), ember.tensor(1.0))),
    # einsum
    (RuntimeError, r"einsum\(\): more operands were provided than specified", lambda: ember.einsum("ij", T(2, 3), T(3))),
    (RuntimeError, r"einsum\(\): fewer operands were provided than specified", lambda: ember.einsum("ij,jk", T(2, 3))),
    (RuntimeError, r"einsum\(\): the number of subscripts in the equation \(2\) does not match the number of "
                   r"dimensions \(3\) for operand 0", lambda: ember.einsum("ij->", T(2, 3, 4))),
    (RuntimeError, r"einsum\(\): the number of subscripts in the equation \(2\) is more than the number of "
                   r"dimensions \(1\) for operand 0", lambda: ember.einsum("a...b->...", T(2))),
    (RuntimeError, r"einsum\(\): subscript j has size 4 for operand 1 which does not broadcast with previously seen "
                   r"size 3", lambda: ember.einsum("ij,jk", T(2, 3), T(4, 5))),
    (RuntimeError, r"einsum\(\): subscript i is repeated for operand 0 but the sizes don't match, 3 != 2",
     lambda: ember.einsum("ii->i", T(2, 3))),
    (RuntimeError, r"einsum\(\): dimension 1 covered by ellipsis in operand 1 has size 5",
     lambda: ember.einsum("...i,...i->...", T(2, 3), T(4, 5, 3))),
    (RuntimeError, r"einsum\(\): invalid subscript given at index 1 in the equation string",
     lambda: ember.einsum("i1->i", T(2, 3))),
    (RuntimeError, r"einsum\(\): invalid subscript given at index 4", lambda: ember.einsum("i->i->i", T(2))),
    (RuntimeError, r"einsum\(\): output subscript i appears more than once in the output",
     lambda: ember.einsum("ij->ii", T(2, 3))),
    (RuntimeError, r"einsum\(\): output subscript k does not appear in the equation for any input operand",
     lambda: ember.einsum("ij->k", T(2, 3))),
    (RuntimeError, r"einsum\(\): found '\.' for operand 0 that is not part of any ellipsis",
     lambda: ember.einsum("..i->i", T(2, 3))),
    (RuntimeError, r"einsum\(\): found more than one ellipsis for operand 0", lambda: ember.einsum("...i...->i", T(2, 3))),
    (RuntimeError, r"einsum\(\): found '\.' for output", lambda: ember.einsum("ij->i.", T(2, 3))),
    (RuntimeError, r"einsum\(\): expected all operands to have the same dtype, but got float and double",
     lambda: ember.einsum("i,i", T(3), T(3, dtype=ember.float64))),
    (TypeError, r"einsum\(\): operand 1 must be a Tensor, not list", lambda: ember.einsum("i,i", T(3), [1.0, 2.0, 3.0])),
    (ValueError, r"einsum\(\): must specify the equation string and at least one operand", lambda: ember.einsum("i")),
    (ValueError, r"einsum\(\): subscript in subscript list is not within the valid range \[0, 52\)",
     lambda: ember.einsum(T(2), [52])),
    # tensordot
    (RuntimeError, r"tensordot\(\): expects dims >= 0, but got dims=-1", lambda: ember.tensordot(T(2, 3), T(3, 4), -1)),
    (RuntimeError, r"tensordot\(\): expects dims <= ndim.*dims=3", lambda: ember.tensordot(T(2, 3), T(3, 4), 3)),
    (RuntimeError, r"tensordot\(\): both dimension lists should have same length",
     lambda: ember.tensordot(T(2, 3), T(3, 4), ([1], [0, 1]))),
    (RuntimeError, r"tensordot\(\): contracted dimensions need to match, but first has size 3 in dim 1 and second has "
                   r"size 4 in dim 0", lambda: ember.tensordot(T(2, 3), T(4, 4), 1)),
    (RuntimeError, r"tensordot\(\): dim 1 appears multiple times in the list of dims",
     lambda: ember.tensordot(T(2, 3), T(3, 3), ([1, 1], [0, 1]))),
    (IndexError, r"tensordot\(\): Dimension out of range", lambda: ember.tensordot(T(2, 3), T(3, 4), ([1], [3]))),
    (RuntimeError, r"tensordot\(\) expects dims to be int or tuple", lambda: ember.tensordot(T(2, 3), T(3, 4), "a")),
    (RuntimeError, r"tensordot\(\) expects dims to be int or tuple", lambda: ember.tensordot(T(2, 3), T(3, 4), 1.5)),
    (RuntimeError, r"tensordot\(\): both inputs should have the same dtype, but got float and double",
     lambda: ember.tensordot(T(2, 3), T(3, 4, dtype=ember.float64), 1)),
    # addmm, baddbmm
    (RuntimeError, r"addmm\(\): mat1 must be a matrix, got 1-D", lambda: ember.addmm(T(3), T(3), T(3, 3))),
    (RuntimeError, r"addmm\(\): mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x3\)",
     lambda: ember.addmm(T(3), T(2, 3), T(4, 3))),
    (RuntimeError, r"addmm\(\): input of shape \[4\] cannot be broadcast to the result shape \[2, 3\]",
     lambda: ember.addmm(T(4), T(2, 3), T(3, 3))),
    (RuntimeError, r"addmm\(\): input of shape \[2, 3, 3\] cannot be broadcast",
     lambda: ember.addmm(T(2, 3, 3), T(2, 3), T(3, 3))),
    (RuntimeError, r"addmm\(\): expected input, mat1 and mat2 to have the same dtype, but got double, float and float",
     lambda: ember.addmm(T(3, dtype=ember.float64), T(2, 3), T(3, 3))),
    (RuntimeError, r"baddbmm\(\): batch1 must be a 3D tensor", lambda: ember.baddbmm(T(3), T(2, 3), T(3, 3))),
    (RuntimeError, r"baddbmm\(\): Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: "
                   r"\[3, 3\]", lambda: ember.baddbmm(T(3), T(2, 2, 3), T(3, 3, 3))),
    (RuntimeError, r"baddbmm\(\): input of shape \[2, 2, 3, 3\] cannot be broadcast",
     lambda: ember.baddbmm(T(2, 2, 3, 3), T(2, 2, 3), T(2, 3, 3))),
]


@pytest.mark.parametrize("exc,msg,call", BAD, ids=[f"{i}:{c[1][:40]}" for i, c in enumerate(BAD)])
def test_bad_inputs(exc, msg, call):
    with pytest.raises(exc, match=msg):
        call()
