"""SparseAdam (being written)."""
from __future__ import annotations

from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """(being written)"""
