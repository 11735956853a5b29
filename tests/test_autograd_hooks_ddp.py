"""Tensor.register_post_accumulate_grad_hook and the engine's end-of-backward callbacks
(engine.queue_callback): the two engine features DistributedDataParallel is built on."""
import numpy as np
import pytest

import ember as torch
from ember.autograd import engine


def test_post_hook_fires_once_after_all_paths_accumulated():
    w = torch.ones(3, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append((p is w, p.grad.numpy().copy())))
    ((w * 2).sum() + (w * 3).sum() + w.sum()).backward()  # three edges into w
    assert len(seen) == 1 and seen[0][0]
    np.testing.assert_array_equal(seen[0][1], [6, 6, 6])


def test_post_hook_sees_accumulated_grad_each_pass_and_after_grad_hooks():
    w = torch.ones(2, requires_grad=True)
    w.register_hook(lambda g: g * 10)
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    (w * 1).sum().backward()
    (w * 1).sum().backward()
    np.testing.assert_array_equal(seen, [[10, 10], [20, 20]])


def test_post_hooks_fire_in_backward_order_before_end_callbacks():
    w1 = torch.ones(2, 2, requires_grad=True)
    w2 = torch.ones(2, 2, requires_grad=True)
    log = []

    def hook(name):
        def h(p):
            if not log:
                engine.queue_callback(lambda: log.append("end"))
            log.append(name)
        return h
    w1.register_post_accumulate_grad_hook(hook("w1"))
    w2.register_post_accumulate_grad_hook(hook("w2"))
    x = torch.ones(1, 2)
    ((x @ w1).tanh() @ w2).sum().backward()
    assert log == ["w2", "w1", "end"]  # w2 is nearer the loss: ready first
    log.clear()
    ((x @ w1).tanh() @ w2).sum().backward()
    assert log == ["w2", "w1", "end"]  # a callback runs for the pass that queued it only, once


def test_post_hook_on_a_leaf_root_and_with_inputs():
    w = torch.ones(2, requires_grad=True)
    v = torch.ones(2, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append("w"))
    v.register_post_accumulate_grad_hook(lambda p: seen.append("v"))
    w.backward(torch.ones(2))
    assert seen == ["w"]
    seen.clear()
    (w * v).sum().backward(inputs=[v])
    assert seen == ["v"]


def test_post_hook_not_fired_by_autograd_grad_and_removable():
    w = torch.ones(2, requires_grad=True)
    seen = []
    h = w.register_post_accumulate_grad_hook(lambda p: seen.append(1))
    torch.autograd.grad((w * 2).sum(), [w])
    assert seen == [] and w.grad is None
    h.remove()
    (w * 2).sum().backward()
    assert seen == []


def test_post_hook_errors():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        torch.ones(2).register_post_accumulate_grad_hook(lambda p: None)
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    w.register_post_accumulate_grad_hook(lambda p: 1)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks should return None"):
        w.sum().backward()


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
        engine.queue_callback(lambda: None)


def test_callbacks_skipped_when_backward_raises_and_state_is_clean():
    w = torch.ones(2, requires_grad=True)
    ran = []

    def bad(g):
        engine.queue_callback(lambda: ran.append(1))
        raise ValueError("hook failed")
    w.register_hook(bad)
    with pytest.raises(ValueError, match="hook failed"):
        (w * 2).sum().backward()
    assert ran == []
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed"):
        engine.queue_callback(lambda: None)  # the failed pass left nothing behind


def test_nested_backward_callbacks_go_to_their_own_pass():
    w = torch.ones(2, requires_grad=True)
    u = torch.ones(2, requires_grad=True)
    log = []

    def outer(p):
        engine.queue_callback(lambda: log.append("outer end"))
        u.register_post_accumulate_grad_hook(lambda q: engine.queue_callback(lambda: log.append("inner end")))
        with torch.enable_grad():  # backward runs hooks with grad mode off, as PyTorch does
            (u * 2).sum().backward()  # a backward inside a hook: its callback runs at its own end
        log.append("after inner")
    w.register_post_accumulate_grad_hook(outer)
    (w * 2).sum().backward()
    assert log == ["inner end", "after inner", "outer end"]
