"""Declared bindings: what each ops module adds to ember's API.

Every ops module ends with one `Exports` declaration naming its public functions, the Tensor
methods and operators it provides, and the unary ops that get an in-place variant.
`ember/ops/__init__.py` collects the declarations and binds them all in one place, and
`ember/__init__.py` re-exports the collected functions, so adding an op touches one file:
its class, its function, and its names in that module's declaration.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping


class Exports:
    """One ops module's contribution to the API.

    functions: names of module attributes exported as `ember.<name>`.
    methods: Tensor attributes. A name alone binds the module attribute of that name as
        `Tensor.<name>`; `aliases` maps other Tensor attribute names (operators such as
        `__add__`, PyTorch's alternative spellings, properties) to the object to bind.
    in_place: {name: Op class} for unary ops whose in-place method `Tensor.<name>_` is built from
        the function `name` and its Op class by `ember.ops.inplace.unary_in_place`.
    """

    def __init__(self, namespace: Mapping[str, Any], *, functions: Iterable[str] = (), methods: Iterable[str] = (),
                 aliases: Mapping[str, Any] | None = None, in_place: Mapping[str, type] | None = None) -> None:
        def resolve(names: Iterable[str], what: str) -> dict:
            missing = [n for n in names if n not in namespace]
            if missing:  # a declaration naming something the module does not define is a bug in that module
                raise AttributeError(f"{namespace.get('__name__')}: declared {what} not defined: {missing}")
            return {n: namespace[n] for n in names}

        self.module = namespace.get("__name__", "?")
        self.functions: dict[str, Callable] = resolve(functions, "functions")
        self.methods: dict[str, Any] = resolve(methods, "methods")
        self.methods.update(aliases or {})
        in_place = dict(in_place or {})
        fns = resolve(in_place, "in-place ops")
        self.in_place: dict[str, tuple[Callable, type]] = {n: (fns[n], cls) for n, cls in in_place.items()}
