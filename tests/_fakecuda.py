"""A CPU stand-in for CuPy, strict where CuPy is strict, so that ember's CUDA path runs in CI.

No GPU is needed: arrays are NumPy arrays behind a wrapper type that is *not* a `numpy.ndarray`.
What it checks, as CuPy would fail on a real GPU:

- the module exposes only names that CuPy 14 has (`tests/data/cupy_api.json`, read off the real
  wheel), so code calling a NumPy function CuPy lacks fails here too;
- `numpy.asarray(device_array)` raises CuPy's TypeError (no implicit device-to-host copy);
- a NumPy array meeting a device array in a ufunc, an indexing key or an assigned value raises
  TypeError (CuPy accepts only its own arrays, NumPy *scalars* and Python numbers there);
- reductions and full indexing return 0-d device arrays, not NumPy scalars, as CuPy does;
- `numpy.<function>(device_array)` raises: ember calls functions through the array module
  (`xp = array_module(x)`), never by NEP-18 dispatch (CuPy would accept it for the functions it has,
  but the rule keeps one implementation honest for both modules);
- arrays remember a device index (two fake GPUs) and one op never mixes devices;
- `flags` has no `writeable`, there is no `ctypes`, `.get()` copies to the host.

Raw CUDA kernels (`ElementwiseKernel`) cannot run here: `ember.backend.kernels` runs its NumPy
reference instead when the module says `_ember_fake`.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import types
import weakref

import numpy as np

_API = json.load(open(os.path.join(os.path.dirname(__file__), "data", "cupy_api.json")))
CUPY_NAMES = frozenset(_API["cupy"])
NDARRAY_NAMES = frozenset(_API["cupy.ndarray"])
UFUNC_METHODS = frozenset(_API["ufunc_methods"])
DEVICE_COUNT = 2
_ND = np.ndarray
_SCALARS = (int, float, complex, bool, np.generic)


class CUDARuntimeError(RuntimeError):
    pass


# ---------------------------------------------------------------------------- devices
_tls = threading.local()


def _current() -> int:
    return getattr(_tls, "dev", 0)


class Device:
    """cupy.cuda.Device: a context manager making a device current."""

    def __init__(self, device=None) -> None:
        if device is None:
            device = _current()
        if isinstance(device, Device):
            device = device.id
        device = int(device)
        if not 0 <= device < DEVICE_COUNT:
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        self.id = device
        self._prev: list[int] = []

    def __enter__(self) -> "Device":
        self._prev.append(_current())
        _tls.dev = self.id
        return self

    def __exit__(self, *exc) -> None:
        _tls.dev = self._prev.pop()

    def use(self) -> None:
        _tls.dev = self.id

    def synchronize(self) -> None:
        pass

    @property
    def compute_capability(self) -> str:
        return "90"

    def __int__(self) -> int:
        return self.id

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


# ---------------------------------------------------------------------------- memory accounting
DEVICE_MEMORY = 16 << 30  # bytes per fake device


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError, with CuPy's arguments and message."""

    def __init__(self, size, total, limit=0) -> None:
        self._size, self._total, self._limit = size, total, limit
        msg = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes"
        super().__init__(msg + (f", limit set to: {limit:,} bytes)." if limit else ")."))


class _Memory:
    __slots__ = ("size", "device_id")

    def __init__(self, size: int, dev: int) -> None:
        self.size, self.device_id = size, dev


class MemoryPointer:
    """What an allocator returns: `device_id` and `mem.size` (the block's bytes) are what ember reads."""

    __slots__ = ("mem", "device_id", "ptr")

    def __init__(self, size: int, dev: int) -> None:
        self.mem, self.device_id, self.ptr = _Memory(size, dev), dev, 0


class MemoryPool:
    """cupy.cuda.MemoryPool, one count for both fake devices: blocks rounded up to CuPy's 512 bytes; `total`
    grows with `used` and shrinks to it in `free_all_blocks`; beyond the limit (`set_limit`, default the
    device's memory) `malloc` raises CuPy's OutOfMemoryError."""

    def __init__(self) -> None:
        self.used = 0
        self.total = 0
        self.limit = 0

    def malloc(self, size: int) -> MemoryPointer:
        rounded = -(-size // 512) * 512
        if self.used + rounded > (self.limit or DEVICE_MEMORY):
            raise OutOfMemoryError(size, self.total, self.limit)
        self.used += rounded
        self.total = max(self.total, self.used)
        return MemoryPointer(rounded, _current())

    def _free(self, size: int) -> None:
        self.used -= size

    def used_bytes(self) -> int:
        return self.used

    def total_bytes(self) -> int:
        return self.total

    def free_bytes(self) -> int:
        return self.total - self.used

    def free_all_blocks(self, stream=None) -> None:
        self.total = self.used

    def set_limit(self, size=None, fraction=None) -> None:
        self.limit = int(size or 0) if fraction is None else int(fraction * DEVICE_MEMORY)

    def get_limit(self) -> int:
        return self.limit


_POOL = MemoryPool()
_ALLOCATOR = [_POOL.malloc]  # cupy.cuda.get_allocator() / set_allocator(): what every array allocation calls


def _set_allocator(allocator=None) -> None:
    _ALLOCATOR[0] = _POOL.malloc if allocator is None else allocator


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, a: _ND) -> None:
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata


class _Pointer:
    __slots__ = ("ptr", "device_id")

    def __init__(self, a: _ND, dev: int) -> None:
        self.ptr = a.__array_interface__["data"][0]
        self.device_id = dev


# ---------------------------------------------------------------------------- streams and events
# The fake runs every kernel when it is called, so all work is done by the time anything can ask: streams
# and events are always `done`. What is kept is what CuPy checks and reports: handles, devices, priorities,
# the current stream per device and thread, and the rules of timing.
_handles = iter(range(0x1000, 1 << 62, 0x10))
_PRIORITIES = (-5, 0)  # an H100's (greatest, least) stream priority


def _device_match(device_id: int) -> None:
    if device_id not in (-1, _current()):
        raise RuntimeError(f"The device that the stream is created on ({device_id}) does not match with the current "
                           f"device ({_current()})")


class Stream:
    """cupy.cuda.Stream: `null` is the legacy default stream (handle 0, device -1)."""

    null: "Stream"

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None) -> None:
        self.ptr = 0 if null else next(_handles)
        self.device_id = -1 if null else _current()
        self._priority = 0 if priority is None else min(max(priority, _PRIORITIES[0]), _PRIORITIES[1])
        self._stack: list = []

    priority = property(lambda s: s._priority)
    done = property(lambda s: True)

    def synchronize(self) -> None:
        pass

    def use(self) -> "Stream":
        _device_match(self.device_id)
        _streams()[_current()] = self
        return self

    def __enter__(self) -> "Stream":
        _device_match(self.device_id)
        self._stack.append(_streams()[_current()])
        _streams()[_current()] = self
        return self

    def __exit__(self, *exc) -> None:
        _streams()[_current()] = self._stack.pop()

    def record(self, event=None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"wait_event() expects a cupy.cuda.Event, got {type(event).__name__}")

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.ptr == self.ptr

    def __hash__(self) -> int:
        return self.ptr


Stream.null = Stream(null=True)


def _streams() -> list:
    """This thread's current stream of each device."""
    if not hasattr(_tls, "streams"):
        _tls.streams = [Stream.null] * DEVICE_COUNT
    return _tls.streams


def get_current_stream(device_id: int = -1) -> Stream:
    return _streams()[_current() if device_id == -1 else device_id]


class Event:
    """cupy.cuda.Event: CuPy refuses an interprocess event that times."""

    def __init__(self, block=False, disable_timing=False, interprocess=False) -> None:
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        self.ptr = next(_handles)
        self._timing = not disable_timing
        self._t = None

    done = property(lambda s: True)

    def record(self, stream=None) -> None:
        import time
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        pass


def get_elapsed_time(start: Event, end: Event) -> float:
    if not (start._timing and end._timing) or start._t is None or end._t is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: invalid resource handle")
    return (end._t - start._t) * 1e3


# ---------------------------------------------------------------------------- the array
_LIVE = weakref.WeakValueDictionary()  # data pointer -> the live fake array whose `.data` was last read
def _to_host_error():
    return TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                     "NumPy array explicitly.")


def _reject(x, where: str):
    raise TypeError(f"fake CUDA: a numpy.ndarray (shape {x.shape}) met a CUDA array in {where}; "
                    "CuPy accepts only CuPy arrays, NumPy scalars and Python numbers here")


def _unwrap(x, where: str, devs: list):
    t = type(x)
    if t is ndarray:
        devs.append(x._dev)
        return x._a
    if t is _ND:
        _reject(x, where)
    if t is list or t is tuple:
        return t(_unwrap(i, where, devs) for i in x)
    return x


def _one_device(devs: list, where: str) -> int:
    if not devs:
        return _current()
    d = devs[0]
    for e in devs:
        if e != d:
            raise ValueError(f"fake CUDA: {where} mixes arrays on devices {d} and {e}")
    return d


def _wrap(r, dev: int):
    t = type(r)
    if t is _ND:
        return ndarray._new(r, dev)
    if isinstance(r, np.generic):  # CuPy returns 0-d arrays where NumPy returns scalars
        return ndarray._new(np.asarray(r), dev)
    if t is tuple or t is list:
        return t(_wrap(i, dev) for i in r)
    return r


class ndarray:
    """A device array: a NumPy array that only CuPy's interface can reach."""

    __slots__ = ("_a", "_dev", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C") -> None:
        self._a = np.empty(shape, dtype, order=order)
        self._dev = _current()
        _account(self)

    @classmethod
    def _new(cls, a: _ND, dev: int) -> "ndarray":
        o = object.__new__(cls)
        o._a = a
        o._dev = dev
        if a.base is None:
            _account(o)
        return o

    # metadata
    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    strides = property(lambda s: s._a.strides)
    nbytes = property(lambda s: s._a.nbytes)
    itemsize = property(lambda s: s._a.itemsize)
    flags = property(lambda s: _Flags(s._a))
    device = property(lambda s: Device(s._dev))
    @property
    def data(self) -> _Pointer:
        ptr = _Pointer(self._a, self._dev)
        _LIVE[ptr.ptr] = self  # so the fake NCCL can find the array behind a raw pointer
        return ptr
    T = property(lambda s: ndarray._new(s._a.T, s._dev))
    mT = property(lambda s: ndarray._new(s._a.mT, s._dev))
    real = property(lambda s: ndarray._new(np.asarray(s._a.real), s._dev))
    imag = property(lambda s: ndarray._new(np.asarray(s._a.imag), s._dev))

    @property
    def base(self):
        b = self._a.base
        return None if b is None else ndarray._new(b if type(b) is _ND else np.asarray(b), self._dev)

    @property
    def __cuda_array_interface__(self) -> dict:
        a = self._a
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.__array_interface__["data"][0], False),
                "strides": None if a.flags.c_contiguous else a.strides, "version": 3}

    # host transfer
    def get(self, stream=None, order="C", out=None, blocking=True) -> _ND:
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None) -> None:
        if type(arr) is not _ND:
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.shape != self._a.shape or arr.dtype != self._a.dtype:
            raise ValueError("Shape or dtype mismatch in set()")
        self._a[...] = arr

    def __array__(self, dtype=None, copy=None):
        raise _to_host_error()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        if name not in CUPY_NAMES or method not in ("__call__",) + tuple(UFUNC_METHODS):
            raise TypeError(f"fake CUDA: CuPy has no ufunc {name}.{method}")
        if method == "at":
            _check_at(name, inputs[0])
        devs: list = []
        args = _unwrap(inputs, f"numpy.{name}", devs)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = _unwrap(out, f"numpy.{name}(out=)", devs)
        dev = _one_device(devs, f"numpy.{name}")
        r = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if isinstance(out, tuple) and len(out) == 1 else out
        return _wrap(r, dev)

    _PASS = frozenset({"result_type", "can_cast", "shape", "ndim", "size", "may_share_memory", "shares_memory",
                       "iscomplexobj", "isrealobj"})

    def __array_function__(self, func, types_, args, kwargs):
        if func.__name__ in self._PASS:  # dtype and shape queries: harmless on either module
            devs: list = []
            return func(*_unwrap(args, func.__name__, devs), **kwargs)
        raise TypeError(f"fake CUDA: numpy.{func.__name__} called on a CUDA array; ember calls functions through "
                        f"the array module (xp = ember.backend.array_module(x); xp.{func.__name__}(...))")

    def __getattr__(self, name):
        if name not in NDARRAY_NAMES or name.startswith("_"):
            raise AttributeError(f"'cupy.ndarray' object has no attribute '{name}'")
        meth = getattr(self._a, name)
        dev = self._dev

        def call(*args, **kwargs):
            devs: list = [dev]
            r = meth(*_unwrap(args, f"ndarray.{name}", devs), **_unwrap_kw(kwargs, name, devs))
            _one_device(devs, f"ndarray.{name}")
            if name in ("item", "tolist", "tobytes"):
                return r
            return None if r is None else _wrap(r, dev)
        return call

    # indexing
    def __getitem__(self, key):
        devs: list = [self._dev]
        k = _unwrap(key, "an index", devs)
        dev = _one_device(devs, "indexing")
        return _wrap(self._a[k], dev)

    def __setitem__(self, key, value) -> None:
        devs: list = [self._dev]
        k = _unwrap(key, "an index", devs)
        v = _unwrap(value, "an assigned value", devs)
        _one_device(devs, "index assignment")
        self._a[k] = v

    # Python protocol
    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def __repr__(self) -> str:
        return repr(self._a)

    def __str__(self) -> str:
        return str(self._a)

    __hash__ = None

    def __copy__(self):
        return ndarray._new(self._a.copy(), self._dev)

    def __deepcopy__(self, memo):
        return ndarray._new(self._a.copy(), self._dev)

    def __reduce__(self):
        return (_rebuild, (self._a.copy(), self._dev))

    def __dlpack__(self, *a, **k):
        raise TypeError("fake CUDA: DLPack export is not emulated")


def _rebuild(a, dev):
    return ndarray._new(a, dev)


def _unwrap_kw(kwargs: dict, name: str, devs: list) -> dict:
    return {k: _unwrap(v, f"{name}({k}=)", devs) for k, v in kwargs.items()} if kwargs else kwargs


def _account(o: ndarray) -> None:
    mem = _ALLOCATOR[0](o._a.nbytes)  # may raise OutOfMemoryError, as CuPy's allocation would
    weakref.finalize(o, _POOL._free, mem.mem.size)


def _binop(uf, reflected=False, inplace=False):
    if inplace:
        def f(self, other):
            uf(self, other, out=(self,))
            return self
    elif reflected:
        def f(self, other):
            return uf(other, self)
    else:
        def f(self, other):
            return uf(self, other)
    return f


for _n, _uf in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                ("lshift", np.left_shift), ("rshift", np.right_shift)]:
    setattr(ndarray, f"__{_n}__", _binop(_uf))
    setattr(ndarray, f"__r{_n}__", _binop(_uf, reflected=True))
    if _n != "matmul":
        setattr(ndarray, f"__i{_n}__", _binop(_uf, inplace=True))
for _n, _uf in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                ("gt", np.greater), ("ge", np.greater_equal)]:
    setattr(ndarray, f"__{_n}__", _binop(_uf))
ndarray.__neg__ = lambda s: np.negative(s)
ndarray.__pos__ = lambda s: np.positive(s)
ndarray.__abs__ = lambda s: np.absolute(s)
ndarray.__invert__ = lambda s: np.invert(s)
ndarray.__divmod__ = lambda s, o: np.divmod(s, o)


# ---------------------------------------------------------------------------- the module
_HOST_OK = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray", "asfortranarray"})


def _function(name: str, fn):
    host_ok = name in _HOST_OK

    def call(*args, **kwargs):
        devs: list = []
        if host_ok and args and type(args[0]) is _ND:  # an explicit upload
            a = _unwrap(args[1:], name, devs)
            r = fn(args[0], *a, **_unwrap_kw(kwargs, name, devs))
            if r is args[0]:
                r = r.copy()
            return _wrap(r, _current())
        a = _unwrap(args, f"cupy.{name}", devs)
        kw = _unwrap_kw(kwargs, name, devs)
        dev = _current() if host_ok or not devs else _one_device(devs, f"cupy.{name}")
        r = fn(*a, **kw)
        if host_ok and len(args) == 1 and not kwargs and type(args[0]) is ndarray and args[0]._dev == dev \
                and r is args[0]._a:
            return args[0]  # e.g. asarray of a device array on the current device: the same array
        return _wrap(r, dev)
    call.__name__ = name
    return call


# ufunc.at as CuPy 14.2 has it, probed on an H100 (2026-11-26): add took every dtype tried (float16/32/64,
# int32/64); subtract int32 and uint32 only; maximum and minimum int32/int64/uint32/uint64/float32/float64;
# multiply, true_divide and the rest raise NotImplementedError. Same exception types and messages.
_AT_DTYPES = {"subtract": ("int32", "uint32"),
              "maximum": ("int32", "int64", "float32", "float64", "uint32", "uint64"),
              "minimum": ("int32", "int64", "float32", "float64", "uint32", "uint64")}


def _check_at(name: str, a) -> None:
    if name == "add":
        return
    if name not in _AT_DTYPES:
        raise NotImplementedError(f"`cupy_{name}.at` is not supported yet")
    if str(a.dtype) not in _AT_DTYPES[name]:
        raise TypeError(f"cupy.{name}.at only supports {', '.join(_AT_DTYPES[name])} as data type")


class _Ufunc:
    """cupy.ufunc: callable, with the methods CuPy has (reduce, accumulate, at, ...)."""

    def __init__(self, uf) -> None:
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout = uf.nin, uf.nout

    def __call__(self, *args, **kwargs):
        return self._dispatch("__call__", args, kwargs)

    def _dispatch(self, method, args, kwargs):
        if not any(type(a) is ndarray for a in args) and "out" not in kwargs:
            devs: list = []
            return _wrap(getattr(self._uf, method)(*_unwrap(args, self.__name__, devs), **kwargs), _current())
        return ndarray.__array_ufunc__(next(a for a in args if type(a) is ndarray) if any(type(a) is ndarray for a in args)
                                       else _first(kwargs["out"]), self._uf, method, *args, **kwargs)

    def __getattr__(self, method):
        if method not in UFUNC_METHODS:
            raise AttributeError(method)
        return lambda *a, **k: self._dispatch(method, a, k)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


class RandomState:
    """cupy.random.RandomState (a NumPy PCG64 stream underneath; the values differ from cuRAND's)."""

    def __init__(self, seed=None) -> None:
        self._dev = _current()
        self.seed(seed)

    def seed(self, seed=None) -> None:
        self._g = np.random.Generator(np.random.PCG64(seed))

    def _out(self, a, dtype=None):
        a = np.asarray(a)
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return ndarray._new(np.ascontiguousarray(a), self._dev)

    def random_sample(self, size=None, dtype=float):
        d = np.dtype(dtype)
        return self._out(self._g.random(size, dtype=d if d in (np.float32, np.float64) else np.float64), d)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=float):
        return self._out(self._g.uniform(low, high, size), dtype)

    def standard_normal(self, size=None, dtype=float):
        d = np.dtype(dtype)
        return self._out(self._g.standard_normal(size, dtype=d if d in (np.float32, np.float64) else np.float64), d)

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=float):
        return self._out(self._g.normal(loc, scale, size), dtype)

    def randint(self, low, high=None, size=None, dtype=int):
        if high is None:
            low, high = 0, low
        return self._out(self._g.integers(low, high, size), dtype)

    def permutation(self, num):
        return self._out(self._g.permutation(num))

    def rand(self, *size, dtype=float):
        return self.random_sample(size, dtype)

    def randn(self, *size, dtype=float):
        return self.standard_normal(size, dtype)


def _namespace(name: str, members: dict) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(members)
    return m


def _build():
    cp = types.ModuleType("fakecupy")
    for name in CUPY_NAMES:
        obj = getattr(np, name, None)
        if obj is None:
            continue
        if isinstance(obj, np.ufunc):
            setattr(cp, name, _Ufunc(obj))
        elif callable(obj) and not isinstance(obj, type):
            setattr(cp, name, _function(name, obj))
        else:
            setattr(cp, name, obj)  # dtypes, constants (pi, inf, newaxis), exception types
    cp.ndarray = ndarray
    cp.__version__ = "14.2.0+fake"
    cp._ember_fake = True
    cp.get_array_module = lambda *a: cp if any(type(x) is ndarray for x in a) else np
    cp.asnumpy = lambda a, stream=None, order="C", out=None, blocking=True: (
        a.get(order=order, out=out) if type(a) is ndarray else np.asarray(a))
    cp.get_default_memory_pool = lambda: _POOL
    cp.get_default_pinned_memory_pool = lambda: MemoryPool()
    cp.fuse = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))

    def _no_kernels(*a, **k):
        raise NotImplementedError("fake CUDA cannot compile CUDA C kernels (ember uses its NumPy reference here)")
    cp.ElementwiseKernel = cp.RawKernel = cp.ReductionKernel = _no_kernels
    cp.random = _namespace("fakecupy.random", {"RandomState": RandomState})
    cp.linalg = _namespace("fakecupy.linalg", {n: _function(n, getattr(np.linalg, n))
                                               for n in _API["cupy.linalg"] if hasattr(np.linalg, n)})
    st = np.lib.stride_tricks
    cp.lib = _namespace("fakecupy.lib", {"stride_tricks": _namespace("fakecupy.lib.stride_tricks", {
        "as_strided": _function("as_strided", st.as_strided),
        "sliding_window_view": _function("sliding_window_view", st.sliding_window_view)})})

    def _props(i):
        Device(i)  # validates
        return {"name": b"Fake CUDA device (ember tests)", "totalGlobalMem": DEVICE_MEMORY, "major": 9, "minor": 0,
                "multiProcessorCount": 132, "l2CacheSize": 50 << 20, "maxThreadsPerMultiProcessor": 2048,
                "warpSize": 32, "integrated": 0, "isMultiGpuBoard": 0}

    def _device_count():
        if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return DEVICE_COUNT

    runtime = _namespace("fakecupy.cuda.runtime", {
        "CUDARuntimeError": CUDARuntimeError, "getDeviceCount": _device_count,
        "deviceSynchronize": lambda: None, "getDeviceProperties": _props, "getDevice": _current,
        "memGetInfo": lambda: (DEVICE_MEMORY - _POOL.total, DEVICE_MEMORY), "runtimeGetVersion": lambda: 12080,
        "driverGetVersion": lambda: 12080})
    cp.cuda = _namespace("fakecupy.cuda", {
        "Device": Device, "runtime": runtime, "Stream": Stream, "Event": Event,
        "get_current_stream": get_current_stream, "is_available": lambda: True,
        "get_elapsed_time": get_elapsed_time, "MemoryPool": MemoryPool,
        "get_allocator": lambda: _ALLOCATOR[0], "set_allocator": _set_allocator,
        "memory": _namespace("fakecupy.cuda.memory", {"OutOfMemoryError": OutOfMemoryError,
                                                      "MemoryPointer": MemoryPointer}),
        "nccl": _nccl_module()})

    def empty_pinned(shape, dtype=float, order="C"):
        buf = _PinnedBuffer(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
        return np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape, order=order)

    def zeros_pinned(shape, dtype=float, order="C"):
        a = empty_pinned(shape, dtype, order)
        a[...] = 0
        return a

    def is_pinned(a: _ND) -> bool:
        while isinstance(a, _ND):
            a = a.base
        return isinstance(a.obj if isinstance(a, memoryview) else a, _PinnedBuffer)

    special = _namespace("fakecupyx.scipy.special", {"erf": _function("erf", _np_erf)})
    cpx = _namespace("fakecupyx", {"empty_pinned": empty_pinned, "zeros_pinned": zeros_pinned,
                                   "scipy": _namespace("fakecupyx.scipy", {"special": special}),
                                   "_is_pinned": is_pinned, "_ember_fake": True})
    return cp, cpx


# ---------------------------------------------------------------------------- NCCL, over MPI
_NCCL = _API["cupy.cuda.nccl.constants"]
_NCCL_DTYPES = {_NCCL["NCCL_INT8"]: np.int8, _NCCL["NCCL_UINT8"]: np.uint8, _NCCL["NCCL_INT32"]: np.int32,
                _NCCL["NCCL_UINT32"]: np.uint32, _NCCL["NCCL_INT64"]: np.int64, _NCCL["NCCL_UINT64"]: np.uint64,
                _NCCL["NCCL_FLOAT16"]: np.float16, _NCCL["NCCL_FLOAT32"]: np.float32,
                _NCCL["NCCL_FLOAT64"]: np.float64}
_NCCL_REDUCE = {_NCCL["NCCL_SUM"]: np.sum, _NCCL["NCCL_PROD"]: np.prod, _NCCL["NCCL_MAX"]: np.max,
                _NCCL["NCCL_MIN"]: np.min, _NCCL["NCCL_AVG"]: np.mean}


class NcclError(RuntimeError):
    pass


NCCL_CALLS: dict = {}  # (device, collective) -> calls, for tests to see that NCCL carried the work


class NcclCommunicator:
    """cupy.cuda.nccl.NcclCommunicator for one GPU per process (the multi-process form), its collectives run
    over MPI (COMM_WORLD) on the arrays behind the pointers. Strict where NCCL is: every rank must pass the
    same unique id; each pointer must be a live device array, contiguous, of the datatype given, at least
    `count` long, on the communicator's device, which must be current (NCCL runs on that device's stream)."""

    def __init__(self, ndev: int, commId: bytes, rank: int, config=None) -> None:
        from mpi4py import MPI
        world = MPI.COMM_WORLD
        if not isinstance(commId, bytes) or len(commId) != 128:
            raise NcclError("NCCL_ERROR_INVALID_ARGUMENT: commId must be the 128 bytes of get_unique_id()")
        if ndev != world.Get_size() or rank != world.Get_rank():
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: fake NCCL spans MPI's COMM_WORLD (size "
                            f"{world.Get_size()}, rank {world.Get_rank()}), got ndev={ndev} rank={rank}")
        self._comm = world.Dup()
        if any(other != commId for other in self._comm.allgather(commId)):
            raise NcclError("NCCL_ERROR_INVALID_USAGE: the ranks passed different unique ids (rank 0's "
                            "get_unique_id() must reach every rank)")
        self._dev = _current()
        self._n = world.Get_size()

    def device_id(self) -> int:
        return self._dev

    def rank_id(self) -> int:
        return self._comm.Get_rank()

    def size(self) -> int:
        return self._n

    def destroy(self) -> None:
        if self._comm is not None:
            self._comm.Free()
            self._comm = None

    def _count(self, what: str) -> None:
        NCCL_CALLS[self._dev, what] = NCCL_CALLS.get((self._dev, what), 0) + 1

    def _buf(self, ptr: int, count: int, datatype: int, stream: int) -> _ND:
        if self._comm is None:
            raise NcclError("NCCL_ERROR_INVALID_USAGE: the communicator was destroyed")
        if not isinstance(stream, int):
            raise TypeError(f"stream must be a stream pointer (int), got {type(stream).__name__}")
        if _current() != self._dev:
            raise NcclError(f"fake NCCL: called with device {_current()} current on a communicator of device "
                            f"{self._dev} (NCCL would run on the wrong device's stream)")
        arr = _LIVE.get(ptr)
        if arr is None:
            raise NcclError(f"fake NCCL: {ptr:#x} is not the data pointer of a live device array")
        a = arr._a
        want = _NCCL_DTYPES.get(datatype)
        if want is None or a.dtype != want:
            raise NcclError(f"fake NCCL: datatype {datatype} does not match the buffer's dtype {a.dtype}")
        if arr._dev != self._dev:
            raise NcclError(f"fake NCCL: buffer on device {arr._dev}, communicator on device {self._dev}")
        if not a.flags.c_contiguous or count > a.size:
            raise NcclError(f"fake NCCL: the buffer must be contiguous with >= {count} elements (has {a.size}, "
                            f"contiguous={a.flags.c_contiguous})")
        return a.reshape(-1)[:count]

    def _gather(self, a: _ND) -> _ND:
        """(size, len(a)): every rank's `a`, moved as raw bytes (MPI has no float16)."""
        raw = np.ascontiguousarray(a).view(np.uint8)
        out = np.empty((self._n, raw.size), np.uint8)
        self._comm.Allgather(raw, out)
        return out.view(a.dtype)

    def _reduce(self, parts: _ND, op: int) -> _ND:
        if op not in _NCCL_REDUCE:
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: unknown reduction {op}")
        return _NCCL_REDUCE[op](parts, axis=0).astype(parts.dtype)

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, stream: int) -> None:
        send = self._buf(sendbuf, count, datatype, stream)
        recv = self._buf(recvbuf, count, datatype, stream)
        recv[...] = self._reduce(self._gather(send), op)
        self._count("allReduce")

    def bcast(self, buff: int, count: int, datatype: int, root: int, stream: int) -> None:
        buf = self._buf(buff, count, datatype, stream)
        if not 0 <= root < self._n:
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: root {root}")
        raw = buf.view(np.uint8)
        self._comm.Bcast(raw, root=root)
        self._count("bcast")

    def allGather(self, sendbuf: int, recvbuf: int, count: int, datatype: int, stream: int) -> None:
        send = self._buf(sendbuf, count, datatype, stream)
        recv = self._buf(recvbuf, count * self._n, datatype, stream)
        recv[...] = self._gather(send).reshape(-1)
        self._count("allGather")

    def reduceScatter(self, sendbuf: int, recvbuf: int, recvcount: int, datatype: int, op: int,
                      stream: int) -> None:
        send = self._buf(sendbuf, recvcount * self._n, datatype, stream)
        recv = self._buf(recvbuf, recvcount, datatype, stream)
        r = self._comm.Get_rank()
        recv[...] = self._reduce(self._gather(send), op)[r * recvcount:(r + 1) * recvcount]
        self._count("reduceScatter")


def _nccl_module() -> types.ModuleType:
    """The fake `cupy.cuda.nccl`: CuPy's names (`available` may be set False to play a missing libnccl)."""
    m = _namespace("fakecupy.cuda.nccl", dict(_NCCL, available=True, NcclCommunicator=NcclCommunicator,
                                              NcclError=NcclError, get_unique_id=lambda: os.urandom(128),
                                              get_version=lambda: 23203, get_build_version=lambda: 23203,
                                              groupStart=lambda: None, groupEnd=lambda: None))
    assert set(m.__dict__) - {"__name__", "__doc__", "__package__", "__loader__", "__spec__"} \
        <= set(_API["cupy.cuda.nccl"]), "fake NCCL names must be CuPy's"
    return m


class _PinnedBuffer(bytearray):
    """Host memory handed out by the fake `cupyx.empty_pinned` (a bytearray that can be recognised)."""

    __slots__ = ()


def _np_erf(x):
    try:
        from scipy.special import erf
        return erf(x)
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.result_type(x, np.float32)])(x)


cupy, cupyx = _build()


def install():
    """Make the fake the CUDA backend of this process (for tests); returns ember's CUDA backend."""
    from ember.backend import install_cuda
    return install_cuda(cupy, cupyx)


@contextlib.contextmanager
def current_device(i: int):
    with Device(i):
        yield
