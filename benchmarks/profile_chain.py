"""Profile ember on the 100-op chain of benchmarks/overhead.py (forward with graph, then backward).

    python -m benchmarks.profile_chain [--repeats 2000] [--top 15]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats

import numpy as np

import ember


def chain(x0: ember.Tensor, c: ember.Tensor, d: ember.Tensor, ones: ember.Tensor) -> None:
    x = x0
    for _ in range(33):  # 99 ops: x*c, x+d, tanh
        x = (x * c + d).tanh()
    x.backward(ones)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2000)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args()
    c = ember.from_numpy(np.full((4, 4), 0.9, np.float32))
    d = ember.from_numpy(np.full((4, 4), 0.1, np.float32))
    x0 = ember.from_numpy(np.ones((4, 4), np.float32)).requires_grad_()
    ones = ember.ones(4, 4)
    for _ in range(100):  # warm up
        chain(x0, c, d, ones)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.repeats):
        chain(x0, c, d, ones)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
