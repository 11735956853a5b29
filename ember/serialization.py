"""Checkpoints: `save` and `load` in the safetensors format — never pickle, so loading an
untrusted file cannot run code.

The file, as the safetensors format lays it out:

    8 bytes   N, the length of the header (unsigned, little-endian)
    N bytes   a UTF-8 JSON object: {"__metadata__": {str: str},
              name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...},
              padded with spaces so that the data starts 8-byte aligned
    the rest  the tensors' bytes (C order, little-endian), back to back with no holes;
              offsets count from the start of this section

ember writes the tensors of `obj` into the body and the structure around them (dicts with any
scalar or tuple keys, lists, tuples, ints, floats, bools, strings, None) as JSON in
`__metadata__["ember"]`, where a tensor is a reference to its name. A plain state_dict keeps its
own keys as tensor names, so other safetensors readers (`safetensors.numpy.load_file`,
`safetensors.torch.load_file`) see the same dict; nested tensors are named by their dotted path
(`optimizer.state.0.exp_avg`). A file without ember's metadata loads as a dict of tensors.
"""
from __future__ import annotations

import io
import json
import math
import os
import secrets
import stat
import warnings
from collections import OrderedDict
from typing import Any, BinaryIO, Callable

import numpy as np

from . import _capture, backend
from . import _dtype as _dt
from ._tensor import Tensor, make

__all__ = ["save", "load"]

FORMAT_VERSION = 1  # of the JSON structure in __metadata__["ember"]; load refuses newer ones
_MAX_HEADER = 100_000_000  # the reference implementation's limit: a longer header is not a checkpoint
_ALIGN = 8

# safetensors dtype names and the little-endian NumPy dtypes they are stored as
_DTYPES = {"BOOL": np.dtype("|b1"), "U8": np.dtype("|u1"), "I8": np.dtype("|i1"), "I16": np.dtype("<i2"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"),
           "F64": np.dtype("<f8")}
_BF16 = "BF16"
if _dt.bfloat16.np is not None:  # ml_dtypes' bfloat16 (without it, BF16 is read as float32: exact, the top half)
    _DTYPES[_BF16] = _dt.bfloat16.np
_NAME_OF = {d.newbyteorder("="): name for name, d in _DTYPES.items()}
_OTHER_DTYPES = ("U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64", "C128")
_MAX_NDIM = 64  # NumPy's limit


# ====================================================================== save
def save(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """Write `obj` — a Tensor, a state_dict, or nested dicts/lists/tuples of tensors, ints, floats
    (inf/nan too), bools, strings and None — to `f` (a path or a binary file object) as safetensors.

    Writing to a path is atomic: the data go to a temporary file in the same directory, which is
    fsynced and then renamed over the target, so a crash mid-save leaves any previous file intact.
    A tensor reached twice (the same tensor, or one viewing exactly the same memory) is stored once
    and loads as one tensor in both places. NumPy scalars are saved as the Python numbers they hold.
    """
    header, arrays = _encode(obj)  # every check on obj runs before anything touches the disk
    if isinstance(f, (str, bytes, os.PathLike)):
        _save_atomic(os.fsdecode(f), header, arrays)
    elif isinstance(f, io.TextIOBase):
        raise TypeError("ember.save: f is a text-mode file; open it in binary mode ('wb')")
    elif callable(getattr(f, "write", None)):
        _write_body(f, header, arrays)
        if callable(getattr(f, "flush", None)):
            f.flush()
    else:
        raise TypeError(f"ember.save: f must be a path (str or os.PathLike) or a binary file object with "
                        f"write(), got {type(f).__name__}")


class _Encoder:
    """Walks `obj` once: JSON for the structure, the list of (name, array) for the body."""

    def __init__(self) -> None:
        self.arrays: list[tuple[str, np.ndarray]] = []
        self.names: set[str] = set()
        self.stored: dict[tuple, str] = {}  # memory identity of a tensor's array -> its name
        self.open: set[int] = set()  # containers on the current path, to catch cycles
        self.devices: dict[str, str] = {}  # name -> device, for tensors saved from a device other than the CPU

    def tensor(self, t: Tensor, parts: list) -> dict:
        if t.is_sparse:  # (a sparse COO tensor, ember/ops/sparse_ops.py: safetensors has no form for it)
            raise TypeError(f"ember.save: the tensor at {_where(parts)} is a sparse COO tensor, which the checkpoint "
                            f"format cannot hold; save t.coalesce().indices() and t.coalesce().values() (or "
                            f"t.to_dense()) instead")
        if _capture.ACTIVE is not None:
            _capture.read(t, "ember.save")  # (a pending value of ember.lazy is computed)
        arr = t._data
        if type(arr) is np.ndarray:
            key = (arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str)
        else:  # a device array: the same array object is the same tensor
            key = ("id", id(arr))
        name = self.stored.get(key)
        if name is None:
            where = None
            if type(arr) is not np.ndarray:
                where = str(backend.device_of(arr))
                arr = backend.to_host(arr)  # the file holds host bytes; the device goes in the metadata
            if arr.dtype.newbyteorder("=") not in _NAME_OF:
                raise TypeError(f"ember.save: tensor at {_where(parts)} has dtype {arr.dtype}, which the checkpoint "
                                f"format cannot hold")
            name = ".".join(map(str, parts)) if parts else "tensor"
            if name in self.names or name == "__metadata__":
                i = 1
                while f"{name}~{i}" in self.names:
                    i += 1
                name = f"{name}~{i}"
            self.names.add(name)
            self.stored[key] = name
            self.arrays.append((name, arr))
            if where is not None:
                self.devices[name] = where
        return {"tensor": name}

    def value(self, x, parts: list):
        """The JSON for `x`, found at obj[parts[0]][parts[1]]...; tensors are recorded for the body."""
        if isinstance(x, Tensor):
            return self.tensor(x, parts)
        if x is None or isinstance(x, (bool, str, int, float, np.generic)):
            return _scalar(x, parts)
        if isinstance(x, (dict, list, tuple)):
            if id(x) in self.open:
                raise ValueError(f"ember.save: obj contains a reference cycle at {_where(parts)}")
            self.open.add(id(x))
            try:
                if isinstance(x, dict):
                    items = [[self.key(k, parts), self.value(v, parts + [k])] for k, v in x.items()]
                    return {"odict" if isinstance(x, OrderedDict) else "dict": items}
                items = [self.value(v, parts + [i]) for i, v in enumerate(x)]
                return items if isinstance(x, list) else {"tuple": items}
            finally:
                self.open.discard(id(x))
        raise TypeError(f"ember.save: cannot save a {type(x).__module__}.{type(x).__qualname__} at {_where(parts)}; "
                        f"a checkpoint holds tensors, dicts, lists, tuples, int, float, bool, str and None (it is "
                        f"never pickled): convert other objects to these")

    def key(self, k, parts: list):
        if isinstance(k, tuple):
            return {"tuple": [self.key(v, parts) for v in k]}
        if k is None or isinstance(k, (bool, str, int, float, np.generic)):
            return _scalar(k, parts)
        raise TypeError(f"ember.save: cannot save a dict key of type {type(k).__name__} at {_where(parts)}; "
                        f"keys must be str, int, float, bool, None or tuples of these")


def _scalar(x, parts: list):
    if isinstance(x, str):
        return str(x)
    if isinstance(x, np.generic):
        if not isinstance(x, (np.bool_, np.integer, np.floating)):
            raise TypeError(f"ember.save: cannot save a NumPy {x.dtype} scalar at {_where(parts)}")
        x = x.item()
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, int):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else {"float": "nan" if x != x else "inf" if x > 0 else "-inf"}


def _where(parts: list) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in parts)


def _encode(obj) -> tuple[bytes, list[np.ndarray]]:
    """The file's first 8 + N bytes and the arrays of its body, in file order."""
    enc = _Encoder()
    try:
        tree = enc.value(obj, [])
        doc = {"version": FORMAT_VERSION, "tree": tree}
        if enc.devices:  # tensors saved from CUDA load back there (map_location=None), as in PyTorch
            doc["devices"] = enc.devices
        meta = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise ValueError("ember.save: obj is nested too deeply to save") from None
    # Wider dtypes first: with an 8-aligned data section every tensor then starts at a multiple of
    # its item size, so readers that map the file can use the bytes in place.
    order = sorted(enc.arrays, key=lambda na: -na[1].dtype.itemsize)
    # "format": "pt" is the tag Hugging Face's loaders look for: the tensors are laid out as PyTorch's
    header: dict = {"__metadata__": {"format": "pt", "ember": meta}}
    offset = 0
    for name, arr in order:
        header[name] = {"dtype": _NAME_OF[arr.dtype.newbyteorder("=")], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % _ALIGN)
    return len(text).to_bytes(8, "little") + text, [arr for _, arr in order]


def _write_body(f: BinaryIO, header: bytes, arrays: list[np.ndarray]) -> None:
    _write_all(f, header)
    for arr in arrays:
        if arr.size:
            # one tensor at a time: a non-contiguous view (or a big-endian host) costs one copy of it
            data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
            _write_all(f, data.reshape(-1).view(np.uint8))


def _write_all(f: BinaryIO, data) -> None:
    view = memoryview(data)
    while len(view):
        n = f.write(view)
        if n is None or n >= len(view):  # buffered files write everything; raw ones may write less
            break
        view = view[n:]


def _save_atomic(path: str, header: bytes, arrays: list[np.ndarray]) -> None:
    target = os.path.realpath(path) if os.path.islink(path) else path  # write through a symlink
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise RuntimeError(f"Parent directory {directory} does not exist.")
    stem = os.path.basename(target)[:200]
    while True:
        tmp = os.path.join(directory, f".{stem}.{secrets.token_hex(6)}.tmp")
        try:  # O_EXCL: never reuse someone else's file; mode 0o666 lets the umask decide, as open() would
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with open(fd, "wb") as fh:
            _write_body(fh, header, arrays)
            fh.flush()
            os.fsync(fh.fileno())
        try:  # overwriting keeps the old file's permissions, as writing into it would
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    """Make the rename durable (POSIX); platforms that cannot open a directory skip it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ====================================================================== load
def load(f: str | os.PathLike | BinaryIO, map_location=None, weights_only: bool = True) -> Any:
    """Read what `save` wrote (or any safetensors file: then a dict of tensors) from a path or a
    binary file object.

    The whole header is validated before any tensor is allocated, and nothing is returned unless
    every tensor was read: a truncated, corrupted or foreign file raises a `ValueError` naming the
    file and the problem. Loaded tensors own their memory, are writable and do not require grad.
    Tensors saved from CUDA are stored in host form with their device in the metadata.
    `map_location`, as torch.load's: None (each tensor back on the device it was saved from; a
    RuntimeError when that is CUDA and CUDA is unavailable), a device or device string ('cpu',
    'cuda', 'cuda:1'), a dict mapping saved locations to locations ({'cuda:0': 'cpu'}), or a
    callable `fn(tensor, location)` returning a tensor (or None for the saved location). `weights_only` is accepted for PyTorch compatibility: loading never runs
    code, whatever its value. BF16 tensors load as bfloat16 (without the ml_dtypes package they are
    converted to float32 exactly, with a warning).
    """
    place = _placement(map_location)
    if isinstance(f, (str, bytes, os.PathLike)):
        name = os.fsdecode(f)
        with open(f, "rb") as fh:
            arrays, tree, bf16, devices = _read(fh, os.fstat(fh.fileno()).st_size, name)
    elif isinstance(f, io.TextIOBase):
        raise TypeError("ember.load: f is a text-mode file; open it in binary mode ('rb')")
    elif callable(getattr(f, "read", None)):
        name = getattr(f, "name", None)
        name = os.fsdecode(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__}>"
        if callable(getattr(f, "seekable", None)) and f.seekable():
            start = f.tell()
            size = f.seek(0, io.SEEK_END) - start
            f.seek(start)
        else:  # a stream: read it whole so its size is known before trusting the header
            f = io.BytesIO(f.read())
            size = len(f.getbuffer())
        arrays, tree, bf16, devices = _read(f, size, name)
    else:
        raise TypeError(f"ember.load: f must be a path (str or os.PathLike) or a binary file object with "
                        f"read(), got {type(f).__name__}")
    if bf16:
        warnings.warn(f"ember.load: {name}: tensor(s) {', '.join(bf16)} are bfloat16, which needs the "
                      f"ml_dtypes package (pip install ml_dtypes); they were converted to float32 exactly", UserWarning, stacklevel=2)
    tensors = {}
    for key, arr in arrays.items():
        t = place(make(arr), devices.get(key, "cpu"))
        if not isinstance(t, Tensor):
            raise TypeError(f"ember.load: map_location returned {type(t).__name__}, expected a Tensor or None")
        tensors[key] = t
    if tree is _NO_TREE:  # a safetensors file from elsewhere
        return tensors
    return _decode(tree, tensors.__getitem__)


def _placement(map_location) -> Callable[[Tensor, str], Tensor]:
    """`place(tensor, location)`: a loaded tensor (in host memory) put where `map_location` says,
    given the location it was saved from ('cpu', 'cuda:0', ...), as torch.load does:

    None: back to its saved location; a device or device string: there; a dict: saved location ->
    location ({'cuda:0': 'cpu'}; locations it does not name stay); a callable `fn(tensor, location)`:
    its result, or the saved location when it returns None."""
    if map_location is None:
        return _restore
    if isinstance(map_location, (str, backend.device)):
        dev = backend.device(map_location)
        if dev.type == "cpu":
            return lambda t, loc: t
        backend.module_for(dev)  # a clear error now, before reading, when the device is unavailable
        return lambda t, loc: t.to(dev)
    if isinstance(map_location, dict):
        table = {}
        for k, v in map_location.items():
            if not isinstance(k, (str, backend.device)) or not isinstance(v, (str, backend.device)):
                raise TypeError(f"ember.load: a map_location dict maps saved locations to locations (str or "
                                f"ember.device), got {k!r}: {v!r}")
            table[str(backend.device(k))] = str(backend.device(v))
        return lambda t, loc: _restore(t, table.get(loc, loc))
    if callable(map_location):
        def call(t: Tensor, loc: str) -> Tensor:
            out = map_location(t, loc)
            return _restore(t, loc) if out is None else out
        return call
    raise TypeError(f"ember.load: map_location must be None, a device, a str, a dict or a callable, "
                    f"got {type(map_location).__name__}")


def _restore(t: Tensor, location: str) -> Tensor:
    """`t` (in host memory) moved to `location`, with PyTorch's advice when that device does not exist here."""
    dev = backend.device(location)
    if dev.type == "cpu":
        return t
    be = backend.cuda_backend()
    if be is None:
        raise RuntimeError(f"ember.load: attempting to deserialize a tensor saved on {location}, but CUDA is not "
                           f"available (ember.cuda.is_available() is False). If you are running on a CPU-only "
                           f"machine, pass map_location='cpu' (or map_location=ember.device('cpu')) to load the "
                           f"tensors into CPU memory")
    if dev.index is not None and dev.index >= be.count:
        raise RuntimeError(f"ember.load: attempting to deserialize a tensor saved on {location}, but "
                           f"ember.cuda.device_count() is {be.count}. Pass map_location to map the tensors to an "
                           f"existing device, e.g. map_location={{'{location}': 'cuda:0'}}")
    return t.to(dev)


_NO_TREE = object()  # a file without ember's structure (None is a valid tree: ember.save(None, f))


class _Bad:
    """Builds the one error type of a bad file, naming the file."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, what: str) -> ValueError:
        return ValueError(f"ember.load: cannot load '{self.name}': {what}")


def _no_duplicates(pairs: list) -> dict:
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _no_constant(c: str):
    raise ValueError(f"non-standard JSON constant {c}")


def _json(text: str, bad: _Bad, what: str, not_json: str = ""):
    """Parse strict JSON (no duplicate keys, no NaN or Infinity); what cannot be parsed raises `bad`, naming `what`
    (after `not_json` when it is not JSON at all)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError as e:
        raise bad(f"{not_json}{what} is not valid JSON ({e})") from None
    except RecursionError:
        raise bad(f"{what} is nested too deeply") from None


def _sniff(prefix: bytes) -> str:
    """What a file that is not safetensors seems to be, for the error message."""
    if prefix.startswith(b"PK\x03\x04"):
        return ("; it looks like a zip archive, as PyTorch's torch.save writes: ember never unpickles; convert it "
                "in PyTorch with safetensors.torch.save_file(torch.load(path), 'model.safetensors')")
    if prefix[:1] == b"\x80" and prefix[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "; it looks like a pickle, which ember never loads (unpickling can run arbitrary code)"
    if prefix.startswith(b"\x93NUMPY"):
        return "; it looks like a NumPy .npy file: read it with numpy.load and wrap it with ember.from_numpy"
    return ""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _read(fh: BinaryIO, size: int, name: str) -> tuple[dict, Any, list, dict]:
    """Validate the header of a file of `size` bytes, then read its tensors:
    ({name: array} in header order, the ember tree or _NO_TREE, names converted from BF16,
    {name: device} of the tensors saved from a device other than the CPU)."""
    bad = _Bad(name)
    if size < 8:
        raise bad(f"not a safetensors file: it has {size} bytes, fewer than the 8 that give the header length "
                  f"(an empty or truncated file)")
    prefix = _read_exact(fh, 8, bad, "the header length")
    n = int.from_bytes(prefix, "little")
    if n > _MAX_HEADER:
        raise bad(f"not a safetensors file: the header length {n} is over the {_MAX_HEADER}-byte limit{_sniff(prefix)}")
    if 8 + n > size:
        raise bad(f"not a safetensors file, or a truncated one: the header length {n} runs past the end of the "
                  f"{size}-byte file{_sniff(prefix)}")
    raw = _read_exact(fh, n, bad, "the header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad(f"not a safetensors file: the header is not UTF-8 text ({e})") from None
    if not text.startswith("{"):
        raise bad(f"not a safetensors file: the header does not start with '{{' (it starts with {text[:20]!r})"
                  f"{_sniff(prefix)}")
    header = _json(text, bad, "the header", "not a safetensors file: ")
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise bad("__metadata__ must be a map from strings to strings")

    data_size = size - 8 - n
    specs = []  # (begin, end, tensor name, stored dtype, shape, is BF16)
    for tname, info in header.items():
        where = f"tensor {tname!r}"
        if not isinstance(info, dict):
            raise bad(f"{where}: expected an object with dtype, shape and data_offsets, got {type(info).__name__}")
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
        if missing:
            raise bad(f"{where}: missing {', '.join(missing)}")
        dname, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dname == _BF16 and _BF16 not in _DTYPES:
            stored = np.dtype("<u2")
        elif isinstance(dname, str) and dname in _DTYPES:
            stored = _DTYPES[dname]
        elif dname in _OTHER_DTYPES:
            raise bad(f"{where} has dtype {dname}, which ember does not support (it supports "
                      f"{', '.join(_DTYPES)} and reads BF16 as float32)")
        else:
            raise bad(f"{where} has unknown dtype {dname!r} (expected one of {', '.join(_DTYPES)}, BF16)")
        if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
            raise bad(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
        if len(shape) > _MAX_NDIM or math.prod(max(d, 1) for d in shape) * stored.itemsize >= 2 ** 63:
            raise bad(f"{where}: shape {shape} is larger than any array can be")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise bad(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, got {offsets!r}")
        begin, end = offsets
        nbytes = math.prod(shape) * stored.itemsize
        if end - begin != nbytes:
            raise bad(f"{where}: data_offsets {offsets} span {end - begin} bytes but dtype {dname} and shape {shape} "
                      f"need {nbytes}")
        if end > data_size:
            raise bad(f"{where}: data_offsets {offsets} run past the end of the {data_size}-byte data section "
                      f"(the file is truncated or the offsets are wrong)")
        specs.append((begin, end, tname, stored, shape, dname == _BF16 and _BF16 not in _DTYPES))

    # the data section is covered exactly: no overlap, no hole, nothing after the last tensor
    pos, prev = 0, None
    for begin, end, tname, *_ in sorted(specs, key=lambda s: (s[0], s[1])):
        if begin < pos:
            raise bad(f"tensor {tname!r} (bytes {begin}-{end}) overlaps tensor {prev!r} (which ends at {pos})")
        if begin > pos:
            raise bad(f"bytes {pos}-{begin} of the data section belong to no tensor (a hole before {tname!r})")
        pos, prev = end, tname
    if pos != data_size:
        raise bad(f"the data section has {data_size} bytes but its tensors cover {pos}: "
                  f"{data_size - pos} trailing bytes belong to no tensor")

    tree, devices = _NO_TREE, {}
    if meta is not None and "ember" in meta:
        tree, devices = _parse_tree(meta["ember"], header.keys(), bad)

    # Everything checked: allocate and read, in file order. Each array is the file's bytes copied
    # into memory it owns (never a view of a buffer that could change).
    arrays: dict[str, np.ndarray] = {}
    bf16 = []
    for begin, end, tname, stored, shape, is_bf16 in sorted(specs, key=lambda s: (s[0], s[1])):
        arr = np.empty(shape, stored)
        if arr.size:
            _read_into(fh, arr.reshape(-1).view(np.uint8), bad, tname)
        if stored.kind == "b" and arr.view(np.uint8).max(initial=0) > 1:
            raise bad(f"tensor {tname!r} is BOOL but holds bytes other than 0 and 1")
        if is_bf16:
            out = np.empty(shape, np.float32)
            np.left_shift(arr, 16, out=out.view(np.uint32), dtype=np.uint32)
            arr = out
            bf16.append(tname)
        elif not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))  # big-endian hosts
        arrays[tname] = arr
    return {k: arrays[k] for k in header}, tree, bf16, devices


def _read_exact(fh: BinaryIO, n: int, bad: _Bad, what: str) -> bytes:
    buf = bytearray(n)
    _read_into(fh, memoryview(buf), bad, what)
    return bytes(buf)


def _read_into(fh: BinaryIO, view, bad: _Bad, what: str) -> None:
    view = memoryview(view).cast("B")
    total, got = len(view), 0
    readinto = getattr(fh, "readinto", None)
    while got < total:
        if readinto is not None:
            k = readinto(view[got:])
        else:
            chunk = fh.read(total - got)
            k = len(chunk)
            view[got:got + k] = chunk
        if not k:
            raise bad(f"the file ended after {got} of the {total} bytes of {what} (it changed while being read?)")
        got += k


# ---------------------------------------------------------------------- the ember structure
def _parse_tree(text: str, names, bad: _Bad):
    """Parse and fully check __metadata__['ember'] (a dry run of `_decode`) before any tensor exists:
    (the tree, {tensor name: saved device} for those saved from a device other than the CPU)."""
    doc = _json(text, bad, "__metadata__['ember']")
    if not (isinstance(doc, dict) and _is_int(doc.get("version")) and "tree" in doc):
        raise bad("__metadata__['ember'] must be an object with an integer 'version' and a 'tree'")
    version = doc["version"]
    if version > FORMAT_VERSION:
        raise bad(f"it was written by a newer ember (checkpoint format {version}; this ember reads up to "
                  f"{FORMAT_VERSION}): upgrade ember to load it")
    if version < 1:
        raise bad(f"unknown checkpoint format version {version}")
    known = set(names)

    def check(name: str) -> None:
        if name not in known:
            raise _TreeError(f"refers to tensor {name!r}, which is not in the file")

    try:
        _decode(doc["tree"], check)
    except _TreeError as e:
        raise bad(f"__metadata__['ember'] is malformed: {e}") from None
    except RecursionError:
        raise bad("__metadata__['ember'] is nested too deeply") from None
    devices = doc.get("devices", {})
    if not isinstance(devices, dict):
        raise bad("__metadata__['ember']['devices'] must map tensor names to devices")
    for name, where in devices.items():
        try:
            ok = name in known and isinstance(where, str) and backend.device(where).type == "cuda"
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise bad(f"__metadata__['ember']['devices'] is malformed at {name!r}: {where!r}")
    return doc["tree"], devices


class _TreeError(ValueError):
    pass


def _decode(node, tensor: Callable[[str], Any]):
    """The Python object that a JSON tree from `_Encoder.value` stands for; `tensor(name)` resolves references."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, tensor) for v in node]
    if not (isinstance(node, dict) and len(node) == 1):
        raise _TreeError(f"unexpected node {_short(node)}")
    (tag, body), = node.items()
    if tag == "tensor" and isinstance(body, str):
        return tensor(body)
    if tag == "tuple" and isinstance(body, list):
        return tuple(_decode(v, tensor) for v in body)
    if tag in ("dict", "odict") and isinstance(body, list):
        out = OrderedDict() if tag == "odict" else {}
        for pair in body:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise _TreeError(f"a dict item must be a [key, value] pair, got {_short(pair)}")
            out[_decode_key(pair[0])] = _decode(pair[1], tensor)
        if len(out) != len(body):
            raise _TreeError(f"a dict has repeated keys {_short(body)}")
        return out
    if tag == "float" and body in ("nan", "inf", "-inf"):
        return float(body)
    raise _TreeError(f"unexpected node {_short(node)}")


def _decode_key(node):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (tag, body), = node.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(_decode_key(v) for v in body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
    raise _TreeError(f"a dict key must be a scalar or a tuple of scalars, got {_short(node)}")


def _short(node) -> str:
    s = json.dumps(node)
    return s if len(s) <= 80 else s[:77] + "..."
