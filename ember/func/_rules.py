"""Batching rules: how an op runs once on physical arrays (batch dimension first) in place of once per example.

A rule is `rule(node, level, size, inputs, arrays, attrs) -> logical result` (or NotImplemented: the op then
runs once per example). `phys_args` gives the physical inputs and arrays; a rule changes what the op's
Python function computed from the logical shapes (axes, target shapes) so that they address the same
dimensions of the physical arrays, dispatches the op on them and wraps the result (`logical`).

The rules come in a few kinds:

- elementwise: the batched operands as (batch, 1, ..., 1, *shape), so that the rest broadcasts as before
  (`_batching.elementwise`; chosen by default for ops whose forward derivative is `Op.elementwise_jvp` and for
  the binary arithmetic ops; listed here for the others);
- axes: constants that name dimensions shift past the batch dimension (reductions, softmax, cumsum, ...);
- leading dimensions: ops that map over any leading dimensions (linear algebra on the last two, attention,
  layer norm) run on the physical arrays, operands of different ranks padded with 1s after the batch;
- a batch of samples: ops on (N, C, *spatial) (convolution, pooling) fold the batch into N, or (a batched
  weight) into the channels with `groups` times the batch size;
- shapes: constants that are shapes get the batch size in front;
- index constants (gather/scatter grids, embedding rows, flat positions) get the example number as one more
  index, or an offset of one example's size.

A rule written with ember ops on logical tensors (addmm as matmul and add) is batched by the rules of those ops.
Backward passes run on the physical graph: an op that only backward uses needs no rule. Where a rule would
have to guess (a batched constant it does not know how to place), it returns NotImplemented: the per-example
loop is slow but right. Left to that loop: median of all elements and quantile (their derivatives share the
gradient among ties within an example), the linear-algebra info codes (`Value`), lstsq, cross_entropy with a
batched class weight, batch norm updating running statistics, channels_last copies, fractional max pooling,
embedding_bag, CTC loss, RNN layers, sparse ops and the rarer indexing ops (index_copy, masked_scatter, put_,
scatter_reduce, as_strided, block_diag, vander).
"""
from __future__ import annotations

import numpy as np

from .. import _memory_format as MF
from .. import backend
from .._tensor import TENSOR_TYPES, make
from ..autograd.function import dispatch
from ..ops import (arithmetic, convert, counting, elementwise_ext, indexing, indexing_ext, linalg, linalg_ext,
                   nn_activation, nn_attention, nn_conv, nn_fold, nn_interpolate, nn_loss, nn_misc, nn_more, nn_norm,
                   nn_pad, nn_pool, nn_spatial, reduce, shape, sorting, unary)
from ._batching import RULES, BatchedArray, elementwise, logical, phys_args, physical

_new = object.__new__


# ---------------------------------------------------------------------- helpers
def _apply(node, p_in, p_ar, attrs, inputs, arrays):
    """The op on physical (inputs, arrays). A constant passed as both an input and an array (an axis, a shape) that
    the rule changed in `p_ar` is changed in the inputs too: backward reads the inputs the node saved."""
    p_in = list(p_in)
    for i in range(min(len(p_in), len(arrays))):
        if inputs[i] is arrays[i] and p_in[i].__class__ not in TENSOR_TYPES:
            p_in[i] = p_ar[i]
    return dispatch(_new(node.__class__), tuple(p_in), tuple(p_ar), attrs)


def _run(node, level, p_in, p_ar, attrs, inputs, arrays):
    return logical(_apply(node, p_in, p_ar, attrs, inputs, arrays), level)


def _shift(a, ndim: int):
    """A logical axis (or tuple of axes; None: all of them) as the physical one, past the batch dimension."""
    if a is None:
        return tuple(range(1, ndim + 1))
    if isinstance(a, (tuple, list)):
        return type(a)(_shift(x, ndim) for x in a)
    return a + 1 if a >= 0 else a


def _at(x, level: int) -> bool:
    """Whether x (a Tensor or an array) is batched at `level`."""
    d = x._data if x.__class__ in TENSOR_TYPES else x
    return d.__class__ is BatchedArray and d.level == level


def _phys(t, level: int, size: int):
    """The physical tensor of `t` at `level`: all its examples, or (not batched there) a broadcast copy-free view
    repeating it for every example."""
    if _at(t, level):
        return physical(t)
    return t.unsqueeze(0).expand((size,) + tuple(t.shape))


def _phys_arr(a, level: int, size: int):
    """The physical array of constant `a` at `level` (a broadcast view when it is not batched there)."""
    if a.__class__ is BatchedArray and a.level == level:
        return a.phys
    return backend.array_module(a).broadcast_to(a, (size,) + tuple(a.shape))


def _padded(t, level: int, size: int, rank: int):
    """The physical tensor of batched `t` as (batch, 1, ..., 1, *t.shape): rank + 1 dims."""
    p = physical(t)
    return p if t.dim() >= rank else p.reshape((size,) + (1,) * (rank - t.dim()) + tuple(t.shape))


def _padded_arr(a, rank: int):
    p = a.phys
    return p if a.ndim >= rank else p.reshape((a.batch,) + (1,) * (rank - a.ndim) + tuple(a.shape))


def _innermost_array(a):
    while a.__class__ is BatchedArray:
        a = a.phys
    return a


def _arange(n: int, like, shape: tuple):
    """0..n-1 reshaped to `shape`, an int64 array on the device of array `like`."""
    base = _innermost_array(like)
    xp = backend.array_module(base)
    with backend.on_device_of(base):
        return xp.arange(n, dtype=np.int64).reshape(shape)


def _fold(t, level: int, size: int):
    """(batch, N, ...) as (batch·N, ...): the examples' samples side by side in one batch of samples."""
    p = _phys(t, level, size)
    return p.reshape((size * p.shape[1],) + tuple(p.shape[2:]))


def _unfold(p, size: int):
    """(batch·N, ...) back to (batch, N, ...)."""
    if p.__class__ is tuple:
        return tuple(_unfold(q, size) for q in p)
    return p.reshape((size, p.shape[0] // size) + tuple(p.shape[1:]))


def _with_attrs(rule):
    """Mark a rule that places batched constants passed as attributes itself (see `batch_dispatch`)."""
    rule.batched_attrs = True
    return rule


# ---------------------------------------------------------------------- generic rules
def map_rule(node, level, size, inputs, arrays, attrs):
    """An op of one tensor (position 0) that maps any leading dimensions (a cast, a copy, tril, a matrix function
    of the last two dims): the op itself on the physical array."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def qr_rule(node, level, size, inputs, arrays, attrs):
    """QR of the last two dims; mode 'r' gives an empty Q, which has no batch dimension of its own: one is made."""
    r = map_rule(node, level, size, inputs, arrays, attrs)
    if r is NotImplemented or arrays[1] != "r":
        return r
    q = r[0]._data.phys
    with backend.on_device_of(_innermost_array(q)):
        empty = backend.array_module(_innermost_array(q)).zeros((size, 0), q.dtype)
    return logical(make(empty), level), r[1]


def axis_rule(*positions, none_all: bool = True):
    """An op of one tensor (position 0) whose array constants at `positions` are axes: shifted past the batch
    dimension (None, "every axis", as every logical axis when `none_all`, else the op runs per example). A 0-d
    example is one of shape (1,) for the op (its axis 0 or -1), squeezed back."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        ndim = arrays[0].ndim
        scalar = ndim == 0 and any(p_ar[i] not in ((), None) for i in positions)
        if scalar:
            p_in = (p_in[0].reshape((size, 1)),) + tuple(p_in[1:])
            p_ar[0], ndim = p_in[0]._data, 1
        for i in positions:
            if p_ar[i] is None and not none_all:
                return NotImplemented
            p_ar[i] = _shift(p_ar[i], ndim)
        r = _apply(node, p_in, p_ar, attrs, inputs, arrays)
        if scalar:
            r = tuple(x.reshape((size,)) for x in r) if r.__class__ is tuple else r.reshape((size,))
        return logical(r, level)
    return rule


def leading_rule(*positions):
    """An op that maps leading dimensions which broadcast between its operands (at `positions`: Tensors or
    arrays), as matmul does: each batched operand as (batch, 1, ..., 1, *shape) at the operands' largest rank."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if any(b for i, b in enumerate(batched) if i not in positions):
            return NotImplemented
        rank = max(arrays[i].ndim for i in positions if arrays[i] is not None)
        p_in = list(p_in)
        for i in positions:
            if not batched[i]:
                continue
            if inputs[i].__class__ in TENSOR_TYPES:
                p_in[i] = _padded(inputs[i], level, size, rank)
                p_ar[i] = p_in[i]._data
            else:
                p_ar[i] = _padded_arr(arrays[i], rank)
                if inputs[i] is arrays[i]:
                    p_in[i] = p_ar[i]
        return _run(node, level, p_in, p_ar, attrs, inputs, arrays)
    return rule


def nonscalar(rule):
    """`rule` for examples of at least one dim (a 0-d example runs per example)."""
    def wrapped(node, level, size, inputs, arrays, attrs):
        if arrays[0].ndim == 0:
            return NotImplemented
        return rule(node, level, size, inputs, arrays, attrs)
    return wrapped


def fold_rule(*positions):
    """An op on batches of samples (N, ...) at `positions` (Tensors or arrays; the first batched): the examples'
    batches as one, (batch·N, ...), and the result split back."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if any(b for i, b in enumerate(batched) if i not in positions) or not batched[positions[0]]:
            return NotImplemented
        p_in = list(p_in)
        for i in positions:
            if arrays[i] is None:
                continue
            if inputs[i].__class__ in TENSOR_TYPES:
                p_in[i] = _fold(inputs[i], level, size)
                p_ar[i] = p_in[i]._data
            else:
                p = _phys_arr(arrays[i], level, size)
                p_ar[i] = p.reshape((size * p.shape[1],) + tuple(p.shape[2:]))
                if inputs[i] is arrays[i]:
                    p_in[i] = p_ar[i]
        return logical(_unfold(_apply(node, p_in, p_ar, attrs, inputs, arrays), size), level)
    return rule


# ---------------------------------------------------------------------- shapes and views
def clone_rule(node, level, size, inputs, arrays, attrs):
    """A copy: in C order or the input's own (a memory format that names dims, channels_last, runs per example)."""
    if len(arrays) > 1 and arrays[1] not in (MF.contiguous_format, MF.preserve_format):
        return NotImplemented
    return map_rule(node, level, size, inputs, arrays, attrs)


def constant_pad_rule(node, level, size, inputs, arrays, attrs):
    """ConstantPad(x, pads, value): no padding of the batch dim."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    p_ar[1] = ((0, 0),) + tuple(p_ar[1])
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def view_rule(node, level, size, inputs, arrays, attrs):
    """reshape/view: the batch size in front of the target shape (the function inferred -1 from one example)."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0]:
        return NotImplemented
    p_ar[1] = (size,) + tuple(p_ar[1])
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def permute_rule(node, level, size, inputs, arrays, attrs):
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0]:
        return NotImplemented
    ndim = arrays[0].ndim
    p_ar[1] = (0,) + tuple((a % ndim) + 1 for a in p_ar[1])
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def join_rule(node, level, size, inputs, arrays, attrs):
    """cat/stack of several tensors: every one batched (a copy per example of those that are not), dim shifted."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    p_in = list(p_in)
    for i, isb in enumerate(batched):
        if not isb:
            p_in[i] = _phys(inputs[i], level, size)
            p_ar[i] = p_in[i]._data
    attrs = dict(attrs)
    d = attrs["dim"]
    attrs["dim"] = d + 1 if d >= 0 else d
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def broadcast_to_rule(node, level, size, inputs, arrays, attrs):
    """expand: the input's dims aligned to the right of the target's (1s after the batch dim), batch in front."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or batched[1]:
        return NotImplemented
    target = tuple(p_ar[1])
    p = _padded(inputs[0], level, size, len(target))
    return _run(node, level, (p, inputs[1]), [p._data, (size,) + target], attrs, inputs, arrays)


def tile_rule(node, level, size, inputs, arrays, attrs):
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or batched[1]:
        return NotImplemented
    p_ar[1] = (1,) + tuple(p_ar[1])
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def roll_rule(node, level, size, inputs, arrays, attrs):
    """roll along dims (shifted), or of each example's flattened values (dims None)."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    x = inputs[0]
    if p_ar[2] is not None:
        p_ar[2] = _shift(p_ar[2], x.dim())
        return _run(node, level, p_in, p_ar, attrs, inputs, arrays)
    flat = p_in[0].reshape((size, -1))
    r = shape.Roll.apply(flat, (p_ar[1],), (1,))
    return logical(r.reshape((size,) + tuple(x.shape)), level)


def getitem_index(idx):
    """GetItem's parsed index (pre, main, kind) for the physical array: a full slice in front for the batch
    dimension; None where that would move dimensions (NumPy puts the dims of index arrays separated by a slice in
    front, before the batch) or where an index array is batched (each example has its own)."""
    pre, main, kind = idx
    if _has_batched_array(idx):
        return None
    if kind:
        adv = [k for k, it in enumerate(main) if isinstance(it, (np.ndarray, np.bool_)) or
               hasattr(it, "__cuda_array_interface__")]
        if adv and adv != list(range(adv[0], adv[0] + len(adv))):
            return None
    full = slice(None)
    return (None if pre is None else (full,) + tuple(pre), (full,) + tuple(main), kind)


def _has_batched_array(obj) -> bool:
    if obj.__class__ is BatchedArray:
        return True
    if obj.__class__ is tuple or obj.__class__ is list:
        return any(_has_batched_array(x) for x in obj)
    return False


@_with_attrs
def getitem_rule(node, level, size, inputs, arrays, attrs):
    """x[index] with an index of constants (ints, slices, None, ..., and index arrays or masks that are not
    batched); batched index arrays run per example."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    key = "idx" if attrs and "idx" in attrs else None
    idx = attrs[key] if key else p_ar[1]
    if not batched[0] or (not key and batched[1]):
        return NotImplemented
    new = getitem_index(idx)
    if new is None:
        return NotImplemented
    if key:
        return _run(node, level, p_in, p_ar, dict(attrs, idx=new), inputs, arrays)
    p_ar[1] = new
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


@_with_attrs
def index_backward_rule(node, level, size, inputs, arrays, attrs):
    """IndexBackward(g, shape, idx) (getitem's adjoint): batch in front of the shape, the index as getitem's."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    new = getitem_index(attrs["idx"])
    if not batched[0] or new is None:
        return NotImplemented
    return _run(node, level, p_in, p_ar, dict(attrs, shape=(size,) + tuple(attrs["shape"]), idx=new), inputs, arrays)


@_with_attrs
def index_put_rule(node, level, size, inputs, arrays, attrs):
    """x with x[index] = v: x for every example, v (batched) aligned to the indexed region's rank."""
    x, v = inputs
    new = getitem_index(attrs["idx"])
    if new is None:
        return NotImplemented
    px = _phys(x, level, size)
    if v.__class__ is BatchedArray:
        return NotImplemented
    pv = v
    if _at(v, level):
        pre, main, _ = attrs["idx"]
        dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), tuple(x.shape), (0,) * x.dim())
        rank = len((dummy if pre is None else dummy[pre])[main].shape)
        vshape = tuple(v.shape)
        while len(vshape) > rank and vshape[0] == 1:  # (NumPy drops a value's extra leading 1s)
            vshape = vshape[1:]
        pv = physical(v).reshape((size,) + (1,) * (rank - len(vshape)) + vshape)
    return logical(indexing.IndexPut.apply(px, pv, idx=new), level)


# ---------------------------------------------------------------------- reductions and sorting
def prod_rule(node, level, size, inputs, arrays, attrs):
    """prod along an axis (shifted), or of each example's values (axis None)."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    if p_ar[1] is not None and inputs[0].dim():
        p_ar[1] = _shift(p_ar[1], inputs[0].dim())
        return _run(node, level, p_in, p_ar, attrs, inputs, arrays)
    flat = p_in[0].reshape((size, -1))
    return logical(dispatch(_new(node.__class__), (flat, 1, False), (flat._data, 1, False), attrs), level)


def take_at_rule(node, level, size, inputs, arrays, attrs):
    """TakeAt(x, idx, axis, keepdim) (max(dim)'s values at the argmax, sort's values): x and idx for every
    example, the axis shifted."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if any(batched[2:]):
        return NotImplemented
    x, idx = inputs[0], inputs[1]
    ndim = arrays[1].ndim  # (the index has the input's rank, keepdim or not)
    px, pi = _phys(x, level, size), _phys(idx, level, size)
    axis = _shift(p_ar[2], ndim)
    args = (px, pi, axis, p_ar[3])
    return logical(dispatch(_new(node.__class__), args, (px._data, pi._data, axis, p_ar[3])), level)


# ---------------------------------------------------------------------- indexing with constant indices
@_with_attrs
def gather_rule(node, level, size, inputs, arrays, attrs):
    """Gather(x, dim, grid, ishape): the example number as one more index in front of the grid (each batched
    index array its own examples', the others the same for every example)."""
    px = _phys(inputs[0], level, size)
    grid = _batched_grid(attrs["grid"], level, size, px._data)
    return logical(indexing.Gather.apply(px, dim=attrs["dim"] + 1, grid=grid, ishape=(size,) + tuple(attrs["ishape"])),
                   level)


def _batched_grid(grid: tuple, level: int, size: int, like) -> tuple:
    rank = max(g.ndim for g in grid) if grid else 0
    lead = _arange(size, like, (size,) + (1,) * rank)
    return (lead,) + tuple(g.phys if g.__class__ is BatchedArray and g.level == level else g.reshape((1,) + g.shape)
                           for g in grid)


@_with_attrs
def scatter_rule(node, level, size, inputs, arrays, attrs):
    """Scatter(x, src, dim, grid, ishape, reduce): x (a fresh copy is written) and src for every example, the grid
    as gather's."""
    x, src = inputs
    px = _phys(x, level, size)
    ps = _phys(src, level, size) if src.__class__ in TENSOR_TYPES else src
    if ps.__class__ is BatchedArray:
        return NotImplemented
    grid = _batched_grid(attrs["grid"], level, size, px._data)
    return logical(indexing.Scatter.apply(px, ps, dim=attrs["dim"] + 1, grid=grid, ishape=(size,) +
                                          tuple(attrs["ishape"]), reduce=attrs.get("reduce")), level)


def _select_grid(index, level, size, d: int, shape: tuple, like) -> tuple:
    """The gather grid of index_select along d of an input of (logical) `shape` with a batched index vector."""
    nd = len(shape)
    grid = [_arange(size, like, (size,) + (1,) * nd)]
    for j, n in enumerate(shape):
        if j == d:
            grid.append(index.phys.reshape((size,) + (1,) * j + (index.shape[0],) + (1,) * (nd - 1 - j)))
        else:
            grid.append(_arange(n, like, (1,) * (j + 1) + (n,) + (1,) * (nd - 1 - j)))
    return tuple(grid)


@_with_attrs
def index_select_rule(node, level, size, inputs, arrays, attrs):
    """index_select along dim (shifted); a batched index vector as a gather of each example's own positions."""
    x = inputs[0]
    d, index = attrs["dim"], attrs["index"]
    if x.dim() == 0:
        return NotImplemented
    px = _phys(x, level, size)
    if not _at(index, level):
        return logical(indexing.IndexSelect.apply(px, dim=d + 1, index=index), level)
    shape = tuple(x.shape[:d]) + (index.shape[0],) + tuple(x.shape[d + 1:])
    grid = _select_grid(index, level, size, d, tuple(x.shape), px._data)
    return logical(indexing.Gather.apply(px, dim=d + 1, grid=grid, ishape=(size,) + shape), level)


@_with_attrs
def index_add_rule(node, level, size, inputs, arrays, attrs):
    """index_add along dim (shifted); a batched index vector as a scatter-add at each example's own positions."""
    x, src = inputs
    d, index, alpha = attrs["dim"], attrs["index"], attrs.get("alpha", 1)
    if x.dim() == 0:
        return NotImplemented
    px, ps = _phys(x, level, size), _phys(src, level, size)
    if not _at(index, level):
        return logical(indexing.IndexAdd.apply(px, ps, dim=d + 1, index=index, alpha=alpha), level)
    grid = _select_grid(index, level, size, d, tuple(src.shape), px._data)
    ps = ps if alpha == 1 else ps * alpha
    return logical(indexing.Scatter.apply(px, ps, dim=d + 1, grid=grid, ishape=tuple(ps.shape), reduce="add"), level)


@_with_attrs
def take_rule(node, level, size, inputs, arrays, attrs):
    """take(x, index) of the flattened example: offsets of one example's size added to its flat positions."""
    x = inputs[0]
    index = attrs["index"]
    px = _phys(x, level, size)
    n = max(x.numel(), 1)
    flat = _phys_arr(index, level, size) + _arange(size, px._data, (size,) + (1,) * index.ndim) * n
    return logical(indexing.Take.apply(px, index=flat), level)


@_with_attrs
def masked_fill_rule(node, level, size, inputs, arrays, attrs):
    """x where not mask else v: x and the mask aligned as elementwise operands. A batched value runs per example
    (its gradient, a sum over the mask, is taken over all of the physical array)."""
    x, v = inputs
    mask = attrs["mask"]
    if _at(v, level):
        return NotImplemented
    rank = max(x.dim(), mask.ndim)
    px = _padded(x, level, size, rank) if _at(x, level) else x
    pm = _padded_arr(mask, rank) if _at(mask, level) else mask
    return logical(indexing.MaskedFill.apply(px, v, mask=pm), level)


# ---------------------------------------------------------------------- linear algebra
def matmul_rule(node, level, size, inputs, arrays, attrs):
    """x @ y: 1-D operands as a row (x) or a column (y), the batched operand's batch dimension aligned in front of
    the broadcast dimensions of the other (padding with 1s to the larger rank); the added row/column removed."""
    x, y = inputs
    xb, yb = _at(x, level), _at(y, level)
    if not (xb or yb):
        return NotImplemented
    xd, yd = x.dim(), y.dim()
    xl = x.unsqueeze(0) if xd == 1 else x  # (logical ops: their own rules batch them)
    yl = y.unsqueeze(-1) if yd == 1 else y
    rank = max(xl.dim(), yl.dim())
    px = _padded(xl, level, size, rank) if xb else xl
    py = _padded(yl, level, size, rank) if yb else yl
    z = logical(linalg.matmul(px, py), level)
    if xd == 1 and yd == 1:
        return z.squeeze(-1).squeeze(-1)
    if xd == 1:
        return z.squeeze(-2)
    if yd == 1:
        return z.squeeze(-1)
    return z


def linear_rule(node, level, size, inputs, arrays, attrs):
    """x Wᵀ + b: with only x batched, the op itself on x's physical array (its leading dimensions map); with a
    batched weight or bias (an ensemble through functional_call), as matmul and add, which have rules."""
    x, w, b = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
    if not _at(w, level) and not (b is not None and _at(b, level)):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        return _run(node, level, p_in, p_ar, attrs, inputs, arrays)
    z = linalg.matmul(x, w.transpose(-1, -2))
    return z + b if b is not None else z


def outer_rule(node, level, size, inputs, arrays, attrs):
    x, y = inputs
    return x.unsqueeze(-1) * y  # (batched by the elementwise rule)


def add_matmul_rule(node, level, size, inputs, arrays, attrs):
    """beta·c + alpha·(a @ b) as matmul, scale and add (c not read when beta = 0, as the op)."""
    c, a, b = inputs
    beta, alpha = attrs["beta"], attrs["alpha"]
    z = linalg.matmul(a, b)
    if alpha != 1:
        z = z * alpha
    if beta != 0:
        z = z + (c if beta == 1 else c * beta)
    return z


def einsum_rule(node, level, size, inputs, arrays, attrs):
    """einsum (and tensordot, as the einsum it is): a new label for the batch, in front of the batched operands'
    subscripts and of the output's."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    n = len(attrs["subs"])
    if any(batched[n:]):
        return NotImplemented
    used = set("".join(attrs["subs"]) + attrs["osub"])
    letter = next((c for c in linalg._LETTERS if c not in used), None)
    if letter is None:
        return NotImplemented
    subs = tuple(letter + s if isb else s for s, isb in zip(attrs["subs"], batched))
    return logical(dispatch(_new(linalg.Einsum), tuple(p_in[:n]), tuple(p_ar[:n]), {"subs": subs, "osub": letter +
                                                                                      attrs["osub"]}), level)


def diagonal_rule(*dims):
    """An op on the diagonal over dims (d1, d2) at argument positions `dims` (shifted past the batch dim)."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        for i in dims:
            p_ar[i] = _shift(p_ar[i], arrays[0].ndim)
        return _run(node, level, p_in, p_ar, attrs, inputs, arrays)
    return rule


def diag_embed_rule(node, level, size, inputs, arrays, attrs):
    """DiagEmbed(g, shape, offset, d1, d2): batch in front of the shape, dims shifted."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    nd = len(p_ar[1])
    p_ar[1], p_ar[3], p_ar[4] = (size,) + tuple(p_ar[1]), _shift(p_ar[3], nd), _shift(p_ar[4], nd)
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def diagonal_scatter_rule(node, level, size, inputs, arrays, attrs):
    """x with its diagonal over (d1, d2) replaced by src: both for every example, dims shifted."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if any(batched[2:]):
        return NotImplemented
    px, ps = _phys(inputs[0], level, size), _phys(inputs[1], level, size)
    nd = inputs[0].dim()
    args = (px, ps, p_ar[2], _shift(p_ar[3], nd), _shift(p_ar[4], nd))
    return logical(dispatch(_new(node.__class__), args, (px._data, ps._data) + args[2:], attrs), level)


def cross_rule(node, level, size, inputs, arrays, attrs):
    """cross product along an axis of two operands that broadcast: aligned as elementwise operands."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if batched[2]:
        return NotImplemented
    rank = max(arrays[0].ndim, arrays[1].ndim)
    axis = p_ar[2] if p_ar[2] < 0 else p_ar[2] - rank  # (from the end: the operands may have lower ranks)
    p = [_padded(inputs[i], level, size, rank) if batched[i] else inputs[i] for i in (0, 1)]
    return logical(dispatch(_new(node.__class__), (p[0], p[1], axis), (p[0]._data, p[1]._data, axis), attrs), level)


# ---------------------------------------------------------------------- nn
def conv_rule(b_pos, groups_pos: int):
    """A convolution of x (N, C, *spatial) by w (O, C/groups, *kernel) (or the transposed kind), bias at `b_pos`
    (None: the op has none). Only x batched: the examples' samples as one batch. A batched weight or bias (an
    ensemble): the examples as groups, x (N, batch·C, *spatial) and w (batch·O, ...), groups·batch, the output's
    channels split back into (batch, O)."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        params = (1,) if b_pos is None else (1, b_pos)
        if any(b for i, b in enumerate(batched) if i not in (0,) + params):
            return NotImplemented
        if not any(batched[i] for i in params if inputs[i] is not None):
            p_in = list(p_in)
            p_in[0] = _fold(inputs[0], level, size)
            p_ar[0] = p_in[0]._data
            return logical(_unfold(_apply(node, p_in, p_ar, attrs, inputs, arrays), size), level)
        x, w = inputs[0], inputs[1]
        n, c = x.shape[0], x.shape[1]
        px = _phys(x, level, size)  # (batch, N, C, *s) -> (N, batch·C, *s)
        px = px.movedim(0, 1).reshape((n, size * c) + tuple(x.shape[2:]))
        pw = _phys(w, level, size)
        pw = pw.reshape((size * w.shape[0],) + tuple(w.shape[1:]))
        args, arrs = list(p_in), list(p_ar)
        args[0], arrs[0], args[1], arrs[1] = px, px._data, pw, pw._data
        if b_pos is not None and inputs[b_pos] is not None:
            pb = _phys(inputs[b_pos], level, size).reshape((-1,))
            args[b_pos], arrs[b_pos] = pb, pb._data
        args[groups_pos] = arrs[groups_pos] = p_ar[groups_pos] * size
        y = dispatch(_new(node.__class__), tuple(args), tuple(arrs), attrs)  # (N, batch·O, *s)
        y = y.reshape((n, size, y.shape[1] // size) + tuple(y.shape[2:])).movedim(1, 0)
        return logical(y, level)
    return rule


def max_pool_rule(node, level, size, inputs, arrays, attrs):
    """max_pool2d: the examples' samples as one batch; the argmax positions (read from the node by a caller that
    returns them) are the op's, split back."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    px = _fold(inputs[0], level, size)
    run = _new(node.__class__)
    y = dispatch(run, (px,) + tuple(p_in[1:]), (px._data,) + tuple(p_ar[1:]), attrs)
    node.idx = None if run.idx is None else BatchedArray(run.idx.reshape((size, inputs[0].shape[0]) +
                                                                          tuple(run.idx.shape[1:])), level)
    return logical(_unfold(y, size), level)


def window_max_rule(node, level, size, inputs, arrays, attrs):
    """3-d and adaptive max pooling's window maxima: the examples' samples as one batch (fractional pooling's
    per-sample random windows run per example)."""
    if len(inputs) > 3 and inputs[3] is not None:
        return NotImplemented
    return _fold_first(node, level, size, inputs, arrays, attrs)


_fold_first = fold_rule(0)


def normalize_rule(node, level, size, inputs, arrays, attrs):
    """Normalize (layer/group/instance/batch norm) over `axes`: with only x batched, the axes shifted and the
    parameters' gradient summed over the batch dim too; a batched weight or bias: the normalisation batched alone,
    then x̂·γ + β as ember ops. Updating running statistics runs per example."""
    x, w, b, axes, paxes, view, eps = inputs[:7]
    running = attrs.get("running")
    if running is not None:
        return NotImplemented
    if (w is not None and _at(w, level)) or (b is not None and _at(b, level)):
        y = nn_norm.Normalize.apply(x, None, None, axes, paxes, view, eps)
        if w is not None:
            y = y * (w if view is None else w.reshape(view))
        if b is not None:
            y = y + (b if view is None else b.reshape(view))
        return y
    nd = x.dim()
    px = physical(x)
    pa, pp = _shift(tuple(axes), nd), (0,) + _shift(tuple(paxes), nd)
    args = (px, w, b, pa, pp, view, eps)
    return logical(dispatch(_new(node.__class__), args, (px._data, None if w is None else w._data,
                                                         None if b is None else b._data) + args[3:], attrs), level)


def rms_norm_rule(node, level, size, inputs, arrays, attrs):
    """RmsNorm over the last k dims: only x batched, the op itself (its weight gradient sums over all leading
    dims); a batched weight, the normalisation alone then times the weight."""
    x, w, k, eps = inputs
    if w is not None and _at(w, level):
        return nn_more.RmsNorm.apply(x, None, k, eps) * w
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def prelu_rule(node, level, size, inputs, arrays, attrs):
    """prelu with one slope per channel (dim 1, viewed to broadcast over the trailing dims) or one for all: only x
    batched, the op itself; batched slopes, x where x > 0 else slope·x as ember ops (the same derivatives)."""
    x, w, view = inputs
    if _at(w, level):
        return arithmetic.where(x > 0, x, w.reshape(view) * x)
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    return _run(node, level, p_in, p_ar, attrs, inputs, arrays)


def embedding_rule(node, level, size, inputs, arrays, attrs):
    """W[idx]: batched indices are more indices of the same weight; a batched weight (an ensemble) as one weight of
    all examples' rows, each example's indices offset to its own. A padding row, frequency scaling or a sparse
    gradient of a batched weight, and frequency scaling at all (counts are per example), run per example."""
    w, idx, pad, scale = inputs[:4]
    if scale:
        return NotImplemented
    if not _at(w, level):
        return logical(nn_misc.Embedding.apply(w, idx.phys, pad, scale, **attrs), level)
    if pad is not None or attrs.get("sparse"):
        return NotImplemented
    v = w.shape[0]
    pw = physical(w).reshape((size * v,) + tuple(w.shape[1:]))
    rows = _phys_arr(idx, level, size) + _arange(size, pw._data, (size,) + (1,) * idx.ndim) * v
    return logical(nn_misc.Embedding.apply(pw, rows, None, False), level)


def cross_entropy_rule(node, level, size, inputs, arrays, attrs):
    """cross_entropy with class-index targets: every example's samples as one batch with reduction 'none', then each
    example's losses summed, or divided by its own count of targets (the sum of their weights)."""
    x, t, w, ignore_index, eps, reduction = inputs
    if w is not None and w.__class__ is BatchedArray:
        return NotImplemented
    px, pt = _phys(x, level, size), _phys_arr(t, level, size)
    if x.dim() == 1:
        per = dispatch(_new(nn_loss.CrossEntropy), (px, pt, w, ignore_index, eps, "none"),
                       (px._data, pt, w, ignore_index, eps, "none"))
    else:
        fx = px.reshape((size * x.shape[0],) + tuple(x.shape[1:]))
        ft = pt.reshape((size * pt.shape[1],) + tuple(pt.shape[2:]))
        per = dispatch(_new(nn_loss.CrossEntropy), (fx, ft, w, ignore_index, eps, "none"),
                       (fx._data, ft, w, ignore_index, eps, "none"))
        per = per.reshape(pt.shape)
    if reduction == "none":
        return logical(per, level)
    total = per.reshape((size, -1)).sum(1)
    if reduction == "sum":
        return logical(total, level)
    xp = backend.array_module(pt)
    flat = pt.reshape(size, -1)
    valid = flat != ignore_index
    if w is None:
        counts = valid.sum(1)
    else:  # Σ of the targets' class weights, as one-hot rows times w (the targets may be an outer level's stand-in)
        hits = flat.reshape(size, -1, 1) == _arange(w.shape[0], w, (w.shape[0],))
        counts = (hits * valid.reshape(size, -1, 1) * w).sum((1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        # (an example whose targets are all ignored: a nan loss and a zero gradient, as the op gives)
        scale = xp.where(counts != 0, 1.0 / xp.where(counts != 0, counts, 1), 0.0).astype(px._data.dtype)
        nan = xp.where(counts != 0, 0.0, np.nan).astype(px._data.dtype)
    return logical(total * make(scale) + make(nan), level)


def attention_rule(node, level, size, inputs, arrays, attrs):
    """scaled_dot_product_attention maps (broadcast) leading dims: each batched operand (q, k, v, an additive mask
    or a dropout mask) as (batch, 1, ..., 1, *shape) at the operands' largest rank. The op adds the mask into the
    scores q·kᵀ in place: a batched mask with neither q nor k batched makes q batched (a view per example)."""
    q, k = inputs[0], inputs[1]
    if not (_at(q, level) or _at(k, level)) and inputs[3] is not None and _at(inputs[3], level):
        q = logical(_phys(q, level, size), level)
        inputs = (q,) + tuple(inputs[1:])
        arrays = (q._data,) + tuple(arrays[1:])
    return _attention(node, level, size, inputs, arrays, attrs)


_attention = leading_rule(0, 1, 2, 3, 4)


for _cls, _rule in (
        # elementwise ops whose forward derivative is their own
        (arithmetic.Where, elementwise), (unary.Sign, elementwise), (unary.Floor, elementwise),
        (unary.Ceil, elementwise), (unary.Trunc, elementwise), (unary.Round, elementwise),
        (nn_activation.Hardtanh, elementwise), (nn_activation.LeakyRelu, elementwise), (nn_activation.Elu, elementwise),
        (nn_activation.GeluErf, elementwise), (nn_activation.GeluTanh, elementwise), (nn_activation.Silu, elementwise),
        (nn_activation.Mish, elementwise), (nn_activation.Softplus1, elementwise),
        (nn_activation.Softplus, elementwise), (nn_activation.LogSigmoid, elementwise),
        (nn_activation.Dropout, elementwise), (nn_misc._FloorValue, elementwise),
        (nn_more.Hardshrink, elementwise), (nn_more.Softshrink, elementwise), (nn_more.Hardsigmoid, elementwise),
        (nn_more.Hardswish, elementwise), (nn_more.Threshold, elementwise), (nn_more.Softsign, elementwise),
        (nn_more.Tanhshrink, elementwise), (nn_more.RreluNoise, elementwise), (nn_more.AlphaDropout, elementwise),
        (elementwise_ext.Frexp, elementwise), (elementwise_ext.Sgn, elementwise),
        (elementwise_ext._ScipyUnary, elementwise), (elementwise_ext._SphericalJ0, elementwise),
        (elementwise_ext._Polynomial, elementwise),
        # one tensor, leading dims mapped
        (unary.Cast, map_rule), (convert.ToDevice, map_rule), (shape.Tril, map_rule), (shape.Triu, map_rule),
        (linalg_ext.Det, map_rule), (linalg_ext.SlogDet, map_rule), (linalg_ext.Inv, map_rule),
        (linalg_ext.Cholesky, map_rule), (linalg_ext.QR, qr_rule), (linalg_ext.SVD, map_rule),
        (linalg_ext.SVDVals, map_rule), (linalg_ext.Eigh, map_rule), (linalg_ext.EigvalsH, map_rule),
        (linalg_ext.Eig, map_rule), (linalg_ext.Eigvals, map_rule), (linalg_ext.MatrixExp, map_rule),
        (linalg_ext.IdentityLike, map_rule), (linalg_ext.LUFactor, map_rule), (linalg_ext.Pinv, map_rule),
        (nn_more.RmsNorm, rms_norm_rule), (nn_more.Prelu, prelu_rule),
        # axes
        (reduce.Sum, axis_rule(1)), (reduce.Mean, axis_rule(1)), (reduce.Var, axis_rule(1)),
        (reduce.Std, axis_rule(1)), (reduce.AMax, axis_rule(1)), (reduce.LogSumExp, axis_rule(1)),
        (reduce.Norm, axis_rule(2)), (reduce.Cumsum, axis_rule(1, none_all=False)),
        (reduce.Cumprod, axis_rule(1, none_all=False)), (counting.LogCumSumExp, axis_rule(1, none_all=False)),
        (elementwise_ext.NanSum, axis_rule(1)), (sorting.Indices, axis_rule(2, none_all=False)),
        (nn_activation.Softmax, axis_rule(1, none_all=False)), (nn_activation.LogSoftmax, axis_rule(1, none_all=False)),
        (nn_more.Glu, axis_rule(1, none_all=False)),
        (shape.Narrow, axis_rule(1, none_all=False)), (shape.Flip, axis_rule(1, none_all=False)),
        (shape.Split, axis_rule(2, none_all=False)), (shape.Unbind, axis_rule(1, none_all=False)),
        (nn_spatial.WindowSum, axis_rule(1, none_all=False)),
        (nn_interpolate.Resample, axis_rule(1, none_all=False)),
        (indexing_ext.RepeatInterleave, nonscalar(axis_rule(2, none_all=False))),
        (indexing_ext.Unfold, nonscalar(axis_rule(1, none_all=False))),
        (linalg_ext.Diagonal, diagonal_rule(2, 3)), (indexing_ext.Diagonal, diagonal_rule(2, 3)),
        (linalg_ext.DiagEmbed, diag_embed_rule), (indexing_ext.DiagonalScatter, diagonal_scatter_rule),
        (linalg_ext.Cross, cross_rule),
        # shapes and views
        (shape.View, view_rule), (reduce.KeepDims, view_rule), (shape.Permute, permute_rule),
        (shape.Cat, join_rule), (shape.Stack, join_rule), (arithmetic.BroadcastTo, broadcast_to_rule),
        (shape.Tile, tile_rule), (shape.Roll, roll_rule),
        (nn_pad.ConstantPad, constant_pad_rule), (convert.Clone, clone_rule),
        # reductions picking elements
        (reduce.Prod, prod_rule), (reduce.TakeAt, take_at_rule),
        # indexing
        (indexing.GetItem, getitem_rule), (indexing.IndexBackward, index_backward_rule),
        (indexing.IndexPut, index_put_rule), (indexing.Gather, gather_rule), (indexing.Scatter, scatter_rule),
        (indexing.IndexSelect, index_select_rule), (indexing.IndexAdd, index_add_rule),
        (indexing.Take, take_rule), (indexing.MaskedFill, masked_fill_rule),
        # linear algebra
        (linalg.Matmul, matmul_rule), (linalg.Outer, outer_rule), (linalg.AddMatmul, add_matmul_rule),
        (linalg.Einsum, einsum_rule), (linalg.Tensordot, einsum_rule), (nn_misc.Linear, linear_rule),
        (linalg_ext.Solve, leading_rule(0, 1)), (linalg_ext.SolveTriangular, leading_rule(0, 1)),
        (linalg_ext.CholeskySolve, leading_rule(0, 1)), (linalg_ext.PairDist, leading_rule(0, 1)),
        # nn
        (nn_conv.Conv, conv_rule(2, 4)), (nn_conv.ConvTranspose, conv_rule(None, 3)),
        (nn_spatial.Conv3, conv_rule(2, 4)), (nn_spatial.Conv3T, conv_rule(None, 3)),
        (nn_pool.MaxPool, max_pool_rule), (nn_spatial.WindowMax, window_max_rule),
        (nn_spatial.PlaneGather, fold_rule(0, 1)), (nn_spatial.PlaneGatherUnique, fold_rule(0, 1)),
        (nn_fold.Unfold, fold_rule(0)), (nn_fold.Fold, fold_rule(0)),
        (nn_more.ChannelWindowSum, fold_rule(0)),
        (nn_norm.Normalize, normalize_rule), (nn_misc.Embedding, embedding_rule),
        (nn_loss.CrossEntropy, cross_entropy_rule), (nn_attention.Attention, attention_rule)):
    RULES[_cls] = _rule
