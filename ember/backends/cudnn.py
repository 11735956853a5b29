"""`ember.backends.cudnn`: cuDNN's switches (`benchmark`, `deterministic`, `enabled`, `allow_tf32`).

ember's CUDA convolutions are CuPy matrix products, not cuDNN calls, so these flags hold what a script sets
and change nothing; `is_available()` is False. For reproducible runs use `ember.manual_seed` and
`ember.use_deterministic_algorithms(True)`, which ember does honour.
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
