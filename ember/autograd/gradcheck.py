"""Finite-difference checks of gradients: `gradcheck` and `gradgradcheck`.

The numerical Jacobian uses central differences, (f(x + eps) - f(x - eps)) / 2eps, one
input element at a time; the analytical Jacobian is built row by row from
vector-Jacobian products with one-hot cotangents. Use float64 inputs.
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor, make
from ..backend import to_host, transfer
from .engine import grad
from .grad_mode import enable_grad, no_grad
from .. import _dtype as dt


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical gradients differ."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func, inputs) -> list:
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def _float_outputs(func, inputs) -> list:
    """The differentiable outputs (integer outputs such as indices have no gradient)."""
    return [o for o in _outputs(func, inputs) if dt.is_float(o._data.dtype)]


def _numerical(func, inputs, diff_idx, out_count, eps) -> list:
    """jac[i][k] has shape (numel(outputs[k]), numel(inputs[i]))."""
    with no_grad():
        base = _outputs(func, inputs)
    jacs = []
    for i in diff_idx:
        x = inputs[i]._data
        per_out = [np.zeros((o._data.size, x.size)) for o in base]
        for j, idx in enumerate(np.ndindex(x.shape)):
            orig = x[idx].item()
            with no_grad():
                x[idx] = orig + eps
                plus = [to_host(o._data).astype(np.float64) for o in _outputs(func, inputs)]
                x[idx] = orig - eps
                minus = [to_host(o._data).astype(np.float64) for o in _outputs(func, inputs)]
                x[idx] = orig
            for k in range(out_count):
                per_out[k][:, j] = ((plus[k] - minus[k]) / (2 * eps)).reshape(-1)
        jacs.append(per_out)
    return jacs


def _analytical(func, inputs, diff_idx) -> tuple[list, list]:
    outs = _outputs(func, inputs)
    diff_in = [inputs[i] for i in diff_idx]
    jacs = [[np.zeros((o._data.size, inputs[i]._data.size)) for o in outs] for i in diff_idx]
    for k, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for r in range(o._data.size):
            g = np.zeros(o._data.size, o._data.dtype)
            g[r] = 1
            gs = grad([o], diff_in, [make(transfer(g.reshape(o.shape), o.device))], retain_graph=True, allow_unused=True)
            for m, gi in enumerate(gs):
                if gi is not None:
                    if gi.shape != diff_in[m].shape:
                        raise GradcheckError(f"gradient of input {diff_idx[m]} has shape {list(gi.shape)}, "
                                             f"expected {list(diff_in[m].shape)}")
                    jacs[m][k][r, :] = to_host(gi._data).astype(np.float64).reshape(-1)
    return jacs, outs


def _forward(func, inputs, diff_idx) -> list:
    """The Jacobians by forward mode: column j of jac[i][k] is the tangent of output k when input i carries the
    one-hot tangent e_j (one dual pass per input element)."""
    from . import forward_ad as fw
    jacs = []
    for i in diff_idx:
        x = inputs[i]
        per_out = None
        for j in range(x._data.size):
            e = np.zeros(x._data.size, x._data.dtype)
            e[j] = 1
            with fw.dual_level():
                args = list(inputs)
                args[i] = fw.make_dual(x, make(transfer(e.reshape(x.shape), x.device)))
                outs = _outputs(func, args)
                if per_out is None:
                    per_out = [np.zeros((o._data.size, x._data.size)) for o in outs]
                for k, o in enumerate(outs):
                    t = fw.unpack_dual(o).tangent
                    if t is not None:
                        if t.shape != o.shape:
                            raise GradcheckError(f"forward AD: the tangent of output {k} has shape {list(t.shape)}, "
                                                 f"expected {list(o.shape)}")
                        per_out[k][:, j] = to_host(t._data).astype(np.float64).reshape(-1)
        jacs.append(per_out or [])
    return jacs


def _compare(analytical, numerical, diff_idx, rtol, atol, raise_exception, what: str = "") -> bool:
    for a_i, n_i, i in zip(analytical, numerical, diff_idx):
        for k, (a, n) in enumerate(zip(a_i, n_i)):
            if not np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=True):
                worst = np.unravel_index(np.argmax(np.abs(a - n)), a.shape) if a.size else ()
                msg = (f"{what}Jacobian mismatch for output {k} with respect to input {i},\n"
                       f"numerical:{n}\nanalytical:{a}\nlargest difference at {worst}: "
                       f"numerical {n[worst] if a.size else None}, analytical {a[worst] if a.size else None}")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, check_forward_ad: bool = False, check_backward_ad: bool = True,
              **unused) -> bool:
    """Check the gradients of `func(*inputs)` w.r.t. the inputs that require grad against central differences:
    the Jacobian from reverse mode (`check_backward_ad`, one vector-Jacobian product per output element) and,
    with `check_forward_ad`, the one from forward mode (one Jacobian-vector product per input element)."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    if check_backward_ad:
        analytical, outs = _analytical(func, inputs, diff_idx)
        n_out = len(outs)
    else:
        with no_grad():
            n_out = len(_outputs(func, inputs))
    numerical = _numerical(func, inputs, diff_idx, n_out, eps)
    if check_backward_ad and not _compare(analytical, numerical, diff_idx, rtol, atol, raise_exception):
        return False
    if check_forward_ad:
        forward = _forward(func, inputs, diff_idx)
        return _compare(forward, numerical, diff_idx, rtol, atol, raise_exception, "While considering forward AD: ")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True, **unused) -> bool:
    """gradcheck of the gradients of `func` (built with create_graph=True), i.e. of its second derivatives."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    outs = _float_outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [make(transfer(rng.standard_normal(o.shape).astype(o._data.dtype), o.device)).requires_grad_()
                        for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n_in = len(inputs)

    def first_derivatives(*args):
        xs, gos = args[:n_in], args[n_in:]
        with enable_grad():  # also when the numerical pass evaluates this under no_grad
            os_ = _float_outputs(func, xs)
            gs = grad(os_, [xs[i] for i in diff_idx], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivatives, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
