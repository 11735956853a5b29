"""Convolutions, unfold/fold, pad and interpolate (ember/ops/nn_conv.py, nn_fold.py, nn_pad.py, nn_interpolate.py)
and the conv layers (ember/nn/modules/conv.py): gradients (gradcheck + gradgradcheck), PyTorch parity in float64
and float32, layers with copied weights, errors."""
import math

import numpy as np
import pytest
from helpers import check_grad, compare_torch, leaf, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

# PyTorch warns that it copies the input for padding='same' with even kernels
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")
TF = torch.nn.functional if torch is not None else None
DTYPES = [np.float64, np.float32]


# ---------------------------------------------------------------------- conv2d
# (input shape, weight shape, bias, kwargs): stride, padding (int, pair, 'same' with even kernels, 'valid'),
# dilation, groups, no bias, unbatched input
CONV2D = [
    ((2, 3, 5, 6), (4, 3, 3, 3), True, {}),
    ((2, 3, 6, 5), (4, 3, 3, 2), True, dict(stride=2, padding=1)),
    ((1, 2, 7, 6), (3, 2, 2, 3), False, dict(stride=(2, 1), padding=(2, 0), dilation=(1, 2))),
    ((2, 4, 5, 5), (6, 2, 3, 3), True, dict(groups=2, padding=1)),
    ((1, 4, 5, 4), (4, 1, 2, 2), True, dict(groups=4, stride=(1, 2))),  # depthwise
    ((1, 2, 5, 6), (3, 2, 2, 4), True, dict(padding="same")),  # even kernels: extra row/column at the bottom/right
    ((1, 2, 6, 6), (2, 2, 2, 3), False, dict(padding="same", dilation=(3, 2))),
    ((1, 2, 5, 4), (3, 2, 3, 2), True, dict(padding="valid")),
    ((3, 5, 4), (2, 3, 2, 2), True, dict(padding=1)),  # unbatched (C, H, W)
    ((2, 3, 4, 4), (5, 3, 1, 1), True, {}),  # 1x1
]


def _fn(mod, name, kw):
    f = getattr(mod, name)
    return lambda *a: f(*a, **kw)


def _arrays(shapes, dtype=np.float64):
    """One random array per shape (seeds 1, 2, ...): an op's positional inputs."""
    return [rand(*s, seed=i, dtype=dtype) for i, s in enumerate(shapes, 1)]


@requires_torch
def test_conv2d_larger_and_noncontiguous():
    x = noncontig(rand(4, 6, 12, 11, seed=4))
    w = rand(8, 3, 3, 3, seed=5).transpose(0, 1, 3, 2)  # a non-contiguous weight too
    b = rand(8, seed=6)
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)
    compare_torch(_fn(F, "conv2d", kw), _fn(TF, "conv2d", kw), x, w, b)


@requires_torch
def test_conv2d_noncontiguous_without_padding():
    # no padding: the window view is taken on the strided input itself
    kw = dict(stride=2)
    compare_torch(_fn(F, "conv2d", kw), _fn(TF, "conv2d", kw), noncontig(rand(2, 4, 7, 6)), rand(3, 4, 3, 2, seed=2))
    compare_torch(_fn(F, "unfold", dict(kernel_size=2)), _fn(TF, "unfold", dict(kernel_size=2)), noncontig(rand(2, 3, 4, 5)))


@requires_torch
def test_empty_batch():
    x = ember.zeros(0, 4, 7, 6, requires_grad=True)
    w = ember.zeros(4, 2, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, padding=1, groups=2)
    assert y.shape == TF.conv2d(torch.zeros(0, 4, 7, 6), torch.zeros(4, 2, 3, 3), padding=1, groups=2).shape
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and not w.grad.numpy().any()
    assert F.conv_transpose2d(ember.zeros(0, 4, 3, 3), ember.zeros(4, 2, 3, 3)).shape == (0, 2, 5, 5)
    assert F.unfold(ember.zeros(0, 4, 7, 6), 2).shape == (0, 16, 30)
    assert F.fold(ember.zeros(0, 8, 30), (7, 6), 2).shape == (0, 2, 7, 6)


def test_conv2d_float32_stays_float32():
    x = ember.tensor(rand(2, 3, 6, 6, dtype=np.float32), requires_grad=True)
    w = ember.tensor(rand(4, 3, 3, 3, dtype=np.float32), requires_grad=True)
    b = ember.tensor(rand(4, dtype=np.float32), requires_grad=True)
    y = F.conv2d(x, w, b, padding=1)
    assert y.dtype == ember.float32
    (y * y).sum().backward()
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == ember.float32


def test_conv2d_retain_graph_second_backward():
    # the forward's saved window matrix is used by the first backward; a second one must recompute it
    x = ember.tensor(rand(2, 3, 5, 5), requires_grad=True)
    w = ember.tensor(rand(4, 3, 3, 3), requires_grad=True)
    y = F.conv2d(x, w, padding=1).sum()
    y.backward(retain_graph=True)
    gx, gw = x.grad.numpy().copy(), w.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * gx)
    np.testing.assert_allclose(w.grad.numpy(), 2 * gw)


def test_conv2d_integer_inputs():
    x = ember.tensor(np.arange(2 * 5 * 5).reshape(1, 2, 5, 5))
    w = ember.tensor(np.ones((1, 2, 2, 2), np.int64))
    y = F.conv2d(x, w)
    assert y.dtype == ember.int64
    xs = x.numpy()
    assert y.numpy()[0, 0, 0, 0] == xs[0, :, :2, :2].sum()


@requires_torch
def test_conv2d_double_backward_through_weight_gradient():
    """d/dx of ‖∂L/∂w‖² runs ConvWeightGrad's own backward (create_graph)."""
    xa, wa = rand(1, 2, 5, 5, seed=7), rand(3, 2, 3, 3, seed=8)
    x, w = ember.tensor(xa, requires_grad=True), ember.tensor(wa, requires_grad=True)
    (gw,) = ember.autograd.grad(F.conv2d(x, w, padding=1, stride=2).pow(2).sum(), [w], create_graph=True)
    (gx,) = ember.autograd.grad(gw.pow(2).sum(), [x])
    tx, tw = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    (tgw,) = torch.autograd.grad(TF.conv2d(tx, tw, padding=1, stride=2).pow(2).sum(), [tw], create_graph=True)
    (tgx,) = torch.autograd.grad(tgw.pow(2).sum(), [tx])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-9, atol=1e-10)


# ---------------------------------------------------------------------- conv1d
CONV1D = [
    ((2, 3, 9), (4, 3, 3), True, {}),
    ((2, 4, 10), (6, 2, 2), False, dict(stride=2, padding=1, dilation=2, groups=2)),
    ((1, 2, 7), (3, 2, 4), True, dict(padding="same")),
    ((3, 8), (2, 3, 3), True, dict(padding="valid")),  # unbatched (C, L)
]


# ---------------------------------------------------------------------- transposed convolutions
CONVT2D = [
    ((2, 3, 4, 4), (3, 2, 3, 3), True, {}),
    ((1, 2, 3, 4), (2, 3, 3, 2), True, dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 3), (4, 1, 2, 3), False, dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2), groups=2)),
    ((1, 2, 3, 3), (2, 2, 3, 3), True, dict(stride=2, dilation=2, output_padding=1)),  # output_padding < dilation
    ((2, 3, 3), (2, 2, 2, 2), True, dict(stride=2)),  # unbatched
]

CONVT1D = [((2, 3, 5), (3, 2, 4), True, dict(stride=3, padding=1, output_padding=2, dilation=1))]


# ---------------------------------------------------------------------- unfold / fold
UNFOLD = [
    ((2, 3, 5, 4), dict(kernel_size=2)),
    ((1, 2, 6, 7), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))),
    ((2, 4, 4), dict(kernel_size=3, padding=1)),  # unbatched
]


FOLD = [
    ((2, 3 * 4, 12), dict(output_size=(4, 5), kernel_size=2)),
    ((1, 2 * 6, 20), dict(output_size=(6, 7), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))),
    ((2 * 9, 16), dict(output_size=4, kernel_size=3, padding=1)),  # unbatched
]


def test_fold_is_unfold_adjoint():
    x, c = rand(2, 3, 6, 5, seed=1), rand(2, 3 * 6, 15, seed=2)
    kw = dict(kernel_size=(3, 2), stride=(2, 1), padding=1, dilation=(1, 2))
    lhs = (F.unfold(ember.tensor(x), **kw).numpy() * c).sum()
    rhs = (x * F.fold(ember.tensor(c), (6, 5), **kw).numpy()).sum()
    assert math.isclose(lhs, rhs, rel_tol=1e-12)


# ---------------------------------------------------------------------- pad
PAD = [
    ((2, 3, 4, 5), (1, 2), "constant"),
    ((2, 3, 4, 5), (2, 1, 0, 3), "constant"),
    ((2, 3, 4, 5), (1, 0, 2, 1, 1, 1, 0, 2), "constant"),  # every dim
    ((2, 3, 4, 5), (-1, 2, 1, -2), "constant"),  # negative pads crop
    ((2, 3, 5), (2, 3), "reflect"),
    ((3, 5), (4, 1), "reflect"),  # unbatched 1-D
    ((2, 3, 4, 5), (3, 2, 1, 3), "reflect"),
    ((3, 4, 5), (1, 1, 2, 0), "reflect"),  # unbatched 2-D
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1), "reflect"),  # 3-D
    ((2, 3, 5), (-2, 3), "reflect"),
    ((2, 3, 5), (3, 4), "replicate"),
    ((2, 3, 4, 5), (2, 0, 3, 1), "replicate"),
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1), "replicate"),
    ((2, 3, 5), (2, 5), "circular"),
    ((2, 3, 4, 5), (1, 3, 4, 2), "circular"),
]


@requires_torch
def test_pad_constant_value_and_integers():
    compare_torch(lambda x: F.pad(x, (1, 2, 0, 1), value=-1.5), lambda x: TF.pad(x, (1, 2, 0, 1), value=-1.5),
                  rand(2, 3, 4, dtype=np.float32))
    xi = np.arange(12).reshape(3, 4)
    y = F.pad(ember.tensor(xi), (1, 1), value=7)
    assert y.dtype == ember.int64
    np.testing.assert_array_equal(y.numpy(), TF.pad(torch.tensor(xi), (1, 1), value=7).numpy())


# ---------------------------------------------------------------------- interpolate
INTERP = [
    ((2, 3, 4, 5), dict(size=(7, 3), mode="nearest")),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 6, 5), dict(scale_factor=(0.5, 1.5), mode="nearest")),
    ((1, 2, 5, 5), dict(scale_factor=1 / 3, mode="nearest")),
    ((1, 2, 4, 5), dict(size=(7, 9), mode="nearest-exact")),
    ((2, 3, 7), dict(size=12, mode="nearest")),  # 3-D
    ((2, 3, 4, 5), dict(size=(7, 3), mode="bilinear")),
    ((2, 3, 4, 5), dict(size=(7, 3), mode="bilinear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=False)),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=True)),
    ((1, 2, 6, 5), dict(scale_factor=(1.7, 0.6), mode="bilinear")),
    ((1, 2, 6, 5), dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)),
    ((1, 2, 4, 5), dict(size=(1, 1), mode="bilinear", align_corners=True)),
    ((2, 3, 7), dict(scale_factor=2.5, mode="linear")),
    ((2, 3, 7), dict(size=4, mode="linear", align_corners=True)),
]



# ---------------------------------------------------------------------- every functional op above: gradients, parity
def _conv_case(op, xs, ws, bias, kw):
    """A convolution case as (op, input shapes, kwargs): input, weight and, with bias, a bias over the output
    channels (weight.size(0); weight.size(1)·groups when transposed)."""
    out = ws[1] * kw.get("groups", 1) if op.startswith("conv_transpose") else ws[0]
    return op, (xs, ws) + (((out,),) if bias else ()), kw


# (op, shapes of its positional inputs, keyword arguments)
CASES = ([_conv_case(op, *c) for op, table in (("conv2d", CONV2D), ("conv1d", CONV1D), ("conv_transpose2d", CONVT2D),
                                              ("conv_transpose1d", CONVT1D)) for c in table]
         + [("unfold", (xs,), kw) for xs, kw in UNFOLD] + [("fold", (xs,), kw) for xs, kw in FOLD]
         + [("pad", (xs,), dict(pad=p, mode=mode)) for xs, p, mode in PAD]
         + [("interpolate", (xs,), kw) for xs, kw in INTERP])


@pytest.mark.parametrize("op, shapes, kw", CASES, ids=str)
def test_gradcheck(op, shapes, kw):
    check_grad(_fn(F, op, kw), *_arrays(shapes))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, shapes, kw", CASES, ids=str)
def test_torch_parity(op, shapes, kw, dtype):
    compare_torch(_fn(F, op, kw), _fn(TF, op, kw), *_arrays(shapes, dtype))


# ---------------------------------------------------------------------- layers
def _copy_from_torch(m, tm):
    m.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _layer_parity(m, tm, x, rtol=1e-7, atol=1e-9, **call):
    assert list(m.state_dict()) == list(tm.state_dict())
    assert repr(m) == repr(tm)
    _copy_from_torch(m, tm)
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    ey, ty = m(ex, **call), tm(tx, **call)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
    c = np.random.default_rng(0).standard_normal(ey.shape).astype(x.dtype)
    ey.backward(ember.tensor(c))
    ty.backward(torch.tensor(c))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    for (name, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


LAYERS = [
    ("Conv2d", (3, 4, 3), {}, (2, 3, 6, 5)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=2, padding=(1, 2), dilation=(2, 1), groups=2, bias=False), (2, 4, 7, 6)),
    ("Conv2d", (2, 3, 4), dict(padding="same"), (1, 2, 5, 6)),
    ("Conv2d", (2, 3, 3), dict(padding=1, padding_mode="reflect"), (1, 2, 5, 6)),
    ("Conv2d", (2, 3, 3), dict(padding=(2, 1), padding_mode="replicate"), (1, 2, 5, 6)),
    ("Conv2d", (2, 3, 3), dict(padding=(1, 2), padding_mode="circular", stride=2), (2, 5, 6)),
    ("Conv2d", (2, 3, 4), dict(padding="same", padding_mode="reflect"), (1, 2, 5, 6)),
    ("Conv1d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 9)),
    ("Conv1d", (2, 4, 2), dict(padding="same", padding_mode="circular", groups=2), (2, 2, 7)),
    ("ConvTranspose2d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1), (2, 3, 4, 5)),
    ("ConvTranspose2d", (4, 2, (2, 3)), dict(groups=2, dilation=2, bias=False), (4, 3, 3)),
    ("ConvTranspose1d", (3, 2, 3), dict(stride=3, padding=1), (2, 3, 5)),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, args, kw, xs", LAYERS, ids=str)
def test_layer_parity(name, args, kw, xs, dtype):
    m, tm = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    if dtype == np.float64:
        m, tm = m.double(), tm.double()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    _layer_parity(m, tm, rand(*xs, dtype=dtype), **tol)


@requires_torch
def test_conv_transpose2d_output_size():
    m, tm = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    _layer_parity(m, tm, rand(1, 3, 4, 4, dtype=np.float32), rtol=1e-4, atol=1e-5, output_size=(8, 8))
    assert m(ember.zeros(1, 3, 4, 4), output_size=[1, 2, 7, 8]).shape == (1, 2, 7, 8)
    with pytest.raises(ValueError, match=r"requested an output size of \[9, 9\], but valid sizes range from \[7, 7\] "
                                         r"to \[8, 8\]"):
        m(ember.zeros(1, 3, 4, 4), output_size=(9, 9))


@requires_torch
@pytest.mark.parametrize("fn, xs, ws, kw", [
    ("conv_transpose1d", (1, 2, 2), (2, 1, 1), dict(groups=2, padding=1)),  # output length exactly 0
    ("conv_transpose1d", (2, 3, 1), (3, 2, 1), dict(padding=0, stride=2)),  # output length 1 (the smallest)
    ("conv_transpose2d", (1, 2, 2, 3), (2, 3, 1, 1), dict(padding=(1, 0))),  # (0, 3)
    ("conv_transpose2d", (1, 2, 3, 2), (2, 2, 3, 1), dict(padding=(0, 1), dilation=2)),  # (7, 0)
    ("conv_transpose2d", (2, 4, 1, 1), (4, 1, 1, 1), dict(padding=1, stride=3, output_padding=1, groups=4)),  # (0, 0)
])
def test_conv_transpose_empty_output(fn, xs, ws, kw):
    """An output size of exactly 0 is an empty result (forward and backward, zero gradients), as PyTorch's
    oneDNN kernels give (float32 with a batch or groups > 1); its reference kernels (float64, or N = G = 1)
    raise "Output size is too small" instead, where ember still returns the empty result."""
    for dtype in DTYPES:
        arrays = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype), rand(ws[1] * kw.get("groups", 1), dtype=dtype)
        try:
            getattr(TF, fn)(*[torch.from_numpy(a) for a in arrays], **kw)
        except RuntimeError as exc:
            assert "too small" in str(exc)
            leaves = [leaf(a) for a in arrays]
            y = getattr(F, fn)(*leaves, **kw)
            assert y.numel() == 0 and y.dtype == leaves[0].dtype and y.device == leaves[0].device
            y.sum().backward()
            assert all(t.grad.shape == t.shape and not t.grad.cpu().numpy().any() for t in leaves)
            continue
        compare_torch(lambda x, w, b: getattr(F, fn)(x, w, b, **kw), lambda x, w, b: getattr(TF, fn)(x, w, b, **kw),
                      *arrays)
    # Which kernel torch picks (and so whether it raises) depends on its build and thread settings (a
    # subprocess under CI raised where this machine compared): the ember side is checked either way.


def test_conv_transpose_negative_output_raises():
    with pytest.raises(RuntimeError, match=r"conv_transpose1d.*output size \[-1\] is too small"):
        F.conv_transpose1d(ember.ones(1, 2, 1), ember.ones(2, 1, 1), padding=1)


@pytest.mark.parametrize("layer, fan_in", [(lambda: nn.Conv2d(6, 8, (3, 2), groups=2), 3 * 3 * 2),
                                           (lambda: nn.Conv1d(5, 4, 4), 5 * 4),
                                           (lambda: nn.ConvTranspose2d(4, 6, 3, groups=2), 3 * 3 * 3)])
def test_default_init_bounds(layer, fan_in):
    ember.manual_seed(0)
    ws, bs = [], []
    for _ in range(20):
        m = layer()
        ws.append(m.weight.detach().numpy().ravel())
        bs.append(m.bias.detach().numpy().ravel())
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=√5) on fan_in; the bias uses the same bound
    for v in (np.concatenate(ws), np.concatenate(bs)):
        assert v.dtype == np.float32
        assert np.abs(v).max() <= bound
        assert np.abs(v).max() > 0.9 * bound  # uniform over the whole range, not a narrower one
        assert abs(v.mean()) < 0.1 * bound


def test_layer_bias_false_and_attributes():
    m = nn.Conv2d(4, 6, 3, stride=2, padding="valid", groups=2, bias=False)
    assert m.bias is None and list(m.state_dict()) == ["weight"]
    assert m.weight.shape == (6, 2, 3, 3) and m.kernel_size == (3, 3) and m.stride == (2, 2) and m.padding == "valid"
    t = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert t.weight.shape == (4, 3, 3, 3) and t.transposed and t.output_padding == (0, 0)
    assert nn.Conv1d(2, 3, 5).weight.shape == (3, 2, 5)


# ---------------------------------------------------------------------- bad inputs
def _t(*shape):
    return ember.zeros(*shape)


def test_conv2d_wrong_channel_count_names_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"conv2d\(\).*weight of size \[16, 3, 3, 3\].*input\[1, 4, 5, 5\] to have 3 "
                                           r"channels, but got 4"):
        F.conv2d(_t(1, 4, 5, 5), _t(16, 3, 3, 3))


def test_layer_wrong_channel_count_names_layer_and_shapes():
    with pytest.raises(RuntimeError, match=r"Conv2d\(3, 16, kernel_size=\(3, 3\).*expected input of shape \(N, 3, H, W\).*"
                                           r"got input of shape \[2, 4, 8, 8\]"):
        nn.Conv2d(3, 16, 3)(_t(2, 4, 8, 8))
    with pytest.raises(RuntimeError, match=r"Conv1d\(3, 2.*\(N, 3, L\).*got input of shape \[2, 3, 4, 8\]"):
        nn.Conv1d(3, 2, 3)(_t(2, 3, 4, 8))
    with pytest.raises(RuntimeError, match=r"ConvTranspose2d\(3, 2.*got input of shape \[1, 2, 4, 4\]"):
        nn.ConvTranspose2d(3, 2, 3)(_t(1, 2, 4, 4))


def test_kernel_larger_than_padded_input():
    with pytest.raises(RuntimeError, match=r"conv2d\(\): Calculated padded input size per channel: \(4 x 3\)\. Kernel "
                                           r"size: \(5 x 5\)"):
        F.conv2d(_t(1, 2, 2, 1), _t(3, 2, 5, 5), padding=1)
    with pytest.raises(RuntimeError, match=r"Kernel size: \(5 x 5\)"):  # dilation counts: 2·(3-1)+1
        F.conv2d(_t(1, 2, 4, 4), _t(3, 2, 3, 3), dilation=2)


def test_groups_not_dividing_channels():
    with pytest.raises(RuntimeError, match=r"groups=2, expected weight to be divisible by 2 at dimension 0, but got "
                                           r"weight of size \[3, 1, 3, 3\]"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 1, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match=r"groups=2, weight of size \[4, 1, 3, 3\], expected input\[1, 3, 5, 5\] to "
                                           r"have 2 channels"):
        F.conv2d(_t(1, 3, 5, 5), _t(4, 1, 3, 3), groups=2)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 6, 3, groups=4)


def test_bad_padding():
    with pytest.raises(RuntimeError, match=r"conv2d\(\): Invalid padding string: 'full'"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), padding="full")
    with pytest.raises(ValueError, match=r"Invalid padding string 'full', should be one of"):
        nn.Conv2d(2, 3, 3, padding="full")
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), padding="same", stride=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(2, 3, 3, padding="same", stride=2)
    with pytest.raises(RuntimeError, match=r"negative padding is not supported"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), padding=-1)
    with pytest.raises(ValueError, match=r"padding_mode must be one of .*got padding_mode='mirror'"):
        nn.Conv2d(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match=r'Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect")


def test_conv_other_bad_arguments():
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input "
                                           r"of size: \[3, 5\]"):
        F.conv2d(_t(3, 5), _t(2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"conv2d\(\): non-positive stride"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), stride=0)
    with pytest.raises(RuntimeError, match=r"conv2d\(\): dilation should be greater than zero"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), dilation=(1, 0))
    with pytest.raises(RuntimeError, match=r"expected stride to be a single integer value or a list of 2 values"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), stride=(1, 2, 3))
    with pytest.raises(RuntimeError, match=r"expected bias to be 1-dimensional with 3 elements, but got bias of size "
                                           r"\[2\]"):
        F.conv2d(_t(1, 2, 5, 5), _t(3, 2, 3, 3), _t(2))
    with pytest.raises(RuntimeError, match=r"conv2d\(\): input \(ember.float64\) and weight \(ember.float32\) must have "
                                           r"the same dtype"):
        F.conv2d(_t(1, 2, 5, 5).double(), _t(3, 2, 3, 3))
    with pytest.raises(TypeError, match=r"conv2d\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        F.conv2d([[1.0]], _t(3, 2, 3, 3))
    with pytest.raises(RuntimeError, match=r"conv1d\(\): expected a 3-D weight"):
        F.conv1d(_t(1, 3, 5), _t(2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(_t(1, 3, 5, 5), _t(3, 2, 3, 3), output_padding=1)
    with pytest.raises(RuntimeError, match=r"transposed=1, .*expected input\[1, 4, 5, 5\] to have 3 channels"):
        F.conv_transpose2d(_t(1, 4, 5, 5), _t(3, 2, 3, 3))


def test_unfold_fold_bad_arguments():
    with pytest.raises(RuntimeError, match=r"unfold\(\): Given input with spatial size \(2, 2\), kernel_size=\(3, 3\)"):
        F.unfold(_t(1, 3, 2, 2), 3)
    with pytest.raises(RuntimeError, match=r"fold\(\): Given output_size=\(4, 4\).*calculated number of sliding blocks "
                                           r"2 \* 2 = 4, but got input.size\(2\)=5"):
        F.fold(_t(1, 27, 5), (4, 4), 3)
    with pytest.raises(RuntimeError, match=r"divisible by the product of kernel_size, but got input.size\(1\)=26"):
        F.fold(_t(1, 26, 4), (4, 4), 3)


def test_pad_bad_arguments():
    with pytest.raises(RuntimeError, match=r"Padding size should be less than the corresponding input dimension, but "
                                           r"got: padding \(3, 3\) at dimension 3 of input \[1, 1, 3, 3\]"):
        F.pad(_t(1, 1, 3, 3), (3, 3, 0, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(_t(1, 1, 3, 3), (1, 1, 1))
    with pytest.raises(RuntimeError, match="Padding length should be less than or equal to two times the input"):
        F.pad(_t(3), (1, 1, 1, 1))
    with pytest.raises(NotImplementedError, match=r"Padding size 4 is not supported for 2D input tensor"):
        F.pad(_t(3, 3), (1, 1, 1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode 'mirror'"):
        F.pad(_t(1, 1, 3), (1, 1), mode="mirror")
    with pytest.raises(RuntimeError, match="Padding mode 'replicate' doesn't take in value argument"):
        F.pad(_t(1, 1, 3), (1, 1), mode="replicate", value=2)
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(_t(1, 1, 3), (4, 0), mode="circular")
    with pytest.raises(RuntimeError, match="resulted in a negative output size"):
        F.pad(_t(1, 1, 3), (-2, -2))


def test_interpolate_bad_arguments():
    x = _t(1, 1, 3, 3)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=(4, 4), scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D input"):
        F.interpolate(_t(1, 3, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, mode="nearest", align_corners=True)
    with pytest.raises(NotImplementedError, match="'cubic'"):  # (bicubic is supported: tests/test_nn_spatial.py)
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(RuntimeError, match=r"output size \[0, 0\] must be positive"):
        F.interpolate(x, scale_factor=0.2)


# ---------------------------------------------------------------------- fast paths (nn_conv.py, windows.py internals)
from ember.ops import nn_conv as _nc  # noqa: E402
from ember.ops import windows as _windows  # noqa: E402

@pytest.fixture
def wide_any(monkeypatch):
    """Wide rows for any number of output channels (the cases below are small; the default takes them from 32)."""
    monkeypatch.setattr(_windows, "WIDE_MIN_OUT", 1)


# stride-1 convolutions whose input gradient (the convolution of the padded gradient with the flipped kernel)
# or whose no-grad forward takes the "wide rows" im2col; (input, weight, kwargs)
WIDE = [
    ((3, 2, 6, 12), (8, 2, 3, 3), dict(padding=1)),  # input gradient wide: K = 8·9 >= 8·2
    ((2, 4, 5, 16), (4, 4, 3, 3), dict(padding=2, dilation=(1, 2))),
    ((2, 2, 5, 12), (6, 2, 4, 4), dict(padding="same")),  # asymmetric padding (1, 2)
    ((2, 4, 6, 12), (8, 2, 3, 3), dict(padding=1, groups=2)),
    ((3, 2, 12), (8, 2, 3), dict(padding=1)),  # conv1d
]


@pytest.mark.parametrize("xs, ws, kw", WIDE, ids=str)
def test_wide_rows_cases_take_the_fast_path(monkeypatch, xs, ws, kw, wide_any):
    """The input gradient of each WIDE case builds its columns with wide rows (so the cases below test that path)."""
    monkeypatch.setattr(_nc, "FOLDED_MAX_PIXELS", 0)  # im2col (these maps are small enough for the folded GEMM)
    taken = []
    wide_rows = _nc.wide_rows
    monkeypatch.setattr(_nc, "wide_rows", lambda *a: taken.append(wide_rows(*a)) or taken[-1])
    op = "conv1d" if len(ws) == 3 else "conv2d"
    x = ember.tensor(rand(*xs, seed=1), requires_grad=True)
    getattr(F, op)(x, ember.tensor(rand(*ws, seed=2)), **kw).sum().backward()
    assert taken[-1] is True  # the last convolution run: the input gradient's


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs, ws, kw", WIDE, ids=str)
def test_wide_rows_match_torch(xs, ws, kw, dtype, monkeypatch, wide_any):
    monkeypatch.setattr(_nc, "FOLDED_MAX_PIXELS", 0)
    op = "conv1d" if len(ws) == 3 else "conv2d"
    x, w, b = rand(*xs, seed=1, dtype=dtype), rand(*ws, seed=2, dtype=dtype), rand(ws[0], seed=3, dtype=dtype)
    compare_torch(_fn(F, op, kw), _fn(TF, op, kw), x, w, b)
    with ember.no_grad():  # no columns kept for dw: the forward itself may take wide rows
        y = getattr(F, op)(ember.tensor(x), ember.tensor(w), ember.tensor(b), **kw)
    ty = getattr(TF, op)(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), **tol)


@pytest.mark.parametrize("xs, ws, kw", WIDE[:3], ids=str)
def test_wide_rows_gradcheck(xs, ws, kw, wide_any):
    op = "conv1d" if len(ws) == 3 else "conv2d"
    check_grad(_fn(F, op, kw), rand(*xs, seed=1), rand(*ws, seed=2))


@requires_torch
@pytest.mark.parametrize("kw", [dict(padding=3), dict(kernel_size=2, padding=2, dilation=1)], ids=str)
def test_input_gradient_padding_beyond_the_kernel(kw):
    """Stride 1 with padding > d·(k-1): the full-convolution form would crop; the col2im path computes it."""
    k = kw.pop("kernel_size", 3)
    compare_torch(_fn(F, "conv2d", kw), _fn(TF, "conv2d", kw), rand(2, 3, 5, 4, seed=1), rand(4, 3, k, k, seed=2))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_transpose_stride_1_with_output_padding(dtype):
    kw = dict(stride=1, dilation=2, padding=1, output_padding=1)  # output_padding < dilation: one more row/column
    compare_torch(_fn(F, "conv_transpose2d", kw), _fn(TF, "conv_transpose2d", kw),
                  rand(2, 3, 4, 5, seed=1, dtype=dtype), rand(3, 2, 3, 3, seed=2, dtype=dtype))
    if dtype == np.float64:  # double backward: the extra output rows/columns span no entry of the input
        check_grad(_fn(F, "conv_transpose2d", kw), rand(1, 2, 3, 4, seed=1), rand(2, 2, 3, 3, seed=2))


@requires_torch
@pytest.mark.parametrize("per_chunk", [1, 3])
@pytest.mark.parametrize("xs, ws, kw", [((7, 3, 6, 12), (8, 3, 3, 3), dict(padding=1)),
                                        ((7, 4, 6, 5), (6, 2, 3, 2), dict(stride=(2, 1), groups=2)),
                                        ((5, 1, 9, 9), (4, 1, 3, 3), dict(padding=1))], ids=str)
def test_chunked_columns_match_torch(monkeypatch, per_chunk, xs, ws, kw):
    """Columns built and multiplied `per_chunk` images at a time (the batch no multiple of it): forward, input
    and weight gradients (from the kept columns) equal PyTorch's; a second backward (columns rebuilt) the first's."""
    x, w, b = rand(*xs, seed=1), rand(*ws, seed=2), rand(ws[0], seed=3)
    out_hw = TF.conv2d(torch.tensor(x), torch.tensor(w), **kw).shape[2:]
    monkeypatch.setattr(_windows, "_CHUNK_BYTES", per_chunk * xs[1] * ws[2] * ws[3] * out_hw[0] * out_hw[1] * 8)
    compare_torch(_fn(F, "conv2d", kw), _fn(TF, "conv2d", kw), x, w, b)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    y = F.conv2d(ex, ew, ember.tensor(b), **kw)
    y.sum().backward(retain_graph=True)
    first = ew.grad.numpy().copy()
    ew.grad = None
    y.sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), first, rtol=1e-12)
    with ember.no_grad():
        y0 = F.conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), **kw)
    np.testing.assert_allclose(y0.numpy(), y.detach().numpy(), rtol=1e-12)


def test_wide_rows_equal_plain_columns(monkeypatch, wide_any):
    """The wide-rows forward (garbage columns cropped) gives the plain im2col forward's result; float32 stays
    float32."""
    x = rand(5, 8, 7, 12, seed=1, dtype=np.float32)
    w, b = rand(2, 8, 3, 3, seed=2, dtype=np.float32), rand(2, seed=3, dtype=np.float32)
    win = _windows.Win((3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    assert _windows.wide_rows(x.shape, win, (7, 12), 2)
    wide, _ = _nc._conv(x, w, b, win, 1)
    monkeypatch.setattr(_nc, "wide_rows", lambda *a: False)
    plain, _ = _nc._conv(x, w, b, win, 1)
    assert wide.dtype == np.float32 and wide.shape == (5, 2, 7, 12)
    np.testing.assert_allclose(wide, plain, rtol=1e-6, atol=1e-6)
