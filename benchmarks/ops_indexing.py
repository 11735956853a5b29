"""`bench --only ops` cases for the indexing and shape ops of ember/ops/indexing_ext.py (scatter_reduce,
index_copy, masked_scatter, put, repeat_interleave, unfold), each against the NumPy call doing the same work."""
import numpy as np

from benchmarks.ops import Case

N = 1000


def _x(rng):
    return {"x": rng.standard_normal((N, N)).astype(np.float32)}


def _scatter(rng):
    return {"x": rng.standard_normal((N, N)).astype(np.float32), "src": rng.standard_normal((N, N)).astype(np.float32),
            "index": rng.integers(0, N, (N, N))}


def _np_scatter_amax(a):
    out = a["x"].copy()
    rows = np.arange(N)[:, None] * N
    np.maximum.at(out.reshape(-1), (rows + a["index"]).reshape(-1), a["src"].reshape(-1))
    return out


def _index_copy(rng):
    return {"x": rng.standard_normal((N, N)).astype(np.float32),
            "src": rng.standard_normal((N // 2, N)).astype(np.float32), "index": rng.permutation(N)[:N // 2]}


def _np_index_copy(a):
    out = a["x"].copy()
    out[a["index"]] = a["src"]
    return out


def _masked(rng):
    return {"x": rng.standard_normal((N, N)).astype(np.float32), "mask": rng.random((N, N)) < 0.5,
            "src": rng.standard_normal(N * N).astype(np.float32)}


def _np_masked_scatter(a):
    out = a["x"].copy()
    out[a["mask"]] = a["src"][:int(a["mask"].sum())]
    return out


def _put(rng):
    return {"x": rng.standard_normal(N * N).astype(np.float32), "index": rng.integers(0, N * N, N * N),
            "src": rng.standard_normal(N * N).astype(np.float32)}


def _np_put_accumulate(a):
    out = a["x"].copy()
    np.add.at(out, a["index"], a["src"])
    return out


def _repeats(rng):
    return {"x": rng.standard_normal((N, N)).astype(np.float32), "r": rng.integers(0, 4, N)}


CASES = [
    Case("scatter_reduce amax 1000x1000 dim=1", _scatter,
         lambda E, a: E.scatter_reduce(a["x"], 1, a["index"], a["src"], "amax"),
         ("np.maximum.at", _np_scatter_amax),
         lambda T, a: T.scatter_reduce(a["x"], 1, a["index"], a["src"], "amax"), grad=True),
    Case("index_copy 500 rows into 1000x1000", _index_copy, lambda E, a: E.index_copy(a["x"], 0, a["index"], a["src"]),
         ("fancy assignment", _np_index_copy), lambda T, a: T.index_copy(a["x"], 0, a["index"], a["src"]), grad=True),
    Case("masked_scatter 1000x1000", _masked, lambda E, a: E.masked_scatter(a["x"], a["mask"], a["src"]),
         ("boolean assignment", _np_masked_scatter), lambda T, a: T.masked_scatter(a["x"], a["mask"], a["src"]),
         grad=True),
    Case("put accumulate 1M", _put, lambda E, a: E.put(a["x"], a["index"], a["src"], accumulate=True),
         ("np.add.at", _np_put_accumulate), lambda T, a: T.put(a["x"], a["index"], a["src"], accumulate=True),
         grad=True),
    Case("repeat_interleave tensor repeats 1000x1000 dim=0", _repeats,
         lambda E, a: E.repeat_interleave(a["x"], a["r"], dim=0),
         ("np.repeat", lambda a: np.repeat(a["x"], a["r"], axis=0)),
         lambda T, a: T.repeat_interleave(a["x"], a["r"], dim=0), grad=True),
    Case("unfold(1, 16, 8) 1000x1000 (+ mul)", _x, lambda E, a: a["x"].unfold(1, 16, 8) * 2.0,
         ("sliding_window_view + mul", lambda a: np.lib.stride_tricks.sliding_window_view(a["x"], 16, 1)[:, ::8] * 2.0),
         lambda T, a: a["x"].unfold(1, 16, 8) * 2.0, grad=True),
]
