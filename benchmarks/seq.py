"""Sequence-model training steps: ember against PyTorch CPU (no hand-written NumPy reference).

* `lstm`: nn.LSTM(128, 256, num_layers=2, batch_first=True) over a (32, 64, 128) float32 input,
  a Linear(256, 64) head at every step, cross-entropy against fixed random targets, Adam.
* `transformer`: 4 × nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True) with
  PyTorch's defaults (dim_feedforward 2048, dropout 0.1, ReLU, post-norm) under a causal mask,
  over a (32, 64, 128) input, the same head, loss and optimizer.

Both frameworks start from the same weights (copied through `state_dict`). Run through the
suite: `python -m ember bench --only lstm,transformer`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import ember

from ._harness import IMPLS, import_torch, in_order, train_step

BATCH, SEQ, D_IN, HIDDEN, LAYERS, CLASSES = 32, 64, 128, 256, 2, 64
D_MODEL, NHEAD, T_LAYERS = 128, 4, 4
LR = 1e-3


def _model(nn, kind: str):
    """The same module tree in ember or PyTorch (`nn` is ember.nn or torch.nn)."""
    class LSTMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(D_IN, HIDDEN, num_layers=LAYERS, batch_first=True)
            self.head = nn.Linear(HIDDEN, CLASSES)

        def forward(self, x):
            return self.head(self.rnn(x)[0]).reshape(-1, CLASSES)

    class EncoderNet(nn.Module):
        def __init__(self, mask):
            super().__init__()
            layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, T_LAYERS, enable_nested_tensor=False)
            self.head = nn.Linear(D_MODEL, CLASSES)
            self.mask = mask

        def forward(self, x):
            return self.head(self.encoder(x, mask=self.mask, is_causal=True)).reshape(-1, CLASSES)

    if kind == "lstm":
        return LSTMNet()
    return EncoderNet(nn.Transformer.generate_square_subsequent_mask(SEQ))


def cases(kind: str, batch: int = BATCH, impls=IMPLS, seed: int = 0) -> dict[str, Callable[[], object]]:
    """{implementation: one training step} for `kind` in ("lstm", "transformer"), from the same weights."""
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal((batch, SEQ, D_IN)).astype(np.float32)
    y_np = rng.integers(0, CLASSES, batch * SEQ)
    ember.manual_seed(seed)
    model = _model(ember.nn, kind)
    out: dict[str, Callable[[], object]] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        tmodel = _model(torch.nn, kind)
        tmodel.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
        tmodel.train()
        out["pytorch"] = train_step(tmodel, torch.optim.Adam(tmodel.parameters(), lr=LR),
                                    torch.nn.functional.cross_entropy, torch.from_numpy(x_np), torch.from_numpy(y_np))
    if "ember" in impls:
        model.train()
        out["ember"] = train_step(model, ember.optim.Adam(model.parameters(), lr=LR), ember.nn.functional.cross_entropy,
                                  ember.from_numpy(x_np), ember.from_numpy(y_np))
    return in_order(out)
