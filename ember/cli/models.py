"""The models `python -m ember train --model ...` builds: for images of shape (C, H, W), and for
character sequences of shape (T,).

`mlp`, `resmlp` and `cnn` are the benchmark workloads W1, W2 and W3 (docs/performance.md), with
the input and class counts of the dataset; `resnet` is a small residual CNN for CIFAR-10.
`lstm` and `transformer` are character language models (logits for the next character at every
position). Initialisation is PyTorch's default for every layer, drawn from ember's generator.
"""
from __future__ import annotations

import math

import ember.nn as nn

import ember

__all__ = ["MODELS", "TEXT_MODELS", "build_model", "count_parameters", "ResMLPBlock", "BasicBlock", "CharLSTM",
           "CharTransformer", "sample"]


class ResMLPBlock(nn.Module):
    """x -> relu(x + LN(Linear(Dropout(relu(LN(Linear(x))))))): the W2 residual block."""

    def __init__(self, width: int, bottleneck: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, bottleneck), nn.LayerNorm(bottleneck), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(bottleneck, width), nn.LayerNorm(width))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x + self.body(x))


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-BN pairs around an identity (or 1x1 strided) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out))
        self.shortcut = (nn.Identity() if stride == 1 and c_in == c_out else
                         nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.body(x) + self.shortcut(x))


def _mlp(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, classes))


def _resmlp(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 100), *(ResMLPBlock(100, 50) for _ in range(3)),
                         nn.Linear(100, classes))


def _cnn(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * (h // 4) * (w // 4), 128), nn.ReLU(), nn.Linear(128, classes))


def _resnet(c: int, h: int, w: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(c, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         BasicBlock(16, 16), BasicBlock(16, 32, stride=2), BasicBlock(32, 64, stride=2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


class CharLSTM(nn.Module):
    """Embedding -> LSTM -> Linear: (N, T) character indices to (N, T, vocab) next-character logits."""

    def __init__(self, vocab: int, embed: int = 64, hidden: int = 256, layers: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = nn.LSTM(embed, hidden, layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        return self.step(x, state)[0]

    def step(self, x, state=None):
        """(logits, (h, c)): the logits of every position and the state after the last one."""
        h, state = self.rnn(self.embed(x), state)
        return self.head(h), state


class CharTransformer(nn.Module):
    """A causal (decoder-only) Transformer: token plus learned position embeddings, pre-norm
    encoder layers under a causal mask, a final LayerNorm and a linear head. Sees at most
    `context` characters."""

    def __init__(self, vocab: int, context: int, d_model: int = 128, nhead: int = 4, layers: int = 2,
                 dim_feedforward: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, x):
        t = x.shape[1]
        if t > self.context:
            raise ValueError(f"CharTransformer: sequences of {t} characters exceed its context of {self.context}")
        h = self.embed(x) + self.pos(ember.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.norm(self.encoder(h, mask=mask, is_causal=True)))


def sample(model: nn.Module, vocab, prompt: str, length: int, temperature: float = 0.8,
           generator: "ember.Generator | None" = None) -> str:
    """`prompt` followed by `length` characters drawn from the model, one at a time (eval mode,
    no_grad). An LSTM carries its state forward; a Transformer re-reads its last `context` characters."""
    was_training = model.training
    model.eval()
    out = list(prompt)
    try:
        with ember.no_grad():
            idx = ember.from_numpy(vocab.encode(prompt))[None]
            state = None
            for _ in range(length):
                if isinstance(model, CharLSTM):
                    logits, state = model.step(idx, state)
                else:
                    ctx = ember.from_numpy(vocab.encode("".join(out)[-model.context:]))[None]
                    logits = model(ctx)
                probs = ember.softmax(logits[0, -1] / temperature, dim=0)
                nxt = ember.multinomial(probs, 1, generator=generator)
                out.append(vocab.chars[int(nxt.item())])
                idx = nxt[None]
    finally:
        model.train(was_training)
    return "".join(out)


def _lstm(t: int, vocab: int) -> nn.Module:
    return CharLSTM(vocab)


def _transformer(t: int, vocab: int) -> nn.Module:
    return CharTransformer(vocab, context=t)


MODELS = {"resmlp": _resmlp, "mlp": _mlp, "cnn": _cnn, "resnet": _resnet, "lstm": _lstm, "transformer": _transformer}
TEXT_MODELS = ("lstm", "transformer")


def build_model(name: str, in_shape: tuple, num_classes: int) -> nn.Module:
    """A freshly initialised model `name` for inputs (N, *in_shape) and `num_classes` logits
    (images: in_shape = (C, H, W); text: in_shape = (T,) and num_classes = the vocabulary size)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if (name in TEXT_MODELS) != (len(in_shape) == 1):
        kind = "character sequences (--dataset text)" if name in TEXT_MODELS else "images"
        raise ValueError(f"model {name!r} is for {kind}, but the data are of shape {tuple(in_shape)}")
    if name in TEXT_MODELS:
        return MODELS[name](in_shape[0], num_classes)
    c, h, w = in_shape
    if name == "cnn" and min(h, w) < 4:
        raise ValueError(f"model 'cnn' pools twice by 2 and needs images of at least 4x4, got {h}x{w}")
    return MODELS[name](c, h, w, num_classes)


def count_parameters(model: nn.Module) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())
