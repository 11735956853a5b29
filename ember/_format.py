"""PyTorch-style `repr` of tensors: `tensor([1., 2.], requires_grad=True)`."""
from __future__ import annotations

import numpy as np

from . import _dtype as dt

_PREFIX = "tensor("


def _float_formatter(a: np.ndarray):
    finite = a[np.isfinite(a)]
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.4f}"
    amax, amin = np.abs(finite).max(), np.abs(finite).min()
    if np.all(finite == np.round(finite)) and amax < 1e8:
        return lambda v: _special(v) or f"{v:.0f}."
    if amax >= 1e8 or (amin < 1e-4 and amin != 0) or (amin != 0 and amax / amin > 1e3 and amax >= 1e3):
        return lambda v: _special(v) or f"{v:.4e}"
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v) -> str | None:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def format_tensor(t) -> str:
    a = t.data if isinstance(t.data, np.ndarray) else t.data.get()
    kind = a.dtype.kind
    opts = dict(separator=", ", prefix=_PREFIX, threshold=1000, edgeitems=3, max_line_width=80)
    if a.size == 0:
        body = "[]"
    elif kind == "f":
        body = np.array2string(a.astype(np.float64), formatter={"float_kind": _float_formatter(a.astype(np.float64))}, **opts)
    elif kind == "b":
        body = np.array2string(a, formatter={"bool": lambda v: "True" if v else "False"}, **opts)
    else:
        body = np.array2string(a, **opts)
    extras = []
    if a.size == 0 and a.shape != (0,):
        extras.append(f"size={tuple(a.shape)}")
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    default = {np.dtype(np.int64), np.dtype(np.bool_), dt.NP_DEFAULT_FLOAT}
    if a.dtype not in default:
        extras.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    if t.name:
        extras.append(f"name={t.name!r}")
    return _PREFIX + body + "".join(", " + e for e in extras) + ")"
