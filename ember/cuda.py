"""`ember.cuda`: CUDA devices through CuPy, as `torch.cuda`.

CuPy is optional (`pip install 'ember[gpu]'` plus the `cupy-cuda12x`/`cupy-cuda13x` wheel for the
driver). It is imported on the first query, not with ember. Without CuPy, or with CuPy but no usable
GPU, `is_available()` is False, `device_count()` is 0, the memory queries return 0 (or `{}`) as
PyTorch's do, and anything that needs a device raises one `CUDAUnavailableError` saying why.

Ops run on CuPy's current device and current stream, as kernels do in CuPy: a process uses one GPU
at a time (`set_device`, or `with ember.cuda.device(i):`), the pattern of one process per GPU, and
`with ember.cuda.stream(s):` queues the ops of its block on stream `s`.

Memory statistics come from CuPy's default memory pool: "allocated" is the pool's used bytes (blocks
held by live arrays, rounded up to CuPy's 512-byte unit), "reserved" its total bytes (used plus cached
for reuse). Peaks and totals need to see every allocation: when the CUDA backend starts, ember wraps
CuPy's global allocator (`cupy.cuda.set_allocator`) with `_Tracker.malloc`, which reads the pool right
after each allocation, and turns CuPy's out-of-memory error into `OutOfMemoryError`.
"""
from __future__ import annotations

import collections
import warnings

from . import backend
from .backend import device as _device


class CUDAUnavailableError(RuntimeError, AssertionError):
    """There is no usable CUDA (no CuPy, no GPU, or EMBER_DISABLE_CUDA set); the message says which.

    A RuntimeError, as PyTorch built with CUDA raises on a machine without a GPU, and an AssertionError,
    as PyTorch's CPU-only build raises ("Torch not compiled with CUDA enabled"), so code written against
    either catches it."""


class OutOfMemoryError(RuntimeError):
    """A CUDA allocation failed: the device has no room left (`torch.cuda.OutOfMemoryError`, a RuntimeError).

    What ember raises is also an instance of CuPy's `cupy.cuda.memory.OutOfMemoryError` (a MemoryError), so
    code that catches CuPy's error keeps working."""


def _backend():
    return backend.cuda_backend()


def _require():
    """The CUDA backend, or CUDAUnavailableError saying why there is none."""
    try:
        return backend.require_cuda()
    except RuntimeError as e:
        raise CUDAUnavailableError(str(e)) from None


def is_available() -> bool:
    """True when CuPy is installed and sees at least one CUDA device."""
    return _backend() is not None


def is_initialized() -> bool:
    return backend.CUDA is not backend.UNSET and backend.CUDA is not None


def init() -> None:
    _require()


def device_count() -> int:
    be = _backend()
    return 0 if be is None else be.count


def _index(d) -> int:
    """A device index from an int, 'cuda:N', a device or None (the current device)."""
    be = _require()
    if d is None:
        return be.current()
    if isinstance(d, int):
        dev = _device("cuda", d)
    else:
        dev = _device(d)
        if dev.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {dev}")
    return backend.resolve(dev).index


def current_device() -> int:
    return _require().current()


def set_device(device) -> None:
    """Make `device` current: tensors created with device='cuda' go there and ops run there. A negative
    int is a no-op, as in PyTorch."""
    if isinstance(device, int) and device < 0:
        return
    _require().set_current(_index(device))


class device:
    """Context manager that makes device `d` current for its block (`with ember.cuda.device(1):`);
    None or a negative int leave the current device as it is."""

    def __init__(self, device) -> None:
        self.idx = None if device is None or (isinstance(device, int) and device < 0) else _index(device)
        self._ctx = None

    def __enter__(self):
        if self.idx is not None:
            self._ctx = _require().use(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
            self._ctx = None


def synchronize(device=None) -> None:
    """Wait until every kernel queued on `device` (default: the current one), on every stream, has finished."""
    _require().synchronize(_index(device))


# ---------------------------------------------------------------------------- device properties
class _CudaDeviceProperties:
    """What `get_device_properties` returns: PyTorch's attribute names over CuPy's `getDeviceProperties`."""

    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count", "L2_cache_size",
                 "max_threads_per_multi_processor", "warp_size", "is_integrated", "is_multi_gpu_board")

    def __init__(self, p: dict) -> None:
        name = p["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.major, self.minor = int(p["major"]), int(p["minor"])
        self.total_memory = int(p["totalGlobalMem"])
        self.multi_processor_count = int(p["multiProcessorCount"])
        self.L2_cache_size = int(p["l2CacheSize"])
        self.max_threads_per_multi_processor = int(p["maxThreadsPerMultiProcessor"])
        self.warp_size = int(p["warpSize"])
        self.is_integrated = int(p["integrated"])
        self.is_multi_gpu_board = int(p["isMultiGpuBoard"])

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory >> 20}MB, multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size >> 20}MB)")


def get_device_properties(device=None) -> _CudaDeviceProperties:
    """Name, compute capability (`major`, `minor`), `total_memory` in bytes, `multi_processor_count` and a few
    more of device `device` (default: the current one)."""
    return _CudaDeviceProperties(_require().properties(_index(device)))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    p = get_device_properties(device)
    return p.major, p.minor


def get_arch_list() -> list[str]:
    """The CUDA architectures ember's kernels run as, e.g. ['sm_90']; [] without CUDA. CuPy compiles its
    kernels at run time for the device at hand, so these are the architectures of the visible devices
    (PyTorch lists the ones its binary was built for)."""
    if not is_available():
        return []
    caps = sorted({get_device_capability(i) for i in range(device_count())})
    return [f"sm_{major}{minor}" for major, minor in caps]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current device runs bfloat16: natively from compute capability 8.0 (Ampere) on; with
    `including_emulation`, also wherever CuPy can hold bfloat16 arrays (it computes them in float32)."""
    if not is_available():
        return False
    if get_device_capability()[0] >= 8:
        return True
    if not including_emulation:
        return False
    from ._dtype import bfloat16
    if bfloat16.np is None:  # ml_dtypes is missing: no bfloat16 at all
        return False
    try:
        backend.CUDA.cp.zeros(1, dtype=bfloat16.np)
    except (TypeError, ValueError, NotImplementedError):
        return False
    return True


# ---------------------------------------------------------------------------- memory
def _fmt(n: int) -> str:
    """Bytes as PyTorch's memory messages write them: '512 B', '4.00 MiB', '1.50 GiB'."""
    if abs(n) < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if abs(n) < 1024:
            return f"{n:.2f} {unit}"
    return f"{n / 1024:.2f} TiB"


class _Tracker:
    """Sees every allocation made through CuPy's global allocator, which it wraps while the backend is
    installed, to keep what CuPy's pool cannot say afterwards: per device the peak of its used bytes
    ("allocated") and total bytes ("reserved"), the bytes allocated since the last
    `reset_accumulated_memory_stats` and the out-of-memory errors.

    The pool's used and total bytes grow only when a block is handed out, so reading them right after
    each allocation gives their exact maxima. Allocations that bypass the global allocator (a thread's
    own allocator from `cupy.cuda.using_allocator`, or one installed later with `cupy.cuda.set_allocator`)
    are not seen; the peaks then count only the values seen at allocations and at ember's queries."""

    def __init__(self, be) -> None:
        cuda = be.cp.cuda
        self.cuda = cuda
        self.pool = be.cp.get_default_memory_pool()
        self.inner = cuda.get_allocator()
        n = be.count
        self.peak, self.peak_reserved = [0] * n, [0] * n
        self.allocated, self.ooms = [0] * n, [0] * n
        self.start = [0] * n  # used bytes when the accumulated counts were last reset
        self.cupy_oom = cuda.memory.OutOfMemoryError
        # ember's OutOfMemoryError and CuPy's at once: `except` clauses written for either catch it
        self.oom_type = type("OutOfMemoryError", (OutOfMemoryError, self.cupy_oom),
                             {"__init__": Exception.__init__, "__module__": __name__,
                              "__reduce__": lambda e: (OutOfMemoryError, e.args)})
        cuda.set_allocator(self.malloc)

    def malloc(self, size: int):
        try:
            mem = self.inner(size)
        except self.cupy_oom as e:
            d = self.cuda.runtime.getDevice()
            self.ooms[d] += 1
            used, total = self.pool.used_bytes(), self.pool.total_bytes()
            raise self.oom_type(
                f"CUDA out of memory. Tried to allocate {_fmt(size)} on cuda:{d}: {_fmt(used)} is held by live "
                f"tensors and {_fmt(total - used)} is cached by CuPy's memory pool ({str(e).rstrip('.')}). Free the "
                f"tensors you no longer need (del), call ember.cuda.empty_cache(), or use a smaller batch") from None
        d = mem.device_id
        self.allocated[d] += mem.mem.size
        used = self.pool.used_bytes()
        if used > self.peak[d]:
            self.peak[d] = used
        total = self.pool.total_bytes()
        if total > self.peak_reserved[d]:
            self.peak_reserved[d] = total
        return mem

    def detach(self) -> None:
        """Give CuPy back the allocator it had (unless the program has replaced ours since)."""
        if self.cuda.get_allocator() == self.malloc:
            self.cuda.set_allocator(self.inner)


_TRACKER: _Tracker | None = None


def _on_backend_change() -> None:
    """Follow the CUDA backend (ember.backend calls this when it is installed or forgotten)."""
    global _TRACKER
    if _TRACKER is not None:
        _TRACKER.detach()
        _TRACKER = None
    if is_initialized():
        _TRACKER = _Tracker(backend.CUDA)


backend.RESET_HOOKS.append(_on_backend_change)


def memory_stats(device=None) -> collections.OrderedDict:
    """Memory statistics of `device` (default: the current one), under PyTorch's key names; empty before
    CUDA is first used, or without CUDA, as in PyTorch.

    - `allocated_bytes.all.current`: bytes of CuPy's memory pool held by live arrays (`memory_allocated`);
      `.peak`: its largest value since the backend started or the last `reset_peak_memory_stats`, read
      right after every allocation (see `_Tracker` for the allocations it cannot see);
      `.allocated` / `.freed`: bytes handed out / given back since the last `reset_accumulated_memory_stats`.
    - `active_bytes.all.*`: the same numbers (CuPy reuses a freed block at once: no block is freed but
      still in use, which is what PyTorch's "active" adds).
    - `reserved_bytes.all.current` / `.peak`: the pool's total bytes (used and cached), now and at most.
    - `num_ooms`: out-of-memory errors since the last `reset_accumulated_memory_stats`.
    """
    if not is_initialized():
        return collections.OrderedDict()
    d = _index(device)
    be, t = backend.CUDA, _TRACKER
    used, total = be.memory_allocated(d), be.memory_reserved(d)
    t.peak[d], t.peak_reserved[d] = max(t.peak[d], used), max(t.peak_reserved[d], total)
    allocated = {"current": used, "peak": t.peak[d], "allocated": t.allocated[d],
                 "freed": t.start[d] + t.allocated[d] - used}
    stats = {f"{kind}_bytes.all.{k}": v for kind in ("allocated", "active") for k, v in allocated.items()}
    stats.update({"reserved_bytes.all.current": total, "reserved_bytes.all.peak": t.peak_reserved[d],
                  "num_ooms": t.ooms[d]})
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA arrays on the device (CuPy's memory pool, used part); 0 before CUDA is
    first used, or without CUDA, as in PyTorch (so memory logging runs unchanged on a CPU machine)."""
    if not is_initialized():
        return 0
    return backend.CUDA.memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds from the driver, used or cached for reuse (0 as `memory_allocated`)."""
    if not is_initialized():
        return 0
    return backend.CUDA.memory_reserved(_index(device))


def max_memory_allocated(device=None) -> int:
    """The peak of `memory_allocated(device)` since the backend started or the last `reset_peak_memory_stats`
    (`memory_stats` says how it is measured); 0 without CUDA."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def max_memory_reserved(device=None) -> int:
    """The peak of `memory_reserved(device)`, as `max_memory_allocated`; 0 without CUDA."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks of `device` (allocated and reserved) again from their current values."""
    d = _index(device)
    be = backend.CUDA
    _TRACKER.peak[d], _TRACKER.peak_reserved[d] = be.memory_allocated(d), be.memory_reserved(d)


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated, as in PyTorch: `reset_peak_memory_stats`, which resets every peak."""
    warnings.warn("ember.cuda.reset_max_memory_allocated now calls ember.cuda.reset_peak_memory_stats, which "
                  "resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Zero the counts that accumulate (`allocated_bytes.all.allocated`/`.freed`, `num_ooms`) of `device`."""
    d = _index(device)
    _TRACKER.allocated[d] = _TRACKER.ooms[d] = 0
    _TRACKER.start[d] = backend.CUDA.memory_allocated(d)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A printable table of `memory_stats(device)`: current, peak, allocated and freed bytes. `abbreviated`
    is accepted for PyTorch's signature (the table is short either way)."""
    _require()
    d = _index(device)
    s = memory_stats(d)
    rows = [("Allocated memory", *(_fmt(s[f"allocated_bytes.all.{k}"]) for k in ("current", "peak", "allocated",
                                                                                   "freed"))),
            ("Reserved memory", _fmt(s["reserved_bytes.all.current"]), _fmt(s["reserved_bytes.all.peak"]), "", "")]
    line = "|" + "=" * 75 + "|"
    title, ooms = f"ember CUDA memory summary, device cuda:{d}", f" CUDA OOMs: {s['num_ooms']}"
    out = [line, f"|{title:^75}|", "|" + "-" * 75 + "|", f"|{ooms:<75}|", line,
           f"| {'Metric':<19}|{'Cur Usage':^13}|{'Peak Usage':^13}|{'Tot Alloc':^13}|{'Tot Freed':^12}|",
           "|" + "-" * 75 + "|"]
    out += [f"| {r[0]:<19}|{r[1]:^13}|{r[2]:^13}|{r[3]:^13}|{r[4]:^12}|" for r in rows]
    out.append(line)
    return "\n".join(out) + "\n"


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of `device` as the driver reports them (cudaMemGetInfo): memory cached by CuPy's
    pool counts as used there."""
    be = _require()
    with be.use(_index(device)):
        free, total = be.cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def empty_cache() -> None:
    """Return the memory pools' cached, unused blocks to the driver."""
    if is_initialized():
        backend.CUDA.empty_cache()


# ---------------------------------------------------------------------------- streams and events
class Stream:
    """A CUDA stream: a queue of kernels that run in order (`cupy.cuda.Stream` underneath, created
    non-blocking as PyTorch's are, so it does not wait for the default stream). Lower `priority` runs
    first; CUDA clamps it to the device's range."""

    def __init__(self, device=None, priority: int = 0) -> None:
        be = _require()
        self.device_index = _index(device)
        with be.use(self.device_index):
            self._cp = be.cp.cuda.Stream(non_blocking=True, priority=int(priority))

    @classmethod
    def _wrap(cls, cp_stream, index: int) -> "Stream":
        s = object.__new__(cls)
        s._cp, s.device_index = cp_stream, index
        return s

    @property
    def device(self) -> _device:
        return _device("cuda", self.device_index)

    @property
    def cuda_stream(self) -> int:
        """The raw `cudaStream_t` handle (0 for the default stream)."""
        return int(self._cp.ptr)

    @property
    def priority(self) -> int:
        return int(self._cp.priority)

    def wait_event(self, event: "Event") -> None:
        """Work queued on this stream from now on waits until `event` has happened."""
        self._cp.wait_event(event._cp)

    def wait_stream(self, stream: "Stream") -> None:
        """Work queued on this stream from now on waits for all the work queued on `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record `event` (a new one when None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        """True when all the work queued on this stream has finished."""
        return bool(self._cp.done)

    def synchronize(self) -> None:
        """Wait until all the work queued on this stream has finished."""
        self._cp.synchronize()

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream \
            and other.device_index == self.device_index

    def __hash__(self) -> int:
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self) -> str:
        return f"<ember.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event: a marker recorded on a stream, to wait for, query, or time the work between two of them
    (`cupy.cuda.Event` underneath). `enable_timing` is needed for `elapsed_time`; `blocking` makes
    `synchronize` sleep instead of spin; `interprocess` events cannot time."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        be = _require()
        if interprocess and enable_timing:
            raise ValueError("Event(): an interprocess event cannot time (CUDA does not allow it); pass "
                             "enable_timing=False")
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, interprocess
        self._cp = be.cp.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)
        self._recorded = False

    @property
    def cuda_event(self) -> int:
        """The raw `cudaEvent_t` handle."""
        return int(self._cp.ptr)

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on `stream` (default: the current stream): it happens when the work queued
        there before it has finished."""
        stream = current_stream() if stream is None else stream
        self._cp.record(stream._cp)
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Make `stream` (default: the current stream) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """True when the work recorded before the event has finished (or it was never recorded)."""
        return bool(self._cp.done)

    def synchronize(self) -> None:
        """Wait until the event has happened."""
        self._cp.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to `end_event`, once both have happened (it waits for them)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time(): both events must be created with enable_timing=True "
                               f"(this one has {self.enable_timing}, end_event has {end_event.enable_timing})")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Event.elapsed_time(): both events must be recorded before calculating elapsed "
                               "time: call .record() on each")
        self.synchronize()
        end_event.synchronize()
        return float(backend.CUDA.cp.cuda.get_elapsed_time(self._cp, end_event._cp))

    def __repr__(self) -> str:
        return f"<ember.cuda.Event {self.cuda_event:#x}>"


def current_stream(device=None) -> Stream:
    """The stream ops on `device` (default: the current device) are queued on now."""
    be = _require()
    d = _index(device)
    return Stream._wrap(be.cp.cuda.get_current_stream(d), d)


def default_stream(device=None) -> Stream:
    """The default (legacy NULL) stream of `device`, the current stream unless another is set."""
    be = _require()
    return Stream._wrap(be.cp.cuda.Stream.null, _index(device))


def set_stream(stream: Stream | None) -> None:
    """Make `stream` the current stream of its device (None: a no-op). Prefer `with ember.cuda.stream(s):`."""
    if stream is None:
        return
    with _require().use(stream.device_index):
        stream._cp.use()


class StreamContext:
    """`with ember.cuda.stream(s):` — the ops of the block are queued on `s` (whose device is made current
    for the block); None leaves everything as it is."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._dev = None

    def __enter__(self) -> None:
        if self.stream is None:
            return
        self._dev = _require().use(self.stream.device_index)
        self._dev.__enter__()
        self.stream._cp.__enter__()

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        self.stream._cp.__exit__(*exc)
        self._dev.__exit__(*exc)
        self._dev = None


def stream(stream: Stream | None) -> StreamContext:
    """A context manager that queues the ops of its block on `stream` (see `StreamContext`)."""
    return StreamContext(stream)


# ---------------------------------------------------------------------------- random numbers
def _gens():
    from ._creation import cuda_generators
    return cuda_generators()


def default_generator(d=None):
    """The default Generator of CUDA device `d` (ember.Generator with device 'cuda:N')."""
    i = _index(d)  # first: without CUDA, its error is this module's
    return _gens()[i]


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (lazily, when CUDA is unavailable: a no-op then)."""
    if is_available():
        default_generator().manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator; remembered for devices first used later."""
    from ._creation import seed_cuda
    seed_cuda(seed)


def seed() -> None:
    if is_available():
        default_generator().seed()


def seed_all() -> None:
    if is_available():
        for g in _gens():
            g.seed()


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The state of a CUDA device's generator as a uint8 Tensor (see `Generator.get_state`)."""
    return default_generator(device).get_state()


def set_rng_state(new_state, device="cuda") -> None:
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in _gens()]


def set_rng_state_all(new_states) -> None:
    for g, s in zip(_gens(), new_states):
        g.set_state(s)


# ---------------------------------------------------------------------------- amp
# `ember.cuda.amp`: torch.cuda.amp's deprecated spellings of ember.amp. This module is not a package, so the amp
# module is registered under its dotted name for `from ember.cuda.amp import GradScaler` to import it.
from .amp import _cuda as amp  # noqa: E402
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".amp"] = amp
