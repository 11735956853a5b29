"""MNIST with a small CNN (the W3 benchmark model), with a checkpoint that resumes.

    python -m ember data fetch mnist --root data   # once: fetch and verify the IDX files
    python examples/mnist_cnn.py --data-dir data   # 8 epochs: 0.992 test accuracy, a few minutes
    python examples/mnist_cnn.py --data-dir data --epochs 2 --checkpoint runs/examples/cnn2.safetensors

On a 2-core CPU an epoch takes about 12 s with the cores to itself (8 epochs: about 2 minutes) and
several times that when other work shares them. Each epoch prints its test accuracy and seconds and
saves model, optimizer, learning-rate schedule, RNG state and epoch to --checkpoint (default
runs/examples/mnist_cnn.safetensors). Run again, the script resumes an interrupted run after its
last saved epoch and ends with the weights of an uninterrupted run; for a finished run it says so
and prints the saved model's test accuracy. A checkpoint belongs to its --epochs (the cosine
schedule spans them): for another number, delete it or give another --checkpoint.
"""
import argparse
import os
import sys
import time

import ember as torch
import ember.nn as nn
import ember.nn.functional as F
from ember.datasets import MNIST, transforms
from ember.utils.data import DataLoader


def evaluate(model, loader) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return correct / len(loader.dataset)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default="data")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--checkpoint", default=os.path.join("runs", "examples", "mnist_cnn.safetensors"))
    args = p.parse_args()
    if args.epochs < 1:
        p.error(f"--epochs must be at least 1, got {args.epochs}")
    torch.manual_seed(0)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train = DataLoader(MNIST(args.data_dir, train=True, transform=tf), batch_size=128, shuffle=True,
                       num_workers=args.workers)
    test = DataLoader(MNIST(args.data_dir, train=False, transform=tf), batch_size=1000)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    start = 0
    if os.path.exists(args.checkpoint):  # resume: weights, optimizer, schedule and RNG state
        ckpt = torch.load(args.checkpoint)
        if ckpt["epochs"] != args.epochs:
            sys.exit(f"{args.checkpoint} holds a run of --epochs {ckpt['epochs']} (epoch {ckpt['epoch']} done): "
                     f"rerun with --epochs {ckpt['epochs']} to resume it, or delete it or pass another "
                     f"--checkpoint to start a run of --epochs {args.epochs}")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        start = ckpt["epoch"]
        if start == args.epochs:
            print(f"{args.checkpoint}: already finished (epoch {start} of {args.epochs}); "
                  f"test accuracy {evaluate(model, test):.4f}")
            return
        print(f"{args.checkpoint}: resumed after epoch {start} of {args.epochs}")
    os.makedirs(os.path.dirname(args.checkpoint) or ".", exist_ok=True)
    for epoch in range(start + 1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        for x, y in train:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        accuracy = evaluate(model, test)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": torch.get_rng_state(), "epoch": epoch, "epochs": args.epochs}, args.checkpoint)
        print(f"epoch {epoch}/{args.epochs}: test accuracy {accuracy:.4f} ({time.perf_counter() - t0:.1f} s)",
              flush=True)


if __name__ == "__main__":
    main()
