"""Memory formats (ember/_memory_format.py): channels_last tensors keep their logical shape and values, report
their layout as PyTorch's do, and every spatial op gives the same result on them as on contiguous tensors."""
import numpy as np
import pytest
from helpers import requires_torch, torch

import ember
import ember.nn.functional as F


def _x(shape=(2, 3, 5, 4)):
    return ember.tensor(np.random.default_rng(0).standard_normal(shape), dtype=ember.float32)


def test_layouts_and_predicates():
    x = _x()
    cl = x.contiguous(memory_format=ember.channels_last)
    assert cl.shape == x.shape and ember.equal(cl, x)
    assert cl.is_contiguous(memory_format=ember.channels_last) and not cl.is_contiguous()
    assert cl.stride() == (60, 1, 12, 3)
    assert x.to(memory_format=ember.channels_last).is_contiguous(memory_format=ember.channels_last)
    assert cl.contiguous().is_contiguous() and cl.contiguous(memory_format=ember.channels_last) is cl
    assert cl.clone().is_contiguous(memory_format=ember.channels_last)  # preserve_format keeps the layout
    assert cl.clone(memory_format=ember.contiguous_format).is_contiguous()
    assert cl.float().is_contiguous(memory_format=ember.channels_last)
    v = _x((2, 3, 4, 5, 6)).contiguous(memory_format=ember.channels_last_3d)
    assert v.is_contiguous(memory_format=ember.channels_last_3d) and not v.is_contiguous()
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ember.ones(2, 3).contiguous(memory_format=ember.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.contiguous(memory_format=ember.preserve_format)
    with pytest.raises(TypeError, match="memory_format must be an ember.memory_format"):
        x.contiguous(memory_format="channels_last")


def test_gradient_flows_through_a_layout_change():
    x = _x().requires_grad_()
    (x.contiguous(memory_format=ember.channels_last) * 2).sum().backward()
    assert ember.equal(x.grad, ember.full_like(x, 2.0))


def test_module_to_channels_last():
    m = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4), ember.nn.Linear(2, 2))
    m.to(memory_format=ember.channels_last)
    assert m[0].weight.is_contiguous(memory_format=ember.channels_last)
    assert m[2].weight.is_contiguous()  # (2-d: untouched)


CASES = {
    "conv2d": lambda x: F.conv2d(x, ember.ones(4, 3, 3, 3) * 0.1, padding=1),
    "conv2d_stride": lambda x: F.conv2d(x, ember.ones(2, 3, 2, 2), stride=2),
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, (2, 2)),
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x, 3),
    "interpolate": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
    "unfold": lambda x: F.unfold(x, 2),
    "fused": lambda x: F.relu(F.max_pool2d(F.conv2d(x, ember.ones(2, 3, 3, 3)), 2)),
    "elementwise": lambda x: (x * 2 + 1).sigmoid().sum((2, 3)),
    "flatten_linear": lambda x: x.flatten(1) @ ember.ones(60, 2),
    "permute_reshape": lambda x: x.permute(0, 2, 3, 1).reshape(-1, 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ops_on_channels_last_equal_contiguous(name):
    x = _x().requires_grad_()
    cl = x.detach().contiguous(memory_format=ember.channels_last).requires_grad_()
    a, b = CASES[name](x), CASES[name](cl)
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = ember.tensor(np.random.default_rng(1).standard_normal(a.shape), dtype=ember.float32)
    a.backward(g)
    b.backward(g)
    np.testing.assert_allclose(cl.grad.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)


@requires_torch
def test_strides_match_torch():
    shape = (2, 3, 5, 4)
    t = torch.zeros(shape).contiguous(memory_format=torch.channels_last)
    e = ember.zeros(*shape).contiguous(memory_format=ember.channels_last)
    assert e.stride() == t.stride()
    t3 = torch.zeros(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d)
    e3 = ember.zeros(2, 3, 4, 5, 6).contiguous(memory_format=ember.channels_last_3d)
    assert e3.stride() == t3.stride()
