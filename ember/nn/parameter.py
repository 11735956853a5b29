"""`Parameter`: a leaf Tensor that a Module registers as one of its parameters."""
from __future__ import annotations

import numpy as np

from .. import _dtype as dt
from .._tensor import Tensor, make


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers it.

    `Parameter(data)` shares `data`'s array (as PyTorch does) and requires grad by default.
    Ops on a Parameter return plain Tensors.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            arr = np.empty((0,), dt.NP_DEFAULT_FLOAT)
        elif isinstance(data, Tensor):
            arr = data._data
        else:
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        p = make(arr, cls=cls)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # all set up in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data, self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = make(self._data.copy(), self.requires_grad, None, Parameter)
        if self.grad is not None:
            p.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = p
        return p


def _rebuild_parameter(data, requires_grad: bool) -> Parameter:
    from .._tensor import make
    return Parameter(make(np.asarray(data)), requires_grad)

