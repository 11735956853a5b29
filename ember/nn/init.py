"""Parameter initialisation (PyTorch's `torch.nn.init`).

Every function fills its tensor in place, outside autograd, and returns it. Random ones draw
from ember's global generator, or from `generator=` (an `ember.Generator`), in the tensor's dtype.
The fan of a weight is computed as PyTorch does: fan_in = size(1)·receptive field,
fan_out = size(0)·receptive field, the receptive field being the product of the dims after the
first two.

Devices: the values are drawn on the host, from ember's CPU generator (the global one, or a CPU
`generator=`), and copied into the tensor's array on its device. A model initialised on CUDA
therefore holds exactly the values of the same model initialised on the CPU after the same
`manual_seed`, and a training run can move between devices without changing its initialisation.
(PyTorch draws a CUDA tensor's values with the GPU's generator instead; its CPU and CUDA models
differ.) A CUDA `generator=` is accepted too: its draws are brought to the host, so the two
devices also agree for one seed of a CUDA generator. Initialisation runs once per parameter, so
the host-to-device copy costs nothing that matters.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _capture, backend
from .._creation import numpy_generator
from .._tensor import Tensor, bump_version
from .. import _dtype as dt

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear/conv/sigmoid, 5/3 for tanh, √2 for relu,
    √(2/(1 + slope²)) for leaky_relu (slope = param, default 0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}; use one of {list(_LINEAR)} or 'sigmoid', 'tanh', "
                     f"'relu', 'leaky_relu', 'selu'")


# ---------------------------------------------------------------------- writing into a tensor
def _check(tensor, fn: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{fn}(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    return tensor


def _float(tensor: Tensor, fn: str) -> np.dtype:
    d = tensor._data.dtype
    if not dt.is_float(d):
        raise TypeError(f"{fn}(): expected a floating-point tensor, got {str(tensor.dtype).replace('ember.', '')}")
    return d


def _write(tensor: Tensor, values) -> Tensor:
    """Copy values (a host array or a scalar) into the tensor's array on its device (in place, no autograd)
    and record the change."""
    if _capture.ACTIVE is not None:
        _capture.writing(tensor)
    a = tensor._data
    if a.__class__ is not np.ndarray and isinstance(values, np.ndarray):
        values = backend.transfer(values, backend.device_of(a))
    a[...] = values
    bump_version(tensor)
    return tensor


class _HostDraws:
    """Random draws as host arrays from `generator`: a CPU one (or ember's global generator) draws with its NumPy
    generator; a CUDA one draws on its device and the values are copied to the host."""

    __slots__ = ("np", "dev")

    def __init__(self, generator) -> None:
        if generator is None or generator.device.type == "cpu":
            self.np, self.dev = numpy_generator(generator), None
        else:
            self.np, self.dev = None, generator

    def random(self, shape, dtype=np.float64) -> np.ndarray:
        if self.np is not None:
            return self.np.random(shape, dtype=dtype)
        return backend.to_host(self.dev.random(shape, dtype))

    def standard_normal(self, shape, dtype=np.float64) -> np.ndarray:
        if self.np is not None:
            return self.np.standard_normal(shape, dtype=dtype)
        return backend.to_host(self.dev.standard_normal(shape, dtype))

    def normal(self, mean: float, std: float, n: int) -> np.ndarray:
        if self.np is not None:
            return self.np.normal(mean, std, n)
        return mean + std * self.standard_normal(n)

    def uniform(self, a: float, b: float, n: int) -> np.ndarray:
        if self.np is not None:
            return self.np.uniform(a, b, n)
        return a + (b - a) * self.random(n)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from U(a, b)."""
    _check(tensor, "uniform_")
    d = _float(tensor, "uniform_")
    u = _HostDraws(generator).random(tensor._data.shape, dtype=d if d.itemsize >= 4 else np.float32)
    u *= b - a
    u += a
    return _write(tensor, u)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std²)."""
    _check(tensor, "normal_")
    d = _float(tensor, "normal_")
    z = _HostDraws(generator).standard_normal(tensor._data.shape, dtype=d if d.itemsize >= 4 else np.float32)
    z *= std
    z += mean
    return _write(tensor, z)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Fill with values from N(mean, std²) truncated to [a, b] (a and b are values, not multiples of std).

    Exact rejection sampling: normal proposals when [a, b] holds much of the mass, otherwise uniform
    proposals on [a, b] accepted with probability pdf(x)/max pdf."""
    _check(tensor, "trunc_normal_")
    d = _float(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    rng = _HostDraws(generator)
    shape, n = tensor._data.shape, tensor._data.size
    out = np.empty(n, np.float64)
    pending = np.arange(n)
    mass = 0.5 * (math.erf((b - mean) / (std * math.sqrt(2))) - math.erf((a - mean) / (std * math.sqrt(2))))
    if mass > 0.3:
        while pending.size:
            x = rng.normal(mean, std, pending.size)
            ok = (x >= a) & (x <= b)
            out[pending[ok]] = x[ok]
            pending = pending[~ok]
    else:
        mode = min(max(mean, a), b)
        while pending.size:
            x = rng.uniform(a, b, pending.size)
            # accept with probability exp(-((x-mean)² - (mode-mean)²) / (2 std²)) ≤ 1
            ok = np.log(rng.random(pending.size)) <= -0.5 * (((x - mean) / std) ** 2 - ((mode - mean) / std) ** 2)
            out[pending[ok]] = x[ok]
            pending = pending[~ok]
    return _write(tensor, np.clip(out.astype(d), a, b).reshape(shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with val."""
    _check(tensor, "constant_")
    return _write(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with 1."""
    return constant_(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with 0."""
    return constant_(tensor, 0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix (ones on the main diagonal of a rectangular matrix)."""
    _check(tensor, "eye_")
    if tensor._data.ndim != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported (eye_ got shape {list(tensor.shape)})")
    return _write(tensor, np.eye(*tensor._data.shape, dtype=tensor._data.dtype))  # built on the host


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D convolution weight with the Dirac delta: the convolution then passes its input channels
    through (per group, as many as min(out_channels/groups, in_channels))."""
    _check(tensor, "dirac_")
    a = tensor._data
    if a.ndim not in (3, 4, 5):
        raise ValueError(f"Only tensors with 3, 4, or 5 dimensions are supported (dirac_ got shape {list(a.shape)})")
    if a.shape[0] % groups:
        raise ValueError(f"dim 0 must be divisible by groups (dirac_ got {a.shape[0]} and groups={groups})")
    per = a.shape[0] // groups
    k = min(per, a.shape[1])
    w = np.zeros(a.shape, a.dtype)  # built on the host, then copied to the tensor's device
    centre = tuple(s // 2 for s in a.shape[2:])
    d = np.arange(k)
    for g in range(groups):
        w[(g * per + d, d) + centre] = 1
    return _write(tensor, w)


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) = (size(1), size(0)) times the product of the remaining dims."""
    if tensor.dim() < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {list(tensor.shape)})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(−a, a) with a = gain·√(6/(fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check(tensor, "xavier_uniform_"))
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std²) with std = gain·√(2/(fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check(tensor, "xavier_normal_"))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str, fn: str) -> float | None:
    """gain/√fan for kaiming_*_; None, with PyTorch's warning, for a zero-element tensor (left as it is)."""
    _check(tensor, fn)
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """U(−bound, bound) with bound = gain·√(3/fan) (He et al., 2015); a is leaky_relu's negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """N(0, std²) with std = gain/√fan (He et al., 2015); a is leaky_relu's negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    return tensor if std is None else normal_(tensor, 0.0, std, generator)


def _default_layer_init_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default init of Linear and the convolutions: weight by kaiming_uniform_ with a=√5, which is
    U(±1/√fan_in), and bias ~ U(±1/√fan_in) too (zeros when fan_in is 0)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix times gain, the tensor seen as (size(0), numel/size(0)); from the QR
    decomposition of a Gaussian matrix, with Q's columns signed by diag(R) so that Q is Haar-distributed."""
    _check(tensor, "orthogonal_")
    if tensor.dim() < 2:
        raise ValueError(f"Only tensors with 2 or more dimensions are supported (orthogonal_ got shape "
                         f"{list(tensor.shape)})")
    d = _float(tensor, "orthogonal_")
    if tensor._data.size == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor._data.size // rows
    flat = _HostDraws(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).astype(d).reshape(tensor._data.shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D tensor with entries from N(0, std²) and, in each column, ⌈sparsity·rows⌉ random entries zero."""
    _check(tensor, "sparse_")
    if tensor.dim() != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported (sparse_ got shape {list(tensor.shape)})")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    d = _float(tensor, "sparse_")
    rng = _HostDraws(generator)
    # normal_'s draws, then the zeros, on the host; one copy to the tensor's device
    z = rng.standard_normal((rows, cols), dtype=d if d.itemsize >= 4 else np.float32)
    z *= std
    # each column's first num_zeros rows of an independent random permutation
    zero_rows = np.argsort(rng.random((rows, cols)), axis=0)[:num_zeros]
    z[zero_rows, np.arange(cols)] = 0
    return _write(tensor, z)
