"""Capture: run a function once, eagerly, and record what it did as a `Trace`.

A capture *is* an eager run: every op computes its real result, so the call that captures
returns exactly what eager returns, whatever is found. Alongside, the `Tracer` (installed at
the seam of `ember._capture`) records each application that reaches `dispatch` as an `Instr`
whose arguments are references:

    ("v", i)        value i of the trace: an input, or an output of an earlier instruction
    ("e", k)        extern k: a tensor that existed before the call (a parameter, a buffer, a
                    global), read afresh at every replay (its array may be replaced or updated)
    ("c", x)        a constant (a Python number, a dtype, a shape, an array made outside tensors)
    ("cast", i, d)  value i's array cast to dtype d (an op promoted the input before dispatch)

and so are factories and random draws (host calls, called again at replay), in-place writes
(`commit`), `backward`, and the opaque calls of optimizers and schedulers (replayed as calls on
the same object). Whatever the run does that a replay without the Python code could not
reproduce is a *graph break*: the trace records the reason and where in the user's code it
happened, and the caller runs that function eagerly from then on (or raises, with fullgraph).
"""
from __future__ import annotations

import builtins
import dis
import os
import sys
import threading
import traceback
import warnings
import weakref

import numpy as np

from .. import _capture
from .._tensor import TENSOR_TYPES, Size, Slot, Tensor
from ..autograd.grad_mode import MODE
from .. import _dtype as dt

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CLI_DIR = os.path.join(_EMBER_DIR, "cli")
_COMPILER_DIR = os.path.dirname(os.path.abspath(__file__))
_CALLERS: set = set()  # the code objects whose callees are the user's code: Tracer.run, Module's calls (below)
_LIB_DIRS = tuple({os.path.dirname(os.__file__)} | {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))})
# Bytecodes that change Python state outliving the call: a replay, which does not run the Python
# code, would skip them. Container mutation through methods (list.append) is not detected here
# (docs/compile.md lists it): it is the one Python side effect a replay can silently skip.
_SIDE_EFFECTS = {"STORE_ATTR", "STORE_GLOBAL", "STORE_DEREF", "DELETE_ATTR", "DELETE_GLOBAL", "DELETE_DEREF"}


class GraphBreak(RuntimeError):
    """Raised with fullgraph=True when the function cannot be captured whole."""


class Instr:
    """One recorded step. kind: "op" (an Op applied through dispatch: `fn` is its class), "host" (a
    traced function called again: a factory, a random draw), "commit" (an in-place write of value
    `args[1]` into `args[0]`), "detach", "getgrad" (the `.grad` of extern args[0]), "backward",
    "call" (an opaque method call) and "grad" (autograd.grad)."""

    __slots__ = ("kind", "fn", "inputs", "arrays", "attrs", "outs", "grad", "where", "shapes", "multi", "needs", "meta",
                 "n_out", "attr_refs")

    def __init__(self, kind: str, fn, inputs=(), arrays=(), attrs=None, outs=(), where=None) -> None:
        self.kind, self.fn, self.inputs, self.arrays, self.attrs = kind, fn, inputs, arrays, attrs
        self.outs, self.where = outs, where
        self.grad = MODE.grad  # the grad mode it ran under: a replay restores it
        self.shapes = ()
        self.multi = False  # an op whose forward returned a tuple (even of one)
        self.needs = None  # a recorded op: whether each input needed a gradient (its node's edges), ...
        self.meta = None  # ... its node's `meta` (the inputs whose gradient is reduced), and its node's n_out
        self.n_out = 1
        self.attr_refs = None  # an op's attributes as references, when one of them is not a constant

    def name(self) -> str:
        f = self.fn
        return getattr(f, "__qualname__", None) or type(f).__name__

    def __repr__(self) -> str:
        return f"Instr({self.kind} {self.name()} -> {list(self.outs)})"


class Trace:
    """What a capture recorded: instructions over values, inputs and externs, and the outputs."""

    def __init__(self) -> None:
        self.instrs: list[Instr] = []
        self.values: list[tuple] = []  # per value: (is_tensor, shape, dtype, requires_grad, is_leaf)
        self.inputs: list[int] = []  # value index of each tensor/array leaf of the arguments
        self.externs: list[Tensor] = []
        self.output = None  # the result's structure with refs at the leaves (see `Tracer.spec`)
        self.breaks: list[tuple[str, str]] = []  # (reason, "file:line")
        self.modules: list = []  # modules whose forward ran (their training flags are guarded)
        self.globals: dict = {}  # id(globals dict) -> (the dict, {name: value when captured}) of user code
        self.recorded = False  # some op recorded a graph node (a replay must record too)
        self.fn = None  # the function captured (its closure is guarded)


def user_frame() -> str:
    """The innermost frame of the user's code, as "file:line": outside ember's core (ember's command line
    counts as a user) and outside Python's own frozen modules."""
    for fs in reversed(traceback.extract_stack()):
        f = fs.filename
        if (not f.startswith(_EMBER_DIR) or f.startswith(_CLI_DIR)) and not f.startswith("<"):
            return f"{f}:{fs.lineno}"
    return "<ember>"


class Tracer:
    """Records one eager run (see the module docstring). `depth` > 0 while an instruction itself
    runs: what it does inside (an op's own ops, an optimizer's step) is its own business."""

    def __init__(self, fullgraph: bool = False) -> None:
        self.trace = Trace()
        self.fullgraph = fullgraph
        self._depth = 0
        self.thread = threading.get_ident()  # the capturing thread: other threads' ops are not its program
        self.tensor_ids: dict[int, int] = {}
        self.array_ids: dict[int, int] = {}
        self.extern_ids: dict[int, int] = {}
        self.created: set[int] = set()  # ids of tensors made while capturing
        self.made_where: dict[int, str] = {}  # id -> "file:line" for those made outside recorded steps
        self.grads: dict[int, int] = {}  # id(p.grad) -> extern index of p, after a backward
        self.keep: list = []  # what cannot be weakly referenced, kept alive while capturing
        self.codes: dict = {}  # user code objects that ran
        self.user_frames: set[int] = set()  # ids of the live frames running user code
        self._module_ids: set[int] = set()
        self.reads = 0  # reads of a computed tensor's array by the ops' wrappers since the last instruction
        self.reads_nonfloat = 0  # ... of those, of integer and bool tensors (indices, masks)
        self.batch = None  # a dynamic capture: the batch size, whose reads from shapes become SymInts
        self.swapped: list = []  # (tensor, its class) for every tensor `_watch` changed
        self.bases: dict[int, int] = {}  # id of the memory owner of a value's array -> the first such value
        self.extern_bases: dict[int, int] = {}  # ... of an extern's array -> the extern
        self.layout: dict[int, tuple] = {}  # value index -> (size, C-contiguous, address) of its array
        self.refs: list = []  # weak references whose callbacks forget freed objects' ids

    @property
    def depth(self) -> int:
        """> 0 while an instruction runs (what it does inside is its own business); for any other thread
        than the capturing one always 1, so that what other threads do is never recorded here."""
        return self._depth if threading.get_ident() == self.thread else 1

    # ------------------------------------------------------------------ running
    def run(self, fn, args: tuple, kwargs: dict):
        """Run fn(*args, **kwargs) eagerly under capture; the result is eager's."""
        from .._tensor import set_make_hook
        if not _CALLERS:
            _user_callers()
        self.trace.output = None
        prev_profile = sys.getprofile()
        _capture.set_active(self)
        set_make_hook(self._made)
        sys.setprofile(self._profile)
        caller = user_frame()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = fn(*args, **kwargs)
        finally:
            sys.setprofile(prev_profile)
            set_make_hook(None)
            _capture.set_active(None)
            for t, cls in self.swapped:
                t.__class__ = cls
        for w in caught:  # as eager would show them; one that names the compiler's frame names the caller's
            filename, lineno = w.filename, w.lineno
            if filename.startswith(_COMPILER_DIR):
                filename, _, line = caller.rpartition(":")
                lineno = int(line) if line.isdigit() else 0
            warnings.warn_explicit(w.message, w.category, filename, lineno, source=w.source)
        self._scan_side_effects()
        if not self.trace.breaks:
            self.trace.output = self.spec(result)
        return result

    def _made(self, t) -> None:
        self.created.add(id(t))
        if self.depth == 0:  # made outside any recorded step (by an op ember does not capture): remember where
            self.made_where[id(t)] = user_frame()

    def _profile(self, frame, event: str, arg) -> None:
        if event == "call":
            code = frame.f_code
            f = code.co_filename
            if not f.startswith(_EMBER_DIR):
                # user code: not the standard library (<frozen ...> included) or installed packages, and called
                # by user code, a Module call or the capture itself (not by ember's internals: what they call,
                # such as an array library or a stand-in for one, and what that calls, is not the user's)
                back = frame.f_back
                if self.depth == 0 and back is not None and not f.startswith(_LIB_DIRS) and not f.startswith("<") and (
                        id(back) in self.user_frames or back.f_code in _CALLERS):
                    self.user_frames.add(id(frame))
                    self.codes[code] = None
                    g = frame.f_globals  # the globals this code may read: guarded by value or identity
                    seen = self.trace.globals.setdefault(id(g), (g, {}))[1]
                    for name in code.co_names:
                        if name not in seen and name in g:
                            seen[name] = g[name]
            elif code.co_name in ("__call__", "_call"):  # (tested first: f_locals builds a dict)
                m = frame.f_locals.get("self")
                if m is not None and id(m) not in self._module_ids and _is_module(m):
                    self._module_ids.add(id(m))
                    self.trace.modules.append(m)
        elif event == "return":
            self.user_frames.discard(id(frame))
        elif event == "c_call" and arg is builtins.print and self.depth == 0:
            self.graph_break("print() runs Python output", None)

    def _scan_side_effects(self) -> None:
        for code in self.codes:
            for ins in dis.get_instructions(code):
                if ins.opname in _SIDE_EFFECTS:
                    line = ins.positions.lineno if ins.positions is not None else code.co_firstlineno
                    self._break(f"Python side effect ({ins.opname} {ins.argval}) in {code.co_name}",
                                f"{code.co_filename}:{line}")
                    return

    def _append(self, ins: Instr) -> None:
        self.trace.instrs.append(ins)
        self.reads = self.reads_nonfloat = 0

    # ------------------------------------------------------------------ breaks
    def read(self, t, what: str) -> None:
        self.graph_break(f"{what} reads a tensor's value", t)

    def writing(self, t) -> None:
        pass  # (the write's bump_version breaks the graph)

    def settle(self, t) -> None:
        pass  # (a capture runs eagerly: every tensor's place in the graph is already final)

    def graph_break(self, reason: str, t) -> None:
        where = user_frame()
        if t is not None and isinstance(t, Tensor):
            reason = f"{reason} (a tensor of shape {list(t.shape)}, {t.dtype})"
        self._break(reason, where)

    def _break(self, reason: str, where: str) -> None:
        self.trace.breaks.append((reason, where))
        if self.fullgraph:
            raise GraphBreak(f"ember.compile(fullgraph=True): cannot capture the whole function: {reason}, at {where}. "
                             f"Remove the call (or move it out of the compiled function), or compile with "
                             f"fullgraph=False to run that part eagerly.")

    # ------------------------------------------------------------------ values and references
    def _watch(self, t) -> None:
        """Have reads of t's array outside the ops counted (`reads`): t becomes, for the capture, an
        instance of a subclass whose `_data` is a property (restored in `run`)."""
        cls = t.__class__
        w = _watched_class(cls)
        if w is not cls:
            t.__class__ = w
            self.swapped.append((t, cls))

    def new_value(self, obj, is_tensor: bool) -> int:
        if is_tensor:
            self._watch(obj)
        i = len(self.trace.values)
        arr = obj._data if is_tensor else obj
        self.trace.values.append((is_tensor, getattr(arr, "shape", ()), getattr(arr, "dtype", None),
                                  is_tensor and obj._requires_grad, not is_tensor or obj._edge is None))
        table = self.tensor_ids if is_tensor else self.array_ids
        table[id(obj)] = i
        self._forget_when_freed(obj, table)
        if _is_array(arr):
            root = _root_array(arr)
            if id(root) not in self.bases:
                self.bases[id(root)] = i
                self._forget_when_freed(root, self.bases)
            self.layout[i] = (arr.size, arr.flags.c_contiguous, _address(arr))
        return i

    def _forget_when_freed(self, obj, table: dict) -> None:
        """Drop obj's id from `table` once obj is freed (so a new object given the same id is not taken for
        it). The capture keeps nothing alive that eager would free: its peak memory is eager's."""
        try:
            self.refs.append(weakref.ref(obj, lambda _, k=id(obj), t=table: t.pop(k, None)))
        except TypeError:  # an array type without weak references: kept alive instead
            self.keep.append(obj)

    def add_input(self, x) -> int:
        i = self.new_value(x, isinstance(x, Tensor))
        self.trace.inputs.append(i)
        return i

    def ref(self, x, where: str = "an argument"):
        """The reference that stands for `x` at replay (see the module docstring)."""
        if x.__class__ in TENSOR_TYPES or isinstance(x, Tensor):
            i = self.tensor_ids.get(id(x))
            if i is not None:
                return ("v", i)
            k = self.grads.get(id(x))
            if k is not None:  # p.grad read after a captured backward
                return ("v", self._getgrad(x, k))
            if id(x) in self.created:
                self._break(f"{where} is a tensor made outside the ops a capture records (by nonzero or "
                            f"masked_select, whose shape is data-dependent, or by code wrapping an array itself) (a tensor of shape "
                            f"{list(x.shape)}, {x.dtype})", self.made_where.get(id(x)) or user_frame())
                return ("e", self._extern(x))
            return ("e", self._extern(x))
        if _is_array(x):
            i = self.array_ids.get(id(x))
            if i is not None:
                return ("v", i)
            k = self.extern_bases.get(_root(x))
            if k is None and self.reads and _root(x) not in self.bases:
                owner = _owner_tensor(_root_array(x))  # the array of a tensor from outside never passed to an op
                if owner is not None and id(owner) not in self.created:
                    self._extern(owner)
                    k = self.extern_bases.get(_root(x))
            if k is not None:  # an extern's array, or a view of it: read afresh at every replay
                src = _SLOT.__get__(self.trace.externs[k])
                if (x.__class__ is src.__class__ and x.dtype == src.dtype and x.size == src.size and x.flags.c_contiguous
                        and src.flags.c_contiguous and _address(x) == _address(src)):
                    return ("ereshape", k, x.shape)
                self.graph_break(f"{where} is an array viewing a tensor's memory outside the ops", None)
                return ("c", x)
            j = self.bases.get(_root(x))
            if j is not None:  # a view of a value's memory, taken outside the ops
                v = self.trace.values[j]
                size, contiguous, address = self.layout[j]
                if (x.dtype == v[2] and x.size == size and x.flags.c_contiguous
                        and contiguous and _address(x) == address):
                    return ("reshape", j, x.shape)
                self.graph_break(f"{where} is an array viewing a computed tensor's memory", None)
            elif self.reads and (getattr(x, "dtype", None) is None or x.dtype.kind in "iub" or self.reads_nonfloat):
                # an array made outside the op right after its wrapper read a computed tensor's array: it may hold
                # that tensor's values (indices, a mask, an argmax), which a replay would not recompute. (A float
                # array after reads of float tensors only is taken as made from their shapes: a causal mask, a
                # vector of ones; float values are not turned into constant arrays by ember's wrappers.)
                self.graph_break(f"{where} is an array computed outside the op from a tensor's values", None)
            return ("c", x)
        if (x.__class__ is tuple or x.__class__ is list) and x:
            refs = [self.ref(e, where) for e in x]
            if any(r[0] != "c" for r in refs):
                return ("seq", x.__class__, tuple(refs))
        return ("c", x)

    def _extern(self, t) -> int:
        k = self.extern_ids.get(id(t))
        if k is None:
            if t._data.dtype.kind in "iub":  # an index or mask held outside: its reads count too
                self._watch(t)
            a = _SLOT.__get__(t)
            if _is_array(a):
                root = _root_array(a)
                if id(root) not in self.extern_bases:
                    self.extern_bases[id(root)] = len(self.trace.externs)
                    self._forget_when_freed(root, self.extern_bases)
            k = len(self.trace.externs)
            self.trace.externs.append(t)
            self.extern_ids[id(t)] = k
        return k

    def _getgrad(self, g, k: int) -> int:
        self._depth += 1
        try:
            i = self.new_value(g, True)
            self._append(Instr("getgrad", None, (("e", k),), outs=(i,)))
        finally:
            self._depth -= 1
        return i

    def array_ref(self, a, t):
        """The reference for array `a` that an op received for its input `t` (a Tensor or not)."""
        if t is not None and isinstance(t, Tensor):
            if a is t._data:
                return self.ref(t)
            r = self.ref(t)
            if r[0] == "v" and getattr(a, "shape", None) == t._data.shape:
                return ("cast", r[1], a.dtype)
            if r[0] == "e" and getattr(a, "shape", None) == t._data.shape:
                return ("ecast", r[1], a.dtype)
            self.graph_break("an op received an array derived from a tensor outside the op", t)
            return ("c", a)
        return self.ref(a)

    def spec(self, obj):
        """The structure of a result with references at its leaves."""
        if isinstance(obj, Tensor):
            return ("ref", self.ref(obj, "the result"))
        if isinstance(obj, (tuple, list)):
            items = [self.spec(o) for o in obj]
            if hasattr(obj, "_fields"):
                return ("named", type(obj), items)
            return (type(obj).__name__, items)
        if isinstance(obj, dict):
            return ("dict", type(obj), [(k, self.spec(v)) for k, v in obj.items()])
        if isinstance(obj, np.ndarray):
            r = self.ref(obj)
            if r[0] != "v":
                self.graph_break("the result holds a NumPy array computed outside captured ops", None)
            return ("ref", r)
        return ("const", obj)

    # ------------------------------------------------------------------ the seams
    def dispatch(self, node, inputs: tuple, arrays, attrs: dict | None):
        from ..autograd.function import dispatch
        cls = node.__class__
        if cls.__name__ in DATA_DEPENDENT and _has_bool_array(arrays):
            self.graph_break(f"{cls.__name__} with a boolean mask has a data-dependent output shape", None)
        in_refs = tuple(self.ref(a) for a in inputs)
        n = len(inputs)
        arr_refs = tuple(self.array_ref(a, inputs[i] if i < n else None) for i, a in enumerate(arrays))
        attr_refs = None
        if attrs:
            attr_refs = {k: self.ref(v, f"attribute {k!r} of {cls.__name__}") for k, v in attrs.items()}
            if all(r[0] == "c" for r in attr_refs.values()):
                attr_refs = None  # constants: the dict itself is replayed
        self._depth += 1
        try:
            out = dispatch(node, inputs, arrays, attrs)
        finally:
            self._depth -= 1
        outs = tuple(self.new_value(o, True) for o in out) if out.__class__ is tuple else (self.new_value(out, True),)
        if out.__class__ is tuple:
            if any(o._edge is not None for o in out):
                self.trace.recorded = True
        elif out._edge is not None:
            self.trace.recorded = True
        ins = Instr("op", cls, in_refs, arr_refs, dict(attrs) if attrs else None, outs, None)
        ins.attr_refs = attr_refs
        ins.shapes = tuple(self.trace.values[i][1] for i in outs)
        ins.multi = out.__class__ is tuple
        first = out[0] if ins.multi and out else out
        if not ins.multi or out:
            e = first._edge
            if e is not None:
                node = e.node if e.__class__ is Slot else e
                ins.needs = tuple(x is not None for x in node.next)
                ins.meta = getattr(node, "meta", None)
                ins.n_out = node.n_out
        self._append(ins)
        return out

    def host(self, fn, args: tuple, kwargs: dict):
        refs = tuple(self.ref(a) for a in args)
        krefs = {k: self.ref(v) for k, v in kwargs.items()}
        self._depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self._depth -= 1
        is_t = isinstance(out, Tensor)
        if not is_t and not isinstance(out, np.ndarray) and not hasattr(out, "__cuda_array_interface__"):
            self.graph_break(f"{fn.__qualname__} returned a {type(out).__name__}", None)
            return out
        i = self.new_value(out, is_t)
        if is_t and out._requires_grad:
            self.trace.recorded = True
        self._append(Instr("host", fn, refs, (), krefs, (i,)))
        return out

    def opaque(self, fn, args: tuple, kwargs: dict):
        for a in list(args[1:]) + list(kwargs.values()):
            if callable(a) or isinstance(a, Tensor):
                self.graph_break(f"{fn.__qualname__} called with a {type(a).__name__} argument", None)
        self._depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self._depth -= 1
        self._append(Instr("call", fn, args, (), kwargs, ()))
        return out

    def commit(self, real, t, result, op: str):
        target, value = self.ref(t, f"the target of {op}"), self.ref(result, f"the value of {op}")
        self._depth += 1
        try:
            out = real(t, result, op)
        finally:
            self._depth -= 1
        self._append(Instr("commit", real, (target, value), (), {"op": op}, ()))
        if result._requires_grad:
            self.trace.recorded = True
        return out

    def view(self, out, of) -> None:
        """`as_view(out, of)` ran: a replay in graph form marks the view again (version counter, graph)."""
        from ..ops.inplace import as_view
        self._append(Instr("view", as_view, (self.ref(out), self.ref(of)), (), None, ()))

    def detach(self, t, out):
        r = self.ref(t)
        i = self.new_value(out, True)
        self._append(Instr("detach", None, (r,), (), None, (i,)))
        return out

    def backward(self, real, tensors, grad_tensors, retain_graph, create_graph, inputs):
        if create_graph:
            self.graph_break("backward(create_graph=True)", None)
        if MODE.anomaly:
            self.graph_break("backward under detect_anomaly", None)
        roots = tuple(self.ref(t, "a backward root") for t in tensors)
        grefs = None if grad_tensors is None else tuple(self.ref(g, "a backward gradient") for g in grad_tensors)
        irefs = None if inputs is None else tuple(self.ref(t, "a backward input") for t in inputs)
        self._depth += 1
        try:
            real(tensors, grad_tensors, retain_graph, create_graph, inputs)
        finally:
            self._depth -= 1
        self._append(Instr("backward", real, roots, grefs, {"retain_graph": retain_graph, "inputs": irefs}, ()))
        # the leaves' .grad are read afresh after a replayed backward
        self.grads = {}
        for k, e in enumerate(self.trace.externs):
            if e._grad is not None:
                self.grads[id(e._grad)] = k
                self.keep.append(e._grad)


DATA_DEPENDENT = {"GetItem"}  # ops whose output shape depends on the values of a boolean mask among their arrays


def _has_bool_array(x, depth: int = 0) -> bool:
    if getattr(x, "dtype", None) is not None and getattr(x, "ndim", 0) > 0:
        return x.dtype.kind == "b"
    if isinstance(x, (tuple, list)) and depth < 4:
        return any(_has_bool_array(e, depth + 1) for e in x)
    return False

_SLOT = Tensor.__dict__["_data"]  # the slot's descriptor
_BASE_SHAPE = Tensor.shape.fget
_WATCHED: dict[type, type] = {}


def _capturing():
    """The Tracer at the seam, if a capture (not ember.lazy) is running."""
    tr = _capture.ACTIVE
    return tr if tr.__class__ is Tracer else None


def _get_data(self):
    v = _SLOT.__get__(self)
    tr = _capturing()
    if tr is not None and tr.depth == 0 and sys._getframe(1).f_code.co_filename != __file__:
        tr.reads += 1  # (the tracer's own reads are bookkeeping)
        if not dt.is_float(v.dtype):
            tr.reads_nonfloat += 1
    return v


class SymInt(int):
    """A size read from the batch dimension during a dynamic capture, and what Python computes from it: a
    constant of the trace that is a SymInt (or holds one) ties the program to this batch size."""

    def _wrap(op):
        def f(self, *other):
            r = op(int(self), *other)
            return SymInt(r) if r.__class__ is int else r
        return f

    for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
                  "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__pos__", "__abs__", "__pow__", "__rpow__",
                  "__truediv__", "__rtruediv__"):
        locals()[_name] = _wrap(getattr(int, _name))
    del _name, _wrap


def _sym_size(s, b):
    return Size([SymInt(d) if d == b else d for d in s])


def _shape(self):
    s = _BASE_SHAPE(self)
    tr = _capturing()
    return _sym_size(s, tr.batch) if tr is not None and tr.batch and tr.depth == 0 else s


def _size(self, dim=None):
    r = Tensor.size(self, dim)
    tr = _capturing()
    if tr is None or not tr.batch or tr.depth != 0:
        return r
    if isinstance(r, tuple):
        return _sym_size(r, tr.batch)
    return SymInt(r) if r == tr.batch else r


def _watched_class(cls: type) -> type:
    """The capture-time subclass of `cls` whose `_data` reads are counted (see `Tracer._watch`)."""
    if cls in _WATCHED.values():
        return cls
    w = _WATCHED.get(cls)
    if w is None:
        w = type(cls.__name__, (cls,), {"__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                        "_data": property(_get_data, _SLOT.__set__),
                                        "shape": property(_shape), "size": _size, "_watched_of": cls})
        TENSOR_TYPES.add(w)
        _WATCHED[cls] = w
    return w


def _is_array(a) -> bool:
    """A NumPy array or a device (CuPy) array."""
    return isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__")


def _address(a) -> int:
    """Where an array's data starts (host or device memory)."""
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def _owner_tensor(root):
    """The tensor whose array is `root`, if one holds it (found through the garbage collector's referrers:
    slow, and only asked when an op receives an array it cannot otherwise place)."""
    import gc
    for obj in gc.get_referrers(root):
        if isinstance(obj, Tensor) and _SLOT.__get__(obj) is root:
            return obj
    return None


def _root_array(a):
    """The array that owns a's memory."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def _root(a) -> int:
    return id(_root_array(a))


def _user_callers() -> None:
    """Fill `_CALLERS`: a function the capture itself calls, or a module's forward (or hook) that a
    Module call runs, is user code; what ember's other code calls is not."""
    from ..nn.modules.module import Module
    _CALLERS.update({Tracer.run.__code__, Module.__call__.__code__, Module._call.__code__,
                     Module._call_with_hooks.__code__})


def _is_module(m) -> bool:
    from ..nn.modules.module import Module
    return isinstance(m, Module)
