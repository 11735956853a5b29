"""End-to-end parity across nn, optim, lr_scheduler and checkpoints: whole models and training loops.

Each architecture is written once, as a PyTorch user writes it, by `define(lib)`: the same class
bodies are instantiated with `lib = torch` and with `lib = ember`, so the two models differ only in
the module namespace. Weights are moved across through `state_dict()` (tensors converted with
`.numpy()`), and outputs, gradients, buffers, optimizer trajectories, hooks and printing are compared.
The per-layer, per-optimizer and per-scheduler unit tests live in the other test_nn_*/test_optim/
test_lr_scheduler/test_serialization files; this file tests how they work together.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

import ember
from helpers import need_torch, requires_torch, torch

pytestmark = requires_torch


# ====================================================================== the architectures
def define(lib) -> types.SimpleNamespace:
    """The model classes, written against `lib` (torch or ember) exactly as a PyTorch user would."""
    nn = lib.nn
    F = lib.nn.functional

    class MLP(nn.Module):
        def __init__(self, n_in: int = 20, hidden: int = 32, n_out: int = 5, p: float = 0.25) -> None:
            super().__init__()
            self.fc1 = nn.Linear(n_in, hidden)
            self.drop1 = nn.Dropout(p)
            self.fc2 = nn.Linear(hidden, hidden)
            self.drop2 = nn.Dropout(p)
            self.out = nn.Linear(hidden, n_out)

        def forward(self, x):
            x = self.drop1(F.relu(self.fc1(x)))
            x = self.drop2(F.relu(self.fc2(x)))
            return self.out(x)

    class W3CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            )
            self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(1568, 128), nn.ReLU(), nn.Linear(128, 10))

        def forward(self, x):
            return self.classifier(self.features(x))

    class NormCNN(nn.Module):
        def __init__(self, n_classes: int = 6) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
            self.pool = nn.AvgPool2d(2)
            self.body = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GroupNorm(4, 16), nn.ReLU())
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.bn = nn.BatchNorm2d(8, momentum=0.3)
            self.gap = nn.AdaptiveAvgPool2d((2, 2))
            self.head = nn.Linear(32, n_classes)

        def forward(self, x):
            x = self.pool(self.stem(x))
            x = F.relu(self.bn(self.up(self.body(x))))
            return self.head(lib.flatten(self.gap(x), 1))

    class Residual(nn.Module):
        def __init__(self, fn) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    class ResMLP(nn.Module):
        def __init__(self, n_in: int = 24, width: int = 32, n_blocks: int = 2, n_out: int = 7) -> None:
            super().__init__()
            self.inp = nn.Linear(n_in, width)
            self.blocks = nn.ModuleList(
                Residual(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                                       nn.Linear(2 * width, width)))
                for _ in range(n_blocks))
            self.norm = nn.LayerNorm(width, eps=1e-6)
            self.head = nn.Linear(width, n_out)

        def forward(self, x):
            x = self.inp(x)
            for block in self.blocks:
                x = block(x)
            return self.head(F.gelu(self.norm(x), approximate="tanh"))

    class TextClassifier(nn.Module):
        def __init__(self, vocab: int = 40, dim: int = 12, n_classes: int = 4) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, dim, padding_idx=0)
            self.fc = nn.Linear(dim, n_classes)

        def forward(self, tokens):
            mask = (tokens != 0).unsqueeze(-1).to(self.embed.weight.dtype)
            pooled = (self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.fc(pooled)

    return types.SimpleNamespace(MLP=MLP, W3CNN=W3CNN, NormCNN=NormCNN, Residual=Residual, ResMLP=ResMLP,
                                 TextClassifier=TextClassifier)


T = define(torch) if torch is not None else None
E = define(ember)


def make_input(name: str, batch: int = 4, seed: int = 0, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """A batch (inputs, class targets) for the model `name`."""
    rng = np.random.default_rng(seed)
    if name == "MLP":
        return rng.standard_normal((batch, 20)).astype(dtype), rng.integers(0, 5, batch)
    if name == "W3CNN":
        return rng.standard_normal((batch, 1, 28, 28)).astype(dtype), rng.integers(0, 10, batch)
    if name == "NormCNN":
        return rng.standard_normal((batch, 3, 16, 16)).astype(dtype), rng.integers(0, 6, batch)
    if name == "ResMLP":
        return rng.standard_normal((batch, 24)).astype(dtype), rng.integers(0, 7, batch)
    if name == "TextClassifier":  # token ids with padding (0) at the end; every row keeps a real token
        tokens = rng.integers(1, 40, (batch, 9))
        for i, n in enumerate(rng.integers(1, 9, batch)):
            tokens[i, n:] = 0
        tokens[0, 3] = 0  # a pad in the middle, too
        return tokens, rng.integers(0, 4, batch)
    raise KeyError(name)


MODELS = ["MLP", "W3CNN", "NormCNN", "ResMLP", "TextClassifier"]


def tdtype(np_dtype):
    return getattr(torch, np.dtype(np_dtype).name)


def edtype(np_dtype):
    return getattr(ember, np.dtype(np_dtype).name)


def to_ember_sd(sd) -> dict:
    return {k: ember.from_numpy(v.detach().numpy().copy()) for k, v in sd.items()}


def to_torch_sd(sd) -> dict:
    return {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in sd.items()}


def pair(name: str, dtype=np.float64, seed: int = 0, **kwargs):
    """A torch model (seeded init) and an ember model carrying the same weights, both in `dtype`."""
    torch.manual_seed(seed)
    tm = getattr(T, name)(**kwargs).to(tdtype(dtype))
    em = getattr(E, name)(**kwargs).to(edtype(dtype))
    em.load_state_dict(to_ember_sd(tm.state_dict()))
    return tm, em


def tol(dtype) -> dict:
    return dict(rtol=1e-9, atol=1e-10) if np.dtype(dtype) == np.float64 else dict(rtol=1e-5, atol=1e-5)


def both_inputs(x: np.ndarray, requires_grad: bool = True):
    floating = x.dtype.kind == "f"
    xe = ember.from_numpy(x.copy()).requires_grad_(requires_grad and floating)
    xt = torch.from_numpy(x.copy()).requires_grad_(requires_grad and floating)
    return xe, xt


def assert_same_state(em, tm, **tolerances) -> None:
    esd, tsd = em.state_dict(), tm.state_dict()
    assert list(esd) == list(tsd)
    for k in tsd:
        assert tuple(esd[k].shape) == tuple(tsd[k].shape), k
        np.testing.assert_allclose(esd[k].numpy(), tsd[k].numpy(), err_msg=k, **tolerances)


# ====================================================================== 1. architectures
@pytest.mark.parametrize("name", MODELS)
def test_state_dict_keys_and_order_equal_torch(name):
    torch.manual_seed(0)
    tm, em = getattr(T, name)(), getattr(E, name)()
    esd, tsd = em.state_dict(), tm.state_dict()
    assert list(esd) == list(tsd)
    for k in tsd:
        assert tuple(esd[k].shape) == tuple(tsd[k].shape), k
        assert esd[k].numpy().dtype == tsd[k].numpy().dtype, k
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in em.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in em.named_modules()] == [n for n, _ in tm.named_modules()]


@pytest.mark.parametrize("name", MODELS)
def test_repr_equals_torch(name):
    assert repr(getattr(E, name)()) == repr(getattr(T, name)())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MODELS)
def test_torch_weights_in_ember_eval_outputs_and_gradients(name, dtype):
    """torch → ember: same eval outputs; same gradients of every parameter and of the input for cross_entropy."""
    tm, em = pair(name, dtype)
    tm.eval(), em.eval()
    x, y = make_input(name, dtype=dtype)
    xe, xt = both_inputs(x)
    oe, ot = em(xe), tm(xt)
    assert oe.dtype == edtype(dtype) and tuple(oe.shape) == tuple(ot.shape)
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), **tol(dtype))
    le = ember.nn.functional.cross_entropy(oe, ember.from_numpy(y))
    lt = torch.nn.functional.cross_entropy(ot, torch.from_numpy(y))
    np.testing.assert_allclose(le.item(), lt.item(), **tol(dtype))
    le.backward(), lt.backward()
    grads_e = dict(em.named_parameters())
    for n, p in tm.named_parameters():
        assert grads_e[n].grad is not None, n
        assert grads_e[n].grad.dtype == edtype(dtype), n
        np.testing.assert_allclose(grads_e[n].grad.numpy(), p.grad.numpy(), err_msg=n, **tol(dtype))
    if xt.requires_grad:
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), **tol(dtype))


@pytest.mark.parametrize("name", MODELS)
def test_ember_weights_in_torch_eval_outputs(name):
    """ember (its own default init) → torch: identical outputs, in both precisions."""
    ember.manual_seed(3)
    em = getattr(E, name)().eval()
    tm = getattr(T, name)().eval()
    tm.load_state_dict(to_torch_sd(em.state_dict()))
    for dtype in (np.float32, np.float64):
        em.to(edtype(dtype)), tm.to(tdtype(dtype))
        x, _ = make_input(name, seed=5, dtype=dtype)
        xe, xt = both_inputs(x, requires_grad=False)
        with ember.no_grad(), torch.no_grad():
            np.testing.assert_allclose(em(xe).numpy(), tm(xt).numpy(), **tol(dtype))


def test_text_classifier_padding_row_gets_no_gradient_and_stays_zero():
    tm, em = pair("TextClassifier")
    assert np.all(em.embed.weight.detach().numpy()[0] == 0)
    tokens, y = make_input("TextClassifier")
    ember.nn.functional.cross_entropy(em(ember.from_numpy(tokens)), ember.from_numpy(y)).backward()
    g = em.embed.weight.grad.numpy()
    assert np.all(g[0] == 0)
    assert np.any(g[tokens[0, 0]] != 0)


def test_mlp_train_mode_dropout_parity_with_ember_masks():
    """Train mode: ember draws the dropout masks; torch reuses them (a forward hook replaces its dropout
    output), so outputs and every gradient must agree; eval mode switches dropout off again."""
    tm, em = pair("MLP")
    tm.train(), em.train()
    assert em.training and all(m.training for m in em.modules())
    masks = {}

    def grab(name):
        def hook(module, args, out):
            inp = args[0].detach().numpy()
            o = out.detach().numpy()
            masks[name] = np.divide(o, inp, out=np.zeros_like(o), where=inp != 0)
        return hook

    def replay(name):
        return lambda module, args, out: args[0] * torch.from_numpy(masks[name])

    for n in ("drop1", "drop2"):
        getattr(em, n).register_forward_hook(grab(n))
        getattr(tm, n).register_forward_hook(replay(n))
    x, y = make_input("MLP", batch=16)
    xe, xt = both_inputs(x)
    ember.manual_seed(11)
    oe, ot = em(xe), tm(xt)
    kept = np.concatenate([m.ravel() for m in masks.values()])
    assert set(np.unique(np.round(kept, 12))) <= {0.0, round(1 / 0.75, 12)}
    assert (kept == 0).mean() > 0.1  # dropout actually dropped in train mode
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), **tol(np.float64))
    ember.nn.functional.cross_entropy(oe, ember.from_numpy(y)).backward()
    torch.nn.functional.cross_entropy(ot, torch.from_numpy(y)).backward()
    pe = dict(em.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(pe[n].grad.numpy(), p.grad.numpy(), err_msg=n, **tol(np.float64))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), **tol(np.float64))
    # a second train-mode forward draws a different mask
    before = {k: v.copy() for k, v in masks.items()}
    em(xe)
    assert not np.array_equal(before["drop1"], masks["drop1"])
    em.eval()
    assert not any(m.training for m in em.modules())
    with ember.no_grad():
        o1, o2 = em(xe).numpy(), em(xe).numpy()
    np.testing.assert_array_equal(o1, o2)
    tm.eval()
    with torch.no_grad():
        np.testing.assert_allclose(o1, tm(xt).numpy(), **tol(np.float64))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batchnorm_running_stats_follow_torch_across_train_and_eval(dtype):
    tm, em = pair("NormCNN", dtype)
    tm.train(), em.train()
    for step in range(4):
        x, _ = make_input("NormCNN", batch=5, seed=10 + step, dtype=dtype)
        xe, xt = both_inputs(x)
        oe, ot = em(xe), tm(xt)
        np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), **tol(dtype))
    assert int(em.bn.num_batches_tracked.item()) == 4
    assert_same_state(em, tm, **tol(dtype))
    assert not np.allclose(em.stem[1].running_var.numpy(), 1.0)  # the stats did move
    # eval: running statistics are used (and not updated); the output differs from train mode
    tm.eval(), em.eval()
    x, _ = make_input("NormCNN", batch=3, seed=99, dtype=dtype)
    xe, xt = both_inputs(x, requires_grad=False)
    with ember.no_grad(), torch.no_grad():
        oe_eval = em(xe).numpy()
        np.testing.assert_allclose(oe_eval, tm(xt).numpy(), **tol(dtype))
    assert_same_state(em, tm, **tol(dtype))
    assert int(em.bn.num_batches_tracked.item()) == 4
    em.train()
    with ember.no_grad():
        assert not np.allclose(em(xe).numpy(), oe_eval, rtol=1e-3, atol=1e-3)


def test_ember_residual_module_matches_a_hand_written_one():
    """ember's nn.Residual(fn) is a drop-in for the hand-written residual (same keys, same output)."""
    torch.manual_seed(0)
    tm = T.ResMLP().double()
    em = E.ResMLP().double()
    for i, block in enumerate(em.blocks):
        em.blocks[i] = ember.nn.Residual(block.fn)
    assert all(type(b) is ember.nn.Residual for b in em.blocks)
    em.load_state_dict(to_ember_sd(tm.state_dict()))
    assert list(em.state_dict()) == list(tm.state_dict())
    x, _ = make_input("ResMLP")
    with ember.no_grad(), torch.no_grad():
        np.testing.assert_allclose(em(ember.from_numpy(x)).numpy(), tm(torch.from_numpy(x)).numpy(), **tol(np.float64))


def test_replacing_a_layer_by_attribute_keeps_its_place():
    """The fine-tuning pattern `model.layer = new_layer` keeps the state_dict order (and Sequential's order)."""
    tm, em = T.MLP(), E.MLP()
    tm.fc1, em.fc1 = torch.nn.Linear(20, 32), ember.nn.Linear(20, 32)
    tm.fc2.weight = torch.nn.Parameter(torch.zeros(32, 32))
    em.fc2.weight = ember.nn.Parameter(ember.zeros(32, 32))
    assert list(em.state_dict()) == list(tm.state_dict())
    seq = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))
    setattr(seq, "0", ember.nn.Linear(3, 4))
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]  # forward still runs Linear(3, 4) first


# ====================================================================== 2. training trajectories
TRAJECTORIES = {
    # name: (model, optimizer factory, scheduler factory, max_norm)
    "mlp-sgd-nesterov-steplr": (
        "MLP",
        lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5),
        0.5),
    "w3cnn-adam-onecycle": (
        "W3CNN",
        lambda lib, ps: lib.optim.Adam(ps, lr=1e-3, weight_decay=1e-4),
        lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-3, total_steps=20),
        0.5),
    "normcnn-adamw-cosine-groups": (
        "NormCNN",
        lambda lib, ps: lib.optim.AdamW(ps, lr=3e-3, weight_decay=0.05, amsgrad=True),
        lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20, eta_min=1e-4),
        1.0),
    "resmlp-sgd-onecycle-momentum": (
        "ResMLP",
        lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.9, dampening=0.1, weight_decay=1e-4),
        lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20, pct_start=0.25,
                                                            anneal_strategy="linear"),
        0.8),
    "text-adamw-cosine": (
        "TextClassifier",
        lambda lib, ps: lib.optim.AdamW(ps, lr=2e-2, betas=(0.8, 0.99), weight_decay=0.01),
        lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
        0.3),
}


def _param_groups(model, split: bool):
    """Either all parameters, or PyTorch users' usual split: no weight decay on biases and norm weights."""
    if not split:
        return model.parameters()
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]


def _train(lib, model, opt, sched, name, max_norm, steps, F):
    losses, norms, lrs = [], [], []
    model.train()
    for step in range(steps):
        x, y = make_input(name, batch=8, seed=100 + step % 2)  # two batches, memorised: the loss must fall
        opt.zero_grad()
        loss = F.cross_entropy(model(lib.from_numpy(x)), lib.from_numpy(y))
        loss.backward()
        norms.append(float(lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm)))
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in opt.param_groups])
    return np.array(losses), np.array(norms), np.array(lrs)


@pytest.mark.parametrize("case", list(TRAJECTORIES))
def test_training_trajectory_matches_torch(case):
    name, make_opt, make_sched, max_norm = TRAJECTORIES[case]
    kwargs = {"p": 0.0} if name == "MLP" else {}
    tm, em = pair(name, np.float64, **kwargs)
    split = "groups" in case
    topt, eopt = make_opt(torch, _param_groups(tm, split)), make_opt(ember, _param_groups(em, split))
    tsched, esched = make_sched(torch, topt), make_sched(ember, eopt)
    initial = {n: p.detach().numpy().copy() for n, p in tm.named_parameters()}
    lt, nt, rt = _train(torch, tm, topt, tsched, name, max_norm, 20, torch.nn.functional)
    le, ne, re_ = _train(ember, em, eopt, esched, name, max_norm, 20, ember.nn.functional)
    np.testing.assert_allclose(re_, rt, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ne, nt, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(le, lt, rtol=1e-7, atol=1e-9)
    assert (nt > max_norm).any(), "clipping should be active in some step"
    assert lt[-4:].mean() < lt[:4].mean(), "the run should be training"
    assert_same_state(em, tm, rtol=0, atol=1e-6)
    # (a bias right before BatchNorm gets no gradient, and it is in the group without weight decay)
    stuck = [n for n, p in tm.named_parameters() if np.allclose(p.detach().numpy(), initial[n]) and n != "up.bias"]
    assert not stuck, f"parameters that did not train: {stuck}"


# ====================================================================== 3. checkpoint / resume
CHECKPOINT_CASES = {
    "sgd-steplr": (lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
                   lambda opt: ember.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)),
    "adam-onecycle": (lambda ps: ember.optim.Adam(ps, lr=1e-3, amsgrad=True),
                      lambda opt: ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=20)),
    "adamw-cosine": (lambda ps: ember.optim.AdamW(ps, lr=5e-3, weight_decay=0.1),
                     lambda opt: ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)),
}


def _ember_steps(model, opt, sched, start: int, stop: int) -> list[float]:
    F = ember.nn.functional
    model.train()
    losses = []
    for step in range(start, stop):
        x, y = make_input("MLP", batch=8, seed=100 + step, dtype=np.float32)
        opt.zero_grad()
        loss = F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y))
        loss.backward()
        ember.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def _fresh(case):
    make_opt, make_sched = CHECKPOINT_CASES[case]
    model = E.MLP(p=0.3)
    opt = make_opt(model.parameters())
    return model, opt, make_sched(opt)


@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
def test_checkpoint_resume_is_bitwise_identical_to_an_uninterrupted_run(case, tmp_path):
    ember.manual_seed(0)
    model, opt, sched = _fresh(case)
    ref_losses = _ember_steps(model, opt, sched, 0, 20)
    ref = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    ref_lr = sched.get_last_lr()

    ember.manual_seed(0)
    model, opt, sched = _fresh(case)
    losses = _ember_steps(model, opt, sched, 0, 10)
    path = tmp_path / "ckpt.safetensors"
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "epoch": 10, "rng": ember.get_rng_state()}, path)
    del model, opt, sched

    ember.manual_seed(1234)  # a different stream (and different fresh weights): the checkpoint must restore all
    model, opt, sched = _fresh(case)
    ckpt = ember.load(path)
    assert ckpt["epoch"] == 10 and isinstance(ckpt["epoch"], int)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    sched.load_state_dict(ckpt["scheduler"])
    ember.set_rng_state(ckpt["rng"])
    losses += _ember_steps(model, opt, sched, ckpt["epoch"], 20)

    assert losses == ref_losses
    assert sched.get_last_lr() == ref_lr
    got = model.state_dict()
    for k, v in ref.items():
        assert got[k].dtype == ember.float32
        np.testing.assert_array_equal(got[k].numpy(), v, err_msg=k)


def test_resume_without_the_rng_state_diverges(tmp_path):
    """The check above can fail: with dropout active, a resume that skips set_rng_state differs."""
    ember.manual_seed(0)
    model, opt, sched = _fresh("sgd-steplr")
    _ember_steps(model, opt, sched, 0, 20)
    ref = model.fc1.weight.detach().numpy().copy()
    ember.manual_seed(0)
    model, opt, sched = _fresh("sgd-steplr")
    _ember_steps(model, opt, sched, 0, 10)
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
               tmp_path / "c")
    ember.manual_seed(1234)
    model, opt, sched = _fresh("sgd-steplr")
    ckpt = ember.load(tmp_path / "c")
    model.load_state_dict(ckpt["model"]), opt.load_state_dict(ckpt["optimizer"]), sched.load_state_dict(ckpt["scheduler"])
    _ember_steps(model, opt, sched, 10, 20)
    assert not np.array_equal(model.fc1.weight.detach().numpy(), ref)


def _trained_normcnn():
    """A NormCNN with non-trivial buffers (a few train-mode forwards), in float32."""
    ember.manual_seed(7)
    em = E.NormCNN()
    with ember.no_grad():
        for s in range(3):
            em(ember.from_numpy(make_input("NormCNN", batch=4, seed=s, dtype=np.float32)[0]))
    return em.eval()


def test_ember_checkpoint_loads_with_safetensors_torch(tmp_path):
    st = need_torch("safetensors.torch")
    em = _trained_normcnn()
    ember.save(em.state_dict(), tmp_path / "w.safetensors")
    sd = st.load_file(str(tmp_path / "w.safetensors"))
    assert sorted(sd) == sorted(em.state_dict())
    assert sd["bn.num_batches_tracked"].dtype == torch.int64
    tm = T.NormCNN()
    tm.load_state_dict(sd)
    tm.eval()
    x, _ = make_input("NormCNN", seed=42, dtype=np.float32)
    with ember.no_grad(), torch.no_grad():
        np.testing.assert_allclose(em(ember.from_numpy(x)).numpy(), tm(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_torch_safetensors_weights_load_into_ember(tmp_path):
    st = need_torch("safetensors.torch")
    torch.manual_seed(5)
    tm = T.NormCNN()
    with torch.no_grad():
        for s in range(3):
            tm(torch.from_numpy(make_input("NormCNN", batch=4, seed=s, dtype=np.float32)[0]))
    tm.eval()
    st.save_file(tm.state_dict(), str(tmp_path / "t.safetensors"))
    em = E.NormCNN().eval()
    missing, unexpected = em.load_state_dict(ember.load(tmp_path / "t.safetensors"))
    assert missing == [] and unexpected == []
    assert_same_state(em, tm, rtol=0, atol=0)
    x, _ = make_input("NormCNN", seed=43, dtype=np.float32)
    with ember.no_grad(), torch.no_grad():
        np.testing.assert_allclose(em(ember.from_numpy(x)).numpy(), tm(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


# ====================================================================== 4. module features on a real model
def test_forward_hooks_capture_the_same_activations():
    tm, em = pair("W3CNN")
    tm.eval(), em.eval()
    acts_t, acts_e = {}, {}

    def capture(store, name):
        def hook(module, args, out):
            store[name] = (args[0].detach().numpy().copy(), out.detach().numpy().copy())
        return hook

    handles = []
    for (n, m), (nt, mt) in zip(em.named_modules(), tm.named_modules()):
        assert n == nt and type(m).__name__ == type(mt).__name__
        if n:
            handles.append(m.register_forward_hook(capture(acts_e, n)))
            mt.register_forward_hook(capture(acts_t, n))
    x, _ = make_input("W3CNN")
    xe, xt = both_inputs(x, requires_grad=False)
    em(xe), tm(xt)
    assert list(acts_e) == list(acts_t)  # hooks fire in the same order
    assert len(acts_e) == 12
    for n in acts_t:
        for a, b in zip(acts_e[n], acts_t[n]):
            assert a.shape == b.shape, n
            np.testing.assert_allclose(a, b, err_msg=n, **tol(np.float64))
    for h in handles:
        h.remove()
    acts_e.clear()
    em(xe)
    assert acts_e == {}


@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")  # torch's, for the no-grad input
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_full_backward_hooks_on_linear_and_conv_match_torch(input_requires_grad):
    tm, em = pair("W3CNN")
    seen_t, seen_e = {}, {}

    def capture(store, name):
        def hook(module, grad_input, grad_output):
            store.setdefault(name, []).append(
                ([None if g is None else g.numpy().copy() for g in grad_input],
                 [None if g is None else g.numpy().copy() for g in grad_output]))
        return hook

    layers = {"conv1": ("features", 0), "conv2": ("features", 3), "fc1": ("classifier", 1), "fc2": ("classifier", 3)}
    for n, (seq, i) in layers.items():
        getattr(em, seq)[i].register_full_backward_hook(capture(seen_e, n))
        getattr(tm, seq)[i].register_full_backward_hook(capture(seen_t, n))
    x, y = make_input("W3CNN")
    xe, xt = both_inputs(x, requires_grad=input_requires_grad)
    ember.nn.functional.cross_entropy(em(xe), ember.from_numpy(y)).backward()
    torch.nn.functional.cross_entropy(tm(xt), torch.from_numpy(y)).backward()
    assert list(seen_e) == list(seen_t)  # same order: from the loss back to the input
    for n in layers:
        assert len(seen_e[n]) == len(seen_t[n]) == 1, n
        (gi_e, go_e), (gi_t, go_t) = seen_e[n][0], seen_t[n][0]
        assert len(gi_e) == len(gi_t) and len(go_e) == len(go_t), n
        for a, b in zip(gi_e + go_e, gi_t + go_t):
            assert (a is None) == (b is None), n
            if b is not None:
                assert a.shape == b.shape, n
                np.testing.assert_allclose(a, b, err_msg=n, **tol(np.float64))
    assert (seen_e["conv1"][0][0][0] is None) == (not input_requires_grad)


def test_backward_hook_can_replace_grad_input_in_a_model():
    """A hook returning a new grad_input changes everything upstream, as in torch."""
    tm, em = pair("W3CNN")
    em.classifier[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
    tm.classifier[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
    x, y = make_input("W3CNN")
    xe, xt = both_inputs(x)
    ember.nn.functional.cross_entropy(em(xe), ember.from_numpy(y)).backward()
    torch.nn.functional.cross_entropy(tm(xt), torch.from_numpy(y)).backward()
    np.testing.assert_allclose(em.features[0].weight.grad.numpy(), tm.features[0].weight.grad.numpy(), **tol(np.float64))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), **tol(np.float64))


@pytest.mark.parametrize("name", ["W3CNN", "NormCNN", "ResMLP", "TextClassifier"])
def test_to_float64_then_parity(name):
    torch.manual_seed(1)
    tm = getattr(T, name)()
    em = getattr(E, name)()
    em.load_state_dict(to_ember_sd(tm.state_dict()))  # both float32
    assert em.to(ember.float64) is em
    tm.to(torch.float64)
    for n, t in em.state_dict().items():
        assert t.dtype == (ember.int64 if n.endswith("num_batches_tracked") else ember.float64), n
    assert all(p.requires_grad and p.is_leaf for p in em.parameters())
    x, y = make_input(name, seed=2)
    xe, xt = both_inputs(x)
    em.train(), tm.train()
    oe, ot = em(xe), tm(xt)
    assert oe.dtype == ember.float64
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), **tol(np.float64))
    ember.nn.functional.cross_entropy(oe, ember.from_numpy(y)).backward()
    torch.nn.functional.cross_entropy(ot, torch.from_numpy(y)).backward()
    pe = dict(em.named_parameters())
    for n, p in tm.named_parameters():
        assert pe[n].grad.dtype == ember.float64
        np.testing.assert_allclose(pe[n].grad.numpy(), p.grad.numpy(), err_msg=n, **tol(np.float64))
    assert_same_state(em, tm, **tol(np.float64))  # BatchNorm buffers updated in float64 too


# ====================================================================== 5. bad inputs at model level
def test_loading_another_architecture_lists_missing_unexpected_and_mismatched_keys():
    em = E.W3CNN()
    other = E.NormCNN().state_dict()
    with pytest.raises(RuntimeError, match="for W3CNN") as info:
        em.load_state_dict(other)
    msg = str(info.value)
    assert "Missing key(s)" in msg and '"features.0.weight"' in msg and '"classifier.1.weight"' in msg
    assert "Unexpected key(s)" in msg and '"stem.1.running_mean"' in msg and '"bn.num_batches_tracked"' in msg
    # the same keys PyTorch reports, with strict=False
    tm = T.W3CNN()
    mk_t, uk_t = tm.load_state_dict(to_torch_sd(other), strict=False)
    before = {k: v.numpy().copy() for k, v in em.state_dict().items()}
    mk_e, uk_e = em.load_state_dict(other, strict=False)
    assert sorted(mk_e) == sorted(mk_t) and sorted(uk_e) == sorted(uk_t)
    for k, v in em.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_loading_a_wider_model_names_each_key_and_both_shapes_and_changes_nothing():
    em = E.MLP(hidden=32)
    before = {k: v.numpy().copy() for k, v in em.state_dict().items()}
    wide = E.MLP(hidden=48).state_dict()
    with pytest.raises(RuntimeError) as info:
        em.load_state_dict(wide)
    msg = str(info.value)
    for key, ckpt_shape, model_shape in [("fc1.weight", "48, 20", "32, 20"), ("fc1.bias", "48", "32"),
                                         ("fc2.weight", "48, 48", "32, 32"), ("out.weight", "5, 48", "5, 32")]:
        line = next((ln for ln in msg.splitlines() if f"for {key}:" in ln), None)
        assert line is not None, (key, msg)
        assert f"[{ckpt_shape}]" in line and f"[{model_shape}]" in line, line
        assert line.index(ckpt_shape) < line.index(model_shape, line.index(ckpt_shape) + 1) or ckpt_shape == model_shape
    assert "out.bias" not in msg  # same shape: not reported
    for k, v in em.state_dict().items():  # a failed load changes nothing
        np.testing.assert_array_equal(v.numpy(), before[k])
    # the message reads like torch's (modulo the module name)
    tm = T.MLP(hidden=32)
    with pytest.raises(RuntimeError) as tinfo:
        tm.load_state_dict(to_torch_sd(wide))
    assert msg.replace("ember.Size", "torch.Size") == str(tinfo.value)


def test_wrong_input_shape_names_the_layer():
    em = E.W3CNN()
    with pytest.raises(RuntimeError, match=r"Conv2d\(1, 16.*1") as info:
        em(ember.randn(2, 3, 28, 28))
    assert "[2, 3, 28, 28]" in str(info.value) or "(2, 3, 28, 28)" in str(info.value)
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=1568.*") as info:
        em(ember.randn(2, 1, 32, 32))  # 32x32 flattens to 2048 features, not 1568
    assert "2048" in str(info.value)
    with pytest.raises(RuntimeError, match=r"Conv2d"):
        em(ember.randn(28, 28))
    with pytest.raises(RuntimeError, match=r"LayerNorm|Linear"):
        E.ResMLP()(ember.randn(3, 25))
    with pytest.raises((IndexError, RuntimeError), match=r"(?i)embedding|index"):
        E.TextClassifier()(ember.tensor([[1, 2, 40]]))  # id 40 is outside the vocabulary of 40


def test_optimizer_on_a_non_leaf_tensor():
    em = E.MLP()
    scaled = em.fc1.weight * 2
    with pytest.raises(ValueError, match="non-leaf"):
        ember.optim.SGD([scaled], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        ember.optim.Adam([{"params": list(em.parameters())[1:]}, {"params": [scaled]}])
    with pytest.raises(TypeError, match="Tensor"):
        ember.optim.SGD([em], lr=0.1)  # a module where its parameters were meant


@pytest.mark.parametrize("cls,kwargs", [("SGD", {"lr": 0.1, "momentun": 0.9}), ("Adam", {"betas1": 0.9}),
                                         ("AdamW", {"weight_decy": 0.1}), ("SGD", {"lr": 0.1, "nestrov": True})])
def test_unknown_optimizer_option_is_a_type_error(cls, kwargs):
    bad = next(iter(kwargs.keys() - {"lr"}))
    with pytest.raises(TypeError, match=bad):
        getattr(ember.optim, cls)(E.MLP().parameters(), **kwargs)
    with pytest.raises(TypeError):  # the oracle agrees
        getattr(torch.optim, cls)(T.MLP().parameters(), **kwargs)
