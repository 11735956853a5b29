"""Stochastic weight averaging and exponential moving averages of a model (PyTorch's `torch.optim.swa_utils`).

`AveragedModel` keeps a copy of a model whose parameters are a running average of the model's: an equal
average over the calls of `update_parameters` (SWA, Izmailov et al.) or any other rule, such as an
exponential moving average (EMA). `SWALR` anneals each group's learning rate to a constant `swa_lr`, and
`update_bn` recomputes the BatchNorm statistics of the averaged weights with one pass over the data.
"""
from __future__ import annotations

import itertools
import math
import warnings
from copy import deepcopy
from typing import Any, Callable, Iterable, Sequence

from .. import _dtype as dt
from .._creation import tensor
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..nn.modules.module import Module
from ..nn.modules.more import _InstanceNorm
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _per_group
from .optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """The in-place EMA over lists of tensors: W_ema ← decay·W_ema + (1 - decay)·W (decay in [0, 1])."""
    _check_decay(decay)

    def ema_update(ema_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor], _) -> None:
        with no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                if p_ema.is_floating_point():
                    p_ema.lerp_(p_model, 1 - decay)
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """The in-place equal average over lists of tensors: W_swa ← W_swa + (W - W_swa)/(n + 1) after n models."""

    def swa_update(averaged_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor],
                   num_averaged: Tensor | int) -> None:
        with no_grad():
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """The EMA of one tensor: returns decay·W_ema + (1 - decay)·W (decay in [0, 1])."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> Callable:
    """The equal average of one tensor: returns W_swa + (W - W_swa)/(n + 1) after n models."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Tensor | int) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` (on `device` if given) whose parameters average the model's over the calls of
    `update_parameters(model)`: the first call copies them, each later one applies `avg_fn(averaged, current,
    n_averaged)` per tensor (returning the new value) or `multi_avg_fn(averaged_list, current_list,
    n_averaged)` per group of tensors of one device and dtype (in place); with neither, the equal average
    (SWA). With `use_buffers=True` the buffers are averaged too; otherwise they are copied from the model at
    each update. `n_averaged` (a long buffer, in the state dict) counts the updates; `forward` calls the copy.
    The averaging functions are not in the state dict.
    """

    n_averaged: Tensor

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: model must be an ember.nn.Module, got {type(model).__name__}")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average `model`'s current parameters (and buffers, with use_buffers) into this copy."""
        mine = itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers \
            else self.parameters()
        theirs = itertools.chain(model.parameters(), model.buffers()) if self.use_buffers else model.parameters()
        first = int(self.n_averaged.item()) == 0
        pairs = []
        with no_grad():
            for p_avg, p_model in zip(mine, theirs):
                p_model = p_model.detach().to(p_avg.device)
                pairs.append((p_avg.detach(), p_model))
                if first:
                    pairs[-1][0].copy_(p_model)
            if not first:
                if self.avg_fn is None:  # in place, per group of one device and dtype, as PyTorch's foreach path
                    groups: dict = {}
                    for a, m in pairs:
                        groups.setdefault((str(a.device), a.dtype), []).append((a, m))
                    fn = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
                    for (device, _), group in groups.items():
                        fn([a for a, _ in group], [m for _, m in group], self.n_averaged.to(device))
                else:
                    for a, m in pairs:
                        a.copy_(self.avg_fn(a, m, self.n_averaged.to(a.device)))
            if not self.use_buffers:  # the averaged weights run with the model's current statistics
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)


def _batch_norms(model: Module) -> list:
    """The BatchNorm layers of `model` (ember's InstanceNorm derives from _BatchNorm but is not one)."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm)]


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute the running statistics of every BatchNorm layer of `model` with one pass over `loader`
    (in training mode, as a cumulative average: momentum None), then restore momenta and mode.

    Each batch is a tensor, or a list/tuple whose first element is the model's input; `device` moves
    it there first. Nothing happens when the model has no BatchNorm layer."""
    momenta = {}
    for m in _batch_norms(model):
        m.reset_running_stats()
        momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    with no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value at construction to `swa_lr` (one value, or one per group,
    stored as `group['swa_lr']`) over `anneal_epochs` steps, then holds it:

    lr_t = α_t·swa_lr + (1 - α_t)·lr_0, with α_t = f(min(1, t/anneal_epochs)) and f(x) = x ('linear') or
    (1 - cos(πx))/2 ('cos'); lr_0 is recovered from the current lr at each step (chainable, as PyTorch).
    """

    def __init__(self, optimizer: Optimizer, swa_lr: float | list, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or isinstance(anneal_epochs, bool) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """lr_0 from lr = α·swa_lr + (1 - α)·lr_0 (α = 1: the lr is swa_lr whatever lr_0 was)."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list[float]:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer and the annealing function (restored from its name on load)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
