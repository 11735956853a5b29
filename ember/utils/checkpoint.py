"""Activation checkpointing, as `torch.utils.checkpoint`: trade compute for memory.

Contract. `checkpoint(function, *args, **kwargs)` returns what `function(*args, **kwargs)` returns, and
gradients through it are those of the plain call (bit for bit: the recomputation repeats the same ops on the
same values). What differs is memory and time:

- memory: between the forward and the backward, a checkpointed region keeps only its arguments and its
  outputs alive, not the activations its ops saved for their backward. Checkpointing every block of a deep
  network therefore keeps one tensor per block instead of all the intermediates of every block.
- time: backward runs `function` once more (the "recomputation") before differentiating it, so a training
  step costs one extra forward of each checkpointed region (roughly a third more when everything is).

The recomputation starts from the random state the forward started from (the CPU generator's, and that of the
CUDA devices holding tensor arguments; `preserve_rng_state=False` skips this), so dropout draws the same masks
in both and the gradients are those of the forward that was actually run. (On the CPU the draws are also those
of the plain call. A CUDA generator reseeds itself when its state is read, see `Generator.get_state`, so on CUDA
the masks differ from the plain call's, while forward and recomputation still agree.) It must otherwise repeat the forward:
`determinism_check="default"` raises `CheckpointError` when the recomputation records a different graph or
saves tensors of other shapes, dtypes or devices; `"none"` checks only the graph's structure, which backward
needs to route gradients. If `function` reads something that changed since the forward (a global, a flag),
the gradients are those of the changed function.

Two implementations, chosen by `use_reentrant` as in PyTorch (pass it explicitly; without it, a warning and
`use_reentrant=True`, PyTorch 2.13's behaviour):

- `use_reentrant=False` (recommended). One graph node, `CheckpointBackward`, stands for the whole region. Its
  edges lead to every tensor from outside the region that the region's gradients reach: the arguments, and
  what `function` reads without taking it as an argument (a Module's parameters, a tensor in a closure), so
  `.backward()` fills their `.grad` and `autograd.grad` reaches them exactly as without checkpointing. Keyword
  arguments pass through; outputs may be tensors or (nested) tuples, lists and dicts holding them; regions nest;
  `create_graph=True` (double backward) works.
- `use_reentrant=True`: a `CheckpointFunction` (an autograd Function) that runs `function` under `no_grad` and,
  in backward, runs a nested `backward()` of the recomputation. Parameters get their `.grad` from that nested
  pass, so only a plain `.backward()` works (not `autograd.grad`, nor `backward(inputs=...)`); at least one
  tensor argument must require grad; no keyword arguments.

How the non-reentrant node finds its edges. PyTorch keeps the region's graph and only drops its saved tensors
(saved-tensor hooks); ember's nodes hold their saved tensors directly, so instead the forward runs `function`
with grad mode on, reads the graph it recorded from the outputs back, and then lets that graph go. A node is
*inside* the region when it dies with the outputs (nothing outside holds it) or when it is kept alive from
outside but leads back to the arguments (an activation a hook stored); the edges of the region are what
inside nodes point to that is not inside: the arguments (reached through a view of each that the region takes
first, so that they are told apart from anything older), leaves (parameters), and older nodes (a tensor with a
history that `function` reads from its closure). Backward recomputes, walks the new graph in step with the
recorded one (that is the determinism check), points the new graph's boundary edges at private stand-in
leaves, differentiates it with `autograd.grad` and hands each stand-in's gradient to the matching edge. The
walk covers the region; only a tensor with a history read from the closure makes the forward read that
history, down to the next checkpointed region or the leaves.

Not supported by the non-reentrant variant (backward raises `CheckpointError` with this advice): a tensor
computed inside `function` from tensors it does not take as arguments (say a Module's weight times a scale)
and kept alive outside it (cached on the Module), which cannot be told from one computed before the call:
compute it outside the region or pass it as an argument; and a leaf made inside `function` with
`requires_grad=True`.
"""
from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from typing import Any, Callable, Iterable

import numpy as np

from .. import _capture
from .._creation import get_rng_state, set_rng_state
from .._tensor import TENSOR_TYPES, Slot, Tensor, make, version
from ..autograd import engine
from ..autograd.function import Function, Node
from ..autograd.grad_mode import MODE, enable_grad
from ..random import fork_rng

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction", "noop_context_fn",
           "set_checkpoint_debug_enabled", "check_backward_validity", "detach_variable", "get_device_states",
           "set_device_states"]

_DETERMINISM_CHECKS = ("default", "none")


class CheckpointError(RuntimeError):
    """The recomputation in backward did not repeat the checkpointed forward."""


def noop_context_fn() -> tuple:
    """The default `context_fn`: no context manager around the forward, none around the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


_DEBUG: list = [None]  # set_checkpoint_debug_enabled's override of each call's `debug` (None: no override)


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None):
    """Within the block, `debug=enabled` for every non-reentrant checkpoint (None: each call's own `debug`)."""
    prev = _DEBUG[0]
    _DEBUG[0] = enabled
    try:
        yield
    finally:
        _DEBUG[0] = prev


# ---------------------------------------------------------------------- random state
def get_device_states(*args) -> tuple[list[int], list[Tensor]]:
    """The CUDA devices holding tensors in `args` (searched through tuples, lists and dicts) and each one's
    generator state. (An ember CUDA generator reseeds itself when its state is read: see Generator.get_state.)"""
    ids: list[int] = []
    for t in _tensors(args):
        d = t.device
        if d.type == "cuda" and d.index not in ids:
            ids.append(d.index)
    if not ids:
        return [], []
    from .. import cuda
    return ids, [cuda.get_rng_state(i) for i in ids]


def set_device_states(devices: Iterable[int], states: Iterable[Tensor], *, device_type: str | None = None) -> None:
    """Restore the generator states from `get_device_states` on those CUDA devices."""
    if device_type not in (None, "cuda"):
        raise RuntimeError(f"set_device_states(): ember's only accelerator is CUDA, got device_type={device_type!r}")
    devices, states = list(devices), list(states)
    if devices:
        from .. import cuda
        for d, s in zip(devices, states):
            cuda.set_rng_state(s, d)


class _Replay:
    """The random state a forward started from (None: preserve_rng_state=False) and its autocast settings:
    `with replay():` runs the recomputation from them (so it casts as the forward did, as PyTorch's checkpoint
    does), and afterwards puts back the state of the surrounding code, so that the recomputation's draws do not
    shift the draws that follow it."""

    __slots__ = ("cpu", "devices", "states", "amp")

    def __init__(self, preserve_rng_state: bool, tensor_args) -> None:
        from ..amp import autocast_mode as am
        self.cpu = get_rng_state() if preserve_rng_state else None
        self.devices, self.states = get_device_states(tensor_args) if preserve_rng_state else ([], [])
        self.amp = {d: (am._STATE.enabled[d], am._STATE.dtype[d]) for d in ("cpu", "cuda")}

    @contextlib.contextmanager
    def __call__(self):
        from ..amp import autocast_mode as am
        with fork_rng(devices=self.devices, enabled=self.cpu is not None), contextlib.ExitStack() as regions, \
                _no_cast_cache():
            for d, (enabled, dtype) in self.amp.items():
                if (am._STATE.enabled[d], am._STATE.dtype[d]) != (enabled, dtype):
                    regions.enter_context(am.autocast(d, dtype=dtype, enabled=enabled))
            if self.cpu is not None:
                set_rng_state(self.cpu)
                set_device_states(self.devices, self.states)
            yield


@contextlib.contextmanager
def _no_cast_cache():
    """Autocast's weight-cast cache off inside a non-reentrant region: a cached cast made in the forward would
    be a tensor of the region kept alive outside it (in the cache), which the recomputation, run outside the
    forward's autocast region, would make anew; uncached, each run makes its own casts inside the region."""
    from ..amp import autocast_mode as am
    prev = am.is_autocast_cache_enabled()
    am.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        am.set_autocast_cache_enabled(prev)


# ---------------------------------------------------------------------- nested arguments and results
def _tensors(obj):
    """The tensors in obj: itself, or those in (nested) tuples, lists and dict values, in order."""
    if obj.__class__ in TENSOR_TYPES or isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _replace(obj, new):
    """obj with its tensors (in `_tensors` order) replaced by the successive items of the iterator `new`."""
    if obj.__class__ in TENSOR_TYPES or isinstance(obj, Tensor):
        return next(new)
    if isinstance(obj, tuple):
        items = [_replace(o, new) for o in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, list):
        return type(obj)([_replace(o, new) for o in obj])
    if isinstance(obj, dict):
        return type(obj)((k, _replace(v, new)) for k, v in obj.items())
    return obj


# ---------------------------------------------------------------------- use_reentrant=True
def check_backward_validity(inputs: Iterable) -> None:
    """Warn when no tensor in `inputs` requires grad: a reentrant checkpoint of them has nothing to differentiate."""
    if not any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        warnings.warn("checkpoint(use_reentrant=True): none of the tensor arguments requires grad, so the outputs "
                      "do not either and no gradient will flow through the checkpointed function (pass an input "
                      "with requires_grad=True, or use use_reentrant=False, which also follows the parameters)",
                      stacklevel=2)


def detach_variable(inputs: tuple) -> tuple:
    """`inputs` with each tensor replaced by a detached copy that requires grad when the tensor did."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"detach_variable(): expected a tuple of inputs, got {type(inputs).__name__}")
    out = []
    for a in inputs:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            a = d
        out.append(a)
    return tuple(out)


class _Internal(threading.local):
    def __init__(self) -> None:
        self.indices: set = set()  # positions in engine.running_passes() of the passes a region runs itself


_INTERNAL = _Internal()


def _pass_has_targets() -> bool:
    """Whether the backward pass running in this thread was asked for the gradients of given tensors
    (`autograd.grad`, or `backward(inputs=...)`) rather than for all leaves' `.grad`. The passes that a
    non-reentrant region runs to differentiate its recomputation (`_Lockstep.differentiate`) are looked past:
    what counts is the pass around them."""
    passes = engine.running_passes()
    for i in range(len(passes) - 1, -1, -1):
        if i not in _INTERNAL.indices:
            return passes[i].has_targets
    return False


class CheckpointFunction(Function):
    """`checkpoint(..., use_reentrant=True)`: forward under no_grad, keeping only the arguments; backward
    recomputes on detached copies of them and runs a nested `backward()`, which accumulates into the
    parameters' `.grad` and into the copies, whose gradients are this Function's input gradients."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.replay = _Replay(preserve_rng_state, args)
        # (not `ctx.inputs`: that is the node's slot for what save_for_backward saved)
        ctx.arguments = [None if isinstance(a, Tensor) else a for a in args]  # tensors come back from saved_tensors
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run_function(*args)  # (Function.apply runs forward with grad mode off)

    @staticmethod
    def backward(ctx, *grads):
        if _pass_has_targets():
            raise RuntimeError("checkpoint(use_reentrant=True) supports only .backward() without `inputs`: its "
                               "backward runs a nested backward() that accumulates into every leaf's .grad, so it "
                               "cannot answer autograd.grad() or backward(inputs=...). Use use_reentrant=False, or "
                               "call .backward() without `inputs`.")
        inputs = list(ctx.arguments)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        detached = detach_variable(tuple(inputs))
        with ctx.replay(), enable_grad():
            outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        roots, seeds = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o.requires_grad:
                roots.append(o)
                seeds.append(g)
        if not roots:
            raise RuntimeError("checkpoint(use_reentrant=True): no output of the recomputed function requires grad, "
                               "so there is nothing to differentiate; this function need not be checkpointed")
        engine.backward(roots, seeds)
        return (None, None) + tuple(t.grad if isinstance(t, Tensor) else None for t in detached)


# ---------------------------------------------------------------------- use_reentrant=False
_ALIAS, _LEAF, _NODE = 0, 1, 2  # kinds of a recorded edge: an argument, a leaf tensor, output nr of a node


class _Regions(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # per checkpointed forward running in this thread: ids of the nodes it made


_REGIONS = _Regions()


def _endpoint(e):
    """An edge of `Node.next` as (node, output index), or the leaf tensor itself (see engine._endpoints)."""
    if e.__class__ is Slot:
        return e.node, e.nr
    if e.__class__ in TENSOR_TYPES:
        return e
    return e, 0


def _saved_meta(node: Node) -> tuple:
    """What the determinism check compares for one node: the shape, dtype and device of each tensor or array it
    saved for its backward (its saved inputs, its output, the buffers its forward stored on it) and the shapes
    it noted (`in_shape`...), as (what, shape, dtype, device) entries."""
    out = []
    saved = node.inputs
    if saved.__class__ is tuple:  # (not None: saves nothing; not FREED)
        for t in saved:
            if t.__class__ in TENSOR_TYPES:
                out.append(_array_meta("saved input", t._data))
    if node.out is not None:
        out.append(_array_meta("output", node.out))
    if not node._user_ctx and node.__class__ is not CheckpointBackward:  # (their attributes are not op buffers)
        for k, v in node.__dict__.items():
            if isinstance(v, Tensor):
                out.append(_array_meta(k, v._data))
            elif hasattr(v, "nbytes") and hasattr(v, "shape"):
                out.append(_array_meta(k, v))
            elif v.__class__ is tuple and v and all(i.__class__ is int for i in v):
                out.append((k, v, None, None))
    return tuple(out)


def _array_meta(what: str, a) -> tuple:
    d = getattr(a, "device", "cpu")  # NumPy 2: "cpu"; CuPy: a Device
    return what, a.shape, a.dtype, d if d.__class__ is str else f"cuda:{getattr(d, 'id', d)}"


def _tensor_meta(t: Tensor) -> tuple:
    return tuple(t.shape), t.dtype, str(t.device)


def _alias_arguments(args: tuple, kwargs: dict):
    """The tensor arguments (top level of args and kwargs) and the arguments to call the function with: each
    tensor that requires grad replaced by a view of itself, a node of this call's own that marks where the
    graph leaves the region through that argument. Returns (originals, args, kwargs, {view node: position})."""
    originals: list = []
    marks: dict = {}

    def mark(a):
        if not isinstance(a, Tensor):
            return a
        i = len(originals)
        originals.append(a)
        if not a._requires_grad:
            return a
        v = a.view_as(a)
        marks[v._edge] = i
        return v

    return originals, tuple(mark(a) for a in args), {k: mark(v) for k, v in kwargs.items()}, marks


def _walk(outs: list, marks: dict, stops: set, created: set, with_meta: bool):
    """Read the graph that the region's forward recorded, from its differentiable outputs `outs` back to the
    argument views (`marks`), leaves, and nodes known to be older (`stops`: the arguments' own nodes, and
    regions other than those made inside this one, `created`). Returns the outputs' edges and one record per node
    reached, `(type, saved metadata, creation trace, edges)` (edges None for a node not read further), each
    edge as (_ALIAS, position), (_LEAF, tensor) or (_NODE, record index, output index); and weak references to
    the nodes, so that the caller can see which ones outlive the region's outputs."""
    index: dict = {}
    nodes: list = []

    def edge(e):
        if e is None:
            return None
        end = _endpoint(e)
        if end.__class__ is not tuple:
            return _LEAF, end
        n, nr = end
        i = marks.get(n)
        if i is not None:
            return _ALIAS, i
        k = index.get(n)
        if k is None:
            k = index[n] = len(nodes)
            nodes.append(n)
        return _NODE, k, nr

    out_edges = [edge(o._edge if o._edge is not None else o) for o in outs]
    records = []
    k = 0
    while k < len(nodes):
        n = nodes[k]
        if n in stops or (n.__class__ is CheckpointBackward and id(n) not in created):
            records.append((type(n), None, None, None))
        else:
            records.append((type(n), _saved_meta(n) if with_meta else None, n.trace,
                            [edge(e) for e in n.next]))
        k += 1
    return out_edges, records, [weakref.ref(n) for n in nodes]


def _inside(records: list, refs: list) -> list:
    """Which recorded nodes belong to the region: those that died with its outputs, and those that outlive them
    but lead back to an argument view (something outside holds an activation: a hook, a cache). The others are
    alive because they are older than the region (or hold only what it computed from older tensors, which
    cannot be told apart). A live node holds everything below it, so the nodes below a live one are live."""
    inside = [r() is None for r in refs]
    reaches = [None] * len(records)
    for start in range(len(records)):
        if inside[start] or reaches[start] is not None:
            continue
        stack = [(start, False)]
        while stack:
            k, done = stack.pop()
            edges = records[k][3]
            if done:
                reaches[k] = edges is not None and any(
                    e is not None and (e[0] == _ALIAS or (e[0] == _NODE and reaches[e[1]])) for e in edges)
                continue
            if reaches[k] is not None:
                continue
            stack.append((k, True))
            for e in edges or ():
                if e is not None and e[0] == _NODE and reaches[e[1]] is None:
                    stack.append((e[1], False))
    return [a or bool(r) for a, r in zip(inside, reaches)]


def _boundary_edges(out_edges: list, records: list, inside: list, originals: list, refs: list):
    """The edges of a region's node: one per distinct thing outside the region that an inside node or an output
    points to (an argument, a leaf, output nr of an older node), as `Node.next` holds them; and a map from each
    recorded edge's key to its index there (what backward hands a stand-in's gradient to)."""
    keys: dict = {}
    edges: list = []

    def add(e):
        if e is None:
            return
        kind = e[0]
        if kind == _NODE:
            if inside[e[1]]:
                return
            key = ("n", e[1], e[2])
        else:
            key = ("a", e[1]) if kind == _ALIAS else ("l", id(e[1]))
        if key in keys:
            return
        keys[key] = len(edges)
        if kind == _ALIAS:
            a = originals[e[1]]
            edges.append(a._edge if a._edge is not None else a)
        elif kind == _LEAF:
            edges.append(e[1])
        else:
            n = refs[e[1]]()
            edges.append(n if n.n_out == 1 else Slot(n, e[2]))

    for e in out_edges:
        add(e)
    for k, r in enumerate(records):
        if inside[k]:
            for e in r[3]:
                add(e)
    return tuple(edges), keys


class CheckpointBackward(Node):
    """The graph node of a non-reentrant checkpointed region (see the module's docstring). `next` holds one
    edge per tensor from outside the region that its gradients reach; backward recomputes the region and
    differentiates the recomputation."""

    def name(self) -> str:
        return "CheckpointBackward"

    def _backward(self, g):
        self._check_saved()
        create = MODE.grad  # the engine runs a node's backward with grad mode = create_graph
        match = _Lockstep(self)
        prev_anomaly = MODE.anomaly
        with self._replay(), enable_grad(), self._recompute_ctx:
            _, args, kwargs, match.marks = _alias_arguments(self._args, self._kwargs)
            if self._debug:
                MODE.anomaly = True  # (each node keeps its creation traceback)
            try:
                ret = self._fn(*args, **kwargs)
            finally:
                MODE.anomaly = prev_anomaly
        return match.differentiate(ret, g if self.n_out > 1 else [g], create)


class _Lockstep:
    """One backward of a CheckpointBackward: the recomputed graph walked in step with the recorded one (which
    checks that it repeats it and pairs their boundary edges), then differentiated."""

    def __init__(self, node: CheckpointBackward) -> None:
        self.node = node
        # hold the recorded nodes that are still alive, so that a node made by the recomputation cannot take
        # the identity of one that dies meanwhile (a hook replacing an activation it keeps)
        self.hold = [n for n in (r() for r in node._refs) if n is not None]
        self.hold_ids = {id(n) for n in self.hold}
        self.marks: dict = {}  # the recomputation's argument views -> position
        self.standins: dict = {}  # index in node.next -> the leaf that stands for that edge in the recomputation
        self.mapped: dict = {}  # recorded node index -> recomputed node
        self.taken: set = set()  # ids of the recomputed nodes in `mapped`
        self.queue: list = []
        self.ops: list = []  # (class, creation trace) of the recomputed nodes matched so far, for debug

    def mismatch(self, what: str):
        node = self.node
        msg = (f"ember.utils.checkpoint: the recomputation in backward did not repeat the checkpointed forward: "
               f"{what}. The function must run the same ops on tensors of the same shapes in both (make anything "
               f"that changes between calls an argument)")
        if not node._debug:
            msg += "; pass debug=True to list the ops of both runs."
        else:
            fwd = [(r[0], r[2]) for r, inside in zip(node._records, node._in) if inside]
            msg += "\n\nOps recorded by the original forward (from the outputs back):\n" + _op_list(fwd)
            msg += "\n\nOps recorded by the recomputation, as far as they matched:\n" + _op_list(self.ops)
        raise CheckpointError(msg)

    def boundary(self, e, e2):
        """The index in `next` of the boundary edge that the recorded edge `e` stands for, after checking that the
        recomputation's edge `e2` reaches the same tensor (None: `e` leads inside the region)."""
        node = self.node
        kind = e[0]
        end = None if e2 is None else _endpoint(e2)
        if kind == _ALIAS:
            if end.__class__ is not tuple or self.marks.get(end[0]) != e[1]:
                self.mismatch(f"argument {e[1]} of the checkpointed function is no longer used at the same place")
            return node._keys[("a", e[1])]
        if kind == _LEAF:
            if end is not e[1]:
                self.mismatch(f"a leaf tensor of shape {list(e[1].shape)} (a parameter, or a tensor read from a "
                              f"closure) is no longer used at the same place, or the function made it itself "
                              f"(requires_grad=True inside a checkpointed function is not supported)")
            return node._keys[("l", id(e[1]))]
        k, nr = e[1], e[2]
        if node._in[k]:
            return None
        if end.__class__ is not tuple or end[0] is not node._refs[k]() or end[1] != nr:
            self.mismatch(f"a tensor computed before the call ({_op_name(node._records[k][0])} output {nr}) is no "
                          f"longer used at the same place, or the function computed it itself from tensors that are "
                          f"not its arguments and kept it alive outside (cached it): then compute it outside the "
                          f"checkpointed function or pass it as an argument")
        return node._keys[("n", k, nr)]

    def pair(self, e, e2):
        """Match recorded edge e with recomputed edge e2: the stand-in leaf that replaces e2, or None to keep it."""
        if e is None:
            if e2 is not None:
                self.mismatch("an op input that did not require grad in the forward does now")
            return None
        if e2 is None:
            self.mismatch("an op input that required grad in the forward does not now")
        idx = self.boundary(e, e2)
        if idx is not None:
            s = self.standins.get(idx)
            if s is None:
                s = self.standins[idx] = make(np.zeros(()), True)  # (only its identity matters to autograd.grad)
            return s
        k, nr = e[1], e[2]
        end = _endpoint(e2)
        if end.__class__ is not tuple or end[1] != nr:
            self.mismatch("the graph differs")
        n2 = end[0]
        if id(n2) in self.hold_ids or n2 in self.marks:
            self.mismatch("an op reads another tensor than in the forward")
        m = self.mapped.get(k)
        if m is None:
            if id(n2) in self.taken:
                self.mismatch("the graph differs (two recorded ops match one recomputed op)")
            self.mapped[k] = n2
            self.taken.add(id(n2))
            self.queue.append(k)
        elif m is not n2:
            self.mismatch("the graph differs")
        return None

    def check_node(self, k: int, n2) -> None:
        """The determinism check of one pair of ops (determinism_check="default")."""
        typ, meta = self.node._records[k][:2]
        if type(n2) is not typ:
            self.mismatch(f"op {_op_name(typ)} of the forward is {_op_name(type(n2))} in the recomputation")
        meta2 = _saved_meta(n2)
        if meta2 != meta:
            diff = [(a, b) for a, b in zip(meta, meta2) if a != b]
            detail = (f"{_fmt_meta(diff[0][0])} in the forward, {_fmt_meta(diff[0][1])} in the recomputation" if diff
                      else f"{_fmt_metas(meta)} in the forward, {_fmt_metas(meta2)} in the recomputation")
            self.mismatch(f"op {_op_name(typ)} (number {len(self.ops)} from the outputs back) saved different "
                          f"tensors: {detail}")

    def differentiate(self, ret, grads: list, create: bool) -> tuple:
        """Walk the recomputed graph `ret` in step with the recorded one, point its boundary edges at stand-in
        leaves, differentiate it for `grads` (one per output of the node) and return one gradient per edge."""
        node = self.node
        flat = list(_tensors(ret))
        if len(flat) != node._n_flat:
            self.mismatch(f"the function returned {len(flat)} tensors, in the forward {node._n_flat}")
        res: list = [None] * len(node.next)
        roots, seeds = [], []
        for pos, e, meta, g in zip(node._diff, node._out_edges, node._out_meta, grads):
            o2 = flat[pos]
            if not o2._requires_grad:
                self.mismatch(f"output {pos} required grad in the forward and does not now")
            if node._check and _tensor_meta(o2) != meta:
                self.mismatch(f"output {pos} was {_fmt_meta(meta)} in the forward and is {_fmt_meta(_tensor_meta(o2))}")
            e2 = o2._edge if o2._edge is not None else o2
            if e[0] == _NODE and node._in[e[1]]:
                self.pair(e, e2)
                if g is not None:
                    roots.append(o2)
                    seeds.append(g)
            elif g is not None:  # the output is a boundary tensor itself (an argument, a parameter)
                idx = self.boundary(e, e2)
                res[idx] = g if res[idx] is None else res[idx] + g
        rewrites = []
        q = 0
        while q < len(self.queue):
            k = self.queue[q]
            q += 1
            n2 = self.mapped[k]
            self.ops.append((type(n2), n2.trace))
            if node._check:
                self.check_node(k, n2)
            edges = node._records[k][3]
            nxt = n2.next
            if len(nxt) != len(edges):
                self.mismatch(f"op {_op_name(type(n2))} has {len(nxt)} inputs in the recomputation, {len(edges)} in "
                              f"the forward")
            new = [self.pair(e, e2) for e, e2 in zip(edges, nxt)]
            if any(s is not None for s in new):
                rewrites.append((n2, nxt, tuple(e2 if s is None else s for e2, s in zip(nxt, new))))
        if roots and self.standins:
            order = sorted(self.standins)
            for n2, _, nxt in rewrites:  # the recomputed graph now ends at the stand-ins: autograd.grad stays in it
                n2.next = nxt
            internal = len(engine.running_passes())  # where the pass about to start will sit
            _INTERNAL.indices.add(internal)
            try:
                got = engine.grad(roots, [self.standins[i] for i in order], grad_outputs=seeds, allow_unused=True,
                                  create_graph=create)
            finally:
                _INTERNAL.indices.discard(internal)
                # back to the real edges: with create_graph, the gradients' own graph runs through these nodes
                for n2, old, _ in rewrites:
                    n2.next = old
            for i, gi in zip(order, got):
                if gi is not None:
                    res[i] = gi if res[i] is None else res[i] + gi
        return tuple(res)


def _op_name(cls: type) -> str:
    return cls.__name__.removesuffix("Backward")


def _fmt_meta(m) -> str:
    """One (what, shape, dtype, device) entry of `_saved_meta`, or an output's (shape, dtype, device)."""
    if len(m) == 3:
        m = (None,) + tuple(m)
    what, shape, dtype, device = m
    head = "" if what is None else f"{what} "
    return f"{head}{list(shape)}" if dtype is None else f"{head}{list(shape)} {dtype} on {device}"


def _fmt_metas(ms) -> str:
    return "(" + ", ".join(_fmt_meta(m) for m in ms) + ")"


def _op_list(ops: list) -> str:
    lines = []
    for i, (cls, trace) in enumerate(ops):
        lines.append(f"  {i}. {_op_name(cls)}")
        if trace:
            lines.append("     created at:\n" + "\n".join("       " + ln for ln in trace.rstrip().splitlines()))
    return "\n".join(lines) if lines else "  (none)"


def _checkpoint_without_reentrant(function: Callable, preserve_rng_state: bool, context_fn: Callable,
                                  determinism_check: str, debug: bool, args: tuple, kwargs: dict):
    """The forward of a non-reentrant region: run `function` recording its graph, read that graph, let it go,
    and return the results attached to one CheckpointBackward node (see the module's docstring)."""
    forward_ctx, recompute_ctx = context_fn()
    if not MODE.grad:
        return function(*args, **kwargs)  # nothing is recorded, so nothing would be kept: a plain call
    originals, args1, kwargs1, marks = _alias_arguments(args, kwargs)
    versions = tuple(version(t) for t in originals)  # before the call: an in-place write in it must be caught
    stops = set()
    for t in _tensors((args, kwargs)):
        if t._edge is not None:
            stops.add(_endpoint(t._edge)[0])
    replay = _Replay(preserve_rng_state, (args, kwargs))
    created: set = set()
    _REGIONS.stack.append(created)
    prev_anomaly = MODE.anomaly
    finished = False
    try:
        if debug:
            MODE.anomaly = True  # (each node keeps its creation traceback, for the error message)
        with forward_ctx, _no_cast_cache():
            ret = function(*args1, **kwargs1)
            finished = True
    finally:
        MODE.anomaly = prev_anomaly
        _REGIONS.stack.pop()
    if not finished:
        raise RuntimeError("checkpoint: the forward context manager from context_fn suppressed an exception raised "
                           "by the checkpointed function, so there is no result to return; let it propagate")
    flat = list(_tensors(ret))
    diff = [j for j, t in enumerate(flat) if t._requires_grad]
    if not diff:
        return ret  # nothing to differentiate: the graph (if any) is already gone
    outs = [flat[j] for j in diff]
    out_edges, records, refs = _walk(outs, marks, stops, created, determinism_check == "default")
    node = CheckpointBackward()
    n_out = len(outs)
    node.n_out = n_out
    originals_set = {id(t) for t in originals}
    new = list(flat)
    for i, (j, o) in enumerate(zip(diff, outs)):
        t = make(o._data, True, node if n_out == 1 else Slot(node, i))
        if o._base is not None and id(o._base) in originals_set:
            t._base = o._base  # a view of an argument stays one (its in-place writes bump the argument's version)
        new[j] = t
    out_meta = [_tensor_meta(o) for o in outs]
    n_flat = len(flat)
    result = _replace(ret, iter(new))
    del ret, flat, outs, o, new, marks  # let the recorded graph go: what survives is held from outside
    inside = _inside(records, refs)

    edges, keys = _boundary_edges(out_edges, records, inside, originals, refs)
    node.next = edges
    node.inputs = tuple(originals)
    node.versions = versions
    node.out = node.out_version = None
    # the records of nodes outside the region are only compared by identity: drop what they point to
    node._records = [r if inside[k] else (r[0], None, None, None) for k, r in enumerate(records)]
    node._in = inside
    node._refs = refs
    node._keys = keys
    node._out_edges = out_edges
    node._out_meta = out_meta
    node._diff = diff
    node._n_flat = n_flat
    node._fn = function
    node._args = args
    node._kwargs = kwargs
    node._replay = replay
    node._recompute_ctx = recompute_ctx
    node._check = determinism_check == "default"
    node._debug = debug
    if MODE.anomaly:
        from ..autograd.anomaly import creation_trace
        node.trace = creation_trace()
    stack = _REGIONS.stack
    if stack:
        stack[-1].add(id(node))
    return result


# ---------------------------------------------------------------------- the API
def checkpoint(function: Callable, *args, use_reentrant: bool | None = None,
               context_fn: Callable[[], tuple] = noop_context_fn, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs) -> Any:
    """`function(*args, **kwargs)` without keeping its activations for backward, which recomputes them.

    use_reentrant: False (recommended) or True, see the module's docstring; None warns and means True.
    context_fn: returns two context managers, entered around the forward and around the recomputation
        (use_reentrant=False only).
    determinism_check: "default" compares the recomputation's graph and saved tensors (shape, dtype, device)
        with the forward's and raises CheckpointError on a difference; "none" compares the graph's shape only.
    debug: on a CheckpointError, list the ops of both runs with where each was created (use_reentrant=False only).
    preserve_rng_state: recompute from the random state the forward started from (dropout masks repeat).
    kwargs: passed to `function` (use_reentrant=False only).
    """
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: pass use_reentrant explicitly. Without it checkpoint uses the "
                      "reentrant variant, as PyTorch 2.13 does; use_reentrant=False is recommended (it supports "
                      "autograd.grad, backward(inputs=...) and keyword arguments).", UserWarning, stacklevel=2)
        use_reentrant = True
    if not callable(function):
        raise TypeError(f"checkpoint(): function must be callable, got {type(function).__name__}")
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(f"checkpoint(): determinism_check must be one of {list(_DETERMINISM_CHECKS)}, "
                         f"got {determinism_check!r}")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs) + " (checkpoint passes keyword "
                             "arguments to the function only with use_reentrant=False)")
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("checkpoint(): context_fn and debug need use_reentrant=False")
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    debug = bool(_DEBUG[0] if _DEBUG[0] is not None else debug)
    if debug and context_fn is not noop_context_fn:
        raise ValueError("checkpoint(): debug=True needs the default context_fn (it uses the contexts itself)")
    tracer = _capture.ACTIVE
    call = (function, preserve_rng_state, context_fn, determinism_check, debug, args, kwargs)
    if tracer is not None and tracer.depth == 0:
        if getattr(tracer, "lazy", False):  # ember.lazy: pending values first, then the region runs eagerly
            return tracer.opaque(_checkpoint_without_reentrant, call, {})
        _capture.refuse("ember.utils.checkpoint (its backward re-runs Python code)")
    return _checkpoint_without_reentrant(*call)


def checkpoint_sequential(functions, segments: int, input: Tensor, use_reentrant: bool | None = None, **kwargs):
    """Run `functions` (an nn.Sequential, or a list of modules or functions) one after the other on `input`,
    split into `segments` consecutive runs of len(functions) // segments each (the last one takes the rest):
    every segment but the last is checkpointed, so only its input is kept for backward.
    Keyword arguments: preserve_rng_state (default True)."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint.checkpoint_sequential: pass use_reentrant explicitly. Without it the "
                      "reentrant variant is used, as PyTorch 2.13 does; use_reentrant=False is recommended.",
                      UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs) + " (checkpoint_sequential takes "
                         "preserve_rng_state only)")
    from ..nn import Sequential
    functions = list(functions.children()) if isinstance(functions, Sequential) else list(functions)
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)):
        raise TypeError(f"checkpoint_sequential(): segments must be an int, got {type(segments).__name__}")
    if not 1 <= segments <= len(functions):
        raise ValueError(f"checkpoint_sequential(): segments must be between 1 and the number of functions "
                         f"({len(functions)}), got {segments}")

    def run(start: int, end: int):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    start = 0
    for _ in range(segments - 1):
        input = checkpoint(run(start, start + size), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
        start += size
    return run(start, len(functions))(input)
