"""A tiny, deterministic training job that checkpoints every step: the victim of
`test_crash_checkpoints.py`, which SIGKILLs it at random moments and resumes it.

Modes (run from the repository root, or with it on PYTHONPATH):

    python tests/_crash_train.py run DIR STEPS [--stall write|fsync] [--record FILE]
                                               [--save-every K]
        Train until STEPS optimizer steps are done, resuming from DIR/ckpt.safetensors when it
        exists, saving a checkpoint after every K-th step (default 1; 0: after the last only) and
        writing each step's checkpoint fingerprint to FILE when given. Markers go to DIR/log
        (os.write: they survive SIGKILL): `R k` resumed after step k (`R 0`: fresh start),
        `S k` save of step k begins, `D k` save of step k returned, `E` done. With --stall, the
        save of the first step this run takes stops inside `ember.save` (after the header and
        the first tensor of the temporary file, or just before fsyncing it), writes `H k` and
        sleeps, so the parent can kill it exactly there.
    python tests/_crash_train.py serve
        A fork server, so that each killed run costs a fork instead of a Python start and an
        ember import (~0.4 s each: too slow for CI with 60 runs). It reads commands from stdin
        and answers on stdout, one line each: `run DIR STEPS [STALL]` forks a child doing the
        above and answers `pid P`; `reap` waits for that child and answers `status S` (S: its
        exit code, or -signal). The child stays a zombie until `reap`, so the parent can kill it
        by pid without any risk of hitting a recycled pid.

Everything random draws from ember's default generator (weight init, dropout, batch choice),
whose state is checkpointed; the data are fixed. A resumed run therefore must end bitwise where
an uninterrupted one ends.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
from typing import Any

# One BLAS thread: the matrices are tiny, and on a loaded 2-core CI machine OpenBLAS's spinning
# threads make each matmul ~50x slower. (Only effective when this file starts the process.)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
import ember.serialization as ser  # noqa: E402

CKPT = "ckpt.safetensors"
SEED = 1234
N_DATA, D_IN, HIDDEN, N_CLASSES, BATCH = 256, 32, 384, 10, 16
KEYS = ("model", "optimizer", "scheduler", "step", "rng")


def data() -> tuple[ember.Tensor, ember.Tensor]:
    """Fixed synthetic data (NumPy's own seeded generator: independent of ember's RNG)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N_DATA, D_IN)).astype(np.float32)
    y = rng.integers(0, N_CLASSES, N_DATA).astype(np.int64)
    return ember.from_numpy(x), ember.from_numpy(y)


def build() -> tuple[nn.Module, Any, Any]:
    """Model, optimizer (Adam: moments and a step counter) and a per-step LR schedule.
    The hidden layer is big enough (~0.15 M parameters, ~1.8 MB checkpoints with Adam's moments)
    that saving is a large share of a step, so random kills often land inside `ember.save`."""
    model = nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.ReLU(), nn.Dropout(0.2), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, N_CLASSES))
    opt = ember.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.9)
    return model, opt, sched


def checkpoint(model, opt, sched, step: int) -> dict[str, Any]:
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "step": step, "rng": ember.get_rng_state()}


def fingerprint(obj: Any) -> str:
    """A hash of a checkpoint's content: structure, scalars and every tensor's dtype, shape and
    bytes. Equal for an in-memory checkpoint and the same one after save + load."""
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, ember.Tensor):
            a = np.ascontiguousarray(x.numpy(force=True))
            h.update(f"T{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(x, dict):
            h.update(b"{")
            for k, v in x.items():
                h.update(repr(k).encode())
                walk(v)
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                walk(v)
            h.update(b"]")
        else:
            h.update(repr(x).encode())

    walk(obj)
    return h.hexdigest()


def _stall_in_save(kind: str, mark) -> None:
    """Make the next `ember.save` stop (write `H` and sleep) after writing the temporary file's
    header and first tensor ('write') or just before fsyncing it ('fsync'): a deterministic spot
    for a kill."""
    if kind == "write":
        real = ser._write_all
        calls = [0]

        def write_all(f, data):
            calls[0] += 1
            if calls[0] == 3:  # after the header and the first (largest) tensor: a truncated temp file
                f.flush()
                mark("H")
                time.sleep(60)
            real(f, data)

        ser._write_all = write_all
    else:
        real_fsync = ser.os.fsync

        def fsync(fd):
            mark("H")
            time.sleep(60)
            real_fsync(fd)

        ser.os.fsync = fsync  # the os module: this process only, and it is about to be killed


def train(directory: str, steps: int, stall: str | None = None, record: str | None = None,
          save_every: int = 1) -> None:
    """Train to `steps` steps in `directory`, checkpointing after every `save_every`-th step
    (0: after the last only; see the module doc). `record`: also write each step's checkpoint
    fingerprint there (for the reference run)."""
    log = os.open(os.path.join(directory, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def mark(tag: str, k: int | None = None) -> None:
        os.write(log, f"{tag} {'' if k is None else k}\n".encode())

    path = os.path.join(directory, CKPT)
    x, y = data()
    ember.manual_seed(SEED)
    model, opt, sched = build()
    start = 0
    if os.path.exists(path):
        ckpt = ember.load(path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        ember.set_rng_state(ckpt["rng"])
        start = int(ckpt["step"])
    mark("R", start)
    prints = open(record, "w") if record else None
    model.train()
    for step in range(start + 1, steps + 1):
        idx = ember.randint(0, N_DATA, (BATCH,))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        state = checkpoint(model, opt, sched, step)
        if prints is not None:
            prints.write(f"{step} {fingerprint(state)}\n")
        if stall and step == start + 1:
            _stall_in_save(stall, lambda tag: mark(tag, step))
        if step == steps or (save_every and step % save_every == 0):
            mark("S", step)
            ember.save(state, path)
            mark("D", step)
    if prints is not None:
        prints.close()
    mark("E")
    os.close(log)


def serve() -> None:
    # Move the server's generator away from the seed: a child that forgot to restore the RNG from
    # its checkpoint would then diverge instead of passing by luck.
    ember.rand(17)
    child = None
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "run":
            child = os.fork()
            if child == 0:
                code = 0
                try:
                    train(cmd[1], int(cmd[2]), cmd[3] if len(cmd) > 3 else None)
                except BaseException as e:  # report, never fall back into the server loop
                    sys.stderr.write(f"_crash_train child: {type(e).__name__}: {e}\n")
                    code = 1
                os._exit(code)
            print(f"pid {child}", flush=True)
        elif cmd[0] == "reap":
            _, status = os.waitpid(child, 0)
            print(f"status {os.waitstatus_to_exitcode(status)}", flush=True)
        else:
            print(f"error unknown command {line!r}", flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve()
        return 0
    if len(argv) >= 3 and argv[0] == "run":
        stall = record = None
        save_every = 1
        rest = argv[3:]
        while rest:
            opt, val, rest = rest[0], rest[1], rest[2:]
            if opt == "--stall":
                stall = val
            elif opt == "--record":
                record = val
            elif opt == "--save-every":
                save_every = int(val)
            else:
                raise SystemExit(f"unknown option {opt}")
        train(argv[1], int(argv[2]), stall, record, save_every)
        return 0
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
