"""read_idx on gzip files: a decompression bomb is inflated no further than the header's claim + 1 byte.

A ~1 MB .gz that inflates to 1 GiB of zeros after a small IDX header must fail with read_idx's own
"longer than its header says" RuntimeError, quickly and with a small memory peak; valid gzip files
(and trailing garbage of a single byte) keep their exact behaviour.
"""
from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest
from helpers import write_idx

from ember.datasets import _fetch
from ember.datasets.mnist import read_idx

GIB = 1 << 30
MIB = 1 << 20


def _gzip_bomb(path, header: bytes, zeros: int) -> None:
    """A valid gzip file of `header` followed by `zeros` zero bytes (a multiple of 1 MiB), built without
    compressing them: a 1 MiB run of zeros deflated after a full flush gives the same bytes every time,
    so the stream is that block repeated (about 1 KB per MiB: 1 GiB fits in ~1 MB)."""
    assert zeros % MIB == 0
    zero_mib = bytes(MIB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip framing is written here
    head_block = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    zero_block = c.compress(zero_mib) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(zero_mib) + c.flush(zlib.Z_FULL_FLUSH) == zero_block  # the repetition is exact
    crc = zlib.crc32(header)
    for _ in range(zeros // MIB):
        crc = zlib.crc32(zero_mib, crc)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")  # magic, deflate, no flags, mtime 0, OS unknown
        f.write(head_block)
        for _ in range(zeros // MIB):
            f.write(zero_block)
        f.write(c.flush(zlib.Z_FINISH))
        f.write(struct.pack("<II", crc, (len(header) + zeros) & 0xFFFFFFFF))


class _CountingGzip(gzip.GzipFile):
    """A GzipFile that counts the decompressed bytes handed to the reader."""

    inflated = 0

    def read(self, size=-1):
        data = super().read(size)
        _CountingGzip.inflated += len(data)
        return data


@pytest.fixture
def counting_gzip(monkeypatch):
    _CountingGzip.inflated = 0
    real = _fetch._open_maybe_gzip

    def opener(path):
        f = real(path)
        if isinstance(f, gzip.GzipFile):
            f.close()
            return _CountingGzip(path, "rb")
        return f

    monkeypatch.setattr(_fetch, "_open_maybe_gzip", opener)
    return _CountingGzip


def test_bomb_fixture_is_a_real_bomb(tmp_path):
    """The bomb is a valid gzip stream of the header and then zeros (checked on its first 64 MiB), and
    its size field says 1 GiB + header: the reader's refusal below is not a corrupt-file error."""
    path = tmp_path / "bomb.gz"
    header = bytes([0, 0, 0x08, 1]) + struct.pack(">I", 10)
    _gzip_bomb(path, header, GIB)
    assert os.path.getsize(path) < 2 * MIB
    with gzip.open(path, "rb") as f:
        assert f.read(len(header)) == header
        for _ in range(64):
            chunk = f.read(MIB)
            assert len(chunk) == MIB and not any(chunk[:: 4096])
            assert chunk.count(0) == MIB
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        assert struct.unpack("<I", f.read(4))[0] == (len(header) + GIB) & 0xFFFFFFFF


@pytest.mark.parametrize("claim_dims,code", [((10,), 0x08), ((3, 28, 28), 0x08), ((1000,), 0x0D)])
def test_gzip_bomb_is_refused_after_claim_plus_one_byte(tmp_path, counting_gzip, claim_dims, code):
    """1 GiB of zeros behind a header claiming a few KB: RuntimeError naming the file, with at most
    header + claim + 1 bytes inflated, a memory peak of a few MB and well under a second of work."""
    itemsize = {0x08: 1, 0x0D: 4}[code]
    header = bytes([0, 0, code, len(claim_dims)]) + struct.pack(f">{len(claim_dims)}I", *claim_dims)
    claim = itemsize * int(np.prod(claim_dims))
    path = tmp_path / "bomb-images-idx3-ubyte.gz"
    _gzip_bomb(path, header, GIB)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match=rf"^read_idx: .*bomb-images-idx3-ubyte\.gz is longer than its header "
                                               rf"says: .* need {claim} bytes of data, the file decompresses to "
                                               rf"more than {claim}"):
            read_idx(path)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counting_gzip.inflated <= len(header) + claim + 1, counting_gzip.inflated
    assert peak < 8 * MIB, peak
    assert elapsed < 5.0, elapsed  # inflating the whole GiB takes seconds; the claim + 1 byte, milliseconds


def test_gzip_bomb_behind_a_large_claim_stops_at_claim_plus_one(tmp_path, counting_gzip):
    """A claim of 16 MiB followed by 1 GiB: inflated only to 16 MiB + 1 byte (memory ~ the claim, not the bomb)."""
    claim = 16 * MIB
    header = bytes([0, 0, 0x08, 1]) + struct.pack(">I", claim)
    path = tmp_path / "big-claim.gz"
    _gzip_bomb(path, header, GIB)
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match=r"big-claim\.gz is longer than its header says"):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counting_gzip.inflated <= len(header) + claim + 1
    assert peak < claim + 16 * MIB, peak


def test_one_trailing_byte_is_detected(tmp_path, counting_gzip):
    """Exactly one byte past the claim is enough to refuse the file."""
    arr = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    raw = bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 3, 4, 5) + arr.tobytes()
    path = tmp_path / "trailing.gz"
    path.write_bytes(gzip.compress(raw + b"\x00", mtime=0))
    with pytest.raises(RuntimeError, match=r"trailing\.gz is longer than its header says: dimensions \(3, 4, 5\) "
                                           r"of uint8 need 60 bytes"):
        read_idx(path)
    path.write_bytes(gzip.compress(raw, mtime=0))
    np.testing.assert_array_equal(read_idx(path), arr)


@pytest.mark.parametrize("compress", [True, False])
def test_valid_file_still_loads(tmp_path, counting_gzip, compress):
    """A valid IDX file, gzip or raw, loads exactly, as a writable native-order array."""
    arr = np.random.default_rng(0).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    path = tmp_path / ("images.gz" if compress else "images")
    write_idx(path, arr, compress=compress)
    out = read_idx(path)
    assert out.dtype == np.uint8 and out.shape == arr.shape and out.flags.writeable
    np.testing.assert_array_equal(out, arr)
    if compress:
        assert counting_gzip.inflated <= 16 + arr.nbytes + 1


def test_valid_big_endian_float_gzip_loads(tmp_path):
    """A float32 IDX (big-endian on disk) through gzip: native order, the same values."""
    arr = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 12)
    raw = bytes([0, 0, 0x0D, 2]) + struct.pack(">2I", 2, 12) + arr.astype(">f4").tobytes()
    path = tmp_path / "floats.gz"
    path.write_bytes(gzip.compress(raw, mtime=0))
    out = read_idx(path)
    assert out.dtype == np.float32 and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)
