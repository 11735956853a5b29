"""`ember.backends.cuda`: `matmul.allow_tf32` and friends, and `is_built()`.

ember's CUDA matmuls are CuPy's (cuBLAS at CuPy's defaults); these switches hold what a script sets and
change nothing in ember.
"""


class _MatmulSettings:
    """`ember.backends.cuda.matmul`: allow_tf32 (PyTorch's default False), allow_fp16/bf16 reduced-precision
    reductions (default True)."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulSettings()


def is_built() -> bool:
    """Whether this ember can run on CUDA at all: True when CuPy is importable (a GPU may still be absent)."""
    import importlib.util
    return importlib.util.find_spec("cupy") is not None


def preferred_linalg_library(backend=None) -> str:
    """"default": ember's CUDA linear algebra is CuPy's (cuSOLVER)."""
    return "default"
