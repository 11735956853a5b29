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
import traceback

import numpy as np

from .. import _capture
from .._tensor import TENSOR_TYPES, Slot, Tensor
from ..autograd.grad_mode import MODE

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CALLERS = (os.path.join(_EMBER_DIR, "nn", "modules", "module.py"), os.path.abspath(__file__),
            os.path.join(_EMBER_DIR, "compiler", "api.py"))
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
                 "n_out")

    def __init__(self, kind: str, fn, inputs=(), arrays=(), attrs=None, outs=(), where=None) -> None:
        self.kind, self.fn, self.inputs, self.arrays, self.attrs = kind, fn, inputs, arrays, attrs
        self.outs, self.where = outs, where
        self.grad = MODE.grad  # the grad mode it ran under: a replay restores it
        self.shapes = ()
        self.multi = False  # an op whose forward returned a tuple (even of one)
        self.needs = None  # a recorded op: whether each input needed a gradient (its node's edges), ...
        self.meta = None  # ... its node's `meta` (the inputs whose gradient is reduced), and its node's n_out
        self.n_out = 1

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
        self.recorded = False  # some op recorded a graph node (a replay must record too)


def user_frame() -> str:
    """The innermost frame outside ember, as "file:line" (where the user's code did it)."""
    for fs in reversed(traceback.extract_stack()):
        if not fs.filename.startswith(_EMBER_DIR):
            return f"{fs.filename}:{fs.lineno}"
    return "<ember>"


class Tracer:
    """Records one eager run (see the module docstring). `depth` > 0 while an instruction itself
    runs: what it does inside (an op's own ops, an optimizer's step) is its own business."""

    def __init__(self, fullgraph: bool = False) -> None:
        self.trace = Trace()
        self.fullgraph = fullgraph
        self.depth = 0
        self.tensor_ids: dict[int, int] = {}
        self.array_ids: dict[int, int] = {}
        self.extern_ids: dict[int, int] = {}
        self.created: set[int] = set()  # ids of tensors made while capturing
        self.grads: dict[int, int] = {}  # id(p.grad) -> extern index of p, after a backward
        self.keep: list = []  # everything whose id is a key above stays alive while capturing
        self.codes: dict = {}  # user code objects that ran
        self.user_frames: set[int] = set()  # ids of the live frames running user code
        self._module_ids: set[int] = set()
        self.bases: dict[int, int] = {}  # id of the memory owner of a value's array -> the first such value
        self.keep_values: dict[int, object] = {}  # value index -> its array at capture

    # ------------------------------------------------------------------ running
    def run(self, fn, args: tuple, kwargs: dict):
        """Run fn(*args, **kwargs) eagerly under capture; the result is eager's."""
        from .._tensor import set_make_hook
        self.trace.output = None
        prev_profile = sys.getprofile()
        _capture.set_active(self)
        set_make_hook(self._made)
        sys.setprofile(self._profile)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.setprofile(prev_profile)
            set_make_hook(None)
            _capture.set_active(None)
        self._scan_side_effects()
        if not self.trace.breaks:
            self.trace.output = self.spec(result)
        return result

    def _made(self, t) -> None:
        self.created.add(id(t))
        self.keep.append(t)

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
                        id(back) in self.user_frames or back.f_code.co_filename in _CALLERS):
                    self.user_frames.add(id(frame))
                    self.codes[code] = None
            else:
                m = frame.f_locals.get("self")
                if m is not None and id(m) not in self._module_ids and _is_module(m) and code.co_name == "__call__":
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

    # ------------------------------------------------------------------ breaks
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
    def new_value(self, obj, is_tensor: bool) -> int:
        i = len(self.trace.values)
        arr = obj._data if is_tensor else obj
        self.trace.values.append((is_tensor, getattr(arr, "shape", ()), getattr(arr, "dtype", None),
                                  is_tensor and obj._requires_grad, not is_tensor or obj._edge is None))
        (self.tensor_ids if is_tensor else self.array_ids)[id(obj)] = i
        if isinstance(arr, np.ndarray):
            self.bases.setdefault(_root(arr), i)
        self.keep_values[i] = arr
        self.keep.append(obj)
        return i

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
                self.graph_break(f"{where} is a tensor made outside a captured op (by an op ember does not capture "
                                 f"yet, such as argmax, nonzero or an integer conversion)", x)
                return ("e", self._extern(x))
            return ("e", self._extern(x))
        if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__"):
            i = self.array_ids.get(id(x))
            if i is not None:
                return ("v", i)
            j = self.bases.get(_root(x))
            if j is not None:  # a view of a value's memory, taken outside the ops
                v = self.trace.values[j]
                src = self.keep_values[j]
                if (isinstance(x, np.ndarray) and x.dtype == v[2] and x.size == src.size and x.flags.c_contiguous
                        and src.flags.c_contiguous and x.ctypes.data == src.ctypes.data):
                    return ("reshape", j, x.shape)
                self.graph_break(f"{where} is an array viewing a computed tensor's memory", None)
            return ("c", x)
        if isinstance(x, (tuple, list)) and any(isinstance(e, Tensor) for e in x):
            self.graph_break(f"{where} holds tensors in a {type(x).__name__}", None)
        return ("c", x)

    def _extern(self, t) -> int:
        k = self.extern_ids.get(id(t))
        if k is None:
            k = len(self.trace.externs)
            self.trace.externs.append(t)
            self.extern_ids[id(t)] = k
        return k

    def _getgrad(self, g, k: int) -> int:
        self.depth += 1
        try:
            i = self.new_value(g, True)
            self.trace.instrs.append(Instr("getgrad", None, (("e", k),), outs=(i,)))
        finally:
            self.depth -= 1
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
        if cls.__name__ in DATA_DEPENDENT:
            self.graph_break(f"{cls.__name__} has a data-dependent output shape", None)
        in_refs = tuple(self.ref(a) for a in inputs)
        n = len(inputs)
        arr_refs = tuple(self.array_ref(a, inputs[i] if i < n else None) for i, a in enumerate(arrays))
        if attrs:
            for k, v in attrs.items():
                if isinstance(v, Tensor) and id(v) in self.tensor_ids:
                    self.graph_break(f"{cls.__name__} takes a computed tensor as attribute {k!r}", v)
        self.depth += 1
        try:
            out = dispatch(node, inputs, arrays, attrs)
        finally:
            self.depth -= 1
        outs = tuple(self.new_value(o, True) for o in out) if out.__class__ is tuple else (self.new_value(out, True),)
        if out.__class__ is tuple:
            if any(o._edge is not None for o in out):
                self.trace.recorded = True
        elif out._edge is not None:
            self.trace.recorded = True
        ins = Instr("op", cls, in_refs, arr_refs, dict(attrs) if attrs else None, outs, None)
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
        self.trace.instrs.append(ins)
        return out

    def host(self, fn, args: tuple, kwargs: dict):
        refs = tuple(self.ref(a) for a in args)
        krefs = {k: self.ref(v) for k, v in kwargs.items()}
        self.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        is_t = isinstance(out, Tensor)
        if not is_t and not isinstance(out, np.ndarray) and not hasattr(out, "__cuda_array_interface__"):
            self.graph_break(f"{fn.__qualname__} returned a {type(out).__name__}", None)
            return out
        i = self.new_value(out, is_t)
        if is_t and out._requires_grad:
            self.trace.recorded = True
        self.trace.instrs.append(Instr("host", fn, refs, (), krefs, (i,)))
        return out

    def opaque(self, fn, args: tuple, kwargs: dict):
        for a in list(args[1:]) + list(kwargs.values()):
            if callable(a) or isinstance(a, Tensor):
                self.graph_break(f"{fn.__qualname__} called with a {type(a).__name__} argument", None)
        self.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        self.trace.instrs.append(Instr("call", fn, args, (), kwargs, ()))
        return out

    def commit(self, real, t, result, op: str):
        target, value = self.ref(t, f"the target of {op}"), self.ref(result, f"the value of {op}")
        self.depth += 1
        try:
            out = real(t, result, op)
        finally:
            self.depth -= 1
        self.trace.instrs.append(Instr("commit", real, (target, value), (), {"op": op}, ()))
        if result._requires_grad:
            self.trace.recorded = True
        return out

    def detach(self, t, out):
        r = self.ref(t)
        i = self.new_value(out, True)
        self.trace.instrs.append(Instr("detach", None, (r,), (), None, (i,)))
        return out

    def backward(self, real, tensors, grad_tensors, retain_graph, create_graph, inputs):
        if create_graph:
            self.graph_break("backward(create_graph=True)", None)
        if MODE.anomaly:
            self.graph_break("backward under detect_anomaly", None)
        roots = tuple(self.ref(t, "a backward root") for t in tensors)
        grefs = None if grad_tensors is None else tuple(self.ref(g, "a backward gradient") for g in grad_tensors)
        irefs = None if inputs is None else tuple(self.ref(t, "a backward input") for t in inputs)
        self.depth += 1
        try:
            real(tensors, grad_tensors, retain_graph, create_graph, inputs)
        finally:
            self.depth -= 1
        self.trace.instrs.append(Instr("backward", real, roots, grefs, {"retain_graph": retain_graph, "inputs": irefs}, ()))
        # the leaves' .grad are read afresh after a replayed backward
        self.grads = {}
        for k, e in enumerate(self.trace.externs):
            if e._grad is not None:
                self.grads[id(e._grad)] = k
                self.keep.append(e._grad)


DATA_DEPENDENT = {"MaskedSelect", "Nonzero", "Unique", "BoolIndex"}


def _root(a) -> int:
    while getattr(a, "base", None) is not None:
        a = a.base
    return id(a)


def _is_module(m) -> bool:
    from ..nn.modules.module import Module
    return isinstance(m, Module)
