"""Elementwise binary ops (ember/ops/arithmetic.py): gradients, PyTorch parity, operators, errors."""
import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember

# name -> (ember fn, torch fn, input ranges (low, high) of the two operands)
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, (-1, 1), (-1, 1)),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, (-1, 1), (-1, 1)),
    "add_alpha": (lambda a, b: ember.add(a, b, alpha=2.5), lambda a, b: torch.add(a, b, alpha=2.5), (-1, 1), (-1, 1)),
    "sub_alpha": (lambda a, b: ember.sub(a, b, alpha=-3), lambda a, b: torch.sub(a, b, alpha=-3), (-1, 1), (-1, 1)),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, (-1, 1), (-1, 1)),
    "div": (lambda a, b: a / b, lambda a, b: a / b, (-1, 1), (0.5, 2)),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b, (0.5, 2), (-2, 2)),
    "maximum": (ember.maximum, lambda a, b: torch.maximum(a, b), (-1, 1), (-1, 1)),
    "minimum": (ember.minimum, lambda a, b: torch.minimum(a, b), (-1, 1), (-1, 1)),
    "remainder": (ember.remainder, lambda a, b: torch.remainder(a, b), (-3, 3), (0.7, 1.3)),
    "remainder_neg": (lambda a, b: a % b, lambda a, b: a % b, (-3, 3), (-1.3, -0.7)),
    "fmod": (ember.fmod, lambda a, b: torch.fmod(a, b), (-3, 3), (-1.3, -0.7)),
    "lerp": (lambda a, b: ember.lerp(a, b, 0.3), lambda a, b: torch.lerp(a, b, 0.3), (-1, 1), (-1, 1)),
    "where": (lambda a, b: ember.where(a > 0, a, b), lambda a, b: torch.where(a > 0, a, b), (-1, 1), (-1, 1)),
}
SMOOTH = {"add", "sub", "add_alpha", "sub_alpha", "mul", "div", "pow", "lerp"}

SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((2, 3), ()), ((), ())]


def _inputs(name, sa, sb, dtype=np.float64, seed=0):
    _, _, ra, rb = BINARY[name]
    a = rand(*sa, seed=seed, low=ra[0], high=ra[1], dtype=dtype)
    b = rand(*sb, seed=seed + 1, low=rb[0], high=rb[1], dtype=dtype)
    return a, b


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_gradcheck(name, shapes):
    a, b = _inputs(name, *shapes)
    check_grad(BINARY[name][0], a, b, gradgrad=name in SMOOTH)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_gradcheck_noncontiguous(name):
    a, b = _inputs(name, (4, 3), (3, 4))
    check_grad(BINARY[name][0], noncontig(a), b.T, gradgrad=name in SMOOTH)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_parity(name, shapes, dtype):
    a, b = _inputs(name, *shapes, dtype=dtype, seed=3)
    compare_torch(BINARY[name][0], BINARY[name][1], a, b)


# ---------------------------------------------------------------------- pow
@requires_torch
@pytest.mark.parametrize("exponent", [0, 0.0, 1, 2, 3, -1, 0.5, -0.5, 2.5])
def test_pow_tensor_scalar(exponent):
    a = rand(2, 3, low=0.5, high=2)
    compare_torch(lambda x: x ** exponent, lambda x: x ** exponent, a)
    check_grad(lambda x: x ** exponent, a)


@requires_torch
@pytest.mark.parametrize("base", [2, 2.5, 0.5, 1, 0, 0.0, -2.0])
def test_pow_scalar_tensor(base):
    y = rand(2, 3, low=-2, high=2)
    compare_torch(lambda t: base ** t, lambda t: base ** t, y)
    compare_torch(lambda t: ember.pow(base, t), lambda t: torch.pow(base, t), y)
    if base > 0:
        check_grad(lambda t: base ** t, y)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pow_base_zero_and_negative_as_pytorch(dtype):
    # 0**2, 0**0, 0**-1, 0**0.5, 2**3, (-1)**2, (-1)**0.5: PyTorch's values and gradients (incl. inf/nan)
    x = np.array([0., 0., 0., 0., 2., -1., -1.], dtype)
    y = np.array([2., 0., -1., 0.5, 3., 2., 0.5], dtype)
    compare_torch(lambda a, b: a ** b, lambda a, b: a ** b, x, y)
    compare_torch(lambda a: a ** 0, lambda a: a ** 0, x)
    compare_torch(lambda a: a ** -1, lambda a: a ** -1, x)
    compare_torch(lambda a: a ** 0.5, lambda a: a ** 0.5, x)


def test_pow_integer_negative_exponent_raises():
    # only a negative Python-number exponent on an integer tensor is an error (as PyTorch)
    with pytest.raises(RuntimeError, match="pow.*negative integer powers"):
        ember.tensor([1, 2]) ** -1
    with pytest.raises(RuntimeError, match="pow.*negative integer powers"):
        ember.tensor([1, 2], dtype=ember.int8).pow(-3)


@requires_torch
@pytest.mark.parametrize("base,exp", [
    ([1, -1, 2, 0, -2, 3, -1, 5], [-1, -1, -2, -1, -1, -3, -2, 2]),  # tensor ** tensor: truncated integer power
    (2, [-1, 1, 0, -3]), (-1, [-1, -2, 3]), (0, [-1, 0, 2]), (1, [-5]),  # number ** tensor
    ([[2, -1], [1, 3]], [-1, 2]),  # broadcast
    ([True, False], [-1, 1]),  # bool base: promoted to int64
])
@pytest.mark.parametrize("dtype", ["int64", "int8", "int32"])
def test_pow_integer_negative_tensor_exponent_as_pytorch(base, exp, dtype):
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    if isinstance(base, list):
        eb, tb = ember.tensor(base), torch.tensor(base)
        if eb.dtype != ember.bool:
            eb, tb = eb.to(ed), tb.to(td)
    else:
        eb, tb = base, base
    r = eb ** ember.tensor(exp, dtype=ed)
    ref = tb ** torch.tensor(exp, dtype=td)
    assert r.tolist() == ref.tolist() and str(r.dtype)[6:] == str(ref.dtype)[6:]
    r0 = ember.tensor(2, dtype=ed) ** ember.tensor(-1, dtype=ed)  # 0-d exponent tensor: defined too
    assert r0.tolist() == (torch.tensor(2, dtype=td) ** torch.tensor(-1, dtype=td)).tolist() == 0


def test_pow_int_values():
    assert ember.tensor([2, 3]).pow(2).tolist() == [4, 9]
    assert (2 ** ember.tensor([0, 3])).tolist() == [1, 8]
    assert (ember.tensor([2, 3]) ** 0.5).dtype == ember.float32


# ---------------------------------------------------------------------- maximum / minimum ties
@requires_torch
@pytest.mark.parametrize("fn", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_minmax_ties_split_gradient(fn, dtype):
    a = np.array([1., 2., 3., -1.], dtype)
    b = np.array([1., 0., 3., 2.], dtype)
    compare_torch(getattr(ember, fn), getattr(torch, fn), a, b)
    x, y = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    getattr(ember, fn)(x, y).backward(ember.ones(4, dtype=x.dtype))
    assert x.grad.tolist()[0] == 0.5 and y.grad.tolist()[0] == 0.5


# ---------------------------------------------------------------------- remainder, fmod, div modes
@requires_torch
@pytest.mark.parametrize("a,b", [([5, -5, 5, -5], [3, 3, -3, -3]), ([5.5, -5.5, 5.5, -5.5], [2.0, 2.0, -2.0, -2.0])])
def test_remainder_fmod_floor_divide_values(a, b):
    for e, t in [(ember.remainder, torch.remainder), (ember.fmod, torch.fmod), (ember.floor_divide, torch.floor_divide),
                 (lambda x, y: x % y, lambda x, y: x % y), (lambda x, y: x // y, lambda x, y: x // y),
                 (lambda x, y: ember.div(x, y, rounding_mode="trunc"), lambda x, y: torch.div(x, y, rounding_mode="trunc")),
                 (lambda x, y: ember.div(x, y, rounding_mode="floor"), lambda x, y: torch.div(x, y, rounding_mode="floor"))]:
        r, ref = e(ember.tensor(a), ember.tensor(b)), t(torch.tensor(a), torch.tensor(b))
        assert r.tolist() == ref.tolist() and str(r.dtype)[6:] == str(ref.dtype)[6:]


def test_integer_division_by_zero_raises():
    with pytest.raises(RuntimeError, match="remainder.*by zero"):
        ember.tensor([1, 2]) % ember.tensor([1, 0])
    with pytest.raises(RuntimeError, match="fmod.*by zero"):
        ember.fmod(ember.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError, match="floor_divide.*by zero"):
        ember.tensor([1, 2]) // 0


@requires_torch
@pytest.mark.parametrize("op", ["fmod", "remainder"])
@pytest.mark.parametrize("a,b", [((0,), 0), ((0,), (0,)), ((0,), (1,)), ((1,), (0,)), ((2, 0), (1,))])
def test_integer_mod_of_empty_by_zero_is_empty(op, a, b):
    """Nothing is divided when either operand is empty, so a zero divisor is no error (as PyTorch)."""
    def args(lib):
        mk = (lambda v: lib.zeros(v, dtype=lib.int64) if isinstance(v, tuple) else v)
        return mk(a), mk(b)
    r, ref = getattr(ember, op)(*args(ember)), getattr(torch, op)(*args(torch))
    assert tuple(r.shape) == tuple(ref.shape) and r.dtype == ember.int64


def test_where_uint8_condition_is_deprecated_mask():
    c = ember.tensor([3, 0, 1], dtype=ember.uint8)
    with pytest.warns(UserWarning, match="where.*uint8"):
        r = ember.where(c, ember.tensor([1., 2., 3.]), ember.tensor([4., 5., 6.]))
    assert r.tolist() == [1., 5., 3.]


def test_div_bad_rounding_mode():
    with pytest.raises(ValueError, match="rounding_mode"):
        ember.div(ember.ones(2), 2, rounding_mode="round")


# ---------------------------------------------------------------------- where, lerp
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_where_broadcast_parity(dtype):
    c = rand(3, 1, seed=4) > 0
    compare_torch(lambda x, y: ember.where(ember.tensor(c, device=DEVICE), x, y), lambda x, y: torch.where(torch.tensor(c), x, y),
                  rand(3, 4, dtype=dtype), rand(4, dtype=dtype))
    compare_torch(lambda x: ember.where(ember.tensor(c, device=DEVICE), x, 0.0), lambda x: torch.where(torch.tensor(c), x, 0.0),
                  rand(3, 4, dtype=dtype))
    check_grad(lambda x, y: ember.where(ember.tensor(c, device=DEVICE), x, y), rand(1, 4), rand(3, 1))


def test_where_bad_inputs():
    with pytest.raises(RuntimeError, match="where.*bool.*float32"):
        ember.where(ember.ones(2), ember.ones(2), ember.zeros(2))
    with pytest.raises(RuntimeError, match="where.*bool.*int8"):
        ember.where(ember.tensor([1, 0], dtype=ember.int8), 1.0, 2.0)
    with pytest.raises(RuntimeError, match="where.*broadcast"):
        ember.where(ember.ones(3) > 0, ember.ones(2), ember.zeros(2))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lerp_tensor_weight(dtype):
    compare_torch(ember.lerp, torch.lerp, rand(2, 3, dtype=dtype), rand(2, 3, seed=1, dtype=dtype),
                  rand(3, seed=2, low=0, high=1, dtype=dtype))
    check_grad(ember.lerp, rand(2, 3), rand(2, 3, seed=1), rand(3, seed=2, low=0, high=1))


# ---------------------------------------------------------------------- operators and operands
@requires_torch
@pytest.mark.parametrize("op", ["2 - t", "2 / t", "2 ** t", "2 + t", "2 * t", "2.5 % t", "2 // t", "t - 2", "-t"])
def test_reflected_operators(op):
    a = rand(2, 3, low=0.5, high=2)
    f = lambda t: eval(op)  # noqa: E731
    r = f(ember.tensor(a))
    assert isinstance(r, ember.Tensor)
    np.testing.assert_allclose(r.numpy(), f(torch.tensor(a)).numpy(), rtol=1e-12)
    if "//" not in op and "%" not in op:
        compare_torch(f, f, a)


@pytest.mark.parametrize("order", ["array_first", "tensor_first"])
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", ">", "=="])
def test_numpy_array_with_tensor_gives_tensor(op, order):
    arr = np.array([1.0, 2.0, 3.0])
    t = ember.tensor([0.5, 1.5, 2.5], requires_grad=True)
    r = eval(f"arr {op} t") if order == "array_first" else eval(f"t {op} arr")
    assert isinstance(r, ember.Tensor)
    expected = eval(f"arr {op} t.detach().numpy().astype(np.float64)") if order == "array_first" else \
        eval(f"t.detach().numpy().astype(np.float64) {op} arr")
    np.testing.assert_allclose(r.detach().numpy(), expected, rtol=1e-6)
    if op not in (">", "=="):
        assert r.requires_grad  # the graph goes through the NumPy operand too


def test_numpy_operand_gradient():
    arr = np.array([1.0, 2.0, 3.0], np.float32)
    t = ember.tensor([0.5, 1.5, 2.5], requires_grad=True)
    (arr * t).backward(ember.ones(3))
    assert t.grad.tolist() == [1.0, 2.0, 3.0]


def test_unsupported_operand_type():
    with pytest.raises(TypeError, match="add.*unsupported operand"):
        ember.add(ember.ones(2), "a")
    with pytest.raises(TypeError):
        ember.ones(2) + [1, 2] * 1j


@pytest.mark.parametrize("fn", [ember.add, ember.sub, ember.mul, ember.div, ember.maximum, ember.pow])
def test_shape_mismatch_names_op_and_shapes(fn):
    with pytest.raises(RuntimeError, match=rf"{fn.__name__}.*\[2, 3\].*\[4\]"):
        fn(ember.ones(2, 3), ember.ones(4))


def test_sub_bool_raises():
    m = ember.tensor([True, False])
    with pytest.raises(RuntimeError, match="sub.*bool"):
        m - m
    with pytest.raises(RuntimeError, match="sub.*bool"):
        1 - m
    with pytest.raises(RuntimeError, match="sub.*bool"):
        ember.ones(2) - True


def test_bool_floor_divide_remainder_pow_raise():
    m = ember.tensor([True, False])
    for f in (lambda: m // m, lambda: m % m, lambda: m ** m):
        with pytest.raises(NotImplementedError, match="bool"):
            f()
    assert (m ** True).tolist() == [True, False] and (m ** False).tolist() == [True, True]


def test_gradient_dtype_and_shape_after_promotion():
    # float32 leaf combined with a float64 tensor: the result is float64, the leaf's grad float32
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.tensor([[3.0], [4.0]], dtype=ember.float64, requires_grad=True)
    z = x * y
    assert z.dtype == ember.float64 and z.shape == (2, 2)
    z.backward(ember.ones(2, 2, dtype=ember.float64))
    assert x.grad.dtype == ember.float32 and x.grad.tolist() == [7.0, 7.0]
    assert y.grad.dtype == ember.float64 and y.grad.tolist() == [[3.0], [3.0]]


def test_scalar_operand_no_grad_recorded_without_requires_grad():
    z = ember.ones(3) * 2
    assert not z.requires_grad and z.grad_fn is None
    with ember.no_grad():
        assert (ember.ones(3, requires_grad=True) * 2).grad_fn is None


def test_isclose_allclose_equal():
    a, b = ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-6])
    assert ember.allclose(a, b) and ember.equal(a, a) and not ember.equal(a, b)
    assert ember.isclose(a, b).tolist() == [True, True]
    assert not ember.equal(a, ember.ones(3))


def test_numpy_arctan2_runs_as_ember_atan2():
    """np.arctan2 on tensors routes to ember.atan2 (like np.maximum): a Tensor result that keeps the graph."""
    y = ember.tensor([1.0, -1.0, 0.5], requires_grad=True)
    x = ember.tensor([2.0, -3.0, 0.0])
    z = np.arctan2(y, x)
    assert isinstance(z, ember.Tensor) and z.dtype == ember.float32 and z.requires_grad
    np.testing.assert_allclose(z.detach().numpy(), np.arctan2(y.detach().numpy(), x.numpy()), rtol=1e-6)
    z.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [2 / 5, -3 / 10, 0.0], rtol=1e-6, atol=1e-7)
    mixed = np.arctan2(np.array([1.0, 1.0], np.float32), ember.tensor([1.0, -1.0]))  # array and tensor
    assert isinstance(mixed, ember.Tensor)
    np.testing.assert_allclose(mixed.numpy(), [np.pi / 4, 3 * np.pi / 4], rtol=1e-6)


# ---------------------------------------------------------------------- devices (the fake CUDA where no GPU)
@pytest.fixture
def two_gpus():
    """Two CUDA devices for one test: the fake's (tests/_fakecuda.py) unless a real GPU pair is there."""
    from ember import backend
    if ember.cuda.is_available() and ember.cuda.device_count() >= 2:
        yield
        return
    if ember.cuda.is_available() and not backend.CUDA.fake:
        pytest.skip("needs two CUDA devices")
    import _fakecuda
    before = backend.CUDA
    _fakecuda.install()
    ember._creation._cuda_gens.clear()
    try:
        yield
    finally:
        ember._creation._cuda_gens.clear()
        backend.uninstall_cuda()
        if before is not backend.UNSET and before is not None:
            backend.install_cuda(before.cp, before.cpx)


MIXED = {  # op name in the error -> f(a, b) with a and b on two devices
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b.requires_grad_(),
    "where": lambda a, b: ember.where(a > 0, a, b),
    "cat": lambda a, b: ember.cat([a, b]),
    "stack": lambda a, b: ember.stack([a, b]),
    "matmul": lambda a, b: a @ b,
    "einsum": lambda a, b: ember.einsum("i,i->", a, b),
    "atan2": lambda a, b: ember.atan2(a, b),
    "add_": lambda a, b: a.add_(b),
    "gather": lambda a, b: a.gather(0, b.long()),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, 1.0),
}


@pytest.mark.parametrize("devices", [("cuda:0", "cpu"), ("cuda:0", "cuda:1")])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_op_mixing_devices_raises_naming_both(two_gpus, name, devices):
    a, b = (ember.ones(3, device=d) for d in devices)
    names = sorted(devices)
    with pytest.raises(RuntimeError, match=f"found at least two devices, {names[0]} and {names[1]}.*{name}"):
        MIXED[name](a, b)


def test_index_device_rules(two_gpus):
    x = ember.arange(6.0, device="cuda:0")
    assert x[ember.tensor([1, 5])].tolist() == [1.0, 5.0]  # CPU indices may index a CUDA tensor, as in PyTorch
    assert x[[0, 0]].tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device .*\(cuda:0\); "
                                           r"got indices on cuda:1"):
        x[ember.tensor([1], device="cuda:1")]
    with pytest.raises(RuntimeError, match=r"same device as the indexed tensor \(cpu\); got indices on cuda:0"):
        ember.arange(3.0)[ember.tensor([1], device="cuda:0")]
    x[ember.tensor([True, False] * 3)] = ember.tensor(-1.0)  # a CPU mask and a 0-d CPU value: uploaded
    assert x.tolist() == [-1.0, 1.0, -1.0, 3.0, -1.0, 5.0]


def test_expanded_cuda_tensor_is_read_only_in_place(two_gpus):
    """CuPy has no writeable flag: a broadcast view (zero strides) is still refused, as on the CPU."""
    e = ember.ones(3, device="cuda:0").expand(2, 3)
    with pytest.raises(RuntimeError, match="add_: unsupported operation: this tensor is a read-only view"):
        e.add_(1.0)
    w = ember.ones(2, 3, device="cuda:0", requires_grad=True)
    (w.sum() * 2).backward()  # the first gradient is a broadcast view of the output gradient
    (w.sum() * 3).backward()  # ...so accumulating into it must not write in place
    assert w.grad.tolist() == [[5.0] * 3] * 2


def _leaf1(*shape):
    return ember.rand(*shape, device="cuda:1", requires_grad=True)


SECOND_GPU = {  # ops whose forward or backward allocates (zeros, aranges, constants): all must land on cuda:1
    "getitem": lambda: _leaf1(4)[[0, 0, 2]],
    "where_scalar": lambda: ember.where(ember.rand(3, device="cuda:1") > 0.5, _leaf1(3), 0.0),
    "gather": lambda: _leaf1(3, 4).gather(0, ember.tensor([[0, 1, 2, 0]], device="cuda:1")),
    "index_select": lambda: _leaf1(3, 4).index_select(0, ember.tensor([0, 2], device="cuda:1")),
    "take": lambda: _leaf1(3, 4).take(ember.tensor([0, 2], device="cuda:1")),
    "masked_fill": lambda: _leaf1(3).masked_fill(ember.tensor([True, False, True], device="cuda:1"), 2.0),
    "scatter_value": lambda: _leaf1(3, 4).scatter(0, ember.tensor([[0, 1, 2, 0]], device="cuda:1"), 1.5),
    "in_place_on_view": lambda: (lambda z: (z[1:].mul_(2.0), z)[1])(_leaf1(3) * 1),
    "logsumexp": lambda: _leaf1(3, 4).logsumexp(1),
    "einsum_diagonal": lambda: ember.einsum("ii->i", _leaf1(3, 3)),
    "uint8_wraps": lambda: ember.tensor([1], dtype=ember.uint8, device="cuda:1") + 300,
    "int_pow_negative": lambda: ember.tensor([1, 2, -1], device="cuda:1") ** ember.tensor([-1, -2, -3], device="cuda:1"),
}


@pytest.mark.parametrize("name", sorted(SECOND_GPU))
def test_ops_on_the_second_gpu_stay_there(two_gpus, name):
    z = SECOND_GPU[name]()
    assert z.device == ember.device("cuda:1")
    if z.requires_grad:
        z.sum().backward()
