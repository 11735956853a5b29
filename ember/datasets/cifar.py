"""CIFAR-10 from its binary or python batches, the latter through a restricted unpickler.

Binary version (`root/cifar-10-batches-bin/`): `data_batch_1.bin` ... `data_batch_5.bin` and
`test_batch.bin`, each a run of 3,073-byte records (one label byte, then 3,072 pixel bytes: the red,
green and blue 32×32 planes in row-major order); `batches.meta.txt` names the classes, one a line.

Python version (`root/cifar-10-batches-py/`): `data_batch_1` ... `data_batch_5`, `test_batch`,
pickled dicts with `data` (uint8 N×3072, the same planes) and `labels` (N ints), and `batches.meta`
(`label_names`). Pickle can run arbitrary code, so these files are read by an unpickler that admits
only the globals a NumPy array needs to be rebuilt; anything else is refused before it is called.
"""
from __future__ import annotations

import codecs
import io
import os
import pickle
import pickletools
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy._core import multiarray as _multiarray
from numpy._core import numeric as _numeric

from . import _fetch
from .vision import DatasetNotFoundError, VisionDataset

__all__ = ["CIFAR10"]

_RECORD = 1 + 3 * 32 * 32
_BIN_DIR = "cifar-10-batches-bin"
_TRAIN = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"]
_TEST = ["test_batch"]


def _latin1_encode(obj: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """`_codecs.encode` as protocols 0-2 use it for bytes (text -> latin1): other codecs, such as
    zlib_codec or bz2_codec, are refused, so a corrupt or hostile file cannot reach them."""
    if not isinstance(obj, str) or codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError(f"only _codecs.encode(str, 'latin1') is allowed, got encoding {encoding!r}")
    return codecs.encode(obj, encoding, errors)


# Everything a pickled ndarray refers to, under the module names NumPy 1.x (numpy.core) and 2.x
# (numpy._core) write: the array and dtype classes, `_reconstruct` (protocols 0-4), `_frombuffer`
# (protocol 5), `scalar` (NumPy scalars such as a label of type np.int64), and `_codecs.encode`, which
# protocols 0-2 use for bytes. None of them runs user-chosen code.
_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    **{(f"numpy.{core}.multiarray", "_reconstruct"): _multiarray._reconstruct for core in ("core", "_core")},
    **{(f"numpy.{core}.multiarray", "scalar"): _multiarray.scalar for core in ("core", "_core")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): _numeric._frombuffer for core in ("core", "_core")},
    ("_codecs", "encode"): _latin1_encode,
}


class _ForbiddenGlobal(pickle.UnpicklingError):
    """A pickle referenced a global outside _ALLOWED_GLOBALS."""


class _RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler whose globals are limited to _ALLOWED_GLOBALS: containers, strings, bytes and
    numbers are native to pickle, so a CIFAR batch loads and a pickle that reaches for anything else
    (os.system, builtins.eval, a class with a custom __reduce__) fails at the reference."""

    def __init__(self, file: io.BufferedIOBase, path: str) -> None:
        super().__init__(file, encoding="latin1")  # the batches are Python 2 pickles of str / numpy data
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise _ForbiddenGlobal(
                f"CIFAR10: refusing to load {self.path}: it references the global {module}.{name}, and only "
                f"plain containers and NumPy arrays are allowed in a CIFAR-10 batch (the file may be malicious, "
                f"or not a CIFAR-10 python batch)") from None


def _unpickle(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        # The C unpickler allocates a counted bytes/str/frame at the length the file claims before
        # reading it (2 GiB for a corrupt 4-byte length). Walking the opcodes first, over the bytes in
        # memory, checks every such length against what the file holds, so nothing larger is allocated.
        unpickler = _RestrictedUnpickler(io.BytesIO(raw), path)
        for op, arg, _ in pickletools.genops(io.BytesIO(raw)):
            if op.name in ("GLOBAL", "INST"):  # refuse a named global here already, whatever follows it
                unpickler.find_class(*arg.split(" ", 1))
        obj = unpickler.load()
    except _ForbiddenGlobal:
        raise
    except Exception as e:  # whatever a corrupt pickle makes the opcode walk or the unpickler raise
        raise RuntimeError(f"CIFAR10: {path} is not a valid CIFAR-10 python batch "
                           f"({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise RuntimeError(f"CIFAR10: {path} holds {type(obj).__name__!r}, not the dict of a CIFAR-10 batch")
    # Python 3 re-pickles of the batches sometimes keep Python 2's byte-string keys
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _check_labels(labels: np.ndarray, path: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        bad = int(np.argmax((labels < 0) | (labels > 9)))
        raise RuntimeError(f"CIFAR10: {path} holds label {labels[bad]} at record {bad}; labels must be in 0..9")


def _read_python_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    batch = _unpickle(path)
    data, labels = batch.get("data"), batch.get("labels")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _RECORD - 1:
        described = f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise RuntimeError(f"CIFAR10: {path}: 'data' must be a uint8 array of shape (N, 3072), got {described}")
    try:
        labels = np.asarray(labels)
    except ValueError:
        labels = np.asarray(None)
    if labels.dtype.kind not in "iu" or labels.shape != (len(data),):
        raise RuntimeError(f"CIFAR10: {path}: 'labels' must be {len(data)} integers (one per image), got "
                           f"{labels.size if labels.ndim else 'no'} values of type {labels.dtype}")
    _check_labels(labels, path)
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _read_binary_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % _RECORD:
        raise RuntimeError(f"CIFAR10: {path} holds {raw.size} bytes, not a whole number of {_RECORD}-byte records "
                           f"(1 label byte + 3072 pixel bytes); the file is truncated or not a CIFAR-10 batch")
    records = raw.reshape(-1, _RECORD)
    labels = records[:, 0].astype(np.int64)
    _check_labels(labels, path)
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def _read_classes(meta: str, reader: Callable[[str], list]) -> list[str] | None:
    if not os.path.isfile(meta):
        return None
    names = reader(meta)
    if len(names) != 10 or not all(isinstance(n, str) for n in names):
        raise RuntimeError(f"CIFAR10: {meta} should name the 10 classes, got {names!r}")
    return names


def _text_names(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()]


def _pickled_names(path: str) -> list:
    names = _unpickle(path).get("label_names")
    return list(names) if isinstance(names, (list, tuple)) else [names]


class CIFAR10(VisionDataset):
    """CIFAR-10 (50,000 training and 10,000 test colour images, 32×32, 10 classes) from
    `root/cifar-10-batches-bin/` (binary batches, read first if complete) or
    `root/cifar-10-batches-py/` (python batches, restricted unpickling).

    `data` is a uint8 array N×32×32×3 (HWC), `targets` a list of ints, `classes` the names from the
    meta file (or the standard ones); an item is (uint8 array 32×32×3, int) before the transforms.
    `download=True` fetches the python tarball from the public mirror (MD5 verified) unless the
    batches are there (checked silently); there is no offline source for CIFAR-10. Missing batches
    raise `DatasetNotFoundError` (a RuntimeError)."""

    base_folder = _fetch.CIFAR10_PY_DIR
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

    def __init__(self, root: str | os.PathLike, train: bool = True, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        names = _TRAIN if train else _TEST
        bin_dir, py_dir = os.path.join(self.root, _BIN_DIR), os.path.join(self.root, self.base_folder)
        bin_files = [os.path.join(bin_dir, n + ".bin") for n in names]
        py_files = [os.path.join(py_dir, n) for n in names]
        if download and not all(map(os.path.isfile, bin_files)) and not _fetch.is_fetched("cifar10", self.root):
            _fetch.fetch_cifar10(self.root)
        if all(map(os.path.isfile, bin_files)):
            batches = [_read_binary_batch(p) for p in bin_files]
            classes = _read_classes(os.path.join(bin_dir, "batches.meta.txt"), _text_names)
        elif all(map(os.path.isfile, py_files)):
            batches = [_read_python_batch(p) for p in py_files]
            classes = _read_classes(os.path.join(py_dir, "batches.meta"), _pickled_names)
        else:
            missing = [p for p in py_files if not os.path.isfile(p)]
            raise DatasetNotFoundError(
                f"CIFAR10: dataset not found in {self.root}: missing {', '.join(missing)} (or the binary batches "
                f"{', '.join(os.path.basename(p) for p in bin_files)} in {bin_dir}). Use CIFAR10(root, download=True), "
                f"or unpack cifar-10-python.tar.gz or cifar-10-binary.tar.gz from "
                f"https://www.cs.toronto.edu/~kriz/cifar.html into {self.root}", missing[0])
        # CHW planes -> HWC images, made contiguous once so that each item is a cheap copy
        self.data: np.ndarray = np.ascontiguousarray(np.concatenate([d for d, _ in batches]).transpose(0, 2, 3, 1))
        self.targets: list[int] = np.concatenate([t for _, t in batches]).tolist()
        if classes is not None:
            self.classes = classes

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self._transformed(self.data[index].copy(), self.targets[index])

    def __len__(self) -> int:
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"
