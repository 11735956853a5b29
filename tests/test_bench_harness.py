"""benchmarks/_harness.py and the suite's report: the idle wait, the load record and its flag, the
torch.compile column, progress. Logic only: no timing is asserted (DESIGN.md §5)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from benchmarks import _harness as h
from benchmarks import suite


def _scripted(monkeypatch, readings: list) -> list:
    """Make `_thread_activity` return `readings` in turn; the list left shows how many were taken."""
    left = list(readings)
    monkeypatch.setattr(h, "_thread_activity", lambda: left.pop(0))
    return left


def test_thread_env_pins_every_pool_and_drops_wait_policies():
    env = h.thread_env(2, {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0", "KMP_BLOCKTIME": "0", "HOME": "/x"})
    assert all(env[v] == "2" for v in h.THREAD_VARS)
    assert not set(h.WAIT_VARS) & set(env)  # each runtime's own default policy
    assert env["HOME"] == "/x"


def test_wait_idle_returns_once_cpu_times_stop_advancing(monkeypatch):
    # (runnable threads, their CPU seconds): busy, busy, then unchanged twice
    left = _scripted(monkeypatch, [(1, 0.0), (1, 0.01), (0, 0.02), (0, 0.02), (0, 0.02), (0, 0.02)])
    assert h.wait_idle(timeout=5, interval=0.001) is True
    assert len(left) == 1  # returned after the second quiet poll, not before


def test_wait_idle_treats_a_runnable_thread_as_busy_even_when_its_cpu_time_stands_still(monkeypatch):
    # a spinning worker that another process keeps off the CPU: runnable, no CPU time gained
    left = _scripted(monkeypatch, [(0, 1.0), (1, 1.0), (1, 1.0), (0, 1.0), (0, 1.0), (0, 1.0)])
    assert h.wait_idle(timeout=5, interval=0.001) is True
    assert len(left) == 1


def test_wait_idle_gives_up_after_its_timeout(monkeypatch):
    cpu = iter(range(10 ** 6))
    monkeypatch.setattr(h, "_thread_activity", lambda: (0, next(cpu) * 0.01))  # always advancing
    assert h.wait_idle(timeout=0.02, interval=0.001) is False


def test_wait_idle_cannot_observe_threads_without_proc(monkeypatch):
    monkeypatch.setattr(h, "_thread_activity", lambda: None)
    assert h.wait_idle() is True


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc/self/task")
def test_wait_idle_waits_for_a_real_thread_to_stop_spinning():
    done, release = threading.Event(), threading.Event()

    def spin():
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
        done.set()
        release.wait()  # asleep: idle, but still alive

    t = threading.Thread(target=spin)
    t.start()
    try:
        while not h._thread_activity()[1]:  # the thread has started using CPU
            pass
        assert h.wait_idle(timeout=30) is True
        assert done.is_set()
    finally:
        release.set()
        t.join()


def test_thread_activity_excludes_the_caller():
    activity = h._thread_activity()
    if activity is None:
        pytest.skip("needs Linux's /proc/self/task")
    running, cpu = activity
    assert running >= 0 and cpu >= 0


def test_load_between_counts_only_other_processes():
    a = h.LoadSnapshot(wall=0.0, busy=100.0, mine=10.0, loadavg=0.5)
    quiet = h.load_between(a, h.LoadSnapshot(wall=2.0, busy=102.0, mine=11.9, loadavg=1.9))  # our own 1.9 s
    assert quiet["others_cores"] == pytest.approx(0.05) and quiet["under_load"] is False
    busy = h.load_between(a, h.LoadSnapshot(wall=2.0, busy=103.9, mine=11.9, loadavg=2.0))
    assert busy["others_cores"] == pytest.approx(1.0) and busy["under_load"] is True
    unknown = h.load_between(a, h.LoadSnapshot(wall=2.0, busy=None, mine=11.9, loadavg=None))
    assert unknown["others_cores"] is None and unknown["under_load"] is False


def test_measure_flags_a_block_measured_under_load(monkeypatch):
    snaps = [h.LoadSnapshot(0.0, 50.0, 1.0, 0.1), h.LoadSnapshot(1.0, 51.5, 1.5, 2.5)]  # others: 1.0 core
    monkeypatch.setattr(h, "load_snapshot", lambda: snaps.pop(0))
    monkeypatch.setattr(h, "wait_idle", lambda: True)
    r = h.measure({"ember": lambda: None, "compiled": h.Skipped("RuntimeError: no")}, 1, repeats=2, sample_s=1e-4)
    assert r["load"]["under_load"] is True and r["load"]["others_cores"] == pytest.approx(1.0)
    assert r["compiled"] == {"skipped": "RuntimeError: no"} and len(r["ember"]["samples_ms"]) == 2
    assert r["idle_wait"]["waits"] == 3 and r["idle_wait"]["timeouts"] == 0  # calibration + 2 samples


def test_interleave_waits_before_every_sample(monkeypatch):
    events = []
    monkeypatch.setattr(h, "wait_idle", lambda: events.append("wait") or True)
    h.interleave({"a": lambda: events.append("a"), "b": lambda: events.append("b")}, repeats=2, sample_s=1e-9,
                 warmup=1)
    # after the warm-up, each calibration (3 single steps) and each sample (1 step at this sample_s) comes
    # right after a wait; the order rotates each repeat
    assert events == ["a", "b", "wait", "a", "a", "a", "wait", "b", "b", "b",
                      "wait", "a", "wait", "b", "wait", "b", "wait", "a"]


def test_compiled_runs_the_step_before_timing_and_keeps_its_compile_time():
    calls = []
    step = h.compiled(lambda: lambda: calls.append(1))
    assert len(calls) == 2 and step.compile_s >= 0


def test_a_failed_compile_is_one_short_line():
    def make():
        raise RuntimeError("backend='inductor' raised:\nCppCompileError: C++ compile error\n" + "Command: g++ " * 80)
    s = h.compiled(make)
    assert isinstance(s, h.Skipped)
    assert s.reason.startswith("RuntimeError: backend='inductor' raised: CppCompileError")
    assert "\n" not in s.reason and len(s.reason) <= 120


def test_progress_without_a_terminal_is_one_plain_line_per_phase(capsys):
    p = h.Progress(4, "2 threads")  # tqdm or not: stderr is captured, not a terminal
    p.phase("W1")
    p.doing("ember · repeat 1/2")
    p.advance()
    p.close()
    assert capsys.readouterr().err == "[bench] 2 threads: W1...\n"


def test_progress_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)  # import tqdm raises ImportError
    p = h.Progress(1, "peak memory", unit="process")
    p.phase("w1, ember")
    p.drop(1)
    p.close()
    assert capsys.readouterr().err == "[bench] peak memory: w1, ember...\n"


# ---------------------------------------------------------------------- the report
def _row(per_s: float, others: float | None = 0.01, **extra) -> dict:
    r = {k: {"per_s": per_s, "min": per_s, "max": per_s, "ms": 1e3 / per_s, "samples_ms": [1e3 / per_s]}
         for k in ("ember", "numpy", "pytorch")}
    r["ratios"] = {"numpy": 1.0, "pytorch": 1.0}
    r["load"] = {"others_cores": others, "loadavg": [0.1, 0.1], "seconds": 1.0,
                 "under_load": others is not None and others > h.OTHERS_LIMIT}
    r.update(extra)
    return r


def _res(torch: str | None = "2.13.0", compile_on: bool = False, load_avg: float = 0.2, **w1) -> dict:
    machine = {"date": "2026-11-26", "cpu": "cpu", "cores": 2, "python": "3.11", "numpy": "2.4", "blas": "openblas",
               "load_avg_at_start": load_avg}
    return {"machine": machine, "only": ["w1"], "repeats": 2, "compile": compile_on, "torch": torch, "wall_s": 1.0,
            "command": "python -m ember bench",
            "runs": [{"threads": 2, "matmul_gflops": 100.0, "matmul_gflops_end": 100.0,
                      "workloads": {"w1": _row(100.0, **w1)}}]}


def test_report_on_an_idle_machine_has_no_warning():
    text = suite.render(_res())
    assert "UNDER LOAD" not in text and "⚠" not in text.split("### Throughput")[1].split("\n\n")[1]
    assert "| 0.01 |" in text


def test_report_flags_a_block_measured_under_load_loudly():
    text = suite.render(_res(others=0.8))
    assert "**⚠ MEASURED UNDER LOAD" in text.split("### Throughput")[0]
    assert "W1 MLP 784-512-512-10, SGD momentum at 2 thread(s), 0.80 cores" in text and "| 0.80 ⚠ |" in text
    assert suite._flagged(_res(others=0.8)) == [{"block": "W1 MLP 784-512-512-10, SGD momentum at 2 thread(s)",
                                                 "others_cores": 0.8}]


def test_report_flags_a_run_started_on_a_busy_machine():
    text = suite.render(_res(load_avg=2.4))
    assert "MEASURED UNDER LOAD" in text and "load average was 2.40" in text


def test_compile_column_absent_without_torch_or_when_not_asked():
    for res in (_res(torch=None, compile_on=True), _res(compile_on=False)):
        assert "PyTorch compiled" not in suite.render(res)
    assert "torch.compile not run" in suite.render(_res(compile_on=False))


def test_compile_column_says_why_a_compile_failed():
    ok = _res(compile_on=True)
    r = ok["runs"][0]["workloads"]["w1"]
    r["compiled"] = {"per_s": 50.0, "min": 50.0, "max": 50.0, "ms": 20.0, "samples_ms": [20.0], "compile_s": 21.3}
    r["ratios"]["compiled"] = 2.0
    text = suite.render(ok)
    assert "| PyTorch compiled |" in text and "| 50.0 (50.0–50.0) |" in text and "| 2.000× |" in text
    assert "w1 at 2 thread(s): 21 s" in text
    r["compiled"] = {"skipped": "BackendCompilerFailed: no C++ compiler"}
    del r["ratios"]["compiled"]
    text = suite.render(ok)
    assert "| not run: BackendCompilerFailed: no C++ compiler |" in text
    header, sep = (line for line in text.splitlines() if line.startswith("| workload") or line.startswith("|---"))
    row = next(line for line in text.splitlines() if line.startswith("| W1"))
    assert header.count("|") == sep.count("|") == row.count("|")
