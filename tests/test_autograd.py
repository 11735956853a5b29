"""Semantics of the autograd engine: accumulation, graph shape, memory, errors, higher order,
hooks, custom Functions, grad modes and the worked examples from the design literature."""
import gc
import math
import threading
import weakref

import numpy as np
import pytest

import ember
from ember.autograd import Function


def leaf(*vals, dtype=ember.float64):
    return ember.tensor(list(vals) if len(vals) > 1 else vals[0], dtype=dtype, requires_grad=True)


# ---------------------------------------------------------------------- accumulation and graph order
class CountingIdentity(Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        CountingIdentity.calls += 1
        return g


def test_tensor_used_several_times_accumulates():
    x = leaf(3.0)
    y = x * x + x * 2 + x
    y.backward()
    assert x.grad.item() == pytest.approx(2 * 3 + 2 + 1)


def test_diamond_runs_each_backward_once():
    CountingIdentity.calls = 0
    x = leaf(1.5)
    a = CountingIdentity.apply(x ** 2)
    y = a ** 2 + a ** 2
    y.backward()
    assert CountingIdentity.calls == 1
    assert x.grad.item() == pytest.approx(8 * 1.5 ** 3)  # d/dx 2x^4


def test_grad_accumulates_across_backward_calls_until_cleared():
    x = leaf(2.0)
    (x * 3).backward()
    (x * 3).backward()
    assert x.grad.item() == 6.0
    x.grad = None
    (x * 3).backward()
    assert x.grad.item() == 3.0


def test_shared_gradient_arrays_are_not_aliased_between_leaves():
    a, b = leaf(1.0, 2.0), leaf(3.0, 4.0)
    (a + b).sum().backward()
    a.grad.mul_(10)  # in-place on one leaf's grad must not change the other's
    assert b.grad.tolist() == [1.0, 1.0]
    assert a.grad.tolist() == [10.0, 10.0]


def test_non_leaf_has_no_grad_unless_retained():
    x = leaf(1.0, 2.0)
    h = x * 2
    k = x * 3
    k.retain_grad()
    (h * k).sum().backward()
    assert h.grad is None and x.grad is not None
    assert k.grad.tolist() == [2.0, 4.0]
    assert k.retains_grad and not h.retains_grad


def test_backward_of_a_leaf_root():
    x = leaf(1.0, 2.0)
    x.backward(ember.tensor([3.0, 4.0], dtype=ember.float64))
    assert x.grad.tolist() == [3.0, 4.0]


# ---------------------------------------------------------------------- deep graphs and memory
def test_graph_100k_deep_backpropagates_without_recursion():
    x = leaf(1.0)
    y = x
    for _ in range(100_000):
        y = y * 1.0 + 0.0
    y.backward()
    assert x.grad.item() == 1.0


def test_graph_freed_when_output_goes():
    gc.disable()
    try:
        x = leaf(1.0, 2.0)
        y = (x * 2).exp() * x
        node = weakref.ref(y.grad_fn)
        inner = weakref.ref(y.grad_fn.next[0])
        del y
        assert node() is None and inner() is None  # freed by reference counting alone: no cycles
    finally:
        gc.enable()


def test_saved_buffers_freed_after_backward():
    x = leaf(1.0, 2.0)
    y = (x * x).exp()
    node = y.grad_fn
    y.sum().backward()
    assert node.out is None and node.inputs is ember.autograd.function.FREED


# ---------------------------------------------------------------------- retain_graph and in-place errors
def test_second_backward_needs_retain_graph():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_inplace_change_of_saved_tensor_raises_naming_op_and_versions():
    x = leaf(1.0, 2.0)
    h = x * 1
    y = h * h  # saves h
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"MulBackward.*version 1; expected version 0"):
        y.sum().backward()


def test_inplace_on_non_leaf_rebases_graph():
    x = leaf(1.0, 2.0)
    y = x * 2
    y.add_(1)
    y.mul_(3)
    (y * y).sum().backward()
    # y = 3(2x + 1), d/dx sum(y^2) = 2y * 6
    assert x.grad.tolist() == [2 * 9 * 6, 2 * 15 * 6]


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with ember.no_grad():
        x.add_(1)  # the optimizer's way
    assert x.tolist() == [2.0, 3.0]


# ---------------------------------------------------------------------- bad inputs to autograd
def test_backward_of_non_scalar_needs_gradient():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_integer_tensor_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2]).requires_grad_()


def test_grad_of_tensor_that_does_not_require_grad():
    x = ember.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * 2).sum().backward()
    w = leaf(1.0)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.autograd.grad(w * 2, [x])


def test_grad_of_unused_input():
    x, z = leaf(1.0), leaf(2.0)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        ember.autograd.grad(x * 2, [x, z])
    gx, gz = ember.autograd.grad(x * 2, [x, z], allow_unused=True)
    assert gx.item() == 2.0 and gz is None


def test_gradient_shape_mismatch():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(ember.ones(3, dtype=ember.float64))


def test_mixing_devices_raises_naming_both():
    from ember import backend

    class FakeCudaArray(np.ndarray):
        __array_ufunc__ = None  # like CuPy, refuses to compute with host arrays

    backend.register_array_type(FakeCudaArray, backend.device("cuda", 0), np)
    try:
        a = ember.ones(2)
        b = ember.ones(2)
        b._data = b._data.view(FakeCudaArray)
        assert b.device == ember.device("cuda:0")
        with pytest.raises(RuntimeError, match=r"same device.*cpu.*cuda:0|same device.*cuda:0.*cpu"):
            a + b
    finally:
        del backend._ARRAY_TYPES[FakeCudaArray]


# ---------------------------------------------------------------------- autograd.grad, inputs=, hooks
def test_backward_inputs_restricts_accumulation():
    x, w = leaf(1.0, 2.0), leaf(3.0, 4.0)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.tolist() == [1.0, 2.0]


def test_grad_wrt_non_leaf():
    x = leaf(1.0, 2.0)
    h = x * 3
    (g,) = ember.autograd.grad((h * h).sum(), [h])
    assert g.tolist() == [6.0, 12.0]


def test_tensor_hooks_modify_and_remove():
    x = leaf(1.0, 2.0)
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    h.sum().backward()
    assert x.grad.tolist() == [20.0, 20.0] and seen == [[20.0, 20.0]]
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_register_hook_on_tensor_not_requiring_grad():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.ones(2).register_hook(lambda g: g)


# ---------------------------------------------------------------------- higher-order derivatives
def test_newton_method_with_second_derivative():
    x = ember.tensor(2.0, dtype=ember.float64)
    for _ in range(20):
        x.requires_grad_()
        f = x ** 4 - 2 * x ** 2
        (d1,) = ember.autograd.grad(f, [x], create_graph=True)
        (d2,) = ember.autograd.grad(d1, [x])
        x = (x - d1 / d2).detach()
    assert x.item() == pytest.approx(1.0, abs=1e-10)


def test_third_derivative_of_sin_is_minus_cos():
    x = leaf(0.7)
    g = x.sin()
    for _ in range(3):
        (g,) = ember.autograd.grad(g, [x], create_graph=True)
    assert g.item() == pytest.approx(-math.cos(0.7))


def test_create_graph_backward_gives_grad_with_graph():
    x = leaf(3.0)
    (x ** 3).backward(create_graph=True)
    assert x.grad.requires_grad
    (g2,) = ember.autograd.grad(x.grad, [x])
    assert g2.item() == pytest.approx(18.0)


# ---------------------------------------------------------------------- worked examples
def test_sphere_gradient():
    x, y = leaf(1.0), leaf(1.0)
    (x ** 2 + y ** 2).backward()
    assert (x.grad.item(), y.grad.item()) == (2.0, 2.0)


def test_matyas_gradient():
    x, y = leaf(1.0), leaf(1.0)
    (0.26 * (x ** 2 + y ** 2) - 0.48 * x * y).backward()
    assert x.grad.item() == pytest.approx(0.04) and y.grad.item() == pytest.approx(0.04)


def test_goldstein_price_gradient():
    x, y = leaf(1.0), leaf(1.0)
    z = (1 + (x + y + 1) ** 2 * (19 - 14 * x + 3 * x ** 2 - 14 * y + 6 * x * y + 3 * y ** 2)) * \
        (30 + (2 * x - 3 * y) ** 2 * (18 - 32 * x + 12 * x ** 2 + 48 * y - 36 * x * y + 27 * y ** 2))
    z.backward()
    assert x.grad.item() == pytest.approx(-5376.0) and y.grad.item() == pytest.approx(8064.0)


def test_e_equals_a_plus_b_times_b_plus_1():
    a, b = leaf(2.0), leaf(1.0)
    e = (a + b) * (b + 1)
    e.backward()
    assert e.item() == 6.0 and a.grad.item() == 2.0 and b.grad.item() == 5.0


def test_ln_x1_plus_x1x2_minus_sin_x2():
    x1, x2 = leaf(2.0), leaf(5.0)
    y = x1.log() + x1 * x2 - x2.sin()
    y.backward()
    assert y.item() == pytest.approx(11.652, abs=1e-3)
    assert x1.grad.item() == pytest.approx(5.5) and x2.grad.item() == pytest.approx(1.716, abs=1e-3)


# ---------------------------------------------------------------------- custom Functions
class MulAdd(Function):
    """(x * y + 1, x - y): two inputs, two outputs."""

    @staticmethod
    def forward(ctx, x, y, scale=1.0):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        return x * y * scale + 1, x - y

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        assert ctx.needs_input_grad[:2] == (True, False)
        return g1 * y * ctx.scale + g2, None, None


def test_function_multi_input_multi_output():
    x = leaf(1.0, 2.0)
    y = ember.tensor([3.0, 4.0], dtype=ember.float64)
    a, b = MulAdd.apply(x, y, 2.0)
    assert a.tolist() == [7.0, 17.0] and b.tolist() == [-2.0, -2.0]
    (a.sum() + 3 * b.sum()).backward()
    assert x.grad.tolist() == [6 + 3, 8 + 3]


def test_function_unused_output_gets_zero_grad():
    x = leaf(1.0, 2.0)
    a, _ = MulAdd.apply(x, ember.ones(2, dtype=ember.float64))
    a.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


class SortWithIndex(Function):
    @staticmethod
    def forward(ctx, x):
        idx = ember.from_numpy(np.argsort(x.detach().numpy()))
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return ember.from_numpy(np.sort(x.detach().numpy())), idx

    @staticmethod
    def backward(ctx, g, _):
        (idx,) = ctx.saved_tensors
        out = np.zeros_like(g.numpy())
        out[idx.numpy()] = g.numpy()
        return ember.from_numpy(out)


def test_function_mark_non_differentiable():
    x = leaf(3.0, 1.0, 2.0)
    s, idx = SortWithIndex.apply(x)
    assert not idx.requires_grad and s.requires_grad
    (s * ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)).sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 2.0]


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)  # saving an output: no reference cycle
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def test_function_saving_its_output_double_backward_and_no_cycle():
    x = leaf(0.5)
    y = Exp.apply(x)
    (g,) = ember.autograd.grad(y, [x], create_graph=True)
    (g2,) = ember.autograd.grad(g, [x])
    assert g2.item() == pytest.approx(math.exp(0.5))
    gc.disable()
    try:
        y = Exp.apply(x)
        ref = weakref.ref(y.grad_fn)
        del y
        assert ref() is None
    finally:
        gc.enable()


def test_function_wrong_gradient_count():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(leaf(1.0), leaf(2.0)).backward()


def test_function_wrong_gradient_shape():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ember.ones(3, dtype=ember.float64)

    with pytest.raises(RuntimeError, match=r"invalid gradient at index 0 - got \[3\] but expected shape compatible with \[2\]"):
        Bad.apply(leaf(1.0, 2.0)).sum().backward()


# ---------------------------------------------------------------------- grad modes
def test_no_grad_context_and_decorators():
    x = leaf(1.0)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad

    @ember.no_grad()
    def f(t):
        return t * 2

    @ember.no_grad
    def g(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    assert (x * 2).requires_grad


def test_set_grad_enabled_as_call_and_context():
    x = leaf(1.0)
    ember.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        ember.set_grad_enabled(True)
    with ember.set_grad_enabled(False):
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled() and (x * 2).requires_grad


def test_inference_mode():
    x = leaf(1.0)
    with ember.inference_mode():
        assert not (x * 2).requires_grad
    with ember.inference_mode(False):
        assert (x * 2).requires_grad


def test_grad_mode_is_thread_local():
    seen = []

    def worker():
        seen.append(ember.is_grad_enabled())

    with ember.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == [True]


def test_detach_and_requires_grad_():
    x = leaf(1.0, 2.0)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    d2 = x * 1
    d2.detach_()
    assert d2.is_leaf and not d2.requires_grad
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)


# ---------------------------------------------------------------------- anomaly detection
def test_detect_anomaly_names_op_and_forward_trace():
    x = leaf(0.0, 1.0)
    with ember.autograd.detect_anomaly():
        y = x.sqrt()  # d/dx sqrt at 0 is inf
        with pytest.raises(RuntimeError, match=r"(?s)SqrtBackward.*returned (nan|inf) values.*test_autograd\.py"):
            (y * 0 + y).sum().backward()


# ---------------------------------------------------------------------- shapes
def test_shape_and_size_are_size_tuples():
    x = ember.ones(2, 3)
    assert isinstance(x.shape, ember.Size) and x.shape == (2, 3) and x.size() == ember.Size([2, 3])
    assert x.shape.numel() == 6 and x.size(1) == 3 and x.size(-1) == 3
    assert repr(x.shape) == "ember.Size([2, 3])" and isinstance(x.shape[1:], ember.Size)
    with pytest.raises(IndexError, match="size"):
        x.size(2)
