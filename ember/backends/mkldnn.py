"""`ember.backends.mkldnn`: oneDNN, which ember does not use (its convolutions are NumPy/BLAS)."""
enabled = True


def is_available() -> bool:
    return False
