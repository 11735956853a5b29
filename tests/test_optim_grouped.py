"""The grouped update (ember/optim/_grouped.py): small parameters updated as one flat array give
bit-identical results to the per-parameter update, and the per-parameter state stays the truth; the
optimizer's gather -> update -> scatter, whose write-back runs whatever the update loop does."""
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
            ps[3]._data[...] = 2.0  # even behind the version counter's back
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


# ---------------------------------------------------------------------- gather -> update -> scatter
class _FailingAdam(ember.optim.Adam):
    """Adam whose update loop raises right after the record that holds `fail_after` (as a check of the
    updated values for non-finite numbers would): the loop stops part-way through the group."""

    fail_after = None

    def _update(self, group, records):
        for r in records:
            super()._update(group, [r])
            if any(p is self.fail_after for p in r.params):
                raise FloatingPointError("update check failed")


def _triple(opt, p) -> tuple:
    return tuple(x.copy() for x in (p._data, opt.state[p]["exp_avg"]._data, opt.state[p]["exp_avg_sq"]._data))


@pytest.mark.parametrize("group_max", [grouped.GROUP_MAX, 0], ids=["grouped", "per-parameter"])
def test_an_update_that_raises_part_way_leaves_every_parameter_consistent(group_max, monkeypatch):
    """Consistent, after `step()` raised in an update loop: each parameter's value and state buffers are
    either all as before the step (a record the loop never reached) or all as after an uninterrupted step
    (a record it finished): never a value from one and a buffer from the other, which is what a grouped
    record left without its write-back gives (its flat buffers are the members' state, its flat values
    a copy). Every gathered parameter's 'step' counts the step (the gather advances all counters before
    the update, as PyTorch's foreach implementations do), every version is bumped (autograd must see the
    change), and the optimizer steps on with the same layout. Nothing is rolled back."""
    monkeypatch.setattr(grouped, "GROUP_MAX", group_max)
    ps, qs = _params(), _params()
    opt, ref = _FailingAdam(ps, lr=1e-2), ember.optim.Adam(qs, lr=1e-2)

    def step(t, fail_after=None):
        for p, q, g in zip(ps, qs, _grads(t)):
            p.grad, q.grad = ember.tensor(g), ember.tensor(g)
        opt.fail_after = fail_after
        opt.step()

    for t in range(3):
        step(t)
        ref.step()
    lay = opt._layouts[id(opt.param_groups[0])]
    assert (lay is not None) == (group_max > 0)
    before = [_triple(opt, p) for p in ps]
    versions = [p._version for p in ps]
    with pytest.raises(FloatingPointError):
        step(3, fail_after=ps[1])
    ref.step()
    after = [_triple(ref, q) for q in qs]
    finished = []
    for i, p in enumerate(ps):
        now = _triple(opt, p)
        same = [all(np.array_equal(x, y) for x, y in zip(now, other)) for other in (before[i], after[i])]
        assert any(same), f"parameter {i}: its value and state buffers disagree on whether it was updated"
        finished.append(same[1])
        assert opt.state[p]["step"].item() == 4, i
        assert p._version > versions[i], i
    # grouped: the small parameters are one record, before the large one; per parameter: in order
    assert finished == ([True, True, False, True, True] if group_max else [True, True, False, False, False])
    step(4)  # steps on, reusing the grouped layout
    assert opt._layouts[id(opt.param_groups[0])] is lay
    assert all(opt.state[p]["step"].item() == 5 for p in ps)


def test_the_grouped_records_write_back_happens_even_when_the_loop_stops_early():
    """`_scatter` writes what the update did to the grouped record (its flat values, its counters) into
    its members and bumps their versions, whatever the update loop did after it (here: `break`)."""
    ps = _params()

    class Poke(ember.optim.Adam):
        def _update(self, group, records):
            for r in records:
                assert r.layout is not None and r.param is None  # the grouped record comes first
                r.array[...] = np.arange(r.array.size)
                r.state["step"]._data[()] = 41.0
                break  # the large parameter's record is never updated

    opt = Poke(ps, lr=1e-2)
    for p, g in zip(ps, _grads(0)):
        p.grad = ember.tensor(g)
    big_before, versions = ps[2]._data.copy(), [p._version for p in ps]
    opt.step()
    small = [ps[i] for i in (0, 1, 3, 4)]
    assert opt._layouts[id(opt.param_groups[0])].members == small
    flat = np.concatenate([p._data.ravel() for p in small])
    np.testing.assert_array_equal(flat, np.arange(flat.size))
    assert [opt.state[p]["step"].item() for p in ps] == [41, 41, 1, 41, 41]
    np.testing.assert_array_equal(ps[2]._data, big_before)
    assert all(p._version > v for p, v in zip(ps, versions))


def test_gather_records_name_their_fields_and_compute_each_direction_when_read(monkeypatch):
    """`_gather`'s records: the grouped one first (`param` None, `params` its members), then one per
    parameter with a gradient; `grad` is the direction the update uses (maximize and weight decay applied),
    computed into the shared scratch when the record's update reads it (so read in record order)."""
    ps = _params()
    for p, g in zip(ps, _grads(0, skip=(4,))):
        p.grad = None if g is None else ember.tensor(g)
    for group_max in (grouped.GROUP_MAX, 0):
        monkeypatch.setattr(grouped, "GROUP_MAX", group_max)
        opt = ember.optim.Adam(ps, lr=1e-2, weight_decay=0.5, maximize=True)
        group = opt.param_groups[0]
        values = [p._data.copy() for p in ps]
        records = opt._gather(group, opt._buffers(group))
        try:
            assert opt._layouts[id(group)] is None  # ps[4] has no gradient: no grouped record
            assert [r.param for r in records] == ps[:4] and all(r.params == [r.param] for r in records)
            for r, p, v in zip(records, ps, values):
                assert r.array is p._data and r.state is opt.state[p] and r.layout is None
                assert r.step == 1 and r.state["step"].item() == 1
                np.testing.assert_array_equal(r.grad, v * np.float32(0.5) - p.grad._data)
        finally:
            opt._scatter(records)
    monkeypatch.undo()
    ps[4].grad = ember.tensor(_grads(0)[4])
    opt = ember.optim.Adam(ps, lr=1e-2)
    group = opt.param_groups[0]
    records = opt._gather(group, opt._buffers(group))
    opt._scatter(records)
    assert records[0].param is None and records[0].params == [ps[i] for i in (0, 1, 3, 4)]
    assert [r.param for r in records[1:]] == [ps[2]] and records[1].grad is ps[2].grad._data
