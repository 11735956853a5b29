"""ember.nn.DataParallel: the transparent CPU wrapper (against torch.nn.DataParallel without GPUs), and the
multi-device path (scatter, replicate, parallel_apply, gather; gradients summed into the module) on two
CUDA devices: the real ones, or the two of tests/_fakecuda.py."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn.parallel import data_parallel, gather, parallel_apply, replicate, scatter, scatter_kwargs
from helpers import rand, requires_torch, torch


def _mlp(lib=ember, seed=0):
    lib.manual_seed(seed)
    return lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2)).double()


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy()


# ---------------------------------------------------------------------- without CUDA: a transparent wrapper
@pytest.fixture
def no_cuda():
    if ember.cuda.is_available():
        pytest.skip("this machine has CUDA: DataParallel is not the plain wrapper here")


@requires_torch
def test_cpu_wrapper_matches_torch(no_cuda):
    tm, em = _mlp(torch), _mlp(ember)
    em.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    tdp, edp = torch.nn.DataParallel(tm), nn.DataParallel(em)
    assert edp.module is em and edp.device_ids == tdp.device_ids == []
    assert list(edp.state_dict()) == list(tdp.state_dict()) == ["module.0.weight", "module.0.bias",
                                                                 "module.2.weight", "module.2.bias"]
    assert repr(edp) == repr(tdp).replace("torch", "ember")
    x = rand(4, 3)
    eo, to = edp(ember.tensor(x)), tdp(torch.tensor(x))
    np.testing.assert_allclose(_np(eo), to.detach().numpy(), rtol=1e-12)
    eo.sum().backward(), to.sum().backward()
    for (n, p), (_, q) in zip(edp.named_parameters(), tdp.named_parameters()):
        np.testing.assert_allclose(_np(p.grad), q.grad.numpy(), rtol=1e-12, err_msg=n)
    plain = _mlp(ember, seed=3)
    plain.load_state_dict({k[len("module."):]: v for k, v in edp.state_dict().items()})
    np.testing.assert_allclose(_np(plain(ember.tensor(x))), _np(eo))


def test_cpu_wrapper_passes_arguments(no_cuda):
    class Two(nn.Module):
        def forward(self, x, *, scale=1.0):
            return {"y": x * scale, "n": None}

    out = nn.DataParallel(Two())(ember.ones(2), scale=3.0)
    assert out["n"] is None and _np(out["y"]).tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="expects an ember.nn.Module"):
        nn.DataParallel(lambda x: x)


# ---------------------------------------------------------------------- two CUDA devices
@pytest.fixture
def two_gpus(cuda):
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    return cuda


def test_outputs_and_summed_gradients(two_gpus):
    ref = _mlp()
    m = copy.deepcopy(ref).cuda()
    dp = nn.DataParallel(m)
    assert dp.device_ids == [0, 1] and dp.output_device == 0 and str(dp.src_device_obj) == "cuda:0"
    x, c = rand(7, 3), rand(7, 2, seed=1)  # chunks of 4 and 3
    out = dp(ember.tensor(x).cuda())
    assert str(out.device) == "cuda:0" and out.shape == (7, 2)
    (out * ember.tensor(c).cuda()).sum().backward()
    ro = ref(ember.tensor(x))
    (ro * ember.tensor(c)).sum().backward()
    np.testing.assert_allclose(_np(out), _np(ro), rtol=1e-12)
    for (n, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        assert str(p.grad.device) == "cuda:0"
        np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=1e-12, atol=1e-14, err_msg=n)


def test_training_matches_one_device(two_gpus):
    ref = _mlp()
    dp = nn.DataParallel(copy.deepcopy(ref).cuda())
    opts = [ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9), ember.optim.SGD(dp.parameters(), lr=0.1,
                                                                                      momentum=0.9)]
    for step in range(3):
        x, y = rand(6, 3, seed=step), rand(6, 2, seed=10 + step)
        for model, opt, dev in ((ref, opts[0], "cpu"), (dp, opts[1], "cuda")):
            opt.zero_grad()
            ((model(ember.tensor(x).to(dev)) - ember.tensor(y).to(dev)) ** 2).mean().backward()
            opt.step()
    for (n, p), (_, q) in zip(dp.module.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(_np(p), _np(q), rtol=1e-12, atol=1e-14, err_msg=n)


def test_batchnorm_statistics_come_from_the_first_device(two_gpus):
    ember.manual_seed(0)
    bn = nn.BatchNorm1d(3).double()
    ref = copy.deepcopy(bn)
    dp = nn.DataParallel(bn.cuda())
    x = rand(6, 3)
    out = dp(ember.tensor(x).cuda())
    expect = ember.cat([ref(ember.tensor(x[:3])), copy.deepcopy(ref)(ember.tensor(x[3:]))])  # per-device statistics
    np.testing.assert_allclose(_np(out), _np(expect), rtol=1e-12)
    ref2 = copy.deepcopy(bn).cpu()
    with ember.no_grad():
        ref2.running_mean.zero_(), ref2.running_var.fill_(1.0), ref2.num_batches_tracked.zero_()
    ref2(ember.tensor(x[:3]))
    np.testing.assert_allclose(_np(bn.running_mean), _np(ref2.running_mean), rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1


def test_arguments_structures_and_small_batches(two_gpus):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2).double()

        def forward(self, x, extra, *, scale=1.0, mask=None):
            y = self.lin(x) * scale
            if mask is not None:
                y = y * mask
            return y, {"sum": y.sum(1), "tag": None}, [extra["a"] + 0]

    m = Net()
    ref = copy.deepcopy(m)
    dp = nn.DataParallel(m.cuda(), output_device=1)
    x, mask = rand(5, 3), rand(5, 2, seed=2)
    y, d, (a,) = dp(ember.tensor(x).cuda(), {"a": ember.tensor(rand(5, 4)).cuda()}, scale=2.0,
                    mask=ember.tensor(mask).cuda())
    assert str(y.device) == "cuda:1" and d["tag"] is None and a.shape == (5, 4)
    ry = ref(ember.tensor(x), {"a": ember.tensor(rand(5, 4))}, scale=2.0, mask=ember.tensor(mask))[0]
    np.testing.assert_allclose(_np(y), _np(ry), rtol=1e-12)
    np.testing.assert_allclose(_np(d["sum"]), _np(ry.sum(1)), rtol=1e-12)
    one = dp(ember.tensor(x[:1]).cuda(), {"a": ember.ones(1, 4).cuda()})  # one sample: one replica
    np.testing.assert_allclose(_np(one[0]), _np(ref(ember.tensor(x[:1]), {"a": ember.ones(1, 4)})[0]), rtol=1e-12)


def test_dim_and_output_on_the_host(two_gpus):
    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.tensor(rand(4, 4)))

        def forward(self, x):  # x: (features, batch)
            return self.w @ x

    m = T()
    ref = copy.deepcopy(m)
    x = rand(4, 6)
    out = nn.DataParallel(m.cuda(), dim=1, output_device=-1)(ember.tensor(x).cuda())
    assert out.device.type == "cpu"
    np.testing.assert_allclose(_np(out), _np(ref(ember.tensor(x))), rtol=1e-12)
    out.sum().backward()
    ref(ember.tensor(x)).sum().backward()
    np.testing.assert_allclose(_np(m.w.grad), _np(ref.w.grad), rtol=1e-12)


def test_scalar_outputs_are_stacked(two_gpus):
    class Loss(nn.Module):
        def forward(self, x):
            return (x ** 2).sum()

    dp = nn.DataParallel(Loss())
    with pytest.warns(UserWarning, match="all input tensors were scalars; will instead unsqueeze and return a vector"):
        out = dp(ember.tensor(rand(4, 2)).cuda())
    assert out.shape == (2,)


def test_single_device_moves_the_module(two_gpus):
    m = _mlp()
    x = rand(3, 3)
    expect = _np(m(ember.tensor(x)))
    dp = nn.DataParallel(m, device_ids=[1])
    assert str(m[0].weight.device) == "cuda:1" and dp.output_device == 1
    out = dp(ember.tensor(x))  # inputs follow the module
    assert str(out.device) == "cuda:1"
    np.testing.assert_allclose(_np(out), expect, rtol=1e-12)


def test_no_grad_and_functional_form(two_gpus):
    m = _mlp().cuda()
    x = ember.tensor(rand(4, 3)).cuda()
    with ember.no_grad():
        out = nn.DataParallel(m)(x)
    assert not out.requires_grad
    replicas = replicate(m, [0, 1], detach=True)
    assert replicas[0][0].weight is not m[0].weight and not replicas[1][0].weight.requires_grad
    assert str(replicas[1][0].weight.device) == "cuda:1" and type(replicas[1]) is nn.Sequential
    out2 = data_parallel(m, x, device_ids=[0, 1], output_device=1)
    assert str(out2.device) == "cuda:1"
    np.testing.assert_allclose(_np(out2), _np(m(x)), rtol=1e-12)


def test_scatter_gather_helpers(two_gpus):
    x = ember.tensor(rand(5, 2)).cuda()
    parts = scatter((x, "tag", [x]), [0, 1])
    assert len(parts) == 2 and parts[1][1] == "tag" and parts[0][0].shape == (3, 2)
    assert str(parts[1][0].device) == "cuda:1" and str(parts[1][2][0].device) == "cuda:1"
    inputs, kwargs = scatter_kwargs((x,), {"k": 1}, [0, 1])
    assert len(inputs) == len(kwargs) == 2 and kwargs[1] == {"k": 1}
    back = gather([parts[0][0], parts[1][0]], 0)
    np.testing.assert_array_equal(_np(back), _np(x))
    with pytest.raises(ValueError, match="All dicts must have the same number of keys"):
        gather([{"a": x}, {"a": x, "b": x}], 0)


def test_errors(two_gpus):
    m = _mlp()  # on the host
    with pytest.raises(RuntimeError, match=r"module must have its parameters and buffers on device cuda:0 "
                                           r"\(device_ids\[0\]\) but found one of them on device: cpu"):
        nn.DataParallel(m)(ember.ones(2, 3).cuda())
    with pytest.raises(RuntimeError, match="device_ids has device 5, but there are 2 CUDA devices"):
        nn.DataParallel(m.cuda(), device_ids=[0, 5])
    with pytest.raises(RuntimeError, match="output_device has device 3"):
        nn.DataParallel(m, device_ids=["cuda:0", ember.device("cuda:1")], output_device="cuda:3")
    with pytest.raises(TypeError, match="device_ids must hold device indices"):
        nn.DataParallel(m, device_ids=[0.5])

    class Bad(nn.Module):
        def forward(self, x):
            if x.device.index == 1:
                raise ValueError("replica failure")
            return x

    with pytest.raises(ValueError, match="replica failure") as info:
        nn.DataParallel(Bad())(ember.ones(4, 1).cuda())
    assert "replica 1 on device cuda:1" in "".join(getattr(info.value, "__notes__", []))
    with pytest.raises(AssertionError, match="number of modules 2 is not equal to the number of inputs 1"):
        parallel_apply([m, m], [(ember.ones(1, 3),)])
