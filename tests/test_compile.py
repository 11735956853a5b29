"""`ember.compile`: every compiled run is held equal to the eager run of an independent copy.

Results and gradients: float64 within 1e-12 relative, float32 within 1e-6, integers and bools
exactly. Covered: compiled functions (bare, decorator, fullgraph decorator) and modules
(OptimizedModule's surface, Module.compile()), whole training steps (SGD with momentum, Adam;
Dropout and BatchNorm running statistics), the order of random draws, every guard (shape, dtype,
requires_grad, grad mode, training flags, non-tensor arguments, default dtype, replaced
parameters), dynamic batch sizes, the cache-size limit, graph breaks (eager results, side effects
at every call, `explain`, `fullgraph=True` naming reason and file:line), in-place ops and views,
recurrent and transformer layers, `reset`/`is_compiling`/`ember._dynamo`, and argument errors.
"""
from __future__ import annotations

import copy
import inspect
import os
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import GraphBreak

THIS_FILE = os.path.basename(__file__)
F64, F32 = ember.float64, ember.float32


# ---------------------------------------------------------------------- helpers
@pytest.fixture(autouse=True)
def _clean():
    """Each test starts with no captured programs, the default dtype and the default cache limit."""
    ember.compiler.reset()
    dtype, limit = ember.get_default_dtype(), ember._dynamo.config.cache_size_limit
    yield
    ember.set_default_dtype(dtype)
    ember._dynamo.config.cache_size_limit = limit
    ember.compiler.reset()


def arr(t) -> np.ndarray:
    return t.detach().numpy() if isinstance(t, ember.Tensor) else np.asarray(t)


def assert_same(a, b, what: str = "result") -> None:
    """a (compiled) equals b (eager): same structure, dtypes, shapes, requires_grad; values within
    1e-12 relative in float64, 1e-6 in float32, exactly otherwise."""
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), f"{what}: {type(a).__name__} vs {type(b).__name__}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{what}[{i}]")
        return
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), what
        for k in b:
            assert_same(a[k], b[k], f"{what}[{k!r}]")
        return
    if b is None:
        assert a is None, f"{what}: expected None, got {a!r}"
        return
    if not isinstance(b, (ember.Tensor, np.ndarray)):
        assert a == b, f"{what}: {a!r} != {b!r}"
        return
    assert isinstance(a, type(b)), f"{what}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(b, ember.Tensor):
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs {b.dtype}"
        assert a.requires_grad == b.requires_grad, f"{what}: requires_grad {a.requires_grad} vs {b.requires_grad}"
    x, y = arr(a), arr(b)
    assert x.shape == y.shape, f"{what}: shape {x.shape} vs {y.shape}"
    assert x.dtype == y.dtype, f"{what}: dtype {x.dtype} vs {y.dtype}"
    if x.dtype.kind == "f":
        rtol = 1e-12 if x.dtype == np.float64 else 1e-6
        scale = float(np.nanmax(np.abs(y), initial=0.0)) or 1.0
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(x, y, err_msg=what)


def assert_grads(m1, m2, what: str = "") -> None:
    """Every parameter's .grad of m1 equals m2's (both None or equal)."""
    n1, n2 = dict(m1.named_parameters()), dict(m2.named_parameters())
    assert n1.keys() == n2.keys()
    for k in n2:
        assert_same(n1[k].grad, n2[k].grad, f"{what}{k}.grad")


def assert_params(m1, m2, what: str = "") -> None:
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert s1.keys() == s2.keys()
    for k in s2:
        assert_same(s1[k], s2[k], f"{what}{k}")


def data(i: int, *shape, dtype=F64, rg: bool = False) -> ember.Tensor:
    """Deterministic inputs, different for each i."""
    t = ember.tensor(np.random.default_rng(1000 + i).standard_normal(shape), dtype=dtype)
    return t.requires_grad_() if rg else t


def twin(t: ember.Tensor) -> ember.Tensor:
    """An independent copy of an input (a fresh leaf with the same requires_grad)."""
    c = t.detach().clone()
    return c.requires_grad_() if t.requires_grad else c


def same_call(c, e, x, models=None) -> None:
    """c(x) (compiled) and e on a twin of x (eager) give the same result, and after `sum().backward()` the same
    input gradient (and, given `models` (compiled's, eager's), the same parameter gradients)."""
    xe = twin(x)
    out, oute = c(x), e(xe)
    assert_same(out, oute)
    out.sum().backward()
    oute.sum().backward()
    if models is not None:
        assert_grads(*models)
    assert_same(x.grad, xe.grad)


def line_of(obj, marker: str = "# BREAK") -> int:
    """The line number (in this file) of the line of obj's source that holds marker."""
    src, start = inspect.getsourcelines(obj)
    hits = [start + k for k, s in enumerate(src) if marker in s]
    assert len(hits) == 1, hits
    return hits[0]


def mlp(dtype=F64, dropout: float = 0.3) -> nn.Module:
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Dropout(dropout), nn.Linear(8, 3)).to(dtype)


# ---------------------------------------------------------------------- results equal eager
def f_float(x, y):
    h = (x @ y).tanh()
    return h.sum(1) * 2 + x.mean(), (h * h).exp().log1p().amax(0)


def f_int(a, b):
    return (a * 3 + b) % 5, a.sum(0), (a - b).abs().max()


def f_bool(a, b):
    m = (a > b) & (b < 1)
    return m, m | (a == 0), m ^ (a < 0), m.sum()


def f_invert(a, b):
    m = a > b
    return ~m, ~(a * 2)


@pytest.mark.parametrize("dtype", [F64, F32])
def test_function_results_and_grads_equal_eager(dtype):
    c = ember.compile(f_float)
    for i in range(3):  # capture, then replays on new values
        x, y = data(i, 4, 3, dtype=dtype, rg=True), data(10 + i, 3, 5, dtype=dtype, rg=True)
        xe, ye = twin(x), twin(y)
        out, oute = c(x, y), f_float(xe, ye)
        assert_same(out, oute)
        cot = data(20 + i, 4, dtype=dtype)
        ((out[0] * cot).sum() + out[1].sum()).backward()
        ((oute[0] * cot).sum() + oute[1].sum()).backward()
        assert_same(x.grad, xe.grad, "x.grad")
        assert_same(y.grad, ye.grad, "y.grad")
    assert c.stats["captures"] == 1 and c.stats["replays"] == 2, c.stats


@pytest.mark.parametrize("dtype", [F64, F32])
def test_function_without_grad_equal_eager(dtype):
    c = ember.compile(f_float)
    for i in range(3):
        x, y = data(i, 4, 3, dtype=dtype), data(10 + i, 3, 5, dtype=dtype)
        assert_same(c(x, y), f_float(x, y))
    assert c.stats["captures"] == 1 and c.stats["replays"] == 2, c.stats


@pytest.mark.parametrize("fn", [f_int, f_bool, f_invert])
def test_integer_and_bool_results_exact(fn):
    c = ember.compile(fn)
    for i in range(3):
        rng = np.random.default_rng(i)
        a = ember.tensor(rng.integers(-4, 5, (3, 4)), dtype=ember.int64)
        b = ember.tensor(rng.integers(-4, 5, (3, 4)), dtype=ember.int64)
        assert_same(c(a, b), fn(a, b))
    assert c.stats["captures"] == 1 and c.stats["replays"] == 2, c.stats


def _setitem_index(x, i):
    h = x * 1
    h[i[0]] = 0.0
    return h


# Ops that read an index or mask tensor (an argument, or computed in the function): its values differ
# at every call, so the replay must read them afresh.
INDEX_OPS = {
    "gather": lambda x, i: x.gather(1, i),
    "scatter": lambda x, i: x.scatter(1, i, 1.0),
    "scatter_add": lambda x, i: x.scatter_add(1, i, x[:, :2]),
    "index_select": lambda x, i: x.index_select(1, i[0]),
    "index_add": lambda x, i: x.index_add(1, i[0], x[:, :2]),
    "getitem_tensor": lambda x, i: x[i[0]],
    "getitem_two_tensors": lambda x, i: x[i[:, 0], i[:, 1]],
    "setitem_tensor": _setitem_index,
    "take": lambda x, i: x.take(i),
    "take_along_dim": lambda x, i: ember.take_along_dim(x, i, 1),
    "embedding": lambda x, i: F.embedding(i, x),
    "one_hot": lambda x, i: F.one_hot(i[:, 0], 5) * x[:, :1],
    "nll_loss": lambda x, i: F.nll_loss(x.log_softmax(1), i[:, 0]),
    "cross_entropy": lambda x, i: F.cross_entropy(x, i[:, 0]),
    "masked_fill": lambda x, i: x.masked_fill(i[:, :1] > 1, 0.0),
    "where": lambda x, i: ember.where(i[:, :1] > 1, x, 0.0),
    "bool_mask": lambda x, i: x[i[:, 0] > 1],
    "max_dim": lambda x, i: x.max(0)[0],
    "min_dim_indices": lambda x, i: x.min(1),
    "argmax_gather": lambda x, i: x.gather(1, x.argmax(1, keepdim=True)),
    "argmax_plus": lambda x, i: (x * 1).argmax(0) + i.sum(),
    "randperm_index": lambda x, i: x[:, ember.randperm(5)],
}


@pytest.mark.parametrize("name", list(INDEX_OPS))
def test_index_tensor_ops_read_indices_afresh(name):
    fn = INDEX_OPS[name]
    c = ember.compile(fn)
    for k in range(4):
        x = data(k, 4, 5, rg=True)
        xe = twin(x)
        i = ember.tensor(np.random.default_rng(10 + k).integers(0, 4, (4, 2)), dtype=ember.int64)
        ember.manual_seed(k)
        out = c(x, i)
        ember.manual_seed(k)
        oute = fn(xe, i)
        assert_same(out, oute, f"call {k}")
        outs, outse = (out, oute) if isinstance(oute, tuple) else ((out,), (oute,))
        roots = [(o, oe) for o, oe in zip(outs, outse) if oe.requires_grad]
        if roots:
            sum(o.sum() * (n + 1) for n, (o, _) in enumerate(roots)).backward()
            sum(oe.sum() * (n + 1) for n, (_, oe) in enumerate(roots)).backward()
            assert_same(x.grad, xe.grad, f"x.grad, call {k}")


# ---------------------------------------------------------------------- compiled modules
@pytest.mark.parametrize("dtype", [F64, F32])
def test_module_train_eval_no_grad_and_input_grad(dtype):
    m = mlp(dtype)
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    # train mode, gradients of parameters and of a requires_grad input, over several calls
    for i in range(3):
        x = data(i, 5, 6, dtype=dtype, rg=(i > 0))
        xe = twin(x)
        ember.manual_seed(i)
        out = cm(x)
        ember.manual_seed(i)
        oute = e(xe)
        assert_same(out, oute)
        cot = data(50 + i, 5, 3, dtype=dtype)
        (out * cot).sum().backward()
        (oute * cot).sum().backward()
        assert_grads(m, e)
        assert_same(x.grad, xe.grad, "input grad")
    # eval mode
    cm.eval()
    e.eval()
    for i in range(2):
        x = data(10 + i, 5, 6, dtype=dtype, rg=True)
        xe = twin(x)
        out, oute = cm(x), e(xe)
        assert_same(out, oute)
        out.sum().backward()
        oute.sum().backward()
        assert_same(x.grad, xe.grad, "input grad (eval)")
        assert_grads(m, e)
    # no_grad
    with ember.no_grad():
        for i in range(2):
            x = data(20 + i, 5, 6, dtype=dtype)
            out, oute = cm(x), e(x)
            assert not out.requires_grad
            assert_same(out, oute)
    cm.train()
    e.train()
    with ember.no_grad():
        ember.manual_seed(7)
        out = cm(data(30, 5, 6, dtype=dtype))
        ember.manual_seed(7)
        assert_same(out, e(data(30, 5, 6, dtype=dtype)))
    assert cm._compiled.stats["eager"] == 0, cm._compiled.stats
    assert cm._compiled.stats["replays"] > 0, cm._compiled.stats


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(8, 3)
        self.scale = 2.0
        self.register_buffer("offset", ember.ones(3))

    def features(self, x):
        return self.fc1(x).relu()

    def forward(self, x):
        return self.fc2(self.drop(self.features(x))) * self.scale + self.offset


def test_optimized_module_surface():
    ember.manual_seed(0)
    m = Net().double()
    cm = ember.compile(m)
    assert isinstance(cm, ember.compiler.OptimizedModule) and isinstance(cm, nn.Module)
    assert cm._orig_mod is m
    # parameters and buffers are the original's (the same objects)
    assert [id(p) for p in cm.parameters()] == [id(p) for p in m.parameters()]
    assert [id(b) for b in cm.buffers()] == [id(b) for b in m.buffers()]
    # state_dict keys under `_orig_mod.`, as PyTorch; loading through the wrapper reaches the original
    sd = cm.state_dict()
    assert list(sd) == ["_orig_mod." + k for k in m.state_dict()]
    for k, v in m.state_dict().items():
        assert_same(sd["_orig_mod." + k], v)
    new = {k: v * 0 + 0.5 for k, v in sd.items()}
    cm.load_state_dict(new)
    assert np.all(arr(m.fc1.weight) == 0.5) and np.all(arr(m.offset) == 0.5)
    # attribute access forwards to the original
    assert cm.fc1 is m.fc1 and cm.scale == 2.0
    x = data(0, 4, 6)
    assert_same(cm.features(x), m.features(x))
    m.scale = 3.0
    assert cm.scale == 3.0
    # train()/eval() reach the original (and every submodule)
    assert cm.eval() is cm
    assert cm.training is False and m.training is False and m.drop.training is False
    cm.train()
    assert cm.training is True and m.training is True and m.drop.training is True
    cm.train(False)
    assert m.training is False and m.fc2.training is False
    assert "OptimizedModule" in repr(cm)


def test_train_eval_toggle_recaptures():
    m = mlp(F64, dropout=0.5)
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    st = cm._compiled.stats

    def both(i):
        x = data(i, 4, 6)
        ember.manual_seed(i)
        out = cm(x)
        ember.manual_seed(i)
        assert_same(out, e(x))

    both(0)
    both(1)
    assert st["captures"] == 1 and st["replays"] == 1
    cm.eval()
    e.eval()
    both(2)
    assert st["captures"] == 2, st  # the training-flag guard failed: a new capture
    both(3)
    assert st["captures"] == 2 and st["replays"] == 2, st
    m.train()  # toggling the original directly is seen too
    e.train()
    both(4)
    assert st["captures"] == 2 and st["replays"] == 3, st  # back to the first program
    m[2].eval()  # a submodule's flag alone
    e[2].eval()
    both(5)
    assert st["captures"] == 3, st


def test_module_compile_in_place():
    m = mlp(F64)
    e = copy.deepcopy(m)
    assert m.compile() is None
    assert type(m) is nn.Sequential
    assert list(m.state_dict()) == list(e.state_dict())  # no prefix: the module itself
    for i in range(3):
        x = data(i, 5, 6, rg=True)
        xe = twin(x)
        ember.manual_seed(i)
        out = m(x)
        ember.manual_seed(i)
        oute = e(xe)
        assert_same(out, oute)
        out.sum().backward()
        oute.sum().backward()
        assert_grads(m, e)
        assert_same(x.grad, xe.grad)
    stats = m.__dict__["_compiled_call"].stats
    assert stats["captures"] == 1 and stats["replays"] == 2, stats
    m.eval()
    e.eval()
    assert_same(m(data(9, 5, 6)), e(data(9, 5, 6)))
    assert stats["captures"] == 2


# ---------------------------------------------------------------------- the three ways to compile a function
def _plain(x):
    return (x.sin() * 2 + 1).sum(-1)


@ember.compile
def _decorated(x):
    return (x.sin() * 2 + 1).sum(-1)


@ember.compile(fullgraph=True)
def _decorated_full(x):
    return (x.sin() * 2 + 1).sum(-1)


@pytest.mark.parametrize("how", ["bare", "decorator", "decorator_fullgraph"])
def test_compile_function_forms(how):
    c = {"bare": lambda: ember.compile(_plain), "decorator": lambda: _decorated,
         "decorator_fullgraph": lambda: _decorated_full}[how]()
    assert isinstance(c, ember.compiler.CompiledFunction)
    assert c.__name__ in ("_plain", "_decorated", "_decorated_full")
    assert c.fullgraph is (how == "decorator_fullgraph")
    for i in range(3):
        same_call(c, _plain, data(i, 3, 4, rg=True))
    assert c.stats["captures"] == 1 and c.stats["replays"] == 2, c.stats


# ---------------------------------------------------------------------- whole training step
class TrainNet(nn.Module):
    def __init__(self, bn: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.bn = nn.BatchNorm1d(8) if bn else nn.Identity()
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.drop(self.bn(self.fc1(x)).relu()))


def train_step(model, opt, x, y):
    opt.zero_grad()
    out = model(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss


def _optimizer(name, params):
    if name == "sgd":
        return ember.optim.SGD(params, lr=0.1, momentum=0.9)
    return ember.optim.Adam(params, lr=0.01)


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("compiled_model", [False, True])
@pytest.mark.parametrize("bn", [True, False], ids=["batchnorm", "no_batchnorm"])
def test_training_step_compiled(opt_name, dtype, compiled_model, bn):
    ember.manual_seed(0)
    m = TrainNet(bn).to(dtype)
    e = copy.deepcopy(m)
    opt, opte = _optimizer(opt_name, m.parameters()), _optimizer(opt_name, e.parameters())
    model = ember.compile(m) if compiled_model else m  # a compiled model inside the compiled step too
    step = ember.compile(train_step)
    rng = np.random.default_rng(0)
    for i in range(5):
        x = ember.tensor(rng.standard_normal((6, 5)), dtype=dtype)
        y = ember.tensor(rng.integers(0, 3, 6), dtype=ember.int64)
        ember.manual_seed(100 + i)
        loss = step(model, opt, x, y)
        ember.manual_seed(100 + i)
        losse = train_step(e, opte, x, y)
        assert_same(loss, losse, f"loss at step {i}")
        if i == 2:  # a learning-rate change between steps (as a scheduler makes) reaches the compiled step
            for o in (opt, opte):
                for g in o.param_groups:
                    g["lr"] *= 0.5
        assert_params(m, e, f"step {i}: ")  # parameters and BatchNorm's running statistics
        assert_grads(m, e, f"step {i}: ")
    if bn:
        assert int(m.bn.num_batches_tracked.item()) == 5
    assert step.stats == {"captures": 1, "replays": 4, "eager": 0}, step.stats
    # optimizer state follows eager's
    for p, pe in zip(m.parameters(), e.parameters()):
        s, se = opt.state[p], opte.state[pe]
        assert s.keys() == se.keys()
        for k in se:
            assert_same(s[k], se[k], f"optimizer state {k}")
    # evaluation afterwards uses the running statistics
    m.eval()
    e.eval()
    with ember.no_grad():
        x = ember.tensor(rng.standard_normal((4, 5)), dtype=dtype)
        assert_same(model(x), e(x))


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_running_statistics(momentum):
    """BatchNorm in training mode updates running statistics (momentum None: a cumulative average whose
    factor 1/num_batches_tracked changes at every call); eval mode then uses them."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=momentum)).double()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    for i in range(4):
        x = data(i, 6, 3, rg=True)
        xe = twin(x)
        out, oute = cm(x), e(xe)
        assert_same(out, oute, f"call {i}")
        out.sum().backward()
        oute.sum().backward()
        assert_grads(m, e, f"call {i}: ")
        assert_params(m, e, f"call {i}: ")  # running_mean, running_var, num_batches_tracked
    m.eval()
    e.eval()
    assert_same(cm(data(9, 6, 3)), e(data(9, 6, 3)))
    if momentum is not None:  # nothing in it needs eager
        assert cm._compiled.stats["eager"] == 0, cm._compiled.stats


# ---------------------------------------------------------------------- order of random draws
def _random_fn(x):
    a = F.dropout(x, 0.5, training=True)
    b = ember.rand(3, 4, dtype=x.dtype)
    c = ember.randn_like(x)
    d = ember.bernoulli(x.sigmoid()) + ember.normal(x, 1.0)
    e = ember.randperm(4).to(x.dtype) + ember.randint(0, 5, (4,))
    return a + b, c * a, d, e, ember.multinomial(x.softmax(1), 2)


def test_random_draws_follow_eager_order():
    c = ember.compile(_random_fn)
    x = data(0, 3, 4)
    ember.manual_seed(123)
    got = []
    for i in range(4):
        got.append(c(x))
        got.append(ember.rand(2, dtype=F64))  # a draw between calls, outside the compiled function
    ember.manual_seed(123)
    want = []
    for i in range(4):
        want.append(_random_fn(x))
        want.append(ember.rand(2, dtype=F64))
    assert_same(got, want)
    assert not np.array_equal(arr(got[0][1]), arr(got[2][1]))  # each replay draws anew
    assert c.stats["captures"] == 1 and c.stats["replays"] == 3, c.stats


def test_dropout_module_draws_follow_eager_across_calls():
    m = mlp(F64, dropout=0.5)
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    x = data(0, 5, 6)
    ember.manual_seed(5)
    got = [cm(x) for _ in range(4)]
    ember.manual_seed(5)
    want = [e(x) for _ in range(4)]
    assert_same(got, want)
    assert not np.array_equal(arr(got[0]), arr(got[1]))


# ---------------------------------------------------------------------- guards
def _scaled(x, k):
    return x * k + ember.ones(x.shape[-1])


def test_guard_shape():
    c = ember.compile(_scaled, dynamic=False)
    for shape in [(3, 4), (3, 4), (3, 5), (2, 4), (3, 4)]:
        x = data(0, *shape)
        assert_same(c(x, 2.0), _scaled(x, 2.0))
    assert c.stats["captures"] == 3 and c.stats["replays"] == 2, c.stats
    assert len([k for k in c.cache if c.cache[k]]) >= 3


def test_guard_dtype():
    c = ember.compile(_scaled)
    for dtype in [F64, F32, F64, F32]:
        x = data(0, 3, 4, dtype=dtype)
        out = c(x, 2.0)
        assert out.dtype == dtype
        assert_same(out, _scaled(x, 2.0))
    assert c.stats["captures"] == 2 and c.stats["replays"] == 2, c.stats


def test_guard_requires_grad():
    c = ember.compile(_scaled)
    x = data(0, 3, 4)
    assert_same(c(x, 2.0), _scaled(x, 2.0))
    x = data(1, 3, 4, rg=True)
    xe = twin(x)
    out, oute = c(x, 2.0), _scaled(xe, 2.0)
    assert out.requires_grad
    assert_same(out, oute)
    out.sum().backward()
    oute.sum().backward()
    assert_same(x.grad, xe.grad)
    assert c.stats["captures"] == 2, c.stats


def test_guard_grad_mode():
    m = mlp(F64)
    m.eval()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    x = data(0, 4, 6)
    with ember.no_grad():
        out = cm(x)
        assert not out.requires_grad
        assert_same(out, e(x))
    out, oute = cm(x), e(x)
    assert out.requires_grad
    assert_same(out, oute)
    out.sum().backward()
    oute.sum().backward()
    assert_grads(m, e)
    assert cm._compiled.stats["captures"] == 2, cm._compiled.stats


def test_guard_non_tensor_argument_value():
    c = ember.compile(_scaled)
    x = data(0, 3, 4)
    for k in [2.0, 3.0, 2.0, 3, -1.5]:
        assert_same(c(x, k), _scaled(x, k))
    assert c.stats["captures"] == 4 and c.stats["replays"] == 1, c.stats
    for k in [0.5, 4.0, 0.5]:  # as a keyword
        assert_same(c(x, k=k), _scaled(x, k=k))


def _with_factory(x):
    return x + ember.ones(x.shape[-1]), ember.zeros(2)


def test_guard_default_dtype():
    c = ember.compile(_with_factory)
    x = data(0, 3, 4, dtype=F32)
    assert_same(c(x), _with_factory(x))
    ember.set_default_dtype(F64)
    out = c(x)
    assert out[1].dtype == F64 and out[0].dtype == F64
    assert_same(out, _with_factory(x))
    assert c.stats["captures"] == 2, c.stats
    ember.set_default_dtype(F32)
    assert_same(c(x), _with_factory(x))
    assert c.stats["captures"] == 2 and c.stats["replays"] == 1, c.stats


def test_guard_replaced_parameter():
    ember.manual_seed(0)
    m = Net().double()
    m.eval()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    st = cm._compiled.stats
    x = data(0, 4, 6)
    assert_same(cm(x), e(x))
    assert_same(cm(x), e(x))
    assert st["captures"] == 1
    # a new Parameter object of the same shape
    w = data(1, 3, 8)
    m.fc2.weight = nn.Parameter(w.clone())
    e.fc2.weight = nn.Parameter(w.clone())
    assert_same(cm(x), e(x))
    assert st["captures"] == 2, st
    # of another shape (and the layer it feeds changed accordingly)
    m.fc2 = nn.Linear(8, 5).double()
    e.fc2 = copy.deepcopy(m.fc2)
    m.offset = ember.zeros(5, dtype=F64)
    e.offset = ember.zeros(5, dtype=F64)
    out = cm(x)
    assert out.shape == (4, 5)
    assert_same(out, e(x))
    # training still reaches the new parameter
    out = cm(data(2, 4, 6, rg=True))
    out.sum().backward()
    assert m.fc2.weight.grad is not None


def test_parameter_updated_in_place_or_data_replaced():
    m = mlp(F64)
    m.eval()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    x = data(0, 4, 6)
    assert_same(cm(x), e(x))
    with ember.no_grad():
        m[0].weight.mul_(2)
        e[0].weight.mul_(2)
    assert_same(cm(x), e(x))
    new = data(3, 8, 6)
    m[0].weight.data = new.clone()
    e[0].weight.data = new.clone()
    assert_same(cm(x), e(x))
    m[3].bias.requires_grad_(False)
    e[3].bias.requires_grad_(False)
    out, oute = cm(x), e(x)
    assert_same(out, oute)
    out.sum().backward()
    oute.sum().backward()
    assert_grads(m, e)


def _dyn_model(dropout: bool) -> nn.Module:
    ember.manual_seed(0)
    layers = [nn.Linear(6, 8), nn.Tanh()] + ([nn.Dropout(0.3)] if dropout else []) + [nn.Linear(8, 3)]
    return nn.Sequential(*layers).double()


def _run_batches(cm, e, batches):
    for i, b in enumerate(batches):
        x = data(i, b, 6, rg=True)
        xe = twin(x)
        ember.manual_seed(i)
        out = cm(x)
        ember.manual_seed(i)
        oute = e(xe)
        assert_same(out, oute, f"batch {b}")
        out.sum().backward()
        oute.sum().backward()
        assert_same(x.grad, xe.grad, f"input grad, batch {b}")
        assert_grads(m_of(cm), e, f"batch {b}: ")


def m_of(cm):
    return cm._orig_mod if isinstance(cm, ember.compiler.OptimizedModule) else cm


# batch sizes that share no factor with the model's sizes (6, 8, 3): no constant of the program can be
# mistaken for one derived from the batch size
BATCHES = [5, 7, 11, 13, 5, 7]


SCALE = 2.0


def _reads_global(x):
    return x * SCALE


class Configurable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.LeakyReLU(0.1)
        self.scale = 2.0
        self.use_act = True

    def forward(self, x):
        y = self.fc(x) * self.scale
        return self.act(y) if self.use_act else y


def _change_global():
    global SCALE
    x = data(0, 3, 4)
    c = ember.compile(_reads_global)
    assert_same(c(x), _reads_global(x))
    SCALE = 3.0
    try:
        assert_same(c(x), _reads_global(x), "a global changed")
    finally:
        SCALE = 2.0


def _change_closure():
    x = data(0, 3, 4)
    offset = 1.0

    def closure(x):
        return x + offset

    c = ember.compile(closure)
    assert_same(c(x), closure(x))
    offset = 5.0
    assert_same(c(x), closure(x), "a closure variable changed")


def _change_module(change):
    def check():
        x = data(0, 3, 4)
        ember.manual_seed(0)
        m = Configurable().double()
        e = copy.deepcopy(m)
        cm = ember.compile(m)
        assert_same(cm(x), e(x))
        change(m)
        change(e)
        assert_same(cm(x), e(x), "a module attribute changed")
    return check


PY_VALUES = {
    "global": _change_global,
    "closure": _change_closure,
    "module_float_attr": _change_module(lambda m: setattr(m, "scale", 5.0)),
    "module_bool_attr": _change_module(lambda m: setattr(m, "use_act", False)),
    "layer_hyperparameter": _change_module(lambda m: setattr(m.act, "negative_slope", 0.5)),
}


@pytest.mark.parametrize("name", list(PY_VALUES))
def test_guard_python_values_read_by_the_function(name):
    """Python values the function reads besides its arguments (a global, a closure variable, a module's
    plain attributes, a layer's hyperparameter) may change between calls: the compiled function must
    follow (recapture or run eagerly), never replay the old value."""
    PY_VALUES[name]()


@pytest.mark.parametrize("dynamic", [True, None])
def test_dynamic_batch_size_shares_program(dynamic):
    m = _dyn_model(dropout=False)
    e = copy.deepcopy(m)
    cm = ember.compile(m, dynamic=dynamic)
    _run_batches(cm, e, BATCHES)
    st = cm._compiled.stats
    # dynamic=True: one capture; dynamic=None: a second batch size captures once more, then shares
    assert st["captures"] == (1 if dynamic else 2), st
    assert st["eager"] == 0, st


def test_dynamic_false_recaptures_per_batch_size():
    m = _dyn_model(dropout=False)
    e = copy.deepcopy(m)
    cm = ember.compile(m, dynamic=False)
    _run_batches(cm, e, BATCHES)
    assert cm._compiled.stats["captures"] == 4, cm._compiled.stats


def test_dynamic_with_dropout_in_training():
    """dynamic=True with a training-mode Dropout (a random mask whose shape has the batch size)."""
    m = _dyn_model(dropout=True)
    e = copy.deepcopy(m)
    cm = ember.compile(m, dynamic=True)
    _run_batches(cm, e, BATCHES)
    assert cm._compiled.stats["captures"] == 1, cm._compiled.stats


class FlattenNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        return self.fc(x.view(x.size(0), -1))


def _mean_by_hand(x):
    return x.sum(0) / x.shape[0]


def _first_half(x):
    return x[: x.shape[0] // 2] * 2


def _all_but_last(x):
    return x[: x.size(0) - 1] + 1


def _arange_batch(x):
    return x * ember.arange(x.shape[0], dtype=x.dtype).reshape(-1, 1)


def _zeros_batch(x):
    return ember.cat([x, ember.zeros(x.shape[0], 1, dtype=x.dtype)], 1)


def _reshape_batch(x):
    return x.reshape(x.shape[0] * 2, -1).sum(1)


@pytest.mark.parametrize("fn", [FlattenNet, _mean_by_hand, _first_half, _all_but_last, _arange_batch, _zeros_batch,
                                _reshape_batch], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dynamic", [True, None])
def test_dynamic_with_batch_size_baked_in(fn, dynamic):
    if isinstance(fn, type):
        ember.manual_seed(0)
        f = fn().double()
        c = ember.compile(copy.deepcopy(f), dynamic=dynamic)
        shape = (2, 3)
    else:
        f, c, shape = fn, ember.compile(fn, dynamic=dynamic), (6,)
    for i, b in enumerate([4, 6, 3, 8, 5, 4]):
        x = data(i, b, *shape)
        assert_same(c(x), f(x), f"batch {b}")


# ---------------------------------------------------------------------- cache-size limit
def test_cache_size_limit_warns_once_then_eager():
    c = ember.compile(_scaled, dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 12):
            x = data(n, 2, n)
            assert_same(c(x, 2.0), _scaled(x, 2.0))
        x = data(0, 2, 1)
        assert_same(c(x, 2.0), _scaled(x, 2.0))  # a cached shape still replays
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1, msgs
    assert "cache size limit" in msgs[0] and "8" in msgs[0]
    assert "shape" in msgs[0], msgs[0]  # names the failing guard
    assert c.stats["captures"] == 8 and c.stats["eager"] == 3 and c.stats["replays"] == 1, c.stats


def test_dynamo_config_cache_size_limit():
    assert ember._dynamo.config.cache_size_limit == 8
    ember._dynamo.config.cache_size_limit = 2
    c = ember.compile(_scaled)
    with pytest.warns(UserWarning, match="cache size limit"):
        for k in [1.0, 2.0, 3.0]:
            assert_same(c(data(0, 2, 3), k), _scaled(data(0, 2, 3), k))
    assert c.stats["captures"] == 2
    with pytest.raises(ValueError):
        ember._dynamo.config.cache_size_limit = -1


# ---------------------------------------------------------------------- graph breaks
def brk_item(x):
    s = x.sum().item()  # BREAK
    return x * s


def brk_bool(x):
    if x.sum() > 0:  # BREAK
        return x * 2
    return x - 1


def brk_numpy(x):
    n = x.detach().numpy()  # BREAK
    return x * float(np.abs(n).max())


def brk_tolist(x):
    v = x.detach().tolist()  # BREAK
    return x + max(v[0])


def brk_print(x):
    print("value", x.shape)  # BREAK
    return x * 3


def brk_nonzero(x):
    idx = (x.detach() > 0.5).nonzero()  # BREAK
    return idx, ember.zeros(len(idx)) + 1  # (a shape read by Python: the count must not be baked)


def brk_mask(x):
    return x[x > 0.5] * 2  # BREAK


def brk_random_inplace(x):
    return (x * 1).uniform_() * x  # BREAK


def brk_register_hook(x):
    y = x * 2
    y.register_hook(lambda g: g * 3)  # BREAK
    return (y * y).sum()


def brk_retain_grad(x):
    y = x.tanh()
    y.retain_grad()  # BREAK
    return y, (y * y).sum()


class Square(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x


def brk_custom_function(x):
    return Square.apply(x.sin()).sum()  # BREAK


def brk_anomaly(x):
    with ember.autograd.detect_anomaly():
        loss = (x * x).sum()
        loss.backward()  # BREAK
    return loss.detach() * 1


def brk_create_graph(x):
    loss = (x ** 3).sum()
    loss.backward(create_graph=True)  # BREAK
    return x.grad * 1


CALLS = 0


def brk_global(x):
    global CALLS
    CALLS += 1  # BREAK
    return x * 2


class CountNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.count = 0

    def forward(self, x):
        self.count += 1  # BREAK
        return self.fc(x)


class HookedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.calls = []
        self.fc.register_forward_hook(self._hook)  # (a bound method: a deepcopy hooks the copy)

    def _hook(self, mod, args, out):
        self.calls.append(1)
        return out * 2

    def forward(self, x):
        return self.fc(x).tanh()  # BREAK


# name -> (function or Module class, reason substring, whether its input requires grad)
BREAKS = {
    "item": (brk_item, "item()", True),
    "bool": (brk_bool, "bool()", True),
    "numpy": (brk_numpy, "numpy()", True),
    "tolist": (brk_tolist, "tolist()", True),
    "print": (brk_print, "print()", True),
    "nonzero": (brk_nonzero, "data-dependent", False),
    "bool_mask": (brk_mask, "data-dependent", True),
    "random_in_place": (brk_random_inplace, "random draw", True),
    "self_attr": (CountNet, "side effect", True),
    "global_counter": (brk_global, "side effect", True),
    "forward_hook": (HookedNet, "hooks", True),
    "register_hook": (brk_register_hook, "register_hook", True),
    "retain_grad": (brk_retain_grad, "retain_grad", True),
    "custom_function": (brk_custom_function, "autograd.Function", True),
    "detect_anomaly": (brk_anomaly, "detect_anomaly", True),
    "create_graph": (brk_create_graph, "create_graph", True),
}


def _drive(f, i: int, rg: bool):
    """Call f on input i (sums of both signs across i) and gather what to compare: the result,
    the input's gradient after a backward of everything that requires grad, retained grads."""
    sign = 1.0 if i % 2 == 0 else -1.0
    x = ember.tensor(np.random.default_rng(i).standard_normal((3, 4)) + sign)
    if rg:
        x.requires_grad_()
    out = f(x)
    outs = out if isinstance(out, tuple) else (out,)
    grads = []
    if rg:
        roots = [o for o in outs if isinstance(o, ember.Tensor) and o.requires_grad and o.grad_fn is not None
                 and o.grad_fn.name() != "CompiledBackward"]
        if roots:
            sum(r.sum() for r in roots).backward()
        grads = [x.grad] + [o.grad for o in outs if isinstance(o, ember.Tensor) and o.requires_grad
                            and not o.is_leaf and o.grad_fn is not None and getattr(o, "retains_grad", False)]
    return [out, grads]


@pytest.mark.parametrize("name", list(BREAKS))
def test_graph_break_runs_eager(name, capsys):
    fn, reason, rg = BREAKS[name]
    if isinstance(fn, type):
        ember.manual_seed(0)
        f = fn().double()
        fe = copy.deepcopy(f)
    else:
        f = fe = fn
    c = ember.compile(f)
    calls = CALLS
    for i in range(4):
        ember.manual_seed(i)
        got = _drive(c, i, rg)
        ember.manual_seed(i)
        assert_same(got, _drive(fe, i, rg), f"call {i}")
    stats = (c._compiled if isinstance(c, nn.Module) else c).stats
    assert stats["captures"] == 1 and stats["replays"] == 0, stats
    assert stats["eager"] == 3, stats
    # side effects happen at every call
    if name == "self_attr":
        assert c.count == 4 and fe.count == 4
        assert_grads(f, fe)
    if name == "forward_hook":
        assert len(f.calls) == 4 and len(fe.calls) == 4
        assert_grads(f, fe)
    if name == "global_counter":
        assert CALLS == calls + 8
    if name == "print":
        assert capsys.readouterr().out.count("value") == 8


@pytest.mark.parametrize("name", list(BREAKS))
def test_graph_break_explain_and_fullgraph(name):
    fn, reason, rg = BREAKS[name]
    line = line_of(fn.forward if isinstance(fn, type) else fn)
    if isinstance(fn, type):
        ember.manual_seed(0)
        f = fn().double()
    else:
        f = fn
    x = data(0, 3, 4, rg=rg)
    ex = ember.compiler.explain(f, x)
    assert ex.graph_break_count >= 1 and ex.graph_count == 0
    assert any(reason in r and THIS_FILE in r for r in ex.break_reasons), ex.break_reasons
    assert any(f"{THIS_FILE}:{line}" in r for r in ex.break_reasons), (line, ex.break_reasons)
    assert reason in str(ex)
    c = ember.compile(f, fullgraph=True)
    with pytest.raises(GraphBreak) as info:
        c(data(0, 3, 4, rg=rg))
    msg = str(info.value)
    assert reason in msg and f"{THIS_FILE}:{line}" in msg, msg


def test_explain_without_break():
    ex = ember.compiler.explain(f_float, data(0, 4, 3), data(1, 3, 5))
    assert ex.graph_count == 1 and ex.graph_break_count == 0 and ex.break_reasons == []
    assert ex.op_count > 0 and "Graph Count: 1" in str(ex)
    ex2 = ember.compile(f_float).explain(data(0, 4, 3), data(1, 3, 5))
    assert ex2.graph_count == 1
    ex3 = ember._dynamo.explain(f_float, data(0, 4, 3), data(1, 3, 5))
    assert ex3.graph_count == 1


def test_break_inside_submodule_keeps_the_rest_right():
    """A break deep in a model: the compiled model still equals eager over calls and in training."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 6), CountNet2(), nn.Linear(2, 3)).double()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    for i in range(3):
        same_call(cm, e, data(i, 5, 4, rg=True), (m, e))
    assert m[1].count == 3 and e[1].count == 3


class CountNet2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 2)
        self.count = 0

    def forward(self, x):
        self.count += 1
        return self.fc(x).relu()


# ---------------------------------------------------------------------- in-place ops and views
def ip_add_(x, r):
    h = x * 2
    h.add_(1)
    return h.sum(1)


def ip_iadd_residual(x, r):
    h = x.tanh()
    h += r
    return h * h


def ip_relu_(x, r):
    h = x - 0.1
    h.relu_()
    return h * 3, F.relu_(x * r)


def ip_setitem_zero(x, r):
    h = x * 1.5
    h[:, 0] = 0
    return h


def ip_setitem_tensor(x, r):
    h = x * 1.0
    h[1] = r[0] * 2
    return h.exp()


def ip_view_then_inplace(x, r):
    h = x + 0
    v = h.view(-1)
    v.mul_(2)
    return h * r


def ip_row_view(x, r):
    h = x * 1
    v = h[1]
    v.add_(5)
    return h, v * 1


def ip_transposed_view(x, r):
    h = x * 1
    h.t().mul_(r.t())
    return h.sin()


def ip_transposed_view_sub(x, r):
    h = x * 1
    h.t().sub_(r.t())
    return h.sin()


def ip_base_write_seen_by_view(x, r):
    h = x * 2
    v = h[:, :2]
    h.add_(1)
    return v * 1


def ip_chain(x, r):
    h = x.exp()
    h.mul_(r.abs()).add_(1).div_(2)
    return h.log()


def ip_clamp_(x, r):
    h = x * 1
    h.clamp_(-0.5, 0.5)
    return h + r


def ip_input_mutation(x, r):
    x.add_(r)
    return x * 2


def ip_input_view_mutation(x, r):
    x[0].mul_(3)
    return x.sum()


_EMA = {}


def ip_extern_buffer(x, r):
    buf = _EMA["buf"]
    with ember.no_grad():
        buf.mul_(0.9).add_(x.detach().mean(0) * 0.1)
    return x * buf


INPLACE = [ip_add_, ip_iadd_residual, ip_relu_, ip_setitem_zero, ip_setitem_tensor, ip_view_then_inplace, ip_row_view,
           ip_transposed_view, ip_transposed_view_sub, ip_base_write_seen_by_view, ip_chain, ip_clamp_, ip_input_mutation,
           ip_input_view_mutation, ip_extern_buffer]
MUTATES_INPUT = {ip_input_mutation, ip_input_view_mutation}


@pytest.mark.parametrize("mode", ["grad", "plain", "no_grad"])
@pytest.mark.parametrize("fn", INPLACE, ids=lambda f: f.__name__)
def test_inplace_and_views(fn, mode):
    """Compiled equals eager (or the call is a graph break): never a wrong number."""
    rg_x = mode == "no_grad" or (mode == "grad" and fn not in MUTATES_INPUT)
    rg_r = mode != "plain"
    c = ember.compile(fn)
    bufs = {}
    for side in ("compiled", "eager"):
        _EMA["buf"] = ember.ones(4, dtype=F64)
        f = c if side == "compiled" else fn
        res = []
        for i in range(3):
            x, r = data(i, 3, 4, rg=rg_x), data(10 + i, 3, 4, rg=rg_r)
            ctx = ember.no_grad() if mode == "no_grad" else _nullctx()
            with ctx:
                out = f(x, r)
            outs = out if isinstance(out, tuple) else (out,)
            got = [out, x.detach().clone(), r.detach().clone()]
            if mode == "grad" and any(o.requires_grad for o in outs):
                cot = [data(20 + i + k, *o.shape) for k, o in enumerate(outs)]
                try:
                    sum((o * g).sum() for o, g in zip(outs, cot)).backward()
                    got += [x.grad, r.grad]
                except RuntimeError as e:  # an op's saved tensor was modified in place: both sides must refuse
                    got.append(f"RuntimeError: {str(e).split(':')[0]}")
            res.append(got)
        bufs[side] = (res, _EMA["buf"].clone())
    assert_same(bufs["compiled"][0], bufs["eager"][0])
    assert_same(bufs["compiled"][1], bufs["eager"][1], "buffer updated in place")
    assert c.stats["captures"] + c.stats["replays"] + c.stats["eager"] == 3


class _nullctx:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _saved_modified_through_view(x):
    h = x.exp()  # exp keeps its output for backward
    h.t().add_(1)  # ... which is then changed through a view
    return h


def _saved_modified(x):
    h = x.exp()
    h.add_(1)
    return h


@pytest.mark.parametrize("fn", [_saved_modified, _saved_modified_through_view], ids=lambda f: f.__name__)
def test_inplace_on_saved_tensor_raises_as_eager(fn):
    """An in-place change of a value that backward needs: eager's backward raises; so must the compiled
    function's (at every call, replays included), never a gradient from the changed values."""
    c = ember.compile(fn)
    for i in range(3):
        x = data(i, 3, 4, rg=True)
        ye = fn(twin(x))  # (held: see the report about a temporary result)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            ye.sum().backward()
        y = c(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises_as_eager():
    c = ember.compile(ip_input_mutation)
    x, r = data(0, 3, 4, rg=True), data(1, 3, 4)
    with pytest.raises(RuntimeError) as eager_err:
        ip_input_mutation(twin(x), r)
    with pytest.raises(RuntimeError) as comp_err:
        c(x, r)
    assert str(comp_err.value) == str(eager_err.value)


# ---------------------------------------------------------------------- recurrent and transformer layers
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers(kind):
    ember.manual_seed(0)
    m = getattr(nn, kind)(4, 5, num_layers=2, batch_first=True).double()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    for i in range(3):
        x = data(i, 3, 6, 4, rg=True)
        xe = twin(x)
        if i == 2:  # with an initial state
            h0 = data(40, 2, 3, 5, rg=True)
            state = (h0, data(41, 2, 3, 5)) if kind == "LSTM" else h0
            statee = (twin(h0), state[1]) if kind == "LSTM" else twin(h0)
            out, oute = cm(x, state), e(xe, statee)
        else:
            out, oute = cm(x), e(xe)
        assert_same(out, oute)

        def loss(o):
            y, h = o
            hs = h if isinstance(h, tuple) else (h,)
            return (y * data(30 + i, *y.shape)).sum() + sum((t * t).sum() for t in hs)

        loss(out).backward()
        loss(oute).backward()
        assert_same(x.grad, xe.grad, "input grad")
        assert_grads(m, e)
        if i == 2:
            assert_same(h0.grad, (statee[0] if kind == "LSTM" else statee).grad, "h0 grad")
    with ember.no_grad():
        assert_same(cm(data(9, 3, 6, 4)), e(data(9, 3, 6, 4)))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(norm_first):
    ember.manual_seed(0)
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, batch_first=True,
                                   norm_first=norm_first).double()
    e = copy.deepcopy(m)
    cm = ember.compile(m)
    for i in range(3):
        x = data(i, 2, 5, 8, rg=True)
        xe = twin(x)
        ember.manual_seed(i)
        out = cm(x)
        ember.manual_seed(i)
        oute = e(xe)
        assert_same(out, oute)
        cot = data(30 + i, 2, 5, 8)
        (out * cot).sum().backward()
        (oute * cot).sum().backward()
        assert_same(x.grad, xe.grad, "input grad")
        assert_grads(m, e)
    cm.eval()
    e.eval()
    with ember.no_grad():
        assert_same(cm(data(7, 2, 5, 8)), e(data(7, 2, 5, 8)))


# ---------------------------------------------------------------------- reset, is_compiling, ember._dynamo
def test_reset_clears_caches():
    c1, c2 = ember.compile(_scaled), ember.compile(_plain)
    x = data(0, 3, 4)
    c1(x, 2.0)
    c2(x)
    assert c1.cache and c2.cache
    ember.compiler.reset()
    assert not c1.cache and not c2.cache
    assert_same(c1(x, 2.0), _scaled(x, 2.0))
    assert c1.stats["captures"] == 2
    c1(x, 2.0)
    ember._dynamo.reset()
    assert not c1.cache
    assert ember._dynamo.reset is ember.compiler.reset


def test_is_compiling():
    seen = []

    def f(x):
        seen.append(ember.compiler.is_compiling())
        return x * 2

    assert ember.compiler.is_compiling() is False
    c = ember.compile(f)
    c(data(0, 2))
    assert seen == [True]
    assert ember.compiler.is_compiling() is False
    f(data(0, 2))
    assert seen == [True, False]


# ---------------------------------------------------------------------- compile() arguments
def test_compile_argument_errors():
    with pytest.raises(RuntimeError, match="mode"):
        ember.compile(_plain, mode="default", options={})
    with pytest.raises(RuntimeError, match="mode"):
        ember.compile(_plain, mode="fastest")
    with pytest.raises(ValueError, match="backend"):
        ember.compile(_plain, backend="tvm")
    with pytest.raises(RuntimeError, match="option"):
        ember.compile(_plain, options={"triton.cudagraphs": True})
    with pytest.raises(TypeError):
        ember.compile(_plain, fullgraph="yes")
    with pytest.raises(TypeError):
        ember.compile(_plain, dynamic="maybe")
    with pytest.raises(RuntimeError):
        ember.compile(5)
    # the same checks apply to the decorator form and to Module.compile()
    with pytest.raises(RuntimeError):
        ember.compile(mode="fastest")
    with pytest.raises(ValueError):
        mlp().compile(backend="tvm")


def test_compile_accepted_arguments_and_disable():
    x = data(0, 3, 4)
    for kw in [dict(mode="reduce-overhead"), dict(mode="max-autotune"), dict(backend="inductor"),
               dict(backend="eager"), dict(options={})]:
        assert_same(ember.compile(_plain, **kw)(x), _plain(x))
    assert ember.compile(_plain, disable=True) is _plain
    m = mlp()
    assert ember.compile(m, disable=True) is m
    assert ember.compile(disable=True)(_plain) is _plain
    m.compile(disable=True)
    assert m.__dict__.get("_compiled_call") is None
    assert_same(m.eval()(data(0, 2, 6)), copy.deepcopy(m)(data(0, 2, 6)))


def test_training_step_on_cuda_with_closure_tensors(cuda):
    """A step reading its batch from a closure on a CUDA device (the real one, or the fake) replays in the
    static form and equals eager: the target's device array reaches cross_entropy without the tensor."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3)).to(cuda)
    e = copy.deepcopy(m)
    opt, opte = ember.optim.Adam(m.parameters()), ember.optim.Adam(e.parameters())
    x, y = ember.randn(5, 8, device=cuda), ember.randint(0, 3, (5,), device=cuda)

    def step(model, o):
        o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        return loss

    c = ember.compile(step)
    for i in range(3):
        ember.manual_seed(i)
        a = c(m, opt)
        ember.manual_seed(i)
        b = step(e, opte)
        assert float(a) == float(b)
    assert c.stats == {"captures": 1, "replays": 2, "eager": 0}, c.stats
    assert c.cache[c.last_key][0].program.form == "static"
    for p, q in zip(m.parameters(), e.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())


def test_other_threads_ops_are_not_captured():
    """While one thread captures, ops another thread runs at the same time are not part of its program."""
    import threading
    stop = threading.Event()

    def busy():
        a = ember.randn(3)
        while not stop.is_set():
            a * 2 + 1

    t = threading.Thread(target=busy)
    t.start()
    try:
        f = ember.compile(lambda x: (x * 3).exp())
        x = data(0, 3, 4)
        for _ in range(5):
            assert_same(f(x), (x * 3).exp())
    finally:
        stop.set()
        t.join()
    assert [i.name() for i in f.cache[f.last_key][0].trace.instrs] == ["Mul", "Exp"]


# ---------------------------------------------------------------------- drawing a captured graph
def test_explain_draws_the_graph_before_and_after_dead_code_elimination():
    lin = nn.Linear(3, 2)

    def f(x):
        h = lin(x).relu()
        h.exp()  # read by nothing: the optimiser drops it
        return h.sum()
    e = ember.compiler.explain(f, ember.randn(4, 3))
    before, after = e.to_dot(optimised=False), e.to_dot()
    assert before.startswith("digraph program {") and after.rstrip().endswith("}")
    assert '"Exp"' in before and '"Exp"' not in after
    for src in (before, after):
        assert 'in0 [label="input 0\\n(4, 3)"' in src and "in0 -> i0;" in src  # the input feeds Linear
        assert 'e0 [label="extern 0\\n(2, 3)"' in src and "e0 -> i0;" in src and "e1 -> i0;" in src  # weight, bias
        assert "i0 -> i1;" in src  # Linear -> Relu
    assert "i1 -> i2;" in after and "i2 -> out;" in after  # Relu -> Sum -> result
    assert "i1 -> i3;" in before and "i3 -> out;" in before


def test_explain_draw_of_a_broken_capture_and_bad_format():
    def f(x):
        return x.sum().item()
    e = ember.compiler.explain(f, ember.randn(3))
    with pytest.raises(RuntimeError, match="nothing to draw, the capture broke"):
        e.to_dot()
    e2 = ember.compiler.explain(lambda x: x * 2, ember.randn(3))
    with pytest.raises(ValueError, match="cannot tell the image format"):
        e2.render("graph.txt")
