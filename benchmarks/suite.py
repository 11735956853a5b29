"""The reference benchmark suite: `python -m ember bench` (or `python -m benchmarks.suite`).

For each BLAS thread count (default 2, then 1) a fresh process, its thread pools pinned before NumPy
and PyTorch load (each library keeping its default wait policy), measures the float32 matmul rate of
the machine and then each workload as ember, as the hand-written NumPy step (W1-W3 only), as PyTorch
CPU and as PyTorch with torch.compile, interleaved repeat by repeat, each sample started once the
previous one's threads are idle (benchmarks/_harness.py); the first thread count also runs the
scaling tables. Then each training workload runs 200 steps alone in a process per implementation for
its peak RSS, and benchmarks/overhead.py gives the per-op figures. The report is one markdown
document: the throughput table with ember/NumPy and ember/PyTorch ratios (medians of the per-repeat
ratios) judged against the targets of docs/performance.md, the CPU other processes used during each
row (rows above _harness.OTHERS_LIMIT are flagged, loudly), the scaling tables, overhead and memory.

    python -m ember bench [--threads 2,1] [--only w1,w2,w3,w3i,lstm,transformer,w4,w4s] [--repeats 7] [--no-torch]
    python -m ember bench --only ops [--threads 2] [--filter NAME]   (per-op speed: benchmarks/ops.py)
    python -m ember bench --only func [--threads 2] [--quick]        (vmap/jacfwd/jacrev: benchmarks/func.py)
    python -m ember bench --only conv [--threads 2] [--quick] [--filter r18.64]  (per-shape conv2d: benchmarks/conv.py)
                          [--no-compile] [--no-scaling] [--no-memory] [--no-overhead] [--quick [--compile]]
                          [--output FILE] [--json FILE]

With `--compile` (the default outside `--quick`) ember is also timed compiled, two more columns interleaved
with the rest: `model = ember.compile(model)` and the whole step compiled (zero_grad, forward, loss, backward
and the optimizer's update captured once and replayed; for inference the compiled no_grad forward), each
captured and checked against eager before timing (benchmarks/ember_compile.py). A section then judges them
against the targets of the compiler's issue (COMPILE_TARGETS): throughput over NumPy and over the faster of
PyTorch eager and torch.compile, compile time per graph, and whether every timed call replayed (a compiled
step that fell back to eager is said so loudly, never timed as compiled); the memory runs add the compiled
step, and benchmarks/overhead.py the compiled 100-op chain. `--quick --compile --no-torch` checks them fast.

`--check-fairness` instead times PyTorch alone in fresh processes against PyTorch inside the
interleaved run (benchmarks/fairness.py).
`--device cuda` instead times W1-W3 training at batch 128 and 1024 on the GPU, ember against PyTorch
on CUDA (`device_main`); without a usable GPU it is one error line and exit status 2.
`--distributed` instead runs benchmarks/distributed.py: data-parallel scaling on 1 and 2 MPI processes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from ._harness import (COMPILED, EMBER_COMPILED, EMBER_MODEL, EMBER_STEP, IMPLS, LOAD_LIMIT_PER_CORE, OTHERS_LIMIT,
                       THREAD_VARS, WAIT_VARS, busy_at_start, thread_env)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# key: (title, items per step, ember/NumPy target, ember/PyTorch target)
WORKLOADS = {
    "w1": ("W1 MLP 784-512-512-10, SGD momentum: train", 128, 0.95, 1.1),
    "w2": ("W2 ResMLP (LayerNorm, Dropout), Adam: train", 128, 0.95, 1.5),
    "w3": ("W3 CNN, SGD: train", 128, 0.95, 1.0),
    "w3i": ("W3 CNN: inference, batch 1000, no_grad", 1000, 0.95, 1.0),
    # sequence models (benchmarks/seq.py): PyTorch is the only reference; items are sequences
    "lstm": ("LSTM 2×256, seq 64, batch 32, Adam: train", 32, None, 1.0),
    "transformer": ("Transformer encoder 4×128, seq 64, batch 32, Adam: train", 32, None, 1.0),
    # CIFAR ResNet-18 (benchmarks/resnet.py): PyTorch is the only reference; items per step = the batch
    "w4": ("W4 ResNet-18 CIFAR, batch 128, SGD momentum: train", 128, None, 1.0),
    "w4s": ("W4 ResNet-18 CIFAR, batch 32, SGD momentum: train", 32, None, 1.0),
}
# What a plain `bench` runs: W4 only when named (`--only w4,w4s`): at 1-5 s a step for each implementation it
# would take the suite from minutes to a quarter of an hour
DEFAULT_ONLY = [k for k in WORKLOADS if k not in ("w4", "w4s")]
# ember.compile (the targets): compiled ember's throughput over the NumPy step and over the faster of
# PyTorch eager and torch.compile (None: no target); compile time per captured graph; peak RSS of a compiled run
COMPILE_TARGETS = {"w1": (1.0, 1.0), "w2": (1.2, 1.5), "w3": (1.0, None), "w3i": (1.0, 1.0)}
COMPILE_S_TARGET = 1.0
EMBER_LABELS = {EMBER_MODEL: "ember.compile(model)", EMBER_STEP: "ember.compile(step)"}
SMALL_BATCH_TARGET = 2.0  # ember/PyTorch at batch 1 and 16
MATMUL_FRACTION_TARGET = 0.75  # W1 at batch 128, of the measured float32 matmul rate
MATMUL_N = 2048


def _cases(key: str, impls, batch: int | None = None, width: int = 512, matmuls: bool = False) -> dict:
    """The row's implementations ("compiled" among `impls`: torch.compile, done here)."""
    if key == "w1":
        from .mlp import cases
        return cases(batch or 128, width, impls=tuple(impls) + (("matmuls",) if matmuls else ()))
    if key == "w2":
        from .resmlp import cases
        return cases(batch or 128, impls=impls)
    if key in ("w4", "w4s"):
        from .resnet import cases
        return cases(batch or WORKLOADS[key][1], impls=impls)
    if key in ("lstm", "transformer"):
        from .seq import cases
        return cases(key, batch or 32, impls=impls)
    from .cnn import infer_cases, train_cases
    return train_cases(batch or 128, impls=impls) if key == "w3" else infer_cases(batch or 1000, impls=impls)


# ---------------------------------------------------------------------- one thread count, in its own process
def _matmul_gflops(repeats: int, sample_s: float, progress) -> float:
    import numpy as np

    from ._harness import interleave
    progress.phase(f"float32 matmul rate, {MATMUL_N}²")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
    b = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
    c = np.empty_like(a)
    t = interleave({"matmul": lambda: np.matmul(a, b, out=c)}, repeats, sample_s, progress=progress)[0]["matmul"]
    return 2 * MATMUL_N ** 3 / sorted(t)[len(t) // 2] / 1e9


def _n_cases(key: str, impls, matmuls: bool) -> int:
    """How many implementations a row of `key` times (W1-W3 have a NumPy step and ember.compile columns, the
    sequence models neither)."""
    return len([i for i in impls if i not in ("numpy",) + EMBER_COMPILED or key in COMPILE_TARGETS]) + matmuls


def _timed(r: dict, k: str) -> list | None:
    """The per-repeat samples (ms) of implementation `k` in row `r`; None where it was not timed, or where an
    ember.compile column fell back to eager while timed."""
    c = r.get(k)
    if not c or "samples_ms" not in c or c.get("fell_back"):
        return None
    return c["samples_ms"]


def compile_ratios(r: dict) -> dict:
    """Per ember.compile column of row `r`: its throughput over eager ember ("ember"), over the NumPy step
    ("numpy") and over the faster of PyTorch eager and torch.compile in each repeat ("pytorch_best"; which of
    the two had the lower median: "pytorch_best_is"): medians of the per-repeat ratios of paired samples."""
    import statistics
    torches = [k for k in ("pytorch", COMPILED) if _timed(r, k)]
    out = {}
    for k in EMBER_COMPILED:
        mine = _timed(r, k)
        if mine is None:
            continue
        ratios = {}
        for other in ("ember", "numpy"):
            if _timed(r, other):
                ratios[other] = statistics.median(o / m for o, m in zip(_timed(r, other), mine))
        if torches:
            per_repeat = zip(*(_timed(r, t) for t in torches))
            ratios["pytorch_best"] = statistics.median(min(ts) / m for ts, m in zip(per_repeat, mine))
            ratios["pytorch_best_is"] = min(torches, key=lambda t: r[t]["ms"])
        out[k] = ratios
    return out


def worker(threads: int, only: list[str], impls, repeats: int, sample_s: float, scaling: dict | None) -> dict:
    """Everything measured at one BLAS thread count: the pools were pinned by the parent's environment (no
    wait-policy override: see _harness.thread_env), PyTorch's also through torch.set_num_threads."""
    import numpy as np

    from ._harness import Progress, import_torch, measure
    torch = import_torch(impls)
    if torch is not None:
        torch.set_num_threads(threads)
    else:
        impls = tuple(i for i in impls if i not in ("pytorch", COMPILED))
    # rows: (where the result goes, what the progress says, workload, items per step, case arguments, impls,
    # repeats); the scaling rows leave torch.compile and ember.compile out: ~20 s per torch graph, and every
    # size is a new graph; the sequence models have no ember.compile columns
    rows = [(("workloads", key), WORKLOADS[key][0], key, WORKLOADS[key][1], {},
             impls if key in COMPILE_TARGETS else tuple(i for i in impls if i not in EMBER_COMPILED), repeats)
            for key in only]
    if scaling:
        eager = tuple(i for i in impls if i != COMPILED and i not in EMBER_COMPILED)
        rep = max(3, repeats // 2)
        for b in scaling["batches"]:
            rows.append((("w1_batch", b), f"W1 scaling, batch {b}", "w1", b, {"batch": b, "matmuls": True}, eager, rep))
            rows.append((("w3_batch", b), f"W3 scaling, batch {b}", "w3", b, {"batch": b}, eager, rep))
        for w in scaling["widths"]:
            rows.append((("w1_width", w), f"W1 scaling, width {w}", "w1", 128, {"batch": 128, "width": w,
                                                                                  "matmuls": True}, eager, rep))
    total = 2 * repeats + sum(rep * _n_cases(key, imp, kw.get("matmuls", False)) for _, _, key, _, kw, imp, rep in rows)
    progress = Progress(total, f"{threads} thread{'s' if threads > 1 else ''}")
    out: dict = {"threads": threads, "numpy": np.__version__, "torch": torch.__version__ if torch else None,
                 "torch_threads": torch.get_num_threads() if torch else None,
                 "env": {v: os.environ.get(v) for v in THREAD_VARS + WAIT_VARS},
                 "matmul_gflops": _matmul_gflops(repeats, sample_s, progress), "workloads": {}}
    if scaling:
        out["scaling"] = {"w1_batch": {}, "w3_batch": {}, "w1_width": {}}
    for (table, name), title, key, items, kw, imp, rep in rows:
        progress.phase(title)
        progress.doing("building" + (" and compiling (torch.compile, ~20-60 s)" if COMPILED in imp else "")
                       + (" and capturing (ember.compile)" if any(i in imp for i in EMBER_COMPILED) else ""))
        cases = _cases(key, imp, **kw)
        r = measure(cases, items, rep, sample_s, progress)
        if any(i in cases for i in EMBER_COMPILED):
            from .ember_compile import annotate
            annotate(r, cases)
            r["compile_ratios"] = compile_ratios(r)
        if kw.get("matmuls"):
            from .mlp import step_flops
            r["flops"] = step_flops(kw["batch"], kw.get("width", 512))
        (out[table] if table == "workloads" else out["scaling"][table])[name] = r
    out["matmul_gflops_end"] = _matmul_gflops(repeats, sample_s, progress)  # the machine's speed can drift
    progress.close()
    return out


# ---------------------------------------------------------------------- the parent: processes and the report
def run_python(args: list[str], threads: int, env: dict | None = None) -> str:
    """Run `python ARGS` from the repository with its pools pinned to `threads` (and `env` added); its stdout.
    Its stderr is this process's: its progress bar draws on this terminal, and a traceback lands above the
    error raised here."""
    env = {**thread_env(threads), **(env or {})}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark process {' '.join(args[:3])} failed (exit {proc.returncode}); "
                           f"its error output is above")
    return proc.stdout


def run_worker(threads: int, spec: dict) -> dict:
    """`worker` in a fresh process (the pools are pinned before NumPy and PyTorch load): its result."""
    out = run_python(["-m", "benchmarks.suite", "--worker", str(threads), "--worker-args", json.dumps(spec)], threads)
    return json.loads(out.strip().splitlines()[-1])


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    import numpy as np
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # the layout of show_config is not a stable API: the report only loses a label
        blas = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "blas": blas, "load_avg_at_start": load, "date": datetime.date.today().isoformat()}


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _verdict(value: float | None, target: float | None) -> str:
    """`value× ✓/✗ (≥ target)`; no target: no verdict."""
    if value is None or target is None:
        return "–"
    return f"{value:.3f}× {'✓' if value >= target else '✗'} (≥ {target})"


def _flagged(res: dict) -> list[dict]:
    """The timing blocks (table rows) measured while other processes used more than OTHERS_LIMIT cores:
    {"block": what, "others_cores": how many}."""
    out = []
    for run in res["runs"]:
        t = run["threads"]
        rows = [(WORKLOADS[k][0].split(":")[0], r) for k, r in run["workloads"].items()]
        for table, sizes in run.get("scaling", {}).items():
            rows += [(f"{table.replace('_', ' by ')} {size}", r) for size, r in sizes.items()]
        out += [{"block": f"{what} at {t} thread(s)", "others_cores": r["load"]["others_cores"]} for what, r in rows
                if r.get("load", {}).get("under_load")]
    return out


def load_banner(flagged: list[dict], loadavg: float | None, cores: int | None) -> list[str]:
    """The loud warning at the top of a report measured on a busy machine (nothing when it was idle);
    `flagged`: the blocks measured under load (see _flagged)."""
    why = []
    if busy_at_start(loadavg, cores):
        why.append(f"the load average was {loadavg:.2f} when the run started (limit {LOAD_LIMIT_PER_CORE} per core, "
                   f"{LOAD_LIMIT_PER_CORE * (cores or 1):.2f} here)")
    if flagged:
        worst = max(flagged, key=lambda f: f["others_cores"])
        why.append(f"other processes used more than {OTHERS_LIMIT} CPU cores during {len(flagged)} timing block(s) "
                   f"(the most: {worst['block']}, {worst['others_cores']:.2f} cores)")
    if not why:
        return []
    return [f"> **⚠ MEASURED UNDER LOAD — do not quote these figures.** During this run {'; and '.join(why)}. "
            f"The blocks are marked ⚠ below and listed in the JSON (`under_load`); rerun on an idle machine.", ""]


def _cell(r: dict, k: str) -> str:
    if k not in r:
        return "–"
    if "skipped" in r[k]:
        return f"not run: {r[k]['skipped']}"
    if r[k].get("fell_back"):  # an ember.compile column whose timed calls were not all replays
        return f"**⚠ FELL BACK TO EAGER**: {r[k]['fell_back']}"
    return f"{_fmt(r[k]['per_s'])} ({_fmt(r[k]['min'])}–{_fmt(r[k]['max'])})"


def _compile_section(res: dict) -> list[str]:
    """The ember.compile columns against COMPILE_TARGETS: one row per workload, thread count and column."""
    keys = [k for k in res["only"] if k in COMPILE_TARGETS]
    rows = []
    for key in keys:
        t_np, t_torch = COMPILE_TARGETS[key]
        for run in res["runs"]:
            r = run["workloads"][key]
            ratios = r.get("compile_ratios") or compile_ratios(r)
            for k in EMBER_COMPILED:
                if k not in r:
                    continue
                c = r[k]
                what = EMBER_LABELS[k] + (" (no_grad forward)" if key == "w3i" else "")
                head = f"| {WORKLOADS[key][0].split(':')[0]} | {run['threads']} | {what} |"
                if "skipped" in c or c.get("fell_back"):
                    why = c.get("skipped") or f"⚠ FELL BACK TO EAGER: {c['fell_back']}"
                    rows.append(f"{head} – | – | – | – | – | **{why}** |")
                    continue
                q = ratios.get(k, {})
                vs_torch = _verdict(q.get("pytorch_best"), t_torch)
                if "pytorch_best_is" in q:
                    vs_torch += f" vs {'torch.compile' if q['pytorch_best_is'] == COMPILED else 'PyTorch eager'}"
                info = c.get("ember_compile", {})
                cs = info.get("compile_s_per_graph", c.get("compile_s"))
                cs_cell = "–" if cs is None else f"{cs * 1e3:,.0f} ms {'✓' if cs <= COMPILE_S_TARGET else '✗'}"
                st = info.get("stats_after_timing", {})
                replayed = (f"✓ {info.get('graphs', '?')} graph(s) ({', '.join(info.get('forms', [])) or '?'}), "
                            f"{info.get('replays_while_measured', '?')} replays while measured, "
                            f"{st.get('eager', '?')} eager" if info else "?")
                over_eager = f"{q['ember']:.3f}×" if "ember" in q else "–"
                rows.append(f"{head} {_fmt(c['per_s'])} | {over_eager} | {_verdict(q.get('numpy'), t_np)} | "
                            f"{vs_torch} | {cs_cell} | {replayed} |")
    if not rows:
        return []
    return ["### ember.compile against its targets", "",
            "Compiled ember's throughput (samples/s, median) over eager ember, over the hand-written NumPy step and "
            "over the faster of PyTorch eager and torch.compile in each repeat (medians of the per-repeat ratios; "
            "✓ meets the target). Compile time: the capturing call less a warm eager call, per captured graph "
            f"(target ≤ {COMPILE_S_TARGET:g} s). Replayed: every timed call replayed a captured program (checked "
            "against eager's results before timing); a column that fell back to eager has no figure.", "",
            "| workload | BLAS threads | ember.compile | samples/s | over eager ember | over NumPy (target) | "
            f"over the faster PyTorch (target) | compile per graph (≤ {COMPILE_S_TARGET:g} s) | replayed |",
            "|---|---:|---|---:|---:|---:|---:|---:|---|", *rows, ""]


def _load_cell(r: dict) -> str:
    load = r.get("load", {})
    if load.get("others_cores") is None:
        return "?"
    return f"{load['others_cores']:.2f}" + (" ⚠" if load["under_load"] else "")


def render(res: dict) -> str:
    m = res["machine"]
    lines = [f"ember benchmark suite — {m['date']}, {m['cpu']}, {m['cores']} cores; Python {m['python']}, "
             f"NumPy {m['numpy']} ({m['blas']}), PyTorch {res['torch'] or 'not installed'}; "
             f"load average at start {m['load_avg_at_start']}; {res['repeats']} interleaved repeats; "
             f"ratios are ember's throughput over the other's (✓ meets the target, ✗ does not).", ""]
    lines += load_banner(_flagged(res), m["load_avg_at_start"], m["cores"])
    runs = res["runs"]
    comp = bool(res.get("compile")) and res["torch"] is not None
    ecomp = bool(res.get("compile"))  # ember.compile's columns (PyTorch or not)
    impls = ("ember",) + (EMBER_COMPILED if ecomp else ()) + ("numpy", "pytorch") + ((COMPILED,) if comp else ())
    lines += ["### Throughput (samples/s: median, min–max)", "",
              "| workload | BLAS threads | ember | "
              + "".join(f"{EMBER_LABELS[k]} | " for k in impls if k in EMBER_LABELS)
              + "NumPy by hand | PyTorch | " + ("PyTorch compiled | " if comp else "")
              + "ember/NumPy (target) | ember/PyTorch (target) | " + ("ember/PyTorch compiled | " if comp else "")
              + "others' CPU (cores) |", "|---|---:|" + "---:|" * (len(impls) + 2 + comp) + "---:|"]
    for key in res["only"]:
        title, _, t_np, t_torch = WORKLOADS[key]
        for run in runs:
            r = run["workloads"][key]
            ratios = r.get("ratios", {})
            cells = [_cell(r, k) for k in impls] + [_verdict(ratios.get("numpy"), t_np),
                                                   _verdict(ratios.get("pytorch"), t_torch)]
            if comp:
                cells.append(f"{ratios[COMPILED]:.3f}×" if COMPILED in ratios else "–")
            lines.append(f"| {title} | {run['threads']} | {' | '.join(cells)} | {_load_cell(r)} |")
    lines.append("")
    if comp:
        times = [f"{k} at {run['threads']} thread(s): {r[COMPILED]['compile_s']:.0f} s"
                 for k in res["only"] for run in runs
                 if "compile_s" in (r := run["workloads"][k]).get(COMPILED, {})]
        lines += ["PyTorch compiled: `torch.compile(model)` (inductor), compiled before timing"
                  + (f" ({', '.join(times)})" if times else "") + "; the optimizer step runs eagerly.", ""]
    elif res["torch"] is not None:
        lines += ["torch.compile not run (`--no-compile`, or `--quick` without `--compile`).", ""]
    if ecomp:
        from .ember_compile import MODE
        lines += ["ember.compile(model): `model = ember.compile(model)`, the step otherwise eager; "
                  "ember.compile(step): the whole step function compiled (forward, backward and the optimizer's "
                  f"update; for inference the no_grad forward); both with mode={MODE!r}. The ratio columns above "
                  "are eager ember's; the compiled columns' are below.", ""]
        lines += _compile_section(res)
    lines.append(f"Others' CPU: the CPU cores other processes kept busy while the row was measured (/proc/stat "
                 f"less this process); above {OTHERS_LIMIT} the row is marked ⚠. Each sample started once the "
                 f"process's other threads were idle (benchmarks/README.md).")
    lines.append("")
    lines.append("float32 matmul, " + ", ".join(
        f"{run['threads']} thread(s): {run['matmul_gflops']:.0f} GFLOP/s at the start, {run['matmul_gflops_end']:.0f} "
        f"at the end" for run in runs) + f" ({MATMUL_N}×{MATMUL_N} @ {MATMUL_N}×{MATMUL_N}, median).")
    lines.append("")
    scaled = [run for run in runs if "scaling" in run]
    if scaled:
        run = scaled[0]
        s, peak = run["scaling"], run["matmul_gflops"]
        lines += [f"### Scaling ({run['threads']} BLAS threads): milliseconds per step, median", ""]

        def table(title: str, col: str, rows: dict, flops: bool, small_target: bool) -> None:
            head = f"| {col} | ember | NumPy | PyTorch | ember/NumPy | ember/PyTorch |"
            sep = "|---:|---:|---:|---:|---:|---:|"
            if flops:
                head += " ember GFLOP/s | of matmul | NumPy of matmul | its matmuls alone, of matmul |"
                sep += "---:|---:|---:|---:|"
            lines.extend([f"**{title}**", "", head, sep])
            for size, r in rows.items():
                ms = [f"{r[k]['ms']:.3f}" if k in r else "–" for k in IMPLS]
                ratios = r.get("ratios", {})
                vs_torch = ratios.get("pytorch")
                if vs_torch is not None and small_target and int(size) in (1, 16):
                    vt = _verdict(vs_torch, SMALL_BATCH_TARGET)
                else:
                    vt = f"{vs_torch:.2f}×" if vs_torch is not None else "–"
                vn = f"{ratios['numpy']:.2f}×" if "numpy" in ratios else "–"
                mark = " ⚠" if r.get("load", {}).get("under_load") else ""
                row = f"| {size}{mark} | {' | '.join(ms)} | {vn} | {vt} |"
                if flops:
                    g = r["flops"] / (r["ember"]["ms"] / 1e3) / 1e9
                    frac = g / peak
                    mark = ""
                    if col == "batch" and int(size) == 128 or col == "width" and int(size) == 512:
                        mark = f" {'✓' if frac >= MATMUL_FRACTION_TARGET else '✗'} (≥ {MATMUL_FRACTION_TARGET:.0%})"
                    fr = {k: f"{r['flops'] / (r[k]['ms'] / 1e3) / 1e9 / peak:.0%}" if k in r else "–"
                          for k in ("numpy", "matmuls")}
                    row += f" {g:.0f} | {frac:.0%}{mark} | {fr['numpy']} | {fr['matmuls']} |"
                lines.append(row)
            lines.append("")
        table("W1 by batch size", "batch", s["w1_batch"], True, True)
        table("W3 training by batch size", "batch", s["w3_batch"], False, True)
        table("W1 by hidden width (batch 128)", "width", s["w1_width"], True, False)
        lines.append(f"GFLOP/s counts the step's matmuls only (benchmarks/mlp.py `step_flops`), against the "
                     f"{peak:.0f} GFLOP/s {MATMUL_N}² matmul rate measured at the start of this run; the last "
                     f"column times the step's eight products alone, into preallocated outputs (`matmuls_only`): "
                     f"the ceiling of any implementation at that shape.")
        lines.append("")
    if res.get("memory"):
        mem_comp = any(EMBER_STEP in per for per in res["memory"].values())
        cols = ("ember",) + ((EMBER_STEP,) if mem_comp else ()) + ("numpy", "pytorch")
        lines += ["### Peak RSS of training (MiB; one process per implementation; after set-up → after the steps)",
                  "", "| workload | steps | ember | " + ("ember.compile(step) | " if mem_comp else "")
                  + "NumPy by hand | PyTorch | ember ≤ PyTorch |"
                  + (" compiled ≤ eager (target) |" if mem_comp else ""),
                  "|---|---:|" + "---:|" * len(cols) + "---|" + ("---|" if mem_comp else "")]

        def mem_cell(m: dict) -> str:
            if "skipped" in m:
                return f"not run: {m['skipped']}"
            cell = f"{m['setup_mib']:.0f} → {m['peak_mib']:.0f}"
            return cell if m.get("replayed", True) else f"**⚠ FELL BACK TO EAGER** ({cell})"

        for key, per in res["memory"].items():
            cells = [mem_cell(per[k]) if k in per else "–" for k in cols]
            ok = "–"
            if "ember" in per and "pytorch" in per:
                ok = "✓" if per["ember"]["peak_mib"] <= per["pytorch"]["peak_mib"] else "✗"
            steps = next(iter(per.values()))["steps"]
            row = f"| {WORKLOADS[key][0].split(':')[0]} | {steps} | {' | '.join(cells)} | {ok} |"
            if mem_comp:
                c = per.get(EMBER_STEP)
                if c is None or "ember" not in per:
                    row += " – |"
                elif "skipped" in c or not c.get("replayed", True):
                    row += " **✗ it ran eagerly** |"
                else:
                    row += f" {'✓' if c['peak_mib'] <= per['ember']['peak_mib'] else '✗'} |"
            lines.append(row)
        if mem_comp:
            lines.append("")
            lines.append("The compiled step's set-up includes its capture and first replays "
                         "(benchmarks/ember_compile.py); the peak counts the whole run.")
        lines.append("")
    if res.get("overhead"):
        lines += ["### Per-op overhead (benchmarks/overhead.py, 1 thread)", "", res["overhead"].strip(), ""]
    lines.append(f"Run took {res['wall_s']:.0f} s: `{res['command']}`.")
    return "\n".join(lines)


def _csv(text: str, allowed=None, conv=str) -> list:
    items = [conv(t.strip()) for t in text.split(",") if t.strip()]
    if allowed is not None:
        bad = [t for t in items if t not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(map(str, bad))}; choose from {', '.join(allowed)}")
    if not items:
        raise argparse.ArgumentTypeError("an empty list")
    return items


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as the rest of `python -m ember`
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m ember bench", description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=lambda s: _csv(s, conv=int), default=[2, 1],
                    help="BLAS thread counts, comma-separated (default 2,1)")
    ap.add_argument("--only", type=lambda s: _csv(s, WORKLOADS), default=DEFAULT_ONLY,
                    help="workloads, comma-separated: w1, w2, w3, w3i, lstm, transformer, w4, w4s "
                         "(default all but W4, the ResNet-18 rows)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default 7)")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out even where it is installed")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run in seconds: 2 repeats of short samples, small scaling tables, 5 memory steps, "
                         "no torch.compile unless --compile")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                    help="time the compiled columns too: PyTorch with torch.compile(model) (~20-60 s of compiling per "
                         "workload and thread count) and ember with ember.compile, the model and the whole step "
                         "(with the ember.compile targets, the compiled step's peak RSS and the compiled 100-op "
                         "chain); default: on, off with --quick; `--quick --compile --no-torch` is a fast check of "
                         "ember's")
    ap.add_argument("--check-fairness", action="store_true",
                    help="instead: time PyTorch alone in fresh processes and inside the interleaved run, side by "
                         "side (benchmarks/fairness.py; --threads, --only, --repeats, --rounds, --quick, --output, "
                         "--json apply)")
    ap.add_argument("--rounds", type=int, help="--check-fairness: how many times each of its processes runs "
                                               "(default 3, 2 with --quick)")
    ap.add_argument("--output", metavar="FILE", help="also write the markdown report to FILE")
    ap.add_argument("--json", metavar="FILE", help="also write every measurement as JSON to FILE")
    ap.add_argument("--device", default="cpu",
                    help="cpu (default: the suite above) or cuda[:N]: W1, W2, W3 training at batch 128 and 1024 on "
                         "that GPU, ember against PyTorch on CUDA")
    ap.add_argument("--distributed", action="store_true",
                    help="instead: W1 and W2 data-parallel training on 1 and 2 MPI processes (scaling efficiency) "
                         "and all_reduce bandwidth (benchmarks/distributed.py; needs mpi4py and mpiexec)")
    ap.add_argument("--worker", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    ap.add_argument("--worker-args", help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    for i, v in enumerate(args):  # `--only ops`: the per-op tables (benchmarks/ops.py), a run of their own
        if v == "--only=ops" or (v == "--only" and args[i + 1:i + 2] == ["ops"]):
            from .ops import main as ops_main
            return ops_main(args[:i] + args[i + (1 if "=" in v else 2):])
        if v == "--only=func" or (v == "--only" and args[i + 1:i + 2] == ["func"]):  # benchmarks/func.py
            from .func import main as func_main
            return func_main(args[:i] + args[i + (1 if "=" in v else 2):])
        if v == "--only=conv" or (v == "--only" and args[i + 1:i + 2] == ["conv"]):  # benchmarks/conv.py
            from .conv import main as conv_main
            return conv_main(args[:i] + args[i + (1 if "=" in v else 2):])
    ap = parser()
    a = ap.parse_args(argv)
    if a.worker is not None:  # a child: measure, print JSON
        w = json.loads(a.worker_args)
        print(json.dumps(worker(a.worker, w["only"], w["impls"], w["repeats"], w["sample_s"], w["scaling"])))
        return 0
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    if a.rounds is not None and a.rounds < 1:
        ap.error("--rounds must be at least 1")
    command = " ".join(["python -m ember bench", *(sys.argv[1:] if argv is None else argv)])
    if a.distributed:
        from .distributed import suite_main
        return suite_main(a.only, a.quick, a.repeats, a.output, a.json, command)
    if a.device != "cpu":
        return device_main(a, argv)
    if any(t < 1 for t in a.threads):
        ap.error("--threads must be positive")
    if a.check_fairness:
        from .fairness import check_main
        return check_main(a, command)
    t0 = time.perf_counter()
    # torch.compile costs ~20-60 s per graph: on in the full suite (PyTorch at its best is the fair
    # comparison), off in the smoke run unless asked for
    compile_on = (not a.quick) if a.compile is None else a.compile
    impls = ("ember", "numpy") if a.no_torch else IMPLS + ((COMPILED,) if compile_on else ())
    if compile_on:  # ember.compile's columns: with or without PyTorch
        impls += EMBER_COMPILED
    repeats, sample_s = (2, 0.005) if a.quick else (a.repeats, 0.1)
    scaling = None if a.no_scaling else (
        {"batches": [1, 16], "widths": [128]} if a.quick else
        {"batches": [1, 16, 128, 1024], "widths": [128, 256, 512, 1024, 2048, 4096]})
    res: dict = {"machine": machine_info(), "only": a.only, "repeats": repeats, "runs": [], "compile": compile_on,
                 "load_limits": {"others_cores": OTHERS_LIMIT, "load_avg_at_start_per_core": LOAD_LIMIT_PER_CORE},
                 "command": command}
    for i, threads in enumerate(a.threads):
        print(f"[bench] measuring at {threads} BLAS thread(s)...", file=sys.stderr, flush=True)
        res["runs"].append(run_worker(threads, {"only": a.only, "impls": impls, "repeats": repeats,
                                                "sample_s": sample_s, "scaling": scaling if i == 0 else None}))
    res["torch"] = res["runs"][0]["torch"]
    if not a.no_memory:
        from ._harness import Progress
        mem_impls = [k for k in ("ember", EMBER_STEP, "numpy", "pytorch")
                     if k in impls and (k != "pytorch" or res["torch"] is not None)]
        progress = Progress(2 * len(mem_impls), "peak memory", unit="process")
        res["memory"] = {}
        for key in ("w1", "w3"):
            res["memory"][key] = {}
            for impl in mem_impls:
                progress.phase(f"{key}, {impl}, {5 if a.quick else 200} steps in a process of its own")
                out = run_python(["-m", "benchmarks.memory", key, impl, "--steps", "5" if a.quick else "200"],
                                 a.threads[0])
                res["memory"][key][impl] = json.loads(out.strip().splitlines()[-1])
                progress.advance()
        progress.close()
    if not a.no_overhead:
        print("[bench] per-op overhead...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            args = ["-m", "benchmarks.overhead", "--json", os.path.join(tmp, "o.json"),
                    "--repeats", "3" if a.quick else "15"] + (["--no-torch"] if a.no_torch else []) + (
                    [] if compile_on else ["--no-compile"])
            text = run_python(args, 1)
        res["overhead"] = text.split("\n", 2)[2] if text.count("\n") > 2 else text  # drop its title line
    res["wall_s"] = time.perf_counter() - t0
    res["under_load"] = _flagged(res)
    return emit(render(res), res, a)


# ---------------------------------------------------------------------- on a GPU
DEVICE_WORKLOADS = ("w1", "w2", "w3")
DEVICE_BATCHES = (128, 1024)


def device_cases(key: str, batch: int, impls, device: str) -> dict:
    if key == "w1":
        from .mlp import cases
        return cases(batch, impls=impls, device=device)
    if key == "w2":
        from .resmlp import cases
        return cases(batch, impls=impls, device=device)
    from .cnn import train_cases
    return train_cases(batch, impls=impls, device=device)


def device_main(a: argparse.Namespace, argv: list[str] | None) -> int:
    """`--device cuda`: W1-W3 training steps at batch 128 and 1024 on the GPU, ember against PyTorch's CUDA
    (each step ends with a synchronize, so the GPU's work is timed), in this process; a markdown table."""
    import ember
    try:
        dev = ember.backend.resolve(a.device)
    except (TypeError, ValueError, RuntimeError) as e:
        print(f"python -m ember bench: error: --device {a.device}: {e}", file=sys.stderr)
        return 2
    if dev.type != "cuda":
        print(f"python -m ember bench: error: --device {a.device}: expected cpu or cuda[:N]", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    ember.cuda.set_device(dev.index)
    note = None
    impls: tuple = ("ember",)
    if not a.no_torch:
        from ._harness import import_torch
        torch = import_torch(("pytorch",))
        if torch is None:
            note = "PyTorch is not installed: ember alone"
        elif not torch.cuda.is_available():
            note = f"PyTorch {torch.__version__} has no CUDA here (torch.cuda.is_available() is False): ember alone"
        else:
            impls = ("ember", "pytorch")
    repeats, sample_s = (2, 0.005) if a.quick else (a.repeats, 0.1)
    batches = DEVICE_BATCHES
    keys = [k for k in a.only if k in DEVICE_WORKLOADS]
    from ._harness import measure
    rows = {}
    for key in keys:
        for batch in batches:
            print(f"[bench] {key} batch {batch} on {dev}...", file=sys.stderr, flush=True)
            rows[f"{key}/{batch}"] = measure(device_cases(key, batch, impls, str(dev)), batch, repeats, sample_s)
    name = ember.cuda.get_device_name(dev.index)
    lines = [f"ember benchmark suite on {dev} ({name}), {datetime.date.today().isoformat()}; {repeats} interleaved "
             f"repeats, each step synchronized; samples/s (median, min–max).", ""]
    if note:
        lines += [f"Note: {note}.", ""]
    lines += ["| workload | batch | ember | PyTorch | ember/PyTorch |", "|---|---:|---:|---:|---:|"]
    for key in keys:
        for batch in batches:
            r = rows[f"{key}/{batch}"]
            cells = [f"{_fmt(r[k]['per_s'])} ({_fmt(r[k]['min'])}–{_fmt(r[k]['max'])})" if k in r else "–"
                     for k in ("ember", "pytorch")]
            ratio = r.get("ratios", {}).get("pytorch")
            lines.append(f"| {WORKLOADS[key][0].split(':')[0]} | {batch} | {' | '.join(cells)} | "
                         f"{f'{ratio:.2f}×' if ratio is not None else '–'} |")
    lines += ["", f"Run took {time.perf_counter() - t0:.0f} s: "
                  f"`{' '.join(['python -m ember bench', *(sys.argv[1:] if argv is None else argv)])}`."]
    return emit("\n".join(lines), {"device": str(dev), "name": name, "note": note, "rows": rows}, a)


def emit(report: str, data, a) -> int:
    """Print the markdown report and write it (--output) and the measurements (--json) where asked."""
    print(report)
    if a.output:
        with open(a.output, "w") as f:
            f.write(report + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
