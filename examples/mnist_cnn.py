"""MNIST with a small CNN (the W3 benchmark model), with a checkpoint that resumes.

    python -m ember data fetch mnist --root data   # once: fetch and verify the IDX files
    python examples/mnist_cnn.py --data-dir data   # about 99% test accuracy
"""
import argparse
import os
import time

import ember as torch
import ember.nn as nn
import ember.nn.functional as F
from ember.datasets import MNIST, transforms
from ember.utils.data import DataLoader


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="data")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--checkpoint", default="mnist_cnn.safetensors")
    args = p.parse_args()
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
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        start = ckpt["epoch"]
        print(f"resumed after epoch {start}")
    for epoch in range(start + 1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        for x, y in train:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(x).argmax(1) == y).sum().item() for x, y in test)
        print(f"epoch {epoch}: test accuracy {correct / len(test.dataset):.4f} ({time.perf_counter() - t0:.1f} s)")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": torch.get_rng_state(), "epoch": epoch}, args.checkpoint)


if __name__ == "__main__":
    main()
