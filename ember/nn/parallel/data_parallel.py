"""DataParallel: one process, one model, the batch split over several CUDA devices (PyTorch's
`torch.nn.DataParallel`).

Each forward pass, as PyTorch documents it:
- scatter: every tensor argument is split into chunks along `dim` (as `Tensor.chunk`: ⌈n/devices⌉ each,
  so a small batch uses fewer devices), chunk i copied to device_ids[i]; other arguments are passed to
  every replica as they are;
- replicate: the module is copied onto each of those devices: device_ids[0] (where the module must live)
  runs the module's own parameters and buffers, the others differentiable copies of them (so backward
  sums every replica's gradient into the original parameters' `.grad`); buffers are copied without
  gradient, so updates of running statistics made on the other devices are lost (only device_ids[0]'s
  chunk updates the module's BatchNorm statistics, as in PyTorch);
- parallel_apply: each replica runs on its chunk with its device current — one after the other (CuPy
  launches are asynchronous, so the devices still overlap their work);
- gather: the outputs (tensors, or tuples/lists/dicts of them) are concatenated along `dim` on
  `output_device` (-1: the CPU).

Without CUDA, the module is just called (as PyTorch on a machine without GPUs), and with one device it
is moved there and called on the inputs moved there. The wrapped module is `.module`, so state dict keys
get the prefix `module.`.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from itertools import chain
from typing import Any, Sequence

from ... import backend
from ... import cuda
from ..._tensor import Tensor
from ...autograd.grad_mode import is_grad_enabled
from ...ops.shape import cat
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel", "replicate", "scatter", "scatter_kwargs", "gather", "parallel_apply"]


def _device_index(d, what: str = "device_ids") -> int:
    """A CUDA device index from an int, 'cuda:N', a device (or 'cuda': the current one); -1 for the CPU."""
    if isinstance(d, (str, backend.device)):
        dev = backend.device(d)
        if dev.type == "cpu":
            return -1
        d = backend.resolve(dev).index if dev.index is None else dev.index
    elif not isinstance(d, int) or isinstance(d, bool):
        raise TypeError(f"DataParallel: {what} must hold device indices, 'cuda:N' strings or devices, "
                        f"got {type(d).__name__}")
    if d != -1 and not 0 <= d < cuda.device_count():
        raise RuntimeError(f"DataParallel: {what} has device {d}, but there are {cuda.device_count()} CUDA "
                           f"devices (valid: 0 to {cuda.device_count() - 1})")
    return d


def _where(index: int) -> backend.device:
    return backend.device("cpu") if index == -1 else backend.device("cuda", index)


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def scatter(inputs: Any, target_gpus: Sequence, dim: int = 0) -> list:
    """Split `inputs` over the devices: a tensor into chunks along `dim` (one per device, fewer when it is
    short), each copied to its device (differentiably); tuples, lists and dicts element by element (one
    per device); anything else given to every device as it is."""
    devices = [_where(_device_index(d)) for d in target_gpus]

    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return tuple(c.to(dev) for c, dev in zip(obj.chunk(len(devices), dim), devices))
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in devices]

    return scatter_map(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_gpus: Sequence, dim: int = 0) -> tuple[tuple, tuple]:
    """`scatter` of the positional and keyword arguments, padded with () or {} to the same number of devices."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs: Sequence, target_device, dim: int = 0) -> Any:
    """The replicas' outputs joined on `target_device` (an index, -1 for the CPU): tensors concatenated along
    `dim` (differentiably; 0-d ones stacked into a vector, with PyTorch's warning), None kept, dicts, tuples
    and lists joined element by element."""
    where = _where(_device_index(target_device, "output_device"))

    def gather_map(outs):
        out = outs[0]
        if isinstance(out, Tensor):
            if all(o.ndim == 0 for o in outs):
                warnings.warn(f"Was asked to gather along dimension {dim}, but all input tensors were scalars; "
                              f"will instead unsqueeze and return a vector.", UserWarning, stacklevel=2)
                outs = [o.reshape(1) for o in outs]
            return cat([o.to(where) for o in outs], dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outs])) for k in out)
        if _is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outs)))
        return type(out)(map(gather_map, zip(*outs)))

    return gather_map(outputs)


def replicate(network: Module, devices: Sequence, detach: bool = False) -> list[Module]:
    """A copy of `network` per device: shallow copies of every submodule whose parameters and buffers are
    those of `network` on its own device and differentiable copies (`detach=True`: plain copies) on the
    others; buffers that do not require grad are copied without gradient. Shared submodules and
    parameters stay shared within each replica."""
    indices = [_device_index(d, "devices") for d in devices]
    params = list(network.parameters())
    buffers = list(network.buffers())

    def copy_to(t: Tensor, where: backend.device, keep_graph: bool) -> Tensor:
        if t.device == where:  # the network's own tensor (as PyTorch's broadcast gives the source device)
            return t if keep_graph else t.detach()
        return t.to(where) if keep_graph else t.detach().to(where)

    modules = list(network.modules())
    replicas = []
    for index in indices:
        where = _where(index)
        copies = {id(p): copy_to(p, where, not detach) for p in params}
        copies.update({id(b): copy_to(b, where, b.requires_grad and not detach) for b in buffers})
        memo = {}
        for m in modules:
            r = m.__class__.__new__(m.__class__)
            r.__dict__ = m.__dict__.copy()
            memo[id(m)] = r
        for m in modules:
            d = memo[id(m)].__dict__
            d["_modules"] = OrderedDict((k, None if c is None else memo[id(c)]) for k, c in m._modules.items())
            d["_parameters"] = OrderedDict((k, None if p is None else copies[id(p)]) for k, p in m._parameters.items())
            d["_buffers"] = OrderedDict((k, None if b is None else copies[id(b)]) for k, b in m._buffers.items())
        replicas.append(memo[id(network)])
    return replicas


def parallel_apply(modules: Sequence[Module], inputs: Sequence, kwargs_tup: Sequence | None = None,
                   devices: Sequence | None = None) -> list:
    """Call modules[i](*inputs[i], **kwargs_tup[i]) with devices[i] current (default: the device of the
    first tensor in inputs[i]); returns the outputs in order. An exception says which replica raised it."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs {len(inputs)}")
    if kwargs_tup is None:
        kwargs_tup = ({},) * len(modules)
    elif len(modules) != len(kwargs_tup):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of kwargs "
                             f"{len(kwargs_tup)}")
    if devices is None:
        devices = [next((t.device for t in _tensors(inp)), None) for inp in inputs]
    elif len(modules) != len(devices):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of devices "
                             f"{len(devices)}")
    outputs = []
    for i, (module, inp, kw, dev) in enumerate(zip(modules, inputs, kwargs_tup, devices)):
        if not isinstance(inp, (list, tuple)):
            inp = (inp,)
        index = None if dev is None else _device_index(dev)
        try:
            with cuda.device(None if index in (None, -1) else index):
                outputs.append(module(*inp, **kw))
        except Exception as e:
            e.add_note(f"(raised in replica {i} on device {_where(index) if index is not None else 'unknown'})")
            raise
    return outputs


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


class DataParallel(Module):
    """Run `module` on several CUDA devices at once, each on a part of the batch (see the module docstring):
    `device_ids` (default: all devices), `output_device` where the output is gathered (default
    device_ids[0]; -1: the CPU), `dim` the batch dimension. The module's parameters and buffers must be on
    device_ids[0]. Without CUDA it calls the module unchanged. For several machines or processes, prefer
    `DistributedDataParallel`."""

    def __init__(self, module: Module, device_ids: Sequence | None = None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel expects an ember.nn.Module, got {type(module).__name__}")
        if not cuda.is_available():  # as PyTorch without GPUs: a transparent wrapper
            self.module = module
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = list(range(cuda.device_count()))
        device_ids = list(device_ids)
        if not device_ids:
            raise RuntimeError("DataParallel: device_ids is empty; give at least one CUDA device (or None for all)")
        if output_device is None:
            output_device = device_ids[0]
        self.dim = dim
        self.module = module
        self.device_ids = [_device_index(x) for x in device_ids]
        if -1 in self.device_ids:
            raise ValueError("DataParallel: device_ids must be CUDA devices (the CPU is only a possible output_device)")
        self.output_device = _device_index(output_device, "output_device")
        self.src_device_obj = backend.device("cuda", self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on(self.module, self.src_device_obj)
        inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
        if not inputs and not module_kwargs:  # no arguments at all: one call, on the first device
            inputs, module_kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **module_kwargs[0])
        replicas = self.replicate(self.module, self.device_ids[:len(inputs)])
        outputs = self.parallel_apply(replicas, inputs, module_kwargs)
        return self.gather(outputs, self.output_device)

    def replicate(self, module: Module, device_ids: Sequence) -> list[Module]:
        return replicate(module, device_ids, not is_grad_enabled())

    def scatter(self, inputs: tuple, kwargs: dict | None, device_ids: Sequence) -> tuple[tuple, tuple]:
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def parallel_apply(self, replicas: Sequence[Module], inputs: Sequence, kwargs: Sequence) -> list:
        return parallel_apply(replicas, inputs, kwargs, self.device_ids[:len(replicas)])

    def gather(self, outputs: Sequence, output_device) -> Any:
        return gather(outputs, output_device, dim=self.dim)


def data_parallel(module: Module, inputs: Any, device_ids: Sequence | None = None, output_device=None, dim: int = 0,
                  module_kwargs: dict | None = None) -> Any:
    """The functional form of `DataParallel`: one call of `module` on `inputs` (a tensor or a tuple) split over
    `device_ids` (default: all CUDA devices) and gathered on `output_device`. Needs CUDA."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    if not cuda.is_available():
        raise RuntimeError("device type could not be determined (data_parallel needs CUDA devices)")
    device_ids = [_device_index(x) for x in (range(cuda.device_count()) if device_ids is None else device_ids)]
    output_device = _device_index(device_ids[0] if output_device is None else output_device, "output_device")
    _check_on(module, backend.device("cuda", device_ids[0]))
    inputs, module_kwargs = scatter_kwargs(inputs, module_kwargs, device_ids, dim)
    if not inputs and not module_kwargs:
        inputs, module_kwargs = ((),), ({},)
    if len(device_ids) == 1:
        return module(*inputs[0], **module_kwargs[0])
    used = device_ids[:len(inputs)]
    return gather(parallel_apply(replicate(module, used), inputs, module_kwargs, used), output_device, dim)


def _check_on(module: Module, src: backend.device) -> None:
    for t in chain(module.parameters(), module.buffers()):
        if t.device != src:
            raise RuntimeError(f"module must have its parameters and buffers on device {src} (device_ids[0]) but "
                               f"found one of them on device: {t.device}")
