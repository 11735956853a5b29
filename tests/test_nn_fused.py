"""The fused Conv2d → ReLU → MaxPool2d op (ember/ops/nn_fused.py) and Sequential's fusion of those layers
(ember/nn/modules/_fusion.py): values and gradients against PyTorch's conv2d → relu → max_pool2d over a grid of
geometries (both column layouts, 2x2 tournament and general routing, image chunks), finite-difference gradcheck and
gradgradcheck, ties and NaN routed like PyTorch, the cases Sequential must leave unfused, retain_graph, frozen
parameters, no_grad, W3 training fused vs unfused, and errors. Under EMBER_TEST_DEVICE=cuda every ember tensor and
module is on the test device (helpers.DEVICE) and results are compared on the host."""
import itertools

import numpy as np
import pytest
from helpers import COMPILE, DEVICE, check_grad, host, leaf, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import backend
from ember.cli.models import build_model
from ember.nn.modules import _fusion
from ember.ops import nn_conv, nn_fused, windows
from ember.ops.nn_fused import conv2d_relu_max_pool2d

# PyTorch warns that it copies the input for padding='same' with even kernels
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")
TF = torch.nn.functional if torch is not None else None
FUSED = "ConvReluPoolBackward"
DTYPES = [np.float64, np.float32]


def dev(a: np.ndarray) -> ember.Tensor:
    """A constant tensor (cotangent, input without grad) on the test device."""
    return ember.from_numpy(a).to(DEVICE)


def _np(t) -> np.ndarray:
    """An ember or torch tensor's values on the host."""
    return host(t) if isinstance(t, ember.Tensor) else t.detach().numpy()


def _tol(dtype) -> dict:
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-10)


def _close(actual, expected, dtype, what="") -> None:
    """allclose with an absolute tolerance scaled to the expected values' size (float32 sums of many terms)."""
    expected = np.asarray(expected)
    t = _tol(dtype)
    scale = max(1.0, float(np.nanmax(np.abs(expected)))) if expected.size and not np.isnan(expected).all() else 1.0
    np.testing.assert_allclose(actual, expected, rtol=t["rtol"], atol=t["atol"] * scale, err_msg=what)


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _torch_chain(x, w, b, stride, padding, dilation, pool, order="relu_pool"):
    z = TF.conv2d(x, w, b, stride, padding, dilation)
    return TF.max_pool2d(TF.relu(z), pool) if order == "relu_pool" else TF.relu(TF.max_pool2d(z, pool))


def _ember_chain(x, w, b, stride, padding, dilation, pool, order="relu_pool"):
    """The unfused composition from ember's own layer-by-layer ops."""
    z = F.conv2d(x, w, b, stride, padding, dilation)
    return F.max_pool2d(F.relu(z), pool) if order == "relu_pool" else F.relu(F.max_pool2d(z, pool))


def _run(lib, fn, arrays, requires, cot_seed=7):
    """fn(*tensors) for arrays (None stays None) in ember or torch; backward with a random cotangent (seeded by the
    output's shape, so both libraries draw the same one). Returns the output and each input's gradient (or None)."""
    if lib == "ember":
        ts = [None if a is None else leaf(a, r) for a, r in zip(arrays, requires)]
    else:
        ts = [None if a is None else torch.tensor(a, requires_grad=r) for a, r in zip(arrays, requires)]
    out = fn(*ts)
    o = _np(out)
    if out.requires_grad:
        c = np.random.default_rng(cot_seed).standard_normal(o.shape).astype(o.dtype)
        out.backward(dev(c) if lib == "ember" else torch.from_numpy(c))
    grads = [None if t is None or t.grad is None else _np(t.grad).copy() for t in ts]
    return out, o, grads


def _compare(x, w, b, stride, padding, dilation, pool, dtype, requires=(True, True, True), order="relu_pool"):
    """Fused op vs PyTorch's composition: the output and every gradient."""
    arrays = [x.astype(dtype), w.astype(dtype), None if b is None else b.astype(dtype)]
    eo, e_val, e_grads = _run("ember", lambda *t: conv2d_relu_max_pool2d(*t, stride, padding, dilation, pool),
                              arrays, requires)
    to, t_val, t_grads = _run("torch", lambda *t: _torch_chain(*t, stride, padding, dilation, pool, order),
                              arrays, requires)
    assert e_val.shape == t_val.shape and e_val.dtype == t_val.dtype
    if eo.requires_grad:
        assert eo.grad_fn.name() == FUSED
    _close(e_val, t_val, dtype, "output")
    for name, eg, tg in zip(("input", "weight", "bias"), e_grads, t_grads):
        assert (eg is None) == (tg is None), name
        if tg is not None:
            assert eg.shape == tg.shape and eg.dtype == tg.dtype, name
            _close(eg, tg, dtype, f"gradient of {name}")
    return e_val, e_grads


def _in_size(out: int, k: int, s: int, d: int, p) -> int:
    """An input size giving a conv output of `out` (for 'same': out itself)."""
    if p == "same":
        return out
    p = 0 if p == "valid" else p
    return (out - 1) * s + d * (k - 1) + 1 - 2 * p


def _geometry(i, k, s, d, pad, pool):
    """(H, W) for case i: conv outputs of P·2 + r rows/columns, r cycling over 0 (whole windows), 1 and P - 1
    (the pool drops the last rows/columns); with stride 2 sometimes one extra input row/column the conv never
    reaches."""
    ph, pw = _pair(pool)
    rs = (0, 1, 2)
    hw = []
    for dim, p_ in ((0, ph), (1, pw)):
        r = min(rs[(i // (4, 7)[dim]) % 3], p_ - 1)
        out = 2 * p_ + r
        n = _in_size(out, k, s, d, pad)
        while n < 1:  # large padding on a small kernel: grow by whole windows
            out += p_
            n = _in_size(out, k, s, d, pad)
        hw.append(n + (s - 1) * ((i + dim) % 2))
    return tuple(hw)


# channels × kernel × stride × padding, with dilation, pool, bias and output parity cycling over the cases
GRID = []
for _i, (_c, _k, _s, _p) in enumerate(itertools.product((1, 3, 16), (1, 3, 5), (1, 2), (0, 1, 2, "same", "valid"))):
    if _p == "same" and _s == 2:  # PyTorch: padding='same' needs stride 1
        continue
    _d = (1, 2)[(_i // 5) % 2]
    _pool = (2, 3, (2, 3))[_i % 3]
    GRID.append((_c, _k, _s, _p, _d, _pool, _i % 4 != 3, _geometry(_i, _k, _s, _d, _p, _pool)))

# square/non-square extras: even kernels with 'same' (uneven padding), tuple stride/padding/dilation, pool (3, 2)
EXTRA = [
    ((2, 3, 8, 9), (3, 3, 2, 4), True, dict(stride=1, padding="same", dilation=(1, 2), pool=2)),
    ((2, 8, 9, 10), (3, 8, 4, 2), True, dict(stride=1, padding="same", dilation=1, pool=(3, 2))),
    ((2, 2, 11, 10), (3, 2, 3, 2), True, dict(stride=(2, 1), padding=(2, 1), dilation=(1, 2), pool=2)),
    ((1, 16, 7, 7), (4, 16, 2, 2), False, dict(stride=1, padding=(1, 0), dilation=1, pool=(2, 3))),
    ((2, 3, 6, 6), (2, 3, 3, 3), True, dict(stride=1, padding=1, dilation=1, pool=(1, 1))),  # identity pool
    ((2, 3, 9, 9), (2, 3, 3, 3), True, dict(stride=1, padding=1, dilation=1, pool=(9, 9))),  # one window: global max
    ((2, 3, 9, 7), (4, 3, 3, 3), True, dict(stride=2, padding=0, dilation=1, pool=(4, 1))),
]


def test_grid_covers_both_column_layouts_and_dropped_rows():
    last = {nn_fused._channels_last(c, _pair(k)[1]) for c, k, *_ in GRID}
    assert last == {True, False}
    dropped = whole = 0
    for c, k, s, p, d, pool, bias, (h, w) in GRID:
        win = nn_conv.conv_win("conv2d", (h, w), (k, k), s, p, d)
        oh, ow = win.out((h, w))
        ph, pw = _pair(pool)
        assert oh >= ph and ow >= pw
        dropped += oh % ph != 0 and ow % pw != 0
        whole += oh % ph == 0 and ow % pw == 0
    assert dropped >= 10 and whole >= 10


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("c,k,s,p,d,pool,bias,hw", GRID,
                         ids=[f"C{c}-k{k}-s{s}-p{p}-d{d}-P{pool}-{'b' if b else 'nob'}-{hw[0]}x{hw[1]}"
                              for c, k, s, p, d, pool, b, hw in GRID])
def test_fused_matches_pytorch_grid(c, k, s, p, d, pool, bias, hw, dtype):
    n = 2 if c < 16 else 1
    x = rand(n, c, *hw, seed=1)
    w = rand(3, c, k, k, seed=2)
    b = rand(3, seed=3) if bias else None
    _compare(x, w, b, s, p, d, pool, dtype)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("xs,ws,bias,kw", EXTRA, ids=[str(e[3]) for e in EXTRA])
def test_fused_matches_pytorch_extra_geometries(xs, ws, bias, kw, dtype):
    x, w = rand(*xs, seed=4), rand(*ws, seed=5)
    b = rand(ws[0], seed=6) if bias else None
    _compare(x, w, b, kw["stride"], kw["padding"], kw["dilation"], kw["pool"], dtype)


@requires_torch
@pytest.mark.parametrize("order", ["relu_pool", "pool_relu"])
def test_fused_matches_both_pytorch_orders(order):
    # relu(max_pool(z)) == max_pool(relu(z)), and the gradients agree too
    _compare(rand(2, 3, 9, 8, seed=8), rand(4, 3, 3, 3, seed=9), rand(4, seed=10), 1, 1, 1, 2, np.float64,
             order=order)


@requires_torch
def test_fused_noncontiguous_input_and_weight():
    x = noncontig(rand(2, 16, 7, 9, seed=11))  # channel-last columns
    w = rand(4, 16, 3, 3, seed=12).transpose(0, 1, 3, 2)
    _compare(x, w, rand(4, seed=13), 1, 1, 1, 2, np.float64)
    x = noncontig(rand(2, 3, 9, 7, seed=14))  # channel-first columns
    _compare(x, rand(4, 3, 3, 3, seed=15).transpose(0, 1, 3, 2), None, 2, 1, 1, (2, 3), np.float64)


# ---------------------------------------------------------------------- image chunks
def _per_image_bytes(c, k, pool, q, itemsize) -> int:
    ph, pw = _pair(pool)
    return c * k * k * ph * pw * q[0] * q[1] * itemsize


CHUNKED = [  # (C, k, stride, padding, pool, H, W): channel-first/last, tournament/general, stride 1 (_input_grad)/2
    (3, 3, 1, 1, 2, 8, 9),
    (16, 3, 1, 1, 2, 7, 8),
    (3, 3, 2, 1, (2, 3), 11, 13),
    (16, 1, 1, 0, 3, 7, 6),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("images_per_chunk", [1, 2])
@pytest.mark.parametrize("requires", [(True, True, True), (True, False, True), (False, True, False)],
                         ids=["all", "frozen-weight", "weight-only"])
@pytest.mark.parametrize("c,k,s,p,pool,h,w", CHUNKED, ids=[str(c) for c in CHUNKED])
def test_fused_many_image_chunks(monkeypatch, c, k, s, p, pool, h, w, requires, images_per_chunk, dtype):
    n = 5  # chunks of 1 (five) or of 2 (2, 2, 1: a short last chunk)
    win = nn_conv.conv_win("conv2d", (h, w), (k, k), s, p, 1)
    oh, ow = win.out((h, w))
    ph, pw = _pair(pool)
    per = _per_image_bytes(c, k, pool, (oh // ph, ow // pw), np.dtype(dtype).itemsize)
    monkeypatch.setattr(windows, "_CHUNK_BYTES", per * images_per_chunk)
    assert windows.chunk(n, per) == images_per_chunk
    x, wt, b = rand(n, c, h, w, seed=16), rand(3, c, k, k, seed=17), rand(3, seed=18)
    val, grads = _compare(x, wt, b, s, p, 1, pool, dtype, requires=requires)
    # the same as one chunk holding all images
    monkeypatch.setattr(windows, "_CHUNK_BYTES", 1 << 30)
    _, one, one_grads = _run("ember", lambda *t: conv2d_relu_max_pool2d(*t, s, p, 1, pool),
                             [x.astype(dtype), wt.astype(dtype), b.astype(dtype)], requires)
    _close(val, one, dtype)
    for g, g1 in zip(grads, one_grads):
        assert (g is None) == (g1 is None)
        if g is not None:
            _close(g, g1, dtype)


# ---------------------------------------------------------------------- finite differences
GRADCHECK = [  # (x shape, w shape, bias, stride, padding, dilation, pool)
    ((1, 2, 5, 5), (2, 2, 2, 2), True, 1, 0, 1, 2),  # tournament, stride-1 input gradient
    ((2, 2, 5, 6), (2, 2, 3, 3), True, 1, 1, 1, (2, 3)),  # general routing, two images, dropped rows
    ((1, 2, 6, 7), (2, 2, 3, 3), False, 2, 1, 1, 2),  # strided: _conv_transpose fallback
    ((1, 2, 3, 4), (2, 2, 1, 1), True, 1, 1, 2, 2),  # padding beyond the kernel extent: fallback
    ((1, 8, 4, 5), (2, 8, 2, 2), True, 1, "same", 1, 3),  # channel-last columns (C·kw = 16), uneven padding
    ((1, 2, 7, 7), (2, 2, 2, 2), True, 1, 1, 2, 3),  # dilation
]


@pytest.mark.parametrize("xs,ws,bias,s,p,d,pool", GRADCHECK, ids=[str(g) for g in GRADCHECK])
def test_fused_gradcheck_and_gradgradcheck(xs, ws, bias, s, p, d, pool):
    if ws[1] * ws[3] >= 16:
        assert nn_fused._channels_last(ws[1], ws[3])
    arrays = [rand(*xs, seed=19), rand(*ws, seed=20)] + ([rand(ws[0], seed=21)] if bias else [])

    def fn(x, w, b=None):
        y = conv2d_relu_max_pool2d(x, w, b, s, p, d, pool)
        assert y.grad_fn is None or y.grad_fn.name() == FUSED  # None: gradcheck's finite differences run no_grad
        return y

    check_grad(fn, *arrays)


@requires_torch
@pytest.mark.parametrize("pool", [2, (2, 3)])
def test_fused_double_backward_matches_pytorch(pool):
    x, w, b = rand(2, 3, 7, 8, seed=22), rand(4, 3, 3, 3, seed=23), rand(4, seed=24)
    ex, ew, eb = leaf(x), leaf(w), leaf(b)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ey = conv2d_relu_max_pool2d(ex, ew, eb, 1, 1, 1, pool)
    ty = _torch_chain(tx, tw, tb, 1, 1, 1, pool)
    c = rand(*ey.shape, seed=25)
    egx, egw = ember.autograd.grad([ey], [ex, ew], [dev(c)], create_graph=True)
    tgx, tgw = torch.autograd.grad([ty], [tx, tw], [torch.from_numpy(c)], create_graph=True)
    _close(host(egx), tgx.detach().numpy(), np.float64)
    _close(host(egw), tgw.detach().numpy(), np.float64)
    vx, vw = rand(*x.shape, seed=26), rand(*w.shape, seed=27)
    e2 = ember.autograd.grad([(egx * dev(vx)).sum() + (egw * dev(vw)).sum()], [ex, ew])
    t2 = torch.autograd.grad([(tgx * torch.from_numpy(vx)).sum() + (tgw * torch.from_numpy(vw)).sum()], [tx, tw])
    for e, t in zip(e2, t2):
        _close(host(e), t.numpy(), np.float64)


def _ties(n, c, h, w, o, k, seed):
    """Integer-valued input, weight and bias: many exactly tied conv outputs (exact in float32 too)."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-2, 3, (n, c, h, w)).astype(np.float64), rng.integers(-1, 2, (o, c, k, k)).astype(np.float64),
            rng.integers(-1, 2, o).astype(np.float64))


@pytest.mark.parametrize("c,pool", [(2, 2), (2, (2, 3)), (16, 2), (16, 3)])
def test_create_graph_gradients_equal_first_order(c, pool):
    # _backward_graph (create_graph) converts the routing to entry numbers: with ties everywhere it must route
    # exactly as the array backward does
    x, w, b = _ties(2, c, 8, 9, 3, 3, seed=28)
    cot = dev(rand(*conv2d_relu_max_pool2d(leaf(x), leaf(w), leaf(b), 1, 1, 1, pool).shape, seed=29))
    first = []
    for create in (False, True):
        ts = [leaf(x), leaf(w), leaf(b)]
        y = conv2d_relu_max_pool2d(*ts, 1, 1, 1, pool)
        gs = ember.autograd.grad([y], ts, [cot], create_graph=create)
        first.append([host(g) for g in gs])
        if create:
            assert all(g.requires_grad for g in gs[:2])
    for a, g in zip(*first):  # the same routing; summation orders differ (last bits)
        np.testing.assert_allclose(a, g, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------- ties, NaN, all-negative windows
def _entry_numbers_as_torch_indices(y, pool) -> np.ndarray:
    """The fused node's routing as max_pool2d's indices (flat positions in each conv output plane)."""
    node = y.grad_fn
    n, o, qh, qw = y.shape
    (ph, pw), (_, ow) = _pair(pool), node.geom[1]
    e = backend.to_host(node._entry_numbers()).reshape(o, n, qh, qw).transpose(1, 0, 2, 3).astype(np.int64)
    i = np.arange(qh).reshape(qh, 1)
    j = np.arange(qw)
    return (i * ph + e // pw) * ow + j * pw + e % pw


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("order", ["relu_pool", "pool_relu"])
@pytest.mark.parametrize("c,pool", [(2, 2), (2, 3), (2, (2, 3)), (16, 2), (16, (3, 2))])
def test_ties_route_like_pytorch(c, pool, order, dtype):
    x, w, b = _ties(2, c, 9, 10, 3, 3, seed=30)
    with torch.no_grad():
        z = TF.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1, 1)
        pooled, idx = TF.max_pool2d(z, pool, return_indices=True)
    # the test only means something if windows hold tied maxima
    zn, ph, pw = z.numpy(), *_pair(pool)
    qh, qw = pooled.shape[2:]
    win = zn[:, :, :qh * ph, :qw * pw].reshape(2, 3, qh, ph, qw, pw)
    ties = ((win == pooled.numpy()[:, :, :, None, :, None]).sum(axis=(3, 5)) > 1) & (pooled.numpy() > 0)
    assert ties.sum() >= 5
    _compare(x, w, b, 1, 1, 1, pool, dtype, order=order)
    y = conv2d_relu_max_pool2d(leaf(x.astype(dtype)), leaf(w.astype(dtype)), leaf(b.astype(dtype)), 1, 1, 1, pool)
    np.testing.assert_array_equal(_entry_numbers_as_torch_indices(y, pool), idx.numpy())


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("c,pool", [(2, 2), (2, 3), (2, (2, 3)), (16, 2), (16, 3)])
def test_nan_routes_like_pytorch_max_pool(c, pool, dtype):
    # a 1x1 conv puts each input NaN at one conv output position (in every output channel), so the windows get
    # NaNs at chosen entries: two in one window (PyTorch picks the last), one at each entry of others
    ph, pw = _pair(pool)
    x, w, b = _ties(2, c, 3 * ph, 4 * pw, 3, 1, seed=31)
    x[0, 0, 0, 0] = x[0, 0, ph - 1, pw - 1] = np.nan  # window (0, 0): first and last entry
    x[0, 1, 0, pw + pw - 1] = x[0, 1, ph - 1, pw] = np.nan  # window (0, 1): the two other corners
    for e, (a, bb) in enumerate(itertools.product(range(ph), range(pw))):
        x[1, 0, ph + a, bb + e % 4 * pw] = np.nan  # windows of image 1: a NaN at entry e
    x, w, b = x.astype(dtype), w.astype(dtype), b.astype(dtype)
    with torch.no_grad():
        z = TF.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b))
        _, idx = TF.max_pool2d(z, pool, return_indices=True)
        ref = _torch_chain(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1, 0, 1, pool).numpy()
    y = conv2d_relu_max_pool2d(leaf(x), leaf(w), leaf(b), 1, 0, 1, pool)
    out = host(y)
    assert np.isnan(ref).any()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    _close(out, ref, dtype)  # assert_allclose treats NaN == NaN
    np.testing.assert_array_equal(_entry_numbers_as_torch_indices(y, pool), idx.numpy())


@requires_torch
@pytest.mark.parametrize("order", ["relu_pool", "pool_relu"])
@pytest.mark.parametrize("c,k,pool", [(2, 1, 2), (2, 3, 2), (2, 3, (2, 3)), (16, 3, 2)])
def test_nan_gradients_match_unfused_and_pytorch_outside_nan_windows(c, k, pool, order):
    x, w, b = rand(2, c, 8, 9, seed=32), rand(3, c, k, k, seed=33), rand(3, seed=34)
    x[0, 1, 2, 3] = np.nan
    args = (1, k // 2, 1, pool)
    _, fused, f_grads = _run("ember", lambda *t: conv2d_relu_max_pool2d(*t, *args), [x, w, b], (True,) * 3)
    _, unfused, u_grads = _run("ember", lambda *t: _ember_chain(*t, *args, order), [x, w, b], (True,) * 3)
    np.testing.assert_array_equal(np.isnan(fused), np.isnan(unfused))
    _close(fused, unfused, np.float64)
    for g, u in zip(f_grads, u_grads):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(u))
        _close(g, u, np.float64)
    # and PyTorch's, with the same cotangent (its ReLU passes a NaN's gradient on, as ember's does)
    _, theirs, t_grads = _run("torch", lambda *t: _torch_chain(*t, *args, order), [x, w, b], (True,) * 3)
    np.testing.assert_array_equal(np.isnan(fused), np.isnan(theirs))
    for name, g, t in zip(("input", "weight", "bias"), f_grads, t_grads):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(t), err_msg=name)
        _close(g, t, np.float64, name)


@requires_torch
@pytest.mark.parametrize("pool", [2, (2, 3)])
def test_all_negative_windows_get_zero_gradient(pool):
    x, w = rand(2, 3, 8, 9, seed=35), rand(4, 3, 3, 3, seed=36)
    b = np.array([-50.0, 0.0, 0.1, -0.3])  # channel 0: every window negative
    val, (gx, gw, gb) = _compare(x, w, b, 1, 1, 1, pool, np.float64)
    assert (val[:, 0] == 0).all() and (val[:, 1:] > 0).any() and (val[:, 1:] == 0).any()
    np.testing.assert_array_equal(gw[0], 0)
    assert gb[0] == 0 and (gw[1:] != 0).all()
    # an input whose whole conv output is negative: zero input gradient
    _, _, (gx, gw, gb) = _run("ember", lambda *t: conv2d_relu_max_pool2d(*t, 1, 1, 1, pool),
                              [x, w, np.full(4, -50.0)], (True,) * 3)
    for g in (gx, gw, gb):
        np.testing.assert_array_equal(g, 0)


# ---------------------------------------------------------------------- Sequential
@pytest.fixture
def spy(monkeypatch):
    """Records each call of the fused op by Sequential."""
    calls = []

    def fused(*args):
        calls.append(args)
        return conv2d_relu_max_pool2d(*args)

    monkeypatch.setattr(_fusion, "conv2d_relu_max_pool2d", fused)
    return calls


def _layers(conv_kw, order="relu_pool", pool_kw=None, inplace=False, dtype=np.float64, seed=0):
    ember.manual_seed(seed)
    conv = nn.Conv2d(**conv_kw)
    relu, pool = nn.ReLU(inplace=inplace), nn.MaxPool2d(**(pool_kw or dict(kernel_size=2)))
    m = nn.Sequential(conv, relu, pool) if order == "relu_pool" else nn.Sequential(conv, pool, relu)
    return (m.to(ember.float64) if dtype == np.float64 else m).to(DEVICE)


def _torch_copy(m):
    """m's layers in PyTorch with the same weights."""
    layers = []
    for layer in m:
        if isinstance(layer, nn.Conv2d):
            t = torch.nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding,
                                layer.dilation, layer.groups, layer.bias is not None, layer.padding_mode)
            t = t.to(torch.float64 if layer.weight.dtype == ember.float64 else torch.float32)
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(host(layer.weight)))
                if layer.bias is not None:
                    t.bias.copy_(torch.from_numpy(host(layer.bias)))
        elif isinstance(layer, nn.ReLU):
            t = torch.nn.ReLU(inplace=layer.inplace)
        else:
            t = torch.nn.MaxPool2d(layer.kernel_size, layer.stride, layer.padding, layer.dilation,
                                   layer.return_indices, layer.ceil_mode)
        layers.append(t)
    return torch.nn.Sequential(*layers)


def _seq_run(m, x, cot_seed=7):
    """Output and gradients (input, each parameter) of Sequential m on x; the parameters' grads are reset first."""
    m.zero_grad()
    xt = leaf(x, x.dtype.kind == "f")
    y = m(xt)
    out = y[0] if isinstance(y, tuple) else y
    v = host(out)
    c = np.random.default_rng(cot_seed).standard_normal(v.shape).astype(v.dtype)
    out.backward(dev(c))
    grads = [xt.grad] + [p.grad for p in m.parameters()]
    return y, v, [None if g is None else host(g).copy() for g in grads]


def _torch_run(tm, x, cot_seed=7):
    xt = torch.tensor(x, requires_grad=True)
    y = tm(xt)
    out = y[0] if isinstance(y, tuple) else y
    v = out.detach().numpy()
    c = np.random.default_rng(cot_seed).standard_normal(v.shape).astype(v.dtype)
    out.backward(torch.from_numpy(c))
    return y, v, [xt.grad.numpy()] + [p.grad.numpy() for p in tm.parameters()]


SEQ = [  # (conv kwargs, pool kwargs, input shape)
    (dict(in_channels=3, out_channels=4, kernel_size=3, padding=1), dict(kernel_size=2), (2, 3, 8, 9)),
    (dict(in_channels=16, out_channels=4, kernel_size=3, padding="same"), dict(kernel_size=2, stride=2), (2, 16, 7, 6)),
    (dict(in_channels=3, out_channels=4, kernel_size=(3, 2), stride=2, padding=(1, 0), bias=False),
     dict(kernel_size=(2, 3)), (2, 3, 11, 13)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, dilation=2, padding="valid"), dict(kernel_size=3, stride=3),
     (1, 2, 12, 11)),
    (dict(in_channels=2, out_channels=3, kernel_size=5, padding=2), dict(kernel_size=(2, 2), stride=(2, 2)),
     (3, 2, 7, 7)),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("inplace", [False, True], ids=["relu", "relu-inplace"])
@pytest.mark.parametrize("order", ["relu_pool", "pool_relu"])
@pytest.mark.parametrize("conv_kw,pool_kw,xs", SEQ, ids=[str(i) for i in range(len(SEQ))])
def test_sequential_fused_matches_unfused_and_pytorch(monkeypatch, spy, conv_kw, pool_kw, xs, order, inplace, dtype):
    m = _layers(conv_kw, order, pool_kw, inplace, dtype)
    x = rand(*xs, seed=40, dtype=dtype)
    y, fused, f_grads = _seq_run(m, x)
    assert y.grad_fn.name() == FUSED and len(spy) == 1
    _, ref, t_grads = _torch_run(_torch_copy(m), x)
    monkeypatch.setattr(_fusion, "ENABLED", False)
    y, unfused, u_grads = _seq_run(m, x)
    assert y.grad_fn.name() != FUSED and len(spy) == 1
    assert len(f_grads) == len(t_grads) == len(u_grads) == 2 + (m[0].bias is not None)
    _close(fused, unfused, dtype)
    _close(fused, ref, dtype)
    for g, u, t in zip(f_grads, u_grads, t_grads):
        _close(g, u, dtype)
        _close(g, t, dtype)


def _no_fusion_cases():
    """(id, Sequential builder, input array): runs Sequential must compute layer by layer."""
    f64 = ember.float64

    def std(**conv):
        return dict(dict(in_channels=2, out_channels=4, kernel_size=3, padding=1), **conv)

    def seq(conv=None, pool=None, order="relu_pool", conv_cls=nn.Conv2d, relu_cls=nn.ReLU, pool_cls=nn.MaxPool2d):
        def build():
            ember.manual_seed(0)
            c, r, p = conv_cls(**std(**(conv or {}))), relu_cls(), pool_cls(**(pool or dict(kernel_size=2)))
            return (nn.Sequential(c, r, p) if order == "relu_pool" else nn.Sequential(c, p, r)).to(f64).to(DEVICE)
        return build

    class MyConv(nn.Conv2d):
        pass

    class MyReLU(nn.ReLU):
        pass

    class MyPool(nn.MaxPool2d):
        pass

    x = rand(2, 2, 8, 8, seed=41)
    return [
        ("conv-subclass", seq(conv_cls=MyConv), x),
        ("relu-subclass", seq(relu_cls=MyReLU), x),
        ("pool-subclass", seq(pool_cls=MyPool, order="pool_relu"), x),
        ("groups-2", seq(conv=dict(groups=2)), x),
        ("reflect-padding", seq(conv=dict(padding_mode="reflect")), x),
        ("pool-padding", seq(pool=dict(kernel_size=2, padding=1)), x),
        ("pool-ceil-mode", seq(pool=dict(kernel_size=3, ceil_mode=True)), x),
        ("pool-overlap", seq(pool=dict(kernel_size=2, stride=1)), x),
        ("pool-stride-3", seq(pool=dict(kernel_size=2, stride=3), order="pool_relu"), x),
        ("pool-dilation", seq(pool=dict(kernel_size=2, dilation=2)), x),
        ("unbatched", seq(), x[0]),
        ("unbatched-H-is-C", seq(), x[0, :, :2]),  # (C, H, W) with H == in_channels: passes the channel check
        ("leaky-relu", seq(relu_cls=nn.LeakyReLU), x),
        ("avg-pool", seq(pool_cls=nn.AvgPool2d), x),
    ]


NO_FUSION = _no_fusion_cases()


@requires_torch
@pytest.mark.parametrize("name,build,x", NO_FUSION, ids=[c[0] for c in NO_FUSION])
def test_sequential_not_fused_runs_layer_by_layer(monkeypatch, spy, name, build, x):
    m = build()
    y, val, grads = _seq_run(m, x)
    assert not spy and y.grad_fn.name() != FUSED
    monkeypatch.setattr(_fusion, "ENABLED", False)
    y2, val2, grads2 = _seq_run(m, x)
    np.testing.assert_array_equal(val, val2)
    for g, g2 in zip(grads, grads2):
        np.testing.assert_array_equal(g, g2)
    if name.endswith("subclass") or name in ("leaky-relu", "avg-pool"):
        return
    _, ref, t_grads = _torch_run(_torch_copy(m), x)  # and the layer-by-layer path is right
    _close(val, ref, np.float64)
    for g, t in zip(grads, t_grads):
        _close(g, t, np.float64)


def test_sequential_return_indices_not_fused(spy):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, return_indices=True)).double().to(DEVICE)
    y, idx = m(leaf(rand(2, 2, 6, 6, seed=42)))
    assert not spy and y.grad_fn.name() != FUSED and idx.dtype == ember.int64 and idx.shape == y.shape


def test_sequential_fusion_disabled(monkeypatch, spy):
    monkeypatch.setattr(_fusion, "ENABLED", False)
    m = _layers(dict(in_channels=2, out_channels=3, kernel_size=3))
    assert m(leaf(rand(1, 2, 6, 6, seed=43))).grad_fn.name() != FUSED and not spy


@pytest.mark.parametrize("layer", [0, 1, 2])
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "full_backward"])
def test_sequential_hooks_prevent_fusion_and_fire(spy, layer, kind):
    m = _layers(dict(in_channels=2, out_channels=3, kernel_size=3, padding=1))
    fired = []
    if kind == "forward":
        m[layer].register_forward_hook(lambda mod, args, out: fired.append(type(mod).__name__))
    elif kind == "forward_pre":
        m[layer].register_forward_pre_hook(lambda mod, args: fired.append(type(mod).__name__))
    else:
        m[layer].register_full_backward_hook(lambda mod, gin, gout: fired.append(type(mod).__name__))
    x = rand(2, 2, 6, 7, seed=44)
    y, val, grads = _seq_run(m, x)
    assert not spy and y.grad_fn.name() != FUSED
    assert fired == [type(m[layer]).__name__]
    # the hooked run computes what the fused one does
    plain = _layers(dict(in_channels=2, out_channels=3, kernel_size=3, padding=1))
    y2, val2, grads2 = _seq_run(plain, x)
    assert y2.grad_fn.name() == FUSED and len(spy) == 1
    _close(val, val2, np.float64)
    for g, g2 in zip(grads, grads2):
        _close(g, g2, np.float64)


def _error(m, x):
    with pytest.raises(Exception) as info:
        m(x)
    return info.type, str(info.value)


@requires_torch
@pytest.mark.parametrize("case", ["int-input", "dtype-mismatch", "channel-mismatch", "pool-too-big",
                                  "pool-too-big-one-dim"])
def test_sequential_bad_input_not_fused_gives_layer_errors(monkeypatch, spy, case):
    m = _layers(dict(in_channels=2, out_channels=3, kernel_size=3))  # float64, no padding
    tm = _torch_copy(m)
    x = {"int-input": np.arange(2 * 2 * 6 * 6).reshape(2, 2, 6, 6),
         "dtype-mismatch": rand(2, 2, 6, 6, seed=45, dtype=np.float32),
         "channel-mismatch": rand(2, 3, 6, 6, seed=45),
         "pool-too-big": rand(2, 2, 3, 3, seed=45),  # conv output 1x1 < pool 2
         "pool-too-big-one-dim": rand(2, 2, 8, 3, seed=45)}[case]
    fused_err = _error(m, dev(x))
    assert not spy
    monkeypatch.setattr(_fusion, "ENABLED", False)
    assert fused_err == _error(m, dev(x))
    # the same exception type as PyTorch's layers raise
    with pytest.raises(Exception) as info:
        tm(torch.from_numpy(x))
    assert fused_err[0] is info.type, (fused_err, info.value)


def test_sequential_pool_output_of_size_one_is_fused(spy):
    m = _layers(dict(in_channels=2, out_channels=3, kernel_size=3))
    y = m(leaf(rand(1, 2, 4, 5, seed=46)))  # conv output 2x3: exactly one window
    assert y.shape == (1, 3, 1, 1) and y.grad_fn.name() == FUSED and len(spy) == 1


def test_sequential_fuses_each_run_in_a_longer_stack(spy):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(4, 4, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
                      nn.Conv2d(4, 2, 1), nn.ReLU()).to(DEVICE)  # the last conv has no pool after it
    y = m(dev(rand(2, 1, 8, 8, seed=47, dtype=np.float32)))
    assert len(spy) == 2 and y.grad_fn.name() != FUSED and y.shape == (2, 2, 2, 2)


@pytest.mark.parametrize("after", ["relu-inplace-layer", "sub_"])
def test_sequential_fused_output_modified_in_place(monkeypatch, after):
    def run():
        ember.manual_seed(0)
        layers = [nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        m = nn.Sequential(*layers, *([nn.ReLU(inplace=True)] if after == "relu-inplace-layer" else [])).double()
        m = m.to(DEVICE)
        x = leaf(rand(2, 2, 6, 6, seed=48))
        y = m(x)
        if after == "sub_":
            y.sub_(0.5)
        (y * y).sum().backward()
        return host(x.grad)

    fused = run()
    monkeypatch.setattr(_fusion, "ENABLED", False)
    np.testing.assert_allclose(fused, run(), rtol=1e-12)


# ---------------------------------------------------------------------- no_grad, retain_graph, frozen parameters
@pytest.mark.parametrize("c,pool", [(3, 2), (16, 2), (3, (2, 3)), (16, 3)])
def test_no_grad_output_equals_grad_path(c, pool):
    x, w, b = rand(3, c, 9, 8, seed=50), rand(4, c, 3, 3, seed=51), rand(4, seed=52)
    y = conv2d_relu_max_pool2d(leaf(x), leaf(w), leaf(b), 1, 1, 1, pool)
    with ember.no_grad():
        y0 = conv2d_relu_max_pool2d(leaf(x), leaf(w), leaf(b), 1, 1, 1, pool)
    assert not y0.requires_grad and y0.grad_fn is None
    np.testing.assert_array_equal(host(y0), host(y))
    # and Sequential under no_grad
    m = _layers(dict(in_channels=c, out_channels=4, kernel_size=3, padding=1), pool_kw=dict(kernel_size=pool))
    with ember.no_grad():
        a = host(m(dev(x)))
    np.testing.assert_array_equal(a, host(m(leaf(x, False))))


@pytest.mark.parametrize("images_per_chunk", [None, 1])
@pytest.mark.parametrize("c,s,pool", [(3, 1, 2), (16, 1, 2), (3, 2, (2, 3)), (16, 1, 3)])
def test_retain_graph_second_backward_same_gradients(monkeypatch, c, s, pool, images_per_chunk):
    if images_per_chunk:
        monkeypatch.setattr(windows, "_CHUNK_BYTES", 1)
    ts = [leaf(rand(3, c, 9, 10, seed=53)), leaf(rand(4, c, 3, 3, seed=54)), leaf(rand(4, seed=55))]
    y = conv2d_relu_max_pool2d(*ts, s, 1, 1, pool)
    cot = dev(rand(*y.shape, seed=56))
    y.backward(cot, retain_graph=True)
    first = [host(t.grad).copy() for t in ts]
    for t in ts:
        t.grad = None
    y.backward(cot)  # the columns were handed to the first backward: rebuilt
    for a, t in zip(first, ts):
        np.testing.assert_allclose(host(t.grad), a, rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):  # the graph was freed by the last backward
        y.backward(cot)


@requires_torch
@pytest.mark.parametrize("requires", [(False, True, True), (True, False, True), (True, False, False),
                                      (False, False, True), (False, True, False)],
                         ids=["input-no-grad", "frozen-weight", "input-only", "bias-only", "weight-only"])
@pytest.mark.parametrize("c", [3, 16])
def test_partial_requires_grad_matches_pytorch(c, requires):
    _, grads = _compare(rand(2, c, 8, 7, seed=57), rand(4, c, 3, 3, seed=58), rand(4, seed=59), 1, 1, 1, 2,
                        np.float64, requires=requires)
    assert [g is not None for g in grads] == list(requires)


@requires_torch
def test_sequential_first_layer_and_frozen_conv(spy):
    m = _layers(dict(in_channels=3, out_channels=4, kernel_size=3, padding=1), dtype=np.float32)
    tm = _torch_copy(m)
    x = rand(2, 3, 8, 8, seed=60, dtype=np.float32)
    for frozen in ([], ["weight"], ["weight", "bias"]):
        for name in frozen:
            getattr(m[0], name).requires_grad_(False)
            getattr(tm[0], name).requires_grad_(False)
        m.zero_grad()
        tm.zero_grad()
        y = m(dev(x))  # the first layer: the input does not require grad
        ty = tm(torch.from_numpy(x))
        _close(host(y), ty.detach().numpy(), np.float32)
        if len(frozen) == 2:  # nothing requires grad: a plain result
            assert y.grad_fn is None and not y.requires_grad
            continue
        assert y.grad_fn.name() == FUSED
        c = rand(*y.shape, seed=61, dtype=np.float32)
        y.backward(dev(c))
        ty.backward(torch.from_numpy(c))
        for name in ("weight", "bias"):
            g, tg = getattr(m[0], name).grad, getattr(tm[0], name).grad
            assert (g is None) == (tg is None) == (name in frozen)
            if g is not None:
                _close(host(g), tg.numpy(), np.float32, name)
    assert len(spy) == 3


def test_w3_cnn_trains_the_same_fused_and_unfused(monkeypatch, spy):
    ember.manual_seed(0)
    ref = build_model("cnn", (1, 28, 28), 10)
    state = {k: v.detach().clone().to(DEVICE) for k, v in ref.state_dict().items()}
    rng = np.random.default_rng(61)
    xs = rng.standard_normal((3, 8, 1, 28, 28)).astype(np.float32)
    ys = rng.integers(0, 10, (3, 8))

    def train():
        model = build_model("cnn", (1, 28, 28), 10).to(DEVICE)
        model.load_state_dict(state)
        opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for x, t in zip(xs, ys):
            opt.zero_grad()
            loss = F.cross_entropy(model(dev(x)), dev(t))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return model, losses

    fused, f_losses = train()
    # two fused runs per forward (a compiled replay calls the op itself, not the Python function spied on)
    assert len(spy) == 6 or (COMPILE and len(spy) >= 2)
    n = len(spy)
    monkeypatch.setattr(_fusion, "ENABLED", False)
    unfused, u_losses = train()
    assert len(spy) == n
    np.testing.assert_allclose(f_losses, u_losses, rtol=1e-5)
    assert f_losses[-1] != f_losses[0]
    for (name, p), q in zip(fused.named_parameters(), unfused.parameters()):
        np.testing.assert_allclose(host(p), host(q), rtol=1e-4, atol=1e-6, err_msg=name)
        assert not np.array_equal(host(p), host(state[name])), name  # it trained


# ---------------------------------------------------------------------- errors
def test_errors_name_the_function():
    w = ember.ones(2, 1, 3, 3)
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*batched.*\[1, 5, 5\]"):
        conv2d_relu_max_pool2d(ember.ones(1, 5, 5), w, None)
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*floating.*int64"):
        conv2d_relu_max_pool2d(ember.ones(1, 1, 5, 5, dtype=ember.int64), ember.ones(2, 1, 3, 3, dtype=ember.int64),
                               None)
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*pool \[2, 2\].*\[1, 1\]"):
        conv2d_relu_max_pool2d(ember.ones(1, 1, 3, 3), w, None)
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*pool \[2, 4\].*\[4, 3\]"):
        conv2d_relu_max_pool2d(ember.ones(1, 1, 6, 5), w, None, pool=(2, 4))
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*pool \[-1, -1\]"):
        conv2d_relu_max_pool2d(ember.ones(1, 1, 6, 5), w, None, pool=-1)


@pytest.mark.parametrize("pool", [0, (2, 0), (2,)], ids=str)
def test_bad_pool_is_a_runtime_error(pool):
    with pytest.raises(RuntimeError, match=r"conv2d_relu_max_pool2d\(\).*pool"):
        conv2d_relu_max_pool2d(ember.ones(1, 1, 6, 6), ember.ones(2, 1, 3, 3), None, pool=pool)


# ---------------------------------------------------------------------- devices
# (the `cuda` fixture is in conftest.py)

@pytest.mark.parametrize("c,s,pool", [(3, 1, 2), (16, 1, 2), (3, 2, (2, 3)), (16, 1, 3)])
def test_cuda_matches_cpu_values_gradients_and_routing(monkeypatch, cuda, c, s, pool):
    # the CPU path in chunks of one image; the device path takes the whole batch as one chunk
    monkeypatch.setattr(windows, "_CHUNK_BYTES", 1)
    x, w, b = _ties(3, c, 9, 10, 4, 3, seed=62)
    x[1, 0, 2, 3] = np.nan
    cot = rand(*conv2d_relu_max_pool2d(leaf(x), leaf(w), leaf(b), s, 1, 1, pool).shape, seed=63)
    res = {}
    for d in ("cpu", cuda):
        ts = [ember.from_numpy(a.copy()).to(d).requires_grad_() for a in (x, w, b)]
        y = conv2d_relu_max_pool2d(*ts, s, 1, 1, pool)
        assert y.device.type == d and y.grad_fn.name() == FUSED
        e = backend.to_host(y.grad_fn._entry_numbers())
        y.backward(ember.from_numpy(cot).to(d))
        assert all(t.grad.device.type == d for t in ts)
        res[d] = [host(y), e] + [host(t.grad) for t in ts]
    for name, a, g in zip(("output", "routing", "input", "weight", "bias"), res["cpu"], res[cuda]):
        np.testing.assert_allclose(g, a, rtol=1e-12, atol=1e-12, err_msg=name)


def test_cuda_sequential_fused_with_grad_graph_and_no_grad(cuda, spy):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(16, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)).double()
    x = rand(2, 16, 8, 8, seed=64)
    cpu = host(m(ember.from_numpy(x)))
    m.to(cuda)
    xt = ember.from_numpy(x).to(cuda).requires_grad_()
    y = m(xt)
    assert y.device.type == "cuda" and y.grad_fn.name() == FUSED and len(spy) == 2
    np.testing.assert_allclose(host(y), cpu, rtol=1e-12)
    g, = ember.autograd.grad([(y * y).sum()], [xt], create_graph=True)  # _backward_graph on the device
    assert g.device.type == "cuda" and g.requires_grad
    with ember.no_grad():
        np.testing.assert_array_equal(host(m(xt)), host(y))


def test_mixed_devices_name_both(cuda):
    x, w, b = ember.ones(1, 1, 6, 6), ember.ones(2, 1, 3, 3), ember.ones(2)
    for args in ((x.to(cuda), w, b), (x, w.to(cuda), None), (x.to(cuda), w.to(cuda), b)):
        with pytest.raises(RuntimeError, match=r"cpu and cuda:0.*conv2d_relu_max_pool2d"):
            conv2d_relu_max_pool2d(*args)
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2)).to(cuda)
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(x)
