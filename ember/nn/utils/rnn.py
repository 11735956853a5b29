"""Variable-length sequences for the recurrent layers (PyTorch's `torch.nn.utils.rnn`).

A PackedSequence holds a batch of sequences time-major without padding: `data` (N, *) has the rows of step
t at data[off[t]:off[t] + batch_sizes[t]], the sequences sorted longest first (`sorted_indices` maps sorted
position -> original batch index, `unsorted_indices` is its inverse). Packing and padding are one gather
each, so gradients flow through them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import cat, full, index_select, stack, tensor
from ..._tensor import Tensor
from ...backend import to_host

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
           "unpack_sequence", "unpad_sequence", "invert_permutation"]


class _PackedBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedBase):
    """(data, batch_sizes, sorted_indices, unsorted_indices); batch_sizes is an int64 CPU tensor."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """data moved/cast like Tensor.to; the index tensors follow the device only."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        idx = [None if t is None else t.to(dev) for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *idx)

    def cpu(self) -> "PackedSequence":
        return self.to("cpu")

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    dev = permutation.device if isinstance(permutation, Tensor) else None
    # a handful of indices: inverted on the host, returned on the permutation's device
    p = to_host(permutation._data) if dev is not None else np.asarray(permutation)
    inv = np.empty_like(p)
    inv[p] = np.arange(len(p), dtype=p.dtype)
    return tensor(inv, device=dev)


def _lengths_array(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        # lengths drive Python-level packing: read on the host (PyTorch wants them there too)
        return to_host(lengths._data).astype(np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded (T, B, *) (or (B, T, *) with batch_first) batch of sequences of the given lengths."""
    lens = _lengths_array(lengths)
    bdim = 0 if batch_first else 1
    if input.dim() < 2:
        raise ValueError(f"pack_padded_sequence(): input must have at least 2 dimensions, got {input.dim()}")
    b, t = input.shape[bdim], input.shape[1 - bdim]
    if len(lens) != b:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} (batch_size={b})")
    if (lens <= 0).any():
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           f"is <= 0 (lengths {lens.tolist()})")
    if lens.max() > t:
        raise RuntimeError(f"pack_padded_sequence(): lengths {lens.tolist()} has an entry longer than the sequence "
                           f"length {t} of the input")
    if enforce_sorted:
        if (np.diff(lens) > 0).any():
            raise RuntimeError(
                f"`lengths` array must be sorted in decreasing order when `enforce_sorted` is True (got "
                f"{lens.tolist()}). You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                f"to sidestep this requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
    tmax = int(lens[0])
    # batch_sizes[t] = number of sequences longer than t
    bsz = (lens[None, :] > np.arange(tmax)[:, None]).sum(1).astype(np.int64)
    src = order if order is not None else np.arange(b)
    # row (t, j) of the packed data is input[t, src[j]] (time-major)
    rows = np.concatenate([tt * b + src[:k] for tt, k in enumerate(bsz)]) if not batch_first else \
        np.concatenate([src[:k] * t + tt for tt, k in enumerate(bsz)])
    flat = input.reshape((b * t,) + tuple(input.shape[2:]))
    dev = input.device
    data = index_select(flat, 0, tensor(rows, device=dev))
    si = None if order is None else tensor(order, device=dev)
    return PackedSequence(data, tensor(bsz), si, None)  # batch_sizes stays on the CPU, as in PyTorch


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple:
    """The padded (T, B, *) batch (B, T, * with batch_first) and its lengths (an int64 tensor), in the original
    batch order; T is total_length when given (at least the longest sequence)."""
    data, bsz = sequence.data, to_host(sequence.batch_sizes._data).astype(np.int64, copy=False)
    tmax, b = len(bsz), int(bsz[0])
    if total_length is not None:
        if total_length < tmax:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {tmax}")
        tmax = total_length
    lens = (bsz[None, :] > np.arange(b)[:, None]).sum(1)  # per sorted position
    n = data.shape[0]
    off = np.concatenate(([0], np.cumsum(bsz)[:-1]))
    # padded position (t, j) reads packed row off[t] + j, or row n (the padding row) when j is not active
    idx = np.full((tmax, b), n, np.int64)
    for t, k in enumerate(bsz):
        idx[t, :k] = off[t] + np.arange(k)
    # the permutation reorders the host-side gather plan, so it is read on the host
    unsorted = None if sequence.unsorted_indices is None else to_host(sequence.unsorted_indices._data)
    if unsorted is not None:
        idx = idx[:, unsorted]
        lens = lens[unsorted]
    if batch_first:
        idx = idx.T
    pad = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    rows = index_select(cat([data, pad], 0), 0, tensor(idx.reshape(-1), device=data.device))
    return rows.reshape(idx.shape + tuple(data.shape[1:])), tensor(lens.astype(np.int64))  # lengths on the CPU


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes (L_i, *) into (L_max, B, *) (or (B, L_max, *)), padded on `padding_side`."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("pad_sequence(): received an empty list of sequences")
    trail = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if tuple(s.shape[1:]) != trail:
            raise RuntimeError(f"pad_sequence(): sequence {i} has shape {list(s.shape)}, whose trailing dimensions "
                               f"differ from the first sequence's {list(seqs[0].shape)}")
    lmax = max(s.shape[0] for s in seqs)
    parts = []
    for s in seqs:
        k = lmax - s.shape[0]
        if k:
            pad = full((k,) + trail, padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        parts.append(s)
    return stack(parts, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """pack_padded_sequence(pad_sequence(sequences), their lengths, enforce_sorted=enforce_sorted)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The list of sequences padded_sequences[:lengths[i], i] (batch_first: [i, :lengths[i]])."""
    lens = _lengths_array(lengths)
    if batch_first:
        return [padded_sequences[i, :int(k)] for i, k in enumerate(lens)]
    return [padded_sequences[:int(k), i] for i, k in enumerate(lens)]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of the packed sequences, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
