"""nn.EmbeddingBag and F.embedding_bag (ember/ops/nn_misc.py, ember/nn/modules/sparse.py).

PyTorch parity of the bags' sums, means and maxima (2-D input, 1-D input with offsets, include_last_offset,
padding_idx, per_sample_weights, empty bags), of the gradients to the weight and to per_sample_weights for a
random cotangent (dense, frequency-scaled and sparse), finite-difference checks, max_norm, the module's
construction, repr and from_pretrained, and the errors.
"""
import numpy as np
import pytest
from helpers import check_grad, compare_torch, rand, raises_like_torch, requires_torch, torch

import ember

F = ember.nn.functional

IDX1 = np.array([1, 2, 2, 3, 1, 0, 4, 4, 5])
OFF = np.array([0, 2, 2, 5, 9])  # bags [1, 2], [], [2, 3, 1], [0, 4, 4, 5], [] (the last two: one ends the input)
IDX2 = np.array([[1, 2, 4], [3, 3, 0], [5, 1, 1]])

CASES = {  # name -> (fn(F, W, idx, off, psw), uses offsets, uses per_sample_weights)
    "2d": (lambda f, w, i, o, p, mode: f.embedding_bag(i, w, mode=mode), False, False),
    "2d_pad": (lambda f, w, i, o, p, mode: f.embedding_bag(i, w, mode=mode, padding_idx=3), False, False),
    "1d": (lambda f, w, i, o, p, mode: f.embedding_bag(i, w, o, mode=mode), True, False),
    "1d_last": (lambda f, w, i, o, p, mode: f.embedding_bag(i, w, o, mode=mode, include_last_offset=True), True, False),
    "1d_pad_neg": (lambda f, w, i, o, p, mode: f.embedding_bag(i, w, o, mode=mode, padding_idx=-4), True, False),
}
PSW = {  # mode 'sum' with per_sample_weights
    "2d_psw": lambda f, w, i, o, p: f.embedding_bag(i, w, mode="sum", per_sample_weights=p),
    "1d_psw_pad": lambda f, w, i, o, p: f.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, padding_idx=2),
}


def _weight(dtype, seed=0):
    return rand(6, 4, seed=seed, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_parity(name, mode, dtype):
    fn, offsets, _ = CASES[name]
    idx = IDX1 if offsets else IDX2
    args = (_weight(dtype), idx, OFF) if offsets else (_weight(dtype), idx)
    compare_torch(lambda w, i, o=None: fn(F, w, i, o, None, mode),
                  lambda w, i, o=None: fn(torch.nn.functional, w, i, o, None, mode), *args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(PSW))
def test_per_sample_weights_parity(name, dtype):
    fn = PSW[name]
    two_d = name.startswith("2d")
    idx = IDX2 if two_d else IDX1
    p = rand(*idx.shape, seed=5, dtype=dtype)
    compare_torch(lambda w, i, p, o=None: fn(F, w, i, o, p), lambda w, i, p, o=None: fn(torch.nn.functional, w, i, o, p),
                  *((_weight(dtype), idx, p) if two_d else (_weight(dtype), idx, p, OFF)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["sum", "mean", "psw"])
def test_scale_grad_by_freq(mode, dtype):
    """Each row's gradient is divided by the row's count in the input (F.embedding's rule). PyTorch 2.13's CPU
    embedding_bag divides some rows by another row's count (pytorch/pytorch#190063), so the reference is
    PyTorch's F.embedding(scale_grad_by_freq=True) followed by the bag sums."""
    lengths = np.diff(np.append(OFF, IDX1.size))
    bag = np.repeat(np.arange(OFF.size), lengths)

    def ref(w, i, p, o):
        rows = torch.nn.functional.embedding(i, w, scale_grad_by_freq=True)
        if mode == "psw":
            rows = rows * p[:, None]
        out = torch.zeros(OFF.size, w.shape[1], dtype=w.dtype).index_add(0, torch.tensor(bag), rows)
        return out / torch.tensor(np.maximum(lengths, 1), dtype=w.dtype)[:, None] if mode == "mean" else out

    def ours(w, i, p, o):
        return F.embedding_bag(i, w, o, mode="mean" if mode == "mean" else "sum", scale_grad_by_freq=True,
                               per_sample_weights=p if mode == "psw" else None)
    compare_torch(ours, ref, _weight(dtype), IDX1, rand(IDX1.size, seed=4, dtype=dtype), OFF)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_gradcheck(mode):
    w = _weight(np.float64)
    i1, o1, i2 = ember.tensor(IDX1), ember.tensor(OFF), ember.tensor(IDX2)
    check_grad(lambda w: F.embedding_bag(i1, w, o1, mode=mode, padding_idx=2), w)
    check_grad(lambda w: F.embedding_bag(i2, w, mode=mode), w)
    if mode == "sum":
        check_grad(lambda w, p: F.embedding_bag(i1, w, o1, mode="sum", per_sample_weights=p, padding_idx=2),
                   w, rand(IDX1.size, seed=3))


@requires_torch
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_sparse_gradient_parity(mode):
    grads = []
    for lib in (ember, torch):
        w = lib.tensor(_weight(np.float32), requires_grad=True)
        out = lib.nn.functional.embedding_bag(lib.tensor(IDX1), w, lib.tensor(OFF), mode=mode, sparse=True,
                                              padding_idx=3)
        (out * lib.tensor(rand(5, 4, seed=2).astype(np.float32))).sum().backward()
        grads.append(w.grad)
    e, t = grads
    assert e.is_sparse and t.is_sparse and e.is_coalesced() == t.is_coalesced()
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    np.testing.assert_allclose(e._values().numpy(), t._values().numpy(), rtol=1e-6)
    w = ember.tensor(_weight(np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse gradients"):
        F.embedding_bag(ember.tensor(IDX2), w, sparse=True, scale_grad_by_freq=True).sum().backward()


@requires_torch
def test_empty_inputs_and_bags():
    for f in (lambda m: m.nn.functional.embedding_bag(m.tensor([], dtype=m.int64), m.ones(6, 2), m.tensor([0, 0])),
              lambda m: m.nn.functional.embedding_bag(m.tensor([], dtype=m.int64), m.ones(6, 2),
                                                      m.tensor([], dtype=m.int64)),
              lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.ones(6, 2), m.tensor([0]),
                                                      include_last_offset=True),
              lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2, 3], dtype=m.int32), m.ones(6, 2),
                                                      m.tensor([0, 0, 3, 3]), mode="max")):
        e, t = f(ember), f(torch)
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    # a (bags, 0) input: PyTorch fails ("step must be nonzero"); ember gives empty bags
    np.testing.assert_array_equal(F.embedding_bag(ember.zeros(3, 0, dtype=ember.int64), ember.ones(6, 2)).numpy(), 0)
    for idx, off in ((ember.zeros(3, 0, dtype=ember.int64), None), (ember.tensor([1, 1]), ember.tensor([0, 2]))):
        w = ember.ones(6, 2, requires_grad=True)
        F.embedding_bag(idx, w, off, mode="max", padding_idx=1).sum().backward()  # every bag empty
        assert np.all(w.grad.numpy() == 0)


@requires_torch
@pytest.mark.parametrize("mode", ["sum", "max"])
def test_max_norm_renormalises_in_place(mode):
    res = []
    for lib in (ember, torch):
        w = lib.tensor(_weight(np.float32) * 3)
        out = lib.nn.functional.embedding_bag(lib.tensor(IDX2), w, mode=mode, max_norm=1.5, norm_type=1.0)
        res.append((out.numpy(), w.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@requires_torch
def test_module_parity_repr_and_state():
    for kw in ({}, dict(mode="max", padding_idx=1, max_norm=1.0, include_last_offset=True, scale_grad_by_freq=False),
               dict(mode="sum", norm_type=1.0, scale_grad_by_freq=True, sparse=True)):
        e, t = ember.nn.EmbeddingBag(6, 4, **kw), torch.nn.EmbeddingBag(6, 4, **kw)
        assert repr(e) == repr(t) and list(e.state_dict()) == list(t.state_dict())
        with torch.no_grad():
            t.weight.copy_(torch.tensor(e.weight.detach().numpy()))
        off = OFF if kw.get("include_last_offset") else OFF[:-1]
        np.testing.assert_allclose(e(ember.tensor(IDX1), ember.tensor(off)).detach().numpy(),
                                   t(torch.tensor(IDX1), torch.tensor(off)).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert np.all(ember.nn.EmbeddingBag(6, 4, padding_idx=-2).weight.detach().numpy()[4] == 0)
    emb = ember.nn.EmbeddingBag(6, 4, mode="sum")
    p = ember.tensor(rand(3, 3, seed=1).astype(np.float32), requires_grad=True)
    emb(ember.tensor(IDX2), per_sample_weights=p).sum().backward()
    assert emb.weight.grad is not None and p.grad is not None


def test_from_pretrained():
    w = ember.tensor(_weight(np.float32))
    bag = ember.nn.EmbeddingBag.from_pretrained(w, mode="sum")
    assert bag.weight.requires_grad is False and bag.mode == "sum"
    np.testing.assert_allclose(bag(ember.tensor(IDX2)).numpy(), _weight(np.float32)[IDX2].sum(1), rtol=1e-6)
    assert ember.nn.EmbeddingBag.from_pretrained(w, freeze=False).weight.requires_grad
    with pytest.raises(AssertionError, match="2-dimensional"):
        ember.nn.EmbeddingBag.from_pretrained(ember.ones(3))


def test_sparse_module_trains_with_sgd_and_sparse_adam():
    for opt_cls in (ember.optim.SGD, ember.optim.SparseAdam):
        bag = ember.nn.EmbeddingBag(6, 4, mode="mean", sparse=True)
        before = bag.weight.detach().numpy().copy()
        opt = opt_cls(bag.parameters(), lr=0.1)
        bag(ember.tensor(IDX1), ember.tensor(OFF[:-1])).sum().backward()
        assert bag.weight.grad.is_sparse
        opt.step()
        changed = np.flatnonzero(np.any(bag.weight.detach().numpy() != before, axis=1))
        np.testing.assert_array_equal(changed, np.unique(IDX1))


W6 = lambda m: m.ones(6, 2)  # noqa: E731
ERRORS = [
    (lambda m: m.nn.functional.embedding_bag(m.tensor([[1, 2]]), W6(m), m.tensor([0])), ValueError,
     "if input is 2D, then offsets has to be None"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m)), ValueError, "offsets has to be a 1D Tensor"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([[0]])), ValueError,
     "offsets has to be a 1D Tensor"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([[[1]]]), W6(m)), ValueError, "1D or 2D Tensor.*dimension 3"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.ones(6), m.tensor([0])), ValueError,
     "weight has to be a 2D Tensor"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="min"), ValueError,
     "mode has to be one of sum, mean or max"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2, 3]), W6(m), m.tensor([1, 2])), RuntimeError,
     r"offsets\[0\] has to be 0"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2, 3]), W6(m), m.tensor([0, 5])), RuntimeError,
     r"offsets\[-1\] can not be greater than input's length 3"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2, 3]), W6(m), m.tensor([0, 2, 1])), RuntimeError,
     "non-decreasing"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2, 7]), W6(m), m.tensor([0, 1])), RuntimeError,
     r"Index 2 of input takes value 7 which is not in the valid range \[0, 6\)"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, -1]), W6(m), m.tensor([0, 1])), RuntimeError,
     "takes value -1"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1., 2.]), W6(m), m.tensor([0])), RuntimeError,
     "Long, Int"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0.])), RuntimeError, "Long, Int"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), padding_idx=6), RuntimeError,
     "padding_idx must be within the number of embeddings, -6 through 5, but got 6"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="mean",
                                             per_sample_weights=m.ones(2)), NotImplementedError,
     "per_sample_weights is only supported for mode='sum'"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="sum",
                                             per_sample_weights=m.ones(3)), ValueError, "same shape as the input"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="sum",
                                             per_sample_weights=m.ones(2, dtype=m.float64)), RuntimeError,
     "per_sample_weights|float64|Double"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="max",
                                             scale_grad_by_freq=True), ValueError, "max mode does not support scaling"),
    (lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), W6(m), m.tensor([0]), mode="max", sparse=True),
     ValueError, "max mode does not support sparse weights"),
    (lambda m: m.nn.EmbeddingBag(5, 2, padding_idx=5), AssertionError, "padding_idx must be within num_embeddings"),
    (lambda m: m.nn.EmbeddingBag(5, 2, _weight=m.ones(4, 2)), AssertionError, "Shape of weight does not match"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_pytorch(case):
    fn, exc, match = ERRORS[case]
    if torch is not None:
        raises_like_torch(fn, torch, exc)
    raises_like_torch(fn, ember, exc, match)
