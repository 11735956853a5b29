"""Linear layers: Identity, Linear, Bilinear (PyTorch's `torch.nn` names, parameters and default init)."""
from __future__ import annotations

import math

from ..._creation import empty
from ..._tensor import Tensor
from ...ops.nn_misc import bilinear, linear
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


def register_weight_and_bias(m: Module, weight_shape: tuple, bias_size: int | None, dtype, device) -> None:
    """Register the uninitialised parameters m.weight of weight_shape and m.bias of bias_size (None: no bias)."""
    m.weight = Parameter(empty(weight_shape, dtype=dtype, device=device))
    if bias_size is not None:
        m.bias = Parameter(empty(bias_size, dtype=dtype, device=device))
    else:
        m.register_parameter("bias", None)


class Identity(Module):
    """Returns its input unchanged; accepts (and ignores) any constructor arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x Wᵀ + b over the last dimension: input (*, in_features) -> (*, out_features).

    weight (out_features, in_features) ~ U(±1/√in_features) (kaiming_uniform_ with a=√5), bias likewise."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        register_weight_and_bias(self, (out_features, in_features), out_features if bias else None, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init._default_layer_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        try:
            return linear(input, self.weight, self.bias)
        except RuntimeError:
            # name the layer (the functional message only knows matrices); cost only on the error path
            if isinstance(input, Tensor) and (input.dim() == 0 or input.shape[-1] != self.in_features):
                raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected input of shape "
                                   f"(*, {self.in_features}) (last dimension = in_features), got input of shape "
                                   f"{list(input.shape)}") from None
            raise

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1ᵀ A x2 + b: input1 (*, in1_features), input2 (*, in2_features) -> (*, out_features).

    weight (out_features, in1_features, in2_features) and bias ~ U(±1/√in1_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        register_weight_and_bias(self, (out_features, in1_features, in2_features), out_features if bias else None,
                                  dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.in1_features <= 0:
            raise ValueError(f"in1_features must be > 0, but got (in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        for name, t, n in (("input1", input1, self.in1_features), ("input2", input2, self.in2_features)):
            if isinstance(t, Tensor) and (t.dim() == 0 or t.shape[-1] != n):
                raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected {name} of shape (*, {n}), got "
                                   f"shape {list(t.shape)}")
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
