"""`ember.backends`: PyTorch's `torch.backends` switches, so that scripts setting them run unchanged.

ember has no cuDNN, MKL-DNN or Metal: its CPU ops are NumPy's and its GPU ops CuPy's. The switches for those
libraries exist and hold what a script sets; ember reads one of them, `cudnn.benchmark`, to time its CPU
convolutions' algorithms at first use (see cudnn.py); the `is_available()` functions say honestly what ember
can use (docs/coverage.md). `cpu.get_cpu_capability()` reports the SIMD level NumPy
dispatches to on this machine.
"""
from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]
