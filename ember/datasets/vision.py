"""VisionDataset: what ember's image datasets share (root, transforms, torchvision's repr), and the
error they raise when their files are not there."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .._tensor import Tensor
from ..utils.data import Dataset

__all__ = ["VisionDataset", "DatasetNotFoundError"]  # and ImageTensorDataset, the base of Digits and MNIST


class DatasetNotFoundError(RuntimeError):
    """A dataset's files are not in its root folder. The message tells a Python caller how to get them
    (`download=True`); `missing` is the first file looked for and not found, so that the command line
    can say the same in its own terms. A RuntimeError, as torchvision raises."""

    def __init__(self, message: str, missing: str) -> None:
        super().__init__(message)
        self.missing = missing


class VisionDataset(Dataset):
    """Base of the image datasets (map-style `Dataset`s): keeps `root` (with `~` expanded),
    `transform` (applied to the image) and `target_transform` (applied to the label); subclasses
    define `__getitem__`, `__len__`, and `classes` for classification datasets."""

    _repr_indent = 4

    def __init__(self, root: str | os.PathLike | None, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None) -> None:
        self.root = os.path.expanduser(os.fspath(root)) if root is not None else None
        self.transform = transform
        self.target_transform = target_transform

    def _transformed(self, img: Any, target: Any) -> tuple[Any, Any]:
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        for name, t in (("Transform", self.transform), ("Target transform", self.target_transform)):
            if t is not None:
                lines = repr(t).splitlines()
                body += [f"{name}: {lines[0]}"] + [" " * len(f"{name}: ") + line for line in lines[1:]]
        return "\n".join([f"Dataset {self.__class__.__name__}"] + [" " * self._repr_indent + line for line in body])


class ImageTensorDataset(VisionDataset):
    """A classification split held as `data` (a uint8 Tensor N×H×W) and `targets` (an int64
    Tensor), `train` telling which split: an item is (a uint8 array H×W copy, int) before the
    transforms, as torchvision's MNIST gives a grayscale image."""

    data: Tensor
    targets: Tensor
    train: bool

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self._transformed(self.data._data[index].copy(), int(self.targets._data[index]))

    def __len__(self) -> int:
        return len(self.data._data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"
