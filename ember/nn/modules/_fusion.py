"""Which runs of layers `Sequential` computes as one fused op.

Conv2d → ReLU → MaxPool2d (or Conv2d → MaxPool2d → ReLU) with non-overlapping pool windows runs as
`ember.ops.nn_fused.conv2d_relu_max_pool2d`: the pool and ReLU then touch a quarter of the
elements and the full-size activation is never stored (W3's training step: see
docs/performance.md). A run is fused only when nothing could observe the difference: the three
layers are exactly these classes (no subclass with its own forward), none has hooks, the conv
has one group and zero padding mode, the pool returns no indices, and the input is a batched
floating-point tensor whose pooled size is at least 1 (else the layers run one by one and give
their own errors). `ENABLED = False` turns fusion off (tests compare the two paths with it).
"""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.nn_fused import conv2d_relu_max_pool2d, pooled_size
from .activation import ReLU
from .conv import Conv2d
from .pooling import MaxPool2d
from ... import _dtype as dt

ENABLED = True


def _plain(m) -> bool:
    d = m.__dict__
    return not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"])


def _pool_window(p):
    """The pool's P as a pair when its windows tile without overlap or padding, else None."""
    if p.return_indices or p.ceil_mode:
        return None
    k = p.kernel_size if isinstance(p.kernel_size, (tuple, list)) else (p.kernel_size,) * 2
    s = p.stride if isinstance(p.stride, (tuple, list)) else (p.stride,) * 2
    pad = p.padding if isinstance(p.padding, (tuple, list)) else (p.padding,) * 2
    d = p.dilation if isinstance(p.dilation, (tuple, list)) else (p.dilation,) * 2
    if len(s) == 0:
        s = k
    if len(k) != 2 or tuple(s) != tuple(k) or any(pad) or any(v != 1 for v in d):
        return None
    if not all(isinstance(v, int) and v > 0 for v in k):
        return None
    return tuple(k)


def fused_conv_relu_pool(conv, second, third, x):
    """The fused result of conv, then second and third (a ReLU and a MaxPool2d, in either order), or None
    when the run must go layer by layer."""
    # (a plain Tensor; during ember.compile's capture, the capture's subclass of it, `_watched_of` Tensor)
    if not ENABLED or type(conv) is not Conv2d or getattr(x.__class__, "_watched_of", x.__class__) is not Tensor:
        return None
    t2, t3 = type(second), type(third)
    if t2 is ReLU and t3 is MaxPool2d:
        pool = third
    elif t2 is MaxPool2d and t3 is ReLU:
        pool = second
    else:
        return None
    if conv.groups != 1 or conv.padding_mode != "zeros" or not (_plain(conv) and _plain(second) and _plain(third)):
        return None
    p = _pool_window(pool)
    w = conv.weight
    if p is None or x.ndim != 4 or x.shape[1] != conv.in_channels or not dt.is_float(x._data.dtype) \
            or x._data.dtype != w._data.dtype or (conv.bias is not None and conv.bias._data.dtype != w._data.dtype):
        return None
    # output size of the convolution, to check that at least one pool window fits
    hw = []
    for n, k, s, d, pd in zip(x.shape[2:], conv.kernel_size, conv.stride, conv.dilation,
                              (0, 0) if conv.padding == "valid" else
                              (None, None) if conv.padding == "same" else conv.padding):
        hw.append(n if pd is None else (n + 2 * pd - d * (k - 1) - 1) // s + 1)
    if min(pooled_size(tuple(hw), p)) < 1:
        return None
    return conv2d_relu_max_pool2d(x, w, conv.bias, conv.stride, conv.padding, conv.dilation, p)
