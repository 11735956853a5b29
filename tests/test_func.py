"""Forward-mode AD (ember.autograd.forward_ad), the function transforms (ember.func) and
ember.autograd.functional: closed forms, agreement between the modes, PyTorch parity and PyTorch's errors.

The per-op forward derivatives are checked family by family where the reverse ones are (tests/helpers.py:
`check_grad` also builds the forward-mode Jacobian, `compare_torch` also compares tangents with PyTorch's);
vmap's batching rules are tested in tests/test_vmap.py.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.autograd import functional as AF
from ember.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize,
                        stack_module_state, vjp, vmap)
from helpers import need_torch, torch

F64 = ember.float64


def t64(a) -> ember.Tensor:
    return ember.tensor(np.asarray(a, np.float64))


# ---------------------------------------------------------------------- forward_ad
def test_worked_example_tangent_along_x1():
    """y = ln(x1) + x1·x2 − sin(x2) at (2, 5): along x1 the tangent is 1/x1 + x2 = 5.5; along x2, x1 − cos(x2)."""
    def f(x1, x2):
        return x1.log() + x1 * x2 - x2.sin()
    x1, x2 = t64(2.0), t64(5.0)
    with fwAD.dual_level():
        y = f(fwAD.make_dual(x1, t64(1.0)), x2)
        primal, tangent = fwAD.unpack_dual(y)
    assert tangent.item() == pytest.approx(5.5, abs=1e-15)
    assert primal.item() == pytest.approx(math.log(2) + 10 - math.sin(5))
    with fwAD.dual_level():
        y = f(x1, fwAD.make_dual(x2, t64(1.0)))
        assert fwAD.unpack_dual(y).tangent.item() == pytest.approx(2 - math.cos(5))
    # reverse mode gives both partials in one pass, and agrees
    a, b = t64(2.0).requires_grad_(), t64(5.0).requires_grad_()
    f(a, b).backward()
    assert a.grad.item() == pytest.approx(5.5) and b.grad.item() == pytest.approx(2 - math.cos(5))


def test_dual_level_scope_and_unpack():
    x = t64([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t64([3.0, 4.0]))
        p, t = fwAD.unpack_dual(d)
        assert isinstance(fwAD.unpack_dual(d), fwAD.UnpackedDualTensor)
        assert np.array_equal(p.numpy(), [1, 2]) and np.array_equal(t.numpy(), [3, 4])
        assert fwAD.unpack_dual(p).tangent is None  # the primal is a view without the tangent
        assert fwAD.unpack_dual(x).tangent is None  # make_dual leaves its input alone
    assert fwAD.unpack_dual(d).tangent is None  # the level closed: tangents are gone
    assert fwAD.unpack_dual(d).primal is d


def test_forward_ad_errors():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"different size .* Tensor is of size \[2\] while the given forward "
                                               r"gradient is of size \[3\]"):
            fwAD.make_dual(x, t64([1.0, 2.0, 3.0]))
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            fwAD.make_dual(x, ember.tensor([1, 2]))
        with pytest.raises(ValueError, match="Expected primal to be floating point"):
            fwAD.make_dual(ember.tensor([1, 2]), x)
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with fwAD.dual_level():
                pass


def test_op_without_rule_raises_pytorchs_error():
    from ember.autograd.function import Op

    class Twice(Op):
        def forward(self, x):
            return 2 * x

        def backward(self, gz, x):
            return 2 * gz

    with fwAD.dual_level():
        d = fwAD.make_dual(t64([1.0]), t64([1.0]))
        with pytest.raises(NotImplementedError, match="Trying to use forward AD with Twice that does not support it"):
            Twice.apply(d)


def test_in_place_ops_update_the_tangent():
    x = t64([1.0, 2.0, 3.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x.clone(), t64([1.0, 1.0, 1.0]))
        d.mul_(t64([2.0, 3.0, 4.0]))
        d.add_(1.0)
        assert np.allclose(fwAD.unpack_dual(d).tangent.numpy(), [2, 3, 4])
        e = ember.zeros(3, dtype=F64)
        e.copy_(d)
        assert np.allclose(fwAD.unpack_dual(e).tangent.numpy(), [2, 3, 4])


def test_custom_function_jvp():
    class Cube(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("not used")

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * x * t

    class NoJvp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with fwAD.dual_level():
        d = fwAD.make_dual(t64([2.0]), t64([1.0]))
        assert fwAD.unpack_dual(Cube.apply(d)).tangent.item() == pytest.approx(12.0)
        with pytest.raises(NotImplementedError, match="NoJvp"):
            NoJvp.apply(d)


def test_forward_over_reverse_hessian_vector_product():
    """Hv of f(x) = Σ x_i³ e^{x_i}: the tangent of the gradient (a backward pass under forward AD)."""
    x = t64([0.3, -0.8, 1.1])
    v = t64([1.0, -2.0, 0.5])
    with fwAD.dual_level():
        d = fwAD.make_dual(x.clone().requires_grad_(), v)
        (g,) = ember.autograd.grad((d ** 3 * d.exp()).sum(), d)
        hv = fwAD.unpack_dual(g).tangent
    xs = x.numpy()
    h = (6 * xs + 6 * xs ** 2 + xs ** 3) * np.exp(xs)  # d²/dx² of x³eˣ
    np.testing.assert_allclose(hv.numpy(), h * v.numpy(), rtol=1e-12)


def test_forward_ad_through_a_module_matches_reverse():
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Linear(4, 5), ember.nn.Tanh(), ember.nn.Linear(5, 2)).double()
    x = ember.randn(3, 4, dtype=F64)
    v = ember.randn(3, 4, dtype=F64)
    _, jv = jvp(net, (x,), (v,))
    J = jacrev(net)(x)  # (3, 2, 3, 4)
    np.testing.assert_allclose(jv.detach().numpy(), np.einsum("abcd,cd->ab", J.detach().numpy(), v.numpy()),
                               rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- grad, vjp, jvp
def test_grad_argnums_has_aux_and_containers():
    def f(x, y):
        return (x * y).sum() + (x ** 2).sum(), "aux"
    x, y = t64([1.0, 2.0]), t64([3.0, 4.0])
    (gx, gy), aux = grad(f, argnums=(0, 1), has_aux=True)(x, y)
    assert aux == "aux"
    np.testing.assert_allclose(gx.numpy(), y.numpy() + 2 * x.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy())
    g, (value, _) = grad_and_value(f, has_aux=True)(x, y)
    assert value.item() == pytest.approx(16.0)
    params = {"w": t64([1.0, -1.0]), "b": t64(0.5)}
    gp = grad(lambda p, z: ((p["w"] * z).sum() + p["b"]) ** 2)(params, x)
    assert set(gp) == {"w", "b"}
    r = (params["w"] * x).sum().item() + 0.5
    np.testing.assert_allclose(gp["w"].numpy(), 2 * r * x.numpy())
    assert gp["b"].item() == pytest.approx(2 * r)


def test_grad_of_grad_and_no_leak_into_inputs():
    x = t64(0.7)
    d2 = grad(grad(lambda a: a.sin() * a))(x)
    assert d2.item() == pytest.approx(2 * math.cos(0.7) - 0.7 * math.sin(0.7))
    assert x.grad is None and not x.requires_grad


def test_grad_errors():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match=r"should be a tuple: \(output, aux\)"):
        grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Got argnum=3, but only 1 positional inputs"):
        grad(lambda a: a.sum(), argnums=3)(x)
    with pytest.raises(RuntimeError, match="floating point"):
        grad(lambda a: a.sum())(ember.tensor([1, 2]))


def test_vjp_and_jvp_agree_on_a_composite():
    def f(a, b):
        return (a @ b).tanh() * a.sum(), (b ** 2).mean(0)
    rng = np.random.default_rng(3)
    a, b = t64(rng.standard_normal((3, 4))), t64(rng.standard_normal((4, 2)))
    ta, tb = t64(rng.standard_normal((3, 4))), t64(rng.standard_normal((4, 2)))
    c1, c2 = t64(rng.standard_normal((3, 2))), t64(rng.standard_normal(2))
    (o1, o2), jv = jvp(f, (a, b), (ta, tb))
    _, fn = vjp(f, a, b)
    ga, gb = fn((c1, c2))
    # <c, J t> = <Jᵀ c, t>
    lhs = (c1 * jv[0]).sum().item() + (c2 * jv[1]).sum().item()
    rhs = (ga * ta).sum().item() + (gb * tb).sum().item()
    assert lhs == pytest.approx(rhs, rel=1e-12)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn((c2, c2))


def test_jvp_errors():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        jvp(ember.sin, x, (x,))
    with pytest.raises(RuntimeError, match="same shape"):
        jvp(ember.exp, (x,), (t64([1.0, 2.0, 3.0]),))


def test_linearize():
    x = t64([0.5, 1.5])
    out, fn = linearize(lambda a: a.exp() * a, x)
    np.testing.assert_allclose(out.numpy(), np.exp(x.numpy()) * x.numpy())
    np.testing.assert_allclose(fn(t64([1.0, 0.0])).numpy(), [np.exp(0.5) * 1.5, 0.0])


# ---------------------------------------------------------------------- Jacobians and Hessians: closed forms
def rosenbrock(v):
    x, y = v[0], v[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def rosenbrock_hessian(x, y):
    return np.array([[2 - 400 * (y - x * x) + 800 * x * x, -400 * x], [-400 * x, 200.0]])


class _Poly:
    """Exact polynomials in x, y ({(i, j): c} for c·xⁱyʲ): the closed-form Hessian of Goldstein–Price."""

    def __init__(self, terms):
        self.t = {k: v for k, v in terms.items() if v}

    def __add__(self, o):
        o = o if isinstance(o, _Poly) else _Poly({(0, 0): o})
        t = dict(self.t)
        for k, v in o.t.items():
            t[k] = t.get(k, 0) + v
        return _Poly(t)

    __radd__ = __add__

    def __mul__(self, o):
        o = o if isinstance(o, _Poly) else _Poly({(0, 0): o})
        t: dict = {}
        for (a, b), u in self.t.items():
            for (c, d), w in o.t.items():
                t[(a + c, b + d)] = t.get((a + c, b + d), 0) + u * w
        return _Poly(t)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def __sub__(self, o):
        return self + (-1) * o

    def __rsub__(self, o):
        return (-1) * self + o

    def __pow__(self, n: int):
        r = _Poly({(0, 0): 1})
        for _ in range(n):
            r = r * self
        return r

    def d(self, var):
        return _Poly({((i - 1, j) if var == 0 else (i, j - 1)): c * (i if var == 0 else j)
                      for (i, j), c in self.t.items() if (i if var == 0 else j)})

    def __call__(self, x, y):
        return sum(c * x ** i * y ** j for (i, j), c in self.t.items())


def goldstein_price(v):
    x, y = v[0], v[1]
    a = 1 + (x + y + 1) ** 2 * (19 - 14 * x + 3 * x ** 2 - 14 * y + 6 * x * y + 3 * y ** 2)
    b = 30 + (2 * x - 3 * y) ** 2 * (18 - 32 * x + 12 * x ** 2 + 48 * y - 36 * x * y + 27 * y ** 2)
    return a * b


def goldstein_price_hessian(x0, y0):
    X, Y = _Poly({(1, 0): 1}), _Poly({(0, 1): 1})
    f = goldstein_price((X, Y))
    return np.array([[f.d(i).d(j)(x0, y0) for j in (0, 1)] for i in (0, 1)])


@pytest.mark.parametrize("point", [(-1.2, 1.0), (0.3, -0.4)])
def test_hessian_of_rosenbrock_matches_closed_form(point):
    v = t64(point)
    want = rosenbrock_hessian(*point)
    for h in (hessian(rosenbrock), jacrev(jacrev(rosenbrock)), jacfwd(jacfwd(rosenbrock)), jacfwd(grad(rosenbrock))):
        np.testing.assert_allclose(h(v).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(AF.hessian(rosenbrock, v).numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("point", [(0.0, -1.0), (0.4, 0.2)])
def test_hessian_of_goldstein_price_matches_closed_form(point):
    v = t64(point)
    want = goldstein_price_hessian(*point)
    np.testing.assert_allclose(hessian(goldstein_price)(v).numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(jacrev(jacrev(goldstein_price))(v).numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(AF.hessian(goldstein_price, v, vectorize=True).numpy(), want, rtol=1e-10)


def test_jacfwd_equals_jacrev_and_layout():
    rng = np.random.default_rng(0)
    A = t64(rng.standard_normal((4, 3)))

    def f(x, y):
        return (A @ x).sigmoid() * y.sum(), x.exp()
    x, y = t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 2)))
    jr = jacrev(f, argnums=(0, 1))(x, y)
    jf = jacfwd(f, argnums=(0, 1))(x, y)
    assert jr[0][0].shape == (4, 3) and jr[0][1].shape == (4, 2, 2) and jr[1][0].shape == (3, 3)
    for a, b in zip(itertools.chain(*jr), itertools.chain(*jf)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_autograd_functional_structure_and_strict():
    x, y = t64([0.2, -0.5]), t64([1.5, 0.5])
    out, (vx, vy) = AF.vjp(lambda a, b: a * b, (x, y), t64([1.0, 2.0]))
    np.testing.assert_allclose(vx.numpy(), [1.5, 1.0])
    np.testing.assert_allclose(vy.numpy(), [0.2, -1.0])
    out, jv = AF.jvp(lambda a: a.exp(), x, t64([1.0, 1.0]))
    np.testing.assert_allclose(jv.numpy(), np.exp(x.numpy()))
    J = AF.jacobian(lambda a, b: (a * b, a.sum()), (x, y))
    assert isinstance(J, tuple) and len(J) == 2 and J[0][1].shape == (2, 2) and J[1][0].shape == (2,)
    _, hv = AF.hvp(lambda a: (a ** 3).sum(), x, t64([1.0, 1.0]))
    np.testing.assert_allclose(hv.numpy(), 6 * x.numpy())
    _, vh = AF.vhp(lambda a: (a ** 3).sum(), x, t64([1.0, 1.0]))
    np.testing.assert_allclose(vh.numpy(), 6 * x.numpy())
    with pytest.raises(RuntimeError, match="does not require gradients"):
        AF.jacobian(lambda a: ember.ones(2), x, strict=True)
    assert np.all(AF.jacobian(lambda a: ember.ones(2, dtype=F64), x).numpy() == 0)
    with pytest.raises(RuntimeError, match="v has invalid size"):
        AF.vjp(lambda a: a * 2, x, t64([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="single Tensor with a single element"):
        AF.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="should contain a single element"):
        AF.hessian(lambda a: a * 2, x)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        AF.jacobian(lambda a: 3, x)
    with pytest.raises(NotImplementedError, match="only implemented together with `vectorize=True`"):
        AF.jacobian(lambda a: a, x, strategy="forward-mode")


def test_create_graph_keeps_results_differentiable():
    x = t64([0.3, 0.9]).requires_grad_()
    _, g = AF.vjp(lambda a: (a ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    (gg,) = ember.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())
    _, g = AF.vjp(lambda a: (a ** 3).sum(), x)
    assert not g.requires_grad


# ---------------------------------------------------------------------- modules as functions
def test_functional_call_swaps_and_restores():
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 2).double()
    w0 = lin.weight
    x = ember.randn(4, 3, dtype=F64)
    new = {"weight": ember.ones(2, 3, dtype=F64), "bias": ember.zeros(2, dtype=F64)}
    out = functional_call(lin, new, (x,))
    np.testing.assert_allclose(out.detach().numpy(), np.repeat(x.numpy().sum(1, keepdims=True), 2, 1))
    assert lin.weight is w0  # restored
    out = functional_call(lin, {"bias": ember.ones(2, dtype=F64)}, x)  # partial: the weight is the module's
    np.testing.assert_allclose(out.detach().numpy(), x.numpy() @ w0.detach().numpy().T + 1)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'weight'"):
        functional_call(lin, {"bias": ember.ones(2, dtype=F64)}, x, strict=True)
    with pytest.raises(RuntimeError, match="'nope'"):
        functional_call(lin, {"nope": ember.ones(2)}, x)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(lin, ({"bias": ember.ones(2)}, {"bias": ember.ones(2)}), x)


def test_functional_call_tied_weights_and_buffers():
    class Tied(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ember.nn.Linear(2, 2, bias=False)
            self.b = ember.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("scale", ember.tensor(2.0))

        def forward(self, x):
            return self.b(self.a(x)) * self.scale

    m = Tied().double()
    x = ember.ones(1, 2, dtype=F64)
    eye = ember.eye(2, dtype=F64)
    out = functional_call(m, {"a.weight": eye, "scale": ember.tensor(3.0, dtype=F64)}, (x,))
    np.testing.assert_allclose(out.detach().numpy(), [[3.0, 3.0]])  # b.weight followed a.weight (tied)
    out = functional_call(m, {"a.weight": eye}, (x,), tie_weights=False)  # b keeps the module's own weight
    want = x.numpy() @ m.a.weight.detach().numpy().T * 2.0
    np.testing.assert_allclose(out.detach().numpy(), want)


def test_stack_module_state_and_ensemble_gradients():
    ember.manual_seed(1)
    models = [ember.nn.Linear(3, 2).double() for _ in range(4)]
    params, buffers = stack_module_state(models)
    assert params["weight"].shape == (4, 2, 3) and params["weight"].requires_grad and params["weight"].is_leaf
    x = ember.randn(5, 3, dtype=F64)
    out = vmap(lambda p, b, z: functional_call(models[0], (p, b), (z,)), in_dims=(0, 0, None))(params, buffers, x)
    want = np.stack([m(x).detach().numpy() for m in models])
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-12)
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        stack_module_state([])
    models[1].eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state(models)


# ---------------------------------------------------------------------- PyTorch parity
def test_transforms_match_torch_func():
    torch_ = need_torch()
    tf = need_torch("torch.func")
    rng = np.random.default_rng(7)
    W = rng.standard_normal((3, 4))
    xs = rng.standard_normal(4)
    tv = rng.standard_normal(4)

    def ef(x):
        return (t64(W) @ x).tanh() * x.sum()

    def tfn(x):
        return (torch_.tensor(W) @ x).tanh() * x.sum()
    x_e, x_t = t64(xs), torch_.tensor(xs)
    np.testing.assert_allclose(jacrev(ef)(x_e).numpy(), tf.jacrev(tfn)(x_t).numpy(), rtol=1e-12)
    np.testing.assert_allclose(jacfwd(ef)(x_e).numpy(), tf.jacfwd(tfn)(x_t).numpy(), rtol=1e-12)
    np.testing.assert_allclose(jvp(ef, (x_e,), (t64(tv),))[1].numpy(),
                               tf.jvp(tfn, (x_t,), (torch_.tensor(tv),))[1].numpy(), rtol=1e-12)
    np.testing.assert_allclose(hessian(lambda v: ef(v).sum())(x_e).numpy(),
                               tf.hessian(lambda v: tfn(v).sum())(x_t).numpy(), rtol=1e-10)
    ta = need_torch("torch.autograd.functional")
    np.testing.assert_allclose(AF.jacobian(ef, x_e).numpy(), ta.jacobian(tfn, x_t).numpy(), rtol=1e-12)
    np.testing.assert_allclose(AF.hvp(lambda v: ef(v).sum(), x_e, t64(tv))[1].numpy(),
                               ta.hvp(lambda v: tfn(v).sum(), x_t, torch_.tensor(tv))[1].numpy(), rtol=1e-10)
