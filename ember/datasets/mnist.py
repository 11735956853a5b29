"""MNIST and Fashion-MNIST from their IDX files, and `read_idx`, the IDX parser.

The IDX format (LeCun et al.): a 4-byte big-endian magic number — two zero bytes, a type code
(0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64) and the number of
dimensions — then each dimension as a big-endian uint32, then the data in C order, big-endian.
MNIST's images are 0x00000803 (uint8, N×28×28), its labels 0x00000801 (uint8, N).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .._tensor import Tensor, make
from . import _fetch
from .vision import DatasetNotFoundError, ImageTensorDataset

__all__ = ["read_idx", "MNIST", "FashionMNIST"]

_IDX_TYPES = {0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_CHUNK = 1 << 22
_MAX_NDIM = 64  # NumPy's limit: the magic number's byte allows up to 255


def _read_body(f, claim: int) -> bytearray:
    """Read exactly `claim` bytes from a stream of unknown length, never holding more than
    min(claim, what the stream has) + one chunk: a bogus huge claim fails on the real length."""
    buf = bytearray()
    while len(buf) <= claim:
        chunk = f.read(min(_CHUNK, claim + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
    return buf


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse the IDX file at `path` (raw or gzip-compressed) into a writable array of its dimensions
    and type (native byte order). The header is checked before anything is allocated from it: the
    magic number's zero bytes and type code, and that the file holds exactly the data the dimensions
    claim. Raises RuntimeError naming the file on any inconsistency."""
    path = os.fspath(path)
    try:
        with _fetch._open_maybe_gzip(path) as f:
            gz = isinstance(f, gzip.GzipFile)
            head = f.read(4)
            if len(head) < 4:
                raise RuntimeError(f"read_idx: {path} is not an IDX file: it holds only {len(head)} bytes")
            if head[:2] != b"\0\0" or head[2] not in _IDX_TYPES or head[3] == 0:
                codes = ", ".join(f"{t:02x}" for t in _IDX_TYPES)
                raise RuntimeError(f"read_idx: {path} is not an IDX file: bad magic number 0x{head.hex()} "
                                   f"(expected 0x0000TTNN with type code TT in {{{codes}}} and NN >= 1 dimensions)")
            dtype, ndim = _IDX_TYPES[head[2]], head[3]
            if ndim > _MAX_NDIM:
                raise RuntimeError(f"read_idx: {path} is not a readable IDX file: its header announces {ndim} "
                                   f"dimensions, more than the {_MAX_NDIM} an array can have")
            raw_dims = f.read(4 * ndim)
            if len(raw_dims) < 4 * ndim:
                raise RuntimeError(f"read_idx: {path} is truncated: its header announces {ndim} dimensions "
                                   f"but the file ends inside them")
            dims = struct.unpack(f">{ndim}I", raw_dims)
            claim = dtype.itemsize * int(np.prod(dims, dtype=object))  # Python ints: no overflow
            if gz:
                body = _read_body(f, claim)
                have = len(body)
            else:
                have = os.fstat(f.fileno()).st_size - 4 - 4 * ndim
            if have != claim:
                state = "truncated" if have < claim else "longer than its header says"
                raise RuntimeError(f"read_idx: {path} is {state}: dimensions {dims} of {dtype.name} need {claim} "
                                   f"bytes of data, the file {'decompresses to' if gz else 'holds'} "
                                   f"{have if have < claim else f'more than {claim}'}")
            if not gz:
                body = bytearray(claim)
                if f.readinto(body) != claim:
                    raise RuntimeError(f"read_idx: {path} changed while it was read")
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise RuntimeError(f"read_idx: {path} is a corrupt gzip file ({type(e).__name__}: {e})") from None
    arr = np.frombuffer(body, dtype).reshape(dims)
    return arr if dtype.isnative else arr.astype(dtype.newbyteorder("="))


class MNIST(ImageTensorDataset):
    """The MNIST handwritten digits (60,000 training and 10,000 test images, 28×28, 10 classes) from
    the IDX files in `root/MNIST/raw/` (raw or .gz), as torchvision lays them out.

    `data` is a uint8 Tensor N×28×28, `targets` an int64 Tensor; an item is (uint8 array 28×28, int)
    before `transform` / `target_transform`. `download=True` first calls `ember.datasets.fetch` unless
    the files are already there (checked silently, as torchvision does). Missing files raise
    `DatasetNotFoundError` (a RuntimeError).
    A file of the original size must have the original SHA-256; smaller IDX files (hand-made
    subsets) are only checked for consistency."""

    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]
    _fetch_name = "mnist"

    def __init__(self, root: str | os.PathLike, train: bool = True, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download and not _fetch.is_fetched(self._fetch_name, self.root):
            _fetch.fetch(self._fetch_name, self.root)
        prefix = "train" if train else "t10k"
        images_path, images = self._load(f"{prefix}-images-idx3-ubyte", 3)
        labels_path, labels = self._load(f"{prefix}-labels-idx1-ubyte", 1)
        name = type(self).__name__
        if images.shape[1:] != (28, 28):
            raise RuntimeError(f"{name}: {images_path} holds images of {images.shape[1]}×{images.shape[2]} pixels, "
                               f"expected 28×28")
        if len(images) != len(labels):
            raise RuntimeError(f"{name}: {images_path} holds {len(images)} images but {labels_path} "
                               f"holds {len(labels)} labels")
        if labels.size and labels.max() >= len(self.classes):
            bad = int(np.argmax(labels >= len(self.classes)))
            raise RuntimeError(f"{name}: {labels_path} holds label {labels[bad]} at index {bad}; "
                               f"labels must be in 0..{len(self.classes) - 1}")
        self.data: Tensor = make(images)
        self.targets: Tensor = make(labels.astype(np.int64))

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, type(self).__name__, "raw")

    def _load(self, base: str, ndim: int) -> tuple[str, np.ndarray]:
        """The path and contents of one IDX file (uint8, `ndim` dimensions), its checksum checked if
        it has the original size."""
        name = type(self).__name__
        path = _fetch.find_idx(self.raw_folder, base)
        if path is None:
            raise DatasetNotFoundError(
                f"{name}: {base}[.gz] not found in {self.raw_folder}. Fetch the dataset with "
                f"{name}(root, download=True) or `python -m ember data fetch {self._fetch_name} --root {self.root}`",
                os.path.join(self.raw_folder, base))
        arr = read_idx(path)
        if arr.dtype != np.uint8 or arr.ndim != ndim:
            raise RuntimeError(f"{name}: {path} is not an MNIST {'image' if ndim == 3 else 'label'} file "
                               f"(magic 0x{0x800 + ndim:08x}: uint8, {ndim} dimension{'s' if ndim > 1 else ''}); "
                               f"it holds {arr.dtype} data of shape {arr.shape}")
        header = bytes([0, 0, 0x08, ndim]) + struct.pack(f">{ndim}I", *arr.shape)
        if len(header) + arr.nbytes == _fetch.CANONICAL_SIZES[base]:
            expected = _fetch.SHA256[self._fetch_name][base]
            digest = hashlib.sha256(header)
            digest.update(arr.data)  # the array's bytes are the file's data bytes: no copy
            if digest.hexdigest() != expected:
                raise RuntimeError(f"{name}: checksum mismatch for {path}: sha256 of its IDX bytes is "
                                   f"{digest.hexdigest()}, expected {expected} (a corrupt file, or another "
                                   f"dataset's; fetch it again with download=True)")
        return path, arr


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST (same layout and API as `MNIST`), from `root/FashionMNIST/raw/`."""

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
    _fetch_name = "fashion-mnist"
