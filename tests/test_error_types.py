"""PyTorch's exception types (issue 19, section 4): conversions, checked attributes and subsystems
used before they are set up must raise the type PyTorch raises, so user code that catches
PyTorch's type catches ember's, and ember's message must name the culprit (the op or argument and
the offending value).

Every case is written once as `fn(t)` with `t` the framework module, so the very same code runs on
`ember` (type and message checked) and, where installed, on `torch` (type checked): the torch run is
the oracle that the expected type is PyTorch's (2.13) and not a guess. `ACCEPTS` holds the look-alike
mistakes PyTorch accepts: ember must accept them too, with the same result. `DIFFERS` holds the few
places where ember deliberately raises something other than what PyTorch does, each with the reason.
"""
from __future__ import annotations

import math
import operator
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import ember
import ember.distributed
from helpers import raises_like_torch, requires_torch, torch


@dataclass(frozen=True)
class Case:
    """`fn(t)` makes the mistake with framework `t`; ember raises `exc` with a message matching `match`
    (a case-insensitive regex); PyTorch raises `torch_exc` ("same": `exc`)."""
    fn: Callable[[Any], Any]
    exc: type[BaseException]
    match: str
    torch_exc: type[BaseException] | str = "same"


# --------------------------------------------------------------------------------------------
# Set-ups shared by several cases.
# --------------------------------------------------------------------------------------------

def _leaf(t):
    return t.ones(3, requires_grad=True)


def _nonleaf(t):
    return t.ones(3, requires_grad=True) * 2


def _set(obj, name: str, value) -> None:
    setattr(obj, name, value)


def _no_gpu(t) -> None:
    """The CUDA cases are about a machine without a GPU (or a CPU-only build)."""
    if t.cuda.is_available():
        pytest.skip("a GPU is available here")


def _no_group(t) -> None:
    if t.distributed.is_initialized():
        pytest.skip("a process group is initialized in this process")


def _without_gpu(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda t: (_no_gpu(t), call(t))[1]


def _without_group(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda t: (_no_group(t), call(t))[1]


def _net(t):
    """A module with a child `fc`."""
    net = t.nn.Module()
    net.fc = t.nn.Linear(2, 2)
    return net


def _sgd(t):
    return t.optim.SGD(t.nn.Linear(2, 2).parameters(), lr=0.1)


def _loader(t, **kw):
    return t.utils.data.DataLoader(list(range(4)), **kw)


def _batches(t):
    return t.utils.data.BatchSampler(t.utils.data.SequentialSampler(range(4)), 2, False)


def _one_cycle_overstep(t):
    s = t.optim.lr_scheduler.OneCycleLR(_sgd(t), max_lr=0.1, total_steps=2)
    for _ in range(3):
        s.step()


# --------------------------------------------------------------------------------------------
# Mistakes that must raise PyTorch's type. Ids describe the mistake.
# --------------------------------------------------------------------------------------------

CASES: dict[str, Case] = {
    # ---- Python conversions of a tensor that is not one element
    "float() of a 3-element tensor": Case(lambda t: float(t.zeros(3)), ValueError, r"only one element tensors.*float\(\).*\[3\]"),
    "int() of a 3-element tensor": Case(lambda t: int(t.zeros(3)), ValueError, r"only one element tensors.*int\(\).*\[3\]"),
    "complex() of a 3-element tensor": Case(lambda t: complex(t.zeros(3)), ValueError, r"only one element tensors.*complex\(\).*\[3\]"),
    "float() of an empty tensor": Case(lambda t: float(t.zeros(0)), ValueError, r"only one element tensors.*\[0\]"),
    "math.floor() of a (2, 2) tensor": Case(lambda t: math.floor(t.zeros(2, 2)), ValueError, r"only one element tensors.*\[2, 2\]"),
    "bool() of a 3-element tensor": Case(lambda t: bool(t.zeros(3)), RuntimeError, r"more than one value is ambiguous.*\[3\]"),
    "bool() of an empty tensor": Case(lambda t: bool(t.zeros(0)), RuntimeError, r"no value.* is ambiguous.*\[0\]"),
    "item() of a 3-element tensor": Case(lambda t: t.zeros(3).item(), RuntimeError, r"3 elements cannot be converted to Scalar"),
    "item() of an empty tensor": Case(lambda t: t.zeros(0).item(), RuntimeError, r"0 elements cannot be converted to Scalar"),
    "operator.index() of a 3-element int tensor":
        Case(lambda t: operator.index(t.zeros(3, dtype=t.int64)), TypeError, r"single element.*index.*int64.*\(3,\)"),
    "operator.index() of a float tensor": Case(lambda t: operator.index(t.tensor(1.0)), TypeError, r"only integer tensors.*float32"),
    "a float tensor as a list index": Case(lambda t: [1, 2, 3][t.tensor(1.0)], TypeError, r"only integer tensors.*float32"),
    "range() of a float tensor": Case(lambda t: range(t.tensor(3.0)), TypeError, r"only integer tensors.*float32"),
    "len() of a 0-d tensor": Case(lambda t: len(t.tensor(1.0)), TypeError, r"len\(\) of a 0-d tensor"),
    "iterating a 0-d tensor": Case(lambda t: iter(t.tensor(1.0)), TypeError, r"iteration over a 0-d tensor"),
    "format spec on a 3-element tensor": Case(lambda t: format(t.zeros(3), ".2f"), TypeError, r"format string '\.2f'.*\[3\]"),

    # ---- requires_grad_ / retain_grad / backward arguments
    "requires_grad_('yes')": Case(lambda t: t.ones(3).requires_grad_("yes"), TypeError, r"requires_grad_\(\).*must be bool, not str"),
    "requires_grad_(1)": Case(lambda t: t.ones(3).requires_grad_(1), TypeError, r"requires_grad_\(\).*must be bool, not int"),
    "requires_grad_(None)": Case(lambda t: t.ones(3).requires_grad_(None), TypeError, r"must be bool, not NoneType"),
    "requires_grad_(numpy bool)": Case(lambda t: t.ones(3).requires_grad_(np.bool_(True)), TypeError, r"must be bool, not numpy\.bool"),
    "requires_grad_() on a bool tensor": Case(lambda t: t.zeros(3, dtype=t.bool).requires_grad_(), RuntimeError, r"floating point.*require gradients.*bool"),
    "requires_grad_(False) on a non-leaf": Case(lambda t: _nonleaf(t).requires_grad_(False), RuntimeError, r"only change requires_grad flags of leaf variables"),
    "zeros(int64, requires_grad=True)": Case(lambda t: t.zeros(3, dtype=t.int64, requires_grad=True), RuntimeError, r"floating point.*require gradients.*int64"),
    "retain_grad() on a tensor without requires_grad": Case(lambda t: t.zeros(3).retain_grad(), RuntimeError, r"retain_grad.*requires_grad=False"),
    "backward(gradient=list)": Case(lambda t: _nonleaf(t).backward([1.0, 1.0, 1.0]), TypeError, r"gradients can be either Tensors or None.*list.*\[3\]"),
    "backward(gradient=ndarray)": Case(lambda t: _nonleaf(t).backward(np.ones(3, np.float32)), TypeError, r"gradients can be either Tensors or None.*ndarray"),
    "backward(gradient=2.0) on a scalar": Case(lambda t: _nonleaf(t).sum().backward(2.0), TypeError, r"gradients can be either Tensors or None.*float"),
    "autograd.backward with a list gradient": Case(lambda t: t.autograd.backward([_nonleaf(t)], [[1.0, 1.0, 1.0]]), TypeError, r"gradients can be either Tensors or None.*list"),
    "autograd.grad(grad_outputs=ndarray)":
        Case(lambda t: (lambda x: t.autograd.grad(x * 2, x, grad_outputs=np.ones(3, np.float32)))(_leaf(t)), TypeError, r"ndarray"),

    # ---- checked attributes: .grad and .requires_grad setters
    "x.grad = tensor of 5 elements on 3": Case(lambda t: _set(_leaf(t), "grad", t.zeros(5)), RuntimeError, r"gradient of size '\[5\]'.*size '\[3\]'"),
    "x.grad = (3, 2) tensor on (2, 3)":
        Case(lambda t: _set(t.ones(2, 3, requires_grad=True), "grad", t.zeros(3, 2)), RuntimeError, r"gradient of size '\[3, 2\]'.*size '\[2, 3\]'"),
    "x.grad = 0-d tensor on shape [1]": Case(lambda t: _set(t.ones(1, requires_grad=True), "grad", t.zeros(())), RuntimeError, r"size '\[\]'.*size '\[1\]'"),
    "x.grad = float64 on float32": Case(lambda t: _set(_leaf(t), "grad", t.zeros(3, dtype=t.float64)), RuntimeError, r"dtype.*float64.*float32"),
    "x.grad = int64 on float32": Case(lambda t: _set(_leaf(t), "grad", t.zeros(3, dtype=t.int64)), RuntimeError, r"dtype.*int64.*float32"),
    "x.grad = float32 on an int64 tensor": Case(lambda t: _set(t.zeros(3, dtype=t.int64), "grad", t.zeros(3)), RuntimeError, r"dtype.*float32.*int64"),
    "x.grad = list": Case(lambda t: _set(_leaf(t), "grad", [0.0, 0.0, 0.0]), TypeError, r"Tensor or None but got grad of type list"),
    "x.grad = ndarray": Case(lambda t: _set(_leaf(t), "grad", np.zeros(3, np.float32)), TypeError, r"Tensor or None but got grad of type numpy\.ndarray"),
    "x.grad = x": Case(lambda t: (lambda x: _set(x, "grad", x))(_leaf(t)), RuntimeError, r"can't assign Variable as its own grad"),
    "non-leaf .requires_grad = False": Case(lambda t: _set(_nonleaf(t), "requires_grad", False), RuntimeError, r"only change requires_grad flags of leaf variables.*detach"),
    "non-leaf .requires_grad = True": Case(lambda t: _set(_nonleaf(t), "requires_grad", True), RuntimeError, r"only change requires_grad flags of leaf variables"),
    "int tensor .requires_grad = True": Case(lambda t: _set(t.zeros(3, dtype=t.int64), "requires_grad", True), RuntimeError, r"floating point.*require gradients.*int64"),
    "bool tensor .requires_grad = True": Case(lambda t: _set(t.zeros(3, dtype=t.bool), "requires_grad", True), RuntimeError, r"floating point.*require gradients.*bool"),
    ".requires_grad = 'yes'": Case(lambda t: _set(t.ones(3), "requires_grad", "yes"), RuntimeError, r"requires_grad must be a bool.*str"),
    ".requires_grad = 1": Case(lambda t: _set(t.ones(3), "requires_grad", 1), RuntimeError, r"requires_grad must be a bool.*int"),
    "del x.requires_grad": Case(lambda t: delattr(_leaf(t), "requires_grad"), RuntimeError, r"requires_grad"),
    "tensor.shape = ...": Case(lambda t: _set(t.zeros(3), "shape", (1, 3)), AttributeError, r"shape"),
    "tensor.grad_fn = None": Case(lambda t: _set(_nonleaf(t), "grad_fn", None), AttributeError, r"grad_fn"),
    "tensor.is_leaf = False": Case(lambda t: _set(t.zeros(3), "is_leaf", False), AttributeError, r"is_leaf"),
    "tensor.dtype = float64": Case(lambda t: _set(t.zeros(3), "dtype", t.float64), AttributeError, r"dtype"),

    # ---- ember.distributed before init_process_group (mpi4py not needed)
    "get_rank() before init_process_group": Case(_without_group(lambda t: t.distributed.get_rank()), ValueError, r"get_rank\(\).*Default process group has not been initialized.*init_process_group"),
    "get_world_size() before init_process_group": Case(_without_group(lambda t: t.distributed.get_world_size()), ValueError, r"get_world_size\(\).*not been initialized"),
    "get_backend() before init_process_group": Case(_without_group(lambda t: t.distributed.get_backend()), ValueError, r"get_backend\(\).*not been initialized"),
    "barrier() before init_process_group": Case(_without_group(lambda t: t.distributed.barrier()), ValueError, r"barrier\(\).*not been initialized"),
    "all_reduce() before init_process_group": Case(_without_group(lambda t: t.distributed.all_reduce(t.zeros(2))), ValueError, r"all_reduce\(\).*not been initialized"),
    "broadcast() before init_process_group": Case(_without_group(lambda t: t.distributed.broadcast(t.zeros(2), 0)), ValueError, r"broadcast\(\).*not been initialized"),
    "all_gather() before init_process_group":
        Case(_without_group(lambda t: t.distributed.all_gather([t.zeros(2)], t.zeros(2))), ValueError, r"all_gather\(\).*not been initialized"),
    "reduce_scatter() before init_process_group":
        Case(_without_group(lambda t: t.distributed.reduce_scatter(t.zeros(2), [t.zeros(2)])), ValueError, r"reduce_scatter\(\).*not been initialized"),
    "DistributedSampler() without num_replicas/rank before init":
        Case(_without_group(lambda t: t.utils.data.DistributedSampler(list(range(4)))), ValueError, r"DistributedSampler.*not been initialized.*num_replicas=None"),
    "DistributedSampler(num_replicas=2) without rank before init":
        Case(_without_group(lambda t: t.utils.data.DistributedSampler(list(range(4)), num_replicas=2)), ValueError, r"DistributedSampler.*rank=None"),
    "DistributedDataParallel() before init_process_group":
        Case(_without_group(lambda t: t.nn.parallel.DistributedDataParallel(t.nn.Linear(2, 2))), ValueError, r"not been initialized"),
    "DistributedSampler(rank=2) of 2 replicas": Case(lambda t: t.utils.data.DistributedSampler(list(range(4)), num_replicas=2, rank=2), ValueError, r"Invalid rank 2.*\[0, 1\]"),

    # ---- factories and device strings
    "zeros(requires_grad='yes')": Case(lambda t: t.zeros(2, requires_grad="yes"), TypeError, r"zeros\(\): argument 'requires_grad' must be bool, not str"),
    "tensor(requires_grad=1)": Case(lambda t: t.tensor([1.0], requires_grad=1), TypeError, r"tensor\(\): argument 'requires_grad' must be bool, not int"),
    "device('gpu')": Case(lambda t: t.device("gpu"), RuntimeError, r"gpu"),
    "device('cuda:x')": Case(lambda t: t.device("cuda:x"), RuntimeError, r"invalid device string.*cuda:x"),
    "device('cuda:-1')": Case(lambda t: t.device("cuda:-1"), RuntimeError, r"invalid device string.*cuda:-1"),
    "device('cuda:0', 1)": Case(lambda t: t.device("cuda:0", 1), RuntimeError, r"index"),
    "zeros(device='bogus')": Case(lambda t: t.zeros(2, device="bogus"), RuntimeError, r"bogus"),
    "x.to('bogus')": Case(lambda t: t.zeros(2).to("bogus"), RuntimeError, r"'bogus' is neither a device"),

    # ---- nn.Module attributes and registration
    "register_parameter with a dotted name": Case(lambda t: t.nn.Linear(2, 2).register_parameter("a.b", t.nn.Parameter(t.zeros(1))), KeyError, r"parameter name can\\?'t contain \"\.\", got: a\.b"),
    "register_parameter with an int name": Case(lambda t: t.nn.Linear(2, 2).register_parameter(3, t.nn.Parameter(t.zeros(1))), TypeError, r"parameter name should be a string. Got int"),
    "register_parameter over an attribute": Case(lambda t: t.nn.Linear(2, 2).register_parameter("training", t.nn.Parameter(t.zeros(1))), KeyError, r"attribute 'training' already exists"),
    "register_buffer with an empty name": Case(lambda t: t.nn.Linear(2, 2).register_buffer("", t.zeros(1)), KeyError, r"buffer name can\\?'t be empty"),
    "register_buffer over a parameter": Case(lambda t: t.nn.Linear(2, 2).register_buffer("weight", t.zeros(1)), KeyError, r"attribute 'weight' already exists"),
    "register_buffer with a list": Case(lambda t: t.nn.Linear(2, 2).register_buffer("b", [1, 2]), TypeError, r"cannot assign 'list' object to buffer 'b'"),
    "add_module with a dotted name": Case(lambda t: t.nn.Linear(2, 2).add_module("a.b", t.nn.Linear(2, 2)), KeyError, r"module name can\\?'t contain \"\.\", got: a\.b"),
    "add_module with a non-Module": Case(lambda t: t.nn.Linear(2, 2).add_module("m", 3), TypeError, r"int is not a Module subclass"),
    "assigning a plain tensor to a parameter attribute":
        Case(lambda t: _set(t.nn.Linear(2, 2), "weight", t.zeros(2, 2)), TypeError, r"as parameter 'weight'.*Parameter or None expected"),
    "assigning an int to a child-module attribute": Case(lambda t: _set(_net(t), "fc", 3), TypeError, r"cannot assign 'int' as child module 'fc'"),
    "assigning a list to a buffer attribute": Case(lambda t: _set(t.nn.BatchNorm1d(2), "running_mean", [1, 2]), TypeError, r"cannot assign 'list' as buffer 'running_mean'"),
    "Module.train('yes')": Case(lambda t: t.nn.Linear(2, 2).train("yes"), ValueError, r"training mode is expected to be boolean"),
    "Module.to(int64)": Case(lambda t: t.nn.Linear(2, 2).to(t.int64), TypeError, r"only accepts floating point.*int64"),
    "get_submodule of a parameter": Case(lambda t: _net(t).get_submodule("fc.weight"), AttributeError, r"`weight` is not an nn.Module.*Parameter"),
    "get_submodule of a missing name": Case(lambda t: _net(t).get_submodule("nope"), AttributeError, r"Module has no attribute `nope`"),
    "get_parameter of a module": Case(lambda t: _net(t).get_parameter("fc"), AttributeError, r"`fc` is not an nn.Parameter.*Linear"),
    "get_parameter of a missing name": Case(lambda t: _net(t).get_parameter("fc.nope"), AttributeError, r"Linear has no attribute `nope`"),
    "get_buffer of a missing name": Case(lambda t: _net(t).get_buffer("fc.nope"), AttributeError, r"Linear has no attribute `nope`"),
    "load_state_dict with an unexpected key":
        Case(lambda t: (lambda m: m.load_state_dict(dict(m.state_dict(), extra=t.zeros(1))))(t.nn.Linear(2, 2)), RuntimeError, r"Unexpected key\(s\) in state_dict: \"extra\""),
    "load_state_dict(strict=False) with a size mismatch":
        Case(lambda t: t.nn.Linear(2, 2).load_state_dict({"weight": t.zeros(3, 3), "bias": t.zeros(2)}, strict=False), RuntimeError, r"size mismatch for weight"),

    # ---- optimizers and schedulers
    "optimizer.step(closure=3)": Case(lambda t: _sgd(t).step(3), TypeError, r"'int' object is not callable"),
    "SGD(params=[1.0])": Case(lambda t: t.optim.SGD([1.0], lr=0.1), TypeError, r"can only optimize Tensors.*float"),
    "SGD(nesterov=True) without momentum": Case(lambda t: t.optim.SGD(t.nn.Linear(2, 2).parameters(), lr=0.1, nesterov=True), ValueError, r"Nesterov momentum requires a momentum"),
    "add_param_group of parameters already in a group":
        Case(lambda t: (lambda o: o.add_param_group({"params": o.param_groups[0]["params"]}))(_sgd(t)), ValueError, r"more than one parameter group"),
    "add_param_group(list)": Case(lambda t: _sgd(t).add_param_group([t.nn.Parameter(t.zeros(1))]), TypeError, r"param_group must be a dict.*list"),
    "StepLR(None)": Case(lambda t: t.optim.lr_scheduler.StepLR(None, step_size=1), TypeError, r"NoneType is not an Optimizer"),
    "ReduceLROnPlateau given a Module": Case(lambda t: t.optim.lr_scheduler.ReduceLROnPlateau(t.nn.Linear(2, 2)), TypeError, r"Linear is not an Optimizer"),
    "LambdaLR with 2 lambdas for 1 group":
        Case(lambda t: t.optim.lr_scheduler.LambdaLR(_sgd(t), [lambda e: 1.0, lambda e: 1.0]), ValueError, r"Expected 1 lr_lambdas, but got 2"),
    "ReduceLROnPlateau(mode='bad')": Case(lambda t: t.optim.lr_scheduler.ReduceLROnPlateau(_sgd(t), mode="bad"), ValueError, r"mode bad is unknown"),
    "OneCycleLR without total_steps": Case(lambda t: t.optim.lr_scheduler.OneCycleLR(_sgd(t), max_lr=0.1), ValueError, r"total_steps"),
    "OneCycleLR stepped past total_steps": Case(_one_cycle_overstep, ValueError, r"Tried to step 3 times.*total steps is 2"),

    # ---- data loading
    "DataLoader(batch_size=-1)": Case(lambda t: _loader(t, batch_size=-1), ValueError, r"batch_size should be a positive integer.*-1"),
    "DataLoader(batch_size=2.5)": Case(lambda t: _loader(t, batch_size=2.5), ValueError, r"batch_size should be a positive integer.*2\.5"),
    "DataLoader(timeout=-1)": Case(lambda t: _loader(t, timeout=-1), ValueError, r"timeout option should be non-negative"),
    "DataLoader(persistent_workers=True) without workers": Case(lambda t: _loader(t, persistent_workers=True), ValueError, r"persistent_workers option needs num_workers > 0"),
    "DataLoader(prefetch_factor=2) without workers": Case(lambda t: _loader(t, prefetch_factor=2), ValueError, r"prefetch_factor option could only be specified in multiprocessing"),
    "DataLoader(batch_size=None, drop_last=True)": Case(lambda t: _loader(t, batch_size=None, drop_last=True), ValueError, r"batch_size=None.*mutually exclusive with drop_last"),
    "DataLoader(batch_sampler=..., shuffle=True)": Case(lambda t: _loader(t, shuffle=True, batch_sampler=_batches(t)), ValueError, r"batch_sampler option is mutually exclusive"),
    "DataLoader(batch_sampler=..., drop_last=True)": Case(lambda t: _loader(t, drop_last=True, batch_sampler=_batches(t)), ValueError, r"batch_sampler option is mutually exclusive"),
    "setting DataLoader.batch_size after construction": Case(lambda t: _set(_loader(t), "batch_size", 3), ValueError, r"batch_size attribute should not be set after DataLoader is initialized"),
    "RandomSampler(num_samples=0)": Case(lambda t: t.utils.data.RandomSampler(range(4), num_samples=0), ValueError, r"num_samples should be a positive integer.*0"),
    "RandomSampler(replacement='y')": Case(lambda t: t.utils.data.RandomSampler(range(4), replacement="y"), TypeError, r"replacement should be a boolean.*y"),
    "BatchSampler(batch_size=0)": Case(lambda t: t.utils.data.BatchSampler(range(4), 0, False), ValueError, r"batch_size should be a positive integer.*0"),
    "BatchSampler(drop_last='y')": Case(lambda t: t.utils.data.BatchSampler(range(4), 2, "y"), ValueError, r"drop_last should be a boolean.*y"),
    "WeightedRandomSampler with 2-d weights": Case(lambda t: t.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2), ValueError, r"weights should be a 1d sequence.*\(1, 2\)"),

    # ---- CUDA queries without a GPU. A CPU-only PyTorch raises AssertionError("Torch not compiled with
    # CUDA enabled"), an accident of its build; ember raises the RuntimeError PyTorch raises on a CUDA
    # build without a usable GPU, saying why there is none (the oracle run pins the divergence).
    "cuda.current_device() without a GPU": Case(_without_gpu(lambda t: t.cuda.current_device()), RuntimeError, r"CUDA is not available", AssertionError),
    "cuda.get_device_name() without a GPU": Case(_without_gpu(lambda t: t.cuda.get_device_name()), RuntimeError, r"CUDA is not available", AssertionError),
    "cuda.synchronize() without a GPU": Case(_without_gpu(lambda t: t.cuda.synchronize()), RuntimeError, r"CUDA is not available", AssertionError),
    "cuda.init() without a GPU": Case(_without_gpu(lambda t: t.cuda.init()), RuntimeError, r"CUDA is not available", AssertionError),
    "cuda.initial_seed() without a GPU": Case(_without_gpu(lambda t: t.cuda.initial_seed()), RuntimeError, r"CUDA is not available", AssertionError),
    "cuda.get_rng_state() without a GPU": Case(_without_gpu(lambda t: t.cuda.get_rng_state()), RuntimeError, r"CUDA is not available", AssertionError),
    "zeros(device='cuda') without a GPU": Case(_without_gpu(lambda t: t.zeros(2, device="cuda")), RuntimeError, r"cuda is not available", AssertionError),
    "with cuda.device(0) without a GPU": Case(_without_gpu(lambda t: t.cuda.device(0).__enter__()), RuntimeError, r"CUDA is not available"),
    "pin_memory() without a GPU": Case(_without_gpu(lambda t: t.zeros(2).pin_memory()), RuntimeError, r"CUDA is not available"),

    # ---- checkpoints
    "save into a directory that does not exist": Case(lambda t: t.save({"a": t.zeros(1)}, "/nonexistent-ember-dir/a.pt"), RuntimeError, r"Parent directory /nonexistent-ember-dir does not exist"),
}

@pytest.mark.parametrize("name", list(CASES))
def test_ember_raises_pytorch_type(name: str) -> None:
    """ember raises PyTorch's type, and its message names the culprit (never a NumPy error)."""
    case = CASES[name]
    raises_like_torch(case.fn, ember, case.exc, case.match)


@requires_torch
@pytest.mark.parametrize("name", list(CASES))
def test_torch_raises_the_listed_type(name: str) -> None:
    """The oracle: PyTorch raises the listed type for the very same code."""
    case = CASES[name]
    raises_like_torch(case.fn, torch, case.exc if case.torch_exc == "same" else case.torch_exc)


# --------------------------------------------------------------------------------------------
# Look-alike mistakes that PyTorch accepts: ember must accept them too, with the same result.
# --------------------------------------------------------------------------------------------

def _grad_after(t, assign: Callable[[Any], None]):
    x = _leaf(t)
    assign(x)
    return None if x.grad is None else x.grad.tolist()


def _del_grad(t):
    x = _leaf(t)
    (x * x).sum().backward()
    del x.grad
    return x.grad


def _nonleaf_grad(t):
    y = _nonleaf(t)
    y.grad = t.ones(3)
    return y.grad.tolist()


ACCEPTS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "a one-element 1-d int tensor as a list index": (lambda t: [10, 20, 30][t.tensor([1])], 20),
    "a bool tensor as a list index": (lambda t: [10, 20][t.tensor(True)], 20),
    "range() of an int tensor": (lambda t: list(range(t.tensor(3))), [0, 1, 2]),
    "int() of a one-element float tensor truncates": (lambda t: int(t.tensor([2.7])), 2),
    "float() of a (1, 1) tensor": (lambda t: float(t.ones(1, 1)), 1.0),
    "float() of a tensor that requires grad": (lambda t: float(t.ones(1, requires_grad=True)), 1.0),
    "format spec on a 0-d tensor": (lambda t: format(t.tensor(1.5), ".2f"), "1.50"),
    "f-string of a 3-element tensor without a spec": (lambda t: f"{t.zeros(3)}".startswith("tensor("), True),
    "tolist() of a 0-d tensor": (lambda t: t.tensor(1.5).tolist(), 1.5),
    "requires_grad_(True) on a non-leaf is a no-op": (lambda t: _nonleaf(t).requires_grad_(True).requires_grad, True),
    "requires_grad_(False) on an int tensor": (lambda t: t.zeros(2, dtype=t.int64).requires_grad_(False).requires_grad, False),
    ".requires_grad = False on an int tensor": (lambda t: (lambda x: (_set(x, "requires_grad", False), x.requires_grad)[1])(t.zeros(2, dtype=t.int64)), False),
    "retain_grad() on a leaf": (lambda t: _leaf(t).retain_grad(), None),
    "x.grad = None": (lambda t: _grad_after(t, lambda x: _set(x, "grad", None)), None),
    "x.grad = tensor of x's shape and dtype": (lambda t: _grad_after(t, lambda x: _set(x, "grad", t.ones(3))), [1.0, 1.0, 1.0]),
    "x.grad = Parameter of x's shape": (lambda t: _grad_after(t, lambda x: _set(x, "grad", t.nn.Parameter(t.ones(3)))), [1.0, 1.0, 1.0]),
    "assigning .grad of a non-leaf": (_nonleaf_grad, [1.0, 1.0, 1.0]),
    "del x.grad leaves None": (_del_grad, None),
    "load_state_dict(strict=False) reports missing keys":
        (lambda t: tuple(map(list, t.nn.Linear(2, 2).load_state_dict({"weight": t.zeros(2, 2)}, strict=False))), (["bias"], [])),
    "optimizer.zero_grad() before any backward": (lambda t: _sgd(t).zero_grad(), None),
    "DistributedSampler with num_replicas and rank needs no process group":
        (lambda t: list(t.utils.data.DistributedSampler(list(range(4)), num_replicas=2, rank=1, shuffle=False)), [1, 3]),
    "distributed.is_initialized() before init": (lambda t: t.distributed.is_initialized(), False),
    "cuda.is_available() without a GPU": (_without_gpu(lambda t: t.cuda.is_available()), False),
    "cuda.device_count() without a GPU": (_without_gpu(lambda t: t.cuda.device_count()), 0),
    "cuda.memory_allocated() without a GPU": (_without_gpu(lambda t: t.cuda.memory_allocated()), 0),
    "cuda.memory_reserved() without a GPU": (_without_gpu(lambda t: t.cuda.memory_reserved()), 0),
    "cuda.manual_seed() without a GPU": (_without_gpu(lambda t: t.cuda.manual_seed(0)), None),
    "cuda.manual_seed_all() without a GPU": (_without_gpu(lambda t: t.cuda.manual_seed_all(0)), None),
    "cuda.empty_cache() without a GPU": (_without_gpu(lambda t: t.cuda.empty_cache()), None),
}


@pytest.mark.parametrize("lib", ["ember", pytest.param("torch", marks=requires_torch)])
@pytest.mark.parametrize("name", list(ACCEPTS))
def test_accepted_alike(name: str, lib: str) -> None:
    """ember and PyTorch both accept the look-alike, with the same result."""
    fn, want = ACCEPTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fn(ember if lib == "ember" else torch) == want


# --------------------------------------------------------------------------------------------
# Where ember deliberately raises something else than PyTorch; the torch run pins PyTorch's side,
# so a change in PyTorch shows up here.
# --------------------------------------------------------------------------------------------

def _save_object(t):
    with tempfile.TemporaryDirectory() as d:
        t.save(object(), os.path.join(d, "obj.pt"))


# (fn, ember's type, regex on ember's message, PyTorch's type or None where PyTorch accepts; why)
DIFFERS: dict[str, tuple[Callable[[Any], Any], type[BaseException], str, type[BaseException] | None]] = {
    # PyTorch's checks are `assert` statements (gone under python -O); a bad argument is a ValueError
    "TensorDataset of tensors of different lengths":
        (lambda t: t.utils.data.TensorDataset(t.zeros(3), t.zeros(4)), ValueError, r"size mismatch.*\[3, 4\]", AssertionError),
    "ConcatDataset([])": (lambda t: t.utils.data.ConcatDataset([]), ValueError, r"should not be an empty iterable", AssertionError),
    # PyTorch accepts these and fails later (or silently returns nonsense)
    "random_split with a negative length": (lambda t: t.utils.data.random_split(list(range(5)), [6, -1]), ValueError, r"non-negative.*\[6, -1\]", None),
    "DataLoader(num_workers=1, prefetch_factor=0)": (lambda t: _loader(t, num_workers=1, prefetch_factor=0), ValueError, r"prefetch_factor.*positive.*0", None),
    # PyTorch's KeyError is a dict lookup inside its code; ember says what the argument lacks
    "param group without 'params'": (lambda t: t.optim.SGD([{"lr": 0.1}], lr=0.1), ValueError, r"param_group must have a 'params' entry", KeyError),
    "optimizer.load_state_dict of a dict without param_groups":
        (lambda t: _sgd(t).load_state_dict({"state": {}}), ValueError, r"not an optimizer state dict.*param_groups", KeyError),
    # ember's checkpoints are never pickled: only tensors and plain containers can be saved
    "save(object())": (_save_object, TypeError, r"cannot save a builtins\.object", None),
    # PyTorch fails on `data.detach()` (AttributeError); ember says what Parameter() takes
    "Parameter([1.0])": (lambda t: t.nn.Parameter([1.0]), TypeError, r"Parameter\(\): data must be a Tensor, got list", AttributeError),
}


@pytest.mark.parametrize("name", list(DIFFERS))
def test_ember_deliberate_difference(name: str) -> None:
    fn, exc, match, _ = DIFFERS[name]
    with pytest.raises(exc, match=re.compile(match, re.IGNORECASE | re.DOTALL)):
        fn(ember)


@requires_torch
@pytest.mark.parametrize("name", list(DIFFERS))
def test_torch_side_of_deliberate_difference(name: str) -> None:
    fn, _, _, torch_exc = DIFFERS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if torch_exc is None:
            fn(torch)  # accepted
        else:
            with pytest.raises(torch_exc):
                fn(torch)


# --------------------------------------------------------------------------------------------
# Cases that need more than one framework-neutral line.
# --------------------------------------------------------------------------------------------

def test_process_group_error_is_also_a_runtime_error() -> None:
    """ember raised RuntimeError before it matched PyTorch's ValueError: code written against either catches it."""
    _no_group(ember)
    with pytest.raises(RuntimeError, match="not been initialized"):
        ember.distributed.get_rank()
    assert issubclass(ember.distributed.ProcessGroupStateError, ValueError)


def test_init_process_group_twice(monkeypatch) -> None:
    """A second init_process_group is PyTorch's ValueError (ember checks it before touching MPI)."""
    _no_group(ember)
    monkeypatch.setattr(ember.distributed.group, "comm", object())  # as if a group were initialized
    with pytest.raises(ValueError, match="initialize the default process group twice"):
        ember.distributed.init_process_group("mpi")


@requires_torch
def test_torch_init_process_group_twice(tmp_path) -> None:
    dist = torch.distributed
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed is unavailable or already initialized here")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", world_size=1, rank=0)
    try:
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store2'}", world_size=1, rank=0)
    finally:
        dist.destroy_process_group()


def test_grad_on_another_device(cuda) -> None:
    """`x.grad = g` with g on another device is PyTorch's RuntimeError naming both devices (needs a
    CUDA device: the real one or the fake one; PyTorch needs a GPU for the same check)."""
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"device 'cuda(:0)?'.*device 'cpu'"):
        x.grad = ember.zeros(3, device=cuda)
