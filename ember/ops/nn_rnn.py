"""Recurrent layers: one direction of one layer of an Elman RNN, LSTM or GRU as a single graph node.

The sequence is packed time-major: `x` is (N, I), the rows of step t are x[off[t]:off[t] + bs[t]] and
bs (`batch_sizes`) does not increase, so at step t only the first bs[t] sequences are active (a padded
(T, B, I) input is the case bs = [B]·T). The forward pass

    G = x W_ihᵀ + b                      one GEMM over all steps
    for t in order:  a_t = G_t + h W_hhᵀ  one GEMM per step, then the gate math in place

with PyTorch's gates (LSTM i, f, g, o; GRU r, z, n with n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))).
Rows past bs[t] keep their state, so the final state is each sequence's state at its own last step
(forward direction), or after step 0 (reverse direction, where a sequence starts from h_0 at its own
last step). Backward is BPTT in NumPy with one dG_t W_hh GEMM per step; dW_ih, dW_hh, db and dx are
then single GEMMs over all steps: that is `fast_backward`. `backward`, which the engine runs under
create_graph, recomputes the layer from differentiable ember ops and differentiates that (slow, for
double backward only).
"""
from __future__ import annotations

import numpy as np

from .. import backend
from .._tensor import Tensor, make
from ..backend import on_device_of
from ..autograd import forward_ad
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE, enable_grad

_new = object.__new__

__all__ = ["rnn_layer"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _sigmoid_(a: np.ndarray) -> np.ndarray:
    """σ(a) in place, as 0.5·tanh(a/2) + 0.5: one transcendental and no overflow."""
    a *= 0.5
    np.tanh(a, out=a)
    a *= 0.5
    a += 0.5
    return a


def _order(bs: np.ndarray, reverse: bool) -> list:
    """(t, row offset, active rows) per step, in processing order."""
    off = np.concatenate(([0], np.cumsum(bs)[:-1]))
    steps = [(t, int(off[t]), int(bs[t])) for t in range(len(bs))]
    return steps[::-1] if reverse else steps


class RNNLayer(Op):
    """(out, h_n[, c_n]) of one layer-direction; see the module docstring. Inputs (x, h0, c0, w_ih, w_hh, b_ih,
    b_hh, w_hr) are arrays or None; c0 only for LSTM, w_hr only with a projection."""


    n_out = 2

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        with on_device_of(x):  # CuPy allocates on the current device, not on x's
            return self._run(backend.array_module(x), x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse)

    def _run(self, xp, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        steps = _order(bs, reverse)
        n, b0 = x.shape[0], int(bs[0])
        gh_n = w_hh.shape[0]
        hid = gh_n // _GATES[mode]
        hout = w_hh.shape[1]
        dt = np.result_type(x.dtype, w_ih.dtype)
        g = x @ w_ih.T  # (N, gates·H): every step's input part in one GEMM
        if b_ih is not None:
            g += b_ih
            if mode != "GRU":
                g += b_hh  # GRU keeps b_hn inside r ⊙ (W_hn h + b_hn)
        h = xp.zeros((b0, hout), dt) if h0 is None else h0.astype(dt, copy=True)
        out = xp.empty((n, hout), dt)
        hprev = xp.empty((n, hout), dt)  # the state each step read: dW_hh = dGᵀ·hprev in one GEMM
        gh = xp.empty((b0, gh_n), dt)
        whT = w_hh.T
        if mode == "LSTM":
            c = xp.zeros((b0, hid), dt) if c0 is None else c0.astype(dt, copy=True)
            cprev = xp.empty((n, hid), dt)
            tc = xp.empty((n, hid), dt)  # tanh(c_t)
            hfull = xp.empty((n, hid), dt) if w_hr is not None else None
            tmp = xp.empty((b0, hid), dt)
        elif mode == "GRU":
            ghn = xp.empty((n, hid), dt)  # W_hn h + b_hn, which r multiplies
            tmp = xp.empty((b0, hid), dt)
        for t, o, m in steps:
            s = slice(o, o + m)
            hp = h[:m]
            hprev[s] = hp
            a = g[s]
            ghm = gh[:m]
            np.matmul(hp, whT, out=ghm)
            if mode == "LSTM":
                a += ghm
                _sigmoid_(a[:, :2 * hid])
                np.tanh(a[:, 2 * hid:3 * hid], out=a[:, 2 * hid:3 * hid])
                _sigmoid_(a[:, 3 * hid:])
                cm = c[:m]
                cprev[s] = cm
                cm *= a[:, hid:2 * hid]
                np.multiply(a[:, :hid], a[:, 2 * hid:3 * hid], out=tmp[:m])
                cm += tmp[:m]
                np.tanh(cm, out=tc[s])
                if w_hr is None:
                    np.multiply(a[:, 3 * hid:], tc[s], out=out[s])
                else:
                    np.multiply(a[:, 3 * hid:], tc[s], out=hfull[s])
                    np.matmul(hfull[s], w_hr.T, out=out[s])
            elif mode == "GRU":
                if b_hh is not None:
                    ghm += b_hh
                a[:, :2 * hid] += ghm[:, :2 * hid]
                _sigmoid_(a[:, :2 * hid])
                ghn[s] = ghm[:, 2 * hid:]
                nn = a[:, 2 * hid:]
                np.multiply(a[:, :hid], ghm[:, 2 * hid:], out=tmp[:m])
                nn += tmp[:m]
                np.tanh(nn, out=nn)
                # h' = n + z ⊙ (h − n)
                np.subtract(hp, nn, out=out[s])
                out[s] *= a[:, hid:2 * hid]
                out[s] += nn
            else:
                a += ghm
                if mode == "RNN_TANH":
                    np.tanh(a, out=out[s])
                else:
                    np.maximum(a, 0, out=out[s])
            h[:m] = out[s]
        self.g, self.hprev = g, hprev
        res = [out, h]
        if mode == "LSTM":
            self.cprev, self.tc, self.hfull = cprev, tc, hfull
            res.append(c)
        elif mode == "GRU":
            self.ghn = ghn
        else:  # a copy: the result is the caller's to modify in place
            self.hy = out.copy()
        return res

    def backward(self, grads, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        """The vector-Jacobian product of the layer, by definition: recompute the layer from ember ops
        (`_layer_graph`, the recurrence of the module docstring written step by step) and differentiate that
        recomputation for the cotangents `grads` (each output's, or None). Recorded when create_graph is on, so
        the gradients differentiate again; slow (one graph node per gate per step)."""
        return _backward_graph(self, grads, (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr), mode, bs, reverse)

    def jvp(self, t, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        """The outputs' tangents by definition, as backward's gradients: the recomputation of the layer from ember
        ops (`_layer_graph`) run on inputs that carry the tangents `t`, so each step's gate rules give them."""
        return _forward_graph(t[:8], (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr), mode, bs, reverse)

    def fast_backward(self, grads, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        """backward's gradients by BPTT on the arrays, from the gates and states that forward kept: one
        dG_t·W_hh GEMM per step, then dW_ih, dW_hh, db and dx as single GEMMs over all steps."""
        xa = x._data
        with on_device_of(xa):  # CuPy allocates on the current device, not on x's
            return self._bptt(backend.array_module(xa), grads, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs,
                                  reverse)

    def _bptt(self, xp, grads, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
        xa, wih, whh = x._data, w_ih._data, w_hh._data
        whr = None if w_hr is None else w_hr._data
        n, b0 = xa.shape[0], int(bs[0])
        hout = whh.shape[1]
        dt = self.g.dtype
        gh_n = whh.shape[0]
        hid = gh_n // _GATES[mode]
        dout = grads[0]._data if grads[0] is not None else None
        dh = xp.zeros((b0, hout), dt) if grads[1] is None else grads[1]._data.astype(dt, copy=True)
        g = self.g
        dg = xp.empty((n, gh_n), dt)  # gradient of the pre-activations (the x-side for GRU)
        if mode == "LSTM":
            dc = xp.zeros((b0, hid), dt) if len(grads) < 3 or grads[2] is None else grads[2]._data.astype(dt, copy=True)
            cprev, tc, hfull = self.cprev, self.tc, self.hfull
            dhp_all = xp.empty((n, hout), dt) if whr is not None else None
            t1, t2 = xp.empty((b0, hid), dt), xp.empty((b0, hid), dt)
        elif mode == "GRU":
            dgh = xp.empty((n, gh_n), dt)  # the h-side: differs from dg in the n block
            t1 = xp.empty((b0, hid), dt)
        dhm_buf = xp.empty((b0, hout), dt)
        for t, o, m in reversed(_order(bs, reverse)):
            s = slice(o, o + m)
            dhm = dhm_buf[:m]
            if dout is not None:
                np.add(dh[:m], dout[s], out=dhm)
            else:
                xp.copyto(dhm, dh[:m])
            a, d = g[s], dg[s]
            if mode == "LSTM":
                if whr is not None:
                    dhp_all[s] = dhm
                    dhf = dhm @ whr
                else:
                    dhf = dhm
                i_, f_, g_, o_ = a[:, :hid], a[:, hid:2 * hid], a[:, 2 * hid:3 * hid], a[:, 3 * hid:]
                di, df, dgg, do = d[:, :hid], d[:, hid:2 * hid], d[:, 2 * hid:3 * hid], d[:, 3 * hid:]
                tcs = tc[s]
                dcm = dc[:m]
                # dc_t = dc + dh ⊙ o ⊙ (1 − tanh²c)
                u, v = t1[:m], t2[:m]
                np.multiply(tcs, tcs, out=u)
                np.subtract(1, u, out=u)
                u *= o_
                u *= dhf
                dcm += u
                np.multiply(dhf, tcs, out=do)  # do, then through σ'
                np.subtract(1, o_, out=v)
                v *= o_
                do *= v
                np.multiply(dcm, g_, out=di)
                np.subtract(1, i_, out=v)
                v *= i_
                di *= v
                np.multiply(dcm, i_, out=dgg)
                np.multiply(g_, g_, out=v)
                np.subtract(1, v, out=v)
                dgg *= v
                np.multiply(dcm, cprev[s], out=df)
                np.subtract(1, f_, out=v)
                v *= f_
                df *= v
                dcm *= f_
                np.matmul(d, whh, out=dh[:m])
            elif mode == "GRU":
                r, z, nn = a[:, :hid], a[:, hid:2 * hid], a[:, 2 * hid:]
                dr, dz, dn = d[:, :hid], d[:, hid:2 * hid], d[:, 2 * hid:]
                e = dgh[s]
                hp = self.hprev[s]
                np.subtract(hp, nn, out=dz)  # dz = dh ⊙ (h − n) ⊙ σ'
                dz *= dhm
                u = t1[:m]
                np.subtract(1, z, out=u)
                np.multiply(dhm, u, out=dn)  # dn = dh ⊙ (1 − z) ⊙ (1 − n²)
                u *= z
                dz *= u
                np.multiply(nn, nn, out=u)
                np.subtract(1, u, out=u)
                dn *= u
                np.multiply(dn, self.ghn[s], out=dr)
                np.subtract(1, r, out=u)
                u *= r
                dr *= u
                e[:, :2 * hid] = d[:, :2 * hid]
                np.multiply(dn, r, out=e[:, 2 * hid:])
                # dh_prev = dh ⊙ z + dG_h W_hh
                np.matmul(e, whh, out=dh[:m])
                np.multiply(dhm, z, out=u)
                dh[:m] += u
            else:
                if mode == "RNN_TANH":
                    hy = self.hy[s]
                    np.multiply(hy, hy, out=d)
                    np.subtract(1, d, out=d)
                    d *= dhm
                else:
                    np.multiply(dhm, self.hy[s] > 0, out=d)
                np.matmul(d, whh, out=dh[:m])
        gx = gh0 = gc0 = gwih = gwhh = gbih = gbhh = gwhr = None
        dgh_all = dgh if mode == "GRU" else dg
        if self.needs(0):
            gx = make(dg @ wih)
        if self.needs(1):
            gh0 = make(dh)
        if mode == "LSTM" and self.needs(2):
            gc0 = make(dc)
        if self.needs(3):
            gwih = make(dg.T @ xa)
        if self.needs(4):
            gwhh = make(dgh_all.T @ self.hprev)
        ones = xp.ones(n, dt)
        if b_ih is not None and self.needs(5):
            gbih = make(ones @ dg)
        if b_hh is not None and self.needs(6):
            gbhh = make(ones @ dgh_all)
        if whr is not None and self.needs(7):
            gwhr = make(dhp_all.T @ hfull)
        return gx, gh0, gc0, gwih, gwhh, gbih, gbhh, gwhr, None, None, None


def _layer_graph(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse):
    """The same layer from differentiable ember ops (for double backward); h0 (and c0) given."""
    from .shape import cat
    hid = w_hh.shape[0] // _GATES[mode]
    g = x @ w_ih.t()
    if b_ih is not None:
        g = g + b_ih if mode == "GRU" else g + (b_ih + b_hh)
    h, c = h0, c0
    outs = [None] * len(bs)
    for t, o, m in _order(bs, reverse):
        b0 = h.shape[0]
        hp = h[:m]
        gh = hp @ w_hh.t()
        a = g[o:o + m]
        if mode == "LSTM":
            a = a + gh
            i_, f_ = a[:, :hid].sigmoid(), a[:, hid:2 * hid].sigmoid()
            g_, o_ = a[:, 2 * hid:3 * hid].tanh(), a[:, 3 * hid:].sigmoid()
            cn = f_ * c[:m] + i_ * g_
            hn = o_ * cn.tanh()
            if w_hr is not None:
                hn = hn @ w_hr.t()
            c = cn if m == b0 else cat([cn, c[m:]], 0)
        elif mode == "GRU":
            if b_hh is not None:
                gh = gh + b_hh
            r = (a[:, :hid] + gh[:, :hid]).sigmoid()
            z = (a[:, hid:2 * hid] + gh[:, hid:2 * hid]).sigmoid()
            nn = (a[:, 2 * hid:] + r * gh[:, 2 * hid:]).tanh()
            hn = nn + z * (hp - nn)
        else:
            a = a + gh
            hn = a.tanh() if mode == "RNN_TANH" else a.relu()
        outs[t] = hn
        h = hn if m == b0 else cat([hn, h[m:]], 0)
    res = [cat(outs, 0), h]
    if mode == "LSTM":
        res.append(c)
    return res


def _given_states(x: Tensor, h0, c0, w_hh: Tensor, mode: str, bs) -> tuple:
    """h0 (and, for LSTM, c0) with zeros for those not given, as `_layer_graph` takes them."""
    b0 = int(bs[0])
    hout, hid = w_hh.shape[1], w_hh.shape[0] // _GATES[mode]
    dt = x._data.dtype
    xp = backend.array_module(x._data)
    with on_device_of(x._data):  # CuPy allocates on the current device
        h0g = h0 if h0 is not None else make(xp.zeros((b0, hout), dt))
        c0g = (c0 if c0 is not None else make(xp.zeros((b0, hid), dt))) if mode == "LSTM" else None
    return h0g, c0g


def _forward_graph(tangents: tuple, ins: tuple, mode, bs, reverse) -> tuple:
    """RNNLayer.jvp: the outputs' tangents of `_layer_graph` on the inputs `ins` carrying `tangents` (0 for none) at
    a forward-AD level of its own, opened and closed here."""
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = ins
    h0, c0 = _given_states(x, h0, c0, w_hh, mode, bs)
    ins = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    level = forward_ad._enter_level()
    try:
        duals = [forward_ad.make_dual(a, ta, level=level) if isinstance(ta, Tensor) else a
                 for a, ta in zip(ins, tangents)]
        outs = _layer_graph(*duals, mode, bs, reverse)
        tans = tuple(forward_ad.unpack_dual(o, level=level).tangent for o in outs)
    finally:
        forward_ad._exit_level(level)
    return tuple(0 if t is None else t for t in tans)  # (an output the tangents do not reach: zeros)


def _backward_graph(node, grads, ins, mode, bs, reverse):
    """RNNLayer.backward: the gradients of a recomputation of the layer from ember ops."""
    from ..autograd import grad
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = ins
    create_graph = MODE.grad  # the engine's create_graph
    h0g, c0g = _given_states(x, h0, c0, w_hh, mode, bs)
    with enable_grad():  # the recomputation must be recorded to be differentiated, create_graph or not
        outs = _layer_graph(x, h0g, c0g, w_ih, w_hh, b_ih, b_hh, w_hr, mode, bs, reverse)
    pairs = [(o, gz) for o, gz in zip(outs, grads) if gz is not None]
    wanted = [(i, t) for i, t in enumerate(ins) if t is not None and node.needs(i)]
    res = grad([p[0] for p in pairs], [t for _, t in wanted], [p[1] for p in pairs], create_graph=create_graph,
               allow_unused=True)
    out = [None] * 11
    for (i, _), r in zip(wanted, res):
        out[i] = r
    return tuple(out)


def rnn_layer(mode: str, x: Tensor, batch_sizes: np.ndarray, reverse: bool, h0: Tensor | None, c0: Tensor | None,
              w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None,
              w_hr: Tensor | None = None) -> tuple:
    """One layer-direction over the packed (N, I) input x with `batch_sizes` (non-increasing, summing to N):
    returns (out (N, H_out), h_n (B, H_out)) and, for mode 'LSTM', c_n (B, H) as a third element. h0/c0 None
    mean zeros. mode is 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'. One graph node for all outputs."""
    tensors = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    backend.check_same_device(f"rnn_layer ({mode})", [t._data for t in tensors if t is not None])
    consts = (mode, batch_sizes, reverse)
    return dispatch(_new(RNNLayer), tensors + consts, tuple([None if t is None else t._data for t in tensors]) + consts)
