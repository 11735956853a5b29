"""Pruning: zero a fraction of a parameter's entries through a mask (PyTorch's `torch.nn.utils.prune`).

Pruning `module.weight` moves the parameter to `module.weight_orig`, adds the buffer `module.weight_mask`
(ones where entries are kept, zeros where pruned) and makes `module.weight` the plain attribute
`weight_mask * weight_orig`, recomputed before every forward pass by a forward pre-hook (the pruning
method itself). The optimizer keeps training `weight_orig`; the pruned entries get zero gradient through
the mask. Pruning the same tensor again combines the masks (`PruningContainer`: the new method acts only
on the entries, or channels, still kept). `remove` makes the pruning permanent: `weight` becomes a
parameter again, holding the masked values.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ... import _creation as C
from ... import linalg
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...ops.sorting import kthvalue, topk
from ..modules.module import Module
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of choosing which entries of a tensor to prune: subclasses define `compute_mask(t, default_mask)`
    (the new mask, from the importance scores `t` and the mask so far) and `PRUNING_TYPE` ('unstructured',
    'structured' with a `dim`, or 'global'). An instance is the forward pre-hook of the module it prunes."""

    _tensor_name: str | None = None
    PRUNING_TYPE: str

    def __call__(self, module: Module, inputs) -> None:
        """The forward pre-hook: recompute `module.<name>` from the current `<name>_orig` and mask."""
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask (shaped like t) to apply: `default_mask` with the entries this method prunes set to 0."""

    def apply_mask(self, module: Module) -> Tensor:
        """`<name>_mask * <name>_orig`: the pruned tensor (differentiable in the original)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prune `module.<name>` with `cls(*args, **kwargs)` (combined with any earlier pruning of it), choosing
        the entries by `importance_scores` (default: the tensor itself). Returns the method (the hook)."""
        method = _composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as parameter {name} of "
                                     f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):  # first pruning: the parameter becomes <name>_orig
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = C.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if not isinstance(method, PruningContainer):  # leave the module as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Tensor | None = None) -> Tensor:
        """`t` with this method's mask applied (computed from `importance_scores`, default t)."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(f"importance_scores should have the same shape as tensor t, got "
                                     f"{importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else C.ones_like(t)
        with no_grad():
            mask = self.compute_mask(importance_scores, default_mask=default_mask)
        return t * mask

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: `<name>` becomes a parameter holding the masked values (the same
        Parameter object as `<name>_orig`), and `<name>_orig`, `<name>_mask` go away."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig._data = weight._data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _composite_method(cls, module: Module, name: str, *args, **kwargs) -> BasePruningMethod:
    """`cls(*args, **kwargs)` for `module.<name>`, joined to the pruning already there (whose hook is
    removed; `apply` registers the result): in its container, or in a new container with it."""
    old_method, found = None, []
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            old_method = hook
            found.append(k)
    if len(found) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                             f"Use a PruningContainer.")
    for k in found:
        del module._forward_pre_hooks[k]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if isinstance(old_method, PruningContainer):
        old_method.add_pruning_method(method)
        method = old_method
    elif isinstance(old_method, BasePruningMethod):
        container = PruningContainer(old_method)
        container.add_pruning_method(method)
        method = container
    return method


class PruningContainer(BasePruningMethod):
    """The successive pruning methods of one tensor: the last one acts on what the earlier ones kept
    (the entries still 1 for unstructured methods, the channels not all 0 along `dim` for structured ones)."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """`default_mask` with the last method's mask applied to the part of `t` it may still prune."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        if method.PRUNING_TYPE == "unstructured":
            slc = default_mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     '`dim` defined.')
            n_dims = t.ndim
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
            keep_channel = default_mask.sum(dim=[d for d in range(n_dims) if d != dim]) != 0
            slc = tuple(keep_channel if d == dim else slice(None) for d in range(n_dims))
        elif method.PRUNING_TYPE == "global":
            slc = (slice(None),) * t.ndim
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        partial_mask = method.compute_mask(t[slc], default_mask=default_mask[slc])
        new_mask[slc] = partial_mask.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (a placeholder that gives a module the pruning layout)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str):  # type: ignore[override]
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` entries (an int, or a fraction in [0, 1] of the entries, rounded) chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        n = t.numel()
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        mask = default_mask.clone()
        if k != 0:
            mask.view(-1)[topk(C.rand_like(t).view(-1), k).indices] = 0
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float):  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries (an int, or a fraction of the entries, rounded) of smallest |t|."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        n = t.numel()
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        mask = default_mask.clone()
        if k != 0:
            mask.view(-1)[topk(t.abs().view(-1), k, largest=False).indices] = 0
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` whole channels along `dim` (an int, or a fraction of them, rounded), chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        n = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        if k == 0:
            return default_mask
        prob = C.rand(n, device=t.device)
        keep = prob > kthvalue(prob, k).values  # all but the k channels of lowest draw
        mask = C.zeros_like(t)
        mask[_along(t, self.dim, keep)] = 1
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, dim: int = -1):  # type: ignore[override]
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` channels along `dim` (an int, or a fraction of them, rounded) of smallest L`n` norm
    (n: a number, inf, -inf, 'fro' or 'nuc', as `torch.norm`'s p)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, n, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        norm = _compute_norm(t, self.n, self.dim)
        keep = topk(norm, size - k, largest=True).indices
        if k == 0:
            return default_mask
        mask = C.zeros_like(t)
        mask[_along(t, self.dim, keep)] = 1
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, n, dim: int,  # type: ignore[override]
              importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given `mask` is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask shape "
                                 f"{self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor):  # type: ignore[override]
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------------- the functions
def identity(module: Module, name: str) -> Module:
    """Give `module.<name>` the pruning layout (`<name>_orig`, `<name>_mask` of ones) without pruning."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune `amount` random entries of `module.<name>` (an int, or a fraction in [0, 1])."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: int | float, importance_scores: Tensor | None = None) -> Module:
    """Prune the `amount` entries of `module.<name>` of smallest |importance_scores| (default: the tensor)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: int | float, dim: int) -> Module:
    """Prune `amount` random channels of `module.<name>` along `dim`."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: int | float, n, dim: int,
                  importance_scores: Tensor | None = None) -> Module:
    """Prune the `amount` channels of `module.<name>` along `dim` of smallest L`n` norm of importance_scores."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores: dict | None = None,
                        **kwargs) -> None:
    """Prune the (module, name) pairs of `parameters` together: `pruning_method(**kwargs)` (unstructured)
    chooses among all their entries at once (e.g. the `amount` smallest over all of them), each tensor then
    gets its share of the mask (`custom_from_mask`). `importance_scores` maps (module, name) to scores."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, name), getattr(m, name)) for m, name in parameters])
    default_mask = parameters_to_vector([getattr(m, name + "_mask") if hasattr(m, name + "_mask")
                                         else C.ones_like(getattr(m, name)) for m, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    with no_grad():
        final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for m, name in parameters:
        param = getattr(m, name)
        n = param.numel()
        custom_from_mask(m, name, mask=final_mask[pointer:pointer + n].view_as(param))
        pointer += n


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune `module.<name>` where `mask` is 0."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Make the pruning of `module.<name>` permanent (see `BasePruningMethod.remove`) and drop its hook.
    ValueError if it is not pruned."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether `module` or one of its submodules has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, m in module.named_modules() for hook in m._forward_pre_hooks.values())


# ---------------------------------------------------------------------- checks and helpers
def _validate_pruning_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _validate_structured_pruning(t: Tensor) -> None:
    if t.ndim <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {t.shape} with {t.ndim} dims")


def _compute_nparams_toprune(amount, tensor_size: int) -> int:
    """`amount` itself when an int; else the fraction of tensor_size, rounded (half to even, as Python)."""
    return amount if isinstance(amount, numbers.Integral) else round(amount * tensor_size)


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_norm(t: Tensor, n, dim: int) -> Tensor:
    """The L`n` norm of each channel of t along `dim` (over all other dims), as `torch.norm(t, p=n, dim=...)`:
    'fro' over at most two dims is the 2-norm; 'nuc' (and 'fro' over more) is a matrix norm over exactly two."""
    dims = [d for d in range(t.ndim) if d != dim % t.ndim]
    if isinstance(n, str) and not (n == "fro" and len(dims) <= 2):
        return linalg.matrix_norm(t, n, dim=tuple(dims))
    return linalg.vector_norm(t, 2 if n == "fro" else n, dim=dims)


def _along(t: Tensor, dim: int, index) -> tuple:
    """The index selecting `index` (booleans or positions) along `dim` of t, everything along the others."""
    return tuple(index if d == dim % t.ndim else slice(None) for d in range(t.ndim))
