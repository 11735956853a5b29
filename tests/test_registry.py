"""Declared bindings (ember/ops/registry.py): what each ops module declares is what ember and Tensor have."""
from __future__ import annotations

import pytest

import ember
from ember import ops
from ember.ops.registry import Exports


def test_every_declaration_is_bound():
    for module in ops.FAMILIES:
        ex = module.EXPORTS
        for name, fn in ex.functions.items():
            assert getattr(ember, name) is ops.FUNCTIONS[name], (module.__name__, name)
        for name in ex.methods:
            assert hasattr(ember.Tensor, name), (module.__name__, name)
        for name in ex.in_place:
            assert callable(getattr(ember.Tensor, name + "_")), (module.__name__, name)


def test_a_declared_name_the_module_lacks_is_an_error_at_import():
    with pytest.raises(AttributeError, match=r"mod: declared functions not defined: \['missing'\]"):
        Exports({"__name__": "mod", "present": abs}, functions=("present", "missing"))
    with pytest.raises(AttributeError, match="in-place ops not defined"):
        Exports({"__name__": "mod"}, in_place={"exp": object})


def test_in_place_variants_are_built_from_the_declared_function():
    x = ember.tensor([0.25, 4.0])
    assert x.sqrt_() is x and x.tolist() == [0.5, 2.0]
    y = ember.tensor([1.0, 2.0], requires_grad=True) * 1.0
    y.exp_()
    y.sum().backward()  # through the recorded in-place op


def test_softmax_is_a_method_without_importing_nn():
    t = ember.tensor([1.0, 2.0])
    assert t.softmax(0).sum().item() == pytest.approx(1.0) and ember.softmax is ember.ops.nn_activation.softmax
