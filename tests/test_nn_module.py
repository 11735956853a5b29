"""nn.Module, Parameter and the containers: registration, traversal, modes, state_dict, hooks, printing."""
from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn as nn
from helpers import requires_torch, torch


class Affine(nn.Module):
    """y = x·wᵀ + b with a running-count buffer and a non-persistent scratch buffer."""

    def __init__(self, n_in: int = 2, n_out: int = 3, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(ember.randn(n_out, n_in, dtype=ember.float64))
        if bias:
            self.bias = nn.Parameter(ember.zeros(n_out, dtype=ember.float64))
        else:
            self.register_parameter("bias", None)
        self.register_buffer("count", ember.tensor(0))
        self.register_buffer("scratch", ember.zeros(1), persistent=False)

    def forward(self, x):
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"in={self.weight.shape[1]}, out={self.weight.shape[0]}"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = Affine(2, 4)
        self.act = nn.Sequential()
        self.blocks = nn.ModuleList([Affine(4, 4), Affine(4, 4, bias=False)])
        self.head = nn.ModuleDict({"out": Affine(4, 1)})

    def forward(self, x):
        x = self.fc1(x)
        for b in self.blocks:
            x = b(x)
        return self.head["out"](x)


# ---------------------------------------------------------------------- Parameter
def test_parameter_is_a_leaf_sharing_data():
    t = ember.randn(3)
    p = nn.Parameter(t)
    assert isinstance(p, ember.Tensor) and p.requires_grad and p.is_leaf
    assert p._data is t._data
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert type(p * 2) is ember.Tensor  # ops return plain tensors
    assert repr(p).startswith("Parameter containing:\ntensor(")
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q._data is not p._data and np.array_equal(q._data, p._data)
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter) and np.array_equal(r._data, p._data) and r.requires_grad


def test_parameter_rejects_non_tensor_and_integer():
    with pytest.raises(TypeError, match="Parameter"):
        nn.Parameter([1.0, 2.0])
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(ember.tensor([1, 2]))


# ---------------------------------------------------------------------- registration and traversal
def test_names_follow_attribute_paths():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "fc1.weight", "fc1.bias", "blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "head.out.weight",
        "head.out.bias"]
    assert [n for n, _ in net.named_buffers()] == [
        "fc1.count", "fc1.scratch", "blocks.0.count", "blocks.0.scratch", "blocks.1.count", "blocks.1.scratch",
        "head.out.count", "head.out.scratch"]
    assert list(net.state_dict()) == [
        "fc1.weight", "fc1.bias", "fc1.count", "blocks.0.weight", "blocks.0.bias", "blocks.0.count",
        "blocks.1.weight", "blocks.1.count", "head.out.weight", "head.out.bias", "head.out.count"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "blocks", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "blocks", "blocks.0", "blocks.1", "head",
                                                   "head.out"]
    assert len(list(net.parameters())) == 7 and len(list(net.parameters(recurse=False))) == 0
    assert net.get_submodule("blocks.1") is net.blocks[1]
    assert net.get_parameter("head.out.bias") is net.head["out"].bias
    with pytest.raises(AttributeError, match="nope"):
        net.get_submodule("blocks.nope")


def test_shared_parameter_listed_once():
    a = Affine()
    seq = nn.Sequential(a, a)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_parameters(remove_duplicate=False)] == ["0.weight", "0.bias", "1.weight",
                                                                             "1.bias"]


def test_attribute_assignment_rules():
    m = Affine()
    with pytest.raises(TypeError, match="cannot assign 'ember.*Tensor' as parameter 'weight'"):
        m.weight = ember.randn(3, 2)
    m.bias = None  # None is allowed and keeps the slot
    assert "bias" in m._parameters and m.bias is None and "bias" not in m.state_dict()
    m.count = ember.tensor(5)  # reassigning a buffer keeps it a buffer
    assert m.state_dict()["count"].item() == 5
    with pytest.raises(TypeError, match="buffer 'count'"):
        m.count = 3
    m.extra = 3  # plain attributes are plain
    assert m.extra == 3 and "extra" not in m.state_dict()
    del m.weight
    assert "weight" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="'Affine' object has no attribute 'missing'"):
        m.missing  # noqa: B018


def test_assign_before_init_and_bad_names():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", ember.zeros(1))
    with pytest.raises(TypeError, match="buffer 'x'"):
        m.register_buffer("x", np.zeros(1))
    with pytest.raises(TypeError, match="not a Module"):
        m.add_module("x", 3)
    with pytest.raises(ValueError, match="non-leaf"):
        m.register_parameter("w", _nonleaf_parameter())
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        m(1)


def _nonleaf_parameter():
    p = nn.Parameter(ember.zeros(2))
    q = nn.Parameter(ember.zeros(2))
    q._edge = (p * 2)._edge  # what a user gets by wrapping a computed result the wrong way
    return q


# ---------------------------------------------------------------------- modes and bulk changes
def test_train_eval_zero_grad_requires_grad():
    net = Net()
    assert net.training and net.blocks[0].training
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    net(ember.randn(5, 2, dtype=ember.float64)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad._data.any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_apply_visits_children_first():
    net = Net()
    order = []
    net.apply(lambda m: order.append(type(m).__name__))
    assert order[-1] == "Net" and order.index("Affine") < order.index("ModuleList")


def test_to_dtype_keeps_parameter_identity_and_integer_buffers():
    net = Net()
    p = net.fc1.weight
    assert net.to(ember.float32) is net
    assert net.fc1.weight is p and p.dtype == ember.float32 and isinstance(p, nn.Parameter)
    assert net.fc1.count.dtype == ember.int64  # integer buffers are not cast
    net.double()
    assert p.dtype == ember.float64
    with pytest.raises(TypeError, match="floating point"):
        net.to(ember.int32)
    net.to("cpu")
    if not ember.cuda.is_available():  # (EMBER_TEST_DEVICE=cuda installs a CUDA device: then .cuda() works)
        with pytest.raises(Exception, match="(?i)cuda"):
            net.cuda()


# ---------------------------------------------------------------------- state_dict
def test_state_dict_is_detached_and_shares_memory():
    m = Affine()
    sd = m.state_dict()
    assert not sd["weight"].requires_grad and sd["weight"]._data is m.weight._data
    kv = m.state_dict(keep_vars=True)
    assert kv["weight"] is m.weight
    assert list(m.state_dict(prefix="enc.")) == ["enc.weight", "enc.bias", "enc.count"]


def test_load_state_dict_round_trip_in_place():
    a, b = Net(), Net()
    w = b.fc1.weight
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == [] and tuple(res) == ([], [])
    assert b.fc1.weight is w  # copied in place: optimizers keep working
    for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert np.array_equal(x._data, y._data), k
    x = ember.randn(3, 2, dtype=ember.float64)
    assert np.array_equal(a(x)._data, b(x)._data)


def test_load_state_dict_errors_list_everything_and_change_nothing():
    m = Net()
    before = {k: v._data.copy() for k, v in m.state_dict().items()}
    sd = OrderedDict((k, v.clone()) for k, v in Net().state_dict().items())
    del sd["fc1.bias"]
    sd["fc1.weight"] = ember.zeros(5, 2, dtype=ember.float64)
    sd["fc9.weight"] = ember.zeros(1)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for Net:")
    assert 'Missing key(s) in state_dict: "fc1.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "fc9.weight"' in msg
    assert "size mismatch for fc1.weight" in msg and "[5, 2]" in msg and "[4, 2]" in msg
    for k, v in m.state_dict().items():
        assert np.array_equal(v._data, before[k]), f"{k} changed by a failed load"


def test_load_state_dict_non_strict_reports_keys():
    m = Net()
    sd = m.state_dict()
    del sd["head.out.bias"]
    sd["extra"] = ember.zeros(1)
    res = Net().load_state_dict(sd, strict=False)
    assert res.missing_keys == ["head.out.bias"] and res.unexpected_keys == ["extra"]
    sd = m.state_dict()
    sd["fc1.weight"] = ember.zeros(1, 1)
    with pytest.raises(RuntimeError, match="size mismatch for fc1.weight"):
        Net().load_state_dict(sd, strict=False)  # shapes are checked even when not strict
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])


def test_load_state_dict_accepts_numpy_arrays():
    m = Affine()
    sd = {k: np.full(tuple(v.shape), 2.0) for k, v in m.state_dict().items()}
    m.load_state_dict(sd)
    assert np.all(m.weight._data == 2.0) and m.count.item() == 2


def test_load_bumps_version_so_stale_graphs_fail():
    m = Affine()
    y = (m.weight * m.weight).sum()
    m.load_state_dict(Affine().state_dict())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---------------------------------------------------------------------- hooks
def test_forward_hooks_order_replace_and_remove():
    m = Affine()
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: calls.append("pre") or (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append("post") or out + 1)
    x = ember.randn(2, 2, dtype=ember.float64)
    y = m(x)
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(y._data, np.broadcast_to(1 + m.bias._data, (2, 3)))  # input zeroed, output shifted
    h1.remove(), h2.remove()
    calls.clear()
    np.testing.assert_allclose(m(x)._data, (x @ m.weight.T + m.bias)._data)
    assert calls == []


def test_forward_hooks_with_kwargs_and_prepend():
    m = Affine()
    order = []
    m.register_forward_hook(lambda mod, args, out: order.append("a"))
    m.register_forward_hook(lambda mod, args, out: order.append("b"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, kwargs), with_kwargs=True)
    m(ember.randn(1, 2, dtype=ember.float64))
    assert order == ["b", "a"]
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_hook(3)


def test_always_call_hook_runs_on_error():
    m = Affine()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(Exception):
        m(ember.randn(1, 5, dtype=ember.float64))
    assert seen == [None]


def test_full_backward_hook_sees_and_replaces_grad_input():
    m = Affine()
    x = ember.randn(4, 2, dtype=ember.float64, requires_grad=True)
    seen = {}

    def hook(mod, grad_input, grad_output):
        seen["gi"], seen["go"] = grad_input, grad_output
        return (grad_input[0] * 10,)

    h = m.register_full_backward_hook(hook)
    m(x).sum().backward()
    assert seen["go"][0].shape == (4, 3)
    np.testing.assert_allclose(seen["go"][0]._data, 1.0)
    np.testing.assert_allclose(seen["gi"][0]._data, np.ones((4, 3)) @ m.weight._data)
    np.testing.assert_allclose(x.grad._data, 10 * np.ones((4, 3)) @ m.weight._data)
    h.remove()
    x.grad = None
    m(x).sum().backward()
    np.testing.assert_allclose(x.grad._data, np.ones((4, 3)) @ m.weight._data)


def test_full_backward_hook_without_input_grad_gets_none():
    m = Affine()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].shape)))
    m(ember.randn(3, 2, dtype=ember.float64)).sum().backward()
    assert seen == [((None,), (3, 3))]
    assert m.weight.grad is not None


def test_backward_pre_hook_replaces_grad_output():
    m = Affine()
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0,))
    m(ember.randn(3, 2, dtype=ember.float64)).sum().backward()
    assert not m.weight.grad._data.any()


# ---------------------------------------------------------------------- containers
def test_sequential_indexing_slicing_and_growth():
    a, b, c = Affine(2, 3), Affine(3, 3), Affine(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    seq.append(c)
    assert seq[2] is c and list(seq.state_dict())[0] == "0.weight"
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c] and list(sub._modules) == ["1", "2"]
    x = ember.randn(5, 2, dtype=ember.float64)
    np.testing.assert_allclose(seq(x)._data, c(b(a(x)))._data)
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[0] is b
    seq.insert(0, a)
    assert list(seq) == [a, b, c]
    named = nn.Sequential(OrderedDict([("enc", a), ("dec", b)]))
    assert list(named.state_dict())[:2] == ["enc.weight", "enc.bias"] and named.enc is a


def test_module_list_dict_parameter_list():
    ml = nn.ModuleList([Affine(), Affine()])
    ml += [Affine()]
    assert len(ml) == 3 and [n for n, _ in ml.named_parameters()][-1] == "2.bias"
    del ml[0]
    assert list(ml._modules) == ["0", "1"]
    with pytest.raises(TypeError, match="iterable"):
        ml.extend(Affine())
    md = nn.ModuleDict({"a": Affine()})
    md["b"] = Affine()
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    pl = nn.ParameterList([ember.zeros(2), nn.Parameter(ember.ones(3))])
    assert all(isinstance(p, nn.Parameter) for p in pl) and [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"w": ember.zeros(2)})
    assert isinstance(pd["w"], nn.Parameter) and list(pd.state_dict()) == ["w"]


def test_residual():
    f = Affine(3, 3)
    r = nn.Residual(f)
    x = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    np.testing.assert_allclose(r(x)._data, (f(x) + x)._data)
    assert list(r.state_dict()) == ["fn.weight", "fn.bias", "fn.count"]
    with pytest.raises(RuntimeError, match=r"Residual.*\(4, 2\).*\(4, 3\)"):
        nn.Residual(Affine(3, 2))(x)
    with pytest.raises(TypeError, match="Module"):
        nn.Residual(lambda x: x)


# ---------------------------------------------------------------------- printing and copying
def test_repr_tree():
    assert repr(Net()) == (
        "Net(\n"
        "  (fc1): Affine(in=2, out=4)\n"
        "  (act): Sequential()\n"
        "  (blocks): ModuleList(\n"
        "    (0-1): 2 x Affine(in=4, out=4)\n"
        "  )\n"
        "  (head): ModuleDict(\n"
        "    (out): Affine(in=4, out=1)\n"
        "  )\n"
        ")")
    ml = nn.ModuleList([nn.Sequential(), nn.Sequential(), Affine()])
    assert repr(ml) == "ModuleList(\n  (0-1): 2 x Sequential()\n  (2): Affine(in=2, out=3)\n)"


def test_deepcopy_and_pickle():
    net = Net()
    c = copy.deepcopy(net)
    assert c.fc1.weight is not net.fc1.weight
    assert all(np.array_equal(a._data, b._data) for a, b in zip(net.parameters(), c.parameters()))
    p = pickle.loads(pickle.dumps(net))
    x = ember.randn(2, 2, dtype=ember.float64)
    np.testing.assert_allclose(p(x)._data, net(x)._data)


# ---------------------------------------------------------------------- parity with PyTorch's Module
@requires_torch
def test_repr_and_names_match_torch_for_containers():
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Sequential(), torch.nn.Sequential()])
            self.d = torch.nn.ModuleDict({"x": torch.nn.Sequential()})

    class ENet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Sequential(), nn.Sequential()])
            self.d = nn.ModuleDict({"x": nn.Sequential()})

    assert repr(ENet())[1:] == repr(TNet())[1:]  # class names differ by their first letter only
    tm, em = torch.nn.Module(), nn.Module()
    assert repr(tm) == repr(em)
