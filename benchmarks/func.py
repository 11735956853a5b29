"""Function transforms: `python -m ember bench --only func [--threads 2] [--repeats 7] [--quick]`.

Two tables, each measured interleaved in one process with `_harness.measure` (an idle wait before every
sample, the cases rotating their order each repeat):

1. Per-example gradients of the W1 MLP (784-512-512-10, cross-entropy) at batch 128:
   ember's `vmap(grad(loss), in_dims=(None, 0, 0))` against a Python loop over the examples (one forward and
   one `autograd.grad` each: what a user writes without vmap) and against PyTorch's
   `torch.func.vmap(torch.func.grad(...))` (PyTorch at its defaults, same thread count). Targets: ≥ 10× the
   loop, ≥ 1.0× torch.func.
2. Jacobians by forward and by reverse mode: `jacfwd` and `jacrev` of f(x) = tanh(A x) for A 1000×10 (10
   inputs, 1000 outputs: forward mode should win, 10 passes against 1000) and A 10×1000 (reverse mode should
   win), with torch.func's for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from . import _harness as H


def _w1(lib, d_in=784, width=512, classes=10):
    nn = lib.nn
    return nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, classes))


def per_example_cases(torch, batch: int, d_in: int = 784, width: int = 512) -> dict:
    import ember
    from ember.func import functional_call, grad, vmap
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, d_in)).astype(np.float32)
    y_np = rng.integers(0, 10, batch)
    ember.manual_seed(0)
    model = _w1(ember, d_in, width)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = ember.from_numpy(x_np), ember.from_numpy(y_np)
    F = ember.nn.functional

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    leaves = list(params.values())

    def ember_vmap():
        return per_example(params, x, y)

    def ember_loop():
        out = []
        for i in range(batch):
            ps = {k: v.requires_grad_() if False else v.detach().requires_grad_() for k, v in params.items()}
            out.append(ember.autograd.grad(loss(ps, x[i], y[i]), list(ps.values())))
        return out

    cases = {"ember vmap(grad)": ember_vmap, "ember loop": ember_loop}
    if torch is not None:
        tf = torch.func
        tmodel = _w1(torch, d_in, width)
        with torch.no_grad():
            for (k, tp), ep in zip(tmodel.named_parameters(), leaves):
                tp.copy_(torch.from_numpy(ep.numpy()))
        tparams = {k: v.detach() for k, v in tmodel.named_parameters()}
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def tloss(p, xi, yi):
            return torch.nn.functional.cross_entropy(tf.functional_call(tmodel, p, (xi.unsqueeze(0),)),
                                                     yi.unsqueeze(0))

        t_per_example = tf.vmap(tf.grad(tloss), in_dims=(None, 0, 0))
        cases["torch.func vmap(grad)"] = lambda: t_per_example(tparams, tx, ty)
        # the same gradients (a check, not a timing): per example, per parameter
        eg, tg = ember_vmap(), t_per_example(tparams, tx, ty)
        worst = max(float(np.abs(eg[k].numpy() - tg[k].numpy()).max()) for k in eg)
        cases["_agreement"] = worst
    return cases


def jacobian_cases(torch, n_in: int, n_out: int) -> dict:
    import ember
    from ember.func import jacfwd, jacrev
    rng = np.random.default_rng(1)
    A_np = rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)
    x_np = rng.standard_normal(n_in)
    A, x = ember.tensor(A_np), ember.tensor(x_np)

    def f(v):
        return (A @ v).tanh()

    cases = {"ember jacfwd": lambda: jacfwd(f)(x), "ember jacrev": lambda: jacrev(f)(x)}
    if torch is not None:
        tA, tx = torch.tensor(A_np), torch.tensor(x_np)

        def tfn(v):
            return (tA @ v).tanh()

        cases["torch.func jacfwd"] = lambda: torch.func.jacfwd(tfn)(tx)
        cases["torch.func jacrev"] = lambda: torch.func.jacrev(tfn)(tx)
    return cases


def run(threads: int, repeats: int, quick: bool, no_torch: bool) -> dict:
    torch = None if no_torch else H.import_torch(["pytorch"])
    if torch is not None:
        torch.set_num_threads(threads)
    import ember
    ember.set_num_threads(threads)
    res: dict = {"threads": threads, "repeats": repeats, "torch": getattr(torch, "__version__", None)}
    batch = 16 if quick else 128
    cases = per_example_cases(torch, batch)
    agreement = cases.pop("_agreement", None)
    loop = cases.pop("ember loop")
    res["batch"] = batch
    res["per_example"] = H.measure(cases, batch, repeats, sample_s=0.2)
    # the loop is ~100× slower: fewer, longer samples of it alone
    res["per_example"]["ember loop"] = H.summarize(H.interleave({"loop": loop}, max(3, repeats // 2), 0.5)[0],
                                                   batch)["loop"]
    res["per_example"]["max_abs_difference_vs_torch"] = agreement
    res["jacobians"] = {}
    for n_in, n_out in ((10, 1000), (1000, 10)):
        res["jacobians"][f"{n_in}->{n_out}"] = H.measure(jacobian_cases(torch, n_in, n_out), 1, repeats, sample_s=0.1)
    return res


def report(res: dict) -> str:
    pe = res["per_example"]
    v = pe["ember vmap(grad)"]
    lines = [f"Per-example gradients, W1 MLP 784-512-512-10, batch {res['batch']} "
             f"({res['threads']} threads, {res['repeats']} repeats; examples/s, median (min–max))", "",
             "| implementation | examples/s | step ms |", "|---|---:|---:|"]
    for k in ("ember vmap(grad)", "ember loop", "torch.func vmap(grad)"):
        if k in pe and "per_s" in pe[k]:
            s = pe[k]
            lines.append(f"| {k} | {s['per_s']:.0f} ({s['min']:.0f}–{s['max']:.0f}) | {s['ms']:.2f} |")
    loop_ms = pe["ember loop"]["ms"]
    lines.append("")
    lines.append(f"vmap(grad) / loop: {loop_ms / v['ms']:.1f}× (target ≥ 10×)")
    if "torch.func vmap(grad)" in pe:
        import statistics
        ratio = statistics.median(t / e for e, t in zip(v["samples_ms"], pe["torch.func vmap(grad)"]["samples_ms"]))
        lines.append(f"vmap(grad) / torch.func: {ratio:.2f}× (target ≥ 1.0×; "
                     f"the median of per-repeat throughput ratios); largest difference of the gradients: "
                     f"{pe['max_abs_difference_vs_torch']:.2e}")
    lines += ["", "Jacobians of tanh(A x) (ms per Jacobian, median)", "",
              "| function | ember jacfwd | ember jacrev | torch.func jacfwd | torch.func jacrev |",
              "|---|---:|---:|---:|---:|"]
    for name, r in res["jacobians"].items():
        cells = [f"{r[k]['ms']:.2f}" if k in r and "ms" in r[k] else "–"
                 for k in ("ember jacfwd", "ember jacrev", "torch.func jacfwd", "torch.func jacrev")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ember bench --only func", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="batch 16, for a smoke run")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if not a.worker:  # the thread count is fixed through the environment before NumPy/PyTorch load: a child
        import subprocess
        env = H.thread_env(a.threads, dict(os.environ))
        cmd = [sys.executable, "-m", "benchmarks.func", "--worker", "--threads", str(a.threads), "--repeats",
               str(a.repeats)] + (["--quick"] if a.quick else []) + (["--no-torch"] if a.no_torch else [])
        out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if out.returncode:
            sys.stderr.write(out.stderr)
            return out.returncode
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(report(res))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
        return 0
    import warnings
    warnings.simplefilter("ignore")
    print(json.dumps(run(a.threads, a.repeats, a.quick, a.no_torch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
