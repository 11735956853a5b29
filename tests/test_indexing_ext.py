"""More indexing and shape ops (ember/ops/indexing_ext.py): index_fill/copy/reduce, scatter_reduce, masked_scatter,
put, index_put, unfold, as_strided, select and the *_scatter ops, splits and stacks, index generators, in-place
forms (comparisons, bitwise, metadata changes, resize_), factories and tensor attributes.

Each case is a function of (module, *tensors), run on ember and on PyTorch: values, dtypes and gradients (random
cotangent, float64 and float32) are compared, and float64 finite differences check every gradient (twice
differentiated where the op is smooth).
"""
import warnings

import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, noncontig, raises_like_torch, rand, requires_torch, torch

import ember

A, B = rand(3, 4, seed=1), rand(3, 4, seed=2)
IDX = np.array([[0, 0, 1], [2, 2, 2], [3, 3, 0]])


def _distinct(*shape, seed=0):
    """Tie-free values (for amax/amin-like gradients), spaced for finite differences."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15).reshape(shape)


def _t(m, a):
    """A tensor of `a` beside the parity tests' inputs (for ember, on EMBER_TEST_DEVICE): index and mask tensors."""
    return m.tensor(a).to(DEVICE) if m is ember else m.tensor(a)


def _h(m, a):
    """A tensor of `a` on the CPU (the tests that make every tensor themselves)."""
    return m.tensor(a)


# name -> (fn(m, *tensors), arrays): differentiable in every float input
GRAD = {
    "index_fill": (lambda m, x: m.index_fill(x, 1, _t(m, [0, 2, -1]), -1.5), [A]),
    "index_fill_value": (lambda m, x, v: x.index_fill(0, _t(m, [1, 1]), v), [A, np.array(2.0)]),
    "index_copy": (lambda m, x, s: m.index_copy(x, 1, _t(m, [3, 0]), s), [A, B[:, :2]]),
    "index_copy_dim0": (lambda m, x, s: x.index_copy(-2, _t(m, [2]), s), [A, B[:1]]),
    "index_reduce_prod": (lambda m, x, s: m.index_reduce(x, 1, _t(m, [0, 0, 3]), s, "prod"), [A, B[:, :3]]),
    "index_reduce_mean": (lambda m, x, s: m.index_reduce(x, 1, _t(m, [0, 0, 3]), s, "mean", include_self=False),
                          [A, B[:, :3]]),
    "index_reduce_amax": (lambda m, x, s: m.index_reduce(x, 0, _t(m, [1, 1]), s, "amax"), [_distinct(3, 4),
                                                                                             _distinct(2, 4, seed=1)]),
    "index_reduce_amin": (lambda m, x, s: x.index_reduce(0, _t(m, [2, 0]), s, "amin", include_self=False),
                          [_distinct(3, 4), _distinct(2, 4, seed=1)]),
    "masked_scatter": (lambda m, x, s: m.masked_scatter(x, _t(m, A > 0), s), [A, B]),
    "masked_scatter_broadcast": (lambda m, x, s: x.masked_scatter(_t(m, [[True, False, True, False]] * 2), s),
                                 [A[0], B]),
    "put": (lambda m, x, s: m.put(x, _t(m, [1, 5, -1]), s), [A, B[0, :3]]),
    "put_accumulate": (lambda m, x, s: x.put(_t(m, [[1, 1, -1]]), s, accumulate=True), [A, B[0, :3]]),
    "index_put": (lambda m, x, s: m.index_put(x, (_t(m, [0, 1]), _t(m, [2, 0])), s), [A, B[0, :2]]),
    "index_put_broadcast": (lambda m, x, s: x.index_put((_t(m, [0, 2]),), s), [A, B[0]]),
    "index_put_mask": (lambda m, x, s: m.index_put(x, (_t(m, A > 0),), s), [A, np.array(0.5)]),
    "index_put_accumulate": (lambda m, x, s: m.index_put(x, (_t(m, [0, 0]),), s, accumulate=True), [A, B[:1]]),
    "unfold": (lambda m, x: x.unfold(1, 2, 1), [A]),
    "unfold_step": (lambda m, x: x.unfold(0, 2, 3), [rand(8, 2)]),
    "unfold_last_window_short": (lambda m, x: x.unfold(-1, 3, 2), [rand(2, 6)]),
    "as_strided": (lambda m, x: m.as_strided(x, (3, 3), (1, 2), 1), [A]),
    "as_strided_of_view": (lambda m, x: x[1:].as_strided((2, 2), (1, 1)), [A]),
    "as_strided_of_expanded": (lambda m, x: m.as_strided(x.expand(3, 4), (2, 2), (1, 1)), [A[:1]]),
    "select": (lambda m, x: m.select(x, 1, -1), [A]),
    "take_along_dim": (lambda m, x: m.take_along_dim(x, _t(m, [[0, 3], [1, 1], [2, 0]]), 1), [A]),
    "take_along_dim_flat": (lambda m, x: x.take_along_dim(_t(m, [5, 0, 11, 5])), [A]),
    "take_along_dim_broadcast": (lambda m, x: m.take_along_dim(x, _t(m, [[[0]], [[2]]]), 0), [rand(3, 1, 4)]),
    "select_scatter": (lambda m, x, s: m.select_scatter(x, s, 1, 0), [A, B[:, 0]]),
    "slice_scatter": (lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), [A, B[:, :2]]),
    "slice_scatter_neg": (lambda m, x, s: x.slice_scatter(s, dim=0, start=-1), [A, B[:1]]),
    "diagonal_scatter": (lambda m, x, s: m.diagonal_scatter(x, s, 1), [A, B[0, :3]]),
    "diagonal_scatter_3d": (lambda m, x, s: x.diagonal_scatter(s, 1, 2, 0), [rand(2, 3, 4), rand(3, 1)]),
    "tensor_split_indices": (lambda m, x: m.tensor_split(x, [3, 1, 12], dim=1), [A]),
    "tensor_split_sections": (lambda m, x: x.tensor_split(3, dim=1), [A]),
    "hsplit": (lambda m, x: m.hsplit(x, [1, 3]), [A]),
    "split_with_sizes": (lambda m, x: x.split_with_sizes([1, 3], dim=1), [A]),
    "column_stack": (lambda m, x, y: m.column_stack([x, y]), [A[0, :3], B]),
    "row_stack": (lambda m, x, y: m.row_stack([x, y]), [A[0], B]),
    "block_diag": (lambda m, x, y, z: m.block_diag(x, y, z), [np.array(1.5), A[0], B]),
    "cartesian_prod": (lambda m, x, y: m.cartesian_prod(x, y), [A[0], B[0, :3]]),
    "combinations": (lambda m, x: m.combinations(x, 3, True), [A[0]]),
    "combinations_r2": (lambda m, x: m.combinations(x), [A[0]]),
    "meshgrid_xy": (lambda m, x, y, z: m.meshgrid(x, y, z, indexing="xy"), [A[0], B[0, :3], A[1, :2]]),
    "rot90": (lambda m, x: m.rot90(x, 3, (1, 0)), [A]),
    "rot90_k2": (lambda m, x: x.rot90(2), [A]),
    "narrow_copy": (lambda m, x: m.narrow_copy(x, 1, 1, 2), [A]),
    "sum_to_size": (lambda m, x: x.sum_to_size(3, 1), [A]),
    "repeat_interleave": (lambda m, x: m.repeat_interleave(x, 2, dim=0), [A]),
    "repeat_interleave_tensor": (lambda m, x: x.repeat_interleave(_t(m, [1, 0, 3, 1]), dim=1), [A]),
    "repeat_interleave_flat": (lambda m, x: m.repeat_interleave(x, 3), [A]),
    "aminmax_dim": (lambda m, x: tuple(m.aminmax(x, dim=1)), [_distinct(3, 4)]),
    "aminmax_all_keepdim": (lambda m, x: tuple(x.aminmax(keepdim=True)), [_distinct(3, 4)]),
    "renorm": (lambda m, x: m.renorm(x, 2, 0, 1.5), [A]),
    "renorm_p1": (lambda m, x: x.renorm(1, 1, 1.0), [A]),
    "renorm_p3": (lambda m, x: m.renorm(x, 3, 1, 0.8), [A]),
    "fill": (lambda m, x, v: m.fill(x, v), [A, np.array(2.0)]),
    "H": (lambda m, x: x.H, [A]),
    "mH": (lambda m, x: x.mH, [rand(2, 3, 4)]),
    "adjoint": (lambda m, x: m.adjoint(x), [rand(2, 3, 4)]),
    # in place under autograd: the tensor takes the result's place in the graph
    "index_fill_": (lambda m, x: (x * 1).index_fill_(1, _t(m, [1]), 0.5), [A]),
    "index_copy_": (lambda m, x, s: (x * 1).index_copy_(1, _t(m, [1]), s), [A, B[:, :1]]),
    "index_reduce_": (lambda m, x, s: (x * 1).index_reduce_(1, _t(m, [1, 1]), s, "mean"), [A, B[:, :2]]),
    "scatter_reduce_": (lambda m, x, s: (x * 1).scatter_reduce_(1, _t(m, IDX), s, "sum"), [A, B[:, :3]]),
    "masked_scatter_": (lambda m, x, s: (x * 1).masked_scatter_(_t(m, A > 0), s), [A, B]),
    "put_": (lambda m, x, s: (x * 1).put_(_t(m, [1, 3]), s), [A, B[0, :2]]),
    "index_put_": (lambda m, x, s: (x * 1).index_put_((_t(m, [1, 2]),), s, accumulate=True), [A, B[0]]),
    "fill_diagonal_": (lambda m, x: (x * 1).fill_diagonal_(2.0), [A]),
    "renorm_": (lambda m, x: (x * 1).renorm_(2, 0, 1.0), [A]),
    "tril_": (lambda m, x: (x * 1).tril_(1), [A]),
    "triu_": (lambda m, x: (x * 1).triu_(-1), [A]),
    "lerp_": (lambda m, x, y: (x * 1).lerp_(y, 0.3), [A, B]),
    "remainder_": (lambda m, x, y: (x * 1).remainder_(y), [A, B + 3]),
    "fmod_": (lambda m, x: (x * 1).fmod_(0.7), [A]),
    "true_divide_": (lambda m, x, y: (x * 1).true_divide_(y), [A, B + 3]),
    "cumsum_": (lambda m, x: (x * 1).cumsum_(1), [A]),
    "cumprod_": (lambda m, x: (x * 1).cumprod_(dim=0), [A]),
    "unsqueeze_": (lambda m, x: (x * 1).unsqueeze_(1), [A]),
    "squeeze_": (lambda m, x: (x * 1).squeeze_(0), [A[None]]),
    "t_": (lambda m, x: (x * 1).t_(), [A]),
    "transpose_": (lambda m, x: (x * 1).transpose_(0, -1), [rand(2, 3, 4)]),
    "swapdims_": (lambda m, x: (x * 1).swapdims_(0, 1), [A]),
    "as_strided_": (lambda m, x: (x * 1).as_strided_((2, 2), (4, 1), 1), [A]),
}
for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        GRAD[f"scatter_reduce_{_red}_{_inc}"] = (
            (lambda red, inc: lambda m, x, s: m.scatter_reduce(x, 1, _t(m, IDX), s, red, include_self=inc))(_red, _inc),
            [_distinct(3, 4), _distinct(3, 3, seed=1)])
# (put/index_put with repeated positions keep one write: not differentiable in finite differences)
GRADCHECK_SKIP = {"index_fill_value"}


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(GRAD))
def test_parity(name, dtype):
    fn, arrays = GRAD[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # index_reduce's beta warning
        compare_torch(lambda *xs: fn(ember, *xs), lambda *xs: fn(torch, *xs), *[a.astype(dtype) for a in arrays])


@pytest.mark.parametrize("name", sorted(set(GRAD) - GRADCHECK_SKIP))
def test_gradcheck(name):
    fn, arrays = GRAD[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_grad(lambda *xs: fn(ember, *xs), *arrays)


@requires_torch
@pytest.mark.parametrize("name", ["index_fill", "index_copy", "scatter_reduce_prod_True", "masked_scatter", "put",
                                  "unfold", "diagonal_scatter", "repeat_interleave_tensor", "renorm"])
def test_parity_noncontiguous(name):
    fn, arrays = GRAD[name]
    compare_torch(lambda *xs: fn(ember, *xs), lambda *xs: fn(torch, *xs), noncontig(arrays[0]), *arrays[1:])


def test_index_fill_value_gradient_counts_each_position_once():
    x, v = ember.tensor(A, requires_grad=True), ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    x.index_fill(1, ember.tensor([0, 0, 2]), v).sum().backward()
    assert v.grad.item() == 6.0 and x.grad[:, [0, 2]].abs().sum().item() == 0  # 3 rows x 2 distinct columns


# ---------------------------------------------------------------------- values without gradients (exact)
EXACT = {
    "index_fill_int": lambda m: m.index_fill(_h(m, [[1, 2], [3, 4]]), 0, _h(m, 1), 2.7),
    "index_copy_0d": lambda m: m.index_copy(_h(m, 1.0), 0, _h(m, [0]), _h(m, [5.0])),
    "index_reduce_int_mean": lambda m: m.index_reduce(_h(m, [[-7, 1, 4]]), 1, _h(m, [1, 1]), _h(m, [[2, 3]]), "mean"),
    "scatter_reduce_int_mean": lambda m: m.scatter_reduce(_h(m, [[-7, 1]]), 1, _h(m, [[0, 0]]), _h(m, [[1, 1]]),
                                                          "mean"),
    "scatter_reduce_int_amax_noself": lambda m: m.scatter_reduce(m.zeros(1, 3, dtype=m.int64), 1, _h(m, [[0, 0]]),
                                                                 _h(m, [[-5, -3]]), "amax", include_self=False),
    "scatter_reduce_bool_sum": lambda m: m.scatter_reduce(m.zeros(1, 3, dtype=m.bool), 1, _h(m, [[0, 0]]),
                                                          _h(m, [[True, False]]), "sum"),
    "scatter_reduce_max_alias": lambda m: m.scatter_reduce(_h(m, [[1., 5.]]), 1, _h(m, [[0, 0]]), _h(m, [[3., 2.]]),
                                                           "max"),
    "scatter_reduce_nan": lambda m: m.scatter_reduce(m.zeros(1, 3), 1, _h(m, [[0, 0]]), _h(m, [[np.nan, 1.]]), "amax"),
    "scatter_reduce_empty_index": lambda m: m.scatter_reduce(_h(m, A), 1, m.zeros(3, 0, dtype=m.int64),
                                                             _h(m, B), "prod"),
    "scatter_reduce_src_larger": lambda m: m.scatter_reduce(_h(m, A), 1, _h(m, IDX[:2, :2]), _h(m, B), "sum"),
    "scatter_reduce_0d": lambda m: m.scatter_reduce(_h(m, 1.), 0, _h(m, 0), _h(m, 5.), "sum"),
    "masked_scatter_int": lambda m: m.masked_scatter(_h(m, [1, 2, 3]), _h(m, [True, False, True]), _h(m, [7, 8, 9])),
    "put_int_accumulate": lambda m: m.put(_h(m, [1, 2, 3]), _h(m, [0, 0]), _h(m, [5, 6]), accumulate=True),
    "index_put_int32_index": lambda m: m.index_put(_h(m, A), (_h(m, [0, 1]).int(),), _h(m, np.float64(9))),
    "unfold_0d": lambda m: _h(m, 2.).unfold(0, 1, 1),
    "unfold_size0": lambda m: m.arange(4.).unfold(0, 0, 1),
    "tensor_split_neg": lambda m: m.tensor_split(m.arange(10), [-2, 8]),
    "tensor_split_tensor_sections": lambda m: m.tensor_split(m.arange(10), _h(m, 3)),
    "tensor_split_keyword": lambda m: m.tensor_split(m.arange(10), indices=[2, 5]),
    "tensor_split_more_sections": lambda m: m.tensor_split(m.arange(3), 5),
    "vsplit": lambda m: m.vsplit(m.arange(12).reshape(4, 3), 2),
    "dsplit": lambda m: m.dsplit(m.arange(8).reshape(1, 2, 4), [1]),
    "hsplit_1d": lambda m: m.hsplit(m.arange(6), 3),
    "column_stack_0d": lambda m: m.column_stack([_h(m, 1), _h(m, 2)]),
    "block_diag_empty": lambda m: m.block_diag(),
    "block_diag_mixed": lambda m: m.block_diag(_h(m, 1), _h(m, [2., 3.]), m.zeros(0, 2), m.zeros(0)),
    "cartesian_prod_ints": lambda m: m.cartesian_prod(_h(m, [1, 2]), _h(m, [3, 4, 5]), _h(m, [7, 8])),
    "combinations_r0": lambda m: m.combinations(_h(m, [1, 2, 3]), 0),
    "combinations_r_too_big": lambda m: m.combinations(_h(m, [1, 2, 3]), 4),
    "combinations_r4": lambda m: m.combinations(m.arange(6), 4),
    "combinations_empty": lambda m: m.combinations(m.zeros(0), 3, with_replacement=True),
    "meshgrid_0d": lambda m: m.meshgrid(_h(m, 1), m.arange(3), indexing="ij"),
    "meshgrid_list": lambda m: m.meshgrid([m.arange(2), m.arange(3)], indexing="xy"),
    "rot90_int_k5": lambda m: m.rot90(m.arange(24).reshape(2, 3, 4), 5, [2, 0]),
    "rot90_k0": lambda m: m.rot90(m.arange(6).reshape(2, 3), 0),
    "repeat_interleave_counts": lambda m: m.repeat_interleave(_h(m, [2, 0, 1])),
    "repeat_interleave_bool": lambda m: _h(m, [True, False]).repeat_interleave(2),
    "repeat_interleave_output_size": lambda m: m.repeat_interleave(m.arange(3), _h(m, [1, 0, 2]), 0, output_size=3),
    "repeat_interleave_int32_repeats": lambda m: m.repeat_interleave(m.arange(3), _h(m, [1, 0, 2]).int()),
    "tril_indices": lambda m: m.tril_indices(3, 4, 1),
    "tril_indices_neg": lambda m: m.tril_indices(4, 3, -1, dtype=m.int32),
    "triu_indices": lambda m: m.triu_indices(3, 3),
    "triu_indices_empty": lambda m: m.triu_indices(3, 3, 5),
    "unravel_index": lambda m: m.unravel_index(_h(m, [[4, 1], [-1, 6]]), (2, 3)),
    "unravel_index_0d_int32": lambda m: m.unravel_index(_h(m, 4).int(), 6),
    "isin": lambda m: m.isin(_h(m, [1, 2, 3]), _h(m, [2., 5.])),
    "isin_scalar_elements": lambda m: m.isin(2, _h(m, [2, 5])),
    "isin_invert": lambda m: m.isin(_h(m, [[1, 2], [3, 4]]), 2, invert=True),
    "isin_nan": lambda m: m.isin(_h(m, [np.nan, 1.]), _h(m, [np.nan, 1.])),
    "vander": lambda m: m.vander(_h(m, [1, 2, 3])),
    "vander_bool": lambda m: m.vander(_h(m, [True, False])),
    "vander_float_increasing": lambda m: m.vander(_h(m, [0., 2., 3.]), 4, increasing=True),
    "vander_N0": lambda m: m.vander(_h(m, [1., 2.]), 0),
    "fill_diagonal_wrap": lambda m: m.zeros(7, 3).fill_diagonal_(5, wrap=True),
    "fill_diagonal_tall": lambda m: m.zeros(7, 3).fill_diagonal_(5),
    "fill_diagonal_wide": lambda m: m.zeros(3, 7, dtype=m.int64).fill_diagonal_(2.7),
    "fill_diagonal_3d": lambda m: m.zeros(3, 3, 3).fill_diagonal_(1),
    "aminmax_bool": lambda m: tuple(m.aminmax(_h(m, [True, False]))),
    "aminmax_0d": lambda m: tuple(m.aminmax(_h(m, 3.), dim=0)),
    "aminmax_int": lambda m: tuple(m.aminmax(m.arange(6).reshape(2, 3), dim=-1, keepdim=True)),
    "lshift": lambda m: m.bitwise_left_shift(_h(m, [1, 2, -3]), _h(m, [1, 63, 2])),
    "lshift_by_width": lambda m: m.bitwise_left_shift(_h(m, [1, 2, -3]), 64),
    "rshift_past_width_and_negative": lambda m: m.bitwise_right_shift(_h(m, [8, -8, 5, -5]), _h(m, [70, 70, -1, -1])),
    "lshift_int8_wraps": lambda m: _h(m, [1, 64]).to(m.int8) << 1,
    "rshift_uint8": lambda m: _h(m, [255, 16]).to(m.uint8) >> 9,
    "rlshift": lambda m: 1 << _h(m, [1, 2]),
    "rrshift": lambda m: 64 >> _h(m, [1, 2]),
    "lshift_bool": lambda m: m.bitwise_left_shift(_h(m, [True]), 1),
    "lshift_int32_int64": lambda m: m.bitwise_left_shift(_h(m, [1]).int(), _h(m, [2])),
    "ilshift": lambda m: (lambda z: (z.__ilshift__(1), z)[1])(_h(m, [1, 2])),
    "irshift_": lambda m: _h(m, [8, 2]).bitwise_right_shift_(_h(m, [1, 1])),
    "iand": lambda m: (lambda z: (z.__iand__(1), z)[1])(_h(m, [3, 2])),
    "ior": lambda m: (lambda z: (z.__ior__(True), z)[1])(_h(m, [True, False])),
    "ixor": lambda m: (lambda z: (z.__ixor__(5), z)[1])(_h(m, [3, 2])),
    "bitwise_and_": lambda m: _h(m, [3, 5]).bitwise_and_(1),
    "bitwise_or_": lambda m: _h(m, [3, 5]).bitwise_or_(8),
    "bitwise_xor_": lambda m: _h(m, [3, 5]).bitwise_xor_(_h(m, [1, 1])),
    "bitwise_not_": lambda m: _h(m, [3, 5]).bitwise_not_(),
    "bitwise_not_bool": lambda m: _h(m, [True, False]).bitwise_not_(),
    "eq_": lambda m: _h(m, A).eq_(_h(m, A[0])),
    "ne_": lambda m: _h(m, A).ne_(_h(m, A)[0]),
    "lt_int": lambda m: _h(m, [1, 2, 3]).lt_(2.5),
    "le_": lambda m: _h(m, [1., 2., 3.]).le_(2),
    "gt_": lambda m: _h(m, [1., 2., 3.]).gt_(2),
    "ge_": lambda m: _h(m, [1., 2., 3.]).ge_(2),
    "greater_": lambda m: _h(m, [1, 2]).greater_(1),
    "greater_equal_": lambda m: _h(m, [1, 2]).greater_equal_(2),
    "less_": lambda m: _h(m, [1, 2]).less_(2),
    "less_equal_": lambda m: _h(m, [1, 2]).less_equal_(1),
    "not_equal_": lambda m: _h(m, [1, 2]).not_equal_(1),
    "lt_bool": lambda m: _h(m, [True, False]).lt_(1),
    "logical_and_": lambda m: _h(m, [1., 0., 2.]).logical_and_(_h(m, [1., 1., 0.])),
    "logical_or_": lambda m: _h(m, [1, 0, 0]).logical_or_(_h(m, [0, 0, 3])),
    "logical_xor_": lambda m: _h(m, [True, False]).logical_xor_(_h(m, [True, True])),
    "logical_not_": lambda m: _h(m, [1., 0., 2.]).logical_not_(),
    "floor_divide_": lambda m: _h(m, [5., -5.]).floor_divide_(3),
    "remainder_int": lambda m: _h(m, [5, -5]).remainder_(3),
    "cumsum_int32": lambda m: _h(m, [1, 2, 3]).int().cumsum_(0),
    "greater": lambda m: m.greater(_h(m, [1, 2]), 1),
    "less_equal": lambda m: m.less_equal(_h(m, [1, 2]), _h(m, [2, 1])),
    "not_equal": lambda m: m.not_equal(_h(m, [1, 2]), 1),
    "fill_int": lambda m: m.fill(_h(m, [[1, 2]]), 2.5),
    "fill_tensor": lambda m: m.fill(_h(m, [1., 2.]), _h(m, 3)),
    "fill_": lambda m: m.fill_(m.zeros(2), 3),
    "zero_": lambda m: m.zero_(m.ones(2, dtype=m.int64)),
    "scalar_tensor": lambda m: m.scalar_tensor(3),
    "scalar_tensor_bool": lambda m: m.scalar_tensor(True),
    "scalar_tensor_dtype": lambda m: m.scalar_tensor(3.5, dtype=m.int64),
    "scalar_tensor_of_tensor": lambda m: m.scalar_tensor(_h(m, 2.)),
    "narrow_copy_neg_start": lambda m: m.narrow_copy(m.arange(5), 0, -2, 2),
    "sum_to_size_int": lambda m: _h(m, [[1, 2, 3], [4, 5, 6]]).sum_to_size(3),
    "sum_to_size_bool": lambda m: m.ones(2, 3, dtype=m.bool).sum_to_size((1, 3)),
    "select_int": lambda m: m.arange(12).reshape(3, 4).select(0, -1),
    "select_scatter_casts": lambda m: m.select_scatter(m.zeros(2, 3), m.ones(2, dtype=m.float64), 1, 0),
    "slice_scatter_big_end": lambda m: m.slice_scatter(m.zeros(4, 3), m.ones(2, 3), 0, 2, 100),
    "diagonal_scatter_out_of_matrix": lambda m: m.diagonal_scatter(m.zeros(3, 4), m.ones(0), 9),
    "index_put_accumulate_int": lambda m: m.index_put(m.zeros(4, dtype=m.int64), (_h(m, [1, 1, 3]),),
                                                      _h(m, [1, 2, 3]), True),
}


def _values(r):
    """A result as comparable plain data: (dtype name, shape, values) per tensor."""
    if isinstance(r, (tuple, list)):
        return [_values(v) for v in r]
    v = r.detach().cpu().numpy() if hasattr(r, "detach") else np.asarray(r)
    return str(r.dtype).split(".")[-1], tuple(v.shape), np.nan_to_num(v, nan=-12345.0).tolist()


@requires_torch
@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert _values(EXACT[name](ember)) == _values(EXACT[name](torch))


def test_vander_gradient():
    """PyTorch 2.13's vander backward fails (an in-place cumprod in its own graph); ember's is exact, at 0 too
    (d x^j / dx = j x^(j-1)), and differentiates again."""
    x = np.array([0., 2., 3., -1.5])
    check_grad(lambda t: ember.vander(t, 4), x)
    check_grad(lambda t: ember.vander(t, increasing=True), x)
    assert not ember.vander(ember.tensor(x, requires_grad=True), 1).requires_grad  # (ones, as PyTorch)


def test_meshgrid_warns_without_indexing():
    with pytest.warns(UserWarning, match="indexing argument"):
        g = ember.meshgrid(ember.arange(2), ember.arange(3))
    assert [tuple(t.shape) for t in g] == [(2, 3), (2, 3)] and g[0].stride() == (1, 0)  # ij, expanded views


def test_index_reduce_warns_once_as_beta():
    from ember.ops import indexing_ext
    indexing_ext._WARNED.discard("index_reduce")
    with pytest.warns(UserWarning, match="beta"):
        ember.index_reduce(ember.zeros(3), 0, ember.tensor([0]), ember.ones(1), "amax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.index_reduce(ember.zeros(3), 0, ember.tensor([0]), ember.ones(1), "amax")


# ---------------------------------------------------------------------- gradients PyTorch refuses
def test_scatter_reduce_prod_double_backward_with_two_zeros_is_refused():
    x = ember.tensor([[1., 2.]], dtype=ember.float64, requires_grad=True)
    s = ember.tensor([[0., 0., 3.]], dtype=ember.float64, requires_grad=True)
    out = ember.scatter_reduce(x, 1, ember.tensor([[0, 0, 1]]), s, "prod")
    (g,) = ember.autograd.grad(out.sum(), s, create_graph=True)
    assert g.tolist() == [[0.0, 0.0, 2.0]]  # the first derivative is fine
    with pytest.raises(RuntimeError, match="Double backward is unsupported for src when >1 zeros"):
        g.sum().backward()


def test_scatter_reduce_src_gradient_needs_index_shape():
    x = ember.zeros(2, 3, requires_grad=True)
    s = ember.ones(3, 4, requires_grad=True)
    out = ember.scatter_reduce(x, 1, ember.tensor([[0, 1], [1, 2]]), s, "sum")
    with pytest.raises(RuntimeError, match=r"scatter_reduce\(\).*src.*index's shape"):
        out.sum().backward()
    x = ember.zeros(2, 3, requires_grad=True)  # x alone: fine
    ember.scatter_reduce(x, 1, ember.tensor([[0, 1], [1, 2]]), ember.ones(3, 4), "sum").sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2


# ---------------------------------------------------------------------- in-place semantics
INPLACE = {
    "index_fill_": lambda t: t.index_fill_(1, ember.tensor([0]), 1.0),
    "index_copy_": lambda t: t.index_copy_(0, ember.tensor([1]), ember.ones(1, 4)),
    "index_reduce_": lambda t: t.index_reduce_(0, ember.tensor([1]), ember.ones(1, 4), "amax"),
    "scatter_reduce_": lambda t: t.scatter_reduce_(1, ember.tensor([[0]]), ember.ones(1, 1), "sum"),
    "masked_scatter_": lambda t: t.masked_scatter_(t > 0, ember.ones(12)),
    "put_": lambda t: t.put_(ember.tensor([0]), ember.ones(1)),
    "index_put_": lambda t: t.index_put_((ember.tensor([0]),), ember.ones(4)),
    "fill_diagonal_": lambda t: t.fill_diagonal_(1.0),
    "renorm_": lambda t: t.renorm_(2, 0, 1.0),
    "tril_": lambda t: t.tril_(),
    "eq_": lambda t: t.eq_(0),
    "logical_not_": lambda t: t.logical_not_(),
    "remainder_": lambda t: t.remainder_(2.0),
    "lerp_": lambda t: t.lerp_(ember.ones(3, 4), 0.5),
    "cumsum_": lambda t: t.cumsum_(0),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "t_": lambda t: t.t_(),
    "resize_": lambda t: t.resize_(2, 2),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_in_place_returns_self_and_bumps_version(name):
    base = ember.tensor(A.astype(np.float32))
    view = base[:]  # a view of all of base: both share one version counter
    v = base._version
    assert INPLACE[name](view) is view
    assert view._version == base._version > v


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_in_place_on_a_leaf_that_requires_grad_is_refused(name):
    t = ember.tensor(A.astype(np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad|cannot resize variables that require"):
        INPLACE[name](t)
    with ember.no_grad():
        if name != "resize_":
            INPLACE[name](t)  # allowed outside autograd


def test_in_place_writes_into_the_tensor_fast_path():
    t = ember.tensor(A)
    data = t._data
    t.index_fill_(1, ember.tensor([0]), 7.0).put_(ember.tensor([1]), ember.tensor([3.0], dtype=ember.float64))
    assert t._data is data and data[0, 0] == 7.0 and data[0, 1] == 3.0


def test_in_place_saved_tensor_is_caught():
    x = ember.tensor(A, requires_grad=True)
    y = x * 1
    z = y * y  # saves y
    y.index_fill_(1, ember.tensor([0]), 0.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    y = x * 1
    z = y * y
    y.unsqueeze_(0)  # a metadata change bumps the version too, as in PyTorch
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_in_place_comparison_zeroes_the_gradient():
    x = ember.tensor(A, requires_grad=True)
    y = x * 2
    y.gt_(0)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.abs().sum().item() == 0


def test_in_place_dtype_rules():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ember.tensor([5, -5]).true_divide_(2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ember.tensor([5, -5]).remainder_(2.5)
    with pytest.raises(RuntimeError, match=r"cumprod_.*dtype.*should match"):
        ember.ones(3).cumprod_(0, dtype=ember.float64)
    with pytest.raises(RuntimeError, match=r"eq_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        ember.ones(3).eq_(ember.ones(2, 3))


# ---------------------------------------------------------------------- views and storage
@requires_torch
@pytest.mark.parametrize("make", [
    lambda m: m.arange(24.).reshape(2, 3, 4),
    lambda m: m.arange(24.).reshape(2, 3, 4).permute(2, 0, 1),
    lambda m: m.arange(24.).reshape(2, 3, 4)[:, 1:, ::2],
    lambda m: m.arange(24.).reshape(6, 4)[2:].t(),
    lambda m: m.arange(3.).reshape(3, 1).expand(3, 4),
    lambda m: m.arange(24.).unfold(0, 5, 3),
    lambda m: m.arange(24.)[3:].as_strided((2, 3), (1, 4)),
    lambda m: m.arange(24.).as_strided((2, 3), (1, 4), 7)[1:],
    lambda m: m.tensor(1.),
    lambda m: m.arange(12.).reshape(3, 4).select(1, 2),
], ids=["contiguous", "permuted", "sliced", "transposed_view", "expanded", "unfolded", "as_strided",
        "as_strided_offset", "0d", "select"])
def test_strides_offsets_and_dim_order(make):
    e, t = make(ember), make(torch)
    assert e.stride() == t.stride() and e.storage_offset() == t.storage_offset()
    assert e.dim_order() == t.dim_order() and e.is_contiguous() == t.is_contiguous()
    assert [e.stride(d) for d in range(e.ndim)] == [t.stride(d) for d in range(t.ndim)]
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_views_share_memory_and_version():
    base = ember.arange(10.)
    w = base.unfold(0, 3, 2)
    s = ember.as_strided(base, (2, 2), (1, 3), 1)
    w[1, 0] = 100.0  # (position 2 of base)
    assert base[2].item() == 100.0 and s[1, 0].item() == 100.0 * 0 + base[2].item()
    v = base._version
    s.zero_()
    assert base._version == w._version == v + 1 and base[[1, 2, 4, 5]].tolist() == [0.0] * 4


def test_unfold_gradient_adds_overlapping_windows():
    x = ember.arange(6., requires_grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 3.0, 2.0, 1.0]


def test_metadata_in_place_ops():
    t = ember.zeros(2, 3)
    assert t.unsqueeze_(0).shape == (1, 2, 3) and t.squeeze_().shape == (2, 3)
    assert t.t_().shape == (3, 2) and t.stride() == (1, 3)
    assert t.transpose_(0, 1).shape == (2, 3) and t.swapaxes_(0, 1).shape == (3, 2)
    assert ember.zeros(2, 1, 1).squeeze_((1, 2)).shape == (2,)
    with pytest.raises(RuntimeError, match=r"t_\(\) expects a tensor with <= 2 dimensions"):
        ember.zeros(2, 3, 4).t_()
    x = ember.tensor(A, requires_grad=True)
    y = x * 2
    y.unsqueeze_(0)
    assert y.grad_fn is not None and y.shape == (1, 3, 4)
    y.sum().backward()
    assert x.grad.tolist() == [[2.0] * 4] * 3


@requires_torch
def test_resize_semantics():
    for lib in (ember, torch):
        r = lib.arange(6.)
        v = r._version
        r.resize_(2, 2)
        assert r.tolist() == [[0.0, 1.0], [2.0, 3.0]] and r._version == v + 1
        r = lib.arange(6.)
        r.resize_(2, 4)  # grows: the old values first, the rest uninitialised
        assert tuple(r.shape) == (2, 4) and r[0].tolist() == [0.0, 1.0, 2.0, 3.0] and r[1, :2].tolist() == [4.0, 5.0]
        w = lib.arange(6.)[2:]
        w.resize_(2)
        assert w.tolist() == [2.0, 3.0] and w.storage_offset() == 2
        assert tuple(lib.zeros(3).resize_as_(lib.zeros(1, 2)).shape) == (1, 2)
        assert tuple(lib.zeros(3).resize_((1, 3)).shape) == (1, 3) and tuple(lib.zeros(3).resize_(0).shape) == (0,)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            lib.zeros(3, requires_grad=True).resize_(2)


def test_new_empty_strided_and_factories_inherit():
    a = ember.zeros(2, dtype=ember.float64, requires_grad=True)
    r = a.new_empty_strided((2, 3), (1, 2))
    assert r.dtype == ember.float64 and r.stride() == (1, 2) and not r.requires_grad and r.storage_offset() == 0
    for r in (a.new_tensor([1, 2]), a.new_zeros(2, 3), a.new_ones((2,)), a.new_empty(2), a.new_full((2,), 3)):
        assert r.dtype == ember.float64 and not r.requires_grad and r.device == a.device
    assert a.new_tensor([1, 2], dtype=ember.int64).dtype == ember.int64
    e = ember.empty_strided((2, 3), (1, 2), dtype=ember.int64)
    assert e.stride() == (1, 2) and e.dtype == ember.int64 and ember.empty_strided((2, 3), (0, 0)).stride() == (0, 0)
    assert ember.scalar_tensor(2.5, requires_grad=True).requires_grad


# ---------------------------------------------------------------------- asarray, frombuffer
def test_asarray_shares_and_copies_as_pytorch():
    n = np.arange(3.)
    r = ember.asarray(n)
    n[0] = 9.0
    assert r[0].item() == 9.0 and r.dtype == ember.float64  # shares NumPy memory
    assert ember.asarray(n, copy=True)._data is not n and ember.asarray(n, dtype=ember.float32).dtype == ember.float32
    with pytest.raises(ValueError, match="can't alias tensor with dtype 'Double' into dtype 'Float'"):
        ember.asarray(n, dtype=ember.float32, copy=False)
    with pytest.raises(ValueError, match="can't alias arbitrary sequence"):
        ember.asarray([1, 2], copy=False)
    assert ember.asarray([1, 2.5]).dtype == ember.float32 and ember.asarray([1, 2]).dtype == ember.int64
    assert ember.asarray([ember.tensor(1.), ember.tensor(2.)]).tolist() == [1.0, 2.0]
    t = ember.tensor([1., 2.], requires_grad=True)
    assert ember.asarray(t) is t and t.requires_grad  # unspecified requires_grad keeps the tensor's
    y = t * 2
    assert ember.asarray(y) is y
    d = ember.asarray(y, requires_grad=False)
    assert d is not y and not d.requires_grad and d._data is y._data  # detached alias
    c = ember.asarray(y, copy=True)
    assert c._data is not y._data and c.grad_fn is not None  # a differentiable copy
    assert ember.asarray(y, dtype=ember.float64).grad_fn is not None
    with pytest.raises(ValueError, match="can't alias tensor with dtype 'Float' into dtype 'Double'"):
        ember.asarray(t, dtype=ember.float64, copy=False)
    u = ember.tensor([1., 2.])
    assert ember.asarray(u, requires_grad=True) is u and u.requires_grad
    assert ember.asarray(t, requires_grad=False) is t and not t.requires_grad  # (a leaf: its flag is set)
    with pytest.raises(RuntimeError, match="floating point"):
        ember.asarray([1, 2], requires_grad=True)
    assert ember.asarray(bytearray(8), dtype=ember.int16).shape == (4,)


def test_frombuffer():
    buf = bytearray(np.array([1.0, 2.0], np.float32).tobytes())
    t = ember.frombuffer(buf, dtype=ember.float32)
    buf[0:4] = np.array([3.0], np.float32).tobytes()
    assert t.tolist() == [3.0, 2.0]  # shares the buffer
    assert ember.frombuffer(buf, dtype=ember.float32, count=1, offset=4).tolist() == [2.0]
    assert ember.frombuffer(bytearray(8), dtype=ember.float32, requires_grad=True).requires_grad
    with pytest.warns(UserWarning, match="not writable"):
        from ember.ops import indexing_ext
        indexing_ext._FROMBUFFER_WARNED.clear()
        assert ember.frombuffer(b"\x01\x02", dtype=ember.uint8).tolist() == [1, 2]


# ---------------------------------------------------------------------- attributes
@requires_torch
def test_attributes_match_pytorch():
    for make in (lambda m: m.arange(6.).reshape(2, 3), lambda m: m.zeros(3, 1).expand(3, 4),
                 lambda m: m.tensor([1, 2], dtype=m.int16), lambda m: m.tensor(True), lambda m: m.zeros(0, 2)):
        e, t = make(ember), make(torch)
        assert (e.itemsize, e.nbytes, e.element_size(), e.is_cpu, e.get_device()) == \
               (t.itemsize, t.nbytes, t.element_size(), t.is_cpu, t.get_device())
        assert (e.is_signed(), e.is_complex(), e.is_conj(), e.is_neg(), e.is_inference(), e.is_floating_point()) == \
               (t.is_signed(), t.is_complex(), t.is_conj(), t.is_neg(), t.is_inference(), t.is_floating_point())
        for fn in ("is_signed", "is_complex", "is_conj", "is_neg", "is_floating_point", "is_inference", "get_device"):
            assert getattr(ember, fn)(e) == getattr(torch, fn)(t), fn
        assert e.conj() is e and e.resolve_conj() is e and e.resolve_neg() is e and ember.conj(e) is e
        assert ember.is_same_size(e, e) and not e.is_same_size(ember.zeros(7))
    assert [ember.zeros(1, dtype=d).is_signed() for d in (ember.uint8, ember.bool, ember.int8, ember.float16)] == \
           [False, False, True, True]
    assert ember.tensor([1.]).is_nonzero() and not ember.is_nonzero(ember.tensor(0)) and ember.tensor(0).H.ndim == 0


def test_apply_and_map():
    assert ember.tensor([1., 2.]).apply_(lambda v: v * 10).tolist() == [10.0, 20.0]
    assert ember.tensor([1, 2]).apply_(lambda v: v * 1.5).tolist() == [1, 3]  # cast back to int64
    z = ember.zeros(2, 2)
    z[:, 0].apply_(lambda v: -1)  # through a non-contiguous view
    assert z.tolist() == [[-1.0, 0.0], [-1.0, 0.0]]
    assert ember.tensor([[1., 2.]]).map_(ember.tensor([3.]), lambda u, v: u * v).tolist() == [[3.0, 6.0]]
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad"):
        ember.ones(2, requires_grad=True).apply_(abs)
    with pytest.raises(TypeError, match=r"map_: expected \w+.FloatTensor for 'other' .got \w+.LongTensor"):
        ember.ones(2).map_(ember.ones(2, dtype=ember.int64), max)


# ---------------------------------------------------------------------- errors
X = lambda m: m.tensor(A)  # noqa: E731

ERRORS = [
    ("index_fill_oob", lambda m: m.index_fill(X(m), 1, _h(m, [4]), 1.), IndexError, r"index_fill_.*index 4 is out of"),
    ("index_fill_int32", lambda m: m.index_fill(X(m), 1, _h(m, [0]).int(), 1.), IndexError, "index_fill_.*int64"),
    ("index_fill_2d_index", lambda m: m.index_fill(X(m), 1, _h(m, [[0]]), 1.), RuntimeError,
     r"index_fill_.*shape \[1, 1\]"),
    ("index_fill_1d_value", lambda m: m.index_fill(X(m), 1, _h(m, [0]), _h(m, [1.])), RuntimeError,
     "0-dimensional value tensor"),
    ("index_fill_dim", lambda m: m.index_fill(X(m), 2, _h(m, [0]), 1.), IndexError,
     "index_fill_.*Dimension out of range"),
    ("index_copy_dtype", lambda m: m.index_copy(X(m), 1, _h(m, [0]), m.ones(3, 1)), RuntimeError,
     r"index_copy_.*same dtype.*Double.*Float"),
    ("index_copy_count", lambda m: m.index_copy(X(m), 1, _h(m, [0, 1]), X(m)[:, :3]), IndexError,
     r"index_copy_.*Number of indices \(2\).*\(3\)"),
    ("index_copy_slices", lambda m: m.index_copy(X(m), 1, _h(m, [0, 1]), X(m)[:2, :2]), RuntimeError,
     "index_copy_.*slice shapes"),
    ("index_copy_neg", lambda m: m.index_copy(X(m), 1, _h(m, [-1]), X(m)[:, :1]), IndexError, "index_copy_.*index -1"),
    ("index_copy_int32", lambda m: m.index_copy(X(m), 1, _h(m, [0]).int(), X(m)[:, :1]), RuntimeError,
     "index_copy_.*long tensor.*Int"),
    ("index_reduce_sum", lambda m: m.index_reduce(X(m), 1, _h(m, [0]), X(m)[:, :1], "sum"), RuntimeError,
     "index_reduce.*prod, mean, amax or amin but got sum"),
    ("index_reduce_dtype", lambda m: m.index_reduce(X(m), 1, _h(m, [0]), X(m)[:, :1].float(), "amax"), RuntimeError,
     r"index_reduce_.*Double.*Float.*same scalar type"),
    ("index_reduce_oob", lambda m: m.index_reduce(X(m), 1, _h(m, [9]), X(m)[:, :1], "amax"), IndexError,
     "index_reduce_.*index out of range"),
    ("index_reduce_count", lambda m: m.index_reduce(X(m), 1, _h(m, [0]), X(m)[:, :2], "amax"), RuntimeError,
     r"index_reduce_.*Number of indices \(1\)"),
    ("scatter_reduce_reduce", lambda m: m.scatter_reduce(X(m), 1, _h(m, IDX), X(m), "foo"), RuntimeError,
     "scatter_reduce.*sum, prod, mean, amax or amin, got foo"),
    ("scatter_reduce_dtype", lambda m: m.scatter_reduce(X(m), 1, _h(m, IDX), X(m).float(), "sum"), RuntimeError,
     "scatter_reduce.*dtype"),
    ("scatter_reduce_oob", lambda m: m.scatter_reduce(X(m), 1, _h(m, IDX) + 2, X(m), "sum"), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    ("scatter_reduce_index_ndim", lambda m: m.scatter_reduce(X(m), 1, _h(m, IDX[0]), X(m), "sum"), RuntimeError,
     "scatter_reduce.*same number of dimensions"),
    ("scatter_reduce_bool_mean", lambda m: m.scatter_reduce(m.zeros(1, 2, dtype=m.bool), 1, _h(m, [[0]]),
                                                            m.ones(1, 1, dtype=m.bool), "mean"), NotImplementedError,
     "mean.*bool|Bool"),
    ("masked_scatter_few", lambda m: m.masked_scatter(X(m), _h(m, A > -2), m.ones(3, dtype=m.float64)), RuntimeError,
     "masked_scatter.*source.*(<|fewer)"),
    ("masked_scatter_dtype", lambda m: m.masked_scatter(X(m), _h(m, A > 0), m.ones(12)), RuntimeError,
     "masked_scatter.*same dtypes.*Double and Float"),
    ("masked_scatter_uint8", lambda m: m.masked_scatter(X(m), _h(m, A > 0).byte(), X(m)), RuntimeError,
     "boolean masks.*Byte"),
    ("masked_scatter_shape", lambda m: m.masked_scatter(m.zeros(3), _h(m, [True, False]), m.ones(3)), RuntimeError,
     r"masked_scatter.*\[2\].*\[3\]"),
    ("masked_scatter_inplace_grow", lambda m: m.zeros(3).masked_scatter_(_h(m, [[True, False, True]] * 2), m.ones(5)),
     RuntimeError, r"masked_scatter_.*\[3\]"),
    ("put_count", lambda m: m.put(X(m), _h(m, [0, 1]), m.ones(3, dtype=m.float64)), IndexError,
     "put_.*same number of elements.*source.numel.. = 3, index.numel.. = 2"),
    ("put_oob", lambda m: m.put(X(m), _h(m, [0, 12]), m.ones(2, dtype=m.float64)), IndexError,
     "put_.*index 12 on a tensor of 12"),
    ("put_int32", lambda m: m.put(X(m), _h(m, [0]).int(), m.ones(1, dtype=m.float64)), RuntimeError,
     "put_.*long tensor.*Int"),
    ("put_dtype", lambda m: m.put(X(m), _h(m, [0]), m.ones(1)), RuntimeError, "put_.*same dtype.*Double.*Float"),
    ("index_put_tensor", lambda m: m.index_put(X(m), _h(m, [0]), _h(m, 1.)), TypeError,
     "index_put.*indices.*tuple of Tensors"),
    ("index_put_none", lambda m: m.index_put(X(m), (None, _h(m, [0])), _h(m, 1.)), TypeError,
     "index_put.*element 0.*NoneType"),
    ("index_put_dtype", lambda m: m.index_put(X(m), (_h(m, [0]),), m.tensor(1.)), RuntimeError,
     "Index put requires the source and destination dtypes match, got Double for the destination and Float"),
    ("index_put_shape", lambda m: m.index_put(X(m), (_h(m, [0, 1]),), _h(m, B[0, :2])), RuntimeError,
     r"shape mismatch: value tensor of shape \[2\] cannot be broadcast to indexing result of shape \[2, 4\]"),
    ("index_put_oob", lambda m: m.index_put(X(m), (_h(m, [0, 5]),), _h(m, B[0])), IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    ("index_put_float_index", lambda m: m.index_put(X(m), (_h(m, [0.]),), _h(m, B[0])), IndexError,
     "tensors used as indices must be long, int, byte or bool"),
    ("index_put_too_many", lambda m: m.index_put(X(m), (_h(m, [0]),) * 3, _h(m, B[0])), IndexError,
     "too many indices for tensor of dimension 2"),
    ("unfold_size", lambda m: m.arange(10.).unfold(0, 11, 1), RuntimeError,
     "unfold.*maximum size for tensor at dimension 0 is 10 but size is 11"),
    ("unfold_step", lambda m: m.arange(10.).unfold(0, 2, 0), RuntimeError, "unfold.*step is 0 but must be > 0"),
    ("unfold_neg_size", lambda m: m.arange(10.).unfold(0, -1, 1), RuntimeError, "unfold.*size is -1 but must be >= 0"),
    ("unfold_dim", lambda m: m.arange(10.).unfold(1, 2, 1), IndexError, "unfold.*Dimension out of range"),
    ("as_strided_oob", lambda m: m.as_strided(m.arange(10.), (3, 3), (4, 1)), RuntimeError,
     r"setStorage: sizes \[3, 3\], strides \[4, 1\], storage offset 0, and itemsize 4 requiring a storage size of 44 "
     r"are out of bounds for storage of size 40"),
    ("as_strided_neg_stride", lambda m: m.as_strided(m.arange(10.), (3,), (-1,)), RuntimeError,
     r"as_strided: Negative strides are not supported at the moment, got strides: \[-1\]"),
    ("as_strided_lengths", lambda m: m.as_strided(m.arange(10.), (3, 3), (1,)), RuntimeError,
     "mismatch in length of strides and shape"),
    ("as_strided_offset", lambda m: m.as_strided(m.arange(10.), (3,), (1,), -1), RuntimeError,
     "invalid storage offset -1"),
    ("stride_dim", lambda m: m.zeros(2, 3).stride(2), IndexError, "stride.*Dimension out of range"),
    ("select_oob", lambda m: m.select(X(m), 1, 4), IndexError,
     r"select\(\): index 4 out of range for tensor of size \[3, 4\] at dimension 1"),
    ("select_0d", lambda m: m.select(m.tensor(1.), 0, 0), IndexError,
     r"select\(\) cannot be applied to a 0-dim tensor"),
    ("select_scatter_shape", lambda m: m.select_scatter(X(m), m.ones(4), 1, 0), RuntimeError,
     r"select_scatter.*src size = \[4\], slice size = \[3\]"),
    ("slice_scatter_shape", lambda m: m.slice_scatter(X(m), m.ones(3, 3), 0, 0, 4, 2), RuntimeError,
     r"slice_scatter.*src size = \[3, 3\], slice size = \[2, 4\]"),
    ("slice_scatter_step", lambda m: m.slice_scatter(X(m), X(m), 0, 0, 4, 0), RuntimeError,
     "slice_scatter.*slice step must be positive"),
    ("diagonal_scatter_shape", lambda m: m.diagonal_scatter(X(m), m.ones(4), 0), RuntimeError,
     r"diagonal_scatter.*src size = \[4\], slice size = \[3\]"),
    ("diagonal_scatter_dims", lambda m: m.diagonal_scatter(X(m), m.ones(4), 0, 1, 1), RuntimeError,
     "diagonal dimensions cannot be identical 1, 1"),
    ("tensor_split_0", lambda m: m.tensor_split(m.arange(4), 0), RuntimeError,
     "number of sections must be larger than 0"),
    ("tensor_split_float", lambda m: m.tensor_split(m.arange(4), m.tensor([1.])), RuntimeError,
     "tensor_split expected tensor_indices_or_sections to have dtype of long, but got Float"),
    ("tensor_split_2d", lambda m: m.tensor_split(m.arange(4), m.tensor([[1]])), RuntimeError,
     "zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims"),
    ("tensor_split_0d", lambda m: m.tensor_split(m.tensor(1.), 2), RuntimeError,
     "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"),
    ("hsplit_uneven", lambda m: m.hsplit(m.zeros(2, 3), 2), RuntimeError,
     "torch.hsplit attempted to split along dimension 1, but the size of the dimension 3 is not divisible by the "
     "split_size 2"),
    ("vsplit_1d", lambda m: m.vsplit(m.zeros(4), 2), RuntimeError,
     "torch.vsplit requires a tensor with at least 2 dim"),
    ("dsplit_2d", lambda m: m.dsplit(m.zeros(2, 4), 2), RuntimeError, "torch.dsplit requires a tensor with at least 3"),
    ("split_with_sizes_sum", lambda m: m.split_with_sizes(m.zeros(5, 2), [2, 2]), RuntimeError,
     "split_with_sizes expects split_sizes to sum exactly to 5"),
    ("column_stack_empty", lambda m: m.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
    ("block_diag_3d", lambda m: m.block_diag(m.zeros(1, 1, 1)), RuntimeError,
     "block_diag: Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions"),
    ("cartesian_prod_2d", lambda m: m.cartesian_prod(m.zeros(2, 2)), RuntimeError, r"Expect a 1D vector.*\[2, 2\]"),
    ("cartesian_prod_dtypes", lambda m: m.cartesian_prod(m.tensor([1, 2]), m.tensor([3.])), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    ("combinations_neg", lambda m: m.combinations(m.tensor([1, 2]), -1), RuntimeError,
     "Expect a non-negative number, but got -1"),
    ("combinations_2d", lambda m: m.combinations(m.zeros(2, 2)), RuntimeError, r"Expect a 1D vector.*\[2, 2\]"),
    ("meshgrid_2d", lambda m: m.meshgrid(m.zeros(2, 2), indexing="ij"), RuntimeError,
     "meshgrid: Expected 0D or 1D tensor"),
    ("meshgrid_indexing", lambda m: m.meshgrid(m.zeros(2), indexing="foo"), RuntimeError,
     'indexing must be one of "xy" or "ij", but received: foo'),
    ("meshgrid_empty", lambda m: m.meshgrid(indexing="ij"), RuntimeError, "meshgrid expects a non-empty TensorList"),
    ("rot90_1d", lambda m: m.rot90(m.zeros(3)), RuntimeError, "expected total dims >= 2, but got total dims = 1"),
    ("rot90_dims", lambda m: m.rot90(m.zeros(2, 2), 1, [0, 1, 2]), RuntimeError,
     "expected total rotation dims == 2, but got dims = 3"),
    ("rot90_same", lambda m: m.rot90(m.zeros(2, 2), 1, [0, -2]), RuntimeError,
     "expected rotation dims to be different, but got dim0 = 0 and dim1 = -2"),
    ("narrow_copy_oob", lambda m: m.narrow_copy(m.arange(5.), 0, 4, 2), RuntimeError,
     r"start \(4\) \+ length \(2\) exceeds dimension size \(5\)"),
    ("sum_to_size", lambda m: m.ones(2, 3).sum_to_size(2), RuntimeError,
     r"size \{\[2\]\} is not expandable to size \{\[2, 3\]\}"),
    ("repeat_interleave_neg", lambda m: m.repeat_interleave(X(m), -1), RuntimeError, "Repeats must be non-negative"),
    ("repeat_interleave_neg_tensor", lambda m: m.repeat_interleave(X(m), m.tensor([1, -1, 2, 1]), dim=1),
     RuntimeError, "repeats can not be negative"),
    ("repeat_interleave_len", lambda m: m.repeat_interleave(X(m), m.tensor([1, 2]), dim=1), RuntimeError,
     r"repeats must have the same size as input along dim, but got repeats.size\(0\) = 2 and input.size\(1\) = 4"),
    ("repeat_interleave_float", lambda m: m.repeat_interleave(X(m), m.tensor([1., 2., 1.]), dim=0),
     NotImplementedError,
     "repeat"),
    ("repeat_interleave_2d", lambda m: m.repeat_interleave(X(m), m.tensor([[1, 2]]), dim=0), RuntimeError,
     "repeats must be 0-dim or 1-dim tensor"),
    ("repeat_interleave_output_size", lambda m: m.repeat_interleave(X(m), 2, dim=1, output_size=5), RuntimeError,
     "Invalid output_size, expected 8 but got 5"),
    ("repeat_interleave_counts_2d", lambda m: m.repeat_interleave(m.tensor([[2, 1]])), RuntimeError,
     "repeat_interleave only accept 1D vector as repeat"),
    ("tril_indices_dtype", lambda m: m.tril_indices(3, 3, dtype=m.float32), NotImplementedError,
     "tril_indices.*not implemented for 'Float'"),
    ("tril_indices_row", lambda m: m.tril_indices(-1, 3), RuntimeError, "row must be non-negative"),
    ("unravel_float", lambda m: m.unravel_index(m.tensor(4.), (2, 3)), TypeError,
     "expected 'indices' to be integer dtype, but got .*float32"),
    ("unravel_neg_shape", lambda m: m.unravel_index(m.tensor(4), (-1, 3)), ValueError,
     r"'shape' cannot have negative values, but got \(-1, 3\)"),
    ("isin_scalars", lambda m: m.isin(1, 2), TypeError, "isin"),
    ("isin_bool", lambda m: m.isin(m.tensor([True]), m.tensor([True])), RuntimeError,
     "Unsupported input type encountered for isin.*: Bool"),
    ("vander_2d", lambda m: m.vander(m.zeros(2, 2)), RuntimeError, "x must be a one-dimensional tensor"),
    ("vander_N", lambda m: m.vander(m.zeros(2), -1), RuntimeError, "N must be non-negative"),
    ("fill_diagonal_1d", lambda m: m.zeros(2).fill_diagonal_(1), RuntimeError, "dimensions must larger than 1"),
    ("fill_diagonal_unequal", lambda m: m.zeros(2, 2, 3).fill_diagonal_(1), RuntimeError,
     "all dimensions of input must be of equal length"),
    ("aminmax_empty", lambda m: m.aminmax(m.zeros(0)), RuntimeError, "aminmax.*cannot compute aminmax over an empty"),
    ("aminmax_empty_dim", lambda m: m.aminmax(m.zeros(2, 0), dim=1), IndexError,
     "aminmax.*Expected reduction dim 1 to have non-zero size"),
    ("aminmax_positional_dim", lambda m: m.aminmax(m.zeros(2), 0), TypeError, "aminmax"),
    ("renorm_1d", lambda m: m.renorm(m.ones(3), 2, 0, 1), RuntimeError, "renorm: input needs at least 2 dimensions"),
    ("renorm_p", lambda m: m.renorm(X(m), 0, 0, 1), RuntimeError, "renorm: non-positive-norm not supported"),
    ("renorm_maxnorm", lambda m: m.renorm(X(m), 2, 0, -1), RuntimeError, "renorm: expected maxnorm to be >= 0"),
    ("renorm_int", lambda m: m.renorm(m.ones(2, 2, dtype=m.int64), 2, 0, 1), RuntimeError, "floating point"),
    ("tril__1d", lambda m: m.ones(3).tril_(), RuntimeError, "tril.*at least 2 dimensions"),
    ("lshift_float", lambda m: m.bitwise_left_shift(m.tensor([1.5]), 1), NotImplementedError,
     "lshift_cpu.*not implemented for 'Float'"),
    ("rshift_op_float", lambda m: m.tensor([4.]) >> 1, NotImplementedError, "rshift_cpu"),
    ("fill_1d_value", lambda m: m.fill(X(m), m.tensor([3.])), RuntimeError,
     "fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions"),
    ("scalar_tensor_str", lambda m: m.scalar_tensor("a"), TypeError, "scalar_tensor.*must be Number, not str"),
    ("empty_strided_lengths", lambda m: m.empty_strided((2, 3), (1,)), RuntimeError,
     r"dimensionality of sizes \(2\) must match dimensionality of strides \(1\)"),
    ("frombuffer_length", lambda m: m.frombuffer(b"\x01\x02\x03", dtype=m.int16), ValueError,
     r"buffer length \(3 bytes\) after offset \(0 bytes\) must be a multiple of element size \(2\)"),
    ("frombuffer_offset", lambda m: m.frombuffer(b"\x01\x02", dtype=m.uint8, offset=5), ValueError,
     r"offset \(5 bytes\) must be non-negative and no greater than buffer length \(2 bytes\) minus 1"),
    ("frombuffer_count", lambda m: m.frombuffer(b"\x01\x02", dtype=m.uint8, count=3), ValueError,
     r"requested buffer length \(3 \* 1 bytes\)"),
    ("frombuffer_empty", lambda m: m.frombuffer(b"", dtype=m.uint8), ValueError,
     r"both buffer length \(0\) and count \(-1\) must not be 0"),
    ("frombuffer_list", lambda m: m.frombuffer([1, 2], dtype=m.uint8), ValueError, "buffer protocol"),
    ("H_1d", lambda m: m.zeros(3).H, RuntimeError, "tensor.H is only supported on matrices"),
    ("H_3d", lambda m: m.zeros(2, 2, 2).H, RuntimeError, "consider using tensor.mH"),
    ("mH_1d", lambda m: m.zeros(3).mH, RuntimeError, "tensor.mH is only supported on matrices or batches"),
    ("adjoint_1d", lambda m: m.zeros(3).adjoint(), RuntimeError, r"tensor.adjoint\(\) is only supported on matrices"),
    ("is_nonzero_many", lambda m: m.tensor([1., 2.]).is_nonzero(), RuntimeError,
     "Boolean value of Tensor with more than one value is ambiguous"),
    ("is_nonzero_empty", lambda m: m.tensor([]).is_nonzero(), RuntimeError,
     "Boolean value of Tensor with no values is ambiguous"),
    ("is_same_size_list", lambda m: m.zeros(2).is_same_size([2]), TypeError, "is_same_size.*other.*list"),
    ("is_floating_point_float", lambda m: m.is_floating_point(1.0), TypeError, "is_floating_point.*float"),
    ("dim_order_ambiguous", lambda m: m.zeros(3, 1).dim_order(ambiguity_check=True), RuntimeError,
     "does not have unique dim order"),
    ("map_bad_broadcast", lambda m: m.ones(2).map_(m.ones(2, 1), max), RuntimeError, r"map_.*\[2, 1\]"),
    ("map_not_tensor", lambda m: m.ones(2).map_(3, max), TypeError, "map_.*other.*int"),
    ("unsqueeze__leaf", lambda m: m.zeros(2, requires_grad=True).unsqueeze_(0), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation"),
    ("gt__leaf", lambda m: m.zeros(2, requires_grad=True).gt_(0), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors(case):
    _, fn, exc, match = case
    raises_like_torch(fn, ember, exc, match)
    if torch is not None:
        raises_like_torch(fn, torch, exc)  # the same exception type in PyTorch


def test_errors_name_the_function_on_bad_types():
    with pytest.raises(TypeError, match=r"index_fill\(\): argument 'input' must be Tensor, not list"):
        ember.index_fill([1.0], 0, ember.tensor([0]), 1.0)
    with pytest.raises(TypeError, match=r"put_?\(\): argument 'index' must be Tensor, not list"):
        ember.put(ember.zeros(2), [0], ember.ones(1))
    with pytest.raises(TypeError, match=r"unfold\(\): argument 'size' must be int, not float"):
        ember.zeros(4).unfold(0, 2.0, 1)
