"""`OptimizedModule`: what `ember.compile(module)` returns (PyTorch's name and layout)."""
from __future__ import annotations

from ..nn.modules.module import Module
from .api import CompiledFunction


class OptimizedModule(Module):
    """A compiled Module: calls go through a `CompiledFunction` of the original's `__call__` (so its
    hooks, if any, are seen by the capture); everything else is the original's, registered as the
    submodule `_orig_mod` (so, as in PyTorch, `state_dict()` keys start with `_orig_mod.`)."""

    def __init__(self, mod: Module, **kw) -> None:
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = c = CompiledFunction(mod.__call__, **kw)
        c.module = mod
        self.__dict__["training"] = mod.training

    def forward(self, *args, **kwargs):
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)

    def train(self, mode: bool = True) -> "OptimizedModule":
        self.__dict__["_modules"]["_orig_mod"].train(mode)
        self.__dict__["training"] = mode
        return self

    def __repr__(self) -> str:
        return f"OptimizedModule({self.__dict__['_modules']['_orig_mod']!r})"
