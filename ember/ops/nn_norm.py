"""Normalisation ops: batch_norm, layer_norm, group_norm.

All three standardise x over some axes, x̂ = (x − μ)·r with r = 1/√(σ² + eps) (σ² the biased
variance), then apply an optional per-feature affine map z = x̂·γ + β. One fused op, `Normalize`,
does this: its forward is a handful of in-place NumPy passes that keep x̂ and r for backward,
and its backward is the closed form

    gx = r·(g·γ − mean(g·γ) − x̂·mean(g·γ·x̂)),   gγ = Σ g·x̂,   gβ = Σ g.

`backward` writes that formula with ember ops on the inputs (x̂ and r recomputed as functions of x, so
it differentiates again); `fast_backward`, used when no graph of the backward is wanted, computes it on
the arrays from the x̂ and r that forward kept.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from .._tensor import Tensor, bump_version, make
from ..autograd.function import Op
from ..autograd.grad_mode import MODE
from .arithmetic import sum_array
from .. import _dtype as dt

__all__ = ["batch_norm", "layer_norm", "group_norm"]


class Normalize(Op):
    """z = x̂·γ + β with x̂ = (x − mean)/√(var + eps) over `axes` (sorted); γ and β (or None) are reshaped to
    `view` (None: as they are) to broadcast against x, and their gradients are sums over `paxes`.
    `running=(mean_t, var_t, momentum)` updates running statistics in place (unbiased variance)."""

    def forward(self, x, w, b, axes, paxes, view, eps, running=None):
        n = 1
        for a in axes:
            n *= x.shape[a]
        self.mean = mean = _reducer(x, axes, n)  # reused by backward
        mu = mean(x)
        xc = x - mu
        sq = xc * xc
        var = mean(sq)
        if running is not None:
            _update_running(running, mu, var, n)
        var += eps
        np.sqrt(var, out=var)
        r = np.divide(1.0, var, out=var)
        xc *= r  # x̂, kept for backward
        self.xhat, self.r = xc, r
        if w is None and b is None:
            return xc.copy()  # the result must not alias x̂: the caller may modify it in place
        if w is not None:
            np.multiply(xc, w if view is None else w.reshape(view), out=sq)
        else:
            sq[...] = xc
        if b is not None:
            sq += b if view is None else b.reshape(view)
        return sq

    def jvp(self, t, x, w, b, axes, paxes, view, eps):
        """With x̂ = (x − μ)·r over `axes` (μ, r recomputed from x by ember ops, as in backward):

            x̂' = r·(x' − mean(x') − x̂·mean(x̂·x')),   z' = x̂'·γ + x̂·γ' + β'."""
        tx, tw, tb = t[:3]
        z = 0
        if isinstance(tx, Tensor) or isinstance(tw, Tensor):
            mu = x.mean(axes, keepdim=True)
            xc = x - mu
            r = ((xc * xc).mean(axes, keepdim=True) + eps).rsqrt()
            xh = xc * r
            if isinstance(tx, Tensor):
                z = r * (tx - tx.mean(axes, keepdim=True) - xh * (xh * tx).mean(axes, keepdim=True))
                if w is not None:
                    z = z * _viewed(w, view)
            if isinstance(tw, Tensor):
                z = z + xh * _viewed(tw, view)
        return z + _viewed(tb, view) if isinstance(tb, Tensor) else z

    def backward(self, gz, x, w, b, axes, paxes, view, eps):
        """With x̂ = (x − μ)·r, r = 1/√(σ² + eps) over `axes` and gh = g·γ:

            gx = r·(gh − mean(gh) − x̂·mean(gh·x̂)),   gγ = Σ_paxes g·x̂,   gβ = Σ_paxes g,

        with μ, r and x̂ recomputed from x by ember ops, so the gradient is differentiable in x again."""
        mu = x.mean(axes, keepdim=True)
        xc = x - mu
        r = ((xc * xc).mean(axes, keepdim=True) + eps).rsqrt()
        xh = xc * r
        gx = gw = gb = None
        if b is not None and self.needs(2):
            gb = (gz.sum(paxes) if paxes else gz).reshape(b.shape)
        if w is not None and self.needs(1):
            gw = ((gz * xh).sum(paxes) if paxes else gz * xh).reshape(w.shape)
        if self.needs(0):
            gh = gz if w is None else gz * (w if view is None else w.reshape(view))
            gx = r * (gh - gh.mean(axes, keepdim=True) - xh * (gh * xh).mean(axes, keepdim=True))
        return gx, gw, gb, None, None, None, None

    def fast_backward(self, gz, x, w, b, axes, paxes, view, eps):
        """backward's formula on the arrays, reusing the x̂ and r that forward kept (backward recomputes them
        as functions of x) and its cached GEMV reductions, in place."""
        g = gz._data
        xh, r, mean = self.xhat, self.r, self.mean
        psum = _reducer(g, paxes, 1) if paxes else _copy  # parameter gradients: sums over paxes
        gw = gb = gx = None
        if b is not None and self.needs(2):
            gb = make(psum(g).reshape(b.shape))
        if w is None:
            if self.needs(0):
                p = g * xh
                gx = _input_grad(g.copy(), p, xh, r, mean)
            return gx, None, gb, None, None, None, None
        p = g * xh
        if self.needs(1):
            gw = make(psum(p).reshape(w.shape))
        if self.needs(0):
            wv = w._data if view is None else w._data.reshape(view)
            p *= wv  # g·γ·x̂
            gx = _input_grad(g * wv, p, xh, r, mean)
        return gx, gw, gb, None, None, None, None


def _viewed(p: Tensor, view) -> Tensor:
    """A parameter (γ, β or a tangent of one) shaped to broadcast against x."""
    return p if view is None else p.reshape(view)


def _copy(a):
    return a.copy()


def _input_grad(gh, p, xh, r, mean) -> Tensor:
    """r·(gh − mean(gh) − x̂·mean(p)) with gh = g·γ and p = g·γ·x̂, computed in place in gh and p."""
    m1 = mean(gh)
    m2 = mean(p)
    np.multiply(xh, m2, out=p)
    gh -= p
    gh -= m1
    gh *= r
    return make(gh)


def _filled(m: int, dtype, n: int) -> np.ndarray:
    """A read-only vector of m values 1/n."""
    v = np.full(m, 1.0 / n, dtype)
    v.flags.writeable = False
    return v


_REDUCERS: dict = {}


def _reducer(x, axes: tuple, div: int):
    """A function giving Σ/div over `axes` (kept as size-1 dims) of arrays shaped like x: the mean for div = the
    number of elements reduced, the sum for div = 1. Cached: a training step asks for the same ones again."""
    key = (x.shape, x.dtype, type(x), axes, div)
    f = _REDUCERS.get(key)
    if f is None:
        if len(_REDUCERS) > 256:
            _REDUCERS.clear()
        f = _REDUCERS[key] = _make_reducer(x, axes, div)
    return f


def _make_reducer(x, axes: tuple, div: int):
    """The function of `_reducer`. The layouts of the norms (trailing axes: layer/group norm; leading axes: batch
    norm of (N, C); axis 0 and the spatial axes: batch norm of (N, C, *)) run as GEMVs with a vector of 1/div's:
    in float32 3-10x faster than np.add.reduce or np.sum, which sum each short row separately, and the division
    comes free."""
    shape, nd, k = x.shape, x.ndim, len(axes)
    if type(x) is np.ndarray and dt.is_float(x.dtype) and x.dtype.itemsize >= 4 and x.size:
        d = x.dtype
        if axes == tuple(range(nd - k, nd)):
            m = math.prod(shape[nd - k:])
            rows, vec, keep = x.size // m, _filled(m, d, div), shape[:nd - k] + (1,) * k
            return lambda a: (a.reshape(rows, m) @ vec).reshape(keep)
        if axes == tuple(range(k)):
            m = math.prod(shape[:k])
            cols, vec, keep = x.size // m, _filled(m, d, div), (1,) * k + shape[k:]
            return lambda a: (vec @ a.reshape(m, cols)).reshape(keep)
        if nd > 2 and axes == (0,) + tuple(range(2, nd)):
            b, c = shape[:2]
            s = x.size // (b * c)
            vs, vb, keep = _filled(s, d, 1), _filled(b, d, div), (1, c) + (1,) * (nd - 2)
            return lambda a: (vb @ (a.reshape(b, c, s) @ vs)).reshape(keep)
    return lambda a: _reduce(a, axes, div)


def _reduce(a, axes: tuple, n: int):
    """Σ a / n over `axes`, keeping them as size-1 dims (a new array)."""
    r = sum_array(a, axes, True)
    if n != 1:
        r *= 1.0 / n
    return r


def _update_running(running, mu, var, n: int) -> None:
    """running ← (1 − m)·running + m·batch, in place, with the unbiased batch variance (as PyTorch)."""
    rm, rv, m = running
    if rm is not None:
        a = rm._data
        a *= 1.0 - m
        a += (m * mu).reshape(a.shape)
        bump_version(rm)
    if rv is not None:
        a = rv._data
        a *= 1.0 - m
        a += (var * (m * n / (n - 1) if n > 1 else m)).reshape(a.shape)
        bump_version(rv)


# ---------------------------------------------------------------------- checks
def _need_tensor(op: str, name: str, v) -> None:
    if v is not None and not isinstance(v, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor or None, not {type(v).__name__}")


def _check_dtypes(op: str, x: Tensor, **named) -> None:
    d = x._data.dtype
    if not dt.is_float(d):
        raise RuntimeError(f"{op}(): expected a floating-point input, got {str(x.dtype).replace('ember.', '')}; "
                           f"convert it with .float()")
    for name, t in named.items():
        if t is not None and t._data.dtype != d:
            raise RuntimeError(f"{op}(): mixed dtypes: {name} is {str(t.dtype).replace('ember.', '')} but input is "
                               f"{str(x.dtype).replace('ember.', '')}; all inputs must share the same dtype")


def _mixed(x: Tensor, *params) -> np.dtype | None:
    """x's dtype when x is float16/bfloat16 and every parameter given is a float32 tensor, else None. PyTorch's
    norms take that pairing (what a 16-bit Linear or Conv under autocast feeds them): they normalise in float32
    and round the result to x's dtype once."""
    d = x._data.dtype
    if d not in dt.LOW_FLOATS:
        return None
    ps = [p for p in params if p is not None]
    return d if ps and all(isinstance(p, Tensor) and p._data.dtype == np.float32 for p in ps) else None


def _check_vector(op: str, name: str, t, c: int) -> None:
    if t is not None and t._data.size != c:
        raise RuntimeError(f"{op}(): {name} should contain {c} elements not {t._data.size} (one per channel, "
                           f"input dimension 1)")


def _verify_batch_size(op: str, shape: tuple) -> None:
    if math.prod(shape[:1] + shape[2:]) == 1:
        raise ValueError(f"{op}(): Expected more than 1 value per channel when training, got input size {list(shape)}")


# ---------------------------------------------------------------------- public functions
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) of input (N, C, *) over the batch and other dims, then z = x̂·γ + β.

    training: use the batch statistics, and update running_mean/running_var (when given) in place:
    r ← (1 − momentum)·r + momentum·batch statistic, with the unbiased variance. Otherwise use the running
    statistics."""
    for name, v in (("input", input), ("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _need_tensor("batch_norm", name, v)
    low = _mixed(input, weight, bias, running_mean, running_var)
    if low is not None:
        return batch_norm(input.float(), running_mean, running_var, weight, bias, training, momentum, eps).to(low)
    x = input._data
    if x.ndim < 2:
        raise RuntimeError(f"batch_norm(): expected an input of shape (N, C) or (N, C, *), got shape {list(x.shape)}")
    _check_dtypes("batch_norm", input, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_vector("batch_norm", name, t, c)
    if training and eps <= 0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    view = (c,) + (1,) * (x.ndim - 2)
    if training:
        _verify_batch_size("batch_norm", x.shape)
        axes = (0,) + tuple(range(2, x.ndim))
        running = None
        if running_mean is not None or running_var is not None:
            # the running statistics are updated in place, outside Op.apply's device check
            stats = [t._data for t in (running_mean, running_var) if t is not None]
            if any(a.__class__ is not x.__class__ for a in stats):
                backend.check_same_device("batch_norm", [x] + stats)
            running = (running_mean, running_var, float(momentum))
        return Normalize.apply(input, weight, bias, axes, axes, view, eps, running=running)
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm(): running_mean and running_var must be defined in evaluation mode "
                           "(training=False); pass them or use training=True")
    # an affine map with the running statistics: z = x·s + t, s = γ/√(var + eps), t = β − mean·s
    s = (running_var + eps).rsqrt()
    if weight is not None:
        s = s * weight
    t = -running_mean * s
    if bias is not None:
        t = t + bias
    if len(view) > 1:
        s, t = s.reshape(view), t.reshape(view)
    return input * s + t


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the last len(normalized_shape) dims (which must equal normalized_shape), then z = x̂·γ + β
    with γ, β of shape normalized_shape."""
    # lean checks: layer_norm runs several times per training step
    ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    if not isinstance(input, Tensor):
        _need_tensor("layer_norm", "input", input)
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, weight, bias = cast_args(Normalize, input, weight, bias)
    low = _mixed(input, weight, bias)
    if low is not None:
        return layer_norm(input.float(), normalized_shape, weight, bias, eps).to(low)
    x = input._data
    k, nd = len(ns), x.ndim
    if k == 0 or nd < k or x.shape[nd - k:] != ns:
        raise RuntimeError(f"layer_norm(): Given normalized_shape={list(ns)}, expected input with shape [*, "
                           f"{', '.join(map(str, ns))}], but got input of size {list(x.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _need_tensor("layer_norm", name, t)
            if t._data.shape != ns:
                raise RuntimeError(f"layer_norm(): Expected {name} to be of same shape as normalized_shape, but got "
                                   f"{name} of shape {list(t.shape)} and normalized_shape = {list(ns)}")
            if t._data.dtype is not x.dtype:
                _check_dtypes("layer_norm", input, **{name: t})
    if not dt.is_float(x.dtype):
        _check_dtypes("layer_norm", input)
    axes = _LN_AXES.get((nd, k))
    if axes is None:
        axes = _LN_AXES[nd, k] = (tuple(range(nd - k, nd)), tuple(range(nd - k)))
    return Normalize.apply(input, weight, bias, axes[0], axes[1], None, eps)


_LN_AXES: dict = {}  # (ndim, len(normalized_shape)) -> (normalised axes, parameter axes)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Split the channels (dim 1) of input (N, C, *) into num_groups groups, normalise each sample's group over
    its channels and other dims, then z = x̂·γ + β per channel."""
    for name, v in (("input", input), ("weight", weight), ("bias", bias)):
        _need_tensor("group_norm", name, v)
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, weight, bias = cast_args(Normalize, input, weight, bias)
    low = _mixed(input, weight, bias)
    if low is not None:
        return group_norm(input.float(), num_groups, weight, bias, eps).to(low)
    x = input._data
    if x.ndim < 2:
        raise RuntimeError(f"group_norm(): Expected at least 2 dimensions for input tensor but received {x.ndim}")
    n, c = x.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"group_norm(): Expected number of channels in input to be divisible by num_groups, but "
                           f"got input of shape {list(x.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t._data.ndim != 1 or t._data.shape[0] != c):
            raise RuntimeError(f"group_norm(): Expected {name} to be a vector of size equal to the number of channels "
                               f"in input, but got {name} of shape {list(t.shape)} and input of shape {list(x.shape)}")
    _check_dtypes("group_norm", input, weight=weight, bias=bias)
    _verify_batch_size("group_norm", (n * c // num_groups, num_groups) + x.shape[2:])
    y = Normalize.apply(input.reshape(n, num_groups, -1), None, None, (2,), (), None, eps).reshape(x.shape)
    view = (c,) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(view)
    if bias is not None:
        y = y + bias.reshape(view)
    return y
