"""Mixed precision: `ember.autocast` (op policies per device, nesting, decorator, cast cache, thread-local state,
the state functions, deprecated aliases) and `ember.amp.GradScaler` (skipping, growth, unscale_, state, errors),
with PyTorch as the oracle where it is installed (output dtypes of each op family, warnings, the scaler's
trajectory). CUDA runs on the CPU stand-in tests/_fakecuda.py when there is no GPU."""
from __future__ import annotations

import pickle
import threading
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import backend
from ember.amp import autocast_mode
from helpers import requires_torch, torch

BF16, F32 = "bfloat16", "float32"


def _name(t) -> str:
    return str(t.dtype).split(".")[-1]


@pytest.fixture
def no_cuda(monkeypatch):
    """A process without usable CUDA for one test (whatever conftest installed)."""
    before = backend.CUDA
    backend.uninstall_cuda()
    monkeypatch.setenv("EMBER_DISABLE_CUDA", "1")
    yield
    backend.uninstall_cuda()
    if before is not backend.UNSET and before is not None:
        backend.install_cuda(before.cp, before.cpx)


@pytest.fixture(autouse=True)
def _autocast_off():
    """Every test starts and ends with autocast off and PyTorch's defaults (a failing test must not leak)."""
    yield
    s = autocast_mode._STATE
    leaked = (s.enabled != {"cpu": False, "cuda": False} or s.nesting != 0 or s.cache
              or s.dtype != {"cpu": ember.bfloat16, "cuda": ember.float16} or not s.cache_enabled)
    s.__init__()
    autocast_mode._refresh()
    assert not leaked, "the test left autocast state behind"


# ====================================================================== op policies (CPU, bfloat16)
_RNG = np.random.default_rng(0)


def _a(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


def _p(*shape):
    return (np.abs(_RNG.standard_normal(shape)) + 0.5).astype(np.float32)


# name: (input arrays, fn(lib, F, *tensors), variants, expected dtype per variant). Variants: "f32" every input
# float32, "bf16" every input bfloat16, "mixed" the first input bfloat16 and the others float32. The expected dtypes
# are PyTorch 2.13's (checked against it below where it is installed).
OPS = {
    # lower precision
    "matmul": ((_a(4, 8), _a(8, 3)), lambda L, F, a, b: a @ b, "f32 bf16 mixed", "bbb"),
    "mm": ((_a(4, 8), _a(8, 3)), lambda L, F, a, b: L.mm(a, b), "f32 mixed", "bb"),
    "bmm": ((_a(2, 4, 8), _a(2, 8, 3)), lambda L, F, a, b: L.bmm(a, b), "f32 mixed", "bb"),
    "baddbmm": ((_a(2, 4, 8), _a(2, 8, 3), _a(3)), lambda L, F, a, b, c: L.baddbmm(c, a, b), "f32 mixed", "bb"),
    "addmm": ((_a(4, 8), _a(8, 3), _a(3)), lambda L, F, a, b, c: L.addmm(c, a, b), "f32 mixed", "bb"),
    "addbmm": ((_a(2, 4, 8), _a(2, 8, 3), _a(4, 3)), lambda L, F, a, b, c: L.addbmm(c, a, b), "f32", "b"),
    "linear": ((_a(4, 8), _a(3, 8), _a(3)), lambda L, F, x, w, b: F.linear(x, w, b), "f32 bf16 mixed", "bbb"),
    "einsum": ((_a(4, 8), _a(8, 3)), lambda L, F, a, b: L.einsum("ij,jk->ik", a, b), "f32 mixed", "bb"),
    "tensordot": ((_a(4, 8), _a(8, 3)), lambda L, F, a, b: L.tensordot(a, b, 1), "f32 bf16", "bb"),
    "conv1d": ((_a(2, 3, 10), _a(4, 3, 3), _a(4)), lambda L, F, x, w, b: F.conv1d(x, w, b), "f32 mixed", "bb"),
    "conv2d": ((_a(2, 3, 6, 6), _a(4, 3, 3, 3), _a(4)), lambda L, F, x, w, b: F.conv2d(x, w, b, padding=1),
               "f32 bf16 mixed", "bbb"),
    "conv_transpose2d": ((_a(2, 3, 5, 5), _a(3, 4, 2, 2)), lambda L, F, x, w: F.conv_transpose2d(x, w, stride=2),
                         "f32 mixed", "bb"),
    "prelu": ((_a(4, 8), _a(1)), lambda L, F, x, w: F.prelu(x, w), "f32 mixed", "bb"),
    "sdpa": ((_a(2, 4, 8), _a(2, 5, 8), _a(2, 5, 8)), lambda L, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
             "f32 mixed", "bb"),
    # float32 on the CPU
    "cross_entropy": ((_a(4, 8),), lambda L, F, x: F.cross_entropy(x, L.tensor([1, 2, 3, 4])), "f32 bf16", "ff"),
    "binary_cross_entropy": ((_p(4, 8) * 0.5, _p(4, 8) * 0.5),
                             lambda L, F, x, y: F.binary_cross_entropy(x.clamp(0, 1), y.clamp(0, 1)),
                             "f32 bf16 mixed", "fff"),
    "prod": ((_a(4, 8),), lambda L, F, x: x.prod(), "f32 bf16", "ff"),
    "mse_loss": ((_a(4, 8), _a(4, 8)), lambda L, F, x, y: F.mse_loss(x, y), "f32 mixed", "ff"),
    # PyTorch's CPU autocast leaves these in their inputs' dtype
    "softmax": ((_a(4, 8),), lambda L, F, x: F.softmax(x, -1), "f32 bf16", "fb"),
    "log_softmax": ((_a(4, 8),), lambda L, F, x: F.log_softmax(x, -1), "f32 bf16", "fb"),
    "layer_norm": ((_a(4, 8), _a(8), _a(8)), lambda L, F, x, w, b: F.layer_norm(x, (8,), w, b), "f32 bf16 mixed",
                   "fbb"),
    "group_norm": ((_a(4, 6, 5), _a(6), _a(6)), lambda L, F, x, w, b: F.group_norm(x, 2, w, b), "f32 bf16 mixed",
                   "fbb"),
    "batch_norm": ((_a(4, 6), _a(6), _a(6)), lambda L, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   "f32 bf16 mixed", "fbb"),
    "sum": ((_a(4, 8),), lambda L, F, x: x.sum(), "f32 bf16", "fb"),
    "mean": ((_a(4, 8),), lambda L, F, x: x.mean(), "f32 bf16", "fb"),
    "cumsum": ((_a(4, 8),), lambda L, F, x: x.cumsum(1), "f32 bf16", "fb"),
    "exp": ((_a(4, 8),), lambda L, F, x: x.exp(), "f32 bf16", "fb"),
    "log": ((_p(4, 8),), lambda L, F, x: x.log(), "f32 bf16", "fb"),
    "pow": ((_p(4, 8),), lambda L, F, x: x ** 2, "f32 bf16", "fb"),
    "relu": ((_a(4, 8),), lambda L, F, x: F.relu(x), "f32 bf16", "fb"),
    "gelu": ((_a(4, 8),), lambda L, F, x: F.gelu(x), "f32 bf16", "fb"),
    "norm": ((_a(4, 8),), lambda L, F, x: x.norm(), "f32 bf16", "fb"),
    "logsumexp": ((_a(4, 8),), lambda L, F, x: x.logsumexp(1), "f32 bf16", "fb"),
    "max_pool2d": ((_a(1, 2, 4, 4),), lambda L, F, x: F.max_pool2d(x, 2), "f32 bf16", "fb"),
    "add": ((_a(4, 8), _a(4, 8)), lambda L, F, a, b: a + b, "f32 bf16 mixed", "fbf"),
    # promote to the widest input
    "cat": ((_a(4, 8), _a(4, 8)), lambda L, F, a, b: L.cat([a, b]), "f32 bf16 mixed", "fbf"),
    "stack": ((_a(4, 8), _a(4, 8)), lambda L, F, a, b: L.stack([a, b]), "f32 bf16 mixed", "fbf"),
    "index_copy": ((_a(4, 8), _a(1, 8)), lambda L, F, a, b: a.index_copy(0, L.tensor([2]), b), "f32 bf16 mixed",
                   "fbf"),
}
_CASES = [(name, v, {"b": BF16, "f": F32}[e]) for name, spec in OPS.items() for v, e in zip(spec[2].split(), spec[3])]


def _inputs(lib, arrays, variant):
    ts = [lib.tensor(a) for a in arrays]
    if variant == "bf16":
        return [t.to(lib.bfloat16) for t in ts]
    if variant == "mixed":
        return [ts[0].to(lib.bfloat16)] + ts[1:]
    return ts


@pytest.mark.parametrize("name,variant,expected", _CASES, ids=[f"{n}-{v}" for n, v, _ in _CASES])
def test_cpu_op_dtypes(name, variant, expected):
    arrays, fn, _, _ = OPS[name]
    with ember.autocast("cpu"):
        out = fn(ember, F, *_inputs(ember, arrays, variant))
    assert _name(out) == expected
    if torch is not None:  # the table is PyTorch's
        with torch.autocast("cpu"):
            ref = fn(torch, torch.nn.functional, *_inputs(torch, arrays, variant))
        assert _name(ref) == expected


@requires_torch
@pytest.mark.parametrize("name", ["matmul", "linear", "conv2d", "baddbmm", "sdpa", "softmax", "layer_norm",
                                  "group_norm", "batch_norm", "cross_entropy"])
def test_cpu_values_match_torch(name):
    """Values under autocast: 16-bit ops compute in float32 and round once, as PyTorch's CPU kernels do."""
    arrays, fn, variants, _ = OPS[name]
    variant = "mixed" if "mixed" in variants else "bf16" if "bf16" in variants else "f32"
    with ember.autocast("cpu"):
        out = fn(ember, F, *_inputs(ember, arrays, variant))
    with torch.autocast("cpu"):
        ref = fn(torch, torch.nn.functional, *_inputs(torch, arrays, variant))
    np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=2e-2, atol=2e-2)


def test_float64_and_integer_inputs_are_never_cast():
    a, b = ember.randn(3, 4, dtype=ember.float64), ember.randn(4, 2, dtype=ember.float64)
    with ember.autocast("cpu"):
        assert (a @ b).dtype is ember.float64
        assert ember.cat([ember.arange(3), ember.arange(2)]).dtype is ember.int64
        with pytest.raises(RuntimeError, match="same dtype"):  # float64 is not eligible: the float32 one is cast
            a @ ember.randn(4, 2)


def test_float16_autocast_on_cpu():
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    with ember.autocast("cpu", dtype=ember.float16):
        assert (x @ w).dtype is ember.float16
        assert ember.get_autocast_dtype("cpu") is ember.float16


def test_promote_rejects_another_16_bit_type_like_torch():
    h, f = ember.randn(2, 3).half(), ember.randn(2, 3)
    with ember.autocast("cpu"):  # bfloat16 region: float16 may only join float32 met before it
        assert ember.cat([f, h]).dtype is ember.float32
        with pytest.raises(RuntimeError, match="may be float32 or"):
            ember.cat([h, f])
    if torch is not None:
        with torch.autocast("cpu"):
            with pytest.raises(RuntimeError):
                torch.cat([torch.randn(2, 3).half(), torch.randn(2, 3)])


# ====================================================================== gradients
def test_float32_parameters_get_float32_gradients():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 3))
    x, y = ember.randn(5, 6), ember.tensor([0, 1, 2, 0, 1])
    with ember.autocast("cpu"):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    assert logits.dtype is ember.bfloat16 and loss.dtype is ember.float32
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(p.dtype is ember.float32 for p in model.parameters())
    assert all(g is not None and g.dtype is ember.float32 for g in grads)
    ref = [g.clone() for g in grads]
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()  # the same step in float32: the gradients agree to bfloat16's precision
    for g, r in zip(ref, (p.grad for p in model.parameters())):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=0.1, atol=0.03)


def test_backward_reaches_inputs_through_the_casts():
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 2, requires_grad=True)
    with ember.autocast("cpu"):
        y = x @ w
    assert y.grad_fn.next_functions[0][0].name() == "CastBackward"
    y.float().sum().backward()
    assert x.grad.dtype is ember.float32 and x.grad.shape == (3, 4)


# ====================================================================== regions
def test_nesting_restores_each_level():
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    assert not ember.is_autocast_enabled("cpu")
    with ember.autocast("cpu") as ac:
        assert isinstance(ac, ember.autocast)
        assert (x @ w).dtype is ember.bfloat16
        with ember.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
            assert (x @ w).dtype is ember.float32
            with ember.autocast("cpu", dtype=ember.float16):
                assert (x @ w).dtype is ember.float16
            assert (x @ w).dtype is ember.float32
        with ember.autocast("cpu", dtype=ember.float16):
            assert (x @ w).dtype is ember.float16
            assert ember.get_autocast_dtype("cpu") is ember.float16
        assert ember.get_autocast_dtype("cpu") is ember.bfloat16
        assert (x @ w).dtype is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu") and (x @ w).dtype is ember.float32


def test_region_restores_on_exception():
    with pytest.raises(ValueError):
        with ember.autocast("cpu"):
            raise ValueError("inside")
    assert not ember.is_autocast_enabled("cpu") and autocast_mode._STATE.nesting == 0


def test_decorator_form():
    x, w = ember.randn(4, 8), ember.randn(8, 3)

    @ember.autocast("cpu")
    def f(depth):
        assert ember.is_autocast_enabled("cpu")
        return f(depth - 1) if depth else (x @ w)

    assert f(3).dtype is ember.bfloat16  # (a recursive call enters the same object again)
    assert not ember.is_autocast_enabled("cpu")

    class M(nn.Module):
        @ember.amp.autocast("cpu", enabled=False)
        def forward(self, a):
            return a @ w

    with ember.autocast("cpu"):
        assert M()(x).dtype is ember.float32
    with pytest.raises(TypeError, match="requires a callable"):
        ember.autocast("cpu")(3)


def test_state_is_thread_local():
    seen = []
    with ember.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append((ember.is_autocast_enabled("cpu"),
                                                          (ember.randn(2, 2) @ ember.randn(2, 2)).dtype)))
        t.start()
        t.join()
    assert seen == [(False, ember.float32)]


def test_state_functions():
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16 and ember.get_autocast_dtype("cuda") is ember.float16
    assert ember.is_autocast_cache_enabled()
    assert ember.amp.is_autocast_available("cpu") and ember.amp.is_autocast_available("cuda")
    assert not ember.amp.is_autocast_available("mps") and ember.amp.is_autocast_available("cuda:1")
    assert ember.is_autocast_enabled("cuda:0") is False and ember.get_autocast_dtype("cuda:1") is ember.float16
    ember.set_autocast_enabled("cpu", True)  # at once, without a region
    try:
        assert ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled()  # no argument: CUDA's
        assert (x @ w).dtype is ember.bfloat16
    finally:
        ember.set_autocast_enabled("cpu", False)
    assert (x @ w).dtype is ember.float32
    ember.set_autocast_enabled(True)  # PyTorch's legacy one-argument form: CUDA
    assert ember.is_autocast_enabled() and ember.is_autocast_enabled("cuda") and not ember.is_autocast_enabled("cpu")
    ember.set_autocast_enabled(False)
    ember.set_autocast_dtype("cpu", ember.float16)
    assert ember.get_autocast_dtype("cpu") is ember.float16
    with ember.autocast("cpu") as ac:  # the default dtype is read when the region is made
        assert ac.fast_dtype is ember.float16 and (x @ w).dtype is ember.float16
    ember.set_autocast_dtype("cpu", ember.bfloat16)
    assert ember.autocast_increment_nesting() == 1 and ember.autocast_decrement_nesting() == 0
    with pytest.raises(TypeError, match="must be str"):
        ember.is_autocast_enabled(1)
    with pytest.raises(TypeError, match="must be bool"):
        ember.set_autocast_enabled("cpu", "yes")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'mps'"):
        ember.get_autocast_dtype("mps")
    with pytest.raises(ValueError, match="of type `str`"):
        ember.autocast(ember.device("cpu"))
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ember.autocast("xpu")


@pytest.mark.parametrize("name,args,new", [
    ("is_autocast_cpu_enabled", lambda L: (), "is_autocast_enabled('cpu')"),
    ("set_autocast_cpu_enabled", lambda L: (False,), "set_autocast_enabled('cpu', enabled)"),
    ("get_autocast_cpu_dtype", lambda L: (), "get_autocast_dtype('cpu')"),
    ("set_autocast_cpu_dtype", lambda L: (L.bfloat16,), "set_autocast_dtype('cpu', dtype)"),
    ("get_autocast_gpu_dtype", lambda L: (), "get_autocast_dtype('cuda')"),
    ("set_autocast_gpu_dtype", lambda L: (L.float16,), "set_autocast_dtype('cuda', dtype)"),
])
def test_deprecated_state_functions_warn(name, args, new):
    with pytest.warns(DeprecationWarning) as record:
        getattr(ember, name)(*args(ember))
    assert str(record[0].message).startswith(f"ember.{name}(") and f"Please use ember.{new} instead" in str(
        record[0].message)
    if torch is not None:
        with pytest.warns(DeprecationWarning, match=f"torch.{name}.*is deprecated"):
            getattr(torch, name)(*args(torch))


def test_unsupported_cpu_dtype_warns_and_disables():
    with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported. Disabling autocast"):
        ac = ember.autocast("cpu", dtype=ember.float32)
    with ac:
        assert not ember.is_autocast_enabled("cpu")
        assert ember.get_autocast_dtype("cpu") is ember.float32  # (set on entry all the same, as in PyTorch)
    if torch is not None:
        with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
            torch.autocast("cpu", dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.autocast("cpu", dtype=ember.float32, enabled=False)  # (disabled anyway: no warning)


def test_cuda_region_without_cuda_warns_and_disables(no_cuda):
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast"):
        ac = ember.autocast("cuda")
    with ac:
        assert not ember.is_autocast_enabled("cuda")


def test_cache_reuses_a_parameters_cast_within_the_outermost_region():
    lin = nn.Linear(4, 3)
    x = ember.randn(2, 4)

    def weight_cast(y):  # Linear's input 1 is the weight's cast
        return y.grad_fn.next_functions[1][0]

    with ember.autocast("cpu"):
        a, b = lin(x), lin(x)
        assert weight_cast(a) is weight_cast(b)
        with ember.autocast("cpu", enabled=False):
            pass
        with ember.autocast("cpu"):  # a nested region keeps the cache
            assert weight_cast(lin(x)) is weight_cast(a)
        with ember.no_grad():
            lin.weight.mul_(2.0)  # an in-place update: cast again (PyTorch would reuse the stale cast)
        c = lin(x)
        assert weight_cast(c) is not weight_cast(a)
        with ember.no_grad():
            lin(x)  # a cast made without grad is not cached: what follows still reaches the weight
        d = lin(x)
        assert weight_cast(d) is weight_cast(c)
    (a.float().sum() + b.float().sum()).backward()  # gradients flow through a shared cast
    assert lin.weight.grad.dtype is ember.float32
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * x.sum(0)[None].expand(3, 4).numpy(), rtol=1e-2)
    with ember.autocast("cpu"):  # the outermost exit cleared it
        assert weight_cast(lin(x)) is not weight_cast(a)
    with ember.autocast("cpu", cache_enabled=False):
        assert not ember.is_autocast_cache_enabled()
        assert weight_cast(lin(x)) is not weight_cast(lin(x))
    assert ember.is_autocast_cache_enabled()


def test_cache_only_holds_leaves_that_require_grad():
    w = ember.randn(4, 3)  # requires no grad: cast at each use
    x = ember.randn(2, 4)
    with ember.autocast("cpu"):
        x @ w
        x @ w
        assert not autocast_mode._STATE.cache
        p = nn.Parameter(ember.randn(4, 3))
        x @ p
        assert len(autocast_mode._STATE.cache) == 1
    assert not autocast_mode._STATE.cache


def test_custom_fwd_and_custom_bwd():
    seen = {}

    class Scale(ember.autograd.Function):
        @staticmethod
        @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
        def forward(ctx, a, b):
            seen["fwd"] = (a.dtype, b.dtype, ember.is_autocast_enabled("cpu"))
            ctx.save_for_backward(b)
            return a @ b

        @staticmethod
        @ember.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = ember.is_autocast_enabled("cpu")
            (b,) = ctx.saved_tensors
            return g @ b.t(), None

    a = ember.randn(3, 4).bfloat16().requires_grad_()
    with ember.autocast("cpu"):
        out = Scale.apply(a, ember.randn(4, 2))
    assert seen["fwd"] == (ember.float32, ember.float32, False) and out.dtype is ember.float32
    out.sum().backward()
    assert seen["bwd"] is False  # (forward ran with autocast off: so does backward)
    with pytest.raises(ValueError, match="of type `str`"):
        ember.amp.custom_fwd(device_type=None)


# ====================================================================== CUDA (a GPU, or the CPU stand-in)
def test_cuda_float16_policy(cuda):
    x = ember.randn(4, 8, device="cuda")
    w = ember.randn(8, 8, device="cuda")
    h = x.half()
    with ember.autocast("cuda"):
        assert ember.get_autocast_dtype("cuda") is ember.float16
        assert (x @ w).dtype is ember.float16
        assert F.linear(x, w).dtype is ember.float16
        for out in (F.softmax(h, -1), F.log_softmax(h, -1), h.sum(), h.exp(), h.abs().log1p(), h ** 2, 1.0 / h,
                    F.layer_norm(h, (8,)), F.cross_entropy(h, ember.tensor([1, 2, 3, 4], device="cuda"))):
            assert out.dtype is ember.float32, out
        for out in (F.relu(h), h.mean(), h / 2.0, h + h):  # not listed: the inputs' dtype
            assert out.dtype is ember.float16, out
        assert ember.atan2(h, x).dtype is ember.float32  # promote
        cpu = ember.randn(4, 8)
        assert (cpu @ ember.randn(8, 2)).dtype is ember.float32  # CPU tensors: CUDA's autocast does not touch them
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(x.sigmoid(), x.sigmoid())
    assert (x @ w).dtype is ember.float32


def test_cuda_mixed_model_and_deprecated_alias(cuda):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 3)).to("cuda")
    x = ember.randn(5, 6, device="cuda")
    with pytest.warns(FutureWarning, match=r"`ember.cuda.amp.autocast\(args...\)` is deprecated"):
        ac = ember.cuda.amp.autocast()
    with ac:
        y = model(x)
    assert y.dtype is ember.float16 and y.device.type == "cuda"
    y.float().sum().backward()
    assert all(p.grad.dtype is ember.float32 and p.grad.device.type == "cuda" for p in model.parameters())


def test_cpu_deprecated_aliases():
    with pytest.warns(FutureWarning, match=r"`ember.cpu.amp.autocast\(args...\)` is deprecated. Please use "
                                           r"`ember.amp.autocast\('cpu', args...\)` instead"):
        ac = ember.cpu.amp.autocast()
    assert ac.device == "cpu" and ac.fast_dtype is ember.bfloat16
    with ac:
        assert (ember.randn(2, 3) @ ember.randn(3, 2)).dtype is ember.bfloat16
    with pytest.warns(FutureWarning, match=r"`ember.cpu.amp.GradScaler\(args...\)` is deprecated"):
        s = ember.cpu.amp.GradScaler(init_scale=8.0)
    assert s.is_enabled() and s.get_scale() == 8.0
    from ember.cuda.amp import GradScaler, autocast  # importable as a module, as torch.cuda.amp is
    assert GradScaler is ember.cuda.amp.GradScaler and issubclass(autocast, ember.autocast)
    with pytest.warns(FutureWarning, match=r"Please use `ember.amp.custom_fwd\(args..., device_type='cuda'\)`"):
        ember.cuda.amp.custom_fwd(lambda ctx, a: a)
    if torch is not None:
        with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.autocast\(args...\)` is deprecated"):
            torch.cpu.amp.autocast()


# ====================================================================== compile and lazy evaluation
def test_compiled_function_under_autocast_runs_eagerly():
    w = ember.randn(4, 3)
    f = ember.compile(lambda a: (a @ w).relu())
    x = ember.randn(2, 4)
    assert f(x).dtype is ember.float32
    with ember.autocast("cpu"):
        assert f(x).dtype is ember.bfloat16

    def inside(a):
        with ember.autocast("cpu"):
            return a @ w
    g = ember.compile(inside, fullgraph=True)
    with pytest.raises(RuntimeError, match="autocast region"):
        g(x)
    assert not ember.is_autocast_enabled("cpu")
    assert ember.compile(inside)(x).dtype is ember.bfloat16  # (a graph break: the function runs eagerly)


def test_lazy_mode_runs_autocast_regions_now():
    w = ember.randn(4, 3)
    with ember.lazy():
        x = ember.randn(2, 4) * 2
        with ember.autocast("cpu"):
            y = x @ w
        z = y.float() + 1
        assert y.dtype is ember.bfloat16 and z.dtype is ember.float32
        np.testing.assert_allclose(z.numpy(), ((x @ w) + 1).numpy(), rtol=2e-2, atol=5e-2)


# ====================================================================== training
def _resmlp(seed: int = 0) -> nn.Module:
    ember.manual_seed(seed)

    def block():
        return nn.Sequential(nn.Residual(nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.ReLU(),
                                                       nn.Linear(32, 64), nn.LayerNorm(64))), nn.ReLU())
    return nn.Sequential(nn.Linear(32, 64), block(), block(), nn.Linear(64, 10))


def _train(autocast: bool, steps: int = 50, batch: int = 64) -> list:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 32)).astype(np.float32)
    y = (x @ rng.standard_normal((32, 10)).astype(np.float32)).argmax(1)
    model = _resmlp()
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for s in range(steps):
        i = (s * batch) % len(x)
        xb, yb = ember.tensor(x[i:i + batch]), ember.tensor(y[i:i + batch])
        opt.zero_grad()
        with ember.autocast("cpu", enabled=autocast):
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
        assert logits.dtype is (ember.bfloat16 if autocast else ember.float32)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_resmlp_bfloat16_training_tracks_float32():
    """A ResMLP (Linear, LayerNorm, ReLU, residual blocks) trained 50 Adam steps under CPU bfloat16 autocast follows
    the float32 run: measured, the largest gap between the two loss curves is 0.037 (4.4% of the loss; 0.03-0.056
    over five data seeds), both falling from 2.65 to about 0.35. The test allows 0.1."""
    f32, b16 = np.array(_train(False)), np.array(_train(True))
    gap = np.abs(b16 - f32)
    assert gap.max() < 0.1, gap.max()
    assert gap.max() > 1e-4  # (the two runs differ: autocast did compute in bfloat16)
    assert b16[-5:].mean() < 0.25 * b16[0] and f32[-5:].mean() < 0.25 * f32[0]


# ====================================================================== GradScaler
def _linear_problem(seed: int = 0):
    ember.manual_seed(seed)
    model = nn.Linear(4, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(8, 4), ember.randn(8, 2)
    return model, opt, x, y


def test_scaler_skips_a_step_with_an_inf_gradient_and_backs_off():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
    before = [p.detach().clone() for p in model.parameters()]
    loss = F.mse_loss(model(x), y)
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 1024.0, rel=1e-6)
    scaled.backward()
    with ember.no_grad():
        model.weight.grad[0, 0] = float("inf")
    assert scaler.step(opt) is None
    scaler.update()
    assert all(ember.equal(p, b) for p, b in zip(model.parameters(), before))  # skipped
    assert scaler.get_scale() == 512.0 and scaler._get_growth_tracker() == 0
    opt.zero_grad()
    scaler.scale(F.mse_loss(model(x), y)).backward()
    scaler.step(opt)
    scaler.update()
    assert not ember.equal(model.weight, before[0])  # a finite step runs
    assert scaler.get_scale() == 512.0 and scaler._get_growth_tracker() == 1


def test_scaler_nan_gradient_is_skipped_too():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu")
    scaler.scale(F.mse_loss(model(x), y)).backward()
    with ember.no_grad():
        model.bias.grad[1] = float("nan")
    w = model.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    assert ember.equal(model.weight, w) and scaler.get_scale() == 2.0 ** 15


def test_scaler_grows_after_growth_interval_clean_steps():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0, growth_factor=3.0, growth_interval=3)
    scales = []
    for _ in range(7):
        opt.zero_grad()
        scaler.scale(F.mse_loss(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 4.0, 12.0, 12.0, 12.0, 36.0, 36.0]


def test_scaler_never_grows_past_float32():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu", init_scale=3e38, growth_interval=1)
    scaler.scale(F.mse_loss(model(x), y) * 0).backward()  # (zero gradients: finite at any scale)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == pytest.approx(3e38, rel=1e-6) and scaler._get_growth_tracker() == 0


def test_unscale_then_clip():
    model, opt, x, y = _linear_problem()
    F.mse_loss(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    opt.zero_grad()
    scaler = ember.amp.GradScaler("cpu", init_scale=256.0)
    scaler.scale(F.mse_loss(model(x), y)).backward()
    assert np.allclose(model.weight.grad.numpy(), plain[0].numpy() * 256.0, rtol=1e-5)
    scaler.unscale_(opt)
    for p, g in zip(model.parameters(), plain):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-6, atol=1e-7)
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.01)
    assert float(total) > 0.01
    w = model.weight.detach().clone()
    scaler.step(opt)  # (no second unscale)
    scaler.update()
    clipped = sum(float((g.float() ** 2).sum()) for g in (p.grad for p in model.parameters())) ** 0.5
    assert clipped == pytest.approx(0.01, rel=1e-3)
    np.testing.assert_allclose(model.weight.detach().numpy(), (w - 0.1 * model.weight.grad).numpy(), rtol=1e-6)


def test_scaler_errors_like_torch():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
        scaler.step(opt)
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="Attempted update but _scale is None"):
        scaler.update()
    scaler.scale(F.mse_loss(model(x), y)).backward()
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the last "
                                           r"update\(\)"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0.0)
    empty = ember.optim.SGD([nn.Parameter(ember.randn(2))], lr=0.1)  # no gradients at all
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        scaler.step(empty)
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0"):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="The backoff factor must be < 1.0"):
        ember.amp.GradScaler("cpu", backoff_factor=1.0)
    half = nn.Linear(2, 2).half()
    hopt = ember.optim.SGD(half.parameters(), lr=0.1)
    scaler.scale(half(ember.randn(3, 2).half()).float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(hopt)
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([1.0])


def test_scaler_scales_nested_outputs_and_sets_a_new_scale():
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0)
    a, b = ember.ones(2), ember.full((3,), 2.0)
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].tolist() == [8.0] * 3
    scaler.update(new_scale=32.0)
    assert scaler.get_scale() == 32.0
    scaler.update(new_scale=ember.tensor([0.5]))
    assert scaler.get_scale() == 0.5
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(new_scale=ember.ones(2))


def test_scaler_state_dict_round_trip_and_pickle():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu", init_scale=64.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=5)
    for _ in range(3):
        opt.zero_grad()
        scaler.scale(F.mse_loss(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
    sd = scaler.state_dict()
    assert sd == {"scale": 64.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 5,
                  "_growth_tracker": 3}
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(sd)
    assert other.state_dict() == sd and other.get_scale() == 64.0
    other.scale(ember.ones(1))  # the tensors start from the loaded values
    assert other.state_dict() == sd
    again = pickle.loads(pickle.dumps(scaler))
    assert again.state_dict() == sd
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        other.load_state_dict({})
    scaler.scale(F.mse_loss(model(x), y)).backward()
    scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="may only be pickled at the beginning of an iteration"):
        pickle.dumps(scaler)


def test_disabled_scaler_is_transparent():
    model, opt, x, y = _linear_problem()
    scaler = ember.amp.GradScaler("cpu", enabled=False)
    loss = F.mse_loss(model(x), y)
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    loss.backward()
    w = model.weight.detach().clone()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert not ember.equal(model.weight, w)
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    scaler.load_state_dict({})  # (a no-op when disabled)


def test_cuda_scaler_without_cuda_warns_and_disables(no_cuda):
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available.  Disabling."):
        scaler = ember.amp.GradScaler()
    assert not scaler.is_enabled()


def test_scaler_on_cuda_tensors(cuda):
    ember.manual_seed(0)
    model = nn.Linear(4, 2).to("cuda")
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(8, 4, device="cuda"), ember.randn(8, 2, device="cuda")
    scaler = ember.amp.GradScaler("cuda", init_scale=128.0, growth_interval=2)
    w = model.weight.detach().clone()
    for step in range(4):
        opt.zero_grad()
        with ember.autocast("cuda"):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if step == 0:
            with ember.no_grad():
                model.weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        if step == 0:
            assert ember.equal(model.weight, w) and scaler.get_scale() == 64.0
    assert scaler._scale.device.type == "cuda" and scaler.get_scale() == 128.0  # (grown after steps 1 and 2)
    assert not ember.equal(model.weight, w)


@requires_torch
def test_scaler_trajectory_matches_torch():
    """Same model, data and SGD(momentum) in ember and PyTorch, an inf injected into a gradient at step 4: the same
    scales after every update, the same skipped step and the same final parameters."""
    rng = np.random.default_rng(3)
    w0, b0 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    xs, ys = rng.standard_normal((10, 8, 5)).astype(np.float32), rng.standard_normal((10, 8, 3)).astype(np.float32)

    def run(lib):
        model = lib.nn.Linear(5, 3)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(w0))
            model.bias.copy_(lib.tensor(b0))
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=3)
        scales = []
        for i in range(10):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(lib.tensor(xs[i])), lib.tensor(ys[i]))
            scaler.scale(loss).backward()
            if i == 4:
                with lib.no_grad():
                    model.weight.grad[1, 2] = float("inf")
            scaler.step(opt)
            scaler.update()
            scales.append((scaler.get_scale(), scaler._get_growth_tracker()))
        return scales, model.weight.detach().numpy(), model.bias.detach().numpy(), scaler.state_dict()

    e, t = run(ember), run(torch)
    assert e[0] == t[0]
    assert e[0][4] == (256.0, 0)  # (the step with the inf backed off)
    np.testing.assert_allclose(e[1], t[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e[2], t[2], rtol=1e-5, atol=1e-6)
    assert e[3] == t[3]
