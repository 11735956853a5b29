"""Forward and reverse mode side by side on y = ln(x1) + x1·x2 − sin(x2) at (x1, x2) = (2, 5).

Forward mode carries a tangent v̇ = dv/dx1 with every intermediate value v (one pass per input
direction); reverse mode records the values, then carries adjoints v̄ = dy/dv from y back to the inputs
(one pass per output). Both tables below are computed by ember (ember.autograd.forward_ad for the
tangents, retain_grad and backward for the adjoints); docs/autodiff.md shows them.

    python examples/forward_reverse.py
"""
import math

import ember
import ember.autograd.forward_ad as fwAD


def trace(x1, x2):
    """The evaluation trace: the intermediate values v_{-1}..v_5 of y, in order."""
    v = {"v-1": x1, "v0": x2}
    v["v1"] = v["v-1"].log()
    v["v2"] = v["v-1"] * v["v0"]
    v["v3"] = v["v0"].sin()
    v["v4"] = v["v1"] + v["v2"]
    v["v5"] = v["v4"] - v["v3"]
    return v


FORMULAS = {"v-1": "x1", "v0": "x2", "v1": "ln v-1", "v2": "v-1 × v0", "v3": "sin v0", "v4": "v1 + v2",
            "v5": "v4 − v3"}


def forward_table(x1: float, x2: float) -> list:
    """(name, formula, value, tangent along x1) for every intermediate, from one forward-mode pass."""
    rows = []
    with fwAD.dual_level():
        d1 = fwAD.make_dual(ember.tensor(x1, dtype=ember.float64), ember.tensor(1.0, dtype=ember.float64))
        d2 = ember.tensor(x2, dtype=ember.float64)  # no tangent: the direction is x1
        for name, value in trace(d1, d2).items():
            primal, tangent = fwAD.unpack_dual(value)
            rows.append((name, FORMULAS[name], primal.item(), 0.0 if tangent is None else tangent.item()))
    return rows


def reverse_table(x1: float, x2: float) -> list:
    """(name, formula, value, adjoint dy/dv) for every intermediate, from one backward pass."""
    a = ember.tensor(x1, dtype=ember.float64, requires_grad=True)
    b = ember.tensor(x2, dtype=ember.float64, requires_grad=True)
    v = trace(a, b)
    for name, t in v.items():
        if name not in ("v-1", "v0"):
            t.retain_grad()
    v["v5"].backward()
    return [(name, FORMULAS[name], t.item(), t.grad.item()) for name, t in reversed(list(v.items()))]


def main() -> None:
    x1, x2 = 2.0, 5.0
    print("Forward mode (tangents along x1: one pass gives dy/dx1)")
    print(f"{'v':>4} | {'formula':<9} | {'value':>9} | {'tangent':>9}")
    for name, formula, value, tangent in forward_table(x1, x2):
        print(f"{name:>4} | {formula:<9} | {value:9.4f} | {tangent:9.4f}")
    print(f"dy/dx1 = {forward_table(x1, x2)[-1][3]:.4f} (1/x1 + x2 = {1 / x1 + x2})")
    print()
    print("Reverse mode (adjoints: one backward pass gives dy/dx1 and dy/dx2)")
    print(f"{'v':>4} | {'formula':<9} | {'value':>9} | {'adjoint':>9}")
    rows = reverse_table(x1, x2)
    for name, formula, value, adjoint in rows:
        print(f"{name:>4} | {formula:<9} | {value:9.4f} | {adjoint:9.4f}")
    grads = {name: adjoint for name, _, _, adjoint in rows}
    print(f"dy/dx1 = {grads['v-1']:.4f}, dy/dx2 = {grads['v0']:.4f} (x1 − cos x2 = {x1 - math.cos(x2):.4f})")


if __name__ == "__main__":
    main()
