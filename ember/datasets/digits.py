"""Digits: the UCI 8×8 handwritten digits, shipped inside ember so that no network is needed.

Data: Alpaydin, E. & Kaynak, C. (1998). Optical Recognition of Handwritten Digits [Dataset].
UCI Machine Learning Repository. https://doi.org/10.24432/C50P49 — licensed CC BY 4.0
(https://creativecommons.org/licenses/by/4.0/); see data/DIGITS_LICENSE.txt.

The 1,797 images are 8×8 counts (0..16) of set pixels in 4×4 blocks of 32×32 bitmaps. The file
`data/digits.npz` was made once from a CSV copy of the data (1797 rows: 64 pixel counts in row-major
order, then the label) by: images = round(count · 255 / 16) as uint8 (so that `ToTensor` gives
[0, 1], as for MNIST), labels as uint8; a fixed stratified split putting every fifth sample of each
class, in file order (within-class positions 4, 9, 14, ...), in the test set: 1,442 training and
355 test images (≈ 80/20, every class in both). Arrays `train_images`, `train_labels`,
`test_images`, `test_labels`, written with `np.savez_compressed`.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np

from .._tensor import Tensor, make
from .vision import ImageTensorDataset

__all__ = ["Digits"]


class Digits(ImageTensorDataset):
    """The embedded UCI digits (see the module docstring): 1,442 training or 355 test images.

    `data` is a uint8 Tensor N×8×8 (values 0..255), `targets` an int64 Tensor, `classes` the ten
    digit names; an item is (uint8 array 8×8, int) before `transform` / `target_transform`. `root`
    is not needed (the data ships with ember) and is kept only for a uniform dataset signature."""

    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        split = "train" if train else "test"
        with resources.files(__package__).joinpath("data", "digits.npz").open("rb") as f, \
                np.load(f, allow_pickle=False) as npz:
            self.data: Tensor = make(npz[f"{split}_images"])
            self.targets: Tensor = make(npz[f"{split}_labels"].astype(np.int64))
