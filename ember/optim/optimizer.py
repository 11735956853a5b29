"""`Optimizer`: the base class of ember's optimizers (PyTorch's `torch.optim.Optimizer`).

An optimizer holds `param_groups` (a list of dicts: `params` plus that group's options) and
`state` (a dict per parameter: its buffers and step counter). `step()` updates each
parameter's array in place from its `.grad`; parameters whose grad is None are skipped.

A step runs, per param group, in three phases (`Optimizer._step_group`):

    gather   `_gather`: one `ParamUpdate` record per parameter with a gradient (the group's small
             parameters as one grouped record): its array, its update direction (the gradient with
             maximize and weight decay applied), its state with the step counter advanced, scratch;
    update   `_update`: the algorithm, a loop over the records reading their fields by name;
    scatter  `_scatter`: the write-back the grouped record needs (its flat values and counters into
             its members) and a version bump of every updated parameter; it runs even when the
             update raises (see `_step_group`).

Speed: updates run on the raw NumPy arrays with `out=` arguments, into state buffers that are
allocated once, into a small scratch pool shared by all parameters (sized by the largest
parameter) and, where the gradient is transformed (maximize, weight decay), into direction buffers
allocated once, so a step after the first allocates nothing proportional to the model and records
no graph. The small parameters of a group are updated together as one flat array (`_grouped`).
"""
from __future__ import annotations

import copy
import numbers
import warnings
from collections import defaultdict
from itertools import chain
from typing import Any, Callable, Iterable

import numpy as np

from .. import _dtype as dt
from .._capture import opaque
from .._tensor import Tensor, bump_version, make
from ..autograd.grad_mode import enable_grad
from ..backend import array_module, device_of, on, to_host, transfer
from ..ops.sparse_ops import SparseTensor
from ._grouped import Layout

__all__ = ["Optimizer", "ParamUpdate", "required"]


class _Required:
    """Marks an option that has no default: every param group must give it."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class ParamUpdate:
    """One parameter's share of a step, as `Optimizer._gather` hands it to `Optimizer._update`.

    param    the parameter (a Tensor), or None for the grouped record of a group's small parameters
             (then `layout` is their `_grouped.Layout` and `params` lists them);
    array    the raw array the update changes in place: the parameter's own, or the grouped record's
             flat copy of its members' values (written back by `_scatter`); already scaled by
             1 - lr·weight_decay under `decoupled_weight_decay`;
    grad     the update direction: the gradient with maximize and L2/L1 weight decay applied (`_grad`).
             Read-only: the parameter's own `.grad` array when no rule applies; otherwise computed
             into `scratch[0]` when first read, so read it when this record's update starts and
             before writing `scratch[0]` (the scratch is shared: the next record's direction
             overwrites it; computing it then, not all at gather time, costs no memory per parameter
             and reads the gradient while its update still has it in cache);
    state    the parameter's state dict (the grouped record: flat buffers and 0-d counters over all
             members), its 'step' already advanced; None where the optimizer keeps no counted state;
    scratch  `Optimizer._n_scratch` temporaries shaped like `array`, shared with the other records:
             free to clobber, but not valid once the next record's update starts;
    step     the value of the advanced 'step' counter (0 without counted state);
    layout   the grouped record's `Layout`, None for a parameter's own record.
    """

    __slots__ = ("param", "array", "_grad", "_rule", "state", "scratch", "step", "layout")

    def __init__(self, param: Tensor | None, array, grad, state: dict | None, scratch: tuple, step: float,
                 layout: Layout | None = None, rule: tuple | None = None) -> None:
        self.param, self.array, self._grad, self.state = param, array, grad, state
        self.scratch, self.step, self.layout = scratch, step, layout
        self._rule = rule  # (maximize, L2, L1) still to apply to the raw gradient `_grad`; None: nothing

    @property
    def grad(self):
        if self._rule is not None:
            maximize, l2, l1 = self._rule
            self._rule = None
            self._grad = _grad(self._grad, self.array, maximize, l2, l1, self.scratch[0], self.scratch[1])
        return self._grad

    @property
    def params(self) -> list[Tensor]:
        """The parameters this record updates: `[param]`, or the grouped record's members."""
        return [self.param] if self.layout is None else list(self.layout.members)

    def __repr__(self) -> str:
        what = "grouped" if self.layout is not None else "param"
        return f"ParamUpdate({what}, shape={tuple(self.array.shape)}, step={self.step})"


class Optimizer:
    """Base class of all optimizers.

    `params` is an iterable of Tensors, of `(name, Tensor)` pairs, or of dicts (param groups:
    `{"params": [...], "lr": ..., ...}`, whose options override `defaults`). Subclasses
    implement `_update(group, records)`, a loop over the `ParamUpdate` records of one group, and
    `_buffers(group)`, the names of their state buffers (or override `_step_group(group)`, or `step`
    entirely, as in PyTorch), and list in `_checked` the options `_validate` rejects when negative
    (or override `_validate`).
    """

    # how many scratch arrays shaped like a parameter one update needs (see `_scratch`)
    _n_scratch = 2
    # options `_validate` checks, in PyTorch's order: a number >= 0, or for 'betas' a pair in [0, 1)
    _checked: tuple[str, ...] = ()
    # the 0-d counters a new state starts with (see `_init_state`), in PyTorch's key order
    _counters: dict[str, float] = {"step": 0.0}
    # whether the update takes sparse COO gradients (SGD, SparseAdam); if not, `_gather` raises PyTorch's error
    _sparse_grads = False

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self._validate(defaults)
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._pools: dict = {}  # (array type, dtype) -> flat scratch array
        self._views: dict = {}  # (array type, dtype, shape) -> tuple of scratch views
        self._layouts: dict = {}  # id(param group) -> its small parameters' flat Layout, or None
        self._scratch_of: dict = {}  # parameter -> (its array, `_scratch` of it): the gather's fast path
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (missing options take `defaults`)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("param_group must have a 'params' entry (a Tensor or a list of Tensors)")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        if names:  # named parameters: [(name, tensor), ...]
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            params = [p[1] for p in params]
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {_typename(p)}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        self._validate(param_group)
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen: set = set()
        for g in self.param_groups:
            seen.update(g["params"])
            if ("param_names" in g) != ("param_names" in param_group):
                kind = "with names" if "param_names" in param_group else "without names"
                raise ValueError(f"all optimizer param groups should be with/without names. cannot add param group "
                                 f"{kind} to the optimizer")
        if not seen.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def _validate(self, options: dict[str, Any]) -> None:
        """Raise for an option value the algorithm cannot use: ValueError (PyTorch's message) for each
        option named in `_checked` that is out of range; subclasses override it for other checks."""
        name = type(self).__name__
        if options.get("differentiable"):
            raise NotImplementedError(f"{name}: differentiable=True is not supported: ember's "
                                      "optimizers update raw arrays and record no graph")
        for key in self._checked:
            if key == "betas":
                _check_betas(name, options["betas"])
            else:
                check_nonneg(name, options, key)

    # ------------------------------------------------------------------ step
    @opaque
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to None (default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    @opaque
    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient. `closure` (re-evaluates the model and
        returns the loss) runs first, with grad mode on; its loss is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        self._opt_called = True  # lets an LR scheduler warn when it is stepped before the optimizer
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        """One group's update: gather -> update -> scatter.

        The scatter runs even when the update raises (`finally`), so that the step leaves every
        parameter's value, state and counters consistent with each other, as the per-parameter path
        (and PyTorch) would: a grouped record's flat state buffers *are* its members' state (views of
        them), so an update that raised after changing them has already moved the members' state, and
        only the write-back of the flat values and counters brings the members' values and counters in
        step with it. Without it a raised (or, in a hand-written loop, broken-off) update would leave
        the members with state advanced but values and 'step' not, which no ungrouped run can produce.
        Nothing is rolled back (the update works in place, as PyTorch's does): as in PyTorch's
        `foreach` implementations, the gather has advanced every record's 'step' counter before the
        update starts, records the update had finished keep their update, the one it was in stays as it
        left it, and those it never reached keep their values and buffers. Every gathered parameter's
        version is bumped, so autograd reports a graph that saved one of them.
        """
        if type(self)._update is Optimizer._update:
            raise NotImplementedError(f"{type(self).__name__} must implement step(), _step_group(group) "
                                      "or _update(group, records)")
        records = self._gather(group, self._buffers(group))
        try:
            self._update(group, records)
        finally:
            self._scatter(records)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...] | None:
        """The names of the state buffers shaped like a parameter that `group`'s update needs (zeros at
        first use: `_init_state`); () for the counters alone; None for no counted state (`_gather`)."""
        return ()

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        """The algorithm: update each record of `_gather(group, ...)` in place (`record.array` and the
        buffers in `record.state`), reading its fields by name. It does no write-back: `_scatter` does."""
        raise NotImplementedError(f"{type(self).__name__} must implement step(), _step_group(group) "
                                  "or _update(group, records)")

    def _gather(self, group: dict[str, Any], buffers: tuple[str, ...] | None = ()) -> list[ParamUpdate]:
        """The prelude of `group`'s update: a `ParamUpdate` for each parameter whose grad is not None.

        With `buffers` (see `_buffers`), each parameter's state is initialised at first use
        (`_init_state`: the `_counters` and a zero buffer per name) and its 'step' advanced; with
        `buffers=None` the records have no state (None) and step 0. With `buffers` non-empty, the
        group's small parameters come first as one grouped record (`param` None) whose array, grad,
        state and scratch are flat arrays over all of them (`_grouped.Layout`, gathered here, written
        back by `_scatter`). Under `decoupled_weight_decay` each array is scaled by 1 - lr·weight_decay
        here; each record's `grad` is the direction of `_grad`, computed into its scratch[0] when the update
        reads it (see `ParamUpdate`).

        If it raises, the records gathered so far are scattered first (their arrays may have been
        scaled, the grouped one's flat arrays gathered), so it leaves the same consistency as a step.
        """
        if SparseTensor.seen and not self._sparse_grads:  # (no cost until a sparse tensor exists)
            _refuse_sparse(self, group)
        lr, wd, maximize = float(group["lr"]), group.get("weight_decay", 0), group.get("maximize", False)
        l1 = group.get("l1_weight_decay", 0.0)
        shrink = 1 - lr * wd if wd and group.get("decoupled_weight_decay") else None
        l2 = 0.0 if shrink is not None else wd
        # the direction's rule, applied when a record's `grad` is read (None: the direction is the grad itself)
        rule = (maximize, l2, l1) if (maximize or l2 or l1) else None
        states, scratch_of, cached = self.state, self._scratch, self._scratch_of
        state, step = None, 0
        records: list[ParamUpdate] = []
        append, record = records.append, ParamUpdate  # (local names: this loop runs per parameter per step)
        try:
            grouped: set = set()
            if buffers:  # the small parameters first, as one flat array (`_grouped`)
                lay = self._layouts.get(id(group))
                if lay is None or not lay.valid(self, group):
                    lay = Layout.build(self, group, buffers)
                    self._layouts[id(group)] = lay
                if lay is not None:
                    lay.gather()
                    counter = lay.entry["step"]._data
                    step = counter.item() + 1
                    counter[()] = step
                    # recorded before `a` changes, so that from here on an exception writes it back
                    append(record(None, lay.a, lay.d, lay.entry, lay.scratch, step, lay, rule))
                    if shrink is not None:
                        lay.a *= shrink
                    grouped = lay.ids
            for p in group["params"]:
                g = p.grad
                if g is None or id(p) in grouped:
                    continue
                a = p._data
                if buffers is not None:
                    state = states[p]
                    if not state:
                        self._init_state(state, a, group, buffers)
                    counter = state["step"]._data
                    step = counter.item() + 1
                    counter[()] = step  # ~10x cheaper than `counter += 1` on a 0-d array
                entry = cached.get(p)  # `_scratch(a)`, looked up by parameter: 4x faster than by key
                if entry is not None and entry[0] is a:
                    scratch = entry[1]
                else:
                    scratch = scratch_of(a)
                    cached[p] = (a, scratch)
                # recorded before `a` changes, so that from here on an exception bumps p's version
                append(record(p, a, g._data, state, scratch, step, None, rule))
                if shrink is not None:
                    a *= shrink
        except BaseException:
            self._scatter(records)
            raise
        return records

    def _scatter(self, records: list[ParamUpdate]) -> None:
        """The write-back after the update of `_gather`'s records: the grouped record's flat values and
        counters into each of its members (`Layout.scatter`), and a version bump of every parameter (its
        array changed in place: autograd must see it)."""
        for rec in records:
            lay = rec.layout
            if lay is None:
                bump_version(rec.param)
            else:
                lay.scatter()

    def _init_state(self, state: dict, a, group: dict[str, Any], buffers: tuple[str, ...]) -> None:
        """Fill a parameter's empty `state`: the `_counters` (0-d tensors), then a buffer of zeros
        shaped like its array `a` for each name in `buffers`."""
        for name, value in self._counters.items():
            state[name] = scalar_state(value)
        if buffers:
            xp = array_module(a)
            with on(device_of(a)):  # CuPy allocates on the current device, not on `a`'s
                for name in buffers:
                    state[name] = make(xp.zeros_like(a))

    def _scratch(self, a) -> tuple:
        """`_n_scratch` temporary arrays shaped like `a`: views of one flat pool per dtype, sized by
        the largest parameter, so that updates write their temporaries without allocating. There is a
        pool per device: a device array's key has its device."""
        key = (type(a), a.dtype, a.shape) if type(a) is np.ndarray else (type(a), a.dtype, a.shape, device_of(a))
        views = self._views.get(key)
        if views is None:
            n, k = a.size, self._n_scratch
            pool_key = key[:2] + key[3:]
            pool = self._pools.get(pool_key)
            if pool is None or pool.size < k * n:
                dev = device_of(a)
                largest = max((p._data.size for g in self.param_groups for p in g["params"]
                               if type(p._data) is type(a) and p._data.dtype == a.dtype
                               and device_of(p._data) == dev), default=n)
                with on(dev):
                    pool = array_module(a).empty((k * max(n, largest),), a.dtype)
                self._pools[pool_key] = pool
                self._views, self._scratch_of = {}, {}  # views of the old pool would keep it alive
            views = tuple(pool[i * n:(i + 1) * n].reshape(a.shape) for i in range(k))
            self._views[key] = views
        return views

    # ------------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """`{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}` as in PyTorch:
        parameters are numbered in group order; state tensors are the live buffers (not copies)."""
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {index[id(k)] if isinstance(k, Tensor) else k: dict(v) for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and state saved by `state_dict()` (of an optimizer over parameters of the
        same shapes, in the same order). State buffers are copied to their parameter's device (as
        PyTorch does: a checkpoint saved on CUDA loads into a CPU optimizer and back) and cast to its
        dtype; the 0-d counters ('step', ...) stay in host memory, where the update reads them."""
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise ValueError(f"{type(self).__name__}.load_state_dict: not an optimizer state dict "
                                 f"(missing key {key!r})")
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            p = id_map.get(k)
            if p is None:  # state of no parameter of this optimizer: kept as it is, as PyTorch does
                state[k] = v
            else:
                state[p] = {key: _load_value(p, k, key, val) for key, val in v.items()}
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            for name, default in self.defaults.items():  # options newer than the saved dict
                s.setdefault(name, default)
        self.state = state
        self.param_groups = saved_groups

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pools, self._views, self._layouts, self._scratch_of = {}, {}, {}, {}

    def __repr__(self) -> str:
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for k in sorted(g):
                if k != "params":
                    s += f"    {k}: {g[k]}\n"
        return s + ")"


# ---------------------------------------------------------------------- helpers for the algorithms
def _typename(x) -> str:
    return f"ember.{type(x).__name__}" if isinstance(x, Tensor) else type(x).__name__


def _load_value(p: Tensor, index, key, value):
    """A copy of one loaded state entry: buffers shaped like `p` get p's dtype and device;
    0-d scalars (step counters) keep their dtype and go to the host, where the update reads them
    as Python numbers (`.item()` on a device array would synchronise every step); a plain-number
    step becomes a 0-d tensor."""
    if isinstance(value, np.ndarray):
        value = make(value)
    if isinstance(value, Tensor):
        arr = value._data
        if arr.ndim == 0:
            return make(to_host(arr).copy())
        if arr.shape != p._data.shape:
            raise ValueError(f"loaded state {key!r} of parameter {index} has shape {tuple(arr.shape)}, but the "
                             f"parameter has shape {tuple(p._data.shape)}")
        dev = device_of(p._data)
        moved = transfer(arr, dev)
        dtype = p._data.dtype if dt.is_float(p._data.dtype) else arr.dtype
        if moved is not arr and moved.dtype == dtype:
            return make(moved)  # already a fresh copy
        with on(dev):
            return make(moved.astype(dtype, copy=True))
    if key == "step" and isinstance(value, numbers.Real):
        return scalar_state(float(value))
    return copy.deepcopy(value)


def scalar_state(v: float) -> Tensor:
    """A 0-d tensor for counters such as 'step', float32 unless the default dtype is float64 (as PyTorch)."""
    return make(np.array(v, np.float64 if dt.NP_DEFAULT_FLOAT == np.float64 else np.float32))


def _grad(g, a, maximize: bool, weight_decay: float, l1: float, out, tmp):
    """The gradient an update uses: (-grad if maximize else grad) + weight_decay·p + l1·sign(p).

    Returns `g` itself when nothing is added; otherwise writes into `out` (`tmp` is clobbered).
    """
    if not (maximize or weight_decay or l1):
        return g
    if weight_decay:
        np.multiply(a, weight_decay, out=out)
        (np.subtract if maximize else np.add)(out, g, out=out)
    elif maximize:
        np.negative(g, out=out)
    else:
        out[...] = g
    if l1:
        np.sign(a, out=tmp)
        tmp *= l1
        out += tmp
    return out


def _refuse_sparse(opt: Optimizer, group: dict[str, Any]) -> None:
    """PyTorch's error for a sparse gradient given to an optimizer whose update needs dense ones."""
    for p in group["params"]:
        if p._grad.__class__ is SparseTensor:
            raise RuntimeError(f"{type(opt).__name__} does not support sparse gradients, please consider SparseAdam "
                               f"instead")


def _check_number(opt: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, Tensor) and value.numel() == 1:
            return
        raise TypeError(f"{opt}: {name} must be a number, got {type(value).__name__} ({value!r})")


_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_nonneg(opt: str, options: dict[str, Any], *names: str) -> None:
    """PyTorch's 'Invalid ... value' ValueError for each option below zero (NaN included)."""
    for name in names:
        if name in options and options[name] is not required:
            v = options[name]
            _check_number(opt, name, v)
            if not 0.0 <= v:
                raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {v}")


def _check_betas(opt: str, betas) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{opt}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        _check_number(opt, f"betas[{i}]", b)
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
