"""`ember.backends.mkl`: whether NumPy's BLAS is Intel MKL."""


def is_available() -> bool:
    """True when NumPy's BLAS is MKL (threadpoolctl reports it), else False (NumPy wheels ship OpenBLAS)."""
    try:
        import threadpoolctl
    except ImportError:
        return False
    return any(p.get("internal_api") == "mkl" for p in threadpoolctl.threadpool_info())
