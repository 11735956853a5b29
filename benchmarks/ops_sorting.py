"""`bench --only ops` cases for sorting, selection and counting (ember/ops/sorting.py, counting.py)."""
import numpy as np

from benchmarks.ops import Case


def _x(rng):
    return {"x": rng.standard_normal((1000, 1000)).astype(np.float32)}


CASES = [
    Case("sort 1000x1000 dim=-1", _x, lambda E, a: E.sort(a["x"], dim=-1),
         ("np.sort", lambda a: np.sort(a["x"], axis=-1)), lambda T, a: T.sort(a["x"], dim=-1), grad=True),
    Case("topk(5) 1000x1000", _x, lambda E, a: E.topk(a["x"], 5),
         ("np.argpartition", lambda a: np.argpartition(a["x"], -5, axis=-1)[:, -5:]), lambda T, a: T.topk(a["x"], 5),
         grad=True),
    Case("median(dim=1) 1000x1000", _x, lambda E, a: E.median(a["x"], 1),
         ("np.median", lambda a: np.median(a["x"], axis=1)), lambda T, a: T.median(a["x"], 1), grad=True),
    Case("unique 1M int64", lambda rng: {"x": rng.integers(0, 1000, 1_000_000)}, lambda E, a: E.unique(a["x"]),
         ("np.unique", lambda a: np.unique(a["x"])), lambda T, a: T.unique(a["x"])),
    Case("cummax 1000x1000 dim=1", _x, lambda E, a: E.cummax(a["x"], 1),
         ("np.maximum.accumulate", lambda a: np.maximum.accumulate(a["x"], axis=1)), lambda T, a: T.cummax(a["x"], 1),
         grad=True),
]
