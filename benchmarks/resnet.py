"""W4 ResNet-18: one CIFAR-10 training step, ember against PyTorch CPU (no hand-written NumPy reference).

The model is the standard CIFAR-10 ResNet-18 (He et al., adapted to 32×32 inputs): a 3×3 stride-1 stem
Conv(3, 64) without bias, BatchNorm2d and ReLU, no max-pool; four stages of two BasicBlocks at 64, 128, 256
and 512 channels, the first block of stages 2-4 with stride 2 and a 1×1 stride-2 Conv + BatchNorm shortcut;
global average pool; Linear(512, 10). 11,173,962 parameters, float32. A training step is zero grads,
forward (train mode: BatchNorm uses and updates batch statistics), mean cross-entropy, backward and
SGD(lr=0.01, momentum=0.9, weight_decay=5e-4) on fixed random data (N, 3, 32, 32) and labels.

`resnet18(nn)` is written against an `nn` namespace: one definition builds ember's model (`ember.nn`) and
PyTorch's (`torch.nn`), with the same state_dict keys, so PyTorch starts from ember's initial weights. This
module imports ember only inside the functions that need it: PyTorch alone (benchmarks/fairness.py) can
build the network without loading ember. `cases(batch)` returns the implementations as zero-argument steps;
tests/test_bench_resnet.py checks the two frameworks' losses and gradients against each other.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ._harness import EMBER_COMPILED, IMPLS, Skipped, import_torch, in_order, synced, train_step

__all__ = ["resnet18", "ember_model", "torch_spec", "cases", "IN_SHAPE", "N_CLASSES", "WIDTHS", "OPTIM_KW"]

IN_SHAPE, N_CLASSES = (3, 32, 32), 10
WIDTHS = (64, 128, 256, 512)  # channels of the four stages
BLOCKS = 2  # BasicBlocks per stage
# SGD's settings, for both frameworks' optimizers (ember.optim.SGD and torch.optim.SGD take the same keywords)
OPTIM_KW = {"lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}


def resnet18(nn, n_classes: int = N_CLASSES, in_ch: int = IN_SHAPE[0]):
    """CIFAR ResNet-18 built from `nn` (ember.nn or torch.nn): x (N, in_ch, H, W) -> logits (N, n_classes).

    The parameters do not depend on H and W (a global average pool ends the convolutions). Module names: conv1, bn1,
    layer1..layer4 (each a Sequential of BasicBlocks with conv1, bn1, conv2, bn2, shortcut), linear."""
    class BasicBlock(nn.Module):
        """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut is the identity unless the block
        changes the resolution or the width, then a 1×1 strided Conv + BatchNorm."""

        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.shortcut = nn.Sequential()  # empty: the identity, with no state_dict keys
            if stride != 1 or c_in != c_out:
                self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(c_out))
            self.relu = nn.ReLU()

        def forward(self, x):
            h = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(h)) + self.shortcut(x))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(in_ch, WIDTHS[0], 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(WIDTHS[0])
            self.relu = nn.ReLU()
            c_in = WIDTHS[0]
            for i, c in enumerate(WIDTHS):
                stride = 1 if i == 0 else 2
                blocks = [BasicBlock(c_in if j == 0 else c, c, stride if j == 0 else 1) for j in range(BLOCKS)]
                setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
                c_in = c
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.linear = nn.Linear(WIDTHS[-1], n_classes)

        def forward(self, x):
            h = self.relu(self.bn1(self.conv1(x)))
            h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
            return self.linear(self.pool(h).flatten(1))

    return ResNet18()


def ember_model(seed: int = 0):
    """The W4 model from ember's generator seeded with `seed` (ember.nn's default initialisation)."""
    import ember
    ember.manual_seed(seed)
    return resnet18(ember.nn)


def _data(batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, *IN_SHAPE)).astype(np.float32), rng.integers(0, N_CLASSES, batch)


def torch_spec(batch: int = 128) -> dict:
    """The PyTorch step of W4 for benchmarks/nets.py (`torch_step`)."""
    return {"net": "resnet18", "args": [N_CLASSES, IN_SHAPE[0]], "x": [batch, *IN_SHAPE], "y": [batch],
            "classes": N_CLASSES, "optim": "SGD", "optim_kw": dict(OPTIM_KW)}


def _ember_sgd(module):
    """ember's optimizer of the W4 step over `module`'s parameters."""
    import ember
    return ember.optim.SGD(module.parameters(), **OPTIM_KW)


def cases(batch: int = 128, impls=IMPLS, seed: int = 0, device: str = "cpu",
          check: bool = True) -> dict[str, Callable[[], object] | Skipped]:
    """{implementation: one training step} for each of `impls` ("numpy" has none here): ember, PyTorch where
    installed, "compiled" (PyTorch with torch.compile, compiled here, or Skipped saying why not) and the
    ember.compile columns (captured here and checked against eager unless `check` is False:
    benchmarks/ember_compile.py), on fixed random data, all from ember's initial weights. On a CUDA `device`
    ember and PyTorch run there (steps end with a synchronize) and the ember.compile columns are left out."""
    import ember

    from . import ember_compile, nets
    x_np, y_np = _data(batch, seed)
    model = ember_model(seed)
    loss_fn = ember.nn.functional.cross_entropy
    out: dict[str, Callable[[], object] | Skipped] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        out.update(nets.torch_cases(torch, torch_spec(batch), impls, model, x_np, y_np, device))
    if device == "cpu" and any(k in impls for k in EMBER_COMPILED):  # copies of the initial weights
        out.update(ember_compile.train_cases(model, _ember_sgd, loss_fn, ember.from_numpy(x_np),
                                             ember.from_numpy(y_np), impls, check))
    if "ember" in impls:
        model.to(device)
        out["ember"] = synced(train_step(model, _ember_sgd(model), loss_fn, ember.from_numpy(x_np).to(device),
                                         ember.from_numpy(y_np).to(device)), device, ember)
    return in_order(out)
