"""The rest of `torch.nn.functional`'s activations, losses and normalisations (re-exported by `ember.nn.functional`).

Activations are Ops with forward on arrays and backward in ember ops (so they differentiate twice), or reuse an
Op of `nn_activation` (CELU is ELU with a scaled input, softmin is softmax of -x). The random ones (rrelu in
training, the alpha dropouts, gumbel_softmax) draw their noise through `traced` functions, so a compiled program
draws again at every replay, in eager's order; the noise is then a constant of the graph.

Most losses are compositions of ember ops written as PyTorch defines them (their gradients come from autograd).
`ctc_loss` is one Op: the forward (alpha) recursion over time, vectorised over the batch and the extended labels,
and a backward from the beta recursion that gives PyTorch's gradient.

Normalisations: `instance_norm` reuses `nn_norm.Normalize` over the spatial axes; `rms_norm` is its own Op;
`local_response_norm` sums squares over a window of channels with `ChannelWindowSum`, a linear Op whose
derivative is the same sum over the mirrored window.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _creation, backend
from .. import _dtype as dt
from .._capture import traced
from .._tensor import Tensor, make, normalize_dim
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE, no_grad
from .arithmetic import sum_to, where
from .nn_activation import (Elu, Softmax, Softplus1, _SELU_ALPHA, _SELU_SCALE, _check, _dropout, _float_input, _run,
                            _sigmoid_array, _softmax_args, check_dropout_p, leaky_relu, logsigmoid)
from .nn_loss import _constant, _reduce, reduction_arg
from .nn_misc import one_hot
from .nn_norm import Normalize, _reducer, batch_norm
from .reduce import norm
from .shape import cat
from .unary import _float, sigmoid, tanh

__all__ = ["celu", "celu_", "selu_", "glu", "hardshrink", "softshrink", "hardsigmoid", "hardswish", "prelu", "rrelu",
           "rrelu_", "softmin", "softsign", "tanhshrink", "threshold", "threshold_", "alpha_dropout",
           "feature_alpha_dropout", "dropout1d", "dropout3d", "gumbel_softmax", "pairwise_distance",
           "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "multilabel_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "soft_margin_loss",
           "hinge_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "instance_norm",
           "local_response_norm", "rms_norm"]

_new = object.__new__


def _empty_like(x):
    return backend.array_module(x).empty_like(x)


def _dtype_name(d: np.dtype) -> str:
    return str(dt.FROM_NP[np.dtype(d)]).replace("ember.", "")


def _device_of(a) -> backend.device:
    return backend.CPU if a.__class__ is np.ndarray else backend.device_of(a)


# ---------------------------------------------------------------------- piecewise activations
class Hardshrink(Op):
    """z = 0 where −λ ≤ x ≤ λ, else x (NaN passes);  dz/dx = 0 there, else 1."""

    def forward(self, x, lambd):
        return backend.array_module(x).where((x >= -lambd) & (x <= lambd), x.dtype.type(0), x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, lambd):
        return gz * ~((x >= -lambd) & (x <= lambd)), None


class Softshrink(Op):
    """z = 0 where −λ ≤ x ≤ λ, else x − λ·sign(x) (NaN passes);  dz/dx = 0 there, else 1."""

    def forward(self, x, lambd):
        xp = backend.array_module(x)
        inside = (x >= -lambd) & (x <= lambd)
        return xp.where(inside, x.dtype.type(0), x - xp.sign(x) * x.dtype.type(lambd))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, lambd):
        return gz * ~((x >= -lambd) & (x <= lambd)), None


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return Hardshrink.apply(_float_input(input, "hardshrink"), lambd)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x − lambd where x > lambd, x + lambd where x < −lambd, else 0 (lambd ≥ 0)."""
    x = _float_input(input, "softshrink")
    if not lambd >= 0:
        raise RuntimeError(f"softshrink(): lambda must be greater or equal to 0, but found to be {lambd}")
    return Softshrink.apply(x, lambd)


class Hardsigmoid(Op):
    """z = min(max(x + 3, 0), 6)/6;  dz/dx = 1/6 where −3 < x < 3, else 0."""

    def forward(self, x):
        z = np.add(x, 3, out=_empty_like(x))
        np.clip(z, 0, 6, out=z)
        z /= 6
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return gz * ((x > -3) & (x < 3)) / 6


class Hardswish(Op):
    """z = x·min(max(x + 3, 0), 6)/6;  dz/dx = 0 where x ≤ −3, x/3 + 1/2 where −3 < x < 3, else 1 (PyTorch's
    choices at the kinks, NaN included)."""

    def forward(self, x):
        z = np.add(x, 3, out=_empty_like(x))
        np.clip(z, 0, 6, out=z)
        z *= x
        z /= 6
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        return where(x <= -3, 0.0, where(x < 3, gz * (x / 3 + 0.5), gz))

    def fast_backward(self, gz, x):
        """backward's gradient on the arrays: the derivative x/3 + 1/2, set in place to 1 from 3 up and to 0 up to −3
        (backward's nested wheres cost twice the forward)."""
        x = x._data
        d = np.divide(x, 3, out=_empty_like(x))
        d += 0.5
        np.copyto(d, 1, where=~(x < 3))
        d *= ~(x <= -3)
        d *= gz._data
        return make(d)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3)/6: a piecewise-linear sigmoid."""
    return _run(Hardsigmoid, _float_input(input, "hardsigmoid"), inplace, "hardsigmoid")


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·relu6(x + 3)/6 (Howard et al., 2019)."""
    return _run(Hardswish, _float_input(input, "hardswish"), inplace, "hardswish")


class Threshold(Op):
    """z = value where x ≤ threshold, else x (NaN passes);  dz/dx = 0 there, else 1."""

    def forward(self, x, threshold, value):
        # the value takes x's dtype (2.5 becomes 2 for an integer x), as PyTorch casts it
        return backend.array_module(x).where(x <= threshold, x.dtype.type(value), x)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, threshold, value):
        return gz * ~(x <= threshold), None, None


def _threshold_input(input) -> Tensor:
    x = _check(input, "threshold")
    if x._data.dtype.kind == "b":
        raise NotImplementedError("threshold(): not implemented for bool tensors; convert the input first "
                                  "(e.g. x.float() or x.long())")
    return x


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value (integer inputs allowed: value is cast to their dtype)."""
    return _run(Threshold, _threshold_input(input), inplace, "threshold", threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _run(Threshold, _threshold_input(input), True, "threshold", threshold, value)


# ---------------------------------------------------------------------- smooth activations
class Softsign(Op):
    """z = x/(1 + |x|);  dz/dx = 1/(1 + |x|)²."""

    def forward(self, x):
        d = np.abs(x)
        d += 1
        return np.divide(x, d, out=d)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        d = x.abs() + 1
        return gz / (d * d)


class Tanhshrink(Op):
    """z = x − tanh x;  dz/dx = tanh² x."""

    def forward(self, x):
        return np.subtract(x, np.tanh(x))

    jvp = Op.elementwise_jvp

    def backward(self, gz, x):
        t = tanh(x)
        return gz * (t * t)


def softsign(input: Tensor) -> Tensor:
    """x/(1 + |x|) (integer inputs are promoted to the default float dtype)."""
    x = _float(_check(input, "softsign"))
    return dispatch(_new(Softsign), (x,), (x._data,))


def tanhshrink(input: Tensor) -> Tensor:
    """x − tanh x (integer inputs are promoted to the default float dtype)."""
    x = _float(_check(input, "tanhshrink"))
    return dispatch(_new(Tanhshrink), (x,), (x._data,))


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha·(e^(x/alpha) − 1): ELU with the input scaled by 1/alpha (Barron, 2017)."""
    x = _float_input(input, "celu")
    if alpha == 0:
        raise RuntimeError("celu(): alpha cannot be 0 for CELU (the input is divided by it)")
    return _run(Elu, x, inplace, "celu", alpha, 1.0, 1.0 / alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """SELU in place: scale·(x where x > 0, else alpha·(e^x − 1))."""
    return _run(Elu, _float_input(input, "selu_"), True, "selu", _SELU_ALPHA, _SELU_SCALE, 1.0)


class Glu(Op):
    """z = a·σ(b), a and b the two halves of x along `axis`;  dz/da = σ(b), dz/db = a·σ(b)·(1 − σ(b))."""

    def forward(self, x, axis):
        a, b = np.split(x, 2, axis)
        z = _sigmoid_array(b)
        z *= a
        return z

    def jvp(self, t, x, axis):
        """z' = a'·σ(b) + a·σ(b)·(1 − σ(b))·b'."""
        a, b = x.chunk(2, axis)
        ta, tb = t[0].chunk(2, axis)
        s = sigmoid(b)
        return ta * s + a * s * (1 - s) * tb

    def backward(self, gz, x, axis):
        a, b = x.chunk(2, axis)
        s = sigmoid(b)
        gs = gz * s
        return cat([gs, gs * a * (1 - s)], axis), None


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a·sigmoid(b), where a and b are the first and second halves of input along dim (its size must be even)."""
    x = _float_input(input, "glu")
    nd = x._data.ndim
    if nd == 0:
        raise RuntimeError("glu(): glu does not support scalars because halving size must be even")
    axis = normalize_dim(dim, nd, "glu")
    if x._data.shape[axis] % 2:
        raise RuntimeError(f"glu(): Halving dimension must be even, but dimension {axis} is size "
                           f"{x._data.shape[axis]} (input shape {list(x.shape)})")
    return Glu.apply(x, axis)


class Prelu(Op):
    """z = x where x > 0, else w·x, with w viewed as `view` (one slope per channel, or one for all);
    dz/dx = 1 or w, dz/dw = Σ x where x ≤ 0 (over everything but the channel dim)."""

    def forward(self, x, w, view):
        return backend.array_module(x).where(x > 0, x, w.reshape(view) * x)

    def jvp(self, t, x, w, view):
        """z' = x' where x ≥ 0, else w·x' + w'·x (PyTorch's forward rule takes x = 0 on the identity side, its
        backward on the other: at x = 0, z' = x' while dz/dx = w)."""
        pos = x >= 0
        tz = where(pos, t[0], t[0] * w.reshape(view)) if isinstance(t[0], Tensor) else 0
        return tz + where(pos, 0.0, t[1].reshape(view) * x) if isinstance(t[1], Tensor) else tz

    def backward(self, gz, x, w, view):
        pos = x > 0
        wv = w.reshape(view)
        gx = where(pos, gz, gz * wv) if self.needs(0) else None
        gw = sum_to(where(pos, 0.0, gz * x), view).reshape(w.shape) if self.needs(1) else None
        return gx, gw, None


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight·x: weight holds one slope for all channels, or one per channel (dim 1)."""
    x = _float_input(input, "prelu")
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        x, weight = cast_args(Prelu, x, weight)
    w = weight
    if w._data.ndim > 1:
        raise RuntimeError(f"prelu(): Expected `weight` to be a scalar or 1D tensor, but got: ndim = {w._data.ndim}")
    if w._data.dtype != x._data.dtype:
        raise RuntimeError(f"prelu(): Type promoting not supported. Got {_dtype_name(x._data.dtype)} (input) and "
                           f"{_dtype_name(w._data.dtype)} (weight); convert the weight with weight.to(input.dtype)")
    nd = x._data.ndim
    channels = x._data.shape[1] if nd >= 2 else 1
    n = w._data.size
    if n != 1 and n != channels:
        raise RuntimeError(f"prelu(): Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{n} and channel size = {channels} (input shape {list(x.shape)}; the channels are dim 1)")
    view = () if n == 1 else (n,) + (1,) * (nd - 2)
    return Prelu.apply(x, w, view)


class RreluNoise(Op):
    """z = x where x > 0, else r·x, with r a constant (rrelu's random slopes);  dz/dx = 1 or r."""

    def forward(self, x, r):
        return backend.array_module(x).where(x > 0, x, x * r)

    jvp = Op.elementwise_jvp

    def backward(self, gz, x, r):
        return where(x > 0, gz, gz * make(r)), None


@traced
def _uniform_like(x: Tensor, low: float, high: float):
    """U(low, high) draws of x's shape and dtype on x's device (a function of x, not of its shape, so that a
    compiled program draws for each call's shape)."""
    xd = x._data
    r = _creation.generator_for(_device_of(xd)).random(xd.shape, xd.dtype)
    r *= high - low
    r += low
    return r.astype(xd.dtype, copy=False)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomised leaky ReLU (Xu et al., 2015): x where x > 0, else a·x with a ~ U(lower, upper) drawn per element
    in training; in evaluation a is the mean slope (lower + upper)/2."""
    x = _float_input(input, "rrelu")
    if lower > upper:
        raise RuntimeError(f"rrelu(): Lower bound should be less than or equal to the upper bound (got lower={lower}, "
                           f"upper={upper})")
    if not training:
        return leaky_relu(x, (lower + upper) / 2, inplace)
    return _run(RreluNoise, x, inplace, "rrelu", _uniform_like(x, lower, upper))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(−x) along dim: e^(−x) / Σ e^(−x). dtype casts the input first; dim=None picks a dimension as
    PyTorch's deprecated rule does, with a warning."""
    x, d = _softmax_args(input, dim, dtype, "softmin", _stacklevel)
    return Softmax.apply(-x, d)


# ---------------------------------------------------------------------- dropout variants
# SELU's negative saturation value, −scale·alpha: alpha dropout sets dropped units to it
_ALPHA_PRIME = _SELU_ALPHA * _SELU_SCALE


class AlphaDropout(Op):
    """z = (x + α′)·m − c with m = a·keep and c = α′·a·(1 − p) (constants): kept units become a·x + a·α′·p, dropped
    ones −a·α′·(1 − p), which keeps a SELU network's mean and variance;  dz/dx = m."""

    saves_inputs = False

    def forward(self, x, m, c):
        self.m = m
        z = x + x.dtype.type(_ALPHA_PRIME)
        z *= m
        z -= c
        return z

    jvp = Op.elementwise_jvp

    def backward(self, gz):
        return gz * make(self.m), None, None


def _alpha_scale(p: float) -> float:
    """a = 1/√((α′²·p + 1)(1 − p)): the rescaling that restores unit variance."""
    return 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))


@traced
def _alpha_mask(x: Tensor, p: float, keep: int):
    """a·keep over x's first `keep` dims (broadcast over the rest), keep ~ Bernoulli(1 − p)."""
    xd = x._data
    shape = xd.shape[:keep] + (1,) * (xd.ndim - keep)
    r = _creation.generator_for(_device_of(xd)).random(shape, xd.dtype)
    return np.multiply(r >= p, _alpha_scale(p), dtype=xd.dtype)


def _alpha_dropout(x: Tensor, p: float, training: bool, inplace: bool, feature: bool, op: str) -> Tensor:
    if p == 0 or not training or x._data.size == 0:
        return x
    if feature and x._data.ndim < 2:
        raise RuntimeError(f"{op}(): Feature dropout requires at least 2 dimensions in the input, got shape "
                           f"{list(x.shape)}")
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"{op}(): alpha dropout in training mode needs a floating tensor, got {x.dtype}; convert "
                           f"the input with x.float()")
    if p == 1:  # everything dropped: zeros, as PyTorch (a = 1/0 would make them nan)
        return x.mul_(0.0) if inplace else x * 0.0
    m = _alpha_mask(x, p, 2 if feature else x._data.ndim)
    return _run(AlphaDropout, x, inplace, op, m, _ALPHA_PRIME * _alpha_scale(p) * (1 - p))


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout (Klambauer et al., 2017), for SELU networks: each element is set to SELU's saturation value
    with probability p and the result is rescaled so that zero mean and unit variance are kept. Identity when not
    training (note PyTorch's default training=False here)."""
    x = _check(input, "alpha_dropout")
    return _alpha_dropout(x, check_dropout_p(p, "alpha_dropout"), training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (input[n, c] shares one draw). Identity when not training."""
    x = _check(input, "feature_alpha_dropout")
    p = check_dropout_p(p, "feature_alpha_dropout")
    return _alpha_dropout(x, p, training, inplace, True, "feature_alpha_dropout")


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or unbatched (C, L) input with probability p, scaling the rest by 1/(1 − p)."""
    x = _check(input, "dropout1d")
    p = check_dropout_p(p, "dropout1d")
    nd = x._data.ndim
    if nd not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {nd}D input of shape {list(x.shape)}. "
                           f"Note that dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
                           f"dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _dropout(x, p, training, inplace, 2 if nd == 3 else 1, "dropout1d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or unbatched (C, D, H, W) input with probability p, scaling the rest by
    1/(1 − p). As in PyTorch, other ranks are read as unbatched, with a deprecation warning."""
    x = _check(input, "dropout3d")
    p = check_dropout_p(p, "dropout3d")
    nd = x._data.ndim
    if nd not in (4, 5):
        warnings.warn(f"dropout3d: Received a {nd}-D input to dropout3d, which is deprecated and will result in an "
                      f"error in a future release. To retain the behavior and silence this warning, please use dropout "
                      f"instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
                      f"dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
                      UserWarning, stacklevel=2)
    if nd == 0 and training:
        raise RuntimeError("dropout3d(): Feature dropout requires at least 2 dimensions in the input (a 0-d input is "
                           "read as one unbatched sample with no channel dimension)")
    return _dropout(x, p, training, inplace, 2 if nd == 5 else 1, "dropout3d")


# ---------------------------------------------------------------------- gumbel_softmax
@traced
def _gumbel_like(x: Tensor) -> Tensor:
    """Gumbel(0, 1) draws −ln(E), E ~ Exp(1), of x's shape and dtype (drawn in float64, where E = 0 has probability
    2⁻⁵³, so that no draw is infinite)."""
    xd = x._data
    u = _creation.generator_for(_device_of(xd)).random(xd.shape, np.float64)
    e = -np.log1p(-u)
    return make((-np.log(e)).astype(xd.dtype, copy=False))


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """A sample from the Gumbel-softmax (Concrete) distribution: softmax((logits + g)/tau) along dim, g ~ Gumbel(0, 1).
    hard=True returns the one-hot of its argmax, with the gradient of the soft sample (straight-through)."""
    x = _check(logits, "gumbel_softmax")
    if eps != 1e-10:
        warnings.warn("gumbel_softmax(): `eps` parameter is deprecated and has no effect.", UserWarning, stacklevel=2)
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"gumbel_softmax(): the Gumbel noise is continuous, so logits must be a floating tensor, "
                           f"got {x.dtype}; convert them with logits.float()")
    axis = normalize_dim(dim, x._data.ndim, "gumbel_softmax")
    y = Softmax.apply((x + _gumbel_like(x)) / tau, axis)
    if not hard or x._data.ndim == 0:  # (a 0-d sample is 1 either way)
        return y
    y_hard = one_hot(y.detach().argmax(axis), x._data.shape[axis]).movedim(-1, axis).to(y.dtype)
    return y_hard - y.detach() + y


# ---------------------------------------------------------------------- distances
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """‖x1 − x2 + eps‖_p over the last dim (x1 and x2 broadcast); eps keeps the gradient finite at x1 = x2."""
    _check(x1, "pairwise_distance")
    if not isinstance(x2, Tensor):
        raise TypeError(f"pairwise_distance(): argument 'x2' must be Tensor, not {type(x2).__name__}")
    nd = max(x1._data.ndim, x2._data.ndim)
    return norm(x1 - x2 + eps, p, nd - 1 if nd else -1, keepdim)


# ---------------------------------------------------------------------- margin and embedding losses
def _loss_args(op: str, tensors: dict, size_average, reduce, reduction: str) -> str:
    for name, v in tensors.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(v).__name__}")
    return reduction_arg(reduction, size_average, reduce, op)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """1 − cos(x1, x2) where target = 1, max(0, cos(x1, x2) − margin) where target = −1 (0 elsewhere); the cosine is
    taken along dim 1 of (N, D) inputs with a (N,) target, or of (D,) inputs with a 0-d target."""
    op = "cosine_embedding_loss"
    r = _loss_args(op, {"input1": input1, "input2": input2, "target": target}, size_average, reduce, reduction)
    td = target._data.ndim
    if td > 1:
        raise RuntimeError(f"{op}(): 0D or 1D target tensor expected, multi-target not supported (got target of "
                           f"shape {list(target.shape)})")
    if input1._data.ndim != td + 1 or input2._data.ndim != td + 1:
        raise RuntimeError(f"{op}(): {td}D target tensor expects {td + 1}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12  # PyTorch's: keeps the cosine finite for a zero vector
    prod = (input1 * input2).sum(td)
    denom = (((input1 * input1).sum(td) + eps) * ((input2 * input2).sum(td) + eps)).sqrt()
    cos = prod / denom
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(loss, r)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, −target·(x1 − x2) + margin): target = 1 means x1 should rank higher, −1 lower."""
    op = "margin_ranking_loss"
    r = _loss_args(op, {"input1": input1, "input2": input2, "target": target}, size_average, reduce, reduction)
    if not input1._data.ndim == input2._data.ndim == target._data.ndim:
        raise RuntimeError(f"{op}(): All input tensors should have same dimension but got sizes: input1: "
                           f"{list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)}")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), r)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """x where target = 1, max(0, margin − x) where target = −1 (both terms where target is neither)."""
    op = "hinge_embedding_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    loss = where(target != 1, (margin - input).clamp_min(0), 0.0) + where(target != -1, input, 0.0)
    return _reduce(loss, r)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """ln(1 + e^(−target·x)) (target ±1), computed without overflow."""
    op = "soft_margin_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    z = _float(-input * _constant(target, op, "target"))
    return _reduce(dispatch(_new(Softplus1), (z,), (z._data,)), r)


def _same_ndim(op: str, anchor: Tensor, positive: Tensor, negative: Tensor) -> None:
    a, p, n = anchor._data.ndim, positive._data.ndim, negative._data.ndim
    if not a == p == n:
        raise RuntimeError(f"{op}(): The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D inputs")


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """max(0, margin + d(a, p) − d(a, n)) with d the pairwise p-norm distance (eps added to the difference); swap
    uses min(d(a, n), d(p, n)) as the negative distance (Balntas et al., 2016)."""
    op = "triplet_margin_loss"
    r = _loss_args(op, {"anchor": anchor, "positive": positive, "negative": negative}, size_average, reduce,
                   reduction)
    if margin <= 0:
        raise ValueError(f"{op}(): margin must be greater than 0, got {margin}")
    _same_ndim(op, anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), r)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(0, margin + d(a, p) − d(a, n)) for any distance function d (default: pairwise_distance); swap uses
    min(d(a, n), d(p, n))."""
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}(): {reduction} is not a valid value for reduction (expected 'none', 'mean' or 'sum')")
    if margin <= 0:
        raise ValueError(f"{op}(): margin must be greater than 0, got {margin}")
    _loss_args(op, {"anchor": anchor, "positive": positive, "negative": negative}, None, None, reduction)
    _same_ndim(op, anchor, positive, negative)
    d = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = d(anchor, positive), d(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(d(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


# ---------------------------------------------------------------------- multi-class margin losses
def _scores(op: str, x: Tensor) -> tuple:
    """The (N, C) view of a multi-class margin loss input: a (C,) vector or a (N, C) matrix (N may be 0)."""
    a = x._data
    if not (a.ndim <= 1 and a.size > 0 or a.ndim == 2 and a.shape[1] != 0):
        raise RuntimeError(f"{op}(): Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(x.shape)}")
    if not dt.is_float(a.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} inputs; the input must hold floating scores "
                                  f"(convert with x.float())")
    return x.reshape(-1, a.shape[-1] if a.ndim else 1), a.shape[-1] if a.ndim else 1


def _long_target(op: str, t: Tensor) -> np.ndarray:
    if t._data.dtype != np.int64:
        raise RuntimeError(f"{op}(): expected a target of dtype int64 (Long), but got {t.dtype}; convert it with "
                           f"target.long()")
    return t._data


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Σ_j Σ_i max(0, 1 − (x[y_j] − x[i])) / C per sample, over the target classes y_j (target's entries up to the
    first −1) and the classes i that are not targets. input (C,) or (N, C); target of the same shape, int64."""
    op = "multilabel_margin_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    x2, C = _scores(op, input)
    t = _long_target(op, target)
    if t.shape != input._data.shape:
        raise RuntimeError(f"{op}(): inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)} (the target lists class indices, padded with -1, in the input's shape)")
    if t.size and (t.min() < -1 or t.max() >= C):
        raise RuntimeError(f"{op}(): argument #2 'target' is out of range: class indices must be in [0, {C}) (or -1 to "
                           f"end a sample's list), got values in [{int(t.min())}, {int(t.max())}]")
    xp = backend.array_module(t)
    t2 = t.reshape(-1, C)
    n = t2.shape[0]
    listed = xp.cumprod(t2 != -1, axis=1).astype(bool)  # the entries before each row's first -1
    width = int(listed.sum(1).max()) if n else 0  # the longest list: the pairs of targets beyond it are all masked
    listed, idx = listed[:, :width], xp.where(listed, t2, 0)[:, :width]
    is_target = xp.zeros((n, C + 1), bool)
    is_target[xp.arange(n)[:, None], xp.where(listed, idx, C)] = True  # (column C absorbs the unlisted entries)
    mask = listed[:, :, None] & ~is_target[:, None, :C]  # (sample, target entry j, class i)
    picked = x2.gather(1, make(idx))  # x[y_j]
    margins = (1 - picked.unsqueeze(2) + x2.unsqueeze(1)).clamp_min(0)
    loss = (margins * make(mask.astype(x2._data.dtype))).sum((1, 2)) / C
    return _reduce(loss.reshape(target.shape[:-1]) if input._data.ndim else loss.reshape(()), r)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Σ_{i ≠ y} w_y·max(0, margin − x[y] + x[i])^p / C per sample (p = 1 or 2): the multi-class hinge loss.
    input (C,) or (N, C); target int64 class indices of shape () or (N,); weight: per-class weights (C,)."""
    op = "multi_margin_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError(f"{op}(): only p == 1 and p == 2 supported, got p={p}")
    if weight is not None:
        _check(weight, op)
        if weight._data.ndim != 1:
            raise ValueError(f"{op}(): weight must be one-dimensional (one weight per class), got shape "
                             f"{list(weight.shape)}")
    x2, C = _scores(op, input)
    n = x2.shape[0]
    t = _long_target(op, target)
    if t.ndim > 1 or t.size != n:
        raise RuntimeError(f"{op}(): target tensor should be 1-D with size equal to the number of input samples "
                           f"(batch size). Expected target size [{n}], but got {list(target.shape)}. Input has shape "
                           f"{list(input.shape)}.")
    if t.size and (t.min() < 0 or t.max() >= C):
        bad = int(t.min()) if t.min() < 0 else int(t.max())
        raise RuntimeError(f"{op}(): target out of range: got class {bad}, expected class indices in [0, {C})")
    y = t.reshape(n, 1)
    z = (margin - x2.gather(1, make(y)) + x2).clamp_min(0)
    if p == 2:
        z = z * z
    xp = backend.array_module(t)
    scale = xp.arange(C) != y  # the target class itself does not count
    if weight is not None:
        w = _constant(weight, op, "weight")._data
        if w.size != C:
            raise RuntimeError(f"{op}(): inconsistent weight size, expected {C} but got {list(weight.shape)}")
        scale = scale * w[y]
    loss = (z * make(scale.astype(x2._data.dtype))).sum(1) / C
    return _reduce(loss.reshape(target.shape), r)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """−mean over classes of w·(y·ln σ(x) + (1 − y)·ln σ(−x)) per sample (the last dim holds the C classes): one
    binary logistic loss per class."""
    op = "multilabel_soft_margin_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    if input._data.ndim == 0:
        raise IndexError(f"{op}(): the input must have a class dimension (its last), got a 0-d tensor")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(-1) / input._data.shape[-1], r)


# ---------------------------------------------------------------------- likelihood losses
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of target under Poisson(rate): e^x − t·x when log_input (x = ln rate), else
    x − t·ln(x + eps). full adds Stirling's approximation of ln(t!), t·ln t − t + ½·ln(2πt), where t > 1."""
    op = "poisson_nll_loss"
    r = _loss_args(op, {"input": input, "target": target}, size_average, reduce, reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        big = target > 1
        t = where(big, target, 1.0)  # (1 where unused, so no log(0) reaches the gradient)
        loss = loss + where(big, t * t.log() - t + 0.5 * (2 * math.pi * t).log(), 0.0)
    return _reduce(loss, r)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """½·(ln max(var, eps) + (input − target)²/max(var, eps)) (+ ½·ln 2π when full): the negative log-likelihood
    of target under N(input, var). var: a tensor of input's shape, or with one dim of size 1, or lacking the last
    dim (one variance shared over it); or a float. The clamp at eps passes var's gradient through unchanged."""
    op = "gaussian_nll_loss"
    for name, v in (("input", input), ("target", target)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(v).__name__}")
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{op}(): var has negative entry/entries (var={var})")
        var = input.new_full(input.shape, float(var))
    elif not isinstance(var, Tensor):
        raise TypeError(f"{op}(): argument 'var' must be Tensor or float, not {type(var).__name__}")
    elif var._data.size and (var._data < 0).any():
        raise ValueError(f"{op}(): var has negative entry/entries")
    vs, xs = tuple(var.shape), tuple(input.shape)
    if vs != xs:
        if xs[:-1] == vs:  # one variance per sample, shared over the last dim
            var = var.unsqueeze(-1)
        elif not (len(xs) == len(vs) and sum(b for a, b in zip(xs, vs) if a != b) == 1):  # exactly one dim of size 1
            raise ValueError(f"{op}(): var is of incorrect size: {list(vs)} for an input of size {list(xs)} (expected "
                             f"the input's size, with one dim of size 1, or without the last dim)")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}(): {reduction} is not valid (expected 'none', 'mean' or 'sum')")
    # clamped at eps outside autograd, as PyTorch does: var's gradient passes the clamp unchanged, while forward
    # mode, which no_grad does not turn off, sees the clamp (a zero tangent where var < eps), as PyTorch's does
    v = var.clone()
    with no_grad():
        v.clamp_(min=eps)
    d = input - target
    loss = 0.5 * (v.log() + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------- CTC
def _logaddexp3(a, b, c):
    """ln(e^a + e^b + e^c) elementwise, −inf where all three are −inf."""
    m = np.maximum(np.maximum(a, b), c)
    m[backend.array_module(m).isneginf(m)] = 0  # (all −inf: the sum below is 0 and its log −inf)
    s = np.exp(a - m)
    s += np.exp(b - m)
    s += np.exp(c - m)
    with np.errstate(divide="ignore"):  # (ln 0 = −inf: the unreachable states)
        np.log(s, out=s)
    s += m
    return s


def _shift(a, k: int, fill):
    """a moved k places along the last axis (k > 0: towards higher indices), `fill` entering."""
    out = _empty_like(a)
    if k > 0:
        out[..., :k] = fill
        out[..., k:] = a[..., :-k]
    else:
        out[..., k:] = fill
        out[..., :k] = a[..., -k:]
    return out


class CTCLoss(Op):
    """nll_n = −ln p(target_n | log_probs[:T_n, n]): the probability, summed over every alignment of the target to
    the T_n frames (blanks between and around labels, repeats merged), by the forward (alpha) recursion over the
    extended labels l' = (blank, y_1, blank, y_2, ..., blank):

        α_t(s) = lp_t(l'_s) + ln(e^α_{t−1}(s) + e^α_{t−1}(s−1) + [l'_s ≠ l'_{s−2}]·e^α_{t−1}(s−2)),
        nll = −ln(e^α_{T−1}(S'−1) + e^α_{T−1}(S'−2)).

    backward, with β the same recursion run backwards in time, is PyTorch's gradient:
    g_t(c) = e^lp_t(c) − Σ_{s: l'_s = c} e^(α_t(s) + β_t(s) − lp_t(l'_s) + nll), times the sample's upstream
    gradient, and 0 for t ≥ T_n. (The true derivative is the second term alone; PyTorch adds e^lp, which assumes
    log_probs come from log_softmax, through which the two agree. A loss that is infinite has a NaN gradient, or 0
    with zero_infinity, whose loss is then 0 too.)"""

    def forward(self, lp, ext, skip, il, tl, zero_infinity):
        T, N, _ = lp.shape
        xp = backend.array_module(lp)
        ninf = lp.dtype.type(-np.inf)
        lpl = lp[:, xp.arange(N)[:, None], ext]  # (T, N, S'): each frame's log-probability of each extended label
        alpha = xp.full(lpl.shape, ninf, lp.dtype)
        a = alpha[0]
        a[:, 0] = lpl[0, :, 0]
        if a.shape[1] > 1:  # (every target empty: only the blank)
            a[:, 1] = xp.where(tl > 0, lpl[0, :, 1], ninf)
        for t in range(1, T):
            prev = alpha[t - 1]
            alpha[t] = _logaddexp3(prev, _shift(prev, 1, ninf), xp.where(skip, _shift(prev, 2, ninf), ninf))
            alpha[t] += lpl[t]
        rows = xp.arange(N)
        last = alpha[xp.maximum(il - 1, 0), rows]  # (N, S') at each sample's last frame
        end = last[rows, 2 * tl]
        end2 = xp.where(tl > 0, last[rows, xp.maximum(2 * tl - 1, 0)], ninf)
        nll = -np.logaddexp(end, end2)
        nll = xp.where(il == 0, xp.where(tl == 0, lp.dtype.type(0), lp.dtype.type(np.inf)), nll)  # no frames
        self.alpha, self.lpl, self.nll = alpha, lpl, nll
        return xp.where(xp.isinf(nll), lp.dtype.type(0), nll) if zero_infinity else nll

    def jvp(self, t, lp, ext, skip, il, tl, zero_infinity):
        """nll' = Σ over frames and classes of ∂nll/∂lp·lp', with the true derivative (the second term of the class's
        g: PyTorch has no forward-mode rule to follow, and the two agree for log_softmax's outputs). NaN where the
        loss is infinite, 0 there with zero_infinity."""
        d = _CTCGrad.apply(lp, self._grad(lp._data, ext, skip, il, tl, zero_infinity, exact=True))
        return (d * t[0]).sum((0, 2))

    def backward(self, gz, lp, ext, skip, il, tl, zero_infinity):
        g = _CTCGrad.apply(lp, self._grad(lp._data, ext, skip, il, tl, zero_infinity))
        return g * gz.reshape(1, -1, 1), None, None, None, None, None

    def _grad(self, lp, ext, skip, il, tl, zero_infinity, exact: bool = False):
        """PyTorch's gradient (see the class) for an upstream gradient of ones, from the beta recursion; `exact`: the
        true derivative (without e^lp)."""
        alpha, lpl, nll = self.alpha, self.lpl, self.nll
        T, N, C = lp.shape
        xp = backend.array_module(lp)
        ninf = lp.dtype.type(-np.inf)
        rows = xp.arange(N)
        skip_up = _shift(skip, -2, False)  # s -> s + 2 allowed: the label at s + 2 may be skipped to
        tail = (xp.arange(ext.shape[1]) == 2 * tl[:, None]) | (xp.arange(ext.shape[1]) == 2 * tl[:, None] - 1)
        beta = xp.full(lpl.shape, ninf, lp.dtype)
        nxt = beta[0]  # (all −inf: the frame after the last)
        for t in range(T - 1, -1, -1):
            b = _logaddexp3(nxt, _shift(nxt, -1, ninf), xp.where(skip_up, _shift(nxt, -2, ninf), ninf))
            b += lpl[t]
            first = (il - 1 == t)[:, None]  # the sample's last frame: β starts at the two final labels
            beta[t] = xp.where(first, xp.where(tail, lpl[t], ninf), xp.where((t < il - 1)[:, None], b, ninf))
            nxt = beta[t]
        # occupancy e^(α + β − lp + nll) of each extended label, summed into its class
        occ = alpha + beta
        with np.errstate(invalid="ignore"):  # (−inf − −inf where a frame's probability is 0, inf for an inf loss)
            occ -= lpl
            occ += nll[:, None]
        np.exp(occ, out=occ)
        flat = ((xp.arange(T)[:, None, None] * N + rows[:, None]) * C + ext).reshape(-1)
        summed = xp.bincount(flat, weights=occ.reshape(-1), minlength=T * N * C).reshape(T, N, C)
        if exact:
            grad = -summed.astype(lp.dtype, copy=False)
        else:
            grad = np.exp(lp)
            grad -= summed.astype(lp.dtype, copy=False)
        live = xp.arange(T)[:, None] < il  # (T, N): frames within each input length
        grad *= live[:, :, None]
        bad = xp.isinf(nll)
        if bad.any():  # an impossible alignment: NaN gradients within the input, or none with zero_infinity
            grad[:, bad] = 0 if zero_infinity else xp.where(live[:, bad, None], lp.dtype.type(np.nan), 0)
        return grad


class _CTCGrad(Op):
    """ctc_loss's gradient as a value of log_probs; its own derivative is not implemented (nor in PyTorch)."""

    saves_inputs = False

    def forward(self, lp, grad):
        return grad

    def jvp(self, t, lp, grad):
        raise NotImplementedError(_NO_CTC_SECOND_DERIVATIVE)  # (PyTorch's forward mode raises this type)

    def backward(self, gz):
        raise RuntimeError(_NO_CTC_SECOND_DERIVATIVE)


_NO_CTC_SECOND_DERIVATIVE = ("ctc_loss(): the derivative of ctc_loss's backward (double backward) is not implemented, "
                             "as in PyTorch (derivative for aten::_ctc_loss_backward is not implemented)")


def _lengths(v, n: int, name: str, op: str):
    """input_lengths / target_lengths: an integer tensor or a sequence of ints, as an int64 array of n values."""
    if isinstance(v, Tensor):
        a = backend.to_host(v._data)
        if a.dtype.kind not in "iu":
            raise RuntimeError(f"{op}(): {name} must be integral, got a {v.dtype} tensor; convert it with .long()")
    elif isinstance(v, (list, tuple)) and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in v):
        a = np.asarray(v, np.int64)
    else:
        raise TypeError(f"{op}(): {name} must be a Tensor or a tuple/list of ints, got {type(v).__name__}")
    a = a.reshape(-1).astype(np.int64)
    if a.size != n:
        raise RuntimeError(f"{op}(): {name} must be of size batch_size ({n}), got {a.size} values")
    if a.size and a.min() < 0:
        raise RuntimeError(f"{op}(): Expected {name} to have value at least 0, but got value {int(a.min())}")
    return a


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist Temporal Classification loss (Graves et al., 2006): −ln of the probability of each target
    sequence, summed over all its alignments to the input frames.

    log_probs: (T, N, C) log-probabilities (e.g. from log_softmax(dim=2)), or (T, C) unbatched (N = 1). targets:
    padded (N, S) with S ≥ max target length, or the N sequences concatenated (sum(target_lengths),) (so an unbatched
    target sequence is (target_length,), or (1, S) padded). input_lengths, target_lengths: (N,) integer tensors (0-d
    unbatched) or sequences of ints. blank: the blank class.
    reduction='mean' divides each loss by its target length (at least 1) and averages over the batch.
    zero_infinity: an impossible alignment (input too short) gives loss 0 and gradient 0 instead of inf.
    The gradient with respect to log_probs is PyTorch's (see `CTCLoss`); it has no second derivative."""
    op = "ctc_loss"
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        bad, v = ("log_probs", log_probs) if not isinstance(log_probs, Tensor) else ("targets", targets)
        raise TypeError(f"{op}(): argument '{bad}' must be Tensor, not {type(v).__name__}")
    r = reduction_arg(reduction, None, None, op)
    lp = log_probs
    nd = lp._data.ndim
    if nd not in (2, 3):
        raise RuntimeError(f"{op}(): Expected log_probs of shape (T, N, C), or (T, C) unbatched, but got a {nd}-d "
                           f"tensor of shape {list(lp.shape)}")
    if not dt.is_float(lp._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {lp.dtype} log_probs; they must be floating "
                                  f"(e.g. the output of log_softmax)")
    if lp._data.size == 0:
        raise RuntimeError(f"{op}(): log_probs tensor must not be empty (got shape {list(lp.shape)})")
    batched = nd == 3
    if not batched:
        lp = lp.unsqueeze(1)
    T, N, C = lp._data.shape
    if not 0 <= blank < C:
        raise RuntimeError(f"{op}(): blank must be in label range [0, {C}), got blank={blank}")
    il = _lengths(input_lengths, N, "input_lengths", op)
    tl = _lengths(target_lengths, N, "target_lengths", op)
    if il.size and il.max() > T:
        raise RuntimeError(f"{op}(): Expected input_lengths to have value at most {T} (log_probs' T), but got value "
                           f"{int(il.max())}")
    ta = backend.to_host(targets._data)
    if ta.dtype.kind not in "iuf":
        raise RuntimeError(f"{op}(): targets must hold class indices (an integer tensor), got {targets.dtype}")
    ta = ta.astype(np.int64)
    S = int(tl.max()) if tl.size else 0
    if ta.ndim == 2:  # padded (N, S_max)
        if ta.shape[0] != N:
            raise RuntimeError(f"{op}(): Expected padded targets to have size {N} (the batch size) at dimension 0, but "
                               f"got shape {list(ta.shape)}")
        if ta.shape[1] < S:
            raise RuntimeError(f"{op}(): Expected padded targets to have size at least {S} (the longest target_length) "
                               f"at dimension 1, but got shape {list(ta.shape)}")
        padded = ta[:, :S]
    elif ta.ndim == 1:  # concatenated
        if ta.size != tl.sum():
            raise RuntimeError(f"{op}(): Expected concatenated targets to have size {int(tl.sum())} (the sum of "
                               f"target_lengths), but got size {ta.size}")
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        pos = np.minimum(starts[:, None] + np.arange(S), max(ta.size - 1, 0))
        padded = ta[pos] if ta.size else np.zeros((N, S), np.int64)
    else:
        raise RuntimeError(f"{op}(): targets must be (N, S) padded or 1-d concatenated, got shape {list(ta.shape)}")
    used = np.arange(S) < tl[:, None]
    padded = np.where(used, padded, blank)
    if padded.size and (padded.min() < 0 or padded.max() >= C):
        bad = int(padded.min()) if padded.min() < 0 else int(padded.max())
        raise IndexError(f"{op}(): target {bad} is out of bounds: class indices must be in [0, {C})")
    # the extended labels (blank, y_1, blank, ..., y_S, blank), and where a skip over a blank is allowed
    ext = np.full((N, 2 * S + 1), blank, np.int64)
    ext[:, 1::2] = padded
    skip = np.zeros(ext.shape, bool)
    skip[:, 3::2] = padded[:, 1:] != padded[:, :-1]
    if lp._data.__class__ is not np.ndarray:
        dev = backend.device_of(lp._data)
        ext, skip, il, tl = (backend.transfer(a, dev) for a in (ext, skip, il, tl))
    nll = CTCLoss.apply(lp, ext, skip, il, tl, bool(zero_infinity))
    if r == "mean":
        den = make(backend.array_module(lp._data).maximum(tl, 1).astype(lp._data.dtype))
        return (nll / den).mean()
    if r == "sum":
        return nll.sum()
    return nll if batched else nll.reshape(())


# ---------------------------------------------------------------------- normalisation
def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample of input (N, C, *) over its spatial dims, then z = x̂·γ + β per channel.

    use_input_stats: normalise with each instance's own statistics and, when running_mean/running_var are given,
    update them in place: r ← (1 − momentum)·r + momentum·(the batch's mean over N of the instance statistics, with
    the unbiased variance). Otherwise normalise with the running statistics."""
    op = "instance_norm"
    for name, v in (("input", input), ("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if v is not None and not isinstance(v, Tensor) or v is None and name == "input":
            raise TypeError(f"{op}(): argument '{name}' must be Tensor{'' if name == 'input' else ' or None'}, not "
                            f"{type(v).__name__}")
    x = input._data
    if use_input_stats and math.prod(x.shape[2:]) == 1:
        raise ValueError(f"{op}(): Expected more than 1 spatial element when training, got input size {list(x.shape)}")
    if not dt.is_float(x.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {input.dtype} inputs; convert the input with .float()")
    c = x.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None:
            if t._data.size != c:
                raise RuntimeError(f"{op}(): {name} should contain {c} elements (one per channel, input dimension 1) "
                                   f"not {t._data.size}")
            if t._data.dtype != x.dtype:
                raise RuntimeError(f"{op}(): mixed dtypes: {name} is {_dtype_name(t._data.dtype)} but input is "
                                   f"{_dtype_name(x.dtype)}; all must share the input's dtype")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError(f"{op}(): Expected running_mean and running_var to be defined when use_input_stats is "
                               f"false")
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    nd = x.ndim
    axes = tuple(range(2, nd))
    if running_mean is not None or running_var is not None:
        _update_instance_stats(input, axes, running_mean, running_var, float(momentum))
    view = (c,) + (1,) * (nd - 2)
    return Normalize.apply(input, weight, bias, axes, (0,) + axes, view, eps)


def _update_instance_stats(x: Tensor, axes: tuple, running_mean, running_var, m: float) -> None:
    """r ← (1 − m)·r + m·mean over N of each instance's mean (running_mean) and unbiased variance (running_var), with
    ember ops (a compiled training step replays them)."""
    with no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - m).add_(x.mean(axes).mean(0).reshape(running_mean.shape), alpha=m)
        if running_var is not None:
            running_var.mul_(1 - m).add_(x.var(axes, correction=1).mean(0).reshape(running_var.shape), alpha=m)


class ChannelWindowSum(Op):
    """r[:, c] = Σ_{o = −lo..hi} s[:, c + o] (channels outside [0, C) count zero): a sliding window over dim 1.
    Linear in s, so its derivative is its adjoint: the same sum over the mirrored window, (lo, hi) → (hi, lo)."""

    saves_inputs = False

    def forward(self, s, lo, hi):
        self.lo, self.hi = lo, hi
        c = s.shape[1]
        r = s.copy()
        for o in range(1, min(hi, c - 1) + 1):  # (a few shifted adds: the window is a handful of channels)
            r[:, :c - o] += s[:, o:]
        for o in range(1, min(lo, c - 1) + 1):
            r[:, o:] += s[:, :c - o]
        return r

    def jvp(self, t, *inputs):
        return self.reapply(*t)  # (linear in s)

    def backward(self, gr):
        return ChannelWindowSum.apply(gr, self.hi, self.lo), None, None


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """x / (k + alpha/size · Σ x²)^beta, the sum over a window of `size` neighbouring channels (dim 1) centred on
    each channel (size//2 before, (size−1)//2 after; zero outside): Krizhevsky et al., 2012. Input (N, C, *)."""
    x = _check(input, "local_response_norm")
    nd = x._data.ndim
    if nd < 3:
        raise ValueError(f"local_response_norm(): Expected 3D or higher dimensionality input (got {nd} dimensions, "
                         f"shape {list(x.shape)}); the input is (N, C, *)")
    if size < 1:
        raise RuntimeError(f"local_response_norm(): size should be greater than zero, but got size={size}")
    if x._data.size == 0:
        return x
    x = _float(x)
    s = ChannelWindowSum.apply(x * x, size // 2, (size - 1) // 2)
    return x / (s * (alpha / size) + k) ** beta


def cross_map_lrn2d(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """PyTorch's legacy CrossMapLRN2d (4-d input): x·(k + alpha/size · W)^−beta with W the squares over channels
    c − h .. c + h, h = (size−1)//2 (size 2h+1 when odd), plus, for channels c > h, the square of channel 0 (the
    legacy implementation's running sum never drops it: its values are kept here; its gradient is the exact one)."""
    x = _float_input(input, "CrossMapLRN2d")
    if x._data.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {x._data.ndim}D instead (shape {list(x.shape)})")
    h = (size - 1) // 2
    sq = x * x
    s = ChannelWindowSum.apply(sq, h, h)
    c = x._data.shape[1]
    if c > h + 1:
        stuck = make((np.arange(c) > h).astype(x._data.dtype).reshape(1, c, 1, 1))
        s = s + sq[:, :1] * stuck
    return x * (s * (alpha / size) + k) ** -beta


def _rowdot(a, b):
    """Σ_j a_ij·b_ij for each row of two (rows, n) arrays: NumPy's vecdot reads both once and makes no temporary
    (4x faster than (a·b) @ ones at 8192 x 512 float32)."""
    return np.vecdot(a, b) if a.__class__ is np.ndarray else (a * b).sum(-1)


class RmsNorm(Op):
    """z = x·r·γ with r = 1/√(mean(x²) + eps) over the trailing k dims (x seen as rows of their n elements);
    dx = r·(gγ − x·r²·mean(gγ·x)),  dγ = Σ_rows g·x·r."""

    def forward(self, x, w, k, eps):
        lead, n = x.shape[:x.ndim - k], math.prod(x.shape[x.ndim - k:])
        x2 = x.reshape(math.prod(lead), n)
        ms = _rowdot(x2, x2)
        ms *= 1.0 / n
        ms += eps
        np.sqrt(ms, out=ms)
        r = np.divide(1, ms, out=ms).reshape(lead + (1,) * k)
        self.r = r  # kept for fast_backward
        z = x * r
        if w is not None:
            z *= w
        return z

    def jvp(self, t, x, w, k, eps):
        """z' = r·(x' − x·r²·mean(x·x'))·γ + x·r·γ'."""
        axes = tuple(range(x.ndim - k, x.ndim))
        r = ((x * x).mean(axes, keepdim=True) + eps).rsqrt()
        tz = 0
        if isinstance(t[0], Tensor):
            tz = r * (t[0] - x * (r * r) * (x * t[0]).mean(axes, keepdim=True))
            if w is not None:
                tz = tz * w
        return tz + x * r * t[1] if isinstance(t[1], Tensor) else tz

    def backward(self, gz, x, w, k, eps):
        axes = tuple(range(x.ndim - k, x.ndim))
        r = ((x * x).mean(axes, keepdim=True) + eps).rsqrt()
        gx = gw = None
        if self.needs(0):
            gh = gz if w is None else gz * w
            gx = r * (gh - x * (r * r) * (gh * x).mean(axes, keepdim=True))
        if w is not None and self.needs(1):
            lead = tuple(range(x.ndim - k))
            gw = (gz * x * r).sum(lead) if lead else gz * x * r
        return gx, gw, None, None

    def fast_backward(self, gz, x, w, k, eps):
        """backward's formula on the arrays, from forward's r: gx = r·gγ − x·r³·mean(gγ·x) (the mean a row-wise dot)
        and gγ = Σ_rows r·g·x (a GEMV), in x's shape throughout (a reshaped view as .grad would be copied)."""
        g, xa, r = gz._data, x._data, self.r
        rows, n = math.prod(xa.shape[:xa.ndim - k]), math.prod(xa.shape[xa.ndim - k:])
        wa = None if w is None else w._data
        gx = gw = tmp = None
        if wa is not None and self.needs(1):
            tmp = g * xa
            gw = make((r.reshape(1, rows) @ tmp.reshape(rows, n)).reshape(wa.shape))
        if self.needs(0):
            gh = g * wa if wa is not None else g
            c = _rowdot(gh.reshape(rows, n), xa.reshape(rows, n)).reshape(r.shape)  # n·mean(gγ·x) per row
            c *= r * r * r / n
            if wa is not None:
                gh *= r  # (gh is ours: a pass and an allocation fewer)
            else:
                gh = gh * r
            gh -= np.multiply(xa, c, out=tmp)  # (reusing g·x's memory when γ's gradient took it)
            gx = make(gh)
        return gx, gw, None, None


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / √(mean(x²) + eps) over the last len(normalized_shape) dims, times weight (of shape normalized_shape) when
    given (Zhang & Sennrich, 2019). eps=None: the machine epsilon of input's dtype."""
    op = "rms_norm"
    x = _check(input, op)
    ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    k, a = len(ns), x._data
    if k == 0:
        raise RuntimeError(f"{op}(): Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
                           f"one element, but got normalized_shape = {list(ns)}")
    if a.ndim < k or a.shape[a.ndim - k:] != ns:
        raise RuntimeError(f"{op}(): Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(map(str, ns))}], but got input of size {list(x.shape)}")
    if not dt.is_float(a.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} inputs; convert the input with .float()")
    if weight is not None:
        _check(weight, op)
        if weight._data.shape != ns:
            raise RuntimeError(f"{op}(): Expected weight to be of same shape as normalized_shape, but got weight of "
                               f"shape {list(weight.shape)} and normalized_shape = {list(ns)}")
        if weight._data.dtype != a.dtype:
            raise RuntimeError(f"{op}(): mixed dtypes: weight is {_dtype_name(weight._data.dtype)} but input is "
                               f"{_dtype_name(a.dtype)}; convert the weight with weight.to(input.dtype)")
    if eps is None:
        eps = float(np.finfo(a.dtype).eps)
    return RmsNorm.apply(x, weight, k, eps)
