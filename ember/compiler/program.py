"""Replay: a `Trace` turned into one flat Python function, generated once per guard set.

A replay does not run the user's Python code, its modules' `forward`s or the op wrappers: it
is the list of recorded applications, one line each, on the values of this call. Three forms:

- **flat** (nothing needed a gradient): values are raw arrays and each line is the op's
  `forward` itself; only the results become Tensors;
- **graph** (a gradient is needed, and the static form does not apply): each line calls
  `dispatch` with this call's tensors, so the result carries eager's graph and `loss.backward()`
  after it (or a replayed `backward` and `optimizer.step()` inside it) gives eager's gradients,
  computed by the same derivative code and the engine;
- **static** (a whole step with one scalar `backward()`, see `_static_refusal`): values are raw
  arrays; each recorded op's node keeps what `Op._attach` would, as decided at capture, and the
  backward is unrolled into the same function (`Program._static_backward`): no graph is linked or
  walked.

All are straight-line code with the values in local variables, every value deleted after its
last use (so memory is freed as early as liveness allows), grad mode switched where the captured
run switched it, and random ops called in the captured (eager) order.

Passes (`optimise`): dead-code elimination of ops whose results nothing reads.
"""
from __future__ import annotations

import numpy as np

from .._dtype import LOW_FLOATS
from .._tensor import make
from ..autograd import function as _function
from ..autograd.engine import _Run
from ..autograd.function import FREED, Op
from ..autograd.grad_mode import MODE
from ..backend import array_module, cpu_kernels
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
    """Every value reference an instruction reads (looking inside sequences)."""
    if ins.kind == "call":
        return  # an opaque call's arguments are plain Python values
    for r in ins.inputs or ():
        yield from _deep(r)
    for r in ins.arrays or ():
        yield from _deep(r)
    if ins.kind == "host" and ins.attrs:
        for r in ins.attrs.values():
            yield from _deep(r)
    if ins.attr_refs:
        for r in ins.attr_refs.values():
            yield from _deep(r)
    if ins.kind == "backward" and ins.attrs.get("inputs"):
        for r in ins.attrs["inputs"]:
            yield from _deep(r)


def _deep(r):
    if isinstance(r, tuple) and r:
        if r[0] == "seq":
            for e in r[2]:
                yield from _deep(e)
        else:
            yield r


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

    def __init__(self, trace: Trace, static: bool = True, kernels: bool = False) -> None:
        self.trace = trace
        self.kernels = kernels  # run the optimizers' fused numba updates (mode="max-autotune")
        self.instrs = optimise(trace)
        needs_graph = trace.recorded or any(i.kind == "backward" for i in trace.instrs)
        self.static_why = _static_refusal(trace, self.instrs) if needs_graph else None
        self.form = "flat" if not needs_graph else "static" if static and self.static_why is None else "graph"
        if any(v[2] in LOW_FLOATS for v in trace.values):
            # float16/bfloat16 compute in float32 and round once, in `dispatch`: every op goes through it
            self.form, self.static_why = "graph", "a float16 or bfloat16 value (its ops run through dispatch)"
        self.graph = self.form == "graph"
        # static form: values a recorded op keeps for its backward live until the backward ran
        self._saved = {r[1] for i in self.instrs if i.kind == "op" and i.needs is not None and i.fn.saves_inputs
                       for r in i.inputs if r[0] == "v"} if self.form == "static" else set()
        self.source, self.run = self._generate()

    # ------------------------------------------------------------------ code generation
    def _generate(self):
        trace, graph, static = self.trace, self.graph, self.form == "static"
        ns: dict = {"N": _new, "D": _function.dispatch, "M": MODE, "_mk": make, "_fix": _fix, "_copy": _copy_into,
                    "_bump": _bump, "_grads": _Grads, "_freed": _freed, "_ones": _ones_like, "_tup": _tup,
                    "K": cpu_kernels}
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
            if kind == "seq":
                return _seq(r, tensor_ref)
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
            if kind == "ereshape":
                return f"E{r[1]}._data.reshape({const(r[2])})"
            if kind == "seq":
                return _seq(r, array_ref)
            return const(r[1])

        def _seq(r, each) -> str:
            items = "".join(each(e) + ", " for e in r[2])
            return f"({items})" if r[1] is tuple else f"[{items}]"

        def attrs_expr(ins) -> str:  # the attributes as one dict: a constant, or built from references
            if ins.attr_refs is None:
                return const(ins.attrs)
            return "{" + ", ".join(f"{k!r}: {tensor_ref(r)}" for k, r in ins.attr_refs.items()) + "}"

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
        if self.kernels:  # the optimizers' fused CPU kernels (backend/cpu_kernels.py) run in this replay
            lines.append("    K.active += 1")
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
                A = f", **{attrs_expr(ins)}" if ins.attrs else ""
                if graph:
                    ins_s = "(" + "".join(tensor_ref(r) + ", " for r in ins.inputs) + ")"
                    arr_s = "(" + "".join(array_ref(r) + ", " for r in ins.arrays) + ")"
                    attrs = attrs_expr(ins) if ins.attrs else "None"
                    body.append(f"{outs} = D(N({K}), {ins_s}, {arr_s}, {attrs})")
                else:
                    F = const(ins.fn.forward)
                    args = "".join(", " + array_ref(r) for r in ins.arrays)
                    node = f"n{n}" if (static and ins.needs is not None) else f"N({K})"
                    if node != f"N({K})":
                        body.append(f"{node} = N({K})")
                    # (a forward that is a ufunc, as the binary ops' `forward = np.add`, is not a method: no node)
                    call = f"{F}({node}{args}{A})" if _is_method(ins.fn) else f"{F}({args[2:]}{A})"
                    if len(ins.outs) == 1 and not _multi(ins) and trace.values[ins.outs[0]][1] == ():
                        call = f"_fix({call})"
                    body.append(f"{outs} = {call}")
                    if node != f"N({K})":  # what `Op._attach` keeps for backward, decided at capture
                        cls = ins.fn
                        body.append(f"{node}.next = {const(tuple(True if x else None for x in ins.needs))}")
                        if cls.saves_inputs:  # kept in a local, passed to the derivative by _static_backward
                            body.append(f"s{n} = (" + "".join(tensor_ref(r) + ", " for r in ins.inputs) + ")")
                        if cls.saves_output and not ins.multi:
                            body.append(f"{node}.out = v{ins.outs[0]}")
                        if ins.meta is not None:
                            body.append(f"{node}.meta = {const(ins.meta)}")
                        if ins.multi:
                            body.append(f"{node}.n_out = {ins.n_out}")
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
            elif ins.kind == "view":
                if graph:  # (flat and static replays have no graph for a view to be part of)
                    body.append(f"{const(ins.fn)}({tensor_ref(ins.inputs[0])}, {tensor_ref(ins.inputs[1])})")
            elif ins.kind == "detach":
                (r,) = ins.inputs
                o = ins.outs[0]
                body.append(f"v{o} = {tensor_ref(r)}.detach()" if graph else f"v{o} = {array_ref(r)}")
            elif ins.kind == "getgrad":
                (r,) = ins.inputs
                body.append(f"v{ins.outs[0]} = E{r[1]}._grad" + ("" if graph else "._data"))
            elif ins.kind == "backward" and static:
                body += self._static_backward(n, ins, is_tensor, input_pos, const)
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
                    and last.get(r[1]) == n and r[1] not in returned and r[1] not in input_pos
                    and not (static and r[1] in self._saved)]
            for i in sorted(set(dead)):
                body.append(f"del v{i}")
        lines += ["        " + b for b in body] or ["        pass"]
        lines.append("    finally:")
        lines.append("        M.grad = _prev")
        if self.kernels:
            lines.append("        K.active -= 1")
        lines.append(f"    return {self._out(trace.output, graph, tensor_ref, input_pos, const)}")
        source = "\n".join(lines) + "\n"
        code = compile(source, "<ember.compile>", "exec")
        exec(code, ns)
        return source, ns["run"]

    def _static_backward(self, n: int, B: Instr, is_tensor, input_pos, const) -> list[str]:
        """`backward` of the static form: each recorded op's `_backward`, last op first (the trace's order
        is a topological one), gradients summed per value out of place as the engine's are, leaves'
        `.grad` stored by the engine's own rule (`_Run.store_grad`, ownership included)."""
        values = self.trace.values
        (root,) = B.inputs
        lines = ["M.grad = False", f"st = _grads(g{root[1]} := _mk(_ones(v{root[1]})))"]
        ops = [(k, ins) for k, ins in enumerate(self.instrs[:n]) if ins.kind == "op" and ins.needs is not None]
        grads = {o for _, ins in ops for o in ins.outs if values[o][3]} - {root[1]}
        lines += [f"g{v} = None" for v in sorted(grads)]
        for k, ins in reversed(ops):
            # the derivative called as Op._backward calls it (grad mode is off: fast_backward where there is one)
            fn = "fast_backward" if ins.fn.fast_backward is not None else "backward"
            args = f", *s{k}" if ins.fn.saves_inputs else ""
            call = f"_tup(n{k}.{fn}(gz{args}))"
            if ins.meta is not None:
                call = f"n{k}._reduce({call})"
            have = [o for o in ins.outs if o in grads or o == root[1]]
            if ins.multi:
                gz = "[" + ", ".join(f"g{o}" if o in have else "None" for o in ins.outs) + "]"
                lines.append(f"gz = {gz}")
                lines.append(f"r = None if gz.count(None) == len(gz) else {call}")
            else:
                o = ins.outs[0]
                lines.append(f"gz = g{o}")
                lines.append(f"r = None if gz is None else {call}")
            if have:  # each output's gradient is read by its own op alone: free it now, as the engine does
                lines.append(" = ".join(f"g{o}" for o in have) + " = gz = None")
            lines.append("if r is not None:")
            for i, (r, need) in enumerate(zip(ins.inputs, ins.needs)):
                if not need:
                    continue
                if r[0] == "v" and r[1] in input_pos:
                    tgt = f"st.store_grad(I[{input_pos[r[1]]}], x)"
                elif r[0] == "v":
                    tgt = f"g{r[1]} = x if g{r[1]} is None else g{r[1]} + x"
                elif r[0] == "e":
                    tgt = f"st.store_grad(E{r[1]}, x)"
                else:
                    raise AssertionError(r)
                lines.append(f"    x = r[{i}]")
                lines.append(f"    if x is not None: {tgt}")
            lines.append(f"del n{k}, r" + (f", s{k}" if ins.fn.saves_inputs else ""))
        lines += [f"del g{v}" for v in sorted(grads)]
        lines.append(f"del g{root[1]}, st, gz")
        lines.append(f"M.grad = {B.grad}")
        return lines

    def _out(self, spec, graph: bool, tensor_ref, input_pos, const) -> str:
        kind = spec[0]
        if kind == "ref":
            r = spec[1]
            if r[0] == "v" and r[1] in input_pos:
                return f"I[{input_pos[r[1]]}]"
            if self.form == "static" and r[0] == "v" and self.trace.values[r[1]][3]:
                return f"_freed(v{r[1]})"  # as eager leaves it after backward: requires grad, graph freed
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


def _static_refusal(trace: Trace, instrs: list[Instr]) -> str | None:
    """Why the static form (backward without the engine) does not apply to this trace; None if it does."""
    values = trace.values
    back = [k for k, i in enumerate(instrs) if i.kind == "backward"]
    if len(back) != 1:
        return "no backward in the program" if not back else "several backward calls"
    n = back[0]
    B = instrs[n]
    if B.arrays is not None or B.attrs.get("inputs") is not None or B.attrs.get("retain_graph"):
        return "backward with gradient=, inputs= or retain_graph="
    if len(B.inputs) != 1 or B.inputs[0][0] != "v" or values[B.inputs[0][1]][1] != ():
        return "backward of something other than one scalar"
    for k, ins in enumerate(instrs):
        if ins.kind == "commit" and not (ins.inputs[0][0] == "e" and not trace.externs[ins.inputs[0][1]]._requires_grad):
            return "an in-place op on a tensor in the graph"  # (writes into buffers, as batch norm's, are fine)
        if ins.kind == "op" and ins.needs is not None:
            if k > n:
                return "an op recorded for backward after the backward"
            if not issubclass(ins.fn, Op):
                return f"{ins.fn.__name__} is not a built-in op"
        if ins.kind == "host" and values[ins.outs[0]][3]:
            return "a factory made a tensor that requires grad"
    for i in trace.inputs:
        if values[i][3] and not values[i][4]:
            return "an input that is not a leaf requires grad"
    for e in trace.externs:
        if e._requires_grad and (e._edge is not None or e._hooks is not None):
            return "a tensor from outside with a graph or hooks"
    return None


def _is_method(cls) -> bool:
    """Whether `cls.forward` binds to the node (a Python function) or is called as it is (a ufunc)."""
    import types
    return isinstance(cls.__dict__.get("forward", None) or getattr(cls, "forward"), types.FunctionType)


def _multi(ins: Instr) -> bool:
    return ins.multi


class _Grads:
    """The engine's gradient-ownership state for one static backward (`_Run.store_grad` runs on it)."""

    __slots__ = ("shared", "aliased", "create_graph")
    store_grad = _Run.store_grad

    def __init__(self, root) -> None:
        self.shared = {id(root._data)}
        self.aliased: set = set()
        self.create_graph = False


def _tup(r) -> tuple:
    return r if r.__class__ is tuple else (r,)


def _ones_like(a):
    return array_module(a).ones_like(a)


def _freed(a):
    """A result as eager leaves it after backward: requiring grad, its graph freed (a second backward
    raises PyTorch's "backward through the graph a second time")."""
    node = _new(Freed)
    node.inputs, node.versions, node.out, node.out_version, node.next = FREED, None, None, None, ()
    return make(a, True, node)


class Freed(Op):
    """The grad_fn of a compiled step's results: the graph that eager freed in backward."""

    def name(self) -> str:
        return "CompiledBackward"


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
