"""ember.optim: trajectories against torch.optim, state dicts, param groups, in-place updates, bad inputs."""
from __future__ import annotations

import copy
import tracemalloc
import warnings

import numpy as np
import pytest

import ember
import ember.optim
from ember.nn import Parameter
from helpers import requires_torch, torch

OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]

# (optimizer, options for every group, options of the second group): the important combinations
CASES = [
    ("SGD", dict(lr=0.1), {}),
    ("SGD", dict(lr=0.05, momentum=0.9), dict(lr=0.02, dampening=0.5)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1), dict(momentum=0.5)),
    ("SGD", dict(lr=0.05, momentum=0.8, weight_decay=0.01, maximize=True), {}),
    ("Adam", dict(lr=0.05), dict(lr=0.01, betas=(0.8, 0.99))),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True), dict(amsgrad=False)),
    ("Adam", dict(lr=0.05, maximize=True, eps=1e-3), {}),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True), {}),
    ("AdamW", dict(lr=0.05), dict(weight_decay=0.5)),
    ("AdamW", dict(lr=0.05, amsgrad=True, maximize=True), {}),
    ("RMSprop", dict(lr=0.01), dict(alpha=0.9)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1), dict(centered=False)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, maximize=True), {}),
    ("Adagrad", dict(lr=0.1), dict(lr=0.05)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2, eps=1e-6), {}),
    ("Adadelta", dict(), dict(rho=0.5)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1, maximize=True), {}),
    ("Adamax", dict(lr=0.05), dict(betas=(0.5, 0.9))),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True), {}),
    ("NAdam", dict(lr=0.05), dict(momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1), {}),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), {}),
    ("RAdam", dict(lr=0.05), dict(betas=(0.9, 0.9))),  # β₂ = 0.9: rectified from step 6 on
    ("RAdam", dict(lr=0.05, weight_decay=0.1), {}),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), {}),
]


def _data(dtype=np.float64):
    rng = np.random.default_rng(0)
    return {"X": rng.standard_normal((16, 3)).astype(dtype), "Y": rng.standard_normal((16, 4)).astype(dtype),
            "W": rng.standard_normal((3, 4)).astype(dtype), "b": rng.standard_normal(4).astype(dtype),
            "u": rng.standard_normal(5).astype(dtype)}


class Problem:
    """Least squares ‖X·W + b - Y‖² on one side (ember or torch); `u` never gets a gradient."""

    def __init__(self, lib, d: dict, l1: float = 0.0):
        self.lib, self.l1 = lib, l1
        if lib is torch:
            self.X, self.Y = torch.tensor(d["X"]), torch.tensor(d["Y"])
            self.params = [torch.tensor(d[k].copy(), requires_grad=True) for k in "Wbu"]
        else:
            self.X, self.Y = ember.tensor(d["X"]), ember.tensor(d["Y"])
            self.params = [Parameter(ember.tensor(d[k].copy())) for k in "Wbu"]
        self.W, self.b, self.u = self.params

    def loss(self):
        return ((self.X @ self.W + self.b - self.Y) ** 2).mean()

    def closure(self):
        for p in self.params:
            p.grad = None
        loss = self.loss()
        loss.backward()
        if self.l1 and self.lib is torch:  # PyTorch has no L1 option: add its gradient by hand
            with torch.no_grad():
                for p in (self.W, self.b):
                    p.grad += self.l1 * torch.sign(p)
        return loss

    def values(self) -> list[np.ndarray]:
        return [p.detach().numpy().copy() for p in self.params]


def _groups(params, second: dict):
    W, b, u = params
    return [{"params": [W, u]}, {"params": [b], **second}]


def _pair(name, opts, second, dtype=np.float64, l1=0.0):
    d = _data(dtype)
    e, t = Problem(ember, d), Problem(torch, d, l1)
    eo = getattr(ember.optim, name)(_groups(e.params, second), **opts, **({"l1_weight_decay": l1} if l1 else {}))
    to = getattr(torch.optim, name)(_groups(t.params, second), **opts, foreach=False)
    return e, eo, t, to


def _to_numpy(x):
    if isinstance(x, (ember.Tensor,)):
        return x.detach().numpy()
    return x.detach().numpy() if torch is not None and isinstance(x, torch.Tensor) else x


# ---------------------------------------------------------------------- parity with torch.optim
@requires_torch
@pytest.mark.parametrize("name,opts,second", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_trajectory_matches_torch(name, opts, second):
    e, eo, t, to = _pair(name, opts, second)
    for step in range(20):
        le, lt = eo.step(e.closure), to.step(t.closure)
        np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-6, atol=1e-9, err_msg=f"loss at step {step}")
        for i, (a, b) in enumerate(zip(e.values(), t.values())):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=f"{name} param {i} after step {step + 1}")
    # grad None: skipped, no state
    np.testing.assert_array_equal(e.u.detach().numpy(), _data()["u"])
    assert (e.u in eo.state) == (t.u in to.state) == (name == "Adagrad")  # Adagrad's state is made up front
    # the state has PyTorch's keys, dtypes and values
    es, ts = eo.state_dict(), to.state_dict()
    assert es["state"].keys() == ts["state"].keys()
    for k in ts["state"]:
        assert list(es["state"][k]) == list(ts["state"][k])
        for key, tv in ts["state"][k].items():
            ev = es["state"][k][key]
            assert isinstance(ev, ember.Tensor) and str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            np.testing.assert_allclose(_to_numpy(ev), _to_numpy(tv), rtol=1e-6, atol=1e-9, err_msg=key)
    for eg, tg in zip(es["param_groups"], ts["param_groups"]):
        assert set(eg) - {"l1_weight_decay"} == set(tg)
        # torch ran with foreach=False (its per-tensor code path, the same arithmetic as ember's)
        assert {k: v for k, v in eg.items() if k not in ("l1_weight_decay", "foreach")} == \
            {k: v for k, v in tg.items() if k != "foreach"}


@requires_torch
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_float32_stays_float32_and_matches(name):
    e, eo, t, to = _pair(name, dict(lr=0.01) if name != "Adadelta" else {}, {}, dtype=np.float32)
    for _ in range(20):
        eo.step(e.closure), to.step(t.closure)
    for a, b in zip(e.values(), t.values()):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for st in eo.state.values():
        for key, v in st.items():
            assert v.dtype == (ember.float32), key
            assert not v.requires_grad


@requires_torch
@pytest.mark.parametrize("name,opts", [("SGD", dict(lr=0.05, momentum=0.9)), ("SGD", dict(lr=0.05, weight_decay=0.1)),
                                       ("Adam", dict(lr=0.05)), ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
                                       ("AdamW", dict(lr=0.05))])
def test_l1_weight_decay_adds_l1_sign_to_the_gradient(name, opts):
    e, eo, t, to = _pair(name, opts, {}, l1=0.3)
    for _ in range(20):
        eo.step(e.closure), to.step(t.closure)
    for a, b in zip(e.values(), t.values()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    d = _data()
    assert not np.allclose(e.W.detach().numpy(), Problem(ember, d).W.detach().numpy())


# ---------------------------------------------------------------------- state dicts
@pytest.mark.parametrize("name,opts,second", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_state_dict_round_trip_continues_the_same_trajectory(name, opts, second):
    d = _data()
    a, b = Problem(ember, d), Problem(ember, d)
    oa = getattr(ember.optim, name)(_groups(a.params, second), **opts)
    for _ in range(10):
        oa.step(a.closure)
    sd = copy.deepcopy(oa.state_dict())
    for p, q in zip(b.params, a.params):  # the model's weights travel separately, as with a checkpoint
        p._data[...] = q._data
    ob = getattr(ember.optim, name)(_groups(b.params, {}), lr=123.0)
    ob.load_state_dict(sd)
    assert ob.param_groups[1]["lr"] == oa.param_groups[1]["lr"]
    for _ in range(10):
        oa.step(a.closure), ob.step(b.closure)
    for x, y in zip(a.values(), b.values()):
        np.testing.assert_array_equal(x, y)
    # the loaded state is a copy: stepping `ob` does not touch the dict it was loaded from
    for k, st in sd["state"].items():
        for key, v in st.items():
            assert v is not ob.state_dict()["state"][k][key]


def test_state_dict_format():
    d = _data()
    e = Problem(ember, d)
    opt = ember.optim.Adam(_groups(e.params, dict(lr=0.5)), lr=0.1)
    opt.step(e.closure)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert set(sd["state"]) == {0, 2}  # u (index 1) has no grad, hence no state
    assert list(sd["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    step = sd["state"][0]["step"]
    assert step.shape == () and step.dtype == ember.float32 and step.item() == 1.0
    assert sd["state"][0]["exp_avg"] is opt.state[e.W]["exp_avg"]  # live buffers, as in PyTorch
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert "params" in opt.param_groups[0] and isinstance(opt.param_groups[0]["params"][0], ember.Tensor)


@requires_torch
def test_loads_a_pytorch_state_dict():
    d = _data()
    e, t = Problem(ember, d), Problem(torch, d)
    to = torch.optim.Adam(t.params, lr=0.05, amsgrad=True)
    for _ in range(5):
        to.step(t.closure)
    tsd = to.state_dict()
    esd = {"state": {k: {kk: ember.tensor(vv.numpy()) for kk, vv in v.items()} for k, v in tsd["state"].items()},
           "param_groups": copy.deepcopy(tsd["param_groups"])}
    for p, q in zip(e.params, t.params):
        p._data[...] = q.detach().numpy()
    eo = ember.optim.Adam(e.params)
    eo.load_state_dict(esd)
    assert eo.param_groups[0]["amsgrad"] and eo.param_groups[0]["l1_weight_decay"] == 0.0  # ember's option filled in
    for _ in range(10):
        eo.step(e.closure), to.step(t.closure)
    for a, b in zip(e.values(), t.values()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_load_state_dict_errors():
    e = Problem(ember, _data())
    opt = ember.optim.SGD(_groups(e.params, {}), momentum=0.9)
    opt.step(e.closure)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        ember.optim.SGD(e.params, momentum=0.9).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        ember.optim.SGD([{"params": [e.W]}, {"params": [e.b, e.u]}], momentum=0.9).load_state_dict(sd)
    with pytest.raises(ValueError, match=r"'momentum_buffer' of parameter 0 has shape \(3, 4\).*shape \(5,\)"):
        ember.optim.SGD([{"params": [e.u, e.W]}, {"params": [e.b]}], momentum=0.9).load_state_dict(sd)
    with pytest.raises(ValueError, match="missing key 'param_groups'"):
        opt.load_state_dict({"state": {}})


def test_load_casts_buffers_to_the_parameter_dtype_and_accepts_numeric_step():
    p = Parameter(ember.zeros(3, dtype=ember.float32))
    opt = ember.optim.Adam([p])
    opt.load_state_dict({"state": {0: {"step": 4, "exp_avg": ember.ones(3, dtype=ember.float64),
                                       "exp_avg_sq": ember.ones(3, dtype=ember.float64)}},
                         "param_groups": [dict(opt.state_dict()["param_groups"][0])]})
    st = opt.state[p]
    assert st["exp_avg"].dtype == ember.float32 and st["step"].shape == () and st["step"].item() == 4.0
    p.grad = ember.ones(3)
    opt.step()
    assert st["step"].item() == 5.0


# ---------------------------------------------------------------------- semantics
def test_step_is_in_place_records_no_graph_and_bumps_the_version():
    p = Parameter(ember.randn(4, 3))
    arr = p._data
    opt = ember.optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    v0 = p._version
    with ember.enable_grad():
        opt.step()
    assert p._data is arr and p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p._version > v0
    assert all(not t.requires_grad for t in opt.state[p].values())


def test_step_allocates_nothing_proportional_to_the_model():
    params = [Parameter(ember.randn(512, 256)) for _ in range(4)] + [Parameter(ember.randn(256))]
    nbytes = sum(p._data.nbytes for p in params)
    for opt in (ember.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
                ember.optim.Adam(params, weight_decay=1e-4, amsgrad=True, l1_weight_decay=1e-5),
                ember.optim.AdamW(params), ember.optim.RMSprop(params, momentum=0.9, centered=True),
                ember.optim.Adadelta(params, weight_decay=0.1), ember.optim.NAdam(params), ember.optim.RAdam(params),
                ember.optim.Adamax(params), ember.optim.Adagrad(params)):
        for p in params:
            p.grad = ember.randn(*p.shape)
        opt.step(), opt.step()  # warm-up: state and scratch buffers
        tracemalloc.start()
        try:
            opt.step()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 0.01 * nbytes, (type(opt).__name__, peak, nbytes)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_non_contiguous_and_empty_parameters(name):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 3))
    p = Parameter(ember.from_numpy(np.asfortranarray(base.T)))  # a non-contiguous (Fortran-ordered) array
    q = Parameter(ember.from_numpy(np.ascontiguousarray(base.T)))
    z = Parameter(ember.zeros(0, 3, dtype=ember.float64))
    assert not p._data.flags.c_contiguous
    op, oq = getattr(ember.optim, name)([p, z]), getattr(ember.optim, name)([q])
    for _ in range(5):
        g = rng.standard_normal((3, 4))
        p.grad, q.grad, z.grad = ember.from_numpy(g.copy()), ember.from_numpy(g.copy()), ember.zeros(0, 3, dtype=ember.float64)
        op.step(), oq.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert z.shape == (0, 3)


def test_closure_runs_with_grad_enabled_and_returns_its_loss():
    e = Problem(ember, _data())
    opt = ember.optim.SGD(e.params, lr=0.1)
    with ember.no_grad():
        loss = opt.step(e.closure)
    assert isinstance(loss, ember.Tensor) and e.W.grad is not None
    assert opt.step() is None


def test_zero_grad():
    p, q = Parameter(ember.ones(3)), Parameter(ember.ones(2))
    opt = ember.optim.SGD([p, q])
    (p.sum() * 2).backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and np.array_equal(g.numpy(), np.zeros(3)) and q.grad is None
    opt.zero_grad()
    assert p.grad is None


def test_params_with_none_grad_are_skipped_and_partial_groups_work():
    p, q = Parameter(ember.ones(3)), Parameter(ember.ones(2))
    opt = ember.optim.SGD([p, q], lr=0.5, momentum=0.9)
    p.grad = ember.ones(3)
    opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), np.full(3, 0.5))
    np.testing.assert_array_equal(q.detach().numpy(), np.ones(2))
    assert q not in opt.state


def test_sgd_without_momentum_keeps_no_state():
    p = Parameter(ember.ones(3))
    opt = ember.optim.SGD([p], lr=0.1)
    p.grad = ember.ones(3)
    opt.step()
    assert opt.state_dict()["state"] == {}


def test_adagrad_state_is_created_at_construction():
    p = Parameter(ember.ones(3))
    opt = ember.optim.Adagrad([p], initial_accumulator_value=0.5)
    st = opt.state_dict()["state"][0]
    assert list(st) == ["step", "sum"] and st["step"].item() == 0.0
    np.testing.assert_array_equal(st["sum"].numpy(), np.full(3, 0.5, np.float32))
    q = Parameter(ember.ones(2))
    opt.add_param_group({"params": [q]})  # state for a late group is created on its first step
    q.grad = ember.ones(2)
    opt.step()
    assert opt.state[q]["step"].item() == 1.0


def test_param_groups_add_param_group_and_defaults():
    p, q = Parameter(ember.ones(3)), Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": q, "lr": 0.01})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["params"] == [q]
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[1]["momentum"] == 0.9
    assert opt.defaults["lr"] == 0.1 and opt.defaults["nesterov"] is False
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [p]})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([q])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        opt.add_param_group({"params": [Parameter(ember.ones(1))], "lr": -1})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ember.optim.SGD([p, p])


def test_named_parameters():
    p, q = Parameter(ember.ones(3)), Parameter(ember.ones(2))
    opt = ember.optim.Adam([("w", p), ("b", q)])
    assert opt.param_groups[0]["param_names"] == ["w", "b"] and opt.param_groups[0]["params"] == [p, q]
    with pytest.raises(ValueError, match="Some param names are missing"):
        ember.optim.Adam([("w", p), q])


def test_required_option_of_a_custom_optimizer():
    from ember.optim.optimizer import required

    class Plain(ember.optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))

        def _step_group(self, group):
            for p in group["params"]:
                if p.grad is not None:
                    p.data -= group["lr"] * p.grad.data

    p = Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
        Plain([p])
    opt = Plain([{"params": [p], "lr": 0.5}])
    p.grad = ember.ones(2)
    opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), [0.5, 0.5])



def test_a_custom_optimizer_on_the_record_api():
    """A subclass implements `_buffers` and `_update`, a loop over the gathered `ParamUpdate` records
    reading their fields by name; the base class gathers (weight decay, maximize, counters) and scatters
    (version bumps). Without `_update`, a step raises NotImplementedError and changes nothing."""

    class SignSGD(ember.optim.Optimizer):
        def __init__(self, params, lr=0.1, weight_decay=0.0, maximize=False):
            super().__init__(params, dict(lr=lr, weight_decay=weight_decay, maximize=maximize))

        def _buffers(self, group):
            return ()  # counters only

        def _update(self, group, records):
            for r in records:
                np.sign(r.grad, out=r.scratch[1])
                r.array -= group["lr"] * r.scratch[1]

    p, q = Parameter(ember.tensor([1.0, -2.0, 3.0])), Parameter(ember.tensor([0.5, 0.5]))
    opt = SignSGD([p, q], lr=0.25, weight_decay=1.0, maximize=True)
    p.grad, q.grad = ember.tensor([2.0, 1.0, 4.0]), None
    v = p._version
    opt.step()
    # direction -grad + 1.0·p = [-1, -3, -1]: p - 0.25·sign(direction)
    np.testing.assert_array_equal(p.detach().numpy(), [1.25, -1.75, 3.25])
    np.testing.assert_array_equal(q.detach().numpy(), [0.5, 0.5])
    assert p._version > v and opt.state[p]["step"].item() == 1 and q not in opt.state

    bare = ember.optim.Optimizer([q], dict(lr=0.1))
    q.grad = ember.ones(2)
    v = q._version
    with pytest.raises(NotImplementedError, match=r"_update\(group, records\)"):
        bare.step()
    assert not bare.state and q._version == v

@requires_torch
@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_repr_matches_torch(name):
    e, t = Parameter(ember.ones(2)), torch.ones(2, requires_grad=True)
    assert repr(getattr(ember.optim, name)([e])) == repr(getattr(torch.optim, name)([t]))


@requires_torch
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_defaults_match_torch(name):
    eo = getattr(ember.optim, name)([Parameter(ember.ones(2))])
    to = getattr(torch.optim, name)([torch.ones(2, requires_grad=True)])
    assert {k: v for k, v in eo.defaults.items() if k != "l1_weight_decay"} == to.defaults


# ---------------------------------------------------------------------- bad inputs
def test_bad_params():
    p = Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        ember.optim.SGD([])
    with pytest.raises(TypeError, match="iterable of Tensors or dicts, but got ember.Parameter"):
        ember.optim.SGD(p)
    with pytest.raises(TypeError, match="can only optimize Tensors, but one of the params is ndarray"):
        ember.optim.Adam([np.ones(2)])
    with pytest.raises(TypeError, match="ordered collections"):
        ember.optim.Adam([{"params": {p}}])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        ember.optim.SGD([p * 2])
    with pytest.raises(TypeError, match="unexpected keyword argument 'momentom'"):
        ember.optim.SGD([p], momentom=0.9)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nesterov'"):
        ember.optim.Adam([p], nesterov=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        ember.optim.Adam([p], differentiable=True)
    with pytest.raises(TypeError, match="lr must be a number, got str"):
        ember.optim.SGD([p], lr="0.1")


@pytest.mark.parametrize("name,kwargs,match", [
    ("SGD", dict(lr=-0.1), "Invalid learning rate: -0.1"),
    ("SGD", dict(momentum=-0.5), "Invalid momentum value: -0.5"),
    ("SGD", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("SGD", dict(nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(nesterov=True, momentum=0.9, dampening=0.1), "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(l1_weight_decay=-1e-3), "Invalid l1_weight_decay value"),
    ("Adam", dict(lr=-1e-3), "Invalid learning rate"),
    ("Adam", dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("Adam", dict(betas=0.9), "betas must be a pair"),
    ("Adam", dict(weight_decay=-0.1), "Invalid weight_decay value"),
    ("Adam", dict(lr=float("nan")), "Invalid learning rate: nan"),
    ("AdamW", dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1"),
    ("AdamW", dict(l1_weight_decay=-1.0), "Invalid l1_weight_decay value"),
    ("RMSprop", dict(alpha=-0.1), "Invalid alpha value"),
    ("RMSprop", dict(momentum=-0.1), "Invalid momentum value"),
    ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value"),
    ("Adagrad", dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value"),
    ("RAdam", dict(eps=-1e-8), "Invalid epsilon value"),
])
def test_invalid_option_values(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        getattr(ember.optim, name)([Parameter(ember.ones(2))], **kwargs)


def test_no_warnings_on_a_normal_run():
    e = Problem(ember, _data())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt = ember.optim.Adam(e.params)
        for _ in range(3):
            opt.step(e.closure)
