"""Nested containers of tensors (PyTorch's pytrees, as far as the function transforms need them): tuples,
lists, dicts and named tuples are nodes, everything else is a leaf."""
from __future__ import annotations

from typing import Any, Callable


def flatten(tree) -> tuple[list, Callable[[list], Any]]:
    """The leaves of `tree` in order, and a function that rebuilds a tree of that structure from new leaves."""
    leaves: list = []

    def walk(t):
        if isinstance(t, tuple) and hasattr(t, "_fields"):  # a named tuple
            parts = [walk(x) for x in t]
            return lambda it: type(t)(*[p(it) for p in parts])
        if isinstance(t, (tuple, list)):
            parts = [walk(x) for x in t]
            return lambda it: type(t)(p(it) for p in parts)
        if isinstance(t, dict):
            keys = list(t)
            parts = [walk(t[k]) for k in keys]
            return lambda it: type(t)((k, p(it)) for k, p in zip(keys, parts)) if type(t) is not dict \
                else {k: p(it) for k, p in zip(keys, parts)}
        leaves.append(t)
        return lambda it: next(it)

    build = walk(tree)
    return leaves, lambda new: build(iter(new))


def broadcast_prefix(prefix, tree, what: str, of: str = "inputs") -> list:
    """One entry of `prefix` per leaf of `tree` (the `of`: inputs or outputs): `prefix` is a tree that matches `tree`
    down to some depth, a leaf of it (an int or None) applying to the whole subtree below (how vmap reads
    `in_dims` and `out_dims`)."""
    out: list = []

    def walk(p, t, path):
        if p is None or isinstance(p, int):
            out.extend([p] * len(flatten(t)[0]))
            return
        if isinstance(p, (tuple, list)) and isinstance(t, (tuple, list)) and len(p) == len(t):
            for i, (a, b) in enumerate(zip(p, t)):
                walk(a, b, f"{path}[{i}]")
            return
        if isinstance(p, dict) and isinstance(t, dict) and set(p) == set(t):
            for k in t:
                walk(p[k], t[k], f"{path}[{k!r}]")
            return
        raise ValueError(f"{what} is not compatible with the structure of `{of}` at {path or 'the top'}: got "
                         f"{type(p).__name__} {p!r} for {type(t).__name__}; give an int or None per {of[:-1]}, or a "
                         f"container of the {of}' structure")

    walk(prefix, tree, "")
    return out
