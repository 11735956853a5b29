"""`python -m ember train`: the main job — train a model, evaluate it, save it, reload it.

Until the real datasets land, the job trains an `nn.Sequential` MLP with `optim.SGD` on the
two-spirals problem, generated deterministically from the seed (no download, no extra
package), and checkpoints it with `ember.save` (safetensors, no pickle).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

import ember
import ember.nn as nn
import ember.nn.functional as F


def spirals(n_per_class: int, seed: int, noise: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals in the plane: (features float32 (2n, 2), labels int64 (2n,))."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1.0, n_per_class)) * 3 * math.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * math.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, noise / 3, (2 * n_per_class, 2))
    y = np.concatenate([np.zeros(n_per_class, np.int64), np.ones(n_per_class, np.int64)])
    return x.astype(np.float32), y


def make_model(hidden: int) -> nn.Module:
    """The MLP 2 -> hidden -> hidden -> 2 with tanh activations (PyTorch's default init)."""
    return nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 2))


def accuracy(model: nn.Module, x: ember.Tensor, y: ember.Tensor) -> float:
    model.eval()
    with ember.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def train(args: argparse.Namespace) -> int:
    x_np, y_np = spirals(args.samples // 2, args.seed)
    perm = np.random.default_rng(args.seed + 1).permutation(len(x_np))
    n_test = len(x_np) // 5
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    x_tr, y_tr = ember.from_numpy(x_np[train_idx]), ember.from_numpy(y_np[train_idx])
    x_te, y_te = ember.from_numpy(x_np[test_idx]), ember.from_numpy(y_np[test_idx])
    ember.manual_seed(args.seed)
    model = make_model(args.hidden)
    opt = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    rng = np.random.default_rng(args.seed + 2)
    print(f"ember {ember.__version__}: MLP 2-{args.hidden}-{args.hidden}-2 on two spirals "
          f"({len(train_idx)} train / {n_test} test), SGD lr={args.lr} momentum=0.9, batch {args.batch_size}")
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = rng.permutation(len(train_idx))
        total = 0.0
        for start in range(0, len(order), args.batch_size):
            idx = ember.from_numpy(order[start:start + args.batch_size])
            loss = F.cross_entropy(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if epoch == 1 or epoch % max(1, args.epochs // 10) == 0 or epoch == args.epochs:
            print(f"epoch {epoch:4d}  loss {total / len(order):.4f}  train acc {accuracy(model, x_tr, y_tr):.3f}  "
                  f"test acc {accuracy(model, x_te, y_te):.3f}")
    test_acc = accuracy(model, x_te, y_te)
    print(f"trained in {time.perf_counter() - t0:.1f} s; test accuracy {test_acc:.3f}")
    path = args.out or os.path.join(tempfile.mkdtemp(prefix="ember-"), "spirals_mlp.safetensors")
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": args.epochs}, path)
    ckpt = ember.load(path)
    reloaded = make_model(args.hidden)
    reloaded.load_state_dict(ckpt["model"])
    reloaded.eval()
    with ember.no_grad():
        same = ember.equal(model(x_te), reloaded(x_te))
    print(f"saved to {path}; reloaded model gives {'identical' if same else 'DIFFERENT'} outputs "
          f"(test accuracy {accuracy(reloaded, x_te, y_te):.3f})")
    if not same:
        return 1
    if test_acc < args.min_accuracy:
        print(f"test accuracy {test_acc:.3f} is below the expected {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ember", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train, evaluate, save and reload a model")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="where to save the checkpoint (.safetensors); default: a temporary folder")
    p.add_argument("--min-accuracy", type=float, default=0.9, help="exit non-zero below this test accuracy")
    args = parser.parse_args(argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
