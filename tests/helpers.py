"""Shared test helpers: finite-difference checks and PyTorch parity.

PyTorch is a test oracle only. Every test that uses it reaches it through this module: `torch`
(None without PyTorch), `requires_torch` (a skip mark), `compare_torch` (skips) and `need_torch`
(an import that skips). With EMBER_REQUIRE_TORCH=1 (CI's parity run) nothing skips for want of
PyTorch: a missing or broken install fails at the import of this module, and `need_torch` raises.
"""
from __future__ import annotations

import gzip
import importlib
import itertools
import os
import re
import struct
import warnings
import weakref

import numpy as np
import pytest

import ember

REQUIRE_TORCH = os.environ.get("EMBER_REQUIRE_TORCH") == "1"
try:
    import torch
except ImportError:
    if REQUIRE_TORCH:
        raise ImportError("EMBER_REQUIRE_TORCH=1 but PyTorch cannot be imported: install the oracle with "
                          "`pip install torch==2.13.0`, or unset EMBER_REQUIRE_TORCH to skip the parity tests") from None
    torch = None  # parity tests skip

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (parity tests need it as an oracle)")


def need_torch(module: str = "torch"):
    """Import `module` (torch or one of its submodules, or a package that needs torch such as
    safetensors.torch) inside a test: skip the test without it, unless EMBER_REQUIRE_TORCH=1."""
    if REQUIRE_TORCH:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason="PyTorch is not installed (parity tests need it as an oracle)")

# The device the parity helpers (leaf, check_grad, compare_torch) put ember's inputs on:
# EMBER_TEST_DEVICE=cuda runs every parity test on CUDA (a real GPU, or tests/_fakecuda.py without
# one; conftest.py installs it). Results are brought back to the host to compare.
DEVICE = os.environ.get("EMBER_TEST_DEVICE", "cpu")


# EMBER_TEST_COMPILE=1 (tests/test_compile_suite.py) reruns the parity tests through `ember.compile`: the
# functions `check_grad` and `compare_torch` evaluate, and every Module call (conftest.py installs
# `compile_every_module`), are compiled and first called once to capture (an eager run, its result dropped);
# the result that is checked comes from the next call: a replay of the captured program.
COMPILE = os.environ.get("EMBER_TEST_COMPILE") == "1"

# Forward mode is checked wherever reverse mode is: `check_grad`'s gradcheck also builds the Jacobian from jvps
# (check_forward_ad) and `compare_torch` also compares the outputs' tangents with PyTorch's forward AD.
# EMBER_TEST_FORWARD_AD=0 turns that off (to bisect a failure to one mode). Not under EMBER_TEST_COMPILE: a
# compiled program replays reverse mode only (forward AD runs eagerly, ember/compiler). Off by default in the
# suites that rerun the parity files lazily or on the (stand-in) device, which check what those modes change
# (deferral, device arrays): forward AD runs eagerly there, and the main run checks it (tests/test_jvp_*.py
# check it directly in every mode).
_RERUN = os.environ.get("EMBER_LAZY") == "always" or DEVICE != "cpu"
FORWARD_AD = os.environ.get("EMBER_TEST_FORWARD_AD", "0" if _RERUN else "1") == "1"


def host(t) -> np.ndarray:
    """A tensor's values as a NumPy array, from any device."""
    return t.detach().cpu().numpy()


def rand(*shape, seed: int = 0, low: float = -1.0, high: float = 1.0, dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def noncontig(a: np.ndarray) -> np.ndarray:
    """The same values as `a` in a non-contiguous (strided) array."""
    big = np.empty(a.shape + (2,), a.dtype)
    big[..., 0] = a
    v = big[..., 0]
    assert not v.flags.c_contiguous or a.size <= 1
    return v


def leaf(a: np.ndarray, requires_grad: bool = True) -> ember.Tensor:
    """An ember leaf sharing nothing with `a` (keeps `a`'s strides when it is a non-contiguous view)."""
    t = ember.from_numpy(a.copy(order="K") if a.flags.c_contiguous else a)
    if DEVICE != "cpu":
        t = t.to(DEVICE)
    return t.requires_grad_(requires_grad) if a.dtype.kind == "f" else t


def check_grad(fn, *arrays, gradgrad: bool = True, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3) -> None:
    """gradcheck (and gradgradcheck) of `fn` on float64 leaves made from `arrays`."""
    def leaves():
        return [leaf(np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)) for a in arrays]
    xs = leaves()
    if COMPILE:
        fn = captured(fn, *leaves())
    assert ember.autograd.gradcheck(fn, xs, eps=eps, atol=atol, rtol=rtol, check_forward_ad=FORWARD_AD and not COMPILE)
    if gradgrad:
        assert ember.autograd.gradgradcheck(fn, xs, eps=eps, atol=atol, rtol=rtol)


def compare_torch(ember_fn, torch_fn, *arrays, rtol: float | None = None, atol: float | None = None, seed: int = 1,
                  check_jvp: bool = True) -> None:
    """Run `ember_fn` and `torch_fn` on the same inputs; compare outputs and the gradients of every
    floating input for a random cotangent. Inputs keep their dtypes (float32 or float64)."""
    if torch is None:
        pytest.skip("PyTorch is not installed")
    arrays = [np.asarray(a) for a in arrays]
    e_in = [leaf(a) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    if COMPILE:
        ember_fn = captured(ember_fn, *[leaf(a) for a in arrays])
    e_out, t_out = ember_fn(*e_in), torch_fn(*t_in)
    if COMPILE:
        assert ember_fn.stats["captures"] == 1, "the same call captured again: a guard failed on identical arguments"
    e_outs = e_out if isinstance(e_out, (tuple, list)) else (e_out,)
    t_outs = t_out if isinstance(t_out, (tuple, list)) else (t_out,)
    assert len(e_outs) == len(t_outs)
    lowp = any(a.dtype == np.float32 for a in arrays if a.dtype.kind == "f")
    rtol = rtol if rtol is not None else (1e-4 if lowp else 1e-7)
    atol = atol if atol is not None else (1e-5 if lowp else 1e-9)
    rng = np.random.default_rng(seed)
    e_roots, e_cots, t_roots, t_cots = [], [], [], []
    for eo, to in zip(e_outs, t_outs):
        assert tuple(eo.shape) == tuple(to.shape), (eo.shape, to.shape)
        assert str(eo.dtype).split(".")[-1] == str(to.dtype).split(".")[-1], (eo.dtype, to.dtype)
        if DEVICE != "cpu" and e_in:
            assert eo.device == e_in[0].device, f"output on {eo.device}, inputs on {e_in[0].device}"
        np.testing.assert_allclose(host(eo), to.detach().numpy(), rtol=rtol, atol=atol)
        if eo.requires_grad and to.requires_grad:
            c = rng.standard_normal(eo.shape).astype(host(eo).dtype)
            e_roots.append(eo), e_cots.append(ember.from_numpy(c).to(eo.device))
            t_roots.append(to), t_cots.append(torch.from_numpy(c.copy()))
    if not e_roots:
        return
    ember.autograd.backward(e_roots, e_cots)
    torch.autograd.backward(t_roots, t_cots)
    for i, (e, t) in enumerate(zip(e_in, t_in)):
        if t.requires_grad:
            tg = t.grad
            eg = e.grad
            if tg is None:
                assert eg is None or np.allclose(host(eg), 0), f"input {i}: ember has a gradient, PyTorch none"
                continue
            assert eg is not None, f"input {i}: PyTorch has a gradient, ember none"
            assert eg.shape == tuple(tg.shape)
            assert eg.device == e.device, f"gradient of input {i} on {eg.device}, input on {e.device}"
            np.testing.assert_allclose(host(eg), tg.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")
    if FORWARD_AD and not COMPILE and check_jvp:
        compare_torch_jvp(ember_fn, torch_fn, *arrays, rtol=rtol, atol=atol, seed=seed)


def compare_torch_jvp(ember_fn, torch_fn, *arrays, rtol: float = 1e-7, atol: float = 1e-9, seed: int = 1) -> None:
    """Forward mode against PyTorch's: the tangents of the outputs when every float input carries the same random
    tangent in both. Skipped where PyTorch itself has no forward-mode formula for an op of `torch_fn`."""
    if torch is None:
        pytest.skip("PyTorch is not installed")
    import torch.autograd.forward_ad as tfw
    from ember.autograd import forward_ad as efw
    rng = np.random.default_rng(seed + 1)
    tans = [rng.standard_normal(a.shape).astype(a.dtype) if a.dtype.kind == "f" else None for a in arrays]
    try:
        with tfw.dual_level():
            t_in = [tfw.make_dual(torch.tensor(a), torch.from_numpy(t.copy())) if t is not None else torch.tensor(a)
                    for a, t in zip(arrays, tans)]
            t_out = torch_fn(*t_in)
            t_outs = t_out if isinstance(t_out, (tuple, list)) else (t_out,)
            t_tans = [tfw.unpack_dual(o).tangent if isinstance(o, torch.Tensor) else None for o in t_outs]
    except (NotImplementedError, RuntimeError):
        # PyTorch's forward AD cannot run this call (no formula for an op, or its own dtype checks refuse the
        # dual inputs, e.g. mse_loss with an integer target): nothing to compare with. ember's forward mode is
        # still checked against central differences wherever `check_grad` runs
        return
    with efw.dual_level():
        e_in = [efw.make_dual(leaf(a, False), leaf(t, False)) if t is not None else leaf(a, False)
                for a, t in zip(arrays, tans)]
        e_out = ember_fn(*e_in)
        e_outs = e_out if isinstance(e_out, (tuple, list)) else (e_out,)
        for k, (eo, tt) in enumerate(zip(e_outs, t_tans)):
            et = efw.unpack_dual(eo).tangent if isinstance(eo, ember.Tensor) else None
            if tt is None:
                # PyTorch gives no tangent for a float output of dual inputs where it lacks a forward formula and
                # does not say so (scatter_reduce "prod"): nothing to compare; elsewhere none is none
                assert et is None or np.allclose(host(et), 0) or (eo.is_floating_point() and t_outs[k].is_floating_point()), \
                    f"output {k}: ember has a tangent, PyTorch none"
                continue
            assert et is not None, f"output {k}: PyTorch has a tangent, ember none"
            assert tuple(et.shape) == tuple(tt.shape), (et.shape, tt.shape)
            # (force: PyTorch may give an "efficient zero" tangent, which refuses a plain .numpy())
            np.testing.assert_allclose(host(et), tt.detach().numpy(force=True), rtol=rtol, atol=atol,
                                       err_msg=f"tangent of output {k}")


def captured(fn, *args):
    """`ember.compile(fn)` (of a Module: of its call), called once on `args` (the capture). The tensors `fn`
    holds (a Module's parameters and buffers, the tensors of its closure) and the RNG are wound back
    afterwards, so that the replays that follow find the state the eager call would have found."""
    compiled = ember.compile(fn.__call__ if isinstance(fn, ember.nn.Module) else fn)
    rewind = _snapshot(_held(fn))
    compiled(*args)
    rewind()
    return compiled


def compile_every_module() -> None:
    """EMBER_TEST_COMPILE=1: every call of an ember Module outside a capture goes through `ember.compile` of
    the module's call (as `Module.compile()` does). A call that captured a program is made again at once,
    from the parameters, buffers and RNG state it found, and that second call, a replay, gives the result.
    A call that broke the graph (it ran eagerly, each submodule compiled the same way) or that wrote into
    its arguments is not repeated."""
    from ember import _capture
    from ember.nn import Module

    eager_call = Module.__call__
    compiled = weakref.WeakKeyDictionary()  # module -> ember.compile(module._call)

    def __call__(self, *args, **kwargs):
        if _capture.ACTIVE is not None or "_compiled_call" in self.__dict__:  # part of a capture; compiled by the test
            return eager_call(self, *args, **kwargs)
        fn = compiled.get(self)
        if fn is None:
            fn = compiled[self] = ember.compile(self._call)
        captures = fn.stats["captures"]
        rewind = _snapshot(_held(self))
        versions = [(t, t._version) for t in _tensors((args, kwargs))]
        out = fn(*args, **kwargs)
        if (fn.stats["captures"] == captures or fn.cache[fn.last_key][-1].program is None  # no capture; a graph break
                or any(t._version != v for t, v in versions)):
            return out
        rewind()
        return fn(*args, **kwargs)

    Module.__call__ = __call__


def _held(fn) -> list:
    """The tensors a function or Module holds: a Module's parameters and buffers; those in a function's
    closure and defaults."""
    if hasattr(fn, "__code__"):
        fn = [c.cell_contents for c in fn.__closure__ or ()] + list(fn.__defaults__ or ())
    return list(_tensors(fn))


def _snapshot(tensors):
    """A function that restores the values of `tensors` (those that changed) and the RNG state as they are now."""
    values = [(t, host(t).copy()) for t in tensors]
    rng = ember.get_rng_state()

    def rewind():
        with ember.no_grad():
            for t, a in values:
                if not np.array_equal(host(t), a):
                    t.copy_(ember.from_numpy(a))
        ember.set_rng_state(rng)
    return rewind


def _tensors(obj):
    """The tensors in `obj`: itself, a Module's parameters and buffers, those in (nested) tuples, lists and dicts."""
    if isinstance(obj, ember.Tensor):
        yield obj
    elif isinstance(obj, ember.nn.Module):
        yield from itertools.chain(obj.parameters(), obj.buffers())
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def raises_like_torch(fn, lib, exc: type[BaseException], match: str | None = None) -> None:
    """`fn(lib)` (lib: ember or torch) raises `exc`; for ember, `match` (a case-insensitive regex)
    must find the culprit in the message, and no NumPy exception may leak out. Warnings are not the
    point of these checks and are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc) as info:
            fn(lib)
    if match is not None:
        msg = str(info.value)
        assert type(info.value).__module__.split(".")[0] != "numpy", f"a NumPy error leaked out: {msg!r}"
        assert re.search(match, msg, re.IGNORECASE | re.DOTALL), f"message does not name the culprit: {msg!r}"


def write_idx(path, array: np.ndarray, compress: bool = False) -> None:
    """An IDX file (big-endian header: magic 0x0000 08 ndim, then each dimension) holding uint8 `array`."""
    raw = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(raw)


def make_mnist_like(root, folder: str = "MNIST", n_train: int = 400, n_test: int = 200, seed: int = 0) -> None:
    """A few hundred 28x28 images whose class decides where a bright square sits, plus noise."""
    rng = np.random.default_rng(seed)
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    for split, n, compress in (("train", n_train, True), ("t10k", n_test, False)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, c in enumerate(labels):
            r, k = 3 + 12 * (c // 5), 1 + 5 * (c % 5)
            images[i, r:r + 8, k:k + 5] = 255
        suffix = ".gz" if compress else ""
        write_idx(raw / f"{split}-images-idx3-ubyte{suffix}", images, compress)
        write_idx(raw / f"{split}-labels-idx1-ubyte{suffix}", labels, compress)
