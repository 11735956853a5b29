"""The `torch` namespace's global names: legacy tensor types, type predicates, print options, the default
device, thread pools, the deterministic-algorithms switch, `ember.backends` and the constants."""
import math

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember


# ---------------------------------------------------------------------- legacy types
def test_legacy_constructors_and_isinstance():
    assert ember.FloatTensor(2, 3).shape == (2, 3) and ember.FloatTensor(2, 3).dtype is ember.float32
    assert ember.LongTensor([1.7, 2.2]).tolist() == [1, 2]
    assert ember.DoubleTensor().shape == (0,)
    assert ember.ByteTensor(ember.Size([4])).dtype is ember.uint8
    assert ember.HalfTensor([1.0]).dtype is ember.float16 and ember.BFloat16Tensor([1.0]).dtype is ember.bfloat16
    assert isinstance(ember.ones(2), ember.FloatTensor) and not isinstance(ember.ones(2).double(), ember.FloatTensor)
    assert isinstance(ember.tensor([True]), ember.BoolTensor) and isinstance(ember.arange(3), ember.LongTensor)
    assert not isinstance([1.0], ember.FloatTensor)
    x = ember.ones(2)
    assert ember.FloatTensor(x) is x
    with pytest.raises(TypeError, match="expected a tensor of dtype ember.float32"):
        ember.FloatTensor(ember.tensor([1]))


@requires_torch
def test_type_strings_match_torch():
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        assert ember.ones(1, dtype=getattr(ember, name)).type() == torch.ones(1, dtype=getattr(torch, name)).type()
    x = ember.ones(2)
    assert x.type("torch.LongTensor").dtype is ember.int64 and x.type(ember.IntTensor).dtype is ember.int32
    assert x.type(ember.float16).dtype is ember.float16


def test_tensor_new():
    x = ember.ones(2, dtype=ember.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is ember.float64
    assert x.new([1, 2]).dtype is ember.float64 and x.new().shape == (0,)
    assert not x.new([1.0]).requires_grad


def test_type_predicates_and_constants():
    assert ember.is_tensor(ember.ones(1)) and ember.is_tensor(ember.nn.Parameter(ember.ones(1)))
    assert not ember.is_tensor([1]) and not ember.is_storage(ember.ones(1))
    assert ember.numel(ember.ones(2, 3)) == 6
    with pytest.raises(TypeError, match="numel\\(\\): argument 'input' .* must be Tensor, not list"):
        ember.numel([1])
    assert (ember.pi, ember.e, ember.inf) == (math.pi, math.e, math.inf) and math.isnan(ember.nan)
    assert ember.ones(3)[ember.newaxis].shape == (1, 3)


# ---------------------------------------------------------------------- print options
@requires_torch
@pytest.mark.parametrize("opts", [dict(precision=2), dict(sci_mode=True), dict(sci_mode=False),
                                  dict(threshold=5, edgeitems=2), dict(linewidth=30), dict(profile="short"),
                                  dict(profile="full"), dict(precision=6, sci_mode=False)])
def test_set_printoptions_matches_torch(opts):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(7) * 10, np.array([1e-5, 3.0, 250.0]), np.arange(12.0).reshape(3, 4) * 1.5,
              rng.standard_normal((40, 40)), np.array([1.0, 2.0, 3.0])]
    try:
        ember.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        for v in values:
            want = repr(torch.tensor(v, dtype=torch.float32)).replace("torch.", "ember.")
            assert repr(ember.tensor(v, dtype=ember.float32)) == want, opts
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_set_printoptions_errors_and_reset():
    with pytest.raises(ValueError, match="profile must be one of"):
        ember.set_printoptions(profile="long")
    ember.set_printoptions(precision=1)
    assert repr(ember.tensor([1.25])) == "tensor([1.2])"
    ember.set_printoptions(profile="default")
    assert repr(ember.tensor([1.25])) == "tensor([1.2500])"


# ---------------------------------------------------------------------- default device
def test_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    try:
        ember.set_default_device("cpu")
        assert ember.zeros(2).device == ember.device("cpu")
    finally:
        ember.set_default_device(None)
    with ember.device("cpu"):
        assert ember.randn(2).device.type == "cpu"
    assert ember.get_default_device() == ember.device("cpu")


def test_default_device_cuda_without_a_gpu_says_so():
    if ember.cuda.is_available():
        pytest.skip("a GPU (or the CPU stand-in) is present")
    try:
        ember.set_default_device("cuda")
        with pytest.raises(RuntimeError, match="CUDA"):
            ember.zeros(2)
    finally:
        ember.set_default_device(None)


# ---------------------------------------------------------------------- threads and determinism
def test_threads_through_threadpoolctl():
    pytest.importorskip("threadpoolctl")
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1
    finally:
        ember.set_num_threads(before)
    assert ember.get_num_threads() == before
    with pytest.raises(RuntimeError, match="positive integer"):
        ember.set_num_threads(0)
    assert ember.get_num_interop_threads() == 1
    with pytest.warns(UserWarning, match="no inter-op thread pool"):
        ember.set_num_interop_threads(4)


def test_deterministic_switch():
    assert not ember.are_deterministic_algorithms_enabled()
    try:
        ember.use_deterministic_algorithms(True, warn_only=True)
        assert ember.are_deterministic_algorithms_enabled() and ember.is_deterministic_algorithms_warn_only_enabled()
        assert ember.get_deterministic_debug_mode() == 1
        ember.set_deterministic_debug_mode("error")
        assert ember.get_deterministic_debug_mode() == 2
        x = ember.zeros(3)  # CPU accumulation is deterministic: no error
        x.index_add_(0, ember.tensor([0, 0]), ember.ones(2))
        assert x.tolist() == [2.0, 0.0, 0.0]
    finally:
        ember.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match="must be bool"):
        ember.use_deterministic_algorithms(1)


# ---------------------------------------------------------------------- backends
def test_backends_switches():
    import ember.backends.cudnn as cudnn
    old = cudnn.benchmark
    try:
        ember.backends.cudnn.benchmark = True
        ember.backends.cudnn.deterministic = True
        assert cudnn.benchmark is True
    finally:
        cudnn.benchmark, cudnn.deterministic = old, False
    assert not ember.backends.cudnn.is_available() and not ember.backends.mps.is_available()
    ember.backends.cuda.matmul.allow_tf32 = True
    ember.backends.cuda.matmul.allow_tf32 = False
    assert ember.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "SVE", "NEON", "VSX", "DEFAULT")
    assert isinstance(ember.backends.openmp.is_available(), bool)


# ---------------------------------------------------------------------- factories and random draws
@requires_torch
@pytest.mark.parametrize("name, kw", [("hann_window", {}), ("hann_window", {"periodic": False}),
                                      ("hamming_window", {}),
                                      ("hamming_window", {"periodic": True, "alpha": 0.5, "beta": 0.5}),
                                      ("blackman_window", {}), ("bartlett_window", {"periodic": False}),
                                      ("kaiser_window", {}), ("kaiser_window", {"beta": 5.0, "periodic": False})])
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_windows_match_torch(name, kw, n):
    got = getattr(ember, name)(n, **kw)
    want = getattr(torch, name)(n, **kw)
    assert got.dtype is ember.float32 and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)
    assert getattr(ember, name)(5, dtype=ember.float64).dtype is ember.float64


def test_window_errors():
    with pytest.raises(RuntimeError, match="hann_window\\(\\): expects floating point dtypes"):
        ember.hann_window(4, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="window_length must be a non-negative int"):
        ember.hann_window(-1)


def test_random_fills_have_their_distributions():
    ember.manual_seed(0)
    x = ember.empty(200_000)
    assert abs(float(x.cauchy_(1.0, 2.0).median()) - 1.0) < 0.05
    lg = x.log_normal_(1.0, 0.5).log()
    assert abs(float(lg.mean()) - 1.0) < 0.01 and abs(float(lg.std()) - 0.5) < 0.01
    g = x.geometric_(0.25)
    assert float(g.min()) == 1.0 and abs(float(g.mean()) - 4.0) < 0.05 and bool((g == g.round()).all())
    assert ember.empty(3, dtype=ember.int64).geometric_(0.5).dtype is ember.int64
    with pytest.raises(RuntimeError, match="geometric_ expects p to be in \\(0, 1\\), but got p=1.5"):
        x.geometric_(1.5)
    with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0"):
        x.cauchy_(0, -1)
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0"):
        x.log_normal_(1, 0)


def test_poisson_binomial_bernoulli_multinomial():
    ember.manual_seed(0)
    rate = ember.full((100_000,), 3.0)
    p = ember.poisson(rate)
    assert p.dtype is ember.float32 and abs(float(p.mean()) - 3.0) < 0.03 and bool((p == p.round()).all())
    b = ember.binomial(ember.full((100_000,), 10.0), ember.tensor(0.3))
    assert abs(float(b.mean()) - 3.0) < 0.03 and float(b.max()) <= 10
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        ember.poisson(ember.tensor([-1.0]))
    assert ember.full((4,), 0.5).bernoulli().shape == (4,)
    assert ember.ones(2, 5).multinomial(3).shape == (2, 3)


def test_runtime_switches_and_typename():
    assert ember.get_float32_matmul_precision() == "highest"
    try:
        ember.set_float32_matmul_precision("high")
        assert ember.get_float32_matmul_precision() == "high"
    finally:
        ember.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError, match="invalid precision"):
        ember.set_float32_matmul_precision("low")
    assert ember.set_flush_denormal(True) is False
    assert ember.typename(ember.ones(1)) == "torch.FloatTensor" and ember.typename(3) == "int"
    assert ember.typename(ember.nn.Linear(1, 1)) == "ember.nn.modules.linear.Linear"
    x = ember.arange(10.0)
    assert x[3:].data_ptr() - x.data_ptr() == 3 * x.element_size()
    assert not ember.detach(ember.ones(1, requires_grad=True)).requires_grad


# ---------------------------------------------------------------------- range, ember.random, ember.testing
@requires_torch
@pytest.mark.parametrize("args, kw", [((1, 4), {}), ((1, 4, 0.5), {}), ((0, 1, 0.3), {}), ((1, 4), {"dtype": "int64"}),
                                      ((5, 1, -2), {})])
def test_range_matches_torch(args, kw):
    with pytest.warns(UserWarning, match="deprecated"):
        got = ember.range(*args, **{k: getattr(ember, v) for k, v in kw.items()})
    with pytest.warns(UserWarning):
        want = torch.range(*args, **{k: getattr(torch, v) for k, v in kw.items()})
    assert got.tolist() == pytest.approx(want.tolist()) and str(got.dtype)[6:] == str(want.dtype)[6:]


def test_fork_rng_restores_the_state():
    ember.manual_seed(3)
    with ember.random.fork_rng():
        inside = ember.rand(3)
    after = ember.rand(3)
    assert ember.equal(inside, after)
    assert ember.random.initial_seed() == 3 and ember.random.manual_seed is ember.manual_seed


@requires_torch
def test_assert_close_as_torch():
    ember.testing.assert_close(ember.ones(2), ember.ones(2) + 1e-7)
    ember.testing.assert_close({"a": [ember.ones(1)]}, {"a": [ember.ones(1)]})
    cases = [((ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.1])), (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1]))),
             ((ember.tensor([1.0, 2.0]), ember.tensor([1, 2])), (torch.tensor([1.0, 2.0]), torch.tensor([1, 2]))),
             ((ember.ones(2), ember.ones(3)), (torch.ones(2), torch.ones(3)))]
    for (ea, ee), (ta, te) in cases:
        with pytest.raises(AssertionError) as want:
            torch.testing.assert_close(ta, te)
        with pytest.raises(AssertionError) as got:
            ember.testing.assert_close(ea, ee)
        first = str(want.value).splitlines()[0].replace("torch.", "ember.")
        assert str(got.value).splitlines()[0] == first
    ember.testing.assert_close(ember.tensor([float("nan")]), ember.tensor([float("nan")]), equal_nan=True)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        ember.testing.assert_close(ember.ones(1), ember.ones(1), rtol=1e-3)


def test_make_tensor():
    t = ember.testing.make_tensor(3, 4, dtype=ember.float32, low=-1, high=1, noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous() and float(t.abs().max()) <= 1
    assert ember.testing.make_tensor((2,), dtype=ember.int64, exclude_zero=True).ne(0).all()
    assert ember.testing.make_tensor(2, 3, 4, 5, dtype=ember.float32, memory_format=ember.channels_last).is_contiguous(
        memory_format=ember.channels_last)


def test_cuda_legacy_types_and_oom_error():
    assert not isinstance(ember.ones(1), ember.cuda.FloatTensor) and repr(ember.cuda.LongTensor) == \
        "<class 'torch.cuda.LongTensor'>"
    assert issubclass(ember.OutOfMemoryError, RuntimeError) and ember.OutOfMemoryError is ember.cuda.OutOfMemoryError
