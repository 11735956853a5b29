"""Who owns a gradient array: the engine stores a leaf's first gradient without a copy only when no one
else can see it, and never writes into an array that another consumer of the same pass still reads, or
that the user holds. (Before the engine tracked this explicitly, both cases below went wrong.)"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from helpers import torch

LIBS = [ember] + ([torch] if torch is not None else [])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_a_gradient_sent_to_a_leaf_and_a_node_is_not_overwritten(lib):
    """Add sends one gradient array to both inputs: to the leaf x (stored as x.grad) and to the inner sum,
    whose branches then add more into x.grad while the other branch still has to read that array."""
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    s = (x + ((x * 2) + (x * 3))) * 1.0
    s.backward(lib.ones(2, dtype=lib.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])
    y = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    ((y + (y.exp() + y * 3)) * 2.0).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * (1 + np.exp([1.0, 2.0]) + 3), rtol=1e-15)


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_a_tensor_a_hook_returns_is_never_written_into(lib):
    u = lib.ones(2, dtype=lib.float64)
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    x.register_hook(lambda g: u)
    (x * 2).sum().backward()
    (x * 2).sum().backward()  # accumulates into x.grad: must not write into u
    np.testing.assert_array_equal(u.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_two_leaves_never_share_a_gradient_array(lib):
    a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
    ((a + b) * 1.0).sum().backward()
    a.grad.add_(5.0)
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_the_callers_gradient_is_never_written_into(lib):
    g = lib.ones(2, dtype=lib.float64)
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = x * 1.0
    y.backward(g)
    y2 = x * 1.0
    y2.backward(g)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_a_view_of_the_callers_gradient_is_never_written_into():
    """(PyTorch 2.13 does write into v here: its accumulator takes over the view. ember copies any view.)"""
    v = ember.ones(4, dtype=ember.float64)
    z = ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64, requires_grad=True)
    z.reshape(2, 2).backward(v.reshape(2, 2))  # the leaf's gradient is a view of the caller's
    z.reshape(2, 2).backward(v.reshape(2, 2))
    np.testing.assert_array_equal(v.numpy(), [1.0] * 4)
    np.testing.assert_array_equal(z.grad.numpy(), [2.0] * 4)


def test_a_stored_gradient_is_accumulated_in_place_across_passes():
    """The owned case keeps PyTorch's in-place accumulation (the array `.grad` holds does not change)."""
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    held = w.grad._data
    (w * w).sum().backward()
    assert w.grad._data is held
    np.testing.assert_array_equal(held, [4.0, 8.0])


def test_a_leaf_reached_many_times_in_one_pass_gets_the_sum():
    """A weight shared across time steps (as in an RNN): deliveries after the first go into one array."""
    w = ember.tensor([0.5, -1.0], dtype=ember.float64, requires_grad=True)
    h = ember.ones(2, dtype=ember.float64)
    for _ in range(6):
        h = h * w + w
    h.sum().backward()
    wn = np.array([0.5, -1.0])
    hs = [np.ones(2)]
    for _ in range(6):
        hs.append(hs[-1] * wn + wn)
    # d h6 / d w by the recurrence: dh_{k+1} = dh_k * w + h_k + 1
    d = np.zeros(2)
    for k in range(6):
        d = d * wn + hs[k] + 1
    np.testing.assert_allclose(w.grad.numpy(), d, rtol=1e-14)
