"""Training around the ops on CUDA: optimizers (and their fused kernels), checkpoints, the DataLoader's
pinned memory, `python -m ember train/bench --device cuda`.

Runs on a real GPU where CuPy finds one, else on the CPU stand-in tests/_fakecuda.py (two devices).
"""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
import ember.utils.data as D
from ember import backend
from ember.backend import kernels


@pytest.fixture
def cuda():
    """CUDA for the test: the real one, or the fake installed for it (and removed after)."""
    before = backend.CUDA if backend.CUDA is not backend.UNSET else None
    installed = False
    if not ember.cuda.is_available():
        import _fakecuda
        _fakecuda.install()
        installed = True
    be = backend.CUDA
    yield be
    if installed:
        backend.uninstall_cuda()
    elif backend.CUDA is not be and before is not None:  # a test took CUDA away: give it back
        backend.install_cuda(before.cp, before.cpx)


def _no_cuda(monkeypatch) -> None:
    """Simulate a machine without CUDA (until the test ends)."""
    backend.uninstall_cuda()
    monkeypatch.setenv("EMBER_DISABLE_CUDA", "1")
    assert not ember.cuda.is_available()


def _host(t) -> np.ndarray:
    return t.detach().cpu().numpy()


# ====================================================================== optimizers
OPTIMIZERS = [
    (ember.optim.SGD, {"lr": 0.1}),
    (ember.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (ember.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (ember.optim.SGD, {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "maximize": True}),
    (ember.optim.Adam, {"lr": 1e-2}),
    (ember.optim.Adam, {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.1}),
    (ember.optim.Adam, {"lr": 1e-2, "betas": (0.3, 0.99), "l1_weight_decay": 1e-3}),  # lerp's other form
    (ember.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    (ember.optim.Adamax, {"lr": 1e-2}),
    (ember.optim.NAdam, {"lr": 1e-2}),
    (ember.optim.RAdam, {"lr": 1e-2}),
    (ember.optim.RMSprop, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    (ember.optim.Adagrad, {"lr": 1e-2, "initial_accumulator_value": 0.1, "lr_decay": 0.01}),
    (ember.optim.Adadelta, {"lr": 1.0}),
]
SHAPES = [(3, 4), (5,), (300, 200), (7, 1, 2)]  # (300, 200) is above GROUP_MAX: updated alone


def _trajectory(cls, kw, device, steps: int = 4):
    rng = np.random.default_rng(0)
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32)).to(device).requires_grad_() for s in SHAPES]
    opt = cls(ps, **kw)
    for _ in range(steps):
        for p in ps:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32)).to(device)
        opt.step()
    return ps, opt


@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_optimizer_on_cuda_matches_cpu(cuda, cls, kw):
    cpu, _ = _trajectory(cls, kw, "cpu")
    dev, opt = _trajectory(cls, kw, "cuda")
    for a, b in zip(cpu, dev):
        assert b.device.type == "cuda"
        if cuda.fake:  # the same ufuncs (and the kernels' NumPy references): bit for bit
            np.testing.assert_array_equal(_host(b), _host(a))
        else:  # fused kernels may contract into FMAs
            np.testing.assert_allclose(_host(b), _host(a), rtol=1e-5, atol=1e-6)
    for p, st in opt.state.items():
        for name, t in st.items():
            # buffers on the parameter's device; counters ('step', ...) in host memory, read as numbers
            want = "cpu" if t.dim() == 0 else "cuda"
            assert t.device.type == want, (name, t.device)
    if cls is ember.optim.SGD:
        return  # SGD keeps no counted state: no grouped layout
    lay = [v for v in opt._layouts.values() if v is not None]
    assert lay and lay[0].xp is cuda.cp, "the small CUDA parameters were not updated as one flat array"


def test_state_and_scratch_live_on_each_parameters_device(cuda):
    if cuda.count < 2:
        pytest.skip("needs two CUDA devices")
    p0 = ember.ones(4, 3, device="cuda:0", requires_grad=True)
    p1 = ember.ones(4, 3, device="cuda:1", requires_grad=True)
    big = ember.ones(200, 200, device="cuda:1", requires_grad=True)
    opt = ember.optim.Adam([p0, p1, big], lr=0.1)
    for p in (p0, p1, big):
        p.grad = ember.full_like(p, 0.5)
    opt.step()
    opt.step()
    assert str(opt.state[p1]["exp_avg"].device) == "cuda:1" and str(opt.state[p0]["exp_avg"].device) == "cuda:0"
    assert {str(backend.device_of(pool)) for pool in opt._pools.values()} == {"cuda:0", "cuda:1"}
    ref = ember.ones(4, 3, requires_grad=True)
    ropt = ember.optim.Adam([ref], lr=0.1)
    ref.grad = ember.full_like(ref, 0.5)
    ropt.step()
    ropt.step()
    for p in (p0, p1):
        np.testing.assert_allclose(_host(p), _host(ref), rtol=1e-6)


@pytest.mark.parametrize("src,dst", [("cpu", "cuda"), ("cuda", "cpu"), ("cuda", "cuda")])
def test_load_state_dict_moves_state_to_the_parameters_device(cuda, src, dst):
    cls, kw = ember.optim.Adam, {"lr": 1e-2, "amsgrad": True}
    ps, opt = _trajectory(cls, kw, src, steps=2)
    qs = [p.detach().to(dst).requires_grad_() for p in ps]
    opt2 = cls(qs, **kw)
    opt2.load_state_dict(opt.state_dict())
    for q in qs:
        st = opt2.state[q]
        assert st["exp_avg"].device.type == dst and st["max_exp_avg_sq"].device.type == dst
        assert st["step"].device.type == "cpu" and float(st["step"]) == 2.0
    for p, q in zip(ps, qs):  # both continue identically
        g = ember.tensor(np.full(p.shape, 0.25, np.float32))
        p.grad, q.grad = g.to(src), g.to(dst)
    opt.step()
    opt2.step()
    for p, q in zip(ps, qs):
        np.testing.assert_allclose(_host(q), _host(p), rtol=1e-6, atol=1e-7)
    # the loaded buffers are copies, not the source's arrays
    assert opt2.state[qs[0]]["exp_avg"]._data is not opt.state[ps[0]]["exp_avg"]._data


def test_load_state_dict_of_a_cuda_checkpoint_on_the_cpu(cuda, tmp_path):
    ps, opt = _trajectory(ember.optim.SGD, {"lr": 0.1, "momentum": 0.9}, "cuda", steps=2)
    ember.save(opt.state_dict(), tmp_path / "opt.safetensors")
    qs = [p.detach().cpu().requires_grad_() for p in ps]
    opt2 = ember.optim.SGD(qs, lr=0.1, momentum=0.9)
    opt2.load_state_dict(ember.load(tmp_path / "opt.safetensors", map_location="cpu"))
    assert all(opt2.state[q]["momentum_buffer"].device.type == "cpu" for q in qs)
    opt3 = ember.optim.SGD(qs, lr=0.1, momentum=0.9)
    opt3.load_state_dict(ember.load(tmp_path / "opt.safetensors"))  # buffers come back on CUDA, go to the CPU
    for q in qs:
        b2, b3 = opt2.state[q]["momentum_buffer"], opt3.state[q]["momentum_buffer"]
        assert b3.device.type == "cpu"
        np.testing.assert_array_equal(b3.numpy(), b2.numpy())


# ====================================================================== fused kernels
def test_kernels_fall_back_to_their_reference_on_the_fake(cuda):
    if not cuda.fake:
        pytest.skip("the fake's kernels only")
    with pytest.raises(NotImplementedError):
        cuda.cp.ElementwiseKernel(*kernels.KERNELS["ember_adam"], "ember_adam")
    assert kernels._kernel(cuda.cp.zeros(3, np.float32), "ember_adam") is None
    assert kernels._kernel(np.zeros(3, np.float32), "ember_adam") is None


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.2, 0.9)])
def test_adam_reference_equals_the_cpu_optimizer(cuda, amsgrad, betas):
    rng = np.random.default_rng(1)
    p0, m0, v0, g = (rng.standard_normal((64, 33)).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)
    vmax0 = v0 + np.abs(rng.standard_normal(v0.shape).astype(np.float32)) * (rng.random(v0.shape) < 0.5)
    lr, eps, step = 3e-3, 1e-8, 7
    p = ember.tensor(p0.copy(), requires_grad=True)
    opt = ember.optim.Adam([p], lr=lr, betas=betas, eps=eps, amsgrad=amsgrad)
    opt.state[p] = {"step": ember.tensor(float(step - 1)), "exp_avg": ember.tensor(m0.copy()),
                    "exp_avg_sq": ember.tensor(v0.copy())}
    if amsgrad:
        opt.state[p]["max_exp_avg_sq"] = ember.tensor(vmax0.copy())
    p.grad = ember.tensor(g)
    opt.step()
    # the reference on device arrays (what runs on the fake; the kernel's math on a GPU)
    up = cuda.upload
    a, m, v = up(p0, 0), up(m0, 0), up(v0, 0)
    vmax = up(vmax0, 0) if amsgrad else None
    b1, b2 = betas
    kernels.adam_reference(a, up(g, 0), m, v, vmax, 1 - b1, b2, (1 - b2 ** step) ** 0.5, eps,
                           -(lr / (1 - b1 ** step)), cuda.cp.empty_like(a))
    np.testing.assert_array_equal(cuda.download(a), p.detach().numpy())
    np.testing.assert_array_equal(cuda.download(m), opt.state[p]["exp_avg"].numpy())
    np.testing.assert_array_equal(cuda.download(v), opt.state[p]["exp_avg_sq"].numpy())
    if amsgrad:
        np.testing.assert_array_equal(cuda.download(vmax), opt.state[p]["max_exp_avg_sq"].numpy())


@pytest.mark.parametrize("kw", [{}, {"nesterov": True}, {"dampening": 0.25}])
def test_sgd_momentum_reference_equals_the_cpu_optimizer(cuda, kw):
    rng = np.random.default_rng(2)
    p0, g1, g2 = (rng.standard_normal((50, 7)).astype(np.float32) for _ in range(3))
    lr, mu = 0.05, 0.9
    p = ember.tensor(p0.copy(), requires_grad=True)
    opt = ember.optim.SGD([p], lr=lr, momentum=mu, **kw)
    up = cuda.upload
    a, tmp = up(p0, 0), cuda.cp.empty((50, 7), np.float32)
    b = None
    for i, g in enumerate((g1, g2)):
        p.grad = ember.tensor(g)
        opt.step()
        d = up(g, 0)
        if b is None:
            b = d.copy()
        kernels.sgd_momentum_reference(a, d, b, mu, kw.get("dampening", 0.0), -lr, i == 0,
                                       kw.get("nesterov", False), tmp)
        np.testing.assert_array_equal(cuda.download(a), p.detach().numpy())
        np.testing.assert_array_equal(cuda.download(b), opt.state[p]["momentum_buffer"].numpy())


_CTYPES = {"T": "T", "bool": "bool", "float32": "float", "float64": "double", "int32": "int", "int64": "long long"}


def _wrapper(name: str, in_params: str, out_params: str, body: str, ctype: str) -> str:
    """A __global__ function around an ElementwiseKernel body, as CuPy would generate it (in spirit)."""
    args, lets = [], []
    for decl in (x.strip() for x in in_params.split(",")):
        t, v = decl.split()
        args.append(f"const {_CTYPES[t]}* __restrict__ {v}_")
        lets.append(f"const {_CTYPES[t]} {v} = {v}_[i];")
    for decl in (x.strip() for x in out_params.split(",")):
        t, v = decl.split()
        args.append(f"{_CTYPES[t]}* __restrict__ {v}_")
        lets.append(f"{_CTYPES[t]}& {v} = {v}_[i];")
    return (f"namespace {name}_{ctype} {{\ntypedef {ctype} T;\n"
            f"__global__ void {name}({', '.join(args)}, int n) {{\n"
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n"
            f"  {' '.join(lets)}\n{body}\n}}\n}}\n")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_kernels_compile_with_nvcc(tmp_path):
    src = "".join(_wrapper(name, *spec, ctype) for name, spec in kernels.KERNELS.items()
                  for ctype in ("float", "double"))
    path = tmp_path / "ember_kernels.cu"
    path.write_text(src)
    proc = subprocess.run(["nvcc", "-c", str(path), "-o", str(tmp_path / "k.o")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"nvcc rejected backend/kernels.py:\n{proc.stderr}\n{src}"


def test_nvcc_wrapper_catches_a_syntax_error(tmp_path):
    # the wrapper test can fail: a body with a C error is rejected
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    path = tmp_path / "bad.cu"
    path.write_text(_wrapper("bad", "T d", "T p", "p += d * ;", "float"))
    proc = subprocess.run(["nvcc", "-c", str(path), "-o", str(tmp_path / "b.o")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0


# ====================================================================== checkpoints
def _sd(cuda):
    sd = {"a": ember.arange(6.0).reshape(2, 3).to("cuda:0"), "c": ember.tensor([1, 2, 3]), "n": 5}
    if cuda.count > 1:
        sd["b"] = ember.ones(4).to("cuda:1")
    return sd


def _same_values(out, sd):
    assert set(out) == set(sd)
    for k, v in sd.items():
        if isinstance(v, ember.Tensor):
            np.testing.assert_array_equal(_host(out[k]), _host(v))
            assert out[k].dtype == v.dtype
        else:
            assert out[k] == v


def test_save_cuda_records_devices_and_load_restores_them(cuda, tmp_path):
    sd = _sd(cuda)
    p = tmp_path / "m.safetensors"
    ember.save(sd, p)
    raw = p.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    devices = json.loads(header["__metadata__"]["ember"])["devices"]
    assert devices["a"] == "cuda:0" and "c" not in devices
    out = ember.load(p)
    _same_values(out, sd)
    for k, v in sd.items():
        if isinstance(v, ember.Tensor):
            assert out[k].device == v.device
    # a file object too
    buf = io.BytesIO()
    ember.save(sd, buf)
    buf.seek(0)
    assert ember.load(buf)["a"].device == sd["a"].device


@pytest.mark.parametrize("loc", ["cpu", "cuda", "cuda:1", ember.device("cuda", 1), ember.device("cpu")],
                         ids=str)
def test_load_map_location_device(cuda, tmp_path, loc):
    sd = _sd(cuda)
    ember.save(sd, tmp_path / "m.safetensors")
    want = backend.resolve(loc) if str(loc) != "cuda:1" or cuda.count > 1 else None
    if want is None:
        pytest.skip("needs two CUDA devices")
    out = ember.load(tmp_path / "m.safetensors", map_location=loc)
    _same_values(out, sd)
    assert all(out[k].device == want for k in sd if isinstance(sd[k], ember.Tensor))


def test_load_map_location_dict_and_callable(cuda, tmp_path):
    sd = _sd(cuda)
    ember.save(sd, tmp_path / "m.safetensors")
    out = ember.load(tmp_path / "m.safetensors", map_location={"cuda:0": "cpu"})
    _same_values(out, sd)
    assert out["a"].device.type == "cpu" and out["c"].device.type == "cpu"
    if "b" in sd:  # locations the dict does not name stay where they were saved
        assert str(out["b"].device) == "cuda:1"
    out = ember.load(tmp_path / "m.safetensors", map_location={ember.device("cpu"): "cuda:0"})
    assert str(out["c"].device) == "cuda:0" and str(out["a"].device) == "cuda:0"
    seen = {}

    def fn(t, location):
        seen[tuple(t.shape)] = location
        assert t.device.type == "cpu"  # the callable receives the host copy
        return t * 2 if location == "cpu" else None  # None: the saved location

    out = ember.load(tmp_path / "m.safetensors", map_location=fn)
    assert seen[(2, 3)] == "cuda:0" and seen[(3,)] == "cpu"
    assert str(out["a"].device) == "cuda:0" and out["c"].tolist() == [2, 4, 6]
    with pytest.raises(TypeError, match="map_location"):
        ember.load(tmp_path / "m.safetensors", map_location={"cuda:0": 3})


def test_load_cuda_checkpoint_without_cuda_says_use_map_location(cuda, tmp_path, monkeypatch):
    ember.save(_sd(cuda), tmp_path / "m.safetensors")
    ember.save({"x": ember.ones(2)}, tmp_path / "cpu.safetensors")
    _no_cuda(monkeypatch)
    with pytest.raises(RuntimeError, match=r"saved on cuda:0.*CUDA is not available.*map_location='cpu'"):
        ember.load(tmp_path / "m.safetensors")
    out = ember.load(tmp_path / "m.safetensors", map_location="cpu")
    assert out["a"].device.type == "cpu" and out["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    out = ember.load(tmp_path / "m.safetensors", map_location={"cuda:0": "cpu", "cuda:1": "cpu"})
    assert out["a"].device.type == "cpu"
    assert ember.load(tmp_path / "cpu.safetensors")["x"].tolist() == [1, 1]  # CPU checkpoints are unaffected
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.load(tmp_path / "cpu.safetensors", map_location="cuda")


def test_load_on_a_missing_device_index(cuda, tmp_path, monkeypatch):
    if cuda.count < 2:
        pytest.skip("needs two CUDA devices")
    ember.save({"b": ember.ones(2).to("cuda:1")}, tmp_path / "m.safetensors")
    monkeypatch.setattr(cuda, "count", 1)
    with pytest.raises(RuntimeError, match=r"saved on cuda:1.*device_count\(\) is 1"):
        ember.load(tmp_path / "m.safetensors")


# ====================================================================== DataLoader
class _Pairs(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": ember.full((3,), float(i)), "pair": (ember.tensor(i), np.float32(i))}, "label"


@pytest.mark.parametrize("workers", [0, 1])
def test_dataloader_pin_memory_with_cuda(cuda, workers):
    loader = D.DataLoader(_Pairs(), batch_size=2, pin_memory=True, num_workers=workers, pin_memory_device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(loader)
    assert len(batches) == 3
    for i, (b, labels) in enumerate(batches):
        x, (idx, f) = b["x"], b["pair"]
        assert x.is_pinned() and idx.is_pinned() and f.is_pinned()
        assert x.device.type == "cpu" and x.tolist() == [[2.0 * i] * 3, [2.0 * i + 1] * 3]
        assert list(labels) == ["label", "label"]
        moved = x.to("cuda", non_blocking=True)
        ember.cuda.synchronize()
        np.testing.assert_array_equal(_host(moved), x.numpy())
    plain = next(iter(D.DataLoader(_Pairs(), batch_size=2)))[0]["x"]
    assert not plain.is_pinned()


def test_dataloader_pin_memory_without_cuda_warns_once(cuda, monkeypatch):
    _no_cuda(monkeypatch)
    loader = D.DataLoader(_Pairs(), batch_size=3, pin_memory=True)
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found") as rec:
        first = list(loader)
        second = list(loader)
    assert len([w for w in rec if "pin_memory" in str(w.message)]) == 1
    assert len(first) == len(second) == 2 and not first[0][0]["x"].is_pinned()


# ====================================================================== training
class _RawMLP(nn.Module):
    """8-16-4 with ReLU, from tensor ops only (matmul, add, relu): independent of nn.Linear's own backward."""

    def __init__(self) -> None:
        super().__init__()
        self.w1, self.b1 = nn.Parameter(ember.randn(8, 16) * 0.3), nn.Parameter(ember.zeros(16))
        self.w2, self.b2 = nn.Parameter(ember.randn(16, 4) * 0.3), nn.Parameter(ember.zeros(4))

    def forward(self, x):
        return (x @ self.w1 + self.b1).relu() @ self.w2 + self.b2


def _mlp(kind: str) -> nn.Module:
    ember.manual_seed(0)
    return _RawMLP() if kind == "raw" else nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _why_not_on_cuda(fn) -> str | None:
    """None when `fn()` runs on CUDA; else why (a failure in ember/ops or ember/nn, which other tests cover)."""
    try:
        fn()
        return None
    except Exception as e:
        return f"not device-generic yet ({type(e).__name__}: {str(e)[:120]})"


def _linear_backward():
    F.linear(ember.ones(2, 3, device="cuda"), ember.ones(4, 3, device="cuda", requires_grad=True),
             ember.ones(4, device="cuda", requires_grad=True)).sum().backward()


@pytest.mark.parametrize("kind", ["raw", "nn"])
@pytest.mark.parametrize("make_opt", [lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: ember.optim.AdamW(ps, lr=1e-2)], ids=["sgd", "adamw"])
def test_mlp_training_on_cuda_matches_cpu(cuda, make_opt, kind):
    why = kind == "nn" and _why_not_on_cuda(_linear_backward)
    if why:
        pytest.skip(f"nn.Linear: {why}")
    rng = np.random.default_rng(0)
    x_np, y_np = rng.standard_normal((32, 8)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    results = []
    for dev in ("cpu", "cuda"):
        model = _mlp(kind).to(dev)
        opt = make_opt(model.parameters())
        x, y = ember.from_numpy(x_np).to(dev), ember.from_numpy(y_np).to(dev)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert all(p.device.type == ember.device(dev).type for p in model.parameters())
        results.append((losses, [_host(p) for p in model.parameters()]))
    (l_cpu, w_cpu), (l_dev, w_dev) = results
    assert l_dev[-1] < l_dev[0]
    np.testing.assert_allclose(l_dev, l_cpu, rtol=1e-5)
    for a, b in zip(w_dev, w_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _cross_entropy_backward():
    logits = ember.zeros(4, 3, device="cuda", requires_grad=True)
    F.cross_entropy(logits, ember.tensor([0, 1, 2, 0], device="cuda")).backward()


def _cross_entropy_works_on_cuda() -> str | None:
    """Why the CLI's and the benchmarks' ops (cross_entropy, Linear) fail on CUDA, or None when they work."""
    for name, fn in (("F.cross_entropy", _cross_entropy_backward), ("nn.Linear", _linear_backward)):
        why = _why_not_on_cuda(fn)
        if why:
            return f"{name}: {why}"
    return None


def test_cli_train_on_cuda(cuda, tmp_path, capsys):
    why = _cross_entropy_works_on_cuda()
    if why:
        pytest.skip(why)
    from ember.cli import main
    rc = main(["train", "--device", "cuda", "--epochs", "1", "--model", "mlp", "--batch-size", "256",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "device cuda:0" in out and re.search(r"test accuracy [\d.]+ matches", out)
    ckpt = ember.load(tmp_path / "checkpoint.safetensors")  # saved from CUDA: comes back there
    w = next(iter(ckpt["model"].values()))
    assert w.device.type == "cuda"
    assert any(t.device.type == "cuda" for st in ckpt["optimizer"]["state"].values() for t in st.values()
               if isinstance(t, ember.Tensor) and t.dim() > 0)
    # and it resumes / evaluates (also from the CPU)
    assert main(["evaluate", "--checkpoint", str(tmp_path / "model.safetensors"), "--device", "cuda"]) == 0
    assert main(["evaluate", "--checkpoint", str(tmp_path / "model.safetensors")]) == 0


def test_cli_train_on_cuda_without_cuda_is_one_line(cuda, tmp_path, capsys, monkeypatch):
    _no_cuda(monkeypatch)
    from ember.cli import main
    rc = main(["train", "--device", "cuda", "--epochs", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--device cuda" in err and "not available" in err


def test_bench_on_cuda_without_cuda_is_one_line(cuda, capsys, monkeypatch):
    _no_cuda(monkeypatch)
    from ember.cli import main
    rc = main(["bench", "--device", "cuda", "--quick"])
    err = capsys.readouterr().err
    assert rc != 0
    assert err.count("\n") == 1 and err.startswith("python -m ember bench: error: --device cuda:")
    assert "not available" in err


def _bench_layers_backward():
    ember.manual_seed(0)
    x = ember.randn(2, 1, 8, 8, device="cuda")
    conv = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()).to("cuda")
    mlp = nn.Sequential(nn.Linear(32, 8), nn.LayerNorm(8), nn.Dropout(0.5)).to("cuda")
    mlp(conv(x)).sum().backward()


def test_bench_on_cuda_runs_w1_to_w3(cuda, capsys, monkeypatch):
    why = _cross_entropy_works_on_cuda() or _why_not_on_cuda(_bench_layers_backward)
    if why:
        pytest.skip(f"W2/W3 layers (Conv2d+ReLU+MaxPool2d, LayerNorm, Dropout): {why}")
    import benchmarks.suite as suite
    monkeypatch.setattr(suite, "DEVICE_BATCHES", (16,))  # the fake is a CPU: keep it short
    from ember.cli import main
    assert main(["bench", "--device", "cuda", "--quick"]) == 0
    out = capsys.readouterr().out
    for w in ("W1", "W2", "W3"):
        assert f"| {w}" in out
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        assert "ember alone" in out
