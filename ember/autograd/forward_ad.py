"""Forward-mode automatic differentiation: dual tensors, PyTorch's `torch.autograd.forward_ad`.

Reverse mode (engine.py) records the graph and then pushes adjoints from the output back to the
inputs: one pass gives the gradient of one output with respect to every input. Forward mode pushes
*tangents* the other way, along with the computation itself: every value `v` carries `v'`, its
derivative along one chosen input direction, and every op computes its result's tangent from its
inputs' tangents by the chain rule (`(a * b)' = a' * b + a * b'`). One pass gives the derivative of
every output along one input direction, a Jacobian-vector product, with no graph kept.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)   # x carries `tangent` at this level
        y = f(x)                                     # each op's `jvp` rule computes y's tangent
        y_primal, jvp = forward_ad.unpack_dual(y)

Where it happens: `dispatch` (function.py), once the op has run, calls `propagate`, which asks the
op's `jvp` rule (written beside its `backward`) for the result's tangent. A tangent is stored on the
tensor, per level, in the slot `_fw` (absent on tensors that never carried one, so ordinary ops pay
nothing; `dispatch` only looks here when a level is open).

Levels. PyTorch's public `dual_level` is not nested; ember's transforms (`ember.func.jvp` inside
`jacfwd`, ...) open nested levels with `_enter_level`. The tangent rule of level L runs with levels
L and above closed, so its ops carry the tangents of the outer levels: the tangent of the tangent is
the mixed second derivative (forward over forward). Rules are ember ops, recorded by reverse mode
like any op, so forward over reverse (Hessian-vector products) works too.
"""
from __future__ import annotations

import itertools
import weakref
from collections import namedtuple

from .._tensor import TENSOR_TYPES, Tensor
from .. import _dtype as dt
from .grad_mode import MODE

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = "The result of `unpack_dual`: the primal (a view of the dual tensor) and its tangent, or None."

_ids = itertools.count(1)  # level ids are never reused: a tangent left on a tensor by a closed level is never read
_holders: dict = {}  # level -> weak references to the tensors that carry a tangent at that level (cleared on exit)


# ---------------------------------------------------------------------- levels
def _enter_level() -> int:
    """Open a new (possibly nested) forward-AD level in this thread and return its id."""
    level = next(_ids)
    MODE.fw = MODE.fw + (level,)
    _holders[level] = []
    MODE.refresh()
    return level


def _exit_level(level: int) -> None:
    """Close `level` (the innermost open one): its tangents are removed from every tensor that carries one."""
    if not MODE.fw or MODE.fw[-1] != level:
        raise RuntimeError(f"Trying to exit a forward AD level ({level}) that was not the last one entered "
                           f"(open levels: {list(MODE.fw)})")
    MODE.fw = MODE.fw[:-1]
    MODE.refresh()
    for ref in _holders.pop(level, ()):
        t = ref()
        if t is not None:
            d = getattr(t, "_fw", None)
            if d:
                d.pop(level, None)


def enter_dual_level() -> int:
    """Open the forward-AD level (PyTorch allows one at a time) and return it."""
    if MODE.fw:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    return _enter_level()


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the forward-AD level; every dual tensor made in it loses its tangent."""
    if level is None:
        if not MODE.fw:
            raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                               "This is not supported.")
        level = MODE.fw[-1]
    _exit_level(level)


class dual_level:
    """Context manager for the forward-AD level: `with dual_level(): ...`. Its tangents exist only inside."""

    def __enter__(self) -> int:
        self.level = enter_dual_level()
        return self.level

    def __exit__(self, *exc) -> None:
        exit_dual_level(level=self.level)


def _current(level: int | None, op: str) -> int:
    if level is None:
        if not MODE.fw:
            if op == "make_dual":
                raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                                   "enter_dual_level() first.")
            return 0
        return MODE.fw[-1]
    return level


# ---------------------------------------------------------------------- tangents on tensors
def tangent_of(t, level: int):
    """The tangent `t` carries at `level`, or None."""
    d = getattr(t, "_fw", None)
    return d.get(level) if d else None


def set_tangent(t: Tensor, level: int, tangent: Tensor) -> None:
    d = getattr(t, "_fw", None)
    if d is None:
        d = t._fw = {}
    if level not in d:
        _holders[level].append(weakref.ref(t))
    d[level] = tangent


def take_tangents(t: Tensor, result: Tensor) -> None:
    """After an in-place op wrote `result` into `t`: t carries result's tangents (zeros at a level where t had one
    and result has none)."""
    for level in MODE.fw:
        rt = tangent_of(result, level)
        if rt is None:
            if tangent_of(t, level) is None:
                continue
            from .._tensor import make
            from .. import backend
            rt = make(backend.array_module(t._data).zeros_like(t._data))
        elif rt._data.dtype != t._data.dtype:
            rt = rt.to(t.dtype)
        set_tangent(t, level, rt)


def is_dual(t) -> bool:
    """Whether `t` carries a tangent at an open level (in-place fast paths, which bypass `dispatch`, test this)."""
    d = getattr(t, "_fw", None)
    if d:
        for level in MODE.fw:
            if level in d:
                return True
    return False


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of `tensor` that carries `tangent` (same shape, floating point) at the current forward-AD level.

    The view keeps `tensor`'s reverse-mode graph and the tangents it carries at outer levels."""
    level = _current(level, "make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual: expected Tensors for the primal and the tangent, got {type(tensor).__name__} "
                        f"and {type(tangent).__name__}")
    if not dt.is_float(tensor._data.dtype):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not dt.is_float(tangent._data.dtype):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    from ..ops.shape import view_as
    inner = MODE.fw[MODE.fw.index(level):]  # this level and those inside it: the view carries none of theirs
    saved, MODE.fw = MODE.fw, MODE.fw[:len(MODE.fw) - len(inner)]
    try:
        dual = view_as(tensor, tensor)
    finally:
        MODE.fw = saved
    set_tangent(dual, level, tangent)
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """`(primal, tangent)` of a dual tensor at the current level: the primal is a view of `tensor` without that
    tangent; the tangent is None when it carries none (or outside any level)."""
    level = _current(level, "unpack_dual")
    tan = tangent_of(tensor, level) if level else None
    if tan is None:
        return UnpackedDualTensor(tensor, None)
    from ..ops.shape import view_as
    i = MODE.fw.index(level)
    saved, MODE.fw = MODE.fw, MODE.fw[:i]
    try:
        primal = view_as(tensor, tensor)
    finally:
        MODE.fw = saved
    return UnpackedDualTensor(primal, tan)


# ---------------------------------------------------------------------- the rule application (from dispatch)
def unsupported(node) -> NotImplementedError:
    """PyTorch's error for an op that has no forward-mode rule."""
    name = node.name()[:-len("Backward")] if node.name().endswith("Backward") else node.name()
    return NotImplementedError(f"Trying to use forward AD with {name} that does not support it because it has not "
                               f"been implemented yet. Please file an issue to ember so that we can prioritize "
                               f"its implementation.")


def propagate(node, inputs: tuple, arrays: tuple, attrs, result) -> None:
    """Give `result` (the op's output Tensor or tuple of them) its tangent at every open level at which an input
    carries one, from the op's `jvp` rule. The rule of level L runs with L and the levels inside it closed."""
    levels = MODE.fw
    if result.__class__ is tuple:
        if not any(r.__class__ in TENSOR_TYPES and dt.is_float(r._data.dtype) for r in result):
            return  # (indices, masks: integer results carry no tangent)
    elif not dt.is_float(result._data.dtype):
        return
    for k, level in enumerate(levels):
        tangents = None
        for a in inputs:
            if a.__class__ in TENSOR_TYPES and tangent_of(a, level) is not None:
                tangents = True
                break
        if tangents is None:
            continue
        tangents = tuple(_tangent_or_zeros(a, level) for a in inputs)
        MODE.fw = levels[:k]
        MODE.refresh()
        node._fw_call = (inputs, arrays, attrs, result)
        try:
            tz = node.jvp(tangents, *inputs)
        finally:
            del node._fw_call  # (it holds the result, whose grad_fn may be this node: no cycle left behind)
            MODE.fw = levels
            MODE.refresh()
        _attach(node, result, tz, level)


def _tangent_or_zeros(a, level: int):
    # 0 for what has no tangent (a number, an integer tensor, a tensor that is not dual at this level): the rules
    # then read like the math, `x' * y + x * y'`, and pay nothing for the terms that vanish
    if a.__class__ not in TENSOR_TYPES:
        return 0
    t = tangent_of(a, level)
    return 0 if t is None else t


def _attach(node, result, tz, level: int) -> None:
    if result.__class__ is tuple:
        if tz.__class__ is not tuple or len(tz) != len(result):
            raise RuntimeError(f"{node.name()}: its jvp rule returned {type(tz).__name__}, expected a tuple of "
                               f"{len(result)} tangents (or None)")
        pairs = zip(result, tz)
    else:
        pairs = ((result, tz),)
    for r, t in pairs:
        if t is None or not dt.is_float(r._data.dtype):
            continue
        if not isinstance(t, Tensor):  # a rule whose terms were all constants (0): the tangent is zero
            from .._tensor import make
            from .. import backend
            t = make(backend.array_module(r._data).zeros_like(r._data))
        if t.shape != r.shape:  # a rule's tangent that broadcasts against the result (from a 0-d input, say)
            t = _broadcast(node, r, t)
        if t._data.dtype != r._data.dtype:
            t = t.to(r.dtype)
        set_tangent(r, level, t)
        if result.__class__ is not tuple and getattr(node, "out_version", None) is not None:
            # the node saved its output for backward (`Op.output()` rebuilds it from the array): keep the
            # tangent beside it, so a backward run under forward AD (forward over reverse) sees it
            node._fw_out = tuple(p for p in (node.__dict__.get("_fw_out") or ()) if p[0] != level) + ((level, t),)


def _broadcast(node, r, t):
    import numpy as np
    try:
        if np.broadcast_shapes(t.shape, r.shape) == r.shape:
            return t.expand(r.shape).contiguous()
    except ValueError:
        pass
    raise RuntimeError(f"{node.name()}: its jvp rule returned a tangent of shape {list(t.shape)} for a result of "
                       f"shape {list(r.shape)}")
