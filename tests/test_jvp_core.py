"""Forward-mode AD of the core ops (arithmetic, reductions, shape, indexing, sorting, counting, conversions and
in-place ops) where the parity suites of those files do not reach it (their check_grad and compare_torch check
forward mode too): the adjoint ops that only a backward applies (reached by forward over reverse), the rules'
branches at special values (zeros in products, ties, NaN), ops without a derivative under forward AD, and
in-place writes: the fast paths that skip dispatch, and views, whose tangents are views of their base's.
"""
import numpy as np
import pytest
from helpers import compare_torch_jvp, leaf, rand, requires_torch, torch

import ember
from ember.autograd import forward_ad as fw
from ember.ops import indexing as I
from ember.ops import indexing_ext as IE
from ember.ops import reduce as R
from ember.ops import shape as S
from ember.ops.inplace import _StaleView


def forward_gradcheck(fn, *arrays, backward=True):
    """The forward-mode Jacobian of fn against central differences (and the reverse-mode one unless told not)."""
    xs = [leaf(a) for a in arrays]
    assert ember.autograd.gradcheck(fn, xs, check_forward_ad=True, check_backward_ad=backward)


def dual(a, t):
    """A float64 dual tensor of the arrays a (primal) and t (tangent), inside an open level."""
    return fw.make_dual(leaf(np.asarray(a, np.float64), False), leaf(np.asarray(t, np.float64), False))


def tangent(x):
    t = fw.unpack_dual(x).tangent
    return None if t is None else t.detach().cpu().numpy()


def _idx(a, m=ember):
    """An int64 index tensor of module m (ember: on the test device, beside the inputs)."""
    return leaf(np.asarray(a, np.int64), False) if m is ember else torch.tensor(a)


# ---------------------------------------------------------------------- ops only a backward applies
ADJOINTS = {
    "embed": (lambda g: S.Embed.apply(g, (4, 5), 1, 1), [rand(4, 3)]),
    "put_at": (lambda g: R.gather_scatter(R.PutAt, g, _idx([[2], [0], [1]])._data, 1, False, (3, 4)), [rand(3)]),
    "put": (lambda g: I.Put.apply(g, shape=(3, 2), index=_idx([5, 0, 5, 2])._data), [rand(4)]),
    "index_backward": (lambda g: I.IndexBackward.apply(g, shape=(4, 2),
                                                      idx=(None, (_idx([3, 0, 3])._data, Ellipsis), 2)), [rand(3, 2)]),
    "diagonal": (lambda x: IE.Diagonal.apply(x, 1, 0, 2), [rand(3, 2, 4)]),
    "sum_repeats": (lambda g: IE.SumRepeats.apply(g, np.array([1, 0, 3]), 0, 3), [rand(4, 2)]),
    "unfold_backward": (lambda g: IE.UnfoldBackward.apply(g, (2, 7), 1, 3, 2), [rand(2, 3, 3)]),
}


@pytest.mark.parametrize("name", list(ADJOINTS))
def test_adjoint_ops(name):
    fn, arrays = ADJOINTS[name]
    forward_gradcheck(fn, *arrays)


@pytest.mark.parametrize("cls", [IE._Delayed, _StaleView])
def test_pass_through_ops(cls):
    """Ops whose forward is the identity and whose backward refuses: the tangent passes through."""
    forward_gradcheck(lambda x: cls.apply(x, "no double backward") if cls is IE._Delayed else cls.apply(x),
                      rand(2, 3), backward=False)


# ---------------------------------------------------------------------- rules at special values
def _with_zeros():
    a = rand(3, 4, seed=3)
    a[0, 1] = 0.0  # one zero in a row
    a[1, 0] = a[1, 2] = 0.0  # two zeros in a row
    return a


SPECIAL = {
    "prod_dim_zeros": lambda x: x.prod(1),
    "prod_all_one_zero": lambda x: x[0].prod(),
    "cumprod_zeros": lambda x: x.cumprod(1),
    "cumprod_zeros_dim0": lambda x: x.cumprod(0),
    "norm_zero_slice": lambda x: (x * leaf(np.array([[1.0], [1.0], [0.0]]), False)).norm(3, dim=1),
    "std_zero_slice": lambda x: (x * leaf(np.array([[1.0], [0.0], [1.0]]), False)).std(1),
    "scatter_reduce_prod_zeros": lambda x: x[:, :2].scatter_reduce(
        1, _idx([[0, 0, 1], [1, 1, 1], [0, 1, 0]]), x[:, 1:], "prod"),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_values(name):
    forward_gradcheck(SPECIAL[name], _with_zeros())


def test_logcumsumexp_extremes():
    """In log space: exact where e^x would underflow against a large later value (PyTorch's shifted form gives 0
    there), and 0 along an all -inf prefix (as backward's convention)."""
    with fw.dual_level():
        x = dual([[-np.inf, 1.0, 1000.0], [-np.inf, -np.inf, 2.0]], np.ones((2, 3)))
        np.testing.assert_allclose(tangent(x.logcumsumexp(1)), [[0, 1, 1], [0, 0, 1]])


def test_vander_and_as_strided():
    forward_gradcheck(lambda x: ember.vander(x, 4), rand(3))
    forward_gradcheck(lambda x: x.expand(3, 4).as_strided((2, 3), (1, 1)), rand(1, 4), backward=False)


TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5], [2.0, -1.0, 2.0, 4.0]])
TIE_FNS = {
    "amax": lambda m, x: m.amax(x, 1),
    "amin_all": lambda m, x: m.amin(x),
    "max_all": lambda m, x: m.max(x),
    "max_dim": lambda m, x: m.max(x, 1),
    "median_all": lambda m, x: m.median(x),
    "maximum": lambda m, x: m.maximum(x, x.flip(1)),
    "norm_inf": lambda m, x: x.norm(float("inf"), dim=1),
    "scatter_reduce_amax": lambda m, x: x.scatter_reduce(1, _idx([[0, 1, 1, 0]] * 3, m), x.flip(1), "amax"),
    "sort": lambda m, x: m.sort(x, dim=1, stable=True),
    "cummax": lambda m, x: m.cummax(x, 1),
}


# at a NaN, ember's rules for these follow their backward (maximum: both tangents, as backward gives gz to both;
# the inf-norm: NaN), where PyTorch's forward rules give other's tangent and 0
NAN_DIFFERS = ("maximum", "norm_inf")


@requires_torch
@pytest.mark.parametrize("name,nan", [(n, nan) for n in TIE_FNS for nan in (False, True)
                                      if not (nan and n in NAN_DIFFERS)])
def test_ties_and_nan_parity(name, nan):
    """Tied values share the tangent as PyTorch's rules do; a NaN result's tangent is NaN (or follows the index
    PyTorch picks)."""
    a = TIES.copy()
    if nan:
        a[2, 1] = np.nan
    fn = TIE_FNS[name]
    compare_torch_jvp(lambda x: fn(ember, x), lambda x: fn(torch, x), a)


# ---------------------------------------------------------------------- ops without a derivative
def test_piecewise_constant_ops():
    """Comparisons, indices and integer results carry no tangent; a float floor division a zero one."""
    with fw.dual_level():
        x = dual([1.5, -2.0, 3.0], [1.0, 2.0, 3.0])
        for r in (x > 0, x == x, x.argsort(), x.argmax(), ember.sort(x).indices, x.long(), x.isnan()):
            assert tangent(r) is None
        np.testing.assert_array_equal(tangent(x.floor_divide(2.0)), 0.0)
        np.testing.assert_array_equal(tangent(ember.div(x, 2.0, rounding_mode="floor")), 0.0)
        np.testing.assert_array_equal(tangent(ember.div(x, 2.0, rounding_mode="trunc")), 0.0)
        with pytest.raises(NotImplementedError, match="forward AD"):
            x.scatter(0, _idx([0]), 2.0, reduce="multiply")  # (nor in PyTorch)
        np.testing.assert_array_equal(tangent(x.norm(0)), 0.0)


def test_join_with_integer_input():
    """An integer input of cat/stack/block_diag contributes zeros to the tangent (not its values)."""
    with fw.dual_level():
        x, i = dual([1.0, 2.0], [3.0, 4.0]), _idx([5, 6])
        np.testing.assert_array_equal(tangent(ember.cat([x, i])), [3, 4, 0, 0])
        np.testing.assert_array_equal(tangent(ember.stack([i, x])), [[0, 0], [3, 4]])
        np.testing.assert_array_equal(tangent(ember.block_diag(x, i)), [[3, 4, 0, 0], [0, 0, 0, 0]])


# ---------------------------------------------------------------------- forward over reverse
HVP = {  # (at values with zeros, two in a row: the names that say so; the others away from ties and kinks)
    "prod_zeros": lambda x: (x.prod(1) ** 2).sum() + x.prod() * x.sum(),
    "cumprod_zeros": lambda x: (x.cumprod(1) * x).sum() + (x.cumprod(0) ** 2).sum(),
    "norm_3": lambda x: x.norm(3, dim=0).sum() ** 2,
    "std_var_logsumexp": lambda x: x.std(1).sum() * x.var() + x.logsumexp(0).sum(),
    "gather_scatter": lambda x: (x.gather(1, _idx([[0, 0], [2, 1], [3, 3]])) ** 3).sum()
    + (x.scatter(1, _idx([[1], [0], [2]]), x[:, :1] ** 2) ** 2).sum(),
    "index_ops": lambda x: (x[_idx([2, 0, 2])] ** 2).sum() + (x.take(_idx([1, 5, 1])) ** 3).sum()
    + (x.index_select(1, _idx([3, 3])) * x[:, :2]).sum(),
    "masked_where": lambda x: (ember.where(x > 0, x ** 2, x ** 3) * x.masked_fill(x < 0.2, 0.5)).sum(),
    "pow_atan2_rem": lambda x: ((x * x + 0.5) ** x).sum() + ember.atan2(x, x.flip(0) + 2).sum()
    + (ember.remainder(x, 0.3) * x).sum(),
    "sort_median": lambda x: (ember.sort(x, 1).values * leaf(np.arange(4.0), False)).sum() ** 2
    + x.median(0).values.sum() ** 2,
    "shape_ops": lambda x: (x.t().reshape(2, 6).flip(0).roll(1, 1).tril() ** 2).sum()
    + (ember.cat([x, x.narrow(1, 1, 2)], 1).unfold(1, 3, 2) ** 3).sum()
    + (x.repeat_interleave(_idx([1, 0, 2]), 0) ** 2).sum(),
    "logcumsumexp": lambda x: x.logcumsumexp(1).exp().sum() + (x.cummax(1).values ** 2).sum(),
}


@pytest.mark.parametrize("name", list(HVP))
def test_forward_over_reverse(name):
    """The tangent of a gradient, taken with forward AD through the backward's own ops, is the Hessian-vector
    product: it matches central differences of the gradient."""
    f = HVP[name]
    a, v = _with_zeros() + (0.0 if name.endswith("_zeros") else 0.1 * rand(3, 4, seed=9)), rand(3, 4, seed=4)

    def grad(values):
        x = leaf(values)
        return ember.autograd.grad(f(x), x)[0].detach().cpu().numpy()

    x = leaf(a)
    with fw.dual_level():
        g = ember.autograd.grad(f(fw.make_dual(x, leaf(v, False))), x, create_graph=True)[0]
        hv = tangent(g)
    eps = 1e-6
    np.testing.assert_allclose(hv, (grad(a + eps * v) - grad(a - eps * v)) / (2 * eps), rtol=1e-5, atol=1e-6)


FOF = {
    "prod_cumprod_zeros": lambda x: x.prod(1).sum() + x.prod(0).sum() * x.cumprod(1).sum() + (x.cumprod(0) * x).sum(),
    "norm_std_logsumexp": lambda x: x.norm(3) * x.std(1).sum() + x.logsumexp(1).sum(),
    "max_sort_gather": lambda x: (x * x).amax(0).sum() * (ember.sort(x, 1).values[:, 1:] ** 2).sum()
    + x.gather(1, _idx([[0, 3], [1, 1], [2, 0]])).prod(),
}


@pytest.mark.parametrize("name", list(FOF))
def test_forward_over_forward(name):
    """Nested levels: the tangent (direction v) of a jvp (direction u) is u'Hv, the rules' own tangents at the
    outer level: it matches central differences of the inner jvp."""
    f = FOF[name]
    a = _with_zeros() + (0.0 if name.endswith("_zeros") else 0.1 * rand(3, 4, seed=9))
    u, v = rand(3, 4, seed=4), rand(3, 4, seed=5)

    def jvp(x):
        return ember.func.jvp(f, (x,), (leaf(v, False),))[1]

    second = ember.func.jvp(jvp, (leaf(a, False),), (leaf(u, False),))[1]
    eps = 1e-6
    fd = (jvp(leaf(a + eps * u, False)) - jvp(leaf(a - eps * u, False))) / (2 * eps)
    np.testing.assert_allclose(second.cpu().numpy(), fd.cpu().numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- in-place ops
def test_in_place_arithmetic():
    """x.mul_(y) leaves x' y + x y' on x; an op that writes a dual into a plain tensor makes it dual."""
    with fw.dual_level():
        x, y = dual([1.0, 2.0], [3.0, 4.0]), dual([5.0, 6.0], [7.0, 8.0])
        x = x * 1
        x.mul_(y)
        np.testing.assert_allclose(tangent(x), [3 * 5 + 1 * 7, 4 * 6 + 2 * 8])
        x /= 2.0
        np.testing.assert_allclose(tangent(x), [11.0, 20.0])
        z = leaf(np.zeros(2), False)
        z += y
        z.pow_(2)
        np.testing.assert_allclose(tangent(z), [2 * 5 * 7, 2 * 6 * 8])
        w = y.clone()
        w.clamp_(max=5.5)  # (an in-place unary op: its rule, then the write)
        np.testing.assert_allclose(tangent(w), [7.0, 0.0])


def test_in_place_writes():
    """copy_, fill_, zero_, setitem, masked_fill_, index_put_, scatter_, put_, index_fill_: the tangent is written
    where the values are (zero for a constant), into a dual tensor (tangent 1, 2, 3) and into a plain one."""
    with fw.dual_level():
        v = dual([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])
        s = dual(4.0, 9.0)
        cases = {  # name: (write, tangent after writing into a dual tensor, into a plain one: None for none)
            "copy_": (lambda z: z.copy_(v), [1, 2, 3], [1, 2, 3]),
            "fill_": (lambda z: z.fill_(2.0), [0, 0, 0], None),
            "fill_tensor": (lambda z: z.fill_(s), [9, 9, 9], [9, 9, 9]),
            "zero_": (lambda z: z.zero_(), [0, 0, 0], None),
            "setitem": (lambda z: z.__setitem__(slice(1, None), v[:2]), [1, 1, 2], [0, 1, 2]),
            "setitem_constant": (lambda z: z.__setitem__(0, 3.0), [0, 2, 3], None),
            "masked_fill_": (lambda z: z.masked_fill_(_idx([1, 0, 1]) > 0, s), [9, 2, 9], [9, 0, 9]),
            "index_put_": (lambda z: z.index_put_((_idx([2, 0]),), v[:2], accumulate=True), [3, 2, 4], [2, 0, 1]),
            "scatter_": (lambda z: z.scatter_(0, _idx([1]), v[2:]), [1, 3, 3], [0, 3, 0]),
            "put_": (lambda z: z.put_(_idx([0]), s.reshape(1)), [9, 2, 3], [9, 0, 0]),
            "index_fill_": (lambda z: z.index_fill_(0, _idx([1]), 0.0), [1, 0, 3], None),
        }
        for name, (write, into_dual, into_plain) in cases.items():
            z = dual([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]) * 1
            write(z)
            np.testing.assert_allclose(tangent(z), into_dual, err_msg=name)
            z = leaf(np.zeros(3), False)
            write(z)
            if into_plain is None:
                assert tangent(z) is None, name
            else:
                np.testing.assert_allclose(tangent(z), into_plain, err_msg=name)
        m = dual(np.zeros((2, 2)), np.ones((2, 2))) * 1
        m.fill_diagonal_(3.0)
        np.testing.assert_array_equal(tangent(m), [[0, 1], [1, 0]])


@pytest.mark.parametrize("grad", [False, True])
def test_in_place_through_views(grad):
    """A view's tangent is a view of its base's: a write through a view reaches the base's tangent and the base's
    other views; a write into the base reaches its views (also under autograd, where the base is rebuilt)."""
    with fw.dual_level():
        x = fw.make_dual(leaf(np.array([1.0, 2.0, 3.0, 4.0]), grad), leaf(np.ones(4), False))
        b = x * 1
        head, tail = b[:2], b[1:]
        head.mul_(3.0)
        np.testing.assert_allclose(tangent(b), [3, 3, 1, 1])
        np.testing.assert_allclose(tangent(tail), [3, 1, 1])
        b.add_(x)
        np.testing.assert_allclose(tangent(head), [4, 4])
        np.testing.assert_allclose(tangent(tail), [4, 2, 2])
        plain = leaf(np.zeros(4), grad) * 1
        part = plain[1:3]
        part.copy_(x[:2] * 2)
        np.testing.assert_allclose(tangent(plain), [0, 2, 2, 0])
        u = b.unsqueeze(0)
        u.unsqueeze_(0)
        np.testing.assert_allclose(tangent(u), [[[4, 4, 2, 2]]])


def test_make_dual_primal_stays_plain():
    """An in-place op on a dual tensor leaves the primal it was made from without a tangent, as in PyTorch."""
    with fw.dual_level():
        p = leaf(np.array([1.0, 2.0]), False)
        d = fw.make_dual(p, leaf(np.array([1.0, 1.0]), False))
        d.mul_(2.0)
        np.testing.assert_allclose(tangent(d), [2, 2])
        assert tangent(p) is None


INPLACE_PARITY = {
    "mul_": lambda m, x, y: (x * 1).mul_(y),
    "view_write": lambda m, x, y: _write_view(x, y),
    "setitem_view": lambda m, x, y: _setitem_view(x, y),
    "scatter_reduce_": lambda m, x, y: (x * 1).scatter_reduce_(1, _idx([[0, 1, 1], [2, 2, 0]], m), y, "amax"),
    "index_copy_": lambda m, x, y: (x * 1).index_copy_(1, _idx([2, 0, 1], m), y),
    "masked_scatter_": lambda m, x, y: (x * 1).masked_scatter_(x > 0, y),
}


def _write_view(x, y):
    b = x * 1
    v = b[:, 1:]
    v.mul_(y[:, :2])
    return b, v, b[0]


def _setitem_view(x, y):
    b = x * 1
    b[1][:2] = y[0, :2]
    return b


@requires_torch
@pytest.mark.parametrize("name", list(INPLACE_PARITY))
def test_in_place_parity(name):
    fn = INPLACE_PARITY[name]
    compare_torch_jvp(lambda x, y: fn(ember, x, y), lambda x, y: fn(torch, x, y), rand(2, 3, seed=1),
                      rand(2, 3, seed=2))
