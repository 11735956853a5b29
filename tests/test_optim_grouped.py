"""The grouped update (ember/optim/_grouped.py): small parameters updated as one flat array give
bit-identical results to the per-parameter update, and the per-parameter state stays the truth."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.optim._grouped as grouped

OPTIMIZERS = [
    (ember.optim.Adam, {"lr": 1e-2}),
    (ember.optim.Adam, {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.1}),
    (ember.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    (ember.optim.Adam, {"lr": 1e-2, "maximize": True, "l1_weight_decay": 1e-3}),
    (ember.optim.Adamax, {"lr": 1e-2}),
    (ember.optim.NAdam, {"lr": 1e-2}),
    (ember.optim.RAdam, {"lr": 1e-2}),
    (ember.optim.RMSprop, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    (ember.optim.Adagrad, {"lr": 1e-2, "initial_accumulator_value": 0.1, "lr_decay": 0.01}),
    (ember.optim.Adadelta, {"lr": 1.0}),
]
SHAPES = [(3, 4), (5,), (200, 200), (7, 1, 2), (4,)]  # (200, 200) is above GROUP_MAX: updated alone


def _params(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES]


def _grads(step: int, skip=()) -> list:
    rng = np.random.default_rng(100 + step)
    return [None if i in skip else rng.standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)]


def _run(cls, kw, steps: int, group_max: int, monkeypatch, skip_at=None, between=None):
    monkeypatch.setattr(grouped, "GROUP_MAX", group_max)
    ps = _params()
    opt = cls(ps, **kw)
    for t in range(steps):
        for p, g in zip(ps, _grads(t, skip_at.get(t, ()) if skip_at else ())):
            p.grad = None if g is None else ember.tensor(g)
        opt.step()
        if between is not None:
            opt = between(t, opt, ps) or opt
    return ps, opt


def _same(a: list, b: list) -> None:
    for i, (x, y) in enumerate(zip(a, b)):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy(), err_msg=f"parameter {i}")


@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_grouped_update_is_bit_identical_to_per_parameter(cls, kw, monkeypatch):
    grouped_ps, opt = _run(cls, kw, 6, grouped.GROUP_MAX, monkeypatch)
    assert any(lay is not None for lay in opt._layouts.values())  # the grouped path really ran
    alone_ps, alone = _run(cls, kw, 6, 0, monkeypatch)
    assert not any(alone._layouts.values())
    _same(grouped_ps, alone_ps)
    for p, q in zip(grouped_ps, alone_ps):  # the state too, counters included
        for k, v in opt.state[p].items():
            np.testing.assert_array_equal(v.numpy(), alone.state[q][k].numpy(), err_msg=k)


def test_a_parameter_without_grad_falls_back_and_counters_stay_per_parameter(monkeypatch):
    kw = {"lr": 1e-2}
    skip = {2: (1,), 3: (0, 1)}  # parameter 1 misses two steps: its step count falls behind
    a, opt = _run(ember.optim.Adam, kw, 7, grouped.GROUP_MAX, monkeypatch, skip_at=skip)
    b, ref = _run(ember.optim.Adam, kw, 7, 0, monkeypatch, skip_at=skip)
    _same(a, b)
    assert [opt.state[p]["step"].item() for p in a] == [6, 5, 7, 7, 7]
    assert [ref.state[p]["step"].item() for p in b] == [6, 5, 7, 7, 7]


def test_state_dict_is_live_and_reloads_into_a_fresh_optimizer(monkeypatch):
    kw = {"lr": 1e-2}
    saved = {}

    def checkpoint(t, opt, ps):
        if t == 2:
            sd = opt.state_dict()
            before = sd["state"][0]["exp_avg"].numpy().copy()
            saved["sd"] = copy.deepcopy(sd)
            saved["live"], saved["before"] = sd, before
        if t == 3:  # a state_dict is live (as PyTorch's): the step after it shows in its tensors
            assert not np.array_equal(saved["live"]["state"][0]["exp_avg"].numpy(), saved["before"])
            fresh = ember.optim.Adam(ps, **kw)
            fresh.load_state_dict(opt.state_dict())
            return fresh
    a, _ = _run(ember.optim.Adam, kw, 6, grouped.GROUP_MAX, monkeypatch, between=checkpoint)
    b, _ = _run(ember.optim.Adam, kw, 6, 0, monkeypatch)
    _same(a, b)


def test_replacing_or_editing_state_is_honoured(monkeypatch):
    def edit(t, opt, ps):
        if t == 1:
            opt.state[ps[0]]["exp_avg"] = ember.zeros(SHAPES[0])  # a new tensor: the layout is rebuilt
            opt.state[ps[1]]["exp_avg_sq"].mul_(2.0)  # in place, through the member's own tensor
    a, opt = _run(ember.optim.Adam, {"lr": 1e-2}, 4, grouped.GROUP_MAX, monkeypatch, between=edit)
    b, _ = _run(ember.optim.Adam, {"lr": 1e-2}, 4, 0, monkeypatch, between=edit)
    _same(a, b)


def test_parameters_changed_between_steps_are_read_again(monkeypatch):
    def reset(t, opt, ps):
        if t == 1:
            with ember.no_grad():
                ps[0].fill_(0.5)
            ps[3].data[...] = 2.0  # even behind the version counter's back
    a, _ = _run(ember.optim.Adam, {"lr": 1e-2}, 4, grouped.GROUP_MAX, monkeypatch, between=reset)
    b, _ = _run(ember.optim.Adam, {"lr": 1e-2}, 4, 0, monkeypatch, between=reset)
    _same(a, b)


def test_deepcopy_of_an_optimizer_steps_on_its_own(monkeypatch):
    ps = _params()
    opt = ember.optim.Adam(ps, lr=1e-2)
    for p, g in zip(ps, _grads(0)):
        p.grad = ember.tensor(g)
    opt.step()
    twin = copy.deepcopy(opt)
    sd = copy.deepcopy(opt.state_dict())
    opt.step()
    # the copy's state was not moved by the original's step
    for i in range(len(ps)):
        np.testing.assert_array_equal(twin.state_dict()["state"][i]["exp_avg"].numpy(),
                                      sd["state"][i]["exp_avg"].numpy())


def test_a_step_bumps_every_parameters_version():
    ps = _params()
    opt = ember.optim.Adam(ps, lr=1e-2)
    y = (ps[1] * ps[1]).sum()  # saves ps[1] for backward
    for p, g in zip(ps, _grads(0)):
        p.grad = ember.tensor(g)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
