"""Batching rules: how an op runs once on physical arrays (batch dimension first) in place of once per example.

A rule is `rule(node, level, size, inputs, arrays, attrs) -> logical result` (or NotImplemented: the op then
runs once per example). `phys_args` gives the physical inputs and arrays; a rule changes what the op's
Python function computed from the logical shapes (axes, target shapes) so that they address the same
dimensions of the physical arrays, dispatches the op on them and wraps the result (`logical`).
Elementwise ops need no entry here (`_batching.elementwise`, chosen by default for ops whose forward
derivative is `Op.elementwise_jvp` and for the binary arithmetic ops).
"""
from __future__ import annotations

from ..autograd.function import dispatch
from ..ops import indexing, linalg, nn_activation, nn_misc, reduce, shape
from ._batching import RULES, BatchedArray, elementwise, logical, phys_args

_new = object.__new__


def _run(node, level, p_in, p_ar, attrs):
    return logical(dispatch(_new(node.__class__), tuple(p_in), tuple(p_ar), attrs), level)


def _shift(a, ndim: int):
    """A logical axis (or tuple of axes; None: all of them) as the physical one, past the batch dimension."""
    if a is None:
        return tuple(range(1, ndim + 1))
    if isinstance(a, (tuple, list)):
        return type(a)(_shift(x, ndim) for x in a)
    return a + 1 if a >= 0 else a


def _batched_only(batched, *positions) -> bool:
    return any(batched[i] for i in positions)


def axis_rule(*positions, none_all: bool = True):
    """An op of one tensor (position 0) whose array constants at `positions` are axes: shifted past the batch
    dimension (None, "every axis", as every logical axis when `none_all`, else the op runs per example)."""
    def rule(node, level, size, inputs, arrays, attrs):
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if not batched[0] or any(batched[1:]):
            return NotImplemented
        ndim = arrays[0].ndim
        for i in positions:
            if p_ar[i] is None and not none_all:
                return NotImplemented
            p_ar[i] = _shift(p_ar[i], ndim)
        return _run(node, level, p_in, p_ar, attrs)
    return rule


def trailing_rule(node, level, size, inputs, arrays, attrs):
    """An op of one tensor that acts on its last dimensions and maps any leading ones (tril, triu, ...)."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or any(batched[1:]):
        return NotImplemented
    return _run(node, level, p_in, p_ar, attrs)


def view_rule(node, level, size, inputs, arrays, attrs):
    """reshape/view: the batch size in front of the target shape (the function inferred -1 from one example)."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0]:
        return NotImplemented
    p_ar[1] = (size,) + tuple(p_ar[1])
    return _run(node, level, p_in, p_ar, attrs)


def permute_rule(node, level, size, inputs, arrays, attrs):
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0]:
        return NotImplemented
    ndim = arrays[0].ndim
    p_ar[1] = (0,) + tuple((a % ndim) + 1 for a in p_ar[1])
    return _run(node, level, p_in, p_ar, attrs)


def join_rule(node, level, size, inputs, arrays, attrs):
    """cat/stack of several tensors: every one batched (a copy per example of those that are not), dim shifted."""
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    p_in = list(p_in)
    for i, isb in enumerate(batched):
        if not isb:
            t = inputs[i]
            p_in[i] = t.unsqueeze(0).expand((size,) + tuple(t.shape))
            p_ar[i] = p_in[i]._data
    attrs = dict(attrs)
    d = attrs["dim"]
    attrs["dim"] = d + 1 if d >= 0 else d
    return _run(node, level, p_in, p_ar, attrs)


def matmul_rule(node, level, size, inputs, arrays, attrs):
    """x @ y: 1-D operands as a row (x) or a column (y), the batched operand's batch dimension aligned in front of
    the broadcast dimensions of the other (padding with 1s to the larger rank); the added row/column removed."""
    from ..ops.linalg import matmul
    x, y = inputs
    xb = x._data.__class__ is BatchedArray and x._data.level == level
    yb = y._data.__class__ is BatchedArray and y._data.level == level
    if not (xb or yb):
        return NotImplemented
    xd, yd = x.dim(), y.dim()
    xl = x.unsqueeze(0) if xd == 1 else x  # (logical ops: their own rules batch them)
    yl = y.unsqueeze(-1) if yd == 1 else y
    rank = max(xl.dim(), yl.dim())
    px = _pad_front(xl, level, size, rank) if xb else xl
    py = _pad_front(yl, level, size, rank) if yb else yl
    z = logical(matmul(px, py), level)
    if xd == 1 and yd == 1:
        return z.squeeze(-1).squeeze(-1)
    if xd == 1:
        return z.squeeze(-2)
    if yd == 1:
        return z.squeeze(-1)
    return z


def _pad_front(t, level, size, rank):
    """The physical tensor of logical `t` as (batch, 1, ..., 1, *t.shape) of rank `rank` + 1."""
    from ._batching import physical
    p = physical(t)
    if t.dim() < rank:
        p = p.reshape((size,) + (1,) * (rank - t.dim()) + tuple(t.shape))
    return p


def linear_rule(node, level, size, inputs, arrays, attrs):
    """x Wᵀ + b: with only x batched, the op itself on x's physical array (its leading dimensions map); with a
    batched weight or bias (an ensemble through functional_call), as matmul and add, which have rules."""
    x, w, b = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
    wb = w._data.__class__ is BatchedArray and w._data.level == level
    bb = b is not None and b.__class__ is not type(None) and hasattr(b, "_data") and \
        b._data.__class__ is BatchedArray and b._data.level == level
    if not wb and not bb:
        p_in, p_ar, batched = phys_args(level, inputs, arrays)
        if x.dim() == 1:
            return NotImplemented  # (a 1-D input: the op's own 1-D handling would see a 2-D one)
        return _run(node, level, p_in, p_ar, attrs)
    from ..ops.linalg import matmul
    z = matmul(x, w.transpose(-1, -2))
    return z + b if b is not None and hasattr(b, "_data") else z


def getitem_rule(node, level, size, inputs, arrays, attrs):
    """x[index] with an index of constants (ints, slices, None, ..., and index arrays or masks that are not
    batched): a full slice in front for the batch dimension. NumPy moves the dimensions of index arrays that are
    separated by a slice to the front, which would put them before the batch: those run per example."""
    import numpy as np
    p_in, p_ar, batched = phys_args(level, inputs, arrays)
    if not batched[0] or batched[1]:
        return NotImplemented
    pre, main, kind = p_ar[1]
    if kind:
        adv = [k for k, it in enumerate(main) if isinstance(it, (np.ndarray, np.bool_)) or hasattr(it, "__cuda_array_interface__")]
        if adv and adv != list(range(adv[0], adv[0] + len(adv))):
            return NotImplemented
    full = slice(None)
    p_ar[1] = (None if pre is None else (full,) + tuple(pre), (full,) + tuple(main), kind)
    return _run(node, level, p_in, p_ar, attrs)


for _cls, _rule in (
        (reduce.Sum, axis_rule(1)), (reduce.Mean, axis_rule(1)), (reduce.Var, axis_rule(1)),
        (reduce.Std, axis_rule(1)), (reduce.AMax, axis_rule(1)), (reduce.LogSumExp, axis_rule(1)),
        (reduce.Norm, axis_rule(2)), (reduce.Cumsum, axis_rule(1, none_all=False)),
        (reduce.Cumprod, axis_rule(1, none_all=False)), (reduce.Prod, axis_rule(1, none_all=False)),
        (nn_activation.Softmax, axis_rule(1, none_all=False)), (nn_activation.LogSoftmax, axis_rule(1, none_all=False)),
        (shape.Narrow, axis_rule(1, none_all=False)), (shape.Flip, axis_rule(1, none_all=False)),
        (shape.Split, axis_rule(2, none_all=False)), (shape.Unbind, axis_rule(1, none_all=False)),
        (shape.Tril, trailing_rule), (shape.Triu, trailing_rule),
        (shape.View, view_rule), (shape.Permute, permute_rule),
        (shape.Cat, join_rule), (shape.Stack, join_rule),
        (linalg.Matmul, matmul_rule), (nn_misc.Linear, linear_rule),
        (nn_activation.Dropout, elementwise), (indexing.GetItem, getitem_rule)):
    RULES[_cls] = _rule
