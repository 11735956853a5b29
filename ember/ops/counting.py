"""Counting, binning and running extremes: unique, unique_consecutive, searchsorted, bucketize,
histc, histogram, bincount, cummax, cummin, logcumsumexp.

Functions whose result's shape depends on the values (unique, bincount, ...) are not Ops: they do
their work on the input's array and wrap the result with `make`, as `nonzero` does, because lazy
mode and the compiler learn an Op's output shape once and reuse it. None of them is
differentiable in PyTorch either. cummax/cummin find their indices the same way and then gather
the values with `gather` (whose backward scatter-adds the gradient to each running extreme's
index); logcumsumexp is an Op with a log-space (overflow-free) forward and backward.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _capture
from ..backend import array_module, on_device_of
from .._tensor import Tensor, make, normalize_dim
from ..autograd.function import Op
from .arithmetic import where
from .indexing import gather
from .reduce import _apply, _result_type, register_return_type, return_types
from .registry import Exports
from .. import _dtype as dt

__all__ = ["unique", "unique_consecutive", "searchsorted", "bucketize", "histc", "histogram", "bincount",
           "cummax", "cummin", "logcumsumexp"]

_INT64 = np.dtype(np.int64)
_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "int16": "Short",
          "int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool", "bfloat16": "BFloat16"}




return_types.cummax = _result_type("cummax")
return_types.cummin = _result_type("cummin")
register_return_type("histogram", ("hist", "bin_edges"))


# ---------------------------------------------------------------------- argument handling
def _check(x, op: str, arg: str = "input", pos: int = 1) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def _array(t: Tensor):
    """t's values as a real array (in lazy mode a pending value is computed now: the caller reads its values)."""
    if _capture.ACTIVE is not None:
        _capture.settle(t)
    return t._data


def _dtype_name(dtype) -> str:
    return _NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def _int_arg(v, op: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{arg}' must be int, not {type(v).__name__}")
    return int(v)


def _dim_arg(dim, ndim: int, op: str) -> int:
    if dim is None or isinstance(dim, bool):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    return normalize_dim(dim, ndim, op)


def _zeros(like, shape, dtype):
    with on_device_of(like):
        return array_module(like).zeros(shape, dtype)


def _arange(like, n: int):
    with on_device_of(like):
        return array_module(like).arange(n, dtype=_INT64)


# ---------------------------------------------------------------------- unique, unique_consecutive
def _runs(a, xp):
    """For the rows of 2-D `a` (already in order): a bool mask of the rows that start a new run
    (NaN never equals NaN, so every NaN starts its own run, as in PyTorch)."""
    new = xp.ones(a.shape[0], dtype=bool)
    if a.shape[0] > 1:
        if a.shape[1] == 1:  # (one column: the comparison itself, without the reduction over columns)
            xp.not_equal(a[1:, 0], a[:-1, 0], out=new[1:])
        else:
            new[1:] = (a[1:] != a[:-1]).any(axis=1)
    return new


def _unique_impl(input: Tensor, return_inverse: bool, return_counts: bool, dim, consecutive: bool, op: str):
    a = _array(_check(input, op))
    xp = array_module(a)
    if dim is None:
        rows, shape_inv = a.reshape(-1, 1), a.shape  # inverse has the input's shape (0-d for a 0-d input)
    else:
        d = _dim_arg(dim, a.ndim, op)
        if a.ndim == 0:
            a = a.reshape(1)
        moved = xp.moveaxis(a, d, 0)
        if moved.shape[0] and moved[0].size == 0:
            raise RuntimeError(f"{op}(): There are 0 sized dimensions, and they aren't selected, so unique cannot be "
                               f"applied (input shape {list(a.shape)}, dim={dim})")
        rows, shape_inv = moved.reshape(moved.shape[0], math.prod(moved.shape[1:])), (moved.shape[0],)
    n = rows.shape[0]
    if consecutive:
        order = None
        srt = rows
    elif dim is None and not return_inverse:  # only the values are needed, not the permutation: a plain sort
        order = None
        srt = xp.sort(rows[:, 0]).reshape(-1, 1)
    else:  # lexicographic order of the rows, stable (NaN last, as NumPy and PyTorch sort)
        if rows.shape[1] > 1:
            order = xp.lexsort(rows.T[::-1])
        else:  # equal values form one group whatever their order, so any sort will do, but NaNs (each its own
            # group) keep their input order, as PyTorch numbers them: stable only when there is a NaN
            col = rows[:, 0]
            nan = col.dtype.kind in "fc" and bool(xp.isnan(col).any())
            order = xp.argsort(col, kind="stable" if nan else None)
        srt = rows[order]
    new = _runs(srt, xp)
    starts = xp.flatnonzero(new)
    vals = srt[starts]
    if dim is None:
        out = vals.reshape(-1)
    else:
        out = xp.moveaxis(vals.reshape((len(starts),) + moved.shape[1:]), 0, d)
    results = [make(xp.ascontiguousarray(out))]
    if return_inverse:
        group = xp.cumsum(new, dtype=_INT64) - 1  # the run each (sorted) row belongs to
        inv = group
        if order is not None:
            inv = xp.empty(n, _INT64)
            inv[order] = group
        results.append(make(inv.reshape(shape_inv)))
    if return_counts:
        results.append(make(xp.diff(xp.append(starts, n)).astype(_INT64, copy=False)))
    return results[0] if len(results) == 1 else tuple(results)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None):
    """The distinct elements of `input` (flattened), or with `dim` the distinct slices along `dim`, in ascending
    (lexicographic) order; `output[inverse] == input` (inverse: int64, the input's shape, or (input.size(dim),)
    with `dim`) and counts[i] = how many times output[i] occurs. Returns output alone, or a tuple
    (output[, inverse][, counts]). NaN is distinct from every value, itself included. The result is sorted
    whatever `sorted` says (as PyTorch's CPU kernel does). Not differentiable."""
    return _unique_impl(input, return_inverse, return_counts, dim, False, "unique")


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Collapse each run of consecutive equal elements (or slices along `dim`) to one, keeping the order;
    inverse and counts as for `unique`. Not differentiable."""
    return _unique_impl(input, return_inverse, return_counts, dim, True, "unique_consecutive")


# ---------------------------------------------------------------------- searchsorted, bucketize
def _search(seq, vals, right: bool, out_int32: bool, sorter, op: str):
    """Indices i with seq[..., i-1] < v <= seq[..., i] (right: seq[i-1] <= v < seq[i]) for every v of `vals`,
    along seq's last dim; seq 1-D, or N-D with leading dims equal to those of vals."""
    xp = array_module(seq)
    side = "right" if right else "left"
    ct = np.result_type(seq.dtype, vals.dtype)
    seq, vals = seq.astype(ct, copy=False), vals.astype(ct, copy=False)
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter, -1)
    if seq.ndim == 1:
        r = xp.searchsorted(seq, vals, side=side)
    else:
        r = xp.empty(vals.shape, _INT64)
        flat_s, flat_v, flat_r = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1]), r.reshape(-1, vals.shape[-1])
        for i in range(flat_s.shape[0]):
            flat_r[i] = xp.searchsorted(flat_s[i], flat_v[i], side=side)
    if dt.is_float(ct):  # PyTorch's binary search never stops at a NaN value: it goes past the end
        r = xp.where(vals != vals, seq.shape[-1], r)
    return make(xp.asarray(r).astype(np.int32 if out_int32 else _INT64, copy=False))


def _values(v, like, op: str):
    """The values argument: a Tensor's array, or a Python/NumPy number as a 0-d array."""
    if isinstance(v, Tensor):
        return _array(v)
    if isinstance(v, (bool, int, float, np.number, np.bool_)):
        with on_device_of(like):
            return array_module(like).asarray(v)
    raise TypeError(f"{op}(): argument 'input' must be Tensor or Number, not {type(v).__name__}")


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """For each value v of `input`, the index at which v would be inserted along the last dim of
    `sorted_sequence` to keep it sorted: the first i with v <= seq[i] ('left'), or with v < seq[i]
    (right=True or side='right'). A 1-D sequence serves every value; an N-D one must share the leading N-1
    dims of `input`. `sorter` (int64) gives the order that sorts an unsorted sequence. Returns int64 (int32
    with out_int32) of input's shape; `input` may be a number (0-d result, 1-D sequence only)."""
    op = "searchsorted"
    s = _array(_check(sorted_sequence, op, "sorted_sequence"))
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{op}(): side can only be 'left' or 'right' but got {side!r}")
        if side == "left" and right:
            raise RuntimeError(f"{op}(): side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    v = _values(input, s, op)
    if s.ndim == 0:
        raise RuntimeError(f"{op}(): boundaries tensor should have positive dimension, but got 0 dimension")
    if s.ndim > 1:
        if v.ndim == 0:
            raise RuntimeError(f"{op}(): input value can be a scalar only when boundaries tensor dimension is 1, but "
                               f"we got boundaries tensor dim({s.ndim}) and input value's dim(0) numel(1)")
        if s.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(f"{op}(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                               f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                               f"{list(s.shape)} and input value tensor {list(v.shape)}")
    srt = None
    if sorter is not None:
        srt = _array(_check(sorter, op, "sorter"))
        if srt.dtype != _INT64:
            raise RuntimeError(f"{op}(): sorter must be a tensor of long dtype but got dtype {_dtype_name(srt.dtype)}")
        if srt.shape != s.shape:
            raise RuntimeError(f"{op}(): boundary and sorter must have the same size, but got boundary tensor "
                               f"{list(s.shape)} and got sorter tensor {list(srt.shape)}")
        if srt.size and (int(srt.min()) < 0 or int(srt.max()) >= s.shape[-1]):
            raise RuntimeError(f"{op}(): sorter index out of range (indices must be in [0, {s.shape[-1] - 1}], got "
                               f"min {int(srt.min())} and max {int(srt.max())})")
    return _search(s, v, right, out_int32, srt, op)


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each element of `input` given 1-D ascending `boundaries`: i with b[i-1] < x <= b[i]
    (right=True: b[i-1] <= x < b[i]); int64 (int32 with out_int32) of input's shape. `input` may be a number."""
    op = "bucketize"
    b = _array(_check(boundaries, op, "boundaries", 2))
    if b.ndim != 1:
        raise RuntimeError(f"{op}(): boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    v = _values(input, b, op)
    return _search(b, v, right, out_int32, None, op)


# ---------------------------------------------------------------------- histc, histogram, bincount
def _float_input(a, op: str) -> None:
    if not dt.is_float(a.dtype):
        raise NotImplementedError(f"{op}(): not implemented for '{_dtype_name(a.dtype)}' input; "
                                  f"histograms need a floating point input (convert it with .float())")


def _bins_arg(bins, op: str) -> int:
    bins = _int_arg(bins, op, "bins")
    if bins <= 0:
        raise RuntimeError(f"{op}(): bins must be > 0, but got {bins}")
    return bins


def histc(input: Tensor, bins: int = 100, min=0, max=0) -> Tensor:
    """Counts of the elements in `bins` equal-width bins spanning [min, max] (when min == max, the data's
    [smallest, largest]; if those are equal too, widened by 1 on each side); the last bin includes max,
    elements outside the range (and NaN) are ignored. The result has the input's floating dtype."""
    op = "histc"
    a = _array(_check(input, op))
    _float_input(a, op)
    bins = _bins_arg(bins, op)
    if min > max:
        raise RuntimeError(f"{op}(): max must be larger than min, but got min={min} and max={max}")
    xp = array_module(a)
    flat = a.reshape(-1)
    lo, hi = a.dtype.type(min), a.dtype.type(max)
    if lo == hi and flat.size:
        lo, hi = flat.min(), flat.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
        raise RuntimeError(f"{op}(): range of [{float(lo)}, {float(hi)}] is not finite")
    inside = flat[(flat >= lo) & (flat <= hi)]
    with np.errstate(all="ignore"):
        pos = ((inside - lo) * a.dtype.type(bins) / (hi - lo)).astype(_INT64)  # linear interpolation in the input dtype
    pos = xp.minimum(pos, bins - 1)  # max itself (and rounding up to bins) falls in the last bin
    return make(xp.bincount(pos, minlength=bins).astype(a.dtype))


def histogram(input: Tensor, bins, *, range: tuple | None = None, weight: Tensor | None = None,
              density: bool = False):
    """Histogram of the elements of `input` (flattened): `bins` an int (that many equal-width bins over
    `range`, default the data's [min, max], widened by 0.5 each side when those are equal, [0, 1] when empty)
    or a 1-D tensor of increasing edges. Bin i holds edges[i] <= x < edges[i+1], the last also its right
    edge; elements outside are ignored. `weight` (input's shape) weights each element; `density` divides by
    (total * bin width). Returns return_types.histogram(hist, bin_edges), both of the input's dtype."""
    op = "histogram"
    a = _array(_check(input, op))
    _float_input(a, op)
    xp = array_module(a)
    flat = a.reshape(-1)
    if isinstance(bins, Tensor):
        edges = _array(bins)
        if edges.ndim != 1:
            raise RuntimeError(f"{op}(): bins tensor should have one dimension, but got {edges.ndim} dimensions")
        if edges.dtype != a.dtype:
            raise RuntimeError(f"{op}(): input tensor and bins tensor should have the same dtype, but got input with "
                               f"dtype {_dtype_name(a.dtype)} and bins with dtype {_dtype_name(edges.dtype)}")
        if edges.shape[0] < 1:
            raise RuntimeError(f"{op}(): bins tensor should have at least 1 element, but got {edges.shape[0]}")
    else:
        n = _bins_arg(bins, op)
        if range is not None:
            if len(range) != 2:
                raise RuntimeError(f"{op}(): range should have 2 elements (min, max), but got {len(range)}")
            lo, hi = float(range[0]), float(range[1])
        elif flat.size:
            lo, hi = float(flat.min()), float(flat.max())
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise RuntimeError(f"{op}(): min should not exceed max, but got min {lo} max {hi}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"{op}(): range [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        with on_device_of(a):
            edges = xp.linspace(lo, hi, n + 1).astype(a.dtype)
    w = None
    if weight is not None:
        w = _array(_check(weight, op, "weight"))
        if w.shape != a.shape:
            raise RuntimeError(f"{op}(): if weight tensor is provided it should have the same shape as the input "
                               f"tensor, but got input with shape {list(a.shape)} and weight with shape {list(w.shape)}")
        if w.dtype != a.dtype:
            raise RuntimeError(f"{op}(): weight should have the input's dtype {_dtype_name(a.dtype)}, "
                               f"got {_dtype_name(w.dtype)}")
        w = w.reshape(-1)
    nb = edges.shape[0] - 1
    if nb <= 0 or flat.size == 0:
        hist = _zeros(a, (max(nb, 0),), a.dtype)
    else:
        inside = (flat >= edges[0]) & (flat <= edges[-1])
        pos = xp.searchsorted(edges, flat[inside], side="right") - 1
        pos = xp.minimum(pos, nb - 1)  # the right edge belongs to the last bin
        hist = xp.bincount(pos, None if w is None else w[inside], minlength=nb).astype(a.dtype)
    if density:
        with np.errstate(all="ignore"):
            hist = (hist / (hist.sum() * xp.diff(edges))).astype(a.dtype)
    return return_types.histogram(make(hist), make(xp.array(edges, copy=True)))


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """out[n] = number of times n occurs in the 1-D non-negative integer `input` (with `weights`: the sum of
    the weights of its occurrences), for n < max(input.max() + 1, minlength). int64 without weights; with
    weights, float32/float64 weights keep their dtype and any other dtype gives float64 (an empty input gives
    int64 zeros of length minlength, as in PyTorch)."""
    op = "bincount"
    a = _array(_check(input, op))
    minlength = _int_arg(minlength, op, "minlength")
    if a.dtype.kind not in "iu":
        raise NotImplementedError(f"{op}(): not implemented for '{_dtype_name(a.dtype)}' input; "
                                  f"input must be a 1-d tensor of non-negative integers")
    if minlength < 0:
        raise RuntimeError(f"{op}(): minlength should be >= 0, but got {minlength}")
    if a.ndim != 1:
        raise RuntimeError(f"{op}(): only supports 1-d non-negative integral inputs, but got input of shape "
                           f"{list(a.shape)}")
    xp = array_module(a)
    if a.size and int(a.min()) < 0:
        raise RuntimeError(f"{op}(): only supports 1-d non-negative integral inputs, but got a negative value "
                           f"{int(a.min())}")
    w = None
    if weights is not None:
        w = _array(_check(weights, op, "weights"))
        if w.ndim != 1 or w.shape[0] != a.shape[0]:
            raise RuntimeError(f"{op}(): weights should be 1-d and have the same length as input, but got weights "
                               f"of shape {list(w.shape)} and input of shape {list(a.shape)}")
    if a.size == 0:
        return make(_zeros(a, (minlength,), _INT64))
    if w is None:
        return make(xp.bincount(a, minlength=minlength).astype(_INT64, copy=False))
    out_dtype = w.dtype if w.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    return make(xp.bincount(a, w.astype(np.float64), minlength=minlength).astype(out_dtype, copy=False))


# ---------------------------------------------------------------------- cummax, cummin
def _running_index(a, axis: int, largest: bool):
    """For each position i along `axis`, the index of the running max (min) of a[..., :i+1]: the LAST position
    j <= i holding it (ties go to the later element), and once a NaN is seen, the latest NaN (NaN propagates)."""
    xp = array_module(a)
    run = (xp.maximum if largest else xp.minimum).accumulate(a, axis=axis)
    hit = a == run
    if dt.is_float(a.dtype):
        hit |= a != a
    pos = _arange(a, a.shape[axis]).reshape((-1,) + (1,) * (a.ndim - 1 - axis))
    return xp.maximum.accumulate(xp.where(hit, pos, 0), axis=axis)


def _cum_extreme(input: Tensor, dim, largest: bool, op: str):
    x = _check(input, op)
    a = _array(x)
    axis = _dim_arg(dim, a.ndim, op)
    result = return_types.cummax if largest else return_types.cummin
    if a.ndim == 0:
        idx = _zeros(a, (), _INT64)
        return result(gather(x.reshape(1), 0, make(idx.reshape(1))).reshape(()), make(idx))
    idx = _running_index(a, axis, largest) if a.size else _zeros(a, a.shape, _INT64)
    # the values are x at those indices: gather's backward sends each gradient to its running extreme's index
    return result(gather(x, axis, make(idx)), make(idx))


def cummax(input: Tensor, dim: int):
    """Running maximum along `dim`: values[i] = max(input[..., :i+1]) and indices[i] the (last) position
    holding it, as return_types.cummax(values, indices). NaN propagates. d values[i] / d input[indices[i]] = 1."""
    return _cum_extreme(input, dim, True, "cummax")


def cummin(input: Tensor, dim: int):
    """Running minimum along `dim`, as return_types.cummin(values, indices); the rules of `cummax`."""
    return _cum_extreme(input, dim, False, "cummin")


# ---------------------------------------------------------------------- logcumsumexp
def _logaddexp_scan(x, axis: int):
    """z_i = ln(e^z_{i-1} + e^x_i) along `axis`, never forming e^x (so 1000.0 does not overflow)."""
    xp = array_module(x)
    try:
        return xp.logaddexp.accumulate(x, axis=axis)
    except (AttributeError, NotImplementedError, TypeError):  # an array module without ufunc.accumulate
        out = xp.array(x, copy=True)
        moved = xp.moveaxis(out, axis, 0)
        for i in range(1, moved.shape[0]):
            moved[i] = xp.logaddexp(moved[i - 1], moved[i])
        return out


class LogCumSumExp(Op):
    """z_i = ln Σ_{j≤i} e^(x_j) along `axis` (reverse: Σ_{j≥i});  dz_i/dx_j = e^(x_j - z_i).

    So dL/dx_j = Σ_{i≥j} g_i e^(x_j - z_i). It is computed in log space, splitting g into its positive and
    negative parts: e^(x_j + rev-logcumsumexp(ln g⁺ - z)_j) - e^(x_j + rev-logcumsumexp(ln g⁻ - z)_j), which
    neither overflows nor underflows where e^x alone would; an all -inf prefix (z = -inf) gets gradient 0."""

    saves_output = True

    def forward(self, x, axis, reverse):
        xp = array_module(x)
        if x.ndim == 0:
            return x.copy()
        if reverse:
            return xp.flip(_logaddexp_scan(xp.flip(x, axis), axis), axis)
        return _logaddexp_scan(x, axis)

    def jvp(self, t, x, axis, reverse):
        """z_i' = Σ_{j≤i} e^(x_j - z_i) x_j', in log space as backward: e^(lcse(x + ln t⁺)_i - z_i) - the same
        for t⁻ (lcse this op, in the same direction)."""
        t = t[0]
        z = self.output()
        z = where(z == -math.inf, 0.0, z)  # an all -inf prefix: its tangent is 0
        return ((_apply(LogCumSumExp, x + _log_part(t, True), axis, reverse) - z).exp()
                - (_apply(LogCumSumExp, x + _log_part(t, False), axis, reverse) - z).exp())

    def backward(self, gz, x, axis, reverse):
        z = self.output()
        z = where(z == -math.inf, 0.0, z)  # there every x_j is -inf: e^(x_j - 0) = 0, not e^(-inf + inf) = nan
        log_pos = _log_part(gz, True) - z
        log_neg = _log_part(gz, False) - z
        return ((x + _apply(LogCumSumExp, log_pos, axis, not reverse)).exp()
                - (x + _apply(LogCumSumExp, log_neg, axis, not reverse)).exp())


def _log_part(g: Tensor, positive: bool) -> Tensor:
    """ln g⁺ (positive) or ln g⁻: the log of g's positive (negative) part, -inf where that part is 0."""
    part = g > 0 if positive else g < 0
    return where(part, where(part, g if positive else -g, 1.0).log(), -math.inf)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """ln Σ_{j≤i} exp(input_j) along `dim`, computed as a running log-add-exp so large values (1000.0) do not
    overflow; floating inputs only, as in PyTorch."""
    op = "logcumsumexp"
    x = _check(input, op)
    axis = _dim_arg(dim, x._data.ndim, op)
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for '{_dtype_name(x._data.dtype)}' input; "
                                  f"convert it to a floating dtype first (e.g. .float())")
    return _apply(LogCumSumExp, x, axis, False)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=["unique", "unique_consecutive", "histc", "histogram", "bincount", "cummax", "cummin", "logcumsumexp"])
