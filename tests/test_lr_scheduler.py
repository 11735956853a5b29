"""ember.optim.lr_scheduler: learning-rate sequences equal PyTorch's, state dicts, warnings, bad inputs."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ember
import ember.optim
from ember.nn import Parameter
from helpers import requires_torch, torch

L = ember.optim.lr_scheduler


def _optimizer(lib, name: str = "SGD"):
    """Two param groups (lr 0.1 and 0.05), on ember or torch."""
    if lib is torch:
        ps, mod = [torch.zeros(2, requires_grad=True) for _ in range(2)], torch.optim
    else:
        ps, mod = [Parameter(ember.zeros(2)) for _ in range(2)], ember.optim
    extra = {"momentum": 0.9} if name == "SGD" else {}
    return getattr(mod, name)([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}], lr=0.1, **extra)


class Scale:
    """A callable object as lr_lambda: its __dict__ travels in the state dict."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def __call__(self, epoch: int) -> float:
        return self.rate ** epoch


# name -> (optimizer, factory(lr_scheduler module, optimizer))
SCHEDULES = {
    "StepLR": ("SGD", lambda M, o: M.StepLR(o, step_size=7, gamma=0.5)),
    "MultiStepLR": ("SGD", lambda M, o: M.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3)),
    "ExponentialLR": ("SGD", lambda M, o: M.ExponentialLR(o, gamma=0.93)),
    "CosineAnnealingLR": ("SGD", lambda M, o: M.CosineAnnealingLR(o, T_max=10, eta_min=0.001)),
    "CosineAnnealingWarmRestarts": ("SGD", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=1e-3)),
    "CosineAnnealingWarmRestarts-1": ("SGD", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=7)),
    "LinearLR": ("SGD", lambda M, o: M.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=20)),
    "LinearLR-decay": ("SGD", lambda M, o: M.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=30)),
    "ConstantLR": ("SGD", lambda M, o: M.ConstantLR(o, factor=0.3, total_iters=10)),
    "LambdaLR": ("SGD", lambda M, o: M.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)])),
    "MultiplicativeLR": ("SGD", lambda M, o: M.MultiplicativeLR(o, lambda e: 0.97)),
    "PolynomialLR": ("SGD", lambda M, o: M.PolynomialLR(o, total_iters=30, power=2.0)),
    "OneCycleLR-cos": ("SGD", lambda M, o: M.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=50)),
    "OneCycleLR-linear-3phase": ("SGD", lambda M, o: M.OneCycleLR(o, max_lr=1.0, epochs=5, steps_per_epoch=12,
                                                                  anneal_strategy="linear", three_phase=True)),
    "OneCycleLR-adam": ("Adam", lambda M, o: M.OneCycleLR(o, max_lr=0.01, total_steps=50, pct_start=0.25,
                                                          base_momentum=[0.8, 0.7], div_factor=10.0)),
    "OneCycleLR-nomomentum": ("Adagrad", lambda M, o: M.OneCycleLR(o, max_lr=0.1, total_steps=60,
                                                                   cycle_momentum=False)),
    "CyclicLR-triangular": ("SGD", lambda M, o: M.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=7,
                                                           step_size_down=4)),
    "CyclicLR-triangular2": ("SGD", lambda M, o: M.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=5,
                                                            mode="triangular2", base_momentum=0.7)),
    "CyclicLR-exp_range": ("SGD", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="exp_range",
                                                          gamma=0.97)),
    "CyclicLR-adam": ("Adam", lambda M, o: M.CyclicLR(o, 0.001, 0.01, step_size_up=6, base_momentum=0.85,
                                                      max_momentum=0.95)),
    "CyclicLR-scale_fn": ("SGD", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_fn=lambda x: 1 / (1 + x),
                                                         scale_mode="iterations", cycle_momentum=False)),
    "SequentialLR": ("SGD", lambda M, o: M.SequentialLR(o, [M.LinearLR(o, start_factor=0.1, total_iters=10),
                                                            M.CosineAnnealingLR(o, T_max=40)], milestones=[10])),
    "SequentialLR-3": ("SGD", lambda M, o: M.SequentialLR(o, [M.ConstantLR(o, factor=0.1, total_iters=5),
                                                              M.ExponentialLR(o, gamma=0.9),
                                                              M.StepLR(o, step_size=4)], milestones=[8, 20])),
    "ChainedScheduler": ("SGD", lambda M, o: M.ChainedScheduler([M.ConstantLR(o, factor=0.5, total_iters=8),
                                                                 M.ExponentialLR(o, gamma=0.95)])),
    "Chained-cosine-multistep": ("SGD", lambda M, o: M.ChainedScheduler([M.CosineAnnealingLR(o, T_max=12),
                                                                         M.MultiStepLR(o, [6, 20])], optimizer=o)),
}


def _momenta(opt) -> list:
    return [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]


def _run(lib, name: str, steps: int = 50):
    opt_name, factory = SCHEDULES[name]
    opt = _optimizer(lib, opt_name)
    sched = factory(L if lib is ember else torch.optim.lr_scheduler, opt)
    seq = [(list(sched.get_last_lr()), _momenta(opt))]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append((list(sched.get_last_lr()), _momenta(opt)))
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return seq, opt, sched


@requires_torch
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_sequence_equals_torch(name):
    e, eo, es = _run(ember, name)
    t, to, ts = _run(torch, name)
    assert e == t  # exactly: the same recursive formulas in the same order
    assert [g.get("initial_lr") for g in eo.param_groups] == [g.get("initial_lr") for g in to.param_groups]
    assert getattr(es, "base_lrs", None) == getattr(ts, "base_lrs", None)
    assert getattr(es, "last_epoch", None) == getattr(ts, "last_epoch", None)


@requires_torch
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                                  "ConstantLR", "PolynomialLR", "LambdaLR"])
def test_step_with_epoch_uses_the_closed_form(name):
    out = []
    for lib, M in ((ember, L), (torch, torch.optim.lr_scheduler)):
        opt = _optimizer(lib)
        sched = SCHEDULES[name][1](M, opt)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in [3, 4, 10, 2, 17, 30, 31, 45]:
                opt.step()
                sched.step(epoch)
                seq.append(list(sched.get_last_lr()))
        out.append(seq)
    assert out[0] == out[1]
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        sched = L.StepLR(_optimizer(ember), 3)
        sched.optimizer.step()
        sched.step(5)


@requires_torch
def test_warm_restarts_fractional_epochs():
    out = []
    for lib, M in ((ember, L), (torch, torch.optim.lr_scheduler)):
        opt = _optimizer(lib)
        sched = M.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01)
        seq = []
        for epoch in range(12):
            for batch in range(4):
                opt.step()
                sched.step(epoch + batch / 4)
                seq.append((list(sched.get_last_lr()), sched.T_cur, sched.T_i, sched.last_epoch))
        out.append(seq)
    assert out[0] == out[1]


@requires_torch
@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", threshold_mode="abs", threshold=0.05),
                                    dict(patience=2, cooldown=3, factor=0.5, min_lr=[0.02, 0.001]),
                                    dict(mode="min", threshold_mode="abs", patience=0, eps=1e-3, min_lr=0.01)])
def test_reduce_lr_on_plateau_equals_torch(kwargs):
    metrics = np.concatenate([np.linspace(1.0, 0.5, 8), np.full(14, 0.5), np.linspace(0.5, 0.49, 6),
                              np.full(22, 0.6)])
    out = []
    for lib, M in ((ember, L), (torch, torch.optim.lr_scheduler)):
        opt = _optimizer(lib)
        sched = M.ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for m in metrics:
            opt.step()
            sched.step(m)
            seq.append((list(sched.get_last_lr()), sched.num_bad_epochs, sched.cooldown_counter, sched.best))
        out.append(seq)
    assert out[0] == out[1]
    assert out[0][-1][0] != out[0][0][0]  # the schedule did reduce


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_round_trip(name):
    full, _, _ = _run(ember, name, steps=50)
    opt_name, factory = SCHEDULES[name]
    opt = _optimizer(ember, opt_name)
    sched = factory(L, opt)
    for _ in range(20):
        opt.step()
        sched.step()
    ssd, osd = copy.deepcopy(sched.state_dict()), copy.deepcopy(opt.state_dict())
    assert "optimizer" not in ssd
    opt2 = _optimizer(ember, opt_name)
    sched2 = factory(L, opt2)  # built first, then loaded: construction resets the groups' lr
    opt2.load_state_dict(osd)
    sched2.load_state_dict(ssd)
    seq = []
    for _ in range(30):
        opt2.step()
        sched2.step()
        seq.append((list(sched2.get_last_lr()), _momenta(opt2)))
    assert seq == full[21:]


def test_lambda_state_dict_keeps_callable_objects():
    opt = _optimizer(ember)
    sched = L.LambdaLR(opt, [Scale(0.9), lambda e: 1.0])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.9}, None] and "optimizer" not in sd
    other = L.LambdaLR(_optimizer(ember), [Scale(0.5), lambda e: 1.0])
    other.load_state_dict(sd)
    assert other.lr_lambdas[0].rate == 0.9


def test_base_lrs_initial_lr_and_last_epoch():
    opt = _optimizer(ember)
    sched = L.ExponentialLR(opt, gamma=0.5)
    assert sched.base_lrs == [0.1, 0.05] and sched.last_epoch == 0
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.05]
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.05, 0.025] and sched.last_epoch == 1
    # resuming: last_epoch >= 0 needs initial_lr, which the groups now have
    resumed = L.ExponentialLR(opt, gamma=0.5, last_epoch=1)
    assert resumed.base_lrs == [0.1, 0.05]


def test_warnings():
    opt = _optimizer(ember)
    sched = L.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()
    opt = _optimizer(ember)
    sched = L.StepLR(opt, step_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()


# ---------------------------------------------------------------------- bad inputs
def test_bad_inputs():
    opt = _optimizer(ember)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        L.StepLR([], step_size=3)
    with pytest.raises(KeyError, match=r"'initial_lr' is not specified in param_groups\[0\]"):
        L.StepLR(_optimizer(ember), step_size=3, last_epoch=4)
    with pytest.raises(ValueError, match="Constant multiplicative factor expected to be between 0 and 1"):
        L.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        L.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Ending multiplicative factor"):
        L.LinearLR(opt, end_factor=2)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 3"):
        L.LambdaLR(opt, [lambda e: 1] * 3)
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got float"):
        L.MultiplicativeLR(opt, 0.9)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        L.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1, but got 1.5"):
        L.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=1.5)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        L.CosineAnnealingWarmRestarts(opt, T_0=3).step(-1)
    with pytest.raises(ValueError, match="either total_steps OR"):
        L.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Expected positive integer total_steps, but got 0"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=0)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start, but got 1.5"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got exp"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        L.OneCycleLR(opt, max_lr=[0.1], total_steps=10)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        L.OneCycleLR(_optimizer(ember, "Adagrad"), max_lr=0.1, total_steps=10)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        L.CyclicLR(_optimizer(ember, "Adagrad"), 0.01, 0.1)
    with pytest.raises(ValueError, match="mode 'cosine' is invalid and scale_fn is None"):
        L.CyclicLR(opt, 0.01, 0.1, mode="cosine")
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        L.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode maximum is unknown"):
        L.ReduceLROnPlateau(opt, mode="maximum")
    with pytest.raises(ValueError, match="threshold mode relative is unknown"):
        L.ReduceLROnPlateau(opt, threshold_mode="relative")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 3"):
        L.ReduceLROnPlateau(opt, min_lr=[0, 0, 0])
    with pytest.raises(TypeError, match="Dummy is not an Optimizer"):
        L.ReduceLROnPlateau(type("Dummy", (), {})())


def test_one_cycle_past_total_steps_raises():
    opt = _optimizer(ember)
    sched = L.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        sched.step()
    opt.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        sched.step()


def test_container_bad_inputs():
    opt, other = _optimizer(ember), _optimizer(ember)
    a, b = L.ExponentialLR(opt, 0.9), L.StepLR(other, 3)
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        L.SequentialLR(opt, [a, L.StepLR(opt, 2)], milestones=[3, 5])
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        L.SequentialLR(opt, [a, b], milestones=[3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        L.ChainedScheduler([a, L.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        L.ChainedScheduler([])
    with pytest.raises(TypeError, match="at index 0 should have `optimizer` as its attribute"):
        L.SequentialLR(opt, [object()], milestones=[])


@pytest.mark.skipif(not hasattr(ember, "save"), reason="ember.save is not available")
def test_checkpoint_of_optimizer_and_schedulers(tmp_path):
    """Optimizer and scheduler state dicts survive ember.save/ember.load and the run continues identically."""
    def build():
        p = Parameter(ember.tensor([1.0, -2.0, 3.0]))
        opt = ember.optim.Adam([p], lr=0.1, amsgrad=True)
        return p, opt, [L.MultiStepLR(opt, [3, 3, 8]), L.ReduceLROnPlateau(opt, patience=1)]

    def run(p, opt, scheds, steps):
        for _ in range(steps):
            p.grad = p.detach() * 2
            opt.step()
            scheds[0].step()
            scheds[1].step(1.0)
        return p.detach().numpy().copy(), opt.param_groups[0]["lr"]

    p, opt, scheds = build()
    run(p, opt, scheds, 4)
    ember.save({"param": p.detach(), "optimizer": opt.state_dict(), "scheds": [s.state_dict() for s in scheds]},
               tmp_path / "ckpt.safetensors")
    expected = run(p, opt, scheds, 8)
    ck = ember.load(tmp_path / "ckpt.safetensors")
    p2, opt2, scheds2 = build()
    p2._data[...] = ck["param"].numpy()
    opt2.load_state_dict(ck["optimizer"])
    for s, sd in zip(scheds2, ck["scheds"]):
        s.load_state_dict(sd)
    got = run(p2, opt2, scheds2, 8)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scheds2[0].step(9)  # the closed form needs milestones as a Counter again
    assert scheds2[0].get_last_lr() == [0.1 * 0.1 ** 3]
