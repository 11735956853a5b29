"""Property-based tests (hypothesis) of ember's nn functional ops against `torch.nn.functional`.

Convolutions (1-d, 2-d, transposed), pooling (max, average, adaptive), normalisation (batch, layer,
group) and losses run on random geometry -- batch sizes including 1 and unbatched inputs, channel
counts, kernels, strides, paddings (ints, tuples, 'same'/'valid'), dilations, groups, with and
without bias, contiguous and strided inputs -- and must give:

* the same outcome as PyTorch: both succeed, or ember raises the builtin exception type PyTorch
  raises for the same misuse (kernel larger than the padded input, channels not divisible by
  groups, wrong ndim, bad class index, ...);
* on success the same shape, dtype and values, and for a random cotangent the same gradients of
  every floating input;
* in float64 on tiny inputs, gradients that pass ember's `gradcheck`.

The `Sequential` Conv2d -> ReLU -> MaxPool2d fusion is checked against the same layers run one by
one. Derandomized, explicit `max_examples`, `deadline=None`: reproducible in CI.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from helpers import leaf, requires_torch, torch
from test_properties import _builtin_type, _compare, _layout, _settings, _values

import ember
import ember.nn.functional as EF

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = requires_torch
if torch is not None:
    import torch.nn.functional as TF
else:  # every test is skipped
    TF = None

LAYOUTS = ["contiguous", "transposed", "strided"]
GRAD_NUMEL = 40  # float64 gradcheck costs two forwards per input element: keep it tiny
TOL = {"float32": (2e-4, 2e-5), "float64": (1e-9, 1e-10)}


# ----------------------------------------------------------------------------- oracle
def _array(draw, shape: tuple, dtype: str, low: float = -2.0, high: float = 2.0, layout: bool = True) -> np.ndarray:
    """Random values of `shape`, in a random memory layout when `layout`."""
    a = _values(shape, dtype, draw(st.integers(0, 2**31 - 1)), low, high)
    return _layout(a, draw(st.sampled_from(LAYOUTS))) if layout else a


def run_both(e_fn: Callable, t_fn: Callable, arrays: list, *, grad: bool = True, gradcheck: bool = True,
             nograd: tuple = (), tol: tuple | None = None, seed: int = 0):
    """Run ember and torch on the same arrays: same exception type, or same outputs and input gradients.

    Floating arrays (except positions in `nograd`) are leaves requiring grad; the first output is
    back-propagated with one random cotangent in both frameworks. When every such leaf is float64
    and small, ember's own `gradcheck` runs too. Returns ember's output (None on a shared error)."""
    wants = [a.dtype.kind == "f" and i not in nograd and grad for i, a in enumerate(arrays)]
    t_in = [torch.from_numpy(a).requires_grad_(w) for a, w in zip(arrays, wants)]
    e_in = [ember.from_numpy(a).requires_grad_(w) for a, w in zip(arrays, wants)]
    try:
        t_out = t_fn(*t_in)
    except Exception as exc:  # the misuse must fail in ember too, with the same builtin type
        with pytest.raises(_builtin_type(exc)):
            e_fn(*e_in)
        return None
    e_out = e_fn(*e_in)
    t_first = t_out[0] if isinstance(t_out, (tuple, list)) else t_out
    e_first = e_out[0] if isinstance(e_out, (tuple, list)) else e_out
    dt = str(t_first.dtype).split(".")[-1]
    r, a = tol or TOL.get(dt, (1e-4, 1e-5))
    _compare(e_out, t_out, rtol=r)
    if not any(wants) or not t_first.requires_grad or t_first.numel() == 0:
        return e_out
    cot = np.random.default_rng(seed).uniform(-1, 1, tuple(t_first.shape)).astype(dt)
    t_first.backward(torch.from_numpy(cot))
    e_first.backward(ember.from_numpy(cot))
    for i, (et, tt, w) in enumerate(zip(e_in, t_in, wants)):
        if not w:
            continue
        tg = tt.grad.numpy() if tt.grad is not None else np.zeros(tt.shape, tt.detach().numpy().dtype)
        eg = et.grad.numpy() if et.grad is not None else np.zeros(et.shape, tg.dtype)
        assert eg.shape == tg.shape, f"grad {i}: shape {eg.shape} != torch {tg.shape}"
        np.testing.assert_allclose(eg, tg, rtol=r * 10, atol=a * 10 + r, err_msg=f"gradient of input {i}")
    floats = [x for x, w in zip(arrays, wants) if w]
    if gradcheck and np.isfinite(t_first.detach().numpy()).all() and all(x.dtype == np.float64 for x in floats) and sum(x.size for x in floats) <= GRAD_NUMEL:
        # on the CPU, as run_both's other inputs (the functions may close over CPU constants)
        leaves = [ember.from_numpy(x.copy()).requires_grad_(w) for x, w in zip(arrays, wants)]
        assert ember.autograd.gradcheck(e_fn, leaves, eps=1e-6, atol=1e-5, rtol=1e-3)
    return e_out


# ----------------------------------------------------------------------------- convolution
@st.composite
def conv_geometry(draw, nd: int, transposed: bool = False) -> dict:
    """Random conv arguments; about one in six made invalid on purpose (groups, ndim, channel count)."""
    groups = draw(st.integers(1, 3))
    cin_g, cout_g = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    spatial = tuple(draw(st.integers(1, 6)) for _ in range(nd))
    stride = draw(st.one_of(st.integers(1, 2), st.tuples(*[st.integers(1, 2)] * nd)))
    dilation = draw(st.one_of(st.integers(1, 2), st.tuples(*[st.integers(1, 2)] * nd)))
    pads = [st.integers(0, 2), st.tuples(*[st.integers(0, 2)] * nd)]
    if not transposed:
        pads.append(st.sampled_from(["same", "valid"]))
    padding = draw(st.one_of(*pads))
    batch = draw(st.sampled_from([None, 1, 2]))  # None: unbatched (C, *spatial)
    cin = cin_g * groups
    if transposed:  # weight (C_in, C_out / groups, *k)
        wshape = (cin, cout_g) + k
    else:  # weight (C_out, C_in / groups, *k)
        wshape = (cout_g * groups, cin_g) + k
    xshape = ((batch,) if batch else ()) + (cin,) + spatial
    bad = draw(st.integers(0, 11))
    if bad == 0:
        # wrong ndim: a spatial dim too many, or (unbatched) one too few
        xshape = xshape[1:] if batch is None and draw(st.booleans()) else xshape + (2,)
    elif bad == 1 and groups > 1:
        xshape = xshape[: len(xshape) - nd - 1] + (cin + 1,) + spatial  # not what the weight expects
    elif bad == 2 and groups > 1 and not transposed:
        wshape = (cout_g * groups + 1,) + wshape[1:]  # out channels not divisible by groups
    out_ch = cout_g * groups if transposed else wshape[0]
    bias = (out_ch,) if draw(st.booleans()) else None
    out_pad = 0
    if transposed:
        s = stride if isinstance(stride, tuple) else (stride,) * nd
        d = dilation if isinstance(dilation, tuple) else (dilation,) * nd
        out_pad = tuple(draw(st.integers(0, max(a, b) - 1)) for a, b in zip(s, d))
    return dict(x=xshape, w=wshape, b=bias, stride=stride, padding=padding, dilation=dilation, groups=groups,
                output_padding=out_pad)


def _transposed_size(g: dict, nd: int) -> tuple:
    """conv_transpose's output size per spatial dim: (L - 1)·s − 2·p + d·(k − 1) + output_padding + 1."""
    def each(v):
        return v if isinstance(v, tuple) else (v,) * nd
    s, p, d, op = each(g["stride"]), each(g["padding"]), each(g["dilation"]), each(g["output_padding"])
    return tuple((n - 1) * ss - 2 * pp + dd * (kk - 1) + o + 1
                 for n, ss, pp, dd, kk, o in zip(g["x"][-nd:], s, p, d, g["w"][2:], op))


CONV = {1: ("conv1d", "conv_transpose1d"), 2: ("conv2d", "conv_transpose2d")}


def _conv_case(g: dict, nd: int, transposed: bool, data, dtype: str) -> None:
    name = CONV[nd][transposed]
    arrays = [_array(data.draw, g["x"], dtype), _array(data.draw, g["w"], dtype)]
    if g["b"] is not None:
        arrays.append(_array(data.draw, g["b"], dtype))
    kw = dict(stride=g["stride"], padding=g["padding"], dilation=g["dilation"], groups=g["groups"])
    if transposed:
        kw["output_padding"] = g["output_padding"]

    def call(mod):
        return lambda x, w, *b: getattr(mod, name)(x, w, b[0] if b else None, **kw)

    if transposed and 0 in _transposed_size(g, nd) and min(_transposed_size(g, nd)) == 0:
        # an output size of exactly 0: torch's oneDNN kernels (float32, batch > 1 or groups > 1) return the
        # empty result, its reference kernels raise "Output size is too small"; ember always returns it
        try:
            call(TF)(*[torch.from_numpy(a) for a in arrays])
        except RuntimeError as exc:
            if "too small" in str(exc):
                leaves = [leaf(a) for a in arrays]
                try:
                    out = call(EF)(*leaves)
                except RuntimeError:  # otherwise bad geometry (channels, ndim): both raise
                    return
                assert out.numel() == 0 and tuple(out.shape[-nd:]) == _transposed_size(g, nd)
                out.sum().backward()
                assert all(not t.grad.cpu().numpy().any() for t in leaves)
                return
    run_both(call(EF), call(TF), arrays, seed=data.draw(st.integers(0, 1000)))


@given(nd=st.sampled_from([1, 2]), dtype=st.sampled_from(["float32", "float64"]), data=st.data())
@_settings(60)
def test_conv(nd: int, dtype: str, data) -> None:
    """conv1d/conv2d on random geometry: values, input/weight/bias gradients, errors on bad geometry."""
    g = data.draw(conv_geometry(nd))
    _conv_case(g, nd, False, data, dtype)


@given(nd=st.sampled_from([1, 2]), dtype=st.sampled_from(["float32", "float64"]), data=st.data())
@_settings(40)
def test_conv_transpose(nd: int, dtype: str, data) -> None:
    """conv_transpose1d/2d with output_padding below max(stride, dilation); an output size of 0 is empty."""
    g = data.draw(conv_geometry(nd, transposed=True))
    _conv_case(g, nd, True, data, dtype)


@given(nd=st.sampled_from([1, 2]), data=st.data())
@_settings(30)
def test_conv_gradcheck_float64(nd: int, data) -> None:
    """Tiny float64 convolutions pass ember's gradcheck (numerical vs analytical) for x, w and b."""
    g = data.draw(conv_geometry(nd))
    g = dict(g, x=(1, g["groups"]) + g["x"][-nd:], w=(g["groups"], 1) + g["w"][2:], b=(g["groups"],))
    assume(all(s <= 3 for s in g["x"][-nd:]))
    fn = getattr(EF, CONV[nd][0])
    kw = dict(stride=g["stride"], padding=g["padding"], dilation=g["dilation"], groups=g["groups"])
    arrays = [_values(g[k], "float64", data.draw(st.integers(0, 1000))) for k in ("x", "w", "b")]
    try:
        getattr(TF, CONV[nd][0])(*[torch.from_numpy(a) for a in arrays], **kw)
    except RuntimeError:
        assume(False)
    leaves = [leaf(a) for a in arrays]
    assert ember.autograd.gradcheck(lambda x, w, b: fn(x, w, b, **kw), leaves, eps=1e-6, atol=1e-5, rtol=1e-3)


# ----------------------------------------------------------------------------- pooling
def _pool_input(draw, shape: tuple, dtype: str) -> np.ndarray:
    """Values with many ties (small integers) and, sometimes, -inf entries (max pooling must keep them)."""
    a = _values(shape, "int64", draw(st.integers(0, 2**31 - 1)), -2, 2).astype(dtype)
    if draw(st.booleans()) and a.size:
        rng = np.random.default_rng(draw(st.integers(0, 1000)))
        a[rng.random(shape) < 0.25] = -np.inf
    return _layout(a, draw(st.sampled_from(LAYOUTS)))


@st.composite
def pool_geometry(draw, dilation: bool) -> dict:
    k = draw(st.one_of(st.integers(1, 3), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    kk = k if isinstance(k, tuple) else (k, k)
    stride = draw(st.one_of(st.none(), st.integers(1, 3), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    # PyTorch needs pad <= k // 2; one in ten is too large on purpose
    pmax = min(kk) // 2 + (1 if draw(st.integers(0, 9)) == 0 else 0)
    padding = draw(st.integers(0, pmax))
    d = draw(st.integers(1, 2)) if dilation else 1
    batch = draw(st.sampled_from([None, 1, 2]))
    x = ((batch,) if batch else ()) + (draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    return dict(x=x, kernel_size=k, stride=stride, padding=padding, dilation=d, ceil_mode=draw(st.booleans()))


def _padding_only_window(g: dict) -> bool:
    """Whether some max-pool window (with dilation, ceil_mode) covers no input element at all."""
    def pair(v, default=None):
        v = default if v is None else v
        return v if isinstance(v, tuple) else (v, v)
    k, p, d = pair(g["kernel_size"]), g["padding"], g["dilation"]
    s = pair(g["stride"], g["kernel_size"])
    for n, kk, ss in zip(g["x"][-2:], k, s):
        span = n + 2 * p - d * (kk - 1) - 1
        if span < 0 or 2 * p > kk:
            return False  # an error in both: not this case
        o = (span + (ss - 1 if g["ceil_mode"] else 0)) // ss + 1
        if g["ceil_mode"] and (o - 1) * ss >= n + p:
            o -= 1
        for i in range(o):
            if not any(0 <= i * ss - p + j * d < n for j in range(kk)):
                return True
    return False


@given(dtype=st.sampled_from(["float32", "float64"]), data=st.data())
@_settings(60)
def test_max_pool2d(dtype: str, data) -> None:
    """max_pool2d with ties and -inf values: values, indices, and the gradient routed to PyTorch's argmax."""
    g = data.draw(pool_geometry(True))
    x = _pool_input(data.draw, g["x"], dtype)
    # a window lying wholly in the padding is undefined in PyTorch (it returned 2 for an input of -2)
    assume(not _padding_only_window(g))
    kw = dict(kernel_size=g["kernel_size"], stride=g["stride"], padding=g["padding"], dilation=g["dilation"],
              ceil_mode=g["ceil_mode"], return_indices=True)
    out = run_both(lambda t: EF.max_pool2d(t, **kw), lambda t: TF.max_pool2d(t, **kw), [x], gradcheck=False,
                   seed=data.draw(st.integers(0, 1000)))
    if out is not None and dtype == "float64" and np.isfinite(x).all() and x.size <= GRAD_NUMEL:
        xs = x + np.arange(x.size).reshape(x.shape) * 1e-3  # ties broken: gradcheck needs a smooth point
        kw1 = dict(kw, return_indices=False)
        assert ember.autograd.gradcheck(lambda t: EF.max_pool2d(t, **kw1), [leaf(xs)], eps=1e-6, atol=1e-5)


@given(dtype=st.sampled_from(["float32", "float64"]), include_pad=st.booleans(),
       divisor=st.sampled_from([None, None, None, 3]), data=st.data())
@_settings(60)
def test_avg_pool2d(dtype: str, include_pad: bool, divisor, data) -> None:
    """avg_pool2d with ceil_mode, padding, count_include_pad, stride None and divisor_override."""
    g = data.draw(pool_geometry(False))
    x = _array(data.draw, g["x"], dtype)
    kw = dict(kernel_size=g["kernel_size"], stride=g["stride"], padding=g["padding"], ceil_mode=g["ceil_mode"],
              count_include_pad=include_pad, divisor_override=divisor)
    run_both(lambda t: EF.avg_pool2d(t, **kw), lambda t: TF.avg_pool2d(t, **kw), [x],
             seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), kind=st.sampled_from(["avg", "max"]), data=st.data())
@_settings(50)
def test_adaptive_pool2d(dtype: str, kind: str, data) -> None:
    """adaptive_{avg,max}_pool2d to any output size (int, pair, None keeps a dim), bigger or smaller."""
    batch = data.draw(st.sampled_from([None, 1, 2]))
    shape = ((batch,) if batch else ()) + (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 6)),
                                            data.draw(st.integers(1, 6)))
    size = data.draw(st.one_of(st.integers(1, 7), st.tuples(st.one_of(st.none(), st.integers(1, 7)),
                                                            st.one_of(st.none(), st.integers(1, 7)))))
    x = _pool_input(data.draw, shape, dtype) if kind == "max" else _array(data.draw, shape, dtype)
    name = f"adaptive_{kind}_pool2d"
    run_both(lambda t: getattr(EF, name)(t, size), lambda t: getattr(TF, name)(t, size), [x],
             gradcheck=kind == "avg", seed=data.draw(st.integers(0, 1000)))


# ----------------------------------------------------------------------------- normalisation
@given(dtype=st.sampled_from(["float32", "float64"]), training=st.booleans(), affine=st.booleans(),
       momentum=st.sampled_from([0.1, 0.5, 1.0]), eps=st.sampled_from([1e-5, 1e-2]), data=st.data())
@_settings(60)
def test_batch_norm_functional(dtype: str, training: bool, affine: bool, momentum: float, eps: float, data) -> None:
    """F.batch_norm on (N, C), (N, C, L), (N, C, H, W): output, gradients and running stats updated like PyTorch."""
    n = data.draw(st.integers(1, 3))
    c = data.draw(st.integers(1, 3))
    shape = (n, c) + tuple(data.draw(st.integers(1, 3)) for _ in range(data.draw(st.integers(0, 2))))
    x = _array(data.draw, shape, dtype)
    rm = _values((c,), dtype, data.draw(st.integers(0, 1000)))
    rv = _values((c,), dtype, data.draw(st.integers(0, 1000)), 0.5, 2.0)
    e_rs = [ember.from_numpy(rm.copy()), ember.from_numpy(rv.copy())]
    t_rs = [torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())]
    params = [_values((c,), dtype, data.draw(st.integers(0, 1000))) for _ in range(2)] if affine else []

    def call(mod, rs, contiguous=False):
        return lambda t, *wb: mod.batch_norm(t.contiguous() if contiguous else t, rs[0], rs[1], *wb,
                                             training=training, momentum=momentum, eps=eps)

    # torch gets a contiguous copy (differentiably): its CPU batch_norm backward gives wrong input/weight
    # gradients for some non-contiguous layouts, e.g. a (1, C, 1, W) transposed view with strides (4, 4, 4, 12)
    # (checked against a float64 NumPy reference in test_nn_norm.py); ember gets the view itself
    out = run_both(call(EF, e_rs), call(TF, t_rs, contiguous=True), [x] + params, seed=data.draw(st.integers(0, 1000)),
                   gradcheck=False)
    if out is not None:
        for e, t in zip(e_rs, t_rs):
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=TOL[dtype][0], atol=TOL[dtype][1] * 10)


@given(dim=st.sampled_from([1, 2]), momentum=st.sampled_from([None, 0.1]), affine=st.booleans(),
       track=st.booleans(), data=st.data())
@_settings(30)
def test_batch_norm_module_running_stats(dim: int, momentum, affine: bool, track: bool, data) -> None:
    """BatchNorm1d/2d over three training steps then eval: momentum None is a cumulative average like PyTorch."""
    c = data.draw(st.integers(1, 3))
    name = f"BatchNorm{dim}d"
    em = getattr(ember.nn, name)(c, momentum=momentum, affine=affine, track_running_stats=track).double()
    tm = getattr(torch.nn, name)(c, momentum=momentum, affine=affine, track_running_stats=track).double()
    for step in range(4):
        if step == 3:
            em.eval(), tm.eval()
        shape = (data.draw(st.integers(2, 3)), c) + ((data.draw(st.integers(1, 3)),) * dim if dim == 2 else ())
        x = _values(shape, "float64", data.draw(st.integers(0, 1000)))
        np.testing.assert_allclose(em(ember.from_numpy(x)).detach().numpy(), tm(torch.from_numpy(x)).detach().numpy(),
                                   rtol=1e-9, atol=1e-10)
        if track:
            np.testing.assert_allclose(em.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-9, atol=1e-12)
            assert int(em.num_batches_tracked.item()) == int(tm.num_batches_tracked.item())


@given(dtype=st.sampled_from(["float32", "float64"]), eps=st.sampled_from([1e-5, 1e-3, 0.5]),
       affine=st.sampled_from(["none", "weight", "both"]), data=st.data())
@_settings(50)
def test_layer_norm(dtype: str, eps: float, affine: str, data) -> None:
    """layer_norm over the last 1..3 dims (a wrong normalized_shape fails alike), with eps and weight/bias."""
    shape = tuple(data.draw(st.integers(1, 3)) for _ in range(data.draw(st.integers(1, 4))))
    k = data.draw(st.integers(1, min(3, len(shape))))
    norm = list(shape[len(shape) - k:])
    if data.draw(st.integers(0, 9)) == 0:
        norm[-1] += 1  # does not match the input
    x = _array(data.draw, shape, dtype)
    params = [_values(tuple(norm), dtype, data.draw(st.integers(0, 1000))) for _ in range({"none": 0, "weight": 1,
                                                                                          "both": 2}[affine])]
    run_both(lambda t, *wb: EF.layer_norm(t, norm, *wb, eps=eps), lambda t, *wb: TF.layer_norm(t, norm, *wb, eps=eps),
             [x] + params, seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), affine=st.booleans(), data=st.data())
@_settings(40)
def test_group_norm(dtype: str, affine: bool, data) -> None:
    """group_norm with any group count (channels not divisible by groups fail alike)."""
    groups = data.draw(st.integers(1, 3))
    c = groups * data.draw(st.integers(1, 2)) + (1 if data.draw(st.integers(0, 9)) == 0 else 0)
    shape = (data.draw(st.integers(1, 2)), c) + tuple(data.draw(st.integers(1, 3))
                                                      for _ in range(data.draw(st.integers(0, 2))))
    x = _array(data.draw, shape, dtype)
    params = [_values((c,), dtype, data.draw(st.integers(0, 1000))) for _ in range(2)] if affine else []
    run_both(lambda t, *wb: EF.group_norm(t, groups, *wb), lambda t, *wb: TF.group_norm(t, groups, *wb),
             [x] + params, seed=data.draw(st.integers(0, 1000)))


# ----------------------------------------------------------------------------- losses
REDUCTIONS = ["none", "sum", "mean"]


@st.composite
def class_problem(draw, dtype: str) -> tuple:
    """(logits (N, C, *d) or (C,), int64 targets with some ignore_index / out-of-range entries, C)."""
    c = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["unbatched", "flat", "spatial"]))
    if kind == "unbatched":
        shape, tshape = (c,), ()
    elif kind == "flat":
        n = draw(st.integers(1, 3))
        shape, tshape = (n, c), (n,)
    else:
        n, d = draw(st.integers(1, 2)), draw(st.integers(1, 3))
        shape, tshape = (n, c, d), (n, d)
    x = _array(draw, shape, dtype, -3, 3)
    hi = c if draw(st.integers(0, 9)) == 0 else c - 1  # one in ten may hold an out-of-range class
    t = np.random.default_rng(draw(st.integers(0, 1000))).integers(0, hi + 1, tshape).astype(np.int64)
    return x, t, c


@given(dtype=st.sampled_from(["float32", "float64"]), reduction=st.sampled_from(REDUCTIONS),
       smoothing=st.sampled_from([0.0, 0.0, 0.1, 0.7]), weighted=st.booleans(), ignore=st.booleans(), data=st.data())
@_settings(60)
def test_cross_entropy_indices(dtype: str, reduction: str, smoothing: float, weighted: bool, ignore: bool,
                               data) -> None:
    """cross_entropy with class-index targets: ignore_index, label_smoothing, class weights, every reduction."""
    x, t, c = data.draw(class_problem(dtype))
    ignore_index = -100
    if ignore and t.size:
        ignore_index = int(data.draw(st.integers(0, c - 1)))
    arrays = [x, t] + ([_values((c,), dtype, data.draw(st.integers(0, 1000)), 0.1, 2.0)] if weighted else [])

    def call(mod):
        return lambda a, b, *w: mod.cross_entropy(a, b, w[0] if w else None, ignore_index=ignore_index,
                                                  reduction=reduction, label_smoothing=smoothing)

    run_both(call(EF), call(TF), arrays, nograd=(2,), seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), reduction=st.sampled_from(REDUCTIONS),
       smoothing=st.sampled_from([0.0, 0.2]), weighted=st.booleans(), data=st.data())
@_settings(40)
def test_cross_entropy_probabilities(dtype: str, reduction: str, smoothing: float, weighted: bool, data) -> None:
    """cross_entropy with class-probability targets (same shape as the input), weights and smoothing."""
    x, _, c = data.draw(class_problem(dtype))
    p = _values(x.shape, dtype, data.draw(st.integers(0, 1000)), 0.0, 1.0)
    p = p / np.maximum(p.sum(axis=0 if x.ndim == 1 else 1, keepdims=True), 1e-3)
    arrays = [x, p] + ([_values((c,), dtype, data.draw(st.integers(0, 1000)), 0.1, 2.0)] if weighted else [])

    def call(mod):
        return lambda a, b, *w: mod.cross_entropy(a, b, w[0] if w else None, reduction=reduction,
                                                  label_smoothing=smoothing)

    run_both(call(EF), call(TF), arrays, nograd=(2,), seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), reduction=st.sampled_from(REDUCTIONS), weighted=st.booleans(),
       ignore=st.booleans(), data=st.data())
@_settings(50)
def test_nll_loss(dtype: str, reduction: str, weighted: bool, ignore: bool, data) -> None:
    """nll_loss on log-probabilities: weights, ignore_index (all ignored gives PyTorch's nan mean), reductions."""
    x, t, c = data.draw(class_problem(dtype))
    ignore_index = int(data.draw(st.integers(0, c - 1))) if ignore else -100
    arrays = [x, t] + ([_values((c,), dtype, data.draw(st.integers(0, 1000)), 0.1, 2.0)] if weighted else [])

    def call(mod):
        return lambda a, b, *w: mod.nll_loss(a, b, w[0] if w else None, ignore_index=ignore_index, reduction=reduction)

    run_both(call(EF), call(TF), arrays, nograd=(2,), seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), reduction=st.sampled_from(REDUCTIONS),
       shape=st.lists(st.integers(1, 3), max_size=3).map(tuple), data=st.data())
@_settings(40)
def test_mse_loss(dtype: str, reduction: str, shape: tuple, data) -> None:
    """mse_loss, target gradient included (PyTorch differentiates both sides)."""
    a, b = _array(data.draw, shape, dtype), _array(data.draw, shape, dtype)
    run_both(lambda p, q: EF.mse_loss(p, q, reduction=reduction), lambda p, q: TF.mse_loss(p, q, reduction=reduction),
             [a, b], seed=data.draw(st.integers(0, 1000)))


@given(dtype=st.sampled_from(["float32", "float64"]), reduction=st.sampled_from(REDUCTIONS),
       shape=st.lists(st.integers(1, 3), max_size=3).map(tuple), weighted=st.booleans(), logits=st.booleans(),
       pos_weight=st.booleans(), data=st.data())
@_settings(60)
def test_binary_cross_entropy(dtype: str, reduction: str, shape: tuple, weighted: bool, logits: bool,
                              pos_weight: bool, data) -> None:
    """binary_cross_entropy (probabilities, soft targets) and _with_logits (weight, pos_weight), every reduction."""
    if logits:
        x = _array(data.draw, shape, dtype, -4, 4)
    else:
        x = _layout(_values(shape, dtype, data.draw(st.integers(0, 1000)), 0.05, 0.95),
                    data.draw(st.sampled_from(LAYOUTS)))
    t = _values(shape, dtype, data.draw(st.integers(0, 1000)), 0.0, 1.0)
    w = _values(shape[-1:] if shape else (), dtype, data.draw(st.integers(0, 1000)), 0.1, 2.0) if weighted else None
    pw = _values(shape[-1:] if shape else (), dtype, data.draw(st.integers(0, 1000)), 0.1, 3.0) \
        if logits and pos_weight else None
    arrays = [x, t]

    def call(mod, wrap):
        def f(a, b):
            kw = dict(weight=None if w is None else wrap(w), reduction=reduction)
            if logits:
                return mod.binary_cross_entropy_with_logits(a, b, pos_weight=None if pw is None else wrap(pw), **kw)
            return mod.binary_cross_entropy(a, b, **kw)
        return f

    # PyTorch does not differentiate binary_cross_entropy's target: only the input's gradient is compared
    run_both(call(EF, ember.from_numpy), call(TF, torch.from_numpy), arrays, nograd=() if logits else (1,),
             seed=data.draw(st.integers(0, 1000)))


# ----------------------------------------------------------------------------- Sequential fusion
@given(order=st.sampled_from(["relu_pool", "pool_relu"]), bias=st.booleans(), dtype=st.sampled_from(["float32",
                                                                                                     "float64"]),
       data=st.data())
@_settings(40)
def test_fused_conv_relu_pool(order: str, bias: bool, dtype: str, data) -> None:
    """Sequential(Conv2d, ReLU, MaxPool2d) -- fused when the pool tiles -- equals the layers run one by one
    (outputs, input and parameter gradients), and PyTorch."""
    from ember.nn.modules import _fusion

    cin, cout = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    k = data.draw(st.one_of(st.integers(1, 3), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    stride = data.draw(st.integers(1, 2))
    padding = data.draw(st.one_of(st.integers(0, 1), st.just("valid"), st.just("same")))
    if padding == "same":
        stride = 1
    dilation = data.draw(st.integers(1, 2))
    pk = data.draw(st.one_of(st.integers(1, 3), st.tuples(st.integers(1, 2), st.integers(1, 2))))
    pool_stride = data.draw(st.sampled_from([None, None, 1]))
    shape = (data.draw(st.integers(1, 2)), cin, data.draw(st.integers(2, 7)), data.draw(st.integers(2, 7)))
    x = _array(data.draw, shape, dtype)
    seed = data.draw(st.integers(0, 1000))

    def build(nn):
        layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=padding, dilation=dilation, bias=bias), nn.ReLU(),
                  nn.MaxPool2d(pk, stride=pool_stride)]
        if order == "pool_relu":
            layers[1], layers[2] = layers[2], layers[1]
        return nn.Sequential(*layers)

    em, tm = build(ember.nn), build(torch.nn)
    em = em.double() if dtype == "float64" else em
    tm = tm.double() if dtype == "float64" else tm
    with torch.no_grad():  # one set of weights for all three runs
        for (_, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
            tp.copy_(torch.from_numpy(_values(tuple(tp.shape), dtype, seed)))
            ep._data[...] = tp.numpy()
            seed += 1
    results = []
    for fused in (True, False):
        _fusion.ENABLED = fused
        try:
            results.append(run_both(lambda t: em(t), lambda t: tm(t), [x], gradcheck=False, seed=seed))
        finally:
            _fusion.ENABLED = True
        grads = [p.grad.numpy().copy() if p.grad is not None else None for p in em.parameters()]
        results.append(grads)
        em.zero_grad(), tm.zero_grad()
    if results[0] is not None:
        assert results[0].shape == results[2].shape
        np.testing.assert_allclose(results[0].detach().numpy(), results[2].detach().numpy(), rtol=TOL[dtype][0], atol=TOL[dtype][1])
        for gf, gu in zip(results[1], results[3]):
            np.testing.assert_allclose(gf, gu, rtol=TOL[dtype][0] * 10, atol=TOL[dtype][1] * 10)
