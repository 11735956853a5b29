"""ember.nn.init (gains, fans, distributions, deterministic fills, errors) and ember.nn.utils
(clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters)."""
import math

import numpy as np
import pytest
from helpers import rand, requires_torch, torch

import ember
import ember.nn as nn
from ember.nn import init

NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                  "sigmoid", "tanh", "relu", "leaky_relu", "selu"]


# ---------------------------------------------------------------------- gains and fans
@requires_torch
@pytest.mark.parametrize("name", NONLINEARITIES)
def test_calculate_gain_as_pytorch(name):
    assert init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    if name == "leaky_relu":
        for p in (0, 0.2, 1, math.sqrt(5)):
            assert init.calculate_gain(name, p) == torch.nn.init.calculate_gain(name, p)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    for bad in ("a", True, [0.1]):
        with pytest.raises(ValueError, match="negative_slope .* not a valid number"):
            init.calculate_gain("leaky_relu", bad)


@requires_torch
@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (6, 4, 3, 3), (2, 3, 1, 2, 2)], ids=str)
def test_fans_as_pytorch(shape):
    e, t = ember.empty(shape), torch.empty(shape)
    assert init._calculate_fan_in_and_fan_out(e) == torch.nn.init._calculate_fan_in_and_fan_out(t)
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert init._calculate_correct_fan(e, mode) == torch.nn.init._calculate_correct_fan(t, mode)


def test_fan_and_mode_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions.*\\[3\\]"):
        init._calculate_fan_in_and_fan_out(ember.empty(3))
    for fn in (init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_, init.kaiming_normal_):
        with pytest.raises(ValueError, match="fewer than 2 dimensions"):
            fn(ember.empty(4))
    with pytest.raises(ValueError, match=r"Mode fan not supported, please use one of \['fan_in', 'fan_out'\]"):
        init.kaiming_uniform_(ember.empty(3, 3), mode="fan")
    with pytest.raises(ValueError, match="Unsupported nonlinearity softmax"):
        init.kaiming_normal_(ember.empty(3, 3), nonlinearity="softmax")
    with pytest.raises(TypeError, match="must be Tensor"):
        init.uniform_(np.zeros(3))
    with pytest.raises(TypeError, match="floating-point"):
        init.normal_(ember.zeros(3, dtype=ember.long))


# ---------------------------------------------------------------------- random fills
def _assert_uniform(a: np.ndarray, lo: float, hi: float) -> None:
    assert a.min() >= lo and a.max() <= hi
    w = hi - lo
    assert a.min() < lo + 0.01 * w and a.max() > hi - 0.01 * w
    assert abs(a.mean() - (lo + hi) / 2) < 0.02 * w
    assert abs(a.std() - w / math.sqrt(12)) < 0.02 * w


def _assert_normal(a: np.ndarray, mean: float, std: float) -> None:
    assert abs(a.mean() - mean) < 0.02 * std
    assert abs(a.std() - std) < 0.02 * std
    # a normal's tails, not a uniform's: ~0.27% beyond 3 std
    assert 0.001 < np.mean(np.abs(a - mean) > 3 * std) < 0.005


def test_uniform_normal_constant_in_place_and_outside_autograd():
    p = nn.Parameter(ember.empty(200, 100))
    v0 = p._version
    r = init.uniform_(p, -2.0, 3.0)
    assert r is p and p.requires_grad and p.is_leaf and p.grad_fn is None and p._version > v0
    _assert_uniform(p.detach().numpy(), -2.0, 3.0)
    init.normal_(p, 1.5, 0.5)
    _assert_normal(p.detach().numpy(), 1.5, 0.5)
    assert init.constant_(p, 0.25) is p and np.all(p.detach().numpy() == 0.25)
    assert np.all(init.ones_(p).detach().numpy() == 1) and np.all(init.zeros_(p).detach().numpy() == 0)
    d = init.normal_(ember.empty(10, dtype=ember.float64))
    assert d.dtype == ember.float64
    assert init.uniform_(ember.empty(10)).dtype == ember.float32


def test_generators_make_fills_reproducible():
    fills = [lambda t, g: init.uniform_(t, generator=g), lambda t, g: init.normal_(t, generator=g),
             lambda t, g: init.xavier_uniform_(t, generator=g), lambda t, g: init.xavier_normal_(t, generator=g),
             lambda t, g: init.kaiming_uniform_(t, generator=g), lambda t, g: init.kaiming_normal_(t, generator=g),
             lambda t, g: init.trunc_normal_(t, generator=g), lambda t, g: init.orthogonal_(t, generator=g),
             lambda t, g: init.sparse_(t, 0.5, generator=g)]
    for fill in fills:
        a = fill(ember.empty(6, 5), ember.Generator().manual_seed(7)).numpy()
        b = fill(ember.empty(6, 5), ember.Generator().manual_seed(7)).numpy()
        np.testing.assert_array_equal(a, b)
        ember.manual_seed(3)
        c = fill(ember.empty(6, 5), None).numpy()
        ember.manual_seed(3)
        np.testing.assert_array_equal(c, fill(ember.empty(6, 5), None).numpy())


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)], ids=str)
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier(shape, gain):
    fan_in, fan_out = shape[1] * math.prod(shape[2:]), shape[0] * math.prod(shape[2:])
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    _assert_uniform(init.xavier_uniform_(ember.empty(shape), gain).numpy(), -a, a)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    _assert_normal(init.xavier_normal_(ember.empty(shape), gain).numpy(), 0.0, std)


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)], ids=str)
@pytest.mark.parametrize("a,mode,nonlinearity", [(0, "fan_in", "leaky_relu"), (math.sqrt(5), "fan_in", "leaky_relu"),
                                                 (0, "fan_out", "relu"), (0.1, "fan_in", "tanh")])
def test_kaiming(shape, a, mode, nonlinearity):
    fan = (shape[1] if mode == "fan_in" else shape[0]) * math.prod(shape[2:])
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    t = init.kaiming_uniform_(ember.empty(shape), a, mode, nonlinearity)
    _assert_uniform(t.numpy(), -math.sqrt(3) * std, math.sqrt(3) * std)
    _assert_normal(init.kaiming_normal_(ember.empty(shape), a, mode, nonlinearity).numpy(), 0.0, std)


def test_kaiming_zero_element_is_a_noop_with_warning():
    with pytest.warns(UserWarning, match="zero-element"):
        t = init.kaiming_uniform_(ember.empty(0, 3))
    assert t.shape == (0, 3)


def _truncnorm_moments(mean, std, a, b):
    """Mean and std of N(mean, std²) truncated to [a, b]."""
    al, be = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    z = cdf(be) - cdf(al)
    m = (pdf(al) - pdf(be)) / z
    v = 1 + (al * pdf(al) - be * pdf(be)) / z - m * m
    return mean + std * m, std * math.sqrt(v)


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.5, 0.02, 0.46, 0.55), (0.0, 1.0, 1.5, 3.0),
                                          (0.0, 1.0, 3.0, 5.0)])
def test_trunc_normal(mean, std, a, b):
    ember.manual_seed(0)
    t = init.trunc_normal_(ember.empty(40000, dtype=ember.float64), mean, std, a, b).numpy()
    assert t.min() >= a and t.max() <= b
    m, s = _truncnorm_moments(mean, std, a, b)
    assert abs(t.mean() - m) < 0.02 * s and abs(t.std() - s) < 0.02 * s
    assert init.trunc_normal_(ember.empty(3)).dtype == ember.float32
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(ember.empty(10), mean=5.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape", [(4, 9), (9, 4), (5, 5), (4, 2, 3)], ids=str)
@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_orthogonal(shape, gain):
    w = init.orthogonal_(ember.empty(shape, dtype=ember.float64), gain).numpy().reshape(shape[0], -1)
    rows, cols = w.shape
    gram = w @ w.T if rows <= cols else w.T @ w
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(rows, cols)), atol=1e-12)
    assert init.orthogonal_(ember.empty(4, 3)).dtype == ember.float32
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(ember.empty(3))


def test_orthogonal_is_haar_distributed():
    # with the sign fix, the diagonal of Q has mean 0 (without it, QR conventions bias it)
    diag = np.array([np.diag(init.orthogonal_(ember.empty(3, 3, dtype=ember.float64)).numpy()) for _ in range(2000)])
    assert np.abs(diag.mean(0)).max() < 0.05


def test_sparse():
    t = init.sparse_(ember.empty(10, 400), sparsity=0.3, std=0.5).numpy()
    assert np.all((t == 0).sum(0) == 3)
    nz = t[t != 0]
    assert abs(nz.std() - 0.5) < 0.03
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(ember.empty(3, 3, 3), 0.1)


# ---------------------------------------------------------------------- deterministic fills
@requires_torch
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2)], ids=str)
def test_eye_as_pytorch(shape):
    np.testing.assert_array_equal(init.eye_(ember.empty(shape)).numpy(), torch.nn.init.eye_(torch.empty(shape)).numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.eye_(ember.empty(2, 2, 2))


@requires_torch
@pytest.mark.parametrize("shape,groups", [((4, 3, 3), 1), ((6, 4, 3, 3), 2), ((2, 2, 3, 3, 3), 1), ((6, 2, 5, 4), 3)],
                         ids=str)
def test_dirac_as_pytorch(shape, groups):
    np.testing.assert_array_equal(init.dirac_(ember.empty(shape), groups).numpy(),
                                  torch.nn.init.dirac_(torch.empty(shape), groups).numpy())


def test_dirac_errors():
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        init.dirac_(ember.empty(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(ember.empty(5, 2, 3), groups=2)


# ---------------------------------------------------------------------- nn.utils: gradient clipping
def _params_with_grads(seed=0, scale=1.0):
    shapes = [(4, 3), (3,), (2, 2, 2)]
    ws = [rand(*s, seed=seed + i) for i, s in enumerate(shapes)]
    gs = [rand(*s, seed=seed + 10 + i) * scale for i, s in enumerate(shapes)]
    e = [nn.Parameter(ember.tensor(w)) for w in ws]
    t = [torch.nn.Parameter(torch.tensor(w)) for w in ws] if torch is not None else []
    for p, g in zip(e, gs):
        p.grad = ember.tensor(g)
    for p, g in zip(t, gs):
        p.grad = torch.tensor(g)
    return e, t


@requires_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_parity(norm_type, max_norm):
    e, t = _params_with_grads()
    e_total = nn.utils.clip_grad_norm_(e, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t, max_norm, norm_type)
    assert isinstance(e_total, ember.Tensor) and e_total.shape == () and e_total.dtype == ember.float64
    np.testing.assert_allclose(float(e_total), float(t_total), rtol=1e-12)
    for pe, pt in zip(e, t):
        np.testing.assert_allclose(pe.grad.numpy(), pt.grad.numpy(), rtol=1e-12)


@requires_torch
def test_clip_grad_norm_float32_single_tensor_and_no_grads():
    p = nn.Parameter(ember.randn(5, 5))
    p.grad = ember.randn(5, 5) * 10
    tp = torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy()))
    tp.grad = torch.from_numpy(p.grad.numpy().copy())
    total = nn.utils.clip_grad_norm_(p, 1.0)
    np.testing.assert_allclose(float(total), float(torch.nn.utils.clip_grad_norm_(tp, 1.0)), rtol=1e-6)
    assert total.dtype == ember.float32 and p.grad.dtype == ember.float32
    np.testing.assert_allclose(np.linalg.norm(p.grad.numpy()), 1.0, rtol=1e-5)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    q = nn.Parameter(ember.randn(3))
    assert float(nn.utils.clip_grad_norm_([q], 1.0)) == 0.0 and q.grad is None


def test_clip_grad_norm_nonfinite():
    e, _ = _params_with_grads()
    e[0].grad._data[0, 0] = np.inf
    with pytest.raises(RuntimeError, match="non-finite.*error_if_nonfinite=False"):
        nn.utils.clip_grad_norm_(e, 1.0, error_if_nonfinite=True)
    assert np.isinf(e[0].grad.numpy()[0, 0])  # nothing was scaled
    assert math.isinf(float(nn.utils.clip_grad_norm_(e, 1.0)))


@requires_torch
def test_clip_grad_value_parity():
    e, t = _params_with_grads(scale=3.0)
    assert nn.utils.clip_grad_value_(e, 0.7) is None
    torch.nn.utils.clip_grad_value_(t, 0.7)
    for pe, pt in zip(e, t):
        np.testing.assert_array_equal(pe.grad.numpy(), pt.grad.numpy())
    assert max(np.abs(p.grad.numpy()).max() for p in e) == 0.7


# ---------------------------------------------------------------------- nn.utils: parameters as a vector
@requires_torch
def test_parameters_to_vector_and_back():
    e, t = _params_with_grads()
    v = nn.utils.parameters_to_vector(e)
    np.testing.assert_array_equal(v.detach().numpy(), torch.nn.utils.parameters_to_vector(t).detach().numpy())
    v.sum().backward()  # differentiable, as in PyTorch
    new = ember.arange(v.numel(), dtype=ember.float64)
    nn.utils.vector_to_parameters(new, e)
    tnew = torch.arange(v.numel(), dtype=torch.float64)
    torch.nn.utils.vector_to_parameters(tnew, t)
    for pe, pt in zip(e, t):
        assert pe.shape == tuple(pt.shape) and isinstance(pe, nn.Parameter)
        np.testing.assert_array_equal(pe.detach().numpy(), pt.detach().numpy())
    m = nn.Linear(3, 2)
    nn.utils.vector_to_parameters(ember.zeros(8), m.parameters())
    assert np.all(m.weight.detach().numpy() == 0) and np.all(m.bias.detach().numpy() == 0)


def test_vector_to_parameters_errors():
    e, _ = _params_with_grads()
    with pytest.raises(RuntimeError, match=r"shape \[5\].*1-D vector of 23 elements"):
        nn.utils.vector_to_parameters(ember.zeros(5), e)
    with pytest.raises(RuntimeError, match="23 elements"):
        nn.utils.vector_to_parameters(ember.zeros(24), e)
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0, 2.0], e)


# ---------------------------------------------------------------------- CUDA parameters
# (the `cuda` fixture is in conftest.py)

def _host(t) -> np.ndarray:
    return t.detach().cpu().numpy()


INIT_FILLS = {
    "uniform_": lambda t, g: init.uniform_(t, -0.5, 2.0, generator=g),
    "normal_": lambda t, g: init.normal_(t, 0.5, 2.0, generator=g),
    "trunc_normal_": lambda t, g: init.trunc_normal_(t, 0.0, 1.0, -0.5, 0.7, generator=g),
    "trunc_normal_-narrow": lambda t, g: init.trunc_normal_(t, 0.0, 1.0, 2.0, 3.0, generator=g),
    "constant_": lambda t, g: init.constant_(t, 0.25),
    "ones_": lambda t, g: init.ones_(t),
    "zeros_": lambda t, g: init.zeros_(t),
    "eye_": lambda t, g: init.eye_(t.view(6, -1)),
    "dirac_": lambda t, g: init.dirac_(t, groups=2),
    "xavier_uniform_": lambda t, g: init.xavier_uniform_(t, 1.5, generator=g),
    "xavier_normal_": lambda t, g: init.xavier_normal_(t, 1.5, generator=g),
    "kaiming_uniform_": lambda t, g: init.kaiming_uniform_(t, math.sqrt(5), generator=g),
    "kaiming_normal_": lambda t, g: init.kaiming_normal_(t, 0, "fan_out", "relu", generator=g),
    "orthogonal_": lambda t, g: init.orthogonal_(t, 2.0, generator=g),
    "sparse_": lambda t, g: init.sparse_(t.view(6, -1), 0.4, 0.1, generator=g),
}


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16], ids=str)
@pytest.mark.parametrize("seeded", ["global", "generator"])
@pytest.mark.parametrize("name", list(INIT_FILLS))
def test_init_on_cuda_equals_cpu_with_the_same_seed(cuda, name, seeded, dtype):
    fill = INIT_FILLS[name]
    out = {}
    for dev in ("cpu", cuda):
        ember.manual_seed(11)
        g = ember.Generator().manual_seed(5) if seeded == "generator" else None
        p = nn.Parameter(ember.full((6, 4, 3), 7.0, dtype=dtype, device=dev))
        v0 = p._version
        r = fill(p, g)
        assert r.device.type == dev and p.device.type == dev and p.dtype == dtype
        assert p.requires_grad and p.grad_fn is None and p._version > v0
        out[dev] = _host(p)
    assert not (out["cpu"] == 7.0).all()  # the fill wrote something
    np.testing.assert_array_equal(out[cuda], out["cpu"])


def test_init_on_cuda_with_a_cuda_generator_equals_cpu(cuda):
    # a CUDA generator's draws are brought to the host: the same values whichever device the tensor is on
    for fill in INIT_FILLS.values():
        vals = []
        for dev in ("cpu", cuda):
            g = ember.Generator(cuda).manual_seed(9)
            vals.append(_host(fill(ember.zeros(6, 4, 3, device=dev), g)))
        np.testing.assert_array_equal(vals[0], vals[1])


def test_model_initialised_on_cuda_equals_cpu_model(cuda):
    def build(device):
        ember.manual_seed(21)
        return nn.Sequential(nn.Conv2d(2, 4, 3, device=device), nn.ReLU(), nn.Flatten(), nn.Linear(16, 3, device=device),
                             nn.BatchNorm1d(3, device=device), nn.Embedding(5, 2, device=device))

    cpu, gpu = build("cpu"), build(cuda)
    for (name, a), b in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert b.device.type == "cuda", name
        np.testing.assert_array_equal(_host(b), _host(a), err_msg=name)
    # and re-initialising parameters already on the device draws the CPU's values too
    ember.manual_seed(4)
    ref = init.kaiming_uniform_(cpu[0].weight, a=math.sqrt(5))
    ember.manual_seed(4)
    np.testing.assert_array_equal(_host(init.kaiming_uniform_(gpu[0].weight, a=math.sqrt(5))), _host(ref))


def test_init_on_cuda_errors_as_on_cpu(cuda):
    with pytest.raises(TypeError, match="uniform_.*floating"):
        init.uniform_(ember.zeros(3, dtype=ember.int64, device=cuda))
    with pytest.raises(ValueError, match="eye_ got shape"):
        init.eye_(ember.zeros(2, 2, 2, device=cuda))
    with pytest.raises(ValueError, match="sparse_ got shape"):
        init.sparse_(ember.zeros(2, 2, 2, device=cuda), 0.1)
