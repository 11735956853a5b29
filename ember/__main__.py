"""`python -m ember train`: the main job — train a model, evaluate it, save it, reload it.

Until `ember.nn`/`ember.optim` and the real datasets land, the job trains a two-layer
network written directly with ember's tensor ops (manual SGD) on the two-spirals problem,
generated deterministically from the seed, so it needs no download and no extra package.
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


def spirals(n_per_class: int, seed: int, noise: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals in the plane: (features float32 (2n, 2), labels int64 (2n,))."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1.0, n_per_class)) * 3 * math.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * math.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, noise / 3, (2 * n_per_class, 2))
    y = np.concatenate([np.zeros(n_per_class, np.int64), np.ones(n_per_class, np.int64)])
    return x.astype(np.float32), y


def init_params(hidden: int, seed: int) -> dict[str, ember.Tensor]:
    """Kaiming-uniform weights as nn.Linear does, as leaves that require grad."""
    ember.manual_seed(seed)
    params = {}
    for name, (fan_in, fan_out) in {"fc1": (2, hidden), "fc2": (hidden, hidden), "fc3": (hidden, 2)}.items():
        bound = 1 / math.sqrt(fan_in)
        params[name + ".weight"] = ((ember.rand(fan_out, fan_in) * 2 - 1) * bound).requires_grad_()
        params[name + ".bias"] = ((ember.rand(fan_out) * 2 - 1) * bound).requires_grad_()
    return params


def forward(params: dict, x: ember.Tensor) -> ember.Tensor:
    """Logits of the MLP 2 -> hidden -> hidden -> 2 with tanh activations."""
    h = (x @ params["fc1.weight"].T + params["fc1.bias"]).tanh()
    h = (h @ params["fc2.weight"].T + params["fc2.bias"]).tanh()
    return h @ params["fc3.weight"].T + params["fc3.bias"]


def cross_entropy(logits: ember.Tensor, target: ember.Tensor) -> ember.Tensor:
    """Mean of -log softmax(logits)[target], via the stable logsumexp."""
    picked = logits.gather(1, target.unsqueeze(1)).squeeze(1)
    return (logits.logsumexp(dim=1) - picked).mean()


def accuracy(params: dict, x: ember.Tensor, y: ember.Tensor) -> float:
    with ember.no_grad():
        return (forward(params, x).argmax(dim=1) == y).float().mean().item()


def save(params: dict, path: str) -> None:
    """Weights as a plain .npz (no pickle)."""
    np.savez(path, **{k: v.detach().numpy() for k, v in params.items()})


def load(path: str) -> dict[str, ember.Tensor]:
    with np.load(path, allow_pickle=False) as f:
        return {k: ember.from_numpy(f[k]) for k in f.files}


def train(args: argparse.Namespace) -> int:
    x_np, y_np = spirals(args.samples // 2, args.seed)
    perm = np.random.default_rng(args.seed + 1).permutation(len(x_np))
    n_test = len(x_np) // 5
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    x_tr, y_tr = ember.from_numpy(x_np[train_idx]), ember.from_numpy(y_np[train_idx])
    x_te, y_te = ember.from_numpy(x_np[test_idx]), ember.from_numpy(y_np[test_idx])
    params = init_params(args.hidden, args.seed)
    velocity = {k: ember.zeros_like(p) for k, p in params.items()}
    rng = np.random.default_rng(args.seed + 2)
    print(f"ember {ember.__version__}: MLP 2-{args.hidden}-{args.hidden}-2 on two spirals "
          f"({len(train_idx)} train / {n_test} test), SGD lr={args.lr} momentum=0.9, batch {args.batch_size}")
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(train_idx))
        total = 0.0
        for start in range(0, len(order), args.batch_size):
            idx = ember.from_numpy(order[start:start + args.batch_size])
            loss = cross_entropy(forward(params, x_tr[idx]), y_tr[idx])
            for p in params.values():
                p.grad = None
            loss.backward()
            with ember.no_grad():
                for k, p in params.items():
                    velocity[k].mul_(0.9).add_(p.grad)
                    p.sub_(velocity[k] * args.lr)
            total += loss.item() * len(idx)
        if epoch == 1 or epoch % max(1, args.epochs // 10) == 0 or epoch == args.epochs:
            print(f"epoch {epoch:4d}  loss {total / len(order):.4f}  train acc {accuracy(params, x_tr, y_tr):.3f}  "
                  f"test acc {accuracy(params, x_te, y_te):.3f}")
    test_acc = accuracy(params, x_te, y_te)
    print(f"trained in {time.perf_counter() - t0:.1f} s; test accuracy {test_acc:.3f}")
    path = args.out or os.path.join(tempfile.mkdtemp(prefix="ember-"), "spirals_mlp.npz")
    save(params, path)
    reloaded = load(path)
    with ember.no_grad():
        same = ember.equal(forward(params, x_te), forward(reloaded, x_te))
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
    p.add_argument("--out", default=None, help="where to save the weights (.npz); default: a temporary folder")
    p.add_argument("--min-accuracy", type=float, default=0.9, help="exit non-zero below this test accuracy")
    args = parser.parse_args(argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
