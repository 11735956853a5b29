"""`bench --only ops` cases for linear algebra (ember/ops/linalg_ext.py, ember.linalg): one 256x256 matrix and a
batch of 1000 4x4 matrices (NumPy's batched LAPACK either way), and cdist's one-GEMM form."""
import numpy as np

from benchmarks.ops import Case

try:
    from scipy.linalg import expm
except ImportError:  # (the case then has no NumPy/SciPy column)
    expm = None


def _cdist_gemm(a):
    """The same work in NumPy: ‖x‖² + ‖y‖² − 2 x·y, clamped at 0, square root."""
    x, y = a["x"], a["y"]
    d = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * (x @ y.T)
    return np.sqrt(np.maximum(d, 0, out=d), out=d)


def _square(rng):
    a = rng.standard_normal((256, 256)).astype(np.float32) + 16 * np.eye(256, dtype=np.float32)
    return {"a": a, "b": rng.standard_normal((256, 64)).astype(np.float32)}


def _spd(rng):
    a = rng.standard_normal((256, 256)).astype(np.float32)
    return {"a": a @ a.T + 256 * np.eye(256, dtype=np.float32)}


def _batch(rng):
    a = rng.standard_normal((1000, 4, 4)).astype(np.float32)
    return {"a": a @ a.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32), "b": rng.standard_normal((1000, 4, 2))
            .astype(np.float32)}


CASES = [
    Case("linalg.inv 256x256", _square, lambda E, a: E.linalg.inv(a["a"]),
         ("np.linalg.inv", lambda a: np.linalg.inv(a["a"])), lambda T, a: T.linalg.inv(a["a"]), grad=True),
    Case("linalg.inv 1000x4x4", _batch, lambda E, a: E.linalg.inv(a["a"]),
         ("np.linalg.inv", lambda a: np.linalg.inv(a["a"])), lambda T, a: T.linalg.inv(a["a"]), grad=True),
    Case("linalg.solve 256x256, 64 rhs", _square, lambda E, a: E.linalg.solve(a["a"], a["b"]),
         ("np.linalg.solve", lambda a: np.linalg.solve(a["a"], a["b"])), lambda T, a: T.linalg.solve(a["a"], a["b"]),
         grad=True),
    Case("linalg.solve 1000x4x4", _batch, lambda E, a: E.linalg.solve(a["a"], a["b"]),
         ("np.linalg.solve", lambda a: np.linalg.solve(a["a"], a["b"])), lambda T, a: T.linalg.solve(a["a"], a["b"]),
         grad=True),
    Case("linalg.cholesky 256x256", _spd, lambda E, a: E.linalg.cholesky(a["a"]),
         ("np.linalg.cholesky", lambda a: np.linalg.cholesky(a["a"])), lambda T, a: T.linalg.cholesky(a["a"]),
         grad=True),
    Case("linalg.cholesky 1000x4x4", _batch, lambda E, a: E.linalg.cholesky(a["a"]),
         ("np.linalg.cholesky", lambda a: np.linalg.cholesky(a["a"])), lambda T, a: T.linalg.cholesky(a["a"]),
         grad=True),
    Case("linalg.det 1000x4x4", _batch, lambda E, a: E.linalg.det(a["a"]),
         ("np.linalg.det", lambda a: np.linalg.det(a["a"])), lambda T, a: T.linalg.det(a["a"]), grad=True),
    Case("linalg.svd 256x256", _square, lambda E, a: E.linalg.svd(a["a"], full_matrices=False),
         ("np.linalg.svd", lambda a: np.linalg.svd(a["a"], full_matrices=False)),
         lambda T, a: T.linalg.svd(a["a"], full_matrices=False), grad=True),
    Case("linalg.svd 1000x4x4", _batch, lambda E, a: E.linalg.svd(a["a"]),
         ("np.linalg.svd", lambda a: np.linalg.svd(a["a"])), lambda T, a: T.linalg.svd(a["a"]), grad=True),
    Case("linalg.eigh 256x256", _spd, lambda E, a: E.linalg.eigh(a["a"]),
         ("np.linalg.eigh", lambda a: np.linalg.eigh(a["a"])), lambda T, a: T.linalg.eigh(a["a"]), grad=True),
    Case("linalg.eigh 1000x4x4", _batch, lambda E, a: E.linalg.eigh(a["a"]),
         ("np.linalg.eigh", lambda a: np.linalg.eigh(a["a"])), lambda T, a: T.linalg.eigh(a["a"]), grad=True),
    Case("linalg.lstsq 256x256, 64 rhs (gelsd)", _square, lambda E, a: E.linalg.lstsq(a["a"], a["b"], driver="gelsd"),
         ("np.linalg.lstsq", lambda a: np.linalg.lstsq(a["a"], a["b"])),
         lambda T, a: T.linalg.lstsq(a["a"], a["b"], driver="gelsd"), grad=True),
    Case("linalg.matrix_exp 1000x4x4", _batch, lambda E, a: E.linalg.matrix_exp(a["a"]),
         ("scipy.linalg.expm", lambda a: expm(a["a"])) if expm is not None else None,
         lambda T, a: T.linalg.matrix_exp(a["a"]), grad=True),
    Case("cdist 1000x64 to 1000x64", lambda rng: {"x": rng.standard_normal((1000, 64)).astype(np.float32),
                                                  "y": rng.standard_normal((1000, 64)).astype(np.float32)},
         lambda E, a: E.cdist(a["x"], a["y"]), ("NumPy GEMM form", _cdist_gemm), lambda T, a: T.cdist(a["x"], a["y"]),
         grad=True),
]
