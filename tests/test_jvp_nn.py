"""Forward-mode AD of the nn ops (ember/ops/nn_*.py) where the parity files do not check it: the first-order tangents
of attention and the recurrent layers (gradcheck's forward Jacobian; PyTorch's forward AD), the adjoint ops that
only backward applies (their rules run in forward-over-reverse: Hessian-vector products against central differences
of the gradient, and op-level gradchecks), and nested levels (forward over forward) through the rules that
recompute from their inputs or open a level of their own."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import forward_ad as fw
from ember.autograd import gradcheck
from ember.ops.nn_conv import ChannelSum, ConvWeightGrad
from ember.ops.nn_misc import EmbeddingBackward, EmbeddingGather, GatherAt, LinearWeightGrad, ScatterAt
from ember.ops.nn_pool import PoolGather, PoolScatter
from ember.ops.nn_rnn import _GATES, rnn_layer
from ember.ops.nn_spatial import Conv3W, Geom, PlaneScatter, WindowSumT
from ember.ops.windows import Win
from helpers import compare_torch_jvp, rand, requires_torch, torch

def _leaves(arrays, requires_grad: bool = True) -> list:
    return [ember.tensor(a, requires_grad=requires_grad) if a.dtype.kind == "f" else ember.tensor(a) for a in arrays]


def forward_check(fn, *arrays) -> None:
    """gradcheck of the forward-mode Jacobian alone (reverse mode is the parity files' job) on float64 leaves."""
    xs = _leaves([np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in arrays])
    assert gradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-4, check_forward_ad=True, check_backward_ad=False)


# ---------------------------------------------------------------------- attention
def _sdpa_cases():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((1, 5, 3))
    m = rng.standard_normal((3, 5))
    dead = np.ones((3, 5), bool)
    dead[1] = False  # a query whose keys are all masked out: zeros, and zero tangents
    return {
        "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.7), (q, k, v)),
        "float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), (q, k, v, m)),
        "bool_mask": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, ember.tensor(dead)), (q, k, v)),
        "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v)),
    }


@pytest.mark.parametrize("case", list(_sdpa_cases()))
def test_attention_forward_ad(case):
    fn, arrays = _sdpa_cases()[case]
    forward_check(fn, *arrays)


def test_attention_dropout_forward_ad():
    """The dropout mask is a constant of the tangent (the same draw for each of gradcheck's calls)."""
    def f(q, k, v):
        ember.manual_seed(3)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    forward_check(f, rand(2, 3, 4, seed=1), rand(2, 3, 4, seed=2), rand(2, 3, 2, seed=3))


@requires_torch
@pytest.mark.parametrize("case", ["plain", "float_mask", "bool_mask", "causal"])
def test_attention_jvp_as_pytorch(case):
    fn, arrays = _sdpa_cases()[case]
    tf = torch.nn.functional
    dead = torch.ones(3, 5, dtype=torch.bool)
    dead[1] = False
    # PyTorch's fully masked row is NaN where ember's (and its CPU kernels') is 0: its math on the live rows only
    torch_fn = {"plain": lambda q, k, v: tf.scaled_dot_product_attention(q, k, v, scale=0.7),
                "float_mask": lambda q, k, v, m: tf.scaled_dot_product_attention(q, k, v, m),
                "bool_mask": lambda q, k, v: torch.where(dead.any(-1, keepdim=True), tf.scaled_dot_product_attention(
                    q, k, v, torch.where(dead.any(-1, keepdim=True), dead, True)), 0.0),
                "causal": lambda q, k, v: tf.scaled_dot_product_attention(q, k, v, is_causal=True)}[case]
    compare_torch_jvp(fn, torch_fn, *arrays, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------- losses
_LOSSES = {  # name: (the loss of (x, target, weight), its inputs)
    "bce": (lambda x, t, w: F.binary_cross_entropy(x, t, w),
            (rand(2, 3, seed=1, low=0.1, high=0.9), rand(2, 3, seed=2, low=0, high=1), rand(2, 3, seed=3, low=0.5))),
    "bce_with_logits": (lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, w, reduction="sum"),
                        (rand(2, 3, seed=1), rand(2, 3, seed=2, low=0, high=1), rand(2, 3, seed=3, low=0.5))),
    "pos_weight": (lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, pos_weight=w, reduction="none"),
                   (rand(2, 3, seed=1), rand(2, 3, seed=2, low=0, high=1), rand(3, seed=3, low=0.5))),
    # (PyTorch's composite label-smoothing term, unlike its nll_loss, does pass a weight's tangent: ember does not)
    "cross_entropy": (lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.1),
                      (rand(4, 3, seed=1), np.array([2, 0, 1, 1]), rand(3, seed=3, low=0.5))),
    "nll_loss": (lambda x, t, w: F.nll_loss(x, t, w, reduction="sum"),
                 (rand(4, 3, seed=1), np.array([2, 0, 1, 1]), rand(3, seed=3, low=0.5))),
}


@pytest.mark.parametrize("case", list(_LOSSES))
def test_loss_weight_has_no_tangent(case):
    """A loss is not differentiable in its weights (reverse mode refuses a weight that requires grad); forward mode
    ignores a weight's tangent, as PyTorch's does (its result carries none)."""
    fn, (x, t, w) = _LOSSES[case]
    with fw.dual_level():
        dual_w = fw.make_dual(ember.tensor(w), ember.ones(w.shape, dtype=ember.float64))
        y = fn(ember.tensor(x), ember.tensor(t), dual_w)
        tangent = fw.unpack_dual(y).tangent
    assert tangent is None or not tangent.numpy().any()


def test_normalize_out_carries_the_tangent():
    """normalize(out=...) writes its result into `out`, tangent included (as an in-place write)."""
    out = ember.empty(2, 3, dtype=ember.float64)
    with fw.dual_level():
        x = fw.make_dual(ember.tensor(rand(2, 3, seed=1)), ember.tensor(rand(2, 3, seed=2)))
        F.normalize(x, out=out)
        got, expected = fw.unpack_dual(out).tangent, fw.unpack_dual(F.normalize(x)).tangent
    assert got is not None
    np.testing.assert_allclose(got.numpy(), expected.numpy())


# ---------------------------------------------------------------------- recurrent layers
def _rnn_case(mode: str, packed: bool, proj: bool = False, seed: int = 0):
    """(f, arrays) for one layer-direction: f(x, h0, [c0,] w_ih, w_hh, b_ih, b_hh, [w_hr]) -> its outputs."""
    rng = np.random.default_rng(seed)
    g, hid, inp = _GATES[mode], 2, 3
    hout = 2 if not proj else 1
    bs = np.array([3, 2, 2, 1]) if packed else np.array([2, 2, 2])
    b0, n = int(bs[0]), int(bs.sum())
    lstm = mode == "LSTM"
    arrays = [rng.standard_normal((n, inp)) * 0.8, rng.standard_normal((b0, hout)) * 0.8]
    if lstm:
        arrays.append(rng.standard_normal((b0, hid)) * 0.8)
    arrays += [rng.standard_normal(s) * 0.6 for s in [(g * hid, inp), (g * hid, hout), (g * hid,), (g * hid,)]]
    if proj:
        arrays.append(rng.standard_normal((hout, hid)) * 0.6)

    def f(x, h0, *rest):
        c0 = rest[0] if lstm else None
        w = rest[1:] if lstm else rest
        return tuple(rnn_layer(mode, x, bs, packed, h0, c0, *w[:4], w[4] if proj else None))
    return f, arrays


@pytest.mark.parametrize("mode,packed,proj", [("RNN_TANH", False, False), ("RNN_RELU", True, False),
                                              ("LSTM", True, True), ("LSTM", False, False), ("GRU", True, False)])
def test_rnn_layer_forward_ad(mode, packed, proj):
    """The tangents of every output (out, h_n, c_n) of one layer-direction; packed runs it in reverse."""
    f, arrays = _rnn_case(mode, packed, proj)
    forward_check(f, *arrays)


@requires_torch
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_rnn_module_jvp_as_pytorch(mode):
    """nn.RNN/LSTM/GRU (two layers, bidirectional) with every input and weight carrying a tangent, as PyTorch's."""
    ember.manual_seed(0)
    em = getattr(ember.nn, mode)(3, 2, num_layers=2, bidirectional=True).double()
    tm = getattr(torch.nn, mode)(3, 2, num_layers=2, bidirectional=True).double()
    names = [n for n, _ in em.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    weights = [p.detach().numpy().copy() for p in em.parameters()]
    rng = np.random.default_rng(1)
    x, h0 = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2, 2))

    def states(h0):
        return (h0, h0 * 0.5) if mode == "LSTM" else h0

    def ember_fn(x, h0, *ws):
        out, hn = ember.func.functional_call(em, dict(zip(names, ws)), (x, states(h0)))
        return (out,) + (tuple(hn) if mode == "LSTM" else (hn,))

    def torch_fn(x, h0, *ws):
        out, hn = torch.func.functional_call(tm, dict(zip(names, ws)), (x, states(h0)))
        return (out,) + (tuple(hn) if mode == "LSTM" else (hn,))
    if not hasattr(ember, "func") or not hasattr(ember.func, "functional_call"):
        pytest.skip("ember.func.functional_call is not available")
    compare_torch_jvp(ember_fn, torch_fn, x, h0, *weights, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------- forward over reverse
def hvp_check(f, *arrays, eps: float = 1e-6, seed: int = 0) -> None:
    """The tangent of ∇⟨c, f(x)⟩ along v (forward over reverse: the backward's ops carry the tangents) against the
    central difference of the gradient, (∇(x + εv) − ∇(x − εv)) / 2ε, for every float input at once."""
    rng = np.random.default_rng(seed)
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    vs = {i: rng.standard_normal(arrays[i].shape) for i in floats}
    c = ember.tensor(rng.standard_normal(tuple(f(*_leaves(arrays, False)).shape)))

    def grads(shift: float) -> list:
        xs = _leaves([a + shift * vs[i] if i in vs else a for i, a in enumerate(arrays)])
        return [g.numpy() for g in ember.autograd.grad((f(*xs) * c).sum(), [xs[i] for i in floats])]
    numerical = [(p - m) / (2 * eps) for p, m in zip(grads(eps), grads(-eps))]
    xs = _leaves(arrays)
    with fw.dual_level():
        duals = [fw.make_dual(x, ember.tensor(vs[i])) if i in vs else x for i, x in enumerate(xs)]
        gs = ember.autograd.grad((f(*duals) * c).sum(), [xs[i] for i in floats])
        tangents = [fw.unpack_dual(g).tangent for g in gs]
    for i, t, n in zip(floats, tangents, numerical):
        assert t is not None, f"the gradient of input {i} has no tangent"
        np.testing.assert_allclose(t.numpy(), n, rtol=1e-4, atol=1e-6, err_msg=f"Hessian-vector product, input {i}")


_IDX = np.array([[0, 2, 4], [4, 1, 0]])
_CLASS_W = rand(3, seed=2, low=0.5)
_BAG_IDX, _BAG_OFF = np.array([3, 0, 2, 3, 1, 4, 0]), np.array([0, 2, 2, 5])

HVP_CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2) ** 2,
               (rand(2, 4, 5, 5, seed=1), rand(4, 2, 3, 3, seed=2), rand(4, seed=3))),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1) ** 2,
                         (rand(1, 2, 3, 3, seed=1), rand(2, 3, 2, 2, seed=2))),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=1) ** 2, (rand(1, 2, 3, 3, 3, seed=1),
                                                                  rand(2, 2, 2, 2, 2, seed=2), rand(2, seed=3))),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2) ** 2,
                         (rand(1, 2, 2, 2, 2, seed=1), rand(2, 1, 2, 2, 2, seed=2))),
    "linear": (lambda x, w, b: F.linear(x, w, b) ** 2, (rand(2, 3, 4, seed=1), rand(5, 4, seed=2), rand(5, seed=3))),
    "embedding": (lambda w: F.embedding(ember.tensor(_IDX), w, padding_idx=4, scale_grad_by_freq=True) ** 3,
                  (rand(5, 3, seed=1),)),
    "embedding_bag_max": (lambda w: F.embedding_bag(ember.tensor(_BAG_IDX), w, ember.tensor(_BAG_OFF), mode="max") ** 2,
                          (rand(5, 3, seed=1),)),
    "embedding_bag_sum": (lambda w, p: F.embedding_bag(ember.tensor(_BAG_IDX), w, ember.tensor(_BAG_OFF), mode="sum",
                                                       per_sample_weights=p) ** 2,
                          (rand(5, 3, seed=1), rand(7, seed=2))),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1) ** 2, (rand(1, 2, 4, 4, seed=1),)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 1) ** 2, (rand(1, 1, 3, 3, 3, seed=1),)),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 3) ** 2, (rand(2, 2, 7, seed=1),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 1, padding=1) ** 2, (rand(1, 1, 3, 3, 3, seed=1),)),
    "fold_unfold": (lambda x: F.fold(F.unfold(x, 2) ** 2, (3, 4), 2), (rand(1, 2, 3, 4, seed=1),)),
    "pad_interpolate": (lambda x: F.interpolate(F.pad(x, (1, 2), value=0.5), scale_factor=2, mode="linear") ** 2,
                        (rand(1, 2, 3, seed=1),)),
    "cross_entropy": (lambda x: F.cross_entropy(x, ember.tensor(np.array([1, -100, 2, 0])), ember.tensor(_CLASS_W),
                                                label_smoothing=0.2) * F.cross_entropy(x, ember.tensor(
                                                    np.array([0, 1, 1, 2])), reduction="none"), (rand(4, 3, seed=1),)),
    "bce": (lambda x, t: F.binary_cross_entropy(x, t, reduction="none") ** 2,
            (rand(5, seed=1, low=0.1, high=0.9), rand(5, seed=2, low=0, high=1))),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b) ** 2, (rand(3, 4, seed=1), rand(4, seed=2),
                                                                       rand(4, seed=3))),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True) ** 2,
                   (rand(3, 2, 2, seed=1), rand(2, seed=2), rand(2, seed=3))),
    "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v) ** 2,
                  (rand(2, 3, 2, seed=1), rand(2, 4, 2, seed=2), rand(2, 4, 2, seed=3))),
    "gru_layer": (lambda x, h0, *w: rnn_layer("GRU", x, np.array([2, 1]), False, h0, None, *w)[0] ** 2,
                  (rand(3, 2, seed=1), rand(2, 2, seed=2), rand(6, 2, seed=3), rand(6, 2, seed=4), rand(6, seed=5),
                   rand(6, seed=6))),
}


@pytest.mark.parametrize("case", list(HVP_CASES))
def test_hessian_vector_product(case):
    fn, arrays = HVP_CASES[case]
    hvp_check(fn, *arrays)


def _conv_win() -> Win:
    return Win((2, 2), (2, 1), (1, 1), ((1, 0), (0, 1)))


# the adjoint ops that only backward applies, each on its own: op-level gradchecks (forward and reverse)
_ENTRY = np.random.default_rng(0).integers(0, 4, (1, 2, 2, 3)).astype(np.uint8)  # window entry numbers
_PLANE_IDX = np.array([[[0, 3, 3, 5]], [[1, 1, 2, 4]]])  # flat positions in a 2 x 3 plane (repeats add up)
_PLANE_UNIQUE = np.array([[[0, 3, 2, 5]], [[4, 1, 2, 0]]])
ADJOINT_CASES = {
    "ConvWeightGrad": (lambda x, g: ConvWeightGrad.apply(x, g, _conv_win(), 2, (4, 1, 2, 2)),
                       (rand(1, 2, 3, 3, seed=1), rand(1, 4, 2, 3, seed=2))),
    "ChannelSum": (lambda g: ChannelSum.apply(g), (rand(2, 3, 2, 2, seed=1),)),
    "Conv3W": (lambda x, g: Conv3W.apply(x, g, Geom((2, 2, 2), (1, 1, 1), (1, 1, 1), ((0, 0),) * 3, (2, 2, 2)), 1,
                                         (3, 2, 2, 2, 2)), (rand(1, 2, 3, 3, 3, seed=1), rand(1, 3, 2, 2, 2, seed=2))),
    "PoolScatter": (lambda g: PoolScatter.apply(g, _ENTRY, Win((2, 2), (1, 1), (1, 1), ((0, 0), (0, 0))), (3, 4)),
                    (rand(1, 2, 2, 3, seed=1),)),
    "PoolGather": (lambda x: PoolGather.apply(x, _ENTRY, Win((2, 2), (2, 1), (1, 1), ((1, 0), (0, 0))), (3, 4)),
                   (rand(1, 2, 3, 4, seed=1),)),
    "PlaneScatter": (lambda g: PlaneScatter.apply(g, ember.tensor(_PLANE_IDX), (2, 3), False),
                     (rand(2, 3, 4, seed=1),)),
    "PlaneScatter_unique": (lambda g: PlaneScatter.apply(g, ember.tensor(_PLANE_UNIQUE), (2, 3), True),
                            (rand(2, 3, 4, seed=1),)),
    "WindowSumT": (lambda g: WindowSumT.apply(g, 2, 3, 2, (1, 1), 6), (rand(2, 2, 3, seed=1),)),
    "EmbeddingBackward": (lambda g: EmbeddingBackward.apply(g, _IDX, 5, 4, True), (rand(2, 3, 2, seed=1),)),
    "EmbeddingGather": (lambda g: EmbeddingGather.apply(g, _IDX, 4, True), (rand(5, 2, seed=1),)),
    "GatherAt": (lambda x: GatherAt.apply(x, at=(np.array([0, 2, 0]), np.array([1, 1, 1]))), (rand(3, 2, seed=1),)),
    "ScatterAt": (lambda x: ScatterAt.apply(x, at=(np.array([0, 2, 0]), np.array([1, 1, 1])), shape=(3, 2)),
                  (rand(3, seed=1),)),
    "LinearWeightGrad": (lambda g, x: LinearWeightGrad.apply(g, x), (rand(2, 3, 4, seed=1), rand(2, 3, 5, seed=2))),
}


@pytest.mark.parametrize("case", list(ADJOINT_CASES))
def test_adjoint_op_forward_ad(case):
    fn, arrays = ADJOINT_CASES[case]
    xs = _leaves(arrays)
    assert gradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-4, check_forward_ad=True)


# ---------------------------------------------------------------------- forward over forward
def _jvp(f, arrays, tangents, outer=None):
    """f's output tangent along `tangents` at an inner level; with `outer` (tangents of an enclosing level), the
    tangent that the inner tangent carries there: the second directional derivative."""
    lv_out = fw._enter_level() if outer is not None else None
    try:
        xs = _leaves(arrays, False)
        if outer is not None:
            xs = [fw.make_dual(x, ember.tensor(u), level=lv_out) for x, u in zip(xs, outer)]
        lv = fw._enter_level()
        try:
            y = f(*[fw.make_dual(x, ember.tensor(v), level=lv) for x, v in zip(xs, tangents)])
            t = fw.unpack_dual(y, level=lv).tangent
        finally:
            fw._exit_level(lv)
        if outer is None:
            return t.numpy()
        tt = fw.unpack_dual(t, level=lv_out).tangent
        return np.zeros(t.shape) if tt is None else tt.numpy()
    finally:
        if lv_out is not None:
            fw._exit_level(lv_out)


NESTED_CASES = {
    "lstm_layer": (lambda *a: _rnn_case("LSTM", True, seed=2)[0](*a)[0], _rnn_case("LSTM", True, seed=2)[1]),
    "attention": HVP_CASES["attention"],
    "layer_norm": HVP_CASES["layer_norm"],
    "cross_entropy": (lambda x: F.cross_entropy(x, ember.tensor(np.array([1, 0, 2, 2])), label_smoothing=0.1),
                      (rand(4, 3, seed=1),)),
    "max_pool_conv": (lambda x, w: F.max_pool2d(F.conv2d(x, w), 2) ** 2, (rand(1, 1, 5, 5, seed=1),
                                                                         rand(2, 1, 2, 2, seed=2))),
}


@pytest.mark.parametrize("case", list(NESTED_CASES))
def test_forward_over_forward(case):
    """d²f[u, v] from nested levels against the central difference of the first-order jvp along u."""
    fn, arrays = NESTED_CASES[case]
    arrays = [np.asarray(a, np.float64) for a in arrays]
    rng = np.random.default_rng(5)
    u = [rng.standard_normal(a.shape) for a in arrays]
    v = [rng.standard_normal(a.shape) for a in arrays]
    eps = 1e-6
    numerical = (_jvp(fn, [a + eps * d for a, d in zip(arrays, u)], v)
                 - _jvp(fn, [a - eps * d for a, d in zip(arrays, u)], v)) / (2 * eps)
    np.testing.assert_allclose(_jvp(fn, arrays, v, outer=u), numerical, rtol=1e-4, atol=1e-6)
