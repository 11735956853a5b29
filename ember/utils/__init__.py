"""Utilities outside the tensor core, as `torch.utils`: `data` (datasets, samplers, DataLoader)."""
from . import data

__all__ = ["data"]
