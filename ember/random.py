"""`ember.random`: the default generator's seeding and state (PyTorch's `torch.random`), and `fork_rng`."""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterable, Iterator

from ._creation import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices: Iterable | None = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Run the block with the random state forked: the CPU generator's state (and that of the CUDA devices
    `devices`, all visible ones by default) is saved on entry and restored on exit, so the draws after the block
    are those that would have come without it."""
    if not enabled:
        yield
        return
    if device_type != "cuda":
        raise RuntimeError(f"fork_rng(): ember's only accelerator is CUDA, got device_type={device_type!r}")
    from . import cuda
    if devices is None:
        devices = range(cuda.device_count()) if cuda.is_available() else []
        if len(devices) > 1:
            warnings.warn(f"fork_rng(): forking the random state of all {len(devices)} CUDA devices; pass devices= "
                          f"to fork only those used", UserWarning, stacklevel=3)
    devices = list(devices)
    cpu_state = get_rng_state()
    cuda_states = [cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for d, s in zip(devices, cuda_states):
            cuda.set_rng_state(s, d)
