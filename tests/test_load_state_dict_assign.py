"""`Module.load_state_dict(assign=True)`: the checkpoint's tensors take the module's places (PyTorch's
semantics), where the default copies values into the module's own tensors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from helpers import raises_like_torch, torch

LIBS = [ember] + ([torch] if torch is not None else [])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_assign_keeps_the_checkpoints_tensors(lib):
    m = lib.nn.Linear(2, 1)
    m.weight.requires_grad_(False)
    w, b = lib.ones(1, 2, dtype=lib.float64), lib.zeros(1, dtype=lib.float64)
    keys = m.load_state_dict({"weight": w, "bias": b}, assign=True)
    assert list(keys.missing_keys) == [] and list(keys.unexpected_keys) == []
    assert isinstance(m.weight, lib.nn.Parameter) and isinstance(m.bias, lib.nn.Parameter)
    assert m.weight.dtype == lib.float64 and not m.weight.requires_grad and m.bias.requires_grad
    w[0, 0] = 5.0
    assert m.weight[0, 0].item() == 5.0  # shares the checkpoint's storage
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    out = m(lib.ones(3, 2, dtype=lib.float64))
    np.testing.assert_allclose(out.detach().numpy(), np.full((3, 1), 6.0))


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_assign_replaces_buffers(lib):
    bn = lib.nn.BatchNorm1d(2)
    sd = {k: v.clone() for k, v in bn.state_dict().items()}
    bn.load_state_dict(sd, assign=True)
    assert bn.running_mean is sd["running_mean"]


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_copy_is_the_default_and_keeps_the_modules_tensors(lib):
    m = lib.nn.Linear(2, 1)
    w0 = m.weight
    m.load_state_dict({"weight": lib.ones(1, 2, dtype=lib.float64), "bias": lib.zeros(1, dtype=lib.float64)})
    assert m.weight is w0 and m.weight.dtype == lib.float32
    np.testing.assert_array_equal(m.weight.detach().numpy(), [[1.0, 1.0]])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_assign_refuses_arrays_and_leaves_the_module_unchanged(lib):
    def load(m):
        lin = m.nn.Linear(2, 1)
        lin.load_state_dict({"weight": np.ones((1, 2), np.float32), "bias": np.zeros(1, np.float32)}, assign=True)
    raises_like_torch(load, lib, RuntimeError, r"parameter named \"weight\".*Tensor.*numpy.ndarray")
    m = lib.nn.Linear(2, 1)
    before = m.weight.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict({"weight": lib.ones(3, 2), "bias": lib.zeros(1)}, assign=True)
    np.testing.assert_array_equal(m.weight.detach().numpy(), before)
