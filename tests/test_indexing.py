"""Indexing (ember/ops/indexing.py): getitem/setitem, gather/scatter, index_select/index_add, masks, take, nonzero."""
import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, leaf, noncontig, rand, requires_torch, torch

import ember

MASK0 = np.array([True, False, True])
MASK2 = np.array([[True, False, True, False, True], [False, False, True, True, False],
                  [True, True, False, False, False], [False, True, False, True, True]])

# index builders: lib (ember or torch) -> an index for a (3, 4, 5) tensor
INDICES = {
    "int": lambda L: 1,
    "neg_int": lambda L: -1,
    "ints": lambda L: (1, 2),
    "full_ints": lambda L: (2, -1, 3),
    "slice": lambda L: slice(1, 3),
    "slice_step": lambda L: (slice(None), slice(None, None, 2)),
    "slice_neg_bounds": lambda L: (slice(-2, None), slice(None, -1), slice(1, -1, 3)),
    "none": lambda L: (None, 1),
    "none_middle": lambda L: (slice(None), None, 2),
    "ellipsis": lambda L: (Ellipsis, 1),
    "ellipsis_none": lambda L: (1, Ellipsis, None),
    "empty_tuple": lambda L: (),
    "list": lambda L: [0, 2],
    "list_repeated": lambda L: [2, 0, 2, 2],
    "list_negative": lambda L: [-1, 0, -3],
    "tensor_2d_repeated": lambda L: L.tensor([[0, 1], [2, 2]]),
    "tensor_0d": lambda L: L.tensor(1),
    "numpy_ints": lambda L: np.array([1, 1, 0]),
    "tensor_mask": lambda L: L.tensor(MASK0),
    "list_mask": lambda L: [True, False, True],
    "uint8_mask": lambda L: L.tensor(MASK0.astype(np.uint8)),  # PyTorch's legacy byte mask
    "mask_2d_inner": lambda L: (slice(None), L.tensor(MASK2)),
    "bool_true": lambda L: True,
    "bool_false_then_int": lambda L: (False, 1),
    "slice_then_list_repeated": lambda L: (slice(None), [0, 3, 0]),
    "adjacent_arrays": lambda L: ([0, 2, 2], [1, 3, 1]),
    "separated_arrays": lambda L: ([0, 2], slice(None), [1, 1]),
    "int_slice_array": lambda L: (1, slice(None), [0, 4, 4]),
    "array_int_array": lambda L: ([0, 2], 1, [3, 3]),
    "none_array_none_int": lambda L: (None, [0, 1], None, 0),
    "ellipsis_array": lambda L: (Ellipsis, [1, 1, 2]),
    "mask_and_array": lambda L: (L.tensor(MASK0), slice(None), L.tensor([4, 0])),
    "broadcast_arrays": lambda L: (L.tensor([[0], [2]]), slice(1, 3), L.tensor([1, 4, 4])),
    "empty_list": lambda L: [],
    "repeated_list_then_bool": lambda L: ([2, 2, 1], True),
}


def _x(dtype=np.float64, seed=0):
    return rand(3, 4, 5, seed=seed, dtype=dtype)


# ---------------------------------------------------------------------- getitem
@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_gradcheck(name):
    check_grad(lambda x: x[INDICES[name](ember)], _x())


@requires_torch
@pytest.mark.filterwarnings("ignore:indexing with dtype torch.uint8 is now deprecated")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_parity(name, dtype):
    compare_torch(lambda x: x[INDICES[name](ember)], lambda x: x[INDICES[name](torch)], _x(dtype))


def test_getitem_noncontiguous_and_transposed():
    a = _x()
    for idx in (1, (slice(None), [0, 0, 3]), (Ellipsis, [4, 4]), _i(ember, MASK0)):
        check_grad(lambda x: x[idx], noncontig(a))
    check_grad(lambda x: x.transpose(0, 2)[[1, 1, 0], 2], a)


def test_getitem_0d():
    s = leaf(np.array(2.5))
    assert s[...].shape == () and s[None].shape == (1,) and s[True].shape == (1,) and s[False].shape == (0,)
    check_grad(lambda t: t[None], np.array(2.5))
    check_grad(lambda t: t[True], np.array(2.5))


def test_getitem_repeated_indices_accumulate():
    x = leaf(np.arange(4.0))
    y = x[[1, 1, 3, 1]]
    y.backward(_i(ember, [1.0, 2.0, 3.0, 4.0], dtype=ember.float64))
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [0, 7, 0, 3])


@pytest.mark.parametrize("n_idx", [200, 3])  # the sort-and-sum path and the np.add.at path
def test_getitem_embedding_gradient(n_idx):
    rng = np.random.default_rng(0)
    table = leaf(rng.standard_normal((10, 32)))
    ids = rng.integers(-10, 10, size=n_idx)
    g = rng.standard_normal((n_idx, 32))
    table[_i(ember, ids)].backward(_i(ember, g))
    expected = np.zeros((10, 32))
    np.add.at(expected, ids, g)
    np.testing.assert_allclose(table.grad.cpu().numpy(), expected, rtol=1e-12, atol=1e-12)


def test_getitem_double_backward_is_getitem():
    x = leaf(_x())
    go = leaf(rand(3, 2, 5, seed=1))
    g = ember.autograd.grad(x[[0, 0, 2], 1:3], x, go, create_graph=True)[0]
    assert g.requires_grad  # the backward is an op on go
    w = rand(3, 4, 5, seed=2)
    g.backward(_i(ember, w))
    np.testing.assert_array_equal(go.grad.cpu().numpy(), w[[0, 0, 2], 1:3])
    check_grad(lambda t: t[[2, 2], :, 1:], _x())  # check_grad runs gradgradcheck


def test_basic_index_is_a_view_sharing_the_version_counter():
    x = ember.from_numpy(np.arange(12.0).reshape(3, 4))
    for idx in (1, (slice(None), 2), (Ellipsis, None, slice(1, 3)), (0, 1)):
        v = x[idx]
        assert np.shares_memory(v.numpy(), x.numpy()) and v._base is x
        before = x._version
        v[...] = -1.0
        assert x._version == v._version == before + 1
        assert (x.numpy()[idx] == -1).all()
    w = x[1][2:]  # a view of a view counts on the original
    assert w._base is x


def test_advanced_index_is_a_copy():
    x = ember.from_numpy(np.arange(12.0).reshape(3, 4))
    for idx in ([0, 1], ember.tensor([[True, False, True, False]] * 3), (slice(None), [1])):
        c = x[idx]
        assert not np.shares_memory(c.numpy(), x.numpy()) and c._base is None
        c[...] = 99.0
        assert (x.numpy() != 99).all()


def test_view_of_grad_tensor_records_graph():
    x = leaf(_x())
    y = x[1:, ::2]
    assert y.requires_grad and y.grad_fn is not None and y._base is x


# ---------------------------------------------------------------------- getitem errors
@pytest.mark.parametrize("idx, exc, match", [
    (5, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (-4, IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
    ((0, 9), IndexError, "index 9 is out of bounds for dimension 1 with size 4"),
    ([0, 3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ((slice(None), [-5]), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
    ((0, 0, 0), IndexError, "too many indices for tensor of dimension 2"),
    (([0], [0], [0]), IndexError, "too many indices for tensor of dimension 2"),
    (1.5, IndexError, r"valid indices \(got float\)"),
    ("a", IndexError, r"valid indices \(got str\)"),
    ([0.5, 1.0], IndexError, "tensors used as indices must be long, int, byte or bool"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
    ((slice(None), slice(0, 4, 0)), ValueError, "step must be greater than zero"),
    ([True, False], IndexError, r"shape of the mask \[2\] at index 0 does not match"),
])
def test_getitem_errors(idx, exc, match):
    x = ember.zeros(3, 4)
    with pytest.raises(exc, match=match):
        x[idx]


def test_getitem_float_tensor_index_error():
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        ember.zeros(3)[ember.tensor([0.0])]


def test_getitem_mask_shape_error():
    with pytest.raises(IndexError, match=r"mask \[2, 4\] at index 0 does not match the shape of the indexed tensor \[3, 4\]"):
        ember.zeros(3, 4)[ember.ones(2, 4, dtype=ember.bool)]


def test_getitem_0d_int_error():
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        ember.tensor(1.0)[0]


# ---------------------------------------------------------------------- setitem
SET_CASES = {  # name -> (index builder, value shape)
    "int_row": (lambda L: 1, (5,)),
    "int_row_broadcast": (lambda L: 1, (1,)),
    "slice_block": (lambda L: (slice(0, 2), slice(1, 3)), (2, 2, 5)),
    "slice_broadcast": (lambda L: (slice(None), 2), (5,)),
    "scalar_position": (lambda L: (2, 3, 4), ()),
    "extra_leading_ones": (lambda L: 0, (1, 1, 4, 5)),
    "list": (lambda L: [0, 2], (2, 4, 5)),
    "list_broadcast": (lambda L: (slice(None), [3, 0]), (1, 5)),
    "mask": (lambda L: L.tensor(MASK0), (5,)),
    "mask_2d_inner": (lambda L: (slice(None), L.tensor(MASK2)), (3, 10)),
    "mixed": (lambda L: (1, slice(None), [0, 4]), (4, 2)),
    "ellipsis_none": (lambda L: (Ellipsis, None, 2), (1,)),
}


def _set_fn(lib, name):
    build, _ = SET_CASES[name]

    def f(x, v):
        y = x * 2  # a non-leaf target: its history gets gz with the written region zeroed
        y[build(lib)] = v
        return y * y  # nonlinear, so the second derivative checks something

    return f


@pytest.mark.parametrize("name", sorted(SET_CASES))
def test_setitem_gradcheck(name):
    check_grad(_set_fn(ember, name), _x(), rand(*SET_CASES[name][1], seed=5))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(SET_CASES))
def test_setitem_parity(name, dtype):
    compare_torch(_set_fn(ember, name), _set_fn(torch, name), _x(dtype), rand(*SET_CASES[name][1], seed=5, dtype=dtype))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_setitem_number_under_autograd(dtype):
    def f(lib):
        def g(x):
            y = x.sin()
            y[:, [1, 3], 2:] = 0.5
            return y
        return g
    compare_torch(f(ember), f(torch), _x(dtype))
    check_grad(f(ember), _x())


@requires_torch
def test_setitem_into_constant_tensor_gives_grad_to_value():
    def f(lib):
        def g(w):
            z = lib.zeros(2, 3, dtype=w.dtype, device=w.device)
            z[1, 1:] = w
            return z
        return g
    compare_torch(f(ember), f(torch), rand(2))
    check_grad(f(ember), rand(2))


@requires_torch
def test_setitem_value_dtype_cast():
    def f(lib):
        def g(x, v):
            y = x + 0
            y[0] = v.to(lib.float32)  # float32 value into a float64 target
            return y
        return g
    compare_torch(f(ember), f(torch), rand(2, 3), rand(3), rtol=1e-6, atol=1e-7)


@requires_torch
@pytest.mark.parametrize("name", sorted(SET_CASES))
def test_setitem_no_grad_parity(name):
    build, vshape = SET_CASES[name]
    a, v = _x(), rand(*vshape, seed=5)
    e, t = ember.from_numpy(a.copy()), torch.from_numpy(a.copy())
    before = e._version
    e[build(ember)] = ember.from_numpy(v)
    t[build(torch)] = torch.from_numpy(v)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert e._version == before + 1


def test_setitem_no_grad_values_and_casts():
    x = ember.zeros(2, 3, dtype=ember.int64)
    x[0] = 2.7  # truncates like PyTorch
    x[1, [0, 2]] = ember.tensor([5, 6])
    x[ember.tensor([[False, True, False], [False, False, False]])] = 9
    x[1, 1] = np.int64(4)
    x[:, 0] = [7, 8]
    np.testing.assert_array_equal(x.numpy(), [[7, 9, 2], [8, 4, 6]])


def test_setitem_leaf_under_no_grad_is_allowed():
    w = ember.zeros(3, requires_grad=True)
    with ember.no_grad():
        w[1] = 5.0
    assert w.is_leaf and w.numpy(force=True)[1] == 5


def test_setitem_through_view_writes_base():
    x = ember.zeros(3, 4)
    row = x[1]
    row[2] = 7.0
    x[0][1] = 3.0
    assert x.numpy()[1, 2] == 7 and x.numpy()[0, 1] == 3 and x._version == 2


def test_setitem_leaf_requires_grad_error():
    w = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        w[0] = 1.0


def test_setitem_saved_output_modified_error():
    x = ember.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = x.exp()
    y[0] = 1  # exp saved its output, which this overwrites
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_setitem_saved_input_modified_error():
    x = ember.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = x * 1
    z = y * y  # saves y
    y[1:] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward(ember.ones(3))


def test_setitem_rebases_into_graph():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 3
    node = y.grad_fn
    v0 = y._version
    y[1] = ember.tensor(5.0, requires_grad=True)
    assert y.grad_fn is not node and y._version == v0 + 1 and y.requires_grad


@pytest.mark.parametrize("idx, value, match", [
    ([0, 1], np.ones((3, 4)), r"shape mismatch: value tensor of shape \[3, 4\] cannot be broadcast to indexing result of shape \[2, 4\]"),
    (0, np.ones(3), r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[4\]"),
    (0, np.ones((2, 1, 4)), r"shape mismatch: value tensor of shape \[2, 1, 4\]"),
])
@pytest.mark.parametrize("grad", [False, True])
def test_setitem_shape_mismatch(idx, value, match, grad):
    x = ember.zeros(3, 4, requires_grad=grad) * 1
    with pytest.raises(RuntimeError, match=match):
        x[idx] = ember.from_numpy(value.astype(np.float32))


def test_setitem_index_errors():
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        ember.zeros(3)[3] = 1.0
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 1"):
        ember.zeros(3)[0, 0] = 1.0


def test_setitem_read_only_view_error():
    x = ember.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="read-only view"):
        x[0, 0] = 1.0


# ---------------------------------------------------------------------- gather / scatter / take_along_dim
IDX = np.array([[0, 2, 1, 2], [2, 2, 0, 1]])  # into dim 0 of a (3, 4) input; repeats
IDX1 = np.array([[3, 0], [1, 1], [0, 3]])  # into dim 1 of a (3, 4) input; smaller than input off dim


def _i(lib, a, **kw):
    """An index/mask tensor on the test device (the inputs', as PyTorch wants)."""
    return lib.tensor(a, device=DEVICE, **kw) if lib is ember else lib.tensor(a, **kw)


GATHER = {  # name -> (ember fn, torch fn, input shapes)
    "gather0": (lambda x: ember.gather(x, 0, _i(ember, IDX)), lambda x: torch.gather(x, 0, _i(torch, IDX)), [(3, 4)]),
    "gather1": (lambda x: x.gather(1, _i(ember, IDX1)), lambda x: x.gather(1, _i(torch, IDX1)), [(3, 4)]),
    "gather_neg_dim": (lambda x: x.gather(-1, _i(ember, IDX1[:2])), lambda x: x.gather(-1, _i(torch, IDX1[:2])), [(3, 4)]),
    "gather_3d": (lambda x: x.gather(1, _i(ember, IDX[:, None, :2].repeat(2, 1))),
                  lambda x: x.gather(1, _i(torch, IDX[:, None, :2].repeat(2, 1))), [(2, 3, 2)]),
    "gather_0d": (lambda x: x.gather(0, _i(ember, 0)), lambda x: x.gather(0, torch.tensor(0)), [()]),
    "scatter0": (lambda x, s: ember.scatter(x, 0, _i(ember, IDX[:1]), s),
                 lambda x, s: torch.scatter(x, 0, _i(torch, IDX[:1]), s), [(3, 4), (1, 4)]),
    "scatter0_big_src": (lambda x, s: ember.scatter(x, 0, _i(ember, IDX[:1]), s), None, [(3, 4), (2, 5)]),
    "scatter1": (lambda x, s: x.scatter(1, _i(ember, IDX1[:, :1]), s), lambda x, s: x.scatter(1, _i(torch, IDX1[:, :1]), s),
                 [(3, 4), (3, 1)]),
    "scatter_value": (lambda x: x.scatter(0, _i(ember, IDX[:1]), 1.5), lambda x: x.scatter(0, _i(torch, IDX[:1]), 1.5),
                      [(3, 4)]),
    "scatter_add0": (lambda x, s: ember.scatter_add(x, 0, _i(ember, IDX), s),
                     lambda x, s: torch.scatter_add(x, 0, _i(torch, IDX), s), [(3, 4), (2, 4)]),
    "scatter_add1": (lambda x, s: x.scatter_add(1, _i(ember, IDX1), s), lambda x, s: x.scatter_add(1, _i(torch, IDX1), s),
                     [(3, 4), (3, 2)]),
    "scatter_add1_big_src": (lambda x, s: x.scatter_add(1, _i(ember, IDX1), s), None, [(3, 4), (4, 3)]),
    "take_along_dim0": (lambda x: ember.take_along_dim(x, _i(ember, IDX), 0),
                        lambda x: torch.take_along_dim(x, _i(torch, IDX), 0), [(3, 4)]),
    "take_along_dim_bcast": (lambda x: x.take_along_dim(_i(ember, np.array([[2], [0], [-1]])), dim=1),
                             lambda x: x.take_along_dim(_i(torch, np.array([[2], [0], [-1]])), dim=1), [(3, 4)]),
    "take_along_dim_bcast_input": (lambda x: ember.take_along_dim(x, _i(ember, IDX1), 1),
                                   lambda x: torch.take_along_dim(x, _i(torch, IDX1), 1), [(1, 4)]),
    "take_along_dim_flat": (lambda x: ember.take_along_dim(x, _i(ember, IDX)),
                            lambda x: torch.take_along_dim(x, _i(torch, IDX)), [(3, 4)]),
    "take": (lambda x: ember.take(x, _i(ember, np.array([[0, -1], [5, 5]]))),
             lambda x: torch.take(x, _i(torch, np.array([[0, -1], [5, 5]]))), [(3, 4)]),
    "index_select0": (lambda x: x.index_select(0, _i(ember, np.array([2, 0, 2]))),
                      lambda x: x.index_select(0, _i(torch, np.array([2, 0, 2]))), [(3, 4)]),
    "index_select1": (lambda x: ember.index_select(x, 1, _i(ember, np.array([3, 3]))),
                      lambda x: torch.index_select(x, 1, _i(torch, np.array([3, 3]))), [(3, 4)]),
    "index_select_0d_index": (lambda x: x.index_select(1, _i(ember, 2)), lambda x: x.index_select(1, torch.tensor(2)),
                              [(2, 3, 4)]),
    "index_select_empty": (lambda x: x.index_select(1, _i(ember, [], dtype=ember.int64)),
                           lambda x: x.index_select(1, torch.tensor([], dtype=torch.int64)), [(2, 3)]),
    "index_select_0d": (lambda x: x.index_select(0, _i(ember, [0])), lambda x: x.index_select(0, torch.tensor([0])), [()]),
    "index_add0": (lambda x, s: x.index_add(0, _i(ember, np.array([2, 0, 2])), s),
                   lambda x, s: x.index_add(0, _i(torch, np.array([2, 0, 2])), s), [(3, 4), (3, 4)]),
    "index_add1_alpha": (lambda x, s: ember.index_add(x, 1, _i(ember, np.array([1, 1])), s, alpha=-2.5),
                         lambda x, s: torch.index_add(x, 1, _i(torch, np.array([1, 1])), s, alpha=-2.5), [(3, 4), (3, 2)]),
    "masked_fill": (lambda x: x.masked_fill(_i(ember, MASK2), -2.0), lambda x: x.masked_fill(torch.tensor(MASK2), -2.0),
                    [(4, 5)]),
    "masked_fill_bcast": (lambda x: ember.masked_fill(x, _i(ember, MASK0[:, None]), 3),
                          lambda x: torch.masked_fill(x, torch.tensor(MASK0[:, None]), 3), [(3, 4)]),
    "masked_fill_bcast_mask_bigger": (lambda x: x.masked_fill(_i(ember, MASK2), 0.0),
                                      lambda x: x.masked_fill(torch.tensor(MASK2), 0.0), [(5,)]),
    "masked_fill_value_tensor": (lambda x, v: x.masked_fill(_i(ember, MASK2), v),
                                 lambda x, v: x.masked_fill(torch.tensor(MASK2), v), [(4, 5), ()]),
    "masked_select": (lambda x: x.masked_select(_i(ember, MASK2)), lambda x: x.masked_select(torch.tensor(MASK2)),
                      [(4, 5)]),
    "masked_select_bcast": (lambda x: ember.masked_select(x, _i(ember, MASK0[:, None])),
                            lambda x: torch.masked_select(x, torch.tensor(MASK0[:, None])), [(4,)]),
}


@pytest.mark.parametrize("name", sorted(GATHER))
def test_gather_family_gradcheck(name):
    fn, _, shapes = GATHER[name]
    check_grad(fn, *[rand(*s, seed=i) for i, s in enumerate(shapes)])


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(n for n in GATHER if GATHER[n][1] is not None))  # PyTorch 2.x returns a
def test_gather_family_parity(name, dtype):  # wrongly shaped src gradient when src is larger than index: gradcheck only
    fn, tfn, shapes = GATHER[name]
    compare_torch(fn, tfn, *[rand(*s, seed=i, dtype=dtype) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("name", ["gather1", "scatter_add1", "index_select1", "index_add0", "masked_fill", "take"])
def test_gather_family_noncontiguous(name):
    fn, _, shapes = GATHER[name]
    check_grad(fn, *[noncontig(rand(*s, seed=i)) for i, s in enumerate(shapes)])


@requires_torch
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scatter_reduce_forward(dtype):
    for reduce in ("add", "multiply"):
        x, s = rand(3, 4, dtype=dtype), rand(2, 4, seed=1, dtype=dtype)
        e = ember.from_numpy(x).scatter(0, ember.tensor(IDX), ember.from_numpy(s), reduce=reduce)
        t = torch.from_numpy(x).scatter(0, torch.tensor(IDX), torch.from_numpy(s), reduce=reduce)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_scatter_reduce_add_gradcheck_and_multiply_backward_error():
    check_grad(lambda x, s: x.scatter(0, _i(ember, IDX), s, reduce="add"), rand(3, 4), rand(2, 4, seed=1))
    y = leaf(rand(3, 4)).scatter(0, _i(ember, IDX), leaf(rand(2, 4)), reduce="multiply")
    with pytest.raises(RuntimeError, match="scatter\\(\\): the derivative for reduce='multiply' is not implemented"):
        y.backward(ember.ones(3, 4, dtype=ember.float64, device=DEVICE))


def test_gather_int32_index_and_integer_input():
    x = ember.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(x.gather(1, ember.tensor([[1], [0]], dtype=ember.int32)).numpy(), [[2], [3]])
    np.testing.assert_array_equal(x.scatter_add(0, ember.tensor([[1, 1]]), ember.tensor([[10, 20]])).numpy(),
                                  [[1, 2], [13, 24]])


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inplace_variants_parity(dtype):
    x = rand(3, 4, dtype=dtype)
    s3 = rand(3, 4, seed=1, dtype=dtype)

    def g(lib):
        def h(x, s):
            y = x * 1
            y.scatter_(0, _i(lib, IDX[:1]), s[:1])
            y.scatter_add_(1, _i(lib, IDX1), s[:, :2])
            y.index_add_(0, _i(lib, [1, 1, 0]), s, alpha=2)
            y.masked_fill_(_i(lib, MASK2[:3, :4]), 0.25)
            return y * y
        return h
    compare_torch(g(ember), g(torch), x, s3)
    check_grad(g(ember), x.astype(np.float64), s3.astype(np.float64))


def test_inplace_variants_without_grad_write_in_place():
    x = ember.zeros(3, 4)
    data = x.numpy()
    x.scatter_(0, ember.tensor([[2, 1, 0, 2]]), 1.0)
    x.scatter_add_(0, ember.tensor([[0, 0, 0, 0]]), ember.ones(1, 4))
    x.index_add_(1, ember.tensor([3]), ember.ones(3, 1), alpha=5)
    x.masked_fill_(ember.tensor([True, False, False, False]), -1.0)
    assert x.numpy() is data and x._version == 4
    np.testing.assert_array_equal(data, [[-1, 1, 2, 6], [-1, 1, 0, 5], [-1, 0, 0, 6]])


def test_inplace_variants_leaf_error():
    w = ember.zeros(3, 4, requires_grad=True)
    for f in (lambda: w.scatter_(0, ember.tensor([[0]]), 1.0), lambda: w.masked_fill_(ember.tensor([True] * 4), 0.0),
              lambda: w.scatter_add_(0, ember.tensor([[0]]), ember.ones(1, 1)),
              lambda: w.index_add_(0, ember.tensor([0]), ember.ones(1, 4))):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
            f()


def test_masked_fill_value_tensor_gets_masked_sum():
    x = leaf(rand(4, 5))
    v = leaf(np.array(0.5))
    x.masked_fill(_i(ember, MASK2), v).backward(ember.ones(4, 5, dtype=ember.float64, device=DEVICE))
    assert v.grad.item() == MASK2.sum()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), ~MASK2)


def test_masked_fill_does_not_save_its_input():
    x = leaf(rand(4, 5))
    y = x * 1
    z = y.masked_fill(_i(ember, MASK2), 0.0)
    y.add_(1.0)  # backward of masked_fill needs only the mask, as in PyTorch
    z.backward(ember.ones(4, 5, dtype=ember.float64, device=DEVICE))
    np.testing.assert_array_equal(x.grad.cpu().numpy(), ~MASK2)


def test_masked_fill_keeps_input_dtype():
    x = ember.tensor([1, 2, 3])
    y = x.masked_fill(ember.tensor([True, False, True]), 2.7)
    assert y.dtype == ember.int64 and y.tolist() == [2, 2, 2]
    assert ember.ones(2).masked_fill(ember.tensor([True, False]), ember.tensor(5.0, dtype=ember.float64)).dtype == ember.float32


@requires_torch
@pytest.mark.parametrize("a", [np.array([[0.0, 1.5], [0.0, -2.0]]), np.array(3.0), np.array(0.0), np.zeros((2, 0)),
                               np.array([[[1, 0], [0, 1]], [[0, 0], [1, 1]]])], ids=str)
def test_nonzero_argwhere_parity(a):
    e, t = ember.from_numpy(a), torch.from_numpy(a)
    for en, tn in ((ember.nonzero(e), torch.nonzero(t)), (e.argwhere(), torch.argwhere(t)), (e.nonzero(), t.nonzero())):
        assert en.dtype == ember.int64 and en.shape == tuple(tn.shape)
        np.testing.assert_array_equal(en.numpy(), tn.numpy())
    et, tt = ember.nonzero(e, as_tuple=True), torch.nonzero(t, as_tuple=True)
    assert len(et) == len(tt)
    for ei, ti in zip(et, tt):
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())


def test_nonzero_as_tuple_indexes_back():
    x = ember.tensor([[0.0, 2.0], [3.0, 0.0]])
    np.testing.assert_array_equal(x[x.nonzero(as_tuple=True)].numpy(), [2.0, 3.0])


# ---------------------------------------------------------------------- gather-family errors
X = ember.zeros(3, 4)
I = ember.tensor([[0, 1]])


@pytest.mark.parametrize("call, exc, match", [
    (lambda: X.gather(0, I.float()), RuntimeError, r"gather\(\): Expected dtype int32/int64 for index"),
    (lambda: X.gather(0, [[0]]), TypeError, r"gather\(\): argument 'index' must be Tensor"),
    (lambda: X.gather(0, ember.tensor([0])), RuntimeError, r"gather\(\): Index tensor must have the same number of dimensions"),
    (lambda: X.gather(0, ember.tensor([[5]])), RuntimeError, r"gather\(\): index 5 is out of bounds for dimension 0 with size 3"),
    (lambda: X.gather(1, ember.tensor([[-1]])), RuntimeError, r"gather\(\): index -1 is out of bounds for dimension 1 with size 4"),
    (lambda: X.gather(0, ember.zeros(1, 5, dtype=ember.int64)), RuntimeError,
     r"gather\(\): Size does not match at dimension 1 expected index \[1, 5\] to be no larger than self \[3, 4\]"),
    (lambda: X.gather(2, I), IndexError, r"gather\(\): Dimension out of range"),
    (lambda: ember.gather([[1.0]], 0, I), TypeError, r"gather\(\): argument 'input' must be Tensor"),
    (lambda: X.scatter(0, I.float(), 1.0), RuntimeError, r"scatter\(\): Expected dtype int32/int64 for index"),
    (lambda: X.scatter(0, ember.tensor([[3]]), 1.0), RuntimeError, r"scatter\(\): index 3 is out of bounds for dimension 0"),
    (lambda: X.scatter(0, I, ember.ones(1, 2, dtype=ember.float64)), RuntimeError,
     r"scatter\(\): Expected self.dtype to be equal to src.dtype"),
    (lambda: X.scatter(0, I, ember.ones(1, 1)), RuntimeError,
     r"scatter\(\): Expected index \[1, 2\] to be no larger than self \[3, 4\] apart from dimension 0 and to be no larger size than src \[1, 1\]"),
    (lambda: X.scatter(0, I, ember.ones(2)), RuntimeError, r"scatter\(\): Index tensor must have the same number of dimensions as src"),
    (lambda: X.scatter(0, I, 1.0, reduce="mean"), RuntimeError, r"scatter\(\): reduce argument must be either add or multiply"),
    (lambda: X.scatter(0, I), TypeError, r"scatter\(\): missing the values to scatter"),
    (lambda: X.scatter(0, I, "a"), TypeError, r"scatter\(\): src must be a Tensor or a number"),
    (lambda: X.scatter_add(0, I, 2.0), TypeError, r"scatter_add\(\): argument 'src' must be Tensor"),
    (lambda: X.scatter_add(0, ember.tensor([[0, 9]]), ember.ones(1, 2)), RuntimeError,
     r"scatter_add\(\): index 9 is out of bounds for dimension 0 with size 3"),
    (lambda: X.index_select(0, ember.tensor([3])), IndexError, r"index_select\(\): index out of range in self"),
    (lambda: X.index_select(0, ember.tensor([-1])), IndexError, r"index_select\(\): index out of range in self"),
    (lambda: X.index_select(0, ember.tensor([[0]])), IndexError, r"index_select\(\): Index is supposed to be a vector"),
    (lambda: X.index_select(0, ember.tensor([0.0])), RuntimeError, r"index_select\(\): Expected dtype int32/int64 for index"),
    (lambda: X.index_select(0, ember.tensor([0], dtype=ember.int16)), RuntimeError, r"index_select\(\): Expected dtype"),
    (lambda: ember.tensor(1.0).index_select(0, ember.tensor([0, 0])), RuntimeError, r"index_select\(\): Index to scalar"),
    (lambda: X.index_add(0, ember.tensor([0]), ember.ones(2, 4)), RuntimeError,
     r"index_add\(\): Number of indices \(1\) should be equal to source.size\(dim\): \(2\), for dim: 0"),
    (lambda: X.index_add(0, ember.tensor([0]), ember.ones(1, 3)), RuntimeError,
     r"index_add\(\): source tensor shape must match self tensor shape, excluding the specified dimension"),
    (lambda: X.index_add(0, ember.tensor([0]), ember.ones(1, 4, dtype=ember.float64)), RuntimeError,
     r"index_add\(\): self \(ember.float32\) and source \(ember.float64\) must have the same scalar type"),
    (lambda: X.index_add(0, ember.tensor([9]), ember.ones(1, 4)), RuntimeError,
     r"index_add\(\): index 9 is out of bounds for dimension 0 with size 3"),
    (lambda: X.index_add(0, ember.tensor([0.0]), ember.ones(1, 4)), RuntimeError, r"index_add\(\): Expected dtype"),
    (lambda: X.index_add(0, ember.tensor([0]), [[1.0] * 4]), TypeError, r"index_add\(\): argument 'source' must be Tensor"),
    (lambda: X.masked_fill(ember.ones(3, 4), 1.0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype float32"),
    (lambda: X.masked_fill(ember.tensor([True, False]), 1.0), RuntimeError,
     r"masked_fill\(\): the mask of shape \[2\] cannot be broadcast to the input's shape \[3, 4\]"),
    (lambda: X.masked_fill(ember.tensor([True] * 4), ember.tensor([1.0, 2.0])), RuntimeError,
     r"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension\(s\)"),
    (lambda: X.masked_fill(ember.tensor([True] * 4), "x"), TypeError, r"masked_fill\(\): value must be a number"),
    (lambda: X.masked_fill([True] * 4, 1.0), TypeError, r"masked_fill_\(\): argument 'mask' must be Tensor"),
    (lambda: X.masked_fill_(ember.ones(2, 1, 1, dtype=ember.bool), 1.0), RuntimeError,
     r"masked_fill_: the mask of shape \[2, 1, 1\] cannot be broadcast to the tensor's shape \[3, 4\]"),
    (lambda: X.masked_fill_(ember.ones(4), 1.0), RuntimeError, "masked_fill_ only supports boolean masks"),
    (lambda: X.masked_select(ember.ones(3, 4)), RuntimeError, "masked_select: expected BoolTensor for mask"),
    (lambda: X.masked_select(ember.ones(2, dtype=ember.bool)), RuntimeError,
     r"masked_select\(\): the mask of shape \[2\] and the input of shape \[3, 4\] cannot be broadcast"),
    (lambda: ember.take(X, ember.tensor([12])), IndexError,
     r"take\(\): out of range: tried to access index 12 on a tensor of 12 elements"),
    (lambda: ember.take(X, ember.tensor([-13])), IndexError, r"take\(\): out of range: tried to access index -13"),
    (lambda: ember.take(X, ember.tensor([0.0])), RuntimeError, r"take\(\): Expected a long tensor for index, but got"),
    (lambda: ember.take(X, [0]), TypeError, r"take\(\): argument 'index' must be Tensor"),
    (lambda: ember.take_along_dim(X, ember.tensor([0]), 0), RuntimeError,
     r"take_along_dim\(\): input and indices should have the same number of dimensions, but got 2 dimensions for input, and 1"),
    (lambda: ember.take_along_dim(X, ember.tensor([[0.0]]), 0), RuntimeError, r"take_along_dim\(\): Expected dtype int64"),
    (lambda: ember.take_along_dim(X, ember.tensor([[0]], dtype=ember.int32), 0), RuntimeError,
     r"take_along_dim\(\): Expected dtype int64"),
    (lambda: ember.take_along_dim(X, ember.tensor([[0], [1]]), 1), RuntimeError,
     r"take_along_dim\(\): input \[3, 4\] and indices \[2, 1\] cannot be broadcast"),
    (lambda: ember.take_along_dim(X, ember.tensor([[7]]), 0), RuntimeError,
     r"take_along_dim\(\): index 7 is out of bounds for dimension 0 with size 3"),
    (lambda: ember.take_along_dim(X, ember.tensor([[-1]])), RuntimeError,
     r"take_along_dim\(\): index -1 is out of bounds for dimension 0 with size 12"),
    (lambda: ember.take_along_dim(X, I, 5), IndexError, r"take_along_dim\(\): Dimension out of range"),
    (lambda: ember.nonzero([1, 0]), TypeError, r"nonzero\(\): argument 'input' must be Tensor"),
])
def test_gather_family_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@requires_torch
@pytest.mark.parametrize("shape, idx, vshape", [
    ((1,), [1], (2,)), ((1,), [1], (1,)), ((3, 2), [0, 5], (3, 2)), ((3, 2), [0, 5], (2,)), ((2, 3), [-3], (1, 3)),
    ((2, 3), [2], (5,)),
])
def test_setitem_reports_a_bad_value_shape_before_an_out_of_range_index(shape, idx, vshape):
    """As PyTorch: a value that cannot broadcast to the indexing result is a RuntimeError even when the index
    tensor is also out of range; an out-of-range index with a fitting value is an IndexError."""
    try:
        t = torch.zeros(*shape)
        t[torch.tensor(idx)] = torch.zeros(*vshape)
        expected = None
    except Exception as e:  # noqa: BLE001 (the oracle's type is what we compare)
        expected = type(e) if type(e) in (RuntimeError, IndexError) else IndexError
    e_t = ember.zeros(*shape)
    with pytest.raises(expected, match="shape mismatch|out of bounds"):
        e_t[ember.tensor(idx)] = ember.zeros(*vshape)
