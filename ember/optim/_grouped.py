"""The grouped update: a param group's small parameters updated as one flat array.

An update costs about a dozen NumPy calls per parameter, ~1 µs each whatever the size, so a model
with many small tensors (biases, norm weights, narrow layers) spends its optimizer step in call
overhead: 28 parameters of a ResMLP take ~310 µs per Adam step, the same arithmetic on one flat
array ~165 µs. So the small parameters (≤ `GROUP_MAX` elements, one dtype) of a group keep their
state buffers as slices of flat arrays, and the algorithm's per-parameter body runs once, on:

    a  the members' values gathered into one flat array (one `concatenate`), written back after;
    d  their gradients gathered likewise;
    state  the flat buffers, and 0-d counters that are written back to every member's.

`Optimizer._gather` calls `gather` and hands the body these as one grouped `ParamUpdate` record;
`Optimizer._scatter` calls `scatter` after the body, also when the body raised (the flat state
buffers are the members' state, so only the write-back keeps their values and counters in step).

The arithmetic is element for element the per-parameter one, so results are bit-identical. Each
member's state tensors stay what `state_dict()` returns; their arrays are views of the flat
buffers. The layout is checked at every step (the same parameters, all with gradients, their state
tensors still those views, equal counters) and otherwise dropped: that step runs per parameter, and
the next rebuilds it from the per-parameter state, so nothing a user does to the state is lost.

Members share one device (the flat arrays live there; on CUDA the saving is a dozen kernel launches
per parameter); the 0-d counters stay in host memory, as the per-parameter ones do.
"""
from __future__ import annotations

import numpy as np

from .._tensor import bump_version, make
from ..backend import array_module, device_of, on
from .. import _dtype as dt

__all__ = ["GROUP_MAX", "Layout"]

GROUP_MAX = 1 << 15  # elements; above this the per-call overhead is a small part of a parameter's update


class Layout:
    """Flat state buffers for the small members of one param group (see the module docstring)."""

    __slots__ = ("members", "ids", "shapes", "params", "state", "bufs", "counters", "checks", "a", "d", "a_views",
                 "scratch", "entry", "xp")

    def __init__(self, members: list, states, buffers: tuple[str, ...], counters: tuple[str, ...],
                 n_scratch: int, params: list) -> None:
        """Lay out `members` (their state initialised, counters equal: see `build`)."""
        first = members[0]._data
        dtype = first.dtype
        xp = array_module(first)
        with on(device_of(first)):  # CuPy allocates on the current device
            self._allocate(xp, members, states, buffers, counters, n_scratch, params, dtype)

    def _allocate(self, xp, members: list, states, buffers: tuple[str, ...], counters: tuple[str, ...],
                  n_scratch: int, params: list, dtype) -> None:
        sizes = [p._data.size for p in members]
        bounds = np.cumsum([0] + sizes)
        n = int(bounds[-1])
        self.xp = xp
        self.members, self.params, self.state = members, params, states
        self.ids = {id(p) for p in members}
        self.shapes = [p._data.shape for p in members]
        self.bufs = {}
        self.checks = []  # (state dict, name, tensor, view) per member and name: what `valid` checks
        for name in buffers:
            flat = xp.empty(n, dtype)
            for p, lo, hi, shape in zip(members, bounds[:-1], bounds[1:], self.shapes):
                t = states[p][name]
                view = flat[lo:hi].reshape(shape)
                view[...] = t._data
                t._data = view  # the member's own tensor now lives in the flat buffer
                self.checks.append((states[p], name, t, view))
            self.bufs[name] = flat
        self.counters = {}
        for name in counters:
            t0 = states[members[0]][name]._data
            flat = np.empty(len(members), t0.dtype)
            for i, p in enumerate(members):
                t = states[p][name]
                view = flat[i:i + 1].reshape(())
                view[()] = t._data
                t._data = view
                self.checks.append((states[p], name, t, view))
            self.counters[name] = flat
        self.a, self.d = xp.empty(n, dtype), xp.empty(n, dtype)
        self.a_views = [self.a[lo:hi].reshape(s) for lo, hi, s in zip(bounds[:-1], bounds[1:], self.shapes)]
        self.scratch = tuple(xp.empty(n, dtype) for _ in range(n_scratch))
        # what the algorithm's body sees as `state`: the flat buffers and 0-d counters
        self.entry = {name: make(flat) for name, flat in self.bufs.items()}
        self.entry.update({name: make(flat[:1].reshape(()).copy()) for name, flat in self.counters.items()})

    @classmethod
    def build(cls, opt, group: dict, buffers: tuple[str, ...]) -> "Layout | None":
        """A layout of `group`'s small parameters, initialising their state as `opt` would; None when there
        are fewer than two, when one of them has no gradient, or when their counters differ."""
        params = group["params"]
        members = [p for p in params if p._data.size <= GROUP_MAX and dt.is_float(p._data.dtype)]
        if members:  # those of the first one's array type (device) and dtype
            first = members[0]._data
            kind, dtype, dev = type(first), first.dtype, device_of(first)
            members = [p for p in members if type(p._data) is kind and p._data.dtype == dtype
                       and (kind is np.ndarray or device_of(p._data) == dev)]
        if len(members) < 2 or any(p.grad is None for p in members):
            return None
        states, counters = opt.state, tuple(opt._counters)
        for p in members:
            if not states[p]:
                opt._init_state(states[p], p._data, group, buffers)
        for name in counters:
            values = {_counter(states[p].get(name)) for p in members}
            if len(values) != 1 or None in values:
                return None
        for p in members:
            st = states[p]
            for name in buffers:
                t = st.get(name)
                if t is None or type(t._data) is not kind or t._data.shape != p._data.shape or (
                        kind is not np.ndarray and device_of(t._data) != dev):
                    return None  # left to the per-parameter path, which reports what is wrong
        return cls(members, states, buffers, counters, opt._n_scratch, params)

    def valid(self, opt, group: dict) -> bool:
        """Whether this layout still describes `group`: same parameters and state, every member with a gradient."""
        if opt.state is not self.state or group["params"] is not self.params:
            return False
        for p, shape in zip(self.members, self.shapes):
            if p.grad is None or p._data.shape != shape:
                return False
        for st, name, t, view in self.checks:
            if st.get(name) is not t or t._data is not view:
                return False
        return True

    def gather(self) -> None:
        """Members' values and gradients into the flat `a` and `d`; the counters of the body's `state` from the members'."""
        xp = self.xp
        xp.concatenate([p._data.reshape(-1) for p in self.members], out=self.a)
        xp.concatenate([p.grad._data.reshape(-1) for p in self.members], out=self.d)
        for name, flat in self.counters.items():
            self.entry[name]._data[()] = flat[0]

    def scatter(self) -> None:
        """The updated values back into each member (a change of its version), the body's counters to every member."""
        for p, v in zip(self.members, self.a_views):
            p._data[...] = v
            bump_version(p)
        for name, flat in self.counters.items():
            flat[...] = self.entry[name]._data


def _counter(t):
    """A 0-d counter's value, or None when it is not one."""
    if t is None or getattr(t, "_data", None) is None or getattr(t._data, "ndim", None) != 0:
        return None
    return t._data.item()
