"""Attention and Transformers (F.scaled_dot_product_attention, nn.MultiheadAttention, nn.Transformer*) and
nn.Embedding's padding_idx / max_norm: parity with PyTorch (weights copied via state_dict), float64 gradchecks,
double backward, bad inputs, seeded dropout."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from ember.autograd import gradcheck, gradgradcheck

from helpers import requires_torch, torch

RNG = np.random.default_rng(7)


def _t(a, grad=True):
    return torch.tensor(a, requires_grad=grad and a.dtype.kind == "f")


def _e(a, grad=True):
    return ember.tensor(a, requires_grad=grad and a.dtype.kind == "f")


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------------- scaled_dot_product_attention
SDPA_CASES = [
    dict(qs=(2, 3, 4, 5), ks=(2, 3, 6, 5), vs=(2, 3, 6, 7)),
    dict(qs=(4, 5), ks=(6, 5), vs=(6, 7), is_causal=True),
    dict(qs=(2, 3, 4, 5), ks=(2, 3, 6, 5), vs=(2, 3, 6, 7), mask="bool"),
    dict(qs=(2, 3, 4, 5), ks=(2, 3, 6, 5), vs=(2, 3, 6, 7), mask="float"),
    dict(qs=(2, 4, 4, 5), ks=(2, 2, 6, 5), vs=(2, 2, 6, 7), enable_gqa=True, scale=0.3),
    dict(qs=(2, 3, 4, 5), ks=(1, 3, 6, 5), vs=(3, 6, 7)),  # broadcast batch dims
    dict(qs=(2, 1, 3, 4, 5), ks=(2, 1, 3, 6, 5), vs=(2, 1, 3, 6, 7), mask="bool", is_causal=False),
]


def _sdpa_mask(kind, shape):
    if kind == "bool":
        m = RNG.random(shape) > 0.4
        m[..., 0] = True
        return m
    if kind == "float":
        return RNG.standard_normal(shape)
    return None


@requires_torch
@pytest.mark.parametrize("case", SDPA_CASES)
def test_sdpa_parity(case):
    arrs = [RNG.standard_normal(case[s]) for s in ("qs", "ks", "vs")]
    m = _sdpa_mask(case.get("mask"), (3, 1, 6) if case.get("mask") == "float" else (case["qs"][-2], 6))
    kw = dict(is_causal=case.get("is_causal", False), scale=case.get("scale"), enable_gqa=case.get("enable_gqa", False))
    T, E = [_t(a) for a in arrs], [_e(a) for a in arrs]
    tm, em = (_t(m), _e(m)) if m is not None else (None, None)
    to = torch.nn.functional.scaled_dot_product_attention(*T, attn_mask=tm, **kw)
    eo = EF.scaled_dot_product_attention(*E, attn_mask=em, **kw)
    _close(to.detach(), eo._data)
    g = RNG.standard_normal(to.shape)
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    for a, b in zip(T, E):
        _close(a.grad, b.grad._data)
    if m is not None and m.dtype.kind == "f":
        _close(tm.grad, em.grad._data)


@requires_torch
def test_sdpa_fully_masked_rows_give_zeros_like_torch():
    q, k, v = (RNG.standard_normal(s) for s in ((2, 4, 5), (2, 6, 5), (2, 6, 3)))
    m = np.ones((4, 6), bool)
    m[1] = False
    T, E = [_t(a) for a in (q, k, v)], [_e(a) for a in (q, k, v)]
    to = torch.nn.functional.scaled_dot_product_attention(*T, attn_mask=_t(m))
    eo = EF.scaled_dot_product_attention(*E, attn_mask=_e(m))
    _close(to.detach(), eo._data)
    assert np.all(eo._data[:, 1] == 0)
    to.sum().backward()
    eo.sum().backward()
    for a, b in zip(T, E):
        _close(a.grad, b.grad._data)


def test_sdpa_is_one_graph_node():
    q, k, v = (ember.randn(2, 3, 4, requires_grad=True) for _ in range(3))
    out = EF.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert type(out.grad_fn).__name__ == "Attention"
    assert all(e is not None for e in out.grad_fn.next[:3])


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_sdpa_gradcheck_and_double_backward(mask):
    q, k, v = (_e(RNG.standard_normal(s)) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3)))
    ins = [q, k, v]
    m = None
    if mask == "bool":
        mm = RNG.random((3, 5)) > 0.3
        mm[:, 0] = True
        m = ember.tensor(mm)
    elif mask == "float":
        m = _e(RNG.standard_normal((1, 3, 5)))
        ins.append(m)

    def f(*xs):
        return EF.scaled_dot_product_attention(xs[0], xs[1], xs[2], attn_mask=xs[3] if len(xs) > 3 else m)

    assert gradcheck(f, ins)
    assert gradgradcheck(f, ins)


def test_sdpa_double_backward_fully_masked_row_is_finite():
    q, k, v = (_e(RNG.standard_normal(s)) for s in ((3, 4), (5, 4), (5, 2)))
    m = np.ones((3, 5), bool)
    m[0] = False
    out = EF.scaled_dot_product_attention(q, k, v, attn_mask=ember.tensor(m))
    (gq,) = ember.autograd.grad((out * out).sum(), q, create_graph=True)
    gq.sum().backward()
    assert np.isfinite(q.grad._data).all() and np.isfinite(k.grad._data).all()


def test_sdpa_dropout_reproducible_by_seed():
    q, k, v = (ember.randn(2, 6, 4) for _ in range(3))
    ember.manual_seed(3)
    a = EF.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    ember.manual_seed(3)
    b = EF.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    c = EF.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a._data, b._data)
    assert not np.array_equal(a._data, c._data)
    assert not np.allclose(a._data, EF.scaled_dot_product_attention(q, k, v)._data)


def test_sdpa_bad_inputs():
    q, k, v = ember.randn(2, 4, 8), ember.randn(2, 5, 8), ember.randn(2, 5, 6)
    f = EF.scaled_dot_product_attention
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        f(q, k, v, attn_mask=ember.ones(4, 5, dtype=ember.bool), is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask of shape \\[4, 4\\]"):
        f(q, k, v, attn_mask=ember.ones(4, 4, dtype=ember.bool))
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        f(q, k, v, attn_mask=ember.ones(4, 5, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="key and value must have the same sequence length"):
        f(q, k, v[:, :4])
    with pytest.raises(RuntimeError, match="query and key must have the same feature size"):
        f(q, k[..., :7], v)
    with pytest.raises(RuntimeError, match="same dtype"):
        f(q, k, v.double())
    with pytest.raises(RuntimeError, match="batch dims"):
        f(ember.randn(3, 4, 8), k, v)
    with pytest.raises(RuntimeError, match="enable_gqa"):
        f(ember.randn(1, 3, 4, 8), ember.randn(1, 2, 5, 8), ember.randn(1, 2, 5, 8), enable_gqa=True)
    with pytest.raises(ValueError, match="dropout probability"):
        f(q, k, v, dropout_p=1.5)


# ---------------------------------------------------------------------- MultiheadAttention
def _load(em, tm):
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert list(em.state_dict()) == list(tm.state_dict())


def _check_module(tm, em, inputs, kw_t=None, kw_e=None, weights=False):
    """Outputs (and attention weights), input and parameter gradients for random cotangents."""
    _load(em, tm)
    tm.eval()
    em.eval()
    T, E = [_t(a) for a in inputs], [_e(a) for a in inputs]
    ro, re = tm(*T, **(kw_t or {})), em(*E, **(kw_e or {}))
    (to, tw), (eo, ew) = (ro, re) if weights else ((ro, None), (re, None))
    _close(to.detach(), eo._data)
    g = RNG.standard_normal(to.shape)
    lt, le = (to * torch.tensor(g)).sum(), (eo * ember.tensor(g)).sum()
    if tw is not None:
        _close(tw.detach(), ew._data)
        gw = RNG.standard_normal(tw.shape)
        lt, le = lt + (tw * torch.tensor(gw)).sum(), le + (ew * ember.tensor(gw)).sum()
    else:
        assert ew is None
    lt.backward()
    le.backward()
    for a, b in zip(T, E):
        _close(a.grad, b.grad._data)
    ep = dict(em.named_parameters())
    for n, p in tm.named_parameters():
        _close(p.grad, ep[n].grad._data, 1e-9)


MHA_CFGS = [dict(), dict(batch_first=True), dict(add_bias_kv=True, add_zero_attn=True), dict(kdim=5, vdim=3),
            dict(bias=False)]


@requires_torch
@pytest.mark.parametrize("cfg", MHA_CFGS)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", [False, True])
def test_mha_parity(cfg, need_weights, masks):
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **cfg)
    em = ember.nn.MultiheadAttention(8, 2, dtype=ember.float64, **cfg)
    sh = (lambda n: (2, n)) if cfg.get("batch_first") else (lambda n: (n, 2))
    x = RNG.standard_normal(sh(3) + (8,))
    k = RNG.standard_normal(sh(4) + (cfg.get("kdim", 8),))
    v = RNG.standard_normal(sh(4) + (cfg.get("vdim", 8),))
    kw = dict(need_weights=need_weights, average_attn_weights=not masks)
    kt, ke = dict(kw), dict(kw)
    if masks:  # a bool attn_mask and a float key_padding_mask, no row fully masked
        am = RNG.random((3, 4)) > 0.6
        am[:, 1] = False
        kp = np.where(RNG.random((2, 4)) > 0.6, -np.inf, 0.0)
        kp[:, 1] = 0
        kt.update(attn_mask=_t(am), key_padding_mask=_t(kp, False))
        ke.update(attn_mask=_e(am), key_padding_mask=_e(kp, False))
    _check_module(tm, em, [x, k, v], kt, ke, weights=True)


@requires_torch
def test_mha_self_attention_unbatched_and_3d_mask():
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    em = ember.nn.MultiheadAttention(8, 2, dtype=ember.float64)
    x = RNG.standard_normal((3, 8))
    _load(em, tm)
    for nw in (True, False):
        tx, ex = _t(x), _e(x)
        to, tw = tm(tx, tx, tx, need_weights=nw)
        eo, ew = em(ex, ex, ex, need_weights=nw)
        _close(to.detach(), eo._data)
        to.sum().backward()
        eo.sum().backward()
        _close(tx.grad, ex.grad._data)
    m = RNG.standard_normal((4, 3, 3))
    x3 = RNG.standard_normal((3, 2, 8))
    _check_module(tm, em, [x3, x3, x3], dict(attn_mask=_t(m, False)), dict(attn_mask=_e(m, False)), weights=True)


def test_mha_init_and_names():
    ember.manual_seed(0)
    m = ember.nn.MultiheadAttention(16, 4)
    assert m.in_proj_weight.shape == (48, 16) and m.q_proj_weight is None
    assert np.all(m.in_proj_bias._data == 0) and np.all(m.out_proj.bias._data == 0)
    bound = np.sqrt(6 / (48 + 16))
    assert np.abs(m.in_proj_weight._data).max() <= bound and np.abs(m.in_proj_weight._data).max() > 0.9 * bound
    assert isinstance(m.out_proj, ember.nn.Linear)
    m2 = ember.nn.MultiheadAttention(16, 4, kdim=3, vdim=5, add_bias_kv=True)
    assert [n for n, _ in m2.named_parameters()] == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                     "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                                     "out_proj.bias"]


def test_mha_fully_masked_rows():
    m = ember.nn.MultiheadAttention(8, 2)
    x = ember.randn(3, 2, 8)
    kp = np.zeros((2, 3), bool)
    kp[0] = True
    out, _ = m(x, x, x, key_padding_mask=ember.tensor(kp), need_weights=False)
    np.testing.assert_array_equal(out._data[:, 0], 0)  # the fused path: zeros, as PyTorch's SDPA
    out, w = m(x, x, x, key_padding_mask=ember.tensor(kp))
    assert np.isnan(out._data[:, 0]).all() and np.isfinite(out._data[:, 1]).all()  # the explicit path: NaN, as PyTorch


def test_mha_dropout_reproducible_by_seed():
    m = ember.nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ember.randn(4, 2, 8)
    for nw in (True, False):
        ember.manual_seed(1)
        a = m(x, x, x, need_weights=nw)[0]
        ember.manual_seed(1)
        b = m(x, x, x, need_weights=nw)[0]
        np.testing.assert_array_equal(a._data, b._data)
        m.eval()
        c = m(x, x, x, need_weights=nw)[0]
        m.train()
        assert not np.allclose(a._data, c._data)


def test_mha_gradcheck():
    m = ember.nn.MultiheadAttention(4, 2, dtype=ember.float64, add_bias_kv=True)
    q, k = _e(RNG.standard_normal((3, 1, 4))), _e(RNG.standard_normal((2, 1, 4)))
    params = list(m.parameters())
    for nw in (True, False):
        assert gradcheck(lambda q, k, *ps: m(q, k, k, need_weights=nw)[0], [q, k] + params)


def test_mha_bad_inputs():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        ember.nn.MultiheadAttention(8, 3)
    m = ember.nn.MultiheadAttention(8, 2)
    x = ember.randn(3, 2, 8)
    with pytest.raises(AssertionError, match="key shape .* does not match value shape"):
        m(x, x[:2], x)
    with pytest.raises(AssertionError, match="key_padding_mask shape"):
        m(x, x, x, key_padding_mask=ember.ones(2, 4, dtype=ember.bool))
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=ember.ones(2, 3, dtype=ember.bool))
    with pytest.raises(RuntimeError, match="3D attn_mask"):
        m(x, x, x, attn_mask=ember.ones(5, 3, 3, dtype=ember.bool))
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
        m(x, x, x, attn_mask=ember.ones(3, 3, dtype=ember.int64))
    with pytest.raises(AssertionError, match="only bool and floating types of key_padding_mask"):
        m(x, x, x, key_padding_mask=ember.ones(2, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="embedding dimension of 8, but got 4"):
        m(x[..., :4], x, x)
    with pytest.raises(AssertionError, match="same batch size"):
        m(x, ember.randn(3, 3, 8), ember.randn(3, 3, 8))


# ---------------------------------------------------------------------- Transformer layers
TF_CFGS = [dict(), dict(batch_first=True, norm_first=True, activation="gelu"), dict(activation=torch.nn.functional.gelu
           if torch is not None else None, bias=False)]


def _ember_cfg(cfg):
    c = dict(cfg)
    if callable(c.get("activation")):
        c["activation"] = EF.gelu
    return c


@requires_torch
@pytest.mark.parametrize("cfg", TF_CFGS)
def test_transformer_encoder_parity(cfg):
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, dtype=torch.float64, **cfg)
    el = ember.nn.TransformerEncoderLayer(8, 2, 16, dtype=ember.float64, **_ember_cfg(cfg))
    te = torch.nn.TransformerEncoder(tl, 2, torch.nn.LayerNorm(8, dtype=torch.float64), enable_nested_tensor=False)
    ee = ember.nn.TransformerEncoder(el, 2, ember.nn.LayerNorm(8, dtype=ember.float64))
    assert "layers.1.self_attn.in_proj_weight" in ee.state_dict()
    assert ee.layers[0].linear1.weight is not ee.layers[1].linear1.weight
    x = RNG.standard_normal((3, 4, 8))
    _check_module(te, ee, [x])
    L = 4 if cfg.get("batch_first") else 3
    mt = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    me = ember.nn.Transformer.generate_square_subsequent_mask(L, dtype=ember.float64)
    _close(mt, me._data)
    kp = np.zeros((4 if not cfg.get("batch_first") else 3, L), bool)
    kp[:, -1] = True
    _check_module(te, ee, [x], dict(mask=mt, src_key_padding_mask=_t(kp), is_causal=True),
                  dict(mask=me, src_key_padding_mask=_e(kp), is_causal=True))


@requires_torch
@pytest.mark.parametrize("cfg", TF_CFGS[:2])
def test_transformer_parity(cfg):
    tm = torch.nn.Transformer(8, 2, 2, 2, 16, dtype=torch.float64, **cfg)
    em = ember.nn.Transformer(8, 2, 2, 2, 16, dtype=ember.float64, **_ember_cfg(cfg))
    bf = cfg.get("batch_first", False)
    src = RNG.standard_normal((4, 3, 8) if bf else (3, 4, 8))
    tgt = RNG.standard_normal((4, 5, 8) if bf else (5, 4, 8))
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    emask = ember.nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    mkp = np.zeros((4, 3), bool)
    mkp[1, 0] = True
    _check_module(tm, em, [src, tgt], dict(tgt_mask=tmask, memory_key_padding_mask=_t(mkp), tgt_is_causal=True),
                  dict(tgt_mask=emask, memory_key_padding_mask=_e(mkp), tgt_is_causal=True))


def test_transformer_init_and_errors():
    m = ember.nn.Transformer(8, 2, 1, 1, 16)
    w = m.encoder.layers[0].linear1.weight._data
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16))
    assert m.generate_square_subsequent_mask(3).dtype == ember.float32
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        m(ember.randn(3, 2, 8), ember.randn(3, 3, 8))
    with pytest.raises(RuntimeError, match="feature number of src and tgt must be equal to d_model"):
        m(ember.randn(3, 2, 8), ember.randn(3, 2, 6))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        ember.nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(AssertionError, match="d_model=8"):
        ember.nn.TransformerEncoderLayer(8, 2)(ember.randn(3, 2, 6))


def test_transformer_dropout_reproducible_by_seed():
    layer = ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3)
    x = ember.randn(5, 2, 8)
    ember.manual_seed(4)
    a = layer(x)
    ember.manual_seed(4)
    b = layer(x)
    np.testing.assert_array_equal(a._data, b._data)
    layer.eval()
    assert not np.allclose(a._data, layer(x)._data)


def test_encoder_layer_gradcheck():
    layer = ember.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, dtype=ember.float64, norm_first=True)
    x = _e(RNG.standard_normal((3, 1, 4)))
    assert gradcheck(lambda x, *ps: layer(x), [x] + list(layer.parameters()))


# ---------------------------------------------------------------------- Embedding padding_idx / max_norm
@requires_torch
@pytest.mark.parametrize("padding_idx", [2, -1])
def test_embedding_padding_idx_parity(padding_idx):
    te = torch.nn.Embedding(6, 3, padding_idx=padding_idx, dtype=torch.float64)
    ee = ember.nn.Embedding(6, 3, padding_idx=padding_idx, dtype=ember.float64)
    assert ee.padding_idx == te.padding_idx
    assert np.all(ee.weight._data[ee.padding_idx] == 0)
    _load(ee, te)
    idx = np.array([[0, 2, 5, 2], [5, 1, 2, 0]])
    to, eo = te(torch.tensor(idx)), ee(ember.tensor(idx))
    g = RNG.standard_normal(to.shape)
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    _close(te.weight.grad, ee.weight.grad._data)
    assert np.all(ee.weight.grad._data[ee.padding_idx] == 0)


@requires_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalises_in_place(norm_type):
    w = RNG.standard_normal((6, 4)) * 2
    idx = np.array([1, 3, 3, 0])
    tw, ew = torch.tensor(w, requires_grad=True), _e(w)
    to = torch.nn.functional.embedding(torch.tensor(idx), tw, max_norm=1.5, norm_type=norm_type)
    eo = EF.embedding(ember.tensor(idx), ew, max_norm=1.5, norm_type=norm_type)
    _close(to.detach(), eo._data)
    _close(tw.detach(), ew._data)  # the used rows of the weight itself were rescaled
    assert np.array_equal(ew._data[[2, 4, 5]], w[[2, 4, 5]])
    g = RNG.standard_normal(to.shape)
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    _close(tw.grad, ew.grad._data)


@requires_torch
def test_functional_multi_head_attention_forward_parity():
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    x = RNG.standard_normal((3, 2, 8))
    w = [getattr(tm, n).detach().numpy() for n in ("in_proj_weight", "in_proj_bias")]
    ow = [tm.out_proj.weight.detach().numpy(), tm.out_proj.bias.detach().numpy()]

    def run(F, mk):
        return F.multi_head_attention_forward(mk(x), mk(x), mk(x), 8, 2, mk(w[0]), mk(w[1]), None, None, False, 0.0,
                                              mk(ow[0]), mk(ow[1]), training=False)

    (to, tw), (eo, ew) = run(torch.nn.functional, torch.tensor), run(EF, ember.tensor)
    _close(to, eo._data)
    _close(tw, ew._data)


# ---------------------------------------------------------------------- CUDA (a real GPU, or tests/_fakecuda.py)
# (the `cuda` fixture is in conftest.py)

def _xd(*shape, seed=0, grad=True):
    """A float64 CPU input drawn from a fixed seed."""
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=ember.float64, requires_grad=grad)


def _run_on(m, xs, call, dev):
    """Inputs copied to `dev` (those that require grad keep doing so), forward, backward of a random linear
    function of every float output; host copies of outputs, input grads and parameter grads (all present)."""
    ins = [None if x is None else x.detach().to(dev).requires_grad_(x.requires_grad) for x in xs]
    outs = [o for o in call(m, *ins) if o is not None]
    assert all(o.device.type == ember.device(dev).type for o in outs)
    loss = 0
    for i, o in enumerate(outs):
        cot = np.random.default_rng(100 + i).standard_normal(tuple(o.shape))
        loss = loss + (o * ember.tensor(cot, dtype=o.dtype, device=dev)).sum()
    loss.backward()
    pg = {n: p.grad for n, p in m.named_parameters()}
    for n, g in pg.items():
        assert g is not None and g.device.type == ember.device(dev).type, (n, dev)
    return ([o.detach().cpu().numpy() for o in outs],
            [x.grad.cpu().numpy() for x in ins if x is not None and x.requires_grad],
            {n: g.cpu().numpy() for n, g in pg.items()})


def _cpu_cuda_parity(make, xs, call, tol=1e-12):
    """Seeded module: same outputs and gradients on the CPU and, after .cuda(), on CUDA."""
    ember.manual_seed(0)
    m = make()
    ref = _run_on(m, xs, call, "cpu")
    m.zero_grad()
    m.cuda()
    got = _run_on(m, xs, call, "cuda")
    assert len(ref[0]) == len(got[0]) and len(ref[1]) == len(got[1])
    for a, b in zip(ref[0] + ref[1], got[0] + got[1]):
        assert a.shape == b.shape
        _close(b, a, tol)
    assert ref[2].keys() == got[2].keys()
    for n in ref[2]:
        np.testing.assert_allclose(got[2][n], ref[2][n], rtol=tol, atol=tol, err_msg=n)


def _bool(a, seed):
    """A fixed random bool mask (True = masked out) with every row keeping at least column 0."""
    m = np.random.default_rng(seed).random(a) > 0.6
    m[..., 0] = False
    return ember.tensor(m)


@pytest.mark.parametrize("variant", ["plain", "bool_masks", "float_mask", "kdim_bias_kv_zero_attn", "per_head"])
def test_mha_cuda_matches_cpu(cuda, variant):
    kw = dict(dtype=ember.float64, batch_first=True)
    q, k = _xd(2, 3, 8), _xd(2, 4, 8, seed=1)
    v = _xd(2, 4, 8, seed=2)
    xs, fkw = [q, k, v, None, None], {}
    if variant == "bool_masks":
        xs[3:] = [_bool((3, 4), 3), _bool((2, 4), 4)]
    elif variant == "float_mask":
        xs[3] = _xd(3, 4, seed=3, grad=False)
    elif variant == "kdim_bias_kv_zero_attn":
        kw.update(kdim=5, vdim=6, add_bias_kv=True, add_zero_attn=True)
        xs[1:3] = [_xd(2, 4, 5, seed=1), _xd(2, 4, 6, seed=2)]
        xs[4] = _bool((2, 4), 4)
    else:
        fkw = dict(average_attn_weights=False)
        xs[3] = _bool((2 * 2, 3, 4), 3)

    def call(m, q, k, v, am, kpm):
        return list(m(q, k, v, attn_mask=am, key_padding_mask=kpm, **fkw))

    _cpu_cuda_parity(lambda: ember.nn.MultiheadAttention(8, 2, **kw), xs, call)


def test_sdpa_cuda_matches_cpu(cuda):
    q, k, v = _xd(2, 2, 3, 4), _xd(2, 2, 5, 4, seed=1), _xd(2, 2, 5, 4, seed=2)
    outs = {}
    for dev in ("cpu", "cuda"):
        ins = [t.detach().to(dev).requires_grad_() for t in (q, k, v)]
        o1 = EF.scaled_dot_product_attention(*ins, attn_mask=_bool((3, 5), 3).to(dev))
        o2 = EF.scaled_dot_product_attention(*ins, is_causal=True, scale=0.3)
        (o1 * 2 + o2 * o2).sum().backward()
        assert o1.is_cuda == (dev == "cuda")
        outs[dev] = [t.detach().cpu().numpy() for t in [o1, o2] + [i.grad for i in ins]]
    for a, b in zip(outs["cpu"], outs["cuda"]):
        _close(b, a, 1e-12)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_cuda_matches_cpu(cuda, norm_first):
    def make():
        layer = ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first,
                                                 dtype=ember.float64)
        return ember.nn.TransformerEncoder(layer, 2, norm=ember.nn.LayerNorm(8, dtype=ember.float64),
                                           enable_nested_tensor=False)

    def call(m, src, kpm):
        mask = ember.nn.Transformer.generate_square_subsequent_mask(4, device=src.device, dtype=ember.float64)
        assert mask.device == src.device
        return [m(src, mask=mask, src_key_padding_mask=kpm)]

    _cpu_cuda_parity(make, [_xd(3, 4, 8), _bool((3, 4), 5)], call)


def test_transformer_decoder_cuda_matches_cpu(cuda):
    def make():
        layer = ember.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu", dtype=ember.float64)
        return ember.nn.TransformerDecoder(layer, 2)

    def call(m, tgt, mem, mkpm):
        mask = ember.nn.Transformer.generate_square_subsequent_mask(3, device=tgt.device, dtype=ember.float64)
        return [m(tgt, mem, tgt_mask=mask, memory_key_padding_mask=mkpm, tgt_is_causal=True)]

    _cpu_cuda_parity(make, [_xd(3, 2, 8), _xd(5, 2, 8, seed=1), _bool((2, 5), 6)], call)


def test_transformer_cuda_matches_cpu(cuda):
    def call(m, src, tgt):
        mask = m.generate_square_subsequent_mask(4, device=tgt.device, dtype=ember.float64)
        return [m(src, tgt, tgt_mask=mask)]

    _cpu_cuda_parity(lambda: ember.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, dtype=ember.float64),
                     [_xd(5, 2, 8), _xd(4, 2, 8, seed=1)], call)


def test_attention_mixed_devices_raise(cuda):
    m = ember.nn.MultiheadAttention(8, 2).cuda()
    q = ember.randn(3, 2, 8, device="cuda")
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(q, q, q, attn_mask=ember.zeros(3, 3))
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(q, q, q, key_padding_mask=ember.zeros(2, 3, dtype=ember.bool))
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(ember.randn(3, 2, 8), ember.randn(3, 2, 8), ember.randn(3, 2, 8))
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        EF.scaled_dot_product_attention(q, q, q, attn_mask=ember.zeros(2, 2, dtype=ember.bool))
