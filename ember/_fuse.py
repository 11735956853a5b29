"""Running a pending graph of `ember.lazy` (see `ember/_lazy.py`): node by node, with elementwise chains fused.

The fusion pass. A chain of elementwise ops outside autograd (no input requires grad, or grad mode is
off) on floating-point arrays of one dtype, such as `0.5 * x * (1 + tanh(c * (x + 0.044715 * x ** 3)))`,
is eager NumPy's worst case: each op is one pass over memory and one temporary array. When the whole
pending graph is known, the intermediate values that nothing else reads (used once, by the next op of
the chain, and dropped by the user) need not exist: the chain becomes one numexpr expression, evaluated
block by block in cache on numexpr's threads. Constants enter as 0-d arrays of the chain's dtype, so a
float32 chain is computed in float32 as NumPy computes it (`x * 0.1` stays float32: NumPy's rule for a
Python number). Results agree with eager NumPy to a few units in the last place (numexpr's exp, tanh,
... are not NumPy's); docs/compile.md, "Lazy mode", has the measured effect.

Without numexpr (an optional extra), or for chains of small arrays where one numexpr call costs more
than the NumPy ops it replaces, every node runs as it would have eagerly.
"""
from __future__ import annotations

import numpy as np

MIN_SIZE = 1 << 15  # elements: below this, a numexpr call costs more than the NumPy passes it saves (measured)
ENABLED = True  # tests and benchmarks switch the pass off to compare

# op class name -> numexpr template over its array arguments {0}, {1}
_TEMPLATES = {
    "Add": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})", "Div": "({0} / {1})", "Pow": "({0} ** {1})",
    "Neg": "(-{0})", "Exp": "exp({0})", "Expm1": "expm1({0})", "Log": "log({0})", "Log1p": "log1p({0})",
    "Sqrt": "sqrt({0})", "Sin": "sin({0})", "Cos": "cos({0})", "Tanh": "tanh({0})", "Abs": "abs({0})",
    "Square": "({0} * {0})",
}
_POW = _TEMPLATES["Pow"]
_NE = None  # numexpr, once imported (False: not installed)


def _numexpr():
    global _NE
    if _NE is None:
        try:
            import numexpr
            _NE = numexpr
        except ImportError:
            _NE = False
    return _NE or None


def run_nodes(mode, order: list) -> None:
    """Run the pending nodes `order` (program order), fusing elementwise chains where that pays."""
    ne = _numexpr() if ENABLED and len(order) > 1 else None
    if ne is None:
        for n in order:
            mode.run_node(n)
        return
    from ._lazy import Pending, _alive
    inline: dict[int, tuple] = {}  # id(stand-in) -> (expression, {name: array}, stand-in, node, [inlined nodes])
    names = [0]

    def leaf(a, dtype) -> tuple:
        names[0] += 1
        v = f"v{names[0]}"
        if a.__class__ is Pending:
            a = a.realize()
        elif a.__class__ is not np.ndarray:
            a = np.asarray(a, dtype)  # a Python number: a 0-d array of the chain's dtype (NumPy's weak scalar)
        return v, {v: a}

    def flush_inline() -> None:
        for key in list(inline):
            expr, env, p, n, members = inline.pop(key)
            _evaluate(mode, ne, n, p, expr, env, members)

    for n in order:
        tpl = _fusible(n, Pending)
        if tpl is None:
            if inline:
                flush_inline()  # (their consumers run here: values first)
            mode.run_node(n)
            continue
        p = n.outs[0]
        parts, env, members = [], {}, []
        for i, a in enumerate(n.arrays):
            e = inline.pop(id(a), None) if a.__class__ is Pending else None
            if i == 1 and a.__class__ is int and tpl is _POW and -16 <= a <= 16:
                parts.append(str(a))  # (a literal small integer power: numexpr multiplies, as `x * x * x`)
                continue
            if e is not None:
                expr, env2 = e[0], e[1]
                members += e[4] + [e[3]]
            else:
                expr, env2 = leaf(a, p.dtype)
            parts.append(expr)
            env.update(env2)
        expr = tpl.format(*parts)
        if p.uses == 1 and not _alive(p):
            inline[id(p)] = (expr, env, p, n, members)  # read once, by a later op of the chain: it need not exist
        else:
            _evaluate(mode, ne, n, p, expr, env, members)
    if inline:
        flush_inline()


def _fusible(n, Pending):
    """n's numexpr template if n can join a chain: an elementwise op outside autograd, on floating-point
    arrays of its result's dtype (and Python numbers), large enough to pay."""
    if n.rg or n.multi:
        return None
    tpl = _TEMPLATES.get(type(n.op).__name__)
    if tpl is None:
        return None
    p = n.outs[0]
    if p.dtype.kind != "f" or p.size < MIN_SIZE or p.dtype.itemsize < 4:
        return None
    for a in n.arrays:
        c = a.__class__
        if c is Pending or c is np.ndarray:
            if a.dtype != p.dtype:
                return None
        elif c is not float and c is not int:
            return None
    return tpl


def _evaluate(mode, ne, n, p, expr: str, env: dict, members: list) -> None:
    """Compute the fused expression whose last op is n (the ops `members` inlined into it), and give the value
    to p's tensors."""
    from ._lazy import STATS
    value = ne.evaluate(expr, local_dict=env)
    if value.dtype != p.dtype:  # (numexpr keeps the inputs' dtype; a safety net, not a path taken)
        value = value.astype(p.dtype)
    if members:
        STATS["fused"] += len(members) + 1
    mode.settle_value(p, value, None, n)
    mode.finish(n)
    for m in members:  # their values were never made (nothing reads them)
        mode.finish(m)
