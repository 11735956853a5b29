"""Catalogue of plausible user mistakes: each must raise PyTorch's exception type, with a message
that names the culprit (the op or layer, and the offending shape, value or name).

Every entry is written once as `fn(t)` where `t` is the framework module, so the very same code
runs against `ember` (type + message checked) and, where installed, `torch` (type checked): the
torch run is the oracle that the expected type is PyTorch's and not a guess.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import ember

from helpers import raises_like_torch, requires_torch, torch  # torch is None without PyTorch: the parity half skips


@dataclass(frozen=True)
class Mistake:
    """One user mistake: `fn(t)` makes it with framework `t`; ember must raise `exc` whose message
    matches `match` (searched, case-insensitive). `torch_exc` overrides the type torch raises where
    PyTorch's type is an accident of its build (None: torch is not an oracle for this entry)."""
    fn: Callable[[Any], Any]
    exc: type[BaseException]
    match: str
    torch_exc: type[BaseException] | None | str = "same"


def F(t):
    return t.nn.functional


# --------------------------------------------------------------------------------------------
# Mistakes that need a little set-up.
# --------------------------------------------------------------------------------------------

def _backward_twice(t):
    x = t.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _inplace_on_saved(t):
    x = t.ones(3, requires_grad=True)
    y = x.exp()  # exp saves its output for backward
    y.add_(1)
    y.sum().backward()


def _leaf_inplace(t):
    t.ones(3, requires_grad=True).add_(1)


def _step_non_optimizer(t):
    t.optim.lr_scheduler.StepLR(t.nn.Linear(1, 1), step_size=1)


def _param_in_two_groups(t):
    p = t.nn.Parameter(t.zeros(2))
    t.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def _optim_state_groups(t):
    a, b = t.nn.Parameter(t.zeros(2)), t.nn.Parameter(t.zeros(2))
    two = t.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    t.optim.SGD([a, b], lr=0.1).load_state_dict(two.state_dict())


def _missing_unexpected_keys(t):
    t.nn.Linear(3, 2).load_state_dict(t.nn.Sequential(t.nn.Linear(3, 2)).state_dict())


def _size_mismatch_keys(t):
    t.nn.Linear(3, 2).load_state_dict(t.nn.Linear(4, 2).state_dict())


def _module_before_init(t):
    class Net(t.nn.Module):
        def __init__(self):
            self.fc = t.nn.Linear(1, 1)  # forgot super().__init__()

    Net()


def _load_text_file(t):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "notes.txt")
        with open(path, "w") as f:
            f.write("these are my training notes, not a checkpoint\n" * 4)
        t.load(path)


def _load_missing_file(t):
    with tempfile.TemporaryDirectory() as d:
        t.load(os.path.join(d, "missing_ckpt.pt"))


def _collate_ragged(t):
    t.utils.data.default_collate([t.zeros(3), t.zeros(4)])


def _collate_object(t):
    t.utils.data.default_collate([object(), object()])


def _loader_ragged(t):
    class Ragged(t.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return t.zeros(i + 1)

    next(iter(t.utils.data.DataLoader(Ragged(), batch_size=2)))


def _dataset_index(t):
    t.utils.data.TensorDataset(t.zeros(3, 2), t.zeros(3))[5]


def _subset_index(t):
    t.utils.data.random_split(t.utils.data.TensorDataset(t.zeros(4)), [2, 2])[0][7]


def _scalar_backward_wrong_grad(t):
    x = t.ones(3, requires_grad=True)
    (x * 2).backward(t.ones(2))


def _cuda_tensor(t):
    if t.cuda.is_available():  # the mistake only exists on a machine without a GPU
        pytest.skip("a GPU is available here")
    t.zeros(2).cuda()


def _cuda_module(t):
    if t.cuda.is_available():
        pytest.skip("a GPU is available here")
    t.nn.Linear(2, 2).to("cuda")


# --------------------------------------------------------------------------------------------
# The catalogue. Ids are the description of the mistake.
# --------------------------------------------------------------------------------------------

CATALOGUE: dict[str, Mistake] = {
    # ---- wrong shapes into layers
    "Linear: input features 5 into Linear(4, 3)":
        Mistake(lambda t: t.nn.Linear(4, 3)(t.randn(2, 5)), RuntimeError, r"Linear.*\b4\b.*\[2, 5\]|2x5 and 4x3"),
    "Linear: 0-d input":
        Mistake(lambda t: t.nn.Linear(4, 3)(t.tensor(1.0)), RuntimeError, r"Linear.*got input of shape \[\]|linear need to be at least 1D"),
    "Linear: float64 input, float32 weight":
        Mistake(lambda t: t.nn.Linear(3, 2)(t.randn(2, 3, dtype=t.float64)), RuntimeError, r"(Double|float64).*(Float|float32)|(Float|float32).*(Double|float64)"),
    "Conv2d: 4 channels into Conv2d(3, ...)":
        Mistake(lambda t: t.nn.Conv2d(3, 8, 3)(t.randn(1, 4, 8, 8)), RuntimeError, r"Conv2d.*\b3\b.*\[1, 4, 8, 8\]|\[1, 4, 8, 8\] to have 3 channels"),
    "Conv2d: 2-D image without batch/channel dims":
        Mistake(lambda t: t.nn.Conv2d(3, 8, 3)(t.randn(8, 8)), RuntimeError, r"conv2d.*\[8, 8\]"),
    "Conv2d: kernel larger than the (padded) input":
        Mistake(lambda t: t.nn.Conv2d(1, 1, 5)(t.randn(1, 1, 3, 3)), RuntimeError, r"3 x 3.*Kernel size: \(5 x 5\)"),
    "Conv2d: float64 input, float32 weight":
        Mistake(lambda t: t.nn.Conv2d(1, 1, 3)(t.randn(1, 1, 5, 5, dtype=t.float64)), RuntimeError, r"(Double|float64).*(Float|float32)|(Float|float32).*(Double|float64)"),
    "MaxPool2d: window larger than the input":
        Mistake(lambda t: t.nn.MaxPool2d(4)(t.randn(1, 1, 2, 2)), RuntimeError, r"input size.*2.*2.*output size.*too small"),
    "BatchNorm1d(4) given 5 features":
        Mistake(lambda t: t.nn.BatchNorm1d(4)(t.randn(2, 5)), RuntimeError, r"BatchNorm1d\(4\).*\[2, 5\]|running_mean should contain 5 elements not 4"),
    "BatchNorm2d given a 2-D input":
        Mistake(lambda t: t.nn.BatchNorm2d(3)(t.randn(2, 3)), ValueError, r"expected 4D input \(got 2D input"),
    "BatchNorm1d training on a batch of one":
        Mistake(lambda t: t.nn.BatchNorm1d(3)(t.randn(1, 3)), ValueError, r"more than 1 value per channel.*\[1, 3\]"),
    "LayerNorm(4) given last dim 5":
        Mistake(lambda t: t.nn.LayerNorm(4)(t.randn(2, 5)), RuntimeError, r"(LayerNorm|normalized_shape).*\b4\b.*\[2, 5\]"),
    "Embedding: index 10 into Embedding(10, 3)":
        Mistake(lambda t: t.nn.Embedding(10, 3)(t.tensor([1, 10])), IndexError, r"embedding.*out of range.*index 10.*10 rows"),
    "Embedding: float indices":
        Mistake(lambda t: t.nn.Embedding(10, 3)(t.tensor([1.0, 2.0])), RuntimeError, r"indices.*(Long|int64|Int).*(Float|float32)"),
    "Dropout: p outside [0, 1]":
        Mistake(lambda t: t.nn.Dropout(1.5), ValueError, r"dropout probability.*1\.5"),
    "Sequential: index 3 of a 1-layer Sequential":
        Mistake(lambda t: t.nn.Sequential(t.nn.Linear(1, 1))[3], IndexError, r"index 3.*out of range"),
    "Module: attribute typo `weigth`":
        Mistake(lambda t: t.nn.Linear(3, 2).weigth, AttributeError, r"'Linear' object has no attribute 'weigth'"),
    "Module: register_parameter with a plain tensor":
        Mistake(lambda t: t.nn.Linear(1, 1).register_parameter("w", t.zeros(1)), TypeError, r"parameter 'w'.*Parameter or None required"),
    "Module: assigning a submodule before Module.__init__":
        Mistake(_module_before_init, AttributeError, r"before Module\.__init__\(\)"),

    # ---- tensor ops: shapes, broadcasting, views, dims
    "matmul: (2, 3) @ (4, 5)":
        Mistake(lambda t: t.randn(2, 3) @ t.randn(4, 5), RuntimeError, r"(2x3|\(2, 3\)).*(4x5|\(4, 5\))"),
    "matmul: 0-d operand":
        Mistake(lambda t: t.matmul(t.tensor(1.0), t.randn(3)), RuntimeError, r"matmul.*at least 1D"),
    "add: broadcasting (2, 3) with (4,)":
        Mistake(lambda t: t.randn(2, 3) + t.randn(4), RuntimeError, r"add.*size of tensor a \[2, 3\] must match the size of tensor b \[4\]|size of tensor a \(3\) must match the size of tensor b \(4\)"),
    "cat: mismatched non-cat dimension":
        Mistake(lambda t: t.cat([t.randn(2, 3), t.randn(2, 4)]), RuntimeError, r"[Ss]izes of tensors must match.*3.*4"),
    "reshape: 6 elements into (4, 2)":
        Mistake(lambda t: t.randn(2, 3).reshape(4, 2), RuntimeError, r"shape '\[4, 2\]' is invalid for input of size 6"),
    "view: on a transposed (non-contiguous) tensor":
        Mistake(lambda t: t.randn(2, 3).t().view(6), RuntimeError, r"view size is not compatible.*reshape"),
    "expand: 3 to 4 along a non-singleton dim":
        Mistake(lambda t: t.randn(3).expand(4), RuntimeError, r"expanded size.*\(4\).*existing size \(3\)"),
    "permute: wrong number of dims":
        Mistake(lambda t: t.randn(2, 3).permute(0), RuntimeError, r"permute.*\b2\b.*\b1\b"),
    "sum: dim 2 of a 2-D tensor":
        Mistake(lambda t: t.randn(2, 3).sum(dim=2), IndexError, r"[Dd]imension out of range.*\[-2, 1\].*2"),
    "indexing: element 5 of a length-3 tensor":
        Mistake(lambda t: t.randn(3)[5], IndexError, r"index 5 is out of bounds for dimension 0 with size 3"),
    "gather: float index":
        Mistake(lambda t: t.gather(t.randn(2, 3), 1, t.zeros(2, 1)), RuntimeError, r"gather.*int64 for index, got .*float32"),
    "zeros: negative size":
        Mistake(lambda t: t.zeros(2, -1), RuntimeError, r"negative dimension -1"),
    "tensor: ragged nested list":
        Mistake(lambda t: t.tensor([[1.0, 2.0], [3.0]]), ValueError, r"tensor.*(length 2 at dim 1|dim 1).*(got 1|length 1)"),
    "item: on a 3-element tensor":
        Mistake(lambda t: t.zeros(3).item(), RuntimeError, r"3 elements cannot be converted to Scalar"),
    "numpy: on a tensor that requires grad":
        Mistake(lambda t: t.zeros(3, requires_grad=True).numpy(), RuntimeError, r"requires grad.*detach\(\)"),
    "one_hot: negative class":
        Mistake(lambda t: F(t).one_hot(t.tensor([0, -1]), 3), RuntimeError, r"[Cc]lass values must be non-negative"),

    # ---- autograd misuse
    "requires_grad_ on an int tensor":
        Mistake(lambda t: t.tensor([1, 2]).requires_grad_(), RuntimeError, r"floating point.*require gradients"),
    "tensor(int data, requires_grad=True)":
        Mistake(lambda t: t.tensor([1, 2], requires_grad=True), RuntimeError, r"floating point.*require gradients"),
    "backward on a non-scalar without gradient":
        Mistake(lambda t: (t.ones(3, requires_grad=True) * 2).backward(), RuntimeError, r"implicitly created only for scalar outputs"),
    "backward with a gradient of the wrong shape":
        Mistake(_scalar_backward_wrong_grad, RuntimeError, r"[Mm]ismatch in shape.*2.*3"),
    "backward twice without retain_graph":
        Mistake(_backward_twice, RuntimeError, r"backward through the graph a second time.*retain_graph=True"),
    "backward on a tensor that does not require grad":
        Mistake(lambda t: t.zeros(3).sum().backward(), RuntimeError, r"does not require grad"),
    "in-place change of a tensor saved for backward":
        Mistake(_inplace_on_saved, RuntimeError, r"modified by an inplace operation.*version"),
    "in-place op on a leaf that requires grad":
        Mistake(_leaf_inplace, RuntimeError, r"leaf Variable that requires grad.*in-place"),

    # ---- optimizers and schedulers
    "optimizer on a non-leaf tensor":
        Mistake(lambda t: t.optim.SGD([t.ones(3, requires_grad=True) * 2], lr=0.1), ValueError, r"can't optimize a non-leaf Tensor"),
    "optimizer with an empty parameter list":
        Mistake(lambda t: t.optim.SGD([], lr=0.1), ValueError, r"empty parameter list"),
    "optimizer given a bare tensor, not an iterable":
        Mistake(lambda t: t.optim.SGD(t.nn.Parameter(t.zeros(2)), lr=0.1), TypeError, r"iterable of Tensors.*(Tensor|Parameter)"),
    "SGD: negative learning rate":
        Mistake(lambda t: t.optim.SGD(t.nn.Linear(1, 1).parameters(), lr=-1.0), ValueError, r"[Ii]nvalid learning rate: -1"),
    "SGD: negative momentum":
        Mistake(lambda t: t.optim.SGD(t.nn.Linear(1, 1).parameters(), lr=0.1, momentum=-0.5), ValueError, r"[Ii]nvalid momentum value: -0\.5"),
    "Adam: beta1 = 1.0":
        Mistake(lambda t: t.optim.Adam(t.nn.Linear(1, 1).parameters(), betas=(1.0, 0.9)), ValueError, r"[Ii]nvalid beta parameter at index 0: 1\.0"),
    "Adam: negative weight_decay":
        Mistake(lambda t: t.optim.Adam(t.nn.Linear(1, 1).parameters(), weight_decay=-1e-2), ValueError, r"[Ii]nvalid weight_decay value: -0\.01"),
    "a parameter in two parameter groups":
        Mistake(_param_in_two_groups, ValueError, r"more than one parameter group"),
    "optimizer.load_state_dict with a different number of groups":
        Mistake(_optim_state_groups, ValueError, r"different number of parameter groups"),
    "StepLR given a Module instead of an optimizer":
        Mistake(_step_non_optimizer, TypeError, r"Linear.*is not an Optimizer"),

    # ---- losses
    "cross_entropy: float targets of the wrong shape":
        Mistake(lambda t: F(t).cross_entropy(t.randn(4, 3), t.randn(4)), RuntimeError, r"cross_entropy.*(int64|Long).*float32.*\[4, 3\]"),
    "cross_entropy: class 3 with 3 classes":
        Mistake(lambda t: F(t).cross_entropy(t.randn(4, 3), t.tensor([0, 1, 2, 3])), IndexError, r"[Tt]arget 3 is out of bounds"),
    "cross_entropy: batch size mismatch":
        Mistake(lambda t: F(t).cross_entropy(t.randn(4, 3), t.tensor([0, 1])), ValueError, r"input batch_size \(4\).*target batch_size \(2\)"),
    "nll_loss: float class targets":
        Mistake(lambda t: F(t).nll_loss(t.randn(4, 3), t.tensor([0.0, 1.0, 2.0, 0.0])), RuntimeError, r"(Long|int64).*(Float|float32)"),
    "nll_loss: target of shape (4, 2) for input (4, 3)":
        Mistake(lambda t: F(t).nll_loss(t.randn(4, 3), t.zeros(4, 2, dtype=t.int64)), RuntimeError, r"nll_loss.*\[4, 2\].*\[4, 3\]|multi-target not supported"),
    "nll_loss: 1-D input":
        Mistake(lambda t: F(t).nll_loss(t.randn(3), t.tensor([0, 1, 2])), ValueError, r"nll_loss.*1D target must have size 1.*3"),
    "mse_loss: shapes that do not broadcast":
        Mistake(lambda t: F(t).mse_loss(t.randn(4), t.randn(3)), RuntimeError, r"mse_loss.*input of shape \[4\].*target of shape \[3\]|size of tensor a \(4\) must match the size of tensor b \(3\)"),
    "binary_cross_entropy: input outside [0, 1]":
        Mistake(lambda t: F(t).binary_cross_entropy(t.tensor([1.5, 0.5]), t.tensor([1.0, 0.0])), RuntimeError, r"input should be between 0 and 1"),
    "binary_cross_entropy: target size differs from input size":
        Mistake(lambda t: F(t).binary_cross_entropy(t.rand(4, 1), t.rand(4)), ValueError, r"target size.*4.*input size.*4, 1"),

    # ---- state dicts and checkpoints
    "load_state_dict of another architecture (missing/unexpected keys)":
        Mistake(_missing_unexpected_keys, RuntimeError, r"Linear.*[Mm]issing key\(s\).*\"weight\".*[Uu]nexpected key\(s\).*\"0\.weight\""),
    "load_state_dict with a shape mismatch":
        Mistake(_size_mismatch_keys, RuntimeError, r"size mismatch for weight.*\[2, 4\].*\[2, 3\]|size mismatch for weight.*\(2, 4\).*\(2, 3\)"),
    "load_state_dict given a list, not a dict":
        Mistake(lambda t: t.nn.Linear(1, 1).load_state_dict([1, 2]), TypeError, r"state_dict.*dict.*list"),
    # torch.load (weights_only) raises a stray IndexError('pop from empty list') here, an accident of
    # its unpickler, so it is no oracle; ember promises a ValueError naming the file and the reason.
    "load: a text file, not a checkpoint":
        Mistake(_load_text_file, ValueError, r"load.*notes\.txt.*not a", torch_exc=None),
    "load: a path that does not exist":
        Mistake(_load_missing_file, FileNotFoundError, r"missing_ckpt\.pt"),

    # ---- data loading
    "DataLoader: batch_size=0":
        Mistake(lambda t: t.utils.data.DataLoader(list(range(4)), batch_size=0), ValueError, r"batch_size.*positive.*0"),
    "DataLoader: sampler with shuffle=True":
        Mistake(lambda t: t.utils.data.DataLoader(list(range(4)), sampler=t.utils.data.SequentialSampler(range(4)), shuffle=True),
                ValueError, r"sampler.*mutually exclusive with.*shuffle"),
    "DataLoader: batch_sampler with batch_size":
        Mistake(lambda t: t.utils.data.DataLoader(list(range(4)), batch_size=2,
                                                  batch_sampler=t.utils.data.BatchSampler(t.utils.data.SequentialSampler(range(4)), 2, False)),
                ValueError, r"batch_sampler.*mutually exclusive"),
    "DataLoader: negative num_workers":
        Mistake(lambda t: t.utils.data.DataLoader(list(range(4)), num_workers=-1), ValueError, r"num_workers.*non-negative"),
    "DataLoader: samples of different shapes (default collate)":
        Mistake(_loader_ragged, RuntimeError, r"stack expects each tensor to be equal size.*\[1\].*\[2\]"),
    "default_collate: samples of different shapes":
        Mistake(_collate_ragged, RuntimeError, r"stack expects each tensor to be equal size.*\[3\].*\[4\]"),
    "default_collate: samples of an unsupported type":
        Mistake(_collate_object, TypeError, r"default_collate.*found <class 'object'>"),
    "TensorDataset: index 5 of 3 samples":
        Mistake(_dataset_index, IndexError, r"index 5 is out of bounds.*size 3"),
    "Subset: index 7 of a 2-sample split":
        Mistake(_subset_index, IndexError, r"Subset.*index 7.*(length|size) 2"),
    "random_split: lengths that do not sum to the dataset size":
        Mistake(lambda t: t.utils.data.random_split(list(range(5)), [2, 2]), ValueError, r"sum of input lengths \(4\) does not equal the length of the input dataset \(5\)"),

    # ---- devices. A CPU-only torch raises AssertionError("Torch not compiled with CUDA enabled"), a
    # build accident no user should catch; ember raises the RuntimeError torch gives on a CUDA build
    # without a usable GPU, which is the contract a user can act on.
    ".cuda() on a machine without a GPU":
        Mistake(_cuda_tensor, RuntimeError, r"cuda.*not available", torch_exc=None),
    "Module.to('cuda') without a GPU":
        Mistake(_cuda_module, RuntimeError, r"cuda.*not available", torch_exc=None),
}

_IDS = list(CATALOGUE)
# Entries where ember falls short (wrong type, or a message that does not name the culprit):
# filled in from running the catalogue; each is a bug reported to the lead.
_BUGS: dict[str, str] = {}  # mistakes ember still gets wrong: strict xfails, naming where the fix belongs


def _params(ids: list[str]):
    return [pytest.param(i, id=i, marks=pytest.mark.xfail(strict=True, reason="bug: " + _BUGS[i])) if i in _BUGS
            else pytest.param(i, id=i) for i in ids]


def test_catalogue_is_large_enough() -> None:
    """The issue asks for at least 40 plausible mistakes."""
    assert len(CATALOGUE) >= 40


@pytest.mark.parametrize("name", _params(_IDS))
def test_ember_error(name: str) -> None:
    """ember raises the listed type, and its message names the culprit (not a NumPy traceback)."""
    m = CATALOGUE[name]
    raises_like_torch(m.fn, ember, m.exc, m.match)  # (mse/bce size warnings are silenced: not the point here)


@requires_torch
@pytest.mark.parametrize("name", [i for i in _IDS if CATALOGUE[i].torch_exc is not None])
def test_torch_raises_the_same_type(name: str) -> None:
    """The oracle: PyTorch raises the listed type for the very same code."""
    m = CATALOGUE[name]
    raises_like_torch(m.fn, torch, m.exc if m.torch_exc == "same" else m.torch_exc)


# --------------------------------------------------------------------------------------------
# Size mismatches that PyTorch only warns about: ember must warn too (not raise, not stay silent).
# --------------------------------------------------------------------------------------------

WARNINGS: dict[str, Callable[[Any], Any]] = {
    "mse_loss: target (4,) against input (4, 1) broadcasts": lambda t: F(t).mse_loss(t.randn(4, 1), t.randn(4)),
    "l1_loss: target (4,) against input (4, 1) broadcasts": lambda t: F(t).l1_loss(t.randn(4, 1), t.randn(4)),
}


@pytest.mark.parametrize("name", list(WARNINGS))
def test_ember_size_warning(name: str) -> None:
    with pytest.warns(UserWarning, match=r"target size.*\(4,?\).*input size.*\(4, 1\)|target size.*\[4\].*input size.*\[4, 1\]"):
        out = WARNINGS[name](ember)
    assert tuple(out.shape) == ()


@requires_torch
@pytest.mark.parametrize("name", list(WARNINGS))
def test_torch_size_warning(name: str) -> None:
    with pytest.warns(UserWarning, match=r"target size"):
        WARNINGS[name](torch)


# --------------------------------------------------------------------------------------------
# Looks like a mistake, but PyTorch accepts it: ember must not invent an error.
# --------------------------------------------------------------------------------------------

def _frozen_param_step(t):
    """A tensor without requires_grad in an optimizer: PyTorch accepts it and step() skips it
    (its grad stays None), which is how frozen layers are commonly handled."""
    p = t.ones(3)
    opt = t.optim.SGD([p], lr=0.1, momentum=0.9)
    opt.zero_grad()
    opt.step()
    return p


@pytest.mark.parametrize("t", [pytest.param(ember, id="ember"), pytest.param(torch, marks=requires_torch, id="torch")])
def test_optimizer_accepts_tensor_without_requires_grad(t) -> None:
    p = _frozen_param_step(t)
    assert p.grad is None
    np.testing.assert_array_equal(p.numpy(), np.ones(3, np.float32))
