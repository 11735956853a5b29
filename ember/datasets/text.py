"""Character-level text data: a vocabulary and next-character windows over a text.

The default text ships inside ember (no network needed): the Book of Genesis from the World
English Bible, public domain; see data/GENESIS_LICENSE.txt for its source and how it was made.
"""
from __future__ import annotations

from importlib import resources

import numpy as np

from .._tensor import Tensor, make
from ..utils.data import Dataset

__all__ = ["CharText", "Vocab", "default_text"]


def default_text() -> str:
    """The embedded public-domain text (Genesis, World English Bible): 186,800 characters."""
    return resources.files(__package__).joinpath("data", "genesis.txt").read_text(encoding="utf-8")


class Vocab:
    """The sorted distinct characters of a text; `encode` maps a string to int64 indices, `decode` back."""

    def __init__(self, chars) -> None:
        self.chars: list[str] = sorted(set(chars))
        if not self.chars:
            raise ValueError("Vocab: the text is empty; a character vocabulary needs at least one character")
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def __repr__(self) -> str:
        return f"Vocab({len(self)} characters)"

    def encode(self, text: str) -> np.ndarray:
        try:
            return np.fromiter((self.index[c] for c in text), np.int64, len(text))
        except KeyError as e:
            raise ValueError(f"Vocab.encode: character {e.args[0]!r} is not in the vocabulary "
                             f"({len(self)} characters)") from None

    def decode(self, indices) -> str:
        a = indices.numpy() if isinstance(indices, Tensor) else np.asarray(indices)
        if a.size and (a.min() < 0 or a.max() >= len(self)):
            raise ValueError(f"Vocab.decode: indices must be in [0, {len(self)}), got {int(a.min())}..{int(a.max())}")
        return "".join(self.chars[i] for i in a.reshape(-1).tolist())


class CharText(Dataset):
    """Next-character prediction windows: item i is (x, y), two int64 tensors of length `seq_len`
    with y[t] = the character after x[t].

    The text (default: `default_text()`) is split by position: the first `1 - test_fraction`
    for training and the rest for testing (so test windows are unseen text). Windows start every
    `stride` characters (default `seq_len`: non-overlapping). The vocabulary is that of the whole
    text, so both splits encode alike; pass `vocab=` to reuse a saved one."""

    def __init__(self, text: str | None = None, seq_len: int = 64, train: bool = True, test_fraction: float = 0.1,
                 stride: int | None = None, vocab: Vocab | None = None) -> None:
        text = default_text() if text is None else text
        if not isinstance(seq_len, int) or seq_len < 1:
            raise ValueError(f"CharText: seq_len must be a positive int, got {seq_len!r}")
        stride = seq_len if stride is None else stride
        if not isinstance(stride, int) or stride < 1:
            raise ValueError(f"CharText: stride must be a positive int, got {stride!r}")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"CharText: test_fraction must be in (0, 1), got {test_fraction}")
        self.vocab = vocab if vocab is not None else Vocab(text)
        cut = int(len(text) * (1.0 - test_fraction))
        part = text[:cut] if train else text[cut:]
        if len(part) < seq_len + 1:
            raise ValueError(f"CharText: the {'train' if train else 'test'} split has {len(part)} characters, "
                             f"fewer than seq_len + 1 = {seq_len + 1}; use a longer text or a shorter seq_len")
        self.train, self.seq_len, self.stride = train, seq_len, stride
        self.data: Tensor = make(self.vocab.encode(part))
        self._starts = np.arange(0, len(part) - seq_len, stride)

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        n = len(self._starts)
        if not -n <= i < n:
            raise IndexError(f"CharText: index {i} is out of range for {n} windows")
        s = int(self._starts[i])
        d = self.data._data
        return make(d[s:s + self.seq_len]), make(d[s + 1:s + 1 + self.seq_len])

    def __repr__(self) -> str:
        return (f"CharText({'train' if self.train else 'test'}: {len(self):,} windows of {self.seq_len} characters, "
                f"vocabulary of {len(self.vocab)})")
