"""Fused Conv2d → ReLU → MaxPool2d (in either order of ReLU and pool): one op, used by `nn.Sequential`.

    y = relu(max_pool(conv(x, w) + b))  with non-overlapping P×P pool windows (kernel = stride = P)

Max commutes with a per-channel shift and with ReLU (both are monotone), so the op computes the
convolution separately for each of the P·P window slots (slot (a, b) is conv output row i·P + a,
column j·P + b), takes the running maximum of the slot outputs, and only then adds the bias and
applies ReLU, on a quarter of the elements for P = 2. The slot outputs are contiguous blocks, so
the pool is P·P - 1 elementwise passes instead of strided reads of a full-size activation, and
neither the full-size ReLU output nor its mask exists. W3's training step (`benchmarks/cnn.py`):
0.70 -> 0.89x the hand-written NumPy step at 2 threads; its inference 0.85 -> 1.15x (docs/performance.md).

Layouts: each slot's im2col columns are a (K, N·L) matrix (K = C·kh·kw, L = pooled H·W), or its
transpose built from a channel-last copy of the input when C·kw is large enough to give long copy
runs (`_channels_last`); all slots are kept in one array for the weight gradient, which is then one
GEMM. The slot outputs are (O, N·L), channel-first, transposed to (N, O, ...) once, after the pool.

The result is the unfused one's up to rounding: the bias is added after the maximum instead of
inside the GEMM, and a window whose maximum is tied only after rounding z + b may route its
gradient to a different (equal-valued) entry. NaN follows PyTorch's pooling rule (the last NaN).

Devices: one implementation for NumPy and CuPy arrays (`xp = array_module(x)`, taken once per forward and
backward and handed to the helpers). The image chunks exist for the CPU's caches; on CUDA the whole batch is one
chunk (one GEMM per slot), and the 2x2 tournament applies the NaN rule unconditionally instead of testing for a NaN
first (a test would synchronise the GPU on every step).
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module, check_same_device
from .._tensor import Tensor, make
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .arithmetic import ones_vector
from .nn_conv import ChannelSum, Conv, ConvTranspose, ConvWeightGrad, conv_inputs, conv_transpose_array, conv_win
from .nn_pool import PoolGather, PoolScatter, argmax_scan, index_dtype, needs_indices
from .unary import ReluGrad, relu_mask
from .windows import Win, chunk, strided_at
from .. import _dtype as dt

_new = object.__new__

__all__ = ["conv2d_relu_max_pool2d"]


def _slot_offsets(pool: tuple):
    """(slot number, a, b) for each entry of a pool window, in row-major order (max_pool2d's entry numbers)."""
    for a in range(pool[0]):
        for b in range(pool[1]):
            yield a * pool[1] + b, a, b


def _channels_last(c: int, kw: int) -> bool:
    """Whether the columns are built from a channel-last copy of the input (rows (n, i, j), columns (ka, kb, c)):
    im2col then copies runs of kw·C contiguous entries instead of runs of QW entries a pool-stride apart.
    Measured, one thread, batch 128: W3's conv2 (C = 16) forward 8.4 -> 5.5 ms; conv1 (C = 1) stays channel-first."""
    return c * kw >= 16


def _fill_cols(cols: np.ndarray, xp: np.ndarray, win: Win, pool: tuple, q: tuple, at: slice, last: bool,
               am=np) -> None:
    """The im2col columns of each slot for the images of the padded chunk xp (a C-contiguous array), into
    rows/columns `at` of cols:
    the input entries that conv output (i·P + a, j·P + b) reads at kernel offset (ka, kb).
    Channel-first: xp (m, C, Hp, Wp), cols (K, slots, N·L) with K in (c, ka, kb) order.
    Channel-last (`last`): xp (m, Hp, Wp, C), cols (slots, N·L, K) with K in (ka, kb, c) order.
    `am` is the arrays' module. The destination reshapes only split axes, so they are views of cols."""
    (kh, kw), (th, tw), (dh, dw), (ph, pw) = win.k, win.s, win.d, pool
    if last:
        m, c = xp.shape[0], xp.shape[3]
        sn, sh, sw, sc = xp.strides
        for s, a, b in _slot_offsets(pool):
            v = strided_at(xp, a * th * sh + b * tw * sw, (m,) + q + (kh, kw, c),
                         (sn, sh * th * ph, sw * tw * pw, sh * dh, sw * dw, sc), am)
            am.copyto(cols[s, at].reshape(v.shape), v)
        return
    m, c = xp.shape[:2]
    sn, sc, sh, sw = xp.strides
    for s, a, b in _slot_offsets(pool):
        v = strided_at(xp, a * th * sh + b * tw * sw, (c, kh, kw, m) + q,
                     (sc, sh * dh, sw * dw, sn, sh * th * ph, sw * tw * pw), am)
        am.copyto(cols[:, s, at].reshape(v.shape), v)



def _tournament(z: list, y: np.ndarray, t: np.ndarray, u: np.ndarray, masks: tuple | None) -> None:
    """y = max of the 2x2 slot outputs z (z00, z01, z10, z11); with `masks` (top, left, lbot), PyTorch's pick
    as a tournament: the top pair holds it, the left of the top pair does, the left of the bottom pair
    does — 3 compares instead of the general scan's 10 passes. The pick is the first maximum in row-major
    order, or the last NaN when the window has one."""
    np.maximum(z[0], z[1], out=t)
    np.maximum(z[2], z[3], out=u)
    np.maximum(t, u, out=y)
    if masks is None:
        return
    pairs = ((t, u), (z[0], z[1]), (z[2], z[3]))
    for mask, (p, r) in zip(masks, pairs):
        np.greater_equal(p, r, out=mask)
    # rare: the later entry of a pair wins when it is NaN, the earlier when only it is. On a device the fix-up
    # always runs (it changes nothing without NaNs): testing for a NaN would synchronise the GPU every step
    if y.__class__ is not np.ndarray or np.isnan(y.max()):
        for mask, (p, r) in zip(masks, pairs):
            mask |= p != p
            mask &= r == r


class ConvReluPool(Op):
    """z = relu(max_pool(conv(x, w) + b)); see the module docstring. Backward: the ReLU mask and the pool's
    routing on the pooled gradient, then the weight gradient as one GEMM over the kept slot columns and the
    input gradient as the adjoint convolution of the routed gradient."""

    def forward(self, x, w, b, win, pool, need_route, keep_cols):
        n, c, h, wd = x.shape
        o = w.shape[0]
        (kh, kw), (pt, pb), (pl, pr) = win.k, win.p[0], win.p[1]
        oh, ow = win.out((h, wd))
        q = (oh // pool[0], ow // pool[1])
        slots, ln, k = pool[0] * pool[1], q[0] * q[1], c * kh * kw
        dtype = np.result_type(x.dtype, w.dtype)
        last = _channels_last(c, kw)
        am = array_module(x)
        # images per chunk: their columns (all slots) take ~2 MiB, so each GEMM reads them from cache. On CUDA the
        # whole batch is one chunk: a GPU wants one large GEMM per slot, not many small launches
        nc = chunk(n, k * slots * ln * x.itemsize) if am is np else n
        cn = (n if keep_cols else nc) * ln
        cols = am.empty((slots, cn, k) if last else (k, slots, cn), dtype)
        z = am.empty((slots, o, nc * ln), dtype)
        ymax = am.empty((o, nc * ln), dtype)
        tree = pool == (2, 2)
        if tree:
            t, u = am.empty_like(ymax), am.empty_like(ymax)
            route = tuple(am.empty((o, n * ln), bool) for _ in range(3)) if need_route else None
        else:
            route = am.empty((o, n * ln), index_dtype(slots)) if need_route else None
        out = am.empty((n, o) + q, dtype)
        hp, wp = h + pt + pb, wd + pl + pr
        xpad = am.zeros((min(nc, n), hp, wp, c) if last else (min(nc, n), c, hp, wp), x.dtype)  # borders stay 0
        wm = w.transpose(0, 2, 3, 1).reshape(o, k) if last else w.reshape(o, k)
        for n0 in range(0, n, nc):
            n1 = min(n0 + nc, n)
            m = n1 - n0
            xp = xpad[:m]
            if last:
                xp[:, pt:pt + h, pl:pl + wd] = x[n0:n1].transpose(0, 2, 3, 1)
            else:
                xp[:, :, pt:pt + h, pl:pl + wd] = x[n0:n1]
            at = slice(n0 * ln, n1 * ln) if keep_cols else slice(0, m * ln)
            _fill_cols(cols, xp, win, pool, q, at, last, am)
            for s in range(slots):
                np.matmul(wm, cols[s, at].T if last else cols[:, s, at], out=z[s, :, :m * ln])
            y, zs, part = ymax[:, :m * ln], [z[s, :, :m * ln] for s in range(slots)], slice(n0 * ln, n1 * ln)
            if tree:
                _tournament(zs, y, t[:, :m * ln], u[:, :m * ln], None if route is None else [r[:, part] for r in route])
            else:
                argmax_scan(zs, need_route, y, None if route is None else route[:, part])
            dst = out[n0:n1].transpose(1, 0, 2, 3)  # (O, m, QH, QW) view of the (N, O, QH, QW) result
            if b is None:
                am.copyto(dst, y.reshape(dst.shape))
            else:
                np.add(y.reshape(dst.shape), b.reshape(o, 1, 1, 1), out=dst)
            np.maximum(out[n0:n1], 0, out=out[n0:n1])
        # ReLU's mask, not the output: the result is the user's to modify in place, as max_pool2d's is
        self.route, self.geom, self.live = route, (q, (oh, ow), last), relu_mask(out) if need_route else None
        if keep_cols:
            self.cols = cols
        return out

    def _slot_grads(self, gt: np.ndarray, slots: int, am=np) -> np.ndarray:
        """The pooled gradient gt (O, N·L) routed to the slots: (O, slots, N·L), one slot non-zero per window."""
        dz = am.empty((gt.shape[0], slots, gt.shape[1]), gt.dtype)
        if type(self.route) is tuple:  # 2x2 tournament; subtracting keeps the split exact
            top, left, lbot = self.route
            d00, d01, d10, d11 = (dz[:, s] for s in range(4))
            np.multiply(gt, top, out=d01)
            np.subtract(gt, d01, out=d11)
            np.multiply(d01, left, out=d00)
            np.subtract(d01, d00, out=d01)
            np.multiply(d11, lbot, out=d10)
            np.subtract(d11, d10, out=d11)
        else:
            for s in range(slots):
                np.multiply(gt, self.route == s, out=dz[:, s])
        return dz

    def _entry_numbers(self) -> np.ndarray:
        """The routing as max_pool2d's window entry numbers, (O, N·L)."""
        if type(self.route) is not tuple:
            return self.route
        top, left, lbot = self.route
        am = array_module(top)
        return am.where(top, am.where(left, 0, 1), am.where(lbot, 2, 3)).astype(np.uint8)

    def jvp(self, t, x, w, b, win, pool, need_route, keep_cols):
        """The chain rule forward through conv, max_pool and relu: c' = conv(x', w) + conv(x, w'), the pool picks c'
        at each window's maximum (PoolGather, with the routing forward recorded), then + b', zero where the
        output is not positive (ReluGrad)."""
        tx, tw, tb = t[:3]
        q, ohw, _ = self.geom
        n, o = x.shape[0], w.shape[0]
        dc = Conv.apply(tx, w, None, win, 1) if isinstance(tx, Tensor) else 0
        if isinstance(tw, Tensor):
            dc = dc + Conv.apply(x, tw, None, win, 1)
        if isinstance(dc, Tensor):
            e = self._entry_numbers()
            idx = array_module(e).ascontiguousarray(e.reshape(o, n, *q).transpose(1, 0, 2, 3))
            dy = PoolGather.apply(dc, idx, Win(pool, pool, (1, 1), ((0, 0), (0, 0))), ohw)
        else:
            dy = make(array_module(x._data).zeros((n, o) + q, x._data.dtype))
        if isinstance(tb, Tensor):
            dy = dy + tb.reshape(1, o, 1, 1)
        return ReluGrad.apply(dy, make(self.live))

    def backward(self, gz, x, w, b, win, pool, need_route, keep_cols):
        """The chain rule through relu ∘ max_pool ∘ conv, each step one differentiable op of the unfused layers:
        dy = gz where the output is positive (ReluGrad); dz = dy routed to each window's maximum, zero elsewhere
        (PoolScatter, with the routing forward recorded); then the convolution's adjoints,
        gx = conv_transpose(dz, w), gw = dz ⋆ x (ConvWeightGrad), gb = Σ_{n,h,w} dz."""
        q, ohw, _ = self.geom
        n, o = gz.shape[:2]
        g = ReluGrad.apply(gz, make(self.live))  # gz where the mask is set
        e = self._entry_numbers()
        idx = array_module(e).ascontiguousarray(e.reshape(o, n, *q).transpose(1, 0, 2, 3))
        dz = PoolScatter.apply(g, idx, Win(pool, pool, (1, 1), ((0, 0), (0, 0))), ohw)
        gx = ConvTranspose.apply(dz, w, win, 1, x.shape[2:]) if self.needs(0) else None
        gw = ConvWeightGrad.apply(x, dz, win, 1, w.shape) if self.needs(1) else None
        gb = ChannelSum.apply(dz) if b is not None and self.needs(2) else None
        return gx, gw, gb, None, None, None, None

    def fast_backward(self, gz, x, w, b, win, pool, need_route, keep_cols):
        """backward's gradients on the arrays: the ReLU mask and the routing applied to the pooled gradient per
        window slot, then the weight gradient as one GEMM over the slot columns forward kept, and the input
        gradient as a full convolution of the slot gradients scattered into a padded channel-last buffer (never
        the full-size conv-output gradient PoolScatter builds)."""
        q, ohw, last = self.geom
        n, o = gz.shape[:2]
        slots, ln = pool[0] * pool[1], q[0] * q[1]
        g = gz._data
        am = array_module(g)
        # ReLU's mask and the transpose to channel-first in one pass
        gt = am.empty((o, n * ln), g.dtype)
        np.multiply(g.transpose(1, 0, 2, 3), self.live.transpose(1, 0, 2, 3), out=gt.reshape(o, n, *q))
        dz = self._slot_grads(gt, slots, am)
        gx = gw = gb = None
        if self.needs(1):
            cols = self.__dict__.pop("cols", None)  # used once: a second backward (retain_graph) rebuilds them
            if cols is None:
                cols = self._rebuild_cols(x._data, win, pool, q, last, am)
            dzm = dz.reshape(o, -1)
            if last:
                kh, kw = win.k
                gw = (dzm @ cols.reshape(-1, cols.shape[2])).reshape(o, kh, kw, -1).transpose(0, 3, 1, 2)
                gw = make(am.ascontiguousarray(gw))
            else:
                gw = make((dzm @ cols.reshape(cols.shape[0], -1).T).reshape(w.shape))
        if b is not None and self.needs(2):
            # a GEMV with the host's cached ones vector; a device sums with its own reduction
            gb = make(gt @ ones_vector(gt.shape[1], gt.dtype) if am is np else gt.sum(1))
        if self.needs(0):
            gx = _input_grad(dz, n, q, ohw, pool, w._data, win, x.shape[2:], am)
            if gx is None:
                gx = conv_transpose_array(self._scatter(dz, n, q, ohw, pool, am), w._data, win, 1, x.shape[2:])
            gx = make(gx)
        return gx, gw, gb, None, None, None, None

    @staticmethod
    def _scatter(dz: np.ndarray, n: int, q: tuple, ohw: tuple, pool: tuple, am=np) -> np.ndarray:
        """The conv output's gradient (N, O, OH, OW) from the per-slot (O, slot, N·L) one; rows and columns past the
        last whole pool window get 0."""
        o = dz.shape[0]
        ph, pw = pool
        whole = ohw == (q[0] * ph, q[1] * pw)
        full = (am.empty if whole else am.zeros)((n, o) + ohw, dz.dtype)
        for s, a, b in _slot_offsets(pool):
            full[:, :, a:q[0] * ph:ph, b:q[1] * pw:pw] = dz[:, s].reshape(o, n, *q).transpose(1, 0, 2, 3)
        return full

    @staticmethod
    def _rebuild_cols(x, win, pool, q, last, am=np) -> np.ndarray:
        n, c, h, wd = x.shape
        (pt, pb), (pl, pr) = win.p
        k, slots, cn = c * win.k[0] * win.k[1], pool[0] * pool[1], n * q[0] * q[1]
        cols = am.empty((slots, cn, k) if last else (k, slots, cn), x.dtype)
        if last:
            xp = am.zeros((n, h + pt + pb, wd + pl + pr, c), x.dtype)
            xp[:, pt:pt + h, pl:pl + wd] = x.transpose(0, 2, 3, 1)
        else:
            xp = am.zeros((n, c, h + pt + pb, wd + pl + pr), x.dtype)
            xp[:, :, pt:pt + h, pl:pl + wd] = x
        _fill_cols(cols, xp, win, pool, q, slice(None), last, am)
        return cols

def _input_grad(dz: np.ndarray, n: int, q: tuple, ohw: tuple, pool: tuple, w: np.ndarray, win: Win,
                hw: tuple, am=np) -> np.ndarray | None:
    """The input gradient of a stride-1 convolution from the per-slot (O, slots, N·L) output gradient, as the full
    convolution of the channel-last, zero-padded output gradient with the flipped kernel; None where that does not
    apply (strided, or padding beyond the kernel's extent: the caller uses conv_transpose_array).

    The slots are scattered straight into the padded channel-last buffer, im2col copies runs of kw·O entries,
    and the GEMM, columns · flipped kernelᵀ, writes a channel-last (N, H, W, C) result, returned as its (N, C, H, W)
    transposed view (one thread, batch 128, W3's conv2 with the scatter: 5.6 -> 4.5 ms against the NCHW scatter
    and conv_transpose_array). With C = 16 that orientation is OpenBLAS's fast one: the W3 step 27.5 -> 24.9 ms at
    one thread, 31.2 -> 30.3 ms at two (a disturbed run: 21 ms is usual), A/B in one process, against the
    channel-first kernel · columnsᵀ, even though the previous layer's backward then reads a strided gradient. `am` is the arrays' module; on a device, one chunk."""
    if win.s != (1, 1):
        return None
    o, c = w.shape[:2]
    (kh, kw), (dh, dw), (h, wd) = win.k, win.d, hw
    (pt, pb), (pl, pr) = win.p
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    if pt > eh or pb > eh or pl > ew or pr > ew:
        return None
    # dzp[n, eh - pt + r, ew - pl + s, o] = dz at conv output (r, s); zero elsewhere (rows past the pooled part too)
    dzp = am.zeros((n, h + eh, wd + ew, o), dz.dtype)
    (ph, pw), (th, tw) = pool, (eh - pt, ew - pl)
    for s, a, b in _slot_offsets(pool):
        dst = dzp[:, th + a:th + q[0] * ph:ph, tw + b:tw + q[1] * pw:pw]
        am.copyto(dst, dz[:, s].reshape(o, n, *q).transpose(1, 2, 3, 0))
    # wt[c, ka, kb, o] = w[o, c, kh-1-ka, kw-1-kb]
    wt = am.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 2, 3, 0)).reshape(c, -1)
    gx = am.empty((n, h, wd, c), dz.dtype)
    kk = kh * kw * o
    nc = chunk(n, h * wd * kk * dz.itemsize) if am is np else n  # chunks for the CPU's caches only
    buf = am.empty((nc, h, wd, kh, kw, o), dz.dtype)
    sn, sh, sw, so = dzp.strides
    for n0 in range(0, n, nc):
        n1 = min(n0 + nc, n)
        m = n1 - n0
        v = strided_at(dzp, n0 * sn, (m, h, wd, kh, kw, o), (sn, sh, sw, sh * dh, sw * dw, so), am)
        am.copyto(buf[:m], v)
        np.matmul(buf[:m].reshape(m * h * wd, kk), wt.T, out=gx[n0:n1].reshape(m * h * wd, c))
    return gx.transpose(0, 3, 1, 2)


def pooled_size(conv_out: tuple, pool: tuple) -> tuple:
    """The (QH, QW) of non-overlapping pool windows over a conv output of size conv_out (floor mode)."""
    return conv_out[0] // pool[0], conv_out[1] // pool[1]


def conv2d_relu_max_pool2d(input: Tensor, weight: Tensor, bias: Tensor | None, stride=1, padding=0, dilation=1,
                           pool=2) -> Tensor:
    """relu(max_pool2d(conv2d(input, weight, bias, stride, padding, dilation), pool)) in one op, for batched
    (N, C, H, W) floating input, one group and non-overlapping pool windows (kernel_size = stride = pool, no
    padding, floor mode). Equal to the composition up to rounding (see the module docstring)."""
    x, w, batched, x2, _ = conv_inputs("conv2d", 2, input, weight, bias, 1, False)
    if not batched or not dt.is_float(x._data.dtype):
        raise RuntimeError(f"conv2d_relu_max_pool2d(): needs a batched (N, C, H, W) floating-point input, got "
                           f"{x.dtype} of size {list(x.shape)}")
    p = (pool, pool) if isinstance(pool, int) else tuple(pool)
    if len(p) != 2 or not all(isinstance(v, int) and v > 0 for v in p):
        raise RuntimeError(f"conv2d_relu_max_pool2d(): pool must be a positive int or a pair of them, got pool {list(p)}")
    win = conv_win("conv2d", x.shape[2:], tuple(w.shape[2:]), stride, padding, dilation)
    ohw = win.out(x.shape[2:])
    if min(pooled_size(ohw, p)) < 1:
        raise RuntimeError(f"conv2d_relu_max_pool2d(): pool {list(p)} does not fit the convolution's output of size "
                           f"{list(ohw)}")
    args = (x, w, bias)
    if x._data.__class__ is not np.ndarray or w._data.__class__ is not np.ndarray or \
            (bias is not None and bias._data.__class__ is not np.ndarray):  # two GPUs share one array type
        check_same_device("conv2d_relu_max_pool2d", [t._data for t in args if t is not None])
    # forward keeps what backward will need (the pool's routing, the weight gradient's columns) only when recorded;
    # the routing also when an operand carries a forward-AD tangent
    record = MODE.grad and any(t is not None and t._requires_grad for t in args)
    route = record or any(t is not None and needs_indices(t) for t in args)
    consts = (win, p, route, record and w._requires_grad)
    return dispatch(_new(ConvReluPool), args + consts, (x._data, w._data, None if bias is None else bias._data) + consts)
