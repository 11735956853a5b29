"""Every op's raw-array `fast_backward` against its differentiable `backward`.

An `Op` may carry `fast_backward`, the same gradients as `backward` computed on raw arrays; the engine runs it
when no graph of the backward is wanted (create_graph=False) and runs `backward` (ember ops, differentiable)
under create_graph=True. Two implementations of one derivative can drift apart, so:

* `test_every_fast_backward_has_cases`: every `Op` subclass in ember with a `fast_backward` has cases in
  `CASES` below (a new fast path cannot land untested), and every op in `CASES` still has one.
* `test_fast_matches_backward`: for each case, one forward in float64 (and float32) on random inputs, then the
  input gradients for a random cotangent with create_graph=False (the fast path: checked to have run) and with
  create_graph=True (`backward`: checked not to have run the fast path) on the same graph, and once more with
  create_graph=False and the fast path switched off (`backward` run unrecorded). They must agree to ~1e-12
  relative in float64 and ~1e-5 in float32 (relative to the largest gradient entry).

The gradients themselves are checked elsewhere (gradcheck, gradgradcheck and PyTorch parity in the ops' own
test files); this file checks only that the two paths compute the same thing.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from helpers import DEVICE, host, leaf

import ember
import ember.nn.functional as F
from ember.autograd.function import Op
from ember.ops.arithmetic import Mul
from ember.ops.nn_activation import Dropout
from ember.ops.nn_attention import Attention
from ember.ops.nn_fused import ConvReluPool, conv2d_relu_max_pool2d
from ember.ops.nn_loss import CrossEntropy
from ember.ops.nn_more import Hardswish, RmsNorm
from ember.ops.nn_norm import Normalize
from ember.ops.nn_rnn import RNNLayer, rnn_layer
from ember.ops.unary import Relu

TOL = {np.float64: 1e-12, np.float32: 1e-5}


def _const(a: np.ndarray) -> ember.Tensor:
    """A tensor that needs no gradient (targets, masks), on the test device."""
    t = ember.from_numpy(np.array(a))  # a copy, 0-d kept 0-d (np.ascontiguousarray makes it 1-d)
    return t.to(DEVICE) if DEVICE != "cpu" else t


class Inputs:
    """Random leaves of one dtype; `x(shape, grad=False)` makes one that needs no gradient."""

    def __init__(self, dtype, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.leaves: list = []

    def __call__(self, *shape, grad: bool = True, scale: float = 1.0) -> ember.Tensor:
        t = leaf((self.rng.standard_normal(shape) * scale).astype(self.dtype), requires_grad=grad)
        if grad:
            self.leaves.append(t)
        return t

    def ints(self, high: int, shape) -> ember.Tensor:
        return _const(self.rng.integers(0, high, shape))


# ---------------------------------------------------------------------- the cases, per op with a fast path
# Each case: (id, build) with build(inp: Inputs) -> the op's output(s), a Tensor or a tuple of them; the leaves it
# made with `inp(...)` are the inputs differentiated. Options are chosen to reach each branch of the fast path.

def _bn(shape, affine=True, running=False, x_grad=True):
    def build(inp):
        c = shape[1]
        x = inp(*shape, grad=x_grad)
        w, b = (inp(c), inp(c)) if affine else (None, None)
        rm, rv = (_const(np.zeros(c, inp.dtype)), _const(np.ones(c, inp.dtype))) if running else (None, None)
        return F.batch_norm(x, rm, rv, w, b, training=True)
    return build


def _ln(shape, ns, weight=True, bias=True):
    def build(inp):
        x = inp(*shape)
        return F.layer_norm(x, ns, inp(*ns) if weight else None, inp(*ns) if bias else None)
    return build


def _gn(shape, groups, affine=True):
    def build(inp):
        c = shape[1]
        return F.group_norm(inp(*shape), groups, *((inp(c), inp(c)) if affine else (None, None)))
    return build


NORMALIZE = [
    ("bn-2d", _bn((7, 4))),
    ("bn-4d", _bn((3, 4, 5, 2))),
    ("bn-3d-no-affine", _bn((4, 3, 6), affine=False)),
    ("bn-running-stats", _bn((5, 3, 2, 2), running=True)),
    ("bn-params-only", _bn((6, 3, 4), x_grad=False)),
    ("ln-last", _ln((3, 4, 5), (5,))),
    ("ln-last-two-no-affine", _ln((3, 4, 5), (4, 5), weight=False, bias=False)),
    ("ln-weight-only", _ln((6, 8), (8,), bias=False)),
    ("ln-bias-only", _ln((6, 8), (8,), weight=False)),
    ("gn", _gn((4, 6, 3, 2), 3)),
    ("gn-one-group-no-affine", _gn((2, 4, 5), 1, affine=False)),
]


def _ce(shape, reduction="mean", weight=False, ignore=0, smoothing=0.0, all_ignored=False):
    def build(inp):
        c = shape[0] if len(shape) == 1 else shape[1]
        x = inp(*shape, scale=2.0)
        tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
        t = inp.rng.integers(0, c, tshape)
        if ignore or all_ignored:
            t = np.where(inp.rng.random(tshape) < 0.3, -100, t) if not all_ignored else np.full(tshape, -100)
        w = _const(inp.rng.uniform(0.5, 2.0, c).astype(inp.dtype)) if weight else None
        return F.cross_entropy(x, _const(np.asarray(t, np.int64)), weight=w, reduction=reduction,
                               label_smoothing=smoothing)
    return build


CROSS_ENTROPY = [(f"{r}-{k}", _ce(s, r, **kw)) for r in ("mean", "sum", "none") for k, s, kw in [
    ("2d", (8, 5), {}),
    ("spatial", (3, 5, 4, 2), {}),
    ("unbatched", (6,), {}),
    ("weighted", (8, 5), {"weight": True}),
    ("ignored", (10, 4), {"ignore": True}),
    ("smoothed", (8, 5), {"smoothing": 0.2}),
    ("smoothed-weighted-ignored", (3, 5, 4), {"smoothing": 0.1, "weight": True, "ignore": True}),
]] + [("mean-all-ignored", _ce((4, 3), all_ignored=True))]


def _sdpa(q, k, v, mask=None, mask_grad=False, causal=False, p=0.0, scale=None, gqa=False, grads=(1, 1, 1)):
    def build(inp):
        qt, kt, vt = (inp(*s, grad=bool(g)) for s, g in zip((q, k, v), grads))
        m = None
        if mask == "bool":  # random keep-mask with one row fully masked: that row's output and gradient are zero
            keep = inp.rng.random(q[:-2] + (q[-2], k[-2])) < 0.6
            keep[..., 0, :] = False
            m = _const(keep)
        elif mask == "float":
            m = inp(*((1,) + q[-3:-2] + (q[-2], k[-2])), grad=mask_grad)
        return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=m, dropout_p=p, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)
    return build


ATTENTION = [
    ("plain", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7))),
    ("causal", _sdpa((2, 5, 3), (2, 5, 3), (2, 5, 3), causal=True)),
    ("bool-mask-dead-row", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), mask="bool")),
    ("float-mask-grad", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), mask="float", mask_grad=True)),
    ("float-mask-const", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), mask="float")),
    ("dropout", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), p=0.3)),
    ("broadcast-kv", _sdpa((2, 3, 4, 5), (1, 3, 6, 5), (1, 3, 6, 5), scale=0.7)),
    ("gqa", _sdpa((2, 4, 3, 5), (2, 2, 6, 5), (2, 2, 6, 5), gqa=True)),
    ("value-only", _sdpa((2, 4, 5), (2, 6, 5), (2, 6, 5), grads=(0, 0, 1))),
    ("query-only-masked", _sdpa((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), mask="bool", grads=(1, 0, 0))),
]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn(mode, bs=(3, 3, 3, 3), reverse=False, hx=True, bias=True, proj=False, outs=(0, 1, 2), x_grad=True):
    def build(inp):
        g, i, h = _GATES[mode], 3, 4
        hout = 2 if proj else h
        n, b0 = sum(bs), bs[0]
        x = inp(n, i, grad=x_grad, scale=0.8)
        h0 = inp(b0, hout, scale=0.5) if hx else None
        c0 = inp(b0, h, scale=0.5) if hx and mode == "LSTM" else None
        w_ih, w_hh = inp(g * h, i, scale=0.5), inp(g * h, hout, scale=0.5)
        b_ih, b_hh = (inp(g * h, scale=0.5), inp(g * h, scale=0.5)) if bias else (None, None)
        w_hr = inp(hout, h, scale=0.5) if proj else None
        r = rnn_layer(mode, x, np.array(bs), reverse, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
        return tuple(r[k] for k in outs if k < len(r))
    return build


RNN = [
    ("tanh", _rnn("RNN_TANH")),
    ("relu-packed", _rnn("RNN_RELU", bs=(3, 2, 2, 1))),
    ("lstm", _rnn("LSTM")),
    ("lstm-packed-reverse-no-hx", _rnn("LSTM", bs=(3, 3, 2, 1), reverse=True, hx=False)),
    ("lstm-proj", _rnn("LSTM", bs=(3, 2, 1), proj=True)),
    ("lstm-out-only-no-bias", _rnn("LSTM", bias=False, outs=(0,))),
    ("lstm-cn-only-weights", _rnn("LSTM", outs=(2,), x_grad=False)),
    ("gru", _rnn("GRU")),
    ("gru-packed-reverse", _rnn("GRU", bs=(3, 2, 2, 1), reverse=True)),
    ("gru-hn-only-no-bias", _rnn("GRU", bias=False, outs=(1,))),
]


def _crp(x, o, k, stride=1, padding=0, dilation=1, pool=2, bias=True, x_grad=True):
    def build(inp):
        xt = inp(*x, grad=x_grad)
        w = inp(o, x[1], k, k, scale=0.5)
        b = inp(o) if bias else None
        return conv2d_relu_max_pool2d(xt, w, b, stride, padding, dilation, pool)
    return build


CONV_RELU_POOL = [
    ("channel-first", _crp((2, 3, 8, 8), 4, 3, padding=1)),
    ("channel-last-odd-size", _crp((2, 8, 9, 7), 5, 3, padding=1)),
    ("pool3", _crp((2, 3, 10, 9), 4, 3, padding=1, pool=3)),
    ("pool2x3-channel-last", _crp((2, 8, 8, 9), 3, 3, padding=1, pool=(2, 3))),
    ("stride2", _crp((2, 3, 11, 11), 4, 3, stride=2, padding=1)),
    ("dilation2", _crp((2, 3, 10, 10), 4, 3, dilation=2, padding=2)),
    ("wide-padding", _crp((2, 3, 6, 6), 4, 3, padding=3)),
    ("no-bias", _crp((2, 3, 8, 8), 4, 3, bias=False)),
    ("params-only", _crp((2, 1, 8, 8), 4, 3, padding=1, x_grad=False)),
]

def _relu(shape, zeros=False):
    def build(inp):
        x = inp(*shape)
        if zeros:  # exact zeros: the mask's boundary (z <= 0 passes no gradient)
            with ember.no_grad():
                x[..., ::2] = 0.0
        return ember.relu(x * 1.0) if zeros else ember.relu(x)
    return build


RELU = [("vector", _relu((7,))), ("matrix", _relu((4, 6))), ("one-element", _relu((1,))), ("zeros", _relu((3, 8), zeros=True))]


def _dropout(shape, p):
    def build(inp):
        ember.manual_seed(zlib.crc32(repr((shape, p)).encode()))
        return F.dropout(inp(*shape), p=p, training=True)
    return build


DROPOUT = [("p0.3", _dropout((4, 6), 0.3)), ("p0.5-3d", _dropout((2, 3, 5), 0.5)), ("p1", _dropout((3, 4), 1.0))]

def _mul(a_shape, b, b_grad=True):
    def build(inp):
        x = inp(*a_shape)
        if b == "scalar":
            return x * 1.7
        if b == "int":
            return x * inp.ints(5, a_shape)
        if b == "0-d":  # two 0-d factors: NumPy's product of them is a scalar, not an array
            return x.sum() * inp(*a_shape).sum()
        other = inp(*b, grad=b_grad)
        return x * other
    return build


MUL = [("same-shape", _mul((3, 4), (3, 4))), ("broadcast", _mul((3, 4), (4,))), ("scalar", _mul((5,), "scalar")),
       ("int-factor", _mul((2, 3), "int")), ("one-side", _mul((3, 4), (3, 4), b_grad=False)),
       ("0-d", _mul((3,), "0-d"))]

# ---- nn_more (ember/ops/nn_more.py): hardswish (its kinks at ±3 included) and rms_norm
def _hardswish(kinks=False):
    def build(inp):
        x = inp(3, 6, scale=3.0)
        if kinks:
            with ember.no_grad():
                x[0, :4] = ember.tensor([-3.0, 3.0, -4.0, 4.0], dtype=x.dtype)
        return F.hardswish(x)
    return build


def _rms(shape, ns, weight=True, x_grad=True):
    def build(inp):
        return F.rms_norm(inp(*shape, grad=x_grad), ns, inp(*ns) if weight else None)
    return build


HARDSWISH = [("random", _hardswish()), ("kinks", _hardswish(kinks=True))]
RMS_NORM = [("last", _rms((3, 4, 5), (5,))), ("last-two-no-weight", _rms((3, 4, 5), (4, 5), weight=False)),
            ("1d", _rms((6,), (6,))), ("weight-only", _rms((4, 3), (3,), x_grad=False))]
# ---- end nn_more

CASES = {Mul: MUL, Normalize: NORMALIZE, CrossEntropy: CROSS_ENTROPY, Attention: ATTENTION, RNNLayer: RNN,
         ConvReluPool: CONV_RELU_POOL, Relu: RELU, Dropout: DROPOUT, Hardswish: HARDSWISH, RmsNorm: RMS_NORM}


# ---------------------------------------------------------------------- tests
def _ember_op_classes() -> set:
    """Every subclass of Op (recursively) defined in ember itself."""
    found, todo = set(), [Op]
    while todo:
        for c in todo.pop().__subclasses__():
            if c not in found:
                found.add(c)
                todo.append(c)
    return {c for c in found if c.__module__.split(".")[0] == "ember"}


def test_every_fast_backward_has_cases():
    fast = {c for c in _ember_op_classes() if c.fast_backward is not None}
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in fast - set(CASES))
    assert not missing, f"ops with a fast_backward but no case in tests/test_fast_backward.py: {missing}"
    stale = sorted(c.__qualname__ for c in set(CASES) - fast)
    assert not stale, f"cases for ops that no longer have a fast_backward (remove them from CASES): {stale}"
    assert all(CASES.values())


PARAMS = [pytest.param(cls, build, id=f"{cls.__name__}-{cid}") for cls, cases in CASES.items() for cid, build in cases]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cls,build", PARAMS)
def test_fast_matches_backward(cls, build, dtype, monkeypatch, request):
    calls = []
    fast = cls.fast_backward

    def spy(self, *args):
        calls.append(type(self))
        return fast(self, *args)

    monkeypatch.setattr(cls, "fast_backward", spy)
    inp = Inputs(dtype, seed=zlib.crc32(request.node.callspec.id.encode()))
    outs = build(inp)
    outs = outs if isinstance(outs, tuple) else (outs,)
    cots = [_const(inp.rng.standard_normal(o.shape).astype(dtype)) for o in outs]
    leaves = inp.leaves

    first = ember.autograd.grad(outs, leaves, cots, retain_graph=True, create_graph=False, allow_unused=True)
    assert calls, f"create_graph=False did not run {cls.__name__}.fast_backward (does the case build a {cls.__name__}?)"
    n_fast = len(calls)
    graph = ember.autograd.grad(outs, leaves, cots, retain_graph=True, create_graph=True, allow_unused=True)
    assert len(calls) == n_fast, "create_graph=True ran fast_backward"
    # `backward` must also work unrecorded (create_graph=False), as it runs for an op without a fast path
    monkeypatch.setattr(cls, "fast_backward", None)
    plain = ember.autograd.grad(outs, leaves, cots, create_graph=False, allow_unused=True)

    tol = TOL[dtype]
    for what, other in (("create_graph=True", graph), ("backward without create_graph", plain)):
        for i, (a, b) in enumerate(zip(first, other)):
            msg = f"leaf {i}, fast_backward vs. {what}"
            assert (a is None) == (b is None), f"{msg}: a gradient from one path only"
            if a is None:
                continue
            assert a.shape == b.shape and a.dtype == b.dtype == leaves[i].dtype, f"{msg}: {a.shape} vs. {b.shape}"
            fa, fb = host(a), host(b)
            scale = float(np.abs(fb).max()) if fb.size else 0.0
            assert np.isfinite(fa).all() and np.isfinite(fb).all(), f"{msg}: non-finite gradient"
            np.testing.assert_allclose(fa, fb, rtol=tol, atol=tol * scale, err_msg=msg)
