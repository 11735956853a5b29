"""Fused CUDA kernels for the optimizers' hot update chains, each beside its NumPy reference (and,
on the CPU with numba installed, the same chains as parallel loops: cpu_kernels.py).

An Adam step written with ufuncs is a dozen passes over memory and as many kernel launches per
parameter; on a GPU one elementwise kernel reads p, d, m, v once and writes them once. Each update
here is one `cupy.ElementwiseKernel` (CUDA C) and a reference function of the same math written with
in-place ufuncs. The reference *is* the CPU optimizer's update (ember's CPU path calls it), so it runs
on NumPy arrays, and on a device array wherever the kernel cannot be used: the fake CUDA backend of
the tests (whose `ElementwiseKernel` raises NotImplementedError).

Scalars reach the kernel cast to the arrays' dtype `T`, as the ufuncs cast Python floats (NEP 50),
so both compute in `T`. On a GPU the compiler may contract `a*b + c` into one FMA, so results agree
with the reference to rounding, not bit for bit.
"""
from __future__ import annotations

import numpy as np

from . import cpu_kernels, cuda_backend

__all__ = ["KERNELS", "adam_", "sgd_momentum_", "lerp_", "ema_sq_"]

# name -> (in_params, out_params, CUDA C body); out params are read and written in place
KERNELS: dict[str, tuple[str, str, str]] = {
    "ember_adam": (
        "T d, T w1, T omw1, bool small_w1, T beta2, T omb2, T bc2_sqrt, T eps, T neg_step_size",
        "T p, T m, T v",
        """
        // m <- lerp(m, d, w1), rounded as PyTorch's lerp_ (its form depends on |w1| < 0.5)
        T diff = d - m;
        m = small_w1 ? m + diff * w1 : d - diff * omw1;
        v = v * beta2 + (d * omb2) * d;
        T den = sqrt(v) / bc2_sqrt + eps;
        p += (m / den) * neg_step_size;
        """),
    "ember_adam_amsgrad": (
        "T d, T w1, T omw1, bool small_w1, T beta2, T omb2, T bc2_sqrt, T eps, T neg_step_size",
        "T p, T m, T v, T vmax",
        """
        T diff = d - m;
        m = small_w1 ? m + diff * w1 : d - diff * omw1;
        v = v * beta2 + (d * omb2) * d;
        vmax = vmax > v ? vmax : v;
        T den = sqrt(vmax) / bc2_sqrt + eps;
        p += (m / den) * neg_step_size;
        """),
    "ember_sgd_momentum": (
        "T d, T mu, T omd, T neg_lr, bool first, bool nesterov",
        "T p, T b",
        """
        // on the first step b was just made a copy of d; afterwards b <- mu*b + (1-dampening)*d
        if (!first) b = b * mu + d * omd;
        T u = nesterov ? d + b * mu : b;
        p += u * neg_lr;
        """),
}

_compiled: dict = {}  # (name, id of the CuPy module) -> ElementwiseKernel


def _kernel(a, name: str):
    """The compiled kernel `name` for the device array `a`, or None where the reference must run
    (NumPy arrays; a CUDA backend that cannot compile kernels, such as the tests' fake)."""
    if type(a) is np.ndarray:
        return None
    be = cuda_backend()
    if be is None or be.fake:
        return None
    key = (name, id(be.cp))
    k = _compiled.get(key)
    if k is None:
        in_params, out_params, body = KERNELS[name]
        k = _compiled[key] = be.cp.ElementwiseKernel(in_params, out_params, body, name)
    return k


# ---------------------------------------------------------------------------------------- shared steps
def lerp_(a, b, w: float, tmp) -> None:
    """a += w·(b - a) in place, rounded as PyTorch's `lerp_` (its form depends on |w| < 0.5)."""
    np.subtract(b, a, out=tmp)
    if abs(w) < 0.5:
        tmp *= w
        a += tmp
    else:
        tmp *= 1 - w
        np.subtract(b, tmp, out=a)


def ema_sq_(v, d, beta: float, tmp) -> None:
    """v = beta·v + (1 - beta)·d², in place."""
    v *= beta
    np.multiply(d, 1 - beta, out=tmp)
    tmp *= d
    v += tmp


# ---------------------------------------------------------------------------------------- Adam
def adam_(p, d, m, v, vmax, w1: float, beta2: float, bc2_sqrt: float, eps: float, neg_step_size: float, tmp) -> None:
    """One Adam update in place: m ← lerp(m, d, w1); v ← β₂·v + (1-β₂)·d²; (amsgrad, `vmax` not None:
    vmax ← max(vmax, v), used for v); p += neg_step_size · m / (√v / bc2_sqrt + eps).
    `tmp` is a scratch array shaped like p (the reference's temporary)."""
    k = _kernel(p, "ember_adam" if vmax is None else "ember_adam_amsgrad")
    if k is not None:
        T = p.dtype.type
        scalars = (T(w1), T(1 - w1), abs(w1) < 0.5, T(beta2), T(1 - beta2), T(bc2_sqrt), T(eps), T(neg_step_size))
        if vmax is None:
            k(d, *scalars, p, m, v)
        else:
            k(d, *scalars, p, m, v, vmax)
        return
    if cpu_kernels.usable(p) and cpu_kernels.adam(p, d, m, v, vmax, w1, beta2, bc2_sqrt, eps, neg_step_size):
        return  # one parallel loop (numba, the `compile` extra): the same arithmetic, bit for bit
    adam_reference(p, d, m, v, vmax, w1, beta2, bc2_sqrt, eps, neg_step_size, tmp)


def adam_reference(p, d, m, v, vmax, w1: float, beta2: float, bc2_sqrt: float, eps: float, neg_step_size: float,
                   tmp) -> None:
    """`adam_` with ufuncs (the CPU update); works on NumPy and CuPy arrays."""
    lerp_(m, d, w1, tmp)
    ema_sq_(v, d, beta2, tmp)
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
        v = vmax
    np.sqrt(v, out=tmp)
    tmp /= bc2_sqrt
    tmp += eps
    np.divide(m, tmp, out=tmp)
    tmp *= neg_step_size
    p += tmp


# ---------------------------------------------------------------------------------------- SGD
def sgd_momentum_(p, d, b, mu: float, dampening: float, neg_lr: float, first: bool, nesterov: bool, tmp) -> None:
    """One SGD-with-momentum update in place: b ← μ·b + (1-dampening)·d, except on the `first` step, when
    the caller has just made b a copy of d;
    u = d + μ·b (nesterov) or b; p += neg_lr·u. `tmp` is a scratch array shaped like p."""
    k = _kernel(p, "ember_sgd_momentum")
    if k is not None:
        T = p.dtype.type
        k(d, T(mu), T(1 - dampening), T(neg_lr), bool(first), bool(nesterov), p, b)
        return
    if cpu_kernels.usable(p) and cpu_kernels.sgd_momentum(p, d, b, mu, dampening, neg_lr, first, nesterov):
        return  # one parallel loop (numba, the `compile` extra): the same arithmetic, bit for bit
    sgd_momentum_reference(p, d, b, mu, dampening, neg_lr, first, nesterov, tmp)


def sgd_momentum_reference(p, d, b, mu: float, dampening: float, neg_lr: float, first: bool, nesterov: bool,
                           tmp) -> None:
    """`sgd_momentum_` with ufuncs (the CPU update); works on NumPy and CuPy arrays."""
    if not first:
        b *= mu
        if dampening != 0:
            np.multiply(d, 1 - dampening, out=tmp)
            b += tmp
        else:
            b += d
    if nesterov:
        np.multiply(b, mu, out=tmp)
        np.add(d, tmp, out=tmp)
        u = tmp
    else:
        u = b
    np.multiply(u, neg_lr, out=tmp)
    p += tmp
