"""Shape ops (ember/ops/shape.py): gradients, PyTorch parity, views and version sharing, multi-output
split/chunk/unbind, dtype promotion in cat/stack, and errors."""
import warnings

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember
from ember.ops import shape as S

# name -> (fn(m, *tensors) written once for both ember and torch (m is the module), [input shapes per case])
OPS = {
    "reshape": (lambda m, x: x.reshape(4, -1), [[(2, 3, 4)], [(8, 3)]]),
    "reshape_fn_tuple": (lambda m, x: m.reshape(x, (-1,)), [[(2, 3)], [(5,)], [()]]),
    "reshape_to_0d": (lambda m, x: x.reshape(()), [[(1,)], [(1, 1)]]),
    "view": (lambda m, x: x.view(3, 2, 4), [[(2, 3, 4)], [(24,)]]),
    "view_tuple": (lambda m, x: x.view((-1, 2)), [[(2, 3, 4)]]),
    "view_as": (lambda m, x: x.view_as(m.zeros(6, 4)), [[(2, 3, 4)]]),
    "reshape_as": (lambda m, x: x.reshape_as(m.zeros(4, 6)), [[(2, 3, 4)]]),
    "flatten": (lambda m, x: x.flatten(), [[(2, 3, 4)], [()], [(5,)]]),
    "flatten_range": (lambda m, x: m.flatten(x, 1, -1), [[(2, 3, 4)]]),
    "flatten_neg": (lambda m, x: x.flatten(-3, -2), [[(2, 3, 4)]]),
    "ravel": (lambda m, x: x.ravel(), [[(2, 3, 4)]]),
    "unflatten": (lambda m, x: x.unflatten(-1, (2, -1)), [[(3, 4)], [(2, 3, 4)]]),
    "unflatten_fn": (lambda m, x: m.unflatten(x, 0, (3, 1, 2)), [[(6, 2)]]),
    "squeeze": (lambda m, x: x.squeeze(), [[(1, 3, 1, 2)], [(1,)], [(3,)]]),
    "squeeze_dim": (lambda m, x: x.squeeze(-2), [[(1, 3, 1, 2)]]),
    "squeeze_non1_dim": (lambda m, x: x.squeeze(1), [[(1, 3, 1, 2)]]),
    "squeeze_tuple": (lambda m, x: m.squeeze(x, (0, 2)), [[(1, 3, 1, 2)]]),
    "unsqueeze": (lambda m, x: x.unsqueeze(-1), [[(3, 2)], [()]]),
    "unsqueeze_mid": (lambda m, x: m.unsqueeze(x, 1), [[(3, 2)]]),
    "transpose": (lambda m, x: x.transpose(0, -1), [[(2, 3, 4)], [(3, 2)]]),
    "swapaxes": (lambda m, x: m.swapaxes(x, 0, 1), [[(2, 3, 4)]]),
    "swapdims": (lambda m, x: x.swapdims(-1, -2), [[(2, 3, 4)]]),
    "t": (lambda m, x: x.t(), [[(3, 4)], [(3,)], [()]]),
    "t_fn": (lambda m, x: m.t(x), [[(2, 5)]]),
    "T": (lambda m, x: x.T, [[(3, 4)]]),
    "mT": (lambda m, x: x.mT, [[(2, 3, 4)], [(3, 4)]]),
    "permute": (lambda m, x: x.permute(2, 0, 1), [[(2, 3, 4)]]),
    "permute_neg_tuple": (lambda m, x: m.permute(x, (-1, -3, -2)), [[(2, 3, 4)]]),
    "movedim": (lambda m, x: x.movedim(0, -1), [[(2, 3, 4)]]),
    "movedim_tuple": (lambda m, x: m.movedim(x, (0, 1), (2, 0)), [[(2, 3, 4)]]),
    "moveaxis": (lambda m, x: m.moveaxis(x, -1, 1), [[(2, 3, 4)]]),
    "expand": (lambda m, x: x.expand(2, 3, 5, 4), [[(3, 1, 4)]]),
    "expand_keep": (lambda m, x: x.expand(2, -1, 5, -1), [[(3, 1, 4)]]),
    "expand_tuple": (lambda m, x: x.expand((3, 4)), [[(4,)], [()]]),
    "expand_as": (lambda m, x: x.expand_as(m.zeros(2, 3, 4)), [[(3, 1)]]),
    "broadcast_to": (lambda m, x: m.broadcast_to(x, (2, 3, 4)), [[(3, 1)], [(4,)]]),
    "repeat": (lambda m, x: x.repeat(2, 1, 3), [[(3, 4)], [(4,)]]),
    "repeat_same": (lambda m, x: x.repeat(2, 3), [[(3, 4)]]),
    "repeat_zero": (lambda m, x: x.repeat(0, 2), [[(3, 4)]]),
    "tile": (lambda m, x: x.tile((2,)), [[(3, 4)]]),
    "tile_more": (lambda m, x: m.tile(x, (2, 1, 2)), [[(3, 4)]]),
    "flip": (lambda m, x: x.flip(0, -1), [[(2, 3, 4)]]),
    "flip_fn": (lambda m, x: m.flip(x, (1,)), [[(2, 3, 4)]]),
    "fliplr": (lambda m, x: m.fliplr(x), [[(3, 4)]]),
    "flipud": (lambda m, x: x.flipud(), [[(3, 4)], [(5,)]]),
    "roll_flat": (lambda m, x: x.roll(2), [[(3, 4)], [(5,)]]),
    "roll_dims": (lambda m, x: m.roll(x, (1, -2), (0, -1)), [[(3, 4)], [(2, 3, 4)]]),
    "roll_int_dim": (lambda m, x: x.roll(-1, 1), [[(3, 4)]]),
    "tril": (lambda m, x: x.tril(), [[(3, 4)], [(2, 3, 3)]]),
    "tril_k": (lambda m, x: m.tril(x, -1), [[(4, 3)]]),
    "triu": (lambda m, x: x.triu(1), [[(3, 4)], [(2, 3, 3)]]),
    "triu_fn": (lambda m, x: m.triu(x, diagonal=-1), [[(4, 4)]]),
    "narrow": (lambda m, x: x.narrow(-1, 1, 2), [[(3, 4)], [(2, 3, 4)]]),
    "narrow_neg_start": (lambda m, x: m.narrow(x, 0, -2, 2), [[(3, 4)]]),
    "contiguous": (lambda m, x: x.contiguous(), [[(3, 4)]]),
    "split_int": (lambda m, x: x.split(2, -1), [[(3, 5)], [(3, 4)]]),
    "split_list": (lambda m, x: m.split(x, [1, 0, 3], 1), [[(2, 4)]]),
    "chunk": (lambda m, x: x.chunk(3), [[(5, 2)], [(6,)]]),
    "chunk_dim": (lambda m, x: m.chunk(x, 2, -1), [[(2, 5)]]),
    "unbind": (lambda m, x: x.unbind(1), [[(2, 3, 2)]]),
    "unbind_fn": (lambda m, x: m.unbind(x), [[(4,)], [(3, 2)]]),
    "atleast_1d": (lambda m, x: m.atleast_1d(x), [[()], [(3,)]]),
    "atleast_2d": (lambda m, x: m.atleast_2d(x), [[()], [(3,)]]),
    "atleast_3d": (lambda m, x: m.atleast_3d(x), [[()], [(3,)], [(2, 3)]]),
    # several inputs
    "cat": (lambda m, x, y: m.cat([x, y], 1), [[(2, 3), (2, 4)], [(2, 1, 3), (2, 2, 3)]]),
    "cat_neg_three": (lambda m, x, y: m.cat((x, y, x), -1), [[(2, 3), (2, 1)]]),
    "cat_dim0": (lambda m, x, y: m.concat([x, y]), [[(3,), (2,)], [(1, 2), (3, 2)]]),
    "concatenate": (lambda m, x, y: m.concatenate([x, y], dim=0), [[(2, 2), (1, 2)]]),
    "stack": (lambda m, x, y: m.stack([x, y]), [[(2, 3), (2, 3)], [(), ()]]),
    "stack_neg": (lambda m, x, y: m.stack((x, y, x), -1), [[(2, 3), (2, 3)]]),
    "hstack": (lambda m, x, y: m.hstack([x, y]), [[(3,), (2,)], [(2, 3), (2, 1)], [(), (2,)]]),
    "vstack": (lambda m, x, y: m.vstack([x, y]), [[(3,), (2, 3)], [(2, 2), (1, 2)]]),
    "dstack": (lambda m, x, y: m.dstack([x, y]), [[(2, 3), (2, 3)], [(3,), (3,)]]),
    "broadcast_tensors": (lambda m, x, y: m.broadcast_tensors(x, y), [[(3, 1), (1, 4)], [(2, 3), (3,)]]),
}
CASES = [(name, shapes) for name in sorted(OPS) for shapes in OPS[name][1]]
IDS = [f"{n}-{'-'.join(map(str, s))}" for n, s in CASES]


def _ember(name):
    fn = OPS[name][0]
    return lambda *xs: fn(ember, *xs)


def _torch(name):
    fn = OPS[name][0]
    return lambda *xs: fn(torch, *xs)


def _inputs(shapes, dtype=np.float64, seed=0):
    return [rand(*s, seed=seed + i, dtype=dtype) for i, s in enumerate(shapes)]


@pytest.fixture(autouse=True)
def _no_T_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # x.T on non-2-D is deprecated (tested separately)
        yield


@pytest.mark.parametrize("name,shapes", CASES, ids=IDS)
def test_gradcheck(name, shapes):
    check_grad(_ember(name), *_inputs(shapes))


@pytest.mark.parametrize("name,shapes", CASES, ids=IDS)
def test_gradcheck_noncontiguous(name, shapes):
    arrays = [noncontig(a) if a.ndim else a for a in _inputs(shapes, seed=5)]
    check_grad(_ember(name), *arrays)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,shapes", CASES, ids=IDS)
def test_parity(name, shapes, dtype):
    compare_torch(_ember(name), _torch(name), *_inputs(shapes, dtype, seed=3))


@requires_torch
@pytest.mark.parametrize("name", ["transpose", "permute", "reshape", "flatten", "squeeze", "narrow", "split_int",
                                  "unbind", "expand", "movedim", "flip", "roll_dims", "tril"])
def test_parity_transposed_input(name):
    """Inputs that are themselves transposed views (reshape then has to copy)."""
    fn = OPS[name][0]
    shape = OPS[name][1][0][0]
    a = rand(*reversed(shape), seed=7)
    compare_torch(lambda x: fn(ember, x.permute(*reversed(range(x.ndim)))),
                  lambda x: fn(torch, x.permute(*reversed(range(x.ndim)))), a)


def test_reshape_of_transposed_input_gradcheck():
    check_grad(lambda x: x.t().reshape(-1), rand(3, 4))
    check_grad(lambda x: x.transpose(0, 1).flatten(1), rand(2, 3, 4))


# ---------------------------------------------------------------------- dtypes
@requires_torch
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int64", "float32"), ("bool", "uint8"),
                                    ("int8", "uint8"), ("int32", "int64"), ("bool", "float64"), ("int64", "int64")])
@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_stack_type_promotion(op, dtypes):
    a = np.arange(6).reshape(2, 3) % 2
    e = getattr(ember, op)([ember.tensor(a.astype(dtypes[0])), ember.tensor(a.astype(dtypes[1]))], 1)
    t = getattr(torch, op)([torch.tensor(a.astype(dtypes[0])), torch.tensor(a.astype(dtypes[1]))], 1)
    assert e.dtype.name == str(t.dtype).split(".")[-1]
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@requires_torch
@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_stack_mixed_float_parity(op):
    """A float32 and a float64 input: float64 result, each gradient in its input's dtype."""
    compare_torch(lambda x, y: getattr(ember, op)([x, y]), lambda x, y: getattr(torch, op)([x, y]),
                  rand(2, 3, dtype=np.float32), rand(2, 3, seed=1), rtol=1e-6, atol=1e-6)


@requires_torch
def test_cat_int_and_float_inputs():
    compare_torch(lambda i, x: ember.cat([i, x], 1), lambda i, x: torch.cat([i, x], 1),
                  np.arange(6).reshape(3, 2), rand(3, 2))


@pytest.mark.parametrize("dtype", ["int64", "bool", "uint8"])
def test_shape_ops_keep_integer_dtypes(dtype):
    x = ember.tensor(np.arange(6).reshape(2, 3).astype(dtype))
    for y in (x.t(), x.reshape(3, 2), x.flip(0), x.roll(1), x.tril(), x.repeat(2, 1), x.expand(2, 2, 3),
              ember.cat([x, x]), ember.stack([x, x]), x.unbind()[0], x.split(1)[0], x.narrow(1, 0, 2)):
        assert y.dtype.name == dtype and not y.requires_grad


# ---------------------------------------------------------------------- view semantics
VIEWS = {
    "view": lambda x: x.view(6, 4),
    "reshape": lambda x: x.reshape(4, 6),
    "flatten": lambda x: x.flatten(1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(1, 2, 0),
    "movedim": lambda x: x.movedim(0, 2),
    "mT": lambda x: x.mT,
    "T": lambda x: x.T,
    "narrow": lambda x: x.narrow(1, 1, 2),
    "split": lambda x: x.split(2, 1)[1],
    "chunk": lambda x: x.chunk(2, 2)[1],
    "unbind": lambda x: x.unbind(1)[2],
    "ravel": lambda x: x.ravel(),
    "view_of_view": lambda x: x.transpose(0, 1).unsqueeze(0).narrow(3, 1, 2),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("grad", [False, True])
def test_views_share_memory_and_version(name, grad):
    base = ember.tensor(rand(2, 3, 4), requires_grad=grad)
    x = base * 1 if grad else base  # with grad: a non-leaf, so its views are recorded in the graph
    y = VIEWS[name](x)
    assert np.shares_memory(y._data, x._data)
    assert y._base is x
    v0 = x._version
    with ember.no_grad():
        x.add_(1.0)  # through the base: the view sees it and shares the bump
    assert y._version == x._version == v0 + 1
    np.testing.assert_allclose(y.detach().numpy(), VIEWS[name](ember.tensor(rand(2, 3, 4) + 1)).numpy())
    with ember.no_grad():
        y.mul_(0.0)  # through the view: the base sees it and shares the bump
    assert y._version == x._version == v0 + 2
    assert np.count_nonzero(x.detach().numpy()) == x.numel() - y.numel()


def test_expand_is_a_shared_read_only_view():
    x = ember.tensor(rand(3, 1))
    y = x.expand(2, 3, 4)
    assert np.shares_memory(y._data, x._data) and y._base is x
    with ember.no_grad():
        x.add_(1.0)
    assert y._version == x._version == 1
    np.testing.assert_allclose(y.numpy()[1, :, 3], x.numpy()[:, 0])
    with pytest.raises(RuntimeError, match="read-only"):
        y.add_(1.0)
    for z in ember.broadcast_tensors(x, ember.zeros(2, 3, 4)):
        assert z._base is not None and z.shape == (2, 3, 4)


def test_view_of_a_view_records_the_root_base():
    x = ember.tensor(rand(2, 3, 4))
    y = x.transpose(0, 1).reshape(3, 2, 2, 2)  # splits a dim: still a view, of x itself
    assert np.shares_memory(y._data, x._data) and y._base is x
    z = x.transpose(0, 1).reshape(3, 8)  # merges dims across the transposition: a copy
    assert not np.shares_memory(z._data, x._data) and z._base is None


@pytest.mark.parametrize("fn", [lambda x: x.flip(0), lambda x: x.roll(1), lambda x: x.repeat(1, 1, 1),
                                lambda x: x.tril(), lambda x: ember.cat([x]), lambda x: ember.stack([x]),
                                lambda x: x.t().reshape(-1), lambda x: x.t().flatten()])
def test_copying_ops_do_not_alias(fn):
    x = ember.tensor(rand(3, 4))
    y = fn(x)
    assert not np.shares_memory(y._data, x._data)
    assert y._base is None
    with ember.no_grad():
        x.add_(1.0)
    assert y._version == 0


def test_view_ops_return_new_tensors_but_contiguous_returns_self():
    x = ember.tensor(rand(3, 4))
    assert x.contiguous() is x
    for y in (x.view(3, 4), x.reshape(3, 4), x.squeeze(), x.expand(3, 4), x.permute(0, 1)):
        assert y is not x and y._base is x
    xt = x.t()
    c = xt.contiguous()
    assert c is not xt and c.is_contiguous() and not np.shares_memory(c._data, x._data)
    np.testing.assert_array_equal(c.numpy(), x.numpy().T)


def test_contiguous_is_a_differentiable_identity():
    check_grad(lambda x: x.t().contiguous(), rand(3, 4))
    x = ember.tensor(rand(3, 4), requires_grad=True)
    y = x.t().contiguous()
    assert y.grad_fn is not None and y.is_contiguous()


def test_view_requires_compatible_strides():
    x = ember.tensor(rand(3, 4))
    with pytest.raises(RuntimeError, match=r"view.*Use \.reshape\(\.\.\.\) instead"):
        x.t().view(12)
    # a transposed tensor can still be viewed where no dims are merged across the transposition
    y = x.t().view(2, 2, 3)
    assert np.shares_memory(y._data, x._data)
    np.testing.assert_array_equal(y.numpy(), x.numpy().T.reshape(2, 2, 3))


def test_inplace_on_base_invalidates_saved_view():
    """A view saved for backward shares its base's version: changing the base in place is detected."""
    a = ember.tensor(rand(2, 3), requires_grad=True)
    b = a * 1
    v = b.view(6)
    w = v * v  # saves v
    b.mul_(2.0)
    assert v._version == b._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_inplace_on_view_visible_in_base_values():
    x = ember.zeros(2, 3)
    x.t().narrow(0, 0, 1).fill_(5.0)
    np.testing.assert_array_equal(x.numpy()[:, 0], [5.0, 5.0])
    assert x._version == 1


# ---------------------------------------------------------------------- split / chunk / unbind: one multi-output node
def test_split_pieces_share_one_node():
    x = ember.tensor(rand(4, 3), requires_grad=True)
    pieces = x.split(1)
    assert len(pieces) == 4
    assert all(p.grad_fn is pieces[0].grad_fn for p in pieces)
    assert pieces[0].grad_fn.n_out == 4


@pytest.mark.parametrize("used", [[0], [2, 5], [63], list(range(64))])
def test_unbind_unused_pieces_linear_cost(used, monkeypatch):
    """Unused pieces get zero gradient, and backward allocates at most one zero piece (not one full-size
    zero gradient per piece, which would make unbind of n pieces cost O(n²))."""
    allocated = []
    real = S._zeros
    monkeypatch.setattr(S, "_zeros", lambda like, shape: allocated.append(int(np.prod(shape))) or real(like, shape))
    calls = []
    real_backward = S.Unbind.backward
    monkeypatch.setattr(S.Unbind, "backward", lambda self, grads: calls.append(len(grads)) or real_backward(self, grads))
    a = rand(64, 5)
    x = ember.tensor(a, requires_grad=True)
    pieces = x.unbind(0)
    loss = None
    for i in used:
        term = (pieces[i] * pieces[i] * (i + 1)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    expected = np.zeros_like(a)
    expected[used] = 2 * a[used] * (np.array(used)[:, None] + 1)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
    assert calls == [64]  # one backward call for all pieces
    assert sum(allocated) <= 5  # at most one shared zero piece of 5 elements


@pytest.mark.parametrize("op", ["split", "chunk"])
def test_split_unused_pieces_linear_cost(op, monkeypatch):
    allocated = []
    real = S._zeros
    monkeypatch.setattr(S, "_zeros", lambda like, shape: allocated.append(int(np.prod(shape))) or real(like, shape))
    a = rand(40, 3)
    x = ember.tensor(a, requires_grad=True)
    pieces = x.split(2) if op == "split" else x.chunk(20)
    (pieces[3] * 3).sum().backward()
    expected = np.zeros_like(a)
    expected[6:8] = 3
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    assert sum(allocated) == a.size - 6  # the zero pieces together: exactly the unused part of the input


def test_unbind_gradient_of_every_piece_with_grad():
    """autograd.grad through an unbind, with some pieces used twice and others not at all."""
    x = ember.tensor(rand(3, 4), requires_grad=True)
    a, b, c = x.unbind(0)
    out = (a * 2 + a * 3 + c).sum()
    (g,) = ember.autograd.grad(out, [x])
    np.testing.assert_array_equal(g.numpy(), np.array([[5.0] * 4, [0.0] * 4, [1.0] * 4]))


def test_split_double_backward_and_hooks():
    x = ember.tensor(rand(4, 2), requires_grad=True)
    p, q = x.split([1, 3])
    seen = []
    q.register_hook(lambda g: seen.append(g.shape))
    (g,) = ember.autograd.grad((q * q).sum() + p.sum(), [x], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.concatenate([np.ones((1, 2)), 2 * x.detach().numpy()[1:]]))
    (gg,) = ember.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(gg.numpy(), np.concatenate([np.zeros((1, 2)), 2 * np.ones((3, 2))]))
    assert seen == [(3, 2), (3, 2)]  # q lies on both backward paths (as in PyTorch)


def test_split_without_grad_returns_plain_views():
    x = ember.tensor(rand(4, 2))
    with ember.no_grad():
        y = ember.tensor(rand(4, 2), requires_grad=True)
        ps = y.split(3)
    assert not any(p.requires_grad for p in ps)
    assert [p.shape for p in x.split(3)] == [(3, 2), (1, 2)]
    rows = list(x)  # iteration goes through unbind
    assert len(rows) == 4 and rows[1]._base is x


@requires_torch
@pytest.mark.parametrize("n", range(0, 8))
@pytest.mark.parametrize("k", range(1, 6))
def test_split_and_chunk_sizes_match_pytorch(n, k):
    e, t = ember.zeros(n, 2), torch.zeros(n, 2)
    assert [p.shape for p in e.chunk(k)] == [tuple(p.shape) for p in t.chunk(k)]
    assert [p.shape for p in e.split(k)] == [tuple(p.shape) for p in t.split(k)]


def test_cat_skips_legacy_empty_1d_tensors():
    x = ember.tensor(rand(2, 3), requires_grad=True)
    y = ember.cat([x, ember.zeros(0), x], 1)
    assert y.shape == (2, 6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0))


def test_T_warns_on_non_2d_like_pytorch():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ember.zeros(2, 3, 4).T.shape == (4, 3, 2)
        assert ember.zeros(2, 3).T.shape == (3, 2)
    assert len(w) == 1 and "deprecated" in str(w[0].message)


def test_broadcast_shapes():
    assert ember.broadcast_shapes((3, 1), (1, 4), (2, 1, 1)) == (2, 3, 4)
    assert ember.broadcast_shapes(3, (2, 1)) == (2, 3)
    with pytest.raises(RuntimeError, match="broadcast_shapes"):
        ember.broadcast_shapes((2, 3), (4,))


def test_functions_follow_pytorch_namespace():
    for name in ("reshape", "cat", "stack", "split", "chunk", "unbind", "narrow", "permute", "broadcast_to"):
        assert hasattr(ember, name)
    for name in ("view", "expand", "repeat", "contiguous"):  # Tensor methods only, as in PyTorch
        assert hasattr(ember.Tensor, name)


# ---------------------------------------------------------------------- errors
X = lambda: ember.tensor(rand(2, 3))  # noqa: E731

ERRORS = [
    ("reshape_size", lambda: X().reshape(5, 5), RuntimeError, r"reshape.*shape '\[5, 5\]' is invalid for input of size 6"),
    ("view_size", lambda: X().view(5, 5), RuntimeError, r"view.*shape '\[5, 5\]' is invalid for input of size 6"),
    ("reshape_two_infer", lambda: X().reshape(-1, -1), RuntimeError, "reshape.*only one dimension can be inferred"),
    ("reshape_neg", lambda: X().reshape(-2, 3), RuntimeError, r"reshape.*invalid shape dimension -2"),
    ("reshape_infer_indivisible", lambda: X().reshape(4, -1), RuntimeError, r"shape '\[4, -1\]' is invalid"),
    ("reshape_ambiguous", lambda: ember.zeros(0, 3).reshape(0, -1), RuntimeError, "reshape.*ambiguous"),
    ("reshape_type", lambda: X().reshape(2.0, 3), TypeError, "reshape"),
    ("view_strides", lambda: X().t().view(6), RuntimeError, "view.*size and stride"),
    ("flatten_order", lambda: X().flatten(1, 0), RuntimeError, "flatten.*start_dim cannot come after end_dim"),
    ("flatten_dim", lambda: X().flatten(0, 2), IndexError, "flatten.*Dimension out of range"),
    ("unflatten_sizes", lambda: X().unflatten(1, (2, 2)), RuntimeError, r"unflatten.*\[2, 2\].*dim 1 \(3\)"),
    ("unflatten_empty", lambda: X().unflatten(1, ()), RuntimeError, "unflatten: sizes must be non-empty"),
    ("squeeze_dim", lambda: X().squeeze(2), IndexError, r"squeeze.*range of \[-2, 1\], but got 2"),
    ("squeeze_dup", lambda: X().squeeze((0, -2)), RuntimeError, "squeeze.*dim 0 appears multiple times"),
    ("unsqueeze_dim", lambda: X().unsqueeze(3), IndexError, r"unsqueeze.*range of \[-3, 2\], but got 3"),
    ("transpose_dim", lambda: X().transpose(0, 2), IndexError, "transpose.*Dimension out of range"),
    ("t_3d", lambda: ember.zeros(2, 3, 4).t(), RuntimeError, r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"),
    ("mT_1d", lambda: ember.zeros(3).mT, RuntimeError, "mT is only supported on matrices.*1-D"),
    ("permute_dup", lambda: X().permute(0, 0), RuntimeError, r"permute.*duplicate dims.*\[0, 0\]"),
    ("permute_neg_dup", lambda: X().permute(1, -1), RuntimeError, r"permute.*\[1, -1\] is not a permutation"),
    ("permute_len", lambda: X().permute(0, 1, 2), RuntimeError, r"permute.*2 dimensions but dims = \[0, 1, 2\]"),
    ("permute_range", lambda: X().permute(0, 2), IndexError, "permute.*Dimension out of range"),
    ("movedim_dup", lambda: X().movedim((0, 0), (1, 0)), RuntimeError, r"movedim: repeated dim in `source` \(\[0, 0\]\)"),
    ("movedim_len", lambda: X().movedim((0, 1), (1,)), RuntimeError, "movedim: Invalid source or destination dims"),
    ("expand_non1", lambda: X().expand(2, 4), RuntimeError,
     r"expand.*The expanded size of the tensor \(4\) must match the existing size \(3\) at non-singleton dimension 1\.  "
     r"Target sizes: \[2, 4\]\.  Tensor sizes: \[2, 3\]"),
    ("expand_fewer", lambda: X().expand(3), RuntimeError, r"expand.*number of sizes provided \(1\)"),
    ("expand_leading_neg", lambda: X().expand(-1, 2, 3), RuntimeError, "expand.*leading, non-existing dimension 0"),
    ("broadcast_to_bad", lambda: ember.broadcast_to(X(), (3, 3)), RuntimeError, "broadcast_to.*expanded size"),
    ("broadcast_tensors_bad", lambda: ember.broadcast_tensors(X(), ember.zeros(3, 2)), RuntimeError,
     r"broadcast.*\(3\).*\(2\)"),
    ("repeat_few", lambda: X().repeat(2), RuntimeError, "repeat.*can not be smaller than number of dimensions"),
    ("repeat_neg", lambda: X().repeat(2, -1), RuntimeError, "repeat.*non-negative"),
    ("flip_dup", lambda: X().flip(0, -2), RuntimeError, "flip.*dim 0 appears multiple times"),
    ("flip_dim", lambda: X().flip(2), IndexError, "flip.*Dimension out of range"),
    ("fliplr_1d", lambda: ember.zeros(3).fliplr(), RuntimeError, "fliplr.*Input must be >= 2-d"),
    ("flipud_0d", lambda: ember.zeros(()).flipud(), RuntimeError, "flipud.*Input must be >= 1-d"),
    ("roll_align", lambda: X().roll((1, 2), (0,)), RuntimeError, "roll.*shifts and dimensions must align. shifts: 2, dims:1"),
    ("roll_dim", lambda: X().roll(1, 2), IndexError, "roll.*Dimension out of range"),
    ("tril_1d", lambda: ember.zeros(3).tril(), RuntimeError, "tril.*at least 2 dimensions"),
    ("triu_1d", lambda: ember.zeros(3).triu(), RuntimeError, "triu.*at least 2 dimensions"),
    ("cat_sizes", lambda: ember.cat([X(), ember.zeros(3, 3)], 1), RuntimeError,
     r"cat.*Sizes of tensors must match except in dimension 1\. Expected size 2 but got size 3 for tensor number 1 in "
     r"the list\."),
    ("cat_ndim", lambda: ember.cat([X(), ember.zeros(2, 3, 1)]), RuntimeError,
     "cat.*Tensors must have same number of dimensions: got 2 and 3"),
    ("cat_empty", lambda: ember.cat([]), ValueError, "cat.*expected a non-empty list of Tensors"),
    ("cat_0d", lambda: ember.cat([ember.zeros(())]), RuntimeError, r"cat.*zero-dimensional tensor \(at position 0\)"),
    ("cat_dim", lambda: ember.cat([X(), X()], 2), IndexError, "cat.*Dimension out of range"),
    ("cat_not_list", lambda: ember.cat(X()), TypeError, "cat.*must be a tuple or list of Tensors"),
    ("cat_element", lambda: ember.cat([X(), 1]), TypeError, "cat.*expected Tensor as element 1"),
    ("stack_shapes", lambda: ember.stack([X(), ember.zeros(2, 4)]), RuntimeError,
     r"stack.*equal size, but got \[2, 3\] at entry 0 and \[2, 4\] at entry 1"),
    ("stack_empty", lambda: ember.stack([]), RuntimeError, "stack.*non-empty"),
    ("stack_dim", lambda: ember.stack([X(), X()], 3), IndexError, "stack.*Dimension out of range"),
    ("split_sum", lambda: X().split([1, 1], 1), RuntimeError,
     r"split_with_sizes expects split_sizes to sum exactly to 3 \(input tensor's size at dimension 1\), but got "
     r"split_sizes=\[1, 1\]"),
    ("split_neg_sizes", lambda: X().split([4, -1], 1), RuntimeError, "split_with_sizes.*non-negative"),
    ("split_zero", lambda: X().split(0, 1), RuntimeError, "split_size can only be 0 if dimension size is 0"),
    ("split_neg", lambda: X().split(-1), RuntimeError, "split expects split_size be non-negative"),
    ("split_type", lambda: X().split(1.5), TypeError, "split"),
    ("split_dim", lambda: X().split(1, 2), IndexError, "split.*Dimension out of range"),
    ("split_0d", lambda: ember.zeros(()).split(1), IndexError, "split.*no dimensions"),
    ("chunk_zero", lambda: X().chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
    ("chunk_dim", lambda: X().chunk(2, -3), IndexError, "chunk.*Dimension out of range"),
    ("unbind_dim", lambda: X().unbind(2), IndexError, "unbind.*Dimension out of range"),
    ("unbind_0d", lambda: ember.zeros(()).unbind(), IndexError, "unbind.*no dimensions"),
    ("narrow_exceeds", lambda: X().narrow(1, 2, 2), RuntimeError, r"narrow.*start \(2\) \+ length \(2\) exceeds dimension size \(3\)"),
    ("narrow_start", lambda: X().narrow(1, -4, 1), IndexError, r"narrow.*start out of range.*\[-3, 3\], but got -4"),
    ("narrow_length", lambda: X().narrow(1, 0, -1), RuntimeError, "narrow.*length must be non-negative"),
    ("narrow_dim", lambda: X().narrow(2, 0, 1), IndexError, "narrow.*Dimension out of range"),
    ("reshape_not_tensor", lambda: ember.reshape([1, 2], (2,)), TypeError, "reshape.*must be Tensor"),
]


@pytest.mark.parametrize("fn,exc,match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@requires_torch
@pytest.mark.parametrize("name", ["reshape_size", "view_strides", "expand_non1", "cat_sizes", "split_sum", "permute_dup",
                                  "narrow_exceeds", "stack_shapes", "squeeze_dim", "unbind_dim", "cat_empty", "t_3d"])
def test_error_types_match_pytorch(name):
    """The same bad call raises the same exception type in PyTorch."""
    fn, exc = next((e[1], e[2]) for e in ERRORS if e[0] == name)
    import types
    g = types.FunctionType(fn.__code__, {**fn.__globals__, "ember": torch, "X": lambda: torch.zeros(2, 3)})
    with pytest.raises(exc):
        g()
