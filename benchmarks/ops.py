"""Per-op speed: `python -m ember bench --only ops` (being written).

Each family contributes `benchmarks/ops_<family>.py` with a list `CASES` of `Case`s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Case:
    """One timed operation on inputs made once from a seeded NumPy Generator.

    make(rng) -> dict of NumPy arrays (the inputs; float arrays become leaves requiring grad when `grad`).
    ember(E, a) / torch(T, a): the call, given the library module and the dict of its tensors.
    numpy: (label, fn(a)) on the NumPy arrays: the NumPy/SciPy routine doing the same work, or None.
    grad: also time backward of the (first) output against a fixed random cotangent.
    """
    name: str
    make: Callable[[Any], dict]
    ember: Callable[[Any, dict], Any]
    numpy: tuple[str, Callable[[dict], Any]] | None = None
    torch: Callable[[Any, dict], Any] | None = None
    grad: bool = False
    tags: tuple = field(default_factory=tuple)
