"""Draw the autograd graph behind a tensor with Graphviz.

`to_dot(y)` walks the graph from `y.grad_fn` along every node's `next` edges and returns
DOT source: ops are boxes named like their `grad_fn` ("MulBackward"), tensors are
ellipses with their name (`Tensor.name`, or the key given in `params`) and shape (and
dtype when it is not float32). The graph holds nodes, not intermediate tensors, so an
intermediate result appears only as the edge from the op that made it to the op that
used it; leaves that require grad and the output(s) are ellipses. `render(y, "g.png")`
runs Graphviz's `dot` program on that source.

    y = (w * x + b).tanh()
    open("g.dot", "w").write(ember.viz.to_dot(y, {"w": w, "b": b}))
    ember.viz.render(y, "g.svg", params={"w": w, "b": b})
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Mapping, Sequence

from ._tensor import Slot, Tensor

__all__ = ["to_dot", "render"]

_FORMATS = ("png", "svg", "pdf")
_OP_STYLE = 'shape=box, style="rounded,filled", fillcolor="#e8e8e8"'
_LEAF_STYLE = 'shape=ellipse, style=filled, fillcolor="#cfe2f3"'
_OUT_STYLE = 'shape=ellipse, style=filled, fillcolor="#d9ead3"'


def _quote(s: str) -> str:
    """`s` as a DOT double-quoted string: backslashes and quotes escaped, line breaks as \\n."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return '"' + s + '"'


def _tensor_label(t: Tensor, names: dict) -> str:
    name = t.name if t.name is not None else names.get(id(t))
    shape = "(" + ", ".join(str(n) for n in t._data.shape) + ("," if t._data.ndim == 1 else "") + ")"
    dtype = t.dtype.name
    lines = [] if name is None else [str(name)]
    lines.append(shape if dtype == "float32" else f"{shape} {dtype}")
    return "\n".join(lines)


def _op_name(node) -> str:
    name = getattr(node, "name", None)
    return name() if callable(name) else type(node).__name__


def to_dot(tensor: Tensor | Sequence[Tensor], params: Mapping[str, Tensor] | None = None) -> str:
    """Graphviz DOT source of the autograd graph that produced `tensor` (or several tensors).

    `params` maps names to tensors (e.g. `dict(model.named_parameters())`) to label leaves
    that have no `.name` of their own. Each op appears once however many consumers share
    it; edges run in the direction data flows (input -> op -> consumer), and an edge out
    of a multi-output op is labelled with the output's index.
    """
    outputs = [tensor] if isinstance(tensor, Tensor) else list(tensor) if isinstance(tensor, (list, tuple)) else None
    if not outputs or not all(isinstance(t, Tensor) for t in outputs):
        raise TypeError(f"to_dot(): expected a Tensor or a non-empty sequence of Tensors, got {type(tensor).__name__}")
    names: dict = {}
    if params is not None:
        if not isinstance(params, Mapping):
            raise TypeError(f"to_dot(): params must be a dict of name -> Tensor, got {type(params).__name__}")
        for k, v in params.items():
            if not isinstance(v, Tensor):
                raise TypeError(f"to_dot(): params[{k!r}] must be a Tensor, got {type(v).__name__}")
            names.setdefault(id(v), k)

    stmts: list = []
    # id(node or leaf tensor) -> DOT id, so each is drawn once; ids stay valid because the
    # outputs keep their whole graph alive while we walk it
    ids: dict = {}
    stack: list = []

    def producer(e) -> str:
        """The DOT id of what edge `e` comes from (a node, a Slot of a node, or a leaf), declared on first sight."""
        obj = e.node if type(e) is Slot else e
        i = ids.get(id(obj))
        if i is None:
            if isinstance(obj, Tensor):
                i = ids[id(obj)] = f"leaf{len(ids)}"
                stmts.append(f"  {i} [label={_quote(_tensor_label(obj, names))}, {_LEAF_STYLE}];")
            else:
                i = ids[id(obj)] = f"op{len(ids)}"
                stmts.append(f"  {i} [label={_quote(_op_name(obj))}, {_OP_STYLE}];")
                stack.append(obj)
        return i

    def edge_attrs(e) -> str:
        return f" [label={_quote(f'output {e.nr}')}]" if type(e) is Slot else ""

    for k, t in enumerate(outputs):
        out_id = f"out{k}"
        stmts.append(f"  {out_id} [label={_quote(_tensor_label(t, names))}, {_OUT_STYLE}];")
        if t._edge is None:  # a leaf output: also the ellipse of that leaf wherever another output uses it
            ids.setdefault(id(t), out_id)
        else:
            stmts.append(f"  {producer(t._edge)} -> {out_id}{edge_attrs(t._edge)};")

    # Depth-first over nodes with an explicit stack (graphs can be 100,000 ops deep).
    while stack:
        node = stack.pop()
        me = ids[id(node)]
        for e in getattr(node, "next", ()):
            if e is not None:
                stmts.append(f"  {producer(e)} -> {me}{edge_attrs(e)};")

    return "digraph autograd {\n  graph [rankdir=TB];\n  node [fontname=\"Helvetica\", fontsize=11];\n" \
           "  edge [fontname=\"Helvetica\", fontsize=9];\n" + "\n".join(stmts) + "\n}\n"


def render(tensor: Tensor | Sequence[Tensor], path: str | os.PathLike, format: str | None = None,
           params: Mapping[str, Tensor] | None = None) -> str:
    """Write the graph of `tensor` to `path` as PNG, SVG or PDF (`format`, default: from the
    extension) with Graphviz's `dot` program; return the path written."""
    path = os.fspath(path)
    fmt = (format if format is not None else os.path.splitext(path)[1].lstrip(".")).lower()
    if fmt not in _FORMATS:
        raise ValueError(f"render(): cannot tell the image format from {path!r}"
                         f"{'' if format is None else f' and format={format!r}'}: use one of {', '.join(_FORMATS)}")
    return render_source(to_dot(tensor, params), path, fmt)


def render_source(source: str, path: str, fmt: str) -> str:
    """Run Graphviz's `dot` on DOT `source`, writing `path` in format `fmt`; return the path."""
    missing = ("render(): Graphviz's `dot` program was not found on PATH; install Graphviz (e.g. `apt-get install "
               "graphviz`, `brew install graphviz` or `conda install graphviz`) to draw images. to_dot() still works "
               "without it: it returns the DOT source as a string.")
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(missing)
    try:
        proc = subprocess.run([exe, f"-T{fmt}", "-o", path], input=source.encode("utf-8"), capture_output=True)
    except FileNotFoundError:
        raise RuntimeError(missing) from None
    if proc.returncode != 0:
        raise RuntimeError(f"render(): `dot -T{fmt}` failed with exit status {proc.returncode}: "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()}")
    return path
