"""Every differentiable op, by family. Importing this package binds the Tensor methods and operators."""
from . import arithmetic, unary, reduce, shape, indexing, linalg, convert, inplace  # noqa: F401  (binding order matters little)
from .convert import as_tensor_like, numpy_ufunc  # noqa: F401
