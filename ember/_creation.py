"""Tensor factories (`tensor`, `zeros`, `arange`, ...), the global random generator, and conversions."""
from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from . import backend
from ._tensor import Tensor, shape_arg, to_array, make
from . import _capture
from .autograd.grad_mode import MODE
from ._capture import opaque, traced


def _place(arr, device):
    """A host array moved to `device` (None: the default device, `set_default_device`; the CPU unless set)."""
    if device is None:
        device = backend.DEFAULT[0]
        if device is None:
            return arr
    return backend.transfer(arr, backend.resolve(device))


def _alloc(device, make_array):
    """`make_array(xp)` run with the array module of `device` (None: the default device), allocating there."""
    if device is None:
        device = backend.DEFAULT[0]
        if device is None:
            return make_array(np)
    dev = backend.resolve(device)
    with backend.on(dev):
        return make_array(backend.module_for(dev))


def _finish(arr, requires_grad: bool, op: str) -> Tensor:
    if requires_grad.__class__ is not bool:
        raise TypeError(f"{op}(): argument 'requires_grad' must be bool, not {type(requires_grad).__name__}")
    t = make(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _fdtype(dtype):
    return dt.NP_DEFAULT_FLOAT if dtype is None else dt.np_dtype(dtype)


# ---------------------------------------------------------------------- from data
@traced
def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data`; dtype inferred as PyTorch does (Python floats: float32)."""
    if isinstance(data, Tensor):
        data = data._data
    arr = to_array(data, None if dtype is None else dt.np_dtype(dtype), "tensor")
    if device is None:
        device = backend.DEFAULT[0]  # (None unless `set_default_device`: the data's own device)
    if device is not None and backend.resolve(device) != backend.device_of(arr):
        arr = _place(arr, device)  # the move copies
    elif arr is data or (isinstance(data, np.ndarray) and np.shares_memory(arr, data)):
        arr = arr.copy()
    return _finish(arr, requires_grad, "tensor")


@traced
def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like `tensor`, but shares memory with `data` when it already is an array of the right dtype."""
    if isinstance(data, Tensor) and (dtype is None or data._data.dtype == dt.np_dtype(dtype)) and device is None:
        return data
    arr = to_array(data, None if dtype is None else dt.np_dtype(dtype), "as_tensor")
    if device is None and not isinstance(data, Tensor):
        device = backend.DEFAULT[0]
    if device is not None:
        arr = backend.transfer(arr, backend.resolve(device))
    return make(arr)


@traced
def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype not in dt.FROM_NP:
        raise TypeError(f"from_numpy(): can't convert np.ndarray of type {ndarray.dtype}. The only supported types are: "
                        + ", ".join(d.name for d in dt.ALL))
    if ndarray.dtype in dt.LOW_FLOATS:
        dt.low_precision_used()
    return make(ndarray)


# ---------------------------------------------------------------------- filled
@traced
def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, d = shape_arg(size, "zeros"), _fdtype(dtype)
    return _finish(_alloc(device, lambda xp: xp.zeros(shape, d)), requires_grad, "zeros")


@traced
def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, d = shape_arg(size, "ones"), _fdtype(dtype)
    return _finish(_alloc(device, lambda xp: xp.ones(shape, d)), requires_grad, "ones")


@traced
def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, d = shape_arg(size, "empty"), _fdtype(dtype)
    return _finish(_alloc(device, lambda xp: xp.empty(shape, d)), requires_grad, "empty")


@traced
def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value` (dtype inferred from the value: bool, int64 or float32)."""
    if dtype is None:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        d = dt.scalar_dtype(fill_value)
    else:
        d = dt.np_dtype(dtype)
    shape = shape_arg((size,), "full")
    return _finish(_alloc(device, lambda xp: xp.full(shape, fill_value, d)), requires_grad, "full")


@traced
def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    return _finish(_alloc(device, lambda xp: xp.eye(n, m, dtype=_fdtype(dtype))), requires_grad, "eye")


@traced
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
        if not dt.is_float(d):
            vals = [int(v) for v in vals]  # an integer range takes integer bounds and step, as PyTorch's int64 arange
            if vals[2] == 0:
                raise RuntimeError(f"arange(): step must be nonzero; it is 0 once truncated to {dt.FROM_NP[d]}")
    n = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    # computed in float64 (or int64) then cast, so float32 ranges have the same length as PyTorch's
    arr = (np.arange(n, dtype=np.float64 if dt.is_float(d) else np.int64) * vals[2] + vals[0]).astype(d)
    return _finish(_place(arr, device), requires_grad, "arange")


@traced
def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    arr = np.linspace(float(start), float(end), steps).astype(_fdtype(dtype))
    return _finish(_place(arr, device), requires_grad, "linspace")


@traced
def logspace(start, end, steps: int, base: float = 10.0, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    arr = np.logspace(float(start), float(end), steps, base=base).astype(_fdtype(dtype))
    return _finish(_place(arr, device), requires_grad, "logspace")


def _like(fn, input: Tensor, dtype, device, requires_grad, *args):
    d = input._data.dtype if dtype is None else dt.np_dtype(dtype)
    dev = input.device if device is None else device
    return _finish(_alloc(dev if dev != backend.CPU else None, lambda xp: fn(xp, input.shape, d, *args)),
                   requires_grad, fn.__name__)


@traced
def zeros_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.zeros(s, d), input, dtype, device, requires_grad)


@traced
def ones_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.ones(s, d), input, dtype, device, requires_grad)


@traced
def empty_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.empty(s, d), input, dtype, device, requires_grad)


@traced
def full_like(input: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _like(lambda xp, s, d: xp.full(s, fill_value, d), input, dtype, device, requires_grad)


# ---------------------------------------------------------------------- random
# get_state's layout (64 bytes, little-endian): 8 magic bytes naming ember/PCG64/layout 1, the
# 128-bit state, the 128-bit increment, has_uint32 and uinteger (4 bytes each), the seed (16, signed).
_RNG_MAGIC = b"EMBRPCG1"
_RNG_STATE_SIZE = 64
_CUDA_RNG_MAGIC = b"EMBRCUD1"  # a CUDA generator's state: magic, the 64-bit reseed, the initial seed (16)


def _signed16(seed: int) -> bytes:
    seed = seed if -(1 << 127) <= seed < (1 << 127) else seed & ((1 << 64) - 1)
    return seed.to_bytes(16, "little", signed=True)


class Generator:
    """A seeded source of random numbers, as `torch.Generator`: NumPy's PCG64 on the CPU, a CuPy
    (cuRAND) RandomState on a CUDA device. Draws land on the generator's device."""

    def __init__(self, device="cpu") -> None:
        self.device = backend.resolve(device)
        self.manual_seed(0x5EED)

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        self._seed = seed
        if self.device.type == "cpu":
            self.np = np.random.Generator(np.random.PCG64(seed & ((1 << 64) - 1)))
        else:
            self._rs = backend.require_cuda(self.device).random_state(seed & ((1 << 64) - 1), self.device.index)
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy & ((1 << 63) - 1))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    # draws: arrays on the generator's device
    def random(self, shape: tuple, dtype=np.float64):
        """Uniform on [0, 1) as float32 or float64."""
        d = np.float32 if dtype == np.float32 else np.float64
        if self.device.type == "cpu":
            return self.np.random(shape, dtype=d)
        with backend.on(self.device):
            return self._rs.random_sample(shape, dtype=d)

    def standard_normal(self, shape: tuple, dtype=np.float64):
        d = np.float32 if dtype == np.float32 else np.float64
        if self.device.type == "cpu":
            return self.np.standard_normal(shape, dtype=d)
        with backend.on(self.device):
            return self._rs.standard_normal(shape, dtype=d)

    def integers(self, low: int, high: int, shape: tuple):
        """int64 uniform on [low, high)."""
        if self.device.type == "cpu":
            return self.np.integers(low, high, shape)
        with backend.on(self.device):
            return self._rs.randint(low, high, shape, dtype=np.int64)

    def permutation(self, n: int):
        if self.device.type == "cpu":
            return self.np.permutation(n)
        with backend.on(self.device):
            return self._rs.permutation(n)

    def get_state(self) -> Tensor:
        """The generator's whole state as a uint8 Tensor (PyTorch's ByteTensor), for `set_state`:
        PCG64's 128-bit state and increment, its buffered 32-bit draw and the initial seed.

        cuRAND's state cannot be read out through CuPy, so a CUDA generator draws a fresh 62-bit seed
        from its own stream, reseeds itself with it and returns that seed: what follows `get_state()`
        is exactly what follows `set_state()` of the returned state (runs that checkpoint and resume
        repeat), but the stream differs from one that never called `get_state()`."""
        if self.device.type != "cpu":
            nxt = int(self.integers(0, 1 << 62, (1,))[0])
            initial = self._seed
            self.manual_seed(nxt)
            self._seed = initial
            raw = _CUDA_RNG_MAGIC + nxt.to_bytes(8, "little") + _signed16(initial)
            return make(np.frombuffer(raw, np.uint8).copy())
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
        if self.device.type != "cpu":
            if len(raw) != len(_CUDA_RNG_MAGIC) + 24 or raw[:8] != _CUDA_RNG_MAGIC:
                raise RuntimeError(f"set_state(): this uint8 tensor is not the state of an ember CUDA generator "
                                   f"({len(raw)} bytes); use one returned by ember.cuda.get_rng_state()")
            initial = int.from_bytes(raw[16:32], "little", signed=True)
            self.manual_seed(int.from_bytes(raw[8:16], "little"))
            self._seed = initial
            return self
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


_cuda_gens: list = []
_cuda_seed = [0x5EED]
backend.RESET_HOOKS.append(_cuda_gens.clear)  # a new (or no) CUDA backend: generators are made again


def cuda_generators() -> list:
    """The default Generator of each CUDA device, made on first use with the last global seed."""
    if not _cuda_gens:
        be = backend.require_cuda()
        _cuda_gens.extend(Generator(f"cuda:{i}").manual_seed(_cuda_seed[0]) for i in range(be.count))
    return _cuda_gens


def seed_cuda(seed: int) -> None:
    _cuda_seed[0] = int(seed)
    for g in _cuda_gens:
        g.manual_seed(seed)


@opaque
def manual_seed(seed: int) -> Generator:
    """Seed the global generator and every CUDA device's: random factories and ops become reproducible."""
    seed_cuda(seed)
    return default_generator.manual_seed(seed)


def generator_for(device: backend.device, generator: "Generator | None" = None, op: str = "random") -> Generator:
    """The generator to draw with on `device`: `generator` (checked to be on that device type) or
    the device's default generator."""
    if _capture.ACTIVE is not None:
        _capture.refuse(f"{op}: a random draw outside a captured op")
    if generator is not None:
        if generator.device.type != device.type:
            raise RuntimeError(f"{op}(): expected a '{device.type}' device type for generator but found "
                               f"'{generator.device.type}'; make it with ember.Generator(device='{device}')")
        gen = generator
    elif device.type == "cpu":
        gen = default_generator
    else:
        gen = cuda_generators()[device.index]
    if MODE.vmap:  # inside vmap: per its randomness, an error, this generator, or draws per example
        from .func._batching import random_draws
        return random_draws(gen, op)
    return gen


@opaque
def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 Tensor; `set_rng_state` restores it."""
    return default_generator.get_state()


@opaque
def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator to a state from `get_rng_state()`: the draws that follow repeat."""
    default_generator.set_state(new_state)


def numpy_generator(generator) -> np.random.Generator:
    return (generator or default_generator).np


def _where(device, generator, op: str) -> Generator:
    if device is None and generator is None:
        device = backend.DEFAULT[0]
    dev = backend.CPU if device is None else backend.resolve(device)
    if device is None and generator is not None:
        dev = generator.device
    return generator_for(dev, generator, op)


def _float_only(d: np.dtype, op: str) -> None:
    if not dt.is_float(d):
        raise NotImplementedError(f"{op}(): only floating-point dtypes are supported, got {dt.FROM_NP[d]}; "
                                  f"use randint() for integers")


@traced
def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples on [0, 1)."""
    d = _fdtype(dtype)
    _float_only(d, "rand")
    arr = _where(device, generator, "rand").random(shape_arg(size, "rand"), d).astype(d, copy=False)
    return _finish(arr, requires_grad, "rand")


@traced
def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    d = _fdtype(dtype)
    _float_only(d, "randn")
    arr = _where(device, generator, "randn").standard_normal(shape_arg(size, "randn"), d).astype(d, copy=False)
    return _finish(arr, requires_grad, "randn")


@traced
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
    arr = _where(device, generator, "randint").integers(low, high, shape_arg((size,), "randint")).astype(d, copy=False)
    return _finish(arr, requires_grad, "randint")


@traced
def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1."""
    if n < 0:
        raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    d = dt.NP_INT64 if dtype is None else dt.np_dtype(dtype)
    return _finish(_where(device, generator, "randperm").permutation(n).astype(d), requires_grad, "randperm")


def _like_device(input: Tensor, device):
    return device if device is not None else (None if input.device.type == "cpu" else input.device)


@traced
def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return rand(*input.shape, generator=generator, dtype=dtype or input.dtype, device=_like_device(input, device),
                requires_grad=requires_grad)


@traced
def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return randn(*input.shape, generator=generator, dtype=dtype or input.dtype, device=_like_device(input, device),
                 requires_grad=requires_grad)


@traced
def randint_like(input: Tensor, low, high=None, *, dtype=None, device=None) -> Tensor:
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype, device=_like_device(input, device))


@traced
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 samples with probabilities `input` (or the scalar p), on input's device."""
    xp = backend.array_module(input._data)
    with backend.on(input.device):
        probs = input._data if p is None else xp.full(input.shape, p)
        if not bool(((probs >= 0) & (probs <= 1)).all()):  # also catches NaN
            h = backend.to_host(probs)
            raise RuntimeError(f"bernoulli(): probabilities must be in [0, 1], got values in "
                               f"[{np.nanmin(h)}, {np.nanmax(h)}]" + (" and NaN" if np.isnan(h).any() else ""))
        r = generator_for(input.device, generator, "bernoulli").random(input.shape)
        return make((r < probs).astype(input._data.dtype))


@traced
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices from the rows of a (batch of) non-negative weight vector(s).
    Sampled on the host with the CPU generator (a CUDA input's result is moved back to its device)."""
    w = backend.to_host(input._data).astype(np.float64, copy=False)
    rows = w.reshape(-1, w.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("multinomial(): probability tensor contains either `inf`, `nan` or element < 0")
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError(f"multinomial(): cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"({num_samples} > {rows.shape[1]})")
    g = numpy_generator(generator if generator is not None and generator.device.type == "cpu" else None)
    out = []
    for r in rows:
        s = r.sum()
        if s <= 0:
            raise RuntimeError("multinomial(): invalid multinomial distribution (sum of probabilities <= 0)")
        out.append(g.choice(len(r), num_samples, replace=replacement, p=r / s))
    res = np.asarray(out, np.int64).reshape(w.shape[:-1] + (num_samples,))
    return make(backend.transfer(res, input.device))


@traced
def normal(mean=0.0, std=1.0, size=None, *, generator=None) -> Tensor:
    """Normal samples with the given mean and std (numbers or tensors, broadcast), on their device."""
    m = mean._data if isinstance(mean, Tensor) else mean
    s = std._data if isinstance(std, Tensor) else std
    shape = tuple(size) if size is not None else np.broadcast_shapes(np.shape(m), np.shape(s))
    d = (mean._data.dtype if isinstance(mean, Tensor) else std._data.dtype if isinstance(std, Tensor) else dt.NP_DEFAULT_FLOAT)
    dev = mean.device if isinstance(mean, Tensor) else std.device if isinstance(std, Tensor) else (
        generator.device if generator is not None else backend.CPU)
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        backend.check_same_device("normal", (m, s))
    with backend.on(dev):
        z = generator_for(dev, generator, "normal").standard_normal(shape)
        return make((z * s + m).astype(d))


# ---------------------------------------------------------------------- counts drawn from a rate
def _host_counts(op: str, draw, *tensors: Tensor, generator=None) -> Tensor:
    """Integer-valued samples drawn on the host by NumPy's generator (`draw(np_generator, *host arrays)`) and
    returned in the first tensor's dtype and device (CuPy's generators have no Poisson or binomial sampler)."""
    hosts = [backend.to_host(t._data).astype(np.float64) for t in tensors]
    g = numpy_generator(generator if generator is not None and generator.device.type == "cpu" else None)
    out = draw(g, *hosts).astype(tensors[0]._data.dtype)
    return make(backend.transfer(out, tensors[0].device))


def poisson(input: Tensor, generator=None) -> Tensor:
    """Samples of Poisson(rate) for each element of `input` (the rates, ≥ 0), in input's dtype."""
    if not isinstance(input, Tensor) or not dt.is_float(input._data.dtype):
        raise TypeError(f"poisson(): input must be a floating-point tensor of rates, got {type(input).__name__}"
                        + (f" of dtype {input.dtype}" if isinstance(input, Tensor) else ""))
    if bool((input._data < 0).any()) or bool(backend.array_module(input._data).isnan(input._data).any()):
        raise RuntimeError("poisson(): invalid Poisson rate, expected rate to be non-negative")
    return _host_counts("poisson", lambda g, lam: g.poisson(lam), input, generator=generator)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Samples of Binomial(count, prob), elementwise (broadcast), in count's dtype."""
    for name, t in (("count", count), ("prob", prob)):
        if not isinstance(t, Tensor) or not dt.is_float(t._data.dtype):
            raise TypeError(f"binomial(): argument '{name}' must be a floating-point tensor")
    if bool(((prob._data < 0) | (prob._data > 1)).any()):
        raise RuntimeError("binomial(): prob must be in [0, 1]")
    return _host_counts("binomial", lambda g, n, p: g.binomial(np.broadcast_to(n, np.broadcast_shapes(n.shape, p.shape))
                                                                .astype(np.int64), p), count, prob,
                        generator=generator)


# ---------------------------------------------------------------------- window functions (as torch.*_window)
def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool, fn) -> Tensor:
    """`fn(n, N)` on n = 0..N-1 for the symmetric window of N points; a periodic window of length L is the
    symmetric window of L + 1 points without its last (what spectral analysis wants: it tiles)."""
    if isinstance(window_length, bool) or not isinstance(window_length, int) or window_length < 0:
        raise RuntimeError(f"{name}(): window_length must be a non-negative int, got {window_length!r}")
    d = _fdtype(dtype)
    if not dt.is_float(d):
        raise RuntimeError(f"{name}(): expects floating point dtypes, got: {dt.FROM_NP[d]}")
    if window_length <= 1:
        arr = np.ones(window_length, np.float64)
    else:
        big = window_length + 1 if periodic else window_length
        arr = fn(np.arange(big, dtype=np.float64), big)[:window_length]
    return _finish(_place(arr.astype(d), device), requires_grad, name)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                requires_grad: bool = False) -> Tensor:
    """w[n] = ½ − ½·cos(2πn/(N−1))."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.5 - 0.5 * np.cos(2 * np.pi * n / (N - 1)))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """w[n] = α − β·cos(2πn/(N−1))."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: alpha - beta * np.cos(2 * np.pi * n / (N - 1)))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """w[n] = 0.42 − 0.5·cos(2πn/(N−1)) + 0.08·cos(4πn/(N−1))."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.42 - 0.5 * np.cos(2 * np.pi * n / (N - 1)) + 0.08 * np.cos(4 * np.pi * n / (N - 1)))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """w[n] = 1 − |2n/(N−1) − 1| (a triangle)."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 1 - np.abs(2 * n / (N - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, device=None,
                  requires_grad: bool = False) -> Tensor:
    """w[n] = I₀(β·√(1 − (2n/(N−1) − 1)²)) / I₀(β)."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / (N - 1) - 1) ** 2, 0, None))) / np.i0(beta))


def range_(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Deprecated in PyTorch (use `arange`): start, start + step, ..., up to and including `end`; the default
    float dtype unless `dtype` is given, even for integer arguments."""
    import warnings
    warnings.warn("ember.range is deprecated, as torch.range is, because its behavior is inconsistent with "
                  "Python's range builtin. Instead, use ember.arange, which produces values in [start, end).",
                  UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("range(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"range(): upper bound and larger bound inconsistent with step sign (start={start}, "
                           f"end={end}, step={step})")
    n = int(math.floor((end - start) / step)) + 1
    d = _fdtype(dtype)
    arr = (np.arange(n, dtype=np.float64) * step + start).astype(d)
    return _finish(_place(arr, device), requires_grad, "range")
