"""PyTorch-style `repr` of tensors: `tensor([ 2.0000,  7.5000, 14.6667], requires_grad=True)`.

The rules follow PyTorch's printing defaults (precision 4, line width 80, summarising
tensors of more than 1000 elements to 3 edge items per dimension), which `set_printoptions` changes:
- one format for the whole tensor, chosen from its nonzero finite values: integral floats
  print as `2.`, others with 4 decimals, and scientific notation (`1.0000e-05`) is used
  when max/min > 1000, max > 1e8, or (non-integral values only) min < 1e-4;
- every value is right-aligned to the width of the widest nonzero finite value.
"""
from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from . import backend

_PREFIX = "tensor("


class _Options:
    """The print options (`ember.set_printoptions`); sci_mode None chooses per tensor (the rules above)."""
    precision, threshold, edgeitems, linewidth, sci_mode = 4, 1000, 3, 80, None


_OPT = _Options()
_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print, as PyTorch's `torch.set_printoptions`.

    precision: digits after the point (default 4); threshold: the element count above which a tensor is
    summarised (default 1000); edgeitems: items kept at each end of a summarised dimension (default 3);
    linewidth: characters per line (default 80); profile: "default", "short" (precision 2, 2 edge items) or
    "full" (never summarised), applied first; sci_mode: True or False forces scientific notation on or off,
    None (the default) chooses per tensor."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): profile must be one of {', '.join(map(repr, _PROFILES))}, "
                             f"got {profile!r}")
        for k, v in _PROFILES[profile].items():
            setattr(_OPT, k, v)
    for name, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                    ("linewidth", linewidth)):
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise TypeError(f"set_printoptions(): {name} must be a non-negative number, got {v!r}")
            setattr(_OPT, name, v)
    _OPT.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options, as PyTorch's `torch._tensor_str.get_printoptions()`."""
    return dict(precision=_OPT.precision, threshold=_OPT.threshold, edgeitems=_OPT.edgeitems,
                linewidth=_OPT.linewidth, sci_mode=_OPT.sci_mode)


class _Formatter:
    """Formats single values of one tensor with a common style and width."""

    def __init__(self, a: np.ndarray) -> None:
        self.kind = "f" if dt.is_float(a.dtype) else a.dtype.kind
        self.int_mode, self.sci_mode, self.width = True, False, 1
        p = _OPT.precision
        flat = a.reshape(-1)
        if self.kind == "b":
            self.width = max((len(str(bool(v))) for v in flat), default=1)
            return
        if self.kind != "f":
            self.width = max((len(str(v)) for v in flat.tolist()), default=1)
            return
        vals = flat.astype(np.float64)
        vals = vals[np.isfinite(vals) & (vals != 0)]
        if vals.size == 0:
            if _OPT.sci_mode:
                self.sci_mode = True
            return
        mag = np.abs(vals)
        lo, hi = mag.min(), mag.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        if self.int_mode:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
        else:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if _OPT.sci_mode is not None:
            self.sci_mode = _OPT.sci_mode
        if self.sci_mode:
            self.width = max(len(f"{v:.{p}e}") for v in vals.tolist())
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in vals.tolist())  # + 1 for the trailing "."
        else:
            self.width = max(len(f"{v:.{p}f}") for v in vals.tolist())

    def __call__(self, v) -> str:
        p = _OPT.precision
        if self.kind == "b":
            s = str(bool(v))
        elif self.kind != "f":
            s = str(v)
        elif self.sci_mode:
            s = f"{v:.{p}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{p}f}"
        return s.rjust(self.width)


def _summarized(a: np.ndarray) -> np.ndarray:
    """The edge items of every dimension (what a summarised print shows), for choosing the format."""
    if a.ndim == 0:
        return a
    e = _OPT.edgeitems
    if a.shape[0] > 2 * e:
        parts = [a[:e], a[-e:]]
    else:
        parts = [a]
    return np.concatenate([np.stack([_summarized(r) for r in p]) if p.ndim > 1 else p for p in parts])


def _body(a: np.ndarray, fmt: _Formatter, indent: int, summarize: bool) -> str:
    if a.ndim == 0:
        return fmt(a.item())
    n, e = a.shape[0], _OPT.edgeitems
    cut = summarize and n > 2 * e
    if a.ndim == 1:
        items = [fmt(v) for v in a[:e].tolist()] + [" ..."] + [fmt(v) for v in a[-e:].tolist()] if cut else \
            [fmt(v) for v in a.tolist()]
        per_line = max(1, (_OPT.linewidth - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(e) if cut else range(n)
    parts = [_body(a[i], fmt, indent + 1, summarize) for i in rows]
    if cut:
        parts += ["..."] + [_body(a[i], fmt, indent + 1, summarize) for i in range(n - e, n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def format_tensor(t) -> str:
    a = backend.to_host(t._data)  # printing reads every value on the host
    if a.dtype in dt.LOW_FLOATS:  # (bfloat16's scalars have no format spec; every 16-bit value is exact in float32)
        a = a.astype(np.float32)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if a.size == 0:
        body = "[]"
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        # an empty tensor has no values to show its dtype by, so anything but the default float is named
        if t._data.dtype != dt.NP_DEFAULT_FLOAT:
            suffixes.append(f"dtype={t.dtype}")
    else:
        summarize = a.size > _OPT.threshold
        fmt = _Formatter(_summarized(a) if summarize else a)
        body = _body(a, fmt, len(_PREFIX), summarize)
        if t._data.dtype not in (dt.NP_DEFAULT_FLOAT, dt.NP_INT64, dt.NP_BOOL):
            suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    if t.name:
        suffixes.append(f"name={t.name!r}")
    out = _PREFIX + body
    last = len(out) - out.rfind("\n") + 1
    for s in suffixes:  # a suffix that would overflow the line goes on its own line, as PyTorch does
        if last + len(s) + 2 > _OPT.linewidth:
            out += ",\n" + " " * len(_PREFIX) + s
            last = len(_PREFIX) + len(s)
        else:
            out += ", " + s
            last += len(s) + 2
    return out + ")"
