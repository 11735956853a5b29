"""ember.viz: DOT structure of autograd graphs, and rendering through Graphviz's `dot`."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import ember
from ember import viz

HAVE_DOT = shutil.which("dot") is not None
requires_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's `dot` is not installed")

_QSTR = r'"(?:[^"\\]|\\.)*"'
_ID = r'(?:[A-Za-z_][A-Za-z0-9_]*|' + _QSTR + r')'
_NODE = re.compile(r'^\s*(' + _ID + r')\s*\[(.*)\];\s*$')
_EDGE = re.compile(r'^\s*(' + _ID + r')\s*->\s*(' + _ID + r')\s*(?:\[(.*)\])?;\s*$')
_ATTR = re.compile(r'([A-Za-z]+)\s*=\s*(' + _QSTR + r'|[^,\s]+)')


def _unquote(s: str) -> str:
    if not s.startswith('"'):
        return s
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), s[1:-1])


def parse(src: str) -> tuple[dict, list]:
    """A small parser for the DOT subset to_dot writes: {id: attrs} and [(from, to, attrs)].
    Every line must be a recognised statement, so malformed output fails the test."""
    lines = src.strip().splitlines()
    assert lines[0] == "digraph autograd {" and lines[-1] == "}"
    nodes, edges = {}, []
    for line in lines[1:-1]:
        m = _EDGE.match(line)
        if m:
            attrs = {k: _unquote(v) for k, v in _ATTR.findall(m.group(3) or "")}
            edges.append((_unquote(m.group(1)), _unquote(m.group(2)), attrs))
            continue
        m = _NODE.match(line)
        assert m, f"unparsable DOT line: {line!r}"
        name = _unquote(m.group(1))
        if name in ("graph", "node", "edge"):
            continue
        assert name not in nodes, f"{name} declared twice"
        nodes[name] = {k: _unquote(v) for k, v in _ATTR.findall(m.group(2))}
    for a, b, _ in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} names an undeclared object"
    return nodes, edges


def labels(nodes: dict, shape: str) -> list:
    return sorted(n["label"] for n in nodes.values() if n["shape"] == shape)


def by_label(nodes: dict, label: str) -> str:
    (k,) = [k for k, n in nodes.items() if n["label"] == label]
    return k


def leaf(*shape, name=None, dtype=np.float32, seed=0):
    t = ember.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype)).requires_grad_()
    t.name = name
    return t


# ---------------------------------------------------------------------- structure
def test_small_graph_structure():
    w, x = leaf(3, 4, name="w"), leaf(3, 4, seed=1)
    b = leaf(4, dtype=np.float64, seed=2)
    c = ember.ones(3, 4)  # no grad: not drawn
    y = ((w * x + b) * c).tanh()
    nodes, edges = parse(viz.to_dot(y, {"x": x, "b": b}))
    assert labels(nodes, "box") == ["AddBackward", "MulBackward", "MulBackward", "TanhBackward"]
    assert labels(nodes, "ellipse") == ["(3, 4) float64", "b\n(4,) float64", "w\n(3, 4)", "x\n(3, 4)"]
    W, X, B = by_label(nodes, "w\n(3, 4)"), by_label(nodes, "x\n(3, 4)"), by_label(nodes, "b\n(4,) float64")
    out, tanh, add = by_label(nodes, "(3, 4) float64"), by_label(nodes, "TanhBackward"), by_label(nodes, "AddBackward")
    pairs = {(a, b) for a, b, _ in edges}
    (mul_wx,) = [m for (a, m) in pairs if a == W]
    (mul_c,) = [m for (a, m) in pairs if a == add]
    assert pairs == {(W, mul_wx), (X, mul_wx), (mul_wx, add), (B, add), (add, mul_c), (mul_c, tanh), (tanh, out)}
    assert len(edges) == len(pairs)


def test_op_input_used_twice_gives_two_edges():
    x = leaf(2, name="x")
    nodes, edges = parse(viz.to_dot(x * x))
    X, mul = by_label(nodes, "x\n(2,)"), by_label(nodes, "MulBackward")
    assert [(a, b) for a, b, _ in edges].count((X, mul)) == 2


def test_name_attribute_wins_over_params():
    w = leaf(2, 3, name="weight")
    v = leaf(2, 3)
    nodes, _ = parse(viz.to_dot(w + v, {"W": w, "V": v}))
    assert labels(nodes, "ellipse") == ["(2, 3)", "V\n(2, 3)", "weight\n(2, 3)"]


def test_output_name_and_unnamed_leaves():
    x = leaf(5)
    y = x.exp()
    y.name = "loss"
    nodes, _ = parse(viz.to_dot(y))
    assert labels(nodes, "ellipse") == ["(5,)", "loss\n(5,)"]


def test_leaf_output_alone():
    x = leaf(2, 2, name="x")
    nodes, edges = parse(viz.to_dot(x))
    assert [n["label"] for n in nodes.values()] == ["x\n(2, 2)"] and edges == []


def test_scalar_and_dtype_labels():
    x = leaf(dtype=np.float64)  # 0-d
    nodes, _ = parse(viz.to_dot(x.exp()))
    assert "() float64" in labels(nodes, "ellipse")


def test_diamond_shares_node_once():
    x = leaf(3, name="x")
    h = x.exp()
    y = h.sin() * h.cos()
    nodes, edges = parse(viz.to_dot(y))
    assert labels(nodes, "box") == ["CosBackward", "ExpBackward", "MulBackward", "SinBackward"]
    exp = by_label(nodes, "ExpBackward")
    assert sorted(nodes[b]["label"] for a, b, _ in edges if a == exp) == ["CosBackward", "SinBackward"]
    assert [a for a, b, _ in edges if b == exp] == [by_label(nodes, "x\n(3,)")]


def test_stacked_diamonds():
    # 30 diamonds in a row: without sharing this would be 2**30 paths
    h = leaf(2, name="x")
    for _ in range(30):
        h = h.sin() + h.cos()
    nodes, edges = parse(viz.to_dot(h))
    assert len(labels(nodes, "box")) == 90 and len(edges) == 30 * 4 + 1  # 4 per diamond, then the output


class TwoOut(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


def test_multi_output_node():
    x = leaf(2, name="x")
    p, q = TwoOut.apply(x)
    nodes, edges = parse(viz.to_dot(p * q.exp()))
    two = by_label(nodes, "TwoOutBackward")
    outs = {e[1]: e[2].get("label") for e in edges if e[0] == two}
    assert sorted(outs.values()) == ["output 0", "output 1"]
    assert outs[by_label(nodes, "MulBackward")] == "output 0"
    assert outs[by_label(nodes, "ExpBackward")] == "output 1"


def test_several_outputs():
    x = leaf(2, name="x")
    p, q = TwoOut.apply(x)
    nodes, edges = parse(viz.to_dot((p, q)))
    assert labels(nodes, "box") == ["TwoOutBackward"]
    assert sorted(e[2]["label"] for e in edges if e[0] == by_label(nodes, "TwoOutBackward")) == ["output 0", "output 1"]


def test_deep_chain():
    x = leaf(2, name="x")
    y = x
    for _ in range(10_000):
        y = y * 1.0
    nodes, edges = parse(viz.to_dot(y))
    assert len(nodes) == 10_002 and len(edges) == 10_001


@pytest.mark.parametrize("name", ['a "quoted" name', "back\\slash", "two\nlines", "{braces}; -> [x]", "\\n literal", "ünï"])
def test_escaping_round_trips(name):
    x = leaf(2, name=name)
    nodes, _ = parse(viz.to_dot(x.exp()))
    assert f"{name}\n(2,)" in labels(nodes, "ellipse")


def test_bad_arguments():
    x = leaf(2)
    with pytest.raises(TypeError, match="to_dot"):
        viz.to_dot(np.ones(2))
    with pytest.raises(TypeError, match="to_dot"):
        viz.to_dot([])
    with pytest.raises(TypeError, match="params"):
        viz.to_dot(x.exp(), {"x": np.ones(2)})
    with pytest.raises(TypeError, match="params"):
        viz.to_dot(x.exp(), [x])


# ---------------------------------------------------------------------- rendering
@requires_dot
def test_dot_accepts_output():
    x = leaf(2, name='odd "name"\\')
    p, q = TwoOut.apply(x)
    import subprocess
    r = subprocess.run(["dot", "-Tplain"], input=viz.to_dot(p * q + x).encode(), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().count("\nnode ") == 5


@requires_dot
@pytest.mark.parametrize("ext, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg"), (".pdf", b"%PDF")])
def test_render_writes_image(tmp_path, ext, magic):
    x = leaf(3, name="x")
    path = tmp_path / f"graph{ext}"
    assert viz.render((x * 2).tanh(), path) == str(path)
    data = path.read_bytes()
    assert (data.startswith(magic) if ext != ".svg" else magic in data and b"TanhBackward" in data)


@requires_dot
def test_render_explicit_format(tmp_path):
    path = tmp_path / "graph.out"
    viz.render(leaf(2).exp(), path, format="SVG")
    assert b"<svg" in path.read_bytes()


def test_render_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="png, svg"):
        viz.render(leaf(2).exp(), tmp_path / "graph.jpgx")


def test_render_without_dot(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `dot` anywhere
    with pytest.raises(RuntimeError, match="apt-get install graphviz") as info:
        viz.render(leaf(2).exp(), tmp_path / "graph.png")
    assert "to_dot()" in str(info.value)
    assert not (tmp_path / "graph.png").exists()


def test_graph_still_drawn_after_backward():
    x = leaf(2, name="x")
    y = (x * 3).exp()
    before = viz.to_dot(y)
    y.backward(ember.ones(2))  # frees saved tensors, keeps the edges
    assert viz.to_dot(y) == before


def test_leaf_output_shared_with_other_output():
    x = leaf(2, name="x")
    nodes, edges = parse(viz.to_dot([x, x.exp()]))
    assert labels(nodes, "ellipse") == ["(2,)", "x\n(2,)"]
    assert (by_label(nodes, "x\n(2,)"), by_label(nodes, "ExpBackward")) in {(a, b) for a, b, _ in edges}
