"""CIFAR10 on small generated fixtures in both formats (binary and python batches, including a
hand-written Python 2 pickle like the real files), the restricted unpickler against malicious
pickles, bad inputs, and download without the network."""
import collections
import hashlib
import io
import os
import pickle
import struct
import tarfile

import numpy as np
import pytest

import ember
from ember.datasets import CIFAR10
from ember.datasets import _fetch
from ember.datasets import transforms as T

TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
NAMES = ["plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def batches(seed=0):
    """{batch name: (uint8 N×3072 CHW planes, labels)} with a few records per batch."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, name in enumerate(TRAIN + ["test_batch"]):
        n = 2 + i % 3
        out[name] = (rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 10, n).tolist())
    return out


def write_bin(root, data, meta=True):
    d = os.path.join(root, "cifar-10-batches-bin")
    os.makedirs(d, exist_ok=True)
    for name, (x, y) in data.items():
        records = np.concatenate([np.array(y, np.uint8)[:, None], x], axis=1)
        records.tofile(os.path.join(d, name + ".bin"))
    if meta:
        with open(os.path.join(d, "batches.meta.txt"), "w") as f:
            f.write("\n".join(NAMES) + "\n\n")


def py2_pickle(obj) -> bytes:
    """`obj` (dicts, lists, str, small ints, uint8 2-D arrays) pickled as Python 2's cPickle wrote the
    CIFAR-10 batches: protocol 2, byte strings, and arrays under numpy.core.multiarray."""
    def emit(o) -> bytes:
        if isinstance(o, str):
            b = o.encode("latin1")
            return (b"U" + bytes([len(b)]) if len(b) < 256 else b"T" + struct.pack("<I", len(b))) + b
        if isinstance(o, int):
            return b"K" + bytes([o])
        if isinstance(o, list):
            return b"](" + b"".join(map(emit, o)) + b"e"
        if isinstance(o, dict):
            return b"}(" + b"".join(emit(k) + emit(v) for k, v in o.items()) + b"u"
        assert isinstance(o, np.ndarray) and o.dtype == np.uint8 and o.ndim == 2
        dtype = b"cnumpy\ndtype\n" + emit("u1") + b"K\x00K\x01\x87R(K\x03" + emit("|") + \
            b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
        shape = b"J" + struct.pack("<i", o.shape[0]) + b"J" + struct.pack("<i", o.shape[1]) + b"\x86"
        return (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" + emit("b") + b"\x87R(K\x01"
                + shape + dtype + b"\x89" + emit(o.tobytes().decode("latin1")) + b"tb")
    return b"\x80\x02" + emit(obj) + b"."


def write_py(root, data, protocol=None, meta=True):
    d = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(d, exist_ok=True)
    for name, (x, y) in data.items():
        batch = {"batch_label": name, "labels": y, "data": x, "filenames": [f"{i}.png" for i in range(len(y))]}
        with open(os.path.join(d, name), "wb") as f:
            f.write(py2_pickle(batch) if protocol is None else pickle.dumps(batch, protocol=protocol))
    if meta:
        meta_obj = {"label_names": NAMES, "num_vis": 3072, "num_cases_per_batch": 10000}
        with open(os.path.join(d, "batches.meta"), "wb") as f:
            f.write(py2_pickle({"label_names": NAMES}) if protocol is None else pickle.dumps(meta_obj, protocol=protocol))


def expected(data, train=True):
    names = TRAIN if train else ["test_batch"]
    x = np.concatenate([data[n][0] for n in names]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return x, sum((data[n][1] for n in names), [])


# ---------------------------------------------------------------------- both formats
@pytest.mark.parametrize("protocol", [None, 2, 4, 5])
def test_binary_and_python_batches_give_the_same_data(tmp_path, protocol):
    data = batches()
    write_bin(tmp_path / "bin", data)
    write_py(tmp_path / "py", data, protocol)
    for train in (True, False):
        a, b = CIFAR10(tmp_path / "bin", train=train), CIFAR10(tmp_path / "py", train=train)
        x, y = expected(data, train)
        for ds in (a, b):
            assert isinstance(ds.data, np.ndarray) and ds.data.dtype == np.uint8 and ds.data.shape == x.shape
            assert ds.data.flags.c_contiguous and ds.data.shape[1:] == (32, 32, 3)
            np.testing.assert_array_equal(ds.data, x)
            assert ds.targets == y and all(type(t) is int for t in ds.targets)
            assert ds.classes == NAMES and ds.class_to_idx["car"] == 1
        assert len(a) == len(b) == len(y)


def test_items_transforms_and_repr(tmp_path):
    data = batches(1)
    write_bin(tmp_path, data, meta=False)
    ds = CIFAR10(tmp_path, train=False, transform=T.Compose([T.RandomHorizontalFlip(0.0), T.ToTensor()]))
    assert ds.classes[0] == "airplane"  # the standard names when there is no meta file
    x, y = ds[1]
    assert tuple(x.shape) == (3, 32, 32) and x.dtype is ember.float32 and y == data["test_batch"][1][1]
    np.testing.assert_array_equal(x.numpy(), data["test_batch"][0][1].reshape(3, 32, 32) / np.float32(255))
    img, _ = CIFAR10(tmp_path, train=False)[0]
    assert img.shape == (32, 32, 3) and img.dtype == np.uint8
    assert repr(ds).startswith(f"Dataset CIFAR10\n    Number of datapoints: 4\n    Root location: {tmp_path}\n    Split: Test")


def test_python_batches_with_byte_keys_and_array_labels(tmp_path):
    data = batches(2)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    for name, (x, y) in data.items():
        (d / name).write_bytes(pickle.dumps({b"data": x, b"labels": np.array(y, np.int64)}))
    np.testing.assert_array_equal(CIFAR10(tmp_path).data, expected(data)[0])


# ---------------------------------------------------------------------- malicious pickles
class RunsAShellCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class CallsEval:
    def __reduce__(self):
        return eval, ("__import__('os').getcwd()",)


class RebuildsAsAnotherClass:
    def __reduce__(self):
        return collections.OrderedDict, ()


@pytest.mark.parametrize("make_payload,forbidden", [
    (lambda marker: RunsAShellCommand(marker), r"(posix|os)\.system"),
    (lambda marker: CallsEval(), r"(__builtin__|builtins)\.eval"),  # protocol 2 writes the Python 2 name
    (lambda marker: RebuildsAsAnotherClass(), r"collections\.OrderedDict"),
])
@pytest.mark.parametrize("where", ["data_batch_3", "batches.meta"])
def test_malicious_pickles_are_refused(tmp_path, make_payload, forbidden, where):
    data = batches()
    write_py(tmp_path, data, protocol=4)
    marker = tmp_path / "pwned"
    x, y = data["data_batch_3"]
    payload = {"data": x, "labels": y, "extra": [make_payload(marker)]}
    if where == "batches.meta":
        payload = {"label_names": NAMES, "extra": make_payload(marker)}
    (tmp_path / "cifar-10-batches-py" / where).write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=f"refusing to load .*{where}: it references the global "
                                                     f"{forbidden}, and only plain containers and NumPy arrays"):
        CIFAR10(tmp_path)
    assert not marker.exists()


def test_a_forbidden_global_inside_numpy_is_refused(tmp_path):
    write_py(tmp_path, batches(), protocol=2)
    evil = b"\x80\x02cnumpy.lib.npyio\nload\nX\x05\x00\x00\x00/x.npy\x85R."
    (tmp_path / "cifar-10-batches-py" / "data_batch_1").write_bytes(evil)
    with pytest.raises(pickle.UnpicklingError, match=r"data_batch_1: it references the global numpy\.lib\.npyio\.load"):
        CIFAR10(tmp_path)


# ---------------------------------------------------------------------- bad inputs
def test_bad_binary_batches(tmp_path):
    data = batches()
    write_bin(tmp_path, data)
    path = tmp_path / "cifar-10-batches-bin" / "data_batch_2.bin"
    raw = path.read_bytes()
    path.write_bytes(raw[:-5])
    with pytest.raises(RuntimeError, match=f"data_batch_2.bin holds {len(raw) - 5} bytes, not a whole number of "
                                           "3073-byte records"):
        CIFAR10(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(RuntimeError, match="data_batch_2.bin holds 0 bytes"):
        CIFAR10(tmp_path)
    bad = bytearray(raw)
    bad[3073] = 10  # the second record's label
    path.write_bytes(bytes(bad))
    with pytest.raises(RuntimeError, match="data_batch_2.bin holds label 10 at record 1; labels must be in 0..9"):
        CIFAR10(tmp_path)


@pytest.mark.parametrize("batch,message", [
    ({"data": np.zeros((2, 3072), np.int64), "labels": [0, 1]}, r"'data' must be a uint8 array of shape \(N, 3072\), got int64"),
    ({"data": np.zeros((2, 3000), np.uint8), "labels": [0, 1]}, r"got uint8 array of shape \(2, 3000\)"),
    ({"labels": [0, 1]}, r"'data' must be .*got NoneType"),
    ({"data": np.zeros((2, 3072), np.uint8), "labels": [0]}, r"'labels' must be 2 integers \(one per image\), got 1 values"),
    ({"data": np.zeros((2, 3072), np.uint8), "labels": ["a", "b"]}, r"'labels' must be 2 integers"),
    ({"data": np.zeros((2, 3072), np.uint8), "labels": [0, 12]}, r"holds label 12 at record 1"),
    ([1, 2], "holds 'list', not the dict"),
])
def test_bad_python_batches(tmp_path, batch, message):
    write_py(tmp_path, batches(), protocol=4)
    (tmp_path / "cifar-10-batches-py" / "data_batch_5").write_bytes(pickle.dumps(batch))
    with pytest.raises(RuntimeError, match="CIFAR10: .*data_batch_5.*" + message):
        CIFAR10(tmp_path)


def test_corrupt_pickle_and_bad_meta(tmp_path):
    write_py(tmp_path, batches(), protocol=4)
    d = tmp_path / "cifar-10-batches-py"
    (d / "batches.meta").write_bytes(pickle.dumps({"label_names": ["a", "b"]}))
    with pytest.raises(RuntimeError, match=r"batches.meta should name the 10 classes, got \['a', 'b'\]"):
        CIFAR10(tmp_path)
    (d / "test_batch").write_bytes(pickle.dumps({"data": 1})[:-4])
    with pytest.raises(RuntimeError, match="test_batch is not a valid CIFAR-10 python batch"):
        CIFAR10(tmp_path, train=False)


def test_missing_dataset_says_where_and_how(tmp_path):
    with pytest.raises(RuntimeError, match=r"CIFAR10: dataset not found in .*: missing .*cifar-10-batches-py.data_batch_1"
                                           r".*data_batch_1.bin.*download=True"):
        CIFAR10(tmp_path)


# ---------------------------------------------------------------------- download, without the network
def cifar_tarball(path, data, extra: dict = {}):
    with tarfile.open(path, "w:gz") as tar:
        files = {f"cifar-10-batches-py/{n}": pickle.dumps({"data": x, "labels": y}) for n, (x, y) in data.items()}
        files["cifar-10-batches-py/batches.meta"] = pickle.dumps({"label_names": NAMES})
        files["cifar-10-batches-py/readme.html"] = b"<html></html>"
        for name, content in {**files, **extra}.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.fixture
def served(tmp_path, monkeypatch):
    """Make `_download` serve a local tarball; returns the list of requested URLs and the tarball path."""
    urls, archive = [], tmp_path / "served.tar.gz"

    def download(url, dest):
        urls.append(url)
        with open(archive, "rb") as src, open(dest, "wb") as out:
            out.write(src.read())

    monkeypatch.setattr(_fetch, "_download", download)
    return urls, archive


def test_download_fetches_the_python_tarball(tmp_path, served, monkeypatch, capsys):
    urls, archive = served
    data = batches(3)
    monkeypatch.setattr(_fetch, "CIFAR10_MD5", cifar_tarball(archive, data))
    ds = CIFAR10(tmp_path / "root", download=True)
    assert urls == [_fetch.CIFAR10_URL] and ds.classes == NAMES
    np.testing.assert_array_equal(ds.data, expected(data)[0])
    assert "fetched" in capsys.readouterr().out
    CIFAR10(tmp_path / "root", train=False, download=True)  # already there: no second download
    assert len(urls) == 1


def test_download_refuses_a_wrong_md5_or_an_unsafe_tarball(tmp_path, served, monkeypatch):
    urls, archive = served
    cifar_tarball(archive, batches())
    with pytest.raises(RuntimeError, match=f"md5 mismatch \\(expected {_fetch.CIFAR10_MD5}.*(?s:.*)by hand"):
        CIFAR10(tmp_path / "root", download=True)
    assert not os.path.exists(tmp_path / "root")
    md5 = cifar_tarball(archive, batches(), extra={"../../escape.txt": b"x"})
    monkeypatch.setattr(_fetch, "CIFAR10_MD5", md5)
    with pytest.raises(RuntimeError, match="member '../../escape.txt' has an unsafe path"):
        CIFAR10(tmp_path / "root", download=True)
    assert not os.path.exists(tmp_path / "root")


def test_download_failure_says_where_to_put_the_files(tmp_path, monkeypatch):
    def unreachable(url, dest):
        raise _fetch.SourceError(f"{url}: Name or service not known")

    monkeypatch.setattr(_fetch, "_download", unreachable)
    with pytest.raises(RuntimeError, match=r"(?s)could not fetch the python batches: https://www.cs.toronto.edu/"
                                           r"~kriz/cifar-10-python.tar.gz: Name or service not known.*by hand.*"
                                           r"cifar-10-batches-py.*cifar-10-batches-bin"):
        CIFAR10(tmp_path, download=True)
