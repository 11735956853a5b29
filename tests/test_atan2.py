"""ember.atan2 / arctan2 / Tensor.atan2(_): values, gradients, broadcasting, dtypes and errors against PyTorch."""
import numpy as np
import pytest
from helpers import check_grad, compare_torch, rand, requires_torch, torch

import ember

INF, NAN = float("inf"), float("nan")
# (y, x) pairs covering the four quadrants, the axes, signed zeros, infinities and NaN
SPECIAL = [(1.0, 2.0), (1.0, -2.0), (-1.0, -2.0), (-1.0, 2.0),
           (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 1.0), (-0.0, 1.0), (0.0, -1.0), (-0.0, -1.0),
           (1.0, 0.0), (-1.0, 0.0), (1.0, -0.0), (-1.0, -0.0),
           (INF, 1.0), (-INF, 1.0), (1.0, INF), (1.0, -INF), (-1.0, -INF), (INF, INF), (-INF, -INF), (INF, -INF),
           (NAN, 1.0), (1.0, NAN), (NAN, NAN), (1e-30, 1e-30), (1e30, 1e30), (3e-20, 0.0), (1e-20, 1e-20)]


def _special(dtype):
    y, x = (np.array(v, dtype) for v in zip(*SPECIAL))
    return y, x


@requires_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_bitwise(dtype):
    """Values match PyTorch exactly, NaN positions and the sign of zero included."""
    y, x = _special(dtype)
    e = ember.atan2(ember.from_numpy(y), ember.from_numpy(x)).numpy()
    t = torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy()
    assert e.dtype == t.dtype
    np.testing.assert_array_equal(np.isnan(e), np.isnan(t))
    ok = ~np.isnan(t)
    np.testing.assert_array_equal(np.signbit(e[ok]), np.signbit(t[ok]))
    np.testing.assert_allclose(e, t, rtol=1e-6 if dtype == np.float32 else 1e-15, atol=0)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_gradients(dtype):
    """Gradients at the singular points follow PyTorch: 0 at the origin (signed), inf·0 = NaN elsewhere."""
    y, x = _special(dtype)
    ey, ex = ember.from_numpy(y).requires_grad_(), ember.from_numpy(x).requires_grad_()
    ty, tx = torch.from_numpy(y).requires_grad_(), torch.from_numpy(x).requires_grad_()
    ember.atan2(ey, ex).backward(ember.ones(len(y), dtype=ey.dtype))
    torch.atan2(ty, tx).backward(torch.ones(len(y), dtype=ty.dtype))
    for e, t in ((ey.grad.numpy(), ty.grad.numpy()), (ex.grad.numpy(), tx.grad.numpy())):
        np.testing.assert_array_equal(np.isnan(e), np.isnan(t))
        ok = ~np.isnan(t)  # the sign of a NaN means nothing
        np.testing.assert_array_equal(np.signbit(e[ok]), np.signbit(t[ok]))
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=0)


@requires_torch
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((2, 3), ()),
                                   ((), ())])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parity_broadcast_random_cotangent(sa, sb, dtype):
    """Values and both gradients (reduced over broadcast dims) for a random cotangent."""
    compare_torch(ember.atan2, torch.atan2, rand(*sa, seed=1, dtype=dtype), rand(*sb, seed=2, dtype=dtype))


@requires_torch
def test_method_and_alias_parity():
    compare_torch(lambda a, b: a.atan2(b), lambda a, b: a.atan2(b), rand(3, 4, seed=3), rand(4, seed=4))
    compare_torch(ember.arctan2, torch.arctan2, rand(2, 3, seed=5), rand(2, 3, seed=6))
    compare_torch(lambda a, b: a.arctan2(b), lambda a, b: a.arctan2(b), rand(2, 3, seed=7), rand(2, 3, seed=8))


@requires_torch
@pytest.mark.parametrize("da,db", [(np.int64, np.int64), (np.int32, np.uint8), (np.bool_, np.bool_),
                                   (np.int8, np.float16), (np.int64, np.float64), (np.float16, np.float64),
                                   (np.float32, np.float64), (np.float16, np.float16), (np.uint8, np.float32)])
def test_dtype_promotion(da, db):
    """Integer and bool inputs give the default float dtype; mixed floats promote as in PyTorch."""
    a = np.array([[3, -2, 0], [1, 0, -1]]).astype(da)
    b = np.array([1, 0, -4]).astype(db)
    e = ember.atan2(ember.from_numpy(a), ember.from_numpy(b))
    t = torch.atan2(torch.from_numpy(a), torch.from_numpy(b))
    assert str(e.dtype) == str(t.dtype).replace("torch", "ember")
    np.testing.assert_allclose(e.numpy().astype(np.float64), t.numpy().astype(np.float64), rtol=1e-3)


@requires_torch
def test_zero_dim_promotion():
    """A 0-d float64 tensor does not raise a float16 tensor's dtype (PyTorch's category rule)."""
    a, b = np.array([1.0, -2.0], np.float16), np.array(3.0)
    e = ember.atan2(ember.from_numpy(a), ember.from_numpy(b))
    assert e.dtype == ember.float16 and str(torch.atan2(torch.from_numpy(a), torch.from_numpy(b)).dtype) == "torch.float16"


def test_int_with_float_gradient():
    """An integer input takes no gradient; the float one gets -y/(x²+y²) computed in float. (PyTorch squares
    the int32 60000 in int32, which wraps around and gives a wrong gradient; ember follows the math.)"""
    a = np.array([60000, -3, 0], np.int32)
    b = rand(3, seed=9, dtype=np.float32)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b).requires_grad_()
    out = ember.atan2(ea, eb)
    assert out.dtype == ember.float32 and not ea.requires_grad
    out.sum().backward()
    assert ea.grad is None and eb.grad.dtype == ember.float32
    af, bf = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(eb.grad.numpy(), -af / (af * af + bf * bf), rtol=1e-5)


def test_gradcheck_and_gradgradcheck():
    """float64 finite differences, first and second order, with broadcasting, away from the origin."""
    check_grad(ember.atan2, rand(3, 4, seed=10) + 0.1, rand(4, seed=11) - 1.5)
    check_grad(ember.atan2, rand(2, 1, 3, seed=12), rand(4, 1, seed=13, low=0.5, high=2.0))


@requires_torch
def test_double_backward_parity():
    """create_graph=True: the gradient is itself differentiable, with PyTorch's second derivatives."""
    y, x = rand(5, seed=14), rand(5, seed=15)
    c = rand(5, seed=16)
    outs = []
    for lib, mk in ((ember, lambda a: ember.from_numpy(a.copy()).requires_grad_()),
                    (torch, lambda a: torch.from_numpy(a.copy()).requires_grad_())):
        ty, tx = mk(y), mk(x)
        gy, gx = lib.autograd.grad(lib.atan2(ty, tx), (ty, tx), mk(c), create_graph=True)
        assert gy.requires_grad and gx.requires_grad
        hy, hx = lib.autograd.grad((gy * gx).sum(), (ty, tx))
        outs.append([v.detach().numpy() for v in (gy, gx, hy, hx)])
    for e, t in zip(*outs):
        np.testing.assert_allclose(e, t, rtol=1e-12)


@requires_torch
def test_inplace():
    y, x = rand(3, 4, seed=17), rand(4, seed=18)
    e = ember.from_numpy(y.copy())
    ptr = e._data.ctypes.data
    v0 = e._version
    assert e.atan2_(ember.from_numpy(x)) is e
    assert e._data.ctypes.data == ptr and e._version > v0
    np.testing.assert_allclose(e.numpy(), torch.from_numpy(y.copy()).atan2_(torch.from_numpy(x)).numpy(), rtol=1e-15)
    e2 = ember.from_numpy(y.copy())
    e2.arctan2_(ember.from_numpy(x))
    np.testing.assert_array_equal(e2.numpy(), e.numpy())


@requires_torch
def test_inplace_gradient():
    """atan2_ on a non-leaf keeps the gradient to the old values and to `other` (PyTorch's numbers)."""
    y, x = rand(3, seed=19), rand(3, seed=20)
    res = []
    for lib, mk in ((ember, lambda a: ember.from_numpy(a.copy()).requires_grad_()),
                    (torch, lambda a: torch.from_numpy(a.copy()).requires_grad_())):
        ly, lx = mk(y), mk(x)
        h = ly * 2
        h.atan2_(lx)
        (h * lib.arange(1, 4, dtype=h.dtype)).sum().backward()
        res.append((h.detach().numpy(), ly.grad.numpy(), lx.grad.numpy()))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12)


def test_inplace_errors():
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.ones(2, dtype=ember.int64).atan2_(ember.ones(2))
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast shape \[2, 2\]"):
        ember.ones(2).atan2_(ember.ones(2, 2))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ember.ones(2, requires_grad=True).atan2_(ember.ones(2))


@requires_torch
def test_shape_mismatch_same_exception_as_torch():
    with pytest.raises(RuntimeError) as te:
        torch.atan2(torch.ones(2), torch.ones(3))
    with pytest.raises(type(te.value), match=r"atan2\(\).*\[2\].*\[3\]"):
        ember.atan2(ember.ones(2), ember.ones(3))


def test_bad_operand_type():
    with pytest.raises(TypeError, match="atan2"):
        ember.atan2(ember.ones(2), "x")
