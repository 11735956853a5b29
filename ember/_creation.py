"""Tensor factories (`tensor`, `zeros`, `arange`, ...), the global random generator, and conversions."""
from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from . import backend
from ._tensor import Tensor, _shape_arg, _to_array, make


def _xp(device):
    return np if device is None else backend.module_for(backend.device(device))


def _finish(arr, requires_grad: bool, op: str) -> Tensor:
    t = make(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _fdtype(dtype):
    return dt.NP_DEFAULT_FLOAT if dtype is None else dt.np_dtype(dtype)


# ---------------------------------------------------------------------- from data
def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data`; dtype inferred as PyTorch does (Python floats: float32)."""
    if isinstance(data, Tensor):
        data = data.data
    arr = _to_array(data, None if dtype is None else dt.np_dtype(dtype), "tensor")
    if arr is data or (isinstance(data, np.ndarray) and np.shares_memory(arr, data)):
        arr = arr.copy()
    if device is not None:
        arr = _xp(device).asarray(arr)
    return _finish(arr, requires_grad, "tensor")


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like `tensor`, but shares memory with `data` when it already is an array of the right dtype."""
    if isinstance(data, Tensor) and (dtype is None or data.data.dtype == dt.np_dtype(dtype)) and device is None:
        return data
    arr = _to_array(data, None if dtype is None else dt.np_dtype(dtype), "as_tensor")
    if device is not None:
        arr = _xp(device).asarray(arr)
    return make(arr)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype not in dt.FROM_NP:
        raise TypeError(f"from_numpy(): can't convert np.ndarray of type {ndarray.dtype}. The only supported types are: "
                        + ", ".join(d.name for d in dt.ALL))
    return make(ndarray)


# ---------------------------------------------------------------------- filled
def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(_xp(device).zeros(_shape_arg(size, "zeros"), _fdtype(dtype)), requires_grad, "zeros")


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(_xp(device).ones(_shape_arg(size, "ones"), _fdtype(dtype)), requires_grad, "ones")


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _finish(_xp(device).empty(_shape_arg(size, "empty"), _fdtype(dtype)), requires_grad, "empty")


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value` (dtype inferred from the value: bool, int64 or float32)."""
    if dtype is None:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        d = dt.scalar_dtype(fill_value)
    else:
        d = dt.np_dtype(dtype)
    return _finish(_xp(device).full(_shape_arg((size,), "full"), fill_value, d), requires_grad, "full")


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    return _finish(_xp(device).eye(n, m, dtype=_fdtype(dtype)), requires_grad, "eye")


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive) by step; int64 when all are ints, else float32."""
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if vals[2] == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:
        raise RuntimeError(f"arange(): upper bound and larger bound inconsistent with step sign "
                           f"(start={vals[0]}, end={vals[1]}, step={vals[2]})")
    if dtype is None:
        d = dt.NP_INT64 if all(isinstance(v, (int, np.integer)) for v in vals) else dt.NP_DEFAULT_FLOAT
    else:
        d = dt.np_dtype(dtype)
        if d.kind != "f":
            vals = [int(v) for v in vals]  # an integer range takes integer bounds and step, as PyTorch's int64 arange
            if vals[2] == 0:
                raise RuntimeError(f"arange(): step must be nonzero; it is 0 once truncated to {dt.FROM_NP[d]}")
    n = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    # computed in float64 (or int64) then cast, so float32 ranges have the same length as PyTorch's
    arr = (np.arange(n, dtype=np.float64 if d.kind == "f" else np.int64) * vals[2] + vals[0]).astype(d)
    return _finish(_xp(device).asarray(arr), requires_grad, "arange")


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    arr = np.linspace(float(start), float(end), steps).astype(_fdtype(dtype))
    return _finish(_xp(device).asarray(arr), requires_grad, "linspace")


def logspace(start, end, steps: int, base: float = 10.0, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    arr = np.logspace(float(start), float(end), steps, base=base).astype(_fdtype(dtype))
    return _finish(_xp(device).asarray(arr), requires_grad, "logspace")


def _like(fn, input: Tensor, dtype, device, requires_grad, *args):
    d = input.data.dtype if dtype is None else dt.np_dtype(dtype)
    xp = backend.array_module(input.data) if device is None else _xp(device)
    return _finish(fn(xp, input.shape, d, *args), requires_grad, fn.__name__)


def zeros_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.zeros(s, d), input, dtype, device, requires_grad)


def ones_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.ones(s, d), input, dtype, device, requires_grad)


def empty_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.empty(s, d), input, dtype, device, requires_grad)


def full_like(input: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.full(s, fill_value, d), input, dtype, device, requires_grad)


# ---------------------------------------------------------------------- random
# get_state's layout (64 bytes, little-endian): 8 magic bytes naming ember/PCG64/layout 1, the
# 128-bit state, the 128-bit increment, has_uint32 and uinteger (4 bytes each), the seed (16, signed).
_RNG_MAGIC = b"EMBRPCG1"
_RNG_STATE_SIZE = 64


class Generator:
    """A seeded source of random numbers (wraps NumPy's PCG64), as `torch.Generator`."""

    def __init__(self, device="cpu") -> None:
        self.device = backend.device(device)
        self.manual_seed(0x5EED)

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        self._seed = seed
        self.np = np.random.Generator(np.random.PCG64(seed & ((1 << 64) - 1)))
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy & ((1 << 63) - 1))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's whole state as a uint8 Tensor (PyTorch's ByteTensor), for `set_state`:
        PCG64's 128-bit state and increment, its buffered 32-bit draw and the initial seed."""
        s = self.np.bit_generator.state
        if s["bit_generator"] != "PCG64":
            raise RuntimeError(f"get_state(): the generator runs {s['bit_generator']}, ember's states encode PCG64")
        seed = self._seed if -(1 << 127) <= self._seed < (1 << 127) else self._seed & ((1 << 64) - 1)
        raw = (_RNG_MAGIC + s["state"]["state"].to_bytes(16, "little") + s["state"]["inc"].to_bytes(16, "little")
               + int(s["has_uint32"]).to_bytes(4, "little") + int(s["uinteger"]).to_bytes(4, "little")
               + seed.to_bytes(16, "little", signed=True))
        return make(np.frombuffer(raw, np.uint8).copy())

    def set_state(self, new_state: Tensor) -> "Generator":
        """Restore a state from `get_state()` (a NumPy `bit_generator.state` dict is accepted too)."""
        if isinstance(new_state, dict):
            try:
                self.np.bit_generator.state = new_state
            except (TypeError, ValueError, KeyError) as e:
                raise ValueError(f"set_state(): invalid NumPy bit-generator state dict ({e})") from None
            return self
        if not isinstance(new_state, Tensor):
            raise TypeError(f"set_state(): expected an ember.ByteTensor (the uint8 Tensor from get_rng_state()), "
                            f"but got {type(new_state).__name__}")
        if new_state.dtype is not dt.uint8:
            raise TypeError(f"set_state(): RNG state must be an ember.ByteTensor (uint8), got {new_state.dtype}")
        raw = new_state.numpy(force=True).tobytes()
        if len(raw) != _RNG_STATE_SIZE:
            raise RuntimeError(f"set_state(): expected an RNG state of {_RNG_STATE_SIZE} bytes "
                               f"(from get_rng_state()), but got {len(raw)}")
        inc = int.from_bytes(raw[24:40], "little")
        has_uint32 = int.from_bytes(raw[40:44], "little")
        if raw[:8] != _RNG_MAGIC or not inc & 1 or has_uint32 > 1:
            raise RuntimeError("set_state(): this uint8 tensor is not an ember RNG state "
                               "(use one returned by get_rng_state() or Generator.get_state())")
        self.np.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int.from_bytes(raw[8:24], "little"), "inc": inc},
            "has_uint32": has_uint32, "uinteger": int.from_bytes(raw[44:48], "little")}
        self._seed = int.from_bytes(raw[48:64], "little", signed=True)
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the global generator: every random factory and op becomes reproducible."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 Tensor; `set_rng_state` restores it."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator to a state from `get_rng_state()`: the draws that follow repeat."""
    default_generator.set_state(new_state)


def _gen(generator) -> np.random.Generator:
    return (generator or default_generator).np


def _float_only(d: np.dtype, op: str) -> None:
    if d.kind != "f":
        raise NotImplementedError(f"{op}(): only floating-point dtypes are supported, got {dt.FROM_NP[d]}; "
                                  f"use randint() for integers")


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples on [0, 1)."""
    d = _fdtype(dtype)
    _float_only(d, "rand")
    arr = _gen(generator).random(_shape_arg(size, "rand"), dtype=np.float64 if d != np.float32 else np.float32).astype(d, copy=False)
    return _finish(_xp(device).asarray(arr), requires_grad, "rand")


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    d = _fdtype(dtype)
    _float_only(d, "randn")
    arr = _gen(generator).standard_normal(_shape_arg(size, "randn"), dtype=np.float64 if d != np.float32 else np.float32).astype(d, copy=False)
    return _finish(_xp(device).asarray(arr), requires_grad, "randn")


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Integers uniform on [low, high); `randint(high, size)` uses low = 0."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint(): missing required argument 'size' (a tuple of ints)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise RuntimeError(f"randint(): random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    d = dt.NP_INT64 if dtype is None else dt.np_dtype(dtype)
    arr = _gen(generator).integers(low, high, _shape_arg((size,), "randint")).astype(d, copy=False)
    return _finish(_xp(device).asarray(arr), requires_grad, "randint")


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1."""
    if n < 0:
        raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    d = dt.NP_INT64 if dtype is None else dt.np_dtype(dtype)
    return _finish(_xp(device).asarray(_gen(generator).permutation(n).astype(d)), requires_grad, "randperm")


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return rand(*input.shape, generator=generator, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return randn(*input.shape, generator=generator, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def randint_like(input: Tensor, low, high=None, *, dtype=None, device=None) -> Tensor:
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype, device=device)


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 samples with probabilities `input` (or the scalar p)."""
    probs = input.data if p is None else np.full(input.shape, p)
    if not ((probs >= 0) & (probs <= 1)).all():  # also catches NaN
        raise RuntimeError(f"bernoulli(): probabilities must be in [0, 1], got values in "
                           f"[{np.nanmin(probs)}, {np.nanmax(probs)}]" + (" and NaN" if np.isnan(probs).any() else ""))
    return make((_gen(generator).random(input.shape) < probs).astype(input.data.dtype))


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices from the rows of a (batch of) non-negative weight vector(s)."""
    w = np.asarray(input.data, np.float64)
    rows = w.reshape(-1, w.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("multinomial(): probability tensor contains either `inf`, `nan` or element < 0")
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError(f"multinomial(): cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"({num_samples} > {rows.shape[1]})")
    g = _gen(generator)
    out = []
    for r in rows:
        s = r.sum()
        if s <= 0:
            raise RuntimeError("multinomial(): invalid multinomial distribution (sum of probabilities <= 0)")
        out.append(g.choice(len(r), num_samples, replace=replacement, p=r / s))
    res = np.asarray(out, np.int64)
    return make(res.reshape(w.shape[:-1] + (num_samples,)))


def normal(mean=0.0, std=1.0, size=None, *, generator=None) -> Tensor:
    m = mean.data if isinstance(mean, Tensor) else mean
    s = std.data if isinstance(std, Tensor) else std
    shape = size if size is not None else np.broadcast_shapes(np.shape(m), np.shape(s))
    d = (mean.data.dtype if isinstance(mean, Tensor) else std.data.dtype if isinstance(std, Tensor) else dt.NP_DEFAULT_FLOAT)
    return make((_gen(generator).standard_normal(shape) * s + m).astype(d))
