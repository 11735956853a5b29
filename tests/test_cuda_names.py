"""`ember.cuda` names that scripts call unconditionally: memory statistics, streams, events, device
properties, and what each does without a GPU (PyTorch's CPU build is the oracle where installed).

The CUDA tests run on a real GPU when CuPy sees one, otherwise on tests/_fakecuda.py (CuPy's interface,
NumPy underneath, where every kernel has finished by the time it returns).
"""
from __future__ import annotations

import collections
import warnings

import pytest

import ember
from ember import backend
from helpers import torch

C = ember.cuda
MiB = 1 << 20


@pytest.fixture
def no_cuda(monkeypatch):
    """A process with no usable CUDA (as without CuPy or without a GPU)."""
    before = backend.CUDA
    backend.uninstall_cuda()
    monkeypatch.setenv("EMBER_DISABLE_CUDA", "1")
    yield
    backend.uninstall_cuda()
    if before is not backend.UNSET and before is not None:
        backend.install_cuda(before.cp, before.cpx)


@pytest.fixture
def gpu(cuda):
    """CUDA (real or fake) with its memory statistics started afresh."""
    ember.cuda.empty_cache()
    C.reset_peak_memory_stats()
    C.reset_accumulated_memory_stats()
    return backend.CUDA


def _on_device(n_floats: int):
    """A float32 tensor of `n_floats` elements on the current CUDA device, realised (not deferred by lazy mode)."""
    t = ember.ones(n_floats, device="cuda")
    t.sum().item()
    return t


# ---------------------------------------------------------------------------- without a GPU
RETURNS = {  # name -> (call, what PyTorch's CPU build returns)
    "is_available": (lambda c: c.is_available(), False),
    "device_count": (lambda c: c.device_count(), 0),
    "is_initialized": (lambda c: c.is_initialized(), False),
    "memory_allocated": (lambda c: c.memory_allocated(), 0),
    "max_memory_allocated": (lambda c: c.max_memory_allocated(), 0),
    "memory_reserved": (lambda c: c.memory_reserved(), 0),
    "max_memory_reserved": (lambda c: c.max_memory_reserved(), 0),
    "memory_stats": (lambda c: c.memory_stats(), collections.OrderedDict()),
    "empty_cache": (lambda c: c.empty_cache(), None),
    "get_arch_list": (lambda c: c.get_arch_list(), []),
    "is_bf16_supported": (lambda c: c.is_bf16_supported(), False),
    "is_bf16_supported(False)": (lambda c: c.is_bf16_supported(including_emulation=False), False),
    "set_device(-1)": (lambda c: c.set_device(-1), None),
    "with device(-1)": (lambda c: c.device(-1).__enter__() and None, None),
    "set_stream(None)": (lambda c: c.set_stream(None), None),
    "with stream(None)": (lambda c: c.stream(None).__enter__(), None),
    "manual_seed": (lambda c: c.manual_seed(1), None),
    "manual_seed_all": (lambda c: c.manual_seed_all(1), None),
    "seed": (lambda c: c.seed(), None),
    "seed_all": (lambda c: c.seed_all(), None),
}


@pytest.mark.parametrize("name", list(RETURNS))
def test_without_gpu_these_return_what_pytorch_returns(no_cuda, name):
    call, want = RETURNS[name]
    got = call(C)
    assert got == want and type(got) is type(want)
    if torch is not None and not torch.cuda.is_available():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert call(torch.cuda) == want


RAISES = {  # PyTorch's CPU build raises for these: AssertionError("Torch not compiled with CUDA enabled") mostly
    "current_device": lambda c: c.current_device(),
    "synchronize": lambda c: c.synchronize(),
    "get_device_properties": lambda c: c.get_device_properties(0),
    "get_device_capability": lambda c: c.get_device_capability(),
    "get_device_name": lambda c: c.get_device_name(),
    "mem_get_info": lambda c: c.mem_get_info(),
    "current_stream": lambda c: c.current_stream(),
    "default_stream": lambda c: c.default_stream(),
    "Stream": lambda c: c.Stream(),
    "Stream(priority=-1)": lambda c: c.Stream(priority=-1),
    "Event": lambda c: c.Event(),
    "Event(enable_timing=True)": lambda c: c.Event(enable_timing=True),
    "reset_peak_memory_stats": lambda c: c.reset_peak_memory_stats(),
    "reset_accumulated_memory_stats": lambda c: c.reset_accumulated_memory_stats(),
    "memory_summary": lambda c: c.memory_summary(),
    "initial_seed": lambda c: c.initial_seed(),
    "set_device(0)": lambda c: c.set_device(0),
}


@pytest.mark.parametrize("name", list(RAISES))
def test_without_gpu_these_raise_one_clear_error(no_cuda, name):
    """Both a RuntimeError (PyTorch with CUDA, no GPU) and an AssertionError (PyTorch's CPU-only build)."""
    with pytest.raises(RuntimeError, match="CUDA is not available: CUDA is disabled by EMBER_DISABLE_CUDA") as info:
        RAISES[name](C)
    assert isinstance(info.value, AssertionError) and isinstance(info.value, C.CUDAUnavailableError)
    if torch is not None and not torch.cuda.is_available():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # its CPU build raises AssertionError, RuntimeError, or for a few an internal AttributeError/KeyError
            with pytest.raises((AssertionError, RuntimeError, AttributeError, KeyError)):
                RAISES[name](torch.cuda)


def test_out_of_memory_error_is_pytorchs_shape():
    assert issubclass(C.OutOfMemoryError, RuntimeError)
    if torch is not None:
        assert issubclass(torch.cuda.OutOfMemoryError, RuntimeError)


# ---------------------------------------------------------------------------- memory statistics
def test_peak_and_current_follow_allocations(gpu):
    base = C.memory_allocated()
    a = _on_device(MiB)  # 4 MiB
    b = _on_device(MiB)
    both = C.memory_allocated()
    assert both >= base + 8 * MiB
    del b
    assert C.memory_allocated() <= both - 4 * MiB
    assert C.max_memory_allocated() >= both  # the peak remembers b
    assert C.max_memory_reserved() >= C.memory_reserved() >= C.memory_allocated()
    C.reset_peak_memory_stats()
    assert C.max_memory_allocated() == C.memory_allocated()
    c = _on_device(2 * MiB)  # 8 MiB, allocated and freed between two queries: only the allocator saw the peak
    del c
    assert C.max_memory_allocated() >= C.memory_allocated() + 8 * MiB
    del a


def test_memory_stats_keys_and_accumulated_counts(gpu):
    s0 = C.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed", "active_bytes.all.current", "active_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak", "num_ooms"):
        assert isinstance(s0[key], int)
    assert list(s0) == sorted(s0) and isinstance(s0, collections.OrderedDict)
    t = _on_device(MiB)
    del t
    s = C.memory_stats()
    assert s["allocated_bytes.all.allocated"] >= s0["allocated_bytes.all.allocated"] + 4 * MiB
    assert s["allocated_bytes.all.freed"] >= s0["allocated_bytes.all.freed"] + 4 * MiB
    # current = what was there at the reset + allocated since - freed since
    assert s["allocated_bytes.all.current"] == (s0["allocated_bytes.all.current"] + s["allocated_bytes.all.allocated"]
                                                - s["allocated_bytes.all.freed"])
    assert s["allocated_bytes.all.current"] == C.memory_allocated() == s["active_bytes.all.current"]
    C.reset_accumulated_memory_stats()
    s = C.memory_stats()
    assert s["allocated_bytes.all.allocated"] == s["allocated_bytes.all.freed"] == s["num_ooms"] == 0


def test_reset_max_memory_allocated_is_deprecated(gpu):
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        C.reset_max_memory_allocated()
    assert C.max_memory_allocated() == C.memory_allocated()


def test_memory_summary_and_mem_get_info(gpu):
    t = _on_device(MiB)
    text = C.memory_summary()
    assert "device cuda:0" in text and "Allocated memory" in text and "Reserved memory" in text
    assert "MiB" in text and "CUDA OOMs: 0" in text
    free, total = C.mem_get_info()
    assert 0 <= free <= total == C.get_device_properties(0).total_memory
    del t


def test_out_of_memory_is_ember_and_cupy_error(gpu):
    pool = gpu.cp.get_default_memory_pool()
    limit = pool.get_limit()
    pool.set_limit(size=C.memory_reserved() + 8 * MiB)
    try:
        with pytest.raises(C.OutOfMemoryError, match=r"CUDA out of memory\. Tried to allocate 64\.00 MiB on cuda:0") \
                as info:
            _on_device(16 * MiB)
    finally:
        pool.set_limit(size=limit)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, MemoryError)
    assert isinstance(info.value, gpu.cp.cuda.memory.OutOfMemoryError)
    assert C.memory_stats()["num_ooms"] == 1


def test_the_allocator_is_given_back(cuda):
    cp = backend.CUDA.cp
    from ember.cuda import _TRACKER
    assert cp.cuda.get_allocator() == _TRACKER.malloc
    backend.uninstall_cuda()
    assert cp.cuda.get_allocator() == _TRACKER.inner


# ---------------------------------------------------------------------------- devices
def test_device_properties(gpu):
    p = C.get_device_properties(0)
    assert isinstance(p.name, str) and p.name == C.get_device_name(0) == C.get_device_name()
    assert (p.major, p.minor) == C.get_device_capability(0) and p.major >= 3
    assert p.total_memory > 0 and p.multi_processor_count > 0 and p.warp_size == 32
    assert "total_memory=" in repr(p) and p.name in repr(p)
    assert C.get_arch_list() == sorted({f"sm_{a}{b}" for a, b in (C.get_device_capability(i)
                                                                  for i in range(C.device_count()))})
    assert C.is_bf16_supported(including_emulation=False) == (p.major >= 8)
    assert isinstance(C.is_bf16_supported(), bool)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        C.get_device_properties(C.device_count())
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        C.get_device_properties("cpu")


def test_set_device_and_device_context(gpu):
    C.set_device(-1)  # a no-op, as in PyTorch
    assert C.current_device() == 0
    last = C.device_count() - 1
    with C.device(last):
        assert C.current_device() == last
    with C.device(-1), C.device(None):
        assert C.current_device() == 0
    C.set_device(f"cuda:{last}")
    try:
        assert C.current_device() == last
    finally:
        C.set_device(0)
    C.synchronize(0)
    C.synchronize(ember.device("cuda", last))


# ---------------------------------------------------------------------------- streams and events
def test_streams(gpu):
    default = C.default_stream()
    assert default.cuda_stream == 0 and C.current_stream() == default and default.device == ember.device("cuda:0")
    s = C.Stream()
    hi = C.Stream(priority=-1)
    assert s != default and s.cuda_stream != 0 and s.priority == 0 and hi.priority <= -1
    assert hash(s) == hash(C.Stream._wrap(s._cp, 0)) and s == C.Stream._wrap(s._cp, 0)
    assert repr(s).startswith("<ember.cuda.Stream device=cuda:0 cuda_stream=0x")
    with C.stream(s):
        assert C.current_stream() == s
        x = ember.arange(4.0, device="cuda") * 2  # queued on s
    assert C.current_stream() == default
    default.wait_stream(s)
    s.synchronize()
    assert s.query() is True and x.tolist() == [0.0, 2.0, 4.0, 6.0]
    C.set_stream(s)
    try:
        assert C.current_stream() == s
    finally:
        C.set_stream(default)
    assert C.current_stream() == default


def test_stream_of_another_device_makes_it_current(gpu):
    if C.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    s = C.Stream(device=1)
    assert s.device_index == 1 and C.current_stream(1) != s
    with C.stream(s):
        assert C.current_device() == 1 and C.current_stream() == s
    assert C.current_device() == 0 and C.current_stream(1) != s


def test_events_time_and_order_work(gpu):
    start, end = C.Event(enable_timing=True), C.Event(enable_timing=True)
    assert start.query() is True  # never recorded: nothing to wait for
    start.record()
    y = _on_device(1 << 16) * 3
    end.record()
    end.synchronize()
    assert end.query() is True
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    s = C.Stream()
    ev = s.record_event()
    assert isinstance(ev, C.Event) and ev.cuda_event != 0 and repr(ev).startswith("<ember.cuda.Event 0x")
    ev.wait()  # the current stream waits for s
    s.wait_event(end)
    plain = C.Event()
    assert s.record_event(plain) is plain
    del y


def test_event_errors(gpu):
    a, b = C.Event(enable_timing=True), C.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match=r"elapsed_time\(\): both events must be created with enable_timing=True"):
        a.elapsed_time(b)
    c = C.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match=r"elapsed_time\(\): both events must be recorded"):
        a.elapsed_time(c)
    with pytest.raises(ValueError, match="interprocess event cannot time"):
        C.Event(enable_timing=True, interprocess=True)
    assert C.Event(interprocess=True).interprocess
