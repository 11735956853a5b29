"""`bench --only ops` cases for special functions and the extra elementwise math (ember/ops/elementwise_ext.py,
ember.special): 1M-element float32 lgamma, erfinv, i0e and xlogy against SciPy's ufuncs (the route ember takes
where SciPy is installed), a masked reduction and quantiles of a 1000x1000 matrix against NumPy."""
import numpy as np

from benchmarks.ops import Case

try:
    import scipy.special as sc
except ImportError:  # (those cases then have no NumPy/SciPy column)
    sc = None


def _x(rng, low=0.1, high=8.0):
    return {"x": rng.uniform(low, high, 1_000_000).astype(np.float32)}


def _unit(rng):
    return _x(rng, -0.99, 0.99)


def _xy(rng):
    return {"x": rng.uniform(-2, 2, 1_000_000).astype(np.float32), "y": rng.uniform(0.1, 3, 1_000_000).astype(np.float32)}


def _nan_matrix(rng):
    x = rng.standard_normal((1000, 1000)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    return {"x": x}


def _matrix(rng):
    return {"x": rng.standard_normal((1000, 1000)).astype(np.float32)}


def _scipy(label, fn):
    return (label, fn) if sc is not None else None


CASES = [
    Case("lgamma 1M", _x, lambda E, a: E.lgamma(a["x"]), _scipy("scipy gammaln", lambda a: sc.gammaln(a["x"])),
         lambda T, a: T.lgamma(a["x"]), grad=True),
    Case("erfinv 1M", _unit, lambda E, a: E.erfinv(a["x"]), _scipy("scipy erfinv", lambda a: sc.erfinv(a["x"])),
         lambda T, a: T.erfinv(a["x"]), grad=True),
    Case("special.i0e 1M", lambda rng: _x(rng, -20, 20), lambda E, a: E.special.i0e(a["x"]),
         _scipy("scipy i0e", lambda a: sc.i0e(a["x"])), lambda T, a: T.special.i0e(a["x"]), grad=True),
    Case("xlogy 1M", _xy, lambda E, a: E.xlogy(a["x"], a["y"]), _scipy("scipy xlogy", lambda a: sc.xlogy(a["x"], a["y"])),
         lambda T, a: T.xlogy(a["x"], a["y"]), grad=True),
    Case("nansum(dim=1) 1000x1000", _nan_matrix, lambda E, a: E.nansum(a["x"], 1),
         ("np.nansum", lambda a: np.nansum(a["x"], axis=1)), lambda T, a: T.nansum(a["x"], 1), grad=True),
    Case("quantile([.1,.5,.9], dim=1) 1000x1000", _matrix,
         lambda E, a: E.quantile(a["x"], E.tensor([0.1, 0.5, 0.9]), dim=1),
         ("np.quantile", lambda a: np.quantile(a["x"], [0.1, 0.5, 0.9], axis=1)),
         lambda T, a: T.quantile(a["x"], T.tensor([0.1, 0.5, 0.9]), dim=1), grad=True),
]
