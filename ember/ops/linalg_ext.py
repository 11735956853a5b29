"""(being written)"""
from __future__ import annotations

from .registry import Exports

__all__: list[str] = []

# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(globals(), functions=__all__, methods=__all__)
