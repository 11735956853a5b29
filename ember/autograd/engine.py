"""The reverse-mode engine: `backward` and `grad`.

Iterative, never recursive. One pass counts, for every node reachable from the roots,
how many edges point at it; the second runs a node as soon as all of its consumers
have delivered their gradients (count reaches zero), so each node runs exactly once, in
a valid order, however the graph branches and joins. Gradients reaching the same node
are summed; leaves accumulate into `.grad`.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from .._tensor import TENSOR_TYPES, Slot, Tensor, bump_version, make, on_device_of, writable
from .function import FREED, Node, free_buffers
from ..backend import array_module
from .grad_mode import MODE


def _as_list(x, what: str) -> list:
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _root_grads(outputs: list, grads, create_graph: bool, op: str) -> list:
    if grads is None:
        grads = [None] * len(outputs)
    grads = _as_list(grads, "grad_tensors") if not isinstance(grads, list) else grads
    if len(grads) != len(outputs):
        raise RuntimeError(f"{op}: got {len(grads)} gradients for {len(outputs)} outputs; pass one per output")
    out = []
    for i, (t, g) in enumerate(zip(outputs, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: outputs[{i}] must be a Tensor, got {type(t).__name__}")
        if g is None:
            if t.data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs; {op} got an output of shape "
                                   f"{list(t.shape)}: pass gradient=<tensor of that shape> (e.g. ones_like(output))")
            with on_device_of(t.data):
                g = make(array_module(t.data).ones_like(t.data))
        else:
            if not isinstance(g, Tensor):  # as PyTorch: a list or array is not converted (its dtype/device would be guessed)
                raise TypeError(f"{op}: gradients can be either Tensors or None, but got {type(g).__name__} "
                                f"(grad_tensors[{i}], for an output of shape {list(t.shape)})")
            if g.data.__class__ is not t.data.__class__ and g.device != t.device:
                raise RuntimeError(f"{op}: grad_output[{i}] is on {g.device} but output[{i}] is on {t.device}; "
                                   f"move the gradient with .to({str(t.device)!r})")
            if g.shape != t.shape:
                raise RuntimeError(f"{op}: Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and output[{i}] "
                                   f"has a shape of {list(t.shape)}")
            if not create_graph and g._requires_grad:
                g = g.detach()
        out.append(g)
    return out


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate gradients of `tensors` into the `.grad` of the leaves (or of `inputs`)."""
    tensors = _as_list(tensors, "tensors")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(tensors, grad_tensors, create_graph, "backward")
    if inputs is not None:
        inputs = _as_list(inputs, "inputs")
        if not inputs:
            raise RuntimeError("backward: 'inputs' argument to backward() cannot be empty.")
    _check_roots(tensors)
    _run(tensors, grads, retain_graph, create_graph, inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool | None = None, materialize_grads: bool = False) -> tuple:
    """Return d(outputs)/d(inputs) (vector-Jacobian products with `grad_outputs`) without touching `.grad`."""
    outputs = _as_list(outputs, "outputs")
    inputs = _as_list(inputs, "inputs")
    if not inputs:
        raise RuntimeError("grad requires at least one input")
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs[{i}] must be a Tensor, got {type(t).__name__}")
        if not t._requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}], shape {list(t.shape)}) does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    grads = _root_grads(outputs, grad_outputs, create_graph, "grad")
    _check_roots(outputs)
    result = _run(outputs, grads, retain_graph, create_graph, inputs, accumulate=False)
    for i, g in enumerate(result):
        if g is None:
            if materialize_grads:
                with on_device_of(inputs[i].data):
                    result[i] = make(array_module(inputs[i].data).zeros_like(inputs[i].data))
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}], shape {list(inputs[i].shape)}) appears to "
                                   f"not have been used in the graph. Set allow_unused=True if this is the desired behavior.")
    return tuple(result)


def _check_roots(outputs: list) -> None:
    for i, t in enumerate(outputs):
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn "
                               f"(shape {list(t.shape)}); did you compute it under no_grad, or forget requires_grad=True on an input?")


def _key(e):
    """(node, output index) of a non-leaf edge."""
    return (e.node, e.nr) if type(e) is Slot else (e, 0)


class _Callbacks(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # one list of queued callbacks per backward pass running in this thread


_CALLBACKS = _Callbacks()


def queue_callback(callback) -> None:
    """Run `callback()` when the backward pass now running (in this thread) ends, after every
    gradient and post-accumulate-grad hook of that pass (PyTorch's
    `Variable._execution_engine.queue_callback`). Callbacks run in the order queued; none run when
    the pass raises."""
    stack = _CALLBACKS.stack
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(callback)


def _run(roots: list, root_grads: list, retain_graph: bool, create_graph: bool, inputs, accumulate: bool):
    callbacks = _CALLBACKS.stack
    callbacks.append([])
    try:
        captured = _pass(roots, root_grads, retain_graph, create_graph, inputs, accumulate)
    finally:
        queued = callbacks.pop()
    # a callback may queue another (e.g. for a nested pass): run until none is left
    i = 0
    while i < len(queued):
        queued[i]()
        i += 1
    return captured


def _pass(roots: list, root_grads: list, retain_graph: bool, create_graph: bool, inputs, accumulate: bool):
    run = _Run(inputs, accumulate, create_graph, root_grads)

    # --- pass 1: count the edges into every reachable node
    deps: dict = {}
    order: list = []  # discovery order, used to prune nodes that reach no target
    stack = []
    for t in roots:
        e = t._edge
        if e is not None:
            n = e.node if type(e) is Slot else e
            if n not in deps:
                deps[n] = 0
                stack.append(n)
        elif t._hooks is not None and accumulate:
            run.count_leaf(t)
    pop, push, record_order = stack.pop, stack.append, inputs is not None
    while stack:
        n = pop()
        if record_order:
            order.append(n)
        for e in n.next:
            if e is None:
                continue
            cls = e.__class__
            if cls in TENSOR_TYPES:
                if e._hooks is not None and accumulate:  # the only cost of post-accumulate hooks when none exist
                    run.count_leaf(e)
                continue
            if cls is Slot:
                e = e.node
            c = deps.get(e)
            if c is None:
                deps[e] = 1
                push(e)
            else:
                deps[e] = c + 1
    needed = None if inputs is None else run.needed_nodes(order, deps)

    # --- pass 2: run each node once all its consumers have delivered
    buffers: dict = {}
    prev_mode = MODE.grad
    MODE.grad = create_graph  # backward formulas are ember ops: recorded only for higher-order grads
    try:
        for t, g in zip(roots, root_grads):
            e = t._edge
            if e is None:  # a leaf as a root: its gradient is the seed itself
                run.deliver_leaf(t, g)
            else:
                _add_to_buffer(buffers, e, g)
        # `ready` holds (node, its summed gradient); a node's gradient waits in `buffers` only
        # while other consumers are still to deliver (a chain never touches the dict)
        ready = [(n, buffers.pop(n, None)) for n in deps if deps[n] == 0]
        anomaly = MODE.anomaly
        special = run.node_targets is not None or needed is not None
        pop, push, bpop = ready.pop, ready.append, buffers.pop
        while ready:
            node, g = pop()
            grads = _NONES
            if g is not None:
                hooked = node._hooked
                if hooked or special:
                    g = run.pre_hooks(node, g)
                if needed is None or node in needed:
                    grads = node._backward(g)
                    if anomaly:
                        _check_anomaly(node, grads)
                    if hooked and node._post_hooks:
                        for h in node._post_hooks:
                            r = h(grads, g if isinstance(g, list) else [g])
                            if r is not None:
                                grads = tuple(r)
            if not retain_graph:  # free what the node saved (inline: this loop is the hot path)
                if node.inputs is not None:
                    node.inputs = FREED
                if node.out is not None:
                    node.out = None
                    node.inputs = FREED
                if node.__dict__ and not node._user_ctx:  # arrays its forward kept on the node
                    free_buffers(node)
            for e, gi in zip(node.next, grads):
                if e is None:
                    continue
                cls = e.__class__
                if cls in TENSOR_TYPES:
                    if gi is not None:
                        run.deliver_leaf(e, gi)
                    elif e._hooks is not None and run.pending is not None:
                        run.leaf_edge_done(e, False)
                    continue
                if cls is Slot:
                    if gi is not None:
                        _add_to_buffer(buffers, e, gi)
                    e = e.node
                    gi = None  # delivered into the node's list of output gradients
                c = deps[e] - 1
                if c == 0:
                    old = bpop(e, None)
                    push((e, gi if old is None else (old if gi is None else old + gi)))
                else:
                    deps[e] = c
                    if gi is not None:
                        old = buffers.get(e)
                        buffers[e] = gi if old is None else old + gi
        if run.pending is not None:
            run.flush_post_hooks()
    finally:
        MODE.grad = prev_mode
    return run.captured


class _Nones:
    """Stands for the gradients of a node that did not run: None for every input."""

    def __getitem__(self, i):
        return None

    def __iter__(self):
        while True:
            yield None


_NONES = _Nones()


def _add_to_buffer(buffers: dict, e, g) -> None:
    if type(e) is Slot:
        node, nr = e.node, e.nr
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_out
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    else:
        old = buffers.get(e)
        buffers[e] = g if old is None else old + g


class _Run:
    """State of one backward pass: which gradients are wanted and where they go."""

    def __init__(self, inputs, accumulate: bool, create_graph: bool, root_grads: list) -> None:
        self.inputs, self.accumulate, self.create_graph = inputs, accumulate, create_graph
        # arrays the caller holds: never stored as a .grad without a copy
        self.stolen = {id(g.data) for g in root_grads}
        self.leaf_targets = self.node_targets = self.captured = None
        # id(leaf) -> [edges still to deliver, leaf, got a gradient]: only leaves with post-accumulate hooks
        self.pending = None
        if inputs is not None:
            self.captured = [None] * len(inputs)
            self.leaf_targets, self.node_targets = {}, {}
            for i, t in enumerate(inputs):
                if t._edge is None:
                    self.leaf_targets.setdefault(id(t), []).append(i)
                else:
                    self.node_targets.setdefault(_key(t._edge), []).append(i)

    def needed_nodes(self, order: list, deps: dict) -> set:
        """Nodes whose backward leads to a requested input (the others need not run)."""
        count = dict(deps)
        topo = [n for n in order if count[n] == 0]  # Kahn's order from the roots down
        i = 0
        while i < len(topo):
            for e in topo[i].next:
                if e is None or isinstance(e, Tensor):
                    continue
                n = e.node if type(e) is Slot else e
                count[n] -= 1
                if count[n] == 0:
                    topo.append(n)
            i += 1
        needed: set = set()
        target_nodes = {n for (n, _) in self.node_targets}
        for n in reversed(topo):  # children before parents
            for e in n.next:
                if e is None:
                    continue
                if isinstance(e, Tensor):
                    hit = id(e) in self.leaf_targets
                else:
                    c = e.node if type(e) is Slot else e
                    hit = c in needed or c in target_nodes
                if hit:
                    needed.add(n)
                    break
        return needed

    def pre_hooks(self, node: Node, g):
        """Tensor hooks on this node's outputs, then retain_grad, then capture of requested grads."""
        hooks, retain, targets = node._pre_hooks, node._retain, self.node_targets
        multi = isinstance(g, list)
        gs = g if multi else [g]
        for nr, gn in enumerate(gs):
            if gn is None:
                continue
            if hooks and nr in hooks:
                gn = gs[nr] = _call_hooks(hooks[nr], gn)
            if retain and nr in retain:
                t = retain[nr]()
                if t is not None:
                    self.store_grad(t, gn)
            if targets and (node, nr) in targets:
                for i in targets[(node, nr)]:
                    if self.accumulate:
                        self.store_grad(self.inputs[i], gn)
                    else:
                        self.captured[i] = gn
        return gs if multi else gs[0]

    def deliver_leaf(self, t: Tensor, g) -> None:
        hooks = t._hooks
        if self.leaf_targets is not None:
            idx = self.leaf_targets.get(id(t))
            if idx is None:
                if hooks is not None and self.pending is not None:
                    self.leaf_edge_done(t, False)
                return  # not a requested input
            if hooks:
                g = _call_hooks(hooks, g)
            if not self.accumulate:
                for i in idx:  # a leaf reached along several paths: sum
                    c = self.captured[i]
                    self.captured[i] = g if c is None else c + g
                return
        elif hooks:
            g = _call_hooks(hooks, g)
        self.store_grad(t, g)
        if hooks is not None and self.pending is not None:
            self.leaf_edge_done(t, True)

    # A leaf reached along k edges receives k deliveries (the engine does not sum them first), so its
    # post-accumulate hooks wait until all k edges have been visited: then `.grad` is final for this pass.
    def count_leaf(self, t: Tensor) -> None:
        """Pass 1 found an edge into leaf t; count it if t has post-accumulate hooks."""
        post = getattr(t._hooks, "post", None)
        if not post:
            return
        if self.pending is None:
            self.pending = {}
        rec = self.pending.get(id(t))
        if rec is None:
            self.pending[id(t)] = [1, t, False]
        else:
            rec[0] += 1

    def leaf_edge_done(self, t: Tensor, got: bool) -> None:
        """One edge into t was visited (`got`: it delivered a gradient); fire t's hooks after the last."""
        rec = self.pending.get(id(t))
        if rec is None or rec[0] <= 0:
            return
        rec[0] -= 1
        if got:
            rec[2] = True
        if rec[0] == 0 and rec[2]:
            _call_post_hooks(t)

    def flush_post_hooks(self) -> None:
        """End of the pass: fire the hooks of leaves that got a gradient but had edges left unvisited
        (nodes pruned by `inputs=`); normally nothing is left."""
        for rec in self.pending.values():
            if rec[0] > 0 and rec[2]:
                rec[0] = 0
                _call_post_hooks(rec[1])

    def store_grad(self, t: Tensor, g: Tensor) -> None:
        """t.grad += g, taking ownership of g's array when nothing else can see it."""
        old = t._grad
        if g.data.dtype != t.data.dtype:
            g = g.to(t.dtype)
        if old is None:
            if self.create_graph:
                t._grad = g
                return
            a = g.data
            # a view may share memory with something the user can see; it cannot when its base
            # is referenced by this view alone (e.g. a reshape of a fresh result): 2 = view + argument
            # (NumPy only: CuPy's views name their base differently, so a device view is always copied)
            if ((a.base is not None and (a.__class__ is not _ndarray or _refcount(a.base) > 2)) or id(a) in self.stolen
                    or not a.flags.c_contiguous):
                a = a.copy()
            self.stolen.add(id(a))
            t._grad = make(a)
        elif self.create_graph or old._requires_grad:
            t._grad = old + g
        elif old.data.shape == g.data.shape and writable(old.data):
            old.data += g.data  # in place, as PyTorch accumulates when grad mode is off
            bump_version(old)
        else:
            t._grad = make(old.data + g.data)


_refcount = sys.getrefcount
_ndarray = np.ndarray


def _call_post_hooks(t: Tensor) -> None:
    for h in list(t._hooks.post):
        if h(t) is not None:
            raise RuntimeError(f"Tensor post accumulate grad hooks should return None; {getattr(h, '__qualname__', h)!r} "
                               "returned a value")


def _call_hooks(hooks: list, g):
    for h in list(hooks):
        r = h(g)
        if r is not None:
            g = r
    return g


def _check_anomaly(node: Node, grads) -> None:
    for i, g in enumerate(grads):
        if g is not None and g.data.dtype.kind == "f" and not bool(np.isfinite(g.data).all()):
            bad = "nan" if bool(np.isnan(g.data).any()) else "inf"
            msg = f"Function '{node.name()}' returned {bad} values in its {_ordinal(i)} output."
            if node.trace:
                msg += "\n\nTraceback of the forward call that created this node:\n" + node.trace
            raise RuntimeError(msg)


def _ordinal(i: int) -> str:
    return f"{i}{'th' if 10 <= i % 100 <= 20 else {0: 'th', 1: 'st', 2: 'nd', 3: 'rd'}.get(i % 10, 'th')}"
