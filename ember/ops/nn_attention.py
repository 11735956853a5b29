"""Scaled dot-product attention as one fused op (PyTorch's `F.scaled_dot_product_attention`).

    S = q·kᵀ·scale + M,   P = softmax(S) along the keys,   out = (P ⊙ D)·v

for q (..., L, E), k (..., S, E), v (..., S, Ev), an additive mask M (a bool mask becomes 0 / −inf) and a dropout
mask D (keep/(1 − p), or none). The whole computation is one graph node: forward keeps P (and P ⊙ D) and backward is
the closed form

    gv = (P ⊙ D)ᵀ·g,   gP = (g·vᵀ) ⊙ D,   gS = P ⊙ (gP − Σ_keys gP ⊙ P),   gq = gS·k·scale,   gk = gSᵀ·q·scale,
    gM = gS,

with the softmax backward fused into the product. A row whose keys are all masked out gives P = 0 there (an output of
zeros and zero gradients), as PyTorch's CPU kernels do. `backward` builds these formulas from ember ops (P recomputed,
so they differentiate again); `fast_backward`, used when no graph of the backward is wanted, computes them on the arrays.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from .._tensor import Tensor, make
from ..autograd import forward_ad
from ..autograd.function import Op
from ..autograd.grad_mode import MODE
from .arithmetic import ones_vector, sum_array, sum_to, where
from .linalg import matmul
from .nn_activation import check_dropout_p, dropout_mask, dropout, softmax
from .nn_misc import linear
from .shape import cat
from .._capture import traced
from .. import _dtype as dt

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def _t(a):
    return a.swapaxes(-1, -2)  # the method: works on NumPy and CuPy arrays alike


def _rowsum(a: np.ndarray) -> np.ndarray:
    """Σ over the last axis, kept as a size-1 axis: one GEMV with a ones vector (NumPy's sum of short rows is slow)."""
    if a.__class__ is np.ndarray and dt.is_float(a.dtype) and a.dtype.itemsize >= 4 and a.flags.c_contiguous and a.size:
        n = a.shape[-1]
        return (a.reshape(-1, n) @ ones_vector(n, a.dtype)).reshape(a.shape[:-1] + (1,))
    return a.sum(-1, keepdims=True)


def _reduce_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """a (a broadcast result) summed back to `shape`."""
    if a.shape == shape:
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and a.shape[i + lead] != 1)
    return sum_array(a, axes, True).reshape(shape)


class Attention(Op):
    """out = (softmax(q·kᵀ·scale + mask) ⊙ drop)·v; mask (additive, a Tensor or a constant array) and drop (a
    constant array) may be None. See the module docstring for the gradients."""

    def forward(self, q, k, v, mask, drop, scale):
        s = np.matmul(q, _t(k))
        s *= scale
        if mask is not None:
            s += mask
        m = s.max(-1, keepdims=True)
        dead = None
        if mask is not None:
            dead = m == -np.inf
            if dead.any():
                m[dead] = 0  # exp(-inf - 0) = 0 over the whole row: P = 0 there
            else:
                dead = None
        s -= m
        np.exp(s, out=s)
        d = _rowsum(s)
        if dead is not None:
            d[dead] = 1
        s /= d
        self.p, self.dead = s, dead
        self.pd = pd = s if drop is None else s * drop
        return np.matmul(pd, v)

    def backward(self, gz, q, k, v, mask, drop, scale):
        """With S = q·kᵀ·scale + M, P = softmax(S) along the keys (0 on rows whose keys are all masked) and D the
        dropout mask:

            gv = (P ⊙ D)ᵀ·g,   gP = (g·vᵀ) ⊙ D,   gS = P ⊙ (gP − Σ_keys gP ⊙ P),
            gq = gS·k·scale,   gk = gSᵀ·q·scale,   gM = gS,

        each summed back to its input's shape (broadcast batch dims). P is recomputed from q, k and M by ember ops,
        so the gradients differentiate again."""
        p = self._probs(q, k, mask, scale)
        dm = None if drop is None else make(drop)
        pd = p if dm is None else p * dm
        gq = gk = gv = gm = None
        if self.needs(2):
            gv = sum_to(matmul(pd.transpose(-2, -1), gz), v.shape)
        if self.needs(0) or self.needs(1) or self.needs(3):
            gp = matmul(gz, v.transpose(-2, -1))
            if dm is not None:
                gp = gp * dm
            gs = p * (gp - (gp * p).sum(-1, keepdim=True))
            if self.needs(3):
                gm = sum_to(gs, mask.shape)
            if self.needs(0):
                gq = sum_to(matmul(gs, k) * scale, q.shape)
            if self.needs(1):
                gk = sum_to(matmul(gs.transpose(-2, -1), q) * scale, k.shape)
        return gq, gk, gv, gm, None, None

    def _probs(self, q: Tensor, k: Tensor, mask, scale: float) -> Tensor:
        """P = softmax(q·kᵀ·scale + M) from ember ops (0 on rows whose keys are all masked), as a function of q, k
        and M that differentiates again."""
        s = matmul(q, k.transpose(-2, -1)) * scale
        if mask is not None:
            s = s + (mask if isinstance(mask, Tensor) else make(mask))
        dead = self.dead
        if dead is not None:  # fully masked rows: keep them finite (and their derivatives zero) instead of NaN
            live = make(backend.array_module(dead).broadcast_to(~dead, s.shape))
            s = where(live, s, 0.0)
        p = softmax(s, -1)
        return p if dead is None else where(live, p, 0.0)

    def jvp(self, t, q, k, v, mask, drop, scale):
        """With S' = (q'·kᵀ + q·k'ᵀ)·scale + M' and P' = P ⊙ (S' − Σ_keys P ⊙ S') (softmax's derivative):

            out' = (P' ⊙ D)·v + (P ⊙ D)·v'."""
        tq, tk, tv, tm = t[:4]
        p = self._probs(q, k, mask, scale)
        dm = None if drop is None else make(drop)
        ds = matmul(tq, k.transpose(-2, -1)) * scale if isinstance(tq, Tensor) else 0
        if isinstance(tk, Tensor):
            ds = ds + matmul(q, tk.transpose(-2, -1)) * scale
        if isinstance(tm, Tensor):
            ds = ds + tm
        z = 0
        if isinstance(ds, Tensor):
            dp = p * (ds - (p * ds).sum(-1, keepdim=True))
            z = matmul(dp if dm is None else dp * dm, v)
        if isinstance(tv, Tensor):
            z = z + matmul(p if dm is None else p * dm, tv)
        return z

    def fast_backward(self, gz, q, k, v, mask, drop, scale):
        """backward's formulas on the arrays, from the P and P ⊙ D that forward kept (backward recomputes P from
        q, k and the mask), with the softmax backward fused in place."""
        g, p, pd = gz._data, self.p, self.pd
        qa, ka, va = q._data, k._data, v._data
        gq = gk = gv = gm = None
        if self.needs(2):
            gv = make(_reduce_to(np.matmul(_t(pd), g), va.shape))
        if not (self.needs(0) or self.needs(1) or self.needs(3)):
            return gq, gk, gv, gm, None, None
        gs = np.matmul(g, _t(va))
        if drop is not None:
            gs *= drop
        r = gs * p
        gs = p * _rowsum(r)
        np.subtract(r, gs, out=gs)  # P ⊙ (gP − Σ gP ⊙ P)
        if self.needs(3):
            gm = make(_reduce_to(gs.copy() if self.needs(0) or self.needs(1) else gs, mask.shape))
        gs *= scale
        if self.needs(0):
            gq = make(_reduce_to(np.matmul(gs, ka), qa.shape))
        if self.needs(1):
            gk = make(_reduce_to(np.matmul(_t(gs), qa), ka.shape))
        return gq, gk, gv, gm, None, None


def _dtype_name(d) -> str:
    return {np.float32: "float", np.float64: "double", np.float16: "half", np.int64: "long int", np.int32: "int",
            np.bool_: "bool"}.get(np.dtype(d).type, str(np.dtype(d)))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query·keyᵀ·scale + mask)·value over any leading batch dims (broadcast): query (..., L, E), key
    (..., S, E), value (..., S, Ev) -> (..., L, Ev).

    attn_mask: bool (True = the key takes part) or float (added to the scores), broadcastable to (..., L, S).
    is_causal: query i attends to keys 0..i (top-left aligned); not allowed together with attn_mask.
    scale: defaults to 1/√E. dropout_p: dropout on the attention probabilities (always applied when > 0, as in
    PyTorch; pass 0 in eval mode). enable_gqa: key/value may have fewer heads (dim -3) than query, each shared by
    a group of query heads. Rows with every key masked out give zeros.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
        if t.dim() < 2:
            raise RuntimeError(f"scaled_dot_product_attention(): {name} must have at least 2 dimensions "
                               f"(..., seq, features), got shape {list(t.shape)}")
    backend.check_same_device("scaled_dot_product_attention", [query._data, key._data, value._data] + (
        [attn_mask._data] if isinstance(attn_mask, Tensor) else []))
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        query, key, value, attn_mask = cast_args(Attention, query, key, value, attn_mask)
    qd = query._data.dtype
    if key._data.dtype != qd or value._data.dtype != qd:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_dtype_name(qd)} key.dtype: {_dtype_name(key._data.dtype)} and value.dtype: "
                           f"{_dtype_name(value._data.dtype)} instead.")
    if not dt.is_float(qd):
        raise RuntimeError(f"scaled_dot_product_attention(): expected floating-point query, key and value, got "
                           f"{_dtype_name(qd)}")
    p = check_dropout_p(dropout_p, "scaled_dot_product_attention")
    qs, ks, vs = query.shape, key.shape, value.shape
    if ks[-1] != qs[-1]:
        raise RuntimeError(f"scaled_dot_product_attention(): query and key must have the same feature size (last "
                           f"dim), got query {list(qs)} and key {list(ks)}")
    if vs[-2] != ks[-2]:
        raise RuntimeError(f"scaled_dot_product_attention(): key and value must have the same sequence length "
                           f"(dim -2), got key {list(ks)} and value {list(vs)}")
    if enable_gqa and len(qs) >= 3 and len(ks) >= 3 and ks[-3] != qs[-3]:
        hq, hk = qs[-3], ks[-3]
        if hk != vs[-3] or hq % hk:
            raise RuntimeError(f"scaled_dot_product_attention(): with enable_gqa the query heads (dim -3, {hq}) "
                               f"must be a multiple of the key/value heads ({hk} and {vs[-3]})")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hk)
        ks, vs = key.shape, value.shape
    try:
        batch = np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    except ValueError:
        raise RuntimeError(f"scaled_dot_product_attention(): the batch dims of query {list(qs)}, key {list(ks)} and "
                           f"value {list(vs)} do not broadcast") from None
    s_shape = batch + (qs[-2], ks[-2])
    mask = None
    if attn_mask is not None:
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): attn_mask must be Tensor or None, not "
                            f"{type(attn_mask).__name__}")
        md = attn_mask._data.dtype
        if md != np.bool_ and md != qd:
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {_dtype_name(md)} and  query.dtype: {_dtype_name(qd)} instead.")
        try:
            ok = np.broadcast_shapes(attn_mask.shape, s_shape) == s_shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"scaled_dot_product_attention(): attn_mask of shape {list(attn_mask.shape)} does not "
                               f"broadcast to the attention scores' shape {list(s_shape)} (..., L, S)")
        if md == np.bool_:
            mask = backend.array_module(attn_mask._data).where(attn_mask._data, qd.type(0), qd.type(-np.inf))
        else:
            # a Tensor input where it has a derivative (it requires grad or carries a forward-AD tangent)
            differentiable = attn_mask._requires_grad or (MODE.fw and forward_ad.is_dual(attn_mask))
            mask = attn_mask if differentiable else attn_mask._data
    elif is_causal:
        am = backend.array_module(query._data)
        mask = am.where(am.tri(qs[-2], ks[-2], dtype=bool), qd.type(0), qd.type(-np.inf))
    dev = backend.CPU if query._data.__class__ is np.ndarray else backend.device_of(query._data)
    drop = dropout_mask(s_shape, p, qd, dev) if p > 0 else None
    sc = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    return Attention.apply(query, key, value, mask, drop, sc)


def _repeat_heads(t: Tensor, n: int) -> Tensor:
    """t (..., H, S, E) with each head repeated n times in place: (..., H·n, S, E) (repeat_interleave on dim -3)."""
    s = t.shape
    return t.unsqueeze(-3).expand(*s[:-2], n, *s[-2:]).reshape(*s[:-3], s[-3] * n, *s[-2:])


# ---------------------------------------------------------------------- multi-head attention
def _float_mask(mask: Tensor | None, name: str, dtype) -> np.ndarray | None:
    """A bool (True = masked out) or float mask as an additive array of `dtype` (PyTorch's _canonical_mask)."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"multi_head_attention_forward(): {name} must be Tensor or None, not {type(mask).__name__}")
    m = mask._data
    if m.dtype == np.bool_:
        return backend.array_module(m).where(m, dtype.type(-np.inf), dtype.type(0))
    if not dt.is_float(m.dtype):
        raise AssertionError(f"only bool and floating types of {name} are supported, got {_dtype_name(m.dtype)}")
    return m.astype(dtype, copy=False)


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight, out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None, use_separate_proj_weight: bool = False,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
    """`nn.MultiheadAttention`'s computation on explicit weights, inputs (L, N, E) or unbatched (L, E)
    (PyTorch's F.multi_head_attention_forward; static_k/static_v are not supported)."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward(): static_k/static_v are not supported by ember")
    return multi_head_attention(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
                                 key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
                                 k_proj_weight, v_proj_weight, average_attn_weights, is_causal, False)


def multi_head_attention(query, key, value, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
                          add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True,
                          key_padding_mask=None, need_weights=True, attn_mask=None, use_separate_proj_weight=False,
                          q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, average_attn_weights=True,
                          is_causal=False, batch_first=False) -> tuple:
    """multi_head_attention_forward with a batch_first layout option; computed internally as (N, L, E)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"MultiheadAttention: {name} must be Tensor, not {type(t).__name__}")
    nd = query.dim()
    if nd not in (2, 3) or key.dim() != nd or value.dim() != nd:
        raise AssertionError(f"MultiheadAttention: query, key and value must all be 3-D (batched) or all 2-D "
                             f"(unbatched), got query {list(query.shape)}, key {list(key.shape)} and value "
                             f"{list(value.shape)}")
    if not dt.is_float(query._data.dtype):
        raise RuntimeError(f"MultiheadAttention: expected a floating-point query, got {_dtype_name(query._data.dtype)}")
    if key.shape[:-1] != value.shape[:-1]:
        raise AssertionError(f"key shape {list(key.shape)} does not match value shape {list(value.shape)}")
    if query.shape[-1] != embed_dim:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim}, but got {query.shape[-1]}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                           "`generate_square_subsequent_mask` to create this mask.")
    same_kv, self_attn = key is value, query is key and key is value
    batched = nd == 3
    if batched:
        if not batch_first:  # (L, N, E) -> (N, L, E): views
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if query.shape[0] != key.shape[0]:
            raise AssertionError(f"MultiheadAttention: query and key must have the same batch size, got "
                                 f"{query.shape[0]} and {key.shape[0]}")
    else:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if key_padding_mask is not None:
            if key_padding_mask.dim() != 1:
                raise AssertionError(f"For unbatched (2-D) query, expected key_padding_mask to be None or 1-D but "
                                     f"found {key_padding_mask.dim()}-D tensor instead")
            key_padding_mask = key_padding_mask.unsqueeze(0)
    n, lq, e = query.shape
    s = key.shape[1]
    h = num_heads
    hd = e // h
    if hd * h != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {h}")
    dtype = query._data.dtype
    # masks, checked against the unpadded key length as PyTorch does (their values are read in _additive_mask)
    for name, m in (("attn_mask", attn_mask), ("key_padding_mask", key_padding_mask)):
        _check_mask(m, name)
    if attn_mask is not None:
        ms = tuple(attn_mask.shape)
        if len(ms) == 2:
            if ms != (lq, s):
                raise RuntimeError(f"The shape of the 2D attn_mask is {list(ms)}, but should be ({lq}, {s}).")
        elif len(ms) == 3:
            if ms != (n * h, lq, s):
                raise RuntimeError(f"The shape of the 3D attn_mask is {list(ms)}, but should be ({n * h}, {lq}, {s}).")
        else:
            raise RuntimeError(f"attn_mask's dimension {len(ms)} is not supported (expected 2-D (L, S) or 3-D "
                               f"(N*num_heads, L, S))")
    if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, s):
        raise AssertionError(f"expecting key_padding_mask shape of {(n, s)}, but got {tuple(key_padding_mask.shape)}")
    pads = 0
    # input projections: one GEMM for self-attention, two when key is value
    b = in_proj_bias
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    if not use_separate_proj_weight:
        w = in_proj_weight
        if self_attn:
            q, k, v = linear(query, w, b).chunk(3, -1)
        elif same_kv:
            q = linear(query, w[:e], bq)
            k, v = linear(key, w[e:], None if b is None else b[e:]).chunk(2, -1)
        else:
            q, k, v = linear(query, w[:e], bq), linear(key, w[e:2 * e], bk), linear(value, w[2 * e:], bv)
    else:
        q, k, v = linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk), linear(value, v_proj_weight, bv)
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(n, 1, e)], 1)
        v = cat([v, bias_v.expand(n, 1, e)], 1)
        pads += 1
        s += 1
    q = q.reshape(n, lq, h, hd).transpose(1, 2)
    k = k.reshape(n, s, h, hd).transpose(1, 2)
    v = v.reshape(n, s, h, hd).transpose(1, 2)
    if add_zero_attn:
        z = make(backend.array_module(q._data).zeros((n, h, 1, hd), dtype))
        k, v = cat([k, z], 2), cat([v, z], 2)
        pads += 1
        s += 1
    mask = None
    if attn_mask is not None or key_padding_mask is not None:
        mask = _additive_mask(attn_mask, key_padding_mask, n, h, lq, dtype, pads)
    p = dropout_p if training else 0.0
    weights = None
    if need_weights:  # PyTorch's explicit path: the weights are returned (rows fully masked give NaN, as there)
        sc = matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        if mask is not None:
            sc = sc + mask
        weights = softmax(sc, -1)
        if p > 0:
            weights = dropout(weights, p)
        o = matmul(weights, v)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
    else:
        o = scaled_dot_product_attention(q, k, v, mask, p)
    o = linear(o.transpose(1, 2).reshape(n, lq, e), out_proj_weight, out_proj_bias)
    if not batched:
        o = o.squeeze(0)
    elif not batch_first:
        o = o.transpose(0, 1)
    return o, weights


def _check_mask(mask, name: str) -> None:
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise TypeError(f"multi_head_attention_forward(): {name} must be Tensor or None, not {type(mask).__name__}")
    d = mask._data.dtype
    if d != np.bool_ and not dt.is_float(d):
        raise AssertionError(f"only bool and floating types of {name} are supported, got {_dtype_name(d)}")


@traced
def _additive_mask(attn_mask, key_padding_mask, n: int, h: int, lq: int, dtype, pads: int) -> Tensor:
    """attn_mask and key_padding_mask (checked) as one additive mask that broadcasts to the scores (n, h, lq,
    s + pads): each as PyTorch's _canonical_mask, `pads` attended key columns appended (bias_k/v, add_zero_attn),
    summed. (One recorded call: a compiled program recomputes it from the masks of each call.)"""
    am = _float_mask(attn_mask, "attn_mask", dtype)
    if am is not None and am.ndim == 3:
        am = am.reshape(n, h, lq, am.shape[-1])
    kpm = _float_mask(key_padding_mask, "key_padding_mask", dtype)
    if kpm is not None:
        kpm = kpm.reshape(n, 1, 1, kpm.shape[-1])
    for _ in range(pads):
        am, kpm = _pad_key(am), _pad_key(kpm)
    return make(am if kpm is None else kpm if am is None else am + kpm)


def _pad_key(m: np.ndarray | None) -> np.ndarray | None:
    """An additive mask with one more key column (0: attended), for bias_k/bias_v or add_zero_attn."""
    if m is None:
        return None
    am = backend.array_module(m)
    return am.concatenate([m, am.zeros(m.shape[:-1] + (1,), m.dtype)], -1)
