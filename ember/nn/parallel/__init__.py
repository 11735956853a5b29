"""`ember.nn.parallel`: data-parallel training (PyTorch's `torch.nn.parallel`)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
