"""Lazy modules (ember/nn/modules/lazy.py): UninitializedParameter/UninitializedBuffer, materialisation on the first
call, the class they become, their initialisation (the eager layer's, in the same order), optimizers built before the
first call, state_dict and load_state_dict before it, and PyTorch's printed forms and errors."""
import copy
import pickle

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember
import ember.nn as nn


# ---------------------------------------------------------------------- the placeholders
def test_uninitialized_parameter_is_a_parameter_that_refuses_to_compute():
    p = nn.UninitializedParameter(dtype=ember.float64)
    assert isinstance(p, nn.Parameter) and isinstance(p, ember.Tensor)
    assert repr(p) == str(p) == f"{p}" == "<UninitializedParameter>"
    assert p.requires_grad and p.is_leaf and p.grad is None and p.dtype == ember.float64 and p.size() == (0,)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        p.shape
    for use in (lambda: p + 1, lambda: 2 * p, lambda: -p, lambda: p[0], lambda: p.sum(), lambda: p.numel(),
                lambda: p.dim(), lambda: p.exp(), lambda: p.tolist(), lambda: np.asarray(p)):
        with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter.*call `forward`"):
            use()
    assert not nn.UninitializedParameter(requires_grad=False).requires_grad


def test_materialize_in_place():
    p = nn.UninitializedParameter()
    ref = p
    p.materialize((2, 3))
    assert ref is p and type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype == ember.float32 and p.requires_grad
    q = nn.UninitializedParameter()
    q.materialize(4, dtype=ember.float64)
    assert q.shape == (4,) and q.dtype == ember.float64
    q2 = nn.UninitializedParameter()
    q2.materialize([2, 1])
    assert q2.shape == (2, 1)
    with pytest.raises(AttributeError):  # a Parameter has no materialize, as in PyTorch
        q.materialize(3)
    b = nn.UninitializedBuffer()
    assert not b.requires_grad and not isinstance(b, nn.Parameter) and repr(b) == "<UninitializedBuffer>"
    b.materialize((3,))
    assert type(b) is ember.Tensor and b.shape == (3,)


def test_conversions_keep_placeholders_uninitialized():
    p = nn.UninitializedParameter()
    for q in (p.double(), p.to(ember.float64), p.to("cpu", ember.float64)):
        assert type(q) is nn.UninitializedParameter and q.dtype == ember.float64 and q.requires_grad
    assert p.float() is p  # nothing to change
    assert type(nn.UninitializedBuffer().long()) is nn.UninitializedBuffer


def test_placeholders_copy_and_pickle():
    p = nn.UninitializedParameter(requires_grad=False, dtype=ember.float64)
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(q) is nn.UninitializedParameter and q is not p
        assert q.dtype == ember.float64 and not q.requires_grad


# ---------------------------------------------------------------------- LazyLinear
def test_lazy_linear_becomes_linear_with_eager_init_order():
    x = ember.randn(5, 4)
    ember.manual_seed(0)
    eager = nn.Linear(4, 3)
    ember.manual_seed(0)
    lazy = nn.LazyLinear(3)
    assert repr(lazy) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert len(list(lazy.parameters())) == 2 and lazy.has_uninitialized_params()
    y = lazy(x)
    assert type(lazy) is nn.Linear and repr(lazy) == "Linear(in_features=4, out_features=3, bias=True)"
    assert not hasattr(lazy, "_initialize_hook") and not lazy._forward_pre_hooks
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), eager.weight.detach().numpy())
    np.testing.assert_array_equal(lazy.bias.detach().numpy(), eager.bias.detach().numpy())
    np.testing.assert_allclose(y.detach().numpy(), eager(x).detach().numpy())
    assert type(lazy.weight) is nn.Parameter and lazy.weight.requires_grad


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_optimizer_built_before_the_first_call_trains_the_materialised_parameters(opt):
    ember.manual_seed(1)
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))
    optim = getattr(ember.optim, opt)(model.parameters(), lr=0.05)
    held = optim.param_groups[0]["params"]
    x, t = ember.randn(32, 3), ember.randn(32, 1)
    losses = []
    for _ in range(20):
        optim.zero_grad()
        loss = ((model(x) - t) ** 2).mean()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert [p is q for p, q in zip(held, model.parameters())] == [True] * 4
    assert model[0].weight.shape == (8, 3) and losses[-1] < losses[0] * 0.9


def test_state_dict_before_materialisation_lists_placeholders():
    m = nn.Sequential(nn.LazyLinear(3), nn.LazyLinear(2, bias=False))
    sd = m.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.weight"]
    assert all(type(v) is nn.UninitializedParameter and v is p for v, p in zip(sd.values(), m.parameters()))


def test_load_state_dict_materialises_from_the_checkpoint():
    full = nn.Sequential(nn.Linear(7, 3), nn.ReLU(), nn.Linear(3, 2))
    lazy = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(2))
    lazy.load_state_dict(full.state_dict())
    assert type(lazy[0]) is nn.LazyLinear and type(lazy[0].weight) is nn.Parameter and lazy[0].in_features == 0
    for a, b in zip(lazy.parameters(), full.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    x = ember.randn(4, 7)
    np.testing.assert_allclose(lazy(x).detach().numpy(), full(x).detach().numpy())
    assert type(lazy[0]) is nn.Linear and lazy[0].in_features == 7 and lazy[2].in_features == 3  # as PyTorch
    # a checkpoint whose shapes disagree with the first input
    m = nn.LazyLinear(3)
    m.load_state_dict({"weight": ember.ones(3, 4), "bias": ember.ones(3)})
    with pytest.raises(RuntimeError, match="in_features inferred from the input \\(5\\) is not .* \\(4\\)"):
        m(ember.ones(2, 5))
    # a partial checkpoint: what it lacks stays uninitialised, and the first call refuses to re-initialise the rest
    m = nn.LazyLinear(3)
    missing, unexpected = m.load_state_dict({"weight": ember.ones(3, 4)}, strict=False)
    assert missing == ["bias"] and unexpected == [] and type(m.bias) is nn.UninitializedParameter
    with pytest.raises(RuntimeError, match="LazyLinear: bias uninitialized while weight were loaded"):
        m(ember.ones(2, 4))


def test_initialize_parameters_and_hooks():
    m = nn.LazyLinear(2)
    m.initialize_parameters(ember.ones(3, 5))  # PyTorch's public hook API: materialise without a forward
    assert type(m) is nn.LazyLinear and m.weight.shape == (2, 5) and not m.has_uninitialized_params()
    assert type(m) is nn.LazyLinear
    m(ember.ones(3, 5))
    assert type(m) is nn.Linear
    seen = []
    m = nn.LazyLinear(2)
    m.register_forward_pre_hook(lambda mod, args: seen.append((type(mod).__name__, tuple(mod.weight.shape))))
    m(ember.ones(1, 6))
    assert seen == [("Linear", (2, 6))]  # a user's pre-hook runs after the materialisation
    with pytest.raises(NotImplementedError, match="initialize_parameters is not implemented for Lazy"):
        type("Lazy", (nn.LazyModuleMixin, nn.Module), {})().initialize_parameters()


def test_lazy_linear_dtype_device_and_errors():
    m = nn.LazyLinear(3, dtype=ember.float64)
    m(ember.ones(2, 4, dtype=ember.float64))
    assert m.weight.dtype == ember.float64
    m = nn.LazyLinear(3).double()  # a conversion before the first call applies to the materialised parameters
    assert type(m.weight) is nn.UninitializedParameter and m.weight.dtype == ember.float64
    m(ember.ones(2, 4, dtype=ember.float64))
    assert m.weight.dtype == m.bias.dtype == ember.float64
    m = nn.LazyLinear(3, bias=False)
    assert m.bias is None and repr(m) == "LazyLinear(in_features=0, out_features=3, bias=False)"
    with pytest.raises(RuntimeError, match="LazyLinear.*0-d"):
        nn.LazyLinear(3)(ember.tensor(1.0))
    with pytest.raises(TypeError, match="LazyLinear.*Tensor"):
        nn.LazyLinear(3)([1.0, 2.0])


def test_copies_of_lazy_modules_stay_lazy_and_independent():
    m = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(2))
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert type(c[0]) is nn.LazyLinear and type(c[0].weight) is nn.UninitializedParameter
        assert c(ember.ones(4, 5)).shape == (4, 2) and type(c[2]) is nn.Linear
    assert type(m[0]) is nn.LazyLinear and m(ember.ones(1, 6)).shape == (1, 2)


# ---------------------------------------------------------------------- convolutions
CONVS = [  # (lazy, eager, input shape)
    (lambda: nn.LazyConv1d(4, 3, padding=1), lambda: nn.Conv1d(3, 4, 3, padding=1), (2, 3, 7)),
    (lambda: nn.LazyConv2d(6, (3, 2), stride=2, groups=3, bias=False),
     lambda: nn.Conv2d(3, 6, (3, 2), stride=2, groups=3, bias=False), (2, 3, 6, 5)),
    (lambda: nn.LazyConv2d(4, 3), lambda: nn.Conv2d(2, 4, 3), (2, 5, 5)),  # unbatched (C, H, W)
    (lambda: nn.LazyConvTranspose1d(4, 3, groups=2), lambda: nn.ConvTranspose1d(6, 4, 3, groups=2), (1, 6, 5)),
    (lambda: nn.LazyConvTranspose2d(2, 3, stride=2, output_padding=1),
     lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1), (2, 3, 4, 4)),
]


@pytest.mark.parametrize("i", range(len(CONVS)))
def test_lazy_convolutions_become_eager_ones(i):
    lazy_f, eager_f, shape = CONVS[i]
    x = ember.randn(*shape)
    ember.manual_seed(2)
    eager = eager_f()
    ember.manual_seed(2)
    lazy = lazy_f()
    assert repr(lazy).startswith(f"{type(lazy).__name__}(0, ")
    y = lazy(x)
    assert type(lazy) is type(eager) and repr(lazy) == repr(eager)
    for a, b in zip(lazy.parameters(), eager.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    np.testing.assert_allclose(y.detach().numpy(), eager(x).detach().numpy(), rtol=1e-6)


def test_lazy_convolution_errors():
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to LazyConv2d.*\\[5, 5\\]"):
        nn.LazyConv2d(4, 3)(ember.randn(5, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(ember.randn(1, 3, 5, 5))
    m = nn.LazyConv1d(4, 3)
    m.load_state_dict(nn.Conv1d(2, 4, 3).state_dict())
    assert m(ember.randn(1, 2, 5)).shape == (1, 4, 3) and m.in_channels == 2


# ---------------------------------------------------------------------- normalisation
def test_lazy_batch_norm_becomes_batch_norm():
    m = nn.LazyBatchNorm2d(momentum=0.3)
    assert repr(m) == ("LazyBatchNorm2d(0, eps=1e-05, momentum=0.3, affine=True, bias=True, "
                       "track_running_stats=True)")
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert type(sd["running_mean"]) is nn.UninitializedBuffer and sd["num_batches_tracked"].item() == 0
    x = ember.randn(4, 3, 2, 2)
    eager = nn.BatchNorm2d(3, momentum=0.3)
    np.testing.assert_allclose(m(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert type(m) is nn.BatchNorm2d and repr(m) == repr(eager)
    for k, v in eager.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-6, err_msg=k)
    assert type(m.running_mean) is ember.Tensor
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert list(m.state_dict()) == [] and not m.has_uninitialized_params()
    m(ember.randn(5, 4))
    assert type(m) is nn.BatchNorm1d and m.num_features == 4
    with pytest.raises(ValueError, match="LazyBatchNorm1d: expected 2D or 3D input \\(got 1D"):
        nn.LazyBatchNorm1d()(ember.randn(3))


@pytest.mark.parametrize("cls,shape,feature", [("LazyInstanceNorm1d", (2, 3, 5), 1), ("LazyInstanceNorm1d", (3, 5), 0),
                                               ("LazyInstanceNorm2d", (2, 3, 4, 2), 1),
                                               ("LazyInstanceNorm3d", (3, 2, 2, 2), 0)])
def test_lazy_instance_norms(cls, shape, feature):
    m = getattr(nn, cls)()  # PyTorch's lazy instance norms default to affine=True, track_running_stats=True
    assert m.affine and m.track_running_stats
    x = ember.randn(*shape)
    m(x)
    eager_cls = getattr(nn, cls[4:])
    assert type(m) is eager_cls and m.num_features == shape[feature] and m.weight.shape == (shape[feature],)
    eager = eager_cls(shape[feature], affine=True, track_running_stats=True)
    np.testing.assert_allclose(m(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    plain = getattr(nn, cls)(affine=False, track_running_stats=False)
    plain(x)  # nothing to materialise: num_features is still read from the input (no mismatch warning)
    assert plain.num_features == shape[feature]


# ---------------------------------------------------------------------- PyTorch's printed forms and checkpoints
@requires_torch
def test_reprs_and_state_dict_keys_as_pytorch():
    pairs = [
        (lambda m: m.LazyLinear(3), (2, 4)), (lambda m: m.LazyConv1d(4, 3, stride=2), (1, 2, 9)),
        (lambda m: m.LazyConv2d(8, 3, padding=1, bias=False), (1, 2, 5, 5)),
        (lambda m: m.LazyConvTranspose1d(4, 2), (1, 3, 5)), (lambda m: m.LazyConvTranspose2d(4, 2, groups=2), (1, 2, 3, 3)),
        (lambda m: m.LazyBatchNorm1d(eps=1e-3), (4, 3)), (lambda m: m.LazyBatchNorm2d(affine=False), (2, 3, 2, 2)),
        (lambda m: m.LazyInstanceNorm1d(), (2, 3, 4)), (lambda m: m.LazyInstanceNorm2d(track_running_stats=False), (2, 3, 2, 2)),
        (lambda m: m.LazyInstanceNorm3d(momentum=0.2), (2, 3, 2, 2, 2)),
    ]
    for make, shape in pairs:
        e, t = make(nn), make(torch.nn)
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict())
        assert [type(v).__name__ for v in e.state_dict().values()] == [type(v).__name__ for v in t.state_dict().values()]
        assert len(list(e.parameters())) == len(list(t.parameters()))
        e(ember.randn(*shape)), t(torch.randn(*shape))
        assert repr(e) == repr(t) and type(e).__name__ == type(t).__name__
        assert {k: tuple(v.shape) for k, v in e.state_dict().items()} == {k: tuple(v.shape) for k, v in
                                                                          t.state_dict().items()}


@requires_torch
def test_pytorch_checkpoint_loads_into_lazy_modules():
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.Linear(16, 2))
    t.eval()
    e = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.Flatten(), nn.LazyLinear(2))
    e.load_state_dict(t.state_dict())
    e.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert [type(m).__name__ for m in e] == ["Conv2d", "BatchNorm2d", "Flatten", "Linear"]
