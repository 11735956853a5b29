"""Running a pending graph of `ember.lazy` (see `ember/_lazy.py`): node by node, reusing dead buffers.

The pass: buffer reuse along elementwise chains. Eager ember cannot do what NumPy does for
`a * b + c` in one expression (write the sum into the product's temporary, which nothing else holds):
every intermediate result is held by its Tensor, so every op of a chain allocates a fresh array and
reads a cold one. When the whole pending graph is known, an intermediate value that nothing else reads
(read once, by the next op, and dropped by the user) can be overwritten by that op: the op runs as its
ufunc with `out=` that value's array. Only arrays this pass itself allocated are reused (never an
input's, a view's or an array some other object may hold), only by elementwise ops outside autograd
whose result has the buffer's shape and dtype. The results are eager's bit for bit: the same ufuncs, on
the same dtypes, only into another array.

Fusing such chains into one kernel was measured too, and is not done: numexpr (one multi-threaded pass,
no temporaries) ran slower than NumPy 2's SIMD ufuncs here on every float32 chain tried (a written-out
GELU 10–13 against 1.3–1.8 ms on 1M floats, `tanh` alone 8.3 against 0.4 ms, four arithmetic ops 1.3 against
0.5 ms; docs/performance.md, "Lazy mode").
"""
from __future__ import annotations

import numpy as np

ENABLED = True  # tests and benchmarks switch the pass off to compare
MIN_SIZE = 1 << 12  # elements: below this an array is cheap to allocate and reuse gains nothing measurable

# op class name -> its ufunc (the ops whose forward, on floating-point arrays of the result's dtype, is exactly it)
UFUNCS = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.true_divide, "Maximum": np.maximum,
    "Minimum": np.minimum, "Neg": np.negative, "Exp": np.exp, "Expm1": np.expm1, "Log": np.log, "Log1p": np.log1p,
    "Sqrt": np.sqrt, "Sin": np.sin, "Cos": np.cos, "Tanh": np.tanh, "Abs": np.abs,
}


def run_nodes(mode, order: list) -> None:
    """Run the pending nodes `order` (program order), reusing dead intermediate buffers where allowed."""
    if not ENABLED:
        for n in order:
            mode.run_node(n)
        return
    from ._lazy import STATS, Pending, _alive
    run = object()  # this run's mark: a buffer is reusable only if allocated in this run (no user code since)
    for n in order:
        ufunc = _elementwise(n, Pending)
        if ufunc is None:
            mode.run_node(n)
            continue
        mode.check_versions(n)
        p = n.outs[0]
        arrays = [a.realize() if a.__class__ is Pending else a for a in n.arrays]
        dead = None
        for a, v in zip(n.arrays, arrays):
            if (a.__class__ is Pending and a.owned is run and a.uses == 1 and not _alive(a)
                    and v.shape == p.shape and v.dtype == p.dtype):
                dead = a  # read once, by this op, held by no tensor: its buffer takes the result
                break
        if dead is None:
            value = ufunc(*arrays)
            if value.__class__ is not np.ndarray:
                value = np.asarray(value)  # (a ufunc gives a NumPy scalar for 0-d operands: results are arrays)
        else:
            value = ufunc(*arrays, out=dead.value)
            dead.value = None  # (overwritten: asking for it now is an error, never the new values)
            STATS["reused"] += 1
        mode.settle_value(p, value, None, n)
        p.owned = run  # an array this run allocated (or took over), which no one else holds
        mode.finish(n)


def _elementwise(n, Pending):
    """n's ufunc if n may run as one here: an elementwise op outside autograd on floating-point arrays of its
    result's dtype (and Python numbers), large enough to matter."""
    if n.rg or n.multi:
        return None
    ufunc = UFUNCS.get(type(n.op).__name__)
    if ufunc is None:
        return None
    p = n.outs[0]
    if p.dtype.kind != "f" or p.dtype.itemsize == 2 or p.size < MIN_SIZE:
        return None  # (16-bit floats compute in float32 and round once: `dispatch`, not a bare ufunc)
    for a in n.arrays:
        c = a.__class__
        if c is Pending or c is np.ndarray:
            if a.dtype != p.dtype:
                return None
        elif c is not float and c is not int:
            return None
    return ufunc
