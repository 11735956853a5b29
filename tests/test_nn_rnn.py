"""Recurrent layers (RNN, LSTM, GRU, cells) and nn.utils.rnn against PyTorch: outputs, final states and the
gradients of the input, the initial states and every parameter for random cotangents, with the weights
copied across via state_dict; float64 gradcheck (and one gradgradcheck); bad inputs; dropout between layers."""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

import ember
from ember.nn.utils import rnn as ernn
from tests.helpers import requires_torch, torch

if torch is not None:
    from torch.nn.utils import rnn as trnn

MODES = {"RNN": (ember.nn.RNN, "RNN"), "RNN_relu": (ember.nn.RNN, "RNN"), "LSTM": (ember.nn.LSTM, "LSTM"),
         "GRU": (ember.nn.GRU, "GRU")}


def _pair(mode: str, dtype, **kw):
    """An ember layer and a torch layer with the same weights (torch's state_dict loaded into ember)."""
    ecls, tname = MODES[mode]
    if mode == "RNN_relu":
        kw["nonlinearity"] = "relu"
    tm = getattr(torch.nn, tname)(**kw).to(dtype)
    em = ecls(**kw).to(getattr(ember, str(dtype).split(".")[-1]))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    return em, tm


def _t(a, grad=True):
    return torch.tensor(a, requires_grad=grad)


def _e(a, grad=True):
    return ember.tensor(a, requires_grad=grad)


def _close(e, t, tol):
    np.testing.assert_allclose(e.detach().numpy() if hasattr(e, "detach") else e.numpy(), t.detach().numpy(),
                               rtol=tol, atol=tol)


GRID = list(itertools.product(["RNN", "RNN_relu", "LSTM", "GRU"], [1, 2], [False, True], [False, True]))


@requires_torch
@pytest.mark.parametrize("mode,layers,bidir,batch_first", GRID)
@pytest.mark.parametrize("variant", ["plain", "nobias_h0", "proj", "packed", "unbatched"])
def test_layer_parity(mode, layers, bidir, batch_first, variant):
    if variant == "proj" and mode != "LSTM":
        pytest.skip("proj_size is LSTM-only")
    rng = np.random.default_rng(zlib.crc32(repr((mode, layers, bidir, batch_first, variant)).encode()))
    i, h, t, b = 3, 5, 6, 4
    kw = dict(input_size=i, hidden_size=h, num_layers=layers, bidirectional=bidir, batch_first=batch_first)
    if variant == "nobias_h0":
        kw["bias"] = False
    if variant == "proj":
        kw["proj_size"] = 2
    em, tm = _pair(mode, torch.float64, **kw)
    hout = 2 if variant == "proj" else h
    nstate = layers * (2 if bidir else 1)
    unb = variant == "unbatched"
    xs = rng.standard_normal((t, i) if unb else ((b, t, i) if batch_first else (t, b, i)))
    ex, tx = _e(xs), _t(xs)
    hshape = (nstate, hout) if unb else (nstate, b, hout)
    cshape = (nstate, h) if unb else (nstate, b, h)
    ehx = thx = None
    leaves_e, leaves_t = [ex], [tx]
    if variant in ("nobias_h0", "proj", "packed", "unbatched"):
        h0 = rng.standard_normal(hshape)
        eh, th = _e(h0), _t(h0)
        leaves_e.append(eh)
        leaves_t.append(th)
        if mode == "LSTM":
            c0 = rng.standard_normal(cshape)
            ec, tc = _e(c0), _t(c0)
            leaves_e.append(ec)
            leaves_t.append(tc)
            ehx, thx = (eh, ec), (th, tc)
        else:
            ehx, thx = eh, th
    if variant == "packed":
        lengths = [6, 3, 5, 1]
        ein = ernn.pack_padded_sequence(ex, lengths, batch_first=batch_first, enforce_sorted=False)
        tin = trnn.pack_padded_sequence(tx, lengths, batch_first=batch_first, enforce_sorted=False)
        np.testing.assert_array_equal(ein.batch_sizes.numpy(), tin.batch_sizes.numpy())
        np.testing.assert_array_equal(ein.sorted_indices.numpy(), tin.sorted_indices.numpy())
        _close(ein.data, tin.data, 0)
    else:
        ein, tin = ex, tx
    eo, ehn = em(ein, ehx)
    to, thn = tm(tin, thx)
    if variant == "packed":
        assert isinstance(eo, ernn.PackedSequence)
        eo, elen = ernn.pad_packed_sequence(eo, batch_first=batch_first)
        to, tlen = trnn.pad_packed_sequence(to, batch_first=batch_first)
        np.testing.assert_array_equal(elen.numpy(), tlen.numpy())
    outs_e = [eo] + (list(ehn) if mode == "LSTM" else [ehn])
    outs_t = [to] + (list(thn) if mode == "LSTM" else [thn])
    loss_e = loss_t = 0
    for k, (a, c) in enumerate(zip(outs_e, outs_t)):
        assert tuple(a.shape) == tuple(c.shape)
        _close(a, c, 1e-10)
        cot = rng.standard_normal(tuple(c.shape))
        loss_e = loss_e + (a * _e(cot, False)).sum()
        loss_t = loss_t + (c * _t(cot, False)).sum()
    loss_e.backward()
    loss_t.backward()
    for a, c in zip(leaves_e, leaves_t):
        _close(a.grad, c.grad, 1e-9)
    tparams = dict(tm.named_parameters())
    for n, p in em.named_parameters():
        _close(p.grad, tparams[n].grad, 1e-9)


@requires_torch
@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched,with_hx,bias", [(True, True, True), (True, False, False), (False, True, True),
                                                  (False, False, True)])
def test_cell_parity(cls, batched, with_hx, bias):
    rng = np.random.default_rng(3)
    tm = getattr(torch.nn, cls)(3, 4, bias=bias).double()
    em = getattr(ember.nn, cls)(3, 4, bias=bias).double()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    xs = rng.standard_normal((5, 3) if batched else (3,))
    ex, tx = _e(xs), _t(xs)
    leaves_e, leaves_t = [ex], [tx]
    ehx = thx = None
    if with_hx:
        shape = (5, 4) if batched else (4,)
        hs = [rng.standard_normal(shape) for _ in range(2 if cls == "LSTMCell" else 1)]
        leaves_e += [_e(a) for a in hs]
        leaves_t += [_t(a) for a in hs]
        ehx = tuple(leaves_e[1:]) if cls == "LSTMCell" else leaves_e[1]
        thx = tuple(leaves_t[1:]) if cls == "LSTMCell" else leaves_t[1]
    eo, to = em(ex, ehx), tm(tx, thx)
    eo = eo if isinstance(eo, tuple) else (eo,)
    to = to if isinstance(to, tuple) else (to,)
    le = lt = 0
    for a, c in zip(eo, to):
        _close(a, c, 1e-12)
        cot = rng.standard_normal(tuple(c.shape))
        le = le + (a * _e(cot, False)).sum()
        lt = lt + (c * _t(cot, False)).sum()
    le.backward()
    lt.backward()
    for a, c in zip(leaves_e, leaves_t):
        _close(a.grad, c.grad, 1e-10)
    tp = dict(tm.named_parameters())
    for n, p in em.named_parameters():
        _close(p.grad, tp[n].grad, 1e-10)


@requires_torch
def test_float32_lstm_parity_and_reprs():
    em, tm = _pair("LSTM", torch.float32, input_size=8, hidden_size=16, num_layers=2, batch_first=True)
    xs = np.random.default_rng(0).standard_normal((4, 7, 8)).astype(np.float32)
    eo, (eh, ec) = em(_e(xs, False))
    to, (th, tc) = tm(_t(xs, False))
    assert eo.dtype == ember.float32
    _close(eo, to, 1e-5)
    _close(ec, tc, 1e-5)
    for args, kw in [((3, 5), {}), ((3, 5, 2), dict(bidirectional=True, dropout=0.5)),
                     ((3, 5), dict(bias=False, batch_first=True, proj_size=2))]:
        assert repr(ember.nn.LSTM(*args, **kw)) == repr(torch.nn.LSTM(*args, **kw))
    assert repr(ember.nn.RNN(3, 5, nonlinearity="relu")) == repr(torch.nn.RNN(3, 5, nonlinearity="relu"))
    assert repr(ember.nn.GRUCell(3, 4, bias=False)) == repr(torch.nn.GRUCell(3, 4, bias=False))
    assert repr(ember.nn.RNNCell(3, 4, nonlinearity="relu")) == repr(torch.nn.RNNCell(3, 4, nonlinearity="relu"))


def test_init_range_and_all_weights():
    ember.manual_seed(0)
    m = ember.nn.GRU(10, 16, num_layers=2, bidirectional=True)
    k = 1 / 4
    for p in m.parameters():
        a = p.detach().numpy()
        assert a.min() >= -k and a.max() <= k and a.std() > k / 3
    assert len(m.all_weights) == 4 and [w.shape for w in m.all_weights[3]] == [(48, 32), (48, 16), (48,), (48,)]
    m.flatten_parameters()


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("packed", [False, True])
def test_gradcheck(mode, packed):
    ember.manual_seed(1)
    m = getattr(ember.nn, mode)(2, 3, num_layers=2, bidirectional=True).double()
    rng = np.random.default_rng(0)
    x = _e(rng.standard_normal((4, 3, 2)))
    h0 = _e(rng.standard_normal((4, 3, 3)))
    params = list(m.parameters())

    def f(x, h0, *ps):
        inp = ernn.pack_padded_sequence(x, [4, 2, 1]) if packed else x
        hx = (h0, h0 * 0.5) if mode == "LSTM" else h0
        out, hn = m(inp, hx)
        if packed:
            out = out.data
        hn = hn[0] + 2 * hn[1] if mode == "LSTM" else hn
        return (out * out).sum() + hn.sum()

    assert ember.autograd.gradcheck(f, [x, h0] + params, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("mode,reverse", [("LSTM", False), ("GRU", True), ("RNN_TANH", False)])
def test_gradgradcheck_layer(mode, reverse):
    from ember.ops.nn_rnn import rnn_layer
    rng = np.random.default_rng(1)
    g = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    bs = np.array([2, 2, 1])
    x, h0, c0 = (_e(rng.standard_normal(s) * 0.7) for s in [(5, 2), (2, 2), (2, 3)])
    wih, whh, bih, bhh, whr = (_e(rng.standard_normal(s) * 0.6) for s in [(3 * g, 2), (3 * g, 2), (3 * g,), (3 * g,),
                                                                          (2, 3)])
    lstm = mode == "LSTM"

    def f(x, h0, c0, wih, whh, bih, bhh, whr):
        r = rnn_layer(mode, x, bs, reverse, h0, c0 if lstm else None, wih, whh, bih, bhh, whr if lstm else None)
        return r[0].sum(1) * 0.5 + r[1].sum() + (r[2].sum() if lstm else 0)

    ins = [x, h0, c0, wih, whh if lstm else _e(rng.standard_normal((3 * g, 3)) * 0.6), bih, bhh, whr]
    if not lstm:
        ins[1] = _e(rng.standard_normal((2, 3)))
    assert ember.autograd.gradcheck(f, ins, eps=1e-6, atol=1e-5, rtol=1e-4)
    assert ember.autograd.gradgradcheck(f, ins, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_gradgradcheck_module_two_layers():
    """Double backward through stacked layers: layer 1's input is layer 0's (non-leaf) output."""
    ember.manual_seed(0)
    m = ember.nn.GRU(2, 2, num_layers=2, bidirectional=True).double()
    x = ember.randn(3, 2, 2, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda x: m(x)[0], [x], eps=1e-6, atol=1e-5, rtol=1e-4)


@ember.no_grad()
def test_dropout_between_layers():
    m = ember.nn.LSTM(3, 8, num_layers=3, dropout=0.5)
    x = ember.randn(5, 2, 3)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    m.train()
    ember.manual_seed(7)
    c = m(x)[0]
    ember.manual_seed(7)
    d = m(x)[0]
    np.testing.assert_array_equal(c.numpy(), d.numpy())
    e = m(x)[0]
    assert not np.allclose(c.numpy(), e.numpy())
    assert not np.allclose(c.numpy(), a.numpy())
    # no dropout after the last layer: with one layer, training and eval agree
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        one = ember.nn.GRU(3, 4, dropout=0.9)
    np.testing.assert_array_equal(one.train()(x)[0].numpy(), one.eval()(x)[0].numpy())


def test_retain_graph_and_inplace_output():
    ember.manual_seed(3)
    m = ember.nn.RNN(2, 3, num_layers=2)
    x = ember.randn(4, 2, 2, requires_grad=True)
    out, hn = m(x)
    loss = (out * out).sum() + hn.sum()
    loss.backward(retain_graph=True)
    g1 = x.grad.clone()
    x.grad = None
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), g1.numpy())
    # the output is the caller's: modifying it in place must not change what backward reads
    x.grad = None
    out, hn = m(x)
    loss = (out * out).sum()
    loss.backward()
    ref = x.grad.clone()
    x.grad = None
    out, hn = m(x)
    loss = (out * out).sum()
    with ember.no_grad():
        hn.mul_(2.0)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.numpy())


# ---------------------------------------------------------------------- utilities
@requires_torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 2)) for n in (3, 5, 1)]
    e = ernn.pad_sequence([_e(s) for s in seqs], batch_first=batch_first, padding_value=-1.0, padding_side=side)
    t = trnn.pad_sequence([_t(s) for s in seqs], batch_first=batch_first, padding_value=-1.0, padding_side=side)
    _close(e, t, 0)


@requires_torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_pad_roundtrip_and_grad(batch_first, enforce_sorted):
    rng = np.random.default_rng(0)
    lengths = [5, 4, 2] if enforce_sorted else [2, 5, 4]
    xs = rng.standard_normal((3, 5, 2) if batch_first else (5, 3, 2))
    ex, tx = _e(xs), _t(xs)
    ep = ernn.pack_padded_sequence(ex, ember.tensor(lengths), batch_first, enforce_sorted)
    tp = trnn.pack_padded_sequence(tx, torch.tensor(lengths), batch_first, enforce_sorted)
    _close(ep.data, tp.data, 0)
    np.testing.assert_array_equal(ep.batch_sizes.numpy(), tp.batch_sizes.numpy())
    if enforce_sorted:
        assert ep.sorted_indices is None and tp.sorted_indices is None
    else:
        np.testing.assert_array_equal(ep.unsorted_indices.numpy(), tp.unsorted_indices.numpy())
    ed, el = ernn.pad_packed_sequence(ep, batch_first, padding_value=9.0, total_length=7)
    td, tl = trnn.pad_packed_sequence(tp, batch_first, padding_value=9.0, total_length=7)
    _close(ed, td, 0)
    np.testing.assert_array_equal(el.numpy(), tl.numpy())
    assert el.dtype == ember.int64
    cot = rng.standard_normal(tuple(td.shape))
    (ed * _e(cot, False)).sum().backward()
    (td * _t(cot, False)).sum().backward()
    _close(ex.grad, tx.grad, 0)
    es = ernn.unpack_sequence(ep)
    ts = trnn.unpack_sequence(tp)
    for a, c in zip(es, ts):
        _close(a, c, 0)
    packed = ernn.pack_sequence([_e(s, False) for s in rng.standard_normal((2, 3, 2))])
    assert packed.batch_sizes.tolist() == [2, 2, 2]
    moved = ep.to(ember.float32)
    assert isinstance(moved, ernn.PackedSequence) and moved.data.dtype == ember.float32


# ---------------------------------------------------------------------- bad inputs
def test_bad_constructor_args():
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sig'"):
        ember.nn.RNN(3, 4, nonlinearity="sig")
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        ember.nn.RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout=1.5"):
        ember.nn.LSTM(3, 4, 2, dropout=1.5)
    with pytest.raises(ValueError, match=r"dropout=-0.1"):
        ember.nn.GRU(3, 4, 2, dropout=-0.1)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size .*proj_size=4"):
        ember.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="proj_size should be a positive integer"):
        ember.nn.LSTM(3, 4, proj_size=-1)


def test_bad_forward_inputs():
    lstm = ember.nn.LSTM(3, 5)
    x = ember.randn(2, 4, 3)
    with pytest.raises(RuntimeError, match="Expected 3, got 4"):
        lstm(ember.randn(2, 4, 4))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 4, 5\), got \[1, 3, 5\]"):
        lstm(x, (ember.zeros(1, 3, 5), ember.zeros(1, 4, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 4, 5\), got \[1, 4, 4\]"):
        lstm(x, (ember.zeros(1, 4, 5), ember.zeros(1, 4, 4)))
    gru = ember.nn.GRU(3, 5)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 4, 5\), got \[2, 4, 5\]"):
        gru(x, ember.zeros(2, 4, 5))
    with pytest.raises(RuntimeError, match="unbatched 2-D input, hx should also be 2-D but got \\(3-D\\)"):
        gru(ember.randn(2, 3), ember.zeros(1, 1, 5))
    with pytest.raises(RuntimeError, match="batched 3-D input, hx should also be 3-D"):
        gru(x, ember.zeros(1, 5))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        gru(ember.randn(2, 2, 2, 3))
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h_0, c_0\)"):
        lstm(x, ember.zeros(1, 4, 5))
    cell = ember.nn.LSTMCell(3, 4)
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch size 3"):
        cell(ember.randn(2, 3), (ember.zeros(3, 4), ember.zeros(3, 4)))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 4 expected 3"):
        cell(ember.randn(2, 4))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 5, expected 4"):
        ember.nn.GRUCell(3, 4)(ember.randn(2, 3), ember.zeros(2, 5))
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D, got 3D"):
        ember.nn.GRUCell(3, 4)(ember.randn(2, 2, 3))


def test_bad_packing():
    x = ember.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match=r"sorted in decreasing order .*\[2, 3, 1\]"):
        ernn.pack_padded_sequence(x, [2, 3, 1])
    with pytest.raises(RuntimeError, match=r"longer than the sequence length 4"):
        ernn.pack_padded_sequence(x, [5, 3, 1])
    with pytest.raises(RuntimeError, match="greater than 0.*lengths \\[3, 2, 0\\]"):
        ernn.pack_padded_sequence(x, [3, 2, 0])
    with pytest.raises(RuntimeError, match=r"got 2 \(batch_size=3\)"):
        ernn.pack_padded_sequence(x, [3, 2])
    p = ernn.pack_padded_sequence(x, [4, 3, 1])
    with pytest.raises(ValueError, match="total_length=2"):
        ernn.pad_packed_sequence(p, total_length=2)
    with pytest.raises(RuntimeError, match="sequence 1 has shape \\[2, 4\\]"):
        ernn.pad_sequence([ember.zeros(2, 3), ember.zeros(2, 4)])
    with pytest.raises(ValueError, match="padding_side"):
        ernn.pad_sequence([ember.zeros(2, 3)], padding_side="middle")
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 3, 4\), got \[1, 2, 4\]"):
        ember.nn.RNN(2, 4)(p, ember.zeros(1, 2, 4))


# ---------------------------------------------------------------------- CUDA (a real GPU, or tests/_fakecuda.py)
# (the `cuda` fixture is in conftest.py)

def _cot(shape, i: int, dev) -> "ember.Tensor":
    """A fixed random cotangent (float64) for output i, on `dev`: every gradient entry matters."""
    return ember.tensor(np.random.default_rng(100 + i).standard_normal(shape), dtype=ember.float64, device=dev)


def _run_on(m, xs, call, dev):
    """Inputs copied to `dev` (the CPU ones that require grad keep doing so), forward, backward of a random
    linear function of every output; returns host copies of the outputs, input grads and parameter grads."""
    ins = [None if x is None else x.detach().to(dev).requires_grad_(x.requires_grad) for x in xs]
    outs = call(m, *ins)
    for o in outs:
        assert o.device == ember.device(dev) or (dev == "cuda" and o.device.type == "cuda"), (o.device, dev)
    sum((o * _cot(tuple(o.shape), i, dev)).sum() for i, o in enumerate(outs)).backward()
    grads = {n: p.grad for n, p in m.named_parameters()}
    for n, g in grads.items():
        assert g is not None, f"no gradient for {n} on {dev}"
        assert g.device.type == ember.device(dev).type, (n, g.device)
    return ([o.detach().cpu().numpy() for o in outs],
            [x.grad.cpu().numpy() for x in ins if x is not None and x.requires_grad],
            {n: g.cpu().numpy() for n, g in grads.items()})


def _cpu_cuda_parity(make, xs, call, tol=1e-12):
    """The module built by `make` (seeded) gives the same outputs and gradients on the CPU and, moved with
    .cuda(), on CUDA, for the same inputs."""
    ember.manual_seed(0)
    m = make()
    ref = _run_on(m, xs, call, "cpu")
    m.zero_grad()
    m.cuda()
    assert all(p.device.type == "cuda" for p in m.parameters())
    got = _run_on(m, xs, call, "cuda")
    for a, b in zip(ref[0] + ref[1], got[0] + got[1]):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    assert ref[2].keys() == got[2].keys()
    for n in ref[2]:
        np.testing.assert_allclose(got[2][n], ref[2][n], rtol=tol, atol=tol, err_msg=n)


def _x(*shape, seed=0, grad=True):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=ember.float64,
                        requires_grad=grad)


def _rnn_call(m, x, *state):
    out, h = m(x, tuple(state) if len(state) == 2 else (state[0] if state else None))
    return [out] + (list(h) if isinstance(h, tuple) else [h])


@pytest.mark.parametrize("mode,kw", [
    ("RNN", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("RNN_relu", dict(num_layers=2)),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(num_layers=2, bidirectional=True, proj_size=3)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(bias=False)),
])
@pytest.mark.parametrize("with_hx", [False, True])
def test_layer_cuda_matches_cpu(cuda, mode, kw, with_hx):
    cls = MODES[mode][0]
    if mode == "RNN_relu":
        kw = dict(kw, nonlinearity="relu")
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    hout = kw.get("proj_size", 0) or 7
    x = _x(3, 4, 5) if kw.get("batch_first") else _x(4, 3, 5)
    xs = [x]
    if with_hx:
        xs.append(_x(layers * dirs, 3, hout, seed=1))
        if mode == "LSTM":
            xs.append(_x(layers * dirs, 3, 7, seed=2))
    _cpu_cuda_parity(lambda: cls(5, 7, dtype=ember.float64, **kw), xs, _rnn_call)


def test_unbatched_lstm_cuda_matches_cpu(cuda):
    _cpu_cuda_parity(lambda: ember.nn.LSTM(5, 7, 2, dtype=ember.float64), [_x(4, 5), _x(2, 7, seed=1),
                                                                        _x(2, 7, seed=2)], _rnn_call)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_cuda_matches_cpu(cuda, mode, enforce_sorted):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]

    def call(m, x):
        packed = ernn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=enforce_sorted)
        assert packed.batch_sizes.device.type == "cpu" and packed.data.device == x.device
        out, h = m(packed)
        padded, lens = ernn.pad_packed_sequence(out, batch_first=True)
        assert lens.device.type == "cpu" and lens.tolist() == lengths
        return [out.data, padded] + (list(h) if isinstance(h, tuple) else [h])

    cls = MODES[mode][0]
    _cpu_cuda_parity(lambda: cls(5, 6, 2, bidirectional=True, batch_first=True, dtype=ember.float64), [_x(4, 5, 5)],
                     call)


def test_packed_sequence_to_cuda(cuda):
    """A PackedSequence built on the CPU and moved with .to('cuda') runs there; batch_sizes stay on the CPU."""
    seqs = [_x(n, 3, seed=n, grad=False) for n in (2, 4, 1)]
    packed = ernn.pack_sequence(seqs, enforce_sorted=False)
    ember.manual_seed(0)
    m = ember.nn.GRU(3, 4, dtype=ember.float64)
    ref, href = m(packed)
    m.cuda()
    pc = packed.to("cuda")
    assert pc.is_cuda and pc.batch_sizes.device.type == "cpu" and pc.sorted_indices.device.type == "cuda"
    got, hgot = m(pc)
    assert got.data.device.type == "cuda"
    np.testing.assert_allclose(got.data.detach().cpu().numpy(), ref.data.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hgot.detach().cpu().numpy(), href.detach().numpy(), rtol=1e-12, atol=1e-12)
    back = ernn.unpack_sequence(got)
    assert [tuple(s.shape) for s in back] == [(2, 4), (4, 4), (1, 4)] and all(s.is_cuda for s in back)
    padded = ernn.pad_sequence([s.cuda() for s in seqs], batch_first=True, padding_value=-1.0)
    assert padded.is_cuda and padded.cpu().numpy()[2, 1:].tolist() == [[-1.0] * 3] * 3


@pytest.mark.parametrize("cls", [ember.nn.RNNCell, ember.nn.LSTMCell, ember.nn.GRUCell])
@pytest.mark.parametrize("with_hx", [False, True])
def test_cells_cuda_match_cpu(cuda, cls, with_hx):
    xs = [_x(3, 5)]
    if with_hx:
        xs += [_x(3, 6, seed=1)] + ([_x(3, 6, seed=2)] if cls is ember.nn.LSTMCell else [])

    def call(m, x, *hx):
        if cls is ember.nn.LSTMCell:
            return list(m(x, tuple(hx) if hx else None))
        return [m(x, hx[0] if hx else None)]

    kw = {"nonlinearity": "relu"} if cls is ember.nn.RNNCell and with_hx else {}
    _cpu_cuda_parity(lambda: cls(5, 6, dtype=ember.float64, **kw), xs, call)


def test_rnn_mixed_devices_raise(cuda):
    m = ember.nn.LSTM(5, 7).cuda()
    h0 = ember.zeros(1, 3, 7)
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(ember.randn(4, 3, 5, device="cuda"), (h0, h0))
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        m(ember.randn(4, 3, 5))  # CPU input, CUDA weights


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_double_backward_cuda_matches_cpu(cuda, mode):
    """create_graph=True (the recomputed graph of ember ops) gives the same second-order gradients on CUDA."""
    res = {}
    for dev in ("cpu", "cuda"):
        ember.manual_seed(0)
        m = MODES[mode][0](3, 4, dtype=ember.float64).to(dev)
        x = _x(5, 2, 3, seed=3).detach().to(dev).requires_grad_()
        g, = ember.autograd.grad(m(x)[0].pow(2).sum(), x, create_graph=True)
        (g * g).sum().backward()
        assert x.grad.device.type == dev
        res[dev] = [t.detach().cpu().numpy() for t in (g, x.grad, m.weight_hh_l0.grad, m.weight_ih_l0.grad)]
    for a, b in zip(res["cpu"], res["cuda"]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_lstm_on_second_device(cuda):
    """Scratch and state arrays are allocated on the input's device, not on the current one (cuda:0)."""
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    m = ember.nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2).to("cuda:1")
    o, (h, c) = m(ember.randn(5, 2, 3, device="cuda:1"))
    o.sum().backward()
    assert {str(t.device) for t in (o, h, c, m.weight_hh_l1_reverse.grad, m.weight_hr_l0.grad)} == {"cuda:1"}
