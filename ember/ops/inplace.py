"""In-place ops (`add_`, `mul_`, `+=`, `zero_`, `copy_`, `clamp_`, ...) with version counters.

Without autograd involvement an in-place op writes straight into the array. When the
graph is recorded, the op is computed out of place and its result written back into the
tensor's array; the tensor then takes the result's place in the graph (its grad_fn
becomes the new node) and its version counter is bumped, so a backward that still needs
the old values raises instead of silently using the new ones. Under forward AD (a tensor
carrying a tangent) the op is computed out of place too, so that its rule gives the tangent
the tensor takes (`_write_tangents`).

Views live here too: `as_view` gives a view its base's version counter, and `VIEWS`, the
registry of views in the graph (and, under forward AD, of every view), lets an in-place change
of a base give its live views a new history (`_rebuild_views`) and new tangents.
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import _capture
from .. import _dtype as dt
from .. import backend
from .._tensor import Slot, Tensor, bump_version, make
from ..backend import on_device_of, writable
from ..autograd.forward_ad import is_dual, set_tangent, take_tangents, tangent_of
from ..autograd.function import Op
from ..autograd.grad_mode import MODE
from . import arithmetic as A
from .registry import Exports


# ---------------------------------------------------------------------- the view registry
# id(base) -> [weakref to base, weakrefs to its views in the graph]: the views whose history must be rebuilt
# when the base's history is rewritten by an in-place op (see ember/ops/inplace.py, _rebuild_views).
VIEWS: dict = {}


def as_view(out: Tensor, of: Tensor) -> Tensor:
    """Mark `out` (whose array is a view of `of`'s) as a view: it then shares of's version counter.

    A view in the graph (`out.requires_grad`) of a non-leaf base is also recorded against the base, so an
    in-place change of the base can give the view a new history; views of leaves and views outside the
    graph cost nothing more (a leaf that requires grad can't be modified in place under autograd)."""
    if _capture.ACTIVE is not None and _capture.ACTIVE.depth == 0:
        _capture.ACTIVE.view(out, of)  # a replay marks the view again
    b = of._base
    if b is None:
        b = of
    out._base = b
    if (out._requires_grad and b._edge is not None) or MODE.fw:
        # (forward AD: a view's tangent is read from its base's again when either is written in place)
        _register_view(out, b)
    return out


def _register_view(v: Tensor, b: Tensor) -> None:
    key = id(b)
    e = VIEWS.get(key)
    if e is None or e[0]() is not b:  # no entry yet (or a dead base's, whose id was reused)
        e = VIEWS[key] = [weakref.ref(b, lambda r, key=key: VIEWS.get(key, (None,))[0] is r and VIEWS.pop(key))]
    elif len(e) > 64 and len(e) & (len(e) - 1) == 0:  # prune dead views now and then (at powers of two)
        e[1:] = [r for r in e[1:] if r() is not None]
    e.append(weakref.ref(v))



# ---------------------------------------------------------------------- writing into a tensor
def check_writable(t: Tensor, op: str) -> None:
    if MODE.grad and t._requires_grad and t._edge is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation. "
                           f"Wrap the update in `with ember.no_grad():` or operate on a clone().")
    if not writable(t._data):
        raise RuntimeError(f"{op}: unsupported operation: this tensor is a read-only view (e.g. from expand or "
                           f"broadcast_to) in which several elements share one memory location; call .clone() first.")


def commit(t: Tensor, result: Tensor, op: str) -> Tensor:
    """Write `result` into t's array and give t result's place in the graph."""
    if _capture.ACTIVE is not None and _capture.ACTIVE.depth == 0:
        return _capture.ACTIVE.commit(commit, t, result, op)
    r = result._data
    if r.dtype != t._data.dtype and not np.can_cast(r.dtype, t._data.dtype, "same_kind"):
        raise RuntimeError(f"{op}: result type {dt.FROM_NP[r.dtype]} can't be cast to the desired output type {t.dtype}")
    if r.shape != t._data.shape:
        raise RuntimeError(f"{op}: output with shape {list(t.shape)} doesn't match the broadcast shape {list(r.shape)}")
    e = t._edge
    if e is not None and e.__class__ is not Slot and e.out_version is not None and e.out_version() is t:
        # t is the saved output of its own node: that node's backward must refuse, even once t itself is gone
        e.out_version = Overwritten(t)
    if result._requires_grad:
        if t._base is not None and MODE.grad:
            return _commit_view(t, result, op)
        t._data[...] = r
        t._edge = result._edge
        t._requires_grad = True
        if id(t) in VIEWS:
            _rebuild_views(t)
    elif t._data.__class__ is np.ndarray:
        np.copyto(t._data, r, casting="same_kind")
    else:
        backend.array_module(t._data).copyto(t._data, r, casting="same_kind")
    if MODE.fw:
        _write_tangents(t, result)
    bump_version(t)
    return t


class Overwritten:
    """Stands in for the weak reference a node keeps to the output it saved (`Op.out_version`) once that
    output was written in place: it answers like the tensor (shape, dtype, a nonzero version), so the node's
    backward raises PyTorch's "modified by an inplace operation" even after the tensor was freed."""

    __slots__ = ("shape", "dtype", "_vc")

    def __init__(self, t: Tensor) -> None:
        self.shape, self.dtype, self._vc = t.shape, t.dtype, max(1, t._vc + 1)

    def __call__(self) -> "Overwritten":
        return self


def _positions(view, base, unique: bool = True):
    """The flat (C-order) position in `base` of each element of `view`, a view into base's memory, as an
    int64 array on their device; None when that mapping does not exist (another dtype, elements outside base,
    and, when `unique`, several elements of view at one memory location, as in an expanded view)."""
    if view.__class__ is not base.__class__ or view.dtype != base.dtype:
        return None
    xp = backend.array_module(base)
    if view.size == 0:
        with on_device_of(base):
            return xp.zeros(view.shape, np.int64)
    isz = base.itemsize
    if xp is np:
        delta = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    else:  # a device array: its data pointer (the mapping below is worked out on the host from the layout alone)
        if view.device != base.device:
            return None
        delta = view.data.ptr - base.data.ptr
    if delta % isz or any(st % isz for st in base.strides + view.strides):
        return None
    bst = [st // isz for n, st in zip(base.shape, base.strides)]
    vst = [st // isz for st in view.strides]
    if any(st == 0 and n > 1 for n, st in zip(base.shape, bst)):
        return None  # a base whose elements share memory: positions are ambiguous
    lo = sum((n - 1) * st for n, st in zip(base.shape, bst) if st < 0)
    hi = sum((n - 1) * st for n, st in zip(base.shape, bst) if st > 0)
    start = delta // isz
    vlo = start + sum((n - 1) * st for n, st in zip(view.shape, vst) if st < 0)
    vhi = start + sum((n - 1) * st for n, st in zip(view.shape, vst) if st > 0)
    if vlo < lo or vhi > hi:
        return None
    # lay base's flat positions out in a buffer with base's memory layout, then read it through view's layout
    buf = np.full(hi - lo + 1, -1, np.int64)
    as_strided = np.lib.stride_tricks.as_strided
    as_strided(buf[-lo:], base.shape, [st * 8 for st in bst])[...] = np.arange(base.size).reshape(base.shape)
    pos = as_strided(buf[start - lo:], view.shape, [st * 8 for st in vst]).copy()
    if (pos < 0).any() or (unique and np.unique(pos).size != pos.size):
        return None
    return pos if xp is np else backend.transfer(pos, backend.device_of(base))


def _unravel(pos, shape: tuple) -> tuple:
    """np.unravel_index on pos's device."""
    return backend.array_module(pos).unravel_index(pos, shape)


class _StaleView(Op):
    """The history of a view whose elements can't be mapped to its base's (e.g. a view with another dtype)
    after the base was changed in place: backward through it raises rather than return a wrong gradient."""

    saves_inputs = False

    def forward(self, x):
        return x

    def jvp(self, t, x):
        return t[0]

    def backward(self, gz):
        raise RuntimeError("backward through a view whose base was modified in place after the view was taken, and "
                           "whose elements ember can't map to the base's; take the view after the in-place op, or "
                           "clone() it before")


def _rebuild_views(base: Tensor, skip: Tensor | None = None) -> None:
    """After base's history was rewritten in place: give each live view of base in the graph (but `skip`)
    a new history, base's new one read at the view's elements, as PyTorch regenerates a view's grad_fn
    when its base's version changed. Without it a view read later would still carry the old history."""
    from .indexing import GetItem
    entry = VIEWS.get(id(base))
    if entry is None or entry[0]() is not base:
        return
    live = [r for r in entry[1:] if r() is not None]
    entry[1:] = live
    b = base._data
    for ref in live:
        v = ref()
        if v is None or v is skip or not v._requires_grad:
            continue  # detach_() took it out of the graph
        if b.ndim == 0:  # every element of the view is base's one element
            v._edge = A.BroadcastTo.apply(base, v._data.shape)._edge
            continue
        pos = _positions(v._data, b, unique=False)
        if pos is None:
            v._edge = _StaleView.apply(base)._edge
        else:
            v._edge = GetItem.apply(base, idx=(None, _unravel(pos, b.shape) + (Ellipsis,), 2))._edge


def _commit_view(t: Tensor, result: Tensor, op: str) -> Tensor:
    """In-place op on a view `t` under autograd, as PyTorch's CopySlices: the base takes a new graph node
    (base with the view's positions replaced by `result`), and the view becomes a slice of that node, so
    gradients reach the base's history (zero at the overwritten positions) and result's inputs."""
    from .indexing import GetItem, IndexPut
    base = t._base
    if base._requires_grad and base._edge is None:
        raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an in-place "
                           f"operation; do the update under `with ember.no_grad():` or on a clone()")
    if base._requires_grad and not t._requires_grad:
        raise RuntimeError(f"{op}: this tensor shares memory with a tensor that requires grad but was taken outside "
                           f"the graph (under no_grad, or by detach()); modifying it in place with autograd would "
                           f"hide the change from the graph: clone() it first")
    pos = _positions(t._data, base._data)
    if pos is None:
        refuse_view_write(t, op)
    if base._data.ndim == 0:
        if t._data.ndim:
            refuse_view_write(t, op)
        idx = (None, (Ellipsis,), 0)
    else:
        idx = (None, _unravel(pos, base._data.shape) + (Ellipsis,), 2)
    r = result if result._data.dtype == base._data.dtype else result.to(base.dtype)
    new_base = IndexPut.apply(base, r, idx=idx)
    t._data[...] = r._data  # writes through to the base's memory: base._data now equals new_base._data
    base._edge = new_base._edge
    base._requires_grad = True
    t._edge = GetItem.apply(new_base, idx=idx)._edge
    t._requires_grad = True
    if id(base) in VIEWS:
        _rebuild_views(base, skip=t)
    if MODE.fw:
        _write_tangents(t, result)
    bump_version(t)
    return t


# ---------------------------------------------------------------------- forward AD through in-place writes
def _write_tangents(t: Tensor, result: Tensor) -> None:
    """Forward AD, after `result` was written into t: t carries result's tangents (zero where result has none, as
    after copy_). As in PyTorch, where a view's tangent is a view of its base's: a write through a view writes the
    view's tangent into its base's, and the base's other live views take theirs from the base's again."""
    take_tangents(t, result)
    base = t._base
    if base is not None:
        _tangent_into_base(t, base)
    else:
        base = t
    if id(base) in VIEWS:
        _refresh_view_tangents(base, skip=t)


def _index_of(view, base):
    """The parsed index (see indexing.py) of view's elements in base, or None when they can't be mapped."""
    if base.ndim == 0:
        return (None, (Ellipsis,), 0) if view.ndim == 0 and view.dtype == base.dtype else None
    pos = _positions(view, base, unique=False)
    return None if pos is None else (None, _unravel(pos, base.shape) + (Ellipsis,), 2)


def _at_levels(k: int, fn, *args, **kwargs):
    """fn(*args, **kwargs) with forward-AD level k and those inside it closed: a tangent computed for level k
    carries the tangents of the outer levels only (as `forward_ad.propagate` runs a rule)."""
    levels = MODE.fw
    MODE.fw = levels[:k]
    MODE.refresh()
    try:
        return fn(*args, **kwargs)
    finally:
        MODE.fw = levels
        MODE.refresh()


def _tangent_into_base(v: Tensor, base: Tensor) -> None:
    """base's tangent with view v's elements replaced by v's tangent, at each level where v carries one."""
    from .indexing import IndexPut
    idx = None
    for k, level in enumerate(MODE.fw):
        tv = tangent_of(v, level)
        if tv is None:
            continue
        if idx is None:
            idx = _index_of(v._data, base._data)
            if idx is None:
                return  # (elements not mappable, e.g. a view with another dtype: the base's tangent is left as is)
        tb = tangent_of(base, level)
        if tb is None:
            if v._data.shape == base._data.shape and _same_memory(v._data, base._data):
                continue  # make_dual's view of a primal without a tangent: the primal stays without one (PyTorch)
            tb = A.tangent_or_zeros(0, base)
        tv = tv if tv._data.dtype == tb._data.dtype else tv.to(tb.dtype)
        set_tangent(base, level, _at_levels(k, IndexPut.apply, tb, tv, idx=idx))


def _same_memory(a, b) -> bool:
    """Whether arrays a and b lay out the same elements at the same addresses (an alias)."""
    if a.strides != b.strides or a.dtype != b.dtype:
        return False
    if a.__class__ is np.ndarray:
        return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    return a.data.ptr == b.data.ptr


def _refresh_view_tangents(base: Tensor, skip: Tensor) -> None:
    """After base's tangent changed: each live view of base (but `skip`) takes base's tangent at its elements."""
    from .indexing import GetItem
    entry = VIEWS.get(id(base))
    if entry is None or entry[0]() is not base:
        return
    for ref in entry[1:]:
        v = ref()
        if v is None or v is skip:
            continue
        idx = None
        for k, level in enumerate(MODE.fw):
            tb = tangent_of(base, level)
            if tb is None:
                continue
            if idx is None:
                idx = _index_of(v._data, base._data)
                if idx is None:
                    break
            set_tangent(v, level, _at_levels(k, GetItem.apply, tb, idx=idx))


def old_input(t: Tensor, cls) -> Tensor:
    """The tensor's current identity as an op input; a copy when the op saves inputs (its values are about
    to change). Also when t itself needs no gradient: `y.mul_(w)` must keep y's old values for w's gradient."""
    if not (MODE.grad and getattr(cls, "saves_inputs", True)):
        return t
    if _capture.ACTIVE is not None:  # the same values and gradient, through an op a capture records
        return t.clone()
    old = make(t._data.copy(), t._requires_grad, t._edge)
    for level in MODE.fw:  # and the same tangents
        tan = tangent_of(t, level)
        if tan is not None:
            set_tangent(old, level, tan)
    return old


def _binary_(cls, name: str):
    def method(self: Tensor, other, *, alpha=None) -> Tensor:
        op = name + "_"
        check_writable(self, op)
        if cls is A.Sub:  # bool - x and x - bool are refused in place too, as PyTorch's sub does
            A.check_bool_sub(self, other)
        o = other if alpha is None or alpha == 1 else other * alpha
        if cls is A.Pow and self._data.dtype.kind in "iub" and type(o) is int and o < 0:
            raise RuntimeError(f"pow_(): integers to negative integer powers are not allowed (an integer tensor of "
                               f"dtype {self.dtype} to the power {o}); use a floating-point tensor")
        needs_graph = MODE.grad and (self._requires_grad or (isinstance(o, Tensor) and o._requires_grad))
        if MODE.fw and (is_dual(self) or is_dual(o)):
            needs_graph = True  # (forward AD: the op's rule gives the tangent)
        if not needs_graph and _capture.ACTIVE is None:  # (a capture records the op and the write: below)
            x = self._data
            y = o._data if isinstance(o, Tensor) else o
            if cls is A.Pow:
                return _pow_(self, o)
            ufunc = _UFUNCS[cls]
            if cls is A.Div and not dt.is_float(x.dtype):
                raise RuntimeError(f"{op}: result type Float can't be cast to the desired output type {self.dtype}")
            try:
                ufunc(x, y, out=x, casting="same_kind")
            except TypeError:
                res = A.binary(cls, self, o, op)._data
                raise RuntimeError(f"{op}: result type {dt.FROM_NP[res.dtype]} can't be cast to the desired output "
                                   f"type {self.dtype}") from None
            except ValueError:
                if isinstance(o, Tensor):
                    backend.check_same_device(op, (x, o._data))
                A.check_broadcast(x, y, op)
                raise RuntimeError(f"{op}: output with shape {list(x.shape)} doesn't match the broadcast shape "
                                   f"{list(np.broadcast_shapes(x.shape, np.shape(y)))}") from None
            bump_version(self)
            return self
        return commit(self, A.binary(cls, old_input(self, cls), o, op), op)
    method.__name__ = name + "_"
    return method


def _pow_(self: Tensor, o) -> Tensor:
    """pow_ outside the graph: NumPy's integer power refuses negative exponents with a ValueError
    that says nothing useful, so compute out of place (PyTorch's rules) and write back. (A negative Python int
    exponent of an integer tensor was refused by the caller, with pow_'s message.)"""
    return commit(self, A.binary(A.Pow, self, o, "pow_"), "pow_")


def refuse_view_write(t: Tensor, op: str) -> None:
    raise RuntimeError(f"{op}: in-place modification of a view of a tensor that is part of the autograd graph is not "
                       f"supported by ember; use an out-of-place op (e.g. torch.where or torch.cat) or do the update "
                       f"under ember.no_grad()")


def unary_in_place(fn, name: str, cls=None):
    """The in-place Tensor method `<name>_` of the out-of-place function `fn` (whose Op class is `cls`, for the
    gradient through the old values): computed out of place and written back (`commit`)."""
    def method(self: Tensor, *args, **kwargs) -> Tensor:
        op = name + "_"
        check_writable(self, op)
        if MODE.grad and self._requires_grad:
            return commit(self, fn(old_input(self, cls), *args, **kwargs), op)
        return commit(self, fn(self, *args, **kwargs), op)
    method.__name__ = name + "_"
    return method


def zero_(self: Tensor) -> Tensor:
    """Fill with zeros (under autograd, the result no longer depends on the old values)."""
    return fill_(self, 0)


def fill_(self: Tensor, value) -> Tensor:
    check_writable(self, "fill_")
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions.")
        if MODE.grad and (value._requires_grad or self._requires_grad) or MODE.fw and (is_dual(value) or is_dual(self)):
            return _replace(self, value.to(self.dtype), "fill_")
        value = value.item()
    return _overwrite(self, value, "fill_")


def _replace(self: Tensor, value, op: str) -> Tensor:
    """Under autograd, overwrite every element with `value` (broadcast) and stay in the graph, as PyTorch
    does: the old values get a zero gradient, a Tensor value the gradient of what it was written to."""
    from .indexing import IndexPut
    return commit(self, IndexPut.apply(self, value, idx=(None, (Ellipsis,), 0)), op)


def _overwrite(self: Tensor, value, op: str) -> Tensor:
    """Replace every value (a scalar or an array of self's shape): the result depends on nothing."""
    if (MODE.grad and self._requires_grad) or _capture.ACTIVE is not None or (MODE.fw and is_dual(self)):
        # (a capture records the write; forward AD zeroes the tangent)
        if not isinstance(value, (int, float, bool)):
            with on_device_of(self._data):
                value = make(value if hasattr(value, "shape") else backend.array_module(self._data).asarray(value))
        return _replace(self, value, op)
    self._data[...] = value
    bump_version(self)
    return self


# ---------------------------------------------------------------------- in-place random fills
def _rng(t: Tensor, generator, op: str):
    """The ember Generator that draws on t's device (the default one of that device unless `generator`)."""
    from .._creation import generator_for
    return generator_for(backend.device_of(t._data), generator, op)


def _random_(op: str, draw, floats_only: bool = True):
    """A Tensor method filling the tensor with `draw(rng, shape, np_dtype, *args)` (PyTorch's `x.normal_()` family)."""
    def method(self: Tensor, *args, generator=None) -> Tensor:
        check_writable(self, op)
        d = self._data.dtype
        if floats_only and not dt.is_float(d):
            raise RuntimeError(f"{op}: expects a floating-point tensor, got {self.dtype}")
        values = draw(_rng(self, generator, op), self._data.shape, d, *args)
        return _overwrite(self, values, op)
    method.__name__ = op
    return method


def _uniform(rng, shape, d, low=0.0, high=1.0):
    if low > high:
        raise RuntimeError(f"uniform_: expects to return a [from, to) range, but found from={low} > to={high}")
    u = rng.random(shape, np.float32 if d == np.float32 else np.float64)
    return u * (high - low) + low


def _normal(rng, shape, d, mean=0.0, std=1.0):
    if std < 0:
        raise RuntimeError(f"normal_: expects std >= 0.0, but found std {std}")
    return rng.standard_normal(shape, np.float32 if d == np.float32 else np.float64) * std + mean


def _bernoulli(rng, shape, d, p=0.5):
    p = p._data if isinstance(p, Tensor) else p
    bad = (p < 0) | (p > 1)
    if bool(bad.any()) if hasattr(bad, "any") else bad:
        raise RuntimeError("bernoulli_: expects 0 <= p <= 1")
    return rng.random(shape) < p


def _exponential(rng, shape, d, lambd=1.0):
    if lambd <= 0:
        raise RuntimeError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    if rng.device.type == "cpu":
        return rng.np.exponential(1.0 / lambd, shape)
    # CuPy's RandomState has exponential, but ember's Generator draws only uniforms and normals: invert the CDF
    return np.log1p(-rng.random(shape, d)) * (-1.0 / lambd)


def _draw_dtype(d):
    return np.float32 if d == np.float32 else np.float64  # (the generators draw these two; others are cast after)


def _cauchy(rng, shape, d, median=0.0, sigma=1.0):
    """median + sigma·tan(π(u - ½)): the Cauchy distribution's inverse CDF at a uniform u."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return np.tan(np.pi * (rng.random(shape, _draw_dtype(d)) - 0.5)) * sigma + median


def _log_normal(rng, shape, d, mean=1.0, std=2.0):
    """exp(N(mean, std²)): the log of the result is normal with that mean and std."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return np.exp(rng.standard_normal(shape, _draw_dtype(d)) * std + mean)


def _geometric(rng, shape, d, p):
    """The number of Bernoulli(p) trials up to the first success (1, 2, ...): ⌊ln(1-u)/ln(1-p)⌋ + 1."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return np.floor(np.log1p(-rng.random(shape, np.float64)) / np.log1p(-p)) + 1


def _random_ints(rng, shape, d, low=0, high=None):
    if high is None:  # random_(to) draws from [0, to); random_() from [0, 2^mantissa] for floats
        low, high = 0, low if low else (2 ** (np.finfo(d).nmant + 1) if dt.is_float(d) else np.iinfo(d).max)
    if low >= high:
        raise RuntimeError(f"random_: expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return rng.integers(low, high, shape)


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast, cast) into this tensor; gradients flow to `src`."""
    check_writable(self, "copy_")
    if not isinstance(src, Tensor):
        src = make(np.asarray(src))
    if src._data.__class__ is not self._data.__class__ or (
            src._data.__class__ is not np.ndarray and src.device != self.device):
        src = src.to(self.device, non_blocking=non_blocking)  # copy_ moves across devices (differentiably)
    try:
        np.broadcast_shapes(src.shape, self.shape)
        if np.broadcast_shapes(src.shape, self.shape) != self.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"copy_: the source of shape {list(src.shape)} cannot be broadcast to the destination "
                           f"of shape {list(self.shape)}") from None
    dual = MODE.fw and (is_dual(src) or is_dual(self))
    if (MODE.grad and (src._requires_grad or self._requires_grad) or dual) and self.is_floating_point():
        return _replace(self, src.to(self.dtype) if src._requires_grad or dual else src, "copy_")
    if _capture.ACTIVE is not None:  # recorded as an op and a write
        return _replace(self, src, "copy_")
    self._data[...] = src._data
    bump_version(self)
    return self


_UFUNCS = {A.Add: np.add, A.Sub: np.subtract, A.Mul: np.multiply, A.Div: np.true_divide, A.Pow: np.power}


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
# (the in-place forms of unary ops are declared with those ops, in unary.py, and built by unary_in_place)
_add_, _sub_, _mul_, _div_ = _binary_(A.Add, "add"), _binary_(A.Sub, "sub"), _binary_(A.Mul, "mul"), _binary_(A.Div, "div")
_pow_method = _binary_(A.Pow, "pow")

EXPORTS = Exports(
    globals(),
    methods=("zero_", "fill_", "copy_"),
    aliases={
        "add_": _add_, "sub_": _sub_, "mul_": _mul_, "div_": _div_, "pow_": _pow_method,
        "subtract_": _sub_, "multiply_": _mul_, "divide_": _div_,
        "__iadd__": _add_, "__isub__": _sub_, "__imul__": _mul_, "__itruediv__": _div_, "__ipow__": _pow_method,
        "uniform_": _random_("uniform_", _uniform),
        "normal_": _random_("normal_", _normal),
        "bernoulli_": _random_("bernoulli_", _bernoulli, floats_only=False),
        "exponential_": _random_("exponential_", _exponential),
        "random_": _random_("random_", _random_ints, floats_only=False),
        "cauchy_": _random_("cauchy_", _cauchy),
        "log_normal_": _random_("log_normal_", _log_normal),
        "geometric_": _random_("geometric_", _geometric, floats_only=False),
    })
