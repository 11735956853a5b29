"""Parameters as one flat vector and back (PyTorch's `torch.nn.utils.convert_parameters`)."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.shape import cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    params = list(parameters)
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Give each parameter, in order, the next numel values of the 1-D `vec` (its `.data` becomes a view of vec's
    array, as in PyTorch). vec must hold exactly as many values as the parameters together."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p._data.size for p in params)
    if vec._data.ndim != 1 or vec._data.size != total:
        raise RuntimeError(f"vector_to_parameters(): vec of shape {list(vec.shape)} does not match the parameters: "
                           f"expected a 1-D vector of {total} elements (their total numel)")
    a = vec._data
    start = 0
    for p in params:
        n = p._data.size
        p._data = a[start:start + n].reshape(p._data.shape)
        start += n
