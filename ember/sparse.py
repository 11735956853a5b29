"""`ember.sparse`: operations on sparse COO tensors (PyTorch's `torch.sparse`).

The tensors themselves (`ember.sparse_coo_tensor`, `Tensor.to_sparse()`, their methods) are in
`ember/ops/sparse_ops.py`, which also documents how they are represented and differentiated.
"""
from .ops.sparse_ops import sparse_addmm as addmm, sparse_mm as mm, sparse_sum as sum  # noqa: A004

__all__ = ["addmm", "mm", "sum"]
