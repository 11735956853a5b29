"""16-bit floats: ember.bfloat16 (ml_dtypes) and float16, with PyTorch's rule that their ops compute in
float32 and round once (autograd.function.dispatch), their promotion rules, limits, printing and saving.

Parity: forward bit for bit and gradients (random cotangent) to one unit in the last place against torch's
CPU kernels, output and gradient dtypes exactly.
"""
import io

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember
import ember.nn.functional as EF

LOW = ["bfloat16", "float16"]

# name -> fn(m, F, x, y, w): m the library, F its nn.functional; x, y (4, 5) and w (5, 3) of the dtype under test
CASES = {
    "add": lambda m, F, x, y, w: x + y,
    "mul_scalar": lambda m, F, x, y, w: x * 0.1,
    "rsub_scalar": lambda m, F, x, y, w: 0.3 - x,
    "div": lambda m, F, x, y, w: x / (y.abs() + 1),
    "exp": lambda m, F, x, y, w: x.exp(),
    "tanh": lambda m, F, x, y, w: m.tanh(x),
    "sqrt": lambda m, F, x, y, w: (x.abs() + 1).sqrt(),
    "sigmoid": lambda m, F, x, y, w: x.sigmoid(),
    "pow2": lambda m, F, x, y, w: x ** 2,
    "sum": lambda m, F, x, y, w: x.sum(),
    "sum_dim": lambda m, F, x, y, w: x.sum(1),
    "mean": lambda m, F, x, y, w: x.mean(0),
    "var": lambda m, F, x, y, w: x.var(1),
    "max_dim": lambda m, F, x, y, w: x.max(1).values,
    "cumsum": lambda m, F, x, y, w: x.cumsum(1),
    "matmul": lambda m, F, x, y, w: x @ w,
    "softmax": lambda m, F, x, y, w: m.softmax(x, 1),
    "relu": lambda m, F, x, y, w: m.relu(x),
    "gelu": lambda m, F, x, y, w: F.gelu(x),
    "layer_norm": lambda m, F, x, y, w: F.layer_norm(x, (5,)),
    "linear": lambda m, F, x, y, w: F.linear(x, w.t()),
    "cross_entropy": lambda m, F, x, y, w: F.cross_entropy(x, m.tensor([0, 1, 2, 3])),
    "cat": lambda m, F, x, y, w: m.cat([x, y]),
    "transpose_slice": lambda m, F, x, y, w: x.t()[1:4, ::2],
    "where": lambda m, F, x, y, w: m.where(x > 0, x, y),
    "sort": lambda m, F, x, y, w: x.sort(1).values,
    "to_float32": lambda m, F, x, y, w: x.float() * 3,
    "with_float32": lambda m, F, x, y, w: x + y.float(),  # promotes to float32
}


def _ulp(a: np.ndarray, dtn: str) -> np.ndarray:
    """One unit in the last place of each value of a 16-bit dtype (bfloat16: 8 significant bits, float16: 11)."""
    bits = 8 if dtn == "bfloat16" else 11
    mag = np.maximum(np.abs(a), 2.0 ** -14)
    return 2.0 ** (np.floor(np.log2(mag)) - (bits - 1))


@requires_torch
@pytest.mark.parametrize("dtn", LOW)
@pytest.mark.parametrize("name", list(CASES))
def test_low_precision_ops_match_torch(name, dtn):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (4, 5), (5, 3))]
    xs = [ember.tensor(a).to(getattr(ember, dtn)).requires_grad_() for a in arrays]
    ts = [torch.tensor(a).to(getattr(torch, dtn)).requires_grad_() for a in arrays]
    re = CASES[name](ember, EF, *xs)
    rt = CASES[name](torch, torch.nn.functional, *ts)
    assert str(re.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
    # forward: the same rounding, bit for bit
    np.testing.assert_array_equal(re.detach().float().numpy(), rt.detach().float().numpy())
    g = rng.standard_normal(tuple(rt.shape)).astype(np.float32)
    re.backward(ember.tensor(g).to(re.dtype))
    rt.backward(torch.tensor(g).to(rt.dtype))
    for xe, xt in zip(xs, ts):
        if xt.grad is None:
            assert xe.grad is None
            continue
        assert xe.grad.dtype == xe.dtype
        ge, gt = xe.grad.float().numpy(), xt.grad.float().numpy()
        # a gradient made of several ops rounds at each (PyTorch's fused backward kernels round once): a few
        # units in the last place, of each value and of the largest
        tol = 4 * _ulp(gt, dtn) + 2 * _ulp(np.abs(gt).max(), dtn)
        assert np.all(np.abs(ge - gt) <= tol), (name, np.abs(ge - gt).max())


def test_float16_times_a_python_float_rounds_once():
    """PyTorch computes `half * 0.1` as float(half) * 0.1f rounded once; NumPy would round 0.1 to half first."""
    x = np.array([1.0, 3.0, 7.0, 0.5], np.float16)
    got = (ember.from_numpy(x) * 0.1)._data
    want = (x.astype(np.float32) * np.float32(0.1)).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, x * np.float16(0.1))  # the case the rule is about


def test_float16_sum_accumulates_in_float32():
    x = np.full(4096, 0.1, np.float16)
    got = ember.from_numpy(x).sum()._data
    assert got == np.float16(x.astype(np.float32).sum())


@pytest.mark.parametrize("a, b, want", [
    ("bfloat16", "float16", "float32"), ("bfloat16", "float32", "float32"), ("bfloat16", "int64", "bfloat16"),
    ("bfloat16", "bool", "bfloat16"), ("float16", "float64", "float64"), ("bfloat16", "bfloat16", "bfloat16")])
def test_promotion(a, b, want):
    A, B = getattr(ember, a), getattr(ember, b)
    assert ember.promote_types(A, B) is getattr(ember, want)
    x, y = ember.ones(2, dtype=A), ember.ones(2, dtype=B)
    assert (x + y).dtype is getattr(ember, want)
    assert (ember.ones(2, dtype=ember.bfloat16) * 2.5).dtype is ember.bfloat16  # a Python float does not widen


def test_creation_casting_and_methods():
    x = ember.tensor([1.0, 2.5, -3.0], dtype=ember.bfloat16)
    assert x.dtype is ember.bfloat16 and x.is_floating_point() and x.element_size() == 2
    assert ember.ones(2).bfloat16().dtype is ember.bfloat16
    assert x.to(ember.float32).dtype is ember.float32 and x.half().dtype is ember.float16
    assert ember.zeros(2, 3, dtype=ember.bfloat16).shape == (2, 3)
    assert ember.tensor([1.0], dtype="bfloat16").dtype is ember.bfloat16
    y = ember.tensor([1.0, 2.0]).bfloat16().requires_grad_()
    (y * y).sum().backward()
    assert y.grad.dtype is ember.bfloat16 and y.grad.tolist() == [2.0, 4.0]
    assert ember.tensor([1 / 3]).bfloat16().item() == 0.333984375  # the nearest bfloat16


def test_print():
    assert repr(ember.tensor([1.5, -2.0]).bfloat16()) == "tensor([ 1.5000, -2.0000], dtype=ember.bfloat16)"


def test_set_default_dtype_each_float():
    old = ember.get_default_dtype()
    try:
        for d in (ember.bfloat16, ember.float16, ember.float64, ember.float32):
            ember.set_default_dtype(d)
            assert ember.tensor([1.5]).dtype is d and ember.zeros(1).dtype is d and ember.get_default_dtype() is d
        with pytest.raises(TypeError, match="floating-point"):
            ember.set_default_dtype(ember.int64)
    finally:
        ember.set_default_dtype(old)


def test_save_and_load_keep_bfloat16():
    buf = io.BytesIO()
    x = ember.tensor([1.5, -2.0, 3.140625]).bfloat16()
    ember.save({"x": x}, buf)
    buf.seek(0)
    y = ember.load(buf)["x"]
    assert y.dtype is ember.bfloat16 and y.float().tolist() == [1.5, -2.0, 3.140625]


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "float64"])
def test_finfo_matches_torch(name):
    f = ember.finfo(getattr(ember, name))
    if torch is not None:
        t = torch.finfo(getattr(torch, name))
        for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
            assert getattr(f, attr) == getattr(t, attr), attr
    assert f.dtype == name and f.bits == 8 * getattr(ember, name).itemsize


def test_finfo_iinfo_errors_and_defaults():
    assert ember.finfo().dtype == "float32"
    i = ember.iinfo(ember.int16)
    assert (i.bits, i.min, i.max, i.dtype) == (16, -32768, 32767, "int16")
    with pytest.raises(TypeError, match="floating point input type.*iinfo"):
        ember.finfo(ember.int32)
    with pytest.raises(TypeError, match="integer input type.*finfo"):
        ember.iinfo(ember.float32)


@requires_torch
def test_promotion_functions_match_torch():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    for a in names:
        for b in names:
            want = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert ember.promote_types(getattr(ember, a), getattr(ember, b)).name == str(want)[6:], (a, b)
            assert ember.can_cast(getattr(ember, a), getattr(ember, b)) == torch.can_cast(getattr(torch, a),
                                                                                          getattr(torch, b)), (a, b)
    pairs = [(ember.tensor([1], dtype=ember.int32), 1.0, torch.tensor([1], dtype=torch.int32), 1.0),
             (ember.tensor(1.0, dtype=ember.float64), ember.tensor([1], dtype=ember.int32),
              torch.tensor(1.0, dtype=torch.float64), torch.tensor([1], dtype=torch.int32)),
             (ember.ones(2, dtype=ember.bfloat16), 2, torch.ones(2, dtype=torch.bfloat16), 2),
             (2, 3.0, 2, 3.0)]
    for ea, eb, ta, tb in pairs:
        assert ember.result_type(ea, eb).name == str(torch.result_type(ta, tb))[6:]


@pytest.mark.parametrize("dtn", LOW)
def test_compiled_programs_round_as_eager(dtn):
    """A captured program with 16-bit values replays through dispatch: the same values and dtypes as eager."""
    d = getattr(ember, dtn)
    ember.manual_seed(0)
    x, w = ember.randn(4, 5).to(d), ember.randn(5, 3).to(d)

    def fn(x, w):
        return (ember.tanh(x @ w) * 0.1 + 0.3).sum(1)

    f = ember.compile(fn)
    f(x, w)
    got = f(x, w)
    assert f.stats["replays"] == 1 and got.dtype is d
    np.testing.assert_array_equal(got.float().numpy(), fn(x, w).float().numpy())
