"""`bench --only ops` cases for 16-bit floats: ember computes them in float32 and rounds once (the widening and
rounding passes are its cost); NumPy's column is the same work in float32, PyTorch's its own bfloat16 kernels."""
import ml_dtypes
import numpy as np

from benchmarks.ops import Case

BF16 = np.dtype(ml_dtypes.bfloat16)


def _mm(rng):
    return {"a": rng.standard_normal((512, 512)).astype(BF16), "b": rng.standard_normal((512, 512)).astype(BF16)}


def _vec(rng):
    return {"x": rng.standard_normal(1_000_000).astype(BF16), "y": rng.standard_normal(1_000_000).astype(BF16)}


CASES = [
    Case("bfloat16 matmul 512x512", _mm, lambda E, a: a["a"] @ a["b"],
         ("float32 widen+matmul+round", lambda a: (a["a"].astype(np.float32) @ a["b"].astype(np.float32)).astype(BF16)),
         lambda T, a: a["a"] @ a["b"], grad=True),
    Case("float32 matmul 512x512 (reference)", lambda rng: {k: v.astype(np.float32) for k, v in _mm(rng).items()},
         lambda E, a: a["a"] @ a["b"], ("np.matmul", lambda a: a["a"] @ a["b"]), lambda T, a: a["a"] @ a["b"]),
    Case("bfloat16 add 1M", _vec, lambda E, a: a["x"] + a["y"],
         ("float32 widen+add+round", lambda a: (a["x"].astype(np.float32) + a["y"].astype(np.float32)).astype(BF16)),
         lambda T, a: a["x"] + a["y"], grad=True),
    Case("bfloat16 softmax 1000x1000", lambda rng: {"x": rng.standard_normal((1000, 1000)).astype(BF16)},
         lambda E, a: E.softmax(a["x"], 1), None, lambda T, a: T.softmax(a["x"], 1), grad=True),
]
