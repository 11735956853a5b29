"""ember.optim: Rprop, ASGD, Adafactor, LBFGS and swa_utils against torch.optim (trajectories, state dicts,
schedules), their state-dict round trips and their errors."""
from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import ember
import ember.optim
from ember import nn
from ember.nn import Parameter
from ember.optim import swa_utils
from helpers import requires_torch, torch


def _data(dtype=np.float64):
    rng = np.random.default_rng(0)
    return {"X": rng.standard_normal((16, 3)).astype(dtype), "Y": rng.standard_normal((16, 4)).astype(dtype),
            "W": rng.standard_normal((3, 4)).astype(dtype), "b": rng.standard_normal(4).astype(dtype),
            "T": rng.standard_normal((2, 3, 4)).astype(dtype), "u": rng.standard_normal(5).astype(dtype)}


class Problem:
    """A least-squares loss in W, b and a 3-d T (on ember or torch); `u` never gets a gradient."""

    def __init__(self, lib, d: dict):
        self.lib = lib
        make = (lambda a: torch.tensor(a.copy(), requires_grad=True)) if lib is torch else \
            (lambda a: Parameter(ember.tensor(a.copy())))
        self.X, self.Y = lib.tensor(d["X"]), lib.tensor(d["Y"])
        self.params = [make(d[k]) for k in "WbTu"]
        self.W, self.b, self.T, self.u = self.params

    def closure(self):
        for p in self.params:
            p.grad = None
        out = self.X @ (self.W + self.T.sum(0) * 0.5) + self.b
        loss = ((out - self.Y) ** 2).mean() + (self.W ** 4).mean()
        loss.backward()
        return loss

    def values(self) -> list[np.ndarray]:
        return [p.detach().numpy().copy() for p in self.params]


def _pair(name, opts, second=None, dtype=np.float64):
    d = _data(dtype)
    e, t = Problem(ember, d), Problem(torch, d)

    def groups(p):
        W, b, T, u = p.params
        return [{"params": [W, u, T]}, {"params": [b], **second}] if second is not None else p.params

    return e, getattr(ember.optim, name)(groups(e), **opts), t, getattr(torch.optim, name)(groups(t), **opts)


def _host(x):
    if isinstance(x, ember.Tensor):
        return x.detach().numpy()
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x


def _same_state(es: dict, ts: dict, rtol=1e-6, atol=1e-9) -> None:
    """Optimizer state dicts with the same keys, groups and (to tolerance) values."""
    assert es["state"].keys() == ts["state"].keys()
    for k in ts["state"]:
        assert list(es["state"][k]) == list(ts["state"][k]), (k, list(es["state"][k]), list(ts["state"][k]))
        for key, tv in ts["state"][k].items():
            ev = es["state"][k][key]
            if isinstance(tv, list):
                assert len(ev) == len(tv)
                for a, b in zip(ev, tv):
                    if b is not None:
                        np.testing.assert_allclose(_host(a), _host(b), rtol=rtol, atol=atol, err_msg=key)
            elif isinstance(tv, torch.Tensor):
                assert str(_host(ev).dtype) == str(tv.detach().numpy().dtype), key
                np.testing.assert_allclose(_host(ev), _host(tv), rtol=rtol, atol=atol, err_msg=key)
            else:
                np.testing.assert_allclose(float(_host(ev)), float(_host(tv)), rtol=rtol, atol=atol, err_msg=key)
    for eg, tg in zip(es["param_groups"], ts["param_groups"]):
        assert eg.keys() == tg.keys()
        assert eg["params"] == tg["params"]


# ---------------------------------------------------------------------- Rprop, ASGD, Adafactor against torch
CASES = [
    ("Rprop", dict(lr=0.01), dict(etas=(0.3, 1.5))),
    ("Rprop", dict(lr=0.05, step_sizes=(1e-3, 0.02), maximize=True), None),
    ("ASGD", dict(lr=0.05, t0=3), dict(lambd=1e-2, alpha=0.5)),
    ("ASGD", dict(lr=0.05, t0=5, weight_decay=0.1, maximize=True), None),
    ("ASGD", dict(lr=0.02), None),  # t0 = 1e6: ax follows p, μ stays 1
    ("Adafactor", dict(lr=0.05), dict(beta2_decay=-0.5, d=2.0)),
    ("Adafactor", dict(lr=0.05, weight_decay=0.1, eps=(1e-4, 1e-2), maximize=True), None),
]


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,opts,second", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_trajectory_matches_torch(name, opts, second, dtype):
    e, eo, t, to = _pair(name, opts, second, dtype)
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    for step in range(12):
        le, lt = eo.step(e.closure), to.step(t.closure)
        np.testing.assert_allclose(le.item(), lt.item(), **tol, err_msg=f"loss at step {step}")
        for i, (a, b) in enumerate(zip(e.values(), t.values())):
            np.testing.assert_allclose(a, b, **tol, err_msg=f"{name} param {i} after step {step + 1}")
    assert e.u not in eo.state and t.u not in to.state  # no gradient: skipped, no state
    _same_state(eo.state_dict(), to.state_dict(), **tol)


@requires_torch
@pytest.mark.parametrize("name,opts", [("Rprop", dict(lr=0.02)), ("ASGD", dict(lr=0.05, t0=2)),
                                       ("Adafactor", dict(lr=0.05))])
def test_state_dict_round_trip_and_torch_load(name, opts):
    """Six steps, a state dict, six more from a fresh optimizer loaded with it (and one loaded with PyTorch's
    state dict) == twelve uninterrupted steps."""
    e, eo, t, to = _pair(name, opts)
    for _ in range(6):
        eo.step(e.closure), to.step(t.closure)
    sd = copy.deepcopy(eo.state_dict())
    fresh = getattr(ember.optim, name)(e.params, **opts)
    fresh.load_state_dict(sd)
    from_torch = Problem(ember, {k: v for k, v in zip("WbTu", t.values())} | {"X": _data()["X"], "Y": _data()["Y"]})
    loaded = getattr(ember.optim, name)(from_torch.params, **opts)
    loaded.load_state_dict({"state": {k: {kk: (ember.tensor(vv.numpy()) if isinstance(vv, torch.Tensor) else vv)
                                          for kk, vv in v.items()} for k, v in to.state_dict()["state"].items()},
                            "param_groups": to.state_dict()["param_groups"]})
    for _ in range(6):
        fresh.step(e.closure), to.step(t.closure), loaded.step(from_torch.closure)
    for a, b, c in zip(e.values(), t.values(), from_torch.values()):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(c, b, rtol=1e-9, atol=1e-12)


def test_rprop_rule_by_hand():
    """Step sizes grow ×η₊ while the gradient keeps its sign, shrink ×η₋ (and skip the step) when it flips."""
    p = Parameter(ember.tensor([1.0, 1.0]))
    opt = ember.optim.Rprop([p], lr=0.1, etas=(0.5, 2.0), step_sizes=(0.01, 1.0))
    for g, expect_p, expect_size in [([1.0, -1.0], [0.9, 1.1], [0.1, 0.1]),
                                     ([1.0, 1.0], [0.7, 1.1], [0.2, 0.05]),  # entry 1 flipped: no step
                                     ([-1.0, 1.0], [0.7, 1.05], [0.1, 0.05])]:  # its prev was zeroed: factor 1
        p.grad = ember.tensor(g)
        opt.step()
        np.testing.assert_allclose(p.detach().numpy(), expect_p, atol=1e-6)
        np.testing.assert_allclose(opt.state[p]["step_size"].numpy(), expect_size, atol=1e-6)
    assert list(opt.state[p]) == ["step", "prev", "step_size"]


def test_asgd_averages_after_t0():
    p = Parameter(ember.tensor([0.0]))
    opt = ember.optim.ASGD([p], lr=0.1, lambd=0.0, alpha=0.0, t0=2)
    seen = []
    for _ in range(5):
        p.grad = ember.tensor([-1.0])
        opt.step()
        seen.append(p.item())
    # μ (set after step t to 1/max(1, t - t0)) is 1 up to step t0 + 2 (ax = p there), then 1/2: ax = mean(p₄, p₅)
    np.testing.assert_allclose(opt.state[p]["ax"].item(), np.mean(seen[3:]), atol=1e-6)
    assert list(opt.state[p]) == ["step", "eta", "mu", "ax"]
    assert opt.state[p]["eta"].dtype == ember.float32


def test_adafactor_state_shapes():
    ps = [Parameter(ember.randn(2, 3, 4)), Parameter(ember.randn(5)), Parameter(ember.tensor(1.5))]
    opt = ember.optim.Adafactor(ps)
    for p in ps:
        p.grad = ember.ones_like(p)
    opt.step()
    st = [opt.state[p] for p in ps]
    assert list(st[0]) == ["step", "row_var", "col_var"]
    assert st[0]["row_var"].shape == (2, 3, 1) and st[0]["col_var"].shape == (2, 1, 4)
    assert list(st[1]) == ["step", "variance"] and st[1]["variance"].shape == (5,)
    assert st[2]["variance"].shape == ()


# ---------------------------------------------------------------------- LBFGS
def _closure(opt, loss_fn):
    def run():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss
    return run


def _fit(lib, dtype):
    """A smooth, well-conditioned fit (rounding differences do not grow), where `u` gets no gradient."""
    p = Problem(lib, _data(dtype))

    def loss():
        out = p.X @ (p.W + p.T.sum(0) * 0.5) + p.b
        return ((out - p.Y) ** 2).mean() + 0.05 * (p.W ** 4).sum()
    return p.params, loss


def _rosenbrock(lib, x0):
    x = torch.tensor(x0, requires_grad=True) if lib is torch else Parameter(ember.tensor(x0))

    def loss():
        return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()
    return [x], loss


# few iterations per step: L-BFGS amplifies rounding differences (PyTorch's dot products sum in another
# order) by ~10x per few iterations near the optimum, from 1e-16 (float64) or 1e-7 (float32)
LBFGS_CASES = [dict(lr=0.5, max_iter=5), dict(max_iter=5, line_search_fn="strong_wolfe"),
               dict(lr=0.3, max_iter=4, history_size=2),
               dict(max_iter=6, max_eval=8, history_size=3, line_search_fn="strong_wolfe"),
               dict(lr=0.2, max_iter=5, tolerance_change=1e-4)]


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("opts", LBFGS_CASES)
def test_lbfgs_matches_torch(opts, dtype):
    (ep, eloss), (tp, tloss) = _fit(ember, dtype), _fit(torch, dtype)
    eo, to = ember.optim.LBFGS(ep, **opts), torch.optim.LBFGS(tp, **opts)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-4)
    for step in range(3):
        le, lt = eo.step(_closure(eo, eloss)), to.step(_closure(to, tloss))
        np.testing.assert_allclose(le.item(), lt.item(), **tol, err_msg=f"loss of step {step}")
        for a, b in zip(ep, tp):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol, err_msg=f"after step {step}")
    es, ts = eo.state_dict()["state"][0], to.state_dict()["state"][0]
    assert list(es) == list(ts)
    assert es["func_evals"] == ts["func_evals"] and es["n_iter"] == ts["n_iter"]
    assert len(es["old_dirs"]) == len(ts["old_dirs"]) and len(es["al"]) == len(ts["al"])
    np.testing.assert_allclose(es["d"].numpy(), ts["d"].numpy(), **tol)
    np.testing.assert_allclose(es["prev_flat_grad"].numpy(), ts["prev_flat_grad"].numpy(), **tol)
    np.testing.assert_allclose(float(es["t"]), float(ts["t"]), **tol)
    assert es["d"].dtype == getattr(ember, np.dtype(dtype).name)


@requires_torch
@pytest.mark.parametrize("opts", [dict(line_search_fn="strong_wolfe"), dict(lr=0.5, history_size=3)])
def test_lbfgs_rosenbrock_matches_torch(opts):
    """A hard valley: the line search brackets, zooms and extrapolates; 20 iterations agree to rounding."""
    x0 = np.array([-1.2, 1.0, 0.5, -0.3, 0.8])
    (ep, eloss), (tp, tloss) = _rosenbrock(ember, x0), _rosenbrock(torch, x0)
    eo, to = ember.optim.LBFGS(ep, **opts), torch.optim.LBFGS(tp, **opts)
    eo.step(_closure(eo, eloss)), to.step(_closure(to, tloss))
    np.testing.assert_allclose(ep[0].detach().numpy(), tp[0].detach().numpy(), rtol=1e-7, atol=1e-9)
    assert eo.state[ep[0]]["func_evals"] == to.state[tp[0]]["func_evals"]


# one-dimensional objectives φ(t) along d = -φ'(0): together they take every branch of the line search
PHIS = {
    "quadratic": (lambda t: (t - 3) ** 2, lambda t: 2 * (t - 3)),
    "wall": (lambda t: -t + math.exp(8 * (t - 1)), lambda t: -1 + 8 * math.exp(8 * (t - 1))),
    "wiggle": (lambda t: -t + 0.3 * math.sin(12 * t) + 0.5 * t * t, lambda t: -1 + 3.6 * math.cos(12 * t) + t),
    "ripple": (lambda t: -t + 0.5 * t * t + 0.2 * math.sin(8 * t), lambda t: -1 + t + 1.6 * math.cos(8 * t)),
    "quartic": (lambda t: t ** 4 - 3 * t, lambda t: 4 * t ** 3 - 3),
    "flat": (lambda t: -math.atan(t), lambda t: -1 / (1 + t * t)),
}


def _line_search(lib, phi, dphi, t0, **kw):
    from ember.optim.lbfgs import _strong_wolfe
    from torch.optim.lbfgs import _strong_wolfe as torch_strong_wolfe

    def arr(v):
        return torch.tensor([v], dtype=torch.float64) if lib is torch else np.array([v])

    def obj(x, t, d):
        return phi(float(t)), arr(dphi(float(t)))
    g = arr(dphi(0.0))
    gtd = (g * -g).sum()
    search = torch_strong_wolfe if lib is torch else _strong_wolfe
    f, g_new, t, n = search(obj, None, t0, -g, phi(0.0), g, gtd, **kw)
    return float(f), float(g_new[0]), float(t), n


@requires_torch
@pytest.mark.parametrize("name", list(PHIS))
@pytest.mark.parametrize("t0", [0.05, 1.0, 5.0])
@pytest.mark.parametrize("kw", [{}, dict(tolerance_change=1e-2), dict(max_ls=3), dict(c2=0.1)])
def test_strong_wolfe_matches_torch(name, t0, kw):
    e, t = _line_search(ember, *PHIS[name], t0, **kw), _line_search(torch, *PHIS[name], t0, **kw)
    np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-15, equal_nan=True)


def test_lbfgs_state_dict_round_trip():
    opts = dict(max_iter=3, history_size=4, line_search_fn="strong_wolfe")
    ep, eloss = _rosenbrock(ember, np.array([-1.2, 1.0, 0.5]))
    eo = ember.optim.LBFGS(ep, **opts)
    eo.step(_closure(eo, eloss))
    sd = copy.deepcopy(eo.state_dict())
    saved = ep[0].detach().numpy().copy()
    eo.step(_closure(eo, eloss))
    expect = ep[0].detach().numpy().copy()
    with ember.no_grad():
        ep[0].copy_(ember.tensor(saved))
    fresh = ember.optim.LBFGS(ep, **opts)
    fresh.load_state_dict(sd)
    fresh.step(_closure(fresh, eloss))
    np.testing.assert_array_equal(ep[0].detach().numpy(), expect)


def test_lbfgs_optimal_start_returns_at_once():
    p = Parameter(ember.tensor([0.0, 0.0]))
    opt = ember.optim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 0.0
    assert len(calls) == 1 and opt.state[p]["func_evals"] == 1 and "d" not in opt.state[p]


def test_lbfgs_errors():
    p = Parameter(ember.tensor([1.0]))
    opt = ember.optim.LBFGS([p])
    with pytest.raises(TypeError, match="closure"):
        opt.step()
    with pytest.raises(ValueError, match="per-parameter options"):
        ember.optim.LBFGS([{"params": [p]}, {"params": [Parameter(ember.tensor([2.0]))]}])
    with pytest.raises(ValueError, match="per-parameter options"):
        opt.add_param_group({"params": [Parameter(ember.tensor([2.0]))]})
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ember.optim.LBFGS([p], lr=-1)
    bad = ember.optim.LBFGS([p], line_search_fn="armijo")

    def closure():
        bad.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(closure)


@pytest.mark.parametrize("name,opts", [("Rprop", dict(lr=0.02, foreach=True, capturable=True)),
                                       ("ASGD", dict(lr=0.05, t0=2, capturable=True)),
                                       ("Adafactor", dict(lr=0.05, weight_decay=0.1)),
                                       ("LBFGS", dict(max_iter=4, line_search_fn="strong_wolfe"))])
def test_on_cuda_as_on_the_host(cuda, name, opts):
    """The same steps on a CUDA device (tests/_fakecuda.py without one) as on the host."""
    results = []
    for device in ("cpu", cuda):
        d = _data()
        p = Problem(ember, d)
        for t in p.params:
            t._data = t.to(device)._data
        p.X, p.Y = p.X.to(device), p.Y.to(device)
        kw = dict(opts, capturable=device != "cpu") if "capturable" in opts else opts  # (refused on the host)
        opt = getattr(ember.optim, name)(p.params, **kw)
        for _ in range(3):
            opt.step(p.closure)
        results.append([t.detach().cpu().numpy() for t in p.params])
        assert all(str(v.device).startswith(device) for v in opt.state[p.W].values() if isinstance(v, ember.Tensor)
                   and v.ndim > 0)
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_sparse_gradients():
    """Adafactor refuses sparse gradients (PyTorch's error); LBFGS densifies them, as PyTorch."""
    idx = ember.tensor([1, 2, 2, 4])
    results = []
    for sparse in (False, True):
        ember.manual_seed(0)
        emb = nn.Embedding(5, 3, sparse=sparse).double()
        if sparse:
            emb(idx).sum().backward()
            assert emb.weight.grad.is_sparse
            with pytest.raises(RuntimeError, match="Adafactor does not support sparse gradients"):
                ember.optim.Adafactor(emb.parameters()).step()
        opt = ember.optim.LBFGS(emb.parameters(), max_iter=3)

        def closure():
            opt.zero_grad()
            loss = (emb(idx) ** 4).sum()
            loss.backward()
            return loss
        opt.step(closure)
        results.append(emb.weight.detach().numpy())
    np.testing.assert_array_equal(*results)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("make,exc,match", [
    (lambda p: ember.optim.Rprop(p, lr=-0.1), ValueError, "Invalid learning rate: -0.1"),
    (lambda p: ember.optim.Rprop(p, etas=(1.5, 1.2)), ValueError, r"Invalid eta values: 1.5, 1.2"),
    (lambda p: ember.optim.Rprop(p, etas=0.5), ValueError, "etas must be a pair"),
    (lambda p: ember.optim.ASGD(p, lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
    (lambda p: ember.optim.ASGD(p, weight_decay=-1.0), ValueError, "Invalid weight_decay value: -1.0"),
    (lambda p: ember.optim.Adafactor(p, lr=-1.0), ValueError, "Learning rate should be >= 0 but is: -1.0"),
    (lambda p: ember.optim.Adafactor(p, beta2_decay=0.5), ValueError, "beta2_decay should be <= 0 but is: 0.5"),
    (lambda p: ember.optim.Adafactor(p, eps=(-1.0, 1e-3)), ValueError, "epsilon1 should be >= 0 but is: -1.0"),
    (lambda p: ember.optim.Adafactor(p, eps=(None, -1.0)), ValueError, "epsilon2 should be >= 0 but is: -1.0"),
    (lambda p: ember.optim.Adafactor(p, d=0.5), ValueError, "Clipping threshold d should be >= 1 but is: 0.5"),
    (lambda p: ember.optim.Adafactor(p, weight_decay=-1.0), ValueError, "weight_decay should be >= 0 but is: -1.0"),
    (lambda p: ember.optim.Rprop(p, differentiable=True), NotImplementedError, "differentiable=True"),
])
def test_bad_options(make, exc, match):
    with pytest.raises(exc, match=match):
        make([Parameter(ember.tensor([1.0]))])


@pytest.mark.parametrize("cls", ["Rprop", "ASGD"])
def test_capturable_needs_a_device(cls):
    p = Parameter(ember.tensor([1.0, 2.0]))
    p.grad = ember.tensor([1.0, 1.0])
    opt = getattr(ember.optim, cls)([p], capturable=True, foreach=True)
    with pytest.raises(AssertionError, match="If capturable=True, params"):
        opt.step()


# ---------------------------------------------------------------------- swa_utils
def _net(lib, seed=0):
    lib.manual_seed(seed)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 2))


def _copy_weights(src, dst) -> None:
    """src (torch) -> dst (ember), parameters and buffers by name."""
    dst.load_state_dict({k: v.detach().numpy() for k, v in src.state_dict().items()})


def _perturb(lib, model, k: int) -> None:
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.mul_(0.9).add_(0.01 * (k + i))


@requires_torch
@pytest.mark.parametrize("kind", ["swa", "ema_fn", "ema_multi", "use_buffers"])
def test_averaged_model_matches_torch(kind):
    tm = _net(torch).double()
    em = _net(ember).double()
    _copy_weights(tm, em)
    kw = {"swa": {}, "ema_fn": {"avg_fn": "get_ema_avg_fn"}, "ema_multi": {"multi_avg_fn": "get_ema_multi_avg_fn"},
          "use_buffers": {"multi_avg_fn": "get_ema_multi_avg_fn", "use_buffers": True}}[kind]

    def made(lib, mod):
        k = {key: (getattr(mod, v)(0.8) if isinstance(v, str) else v) for key, v in kw.items()}
        return mod.AveragedModel(lib_model[lib], **k)
    lib_model = {torch: tm, ember: em}
    ta, ea = made(torch, torch.optim.swa_utils), made(ember, swa_utils)
    x = np.random.default_rng(0).standard_normal((6, 3))
    for k in range(4):
        _perturb(torch, tm, k), _perturb(ember, em, k)
        tm(torch.tensor(x)), em(ember.tensor(x))  # moves the BatchNorm statistics
        ta.update_parameters(tm), ea.update_parameters(em)
    assert list(ea.state_dict()) == list(ta.state_dict())
    for key, tv in ta.state_dict().items():
        np.testing.assert_allclose(ea.state_dict()[key].numpy(), tv.numpy(), rtol=1e-12, atol=1e-12, err_msg=key)
    assert ea.n_averaged.item() == 4 and ea.n_averaged.dtype == ember.int64
    ta.eval(), ea.eval()
    np.testing.assert_allclose(ea(ember.tensor(x)).detach().numpy(), ta(torch.tensor(x)).detach().numpy(), rtol=1e-12)


def test_averaged_model_is_the_mean():
    m = ember.nn.Linear(2, 1)
    avg = swa_utils.AveragedModel(m)
    assert avg.module is not m
    seen = []
    for k in range(3):
        with ember.no_grad():
            m.weight.fill_(float(k))
        seen.append(float(k))
        avg.update_parameters(m)
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), np.full((1, 2), np.mean(seen)))
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(m, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\]"):
        swa_utils.get_ema_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value -0.1"):
        swa_utils.get_ema_multi_avg_fn(-0.1)


@requires_torch
def test_update_bn_matches_torch():
    tm, em = _net(torch).double(), _net(ember).double()
    _copy_weights(tm, em)
    tm[1].momentum = em[1].momentum = 0.3
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((5, 3)) for _ in range(3)]
    tm.eval(), em.eval()
    torch.optim.swa_utils.update_bn([(torch.tensor(b), 0) for b in batches], tm)
    swa_utils.update_bn([(ember.tensor(b), 0) for b in batches], em)
    for key in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(em.state_dict()[key].numpy(), tm.state_dict()[key].numpy(), rtol=1e-12, err_msg=key)
    assert not em.training and em[1].momentum == 0.3
    swa_utils.update_bn([ember.tensor(b) for b in batches], em)  # plain tensors too
    swa_utils.update_bn([ember.ones(2, 3)], ember.nn.Linear(3, 2))  # no BatchNorm: nothing to do


@requires_torch
@pytest.mark.parametrize("kwargs", [dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.01], anneal_strategy="linear"),
                                    dict(swa_lr=0.05, anneal_epochs=0), dict(swa_lr=0.02, anneal_epochs=3)])
def test_swalr_matches_torch(kwargs):
    def run(lib, mod):
        w = [lib.zeros(2, requires_grad=True) if lib is torch else Parameter(ember.zeros(2)) for _ in range(2)]
        opt = lib.optim.SGD([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.3}], lr=0.5)
        sched = mod.SWALR(opt, **kwargs)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(14):
                opt.step()
                sched.step()
                lrs.append(sched.get_last_lr())
        return lrs, sched
    (el, es), (tl, ts) = run(ember, swa_utils), run(torch, torch.optim.swa_utils)
    np.testing.assert_allclose(el, tl, rtol=1e-12)
    assert es.state_dict().keys() == ts.state_dict().keys()
    es.load_state_dict(es.state_dict())
    assert es.anneal_func(0.5) == ts.anneal_func(0.5)


def test_swalr_errors():
    opt = ember.optim.SGD([Parameter(ember.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got exp"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got -1"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
        swa_utils.SWALR(opt, swa_lr=[0.1, 0.2])
    sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear")
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    for _ in range(3):
        opt.step()
        sched.step()
    assert math.isclose(opt.param_groups[0]["lr"], 0.05)
