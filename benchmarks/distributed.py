"""Data-parallel scaling over MPI: `python -m ember bench --distributed`.

Two halves:
- `rank_main` runs inside an MPI job (`mpiexec -n K python -m benchmarks.distributed --json-spec ...`):
  every rank times W1 and W2 training steps on its own batch of `--batch` samples (weak scaling: a
  step of K processes trains on K batches; K = 1 trains the bare model, K > 1 wraps it in
  DistributedDataParallel), and with K > 1 times `all_reduce` of float32 buffers. Rank 0 prints one
  JSON line.
- `suite_main` (the parent, not an MPI process) launches that job for K = 1 and K = 2 with 1 BLAS
  thread per process and renders a markdown table: samples/s, scaling efficiency
  = samples/s(2) / (2 × samples/s(1)), and all-reduce bandwidth.

The parent launches `mpiexec` subprocesses instead of running inside one MPI job because each K
needs its own MPI world, and because the BLAS thread pools must be pinned (environment variables)
before NumPy loads in each rank.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from ._harness import thread_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {"w1": "W1 MLP 784-512-512-10, SGD momentum", "w2": "W2 ResMLP (LayerNorm, Dropout), Adam"}
SIZES_MB = (1, 25, 100)
PROCESSES = (1, 2)


# ---------------------------------------------------------------------- inside the MPI job
def _step(key: str, batch: int, distributed: bool):
    """One training step of workload `key` on fixed random data; the model DDP-wrapped when `distributed`."""
    import numpy as np

    import ember
    import ember.nn as enn
    rng = np.random.default_rng(0)
    if key == "w1":
        from .mlp import LR, MOMENTUM, ember_model
        ember.manual_seed(0)
        model = ember_model()
        make_opt = lambda ps: ember.optim.SGD(ps, lr=LR, momentum=MOMENTUM)  # noqa: E731
    else:
        from .resmlp import LR, ember_model
        ember.manual_seed(0)
        model = ember_model()
        make_opt = lambda ps: ember.optim.Adam(ps, lr=LR)  # noqa: E731
    x = ember.from_numpy(rng.standard_normal((batch, 784)).astype(np.float32))
    y = ember.from_numpy(rng.integers(0, 10, batch))
    net = model
    if distributed:
        from ember.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model)
    opt = make_opt(model.parameters())

    def step():
        opt.zero_grad()
        loss = enn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    return step


def _timed(comm, fn, steps: int) -> float:
    """Seconds per call of `fn` over `steps` calls, started together and ended by the slowest rank."""
    from mpi4py import MPI
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    dt = time.perf_counter() - t0
    return comm.allreduce(dt, op=MPI.MAX) / steps


def _samples(comm, fn, repeats: int, sample_s: float) -> list[float]:
    """`repeats` timings of `fn`, each over enough calls to last about `sample_s` on rank 0 (every rank must
    make the same number of calls: the collectives inside are matched by order)."""
    for _ in range(2):  # warm-up: caches, allocator, optimizer state
        fn()
    t = _timed(comm, fn, 1)
    steps = comm.bcast(max(1, round(sample_s / max(t, 1e-7))), root=0)
    return [_timed(comm, fn, steps) for _ in range(repeats)]


def rank_main(spec: dict) -> dict:
    """What this rank measures (the result is meaningful on rank 0)."""
    import numpy as np

    import ember
    from ember import distributed as dist
    dist.init_process_group("mpi")
    comm, world = dist.group.comm, dist.get_world_size()
    out: dict = {"world": world, "batch": spec["batch"], "train": {}, "allreduce": {}}
    for key in spec["only"]:
        times = _samples(comm, _step(key, spec["batch"], world > 1), spec["repeats"], spec["sample_s"])
        per_s = [world * spec["batch"] / t for t in times]
        out["train"][key] = {"per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s)}
    if world > 1:
        for mb in spec["sizes_mb"]:
            buf = ember.from_numpy(np.zeros(mb * 1024 * 1024 // 4, dtype=np.float32))  # zeros: repeated sums stay finite
            times = _samples(comm, lambda: dist.all_reduce(buf), spec["repeats"], spec["sample_s"])
            rates = [mb / t for t in times]
            out["allreduce"][str(mb)] = {"mb_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                                         "ms": statistics.median(times) * 1e3}
    dist.destroy_process_group()
    return out


# ---------------------------------------------------------------------- the parent
def check_mpi() -> str | None:
    """None when mpiexec and mpi4py are there, else one line saying what is missing."""
    if importlib.util.find_spec("mpi4py") is None:
        return "bench --distributed needs mpi4py (pip install mpi4py mpich)"
    if shutil.which("mpiexec") is None:
        return "bench --distributed needs mpiexec on PATH (pip install mpich, or your MPI's launcher)"
    return None


def launch(processes: int, spec: dict, timeout: float | None = None) -> dict:
    """Run `rank_main(spec)` on `processes` MPI ranks (1 BLAS thread each): rank 0's JSON."""
    env = thread_env(1)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = ["mpiexec", "-n", str(processes), sys.executable, "-m", "mpi4py", "-m", "benchmarks.distributed",
           "--spec", json.dumps(spec)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def render(runs: dict[int, dict], spec: dict, wall_s: float, command: str) -> str:
    one, two = runs[1], runs[2]
    lines = [f"### Data-parallel training over MPI (1 BLAS thread per process; each process a batch of "
             f"{spec['batch']}, so a step of 2 processes trains on {2 * spec['batch']} samples; "
             f"{spec['repeats']} repeats, median (min–max) samples/s)", "",
             "| workload | 1 process | 2 processes | scaling efficiency |", "|---|---:|---:|---:|"]
    for key in spec["only"]:
        a, b = one["train"][key], two["train"][key]
        eff = b["per_s"] / (2 * a["per_s"])
        lines.append(f"| {WORKLOADS[key]} | {_fmt(a['per_s'])} ({_fmt(a['min'])}–{_fmt(a['max'])}) | "
                     f"{_fmt(b['per_s'])} ({_fmt(b['min'])}–{_fmt(b['max'])}) | {eff:.0%} |")
    lines += ["", "Scaling efficiency = samples/s on 2 processes / (2 × samples/s on 1 process); 1 process trains "
                  "the bare model, 2 wrap it in DistributedDataParallel.", "",
              "### all_reduce (SUM, float32, 2 processes)", "", "| buffer | time (ms) | bandwidth (MB/s) |",
              "|---:|---:|---:|"]
    for mb in spec["sizes_mb"]:
        r = two["allreduce"][str(mb)]
        lines.append(f"| {mb} MB | {r['ms']:.2f} | {_fmt(r['mb_s'])} ({_fmt(r['min'])}–{_fmt(r['max'])}) |")
    lines += ["", "Bandwidth is the buffer's size over the time of one all_reduce (the slowest rank's).", "",
              f"Run took {wall_s:.0f} s: `{command}`."]
    return "\n".join(lines)


def suite_main(only: list[str], quick: bool, repeats: int, output: str | None, json_path: str | None,
               command: str) -> int:
    """`bench --distributed`: launch the jobs, print (and optionally write) the report. Exit status 2
    with one line when MPI is missing."""
    missing = check_mpi()
    if missing:
        print(f"python -m ember bench: error: {missing}", file=sys.stderr)
        return 2
    keys = [k for k in only if k in WORKLOADS] or list(WORKLOADS)
    spec = {"only": keys, "batch": 128, "repeats": 2 if quick else repeats, "sample_s": 0.02 if quick else 0.3,
            "sizes_mb": list(SIZES_MB)}
    t0 = time.perf_counter()
    runs = {}
    for k in PROCESSES:
        print(f"[bench] distributed: {k} process(es)...", file=sys.stderr, flush=True)
        runs[k] = launch(k, spec)
    report = render(runs, spec, time.perf_counter() - t0, command)
    print(report)
    if output:
        with open(output, "w") as f:
            f.write(report + "\n")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"spec": spec, "runs": {str(k): v for k, v in runs.items()}}, f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.distributed",
                                 description="one MPI job of the distributed benchmark (rank 0 prints JSON)")
    ap.add_argument("--spec", required=True, help="JSON: only, batch, repeats, sample_s, sizes_mb")
    a = ap.parse_args(argv)
    res = rank_main(json.loads(a.spec))
    if _rank() == 0:
        print(json.dumps(res), flush=True)
    return 0


def _rank() -> int:
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank()


if __name__ == "__main__":
    sys.exit(main())
