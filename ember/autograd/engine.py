"""The reverse-mode engine: `backward` and `grad`.

Iterative, never recursive. A pass over the graph (`_Graph`) finds every node reachable
from the roots, reads each node's edges once into (target, output index) pairs, and counts
how many edges point at each node. Then the loop in `_pass` runs a node as soon as all of
its consumers have delivered their gradients (its count reaches zero), so each node runs
exactly once, in a valid order, however the graph branches and joins. Its three steps are
named functions: run the node (`_Run.run_node`: hooks, the derivative, anomaly checks),
release what it saved (`_release`), and deliver its input gradients (summed per node in
`_Gradients`; leaves accumulate into `.grad` through `_Run.store_grad`).
"""
from __future__ import annotations

import threading

import numpy as np

from .. import _capture
from .._tensor import TENSOR_TYPES, Slot, Tensor, bump_version, make
from .function import FREED, Node, free_buffers
from ..backend import array_module, on_device_of, writable
from .grad_mode import MODE
from .. import _dtype as dt


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
            if t._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs; {op} got an output of shape "
                                   f"{list(t.shape)}: pass gradient=<tensor of that shape> (e.g. ones_like(output))")
            with on_device_of(t._data):
                g = make(array_module(t._data).ones_like(t._data))
        else:
            if not isinstance(g, Tensor):  # as PyTorch: a list or array is not converted (its dtype/device would be guessed)
                raise TypeError(f"{op}: gradients can be either Tensors or None, but got {type(g).__name__} "
                                f"(grad_tensors[{i}], for an output of shape {list(t.shape)})")
            if g._data.__class__ is not t._data.__class__ and g.device != t.device:
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
    if _capture.ACTIVE is not None and _capture.ACTIVE.depth == 0:
        return _capture.ACTIVE.backward(backward, _as_list(tensors, "tensors"),
                                        None if grad_tensors is None else _as_list(grad_tensors, "grad_tensors"),
                                        retain_graph, create_graph, inputs)
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
    if _capture.ACTIVE is not None:
        _capture.refuse("autograd.grad (not captured yet)")
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
                with on_device_of(inputs[i]._data):
                    result[i] = make(array_module(inputs[i]._data).zeros_like(inputs[i]._data))
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}], shape {list(inputs[i].shape)}) appears to "
                                   f"not have been used in the graph. Set allow_unused=True if this is the desired behavior.")
    return tuple(result)


def _check_roots(outputs: list) -> None:
    for i, t in enumerate(outputs):
        if MODE.vmap and t._data.__class__.__name__ == "BatchedArray":
            from ..func._batching import VmapError
            raise VmapError("backward()/autograd.grad() of a batched tensor inside vmap: its graph is that of all the "
                            "examples at once. Differentiate inside vmap with ember.func.grad, vjp or jacrev instead.")
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn "
                               f"(shape {list(t.shape)}); did you compute it under no_grad, or forget requires_grad=True on an input?")


LEAF = -1  # the output index of an edge into a leaf tensor (which has no node)

# ---- sparse gradients (ember/ops/sparse_ops.py sets SPARSE to its SparseTensor class when it loads)
SPARSE = None


def _sum_grads(old, g):
    """old + g for two gradients of one tensor, either of them a sparse COO tensor: sparse + sparse concatenates
    their entries (old's first, as PyTorch's accumulation), a dense and a sparse one sum to a dense one (either
    order; `sparse + dense` itself is PyTorch's error)."""
    return g + old if old.__class__ is SPARSE and g.__class__ is not SPARSE else old + g
# ---- (end of sparse gradients)


def _endpoints(edges: tuple) -> tuple:
    """Each edge of `Node.next` as (target, output index): (node, k) for output k of a node, (tensor, LEAF)
    for a leaf, None for no edge. The one place where the three kinds of edge are told apart (one call
    per node, not per edge: the walk over the graph calls it for every node)."""
    out = []
    for e in edges:
        if e is None:
            out.append(None)
        elif e.__class__ is Slot:
            out.append((e.node, e.nr))
        elif e.__class__ in TENSOR_TYPES:
            out.append((e, LEAF))
        else:
            out.append((e, 0))  # a single-output node is its own edge
    return tuple(out)


def _endpoint(e):
    """`_endpoints` of one edge (a root's or a requested input's)."""
    return _endpoints((e,))[0]


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


class _Passes(threading.local):
    def __init__(self) -> None:
        self.stack: list = []  # per backward pass running in this thread, outermost first: its record


PASSES = _Passes()


class PassRecord:
    """What code running inside a backward pass may ask about it (`running_passes`): whether it was asked for
    the gradients of given tensors (`autograd.grad`, `backward(inputs=...)`) rather than for every leaf's
    `.grad` (a reentrant checkpoint refuses the former, as PyTorch's does)."""

    __slots__ = ("has_targets",)

    def __init__(self, has_targets: bool) -> None:
        self.has_targets = has_targets


def running_passes() -> list:
    """The records of the backward passes running in this thread, outermost first."""
    return PASSES.stack


def _run(roots: list, root_grads: list, retain_graph: bool, create_graph: bool, inputs, accumulate: bool):
    callbacks = _CALLBACKS.stack
    callbacks.append([])
    PASSES.stack.append(PassRecord(inputs is not None))
    try:
        captured = _pass(roots, root_grads, retain_graph, create_graph, inputs, accumulate)
    finally:
        PASSES.stack.pop()
        queued = callbacks.pop()
    # a callback may queue another (e.g. for a nested pass): run until none is left
    i = 0
    while i < len(queued):
        queued[i]()
        i += 1
    return captured


def _pass(roots: list, root_grads: list, retain_graph: bool, create_graph: bool, inputs, accumulate: bool):
    """One backward pass: returns the gradients captured for `inputs` (autograd.grad), else None."""
    run = _Run(inputs, accumulate, create_graph, root_grads)
    graph = _Graph(roots, run)
    needed = None if inputs is None else run.needed_nodes(graph)
    gradients = _Gradients()
    prev_mode = MODE.grad
    MODE.grad = create_graph  # backward formulas are ember ops: recorded only for higher-order grads
    try:
        for t, g in zip(roots, root_grads):
            if t._edge is None:
                run.deliver_leaf(t, g)  # a leaf as a root: its gradient is the seed itself
            else:
                gradients.add(*_endpoint(t._edge), g)
        ready = [n for n, c in graph.deps.items() if c == 0]
        while ready:
            node = ready.pop()
            grads = run.run_node(node, gradients.take(node), needed)
            if not retain_graph:
                _release(node)
            for end, gi in zip(graph.edges[node], grads):
                if end is None:
                    continue
                target, nr = end
                if nr == LEAF:
                    run.leaf_reached(target, gi)
                elif gradients.deliver(target, nr, gi, graph.deps):
                    ready.append(target)
        if run.pending is not None:
            run.flush_post_hooks()
    finally:
        MODE.grad = prev_mode
    return run.captured


class _Graph:
    """The part of the graph a pass runs: for every node reachable from the roots, its edges as
    (target, output index) pairs aligned with `node.next` (`edges`), and how many edges point at it
    (`deps`); `order` lists the nodes in discovery order (used to prune nodes that reach no target)."""

    def __init__(self, roots: list, run: "_Run") -> None:
        self.deps: dict = {}
        self.edges: dict = {}
        self.order: list = []
        deps, edges, stack = self.deps, self.edges, []
        for t in roots:
            if t._edge is not None:
                n = _endpoint(t._edge)[0]
                if n not in deps:
                    deps[n] = 0
                    stack.append(n)
            elif t._hooks is not None and run.accumulate:
                run.count_leaf(t)
        while stack:
            n = stack.pop()
            self.order.append(n)
            ends = edges[n] = _endpoints(n.next)
            for end in ends:
                if end is None:
                    continue
                target, nr = end
                if nr == LEAF:
                    if target._hooks is not None and run.accumulate:  # the only cost of post-accumulate hooks
                        run.count_leaf(target)
                elif target in deps:
                    deps[target] += 1
                else:
                    deps[target] = 1
                    stack.append(target)


class _Gradients:
    """Gradients on their way to nodes that have not run yet, summed as they arrive: one Tensor per
    single-output node, a list with one entry per output for nodes with several (`n_out`)."""

    def __init__(self) -> None:
        self.waiting: dict = {}

    def add(self, node, nr: int, g) -> None:
        """Sum g (None: nothing) into what waits for output nr of node."""
        if g is None:
            return
        w = self.waiting
        if node.n_out == 1:
            old = w.get(node)
            w[node] = g if old is None else old + g if old.__class__ is not SPARSE else _sum_grads(old, g)
        else:
            buf = w.get(node)
            if buf is None:
                buf = w[node] = [None] * node.n_out
            old = buf[nr]
            buf[nr] = g if old is None else old + g if old.__class__ is not SPARSE else _sum_grads(old, g)

    def deliver(self, node, nr: int, g, deps: dict) -> bool:
        """Add g for output nr of node and count the edge as delivered; True when node is ready to run."""
        self.add(node, nr, g)
        c = deps[node] - 1
        deps[node] = c
        return c == 0

    def take(self, node):
        """The node's summed gradient (a list for a multi-output node), None if nothing reached it."""
        return self.waiting.pop(node, None)


def _release(node: Node) -> None:
    """Free what a node saved for backward once it has run (no retain_graph): its saved inputs and
    output, and the arrays its forward kept on it. A later backward through it raises."""
    if node.inputs is not None:
        node.inputs = FREED
    if node.out is not None:
        node.out = None
        node.inputs = FREED
    if node.__dict__ and not node._user_ctx:  # a FunctionCtx's attributes belong to the user
        free_buffers(node)


class _Nones:
    """Stands for the gradients of a node that did not run: None for every input."""

    def __iter__(self):
        while True:
            yield None


_NONES = _Nones()


class _Run:
    """State of one backward pass: which gradients are wanted, where they go, and which gradient
    arrays it may write into."""

    def __init__(self, inputs, accumulate: bool, create_graph: bool, root_grads: list) -> None:
        self.inputs, self.accumulate, self.create_graph = inputs, accumulate, create_graph
        # Ownership of gradient arrays, tracked explicitly. `shared`: arrays others can see (the caller's root
        # gradients, what hooks returned, and arrays this pass stored as a `.grad` as they were) -- never stored
        # again without a copy. `aliased`: ids of leaves whose `.grad` this pass stored without a copy; the node
        # that produced that array may have delivered it elsewhere too (Add sends one gradient to both inputs),
        # so until the pass ends such a `.grad` is replaced, not written into, when more gradient arrives.
        self.shared = {id(g._data) for g in root_grads}
        self.aliased: set = set()
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
                    self.node_targets.setdefault(_endpoint(t._edge), []).append(i)

    def run_node(self, node: Node, g, needed) -> tuple:
        """Step one of the loop: the node's tensor hooks, its derivative, the anomaly check and its
        post hooks. Returns one gradient (or None) per edge of the node."""
        if g is None:
            return _NONES  # nothing reached it (e.g. an unused output): its inputs get nothing either
        hooked = node._hooked
        if hooked or self.node_targets is not None or needed is not None:
            g = self.pre_hooks(node, g)
        if needed is not None and node not in needed:
            return _NONES  # it leads to none of the requested inputs
        grads = node._backward(g)
        if MODE.anomaly:
            _check_anomaly(node, grads)
        if hooked and node._post_hooks:
            for h in node._post_hooks:
                r = h(grads, g if isinstance(g, list) else [g])
                if r is not None:
                    grads = tuple(r)
                    self.shared.update(id(x._data) for x in grads if x is not None)
        return grads

    def leaf_reached(self, t: Tensor, g) -> None:
        """Step three, for an edge into a leaf: deliver its gradient (or note that none came)."""
        if g is not None:
            self.deliver_leaf(t, g)
        elif t._hooks is not None and self.pending is not None:
            self.leaf_edge_done(t, False)

    def needed_nodes(self, graph: _Graph) -> set:
        """Nodes whose backward leads to a requested input (the others need not run)."""
        count = dict(graph.deps)
        topo = [n for n in graph.order if count[n] == 0]  # Kahn's order from the roots down
        i = 0
        while i < len(topo):
            for end in graph.edges[topo[i]]:
                if end is not None and end[1] != LEAF:
                    n = end[0]
                    count[n] -= 1
                    if count[n] == 0:
                        topo.append(n)
            i += 1
        needed: set = set()
        target_nodes = {n for (n, _) in self.node_targets}
        for n in reversed(topo):  # children before parents
            for end in graph.edges[n]:
                if end is None:
                    continue
                target, nr = end
                if id(target) in self.leaf_targets if nr == LEAF else (target in needed or target in target_nodes):
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
                g = self.hooked(hooks, g)
            if not self.accumulate:
                for i in idx:  # a leaf reached along several paths: sum
                    c = self.captured[i]
                    self.captured[i] = g if c is None else c + g if c.__class__ is not SPARSE else _sum_grads(c, g)
                return
        elif hooks:
            g = self.hooked(hooks, g)
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

    def hooked(self, hooks: list, g: Tensor) -> Tensor:
        """A leaf's gradient hooks applied to g; a gradient a hook returned is the user's (`shared`)."""
        r = _call_hooks(hooks, g)
        if r is not g:
            self.shared.add(id(r._data))
        return r

    def store_grad(self, t: Tensor, g: Tensor) -> None:
        """t.grad += g. A first gradient is stored as it is when this pass may own its array (see `shared`
        and `aliased` in __init__); more gradient is added in place into a `.grad` this pass owns, and
        out of place (the sum is then owned) into one that may still be read elsewhere."""
        old = t._grad
        if g._data.dtype != t._data.dtype:
            g = g.to(t.dtype)
        if g.__class__ is SPARSE or old.__class__ is SPARSE:  # sparse gradients: stored as they are, summed out of place
            t._grad = g if old is None else _sum_grads(old, g)
            return
        if old is None:
            if self.create_graph:
                t._grad = g
                return
            a = g._data
            # a view may share memory with something the user can see (NumPy: `base`; CuPy has no
            # writeable flag, so it is told by contiguity and by whether it owns its memory)
            if getattr(a, "base", None) is not None or id(a) in self.shared or not a.flags.c_contiguous:
                a = a.copy()
            else:
                self.aliased.add(id(t))
            self.shared.add(id(a))
            t._grad = make(a)
        elif self.create_graph or old._requires_grad:
            t._grad = old + g
        elif id(t) in self.aliased or old._data.shape != g._data.shape or not writable(old._data):
            self.aliased.discard(id(t))
            t._grad = old + g  # a new array, which this pass owns
        else:
            old._data += g._data  # in place, as PyTorch accumulates when grad mode is off
            bump_version(old)


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
        a = None if g is None else g._data if g.__class__ is not SPARSE else g._data.values  # (sparse: its values)
        if a is not None and dt.is_float(a.dtype) and not bool(np.isfinite(a).all()):
            bad = "nan" if bool(np.isnan(a).any()) else "inf"
            msg = f"Function '{node.name()}' returned {bad} values in its {_ordinal(i)} output."
            if node.trace:
                msg += "\n\nTraceback of the forward call that created this node:\n" + node.trace
            raise RuntimeError(msg)


def _ordinal(i: int) -> str:
    return f"{i}{'th' if 10 <= i % 100 <= 20 else {0: 'th', 1: 'st', 2: 'nd', 3: 'rd'}.get(i % 10, 'th')}"
