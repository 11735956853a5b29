"""Every differentiable op, by family, and the one place their API is bound.

Each module of this package ends with an `Exports` declaration (see `registry.py`): its public
functions, its Tensor methods and operators, and the unary ops with an in-place variant.
Importing this package imports every family and binds all of them onto `Tensor`; `FUNCTIONS`
holds the functions that `ember/__init__.py` exports as `ember.<name>`.
"""
from __future__ import annotations

from .._tensor import Tensor
from . import arithmetic, unary, reduce, shape, indexing, linalg, convert, inplace, nn_activation, sorting, counting
from . import linalg_ext, elementwise_ext, indexing_ext, sparse_ops, statistics
from .convert import as_tensor_like, numpy_ufunc  # noqa: F401
from .inplace import unary_in_place
from . import _out
from .. import _creation

# the modules whose declarations are bound, in order (a later module's binding of a name wins)
FAMILIES = (arithmetic, unary, reduce, shape, indexing, linalg, convert, inplace, nn_activation, sorting, counting,
            linalg_ext, elementwise_ext, indexing_ext, sparse_ops, statistics)

FUNCTIONS: dict = {}


def _bind() -> None:
    for module in FAMILIES:
        ex = module.EXPORTS
        FUNCTIONS.update(ex.functions)
        for name, value in ex.methods.items():
            setattr(Tensor, name, value)
        for name, (fn, cls) in ex.in_place.items():
            setattr(Tensor, name + "_", unary_in_place(fn, name, cls))
    # ---- out= (ember/ops/_out.py): PyTorch's `out=` keyword on every exported function that has it in PyTorch,
    # the factories of ember._creation included (ember/__init__.py re-exports FUNCTIONS after them: these win)
    FUNCTIONS.update({name: getattr(_creation, name) for name in _out.OUT_FUNCTIONS if hasattr(_creation, name)})
    _out.wrap_all(FUNCTIONS)
    # ---- end of out=


_bind()
