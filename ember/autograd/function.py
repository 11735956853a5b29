"""Graph nodes: built-in `Op`s and user-defined `Function`s.

A node is created for every op application that needs a gradient; it is the result's
`grad_fn`. It holds `next` (one edge per input: the input's own node, the input tensor
itself when that is a leaf requiring grad, or None) and whatever its backward needs. It
never holds its outputs, so the graph has no reference cycles and is freed with them.
"""
from __future__ import annotations

import numpy as np

import weakref

from .._tensor import TENSOR_TYPES, Slot, Tensor, make, version
from .grad_mode import MODE
from .. import _dtype as dt

_new = object.__new__
_tracer = None  # the capturing Tracer (ember._capture.set_active), else None: dispatch's one extra test
_ndarray = np.ndarray
_generic = np.generic
class _Freed(tuple):
    """Type of FREED: empty like the saved inputs it replaces, but a distinct object."""


FREED = _Freed()  # `inputs` after the graph was freed; distinct from "saved nothing" (None)


class Node:
    """Base of graph nodes. `next[i]` is the edge to input i."""

    __slots__ = ("next", "inputs", "versions", "out", "out_version", "__dict__", "__weakref__")
    n_out = 1
    # Rarely set, so class-level defaults: an instance sets them in its __dict__ when needed.
    _pre_hooks = None  # {output index: [tensor hooks]}
    _retain = None  # {output index: weakref to a tensor that called retain_grad()}
    _post_hooks = None  # [hook(grad_inputs, grad_outputs)]
    _hooked = False  # True once any of the above is set: the engine's one test per node
    trace = None  # creation traceback, under detect_anomaly
    _user_ctx = False  # FunctionCtx: its attributes belong to the user (PyTorch keeps them after backward)

    def name(self) -> str:
        return type(self).__name__ + "Backward"

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self) -> tuple:
        """PyTorch-style `((node, output_nr), ...)`; leaves appear as `(AccumulateGrad(tensor), 0)`."""
        out = []
        for e in self.next:
            if e is None:
                out.append((None, 0))
            elif type(e) is Slot:
                out.append((e.node, e.nr))
            elif isinstance(e, Tensor):
                out.append((AccumulateGrad(e), 0))
            else:
                out.append((e, 0))
        return tuple(out)

    def register_hook(self, hook):
        """Call `hook(grad_inputs, grad_outputs)` after this node's backward (PyTorch's Node.register_hook)."""
        from .._tensor import RemovableHandle
        if self._post_hooks is None:
            self._post_hooks = []
            self._hooked = True
        hooks = self._post_hooks
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def _check_saved(self) -> None:
        if self.inputs is FREED:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (or directly access saved tensors after they have "
                f"already been freed) in {self.name()}. Saved intermediate values of the graph are freed when you call "
                f".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a "
                f"second time or if you need to access saved tensors after calling backward.")
        vs = self.versions
        if vs:
            i = 0
            for t in self.inputs:
                if t.__class__ in TENSOR_TYPES:
                    b = t._base
                    if (b if b is not None else t)._vc != vs[i]:
                        self._modified(t, vs[i], version(t))
                    i += 1
                elif type(t) is tuple:  # a saved output of a Function (see FunctionCtx._attach)
                    i += 1
        if self.out_version is not None:
            res = self.out_version()  # the result, if still alive (only then can it have been modified)
            if res is not None and res._vc != 0:
                self._modified(res, 0, res._vc)

    def _modified(self, t, saved: int, now: int):
        shape = list(t.shape)
        dtype = t.dtype
        raise RuntimeError(
            f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{dtype}{shape}] (an input or output of {self.name()}) is at version {now}; expected version {saved} "
            f"instead. Hint: replace the in-place operation (e.g. x += y, x.add_(y), x[i] = v) by its out-of-place form.")


def free_buffers(node: Node) -> None:
    """Drop the arrays a built-in op's forward stored on the node (masks, normalised inputs,
    columns...): the saved buffers beyond `inputs`/`out`, which the engine frees itself.

    Called by the engine once the node's backward has run without `retain_graph`, so a graph
    kept alive by a reference to its output (`losses.append(loss)`) holds no array memory.
    Hooks, the anomaly trace and small non-array facts stay. `inputs` becomes FREED, so a second
    backward through the node raises PyTorch's "backward through the graph a second time" error
    instead of reading a dropped attribute."""
    d = node.__dict__
    drop = [k for k, v in d.items() if _is_buffer(v)]
    for k in drop:
        del d[k]
    if drop:
        node.inputs = FREED


def _is_buffer(v, depth: int = 0) -> bool:
    """An array (anything with `nbytes`: NumPy, CuPy), a Tensor, or a tuple/list holding one
    (nested a few levels: an index is a tuple that may hold arrays and tuples of arrays)."""
    if isinstance(v, Tensor) or hasattr(v, "nbytes"):
        return True
    if (v.__class__ is tuple or v.__class__ is list) and depth < 3:
        for e in v:
            if _is_buffer(e, depth + 1):
                return True
    return False


class AccumulateGrad:
    """Stand-in shown by `next_functions` for a leaf's gradient accumulator."""

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


class Op(Node):
    """A built-in differentiable op: `forward` on raw arrays, `backward` with ember ops on Tensors.

    Subclasses set `saves_inputs = False` when backward needs no input values (it then
    receives only the upstream gradient) and `saves_output = True` to read the result in
    backward through `self.output()`. `forward` may store small non-array facts on `self`.
    A subclass may add `fast_backward`, a raw-array sibling of `backward` (see below).
    """

    saves_inputs = True
    saves_output = False
    # Optional: `fast_backward(gz, *inputs)`, the same gradients as `backward` computed on raw arrays (no graph).
    # `backward` stays the readable formula in ember ops; the engine runs the fast sibling instead when no graph
    # of the backward pass is wanted (create_graph off), and tests/test_fast_backward.py checks the two agree.
    fast_backward = None
    reduces_grads = False  # True: inputs may broadcast or be promoted, so record notes `meta` for `_reduce`
    meta = None  # ((shape, dtype) or None per input) for inputs whose gradient must be reduced to them

    def forward(self, *args):
        raise NotImplementedError("abstract: a subclass of Op defines forward")

    def backward(self, gz, *inputs):
        raise NotImplementedError("abstract: a subclass of Op defines backward")

    def jvp(self, tangents: tuple, *inputs):
        """Forward mode: the tangent of the result given one tangent per input, written with ember ops beside
        `backward` so that it is itself differentiable (forward over reverse).

        `tangents[i]` is input i's tangent (a Tensor), or the number 0 where it has none (a number, an integer
        tensor, a float tensor that is not dual), so rules read like the math: `t[0] * y + x * t[1]`. Return a
        Tensor (or 0), or for several outputs a tuple with one per output (None for an integer output).
        `self.result()` is the op's result and what `forward` stored on the node is there too. Ready-made rules:
        `elementwise_jvp` (the backward formula applied to the tangent), `linear_jvp` (linear ops: `reapply`) and
        `multilinear_jvp` (products). An op
        without a rule raises PyTorch's error."""
        from .forward_ad import unsupported
        raise unsupported(self)

    def result(self):
        """In `jvp`: the op's result (a Tensor, or a tuple of Tensors for several outputs)."""
        return self._fw_call[3]

    def reapply(self, *tangents):
        """In `jvp`: this op applied again, with the same constants and attributes, to the tangents in place of
        its inputs: the tangent of an op that is linear in its tensor inputs (`x[idx]`, `cat`, `sum`, a view).
        `tangents[i]`: a Tensor replaces input i; 0 replaces a float tensor input by zeros and keeps any other
        (an index, a number); None keeps input i (so `self.reapply(t[0], None)` is the term of a bilinear op
        that is linear in input 0 with input 1 held)."""
        inputs, arrays, attrs, _ = self._fw_call
        new_inputs, new_arrays = list(inputs), list(arrays)
        for i, a in enumerate(tangents):
            old = inputs[i]
            if a is None:
                continue
            if a.__class__ not in TENSOR_TYPES:
                if old.__class__ not in TENSOR_TYPES or not dt.is_float(old._data.dtype):
                    continue  # an index or a constant: kept
                from .. import backend
                a = make(backend.array_module(old._data).zeros_like(old._data))
            new_inputs[i] = a
            d = a._data
            was = arrays[i]
            if was.__class__ is _ndarray and d.__class__ is _ndarray and d.dtype != was.dtype:
                d = d.astype(was.dtype)  # the caller promoted this input (e.g. float32 * float64): the same here
            new_arrays[i] = d
        return dispatch(_new(type(self)), tuple(new_inputs), tuple(new_arrays), attrs)

    def linear_jvp(self, tangents: tuple, *inputs):
        """In `jvp`, for an op linear in its tensor inputs (a view, an indexing, a sum, a join): the op itself
        applied to the tangents, with the same constants (`reapply`). Set `jvp = Op.linear_jvp` beside such a
        `backward`."""
        return self.reapply(*tangents)

    def multilinear_jvp(self, tangents: tuple, *inputs):
        """In `jvp`, for an op linear in each tensor operand separately (a product): z' = Σᵢ z(x₁, ..., xᵢ', ..., xₙ),
        the op applied again with operand i replaced by its tangent and the others held, over the operands that
        have one. Set `jvp = Op.multilinear_jvp` beside such a `backward`."""
        z = None
        for i, ti in enumerate(tangents):
            if ti.__class__ in TENSOR_TYPES:
                term = self.reapply(*(ti if j == i else None for j in range(len(tangents))))
                z = term if z is None else z + term
        return 0 if z is None else z

    def elementwise_jvp(self, tangents: tuple, *inputs):
        """In `jvp`, for an elementwise op: its Jacobian with respect to each input is diagonal, hence equal to its
        own transpose, so the tangent is `backward` applied to the tangents: sum over inputs i of
        dz/dx_i * x_i' (broadcasting as the op does). Set `jvp = Op.elementwise_jvp` beside such a `backward`."""
        had = True
        try:
            nxt = self.next
        except AttributeError:  # (not recorded: no reverse-mode graph)
            had = False
        total = None
        try:
            for i, t in enumerate(tangents):
                if t.__class__ not in TENSOR_TYPES:
                    continue
                self.next = tuple([True if j == i else None for j in range(len(inputs))])  # `needs(i)` only
                g = self.backward(t, *inputs) if self.saves_inputs else self.backward(t)
                g = g[i] if g.__class__ is tuple else g
                if g is not None:  # (None: the op's derivative in that input is zero, e.g. a mask's)
                    total = g if total is None else total + g
        finally:
            if had:
                self.next = nxt
            else:
                del self.next
        return 0 if total is None else total

    def output(self) -> Tensor:
        """The op's result, as a Tensor whose grad_fn is this node (so double backward works); in `jvp`, the
        result itself (also when it was not recorded)."""
        call = self.__dict__.get("_fw_call")
        if call is not None:
            return call[3]
        z = make(self.out, True, self)
        saved = self.__dict__.get("_fw_out")
        if saved is not None and MODE.fw:  # its forward-mode tangents (forward over reverse)
            from .forward_ad import set_tangent
            for level, t in saved:
                if level in MODE.fw:
                    set_tangent(z, level, t)
        return z

    def needs(self, i: int) -> bool:
        """Whether input i needs a gradient (so backward can skip the rest)."""
        return self.next[i] is not None

    def _backward(self, g):
        """The engine's call: check what was saved, run the derivative, reduce broadcast gradients.
        Runs `fast_backward` when the op has one and grad mode is off (the backward pass itself is
        not recorded), else `backward`."""
        inputs = self.inputs
        # (forward AD on: the backward's ops must carry tangents, so they run as ember ops, forward over reverse)
        fn = self.backward if (self.fast_backward is None or MODE.grad or MODE.fw) else self.fast_backward
        if MODE.lowp and fn is not self.backward and g.__class__ in TENSOR_TYPES and g._data.dtype in dt.LOW_FLOATS:
            fn = self.backward  # its ops compute 16-bit floats in float32 (`dispatch`); fast_backward's arrays would not
        if inputs is not None:
            if inputs is FREED or self.versions is not None or self.out_version is not None:
                self._check_saved()
            r = fn(g, *inputs)
        else:
            if self.out is not None or self.saves_output:
                self._check_saved()
            r = fn(g)
        if r.__class__ is not tuple:
            r = (r,)
        return r if self.meta is None else self._reduce(r)

    def _reduce(self, grads: tuple) -> tuple:
        """Sum broadcast gradients back to their input's shape and cast them to its dtype."""
        from ..ops.arithmetic import sum_to
        out = []
        for gi, m in zip(grads, self.meta):
            if gi is not None and m is not None:
                shape, dtype = m
                if gi.shape != shape:
                    gi = sum_to(gi, shape)
                if gi._data.dtype != dtype:
                    gi = gi.to(dtype)
            out.append(gi)
        return tuple(out)

    @classmethod
    def apply(cls, *args, **kwargs) -> Tensor:
        """Apply the op to `args`: Tensors (their arrays go to `forward`, all on one device) and
        constants (passed through as they are; their edges are None). Keyword args are forwarded
        to `forward` only."""
        arrays = []
        kind = None
        for a in args:
            if a.__class__ in TENSOR_TYPES:
                d = a._data
                if kind is None:
                    kind = d.__class__
                elif d.__class__ is not kind or kind is not _ndarray:
                    # (two device arrays of one type may still live on two GPUs)
                    from ..backend import check_same_device
                    check_same_device(cls.__name__.lower(), [t._data for t in args if isinstance(t, Tensor)])
                arrays.append(d)
            else:
                arrays.append(a)
        return dispatch(_new(cls), args, arrays, kwargs)

    def _attach(self, inputs: tuple, out) -> Tensor:
        """Recording policy of built-in ops (called by `record`): keep what `saves_inputs`,
        `saves_output` and `reduces_grads` ask for, and return the result Tensor."""
        if self.saves_inputs:
            self.inputs = inputs
            self.versions = tuple([version(a) for a in inputs if a.__class__ in TENSOR_TYPES])
        else:
            self.inputs = self.versions = None
        if out.__class__ is tuple:  # several outputs: one node, output i's edge is Slot(node, i)
            self.n_out = len(out)
            self.out = self.out_version = None  # (saves_output and reduces_grads are single-output only)
            return tuple([make(o, True, Slot(self, i)) for i, o in enumerate(out)])
        result = make(out, True, self)
        if self.saves_output:
            self.out = out
            self.out_version = weakref.ref(result)
        else:
            self.out = self.out_version = None
        if self.reduces_grads:
            # remember (shape, dtype) of the inputs that were broadcast or promoted to the result's, so that
            # `_reduce` sums and casts their gradients back
            meta = None
            shape, dtype = out.shape, out.dtype
            i = 0
            for a in inputs:
                if a.__class__ in TENSOR_TYPES and a._requires_grad:
                    d = a._data
                    if d.dtype is not dtype or d.shape != shape:
                        if meta is None:
                            meta = [None] * len(inputs)
                        meta[i] = (d.shape, d.dtype)
                i += 1
            if meta is not None:
                self.meta = tuple(meta)
        return result


# ---------------------------------------------------------------------- the one recording path
def dispatch(node: Node, inputs: tuple, arrays, attrs: dict | None = None) -> Tensor:
    """Apply an op: the one place where an op application becomes a result.

    An application is (op, inputs, attributes) -> output: `node` is a fresh instance of the op's
    class, `inputs` the op's arguments as its caller received them (Tensors and constants), `arrays`
    the values its `forward` takes (each Tensor's array, promoted or checked as the caller needed;
    constants as they are) and `attrs` keyword attributes for `forward`. `forward` returns an array, or
    a tuple (or list) of arrays for an op with several outputs (then the result is a tuple of Tensors, output i's
    edge `Slot(node, i)`). What happens to the
    application is decided here and nowhere else: today it runs now and, when grad mode is on and
    an input requires grad, is recorded for backward (`record`). This is the seam that a capturing
    mode (compile, lazy evaluation) intercepts: under `ember.compile`'s capture the tracer records
    the application and then runs it here (with its `depth` raised, so this test passes it by).
    """
    if _tracer is not None and _tracer.depth == 0:
        return _tracer.dispatch(node, inputs, arrays, attrs)
    if MODE.extra:  # 16-bit floats, forward-mode AD or autocast: the rare modes, one test on the hot path
        return _dispatch_modes(node, inputs, arrays, attrs)
    out = node.forward(*arrays, **attrs) if attrs else node.forward(*arrays)
    if out.__class__ is not _ndarray:
        out = _as_arrays(out)
    if MODE.grad:
        for a in inputs:
            if a.__class__ in TENSOR_TYPES and a._requires_grad:
                return record(node, inputs, out)
    return make(out) if out.__class__ is not tuple else tuple([make(o) for o in out])


def _as_arrays(out):
    """A forward's result as dispatch keeps it: an array, or a tuple of arrays for several outputs (split, an RNN
    layer). NumPy returns scalars from 0-d reductions: results are always arrays."""
    if out.__class__ is tuple or out.__class__ is list:
        return tuple([np.asarray(o) if isinstance(o, _generic) else o for o in out])
    return np.asarray(out) if isinstance(out, _generic) else out


def _dispatch_modes(node: Node, inputs: tuple, arrays, attrs):
    """`dispatch` when a rare mode is on, in the order the modes compose: autocast casts the inputs first (as
    recorded casts, so gradients flow back through them); 16-bit floats are computed in float32 and rounded
    once; the result is recorded for reverse mode as always; then forward-mode AD gives it its tangents. Inside
    vmap, an application with batched arguments first becomes one on the physical arrays (`batch_dispatch`),
    which comes back here for all of that."""
    if MODE.vmap:
        from ..func._batching import batch_dispatch
        r = batch_dispatch(node, inputs, arrays, attrs)
        if r is not None:
            return r
    if MODE.autocast is not None:
        from ..amp.autocast_mode import cast_inputs
        inputs, arrays = cast_inputs(node, inputs, arrays)
    given = arrays  # (forward AD re-applies linear ops to tangents in place of these)
    low = None
    if MODE.lowp:  # a float16/bfloat16 dtype has been used: their ops compute in float32 (`_low_float`)
        low = _low_float(node, arrays)
        if low is not None:
            arrays = _widen(node, arrays, low)
    out = node.forward(*arrays, **attrs) if attrs else node.forward(*arrays)
    if out.__class__ is not _ndarray:
        out = _as_arrays(out)
    if low is not None:  # round once, back to the inputs' 16-bit dtype
        out = tuple([_round_to(o, low) for o in out]) if out.__class__ is tuple else _round_to(out, low)
    result = None
    if MODE.grad:
        for a in inputs:
            if a.__class__ in TENSOR_TYPES and a._requires_grad:
                result = record(node, inputs, out)
                break
    if result is None:
        result = make(out) if out.__class__ is not tuple else tuple([make(o) for o in out])
    if MODE.fw:
        from .forward_ad import propagate
        propagate(node, inputs, given, attrs, result)
    return result


# ---------------------------------------------------------------------- 16-bit floats
# PyTorch's CPU kernels compute float16 and bfloat16 ops in float32 and round each result once (Python
# scalars taking part in float32 too: `half_tensor * 0.1` multiplies by 0.1f, not by 0.1 rounded to half).
# NumPy's float16 loops round differently (a Python scalar to half first, reductions and matmul at every
# step) and ml_dtypes' bfloat16 has few loops, so `dispatch` widens such inputs to float32, runs the op and
# rounds its float32 results to the 16-bit dtype. Ops that only move data keep their dtype (`_NATIVE`):
# their results may be views, which a widened copy would break.
_NATIVE_MODULES = frozenset({"ember.ops.shape", "ember.ops.indexing", "ember.ops.indexing_ext", "ember.ops.inplace"})
_LOW_RULE: dict = {}  # op class -> whether its float16/bfloat16 inputs are widened (the test above, cached)


def _low_float(node: Node, arrays) -> np.dtype | None:
    """The 16-bit float dtype that an application computes in float32 and rounds back to, or None: its CPU
    array inputs hold exactly one of float16/bfloat16 and no wider float (those were promoted before)."""
    cls = node.__class__
    widen = _LOW_RULE.get(cls)
    if widen is None:
        widen = _LOW_RULE[cls] = not (cls.__module__ in _NATIVE_MODULES or getattr(cls, "keeps_dtype", False))
    if not widen:
        return None
    low = None
    for a in arrays:
        if a.__class__ is _ndarray:
            d = a.dtype
            if d in dt.LOW_FLOATS:
                if low is not None and d is not low:
                    return None
                low = d
            elif dt.is_float(d) and a.ndim:
                return None
    return low


def _widen(node: Node, arrays, low: np.dtype) -> tuple:
    """The 16-bit float arrays as float32. A Python float operand of an arithmetic op is first rounded to the
    16-bit dtype, as PyTorch's CPU kernels do (`rounds_scalars`: add, sub, pow, remainder, ...; not mul and div,
    which take it at full precision); other ops' float arguments (eps, slopes) are attributes, kept exact."""
    if getattr(node, "rounds_scalars", False):
        return tuple([a.astype(np.float32) if a.__class__ is _ndarray and a.dtype == low
                      else float(low.type(a)) if a.__class__ is float else a for a in arrays])
    return tuple([a.astype(np.float32) if a.__class__ is _ndarray and a.dtype == low else a for a in arrays])


def _round_to(o, low: np.dtype):
    return o.astype(low) if o.__class__ is _ndarray and o.dtype == np.float32 else o


def record(node: Node, inputs: tuple, out):
    """Make `node` the grad_fn of the result of an application to `inputs`.

    Connects one edge per input (the input's own node, the input itself when it is a leaf that
    requires grad, else None), lets the node keep what its backward needs (`node._attach`: a
    built-in `Op` saves by its class flags and returns a new result Tensor for the array `out`; a
    user `Function`'s ctx saves what `save_for_backward` named and connects the output Tensors
    `out`), and under anomaly mode keeps the creation traceback."""
    nxt = []
    for a in inputs:
        if a.__class__ in TENSOR_TYPES:
            e = a._edge
            nxt.append(e if e is not None else (a if a._requires_grad else None))
        else:
            nxt.append(None)
    node.next = tuple(nxt)
    result = node._attach(inputs, out)
    if MODE.anomaly:
        from .anomaly import creation_trace
        node.trace = creation_trace()
    return result


# ---------------------------------------------------------------------- user-defined Functions
class FunctionCtx(Node):
    """The `ctx` passed to a user Function's forward and backward (and its graph node)."""

    _user_ctx = True

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors (or None), but argument {tensors.index(t)} "
                                f"is of type {type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self.__dict__.get("_in_jvp"):
            return self.__dict__.get("_fw_saved", ())
        self._check_saved()
        if self.inputs is None:
            return ()
        # outputs were saved as (array, output index) to keep the graph free of cycles
        return tuple(make(t[0], True, self if self.n_out == 1 else Slot(self, t[1])) if type(t) is tuple else t
                     for t in self.inputs)

    def save_for_forward(self, *tensors) -> None:
        """Keep tensors for the Function's `jvp`, which reads them back as `ctx.saved_tensors` (as in PyTorch)."""
        self._fw_saved = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self._materialize = bool(value)

    def mark_dirty(self, *tensors) -> None:
        self._dirty = {id(t) for t in tensors}

    def name(self) -> str:
        return self._fn.__name__ + "Backward"

    def _attach(self, inputs: tuple, outputs: list) -> list:
        """Recording policy of user Functions (called by `record`): keep what `save_for_backward`
        named, stamped with its version. The output Tensors are already connected to this ctx."""
        saved = self._to_save
        self._to_save = None  # it may hold outputs, which hold ctx
        if saved is not None:
            self.versions = tuple(version(t) for t in saved if t is not None)
            out_index = {id(o): i for i, o in enumerate(outputs) if isinstance(o, Tensor) and o._edge is not None}
            # A saved output would hold its own grad_fn (a cycle): keep its array and rebuild it on access.
            saved = tuple((t._data, out_index[id(t)]) if id(t) in out_index else t for t in saved)
        else:
            self.versions = None
        self.inputs = saved
        self.out = self.out_version = None
        return outputs

    def _backward(self, grads):
        self._check_saved()
        if self.n_out == 1:
            grads = (grads,)
        if getattr(self, "_materialize", True):
            grads = tuple(g if g is not None else make(_zeros_meta(m)) for g, m in zip(grads, self._out_meta))
        r = self._fn.backward(self, *grads)
        if type(r) is not tuple:
            r = (r,)
        n_in = len(self.next)
        if len(r) != n_in:
            if len(r) > n_in and all(g is None for g in r[n_in:]):
                r = r[:n_in]
            else:
                raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients (expected {n_in}, got {len(r)})")
        out = []
        for i, (g, meta) in enumerate(zip(r, self._in_meta)):
            if g is None or meta is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"function {self.name()} returned a gradient of type {type(g).__name__} at index {i}; expected a Tensor or None")
            shape, dtype = meta
            if g.shape != shape:
                try:
                    np.broadcast_shapes(shape, g.shape)
                    from ..ops.arithmetic import sum_to
                    g = sum_to(g, shape)
                    ok = g.shape == shape
                except ValueError:
                    ok = False
                if not ok:
                    raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index {i} - got {list(g.shape)} "
                                       f"but expected shape compatible with {list(shape)}")
            if g._data.dtype != dtype:
                g = g.to(dtype)
            out.append(g)
        return tuple(out)


def _function_jvp(cls, ctx, args: tuple, outs: tuple) -> tuple:
    """Forward AD through a user Function: its static `jvp(ctx, *tangents)` (one tangent per forward input, zeros
    for a tensor without one, None for a non-tensor) gives one tangent per output, as in PyTorch."""
    from . import forward_ad as fw
    for level in MODE.fw:
        if not any(isinstance(a, Tensor) and fw.tangent_of(a, level) is not None for a in args):
            continue
        if cls.jvp is Function.jvp:
            raise NotImplementedError(f"Trying to use forward AD with {cls.__name__} that does not support it because "
                                      f"it has not been implemented yet. Define a static jvp(ctx, *tangents) on it "
                                      f"(and save what it needs with ctx.save_for_forward).")
        tans = []
        for a in args:
            if isinstance(a, Tensor):
                t = fw.tangent_of(a, level)
                tans.append(t if t is not None else make(a._data * 0))
            else:
                tans.append(None)
        levels = MODE.fw
        MODE.fw = levels[:levels.index(level)]
        MODE.refresh()
        ctx._in_jvp = True
        try:
            r = cls.jvp(ctx, *tans)
        finally:
            ctx._in_jvp = False
            MODE.fw = levels
            MODE.refresh()
        r = r if isinstance(r, tuple) else (r,)
        if len(r) != len(outs):
            raise RuntimeError(f"function {cls.__name__}.jvp returned an incorrect number of tangents (expected "
                               f"{len(outs)}, got {len(r)})")
        outs = tuple(o.detach() if isinstance(o, Tensor) and any(o is a for a in args) else o for o in outs)
        for o, t in zip(outs, r):
            if isinstance(o, Tensor) and t is not None and dt.is_float(o._data.dtype):
                fw.set_tangent(o, level, t)
    return outs


def _zeros_meta(meta):
    from .. import backend
    shape, dtype, dev = meta
    with backend.on(dev):
        return backend.module_for(dev).zeros(shape, dtype)


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        # `ctx` of this Function is an instance of a per-class FunctionCtx subclass
        cls._backward_cls = type(name + "Backward", (FunctionCtx,), {"_fn": cls})


class Function(metaclass=_FunctionMeta):
    """User-defined differentiable function, as in PyTorch:

    class Exp(Function):
        @staticmethod
        def forward(ctx, x): y = x.exp(); ctx.save_for_backward(y); return y
        @staticmethod
        def backward(ctx, gy): (y,) = ctx.saved_tensors; return gy * y

    `forward` runs with grad mode off; `backward` receives and returns Tensors (one
    gradient or None per forward input).
    """

    def __init__(self, *args, **kwargs) -> None:
        raise RuntimeError("ember.autograd.Function is not instantiated: call the class's apply(...) instead")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("abstract: a subclass of Function defines a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("abstract: a subclass of Function defines a static backward(ctx, *grads)")

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (optional): the outputs' tangents from the inputs' (see `_function_jvp`)."""
        raise NotImplementedError("abstract: a subclass of Function that supports forward AD defines a static jvp")

    @classmethod
    def apply(cls, *args, **kwargs):
        if _tracer is not None:
            if getattr(_tracer, "lazy", False) and _tracer.depth == 0:  # ember.lazy: its forward runs now
                return _tracer.opaque(cls.apply.__func__, (cls,) + args, kwargs)
            from .._capture import refuse
            refuse(f"the custom autograd.Function {cls.__name__} (its backward is Python code)")
        ctx = _new(cls._backward_cls)
        ctx._to_save = None
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        recording = MODE.grad and any(ctx.needs_input_grad)
        prev, levels = MODE.grad, MODE.fw
        MODE.grad = False
        if levels:  # the Function's derivative is its own: its forward's ops carry no tangents (its `jvp` gives them)
            MODE.fw = ()
            MODE.refresh()
        try:
            outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            MODE.grad = prev
            if levels:
                MODE.fw = levels
                MODE.refresh()
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if levels:
            outs = _function_jvp(cls, ctx, args, outs)
            outputs = outs[0] if single else outs
        if not recording:
            return outputs
        non_diff = getattr(ctx, "_non_diff", ())
        ctx.n_out = len(outs)
        wrapped, meta = [], []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                wrapped.append(o)
                meta.append(None)
                continue
            if any(o is a for a in args):
                o = o.detach()  # returned an input as is: give the output its own identity
            meta.append((o.shape, o._data.dtype, o.device))
            if id(o) in non_diff or not dt.is_float(o._data.dtype):
                o._requires_grad = False
            else:
                o._edge = ctx if ctx.n_out == 1 else Slot(ctx, i)
                o._requires_grad = True
            wrapped.append(o)
        ctx._out_meta = meta
        ctx._in_meta = [(a.shape, a._data.dtype) if isinstance(a, Tensor) and a._requires_grad else None for a in args]
        record(ctx, args, wrapped)
        return wrapped[0] if single else tuple(wrapped)
