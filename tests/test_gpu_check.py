"""benchmarks/gpu_check.sh, the one-command check of ember's CUDA path on a real GPU, tested here on the
CPU stand-in (GPU_CHECK_FAKE=1: tests/_fakecuda.py in every step) with a small selection and budget.

What is checked is the script's logic, not the GPU: one summary line per step in order, a log per step,
a failing or hanging step recorded as FAIL or TIMEOUT while the later steps still run, the deadline that
cuts a step so that the later ones keep their minimum, the default selection and worst-case schedule
(within 8 minutes), and a clear, fast refusal without a GPU.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from test_device_suite import SUITES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.sh")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not shutil.which("bash") or not shutil.which("timeout"),
    reason="benchmarks/gpu_check.sh needs Linux, bash and coreutils' timeout")


def run_script(out, timeout: float = 120, **settings: str) -> subprocess.CompletedProcess:
    """The script with OUT=out and GPU_CHECK_* = settings (nothing inherited from the caller's GPU_CHECK_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_") and k != "OUT"}
    env.update(OUT=str(out), GPU_CHECK_PYTHON=sys.executable, **{f"GPU_CHECK_{k}": v for k, v in settings.items()})
    return subprocess.run(["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def summary(out) -> list[tuple[str, str, float, str]]:
    """summary.txt as (name, status, seconds, note) rows."""
    rows = []
    for line in (out / "summary.txt").read_text().splitlines():
        name, status, secs, *note = line.split(maxsplit=3)
        rows.append((name, status, float(secs), note[0] if note else ""))
    return rows


def limits(console: str) -> dict[str, int]:
    """Each started step's limit as the console announced it (`--- NAME (at most N s)`)."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^--- (\S+) \(at most (\d+) s\)$", console, re.M)}


@pytest.fixture
def bad_tests(tmp_path):
    """A test file that fails and one that hangs, outside tests/ (GPU_CHECK_FILES takes paths)."""
    (tmp_path / "test_gc_fails.py").write_text("def test_fails():\n    assert 1 == 2, 'deliberate failure'\n")
    (tmp_path / "test_gc_hangs.py").write_text("import time\n\ndef test_hangs():\n    time.sleep(600)\n")
    return tmp_path / "test_gc_fails.py", tmp_path / "test_gc_hangs.py"


QUICK = {"EPOCHS": "1", "BENCH_ARGS": "--quick --only w1 --no-torch"}


def test_fake_run_records_every_step_and_goes_on_after_a_failure(tmp_path, bad_tests):
    fails, _ = bad_tests
    out = tmp_path / "out"
    # a bare name is a file under tests/ (run with conftest.py's stand-in); a path is taken as it is
    r = run_script(out, FAKE="1", FILES=f"test_atan2.py {fails}", **QUICK)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = summary(out)
    assert [(name, status) for name, status, *_ in rows] == [
        ("info", "PASS"), ("test_atan2", "PASS"), ("test_gc_fails", "FAIL"), ("train", "PASS"), ("bench", "PASS")]
    notes = {name: note for name, _, _, note in rows}
    assert notes["test_gc_fails"].startswith("exit 1; 1 failed")
    assert re.fullmatch(r"\d+ passed.*", notes["test_atan2"])  # pytest's closing line
    assert all(secs > 0 for _, _, secs, _ in rows)

    for name, *_ in rows:  # each log opens with the command that made it
        assert (out / f"{name}.log").read_text().startswith("$ "), name
    info = (out / "info.log").read_text()
    assert "numpy: " in info and "cupy: 14.2.0+fake" in info and "ember cuda:0: Fake CUDA device" in info
    assert "CUDA runtime: 12080" in info and "NCCL (cupy.cuda.nccl): 23203" in info and "torch: " in info
    assert "EMBER_TEST_DEVICE=cuda" in (out / "test_atan2.log").read_text().splitlines()[0]
    assert "deliberate failure" in (out / "test_gc_fails.log").read_text()
    train = (out / "train.log").read_text()
    assert "--device cuda --epochs 1" in train.splitlines()[0] and "device cuda:0" in train
    assert (out / "train" / "model.safetensors").exists()
    assert "| W1 " in (out / "bench.md").read_text() and (out / "bench.json").exists()
    # the console: the failing file's log tail, then the summary last
    assert "AssertionError: deliberate failure" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("total ")
    assert (out / "summary.txt").read_text() in r.stdout


def test_a_hanging_step_is_cut_by_the_deadline_and_later_steps_keep_their_minimum(tmp_path, bad_tests):
    _, hangs = bad_tests
    out = tmp_path / "out"
    # kept back for train and bench: (10 + 3) + (15 + 3) s, and 3 s to kill the hanging file, which gets
    # what is left of 40 s: a few seconds (none, "not started", where the info step took them all)
    budget = 40
    t0 = time.monotonic()
    r = run_script(out, FAKE="1", FILES=str(hangs), BUDGET=str(budget), FILE_TIMEOUT="600", FILE_MIN="1",
                   TRAIN_MIN="10", BENCH_MIN="15", TRAIN_ARGS="--model no-such-model", **QUICK)
    wall = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    rows = summary(out)
    assert [(name, status) for name, status, *_ in rows] == [
        ("info", "PASS"), ("test_gc_hangs", "TIMEOUT"), ("train", "FAIL"), ("bench", "PASS")]
    assert re.fullmatch(r"killed after \d+ s|not started \(budget spent\)", rows[1][3])
    assert rows[2][3] == "exit 2"  # ember train's status for a bad argument
    assert "invalid choice: 'no-such-model'" in (out / "train.log").read_text()
    announced = limits(r.stdout)
    assert announced.get("test_gc_hangs", 0) <= budget - 10 - 15 - 3 * 3  # the deadline's cut, not the 600 s cap
    if "test_gc_hangs" in announced:  # (the minimums are kept back from the steps after info)
        assert announced["train"] >= 10 and announced["bench"] >= 15
    assert wall < budget + 3  # the whole run ends by the deadline (plus at most one kill's grace)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_signal_to_the_script_stops_the_running_step_too(tmp_path):
    # `timeout` puts the step in a process group of its own: without the script's trap, the step would
    # run on after the script was stopped
    test = tmp_path / "test_gc_pid.py"
    test.write_text("import os, time\n\ndef test_hangs():\n"
                    "    open(os.environ['GC_PIDFILE'], 'w').write(str(os.getpid()))\n    time.sleep(600)\n")
    pidfile = tmp_path / "pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    env.update(OUT=str(tmp_path / "out"), GC_PIDFILE=str(pidfile), GPU_CHECK_PYTHON=sys.executable,
               GPU_CHECK_FAKE="1", GPU_CHECK_FILES=str(test))
    proc = subprocess.Popen(["bash", SCRIPT], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the hanging test never started"
            time.sleep(0.1)
        pid = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "gpu_check: interrupted" in err
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the step's pytest outlived the script"


def test_dry_run_lists_the_default_steps_within_eight_minutes(tmp_path):
    r = run_script(tmp_path / "out", DRY_RUN="1", timeout=30)
    assert r.returncode == 0, r.stderr
    plan = re.findall(r"^(\S+) +up to +(\d+) s", r.stdout, re.M)
    names = [name for name, _ in plan]
    # the parity files come from tests/test_device_suite.py's SUITES, not a copy of the list
    assert names == ["info", "test_cuda", "test_cuda_train", *(s[:-3] for s in SUITES), "train", "bench"]
    assert "not started" not in r.stdout
    worst = int(re.search(r"^worst case: (\d+) s$", r.stdout, re.M)[1])
    assert worst <= 8 * 60 - 30  # every step run to its limit (kill time included) still ends within 8 min
    # ... and each later step still gets its minimum (the defaults the script's header states)
    limit = dict(plan)
    assert all(int(limit[s[:-3]]) >= 10 for s in SUITES)
    assert int(limit["train"]) >= 45 and int(limit["bench"]) >= 75
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_without_a_gpu_it_stops_at_once_and_says_why(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("EMBER_DISABLE_CUDA", "1")  # hides a real GPU too: "no GPU" wherever this runs
    r = run_script(out, timeout=60)
    assert r.returncode == 2
    assert "gpu_check: no usable CUDA GPU, nothing else was run" in r.stderr
    assert "CUDA is disabled by EMBER_DISABLE_CUDA" in r.stderr
    assert "GPU_CHECK_FAKE=1" in r.stderr
    assert [(name, status) for name, status, *_ in summary(out)] == [("info", "FAIL")]
    assert sorted(p.name for p in out.iterdir()) == ["info.log", "info.py", "summary.txt"]
