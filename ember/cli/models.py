"""The models `python -m ember train --model ...` builds, for images of shape (C, H, W).

`mlp`, `resmlp` and `cnn` are the benchmark workloads W1, W2 and W3 (docs/performance.md), with
the input and class counts of the dataset; `resnet` is a small residual CNN for CIFAR-10.
Initialisation is PyTorch's default for every layer, drawn from ember's generator.
"""
from __future__ import annotations

import math

import ember.nn as nn

__all__ = ["MODELS", "build_model", "count_parameters", "ResMLPBlock", "BasicBlock"]


class ResMLPBlock(nn.Module):
    """x -> relu(x + LN(Linear(Dropout(relu(LN(Linear(x))))))): the W2 residual block."""

    def __init__(self, width: int, bottleneck: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, bottleneck), nn.LayerNorm(bottleneck), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(bottleneck, width), nn.LayerNorm(width))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x + self.body(x))


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-BN pairs around an identity (or 1x1 strided) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))
        self.shortcut = (nn.Identity() if stride == 1 and c_in == c_out else
                         nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.body(x) + self.shortcut(x))


def _mlp(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, classes))


def _resmlp(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 100), *(ResMLPBlock(100, 50) for _ in range(3)),
                         nn.Linear(100, classes))


def _cnn(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * (h // 4) * (w // 4), 128), nn.ReLU(), nn.Linear(128, classes))


def _resnet(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         BasicBlock(16, 16), BasicBlock(16, 32, stride=2), BasicBlock(32, 64, stride=2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


MODELS = {"resmlp": _resmlp, "mlp": _mlp, "cnn": _cnn, "resnet": _resnet}


def build_model(name: str, in_shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    """A freshly initialised model `name` for inputs (N, *in_shape) and `num_classes` logits."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    c, h, w = in_shape
    if name == "cnn" and min(h, w) < 4:
        raise ValueError(f"model 'cnn' pools twice by 2 and needs images of at least 4x4, got {h}x{w}")
    return MODELS[name](c, h, w, num_classes)


def count_parameters(model: nn.Module) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())
