"""Fused CPU kernels (numba, optional): the optimizers' update chains as one loop.

A CPU update written with ufuncs makes one pass over memory per ufunc: SGD with momentum is four
passes, Adam about twelve. The kernels here make one (SGD) or two (Adam) vectorised loops. They are the same
arithmetic as the CUDA kernels in `kernels.py`, in the same order and in the arrays' dtype (every
scalar arrives cast to it), without fast-math and without contracting `a*b + c` into an FMA, so they
agree with the ufunc references bit for bit (tests/test_cpu_kernels.py checks it).

Measured on this project's 2-core machine (docs/performance.md, issue 21): SGD momentum on a
512×784 float32 parameter 138 µs with ufuncs, 69 µs here; Adam on 110k floats 155 µs, 63 µs.
numexpr, the other candidate, took 430–620 µs for the SGD update (two evaluate calls): not used.

numba is the `compile` extra (`pip install 'ember[compile]'`), and the kernels run in the steps that
`ember.compile(..., mode="max-autotune")` replays (see `active`); elsewhere, without numba, or with
EMBER_NUMBA=0, the ufunc references run. numba is imported at the first update large
enough to use it (importing it costs ~0.3 s), and the compiled kernels are cached on disk
(`cache=True`), so a second process loads them instead of compiling again.
"""
from __future__ import annotations

import os

import numpy as np

MIN_SIZE = 1 << 14  # elements; smaller parameters are few passes' work (and the grouped update flattens them)

_state: dict = {}
# > 0 while a program compiled by ember.compile(..., mode="max-autotune") replays (program.py raises it
# around the replay). Only there: importing numba and loading the kernels cost a process 0.5-0.9 s
# (measured: the main job took 1.45 s without, 2.0-2.4 s with) and ~120 MiB, which a short run never
# earns back at ~0.1-0.3 ms per step; that mode is the user's choice to pay them for faster steps.
active = 0


def enabled() -> bool:
    """Whether the numba kernels are available (numba installed and not disabled by EMBER_NUMBA=0)."""
    ok = _state.get("ok")
    if ok is None:
        ok = _state["ok"] = os.environ.get("EMBER_NUMBA", "1") != "0" and _load()
    return ok


def _load() -> bool:
    try:
        import numba
    except ImportError:
        return False
    njit = numba.njit
    # One thread: within a training step the OpenBLAS threads are still spinning after the last GEMM, and a
    # parallel loop's second thread competes with them for the 2 cores (measured: a parallel SGD update made
    # the W1 step slower, 0.66 ms against 0.61 ms with ufuncs; the one-thread loop takes 0.43 ms).
    # error_model="numpy": a division by zero gives inf/NaN as the ufuncs do (numba's default checks every
    # division and raises, and that check keeps the loop from being vectorized: Adam ran 2.4x slower than
    # its ufunc chain). Each flag gets its own loop, so no loop carries a branch (they vectorize).
    opts = dict(cache=True, fastmath=False, nogil=True, error_model="numpy")

    @njit(**opts)
    def sgd_momentum(p, d, b, mu, omd, neg_lr, first, nesterov):  # pragma: no cover (compiled)
        n = p.size
        if first:  # b was just made a copy of d
            if nesterov:
                for i in range(n):
                    p[i] += (d[i] + b[i] * mu) * neg_lr
            else:
                for i in range(n):
                    p[i] += b[i] * neg_lr
        elif nesterov:
            for i in range(n):
                bi = b[i] * mu + d[i] * omd
                b[i] = bi
                p[i] += (d[i] + bi * mu) * neg_lr
        else:
            for i in range(n):
                bi = b[i] * mu + d[i] * omd
                b[i] = bi
                p[i] += bi * neg_lr

    @njit(**opts)
    def adam(p, d, m, v, vmax, amsgrad, w1, omw1, small_w1, beta2, omb2, bc2_sqrt, eps, neg_step_size):  # pragma: no cover
        n = p.size
        # m <- lerp(m, d, w1), rounded as PyTorch's lerp_ (its form depends on |w1| < 0.5); v <- b2 v + (1-b2) d^2
        if small_w1:
            for i in range(n):
                m[i] = m[i] + (d[i] - m[i]) * w1
                v[i] = v[i] * beta2 + (d[i] * omb2) * d[i]
        else:
            for i in range(n):
                m[i] = d[i] - (d[i] - m[i]) * omw1
                v[i] = v[i] * beta2 + (d[i] * omb2) * d[i]
        if amsgrad:
            for i in range(n):
                vmax[i] = np.maximum(vmax[i], v[i])  # (NaN propagates, as in the ufunc)
            for i in range(n):
                p[i] += (m[i] / (np.sqrt(vmax[i]) / bc2_sqrt + eps)) * neg_step_size
        else:
            for i in range(n):
                p[i] += (m[i] / (np.sqrt(v[i]) / bc2_sqrt + eps)) * neg_step_size

    _state["sgd_momentum"], _state["adam"] = sgd_momentum, adam
    return True


def usable(p) -> bool:
    """Whether the kernels may update `p`: inside a compiled program's replay (`active`), a contiguous
    float32/float64 NumPy array of at least MIN_SIZE."""
    return (active and type(p) is np.ndarray and p.size >= MIN_SIZE and p.dtype.kind == "f" and p.dtype.itemsize >= 4
            and p.flags.c_contiguous and enabled())


def _flat(*arrays):
    return [a.reshape(-1) for a in arrays]


def sgd_momentum(p, d, b, mu: float, dampening: float, neg_lr: float, first: bool, nesterov: bool) -> bool:
    """`kernels.sgd_momentum_reference` as one loop; False (nothing done) where it cannot run."""
    if not (d.flags.c_contiguous and b.flags.c_contiguous and d.dtype == p.dtype and b.dtype == p.dtype):
        return False
    T = p.dtype.type
    pf, df, bf = _flat(p, d, b)
    _state["sgd_momentum"](pf, df, bf, T(mu), T(1 - dampening), T(neg_lr), bool(first), bool(nesterov))
    return True


def adam(p, d, m, v, vmax, w1: float, beta2: float, bc2_sqrt: float, eps: float, neg_step_size: float) -> bool:
    """`kernels.adam_reference` as one loop; False (nothing done) where it cannot run."""
    arrays = (d, m, v) if vmax is None else (d, m, v, vmax)
    if not all(a.flags.c_contiguous and a.dtype == p.dtype for a in arrays):
        return False
    T = p.dtype.type
    pf, df, mf, vf = _flat(p, d, m, v)
    vmf = vf if vmax is None else vmax.reshape(-1)
    _state["adam"](pf, df, mf, vf, vmf, vmax is not None, T(w1), T(1 - w1), abs(w1) < 0.5, T(beta2),
                   T(1 - beta2), T(bc2_sqrt), T(eps), T(neg_step_size))
    return True
