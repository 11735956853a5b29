"""Lazy evaluation: `with ember.lazy():` defers ops and computes a value only when it is needed.

Inside the block an op application that reaches `dispatch` does not run: it becomes a pending
node, and its result is a tensor whose array is a `Pending` stand-in that knows its shape and dtype
but not its values. Shapes come from the one thing ember knows for sure about an op: what it
produced the last time it ran on inputs of the same shapes, dtypes and arguments (`_SHAPES`). So the
first time an application is seen it runs eagerly, and from then on (the second step of a training
loop, the second batch of an evaluation) it is deferred. After a deferred node has run, its result's
shape and dtype are checked against the recorded ones (an op whose shape depends on values would
fail that check loudly, never silently).

A pending value is computed (`realize`) when something needs it:

- its values are read: `.item()`, `bool()`, `float()`, `.tolist()`, `print`/`repr`, an index, or
  its array by NumPy or by an op that cannot be deferred (the stand-in's `__array__` and every
  array attribute other than shape/dtype/ndim/size/itemsize/nbytes realize it);
- its place in the graph is needed: `grad_fn`, hooks, `retain_grad` (`requires_grad` and `is_leaf` are
  known while it is pending);
- the block ends: every pending value that is still referenced is computed (what is not is
  dead code and never runs).

Everything pending is computed first (`flush`) before anything can change the values that pending
nodes read: an in-place op (`commit`), `backward()` (which then runs eagerly), an optimizer's or a
scheduler's step, `.numpy()` (the caller may write into the shared array), a hook, a compiled
function. Random draws (dropout's mask, factories) are not deferred: they run when the code calls
them, so the generators advance in eager's order.

What the whole pending graph gains before it runs: dead values are never computed, and along chains
of elementwise ops outside autograd an intermediate value read once is overwritten by its reader
instead of a fresh array being allocated (`ember/_reuse.py`). Inside autograd each node runs through
`dispatch` as eagerly, so gradients are eager's.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import weakref

import numpy as np

from . import _capture
from ._tensor import TENSOR_TYPES, Tensor, make, set_make_hook
from .autograd import function
from .autograd.function import Op
from .autograd.grad_mode import MODE

_ndarray = np.ndarray
_SHAPES: dict = {}  # memo: application key -> ((shape, dtype) per output, multi-output?)
_SHAPES_LIMIT = 1 << 16  # entries; past it the memo starts afresh (a bound on memory, not a cache policy)
_SCALARS = (int, float, bool, complex, str, type(None))
STATS = {"deferred": 0, "eager": 0, "run": 0, "dead": 0, "reused": 0}  # counters, for tests and docs


class Pending:
    """The array of a tensor whose op has not run yet: shape and dtype are known, values are not.

    Every other array attribute, every operator and NumPy's `__array__` compute the value first
    (`realize`) and then act on the real array, so code that reaches into a pending tensor's array
    gets the right answer, only sooner."""

    __slots__ = ("shape", "dtype", "ndim", "size", "itemsize", "node", "index", "value", "made", "holders",
                 "primary", "uses", "owned", "__weakref__")
    __ember_array__ = True  # what ember's array tests (`_dtype.result_type`, `_operand`) accept as an array

    def __init__(self, shape: tuple, dtype, node: "LazyNode", index: int) -> None:
        self.shape = shape
        self.dtype = dtype
        self.ndim = len(shape)
        self.size = math.prod(shape)
        self.itemsize = dtype.itemsize
        self.node = node
        self.index = index
        self.value = None  # the array, once computed
        self.made = None  # the Tensor its op made, once computed (edge and requires_grad)
        self.holders: list = []  # weak references to the tensors whose `_data` is this stand-in
        self.primary = None  # weak reference to the tensor the op returned (the user's result)
        self.uses = 0  # how many deferred ops read it (a value read once may give its buffer to its reader)
        self.owned = None  # the run of the pending graph that allocated its array (ember/_reuse.py), if one did

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def realize(self):
        """The value, computed now (with what it depends on) if it was not yet."""
        if self.value is None:
            if self.node.done:
                raise RuntimeError(f"ember.lazy: a value whose buffer was reused (read once, by the next op of an "
                                   f"elementwise chain) was asked for afterwards: shape {list(self.shape)}, {self.dtype}")
            self.node.mode.realize([self])
        return self.value

    def __array__(self, dtype=None, copy=None):
        a = self.realize()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __getattr__(self, name: str):
        # (only for names that are not slots: the real array's attributes and methods)
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self.realize(), name)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        state = "computed" if self.value is not None else "pending"
        return f"<Pending {state} array of shape {self.shape}, {self.dtype}>"


def _delegate(name: str):
    def method(self, *args):
        return getattr(self.realize(), name)(*args)
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__iter__", "__bool__", "__float__", "__int__", "__index__", "__complex__",
              "__neg__", "__pos__", "__abs__", "__invert__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
              "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
              "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__and__", "__rand__", "__or__", "__ror__", "__xor__",
              "__rxor__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__iadd__", "__isub__",
              "__imul__", "__itruediv__", "__contains__", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__"):
    setattr(Pending, _name, _delegate(_name))
del _name
Pending.__hash__ = object.__hash__


class _PendingEdge:
    """The `_edge` of a deferred result that will require grad: not a leaf (so leaf tests answer right while it
    is pending), and not a node: what needs the node (`grad_fn`, hooks, backward) computes the value first."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<pending graph edge>"


PENDING_EDGE = _PendingEdge()


def _register_pending_type() -> None:
    """ember's device queries see a pending array as a host array (only NumPy work is deferred)."""
    from . import backend
    backend.register_array_type(Pending, backend.CPU, np)


_register_pending_type()


class LazyNode:
    """One deferred application: the op instance, its inputs (pending tensors by their stand-ins, so
    that a value the user dropped is not kept alive by its consumer), its arrays and attributes, the
    grad mode it was called under, its outputs' stand-ins and the versions of the tensors it reads."""

    __slots__ = ("op", "inputs", "arrays", "attrs", "grad", "rg", "outs", "multi", "versions", "seq", "mode", "done")

    def __init__(self, mode, op, inputs, arrays, attrs, seq: int) -> None:
        self.mode, self.op, self.arrays, self.attrs, self.seq = mode, op, arrays, attrs, seq
        self.grad = MODE.grad
        ins, versions = [], []
        for a in inputs:
            if a.__class__ in TENSOR_TYPES:
                d = a._data
                if d.__class__ is Pending and d.value is None and d.primary is not None and d.primary() is a:
                    ins.append(d)  # (the op's own result: found again through the stand-in, not kept alive here)
                    continue
                # another holder of a pending value (a detached tensor) is kept as itself: it has its own graph place
                b = a._base
                versions.append((a, (b if b is not None else a)._vc))
            ins.append(a)
        self.inputs = tuple(ins)
        self.versions = versions
        self.outs: tuple = ()
        self.multi = False
        self.rg = False  # its result requires grad (it is recorded for backward when it runs)
        self.done = False

    def name(self) -> str:
        return type(self.op).__name__


class _Writes(TypeError):
    """An op takes a tensor beyond its inputs (batch norm's running statistics): it may write into it, so it runs
    now, after everything pending (which may read that tensor)."""


def _key_value(v):
    """A hashable stand-in for an argument that decides an op's output shape, or raises TypeError."""
    c = v.__class__
    if c in _SCALARS:
        return (c, v)
    if c is tuple or c is list:
        return (c, tuple([_key_value(e) for e in v]))
    if c is _ndarray:
        if v.dtype.kind == "b":
            raise TypeError("a boolean array")  # (a mask as an index: the result's shape depends on its values)
        return (c, v.shape, v.dtype)  # a constant array (dropout's mask, integer targets, an integer index)
    if c is Pending:
        raise TypeError("an array argument")
    if c in TENSOR_TYPES:
        raise _Writes()
    if c is slice:  # (not hashable before Python 3.12)
        return (c, _key_value(v.start), _key_value(v.stop), _key_value(v.step))
    if v is Ellipsis or isinstance(v, (np.generic, np.dtype, type, frozenset)):
        hash(v)
        return (c, v)
    raise TypeError("an object argument")  # (a generator, any other object: what the op does with it is its own)


class LazyMode:
    """What `ember.lazy()` installs at the capture seam (`ember._capture.ACTIVE`): it receives every op
    application of the thread that entered the block and defers it, or runs it now."""

    lazy = True

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self._depth = 0
        self.nesting = 0
        self.pending: list[LazyNode] = []
        self.seq = 0
        self.lock = threading.RLock()
        self.always = os.environ.get("EMBER_LAZY") == "always"  # tests: defer even an application seen first
        if self.always:
            from . import _reuse
            _reuse.MIN_SIZE = 1  # (and reuse buffers of any size, so that the suites check that pass too)

    @property
    def depth(self) -> int:
        """0 when an op of the lazy thread arrives at the seam; otherwise > 0 (while pending work runs, or in
        another thread)."""
        return self._depth if threading.get_ident() == self.thread else 1

    @contextlib.contextmanager
    def _inside(self):
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    # ------------------------------------------------------------------ the seam
    def dispatch(self, node, inputs: tuple, arrays, attrs):
        """An op application: deferred when its result's shape is known, else run now."""
        key = None
        if isinstance(node, Op) and not MODE.anomaly and not MODE.fw and not MODE.vmap and MODE.autocast is None:
            # (forward-mode AD, vmap and autocast act in `dispatch` when the op runs: such applications run now)
            try:
                key = self._key(node, inputs, arrays, attrs)
            except _Writes:
                self.flush()
            except TypeError:
                key = None
        if key is not None:
            meta = _SHAPES.get(key)
            if meta is None and self.always:
                meta = self._probe(node, inputs, arrays, attrs, key)
            if meta is not None:
                return self._defer(node, inputs, arrays, attrs, meta)
        STATS["eager"] += 1
        r = self._eager(node, inputs, arrays, attrs)
        if key is not None:
            self._learn(key, r)
        return r

    def _key(self, node, inputs, arrays, attrs):
        parts = [node.__class__]
        n = len(inputs)
        for i, a in enumerate(arrays):
            c = a.__class__
            if c is Pending or (c is _ndarray and i < n and inputs[i].__class__ in TENSOR_TYPES):
                parts.append((a.shape, a.dtype))  # (an input's array)
            else:
                parts.append(_key_value(a))
        if attrs:
            for k in sorted(attrs):
                parts.append((k, _key_value(attrs[k])))
        return tuple(parts)

    @staticmethod
    def _learn(key, r) -> None:
        outs = r if r.__class__ is tuple else (r,)
        meta = []
        for t in outs:
            if t.__class__ not in TENSOR_TYPES or t._data.__class__ is not _ndarray:
                return
            meta.append((t._data.shape, t._data.dtype))
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        _SHAPES[key] = (tuple(meta), r.__class__ is tuple)

    def _probe(self, node, inputs, arrays, attrs, key):
        """EMBER_LAZY=always (the test suites): learn the shape now, on copies of the node's state, so that even
        an application seen for the first time is deferred (and the deferral machinery is exercised by every
        test). Costs one extra run of the op."""
        import copy
        probe = copy.copy(node)
        try:
            r = self._eager(probe, inputs, arrays, attrs, record=False)
        except Exception:
            return None
        self._learn(key, r)
        return _SHAPES.get(key)

    def _eager(self, node, inputs, arrays, attrs, record: bool = True):
        """Run one application now, on computed inputs."""
        for a in inputs:  # (its graph edges are read when it records)
            if a.__class__ in TENSOR_TYPES and a._data.__class__ is Pending:
                self.settle(a)
        arrays = _resolve(arrays)
        with self._inside():
            if record:
                return function.dispatch(node, inputs, arrays, attrs)
            prev = MODE.grad
            MODE.grad = False
            try:
                return function.dispatch(node, inputs, arrays, attrs)
            finally:
                MODE.grad = prev

    def _defer(self, node, inputs, arrays, attrs, meta):
        metas, multi = meta
        # a constant array (an index, targets, a mask) is the caller's, who may write into it before the op runs:
        # the op keeps the values it was called with
        arrays = _own_constants(arrays, inputs)
        if attrs:
            attrs = {k: _own_constants(v, ()) if v.__class__ in (tuple, list, _ndarray) else v for k, v in attrs.items()}
        with self.lock:
            self.seq += 1
            n = LazyNode(self, node, inputs, arrays, attrs, self.seq)
            n.multi = multi
            rg = False
            if MODE.grad:
                for a in inputs:
                    if a.__class__ in TENSOR_TYPES and a._requires_grad:
                        rg = True
                        break
            n.rg = rg
            for a in _pendings(arrays):
                a.uses += 1
            outs = []
            results = []
            for i, (shape, dtype) in enumerate(metas):
                p = Pending(shape, dtype, n, i)
                outs.append(p)
                results.append(make(p, rg, PENDING_EDGE if rg else None))  # (the make hook: p's holder)
            n.outs = tuple(outs)
            self.pending.append(n)
            STATS["deferred"] += 1
        return tuple(results) if multi else results[0]

    def on_make(self, t) -> None:
        """Every tensor made while the block is active: one made on a stand-in (the result of a deferred op, a
        detach, `.data`) is written when the value is computed."""
        d = t._data
        if d.__class__ is Pending:
            if d.value is not None:
                t._data = d.value
            else:
                r = weakref.ref(t)
                if d.primary is None:
                    d.primary = r
                d.holders.append(r)

    def host(self, fn, args: tuple, kwargs: dict):
        with self._inside():
            return fn(*args, **kwargs)

    def opaque(self, fn, args: tuple, kwargs: dict):
        self.flush()
        with self._inside():
            return fn(*args, **kwargs)

    def commit(self, real, t, result, op: str):
        self.flush()
        with self._inside():
            return real(t, result, op)

    def backward(self, real, tensors, grad_tensors, retain_graph, create_graph, inputs):
        self.flush()
        with self._inside():
            return real(tensors, grad_tensors, retain_graph, create_graph, inputs)

    def view(self, out, of) -> None:
        pass  # (a deferred view is marked as one when it is made, like any other)

    def detach(self, t, out) -> None:
        pass  # (the make hook registered `out` on the stand-in it shares)

    def read(self, t, what: str) -> None:
        """Python reads t's value: compute it. `.numpy()` hands out the array itself, which the caller may
        write into, so then everything pending runs first."""
        if t is not None:
            self.settle(t)
        if what.startswith("numpy"):
            self.flush()

    def settle(self, t) -> None:
        """t's place in the graph or its array itself is needed (`grad_fn`, hooks, `.data = t`): compute it."""
        d = t._data
        if d.__class__ is Pending:
            t._data = d.realize()  # (also for a tensor that took the stand-in without `make`)

    def writing(self, t) -> None:
        """t's array is about to be written outside an op: what is pending may read it, so it runs first."""
        self.flush()

    def graph_break(self, reason: str, t) -> None:
        """Something ember does not defer happens (a hook, an in-place write outside an op...): first compute
        what is pending."""
        self.flush()

    # ------------------------------------------------------------------ computing
    def flush(self) -> None:
        """Compute every pending value still referenced; forget the dead ones."""
        with self.lock:
            if not self.pending:
                return
            live = []
            for n in self.pending:
                if not n.done:
                    for p in n.outs:
                        if p.value is None and _alive(p):
                            live.append(p)
            dead = self.pending
            self.pending = []
            if live:
                self.realize(live)
            STATS["dead"] += sum(1 for n in dead if not n.done)

    def realize(self, targets: list) -> None:
        """Compute the pending values `targets` and the pending values they depend on, in program order."""
        with self.lock:
            order = []
            seen = set()
            stack = [p.node for p in targets if p.value is None]
            while stack:
                n = stack.pop()
                if n.done or id(n) in seen:
                    continue
                seen.add(id(n))
                order.append(n)
                for a in _pendings(n.arrays):
                    if a.value is None:
                        stack.append(a.node)
                for a in n.inputs:
                    if a.__class__ is Pending and a.value is None:
                        stack.append(a.node)
            order.sort(key=_seq)
            from ._reuse import run_nodes
            run_nodes(self, order)
            if len(self.pending) > 64:
                self.pending = [n for n in self.pending if not n.done]

    def run_node(self, n: LazyNode) -> None:
        """Run one deferred node as eager would have (recording it for backward when it did), and give its
        results to the tensors that stand for them."""
        self.check_versions(n)
        inputs = tuple([_tensor_of(a) if a.__class__ is Pending else a for a in n.inputs])
        arrays = _resolve(n.arrays)
        prev = MODE.grad
        MODE.grad = n.grad
        self._depth += 1
        try:
            r = function.dispatch(n.op, inputs, arrays, n.attrs)
        finally:
            self._depth -= 1
            MODE.grad = prev
        outs = r if n.multi else (r,)
        for p, t in zip(n.outs, outs):
            self.settle_value(p, t._data, t, n)
        self.finish(n)

    @staticmethod
    def check_versions(n: LazyNode) -> None:
        """Refuse to run n if a tensor it reads was written in place since it was deferred (a write that did not
        compute what was pending first): its old values are gone, and eager would have used them."""
        for t, v in n.versions:
            b = t._base
            if (b if b is not None else t)._vc != v:
                raise RuntimeError(
                    f"ember.lazy: an input of the deferred {n.name()} (a tensor of shape {list(t.shape)}, {t.dtype}) "
                    f"was modified in place after the op was called and before its value was computed. Compute it "
                    f"first (print it, call .item() or leave the lazy block), or write with an in-place op.")

    def settle_value(self, p: Pending, value, made, n: LazyNode) -> None:
        """Give the computed `value` (made as tensor `made`, or None outside autograd) to p's holders."""
        if value.shape != p.shape or value.dtype != p.dtype:
            raise RuntimeError(
                f"ember.lazy: the deferred {n.name()} produced a result of shape {list(value.shape)}, {value.dtype} where "
                f"its recorded shape was {list(p.shape)}, {p.dtype}: its shape depends on values. Run it outside "
                f"ember.lazy(), or compute its inputs first.")
        p.value = value
        p.made = made
        for ref in p.holders:
            h = ref()
            if h is None:
                continue
            h._data = value
            if ref is p.primary and made is not None and h._edge is PENDING_EDGE:  # (detach_() may have cut it)
                h._edge = made._edge
                h._requires_grad = made._requires_grad
                op = made._edge
                if op is not None and getattr(op, "out_version", None) is not None and op.out_version() is made:
                    op.out_version = weakref.ref(h)  # the user's tensor is the output the node saved

    def finish(self, n: LazyNode) -> None:
        n.done = True
        n.op = n.arrays = n.inputs = n.attrs = None  # (the op is the result's graph node: it must not outlive it)
        n.outs = ()  # (a consumer still pending holds the stand-ins it needs)
        n.versions = ()
        STATS["run"] += 1

    # ------------------------------------------------------------------ leaving
    def outside(self, fn, args: tuple, kwargs: dict):
        """Call fn with lazy mode off (a compiled function's own capture and replay): everything pending first."""
        self.flush()
        _capture.set_active(None)
        set_make_hook(None)
        try:
            return fn(*args, **kwargs)
        finally:
            _capture.set_active(self)
            set_make_hook(self.on_make)


def _seq(n: LazyNode) -> int:
    return n.seq


def _alive(p: Pending) -> bool:
    for ref in p.holders:
        if ref() is not None:
            return True
    return False


def _tensor_of(p: Pending) -> Tensor:
    """The tensor that stands for a computed value as an op input: the user's result, while it lives (its
    version counter is the one in-place writes bump: a node that saves it must see them), else the one its op
    made (no one can write into a dead tensor: a view of it would keep it alive as its base)."""
    h = p.primary() if p.primary is not None else None
    if h is not None:
        return h
    if p.made is not None:
        return p.made
    return make(p.value)


def _pendings(x, depth: int = 0):
    for a in x:
        c = a.__class__
        if c is Pending:
            yield a
        elif (c is tuple or c is list) and depth < 3:
            yield from _pendings(a, depth + 1)


def _own_constants(x, inputs: tuple, depth: int = 0):
    """x (an argument, or a tuple of them) with every array that is not an input's own array copied."""
    if x.__class__ is _ndarray:
        return x.copy()
    out = list(x)
    n = len(inputs)
    for i, a in enumerate(out):
        c = a.__class__
        if c is _ndarray:
            if not (i < n and inputs[i].__class__ in TENSOR_TYPES):
                out[i] = a.copy()
        elif (c is tuple or c is list) and depth < 3:
            out[i] = _own_constants(a, (), depth + 1)
    return tuple(out) if x.__class__ is tuple else out


def _resolve(x, depth: int = 0):
    """x (a tuple of arrays and constants, possibly nested) with every stand-in replaced by its value."""
    out = None
    for i, a in enumerate(x):
        c = a.__class__
        if c is Pending:
            v = a.realize()
        elif (c is tuple or c is list) and depth < 3:
            v = _resolve(a, depth + 1)
            if v is a:
                continue
        else:
            continue
        if out is None:
            out = list(x)
        out[i] = v
    if out is None:
        return x
    return tuple(out) if x.__class__ is tuple else out


# ---------------------------------------------------------------------- the block
_MODES: dict[int, LazyMode] = {}  # thread id -> its active lazy mode


class lazy(contextlib.ContextDecorator):
    """`with ember.lazy():` (or `@ember.lazy()`): defer ops inside the block; compute values when needed and
    at the end of the block. Blocks nest (the outermost computes). Inside an `ember.compile` capture it does
    nothing (the capture is eager). See docs/compile.md, "Lazy mode", for when it pays."""

    def __enter__(self) -> "lazy":
        tid = threading.get_ident()
        mode = _MODES.get(tid)
        if mode is not None:
            mode.nesting += 1
            self._mode = mode
            return self
        if _capture.ACTIVE is not None:  # a capture (or another thread's lazy block) owns the seam
            self._mode = None
            return self
        mode = LazyMode()
        mode.nesting = 1
        _MODES[tid] = mode
        self._mode = mode
        _capture.set_active(mode)
        set_make_hook(mode.on_make)
        return self

    def __exit__(self, *exc) -> bool:
        mode = self._mode
        if mode is None:
            return False
        mode.nesting -= 1
        if mode.nesting:
            return False
        try:
            mode.flush()
        finally:
            _MODES.pop(mode.thread, None)
            if _capture.ACTIVE is mode:
                _capture.set_active(None)
                set_make_hook(None)
        return False

    @staticmethod
    def realize(*tensors) -> None:
        """Compute these tensors' pending values now (ember's `realize`; outside a block it does nothing)."""
        ps = [t._data for t in tensors if isinstance(t, Tensor) and t._data.__class__ is Pending]
        if ps:
            ps[0].node.mode.realize(ps)


def is_lazy() -> bool:
    """Whether ops of this thread are deferred now."""
    m = _capture.ACTIVE
    return getattr(m, "lazy", False) and m.depth == 0
