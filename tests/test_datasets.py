"""read_idx, MNIST / FashionMNIST on generated IDX files, and the embedded Digits."""
import gzip
import hashlib
import os
import struct

import numpy as np
import pytest

import ember
from ember.datasets import MNIST, Digits, FashionMNIST, read_idx
from ember.datasets import _fetch
from ember.datasets import transforms as T


def idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
    """An IDX file holding `arr` (stored big-endian, as the format wants)."""
    big = arr.astype(arr.dtype.newbyteorder(">"))
    return bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + big.tobytes()


def write(path, data: bytes, gz: bool = False) -> str:
    path = str(path) + (".gz" if gz else "")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def mnist_arrays(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)


def write_mnist(root, folder="MNIST", prefix="train", n=40, seed=0, gz=False, images=None, labels=None):
    imgs, labs = mnist_arrays(n, seed)
    imgs = imgs if images is None else images
    labs = labs if labels is None else labels
    raw = os.path.join(root, folder, "raw")
    write(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), idx_bytes(imgs), gz)
    write(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), idx_bytes(labs), gz)
    return imgs, labs


# ---------------------------------------------------------------------- read_idx
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, gz):
    a = np.random.default_rng(0).integers(0, 256, (3, 4, 5), dtype=np.uint8)
    out = read_idx(write(tmp_path / "a", idx_bytes(a), gz))
    assert out.dtype == np.uint8 and out.flags.writeable
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("dtype,code", [(np.int32, 0x0C), (np.float64, 0x0E), (np.int16, 0x0B)])
def test_read_idx_multibyte_types(tmp_path, dtype, code):
    a = (np.arange(12).reshape(3, 4) - 5).astype(dtype)
    out = read_idx(write(tmp_path / "a", idx_bytes(a, code)))
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_bad_files(tmp_path, gz):
    good = idx_bytes(np.zeros((2, 3), np.uint8))
    cases = {
        "bad magic number 0x01000802": b"\x01" + good[1:],
        "bad magic number 0x00000702": good[:2] + b"\x07" + good[3:],  # unknown type code
        "bad magic number 0x00000800": good[:3] + b"\x00",  # no dimensions
        "only 3 bytes": good[:3],
        "ends inside them": good[:6],
        "truncated.*need 6 bytes.*5": good[:-1],
        "longer than its header says": good + b"\0",
    }
    for i, (message, data) in enumerate(cases.items()):
        with pytest.raises(RuntimeError, match="read_idx: .*" + message):
            read_idx(write(tmp_path / f"f{i}", data, gz))


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_refuses_a_huge_claim_without_allocating_it(tmp_path, gz):
    # 10^6 x 10^6 uint8 = 10^12 bytes claimed, 100 present: must fail on the length, not on memory
    data = bytes([0, 0, 8, 2]) + struct.pack(">II", 10**6, 10**6) + bytes(100)
    with pytest.raises(RuntimeError, match=r"truncated.*\(1000000, 1000000\).*1000000000000 bytes"):
        read_idx(write(tmp_path / "huge", data, gz))


def test_read_idx_corrupt_gzip_and_missing(tmp_path):
    data = gzip.compress(idx_bytes(np.zeros((50, 50), np.uint8)))
    path = tmp_path / "c.gz"
    path.write_bytes(data[:30])
    with pytest.raises(RuntimeError, match="c.gz is a corrupt gzip file"):
        read_idx(path)
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "nope")


# ---------------------------------------------------------------------- MNIST / FashionMNIST
@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loads_generated_files(tmp_path, gz):
    imgs, labs = write_mnist(tmp_path, gz=gz)
    ds = MNIST(str(tmp_path))
    assert len(ds) == 40 and ds.train and ds.root == str(tmp_path)
    assert isinstance(ds.data, ember.Tensor) and ds.data.dtype is ember.uint8 and tuple(ds.data.shape) == (40, 28, 28)
    assert ds.targets.dtype is ember.int64
    np.testing.assert_array_equal(ds.data.numpy(), imgs)
    np.testing.assert_array_equal(ds.targets.numpy(), labs)
    img, target = ds[3]
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (28, 28)
    assert type(target) is int and target == labs[3]
    img[:] = 0  # items are copies: the dataset is untouched
    np.testing.assert_array_equal(ds.data.numpy()[3], imgs[3])
    assert ds.classes[7] == "7 - seven" and ds.class_to_idx["7 - seven"] == 7
    assert ds.raw_folder == os.path.join(str(tmp_path), "MNIST", "raw")


def test_mnist_transforms_split_and_repr(tmp_path):
    imgs, labs = write_mnist(tmp_path, prefix="t10k", n=12, seed=1)
    ds = MNIST(tmp_path, train=False, transform=T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))]),
               target_transform=lambda y: y + 100)
    x, y = ds[5]
    assert tuple(x.shape) == (1, 28, 28) and x.dtype is ember.float32 and y == labs[5] + 100
    np.testing.assert_allclose(x.numpy()[0], (imgs[5] / np.float32(255) - np.float32(0.1307)) / np.float32(0.3081),
                               rtol=1e-6)
    text = repr(ds)
    assert text.startswith("Dataset MNIST\n    Number of datapoints: 12\n    Root location: ")
    assert "    Split: Test\n    Transform: Compose(\n                   ToTensor()" in text
    assert "Target transform: <function" in text


def test_mnist_prefers_the_uncompressed_file(tmp_path):
    imgs, labs = write_mnist(tmp_path, n=5, seed=2)
    write(tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte", b"garbage", gz=True)
    np.testing.assert_array_equal(MNIST(tmp_path).data.numpy(), imgs)


def test_fashion_mnist_uses_its_own_folder(tmp_path):
    imgs, labs = write_mnist(tmp_path, folder="FashionMNIST", n=7, seed=3, gz=True)
    ds = FashionMNIST(tmp_path)
    np.testing.assert_array_equal(ds.data.numpy(), imgs)
    assert ds.classes[9] == "Ankle boot" and repr(ds).startswith("Dataset FashionMNIST")
    with pytest.raises(RuntimeError, match=r"MNIST: train-images-idx3-ubyte\[.gz\] not found"):
        MNIST(tmp_path)


def test_mnist_missing_files_say_where_and_how(tmp_path):
    with pytest.raises(RuntimeError, match=r"MNIST: train-images-idx3-ubyte\[\.gz\] not found in .*MNIST.raw.*"
                                           r"download=True.*python -m ember data fetch mnist --root"):
        MNIST(tmp_path)
    write_mnist(tmp_path, n=3)
    os.remove(tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte")
    with pytest.raises(RuntimeError, match="train-labels-idx1-ubyte.*not found"):
        MNIST(tmp_path)
    with pytest.raises(RuntimeError, match="FashionMNIST.*not found.*data fetch fashion-mnist"):
        FashionMNIST(tmp_path, train=False)


def test_mnist_bad_files(tmp_path):
    imgs, labs = mnist_arrays(6)
    raw = tmp_path / "MNIST" / "raw"
    write_mnist(tmp_path, images=imgs, labels=labs[:5])
    with pytest.raises(RuntimeError, match="holds 6 images but .*train-labels-idx1-ubyte holds 5 labels"):
        MNIST(tmp_path)
    bad = labs.copy()
    bad[4] = 10
    write_mnist(tmp_path, images=imgs, labels=bad)
    with pytest.raises(RuntimeError, match="train-labels-idx1-ubyte holds label 10 at index 4.*0..9"):
        MNIST(tmp_path)
    write_mnist(tmp_path, images=np.zeros((6, 28, 27), np.uint8), labels=labs)
    with pytest.raises(RuntimeError, match="images of 28×27 pixels, expected 28×28"):
        MNIST(tmp_path)
    write(raw / "train-images-idx3-ubyte", idx_bytes(labs))  # a label file where the images belong
    with pytest.raises(RuntimeError, match=r"train-images-idx3-ubyte is not an MNIST image file \(magic 0x00000803"):
        MNIST(tmp_path)
    write(raw / "train-images-idx3-ubyte", idx_bytes(imgs)[:-10])
    with pytest.raises(RuntimeError, match="train-images-idx3-ubyte is truncated"):
        MNIST(tmp_path)


def test_mnist_checks_the_checksum_of_canonical_size_files(tmp_path, monkeypatch):
    # 10,000 test images and labels: exactly the original files' sizes, but not their bytes
    imgs, labs = write_mnist(tmp_path, prefix="t10k", n=10_000, seed=4)
    img_sha = hashlib.sha256(idx_bytes(imgs)).hexdigest()
    with pytest.raises(RuntimeError, match="checksum mismatch for .*t10k-images-idx3-ubyte: sha256 of its IDX bytes is "
                                           f"{img_sha}, expected {_fetch.SHA256['mnist']['t10k-images-idx3-ubyte']}"):
        MNIST(tmp_path, train=False)
    monkeypatch.setitem(_fetch.SHA256["mnist"], "t10k-images-idx3-ubyte", img_sha)
    with pytest.raises(RuntimeError, match="checksum mismatch for .*t10k-labels-idx1-ubyte"):
        MNIST(tmp_path, train=False)
    monkeypatch.setitem(_fetch.SHA256["mnist"], "t10k-labels-idx1-ubyte", hashlib.sha256(idx_bytes(labs)).hexdigest())
    assert len(MNIST(tmp_path, train=False)) == 10_000


def test_mnist_download_calls_fetch(tmp_path, monkeypatch):
    calls = []

    def fake_fetch(name, root, *, log=print):
        calls.append((name, root))
        write_mnist(root, folder="FashionMNIST" if name == "fashion-mnist" else "MNIST", n=4)
        return "fake"

    monkeypatch.setattr(_fetch, "fetch", fake_fetch)
    assert len(FashionMNIST(tmp_path, download=True)) == 4
    assert calls == [("fashion-mnist", str(tmp_path))]


# ---------------------------------------------------------------------- Digits
UCI_CLASS_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_digits_splits():
    train, test = Digits(), Digits(train=False)
    assert (len(train), len(test)) == (1442, 355)
    for ds in (train, test):
        assert ds.data.dtype is ember.uint8 and tuple(ds.data.shape[1:]) == (8, 8) and ds.targets.dtype is ember.int64
        assert set(np.unique(ds.data.numpy())) <= set(np.round(np.arange(17) * 255 / 16).astype(int).tolist())
    counts = np.bincount(train.targets.numpy(), minlength=10) + np.bincount(test.targets.numpy(), minlength=10)
    assert counts.tolist() == UCI_CLASS_COUNTS
    np.testing.assert_array_equal(np.bincount(test.targets.numpy()), [c // 5 for c in UCI_CLASS_COUNTS])
    np.testing.assert_array_equal(Digits().data.numpy(), train.data.numpy())  # deterministic


def test_digits_items_transforms_and_repr():
    ds = Digits(root="~/unused", transform=T.ToTensor())
    x, y = ds[0]
    assert tuple(x.shape) == (1, 8, 8) and x.dtype is ember.float32 and type(y) is int
    assert float(x.numpy().max()) <= 1.0 and ds.root == os.path.expanduser("~/unused")
    img, _ = Digits()[0]
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (8, 8)
    assert repr(Digits(train=False)) == "Dataset Digits\n    Number of datapoints: 355\n    Split: Test"


def test_digits_labels_belong_to_their_images():
    # a nearest-centroid classifier: far above chance only if images and labels line up
    train, test = Digits(), Digits(train=False)
    xs, ys = train.data.numpy().reshape(-1, 64).astype(float), train.targets.numpy()
    centroids = np.stack([xs[ys == c].mean(0) for c in range(10)])
    xt = test.data.numpy().reshape(-1, 64).astype(float)
    pred = np.argmin(((xt[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (pred == test.targets.numpy()).mean() > 0.85


def test_digits_attribution_ships_with_the_data():
    import ember.datasets.digits as mod
    text = open(os.path.join(os.path.dirname(mod.__file__), "data", "DIGITS_LICENSE.txt")).read()
    for needed in ("CC BY 4.0", "Alpaydin", "Kaynak", "https://doi.org/10.24432/C50P49"):
        assert needed in text and needed in mod.__doc__


def test_datasets_are_map_style_datasets_for_the_dataloader():
    from ember.utils.data import DataLoader, Dataset
    ds = Digits(transform=T.ToTensor())
    assert isinstance(ds, Dataset) and len(ds + Digits(train=False)) == 1797
    x, y = next(iter(DataLoader(ds, batch_size=5)))
    assert tuple(x.shape) == (5, 1, 8, 8) and x.dtype is ember.float32
    np.testing.assert_array_equal(y.numpy(), ds.targets.numpy()[:5])
