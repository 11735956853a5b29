"""Crash-safe checkpoints: SIGKILL a training run at random moments, many of them inside
`ember.save`, and check after every kill that the newest checkpoint loads, is complete and holds
exactly the state of an uninterrupted run at its step, that nothing a finished save wrote is lost,
that leftover temporary files never shadow the checkpoint, and that resuming ends bitwise on the
uninterrupted run's weights.

The victim is `tests/_crash_train.py` (a tiny deterministic MLP + Adam + StepLR job that saves a
checkpoint after every step). Killed runs are forked from a fork server that imported ember once,
so 60+ kills fit in a few seconds; the reference run is an ordinary fresh `python` process.
Kill times come from a seeded generator, so a failure reproduces with the same seed (timing on the
machine still varies where exactly a kill lands; every landing spot must be safe).
"""
from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import ember

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _crash_train as victim  # noqa: E402

ROOT = HERE.parent
STEPS = 30  # per episode: a killed run resumes until it gets there
KILLS = 60  # the issue asks for at least 50
CALIBRATION_STEPS = 2  # kill times are uniform in [0, T], T the time a child takes for this many steps
SEED = 20240606

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"),
                                reason="needs fork() and SIGKILL (POSIX)")


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # tiny matrices: threads only spin on a loaded 2-core machine
    return env


class Server:
    """The fork server of `_crash_train.py serve`: `start` forks a training child, the caller may
    SIGKILL it by pid (it stays a zombie until `reap`, so the pid cannot be recycled meanwhile)."""

    def __init__(self, stderr_path: Path) -> None:
        self.err = open(stderr_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(HERE / "_crash_train.py"), "serve"], cwd=ROOT, env=_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     bufsize=1)
        self.child: int | None = None

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the fork server died; its stderr: {self.stderr()}"
        return answer.split()[1]

    def stderr(self) -> str:
        self.err.flush()
        return Path(self.err.name).read_text()

    def start(self, directory: Path, steps: int, stall: str = "") -> int:
        self.end_child()  # one left by a failed test: never lose track of a child
        self.child = int(self._ask(f"run {directory} {steps} {stall}".strip()))
        return self.child

    def kill(self) -> None:
        os.kill(self.child, signal.SIGKILL)

    def reap(self) -> int:
        """The child's exit code (-9 when killed)."""
        code = int(self._ask("reap"))
        self.child = None
        return code

    def end_child(self) -> None:
        """Kill and reap a child still outstanding (a test failed before reaping it)."""
        if self.child is not None:
            self.kill()
            self.reap()

    def close(self) -> None:
        self.end_child()
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.err.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("server") / "stderr")
    yield s
    s.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """An uninterrupted run in a fresh interpreter: each step's checkpoint fingerprint and the
    final checkpoint (saved only at the end: saving must not change the result)."""
    d = tmp_path_factory.mktemp("reference")
    record = d / "fingerprints"
    subprocess.run([sys.executable, str(HERE / "_crash_train.py"), "run", str(d), str(STEPS), "--record", str(record),
                    "--save-every", "0"], cwd=ROOT, env=_env(), check=True, timeout=60)
    prints = dict(line.split() for line in record.read_text().splitlines())
    return {"prints": {int(k): v for k, v in prints.items()}, "final": ember.load(d / victim.CKPT)}


# ---------------------------------------------------------------------------- checks
def _log(directory: Path) -> str:
    """The run log ('' before the first child opened it)."""
    try:
        return (directory / "log").read_text()
    except FileNotFoundError:
        return ""


def _markers(directory: Path) -> tuple[int, int, bool]:
    """From the run log: (last step whose save began, last step whose save returned, whether the
    last run's log ends inside a save)."""
    begun = done = 0
    inside = False
    for line in _log(directory).splitlines():
        tag, _, arg = line.partition(" ")
        if tag == "S":
            begun, inside = int(arg), True
        elif tag == "D":
            done, inside = int(arg), False
        elif tag in ("R", "E"):
            inside = False
    return begun, done, inside


def _temp_files(directory: Path) -> dict[str, str]:
    """Leftover temporary files of `ember.save` (named `.<target>.<hex>.tmp`) and their content hashes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.glob(f".{victim.CKPT}.*.tmp")}


def _check_newest(directory: Path, reference: dict) -> int:
    """The newest checkpoint loads, is complete, is exactly the uninterrupted run's state at its
    step, and holds at least every step whose save returned. Its step (0: no checkpoint yet)."""
    begun, done, _ = _markers(directory)
    path = directory / victim.CKPT
    if not path.exists():
        assert done == 0, f"the save of step {done} returned, but {path} does not exist"
        return 0
    ckpt = ember.load(path)  # a ValueError here is a torn checkpoint
    assert isinstance(ckpt, dict) and set(victim.KEYS) <= set(ckpt), f"incomplete checkpoint: keys {list(ckpt)}"
    step = ckpt["step"]
    assert isinstance(step, int) and done <= step <= begun, \
        f"checkpoint holds step {step}, but saves returned up to step {done} and began up to step {begun}"
    state = ckpt["optimizer"]["state"]
    assert len(state) == 6 and all(int(s["step"].item()) == step for s in state.values()), \
        "optimizer step counters disagree with the checkpoint's step"
    assert ckpt["scheduler"]["last_epoch"] == step
    rng = ckpt["rng"]
    assert rng.dtype == ember.uint8 and tuple(rng.shape) == (64,)
    assert victim.fingerprint(ckpt) == reference["prints"][step], \
        f"checkpoint of step {step} differs from the uninterrupted run's state at that step"
    return step


def _check_final(directory: Path, reference: dict) -> None:
    ckpt = ember.load(directory / victim.CKPT)
    assert ckpt["step"] == STEPS
    want = reference["final"]
    for name, t in want["model"].items():
        assert np.array_equal(ckpt["model"][name].numpy().view(np.uint8), t.numpy().view(np.uint8)), \
            f"resumed run's {name} differs (bitwise) from the uninterrupted run's"
    assert victim.fingerprint(ckpt) == victim.fingerprint(want), "optimizer/scheduler/RNG state differs at the end"


# ---------------------------------------------------------------------------- tests
def test_fingerprint_survives_save_and_load(tmp_path) -> None:
    """The harness's own yardstick: a checkpoint's fingerprint is unchanged by save + load, and
    changes when one bit of one weight does (so the comparisons below can fail)."""
    ember.manual_seed(0)
    model, opt, sched = victim.build()
    state = victim.checkpoint(model, opt, sched, 0)
    ember.save(state, tmp_path / "c.safetensors")
    loaded = ember.load(tmp_path / "c.safetensors")
    assert victim.fingerprint(loaded) == victim.fingerprint(state)
    w = loaded["model"]["0.weight"].numpy()
    w.view(np.uint32)[0, 0] ^= 1
    assert victim.fingerprint(loaded) != victim.fingerprint(state)


def test_random_sigkills_lose_nothing_and_resume_bitwise(server, reference, tmp_path) -> None:
    """>= 60 SIGKILLs at seeded random moments; after each, the newest checkpoint is checked;
    each episode is resumed until it reaches STEPS and must end bitwise on the reference."""
    rng = random.Random(SEED)
    # Calibrate to this machine: a kill window of a few steps' time (fork, load and the steps with
    # their saves) makes runs progress and spreads kills over loading, training and saving alike.
    (tmp_path / "calibration").mkdir()
    t0 = time.perf_counter()
    server.start(tmp_path / "calibration", CALIBRATION_STEPS)
    assert server.reap() == 0, server.stderr()
    max_delay = time.perf_counter() - t0
    kills = mid_save = temp_left = episodes = 0
    directory = None
    progress = []  # steps gained per killed run
    seen_temps: dict[str, str] = {}
    while kills < KILLS:
        if directory is None:
            episodes += 1
            directory = tmp_path / f"episode{episodes}"
            directory.mkdir()
            seen_temps = {}
            before = 0
        server.start(directory, STEPS)
        time.sleep(rng.uniform(0.0, max_delay))
        server.kill()
        code = server.reap()
        if code == 0:  # finished before the kill landed: the episode is complete
            _check_final(directory, reference)
            directory = None
            continue
        assert code == -signal.SIGKILL, f"training child failed (exit {code}): {server.stderr()}"
        kills += 1
        mid_save += _markers(directory)[2]
        temps = _temp_files(directory)
        for name, digest in seen_temps.items():  # later saves ignore a leftover (or remove it); never reuse it
            assert temps.get(name, digest) == digest, f"leftover temp file {name} was modified by a later save"
        temp_left += len(set(temps) - set(seen_temps))
        seen_temps.update(temps)
        now = _check_newest(directory, reference)
        assert now >= before, f"checkpoint went back from step {before} to {now}"
        progress.append(now - before)
        before = now
    if directory is not None:  # finish the last episode without a kill
        server.start(directory, STEPS)
        assert server.reap() == 0, server.stderr()
        _check_final(directory, reference)
    print(f"\n{kills} SIGKILLs (window {max_delay * 1e3:.0f} ms) over {episodes} episodes: {mid_save} inside "
          f"ember.save, {temp_left} left a temp file; steps gained per killed run: "
          f"mean {sum(progress) / len(progress):.2f}")
    # The kills must exercise what they are meant to: many inside a save, and real progress.
    assert mid_save >= KILLS // 5, f"only {mid_save} of {kills} kills landed inside a save"
    assert sum(progress) >= STEPS // 2, "the killed runs hardly progressed: the kill times are too short"


@pytest.mark.parametrize("stall", ["write", "fsync"])
@pytest.mark.parametrize("fresh", [True, False], ids=["first-save", "later-save"])
def test_kill_inside_save_leaves_previous_checkpoint(server, reference, tmp_path, stall, fresh) -> None:
    """A kill at a known spot inside `ember.save` (temp file half written, or written but not yet
    fsynced and renamed): the checkpoint is still the previous one (or absent for a first save),
    the leftover temp file does not load as a checkpoint by name, and resuming ignores it and
    ends bitwise on the reference."""
    if not fresh:  # a first, completed run to step 5
        server.start(tmp_path, 5)
        assert server.reap() == 0, server.stderr()
    before = _check_newest(tmp_path, reference)
    server.start(tmp_path, STEPS, stall)
    deadline = time.monotonic() + 20
    while not _log(tmp_path).rstrip().endswith(f"H {before + 1}"):
        assert time.monotonic() < deadline, f"the child never stalled: {_log(tmp_path)}"
        time.sleep(0.005)
    server.kill()
    assert server.reap() == -signal.SIGKILL
    temps = _temp_files(tmp_path)
    assert len(temps) == 1, f"expected the killed save's temp file, found {sorted(temps)}"
    assert _check_newest(tmp_path, reference) == before
    (leftover,) = temps
    if stall == "write":  # truncated: the reader rejects it instead of returning garbage
        with pytest.raises(ValueError, match="cannot load"):
            ember.load(tmp_path / leftover)
    else:  # complete but never renamed: it is the next step's state, which the checkpoint must not be
        assert victim.fingerprint(ember.load(tmp_path / leftover)) == reference["prints"][before + 1]
    server.start(tmp_path, STEPS)
    assert server.reap() == 0, server.stderr()
    resumed = [line for line in _log(tmp_path).splitlines() if line.startswith("R ")]
    assert resumed[-1] == f"R {before}", "the resumed run did not start from the previous checkpoint"
    _check_final(tmp_path, reference)
    assert _temp_files(tmp_path) == temps, "the leftover temp file was changed by later saves"
