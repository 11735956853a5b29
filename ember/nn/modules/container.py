"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, and Residual."""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from ..._tensor import Tensor
from ..parameter import Parameter
from . import _fusion
from .module import Module, addindent, qualified_type_name

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Residual"]


def _index(idx, n: int, cls: str) -> int:
    """A non-negative index for a container of length n (PyTorch's IndexError otherwise)."""
    try:
        i = operator.index(idx)
    except TypeError:
        raise TypeError(f"{cls} indices must be integers or slices, not {type(idx).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for {cls} of length {n}")
    return i + n if i < 0 else i


class _NumberedModules(Module):
    """What Sequential and ModuleList share: sub-modules in order, named '0', '1', ... when built by position."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "_NumberedModules":
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key: int) -> Module:
        v = self[key]
        del self[key]
        return v

    def _renumber(self, items: list) -> None:
        """Re-register items as '0', '1', ... so that names stay in step with indices (as PyTorch's do)."""
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m


class Sequential(_NumberedModules):
    """Modules applied in order: `Sequential(a, b, c)(x) == c(b(a(x)))`.

    Built from modules (named '0', '1', ...) or from an OrderedDict of name → module."""

    def __init__(self, *args: Module) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)) and not isinstance(args[0], Module):
            for key, m in args[0].items():
                self.add_module(key, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        mods = list(self._modules.values())
        i, n = 0, len(mods)
        while i < n:
            m = mods[i]
            if i + 2 < n and m.__class__ is _fusion.Conv2d:  # Conv2d-ReLU-MaxPool2d as one op (see _fusion)
                y = _fusion.fused_conv_relu_pool(m, mods[i + 1], mods[i + 2], input)
                if y is not None:
                    input = y
                    i += 3
                    continue
            input = m(input)
            i += 1
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), type(self).__name__)]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self), type(self).__name__)]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys), type(self).__name__)]]):
            del self._modules[key]
        if all(k.isdigit() for k in keys):
            self._renumber(list(self._modules.values()))

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index = index + n if index < 0 else index
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other: "Sequential") -> "Sequential":
        return self.extend(other)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class ModuleList(_NumberedModules):
    """A list of sub-modules, registered (so their parameters are the owner's) and indexable."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), type(self).__name__))]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), type(self).__name__)), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items), type(self).__name__)]
        self._renumber(items)

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{qualified_type_name(module)} is not a Module subclass")
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is a container and has no forward(); iterate over it and call "
                                  "its modules instead")

    def __repr__(self) -> str:
        # runs of identical modules print once, as "(0-2): 3 x Linear(...)", like PyTorch
        items = [(k, repr(m)) for k, m in self._modules.items()]
        if not items:
            return self._get_name() + "()"
        lines, start = [], 0
        while start < len(items):
            end = start
            while end + 1 < len(items) and items[end + 1][1] == items[start][1]:
                end += 1
            r = addindent(items[start][1], 2)
            if end == start:
                lines.append(f"({items[start][0]}): {r}")
            else:
                lines.append(f"({items[start][0]}-{items[end][0]}): {end - start + 1} x {r}")
            start = end + 1
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of sub-modules, registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        if isinstance(modules, Module) or not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            f"{type(modules).__name__}")
        pairs = modules.items() if hasattr(modules, "items") else modules
        for j, kv in enumerate(pairs):
            if not hasattr(modules, "items") and len(kv) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(kv)}; 2 is required")
            self[kv[0]] = kv[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is a container and has no forward(); call its modules instead")


class ParameterList(Module):
    """A list of Parameters, registered as '0', '1', ... (tensors are wrapped in Parameter)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self), "ParameterList")))

    def __setitem__(self, idx, value) -> None:
        i = _index(idx, len(self), "ParameterList")
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, str(i), value)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def append(self, value) -> "ParameterList":
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values) -> "ParameterList":
        return self.extend(values)

    def extra_repr(self) -> str:
        lines = []
        for i, p in enumerate(self):
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({i}): {kind} containing: [{p.dtype} of size {size}]")
            else:
                lines.append(f"  ({i}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        extra = self.extra_repr()
        return self._get_name() + ("(\n" + extra + "\n)" if extra else "()")

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is a container and has no forward()")


class ParameterDict(Module):
    """An ordered dict of Parameters, registered under their keys."""

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def update(self, parameters) -> None:
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in pairs:
            self[k] = v

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is a container and has no forward()")


class Residual(Module):
    """`Residual(fn)(x) = fn(x) + x`: a skip connection around a module (ember's addition; PyTorch users
    write it by hand). `fn` must return the shape of its input."""

    def __init__(self, fn: Module) -> None:
        super().__init__()
        if not isinstance(fn, Module):
            raise TypeError(f"Residual(fn): fn must be an ember.nn.Module, got {qualified_type_name(fn)}")
        self.fn = fn

    def forward(self, x: Tensor) -> Tensor:
        y = self.fn(x)
        if isinstance(y, Tensor) and isinstance(x, Tensor) and y.shape != x.shape:
            raise RuntimeError(f"Residual: fn ({type(self.fn).__name__}) returned shape {tuple(y.shape)}, but the "
                               f"skip connection needs the input's shape {tuple(x.shape)}")
        return y + x
