"""`ember.testing`: `assert_close` and `make_tensor`, as PyTorch's `torch.testing`, for tests written against it."""
from __future__ import annotations

import collections.abc
import math

import numpy as np

from . import _dtype as dt
from ._tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# PyTorch's default (rtol, atol) per dtype; integers and bool compare exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


def _tolerances(d: dt.dtype) -> tuple[float, float]:
    return _TOLERANCES.get(d.name, (0.0, 0.0))


def _as_tensor(v):
    from ._creation import tensor
    return v if isinstance(v, Tensor) else tensor(v)


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, where: str):
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match{where}: {sorted(map(str, actual))} != "
                                 f"{sorted(map(str, expected))}")
        for k in actual:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg,
                     f"{where} at key {k!r}")
        return
    seq = (collections.abc.Sequence,)
    if isinstance(actual, seq) and isinstance(expected, seq) and not isinstance(actual, str):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch{where}: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, f"{where} at index {i}")
        return
    numbers = (bool, int, float, np.number, np.bool_)
    if not isinstance(actual, (Tensor, np.ndarray) + numbers) or not isinstance(expected, (Tensor, np.ndarray) + numbers):
        if actual != expected:
            raise AssertionError(msg or f"Objects are not equal{where}: {actual!r} != {expected!r}")
        return
    scalar = isinstance(actual, numbers) and isinstance(expected, numbers)
    a, e = _as_tensor(actual), _as_tensor(expected)
    if scalar and not check_dtype:
        pass
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match{where}: {a.shape} != {e.shape}.")
    if check_dtype and a.dtype is not e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match{where}: {a.dtype} != {e.dtype}.")
    if check_device and a.device != e.device:
        raise AssertionError(msg or f"The values for attribute 'device' do not match{where}: {a.device} != "
                                    f"{e.device}.")
    if check_stride and a.stride() != e.stride():
        raise AssertionError(msg or f"The values for attribute 'stride()' do not match{where}: {a.stride()} != "
                                    f"{e.stride()}.")
    if rtol is None:
        r1, a1 = _tolerances(a.dtype)
        r2, a2 = _tolerances(e.dtype)
        rt, at = max(r1, r2), max(a1, a2)
    else:
        rt, at = rtol, atol
    x = np.asarray(a.detach().cpu().numpy(), np.float64) if a.dtype is not dt.bool else a.detach().cpu().numpy()
    y = np.asarray(e.detach().cpu().numpy(), np.float64) if e.dtype is not dt.bool else e.detach().cpu().numpy()
    if x.dtype == np.bool_ or y.dtype == np.bool_:
        bad = x != y
        tol = None
    else:
        with np.errstate(invalid="ignore"):
            diff = np.abs(x - y)
            tol = at + rt * np.abs(y)
            bad = ~((diff <= tol) | (x == y))  # (x == y: equal infinities)
        if equal_nan:
            bad &= ~(np.isnan(x) & np.isnan(y))
    if not bad.any():
        return
    if msg:
        raise AssertionError(msg)
    n, total = int(bad.sum()), bad.size
    lines = [f"{'Scalars' if scalar else 'Tensor-likes'} are not {'equal' if tol is None or (rt == 0 and at == 0) else 'close'}{where}!", ""]
    if not scalar:
        lines.append(f"Mismatched elements: {n} / {total} ({100.0 * n / total:.1f}%)")
    if tol is not None:
        d = np.where(bad, np.abs(x - y), -1.0)
        i = np.unravel_index(int(np.nanargmax(np.where(np.isnan(d), np.inf, d))), d.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(bad, np.abs(x - y) / np.abs(y), -1.0)
        j = np.unravel_index(int(np.nanargmax(np.where(np.isnan(rel), np.inf, rel))), rel.shape)
        at_i = "" if scalar else f" at index {tuple(int(k) for k in i)}"
        at_j = "" if scalar else f" at index {tuple(int(k) for k in j)}"
        lines.append(f"Greatest absolute difference: {float(d[i])}{at_i} (up to {at} allowed)")
        lines.append(f"Greatest relative difference: {float(rel[j])}{at_j} (up to {rt} allowed)")
    raise AssertionError("\n".join(lines))


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False, msg=None) -> None:
    """Assert that `actual` and `expected` (tensors, arrays, numbers, or sequences and mappings of them) are close:
    |actual − expected| ≤ atol + rtol·|expected| elementwise, with PyTorch's default tolerances per dtype when
    rtol and atol are not given (float32: 1.3e-6 and 1e-5; integers and bool: exact), after checking shape, dtype
    and device. The AssertionError says how many elements differ and where the largest differences are."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride,
             msg if not callable(msg) else None, "")


def assert_allclose(actual, expected, rtol: float | None = None, atol: float | None = None, equal_nan: bool = True,
                    msg: str = "") -> None:
    """Deprecated in PyTorch (use assert_close): no dtype check, NaNs equal by default."""
    if rtol is None and atol is None:
        rtol, atol = None, None
    elif rtol is None or atol is None:
        rtol, atol = rtol or 0.0, atol or 0.0
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of `shape` and `dtype` with values drawn uniformly from [low, high) (floats: default [-9, 9);
    integers: [-9, 10); bool: True/False), as PyTorch's make_tensor; noncontiguous gives a strided view."""
    from . import _creation as C
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    d = dt.as_dtype(dtype)
    g = C.numpy_generator(None)
    if d is dt.bool:
        arr = g.random(shape) < 0.5
    elif d.is_floating_point:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        arr = g.uniform(lo, hi, shape)
        if exclude_zero:
            arr[arr == 0] = math.ulp(0.0) * 1e300 if hi > 0 else -1.0
    else:
        info = np.iinfo(d.np)
        lo = max(int(-9 if low is None else math.ceil(low)), int(info.min))
        hi = min(int(10 if high is None else math.ceil(high)), int(info.max))
        arr = g.integers(lo, hi, shape)
        if exclude_zero:
            arr[arr == 0] = 1
    arr = arr.astype(d.np)
    if noncontiguous and arr.size > 1:
        wide = np.repeat(arr, 2, axis=-1)
        arr = wide[..., ::2]
    t = C.tensor(arr, dtype=d, device=device) if not noncontiguous else C.from_numpy(arr)
    if memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    if requires_grad:
        t.requires_grad_(True)
    return t
