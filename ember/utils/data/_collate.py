"""`default_collate` (samples → a batch) and `default_convert` (NumPy → Tensor without batching),
with PyTorch's rules for which container comes back for which input."""
from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence

import numpy as np

from ..._creation import as_tensor, tensor
from ..._dtype import float64
from ..._tensor import Tensor
from ...ops.shape import stack

__all__ = ["default_collate", "default_convert"]

_UNSUPPORTED = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")
_STR_OR_OBJECT = "SUO"  # NumPy dtype kinds (bytes, str, object) that make no tensor


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _same_mapping(like: Mapping, values: dict):
    """`values` in a mapping of `like`'s type (a plain dict when that type cannot be built from a dict)."""
    try:
        if isinstance(like, MutableMapping):
            out = copy.copy(like)  # keeps the mapping's type and any attributes it carries
            out.update(values)
            return out
        return type(like)(values)
    except TypeError:
        return values


def _same_sequence(like: Sequence, values: list):
    """`values` in a sequence of `like`'s type (a list when that type cannot be built from a list)."""
    try:
        if isinstance(like, MutableSequence):
            out = copy.copy(like)
            for i, v in enumerate(values):
                out[i] = v
            return out
        return type(like)(values)
    except TypeError:
        return values


def default_collate(batch):
    """Merge a list of samples into a batch, along a new first dimension.

    Tensors are stacked (``ember.stack``); NumPy arrays and scalars become stacked Tensors; Python
    floats a float64 Tensor, ints an int64 Tensor, bools a bool Tensor; str and bytes stay as they
    are. Containers are collated position by position, or key by key: a Mapping gives the same
    mapping type, a namedtuple the same namedtuple, a tuple a list, and another Sequence its own
    type when it can be rebuilt (else a list). Samples must agree in shape (RuntimeError otherwise).
    """
    if not len(batch):
        raise IndexError("default_collate: got an empty batch (a batch needs at least one sample)")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in _STR_OR_OBJECT:
            raise TypeError(_UNSUPPORTED.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, (np.bool_, np.number, np.object_)):
        return as_tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bool included: a batch of bools is a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        return _same_mapping(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(elem, Sequence):
        size = len(elem)
        for i, e in enumerate(batch):
            if len(e) != size:
                raise RuntimeError(f"default_collate: each element in list of batch should be of equal size, but "
                                   f"element 0 has length {size} and element {i} has length {len(e)}")
        collated = [default_collate(samples) for samples in zip(*batch)]
        return collated if isinstance(elem, tuple) else _same_sequence(elem, collated)  # tuples: lists, as PyTorch
    raise TypeError(_UNSUPPORTED.format(type(elem)))


def default_convert(data):
    """Turn NumPy arrays (numeric) and scalars into Tensors, inside containers too; leave the rest.

    The DataLoader's collate_fn when automatic batching is off (``batch_size=None``). Containers
    come back as in `default_collate` (tuples as lists).
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in _STR_OR_OBJECT else as_tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return as_tensor(data)
    if isinstance(data, Mapping):
        return _same_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return _same_sequence(data, [default_convert(d) for d in data])
    return data
