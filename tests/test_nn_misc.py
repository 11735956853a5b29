"""linear, bilinear, embedding, one_hot, cosine_similarity, normalize (ember/ops/nn_misc.py) and the layers
Identity, Linear, Bilinear, Embedding, Flatten, Unflatten: gradients, PyTorch parity, errors, init, repr."""
import math

import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

if torch is not None:
    import torch.nn.functional as TF

DTYPES = [np.float64, np.float32]


def _copy_weights(e_mod, t_mod) -> None:
    """Load the torch module's state_dict into the ember module (same keys, same shapes)."""
    sd = {k: v.detach().numpy().copy() for k, v in t_mod.state_dict().items()}
    assert list(e_mod.state_dict().keys()) == list(sd.keys())
    e_mod.load_state_dict(sd)


def _module_parity(e_mod, t_mod, *arrays, rtol=1e-6, atol=1e-8) -> None:
    """Outputs and gradients (inputs and parameters) of an ember and a torch module on the same inputs."""
    _copy_weights(e_mod, t_mod)
    e_in = [ember.from_numpy(a.copy()).requires_grad_(a.dtype.kind == "f") for a in arrays]
    t_in = [torch.from_numpy(a.copy()).requires_grad_(a.dtype.kind == "f") for a in arrays]
    eo, to = e_mod(*e_in), t_mod(*t_in)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    cot = np.random.default_rng(3).standard_normal(tuple(to.shape)).astype(arrays[0].dtype)
    eo.backward(ember.from_numpy(cot))
    to.backward(torch.from_numpy(cot))
    for e, t in zip(e_in, t_in):
        if t.requires_grad:
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    tp = dict(t_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        if tp[name].grad is None:
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


# ---------------------------------------------------------------------- linear
LINEAR_SHAPES = [((3, 4), (5, 4), (5,)), ((2, 3, 4), (5, 4), (5,)), ((4,), (5, 4), (5,)), ((3, 4), (5, 4), None),
                 ((2, 1, 3, 4), (2, 4), (2,)), ((3, 4), (5, 4), (3, 5)), ((3, 4), (5, 4), (1,)),
                 ((1, 4), (5, 4), (5,))]  # one row: the weight gradient is an outer product


def _lin_args(xs, ws, bs, dtype=np.float64):
    arrs = [rand(*xs, seed=1, dtype=dtype), rand(*ws, seed=2, dtype=dtype)]
    if bs is not None:
        arrs.append(rand(*bs, seed=3, dtype=dtype))
    return arrs


@pytest.mark.parametrize("xs,ws,bs", LINEAR_SHAPES, ids=str)
def test_linear_gradcheck(xs, ws, bs):
    check_grad(F.linear, *_lin_args(xs, ws, bs))


def test_linear_gradcheck_noncontiguous_and_vector_weight():
    x, w, b = _lin_args((2, 3, 4), (5, 4), (5,))
    check_grad(F.linear, noncontig(x), noncontig(w), b)
    check_grad(F.linear, x.transpose(1, 0, 2), w, b)
    check_grad(F.linear, x, rand(4, seed=4))  # 1-D weight: a matrix-vector product, as in PyTorch


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,bs", LINEAR_SHAPES, ids=str)
def test_linear_parity(xs, ws, bs, dtype):
    compare_torch(F.linear, TF.linear, *_lin_args(xs, ws, bs, dtype))


@requires_torch
def test_linear_double_backward_parity():
    x, w, b = _lin_args((3, 4), (5, 4), (5,))
    res = []
    for lib in (ember, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        f = F.linear if lib is ember else TF.linear
        y = f(xt, wt, bt).tanh().sum()
        gx, gw = lib.autograd.grad(y, [xt, wt], create_graph=True)
        ((gx * gx).sum() + (gw ** 3).sum()).backward()
        res.append([t.grad.numpy() for t in (xt, wt, bt)])
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)


def test_linear_errors():
    x = ember.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"3x4 and 3x5.*in_features \(3\)"):
        F.linear(x, ember.randn(5, 3))
    with pytest.raises(RuntimeError, match="same dtype.*double != float"):
        F.linear(x.double(), ember.randn(5, 4))
    with pytest.raises(RuntimeError, match="not implemented for int64"):
        F.linear(ember.ones(3, 4, dtype=ember.long), ember.ones(5, 4, dtype=ember.long))
    with pytest.raises(RuntimeError, match="bias of shape \\[4\\].*\\[3, 5\\]"):
        F.linear(x, ember.randn(5, 4), ember.randn(4))
    with pytest.raises(RuntimeError, match="at least 1D.*0D"):
        F.linear(ember.tensor(1.0), ember.randn(5, 4))
    with pytest.raises(TypeError, match="'weight'.*must be Tensor"):
        F.linear(x, np.ones((5, 4)))
    with pytest.raises(RuntimeError, match=r"bias of shape \[4\].*output of shape \[3\]"):
        F.linear(x, ember.randn(4), ember.randn(4))  # 1-D weight: the output is (3,)


# ---------------------------------------------------------------------- bilinear
def _bil_args(lead=(3,), dtype=np.float64, bias=True):
    arrs = [rand(*lead, 4, seed=1, dtype=dtype), rand(*lead, 2, seed=2, dtype=dtype),
            rand(5, 4, 2, seed=3, dtype=dtype)]
    return arrs + ([rand(5, seed=4, dtype=dtype)] if bias else [])


@pytest.mark.parametrize("lead,bias", [((3,), True), ((2, 3), True), ((3,), False), ((), True)], ids=str)
def test_bilinear_gradcheck(lead, bias):
    check_grad(F.bilinear, *_bil_args(lead, bias=bias))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead,bias", [((3,), True), ((2, 3), True), ((3,), False)], ids=str)
def test_bilinear_parity(lead, bias, dtype):
    compare_torch(F.bilinear, TF.bilinear, *_bil_args(lead, dtype, bias))


def test_bilinear_errors():
    a, c, w = ember.randn(3, 4), ember.randn(3, 5), ember.randn(2, 4, 4)
    with pytest.raises(RuntimeError, match="input2 size does not match weight size: got 5 but expected 4"):
        F.bilinear(a, c, w)
    with pytest.raises(RuntimeError, match=r"batch dimensions do not match: got \[3\] and \[2\]"):
        F.bilinear(a, ember.randn(2, 4), w)
    with pytest.raises(RuntimeError, match="weight must be 3-D"):
        F.bilinear(a, a, ember.randn(4, 4))
    with pytest.raises(RuntimeError, match="bias size"):
        F.bilinear(a, a, w, ember.randn(3))


@pytest.mark.parametrize("fn, arrays", [(F.linear, _lin_args((2, 3, 4), (5, 4), (5,), np.float32)),
                                        (F.bilinear, _bil_args((2, 3), np.float32))], ids=["linear", "bilinear"])
def test_float32_stays_float32(fn, arrays):
    inputs = [ember.from_numpy(a).requires_grad_() for a in arrays]
    y = fn(*inputs)
    y.sum().backward()
    assert [y.dtype] + [t.grad.dtype for t in inputs] == [ember.float32] * (1 + len(inputs))


# ---------------------------------------------------------------------- embedding
IDX = np.array([[1, 3, 3], [0, 1, 4]], np.int64)


def test_embedding_gradcheck():
    # padding_idx and scale_grad_by_freq deliberately alter the true gradient: checked against PyTorch below
    check_grad(lambda w: F.embedding(ember.tensor(IDX, device=DEVICE), w), rand(5, 2))


@pytest.mark.parametrize("padding_idx,scale", [(None, True), (3, False), (3, True)])
def test_embedding_modified_gradient_is_twice_differentiable(padding_idx, scale):
    # the weight gradient is a linear map S of the upstream gradient; its derivative (double backward) must be Sᵀ
    from ember.ops.nn_misc import EmbeddingBackward, EmbeddingGather
    g, h = rand(*IDX.shape, 2, seed=1), rand(5, 2, seed=2)
    sg = EmbeddingBackward().forward(g, IDX, 5, padding_idx, scale)
    sth = EmbeddingGather().forward(h, IDX, padding_idx, scale)
    np.testing.assert_allclose((sg * h).sum(), (g * sth).sum(), rtol=1e-12)
    idx = ember.tensor(IDX, device=DEVICE)._data  # the op takes the index array on the gradient's device
    check_grad(lambda gz: EmbeddingBackward.apply(gz, idx, 5, padding_idx, scale), g)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (3, False), (None, True), (-1, True)])
def test_embedding_parity(padding_idx, scale, dtype):
    compare_torch(lambda i, w: F.embedding(i, w, padding_idx, scale_grad_by_freq=scale),
                  lambda i, w: TF.embedding(i, w, padding_idx, scale_grad_by_freq=scale), IDX, rand(5, 3, dtype=dtype))
    compare_torch(lambda i, w: F.embedding(i, w), lambda i, w: TF.embedding(i, w), IDX.astype(np.int32),
                  rand(5, 3, dtype=dtype))


@requires_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_embedding_max_norm_renormalises_weight_in_place(norm_type):
    w = rand(6, 3, seed=7, low=-2, high=2)
    ew, tw = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    idx = np.array([[0, 2], [2, 5]])
    eo = F.embedding(ember.tensor(idx), ew, max_norm=1.0, norm_type=norm_type)
    to = TF.embedding(torch.tensor(idx), tw, max_norm=1.0, norm_type=norm_type)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-12)
    assert not np.allclose(ew.detach().numpy(), w)  # some rows were rescaled, the unused ones not
    np.testing.assert_array_equal(ew.detach().numpy()[[1, 3, 4]], w[[1, 3, 4]])
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    eo.sum().backward()
    to.sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy())


def test_embedding_padding_row_gets_no_gradient_and_double_backward():
    w = ember.tensor(rand(5, 2), requires_grad=True)
    out = F.embedding(ember.tensor(IDX), w, padding_idx=1)
    (g,) = ember.autograd.grad((out ** 2).sum(), [w], create_graph=True)
    assert np.all(g.detach().numpy()[1] == 0)
    g.sum().backward()  # second derivative: d/dw Σ 2·w[idx] (padding excluded) = 2·count per row
    counts = np.bincount(IDX.reshape(-1), minlength=5) * 2.0
    counts[1] = 0
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(counts[:, None], 2, 1))


def test_embedding_errors():
    w = ember.randn(5, 3)
    with pytest.raises(RuntimeError, match="Long, Int.*float32"):
        F.embedding(ember.tensor([1.0, 2.0]), w)
    with pytest.raises(IndexError, match="index out of range.*index 7.*5 rows"):
        F.embedding(ember.tensor([1, 7]), w)
    with pytest.raises(IndexError, match="index -1"):
        F.embedding(ember.tensor([1, -1]), w)
    with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
        F.embedding(ember.tensor([1]), ember.randn(5))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(ember.tensor([1]), w, padding_idx=5)


# ---------------------------------------------------------------------- one_hot
@requires_torch
@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot_parity(num_classes):
    e = F.one_hot(ember.tensor(IDX), num_classes)
    t = TF.one_hot(torch.tensor(IDX), num_classes)
    assert e.dtype == ember.int64
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert F.one_hot(ember.zeros(0, dtype=ember.long), 3).shape == (0, 3)


def test_one_hot_errors():
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(ember.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="non-negative.*-2"):
        F.one_hot(ember.tensor([1, -2]))
    with pytest.raises(RuntimeError, match="smaller than num_classes.*3.*num_classes=2"):
        F.one_hot(ember.tensor([1, 3]), 2)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(ember.zeros(0, dtype=ember.long))


# ---------------------------------------------------------------------- cosine_similarity, normalize
COS_CASES = [((4, 3), (4, 3), 1), ((4, 3), (3,), -1), ((2, 3, 4), (2, 1, 4), 1), ((5,), (5,), 0)]


@pytest.mark.parametrize("s1,s2,dim", COS_CASES, ids=str)
def test_cosine_similarity_gradcheck(s1, s2, dim):
    check_grad(lambda a, b: F.cosine_similarity(a, b, dim), rand(*s1, seed=1), rand(*s2, seed=2))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s1,s2,dim", COS_CASES, ids=str)
def test_cosine_similarity_parity(s1, s2, dim, dtype):
    compare_torch(lambda a, b: F.cosine_similarity(a, b, dim, eps=1e-6),
                  lambda a, b: TF.cosine_similarity(a, b, dim, eps=1e-6), rand(*s1, seed=1, dtype=dtype),
                  rand(*s2, seed=2, dtype=dtype))


@requires_torch
def test_cosine_similarity_tiny_vectors_as_pytorch():
    # norms below eps are floored in value only: PyTorch's gradient keeps the norm's own derivative
    a = np.full((2, 3), 1e-9)
    a[1] = 0.0
    compare_torch(F.cosine_similarity, TF.cosine_similarity, a, rand(2, 3, seed=4), rtol=1e-6)
    with pytest.raises(RuntimeError, match="floating point"):
        F.cosine_similarity(ember.tensor([1, 2]), ember.tensor([1, 2]), dim=0)


NORMALIZE_CASES = [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1), (2.0, (0, 1))]


@pytest.mark.parametrize("p,dim", NORMALIZE_CASES, ids=str)
def test_normalize_gradcheck(p, dim):
    check_grad(lambda a: F.normalize(a, p, dim), rand(3, 4, seed=5), gradgrad=p != math.inf)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p,dim", NORMALIZE_CASES, ids=str)
def test_normalize_parity(p, dim, dtype):
    compare_torch(lambda a: F.normalize(a, p, dim), lambda a: TF.normalize(a, p, dim), rand(3, 4, seed=5, dtype=dtype))
    z = np.zeros((2, 3), dtype)  # the eps floor: zero rows stay zero with a finite gradient
    compare_torch(lambda a: F.normalize(a, p, dim, eps=1e-3), lambda a: TF.normalize(a, p, dim, eps=1e-3), z)


# ---------------------------------------------------------------------- Identity, Linear, Bilinear
def test_identity():
    m = nn.Identity(54, unused="x")
    x = ember.randn(2, 3)
    assert m(x) is x and repr(m) == "Identity()" and list(m.state_dict()) == []


@requires_torch
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(6, 4), (2, 3, 4), (4,)], ids=str)
def test_linear_module_parity(shape, bias):
    _module_parity(nn.Linear(4, 3, bias=bias).double(), torch.nn.Linear(4, 3, bias=bias).double(), rand(*shape))


@requires_torch
def test_linear_module_repr_and_keys():
    for args in [(3, 4), (3, 4, False)]:
        e, t = nn.Linear(*args), torch.nn.Linear(*args)
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict())
    e = nn.Linear(3, 4, dtype=ember.float64)
    assert e.weight.dtype == e.bias.dtype == ember.float64 and e.weight.shape == (4, 3)


def _uniform_like(a: np.ndarray, bound: float) -> None:
    """a looks like U(-bound, bound): inside the bounds, reaching close to them, with the uniform's std."""
    assert np.abs(a).max() <= bound
    assert np.abs(a).max() > 0.95 * bound
    assert abs(a.std() - bound / math.sqrt(3)) < 0.05 * bound


def test_linear_default_init_as_pytorch():
    ember.manual_seed(0)
    m = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=√5) gives U(±1/√fan_in); bias the same
    _uniform_like(m.weight.detach().numpy(), bound)
    _uniform_like(m.bias.detach().numpy(), bound)
    assert m.weight.requires_grad and m.weight.is_leaf and m.weight.grad_fn is None
    ember.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(400, 300).weight.detach().numpy(), m.weight.detach().numpy())


def test_linear_module_bad_input_names_layer():
    m = nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=4, out_features=3, bias=True\).*\(\*, 4\).*\[2, 5\]"):
        m(ember.randn(2, 5))
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=4.*shape \[\]"):
        m(ember.tensor(1.0))


@requires_torch
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_module(bias):
    e, t = nn.Bilinear(4, 2, 3, bias=bias).double(), torch.nn.Bilinear(4, 2, 3, bias=bias).double()
    assert repr(e) == repr(t)
    _module_parity(e, t, rand(5, 4, seed=1), rand(5, 2, seed=2))
    ember.manual_seed(1)
    m = nn.Bilinear(100, 30, 200)
    _uniform_like(m.weight.detach().numpy(), 1 / math.sqrt(100))
    with pytest.raises(RuntimeError, match=r"Bilinear\(in1_features=100.*input2 of shape \(\*, 30\).*\[2, 4\]"):
        m(ember.randn(2, 100), ember.randn(2, 4))


# ---------------------------------------------------------------------- Embedding
@requires_torch
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"scale_grad_by_freq": True, "padding_idx": -1},
                                {"max_norm": 1.5, "norm_type": 1.0}], ids=str)
def test_embedding_module_parity(kw):
    e, t = nn.Embedding(6, 3, **kw).double(), torch.nn.Embedding(6, 3, **kw).double()
    assert repr(e) == repr(t)
    _copy_weights(e, t)
    idx = np.array([[0, 2, 2], [5, 1, 3]])
    eo, to = e(ember.tensor(idx)), t(torch.tensor(idx))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy())
    cot = rand(2, 3, 3, seed=9)
    eo.backward(ember.tensor(cot))
    to.backward(torch.tensor(cot))
    np.testing.assert_allclose(e.weight.grad.numpy(), t.weight.grad.numpy())
    np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy())


def test_embedding_module_init_and_from_pretrained():
    ember.manual_seed(0)
    m = nn.Embedding(1000, 64, padding_idx=3)
    w = m.weight.detach().numpy()
    assert np.all(w[3] == 0)
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1) < 0.02  # N(0, 1)
    assert m.weight.shape == (1000, 64) and m.padding_idx == 3
    assert nn.Embedding(10, 2, padding_idx=-2).padding_idx == 8
    pre = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    f = nn.Embedding.from_pretrained(pre)
    assert not f.weight.requires_grad and f.weight._data is pre._data
    assert nn.Embedding.from_pretrained(pre, freeze=False).weight.requires_grad
    np.testing.assert_array_equal(f(ember.tensor([1, 0])).numpy(), [[3, 4], [1, 2]])
    with pytest.raises(AssertionError, match="2-dimensional"):
        nn.Embedding.from_pretrained(ember.ones(3))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 2, padding_idx=-6)
    with pytest.raises(AssertionError, match="Shape of weight"):
        nn.Embedding(5, 2, _weight=ember.ones(4, 2))


# ---------------------------------------------------------------------- Flatten, Unflatten
@requires_torch
def test_flatten_unflatten_modules():
    x = rand(2, 3, 4, 5)
    for e, t in [(nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 2), torch.nn.Flatten(0, 2)),
                 (nn.Unflatten(1, (3, 1)), torch.nn.Unflatten(1, (3, 1))),
                 (nn.Unflatten(-1, [5, -1]), torch.nn.Unflatten(-1, [5, -1]))]:
        assert repr(e) == repr(t)
        _module_parity(e, t, x)
    with pytest.raises(RuntimeError, match=r"Unflatten\(dim=1, unflattened_size=\(2, 2\)\).*shape \[2, 3, 4, 5\]"):
        nn.Unflatten(1, (2, 2))(ember.tensor(x))
    with pytest.raises(IndexError, match=r"Flatten\(start_dim=1, end_dim=-1\).*shape \[3\]"):
        nn.Flatten()(ember.ones(3))
    with pytest.raises(TypeError, match="tuple of ints"):
        nn.Unflatten(1, 6)
    with pytest.raises(TypeError, match="element of type float at pos 1"):
        nn.Unflatten(1, (2, 3.0))
