"""`ember.backends.cpu`: the SIMD level of this CPU, as NumPy's dispatcher sees it."""


def get_cpu_capability() -> str:
    """"AVX512", "AVX2", "NEON", ... or "DEFAULT": the widest SIMD extension NumPy's kernels dispatch to here
    (PyTorch's function names its own kernels' level the same way)."""
    import numpy as np
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features
    for name, label in (("AVX512_SKX", "AVX512"), ("AVX512F", "AVX512"), ("AVX2", "AVX2"), ("SVE", "SVE"),
                        ("ASIMD", "NEON"), ("NEON", "NEON"), ("VSX", "VSX")):
        if features.get(name):
            return label
    del np
    return "DEFAULT"
