"""`bench --only ops` cases for the activations, losses and normalisations of ember/ops/nn_more.py."""
import numpy as np

from benchmarks.ops import Case


def _x(*shape):
    return lambda rng: {"x": rng.standard_normal(shape).astype(np.float32)}


def _rms(rng):
    return {"x": rng.standard_normal((64, 128, 512)).astype(np.float32),
            "w": rng.standard_normal(512).astype(np.float32)}


def _np_rms(a):
    x = a["x"]
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps) * a["w"]


def _np_instance_norm(a):
    x = a["x"]
    m = x.mean((2, 3), keepdims=True)
    return (x - m) / np.sqrt(x.var((2, 3), keepdims=True) + 1e-5)


def _np_lrn(a, size=5):
    """x / (1 + 1e-4/size · windowed Σ x²)^0.75, the window summed as a difference of cumulative sums."""
    x = a["x"]
    s = np.pad(x * x, ((0, 0), (size // 2 + 1, (size - 1) // 2)) + ((0, 0),) * (x.ndim - 2)).cumsum(1)
    win = s[:, size:] - s[:, :-size]
    return x / (win * (1e-4 / size) + 1) ** 0.75


def _ctc(rng):
    t, n, c, s = 100, 32, 30, 20
    return {"lp": np.log(rng.dirichlet(np.ones(c), (t, n))).astype(np.float32),
            "targets": rng.integers(1, c, (n, s)), "il": np.full(n, t), "tl": rng.integers(10, s + 1, n)}


def _triplet(rng):
    return {k: rng.standard_normal((512, 128)).astype(np.float32) for k in ("a", "p", "n")}


def _np_triplet(a):
    d = np.linalg.norm(a["a"] - a["p"] + 1e-6, axis=1) - np.linalg.norm(a["a"] - a["n"] + 1e-6, axis=1)
    return np.maximum(d + 1.0, 0).mean()


CASES = [
    Case("hardswish 256x1024", _x(256, 1024), lambda E, a: E.nn.functional.hardswish(a["x"]),
         ("np.clip expression", lambda a: np.clip(a["x"] + 3, 0, 6) * a["x"] / 6),
         lambda T, a: T.nn.functional.hardswish(a["x"]), grad=True),
    Case("rms_norm 64x128x512 (weight)", _rms, lambda E, a: E.nn.functional.rms_norm(a["x"], [512], a["w"]),
         ("NumPy expression", _np_rms), lambda T, a: T.nn.functional.rms_norm(a["x"], [512], a["w"]), grad=True),
    Case("instance_norm 32x64x32x32", _x(32, 64, 32, 32), lambda E, a: E.nn.functional.instance_norm(a["x"]),
         ("mean/var expression", _np_instance_norm), lambda T, a: T.nn.functional.instance_norm(a["x"]), grad=True),
    Case("local_response_norm(5) 32x64x32x32", _x(32, 64, 32, 32),
         lambda E, a: E.nn.functional.local_response_norm(a["x"], 5), ("np.cumsum window", _np_lrn),
         lambda T, a: T.nn.functional.local_response_norm(a["x"], 5), grad=True),
    Case("ctc_loss T=100 N=32 C=30 S=20", _ctc,
         lambda E, a: E.nn.functional.ctc_loss(a["lp"], a["targets"], a["il"], a["tl"]), None,
         lambda T, a: T.nn.functional.ctc_loss(a["lp"], a["targets"], a["il"], a["tl"]), grad=True),
    Case("triplet_margin_loss 512x128", _triplet,
         lambda E, a: E.nn.functional.triplet_margin_loss(a["a"], a["p"], a["n"]), ("np.linalg.norm", _np_triplet),
         lambda T, a: T.nn.functional.triplet_margin_loss(a["a"], a["p"], a["n"]), grad=True),
]
