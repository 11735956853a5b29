"""Loss functions (re-exported by `ember.nn.functional`), with PyTorch's arguments and reductions.

`cross_entropy` with class-index targets is the hottest op of classification training: it is
one Op (log-softmax and negative log-likelihood fused) whose gradient is (softmax - one-hot)·scale.
Its `backward` writes that with differentiable ember ops (so the loss can be differentiated twice);
its `fast_backward`, used when no graph of the backward is wanted, writes the same gradient
straight into one array without building the one-hot matrix. The other losses are compositions
of ember ops (their gradients come from autograd), except `binary_cross_entropy`, whose log
clamping needs its own derivative.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, make
from ..autograd import forward_ad
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .arithmetic import where
from .nn_activation import LogSoftmax, Softmax, logsigmoid

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div"]

_CLASS_DTYPES = (np.dtype(np.int64), np.dtype(np.uint8))  # PyTorch takes Long or Byte class indices
_REDUCTIONS = ("none", "mean", "sum")
_new = object.__new__


# ---------------------------------------------------------------------- arguments and reductions
def _check(x, op: str, what: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(x).__name__}")
    return x


def reduction_arg(reduction: str, size_average, reduce, op: str, extra: tuple = ()) -> str:
    """The reduction to use; the legacy size_average/reduce flags override it (with PyTorch's deprecation warning)."""
    if size_average is None and reduce is None and reduction in _REDUCTIONS:
        return reduction
    if size_average is not None or reduce is not None:
        avg = True if size_average is None else size_average
        red = True if reduce is None else reduce
        reduction = "mean" if avg and red else "sum" if red else "none"
        warnings.warn(f"{op}(): size_average and reduce args will be deprecated, please use reduction='{reduction}' "
                      f"instead.", UserWarning, stacklevel=3)
    if reduction not in ("none", "mean", "sum") + extra:
        choices = ", ".join(repr(r) for r in ("none", "mean", "sum") + extra)
        raise ValueError(f"{op}(): {reduction!r} is not a valid value for reduction (expected one of {choices})")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _pair(input, target, op: str) -> tuple:
    """Input and target of an elementwise loss: a shape mismatch broadcasts, with PyTorch's warning."""
    x, t = _check(input, op), _check(target, op, "target")
    if x.shape != t.shape:
        try:
            np.broadcast_shapes(x.shape, t.shape)
        except ValueError:
            raise RuntimeError(f"{op}(): the input of shape {list(x.shape)} and the target of shape {list(t.shape)} "
                               f"cannot be broadcast together; they should have the same shape") from None
        warnings.warn(f"{op}(): using a target size ({list(t.shape)}) that is different to the input size "
                      f"({list(x.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=3)
    return x, t


def _weighted(loss: Tensor, weight, x: Tensor, reduction: str, op: str, mean_by_weight: bool) -> Tensor:
    """Elementwise loss times an optional per-element weight, reduced. PyTorch's weighted 'mean' divides by
    the sum of the weights for mse/l1 and by the element count for huber."""
    if weight is None:
        return _reduce(loss, reduction)
    w = _check(weight, op, "weight")
    if w.shape != x.shape:
        raise ValueError(f"{op}(): weights and input must have the same size, got weight {list(w.shape)} and input "
                         f"{list(x.shape)}")
    loss = loss * w
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------- regression losses
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """(input - target)², reduced ('mean' with a weight: Σ w·l / Σ w)."""
    x, t = _pair(input, target, "mse_loss")
    r = reduction_arg(reduction, size_average, reduce, "mse_loss")
    d = x - t
    return _weighted(d * d, weight, x, r, "mse_loss", True)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """|input - target|, reduced ('mean' with a weight: Σ w·l / Σ w)."""
    x, t = _pair(input, target, "l1_loss")
    r = reduction_arg(reduction, size_average, reduce, "l1_loss")
    return _weighted((x - t).abs(), weight, x, r, "l1_loss", True)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5·d²/beta where |d| < beta, else |d| - 0.5·beta (d = input - target); beta = 0 is the L1 loss."""
    x, t = _pair(input, target, "smooth_l1_loss")
    r = reduction_arg(reduction, size_average, reduce, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss(): beta must be non-negative, got beta={beta}")
    d = x - t
    a = d.abs()
    if beta == 0:
        return _reduce(a, r)
    return _reduce(where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta), r)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5·d² where |d| < delta, else delta·(|d| - 0.5·delta) (d = input - target)."""
    x, t = _pair(input, target, "huber_loss")
    r = reduction_arg(reduction, None, None, "huber_loss")
    if not delta > 0:
        raise RuntimeError(f"huber_loss(): delta must be positive, got delta={delta}")
    d = x - t
    a = d.abs()
    return _weighted(where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta), weight, x, r, "huber_loss", False)


# ---------------------------------------------------------------------- class-index targets
def _class_input(x: Tensor, op: str) -> int:
    """The number of classes C of an input of shape (C,), (N, C) or (N, C, d1, ...)."""
    a = x._data
    if a.ndim == 0:
        raise ValueError(f"{op}(): input must have shape (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    if not dt.is_float(a.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} inputs; the input must hold floating "
                                  f"scores (convert with x.float())")
    return a.shape[1] if a.ndim >= 2 else a.shape[0]


def _class_target(x: Tensor, t: Tensor, op: str) -> np.ndarray:
    """The class-index target's array, checked against the input: shape (N, d1, ...) (() unbatched), int64 or uint8.
    The range of its values is checked by `_ignored`."""
    shape = x._data.shape
    ts = t._data.shape
    expected = () if len(shape) == 1 else (shape[0],) + shape[2:]
    if ts != expected:
        if len(shape) == 1 and len(ts) == 1:  # PyTorch's ValueError for an unbatched input with a batch of targets
            raise ValueError(f"{op}(): For 1D input, 1D target must have size 1, but got target size: {ts[0]} "
                             f"(input {list(shape)} is one sample of {shape[0]} classes; add a batch dimension)")
        if len(shape) >= 2 and len(ts) == len(expected) and ts[0] != shape[0]:
            raise ValueError(f"{op}(): expected input batch_size ({shape[0]}) to match target batch_size ({ts[0]}) "
                             f"(input {list(shape)}, target {list(ts)})")
        kind = "float (class probabilities)" if dt.is_float(t._data.dtype) else "class-index"
        raise RuntimeError(f"{op}(): {kind} target of shape {list(ts)} does not fit the input of shape {list(shape)}: "
                           f"class indices need a target of shape {list(expected)}, class probabilities one of the "
                           f"input's shape")
    a = t._data
    if a.dtype not in _CLASS_DTYPES:
        raise RuntimeError(f"{op}(): expected a class-index target of dtype int64 (Long) or uint8, but got {t.dtype}"
                           + (f"; for class probabilities the target must have the input's shape {list(shape)}"
                              if dt.is_float(a.dtype) else "; convert it with target.long()"))
    return a


def _ignored(t, C: int, ignore_index: int, op: str):
    """The mask of targets equal to ignore_index (None when there are none); IndexError for a target outside
    [0, C) that is not ignored. The common case (all in range, none ignored) costs a min and a max."""
    if not t.size:
        return None
    v = backend.all_values(t)  # (inside vmap: every example's targets, checked at once)
    lo, hi = v.min(), v.max()
    if 0 <= lo and hi < C and not lo <= ignore_index <= hi:
        return None
    ignored_all = v == ignore_index
    bad = ~ignored_all & ((v < 0) | (v >= C))
    if bad.any():
        raise IndexError(f"{op}(): Target {backend.to_host(v[bad])[0]} is out of bounds: class indices must be in [0, {C}) for "
                         f"an input with {C} classes (or equal ignore_index={ignore_index})")
    return (t == ignore_index) if ignored_all.any() else None


def _constant(t: Tensor, op: str, what: str) -> Tensor:
    """A weight that the loss is not differentiable in (as in PyTorch, which refuses one that requires grad, and
    whose forward mode ignores its tangent)."""
    if t._requires_grad and MODE.grad:
        raise RuntimeError(f"{op}(): the loss is not differentiable with respect to '{what}', so {what} cannot "
                           f"require grad; pass {what}.detach()")
    return t.detach() if MODE.fw and forward_ad.is_dual(t) else t


def _class_weight(weight, C: int, x: Tensor, op: str):
    """The per-class weight (checked: shape (C,), the input's dtype), or None."""
    if weight is None:
        return None
    w = _check(weight, op, "weight")
    if w.shape != (C,):
        raise RuntimeError(f"{op}(): weight tensor should be defined either for all {C} classes or no classes, but "
                           f"got weight tensor of shape {list(w.shape)}")
    if w._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): expected the weight to have the input's dtype {x.dtype}, but got {w.dtype}; "
                           f"convert it with weight.to(input.dtype)")
    return w


def _rows(x, nd: int, C: int):
    """A (N, C, d1, ...) / (N, C) / (C,) array as rows (M, C), one per sample and position."""
    if nd == 2:
        return x
    if nd == 1:
        return x.reshape(1, C)
    return x.transpose((0,) + tuple(range(2, nd)) + (1,)).reshape(-1, C)


def _unrows(a, shape: tuple):
    """Inverse of `_rows`: (M, C) rows back to the input's layout `shape` (C may be 1 for per-row values)."""
    nd = len(shape)
    if nd == 2:
        return a
    if nd == 1:
        return a.reshape(a.shape[1:])
    return a.reshape((shape[0],) + shape[2:] + (a.shape[1],)).transpose((0, nd - 1) + tuple(range(1, nd - 1)))


class CrossEntropy(Op):
    """l_i = -Σ_c q_ic·ln softmax(x_i)_c, with q_i = (1 - ε)·w_t·onehot(t_i) + ε/C·w (zero where t_i is ignored),
    reduced ('mean' divides by Σ_i of the target weights w_t, over targets not ignored).
    dl_i/dx_i = softmax(x_i)·Σ_c q_ic - q_i."""

    def forward(self, x, t, w, ignore_index, eps, reduction):
        nd = x.ndim
        C = x.shape[0 if nd == 1 else 1]
        x2 = _rows(x, nd, C)
        tt = t.reshape(-1)
        M = x2.shape[0]
        am = backend.array_module(x)
        rows = am.arange(M)
        ignored = _ignored(tt, C, ignore_index, "cross_entropy")
        valid = None if ignored is None else ~ignored
        ts = tt if valid is None else am.where(ignored, 0, tt)
        wt = None if w is None else w[ts]  # each sample's target weight
        # softmax and the picked log-probability, in one (M, C) array
        z = x2 - x2.max(axis=1, keepdims=True) if M else x2.copy()
        zt = z[rows, ts]
        if eps:
            zw = z.sum(axis=1) if w is None else z @ w
        np.exp(z, out=z)
        s = z.sum(axis=1)
        lse = np.log(s)
        z /= s[:, None]
        self.p, self.rows, self.ts, self.wt, self.valid = z, rows, ts, wt, valid
        loss = lse - zt  # -ln softmax at the target
        if wt is not None:
            loss *= wt
        if eps:
            wsum = C if w is None else w.sum()
            loss *= 1 - eps
            loss += (lse * wsum - zw) * (eps / C)  # -Σ_c w_c ln softmax_c, scaled
        if valid is not None:
            loss *= valid
        if reduction == "none":
            return loss.reshape(t.shape)
        total = loss.sum()
        if reduction == "sum":
            return total
        # 'mean': divide by the summed weights of the targets that count
        if wt is None:
            denom = M if valid is None else int(valid.sum())
        else:
            denom = wt.sum() if valid is None else (wt * valid).sum()
        self.denom = denom
        return total / denom  # 0/0 = nan when every target is ignored, as in PyTorch

    def backward(self, gz, x, t, w, ignore_index, eps, reduction):
        """dl/dx_i = (softmax(x_i)·Q_i − q_i)·g_i, with q_i the smoothed, weighted target of the class docstring
        (zero where t_i is ignored), Q_i = Σ_c q_ic, and g_i = gz_i ('none'), gz ('sum') or gz/Σ w_t ('mean').
        q is a constant; softmax(x) is an ember op on x, so the gradient differentiates again in x and gz."""
        if not self.needs(0):
            return (None,) * 6
        axis = 0 if x.ndim == 1 else 1
        grad = self._dloss(x, w, eps)
        if reduction == "none":
            g = gz.unsqueeze(axis) if x.ndim > 1 else gz
        elif reduction == "mean":  # nothing counted (every target ignored): a nan loss, a zero gradient
            g = gz / self.denom if self.denom else gz * 0
        else:
            g = gz
        return (grad * g,) + (None,) * 5

    def _dloss(self, x: Tensor, w, eps: float) -> Tensor:
        """dl_i/dx_i = softmax(x_i)·Q_i − q_i for every sample i, in x's layout (before the reduction's scale)."""
        M, C = self.p.shape  # forward's softmax gives only the rows' shape: it is recomputed from x to differentiate
        dtype = self.p.dtype
        am = backend.array_module(self.p)
        valid = am.ones(M, dtype) if self.valid is None else self.valid.astype(dtype)
        wt = am.ones(M, dtype) if self.wt is None else self.wt
        q = am.zeros((M, C), dtype)
        q[am.arange(M), self.ts] = valid * wt * (1 - eps)
        if eps:
            q += (valid * (eps / C))[:, None] * (am.ones(C, dtype) if w is None else w)
        Q = q.sum(axis=1, keepdims=True)
        return Softmax.apply(x, 0 if x.ndim == 1 else 1) * make(_unrows(Q, x.shape)) - make(_unrows(q, x.shape))

    def jvp(self, tg, x, t, w, ignore_index, eps, reduction):
        """l_i' = Σ_c (softmax(x_i)·Q_i − q_i)_c·x_i'_c (the gradient of l_i against x_i'), reduced as the loss."""
        if not isinstance(tg[0], Tensor):
            return 0
        per = (self._dloss(x, w, eps) * tg[0]).sum(0 if x.ndim == 1 else 1)
        if reduction == "none":
            return per
        total = per.sum()
        if reduction == "sum":
            return total
        return total / self.denom  # (nothing counted: 0/0, a nan tangent as the loss, and as PyTorch's)

    def fast_backward(self, gz, x, t, w, ignore_index, eps, reduction):
        """backward's gradient on the arrays, from the softmax that forward kept: one (M, C) array, Q·softmax, with
        each row's target entry subtracted in place (no one-hot matrix, no second softmax)."""
        if not self.needs(0):
            return (None,) * 6
        p, ts, wt, valid = self.p, self.ts, self.wt, self.valid
        M, C = p.shape
        g = gz._data
        if reduction == "none":
            a = g.reshape(M)  # per-row upstream gradient
        elif reduction == "sum":
            a = g[()]
        else:  # nothing counted (every target ignored): a nan loss, a zero gradient
            a = g[()] / self.denom if self.denom else g[()] * 0
        if valid is not None:
            a = a * valid
        pick = a * (1 - eps) if eps else a  # what is subtracted at each row's target
        if wt is not None:
            pick = pick * wt
        Q = pick if not eps else pick + a * ((C if w is None else w.sum()) * eps / C)  # Σ_c q_ic, scaled
        grad = p * (Q if getattr(Q, "ndim", 0) == 0 else Q[:, None])
        grad[self.rows, ts] -= pick  # no one-hot matrix: subtract at each row's target
        if eps:
            sm = a * (eps / C)
            sm = sm[:, None] if getattr(sm, "ndim", 0) else sm
            grad -= sm if w is None else sm * w
        return (make(_unrows(grad, x.shape)),) + (None,) * 5


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between softmax(input) along dim 1 (dim 0 for an unbatched (C,) input) and the target.

    target: class indices (int64, shape (N,), (N, d1, ...) or () unbatched; entries equal to
    ignore_index are skipped), or class probabilities (float, the input's shape). label_smoothing ε
    mixes the target with the uniform distribution: (1 - ε)·target + ε/C. weight: per-class weights;
    'mean' then divides by the sum of the weights of the counted targets (class indices) or by the
    number of samples (probabilities)."""
    op = "cross_entropy"
    x, t = _check(input, op), _check(target, op, "target")
    r = reduction_arg(reduction, size_average, reduce, op)
    C = _class_input(x, op)
    if label_smoothing > 1.0 or label_smoothing < 0.0:
        raise RuntimeError(f"{op}(): label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    w = _class_weight(weight, C, x, op)
    if dt.is_float(t._data.dtype) and t.shape == x.shape:
        if ignore_index != -100:
            raise RuntimeError(f"{op}(): ignore_index is not supported for class-probability (float) targets")
        return _soft_cross_entropy(x, t, w, C, r, label_smoothing)
    ta = _class_target(x, t, op)
    if w is not None:
        w = _constant(w, op, "weight")._data
    if ta.__class__ is not x._data.__class__ or (w is not None and w.__class__ is not x._data.__class__):
        backend.check_same_device(op, (x._data, ta, w))  # Op.apply's check, for the constants too
    args = (x, ta, w, ignore_index, float(label_smoothing), r)
    return dispatch(_new(CrossEntropy), args, (x._data,) + args[1:])


def _soft_cross_entropy(x: Tensor, t: Tensor, w, C: int, reduction: str, eps: float) -> Tensor:
    """-Σ_c w_c·t_c·ln softmax(x)_c with t smoothed to (1 - ε)·t + ε/C; 'mean' divides by the sample count."""
    axis = 0 if x.ndim == 1 else 1
    logp = LogSoftmax.apply(x, axis)
    if eps > 0:
        t = t * (1 - eps) + eps / C
    prod = logp * t
    if w is not None:  # differentiable here, as in PyTorch (this path is a composition there too)
        prod = prod * (w.reshape((C,) + (1,) * (x.ndim - 2)) if x.ndim >= 2 else w)
    if reduction == "none":
        return -prod.sum(axis)
    total = -prod.sum()
    if reduction == "sum":
        return total
    n = x._data.size // C if C else 0
    return total / n if n else total * 0.0 + math.nan


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood: l = -w_t·input[t] per sample (input holds log-probabilities along dim 1, or
    dim 0 unbatched); targets equal to ignore_index count zero. 'mean' divides by Σ w_t over the counted
    targets, as PyTorch does."""
    op = "nll_loss"
    x, t = _check(input, op), _check(target, op, "target")
    r = reduction_arg(reduction, size_average, reduce, op)
    C = _class_input(x, op)
    w = _class_weight(weight, C, x, op)
    w = None if w is None else _constant(w, op, "weight")._data
    ta = _class_target(x, t, op)
    ignored = _ignored(ta.reshape(-1), C, ignore_index, op)
    if ta.__class__ is not x._data.__class__ or (w is not None and w.__class__ is not x._data.__class__):
        backend.check_same_device(op, (x._data, ta, w))
    am = backend.array_module(x._data)
    ignored = am.zeros(ta.shape, bool) if ignored is None else ignored.reshape(ta.shape)
    safe = am.where(ignored, 0, ta).astype(np.int64, copy=False)
    if x.ndim == 1:
        picked = x.gather(0, make(safe.reshape(1))).reshape(())
    else:
        picked = x.gather(1, make(safe.reshape(safe.shape[:1] + (1,) + safe.shape[1:]))).squeeze(1)
    coef = None
    if w is not None:
        coef = w[safe]
    if ignored.any():
        coef = am.where(ignored, x._data.dtype.type(0), coef if coef is not None else x._data.dtype.type(1))
    loss = -picked if coef is None else picked * make(-coef.astype(x._data.dtype, copy=False))
    if r == "none":
        return loss
    total = loss.sum()
    if r == "sum":
        return total
    denom = ta.size if coef is None else float(coef.sum())
    return total / denom if denom else _NothingCounted.apply(total)


class _NothingCounted(Op):
    """nll_loss's 'mean' when no target counts: z = total / 0 = nan, with PyTorch's derivatives of it, a zero
    gradient and a nan tangent."""

    saves_inputs = False

    def forward(self, total):
        return np.full_like(total, np.nan)

    def jvp(self, t, total):
        return t[0] * math.nan

    def backward(self, gz):
        return gz * 0


# ---------------------------------------------------------------------- binary and distribution losses
class BinaryCrossEntropy(Op):
    """l = -(t·ln x + (1 - t)·ln(1 - x)), each log clamped at -100 (so l is finite at x = 0 or 1, as in PyTorch);
    dl/dx = (x - t) / max(x(1 - x), 1e-12), dl/dt = ln(1 - x) - ln x."""

    def forward(self, x, t):
        # explicit out= arrays: on 0-d inputs the ufuncs would return NumPy scalars, which cannot be written in place
        am = backend.array_module(x)
        lx = np.log(x, out=am.empty_like(x))
        np.maximum(lx, -100, out=lx)
        l1x = np.subtract(1, x, out=am.empty_like(x))
        np.log(l1x, out=l1x)
        np.maximum(l1x, -100, out=l1x)
        lx *= t
        l1x *= 1 - t
        lx += l1x
        return np.negative(lx, out=lx)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, t):
        gx = gz * (x - t) / (x * (1 - x)).clamp(min=1e-12) if self.needs(0) else None
        gt = gz * ((1 - x).log() - x.log()) if self.needs(1) else None
        return gx, gt


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """-w·(t·ln x + (1 - t)·ln(1 - x)) for probabilities x in [0, 1]; logs are clamped at -100."""
    op = "binary_cross_entropy"
    x, t = _check(input, op), _check(target, op, "target")
    r = reduction_arg(reduction, size_average, reduce, op)
    if x.shape != t.shape:
        raise ValueError(f"{op}(): using a target size ({list(t.shape)}) that is different to the input size "
                         f"({list(x.shape)}) is not supported; please ensure they have the same size")
    if not dt.is_float(x._data.dtype) or not dt.is_float(t._data.dtype):
        raise RuntimeError(f"{op}(): input and target must be floating tensors, got {x.dtype} and {t.dtype}")
    for name, a in (("input", x._data), ("target", t._data)):
        a = backend.all_values(a)  # (inside vmap: every example's values, checked at once)
        if a.size and not ((a >= 0) & (a <= 1)).all():
            a = backend.to_host(a)  # for the message only
            raise RuntimeError(f"{op}(): all elements of {name} should be between 0 and 1, got values in "
                               f"[{np.nanmin(a)}, {np.nanmax(a)}]" + (" and NaN" if np.isnan(a).any() else ""))
    if x._data.dtype != t._data.dtype:
        d = dt.FROM_NP[np.promote_types(x._data.dtype, t._data.dtype)]
        x, t = x.to(d), t.to(d)
    loss = BinaryCrossEntropy.apply(x, t)
    if weight is not None:
        w = _constant(_check(weight, op, "weight"), op, "weight")
        try:
            if np.broadcast_shapes(w.shape, t.shape) != t.shape:
                raise ValueError
        except ValueError:
            raise RuntimeError(f"{op}(): the weight of shape {list(w.shape)} cannot be broadcast to the target's "
                               f"shape {list(t.shape)}") from None
        loss = loss * w
    return _reduce(loss, r)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """BCE of sigmoid(input), computed stably from the logits: l = (1 - t)·x - (1 + (pw - 1)·t)·ln σ(x), times
    weight. pos_weight (pw) weights the positive term and broadcasts against the target (e.g. shape (C,))."""
    op = "binary_cross_entropy_with_logits"
    x, t = _check(input, op), _check(target, op, "target")
    r = reduction_arg(reduction, size_average, reduce, op)
    if x.shape != t.shape:
        raise ValueError(f"{op}(): target size ({list(t.shape)}) must be the same as input size ({list(x.shape)})")
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} inputs; the input must hold floating logits")
    ls = logsigmoid(x)
    if pos_weight is not None:
        pw = _constant(_check(pos_weight, op, "pos_weight"), op, "pos_weight")
        try:
            np.broadcast_shapes(pw.shape, t.shape)
        except ValueError:
            raise RuntimeError(f"{op}(): pos_weight of shape {list(pw.shape)} cannot be broadcast to the target's "
                               f"shape {list(t.shape)}; for C classes in the last dim use shape (C,)") from None
        ls = ls * ((pw - 1) * t + 1)
    loss = (1 - t) * x - ls
    if weight is not None:
        loss = loss * _constant(_check(weight, op, "weight"), op, "weight")
    return _reduce(loss, r)


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Pointwise KL divergence t·(ln t - input) (input holds log-probabilities; t·ln t is 0 where t = 0), or
    e^t·(t - input) when log_target. 'batchmean' divides the sum by the batch size (input.size(0)), which is
    the mathematical KL divergence; 'mean' divides by the element count (with PyTorch's warning)."""
    op = "kl_div"
    x, t = _check(input, op), _check(target, op, "target")
    legacy = size_average is not None or reduce is not None
    r = reduction_arg(reduction, size_average, reduce, op, extra=("batchmean",))
    if r == "mean" and not legacy:
        warnings.warn("kl_div(): reduction='mean' divides the total loss by both the batch size and the support size; "
                      "'batchmean' divides only by the batch size and matches the definition of the KL divergence. "
                      "'mean' will change to behave like 'batchmean' in a future release.", UserWarning, stacklevel=2)
    if log_target:
        loss = t.exp() * (t - x)
    else:
        # t·ln t with 0·ln 0 = 0: ln reads 1 where t = 0, so no -inf reaches the gradient
        loss = t * where(t == 0, 1.0, t).log() - t * x
    if r == "batchmean":
        total = loss.sum()
        return total / x.shape[0] if x.ndim else total
    return _reduce(loss, r)
