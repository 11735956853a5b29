"""Is the interleaved run fair to PyTorch? `python -m ember bench --check-fairness`

    python -m ember bench --check-fairness [--threads 2,1] [--only w1,w3] [--repeats 7] [--rounds 3] [--quick]
                                           [--output FILE] [--json FILE]

For each thread count and workload, PyTorch's step is timed three ways, all with the same harness
(calibrated samples, the idle wait before each, the load of the machine recorded):
1. alone: a fresh process that imports torch and this package's torch-only modules (`nets`,
   `_harness`) and nothing else: no ember, no NumPy work. It builds the step from the workload's
   `torch_spec` (PyTorch's own initial weights and random data of the same shapes) and runs with
   glibc's malloc thresholds raised through the environment exactly as importing ember raises them
   in the interleaved process (ember.backend.allocator), so the company is the only difference;
2. alone with glibc's default allocator: what a plain PyTorch script gets;
3. interleaved: the suite's own worker (benchmarks/suite.py `worker`), PyTorch beside ember and the
   hand-written NumPy step, exactly as `python -m ember bench` measures it (torch.compile off).
Each measurement is a fresh process, and processes differ (on the development VM one W1 process
ran 3.4 ms per step, the next 4.8, in the same condition), so the three run in rounds: alone (all
workloads), interleaved, alone with the default allocator, `--rounds` times (default 3, 2 with
--quick). The report gives the median over rounds and their range, and interleaved / alone as the
median of the per-round ratios: above 1 + FAIR_TOLERANCE the interleaved run handicaps PyTorch (✗).

`python -m benchmarks.fairness --alone JSON` is the child of (1) and (2); it prints one JSON line.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time

from .suite import WORKLOADS, emit, load_banner, machine_info, run_python, run_worker

FAIR_TOLERANCE = 0.05  # interleaved may be this much slower than alone before it counts as a handicap


def torch_spec(key: str) -> dict:
    """The PyTorch step the suite times for workload `key` (benchmarks/nets.py spec, the suite's batch)."""
    if key == "w1":
        from .mlp import torch_spec as spec
        return spec()
    if key == "w2":
        from .resmlp import torch_spec as spec
        return spec()
    if key in ("w3", "w3i"):
        from .cnn import torch_spec as spec
        return spec() if key == "w3" else spec(WORKLOADS[key][1], train=False)
    if key in ("w4", "w4s"):
        from .resnet import torch_spec as spec
        return spec(WORKLOADS[key][1])
    from .seq import torch_spec as spec
    return spec(key)


# ---------------------------------------------------------------------- the child: PyTorch alone
def alone(arg: dict) -> dict:
    """`arg`'s PyTorch step timed in this process, which loads nothing but torch and the torch-only modules:
    the harness's `measure` result, and whether ember was loaded after all (`ember_loaded`: it must be False)."""
    import torch

    from ._harness import Progress, measure
    from .nets import torch_step
    torch.set_num_threads(arg["threads"])
    progress = Progress(arg["repeats"], f"{arg['threads']} thread{'s' if arg['threads'] > 1 else ''}, PyTorch alone")
    progress.phase(arg["key"])
    res = measure({"pytorch": torch_step(torch, arg["spec"])}, arg["items"], arg["repeats"], arg["sample_s"],
                  progress)
    progress.close()
    res["ember_loaded"] = "ember" in sys.modules
    res["torch_threads"] = torch.get_num_threads()
    return res


def _run_alone(key: str, threads: int, repeats: int, sample_s: float, tuned_malloc: bool) -> dict:
    env = {}
    if tuned_malloc:
        from ember.backend.allocator import THRESHOLD
        # glibc reads these at start-up: the same two thresholds ember sets with mallopt at import
        env = {"MALLOC_MMAP_THRESHOLD_": str(THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(THRESHOLD)}
    arg = {"key": key, "spec": torch_spec(key), "items": WORKLOADS[key][1], "repeats": repeats,
           "sample_s": sample_s, "threads": threads}
    out = run_python(["-m", "benchmarks.fairness", "--alone", json.dumps(arg)], threads, env)
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------- the parent
COLUMNS = (("alone", "alone"), ("alone_default_malloc", "alone, glibc's default malloc"),
           ("interleaved", "interleaved (the suite's run)"))


def check(threads: list[int], only: list[str], repeats: int, sample_s: float, rounds: int) -> list[dict]:
    """For each thread count: {"threads", "torch", "rows": {workload: {column: [one PyTorch measurement per
    round]}}}. Each round runs alone (every workload), interleaved, then alone with glibc's default malloc:
    a fresh process each, so `rounds` > 1 shows how much a process differs from the next."""
    from ._harness import IMPLS
    runs = []
    for t in threads:
        rows: dict = {key: {col: [] for col, _ in COLUMNS} for key in only}
        for _ in range(rounds):
            for key in only:
                rows[key]["alone"].append(_run_alone(key, t, repeats, sample_s, tuned_malloc=True))
            inter = run_worker(t, {"only": only, "impls": IMPLS, "repeats": repeats, "sample_s": sample_s,
                                   "scaling": None})
            for key in only:
                r = inter["workloads"][key]
                rows[key]["interleaved"].append({"pytorch": r["pytorch"], "load": r["load"],
                                                 "idle_wait": r["idle_wait"]})
            for key in only:
                rows[key]["alone_default_malloc"].append(_run_alone(key, t, repeats, sample_s, tuned_malloc=False))
        runs.append({"threads": t, "torch": inter["torch"], "rows": rows})
    return runs


def _median_range(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def ratio(row: dict) -> list[float]:
    """interleaved / alone, round by round (each pair measured a minute or less apart)."""
    return [i["pytorch"]["ms"] / a["pytorch"]["ms"] for a, i in zip(row["alone"], row["interleaved"])]


def flagged(runs: list[dict]) -> list[dict]:
    """The measurements taken under load (see _harness.load_between), as suite._flagged lists them."""
    return [{"block": f"{key} at {run['threads']} thread(s), {col}, round {i + 1}",
             "others_cores": m["load"]["others_cores"]}
            for run in runs for key, row in run["rows"].items() for col, ms in row.items()
            for i, m in enumerate(ms) if m["load"]["under_load"]]


def render(runs: list[dict], machine: dict, repeats: int, sample_s: float, wall_s: float, command: str) -> str:
    rounds = len(next(iter(runs[0]["rows"].values()))["alone"])
    lines = [f"Fairness check — {machine['date']}, {machine['cpu']}, {machine['cores']} cores; PyTorch "
             f"{runs[0]['torch']}; load average at start {machine['load_avg_at_start']}; {rounds} round(s), each "
             f"measurement {repeats} samples of ≥ {sample_s} s in a fresh process.", ""]
    lines += load_banner(flagged(runs), machine["load_avg_at_start"], machine["cores"])
    lines += ["### PyTorch alone in a fresh process and inside the interleaved run", "",
              "ms per step: the median over rounds of each process's median (the range over rounds). "
              "interleaved / alone: the median of the per-round ratios (their range). Others' CPU: the most "
              "any round saw.", "",
              "| workload | threads | " + " | ".join(title for _, title in COLUMNS)
              + " | interleaved / alone | others' CPU (cores), in that order |", "|---|---:|---:|---:|---:|---:|---|"]
    for key in runs[0]["rows"]:
        for run in runs:
            row = run["rows"][key]
            rs = ratio(row)
            verdict = "✓" if statistics.median(rs) <= 1 + FAIR_TOLERANCE else "✗"
            cells = [_median_range([m["pytorch"]["ms"] for m in row[col]], ".3f") for col, _ in COLUMNS]
            loads = []
            for col, _ in COLUMNS:
                seen = [m["load"]["others_cores"] for m in row[col] if m["load"]["others_cores"] is not None]
                loads.append(f"{max(seen):.2f}{' ⚠' if any(m['load']['under_load'] for m in row[col]) else ''}"
                             if seen else "?")
            lines.append(f"| {WORKLOADS[key][0]} | {run['threads']} | {' | '.join(cells)} | "
                         f"{_median_range(rs, '.3f')} {verdict} | {' / '.join(loads)} |")
    ember_seen = any(m.get("ember_loaded") for run in runs for row in run["rows"].values()
                     for col in ("alone", "alone_default_malloc") for m in row[col])
    lines += ["", f"interleaved / alone above {1 + FAIR_TOLERANCE:.2f} (✗) would mean the interleaved run handicaps "
                  f"PyTorch; compare it with the range over rounds, which is how much one process differs from "
                  f"the next. The alone processes loaded torch and benchmarks/nets.py only (ember loaded in them: "
                  f"{'YES — the check is void' if ember_seen else 'no'}); \"alone\" has glibc's malloc thresholds "
                  f"raised as ember's import raises them in the interleaved process, \"glibc's default malloc\" is a "
                  f"plain PyTorch process.", "", f"Run took {wall_s:.0f} s: `{command}`."]
    return "\n".join(lines)


def check_main(a: argparse.Namespace, command: str) -> int:
    """`bench --check-fairness`: run `check` and emit the report (one error line, status 2, without PyTorch)."""
    if a.no_torch or importlib.util.find_spec("torch") is None:
        print("python -m ember bench: error: --check-fairness times PyTorch: it needs PyTorch installed "
              "(and no --no-torch)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    repeats, sample_s = (3, 0.05) if a.quick else (a.repeats, 0.1)
    rounds = a.rounds or (2 if a.quick else 3)
    machine = machine_info()
    runs = check(a.threads, a.only, repeats, sample_s, rounds)
    wall_s = time.perf_counter() - t0
    data = {"machine": machine, "repeats": repeats, "sample_s": sample_s, "rounds": rounds,
            "tolerance": FAIR_TOLERANCE, "runs": runs, "under_load": flagged(runs), "command": command}
    return emit(render(runs, machine, repeats, sample_s, wall_s, command), data, a)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fairness",
                                 description="the child of `python -m ember bench --check-fairness`")
    ap.add_argument("--alone", required=True, metavar="JSON", help="key, spec, items, repeats, sample_s, threads")
    print(json.dumps(alone(json.loads(ap.parse_args(argv).alone))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
