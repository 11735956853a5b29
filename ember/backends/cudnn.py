"""`ember.backends.cudnn`: cuDNN's switches (`benchmark`, `deterministic`, `enabled`, `allow_tf32`).

ember's CUDA convolutions are CuPy matrix products, not cuDNN calls; `is_available()` is False. One flag acts,
with PyTorch's meaning carried over to ember's own convolutions on the CPU: with `benchmark = True` (and
`deterministic` False, and `ember.use_deterministic_algorithms` off), the first forward of each set of
convolution shapes times every algorithm that can compute it (im2col, the batch-folded GEMM, Winograd
F(2×2, 3×3): ember/ops/nn_conv.py) and keeps the fastest for the process; otherwise a fixed rule measured on
the project's machine chooses (docs/performance.md). The other flags hold what a script sets and change
nothing. For reproducible runs use `ember.manual_seed` and `ember.use_deterministic_algorithms(True)`, which
ember does honour.
"""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: ember does not call cuDNN (its GPU path is CuPy's)."""
    return False


def version() -> None:
    """None, as PyTorch's when cuDNN is not available."""
    return None
