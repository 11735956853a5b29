"""The capture seam: the one switch the core reads to let `ember.compile` watch a run.

`ACTIVE` is None, except while `ember.compiler` captures a program (then it is the
`ember.compiler.trace.Tracer`) or while a thread runs lazily (`ember.lazy()`: the `ember._lazy.LazyMode`,
which defers applications instead of recording them, and computes what is pending wherever the
tracer would break). The core consults it only where a run does something the
compiler must either record or refuse to replay:

- `autograd.function.dispatch` (every op application; it reads the copy `function._tracer`,
  set together with `ACTIVE`, so the hot path pays one global lookup);
- `Tensor.item`/`numpy`/`tolist`/`bool()`/`float()`/`print` ... (a value read by Python: a
  graph break), `register_hook`/`retain_grad`, `bump_version` (an in-place write outside an op),
  `commit` (an in-place op), `detach`;
- the factories of `_creation` and `dropout_mask` (`traced`), the random generators,
  `Optimizer.step`/`zero_grad`, `Module.zero_grad`, LR schedulers and `manual_seed` (`opaque`),
  the engine's `backward`/`grad`, user `Function.apply` and module hooks.

Nothing here imports the compiler: the core stays free of it until `ember.compile` is called.
"""
from __future__ import annotations

import functools

ACTIVE = None  # the Tracer while a capture runs, else None


def set_active(tracer) -> None:
    """Install (or, with None, remove) the tracer that every seam reports to."""
    global ACTIVE
    ACTIVE = tracer
    from .autograd import function
    function._tracer = tracer


def traced(fn):
    """A function the compiler records as one call (a factory, a random draw): under capture the
    tracer records `fn(*args, **kwargs)` as a host call, replayed by calling it again (so random
    factories draw again, in the same order as eager)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = ACTIVE
        if t is not None and t.depth == 0:
            return t.host(fn, args, kwargs)
        return fn(*args, **kwargs)
    wrapper.__wrapped_traced__ = fn
    return wrapper


def opaque(fn):
    """A method the compiler replays as one opaque call on the same object (an optimizer's step,
    zero_grad, a scheduler's step): its effects are on state the call itself reads each time."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = ACTIVE
        if t is not None and t.depth == 0:
            return t.opaque(fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapper


def read(t, what: str) -> None:
    """Python reads a tensor's value (`what`): under capture, a graph break; in lazy mode, the value is
    computed."""
    tr = ACTIVE
    if tr is not None and tr.depth == 0:
        tr.read(t, what)


def writing(t) -> None:
    """t's array is about to be written outside an op (running statistics, init, gradient clipping): in lazy
    mode, everything pending (which may read it) runs first. (A capture breaks at the write's bump_version.)"""
    tr = ACTIVE
    if tr is not None and tr.depth == 0:
        tr.writing(t)


def settle(t) -> None:
    """t's place in the graph is read (`grad_fn`, `is_leaf`): in lazy mode a pending t is computed first."""
    tr = ACTIVE
    if tr is not None and tr.depth == 0:
        tr.settle(t)


def refuse(what: str) -> None:
    """Something the compiler does not capture happens (`what`): under capture, a graph break."""
    tr = ACTIVE
    if tr is not None and tr.depth == 0:
        tr.graph_break(what, None)
