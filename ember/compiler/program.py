"""Replay: a `Trace` turned into one flat Python function, generated once per guard set.

A replay does not run the user's Python code, its modules' `forward`s or the op wrappers: it
is the list of recorded applications, one line each, on the values of this call. Two forms:

- **graph** (the capture recorded a graph node, or ran `backward`): each line calls `dispatch`
  with this call's tensors, so the result carries eager's graph and `loss.backward()` after it
  (or a replayed `backward` and `optimizer.step()` inside it) gives eager's gradients, computed by
  the same derivative code;
- **flat** (nothing needed a gradient): values are raw arrays and each line is the op's
  `forward` itself; only the results become Tensors.

Both are straight-line code with the values in local variables, every value deleted after its
last use (so memory is freed as early as liveness allows), grad mode switched where the captured
run switched it, and random ops called in the captured (eager) order.

Passes (`optimise`): dead-code elimination of ops whose results nothing reads.
"""
from __future__ import annotations

import numpy as np

from .._tensor import make
from ..autograd import function as _function
from ..autograd.grad_mode import MODE
from ..backend import array_module
from .trace import Instr, Trace

_new = object.__new__

# Ops whose forward writes state outside its result (batch norm's running statistics): never dead.
_STATEFUL_ATTRS = ("running",)


def _is_pure(ins: Instr) -> bool:
    if ins.kind == "detach":
        return True
    if ins.kind != "op":
        return False
    a = ins.attrs
    return not (a and any(a.get(k) is not None for k in _STATEFUL_ATTRS))


def _refs(ins: Instr):
    """Every value reference an instruction reads."""
    for r in ins.inputs or ():
        yield r
    for r in ins.arrays or ():
        yield r
    if ins.kind in ("host",) and ins.attrs:
        yield from ins.attrs.values()
    if ins.kind == "backward" and ins.attrs.get("inputs"):
        yield from ins.attrs["inputs"]


def _spec_refs(spec):
    kind = spec[0]
    if kind == "ref":
        yield spec[1]
    elif kind in ("tuple", "list"):
        for s in spec[1]:
            yield from _spec_refs(s)
    elif kind == "named":
        for s in spec[2]:
            yield from _spec_refs(s)
    elif kind == "dict":
        for _, s in spec[2]:
            yield from _spec_refs(s)


def optimise(trace: Trace) -> list[Instr]:
    """Dead-code elimination: drop pure ops none of whose results is read later or returned."""
    live = {r[1] for r in _spec_refs(trace.output) if r[0] in ("v", "cast", "reshape")}
    kept = []
    for ins in reversed(trace.instrs):
        if _is_pure(ins) and not any(o in live for o in ins.outs):
            continue
        kept.append(ins)
        for r in _refs(ins):
            if isinstance(r, tuple) and r and r[0] in ("v", "cast", "reshape"):
                live.add(r[1])
    kept.reverse()
    return kept


class Program:
    """A trace compiled to a function `run(inputs) -> result` (see the module docstring)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.graph = trace.recorded or any(i.kind == "backward" for i in trace.instrs)
        self.instrs = optimise(trace)
        self.source, self.run = self._generate()

    # ------------------------------------------------------------------ code generation
    def _generate(self):
        trace, graph = self.trace, self.graph
        ns: dict = {"N": _new, "D": _function.dispatch, "M": MODE, "_mk": make, "_fix": _fix, "_copy": _copy_into,
                    "_bump": _bump}
        consts: dict[int, str] = {}

        def const(x) -> str:
            k = id(x)
            name = consts.get(k)
            if name is None:
                name = f"C{len(consts)}"
                consts[k] = name
                ns[name] = x
                self._keep.append(x)
            return name

        self._keep: list = []
        is_tensor = [v[0] for v in trace.values]
        input_pos = {v: k for k, v in enumerate(trace.inputs)}
        for k, e in enumerate(trace.externs):
            ns[f"E{k}"] = e

        def tensor_ref(r) -> str:  # the reference as a dispatch input / host argument
            kind = r[0]
            if kind == "v":
                i = r[1]
                if graph or not is_tensor[i]:
                    return f"v{i}"
                return f"_mk(v{i})"
            if kind == "e":
                return f"E{r[1]}"
            if kind == "c":
                return const(r[1])
            return array_ref(r)  # an array derived from a value (a cast, a reshape) in a constant's place

        def array_ref(r) -> str:  # the reference as an array for forward
            kind = r[0]
            if kind == "v":
                i = r[1]
                return f"v{i}._data" if (graph and is_tensor[i]) else f"v{i}"
            if kind == "e":
                return f"E{r[1]}._data"
            if kind == "cast":
                i = r[1]
                base = f"v{i}._data" if (graph and is_tensor[i]) else f"v{i}"
                return f"{base}.astype({const(r[2])})"
            if kind == "reshape":
                i = r[1]
                base = f"v{i}._data" if (graph and is_tensor[i]) else f"v{i}"
                return f"{base}.reshape({const(r[2])})"
            if kind == "ecast":
                return f"E{r[1]}._data.astype({const(r[2])})"
            return const(r[1])

        lines = ["def run(I):"]
        for k, v in enumerate(trace.inputs):
            lines.append(f"    v{v} = I[{k}]" + ("._data" if (is_tensor[v] and not graph) else ""))
        # liveness: the last instruction that reads each value
        last: dict[int, int] = {}
        for n, ins in enumerate(self.instrs):
            for r in _refs(ins):
                if isinstance(r, tuple) and r and r[0] in ("v", "cast", "reshape"):
                    last[r[1]] = n
        returned = {r[1] for r in _spec_refs(trace.output) if r[0] in ("v", "cast", "reshape")}
        mode = MODE.grad
        lines.append("    _prev = M.grad")
        lines.append("    try:")
        body = []
        for n, ins in enumerate(self.instrs):
            if ins.grad != mode:
                body.append(f"M.grad = {ins.grad}")
                mode = ins.grad
            outs = ", ".join(f"v{o}" for o in ins.outs) + ("," if len(ins.outs) == 1 and ins.kind == "op" and
                                                          _multi(ins) else "")
            if ins.kind == "op":
                K = const(ins.fn)
                A = f", **{const(ins.attrs)}" if ins.attrs else ""
                if graph:
                    ins_s = "(" + "".join(tensor_ref(r) + ", " for r in ins.inputs) + ")"
                    arr_s = "(" + "".join(array_ref(r) + ", " for r in ins.arrays) + ")"
                    attrs = const(ins.attrs) if ins.attrs else "None"
                    body.append(f"{outs} = D(N({K}), {ins_s}, {arr_s}, {attrs})")
                else:
                    F = const(ins.fn.forward)
                    args = "".join(", " + array_ref(r) for r in ins.arrays)
                    call = f"{F}(N({K}){args}{A})"
                    if len(ins.outs) == 1 and not _multi(ins) and trace.values[ins.outs[0]][1] == ():
                        call = f"_fix({call})"
                    body.append(f"{outs} = {call}")
            elif ins.kind == "host":
                H = const(ins.fn)
                args = ", ".join(tensor_ref(r) for r in ins.inputs)
                kw = ", ".join(f"{k}={tensor_ref(r)}" for k, r in (ins.attrs or {}).items())
                call = f"{H}({args}{', ' if args and kw else ''}{kw})"
                o = ins.outs[0]
                if is_tensor[o] and not graph:
                    call += "._data"
                body.append(f"v{o} = {call}")
            elif ins.kind == "commit":
                t, r = ins.inputs
                if graph:
                    body.append(f"{const(ins.fn)}({tensor_ref(t)}, {tensor_ref(r)}, {ins.attrs['op']!r})")
                else:
                    body.append(f"_copy({array_ref(t)}, {array_ref(r)})")
                    if t[0] == "e":
                        body.append(f"_bump(E{t[1]})")
            elif ins.kind == "detach":
                (r,) = ins.inputs
                o = ins.outs[0]
                body.append(f"v{o} = {tensor_ref(r)}.detach()" if graph else f"v{o} = {array_ref(r)}")
            elif ins.kind == "getgrad":
                (r,) = ins.inputs
                body.append(f"v{ins.outs[0]} = E{r[1]}._grad" + ("" if graph else "._data"))
            elif ins.kind == "backward":
                roots = "[" + ", ".join(tensor_ref(r) for r in ins.inputs) + "]"
                grads = "None" if ins.arrays is None else "[" + ", ".join(tensor_ref(r) for r in ins.arrays) + "]"
                inp = ins.attrs.get("inputs")
                inp_s = "None" if inp is None else "[" + ", ".join(tensor_ref(r) for r in inp) + "]"
                body.append(f"{const(ins.fn)}({roots}, {grads}, {ins.attrs['retain_graph']!r}, False, {inp_s})")
            elif ins.kind == "call":
                body.append(f"{const(ins.fn)}(*{const(ins.inputs)}, **{const(ins.attrs)})")
            else:
                raise AssertionError(ins.kind)
            dead = [r[1] for r in _refs(ins) if isinstance(r, tuple) and r and r[0] in ("v", "cast", "reshape")
                    and last.get(r[1]) == n and r[1] not in returned and r[1] not in input_pos]
            for i in sorted(set(dead)):
                body.append(f"del v{i}")
        lines += ["        " + b for b in body] or ["        pass"]
        lines.append("    finally:")
        lines.append("        M.grad = _prev")
        lines.append(f"    return {self._out(trace.output, graph, tensor_ref, input_pos, const)}")
        source = "\n".join(lines) + "\n"
        code = compile(source, "<ember.compile>", "exec")
        exec(code, ns)
        return source, ns["run"]

    def _out(self, spec, graph: bool, tensor_ref, input_pos, const) -> str:
        kind = spec[0]
        if kind == "ref":
            r = spec[1]
            if r[0] == "v" and r[1] in input_pos:
                return f"I[{input_pos[r[1]]}]"
            return tensor_ref(r)
        if kind == "tuple":
            return "(" + "".join(self._out(s, graph, tensor_ref, input_pos, const) + ", " for s in spec[1]) + ")"
        if kind == "list":
            return "[" + ", ".join(self._out(s, graph, tensor_ref, input_pos, const) for s in spec[1]) + "]"
        if kind == "named":
            return f"{const(spec[1])}(" + ", ".join(self._out(s, graph, tensor_ref, input_pos, const)
                                                       for s in spec[2]) + ")"
        if kind == "dict":
            items = ", ".join(f"{const(k)}: {self._out(s, graph, tensor_ref, input_pos, const)}" for k, s in spec[2])
            return f"{const(spec[1])}({{{items}}})"
        return const(spec[1])


def _multi(ins: Instr) -> bool:
    return ins.multi


def _fix(out):
    """NumPy gives a scalar for a 0-d reduction; results are always arrays (as in dispatch)."""
    return out if out.__class__ is np.ndarray else np.asarray(out) if isinstance(out, np.generic) else out


def _copy_into(target, value) -> None:
    if target.__class__ is np.ndarray:
        np.copyto(target, value, casting="same_kind")
    else:
        array_module(target).copyto(target, value, casting="same_kind")


def _bump(t) -> None:
    b = t._base
    (b if b is not None else t)._vc += 1
