"""L-BFGS: limited-memory BFGS with an optional strong-Wolfe line search (PyTorch's `torch.optim.LBFGS`)."""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

import numpy as np

from .._capture import opaque
from .._tensor import Tensor, bump_version, make
from ..autograd.grad_mode import enable_grad
from ..backend import array_module, device_of, on, to_host, transfer
from .optimizer import Optimizer, _check_number

__all__ = ["LBFGS"]

# state entries that are flat over all parameters (not shaped like the first parameter, whose state holds them)
_FLAT = ("d", "prev_flat_grad", "old_dirs", "old_stps")


class LBFGS(Optimizer):
    """L-BFGS, as PyTorch's (after minFunc): one `step(closure)` runs up to `max_iter` iterations on the
    parameters seen as one flat vector x, with gradient g:

    direction d = -H·g, H the inverse-Hessian estimate of the two-loop recursion over the last
    `history_size` pairs (s = t·d, y = g_new - g) with yᵀs > 1e-10, scaled by γ = yᵀs / yᵀy (d = -g at
    the first iteration); step t = lr (min(1, 1/‖g‖₁)·lr at the very first iteration), or the strong-Wolfe
    step (`line_search_fn="strong_wolfe"`: bracketing, then a zoom by cubic interpolation) with
    c₁ = 1e-4, c₂ = 0.9; x ← x + t·d.

    It stops early when max|g| ≤ tolerance_grad, when max|t·d| or the change of the loss is below
    tolerance_change, when gᵀd > -tolerance_change, or after `max_eval` evaluations of the closure
    (default max_iter·5/4). `closure` (required) re-evaluates the model, calls backward and returns the
    loss; `step` returns its first loss. Only one param group; all parameters on one device.

    State (of the first parameter, as PyTorch): 'func_evals', 'n_iter', 'd', 't', 'old_dirs', 'old_stps',
    'ro', 'H_diag', 'prev_flat_grad', 'prev_loss' and 'al'. The arithmetic runs on the flat arrays in the
    parameters' dtype (its scalars too: yᵀs of float32 vectors is a float32, as PyTorch's 0-d tensors are).
    """

    def __init__(self, params: Iterable, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        _check_number("LBFGS", "lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # ------------------------------------------------------------------ the flat view of the parameters
    def _flat_grad(self):
        """The parameters' gradients as one flat array (zeros for a parameter without one; a sparse one densified)."""
        first = self._params[0]._data
        xp = array_module(first)
        with on(device_of(first)):
            return xp.concatenate([xp.zeros(p._data.size, p._data.dtype) if p.grad is None else
                                   (p.grad.to_dense() if p.grad.is_sparse else p.grad)._data.reshape(-1)
                                   for p in self._params])

    def _add_grad(self, t, update) -> None:
        """x ← x + t·update, in place in every parameter."""
        offset = 0
        for p in self._params:
            a = p._data
            a += update[offset:offset + a.size].reshape(a.shape) * t
            offset += a.size
            bump_version(p)

    def _set_param(self, values: list) -> None:
        for p, v in zip(self._params, values):
            p._data[...] = v
            bump_version(p)

    def _directional_evaluate(self, closure: Callable, x: list, t, d) -> tuple[float, Any]:
        """The loss and flat gradient at x + t·d; the parameters are put back to x."""
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # ------------------------------------------------------------------ the step
    @opaque
    def step(self, closure: Callable[[], Any]):  # type: ignore[override]
        """Minimise from the current parameters (see the class docstring); returns the closure's first loss."""
        if not callable(closure):
            raise TypeError(f"LBFGS.step() needs a closure that re-evaluates the model and returns the loss, "
                            f"got {type(closure).__name__}")
        closure = enable_grad()(closure)
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        if line_search_fn is not None and line_search_fn != "strong_wolfe":
            raise RuntimeError(f"only 'strong_wolfe' is supported (LBFGS got line_search_fn={line_search_fn!r}; "
                               f"use None for fixed steps)")

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        xp = array_module(flat_grad)
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:  # already optimal
            return orig_loss

        d, t = _array(state.get("d")), state.get("t")
        old_dirs, old_stps, ro = ([_array(v) for v in state.get(key, [])] for key in ("old_dirs", "old_stps", "ro"))
        H_diag = _array(state.get("H_diag"))
        prev_flat_grad, prev_loss = _array(state.get("prev_flat_grad")), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                # the curvature pair of the last step: kept only when yᵀs > 0 (H stays positive definite)
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # the two-loop recursion: d = -H·g
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q -= old_dirs[i] * al[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:
                prev_flat_grad[...] = flat_grad
            prev_loss = loss

            t = min(1.0, 1.0 / xp.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p._data.copy() for p in self._params]

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd,
                                                                  max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # re-evaluate (not needed after the last iteration)
                    loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = make(d)
        state["t"] = float(t)
        state["old_dirs"] = [make(v) for v in old_dirs]
        state["old_stps"] = [make(v) for v in old_stps]
        state["ro"] = [_scalar(v) for v in ro]
        state["H_diag"] = _scalar(H_diag)
        state["prev_flat_grad"] = make(prev_flat_grad)
        state["prev_loss"] = prev_loss
        if "al" in state:
            state["al"] = [None if v is None else _scalar(v) for v in state["al"]]
        return orig_loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As `Optimizer.load_state_dict`; the flat vectors ('d', 'prev_flat_grad', the history) are copied
        to the parameters' device and dtype, whatever their shape."""
        load_unshaped(self, Optimizer.load_state_dict, state_dict, _FLAT)


def load_unshaped(opt: Optimizer, load: Callable, state_dict: dict[str, Any], keys: tuple[str, ...]) -> None:
    """`load(opt, state_dict)` for an optimizer whose state entries `keys` are tensors (or lists of tensors)
    not shaped like their parameter (which `Optimizer.load_state_dict` refuses): those are set aside, then
    copied to their parameter's device and dtype."""
    if "state" not in state_dict:
        return load(opt, state_dict)  # (which says what is missing)
    saved = state_dict["state"]
    unshaped = {k: {key: v[key] for key in keys if key in v} for k, v in saved.items()}
    load(opt, dict(state_dict, state={k: {key: val for key, val in v.items() if key not in keys}
                                      for k, v in saved.items()}))
    params = [p for g in opt.param_groups for p in g["params"]]
    for k, entries in unshaped.items():
        if entries and isinstance(k, int) and k < len(params):
            p = params[k]
            opt.state[p].update({key: _moved(val, device_of(p._data), p._data.dtype) for key, val in entries.items()})


def _array(v):
    """A state entry as the update reads it: a tensor's array (a 0-d one as a scalar of its dtype)."""
    if isinstance(v, Tensor):
        return v._data[()] if v._data.ndim == 0 else v._data
    return v


def _scalar(v):
    """A scalar of the update as PyTorch's state holds it: a 0-d tensor (Python numbers stay numbers)."""
    if isinstance(v, (int, float, Tensor)):
        return v
    return make(np.asarray(to_host(v) if not isinstance(v, np.generic) else v))


def _moved(v, dev, dtype):
    if isinstance(v, list):
        return [_moved(x, dev, dtype) for x in v]
    if isinstance(v, Tensor):
        arr = transfer(v._data, dev)
        with on(dev):
            return make(arr.astype(dtype, copy=arr is v._data))
    return copy.deepcopy(v)


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clipped to `bounds`
    (default: between x1 and x2); the middle of the bounds when the cubic has no minimum."""
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d satisfying the strong Wolfe conditions (sufficient decrease with c1, curvature with
    c2), found by bracketing and then zooming by cubic interpolation (Nocedal & Wright, algorithms 3.5-3.6,
    as minFunc and PyTorch). Returns (loss, flat gradient, t, evaluations)."""
    d_norm = abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)

    # bracketing: grow t until the interval [t_prev, t] holds a point satisfying the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # extrapolate by cubic interpolation, within [t + 0.01·(t - t_prev), 10·t]
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:  # out of evaluations: the bracket [0, t]
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point satisfies the conditions (or it is too small to matter)
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # a point too near an end of the bracket makes little progress: move it to 10% inside, the second
        # time in a row (or at once when it is at or beyond an end)
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # no sufficient decrease: t becomes the high end
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
