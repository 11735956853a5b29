"""Devices: `ember.device`, `device=` on factories, `.to/.cuda/.cpu`, `ember.cuda`, mixed-device
errors, per-device generators, pinned memory, and the behaviour without CuPy or without a GPU.

Runs on a real GPU when CuPy sees one, otherwise on tests/_fakecuda.py (CuPy's interface, NumPy
underneath, strict where CuPy is strict). Tests that need real hardware say so and skip.
"""
from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest

import ember
from ember import backend

REAL_GPU = False  # set by the fixture


@pytest.fixture
def cuda():
    """CUDA for one test: the real GPU when there is one, else the fake; restored afterwards."""
    global REAL_GPU
    if ember.cuda.is_available() and not backend.CUDA.fake:
        REAL_GPU = True
        yield backend.CUDA
        return
    import _fakecuda
    before = backend.CUDA
    be = _fakecuda.install()
    ember._creation._cuda_gens.clear()
    try:
        yield be
    finally:
        ember._creation._cuda_gens.clear()
        backend.uninstall_cuda()
        if before is not backend.UNSET and before is not None:
            backend.install_cuda(before.cp, before.cpx)


@pytest.fixture
def no_cuda(monkeypatch):
    """A process with no usable CUDA (as without CuPy or without a GPU)."""
    before = backend.CUDA
    backend.uninstall_cuda()
    ember._creation._cuda_gens.clear()
    monkeypatch.setenv("EMBER_DISABLE_CUDA", "1")
    yield
    backend.uninstall_cuda()
    ember._creation._cuda_gens.clear()
    if before is not backend.UNSET and before is not None:
        backend.install_cuda(before.cp, before.cpx)


# ---------------------------------------------------------------------------- device objects
def test_device_parsing():
    assert ember.device("cuda:1") == ember.device("cuda", 1)
    assert str(ember.device("cuda", 1)) == "cuda:1"
    assert repr(ember.device("cuda")) == "device(type='cuda')"
    assert ember.device("cpu") == "cpu"
    assert ember.device(ember.device("cuda:0")).index == 0
    for bad, exc, msg in [("gpu", RuntimeError, "unknown device type 'gpu'"), ("cuda:x", RuntimeError, "invalid device string"),
                          ("cuda:-1", RuntimeError, "invalid device string"), (3, TypeError, "expected a string")]:
        with pytest.raises(exc, match=msg):
            ember.device(bad)
    with pytest.raises(RuntimeError, match="index given twice"):
        ember.device("cuda:0", 1)


# ---------------------------------------------------------------------------- without CUDA
def test_import_does_not_import_cupy():
    code = "import sys, ember; ember.zeros(2) + 1; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.strip() == "False"


def test_without_cuda_queries_say_no(no_cuda):
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.is_initialized() is False
    ember.cuda.manual_seed(1)  # no-ops without CUDA, as in PyTorch
    ember.cuda.manual_seed_all(1)
    ember.cuda.empty_cache()
    ember.manual_seed(3)
    assert ember.rand(2).device == ember.device("cpu")
    t = ember.ones(2)
    assert t.is_pinned() is False and t.is_cuda is False


@pytest.mark.parametrize("action", [
    lambda: ember.zeros(2, device="cuda"),
    lambda: ember.tensor([1.0], device="cuda:0"),
    lambda: ember.randn(3, device="cuda"),
    lambda: ember.ones(2).cuda(),
    lambda: ember.ones(2).to("cuda"),
    lambda: ember.nn.Linear(2, 2).cuda(),
    lambda: ember.nn.Linear(2, 2).to("cuda:0"),
    lambda: ember.cuda.synchronize(),
    lambda: ember.cuda.current_device(),
    lambda: ember.ones(2).pin_memory(),
    lambda: ember.Generator("cuda"),
], ids=["zeros", "tensor", "randn", "Tensor.cuda", "Tensor.to", "Module.cuda", "Module.to", "synchronize",
        "current_device", "pin_memory", "Generator"])
def test_without_cuda_one_clear_error(no_cuda, action):
    with pytest.raises(RuntimeError, match=r"(cuda|CUDA).* is not available: CUDA is disabled by EMBER_DISABLE_CUDA"):
        action()


def test_without_cupy_the_error_says_how_to_install(monkeypatch):
    before = backend.CUDA
    backend.uninstall_cuda()
    monkeypatch.delenv("EMBER_DISABLE_CUDA", raising=False)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    try:
        assert ember.cuda.is_available() is False
        with pytest.raises(RuntimeError, match=r"device cuda:0 is not available: CuPy is not installed.*ember\[gpu\]"):
            ember.zeros(1, device="cuda:0")
    finally:
        backend.uninstall_cuda()
        if before is not backend.UNSET and before is not None:
            backend.install_cuda(before.cp, before.cpx)


def test_cupy_without_a_gpu(monkeypatch):
    """CuPy imports on a machine without a driver; its first CUDA call fails: no GPU, one clear error."""
    class CUDARuntimeError(RuntimeError):
        pass

    def no_driver():
        raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    fake = types.ModuleType("cupy")
    fake.__version__ = "14.2.0"
    fake.ndarray = type("ndarray", (), {})
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_driver))
    before = backend.CUDA
    backend.uninstall_cuda()
    monkeypatch.delenv("EMBER_DISABLE_CUDA", raising=False)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    try:
        assert ember.cuda.is_available() is False and ember.cuda.device_count() == 0
        with pytest.raises(RuntimeError, match="CuPy 14.2.0 is installed but no CUDA GPU can be used.*InsufficientDriver"):
            ember.ones(2).cuda()
        assert ember.ones(2).sum().item() == 2.0  # the CPU is unaffected
    finally:
        backend.uninstall_cuda()
        if before is not backend.UNSET and before is not None:
            backend.install_cuda(before.cp, before.cpx)


# ---------------------------------------------------------------------------- factories and moves
FACTORIES = {
    "zeros": lambda d: ember.zeros(2, 3, device=d),
    "ones": lambda d: ember.ones((2, 3), device=d, dtype=ember.float64),
    "empty": lambda d: ember.empty(4, device=d),
    "full": lambda d: ember.full((2,), 7, device=d),
    "eye": lambda d: ember.eye(3, device=d),
    "arange": lambda d: ember.arange(5, device=d),
    "linspace": lambda d: ember.linspace(0, 1, 5, device=d),
    "logspace": lambda d: ember.logspace(0, 1, 3, device=d),
    "tensor": lambda d: ember.tensor([[1, 2], [3, 4]], device=d),
    "as_tensor": lambda d: ember.as_tensor(np.arange(3.0), device=d),
    "Tensor": lambda d: ember.Tensor([1.0, 2.0], device=d),
    "rand": lambda d: ember.rand(2, 2, device=d),
    "randn": lambda d: ember.randn(5, device=d, dtype=ember.float64),
    "randint": lambda d: ember.randint(0, 10, (4,), device=d),
    "randperm": lambda d: ember.randperm(6, device=d),
    "zeros_like": lambda d: ember.zeros_like(ember.ones(2, device=d)),
    "full_like": lambda d: ember.full_like(ember.ones(2, device=d), 3.0),
    "rand_like": lambda d: ember.rand_like(ember.ones(2, device=d)),
    "new_zeros": lambda d: ember.ones(2, device=d).new_zeros(3),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_put_tensors_on_the_device(cuda, name):
    cpu = FACTORIES[name](None)
    for d in ("cuda", "cuda:0", ember.device("cuda", 0)):
        t = FACTORIES[name](d)
        assert t.device == ember.device("cuda:0") and t.is_cuda
        assert t.dtype == cpu.dtype and t.shape == cpu.shape
    if name not in ("empty", "rand", "randn", "randint", "randperm", "rand_like"):
        np.testing.assert_array_equal(FACTORIES[name]("cuda").cpu().numpy(), cpu.numpy())


def test_second_device_and_bad_ordinal(cuda):
    if cuda.count < 2:
        pytest.skip("one CUDA device")
    t = ember.arange(4.0, device="cuda:1")
    assert t.device == ember.device("cuda:1")
    assert (t * 2).device == ember.device("cuda:1")
    assert t.to("cuda:0").device == ember.device("cuda:0")
    np.testing.assert_array_equal(t.to("cuda:0").cpu().numpy(), [0, 2 / 2, 2, 3])
    with pytest.raises(RuntimeError, match=rf"invalid device ordinal: cuda:{cuda.count} requested, but this machine has {cuda.count}"):
        ember.zeros(1, device=f"cuda:{cuda.count}")
    with ember.cuda.device(1):
        assert ember.cuda.current_device() == 1
        assert ember.zeros(1, device="cuda").device == ember.device("cuda:1")
    assert ember.cuda.current_device() == 0
    ember.cuda.set_device("cuda:1")
    try:
        assert ember.ones(1).cuda().device == ember.device("cuda:1")
    finally:
        ember.cuda.set_device(0)


def test_to_cuda_cpu_round_trip_and_gradient(cuda):
    x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert y.device.type == "cuda" and y.requires_grad and y.grad_fn is not None
    z = (y * y).sum()
    assert z.device.type == "cuda"
    z.backward()
    assert x.grad.device == ember.device("cpu")  # the gradient comes back through the move
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0, 6.0])
    w = ember.ones(3, device="cuda", requires_grad=True)
    (w.cpu() * 3).sum().backward()
    assert w.grad.device.type == "cuda"
    np.testing.assert_allclose(w.grad.cpu().numpy(), 3.0)
    t = ember.ones(2, device="cuda")
    assert t.to("cuda") is t and t.cuda() is t and t.cpu().cpu() is not t
    assert t.to("cpu", ember.float64).dtype == ember.float64
    d = t.to(ember.zeros(1, dtype=ember.float16))
    assert d.device.type == "cpu" and d.dtype == ember.float16
    assert t.to(device="cpu", copy=True).device.type == "cpu"


def test_conversions_of_a_cuda_tensor(cuda):
    t = ember.tensor([[1.5, 2.0]], device="cuda")
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy|can't convert cuda:0 tensor to numpy.*Tensor.cpu()"):
        t.numpy()
    with pytest.raises(TypeError, match="cuda:0.*Tensor.cpu()"):
        np.asarray(t)
    assert t.tolist() == [[1.5, 2.0]]
    assert t[0, 1].item() == 2.0
    assert float(t.sum()) == 3.5
    assert "device='cuda:0'" in repr(t)
    assert t.cpu().numpy().tolist() == [[1.5, 2.0]]


# ---------------------------------------------------------------------------- mixed devices
MIXED = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: ember.mul(a, b),
    "matmul": lambda a, b: a @ b,
    "cat": lambda a, b: ember.cat([a, b]),
    "where": lambda a, b: ember.where(a > 0, a, b),
    "maximum": lambda a, b: ember.maximum(a, b),
    "sub_scalar_tensor": lambda a, b: a - b.sum(),  # a 0-d CPU tensor is not a number: still an error
    "add_": lambda a, b: a.add_(b),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixing_cpu_and_cuda_names_both_devices(cuda, name):
    a = ember.ones(2, 2, device="cuda")
    b = ember.ones(2, 2)
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found at least two "
                                           r"devices, cpu and cuda:0"):
        MIXED[name](a, b)


def test_copy_between_devices_is_allowed(cuda):
    """copy_ moves values across devices, as in PyTorch."""
    a = ember.zeros(3, device="cuda")
    a.copy_(ember.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(a.cpu().numpy(), [1, 2, 3])
    b = ember.zeros(3)
    b.copy_(a)
    np.testing.assert_array_equal(b.numpy(), [1, 2, 3])


def test_mixing_two_gpus_names_both(cuda):
    if cuda.count < 2:
        pytest.skip("one CUDA device")
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1"):
        ember.ones(2, device="cuda:0") + ember.ones(2, device="cuda:1")


def test_backward_with_a_gradient_on_another_device(cuda):
    y = ember.ones(2, device="cuda", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="grad_output\\[0\\] is on cpu but output\\[0\\] is on cuda:0"):
        y.backward(ember.ones(2))


# ---------------------------------------------------------------------------- random numbers
def test_cuda_generators_are_seeded_by_manual_seed(cuda):
    ember.manual_seed(7)
    a = ember.rand(5, device="cuda").cpu().numpy()
    ember.manual_seed(7)
    b = ember.rand(5, device="cuda").cpu().numpy()
    np.testing.assert_array_equal(a, b)
    ember.cuda.manual_seed_all(8)
    c = ember.rand(5, device="cuda").cpu().numpy()
    ember.cuda.manual_seed(8)
    np.testing.assert_array_equal(c, ember.rand(5, device="cuda").cpu().numpy())
    assert ember.cuda.initial_seed() == 8
    assert 0.0 <= a.min() and a.max() < 1.0


def test_cuda_rng_state_round_trip(cuda):
    ember.manual_seed(0)
    ember.randn(3, device="cuda")
    state = ember.cuda.get_rng_state()
    assert state.dtype == ember.uint8 and state.device.type == "cpu"
    after = ember.randn(4, device="cuda").cpu().numpy()
    ember.randn(9, device="cuda")
    ember.cuda.set_rng_state(state)
    np.testing.assert_array_equal(ember.randn(4, device="cuda").cpu().numpy(), after)
    with pytest.raises(RuntimeError, match="not the state of an ember CUDA generator"):
        ember.cuda.set_rng_state(ember.get_rng_state())
    states = ember.cuda.get_rng_state_all()
    assert len(states) == cuda.count


def test_generator_device_must_match(cuda):
    g = ember.Generator("cuda")
    g.manual_seed(3)
    a = ember.rand(4, generator=g, device="cuda")
    assert a.device.type == "cuda"
    assert ember.rand(4, generator=g).device.type == "cuda"  # a generator's draws land on its device
    with pytest.raises(RuntimeError, match="expected a 'cuda' device type for generator but found 'cpu'"):
        ember.rand(2, device="cuda", generator=ember.Generator())
    with pytest.raises(RuntimeError, match="expected a 'cpu' device type for generator but found 'cuda'"):
        ember.rand(2, device="cpu", generator=g)


def test_random_ops_on_cuda_inputs(cuda):
    p = ember.full((1000,), 0.25, device="cuda")
    s = ember.bernoulli(p)
    assert s.device.type == "cuda" and 150 < s.sum().item() < 350
    n = ember.normal(ember.zeros(3, device="cuda"), 1.0)
    assert n.device.type == "cuda"
    m = ember.multinomial(ember.tensor([[0.0, 1.0], [1.0, 0.0]], device="cuda"), 1)
    assert m.device.type == "cuda" and m.cpu().numpy().ravel().tolist() == [1, 0]
    with pytest.raises(RuntimeError, match="bernoulli\\(\\): probabilities must be in \\[0, 1\\]"):
        ember.bernoulli(ember.full((2,), 2.0, device="cuda"))


# ---------------------------------------------------------------------------- ember.cuda queries
def test_cuda_queries(cuda):
    assert ember.cuda.is_available() and ember.cuda.is_initialized()
    assert ember.cuda.device_count() == cuda.count >= 1
    assert isinstance(ember.cuda.get_device_name(0), str) and ember.cuda.get_device_name()
    major, minor = ember.cuda.get_device_capability()
    assert major >= 3
    ember.cuda.synchronize()
    ember.cuda.synchronize("cuda:0")
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        ember.cuda.synchronize("cpu")
    before = ember.cuda.memory_allocated()
    big = ember.zeros(1 << 20, device="cuda")  # 4 MiB
    assert ember.cuda.memory_allocated() >= before + (4 << 20) - 4096
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del big
    ember.cuda.empty_cache()


def test_pinned_memory(cuda):
    t = ember.arange(6.0).reshape(2, 3)
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned() and p.device.type == "cpu"
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    assert p.pin_memory() is p
    g = p.to("cuda", non_blocking=True)
    ember.cuda.synchronize()
    np.testing.assert_array_equal(g.cpu().numpy(), t.numpy())
    assert not ember.ones(2, device="cuda").is_pinned()
    with pytest.raises(RuntimeError, match="cannot pin 'cuda:0' memory"):
        ember.ones(2, device="cuda").pin_memory()


def test_module_to_moves_parameters_in_place(cuda):
    m = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    params = list(m.parameters())
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    m(ember.randn(5, 3)).sum().backward()
    assert m.cuda() is m
    assert [p is q for p, q in zip(params, m.parameters())] == [True] * len(params)
    assert all(p.device.type == "cuda" for p in m.parameters())
    assert all(b.device.type == "cuda" for b in m.buffers())
    assert all(p.grad.device.type == "cuda" for p in m.parameters())
    opt.step()
    m.to("cpu")
    assert all(p.device.type == "cpu" for p in m.parameters())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_scatter_multiply_repeated_positions_on_cuda(cuda, dtype):
    # CuPy has no multiply.at: the device path multiplies repeated positions in rounds; it must give
    # the CPU's np.multiply.at result, repeats included (position (0, 1) gets three factors).
    rng = np.random.default_rng(0)
    x = rng.integers(1, 5, (3, 4)).astype(dtype)
    idx = np.array([[0, 0, 2, 1], [1, 0, 2, 1], [2, 0, 0, 1]])
    src = rng.integers(-3, 4, (3, 4)).astype(dtype)
    cpu = ember.tensor(x).scatter(0, ember.tensor(idx), ember.tensor(src), reduce="multiply")
    dev = ember.tensor(x, device="cuda").scatter(0, ember.tensor(idx, device="cuda"), ember.tensor(src, device="cuda"),
                                               reduce="multiply")
    assert dev.device.type == "cuda"
    np.testing.assert_array_equal(dev.cpu().numpy(), cpu.numpy())
    assert cpu.numpy()[0, 1] == x[0, 1] * src[0, 1] * src[1, 1] * src[2, 1]
    # a number as the value, scattered along dim 1, and in place
    t = ember.tensor(x, device="cuda")
    t.scatter_(1, ember.tensor(idx, device="cuda"), 2, reduce="multiply")
    np.testing.assert_array_equal(t.cpu().numpy(),
                                  ember.tensor(x).scatter(1, ember.tensor(idx), 2, reduce="multiply").numpy())
    # a 0-d input
    z = ember.tensor(np.array(3, dtype=dtype), device="cuda")
    np.testing.assert_array_equal(
        z.scatter(0, ember.tensor(np.array(0), device="cuda"), ember.tensor(np.array(5, dtype=dtype), device="cuda"),
                  reduce="multiply").cpu().numpy(), 15)
