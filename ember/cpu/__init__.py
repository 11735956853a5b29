"""`ember.cpu`, as `torch.cpu`: for now its `amp` namespace (PyTorch's deprecated CPU spellings of `ember.amp`)."""
from . import amp

__all__ = ["amp"]
