"""A character-level language model on the public-domain text that ships with ember (Genesis,
World English Bible): an LSTM and a small causal Transformer, written as PyTorch code.

    python examples/char_lm.py                       # both models, 4 epochs each: a few minutes
    python examples/char_lm.py --model lstm --epochs 10

On a 2-core CPU an epoch takes about 15 s (LSTM) or 11 s (Transformer) with the cores to itself,
about 2 minutes for the default run, and several times that when other work shares them. Each
epoch prints the training loss and the held-out loss (nats per character; the bits per character
are loss / ln 2), then a sample drawn from the model; nothing is written to disk. The models are
the ones `python -m ember train --dataset text --model lstm|transformer` trains (ember/cli/models.py).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

import ember as torch  # noqa: E402  (ember speaks PyTorch's API)
import ember.nn.functional as F  # noqa: E402
from ember.cli.models import CharLSTM, CharTransformer, sample  # noqa: E402
from ember.datasets import CharText, default_text  # noqa: E402
from ember.utils.data import DataLoader  # noqa: E402


def evaluate(model, loader) -> float:
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            n += y.numel()
    return total / n


def train(name: str, args) -> list[dict]:
    torch.manual_seed(args.seed)
    text = default_text()[: args.max_chars] if args.max_chars else None
    train_set = CharText(text, seq_len=args.seq_len, train=True)
    test_set = CharText(text, seq_len=args.seq_len, train=False, vocab=train_set.vocab)
    vocab = train_set.vocab
    model = CharLSTM(len(vocab)) if name == "lstm" else CharTransformer(len(vocab), context=args.seq_len)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=256)
    print(f"{name}: {params:,} parameters, {len(train_set):,} training windows of {args.seq_len} characters, "
          f"vocabulary {len(vocab)}")
    curve = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0, total, n = time.perf_counter(), 0.0, 0
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item() * y.numel()
            n += y.numel()
        sched.step()
        test_loss = evaluate(model, test_loader)
        curve.append(dict(epoch=epoch, train_loss=total / n, test_loss=test_loss, seconds=time.perf_counter() - t0))
        print(f"{name} epoch {epoch}/{args.epochs}: train loss {total / n:.4f}, test loss {test_loss:.4f} "
              f"({test_loss / math.log(2):.3f} bits/char), {curve[-1]['seconds']:.1f} s", flush=True)
    gen = torch.Generator().manual_seed(args.seed)
    print(f"{name} sample: {sample(model, vocab, args.prompt, args.sample_chars, generator=gen)!r}")
    return curve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("lstm", "transformer", "both"), default="both")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-chars", type=int, default=0, help="train on the first N characters only (0: all)")
    p.add_argument("--prompt", default="In the beginning")
    p.add_argument("--sample-chars", type=int, default=200)
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error(f"--epochs must be at least 1, got {args.epochs}")
    for name in (("lstm", "transformer") if args.model == "both" else (args.model,)):
        train(name, args)


if __name__ == "__main__":
    main()
