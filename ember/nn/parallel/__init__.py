"""`ember.nn.parallel`: data-parallel training (PyTorch's `torch.nn.parallel`)."""
from .distributed import DistributedDataParallel
from .data_parallel import DataParallel, data_parallel, gather, parallel_apply, replicate, scatter, scatter_kwargs

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel", "gather", "parallel_apply", "replicate",
           "scatter", "scatter_kwargs"]
