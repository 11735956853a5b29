"""The PyTorch side of the CPU workloads: networks written against an `nn` namespace, and the step built from
a spec, in a module that imports no ember (nor anything that does).

The workload modules (mlp.py, resmlp.py, cnn.py, seq.py) build their PyTorch step here from their
`torch_spec()`, with ember's initial weights and their data; benchmarks/fairness.py builds the same
step from the same spec in a process that never loads ember and runs no NumPy work, with PyTorch's
own initialisation and data of the same shapes (a dense kernel's time does not depend on the values).
`mlp` and `seq` also build the ember models (given ember.nn): one definition for both frameworks.
`compiled_step` is the torch.compile'd step of the suite's "compiled" column.

A spec is a JSON-able dict: `net` (a key of BUILDERS) and `args`; `x`, the input's shape; for a
training step `y` (the labels' shape), `classes`, `optim` (a torch.optim class name) and `optim_kw`;
without `optim` the step is inference: the forward pass in eval mode under no_grad.
"""
from __future__ import annotations

from typing import Callable

from ._harness import COMPILED, Skipped, compiled, one_line, synced, train_step
from .resnet import resnet18  # (imports no ember at module level, as this module)


def mlp(nn, d_in: int, width: int, n_classes: int):
    """Linear(d_in, width)-ReLU-Linear(width, width)-ReLU-Linear(width, n_classes)."""
    return nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, n_classes))


def resmlp(nn, d_in: int, d_hid: int, d_bot: int, n_classes: int, n_blocks: int, p_drop: float):
    """Linear(d_in, d_hid); `n_blocks` × h ← relu(h + LN(Linear(LN-ReLU-Dropout(Linear(h))))); Linear(d_hid,
    n_classes). The residual wrapper's child is `fn`, as in ember.nn.Residual (the same state_dict keys)."""
    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    def block():
        return nn.Sequential(
            Residual(nn.Sequential(nn.Linear(d_hid, d_bot), nn.LayerNorm(d_bot), nn.ReLU(), nn.Dropout(p_drop),
                                   nn.Linear(d_bot, d_hid), nn.LayerNorm(d_hid))),
            nn.ReLU())
    return nn.Sequential(nn.Linear(d_in, d_hid), *[block() for _ in range(n_blocks)], nn.Linear(d_hid, n_classes))


def cnn(nn, in_ch: int, c1: int, c2: int, flat: int, hid: int, n_classes: int):
    """Conv(in_ch, c1, 3, p1)-ReLU-MaxPool2-Conv(c1, c2, 3, p1)-ReLU-MaxPool2-Flatten-Linear(flat, hid)-ReLU-
    Linear(hid, n_classes): the layout of ember.cli.models.build_model("cnn")."""
    return nn.Sequential(nn.Conv2d(in_ch, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(flat, hid), nn.ReLU(), nn.Linear(hid, n_classes))


def seq(nn, kind: str, d_in: int, hidden: int, layers: int, d_model: int, nhead: int, t_layers: int, seq_len: int,
        classes: int):
    """`kind` "lstm": LSTM(d_in, hidden, layers, batch_first) with a Linear(hidden, classes) head at every step;
    "transformer": `t_layers` × TransformerEncoderLayer(d_model, nhead, batch_first) with PyTorch's defaults
    under a causal mask over `seq_len` steps, the same head. Both return (batch·seq, classes) logits."""
    class LSTMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(d_in, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, classes)

        def forward(self, x):
            return self.head(self.rnn(x)[0]).reshape(-1, classes)

    class EncoderNet(nn.Module):
        def __init__(self, mask):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, nhead, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, t_layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, classes)
            self.mask = mask

        def forward(self, x):
            return self.head(self.encoder(x, mask=self.mask, is_causal=True)).reshape(-1, classes)

    if kind == "lstm":
        return LSTMNet()
    return EncoderNet(nn.Transformer.generate_square_subsequent_mask(seq_len))


BUILDERS = {"mlp": mlp, "resmlp": resmlp, "cnn": cnn, "seq": seq, "resnet18": resnet18}


def torch_step(torch, spec: dict, like=None, x=None, y=None, device: str = "cpu", compile: bool = False,
               seed: int = 0) -> Callable[[], object]:
    """One PyTorch step of `spec` (see the module's docstring) as a zero-argument callable: the weights of the
    ember model `like` (same state_dict keys) or else PyTorch's initialisation under manual_seed(`seed`);
    the tensors `x` and `y`, or else standard-normal inputs and uniform labels from a generator seeded with
    `seed`. On a CUDA `device` each step ends with a synchronize. With `compile` the model is
    torch.compile'd (it compiles at its first calls: see _harness.compiled)."""
    torch.manual_seed(seed)
    model = BUILDERS[spec["net"]](torch.nn, *spec["args"])
    if like is not None:
        model.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in like.state_dict().items()})
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(spec["x"], generator=gen) if x is None else x).to(device)
    model.to(device)
    train = spec.get("optim") is not None
    model.train(train)
    net = model
    if compile:
        torch.compiler.reset()  # a fresh dynamo cache per model: its recompile limit counts every model compiled
        net = torch.compile(model)
    if not train:
        def infer():
            with torch.no_grad():
                return net(x)
        return synced(infer, device, torch)
    y = (torch.randint(spec["classes"], spec["y"], generator=gen) if y is None else y).to(device)
    opt = getattr(torch.optim, spec["optim"])(model.parameters(), **spec["optim_kw"])
    return synced(train_step(net, opt, torch.nn.functional.cross_entropy, x, y), device, torch)


def torch_cases(torch, spec: dict, impls, like, x_np, y_np, device: str = "cpu") -> dict:
    """PyTorch's columns of a training row: "pytorch" (eager) and, where `impls` asks for it, "compiled"
    (torch.compile), both from the weights of the ember model `like`, on the arrays x_np and y_np."""
    kw = dict(like=like, x=torch.from_numpy(x_np), y=torch.from_numpy(y_np), device=device)
    out = {"pytorch": torch_step(torch, spec, **kw)}
    if COMPILED in impls:
        out[COMPILED] = compiled_step(torch, spec, **kw)
    return out


def compiled_step(torch, spec: dict, **kw) -> Callable[[], object] | Skipped:
    """`torch_step(torch, spec, compile=True, **kw)`, compiled before any timing (_harness.compiled), or Skipped
    saying why not: torch.compile failed, or dynamo compiled no graph for it (it leaves nn.LSTM to eager
    PyTorch, and that column would be eager PyTorch under another name)."""
    try:
        from torch._dynamo.utils import counters  # the only count of compiled graphs torch keeps
    except ImportError as e:  # a PyTorch without dynamo has no torch.compile
        return Skipped(one_line(e))
    before = counters["stats"]["unique_graphs"]  # torch.compiler.reset() does not clear it
    step = compiled(lambda: torch_step(torch, spec, compile=True, **kw))
    if not isinstance(step, Skipped) and counters["stats"]["unique_graphs"] == before:
        return Skipped("torch.compile compiled no graph: dynamo leaves this model to eager PyTorch")
    return step
