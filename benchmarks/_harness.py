"""What every workload shares: thread pinning, the idle wait, interleaved timing, the machine's load, summaries.

A workload is a dict {implementation: step}, each step a zero-argument callable running one full
step on data bound inside it. `interleave` times the implementations repeat by repeat in rotating
order (so drift in machine speed hits all alike), gc off while timing, as timeit does; a sample is
the mean over enough consecutive steps to last `sample_s`. Before every sample it waits, untimed,
until the other threads of the process are idle (`wait_idle`): each library keeps its own default
thread-pool policy, and a pool still spinning after its own block cannot steal from the next one.
Throughput ratios are the medians of the per-repeat ratios of paired samples. `measure` also
records how much CPU other processes used while it ran (`load_between`) and flags it above
`OTHERS_LIMIT`.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

IMPLS = ("ember", "numpy", "pytorch")
COMPILED = "compiled"  # PyTorch with torch.compile(model): an extra column where asked for and where it works
# ember.compile: `model = ember.compile(model)`, and the whole step compiled (for inference: the compiled no_grad
# forward); columns where asked for (benchmarks/ember_compile.py builds them: no ember import here)
EMBER_MODEL, EMBER_STEP = "ember-compile-model", "ember-compile-step"
EMBER_COMPILED = (EMBER_MODEL, EMBER_STEP)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")
# How idle OpenMP workers wait. Left at each runtime's default: PASSIVE made PyTorch's workers sleep
# after every parallel region and wake slowly for the next (its W3 step ran faster on 1 thread than on 2).
WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")

OTHERS_LIMIT = 0.25  # CPU cores other processes may use during a timing block before it is flagged
LOAD_LIMIT_PER_CORE = 0.75  # 1-minute load average per core at the start of a run (1.5 on 2 cores)
IDLE_CPU_FRACTION = 0.05  # other threads using less than this share of a poll interval count as idle
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def thread_env(threads: int, env: dict | None = None) -> dict:
    """The environment pinning every BLAS/OpenMP pool to `threads` (read once, when NumPy/PyTorch load),
    with no wait-policy override: each runtime idles its workers its own default way."""
    env = dict(os.environ if env is None else env)
    for var in THREAD_VARS:
        env[var] = str(threads)
    for var in WAIT_VARS:
        env.pop(var, None)
    return env


# ---------------------------------------------------------------------- the idle wait
def _thread_activity() -> tuple[int, float] | None:
    """(how many threads of this process other than the caller are runnable now, their total CPU seconds),
    or None where /proc/self/task cannot be read (not Linux)."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    running, cpu = 0, 0.0
    for tid in tids:
        if int(tid) == me:
            continue
        base = f"/proc/self/task/{tid}/"
        try:
            with open(base + "stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended after listdir
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # after "(comm)", which may hold spaces
        running += fields[0] == b"R"
        try:
            with open(base + "schedstat", "rb") as f:
                cpu += int(f.read().split()[0]) / 1e9  # nanoseconds: far finer than stat's clock ticks
        except (OSError, ValueError, IndexError):
            cpu += (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime
    return running, cpu


def wait_idle(timeout: float = 1.0, interval: float = 0.003, settle: int = 2) -> bool:
    """Return once the other threads of this process have been idle for `settle` consecutive polls about
    `interval` s apart: none of them runnable, and their CPU time grown by less than IDLE_CPU_FRACTION of
    the time between polls. True when they were; False when `timeout` s passed first, or at once (True)
    where threads cannot be observed.

    A runnable thread counts as busy even when another process keeps it off the CPU, so load from
    elsewhere cannot make a spinning pool look idle."""
    prev = _thread_activity()
    if prev is None:
        return True
    start = last = time.perf_counter()
    quiet = 0
    while quiet < settle:
        if time.perf_counter() - start > timeout:
            return False
        time.sleep(interval)
        cur, now = _thread_activity(), time.perf_counter()
        # abs: a thread that exits takes its CPU time out of the sum; that too is a change
        idle = cur[0] == 0 and abs(cur[1] - prev[1]) < IDLE_CPU_FRACTION * (now - last)
        quiet = quiet + 1 if idle else 0
        prev, last = cur, now
    return True


# ---------------------------------------------------------------------- the machine's load
class LoadSnapshot(NamedTuple):
    wall: float  # time.perf_counter()
    busy: float | None  # CPU seconds the whole machine spent busy since boot (/proc/stat), None unknown
    mine: float  # CPU seconds this process used
    loadavg: float | None  # 1-minute load average


def load_snapshot() -> LoadSnapshot:
    busy = None
    try:
        with open("/proc/stat") as f:
            # cpu  user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait;
            # steal (a hypervisor running other guests) is CPU other work took from us, so it counts
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return LoadSnapshot(time.perf_counter(), busy, time.process_time(), load)


def load_between(a: LoadSnapshot, b: LoadSnapshot) -> dict:
    """The load of the machine from `a` to `b`: `others_cores`, the CPU other processes used on average
    (machine busy time less this process's, per second of wall time: 1.0 is one core kept busy; None
    where /proc/stat is missing), the 1-minute load averages at both ends (they include this process's
    own threads, so they are a record, not the test), and `under_load`: others_cores > OTHERS_LIMIT."""
    others = None
    if a.busy is not None and b.busy is not None and b.wall > a.wall:
        others = max(0.0, (b.busy - a.busy) - (b.mine - a.mine)) / (b.wall - a.wall)
    return {"others_cores": None if others is None else round(others, 3), "loadavg": [a.loadavg, b.loadavg],
            "seconds": round(b.wall - a.wall, 2), "under_load": others is not None and others > OTHERS_LIMIT}


def busy_at_start(loadavg: float | None, cores: int | None) -> bool:
    """Whether a run starts on a busy machine: load average above LOAD_LIMIT_PER_CORE per core."""
    return loadavg is not None and loadavg > LOAD_LIMIT_PER_CORE * (cores or 1)


# ---------------------------------------------------------------------- progress
class Progress:
    """What a long benchmark process is doing, on stderr: a tqdm bar (one tick per `unit`: a timed sample,
    or a process; the phase as its description, the implementation and repeat as its postfix) where tqdm
    is installed and stderr is a terminal; else one plain line per phase."""

    def __init__(self, total: int, label: str, unit: str = "sample") -> None:
        self.label, self._bar = label, None
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is optional
            return
        bar = tqdm(total=total, desc=label, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True,
                   leave=False)
        self._bar = None if bar.disable else bar  # disable=None: off when stderr is not a terminal

    def phase(self, text: str) -> None:
        """A new phase (a workload, a table row) begins."""
        if self._bar is None:
            print(f"[bench] {self.label}: {text}...", file=sys.stderr, flush=True)
        else:
            self._bar.set_description_str(f"{self.label}: {text}", refresh=False)
            self._bar.set_postfix_str("", refresh=True)

    def doing(self, text: str) -> None:
        """What runs now within the phase (implementation, repeat); shown on the bar only."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def drop(self, n: int) -> None:
        """`n` planned samples will not run (a case that could not be built)."""
        if self._bar is not None:
            self._bar.total -= n
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# ---------------------------------------------------------------------- timing
@dataclass(frozen=True)
class Skipped:
    """An implementation that has no step here, and one short line saying why (shown in its cell)."""
    reason: str


def one_line(e: BaseException, limit: int = 120) -> str:
    """An exception as one short line: its type and the start of its message, whitespace collapsed."""
    text = f"{type(e).__name__}: {' '.join(str(e).split())}".rstrip(": ")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def compiled(make: Callable[[], Callable[[], object]], calls: int = 2) -> Callable[[], object] | Skipped:
    """The step `make()` builds around a torch.compile'd model, compiled here and not in a timed block:
    torch.compile compiles on the first call (forward, and the backward during it) and the second call
    catches a recompile (the optimizer's state appears after the first). The seconds that took are the
    step's attribute `compile_s`. Any failure (no C++ compiler, a Python dynamo does not support, a graph
    it cannot trace) returns Skipped with one short line instead of raising."""
    t0 = time.perf_counter()
    try:
        step = make()
        for _ in range(calls):
            step()
    except Exception as e:  # dynamo and inductor raise many types of their own
        return Skipped(one_line(e))
    step.compile_s = round(time.perf_counter() - t0, 1)
    return step


def _calibrate(fn: Callable[[], object], sample_s: float) -> int:
    """Steps per sample: enough for `sample_s` seconds, judged from the fastest of three single steps."""
    best = min(_run(fn, 1) for _ in range(3))
    return max(1, round(sample_s / max(best, 1e-7)))


def _run(fn: Callable[[], object], steps: int) -> float:
    """Seconds per step over `steps` consecutive calls, gc disabled."""
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - t0) / steps
    finally:
        gc.enable()


def interleave(cases: dict[str, Callable[[], object]], repeats: int, sample_s: float = 0.1, warmup: int = 2,
               progress: Progress | None = None) -> tuple[dict[str, list[float]], dict]:
    """Seconds per step of each case, `repeats` samples each, the cases rotating their order each repeat,
    each calibration and sample started after `wait_idle`. Also returns the waits: how many, how many
    timed out, their total seconds (never inside a sample)."""
    idle = {"waits": 0, "timeouts": 0, "wait_s": 0.0}

    def quiet() -> None:
        t0 = time.perf_counter()
        idle["timeouts"] += not wait_idle()
        idle["waits"] += 1
        idle["wait_s"] += time.perf_counter() - t0

    for k, fn in cases.items():  # first calls fill caches, allocator arenas, optimizer state, BLAS pools
        if progress:
            progress.doing(f"{k} warm-up")
        _run(fn, warmup)
    steps = {}
    for k, fn in cases.items():
        quiet()
        steps[k] = _calibrate(fn, sample_s)
    names = list(cases)
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            if progress:
                progress.doing(f"{k} · repeat {r + 1}/{repeats}")
            quiet()
            samples[k].append(_run(cases[k], steps[k]))
            if progress:
                progress.advance()
    idle["wait_s"] = round(idle["wait_s"], 3)
    return samples, idle


def summarize(samples: dict[str, list[float]], items: int, reference: str = "ember") -> dict:
    """Per case: items/s (median, min, max), step ms (median) and every sample (ms); then
    `reference`/other throughput ratios."""
    out: dict = {}
    for k, v in samples.items():
        med = statistics.median(v)
        out[k] = {"per_s": items / med, "min": items / max(v), "max": items / min(v), "ms": med * 1e3,
                  "samples_ms": [round(s * 1e3, 4) for s in v]}
    if reference in samples:
        ref = samples[reference]
        out["ratios"] = {other: statistics.median(o / e for e, o in zip(ref, samples[other]))
                         for other in samples if other != reference}
    return out


def measure(cases: dict[str, Callable[[], object] | Skipped], items: int, repeats: int, sample_s: float = 0.1,
            progress: Progress | None = None) -> dict:
    """interleave + summarize, with `load` (load_between over the whole measurement, waits included:
    other processes busy then compete too) and `idle_wait`; a Skipped case is {"skipped": reason}, a
    compiled one carries its `compile_s`."""
    runnable = {k: v for k, v in cases.items() if not isinstance(v, Skipped)}
    if progress:
        progress.drop(repeats * (len(cases) - len(runnable)))
    before = load_snapshot()
    samples, idle = interleave(runnable, repeats, sample_s, progress=progress)
    out = summarize(samples, items)
    out["load"] = load_between(before, load_snapshot())
    out["idle_wait"] = idle
    for k, v in cases.items():
        if isinstance(v, Skipped):
            out[k] = {"skipped": v.reason}
        elif getattr(v, "compile_s", None) is not None:
            out[k]["compile_s"] = v.compile_s
    return out


def import_torch(impls) -> object | None:
    """PyTorch when "pytorch" is among `impls` and it is installed, else None."""
    if "pytorch" not in impls:
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


def in_order(cases: dict) -> dict:
    """`cases` in the order of IMPLS (extra entries after them)."""
    return {k: cases[k] for k in sorted(cases, key=lambda k: IMPLS.index(k) if k in IMPLS else len(IMPLS))}


def step_function(model, opt, loss_fn) -> Callable:
    """One training step in ember or PyTorch (the same API) as a function of the batch: `step(x, y)` zeroes the
    grads, computes the loss, backpropagates, updates and returns the detached loss."""
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def train_step(model, opt, loss_fn, x, y) -> Callable[[], object]:
    """`step_function` on a fixed batch, as a zero-argument step."""
    step = step_function(model, opt, loss_fn)
    return lambda: step(x, y)


def synced(step: Callable[[], object], device: str, lib) -> Callable[[], object]:
    """`step` followed by waiting for `device` with `lib.cuda.synchronize` (lib: ember or torch), so that a
    timing counts the work a GPU queued, not only its launch; `step` itself on the CPU."""
    if device == "cpu":
        return step
    sync = lib.cuda.synchronize

    def run():
        out = step()
        sync()
        return out
    return run
