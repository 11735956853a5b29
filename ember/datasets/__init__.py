"""Datasets and image transforms with torchvision's API: MNIST, FashionMNIST, CIFAR10, the embedded
UCI Digits and a public-domain text for character models (no network needed), `fetch` for obtaining
MNIST / Fashion-MNIST / CIFAR-10, and `transforms`."""
from . import transforms
from ._fetch import fetch
from .cifar import CIFAR10
from .digits import Digits
from .mnist import MNIST, FashionMNIST, read_idx
from .text import CharText, Vocab, default_text
from .vision import DatasetNotFoundError, VisionDataset

__all__ = ["transforms", "fetch", "CIFAR10", "Digits", "MNIST", "FashionMNIST", "read_idx", "VisionDataset", "DatasetNotFoundError", "CharText", "Vocab",
           "default_text"]
