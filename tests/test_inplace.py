"""In-place ops (ember/ops/inplace.py): values, version counters, gradients through them, and their errors."""
import numpy as np
import pytest
from helpers import rand, requires_torch, torch

import ember

BINARY_INPLACE = ["add_", "sub_", "mul_", "div_", "pow_"]
AUGMENTED = {"+=": "__iadd__", "-=": "__isub__", "*=": "__imul__", "/=": "__itruediv__", "**=": "__ipow__"}
UNARY_INPLACE = {  # method -> (input range, args)
    "relu_": ((-1, 1), ()), "exp_": ((-1, 1), ()), "log_": ((0.5, 2), ()), "sqrt_": ((0.5, 2), ()),
    "neg_": ((-1, 1), ()), "abs_": ((-1, 1), ()), "sigmoid_": ((-2, 2), ()), "tanh_": ((-2, 2), ()),
    "floor_": ((-3, 3), ()), "ceil_": ((-3, 3), ()), "round_": ((-3, 3), ()), "trunc_": ((-3, 3), ()),
    "sign_": ((-1, 1), ()), "reciprocal_": ((0.5, 2), ()), "square_": ((-1, 1), ()), "sin_": ((-2, 2), ()),
    "cos_": ((-2, 2), ()), "clamp_": ((-1, 1), (-0.3, 0.4)), "clip_": ((-1, 1), (None, 0.2)),
    "clamp_min_": ((-1, 1), (0.1,)), "clamp_max_": ((-1, 1), (-0.1,)),
}


def _pair(lib, a, requires_grad=False):
    return lib.tensor(a, requires_grad=requires_grad)


# ---------------------------------------------------------------------- values and version counters
@requires_torch
@pytest.mark.parametrize("other", ["scalar", "same_shape", "broadcast", "zero_d"])
@pytest.mark.parametrize("method", BINARY_INPLACE)
def test_binary_inplace_values(method, other):
    a = rand(2, 3, low=0.5, high=2)
    b = {"scalar": 1.5, "same_shape": rand(2, 3, seed=1, low=0.5, high=2), "broadcast": rand(3, seed=2, low=0.5, high=2),
         "zero_d": np.array(1.25)}[other]
    res = []
    for lib in (ember, torch):
        t = lib.tensor(a)
        o = b if other == "scalar" else lib.tensor(b)
        v0 = t._version
        r = getattr(t, method)(o)
        assert r is t and t._version == v0 + 1
        res.append(t.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


@requires_torch
@pytest.mark.parametrize("op", sorted(AUGMENTED))
def test_augmented_assignment(op):
    a, b = rand(3, 2, low=0.5, high=2), rand(2, seed=1, low=0.5, high=2)
    res = []
    for lib in (ember, torch):
        t = lib.tensor(a, dtype=lib.float32)
        before, v0 = t, t._version
        exec(f"t {op} lib.tensor(b, dtype=lib.float32)")
        assert t is before and t._version == v0 + 1  # the same object, modified
        res.append(t.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6)


@requires_torch
@pytest.mark.parametrize("method", ["add_", "sub_"])
def test_alpha(method):
    res = []
    for lib in (ember, torch):
        t = lib.tensor([1.0, 2.0])
        getattr(t, method)(lib.tensor([3.0, 4.0]), alpha=-2)
        res.append(t.tolist())
    assert res[0] == res[1]


@requires_torch
@pytest.mark.parametrize("method", sorted(UNARY_INPLACE))
def test_unary_inplace_values(method):
    (lo, hi), args = UNARY_INPLACE[method]
    a = rand(2, 3, low=lo, high=hi)
    res = []
    for lib in (ember, torch):
        t = lib.tensor(a)
        v0 = t._version
        assert getattr(t, method)(*args) is t and t._version == v0 + 1
        res.append(t.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


def test_integer_inplace_ops():
    t = ember.tensor([1, 2, 3])
    t += 2
    t *= ember.tensor([1, 2, 3])
    t -= 1
    assert t.tolist() == [2, 7, 14] and t.dtype is ember.int64
    t.clamp_(3, 10)
    assert t.tolist() == [3, 7, 10] and t.dtype is ember.int64
    f = ember.tensor([1.0, 2.0])
    f += ember.tensor([1, 1])  # an int operand into a float tensor is fine
    assert f.tolist() == [2.0, 3.0]


def test_zero_fill_copy():
    t = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = t._version
    assert t.zero_() is t and t.tolist() == [[0.0, 0.0], [0.0, 0.0]] and t._version == v + 1
    assert t.fill_(2.5) is t and t.tolist() == [[2.5, 2.5], [2.5, 2.5]]
    t.fill_(ember.tensor(7.0))
    assert t.tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert t.copy_(ember.tensor([1.0, -1.0])) is t and t.tolist() == [[1.0, -1.0], [1.0, -1.0]]  # broadcast
    t.copy_(ember.tensor([[1, 2], [3, 4]]))  # cast from int64
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t.dtype is ember.float32
    t.copy_(np.array([[5.0, 6.0], [7.0, 8.0]]))
    assert t.tolist() == [[5.0, 6.0], [7.0, 8.0]] and t._version == v + 6


def test_fill_non_scalar_tensor_raises():
    with pytest.raises(RuntimeError, match="fill_.*0-dimension"):
        ember.zeros(3).fill_(ember.ones(2))


def test_copy_shape_mismatch_raises():
    with pytest.raises(RuntimeError, match=r"copy_.*\[3\].*\[2\]"):
        ember.zeros(2).copy_(ember.ones(3))


def test_inplace_on_view_shares_memory_and_version():
    base = ember.zeros(4)
    v = base.detach()
    v.add_(1)
    assert base.tolist() == [1.0] * 4 and base._version == v._version == 1


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("fn", [lambda x: x.add_(1), lambda x: x.mul_(2), lambda x: x.zero_(), lambda x: x.fill_(1),
                                lambda x: x.copy_(ember.ones(2)), lambda x: x.relu_(), lambda x: x.clamp_(0, 1),
                                lambda x: x.__iadd__(1)])
def test_leaf_requiring_grad_raises(fn):
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        fn(x)


def test_modified_saved_output_raises_on_backward():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected version 0"):
        y.backward(ember.ones(2))


def test_modified_saved_input_raises_on_backward():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2
    b = a * x  # saves a
    a.mul_(3)
    with pytest.raises(RuntimeError, match="inplace.*version"):
        b.backward(ember.ones(2))


def test_no_grad_modification_of_saved_leaf_is_detected():
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    y = w * w
    with ember.no_grad():
        w.add_(1)
    with pytest.raises(RuntimeError, match="inplace.*version"):
        y.backward(ember.ones(2))


def test_modification_through_detached_alias_is_detected():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.detach().zero_()
    with pytest.raises(RuntimeError, match="inplace.*version"):
        y.backward(ember.ones(2))


@pytest.mark.parametrize("dtype,op", [(d, o) for d in ("int64", "int32", "uint8", "bool") for o in ("+=", "*=", "-=")
                                      if (d, o) != ("bool", "-=")])  # bool subtraction is an error of its own
def test_int_tensor_with_float_raises(dtype, op):
    t = ember.tensor([1, 0], dtype=getattr(ember, dtype))
    with pytest.raises(RuntimeError, match=r"can't be cast to the desired output type"):
        exec(f"t {op} 1.5")
    assert t.tolist() == ember.tensor([1, 0], dtype=getattr(ember, dtype)).tolist()  # left unchanged


def test_int_tensor_div_raises():
    t = ember.tensor([2, 4])
    with pytest.raises(RuntimeError, match="div_.*can't be cast"):
        t /= 2
    with pytest.raises(RuntimeError, match="add_.*can't be cast"):
        t.add_(ember.tensor([0.5, 0.5]))


def test_int_result_of_graph_op_into_int_tensor_raises():
    t = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(ember.ones(2, requires_grad=True))


@pytest.mark.parametrize("method", ["add_", "mul_", "sub_", "div_", "pow_"])
def test_shape_mismatch_raises(method):
    with pytest.raises(RuntimeError, match=rf"{method}.*\[3\].*\[2, 3\]"):
        getattr(ember.ones(3), method)(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match=rf"{method}.*\[3\].*\[2\]"):
        getattr(ember.ones(3), method)(ember.ones(2))


def test_shape_mismatch_in_graph_raises():
    y = ember.ones(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match=r"add_.*\[3\].*\[2, 3\]"):
        y.add_(ember.ones(2, 3))


def test_read_only_broadcast_view_raises():
    v = ember.from_numpy(np.broadcast_to(np.zeros(3), (2, 3)))
    with pytest.raises(RuntimeError, match="add_.*read-only"):
        v.add_(1)


# ---------------------------------------------------------------------- no-grad updates of leaves (optimizer style)
def test_no_grad_update_of_parameter():
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    (p * p).backward(ember.ones(2))
    with ember.no_grad():
        p -= 0.1 * p.grad
        p.mul_(2)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None and p._version == 2
    np.testing.assert_allclose(p.detach().numpy(), [1.6, 3.2], rtol=1e-6)
    p.grad = None
    (p * 3).backward(ember.ones(2))  # usable in a new graph
    assert p.grad.tolist() == [3.0, 3.0]
    with ember.no_grad():
        p.zero_()
        p.copy_(ember.tensor([5.0, 6.0]))
        p.clamp_(max=5.5)
    assert p.tolist() == [5.0, 5.5] and p.is_leaf and p.requires_grad


# ---------------------------------------------------------------------- gradients through in-place ops (vs PyTorch)
def _grads_both(fn, *arrays, cot_seed=3):
    """Run fn(lib, *leaves) in ember and PyTorch; return the leaves' grads for a random cotangent."""
    out = []
    for lib in (ember, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        z = fn(lib, *leaves)
        cot = np.random.default_rng(cot_seed).standard_normal(tuple(z.shape))
        z.backward(lib.tensor(cot, dtype=z.dtype))
        out.append([leaf.grad.numpy() if leaf.grad is not None else None for leaf in leaves])
    return out


def _compare(fn, *arrays):
    e, t = _grads_both(fn, *arrays)
    for ge, gt in zip(e, t):
        assert (ge is None) == (gt is None)
        if gt is not None:
            np.testing.assert_allclose(ge, gt, rtol=1e-10, atol=1e-12)


def _chain(L, x):
    y = x * 2
    y.add_(1)
    y.mul_(3)
    return y.exp()


def _other_requires_grad(L, x, w):
    y = x * 1.5
    y.mul_(w)
    y.sub_(w, alpha=2)
    y += w * w
    y.div_(w + 3)
    return y


def _pow_(L, x, w):
    y = x + 2
    y.pow_(w)
    return y * 3  # (PyTorch forbids a second in-place op on y here: pow_ saved its result)


def _into_plain(L, x, w):
    y = L.ones(3, dtype=x.dtype) * 5  # needs no grad until an in-place op with w
    y.mul_(w)
    y.div_(x)
    y.add_(w, alpha=0.5)
    return y


def _augmented(L, x):
    y = x.exp()
    y = y * 1
    y += 1
    y *= x
    y -= 2
    y /= 4
    y **= 2
    return y


def _fill_copy(L, x, s):
    y = x * 2
    y.fill_(s * 2)  # a 0-d value that requires grad: its gradient is the sum of y's
    z = L.zeros(3, dtype=x.dtype)
    z.copy_(x * s)
    return y * x + z


def _zero(L, x):
    y = x * 2
    y.zero_()
    return y + x * x


@requires_torch
@pytest.mark.parametrize("fn,shapes", [(_chain, [(2, 3)]), (_other_requires_grad, [(2, 3), (3,)]), (_pow_, [(4,), (4,)]),
                                       (_into_plain, [(3,), (3,)]), (_augmented, [(3,)]), (_zero, [(3,)]),
                                       (_fill_copy, [(3,), ()])],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_graph_gradients_as_pytorch(fn, shapes):
    arrays = [rand(*s, seed=i, low=0.5, high=1.5) for i, s in enumerate(shapes)]
    _compare(fn, *arrays)


@requires_torch
@pytest.mark.parametrize("method", sorted(UNARY_INPLACE))
def test_unary_inplace_gradients_as_pytorch(method):
    (lo, hi), args = UNARY_INPLACE[method]

    def fn(L, x, w):
        y = x * 1.0
        getattr(y, method)(*args)
        return y * w

    _compare(fn, rand(2, 3, low=lo, high=hi), rand(2, 3, seed=1))


@requires_torch
def test_inplace_on_result_of_saved_output_op_into_later_ops():
    def fn(L, x):
        y = x.sigmoid() * 1  # the sigmoid's saved output is not y
        y.mul_(x)
        y.tanh_()
        return y.exp()
    _compare(fn, rand(2, 2))


def test_inplace_makes_tensor_require_grad():
    w = ember.tensor([2.0, 3.0], requires_grad=True)
    y = ember.full((2,), 5.0)
    y.mul_(w)
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    y.backward(ember.ones(2))
    assert w.grad.tolist() == [5.0, 5.0]  # the old values of y, not the new ones


def test_pow_inplace_twice_gradient():
    # ember keeps a copy of each in-place op's input, so a chain PyTorch forbids still differentiates correctly
    x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    y = x + 2
    y.pow_(x)
    y.pow_(2)
    y.backward(ember.ones(2, dtype=ember.float64))
    xs = np.array([0.5, 1.5])
    expected = 2 * (xs + 2) ** (2 * xs) * (np.log(xs + 2) + xs / (xs + 2))  # d/dx (x+2)^(2x)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_copy_into_plain_tensor_gives_grad_to_source():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    buf = ember.zeros(2, dtype=ember.float64)
    buf.copy_(x * 3)
    assert buf.dtype is ember.float64 and buf.requires_grad
    buf.backward(ember.ones(2, dtype=ember.float64))
    assert x.grad.dtype is ember.float32 and x.grad.tolist() == [3.0, 3.0]


def test_grad_fn_changes_after_inplace():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    f0 = y.grad_fn
    y.add_(1)
    assert y.grad_fn is not f0 and "Add" in y.grad_fn.name()


# ---------------------------------------------------------------------- in-place random fills
def test_random_fills_distribution_dtype_and_version():
    ember.manual_seed(0)
    t = ember.empty(20000)
    assert t.normal_(1.0, 2.0) is t and t.dtype == ember.float32 and t._version == 1
    assert abs(t.mean().item() - 1.0) < 0.05 and abs(t.std().item() - 2.0) < 0.05
    u = ember.empty(20000, dtype=ember.float64).uniform_(-3, 5)
    assert u.dtype == ember.float64 and u.min().item() >= -3 and u.max().item() < 5
    assert abs(u.mean().item() - 1.0) < 0.1
    b = ember.empty(20000).bernoulli_(0.25)
    assert set(np.unique(b.numpy())) <= {0.0, 1.0} and abs(b.mean().item() - 0.25) < 0.02
    e = ember.empty(20000).exponential_(4.0)
    assert e.min().item() >= 0 and abs(e.mean().item() - 0.25) < 0.02
    r = ember.zeros(1000, dtype=ember.int64).random_(3, 7)
    assert r.dtype == ember.int64 and set(np.unique(r.numpy())) == {3, 4, 5, 6}
    assert set(np.unique(ember.zeros(1000).random_(4).numpy())) == {0.0, 1.0, 2.0, 3.0}


def test_random_fills_follow_the_seed_and_generator():
    ember.manual_seed(5)
    a = ember.empty(4).normal_()
    ember.manual_seed(5)
    assert np.array_equal(a.numpy(), ember.empty(4).normal_().numpy())
    g1, g2 = ember.Generator().manual_seed(1), ember.Generator().manual_seed(1)
    assert np.array_equal(ember.empty(3).uniform_(generator=g1).numpy(), ember.empty(3).uniform_(generator=g2).numpy())


def test_random_fills_errors():
    w = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="normal_: a leaf Variable that requires grad"):
        w.normal_()
    with ember.no_grad():
        w.uniform_(-1, 1)  # the usual initialisation idiom
    assert w.requires_grad and w.is_leaf
    with pytest.raises(RuntimeError, match="normal_.*std"):
        ember.empty(2).normal_(0, -1)
    with pytest.raises(RuntimeError, match="uniform_.*from=2.*to=1"):
        ember.empty(2).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="normal_.*floating-point.*int64"):
        ember.zeros(2, dtype=ember.int64).normal_()
    with pytest.raises(RuntimeError, match="bernoulli_.*0 <= p <= 1"):
        ember.empty(2).bernoulli_(1.5)


# ---------------------------------------------------------------------- PyTorch parity fixes (issue 6)
def test_sub_inplace_with_bool_raises() -> None:
    """sub_ refuses a bool on either side, like out-of-place sub (and PyTorch)."""
    for fn in (lambda: ember.tensor([1]).sub_(False), lambda: ember.tensor([1.0]).sub_(ember.tensor(True)),
               lambda: ember.tensor([True]).sub_(ember.tensor([True])), lambda: ember.tensor([True]).sub_(1)):
        with pytest.raises(RuntimeError, match="sub.*bool"):
            fn()


def test_pow_inplace_int_negative_exponent_message() -> None:
    with pytest.raises(RuntimeError, match=r"pow_.*integers to negative integer powers.*-1"):
        ember.tensor([1, -1, 2]).pow_(-1)
    assert ember.tensor([1, -1, 2]).pow_(ember.tensor(-1)).tolist() == [1, -1, 0]  # a tensor exponent is defined


def test_setitem_advanced_index_dtype_must_match() -> None:
    """An advanced-index write does not cast (RuntimeError naming both dtypes); basic writes, scalars and
    one-element values under a single bool mask do."""
    with pytest.raises(RuntimeError, match="index put.*float32.*int64"):
        ember.zeros(2)[ember.tensor([0])] = ember.tensor([1])
    with pytest.raises(RuntimeError, match="index put"):  # the dtype check comes before the range check
        ember.zeros(2)[ember.tensor([5])] = ember.tensor([1])
    t = ember.zeros(2)
    t[0] = ember.tensor(1)
    t[ember.tensor([1])] = 2
    t[ember.tensor([True, False])] = ember.tensor(3, dtype=ember.float64)
    assert t.tolist() == [3.0, 2.0]


@pytest.mark.parametrize("shape,dim,exc", [((2,), 0, IndexError), ((2, 3), 0, RuntimeError),
                                           ((2, 2, 2), 1, IndexError), ((2, 3), 1, RuntimeError)])
def test_index_add_out_of_range_exception_type(shape, dim, exc) -> None:
    """PyTorch's (CPU) exception type for out-of-range and negative index_add indices."""
    src = list(shape)
    src[dim] = 1
    for i in (shape[dim], -1):
        with pytest.raises(exc, match=f"index_add.*{i}"):
            ember.index_add(ember.ones(shape), dim, ember.tensor([i]), ember.ones(src))


def test_fill_zero_keep_graph_tensor_in_graph() -> None:
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    y.zero_()
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


@requires_torch
@pytest.mark.parametrize("case", ["row", "transposed", "strided", "nested", "setitem", "copy", "base_no_grad"])
def test_inplace_on_view_of_graph_tensor_matches_torch(case: str) -> None:
    """An in-place op on a view of a non-leaf rewrites the base's history (PyTorch's CopySlices):
    the base's values, x's and the operand's gradients match torch."""
    ops = {"row": lambda y, w: y[0].mul_(w[:4]), "transposed": lambda y, w: y.t().add_(w[:3]),
           "strided": lambda y, w: y[:, ::2].mul_(w[:2]), "nested": lambda y, w: y[1:].t()[2].mul_(w[1]),
           "setitem": lambda y, w: y[1].__setitem__(slice(1, 3), w[:2] * 3),
           "copy": lambda y, w: y[2].copy_(w[:4]), "base_no_grad": None}
    out = []
    for L in (ember, torch):
        x = L.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        w = L.tensor([0.5, 1.5, 2.0, 3.0], requires_grad=True)
        if case == "base_no_grad":  # a base outside the graph joins it
            y = L.ones(3, 4, dtype=L.float64)
            y[1:, 1].mul_(w[:2])
        else:
            y = x * 2
            ops[case](y, w)
        (y * y).sum().backward()
        out.append([y.detach().numpy().copy(), x.grad, w.grad])
    for e, t in zip(*out):
        if e is None or t is None:
            assert e is None and t is None
        else:
            np.testing.assert_allclose(np.asarray(e.numpy() if hasattr(e, "numpy") else e),
                                       t.numpy() if hasattr(t, "numpy") else t, rtol=1e-12)


def test_inplace_on_view_of_leaf_or_detached_raises() -> None:
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="mul_.*view of a leaf"):
        x[0].mul_(2)
    y = x * 2
    with ember.no_grad():
        v = y[:2]
    with pytest.raises(RuntimeError, match="mul_.*outside the graph"):
        v.mul_(ember.ones(2, requires_grad=True))


# ---------------------------------------------------------------------- stale views (issue 6, task 6h)
# A view taken before its base is changed in place (directly or through another view) must, when read
# afterwards, carry the base's new history (PyTorch regenerates the view's grad_fn), not the old one.
def _views_before(L, y, w):
    """Views of y (3x4, non-leaf) taken before any in-place op; keys name them."""
    return {"row": y[0], "slice": y[0:2], "col": y[:, 1], "t": y.t(), "strided": y[:, ::2], "reshape": y.reshape(12), "view": y.view(4, 3), "unsqueeze": y.unsqueeze(0),
            "vv": y[1:].t()[2], "expand": y[1].unsqueeze(0).expand(2, 4), "diag_t": y.t()[1:3, 0:2]}


STALE_MUTATIONS = {  # in-place change of y's memory, directly or through a view taken after the views above
    "mul_base": lambda y, w: y.mul_(2),
    "add_base_grad_operand": lambda y, w: y.add_(w),
    "clamp_base": lambda y, w: y.clamp_(3.0, 15.0),
    "zero_base": lambda y, w: y.zero_(),
    "copy_base": lambda y, w: y.copy_(w * 3),
    "setitem_base": lambda y, w: y.__setitem__(1, w * 5),
    "mul_other_view": lambda y, w: y[1:].mul_(w),
    "setitem_other_view": lambda y, w: y.t()[1].__setitem__(slice(0, 2), w[:2]),
    "two_changes": lambda y, w: (y.mul_(w), y[:, 2].add_(w[:3])),
}
STALE_VIEWS = ["row", "slice", "col", "t", "strided", "reshape", "view", "unsqueeze", "vv", "expand", "diag_t"]


def _torch_or_ember(a):
    return np.asarray(a.detach().numpy() if hasattr(a, "detach") else a)


@requires_torch
@pytest.mark.parametrize("mutation", sorted(STALE_MUTATIONS))
def test_view_taken_before_inplace_on_base_sees_new_history(mutation: str) -> None:
    """Values and gradients (x's and the operand's) of every view read after the change match torch."""
    res = []
    for L in (ember, torch):
        x = L.tensor(np.arange(1.0, 13.0).reshape(3, 4), requires_grad=True)
        w = L.tensor([0.5, 1.5, 2.0, 3.0], requires_grad=True, dtype=L.float64)
        y = x * 1.0
        views = _views_before(L, y, w)
        STALE_MUTATIONS[mutation](y, w)
        out = []
        for k in STALE_VIEWS:
            v = views[k]
            x.grad = w.grad = None
            c = L.tensor(np.linspace(0.5, 2.0, v.numel()).reshape(tuple(v.shape)), dtype=L.float64)
            (v * c).sum().backward(retain_graph=True)  # a weighted sum: a misplaced gradient shows
            out.append((k, _torch_or_ember(v), x.grad.numpy().copy(), None if w.grad is None else w.grad.numpy().copy()))
        res.append(out)
    for (k, ve, gxe, gwe), (_, vt, gxt, gwt) in zip(*res):
        np.testing.assert_allclose(ve, vt, rtol=1e-12, err_msg=f"view {k}: values")
        np.testing.assert_allclose(gxe, gxt, rtol=1e-12, err_msg=f"view {k}: x.grad")
        if gwt is None:
            assert gwe is None or not np.any(gwe), f"view {k}: w.grad"
        else:
            assert gwe is not None, f"view {k}: w.grad missing"
            np.testing.assert_allclose(gwe, gwt, rtol=1e-12, err_msg=f"view {k}: w.grad")


@requires_torch
def test_brief_example_and_later_ops_on_stale_view() -> None:
    """The issue's example; then an in-place op on the old view itself, and a view of it, stay right."""
    res = []
    for L in (ember, torch):
        x = L.ones(3, requires_grad=True, dtype=L.float64)
        y = x * 1.0
        v = y[0:2]
        vv = v[1:]
        y.mul_(2)
        v.add_(x[:2] * 3)      # in place on the stale view: must build on y's new history
        y[2] = x[0] * 7        # and another change of the base, seen by v and vv
        (v * L.tensor([1.0, 10.0], dtype=L.float64)).sum().backward(retain_graph=True)
        g1 = x.grad.numpy().copy()
        x.grad = None
        (vv * 100).sum().backward()
        res.append((y.detach().numpy().copy(), g1, x.grad.numpy().copy(), v.grad_fn is not None))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12)


@requires_torch
def test_two_views_inplace_through_one_read_other() -> None:
    """Overlapping views: an in-place op through one changes the other's overlapping part and history."""
    res = []
    for L in (ember, torch):
        x = L.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True, dtype=L.float64)
        y = x * 1.0
        a, b = y[0:3], y[1:4]
        b.mul_(x[1:4])          # a's elements 1, 2 now depend on x twice
        a.pow_(2)               # and b's elements 0, 1 are squared through a
        (a.sum() + (b * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum()).backward()
        res.append((a.detach().numpy().copy(), b.detach().numpy().copy(), x.grad.numpy().copy()))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12)


def test_stale_view_grad_fn_changes_and_views_of_leaves_unregistered() -> None:
    from ember.ops.inplace import VIEWS
    x = ember.ones(2, 3, requires_grad=True)
    y = x * 2
    v = y.t()
    old = v.grad_fn
    y.add_(1)
    assert v.grad_fn is not old and v.requires_grad
    x.t()  # a view of a leaf: nothing recorded (a leaf that requires grad can't change in place with autograd)
    ember.ones(3)[1:]  # nor a view outside the graph
    with ember.no_grad():
        y[1:]
    assert id(x) not in VIEWS and len(VIEWS.get(id(y), [None, None])) == 2


def test_view_registry_does_not_keep_views_or_bases_alive() -> None:
    import gc
    import weakref

    from ember.ops.inplace import VIEWS
    x = ember.ones(4, requires_grad=True)
    y = x * 1.0
    key = id(y)
    for i in range(300):  # many short-lived views of one base: dead entries are pruned
        y[i % 4]
    assert len(VIEWS[key]) <= 130
    v = y[:2]
    rv = weakref.ref(v)
    del v
    gc.collect()
    assert rv() is None
    y.mul_(2)  # rebuilding skips dead views
    del y
    gc.collect()
    assert key not in VIEWS


def test_detached_view_is_not_put_back_in_graph() -> None:
    x = ember.ones(3, requires_grad=True)
    y = x * 1.0
    v = y[:2]
    v.detach_()
    y.mul_(2)
    assert not v.requires_grad and v.grad_fn is None and v.tolist() == [2.0, 2.0]


def test_view_with_other_dtype_raises_on_backward_after_base_change() -> None:
    """A view whose elements can't be mapped to its base's gets a history that refuses backward,
    rather than a silently wrong gradient."""
    from ember.ops.inplace import as_view
    x = ember.ones(4, requires_grad=True)
    y = x * 1.0
    v = as_view(y[::2] * 1.0, y)  # stands for such a view: in the graph, its memory not mappable into y's
    v.sum().backward(retain_graph=True)  # fine before the change
    y.mul_(2)
    with pytest.raises(RuntimeError, match="base was modified in place"):
        v.sum().backward()


@requires_torch
def test_zero_d_base_views_follow_inplace() -> None:
    res = []
    for L in (ember, torch):
        x = L.tensor(3.0, requires_grad=True, dtype=L.float64)
        y = x * 1.0
        u, e = y.unsqueeze(0), y.expand(3)
        y.mul_(x)
        ((u * 2).sum() + (e * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum()).backward()
        res.append((u.detach().numpy().copy(), e.detach().numpy().copy(), x.grad.numpy().copy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_saved_output_overwritten_then_dropped_still_raises():
    """exp saves its output; writing that output in place must make exp's backward refuse even when the
    output tensor itself is gone by the time backward runs (it was only a temporary)."""
    x = ember.randn(3, requires_grad=True)

    def g(x):
        h = x.exp()
        h.add_(1)
        return h

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        g(x).sum().backward()
    y = x.exp()  # the untouched case still works
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()), rtol=1e-6)
