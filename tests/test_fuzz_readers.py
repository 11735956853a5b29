"""Hostile files: the IDX (MNIST), CIFAR-10 and checkpoint readers fed mutated valid files.

Every case may only return a correct result — the original when the file is unchanged, and
otherwise exactly what the mutated bytes say (checked against an independent parse) — or raise
the reader's own clear error naming the file: RuntimeError from `read_idx`, MNIST and CIFAR10
(pickle.UnpicklingError for a refused global), ValueError "ember.load: cannot load '<file>'" from
`ember.load`. Every call also runs under a wall-clock limit (no hang) and under tracemalloc (no
allocation sized by a header's claim: the test files are tiny, so a few MB is the ceiling).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import pickle
import re
import shutil
import signal
import struct
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.datasets import CIFAR10, MNIST, mnist
from ember.datasets.cifar import _ForbiddenGlobal, _read_binary_batch, _read_python_batch
from ember.datasets.mnist import read_idx

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TIME_LIMIT_S = 2.0  # the files are a few KB: any read taking this long is a hang, even on a busy CI core
PEAK_LIMIT = 8 << 20  # the largest legitimate buffer is read_idx's 4 MiB gzip chunk


# ---------------------------------------------------------------------- the guard
class _Hang(BaseException):
    """Raised by SIGALRM; a BaseException so that a reader's `except Exception` cannot swallow it."""


def _alarm(signum, frame):
    raise _Hang()


@contextlib.contextmanager
def _limits(seconds: float = TIME_LIMIT_S, peak: int = PEAK_LIMIT) -> Iterator[None]:
    """Fail if the body runs longer than `seconds` or its traced allocations peak above `peak` bytes."""
    old = signal.signal(signal.SIGALRM, _alarm)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Hang:
        pytest.fail(f"the reader did not finish within {seconds} s (a hang)")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        used = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    assert used < peak, f"the reader allocated {used} bytes at peak (limit {peak}): sized by an untrusted header?"


def _outcome(call: Callable[[], Any], allowed: list[tuple[type, str]]) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, error) where the error is one of `allowed` (type, message regex);
    anything else escaping the reader fails the test."""
    with _limits():
        try:
            return call(), None
        except _Hang:
            raise
        except Exception as e:  # noqa: BLE001 - sorted out below
            for typ, pattern in allowed:
                if type(e) is typ and re.search(pattern, str(e)):
                    return None, e
            raise AssertionError(f"an unclear error escaped the reader: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------- mutations
def _mutate(data: bytes, ops: list[tuple[str, float, int, bytes]], boundaries: list[int]) -> bytes:
    """Apply each (kind, where in [0, 1), int argument, bytes argument) to `data`."""
    b = bytearray(data)
    for kind, where, k, payload in ops:
        if kind == "truncate_at_boundary" and boundaries:
            cut = boundaries[int(where * len(boundaries))] + (k % 3) - 1  # at, just before, just after
            del b[max(cut, 0):]
            continue
        pos = int(where * (len(b) + 1))
        if kind == "flip" and b:
            pos = min(pos, len(b) - 1)
            b[pos] ^= (k % 255) + 1
        elif kind == "set_byte" and b:
            b[min(pos, len(b) - 1)] = k % 256
        elif kind == "truncate":
            del b[pos:]
        elif kind == "insert":
            b[pos:pos] = payload
        elif kind == "delete":
            del b[pos:pos + 1 + k % 16]
        elif kind == "overwrite_u32":  # a length / dimension / count field set to something huge
            b[pos:pos + 4] = struct.pack(">I" if k % 2 else "<I", [0xFFFFFFFF, 0x7FFFFFFF, 10 ** 9, 1 << 24][k % 4])
    return bytes(b)


_OP = st.tuples(st.sampled_from(["flip", "set_byte", "truncate", "truncate_at_boundary", "insert", "delete",
                                 "overwrite_u32", "flip"]),
                st.floats(0, 1, exclude_max=True), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8))
OPS = st.lists(_OP, min_size=1, max_size=3)


# ---------------------------------------------------------------------- IDX
_IDX_NATIVE = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.int16, 0x0C: np.int32, 0x0D: np.float32, 0x0E: np.float64}


def _idx_bytes(arr: np.ndarray, code: int) -> bytes:
    return bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + \
        arr.astype(np.dtype(_IDX_NATIVE[code]).newbyteorder(">")).tobytes()


def _idx_check(result: np.ndarray, raw: bytes) -> None:
    """`result` is exactly what the (decompressed) IDX bytes `raw` say: independent re-encoding."""
    assert isinstance(result, np.ndarray) and result.flags.writeable and result.dtype.isnative
    code, ndim = raw[2], raw[3]
    assert raw[:2] == b"\0\0" and result.dtype == _IDX_NATIVE[code]
    assert result.shape == struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    assert _idx_bytes(result, code) == raw


_RNG = np.random.default_rng(0)
IDX_BASES = {  # (type code, array): one of each type, and the MNIST shapes
    "u8_images": (0x08, _RNG.integers(0, 256, (3, 28, 28), dtype=np.uint8)),
    "u8_labels": (0x08, np.array([3, 1, 4, 1, 5], np.uint8)),
    "i8": (0x09, _RNG.integers(-128, 128, (4, 5), dtype=np.int8)),
    "i16": (0x0B, _RNG.integers(-3000, 3000, (2, 3, 4), dtype=np.int16)),
    "i32": (0x0C, _RNG.integers(-10 ** 9, 10 ** 9, (7,), dtype=np.int32)),
    "f32": (0x0D, _RNG.standard_normal((3, 4)).astype(np.float32)),
    "f64": (0x0E, _RNG.standard_normal((2, 2, 2, 2)).astype(np.float64)),
}


def _idx_boundaries(code: int, arr: np.ndarray) -> list[int]:
    head = 4 + 4 * arr.ndim
    return [0, 2, 3, 4, *(4 + 4 * i for i in range(arr.ndim)), head, head + arr.itemsize,
            head + arr.nbytes // 2, head + arr.nbytes]


@pytest.fixture(scope="module")
def workdir() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="ember_fuzz_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@FUZZ
@given(base=st.sampled_from(sorted(IDX_BASES)), ops=OPS, gz=st.booleans())
def test_read_idx_mutated(workdir, base, ops, gz):
    code, arr = IDX_BASES[base]
    original = _idx_bytes(arr, code)
    raw = _mutate(original, ops, _idx_boundaries(code, arr))
    path = os.path.join(workdir, "fuzz.idx")
    with open(path, "wb") as f:
        f.write(gzip.compress(raw, mtime=0) if gz else raw)
    result, err = _outcome(lambda: read_idx(path), [(RuntimeError, rf"^read_idx: {re.escape(path)} ")])
    if err is None:
        _idx_check(result, raw)
        if raw == original:
            np.testing.assert_array_equal(result, arr)
    else:
        assert raw != original, f"an intact file was refused: {err}"


@FUZZ
@given(ops=OPS, where=st.floats(0, 1, exclude_max=True), k=st.integers(0, 255))
def test_read_idx_mutated_gzip_stream(workdir, ops, where, k):
    """Corrupt the gzip container itself (CRC, length, deflate stream), not the IDX bytes."""
    code, arr = IDX_BASES["u8_labels"]
    gz = bytearray(gzip.compress(_idx_bytes(arr, code), mtime=0))
    gz = _mutate(bytes(gz), ops, [0, 2, 10, len(gz) - 8, len(gz) - 4, len(gz)])
    path = os.path.join(workdir, "fuzz.idx.gz")
    with open(path, "wb") as f:
        f.write(gz)
    result, err = _outcome(lambda: read_idx(path), [(RuntimeError, rf"^read_idx: {re.escape(path)} ")])
    if err is None:
        with open(path, "rb") as f:
            head = f.read(2)
        raw = gzip.decompress(gz) if head == b"\x1f\x8b" else gz
        _idx_check(result, raw)


@FUZZ
@given(code=st.one_of(st.sampled_from(sorted(_IDX_NATIVE)), st.integers(0, 255)),
       ndim=st.one_of(st.integers(0, 4), st.integers(62, 68), st.integers(0, 255)), dims=st.lists(
    st.sampled_from([0, 1, 1, 1, 2, 28, 1000, 10 ** 6, 10 ** 9, 0xFFFFFFFF]), min_size=0, max_size=70),
    body=st.one_of(st.integers(0, 64), st.just("exact")))
def test_read_idx_arbitrary_headers(workdir, code, ndim, dims, body):
    """Any type code, any number of dimensions (up to 255: past NumPy's 64), dimensions up to 2^32-1,
    and a body of arbitrary length or of exactly the claimed length (when that is small)."""
    dims = (dims * (ndim // max(len(dims), 1) + 1))[:ndim] if dims and body == "exact" else dims[:ndim]
    if body == "exact":
        claim = int(np.prod(dims, dtype=object)) * np.dtype(_IDX_NATIVE.get(code, np.uint8)).itemsize
        body = claim if claim <= 4096 else 0
    raw = bytes([0, 0, code, ndim]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(body)
    path = os.path.join(workdir, "header.idx")
    with open(path, "wb") as f:
        f.write(raw)
    result, err = _outcome(lambda: read_idx(path), [(RuntimeError, rf"^read_idx: {re.escape(path)} ")])
    if err is None:
        _idx_check(result, raw)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_header_claiming_10_to_12_elements_allocates_nothing(workdir, monkeypatch, gz):
    """dims (10^6, 10^6) of uint8 is 10^12 bytes: refused on the file's real length, before any buffer
    of the claimed size exists (tracemalloc peak, and no bytearray or array of that size requested)."""
    raw = bytes([0, 0, 0x08, 2]) + struct.pack(">2I", 10 ** 6, 10 ** 6) + bytes(100)
    path = os.path.join(workdir, "huge.idx" + (".gz" if gz else ""))
    with open(path, "wb") as f:
        f.write(gzip.compress(raw) if gz else raw)
    requested = []
    real_bytearray, real_frombuffer = bytearray, np.frombuffer
    monkeypatch.setattr(mnist, "bytearray", lambda *a: requested.append(a[:1]) or real_bytearray(*a), raising=False)
    monkeypatch.setattr(np, "frombuffer", lambda *a, **k: requested.append("frombuffer") or real_frombuffer(*a, **k))
    with _limits(peak=5 << 20), pytest.raises(RuntimeError, match=r"huge\.idx(\.gz)? is truncated: dimensions "
                                                                  r"\(1000000, 1000000\) of uint8 need 10{12} bytes"):
        read_idx(path)
    assert all(r == () or (isinstance(r[0], int) and r[0] < 1 << 20) for r in requested if r != "frombuffer"), requested
    assert "frombuffer" not in requested


def test_read_idx_more_dimensions_than_numpy_allows(workdir):
    raw = bytes([0, 0, 0x08, 65]) + struct.pack(">65I", *[1] * 65) + b"\x07"
    path = os.path.join(workdir, "deep.idx")
    with open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(RuntimeError, match=r"deep\.idx is not a readable IDX file: its header announces 65 "
                                           r"dimensions, more than the 64"):
        read_idx(path)


# ---------------------------------------------------------------------- MNIST on a directory
_MNIST_IMAGES = _RNG.integers(0, 256, (3, 28, 28), dtype=np.uint8)
_MNIST_LABELS = np.array([7, 0, 9], np.uint8)


@settings(FUZZ, max_examples=100)
@given(which=st.sampled_from(["images", "labels"]), ops=OPS, gz=st.booleans())
def test_mnist_dataset_on_mutated_files(workdir, which, ops, gz):
    raw_dir = os.path.join(workdir, "mnist", "MNIST", "raw")
    shutil.rmtree(os.path.join(workdir, "mnist"), ignore_errors=True)
    os.makedirs(raw_dir)
    files = {"images": ("train-images-idx3-ubyte", _idx_bytes(_MNIST_IMAGES, 0x08)),
             "labels": ("train-labels-idx1-ubyte", _idx_bytes(_MNIST_LABELS, 0x08))}
    for key, (name, data) in files.items():
        if key == which:
            data = _mutate(data, ops, _idx_boundaries(0x08, _MNIST_IMAGES if key == "images" else _MNIST_LABELS))
            files[key] = (name, data)
        with open(os.path.join(raw_dir, name + (".gz" if gz and key == which else "")), "wb") as f:
            f.write(gzip.compress(data, mtime=0) if gz and key == which else data)
    ds, err = _outcome(lambda: MNIST(os.path.join(workdir, "mnist")),
                       [(RuntimeError, r"^(MNIST|read_idx): .*train-(images|labels)-idx")])
    if err is None:
        images, labels = ds.data.numpy(), ds.targets.numpy()
        _idx_check(images, files["images"][1])
        _idx_check(labels.astype(np.uint8), files["labels"][1])
        assert images.shape[1:] == (28, 28) and len(images) == len(labels) == len(ds)
        assert labels.dtype == np.int64 and ((0 <= labels) & (labels <= 9)).all()
        img, target = ds[len(ds) - 1]
        np.testing.assert_array_equal(np.asarray(img), images[-1])


# ---------------------------------------------------------------------- CIFAR-10
_CIFAR_N = 3
_CIFAR_DATA = _RNG.integers(0, 256, (_CIFAR_N, 3072), dtype=np.uint8)
_CIFAR_LABELS = [0, 9, 4]
_RECORD = 3073


def _bin_batch(data=_CIFAR_DATA, labels=_CIFAR_LABELS) -> bytes:
    return np.concatenate([np.asarray(labels, np.uint8)[:, None], data], axis=1).tobytes()


# a refused global raises the reader's own UnpicklingError subclass (PyTorch's weights_only loader raises UnpicklingError too)
_CIFAR_ERRORS = [(RuntimeError, r"^CIFAR10: "), (_ForbiddenGlobal, r"^CIFAR10: refusing to load ")]


@FUZZ
@given(ops=OPS)
def test_cifar_binary_batch_mutated(workdir, ops):
    original = _bin_batch()
    raw = _mutate(original, ops, [0, 1, _RECORD - 1, _RECORD, _RECORD + 1, 2 * _RECORD, len(original)])
    path = os.path.join(workdir, "data_batch_1.bin")
    with open(path, "wb") as f:
        f.write(raw)
    result, err = _outcome(lambda: _read_binary_batch(path), [(RuntimeError, rf"^CIFAR10: {re.escape(path)} ")])
    if err is None:
        data, labels = result
        assert data.dtype == np.uint8 and data.shape[1:] == (3, 32, 32) and labels.dtype == np.int64
        assert ((0 <= labels) & (labels <= 9)).all()
        assert _bin_batch(data.reshape(len(data), -1), labels) == raw  # exactly the file's records
    else:
        assert raw != original


def _py_batch(protocol: int) -> bytes:
    return pickle.dumps({"batch_label": "training batch 1 of 5", "labels": _CIFAR_LABELS, "data": _CIFAR_DATA,
                         "filenames": [f"img_{i}.png" for i in range(_CIFAR_N)]}, protocol=protocol)


@settings(FUZZ, max_examples=250)
@given(protocol=st.sampled_from([0, 2, 3, 4, 5]), ops=OPS)
def test_cifar_python_batch_mutated(workdir, protocol, ops):
    original = _py_batch(protocol)
    raw = _mutate(original, ops, [0, 2, len(original) // 2, len(original) - 1, len(original)])
    path = os.path.join(workdir, "data_batch_1")
    with open(path, "wb") as f:
        f.write(raw)
    result, err = _outcome(lambda: _read_python_batch(path), _CIFAR_ERRORS)
    if err is None:
        data, labels = result
        assert data.dtype == np.uint8 and data.ndim == 4 and data.shape[1:] == (3, 32, 32)
        assert labels.dtype == np.int64 and labels.shape == (len(data),) and ((0 <= labels) & (labels <= 9)).all()
        if raw == original:
            np.testing.assert_array_equal(data.reshape(_CIFAR_N, -1), _CIFAR_DATA)
            assert labels.tolist() == _CIFAR_LABELS
    else:
        assert path in str(err)
        assert raw != original


@pytest.mark.parametrize("opcode, fmt", [(b"B", "<I"), (b"\x8e", "<Q"), (b"X", "<I"), (b"\x96", "<Q")])
def test_cifar_pickle_length_claims_are_checked_before_allocating(workdir, opcode, fmt):
    """A counted bytes / str / bytearray claiming 2 GiB (or 2^60) in a 300-byte file: the stdlib
    unpickler would allocate the claim before reading; the reader must refuse it first."""
    claim = 0x7FFFFFFF if fmt == "<I" else 1 << 60
    raw = b"\x80\x04" + opcode + struct.pack(fmt, claim) + bytes(300)
    path = os.path.join(workdir, "data_batch_1")
    with open(path, "wb") as f:
        f.write(raw)
    with _limits(peak=1 << 20), pytest.raises(RuntimeError, match="data_batch_1 is not a valid CIFAR-10 python batch"):
        _read_python_batch(path)


def test_cifar_codecs_encode_is_limited_to_latin1(workdir):
    """Protocol-2 pickles rebuild bytes with _codecs.encode(text, 'latin1'); another codec (here
    zlib_codec, a decompressor) is refused."""
    raw = (b"\x80\x02}(X\x04\x00\x00\x00datac_codecs\nencode\nX\x01\x00\x00\x00aX\x0a\x00\x00\x00zlib_codec"
           b"\x86RX\x06\x00\x00\x00labels]u.")
    path = os.path.join(workdir, "data_batch_1")
    with open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(RuntimeError, match=r"data_batch_1 is not a valid CIFAR-10 python batch .*latin1.*zlib_codec"):
        _read_python_batch(path)


@settings(FUZZ, max_examples=100)
@given(kind=st.sampled_from(["bin", "py"]), victim=st.sampled_from(["data_batch_3", "meta"]), ops=OPS)
def test_cifar_dataset_on_mutated_directory(workdir, kind, victim, ops):
    root = os.path.join(workdir, "cifar")
    shutil.rmtree(root, ignore_errors=True)
    folder = os.path.join(root, "cifar-10-batches-bin" if kind == "bin" else "cifar-10-batches-py")
    os.makedirs(folder)
    names = [f"data_batch_{i}" for i in range(1, 6)]
    for n in names:
        with open(os.path.join(folder, n + (".bin" if kind == "bin" else "")), "wb") as f:
            raw = _bin_batch() if kind == "bin" else _py_batch(2)
            f.write(_mutate(raw, ops, [_RECORD, len(raw)]) if n == victim else raw)
    classes = list(CIFAR10.classes)
    meta = ("\n".join(classes) + "\n").encode() if kind == "bin" else pickle.dumps({"label_names": classes}, 2)
    with open(os.path.join(folder, "batches.meta.txt" if kind == "bin" else "batches.meta"), "wb") as f:
        f.write(_mutate(meta, ops, [len(meta)]) if victim == "meta" else meta)
    ds, err = _outcome(lambda: CIFAR10(root), _CIFAR_ERRORS)
    if err is None:
        assert ds.data.dtype == np.uint8 and ds.data.shape[1:] == (32, 32, 3) and len(ds) == len(ds.targets)
        assert all(isinstance(t, int) and 0 <= t <= 9 for t in ds.targets)
        assert len(ds.classes) == 10 and all(isinstance(c, str) for c in ds.classes)
        if victim == "meta":  # the batches are intact
            assert len(ds) == 5 * _CIFAR_N and ds.targets == _CIFAR_LABELS * 5
        img, target = ds[0]
        assert img.shape == (32, 32, 3)


# ---------------------------------------------------------------------- checkpoints
_SD = {"w": np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "b": np.array([1, -2, 3, 1 << 40], np.int64),
       "mask": np.array([True, False, True]), "h": np.array([[0.5, -1.0], [65504.0, 1e-3]], np.float16),
       "empty": np.zeros((0, 4), np.float64)}


def _checkpoint(obj: Any = None) -> bytes:
    buf = io.BytesIO()
    ember.save({k: ember.from_numpy(v.copy()) for k, v in _SD.items()} if obj is None else obj, buf)
    return buf.getvalue()


_ST_DTYPES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "F16": "<f2",
              "F32": "<f4", "F64": "<f8", "BF16": "<u2"}


def _parse_safetensors(raw: bytes) -> dict[str, np.ndarray]:
    """An independent reading of the tensors in `raw`, as native arrays (BF16 widened to float32)."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw[8 + n + begin:8 + n + end], _ST_DTYPES[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(arr.dtype.newbyteorder("="))
    return out


def _tensors_in(obj: Any) -> Iterator[Any]:
    if isinstance(obj, ember.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors_in(v)


def _load_outcome(path: str):
    return _outcome(lambda: ember.load(path), [(ValueError, rf"^ember\.load: cannot load '{re.escape(path)}': ")])


def _check_loaded(result: Any, raw: bytes) -> None:
    """Every tensor `load` returned holds exactly the bytes the file gives some tensor of its header."""
    truth = _parse_safetensors(raw)
    for t in _tensors_in(result):
        arr = t.numpy()
        assert arr.flags.writeable and not t.requires_grad
        assert any(a.dtype == arr.dtype and a.shape == arr.shape and a.tobytes() == arr.tobytes()
                   for a in truth.values()), f"a loaded tensor matches no tensor of the file: {arr!r}"


def _same_as_sd(result: Any, sd: dict[str, np.ndarray]) -> None:
    assert isinstance(result, dict) and sorted(result) == sorted(sd)
    for k, v in sd.items():
        got = result[k].numpy()
        assert got.dtype == v.dtype and got.shape == v.shape and got.tobytes() == v.tobytes(), k


@settings(FUZZ, max_examples=300)
@given(ops=OPS)
def test_load_mutated_bytes(workdir, ops):
    original = _checkpoint()
    n = int.from_bytes(original[:8], "little")
    raw = _mutate(original, ops, [0, 4, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(original) - 1,
                                  len(original)])
    path = os.path.join(workdir, "fuzz.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    result, err = _load_outcome(path)
    if err is None:
        _check_loaded(result, raw)
        if raw[:8 + n] == original[:8 + n]:  # header intact: the same dict, with the file's data bytes
            _same_as_sd(result, _parse_safetensors(raw))
        if raw == original:
            _same_as_sd(result, _SD)
            assert list(result) == list(_SD)
    else:
        assert raw != original


_BIGNUM = "<a 5001-digit integer>"  # Python cannot write it as JSON; _with_header spells it out
_HUGE = [10 ** 12, 2 ** 63, 2 ** 64 + 1, -1, -(10 ** 12), _BIGNUM]
_JSON_VALUES = st.one_of(st.none(), st.booleans(), st.sampled_from(_HUGE), st.integers(-5, 100),
                         st.floats(allow_nan=False), st.text(max_size=6), st.builds(list), st.builds(dict),
                         st.sampled_from(list(_ST_DTYPES) + ["U16", "C64", "F8_E4M3", "f32", "", "F32 "]))


@st.composite
def _header_edits(draw) -> list:
    """Edits to the header JSON: a tensor's dtype, shape or offsets set to a hostile value."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(_SD) + ["__metadata__"]))
        field = draw(st.sampled_from(["dtype", "shape", "data_offsets", "whole", "shape_huge", "offsets_shift",
                                      "offsets_swap", "offsets_past_end", "metadata_tree"]))
        value = draw(st.one_of(_JSON_VALUES, st.lists(_JSON_VALUES, max_size=3)))
        edits.append((name, field, value, draw(st.integers(-16, 16))))
    return edits


def _apply_edits(header: dict, edits: list, data_size: int) -> None:
    spans = {name: info["data_offsets"] for name, info in header.items() if name != "__metadata__"}
    for name, field, value, k in edits:
        if not isinstance(header[name], dict):  # replaced whole by an earlier edit
            continue
        if name == "__metadata__":
            meta = header["__metadata__"]
            if field == "metadata_tree":
                meta["ember"] = json.dumps({"version": 1, "tree": {"dict": [["w", {"tensor": str(value)}]]}})
            elif field == "whole":
                header["__metadata__"] = value
            else:
                meta["ember"] = meta["ember"][:max(0, len(meta["ember"]) + k)] if k < 0 else str(value)
            continue
        info = header[name]
        begin, end = spans[name]
        if field in ("dtype", "shape", "data_offsets"):
            info[field] = value
        elif field == "whole":
            header[name] = value
        elif field == "shape_huge":  # 10^12 elements (or more), offsets unchanged or made to agree
            info["shape"] = [10 ** 6, 10 ** 6] if k % 3 == 0 else [10 ** 12] if k % 3 == 1 else [2 ** 40] * 3
            if k > 0 and info.get("dtype") in _ST_DTYPES:  # offsets that agree with the claim
                count = 10 ** 12 if k % 3 < 2 else 2 ** 120
                info["data_offsets"] = [begin, begin + count * np.dtype(_ST_DTYPES[info["dtype"]]).itemsize]
        elif field == "offsets_shift":
            info["data_offsets"] = [begin + k, end + k]
        elif field == "offsets_swap":
            info["data_offsets"] = [end, begin]
        elif field == "offsets_past_end":
            info["data_offsets"] = [data_size + k, data_size + k + (end - begin)]
        elif field == "metadata_tree":
            info["data_offsets"] = [0, end - begin]  # overlaps the first tensor


def _with_header(header: Any, body: bytes, pad: int = 0) -> bytes:
    text = json.dumps(header).replace(json.dumps(_BIGNUM), "1" + "0" * 5000).encode() + b" " * pad
    return len(text).to_bytes(8, "little") + text + body


@settings(FUZZ, max_examples=300)
@given(edits=_header_edits())
def test_load_hostile_header_fields(workdir, edits):
    original = _checkpoint()
    n = int.from_bytes(original[:8], "little")
    header, body = json.loads(original[8:8 + n]), original[8 + n:]
    _apply_edits(header, edits, len(body))
    raw = _with_header(header, body)
    path = os.path.join(workdir, "edited.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    result, err = _load_outcome(path)
    if err is None:
        _check_loaded(result, raw)


@pytest.mark.parametrize("shape, offsets", [([10 ** 6, 10 ** 6], [0, 4 * 10 ** 12]), ([10 ** 12], [0, 4]),
                                            ([10 ** 6, 10 ** 6], [0, 16]), ([0, 10 ** 12], [0, 0])])
def test_load_header_claiming_10_to_12_elements_allocates_nothing(workdir, monkeypatch, shape, offsets):
    """A tensor of 10^12 float32 in a 16-byte data section is refused before any array is allocated;
    a zero-size one with a 10^12 dimension loads as the empty array it is."""
    raw = _with_header({"t": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}, bytes(offsets[1] and 16))
    path = os.path.join(workdir, "huge.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    sizes = []
    real_empty = np.empty
    monkeypatch.setattr(np, "empty", lambda s, *a, **k: sizes.append(s) or real_empty(s, *a, **k))
    with _limits(peak=1 << 20):
        if 0 in shape:
            assert ember.load(path)["t"].shape == tuple(shape)
        else:
            with pytest.raises(ValueError, match=r"huge\.safetensors': tensor 't': data_offsets .* (span|run past)"):
                ember.load(path)
            assert sizes == []


@pytest.mark.parametrize("what", ["header_array", "header_object", "tree", "tree_dict"])
def test_load_deep_json(workdir, what):
    """JSON nested 100,000 deep in the header or in ember's tree: a clear error, no RecursionError."""
    depth = 100_000
    deep = {"header_array": "[" * depth + "]" * depth, "header_object": '{"a":' * depth + "1" + "}" * depth,
            "tree": "[" * depth + "]" * depth,
            "tree_dict": '{"tuple":[' * depth + "1" + "]}" * depth}[what]
    if what.startswith("header"):
        text = ('{"__metadata__":{},"x":' + deep + "}").encode()
    else:
        tree = '{"version":1,"tree":' + deep + "}"
        text = json.dumps({"__metadata__": {"ember": tree}}).encode()
    path = os.path.join(workdir, "deep.safetensors")
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
    with _limits(peak=64 << 20), pytest.raises(ValueError, match=r"deep\.safetensors': .*(nested too deeply|tensor 'x')"):
        ember.load(path)


def test_load_header_length_claims(workdir):
    """The 8-byte header length set to 2^64-1, to just over the file, and to the 100 MB limit."""
    original = _checkpoint()
    path = os.path.join(workdir, "len.safetensors")
    for n, pattern in [(2 ** 64 - 1, "over the 100000000-byte limit"), (len(original) - 7, "runs past the end"),
                       (100_000_000, "runs past the end")]:
        with open(path, "wb") as f:
            f.write(n.to_bytes(8, "little") + original[8:])
        with _limits(peak=1 << 20), pytest.raises(ValueError, match=rf"len\.safetensors': .*{pattern}"):
            ember.load(path)


def test_load_wide_header_is_fast(workdir):
    """A 5,000-tensor header (every tensor empty) and a 1 MB __metadata__ string load in time (no
    quadratic check); the limit is generous because tracemalloc slows every allocation."""
    header = {"__metadata__": {"pad": "x" * (1 << 20)}}
    header.update({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(5_000)})
    raw = _with_header(header, b"")
    path = os.path.join(workdir, "wide.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    start = time.perf_counter()
    with _limits(seconds=10, peak=64 << 20):
        out = ember.load(path)
    assert len(out) == 5_000 and time.perf_counter() - start < 5
