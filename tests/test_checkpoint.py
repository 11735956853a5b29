"""Activation checkpointing (`ember.utils.checkpoint`): gradients equal to the plain call's (bit for bit in
float64, dropout included, both variants), what reaches the parameters a region reads from its closure, nesting,
`autograd.grad`, keyword arguments and structured outputs, the determinism check, the errors (their types
checked against PyTorch 2.13 where it is installed), parity of a checkpointed model's gradients with PyTorch,
and the memory saved (tracemalloc peaks)."""
from __future__ import annotations

import contextlib
import gc
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import ember
import ember.utils.checkpoint as ckpt
from ember import nn
from ember.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential
from helpers import need_torch, torch

F = nn.functional
MODES = [pytest.param(False, id="non_reentrant"), pytest.param(True, id="reentrant")]


def mlp(dropout: float = 0.3, width: int = 6, seed: int = 0) -> nn.Sequential:
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, width), nn.Tanh(), nn.Dropout(dropout), nn.Linear(width, width), nn.GELU(),
                         nn.Dropout(dropout), nn.Linear(width, 3)).double()


def leaf(*shape, seed: int = 1, requires_grad: bool = True) -> ember.Tensor:
    a = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(a, dtype=ember.float64, requires_grad=requires_grad)


def grads_of(tensors) -> list:
    return [None if t.grad is None else t.grad.numpy().copy() for t in tensors]


def step(model, x, run, seed: int = 7):
    """Forward (through `run(model, x)`) and backward of a weighted sum, from RNG seed `seed`; returns the
    output's values, the gradients of x and of every parameter, and the next random draw after it all."""
    for p in model.parameters():
        p.grad = None
    x.grad = None
    ember.manual_seed(seed)
    y = run(model, x)
    (y * ember.linspace(-1, 1, y.numel(), dtype=ember.float64).reshape(y.shape)).sum().backward()
    return y.detach().numpy(), grads_of([x, *model.parameters()]), ember.rand(3).numpy()


def assert_same(a, b):
    ya, ga, ra = a
    yb, gb, rb = b
    np.testing.assert_array_equal(ya, yb)
    for u, v in zip(ga, gb):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_array_equal(ra, rb)  # the recomputation did not shift the random draws after it


# ---------------------------------------------------------------------- gradients of the plain call
def test_importable_as_in_pytorch():
    import ember.utils
    assert ember.utils.checkpoint.checkpoint is checkpoint
    assert issubclass(CheckpointError, RuntimeError)


@pytest.mark.parametrize("reentrant", MODES)
def test_dropout_mlp_gradients_bitwise(reentrant):
    model, x = mlp(), leaf(5, 4)
    plain = step(model, x, lambda m, a: m(a))
    got = step(model, x, lambda m, a: checkpoint(m, a, use_reentrant=reentrant))
    assert_same(plain, got)
    assert not np.array_equal(plain[0], step(model, x, lambda m, a: m(a), seed=8)[0])  # dropout is really on


def test_preserve_rng_state_false_recomputes_other_masks():
    model, x = mlp(dropout=0.5, width=16), leaf(8, 4)
    plain = step(model, x, lambda m, a: m(a))
    got = step(model, x, lambda m, a: checkpoint(m, a, use_reentrant=False, preserve_rng_state=False))
    np.testing.assert_array_equal(plain[0], got[0])  # the forward is the same...
    assert not np.array_equal(plain[1][1], got[1][1])  # ...but backward differentiated other masks


@pytest.mark.parametrize("reentrant", MODES)
@pytest.mark.parametrize("segments", [1, 2, 3, 7])
def test_checkpoint_sequential(reentrant, segments):
    model, x = mlp(), leaf(5, 4)
    plain = step(model, x, lambda m, a: m(a))
    got = step(model, x, lambda m, a: checkpoint_sequential(m, segments, a, use_reentrant=reentrant))
    assert_same(plain, got)
    listed = step(model, x, lambda m, a: checkpoint_sequential(list(m), segments, a, use_reentrant=reentrant))
    assert_same(plain, listed)


def test_checkpoint_sequential_checkpoints_all_segments_but_the_last():
    model, x = mlp(), leaf(5, 4)
    y = checkpoint_sequential(model, 3, x, use_reentrant=False)  # segments [0, 1], [2, 3], [4, 5, 6]
    assert y.grad_fn.name() == "LinearBackward"  # the last segment runs as usual
    chain = y.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]
    assert chain.name() == "CheckpointBackward"
    first = [n for n, _ in chain.next_functions if n.name() != "AccumulateGrad"]
    assert [n.name() for n in first] == ["CheckpointBackward"]  # (and the parameters of Linear 3)
    assert all(n.name() == "AccumulateGrad" for n, _ in first[0].next_functions)  # x and the parameters


def test_autograd_grad_reaches_parameters_and_inputs():
    model, x = mlp(), leaf(5, 4)
    params = list(model.parameters())
    ember.manual_seed(3)
    want = ember.autograd.grad(model(x).square().sum(), [x, *params])
    ember.manual_seed(3)
    y = checkpoint(model, x, use_reentrant=False)
    got = ember.autograd.grad(y.square().sum(), [x, *params])
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert all(p.grad is None for p in params) and x.grad is None  # autograd.grad leaves .grad alone


def test_backward_inputs_selects_gradients():
    model, x = mlp(dropout=0.0), leaf(5, 4)
    w = model[0].weight
    checkpoint(model, x, use_reentrant=False).sum().backward(inputs=[w])
    want = ember.autograd.grad(model(x).sum(), [w])[0]
    np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert x.grad is None and model[-1].weight.grad is None


def test_parameters_reached_without_input_requiring_grad():
    model, x = mlp(dropout=0.0), leaf(5, 4, requires_grad=False)
    y = checkpoint(model, x, use_reentrant=False)
    assert y.requires_grad
    y.sum().backward()
    got = grads_of(model.parameters())
    for p in model.parameters():
        p.grad = None
    model(x).sum().backward()
    for a, b in zip(got, grads_of(model.parameters())):
        np.testing.assert_array_equal(a, b)


def test_nested_checkpoints():
    inner_lin, outer_lin = nn.Linear(4, 4).double(), nn.Linear(4, 4).double()
    x = leaf(3, 4)
    params = [x, *inner_lin.parameters(), *outer_lin.parameters()]

    def inner(a):
        return F.dropout(inner_lin(a).relu(), 0.4, True)

    def outer(a, nested):
        h = outer_lin(a).tanh()
        return (checkpoint(inner, h, use_reentrant=False) if nested else inner(h)) * h

    ember.manual_seed(5)
    want = ember.autograd.grad(outer(x, False).sum(), params)
    ember.manual_seed(5)
    y = checkpoint(outer, x, True, use_reentrant=False)
    got = ember.autograd.grad(y.sum(), params)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_keyword_arguments_and_structured_outputs():
    a, b, w = leaf(3, seed=1), leaf(3, seed=2), leaf(3, seed=3)

    def fn(u, v, *, scale, shift=0.0):
        return {"sum": (u * v * scale).sum(), "pair": (u + w, 3, v.detach()), "raw": w}

    out = checkpoint(fn, a, b, scale=2.0, shift=1.0, use_reentrant=False)
    assert out["pair"][1] == 3 and not out["pair"][2].requires_grad
    assert out["sum"].grad_fn.name() == "CheckpointBackward"
    (out["sum"] + (out["pair"][0] * out["raw"]).sum()).backward()
    an, bn, wn = a.detach().numpy(), b.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(a.grad.numpy(), 2 * bn + wn)
    np.testing.assert_allclose(b.grad.numpy(), 2 * an)
    np.testing.assert_allclose(w.grad.numpy(), an + 2 * wn)


@pytest.mark.parametrize("reentrant", MODES)
def test_tuple_outputs_some_unused(reentrant):
    x = leaf(4)
    y1, y2 = checkpoint(lambda a: (a.exp(), a.sin()), x, use_reentrant=reentrant)
    y2.sum().backward()  # y1 gets no gradient
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()))


def test_argument_returned_or_passed_twice():
    x = leaf(3)
    y = checkpoint(lambda a, b: (a, a * b), x, x, use_reentrant=False)
    (y[0] + y[1]).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 + 2 * x.detach().numpy())


class Cube(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


def test_in_place_ops_custom_function_and_reentrant_region_inside():
    lin = nn.Linear(4, 4).double()
    x = leaf(3, 4)
    params = [x, *lin.parameters()]

    def f(a):
        h = lin(a)
        h.relu_()
        h = Cube.apply(h) + F.relu(h * 2, inplace=True)
        return checkpoint(lambda b: lin(b).tanh(), h, use_reentrant=True)  # (accumulates into lin's .grad itself)

    f(x).sum().backward()
    want = grads_of(params)
    for p in params:
        p.grad = None
    checkpoint(f, x, use_reentrant=False).sum().backward()
    for a, b in zip(want, grads_of(params)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    with pytest.raises(RuntimeError, match="use_reentrant=True.*autograd.grad"):  # as without the outer region
        ember.autograd.grad(checkpoint(f, x, use_reentrant=False).sum(), [x])


def test_tensor_with_history_read_from_closure():
    """A closure tensor computed before the call: its own graph gets the region's gradient (once) and stays usable."""
    x, w = leaf(3, 4, seed=1), leaf(4, 4, seed=2)
    h = (w * 2).tanh()
    y = checkpoint(lambda a: (a @ h).sin(), x, use_reentrant=False)
    assert {n.name() for n, _ in y.grad_fn.next_functions} == {"AccumulateGrad", "TanhBackward"}
    loss = y.sum() + h.sum()
    gx, gw = ember.autograd.grad(loss, [x, w])
    x2, w2 = leaf(3, 4, seed=1), leaf(4, 4, seed=2)
    h2 = (w2 * 2).tanh()
    want = ember.autograd.grad((x2 @ h2).sin().sum() + h2.sum(), [x2, w2])
    np.testing.assert_array_equal(gx.numpy(), want[0].numpy())
    np.testing.assert_array_equal(gw.numpy(), want[1].numpy())


def test_shared_parameter_and_hooks_run_as_without_checkpoint():
    """A parameter read inside and outside the region: gradients summed, its hook called as often as without
    checkpointing (the recomputation's own backward does not call it)."""
    w = leaf(4, 4)
    calls = []
    w.register_hook(lambda g: calls.append(g.numpy().copy()))
    x = leaf(2, 4, seed=5)
    (x @ w).sum().backward()
    (checkpoint(lambda a: a @ w, x, use_reentrant=False).sum()).backward()
    assert len(calls) == 2
    np.testing.assert_array_equal(calls[0], calls[1])
    w.grad = None
    calls.clear()
    ((x @ w).sum() + w.sum()).backward()
    plain = (len(calls), w.grad.numpy().copy())
    w.grad = None
    calls.clear()
    (checkpoint(lambda a: a @ w, x, use_reentrant=False).sum() + w.sum()).backward()
    assert len(calls) == plain[0]
    np.testing.assert_array_equal(w.grad.numpy(), plain[1])


def test_activation_kept_by_a_hook():
    """A forward hook keeps the region's output alive: still the same gradients."""
    lin = nn.Linear(4, 4).double()
    kept = []
    lin.register_forward_hook(lambda m, i, o: kept.append(o))
    x = leaf(2, 4)
    checkpoint(lambda a: lin(a).exp(), x, use_reentrant=False).sum().backward()
    got = x.grad.numpy().copy()
    x.grad = None
    lin(x).exp().sum().backward()
    np.testing.assert_array_equal(got, x.grad.numpy())
    assert len(kept) == 3  # forward, recomputation, plain call


def test_double_backward():
    x, w = leaf(2), leaf(2, seed=2)
    y = checkpoint(lambda a: (a ** 3 * w).sum(), x, use_reentrant=False)
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    g.sum().backward()
    xn, wn = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 6 * xn * wn)
    np.testing.assert_allclose(w.grad.numpy(), 3 * xn ** 2)


def test_no_grad_and_outputs_without_grad():
    x = leaf(3)
    with ember.no_grad():
        assert checkpoint(lambda a: a * 2, x, use_reentrant=False).grad_fn is None
    out = checkpoint(lambda a: (a.detach() * 2, 5), x, use_reentrant=False)
    assert not out[0].requires_grad and out[1] == 5


def test_region_graph_is_not_kept():
    """Between forward and backward the region's own nodes are gone: only CheckpointBackward remains, with one
    edge per argument and parameter."""
    model, x = mlp(), leaf(5, 4)
    made = []
    for m in model:
        m.register_forward_hook(lambda mod, i, o: made.append(weakref.ref(o.grad_fn)))
    y = checkpoint(model, x, use_reentrant=False)
    gc.collect()
    assert len(made) == len(model) and all(r() is None for r in made)
    assert y.grad_fn.name() == "CheckpointBackward"
    assert len(y.grad_fn.next_functions) == 1 + len(list(model.parameters()))
    y.sum().backward()  # (the recomputation made them again, and they are gone again)
    gc.collect()
    assert len(made) == 2 * len(model) and all(r() is None for r in made)


def test_context_fn():
    seen = []

    @contextlib.contextmanager
    def note(what):
        seen.append(what)
        yield

    x = leaf(3)
    y = checkpoint(lambda a: a.exp(), x, use_reentrant=False, context_fn=lambda: (note("fwd"), note("re")))
    assert seen == ["fwd"]
    y.sum().backward()
    assert seen == ["fwd", "re"]

    @contextlib.contextmanager
    def swallow():
        try:
            yield
        except ValueError:
            pass

    def bad(a):
        raise ValueError("inside")

    with pytest.raises(RuntimeError, match="suppressed"):
        checkpoint(bad, x, use_reentrant=False, context_fn=lambda: (swallow(), contextlib.nullcontext()))


# ---------------------------------------------------------------------- determinism check and errors
def changing(counter: list):
    def fn(a):
        counter.append(1)
        return a.repeat(len(counter), 1).exp().sum()
    return fn


def test_determinism_check():
    x = leaf(2, 3)
    y = checkpoint(changing([]), x, use_reentrant=False)
    with pytest.raises(CheckpointError, match=r"in_shape \[2, 3\] in the forward, in_shape \[4, 3\]"):
        y.backward()
    y = checkpoint(changing([]), x, use_reentrant=False, determinism_check="none")
    y.backward()  # same graph, other shapes: differentiates the recomputation
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()))
    x.grad = None
    with ckpt.set_checkpoint_debug_enabled(True):
        y = checkpoint(changing([]), x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="(?s)Ops recorded by the original forward.*Exp.*created at"):
        y.backward()


def test_graph_change_is_caught_even_without_metadata_check():
    flag = []

    def fn(a):
        flag.append(1)
        return a.exp() if len(flag) == 1 else a.exp().exp()

    y = checkpoint(fn, leaf(3), use_reentrant=False, determinism_check="none")
    with pytest.raises(CheckpointError, match="did not repeat the checkpointed forward"):
        y.sum().backward()


@pytest.mark.parametrize("reentrant", MODES)
def test_backward_twice_needs_retain_graph(reentrant):
    x = leaf(3)
    y = checkpoint(lambda a: a.exp(), x, use_reentrant=reentrant).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_argument_modified_in_place_before_backward():
    x = leaf(3)
    h = x * 1
    y = checkpoint(lambda a: a.exp(), h, use_reentrant=False).sum()
    with ember.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*CheckpointBackward"):
        y.backward()


def test_missing_use_reentrant_warns_and_is_reentrant():
    x = leaf(3)
    with pytest.warns(UserWarning, match="use_reentrant"):
        y = checkpoint(lambda a: a * 2, x)
    assert y.grad_fn.name() == "CheckpointFunctionBackward"
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint_sequential([nn.Identity()], 1, x)
    if torch is not None:  # the oracle: PyTorch 2.13 warns too, and runs the reentrant variant
        need_torch("torch.utils.checkpoint")
        with pytest.warns(UserWarning, match="use_reentrant"):
            ty = torch.utils.checkpoint.checkpoint(lambda a: a * 2, torch.ones(3, requires_grad=True))
        assert type(ty.grad_fn).__name__ == "CheckpointFunctionBackward"


def test_reentrant_without_input_requiring_grad():
    lin = nn.Linear(3, 3).double()
    with pytest.warns(UserWarning, match="none of the tensor arguments requires grad"):
        y = checkpoint(lin, leaf(2, 3, requires_grad=False), use_reentrant=True)
    assert not y.requires_grad


def _case_reentrant_grad(t):
    x = t.ones(3, dtype=t.float64, requires_grad=True)
    y = t.utils.checkpoint.checkpoint(lambda a: a.exp(), x, use_reentrant=True).sum()
    t.autograd.grad(y, [x])


def _case_reentrant_backward_inputs(t):
    x = t.ones(3, dtype=t.float64, requires_grad=True)
    t.utils.checkpoint.checkpoint(lambda a: a.exp(), x, use_reentrant=True).sum().backward(inputs=[x])


def _seq(t):
    return t.nn.Sequential(t.nn.Linear(3, 3), t.nn.Linear(3, 3))


ERRORS = {  # name: (fn(t), exception, ember's message must match)
    "reentrant_kwargs": (lambda t: t.utils.checkpoint.checkpoint(lambda a, b=1: a * b, t.ones(2, requires_grad=True),
                                                                 b=2, use_reentrant=True),
                         ValueError, "Unexpected keyword arguments: b"),
    "reentrant_context_fn": (lambda t: t.utils.checkpoint.checkpoint(
        lambda a: a, t.ones(2, requires_grad=True), use_reentrant=True, context_fn=lambda: (None, None)),
        ValueError, "context_fn"),
    "reentrant_debug": (lambda t: t.utils.checkpoint.checkpoint(lambda a: a, t.ones(2, requires_grad=True),
                                                                use_reentrant=True, debug=True),
                        ValueError, "debug"),
    "bad_determinism_check": (lambda t: t.utils.checkpoint.checkpoint(
        lambda a: a, t.ones(2, requires_grad=True), use_reentrant=False, determinism_check="strict"),
        ValueError, "determinism_check.*'strict'"),
    "not_callable": (lambda t: t.utils.checkpoint.checkpoint(3, t.ones(2), use_reentrant=False),
                     TypeError, "callable.*int"),
    "reentrant_autograd_grad": (_case_reentrant_grad, RuntimeError, r"autograd\.grad"),
    "reentrant_backward_inputs": (_case_reentrant_backward_inputs, RuntimeError, "inputs"),
    "segments_too_many": (lambda t: t.utils.checkpoint.checkpoint_sequential(_seq(t), 3, t.ones(1, 3),
                                                                             use_reentrant=False),
                          ValueError, "segments.*between 1 and.*2.*got 3"),
    "segments_float": (lambda t: t.utils.checkpoint.checkpoint_sequential(_seq(t), 2.0, t.ones(1, 3),
                                                                          use_reentrant=False),
                       TypeError, "segments must be an int, got float"),
    "sequential_kwargs": (lambda t: t.utils.checkpoint.checkpoint_sequential(_seq(t), 1, t.ones(1, 3),
                                                                             use_reentrant=False, foo=1),
                          ValueError, "Unexpected keyword arguments: foo"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_pytorch(name):
    fn, exc, match = ERRORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            fn(ember)
        if torch is not None:
            need_torch("torch.utils.checkpoint")
            with pytest.raises(exc):
                fn(torch)


def test_segments_zero():
    """PyTorch divides by it (ZeroDivisionError); ember says what is wrong, with PyTorch's type for a bad value."""
    with pytest.raises(ValueError, match="segments.*got 0"):
        checkpoint_sequential(_seq(ember), 0, ember.ones(1, 3), use_reentrant=False)


# ---------------------------------------------------------------------- devices, capture, lazy
def test_cuda_dropout_masks_replayed(cuda):
    x = ember.randn(64, 8, dtype=ember.float64).to(cuda).requires_grad_()
    w = ember.randn(64, 8, dtype=ember.float64).to(cuda)
    for reentrant in (False, True):
        x.grad = None
        y = checkpoint(lambda a: F.dropout(a, 0.5, True), x, use_reentrant=reentrant)
        (y * w).sum().backward()
        kept = y.detach().cpu().numpy() != 0
        np.testing.assert_array_equal(x.grad.cpu().numpy(), w.cpu().numpy() * kept / 0.5)


def test_inside_compiled_function():
    lin = nn.Linear(4, 4).double()
    x = leaf(3, 4)

    def f(a):
        return checkpoint(lambda b: lin(b).tanh(), a, use_reentrant=False).sum()

    compiled = ember.compile(f)
    for _ in range(2):
        x.grad = None
        compiled(x).backward()
        got = x.grad.numpy().copy()
        x.grad = None
        f(x).backward()
        np.testing.assert_array_equal(got, x.grad.numpy())


def test_lazy_mode():
    model, x = mlp(), leaf(5, 4)
    plain = step(model, x, lambda m, a: m(a))
    with ember.lazy():
        got = step(model, x, lambda m, a: checkpoint(m, a, use_reentrant=False))
    assert_same(plain, got)


# ---------------------------------------------------------------------- PyTorch parity
@pytest.mark.parametrize("reentrant", MODES)
def test_gradients_match_pytorch(reentrant):
    T = need_torch("torch.utils.checkpoint") and torch
    model, x = mlp(dropout=0.0), leaf(5, 4)
    tmodel = T.nn.Sequential(T.nn.Linear(4, 6), T.nn.Tanh(), T.nn.Dropout(0.0), T.nn.Linear(6, 6), T.nn.GELU(),
                             T.nn.Dropout(0.0), T.nn.Linear(6, 3)).double()
    with T.no_grad():
        for p, q in zip(model.parameters(), tmodel.parameters()):
            q.copy_(T.from_numpy(p.detach().numpy()))
    tx = T.from_numpy(x.detach().numpy()).requires_grad_()
    cot = np.random.default_rng(4).standard_normal((5, 3))
    (checkpoint(model, x, use_reentrant=reentrant) * ember.tensor(cot)).sum().backward()
    (T.utils.checkpoint.checkpoint(tmodel, tx, use_reentrant=reentrant) * T.from_numpy(cot)).sum().backward()
    for a, b in zip([x, *model.parameters()], [tx, *tmodel.parameters()]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
    (gx,) = ember.autograd.grad(checkpoint_sequential(model, 2, x, use_reentrant=False).sum(), [x])
    (tgx,) = T.autograd.grad(T.utils.checkpoint.checkpoint_sequential(tmodel, 2, tx, use_reentrant=False).sum(), [tx])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- memory
def peak_memory_mb(checkpointed: bool, layers: int = 16, width: int = 256, batch: int = 64) -> float:
    """tracemalloc's peak (MB) over one forward+backward of an MLP of `layers` layers (Linear, LayerNorm, GELU,
    Dropout), each one checkpointed or not. A first step on two rows, unmeasured, creates the `.grad` arrays (the
    measured step accumulates into them) and whatever a first call sets up: the peak is then the activations kept
    for backward, plus transients."""
    ember.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(), nn.Dropout(0.1))
                            for _ in range(layers)])
    x = ember.randn(batch, width)

    def one_step(h):
        for block in model:
            h = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
        h.square().mean().backward()

    one_step(x[:2])
    gc.collect()
    tracemalloc.start()
    try:
        one_step(x)
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def test_checkpointing_lowers_peak_memory():
    plain, checkpointed = peak_memory_mb(False), peak_memory_mb(True)
    assert checkpointed < 0.8 * plain, (plain, checkpointed)


def test_recomputation_runs_under_the_forwards_autocast():
    """A region run under autocast and differentiated outside it recomputes under the same autocast settings
    (PyTorch's checkpoint restores them too): the gradients equal the unchecked region's."""
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 3)
    x = ember.randn(2, 4, requires_grad=True)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = checkpoint(lin, x, use_reentrant=False)
    assert y.dtype == ember.bfloat16
    y.float().sum().backward()
    g_ckpt = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = None
    lin.weight.grad = None
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = lin(x)
    y.float().sum().backward()
    assert np.array_equal(g_ckpt[0].numpy(), x.grad.numpy())
    assert np.array_equal(g_ckpt[1].numpy(), lin.weight.grad.numpy())
