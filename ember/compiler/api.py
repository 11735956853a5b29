"""`ember.compile`: guarded caches of captured programs around a function or a module.

A compiled callable looks up, at every call, a program captured for calls like this one:

- the **key** (checked by one dict lookup): the structure of the arguments; each tensor's shape
  (the batch dimension as `*` once `dynamic`), dtype, device, `requires_grad` and whether it is
  contiguous; each NumPy array's likewise; every other argument by value (or identity when it is
  not hashable); grad mode, anomaly mode and the default dtype;
- the **checks** of the entry found: the `training` flag of every module whose forward ran during
  capture, and for every tensor the program reads from outside its arguments (parameters,
  buffers, globals: the *externs*) its identity in its module, its shape, dtype, device and
  `requires_grad`.

No entry: the call captures (`trace.Tracer`: an eager run that records), and its program
(`program.Program`) serves later calls. A capture that found a graph break caches "eager" for
that key. After `cache_size_limit` (8, PyTorch's default) entries a function warns once, naming
the guard that keeps failing, and runs eagerly for new keys.
"""
from __future__ import annotations

import warnings
import weakref

import numpy as np

from .. import _capture
from ..nn.modules import _fusion
from .._tensor import Tensor
from ..autograd.grad_mode import MODE
from .program import Program
from .trace import GraphBreak, SymInt, Tracer

CACHE_SIZE_LIMIT = 8
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BACKENDS = ("ember", "inductor", "eager", "aot_eager")
OPTIONS = ()  # none yet: an unknown option is an error, never ignored
_ALL: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


def is_compiling() -> bool:
    """True while a compiled function is being captured (PyTorch: torch.compiler.is_compiling)."""
    return isinstance(_capture.ACTIVE, Tracer)


def reset() -> None:
    """Forget every captured program of every compiled function (torch.compiler.reset)."""
    for f in list(_ALL):
        f.clear()


class _Entry:
    __slots__ = ("program", "modules", "externs", "breaks", "trace", "holds")

    def __init__(self, trace, program: Program | None) -> None:
        self.trace, self.program = trace, program
        self.breaks = trace.breaks
        self.modules = [(m, m.training) for m in trace.modules]
        self.externs = [(e, _owner(e, trace.modules), e._data.shape, e._data.dtype, e._data.__class__,
                         e._requires_grad, e._hooks is None) for e in trace.externs]
        # an entry that broke runs the function eagerly for its key, whatever else changes (its Python state,
        # a counter the break was about, changes at every call by design)
        self.holds = self._generate() if program is not None else _always

    def _python_values(self):
        """(where, container, key, value) of each Python value the captured code depended on: the globals its
        user code names, the function's closure cells, and the attributes and children of its modules."""
        out = []
        for g, names in self.trace.globals.values():
            for name, v in names.items():
                out.append((f"global {name!r}", g, name, v))
        fn = self.trace.fn
        fn = getattr(fn, "__func__", fn)
        for name, cell in zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
            try:
                out.append((f"closure variable {name!r}", cell, None, cell.cell_contents))
            except ValueError:  # an empty cell
                pass
        for m in self.trace.modules:
            d = m.__dict__
            for k, v in d.items():
                if not k.startswith("_") and k != "training":
                    out.append((f"{type(m).__name__}.{k}", d, k, v))
            for k, v in d["_modules"].items():
                out.append((f"{type(m).__name__}.{k} (a submodule)", d["_modules"], k, v))
        return out

    def _generate(self):
        """`failed_check`'s test as one generated boolean expression (a call checks it before every replay)."""
        ns: dict = {}
        terms = []
        for k, (_, box, key, v) in enumerate(self._python_values()):
            ns[f"b{k}"], ns[f"v{k}"] = box, v
            get = f"b{k}.cell_contents" if key is None else f"b{k}.get({key!r}, _missing)"
            # simple values by value (a hyperparameter set to an equal number keeps the program), others by identity
            terms.append(f"({get} is v{k} or {get} == v{k})" if _simple(v) else f"{get} is v{k}")
        ns["_missing"] = _MISSING
        for k, (m, flag) in enumerate(self.modules):
            ns[f"m{k}"] = m
            terms.append(f"m{k}.training is {flag}")
        for k, (e, owner, shape, dtype, cls, rg, nohooks) in enumerate(self.externs):
            ns[f"e{k}"], ns[f"s{k}"], ns[f"d{k}"], ns[f"c{k}"] = e, shape, dtype, cls
            terms.append(f"e{k}._data.shape == s{k} and e{k}._data.dtype == d{k} and e{k}._data.__class__ is c{k} "
                         f"and e{k}._requires_grad is {rg} and (e{k}._hooks is None) is {nohooks}")
            if owner is not None:
                ns[f"t{k}"], ns[f"n{k}"] = owner[0].__dict__[owner[1]], owner[2]
                terms.append(f"t{k}.get(n{k}) is e{k}")
        src = "def holds():\n    return " + (" and ".join(terms) or "True") + "\n"
        exec(compile(src, "<ember.compile guards>", "exec"), ns)
        return ns["holds"]

    def failed_check(self) -> str | None:
        """The first check that fails now, in words; None when the entry applies."""
        if self.holds():
            return None
        for where, box, key, v in self._python_values():
            now = box.cell_contents if key is None else box.get(key, _MISSING)
            if not (now is v or (_simple(v) and now == v)):
                return f"{where} changed from {v!r} to {now!r}"
        for m, flag in self.modules:
            if m.training is not flag:
                return f"{type(m).__name__}.training changed to {m.training}"
        for e, owner, shape, dtype, cls, rg, nohooks in self.externs:
            d = e._data
            if d.shape != shape or d.dtype != dtype or d.__class__ is not cls or e._requires_grad is not rg:
                return f"a parameter/buffer of shape {list(shape)} changed to {list(d.shape)}, {e.dtype}"
            if (e._hooks is None) is not nohooks:
                return f"hooks were {'added to' if nohooks else 'removed from'} a tensor of shape {list(shape)}"
            if owner is not None:
                mod, table, name = owner
                if mod.__dict__[table].get(name) is not e:
                    return f"{type(mod).__name__}.{name} was replaced by another tensor"
        return "a guard changed"


_MISSING = object()


def _always() -> bool:
    return True


def _simple(v) -> bool:
    """A value guarded by equality: a number, a string, None, or a tuple of them."""
    if v is None or isinstance(v, (bool, int, float, complex, str)):
        return True
    return isinstance(v, tuple) and all(_simple(x) for x in v)


def _owner(e, modules):
    """(module, "_parameters" or "_buffers", name) that holds extern e, if a captured module does."""
    for m in modules:
        for table in ("_parameters", "_buffers"):
            for name, t in m.__dict__[table].items():
                if t is e:
                    return (m, table, name)
    return None


class CompiledFunction:
    """A function with a guarded cache of captured programs (what `ember.compile(fn)` returns)."""

    def __init__(self, fn, *, fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
                 options: dict | None = None, backend: str = "ember") -> None:
        self.fn = fn
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode or "default"
        # "max-autotune": also the optimizers' fused numba updates in replays (backend/cpu_kernels.py): faster
        # steps for a one-time 0.5-0.9 s and ~120 MiB (numba's LLVM) per process, which the other modes do not pay
        self.kernels = self.mode in ("max-autotune", "max-autotune-no-cudagraphs")
        self.options = dict(options or {})
        self.backend = backend
        self.cache: dict = {}
        self.count = 0
        self.warned = False
        self.last_key = None
        self.generic: set = set()  # keys (batch as *) whose program is valid for any batch size
        self.batches: dict = {}  # signature with the batch dim as * -> first batch size seen
        self.stats = {"captures": 0, "replays": 0, "eager": 0}
        self.module = None  # the Module whose call this is: a graph break compiles its children instead
        self._children_done = False
        self._kw = dict(fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options, backend=backend)
        _ALL.add(self)
        try:
            self.__wrapped__ = fn
            self.__name__ = getattr(fn, "__name__", type(fn).__name__)
            self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
            self.__doc__ = getattr(fn, "__doc__", None)
        except AttributeError:
            pass

    def __reduce__(self):
        # a copy (deepcopy of a model, pickling) starts with no programs: they hold the original's tensors
        return (_rebuild, (self.fn, self._kw, self.module))

    def clear(self) -> None:
        self.cache.clear()
        self.count = 0
        self.warned = False
        self.generic.clear()
        self.batches.clear()

    # ------------------------------------------------------------------ the call
    def __call__(self, *args, **kwargs):
        if _capture.ACTIVE is not None:
            if getattr(_capture.ACTIVE, "lazy", False) and _capture.ACTIVE.depth == 0:  # ember.lazy(): pending work first
                return _capture.ACTIVE.outside(self.__call__, args, kwargs)
            return self.fn(*args, **kwargs)  # inside another capture: be part of that one
        if MODE.fw or MODE.vmap or MODE.autocast is not None:
            # forward-mode AD, vmap and autocast act in `dispatch`, which a replay does not pass through: run eagerly
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        leaves: list = []
        sig = _signature((args, kwargs), leaves)
        env = (MODE.grad, MODE.anomaly, _default_dtype(), _fusion.ENABLED)
        star = _starred(sig) if self.dynamic is not False else None
        key = (sig, env)
        entries = self.cache.get(key)
        if entries is None and star is not None and (star, env) in self.generic:
            entries = self.cache.get((star, env))
        if entries is not None:
            for entry in entries:
                if entry.holds():
                    if entry.program is None:
                        self.stats["eager"] += 1
                        self._compile_children()
                        return self.fn(*args, **kwargs)
                    self.stats["replays"] += 1
                    return entry.program.run(leaves)
        return self._capture(key, star, env, leaves, args, kwargs, entries)

    def _capture(self, key, star, env, leaves, args, kwargs, entries):
        from . import api
        limit = api.CACHE_SIZE_LIMIT  # (torch._dynamo.config.cache_size_limit may change it)
        if self.count >= limit:
            if not self.warned:
                self.warned = True
                warnings.warn(f"ember.compile: {self.__qualname__} reached the cache size limit ({limit} "
                              f"captured programs); it runs eagerly for new calls. The guard that keeps failing: "
                              f"{self._why(key, entries)}. Mark the batch dimension dynamic (dynamic=True) or keep "
                              f"the failing property fixed.", UserWarning, stacklevel=3)
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        why = self._why(key, entries) if self.count else None
        tracer = Tracer(self.fullgraph)
        if star is not None:
            tracer.batch = _batch(key[0])
        for x in leaves:
            tracer.add_input(x)
        result = tracer.run(self.fn, args, kwargs)  # (a call that raises counts nothing)
        self.count += 1
        self.stats["captures"] += 1
        trace = tracer.trace
        trace.fn = self.fn
        if self.module is not None and all(m is not self.module for m in trace.modules):
            trace.modules.append(self.module)  # its own training flag is a guard too
        trace.why = why
        program = None if trace.breaks else Program(trace, kernels=self.kernels)
        entry = _Entry(trace, program)
        # dynamic: a program with no constant tied to the batch size serves every batch size
        if star is not None and program is not None:
            first = self.batches.setdefault(star, _batch(key[0]))
            if (self.dynamic or first != _batch(key[0])) and not _batch_baked(trace, _batch(key[0])):
                self.generic.add((star, env))
                self.cache.setdefault((star, env), []).append(entry)
        self.cache.setdefault(key, []).append(entry)
        self.last_key = key
        if program is None:
            self._compile_children()
        return result

    def _compile_children(self) -> None:
        """A module whose call broke runs eagerly, its child modules compiled: what can be captured is.
        (Each child compiles in place, as with Module.compile(); a child that breaks does the same.)"""
        m = self.module
        if m is None or self._children_done:
            return
        self._children_done = True
        for child in m.children():
            if child.__dict__.get("_compiled_call") is None and _worth_compiling(child):
                child.compile(**self._kw)

    def _why(self, key, entries) -> str:
        if entries:
            for e in entries:
                f = e.failed_check()
                if f:
                    return f
        last = self.last_key
        if last is None:
            return "none (first call)"
        if key[1] != last[1]:
            names = ("grad mode", "anomaly mode", "default dtype", "Conv-ReLU-Pool fusion (_fusion.ENABLED)")
            for n, a, b in zip(names, key[1], last[1]):
                if a != b:
                    return f"{n} changed from {b} to {a}"
        return _diff(key[0], last[0]) or "the arguments changed"

    def explain(self, *args, **kwargs) -> "ExplainOutput":
        return explain(self.fn, *args, **kwargs)


def _rebuild(fn, kw: dict, module) -> CompiledFunction:
    c = CompiledFunction(fn, **kw)
    c.module = module
    return c


def _worth_compiling(m) -> bool:
    """Containers and leaf layers alike: anything with parameters or children."""
    return bool(m._modules) or bool(m._parameters)


def _default_dtype():
    from .._dtype import get_default_dtype
    return get_default_dtype()


def _signature(obj, leaves: list):
    """The hashable structure of the arguments; tensors and arrays are appended to `leaves`."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        d = obj._data
        return ("T", d.shape, d.dtype.str, d.__class__, obj._requires_grad, obj._edge is None,
                bool(d.flags.c_contiguous) if hasattr(d, "flags") else True)
    cls = obj.__class__
    if cls is tuple or cls is list:
        return (cls.__name__,) + tuple(_signature(o, leaves) for o in obj)
    if cls is dict:
        return ("dict",) + tuple((k, _signature(v, leaves)) for k, v in obj.items())
    if isinstance(obj, np.ndarray):
        leaves.append(obj)
        return ("A", obj.shape, obj.dtype.str, bool(obj.flags.c_contiguous))
    if isinstance(obj, (tuple, list)):  # named tuples and other sequences
        return (cls,) + tuple(_signature(o, leaves) for o in obj)
    try:
        hash(obj)
        return ("c", cls, obj)
    except TypeError:
        return ("id", id(obj))


def _starred(sig):
    """The signature with every tensor's and array's first dimension replaced by '*'."""
    if not isinstance(sig, tuple) or not sig:
        return sig
    if sig[0] in ("T", "A") and isinstance(sig[1], tuple):
        shape = sig[1]
        return (sig[0], ("*",) + shape[1:] if shape else shape) + sig[2:]
    if sig[0] == "c":
        return sig
    return tuple(_starred(s) for s in sig)


def _batch(sig):
    """The first dimension of the first tensor or array argument (the batch size), or None."""
    if isinstance(sig, tuple) and sig:
        if sig[0] in ("T", "A") and isinstance(sig[1], tuple):
            return sig[1][0] if sig[1] else None
        if sig[0] == "c":
            return None
        for s in sig:
            b = _batch(s)
            if b is not None:
                return b
    return None


def _batch_baked(trace, b) -> bool:
    """Whether a constant of the trace may derive from the batch size b (a multiple of it, 1/b, or an
    array with a dimension of b): then the program is only valid for this batch size."""
    if not b or b < 2:
        return True
    def bad(x, depth=0) -> bool:
        if isinstance(x, bool) or x is None:
            return False
        if isinstance(x, SymInt):
            return True
        if isinstance(x, (int, np.integer)):
            return x != 0 and x % b == 0
        if isinstance(x, (float, np.floating)):
            return x != 0 and (abs(x - round(x)) < 1e-9 and round(x) % b == 0 or abs(x * b - 1) < 1e-6)
        if isinstance(x, np.ndarray):
            return b in x.shape
        if isinstance(x, (tuple, list)) and depth < 4:
            return any(bad(e, depth + 1) for e in x)
        if isinstance(x, dict) and depth < 4:
            return any(bad(e, depth + 1) for e in x.values())
        if isinstance(x, slice):
            return any(bad(e, depth + 1) for e in (x.start, x.stop, x.step))
        return False
    def consts(r):  # the constants inside a reference
        if isinstance(r, tuple) and r:
            if r[0] == "c":
                yield r[1]
            elif r[0] == "seq":
                for e in r[2]:
                    yield from consts(e)
            elif r[0] in ("reshape", "cast", "ecast"):
                yield r[2]
    for ins in trace.instrs:
        refs = list(ins.inputs or ()) + list(ins.arrays or ())
        if ins.kind == "host" and ins.attrs:
            refs += list(ins.attrs.values())
        if ins.attr_refs:
            refs += list(ins.attr_refs.values())
        for r in refs:
            if ins.kind == "call":
                r = ("c", r)  # an opaque call's arguments are plain values
            for c in consts(r):
                if bad(c):
                    return True
        if ins.kind == "op" and ins.attrs and not ins.attr_refs and bad(ins.attrs):
            return True
    return False


def _diff(a, b, path: str = "arguments") -> str | None:
    """The first difference between two signatures, in words."""
    if a == b:
        return None
    if isinstance(a, tuple) and isinstance(b, tuple) and a and b and a[0] == b[0]:
        if a[0] == "T":
            names = ("shape", "dtype", "device", "requires_grad", "is_leaf", "contiguity")
            for n, x, y in zip(names, a[1:], b[1:]):
                if x != y:
                    return f"{path}: tensor {n} changed from {y} to {x}"
        if a[0] == "A":
            return f"{path}: array changed from {b[1:]} to {a[1:]}"
        if a[0] == "c":
            return f"{path}: value changed from {b[2]!r} to {a[2]!r}"
        if len(a) == len(b):
            for i, (x, y) in enumerate(zip(a[1:], b[1:])):
                d = _diff(x, y, f"{path}[{i}]")
                if d:
                    return d
    return f"{path} changed structure"


# ---------------------------------------------------------------------- explain
class ExplainOutput:
    """What `explain` found (PyTorch: torch._dynamo.explain's ExplainOutput)."""

    def __init__(self, trace) -> None:
        self.trace = trace
        self.break_reasons = [f"{r} at {w}" for r, w in trace.breaks]
        self.graph_break_count = len(trace.breaks)
        self.graph_count = 0 if trace.breaks else 1
        ops = [i for i in trace.instrs]
        self.ops_per_graph = [[i.name() for i in ops]] if self.graph_count else []
        self.op_count = len(ops) if self.graph_count else 0
        self.program = Program(trace) if self.graph_count else None

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  {i + 1}. {r}" for i, r in enumerate(self.break_reasons)]
        if self.ops_per_graph:
            lines.append("Ops per Graph:")
            for g in self.ops_per_graph:
                lines += [f"  {op}" for op in g]
        return "\n".join(lines)

    __repr__ = __str__

    def to_dot(self, optimised: bool = True) -> str:
        """The captured graph as Graphviz DOT source: instructions are boxes (in program order), the function's
        tensor inputs and the externs it reads (parameters, buffers) ellipses, the result a green ellipse.
        `optimised=False` draws it as recorded; True, as replayed (after dead-code elimination), so the two
        pictures show what the optimiser removed. (ember.viz draws the autograd graph of a tensor instead.)"""
        if self.program is None:
            raise RuntimeError(f"explain(): nothing to draw, the capture broke ({'; '.join(self.break_reasons)})")
        return program_dot(self.trace, self.program.instrs if optimised else self.trace.instrs)

    def render(self, path, optimised: bool = True, format: str | None = None) -> str:
        """`to_dot` drawn by Graphviz's `dot` into `path` (PNG, SVG or PDF, from the extension or `format`)."""
        import os
        from .. import viz
        path = os.fspath(path)
        fmt = (format or os.path.splitext(path)[1].lstrip(".")).lower()
        if fmt not in viz._FORMATS:
            raise ValueError(f"render(): cannot tell the image format from {path!r}: use one of "
                             f"{', '.join(viz._FORMATS)}")
        return viz.render_source(self.to_dot(optimised), path, fmt)


_VALUE_REFS, _EXTERN_REFS = ("v", "cast", "reshape"), ("e", "ecast", "ereshape")


def _refs(x, depth: int = 0):
    """("v", i) and ("e", k) for the value and extern references inside an instruction's arguments."""
    if isinstance(x, tuple) and len(x) >= 2 and x[0] in _VALUE_REFS + _EXTERN_REFS and isinstance(x[1], int):
        yield ("e" if x[0] in _EXTERN_REFS else "v"), x[1]
    elif isinstance(x, (tuple, list)) and depth < 4:
        for e in x:
            yield from _refs(e, depth + 1)
    elif isinstance(x, dict) and depth < 4:
        for e in x.values():
            yield from _refs(e, depth + 1)


def program_dot(trace, instrs) -> str:
    """DOT source of the instructions `instrs` of `trace` (see ExplainOutput.to_dot)."""
    from ..viz import _LEAF_STYLE, _OP_STYLE, _OUT_STYLE, _quote
    from .program import _spec_refs
    lines = ["digraph program {", "  graph [rankdir=TB];", '  node [fontname="Helvetica", fontsize=11];']
    made = {}  # value index -> the DOT node that made it
    for k, i in enumerate(trace.inputs):
        v = trace.values[i]
        label = f"input {k}" + (f"\n{tuple(v[1])}" if v[0] else "")
        lines.append(f"  in{k} [label={_quote(label)}, {_LEAF_STYLE}];")
        made[i] = f"in{k}"
    externs = set()
    for n, ins in enumerate(instrs):
        label = ins.name() if ins.kind == "op" else f"{ins.kind} {ins.name()}"
        lines.append(f"  i{n} [label={_quote(label)}, {_OP_STYLE}];")
        for kind, idx in _refs((ins.inputs, ins.attr_refs)):
            if kind == "e":
                if idx not in externs:
                    externs.add(idx)
                    label = f"extern {idx}\n{tuple(trace.externs[idx].shape)}"
                    lines.append(f"  e{idx} [label={_quote(label)}, {_LEAF_STYLE}];")
                lines.append(f"  e{idx} -> i{n};")
            elif idx in made:
                lines.append(f"  {made[idx]} -> i{n};")
        for o in ins.outs:
            made[o] = f"i{n}"
    for r in _spec_refs(trace.output):
        if r[0] in _VALUE_REFS and r[1] in made:
            lines.append(f'  out [label="result", {_OUT_STYLE}];')
            lines.append(f"  {made[r[1]]} -> out;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def explain(fn, *args, **kwargs) -> ExplainOutput:
    """Capture `fn(*args, **kwargs)` (running it once, eagerly) and report the captured graph, the
    graph breaks and their reasons with the user's file and line."""
    if isinstance(fn, CompiledFunction):
        fn = fn.fn
    tracer = Tracer(False)
    leaves: list = []
    _signature((args, kwargs), leaves)
    for x in leaves:
        tracer.add_input(x)
    tracer.run(fn, args, kwargs)
    return ExplainOutput(tracer.trace)


__all__ = ["CompiledFunction", "ExplainOutput", "GraphBreak", "explain", "is_compiling", "reset"]
