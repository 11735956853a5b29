"""ember.lazy(): when deferring pays and when it does not, measured in one process.

Run from the repository root:  python -m benchmarks.lazy [--repeats 11] [--threads 2] [--json out.json]

Cases (each a step run many times; the implementations of a case interleaved repeat by repeat, as the
suite does, with `_harness.measure`):

- gelu: the tanh approximation of GELU written out as 8 elementwise ops, no grad, float32, on a
  (1024, 1024) tensor (inference on a large activation): "ember" eager, "ember-lazy" (`with ember.lazy()`,
  dead buffers of the chain reused), "ember-lazy-noreuse" (deferred, the reuse pass off), the hand-written
  NumPy line ("numpy", with the cube as products, NumPy's fastest), the same expression in numexpr by hand
  ("numexpr": what a fused kernel reaches here; measured so, ember does not fuse with it), and PyTorch's eager ops ("pytorch") where installed.
- dead: a no-grad forward (tanh(x @ w), 1000×784 by 784×512) that also computes a softmax its caller drops,
  the caller keeping the argmax: lazily, the softmax never runs.
- mlp-step: W1's training step (MLP 784-512-512-10, SGD momentum, batch 128), eager and in a lazy block:
  every op records for backward, so nothing fuses and deferral is pure cost.
- chain: 100 tiny ops on a (4, 4) tensor, no grad: the per-op cost of deferring.

Threads: BLAS and numexpr get `--threads` (the suite's default, 2); PyTorch likewise.
"""
from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._harness import THREAD_VARS  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sample", type=float, default=0.1, help="seconds per sample")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def gelu_cases(ember, np, torch, ne) -> dict:
    from ember import _reuse
    x = ember.randn(1024, 1024)
    a = x.numpy()

    def gelu(x, tanh):
        return 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

    def eager():
        return gelu(x, ember.tanh)

    def lazy():
        with ember.lazy():
            y = gelu(x, ember.tanh)
        return y

    def noreuse():
        _reuse.ENABLED = False
        try:
            return lazy()
        finally:
            _reuse.ENABLED = True
    c32 = {k: np.float32(v) for k, v in (("h", 0.5), ("c", 0.7978845608), ("k", 0.044715), ("one", 1.0))}
    cases = {"ember": eager, "ember-lazy": lazy, "ember-lazy-noreuse": noreuse,
             # (NumPy's best line: a * a * a, not a ** 3, which libm's pow runs at ~60 ns an element for a < 0)
             "numpy": lambda: c32["h"] * a * (c32["one"] + np.tanh(c32["c"] * (a + c32["k"] * (a * a * a))))}
    if ne is not None:
        cases["numexpr"] = lambda: ne.evaluate("h * a * (one + tanh(c * (a + k * a ** 3)))", local_dict=dict(c32, a=a))
    if torch is not None:
        tx = torch.from_numpy(a)
        cases["pytorch"] = lambda: gelu(tx, torch.tanh)
    lazy()  # the first lazy run learns the shapes (runs eagerly)
    ref = eager().numpy()
    for k in ("ember-lazy", "ember-lazy-noreuse"):
        got = cases[k]().numpy()
        assert np.allclose(got, ref, rtol=1e-5, atol=1e-6), k
    return cases


def dead_cases(ember) -> dict:
    """Inference that also computes what its caller drops: logits and their softmax, the caller keeping the
    predicted classes only (as a model returning several outputs, of which the loop reads one)."""
    ember.manual_seed(0)
    x, w = ember.randn(1000, 784), ember.randn(784, 512) * 0.05

    def infer():
        h = ember.tanh(x @ w)
        probs = ember.softmax(h, 1)  # noqa: F841  (computed, never read)
        return h.argmax(1)

    def lazy():
        with ember.lazy():
            return infer()
    lazy()
    assert (lazy() == infer()).all().item()
    return {"ember": infer, "ember-lazy": lazy}


def mlp_cases(ember) -> dict:
    from benchmarks.nets import mlp
    ember.manual_seed(0)
    model = mlp(ember.nn, 784, 512, 10)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = ember.randn(128, 784), ember.randint(0, 10, (128,))
    loss_fn = ember.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def lazy_step():
        with ember.lazy():
            return step()
    lazy_step()
    return {"ember": step, "ember-lazy": lazy_step}


def chain_cases(ember) -> dict:
    x0 = ember.randn(4, 4)

    def chain():
        x = x0
        for _ in range(33):
            x = ember.tanh(x * 0.9 + 0.1)
        return x

    def lazy_chain():
        with ember.lazy():
            return chain()
    lazy_chain()
    return {"ember": chain, "ember-lazy": lazy_chain}


def main(argv=None) -> dict:
    args = _args(argv)
    for var in THREAD_VARS:
        os.environ[var] = str(args.threads)
    import numpy as np

    import ember
    from benchmarks._harness import measure
    try:
        import numexpr as ne
        ne.set_num_threads(args.threads)
    except ImportError:
        ne = None
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            torch = None
    out = {"threads": args.threads, "repeats": args.repeats, "numexpr": ne is not None}
    with ember.no_grad():
        out["gelu"] = measure(gelu_cases(ember, np, torch, ne), 1, args.repeats, args.sample)
        out["chain"] = measure(chain_cases(ember), 1, args.repeats, args.sample)
        out["dead"] = measure(dead_cases(ember), 1000, args.repeats, args.sample)
    out["mlp-step"] = measure(mlp_cases(ember), 128, args.repeats, args.sample)
    for case in ("gelu", "dead", "mlp-step", "chain"):
        r = out[case]
        print(f"\n{case}: ms per step (median), and time relative to ember eager (median of paired ratios)")
        for k, v in r.items():
            if isinstance(v, dict) and "ms" in v:
                ratio = 1.0 if k == "ember" else r["ratios"].get(k)
                print(f"  {k:20s} {v['ms']:9.3f} ms   {ratio:5.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
