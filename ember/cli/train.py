"""The main job: `python -m ember train` and `python -m ember evaluate`.

train: load a dataset, build a model, train it with a progress bar, evaluate on the test split
under `no_grad` every epoch, checkpoint atomically every epoch (model, optimizer, scheduler,
epoch, RNG state, metrics), and at the end write `model.safetensors`, `metrics.json` and
`curves.png`, reload the model into a fresh instance and check it scores the same.

`metrics.json` is strict JSON: {"config": the run's settings, "epochs": one record per epoch}, where
a float that JSON cannot express (NaN, an infinity) is written as null.

A training loss that becomes NaN or infinite stops the run in the step where it happens, with one
line naming the epoch, the step and the value, and exit status 3 (`DIVERGED`); the checkpoint of the
last completed epoch stays as it was, and `metrics.json` gets a "diverged" record.

`--compile` hands the whole training step (forward, loss, backward and the optimizer's update) to
`ember.compile`: captured once per batch shape, then replayed without the Python code; the numbers are
eager's. Where the step cannot be captured whole (a graph break), it runs with the model compiled instead
(`ember.compile(model)`). Evaluation runs the compiled model. Checkpoints hold the bare model, as without it.

`--tensorboard DIR` also logs the run as TensorBoard event files in DIR (`TensorBoardLog`; needs tensorboardX).

`--resume` continues from `OUT/checkpoint.safetensors`, which must exist. Everything random
(initialisation, shuffling, dropout, augmentation, worker seeds) draws from ember's default
generator, whose state the checkpoint carries, so a run killed at any moment and resumed ends with
exactly the weights of an uninterrupted one.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import datasets
from ember.datasets import transforms as T
from ember.datasets.vision import DatasetNotFoundError
from ember.utils.data import DataLoader, Dataset, TensorDataset

from .models import build_model, count_parameters, sample

__all__ = ["DATASETS", "DEFAULTS", "DEFAULT_SEED", "DIVERGED", "INPUT_SHAPES", "CLIError", "load_data", "train",
           "show_config", "evaluate_checkpoint"]

DIVERGED = 3  # exit status of a run stopped because its loss became NaN or infinite


class CLIError(Exception):
    """A mistake in the command line or its inputs: reported as one line, without a traceback."""


class Diverged(Exception):
    """The `split` ("training" or "test") loss became NaN or infinite (`loss`) at `step` (1-based) of an
    epoch: training cannot recover from it."""

    def __init__(self, split: str, step: int, loss: float) -> None:
        super().__init__(split, step, loss)
        self.split, self.step, self.loss = split, step, loss


@dataclass
class Data:
    train: Dataset | None
    test: Dataset
    in_shape: tuple[int, int, int]
    num_classes: int
    mean: list[float]
    std: list[float]
    vocab: list[str] | None = None  # text: the characters, in index order


# Hyper-parameters each dataset trains with unless the command line says otherwise.
DEFAULTS: dict[str, dict[str, Any]] = {
    "digits": dict(model="resmlp", epochs=30, batch_size=64, optimizer="adamw", lr=3e-3, weight_decay=1e-4,
                   scheduler="cosine"),
    "mnist": dict(model="resmlp", epochs=10, batch_size=128, optimizer="adamw", lr=2e-3, weight_decay=1e-4,
                  scheduler="cosine"),
    "fashion-mnist": dict(model="cnn", epochs=12, batch_size=128, optimizer="adamw", lr=2e-3, weight_decay=1e-4,
                          scheduler="cosine"),
    "cifar10": dict(model="resnet", epochs=15, batch_size=128, optimizer="sgd", lr=0.05, weight_decay=5e-4,
                    scheduler="warmup-cosine"),
    "text": dict(model="lstm", epochs=8, batch_size=32, optimizer="adam", lr=3e-3, weight_decay=0.0,
                 scheduler="cosine"),
}
DEFAULT_SEED = 0
TEXT_SEQ_LEN = 64  # characters per training window of the text dataset
DATASETS = tuple(DEFAULTS)
# The shape of one input of each dataset: (C, H, W) images, or windows of T characters. Fixed by the
# dataset, so a checkpoint can be checked against it before any data are read.
INPUT_SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion-mnist": (1, 28, 28), "cifar10": (3, 32, 32),
                "text": (TEXT_SEQ_LEN,)}
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULERS = ("none", "step", "cosine", "warmup-cosine")
# The options that decide the trained weights: a resumed run must agree with its checkpoint on them.
RESULT_OPTIONS = ("model", "dataset", "epochs", "batch_size", "optimizer", "lr", "weight_decay", "scheduler", "seed")


def _count(n: int, noun: str) -> str:
    """`n noun`, the noun in the plural unless n is 1: "1 epoch", "2 processes"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "es" if noun.endswith("s") else "s")


def _idx_dataset(cls: Callable, root: str, train: bool, stats: tuple | None) -> tuple[Dataset, list, list]:
    """MNIST-like data (uint8 N x H x W) as one normalised float32 TensorDataset: no augmentation is
    used, so the images are converted once instead of per sample and per epoch."""
    raw = cls(root, train=train)
    x = raw.data.numpy().astype(np.float32)[:, None] / np.float32(255)
    mean, std = stats if stats else ([float(x.mean())], [float(x.std())])
    x -= np.float32(mean[0])
    x /= np.float32(std[0])
    return TensorDataset(ember.from_numpy(x), raw.targets), mean, std


def _cifar(root: str, train: bool, stats: tuple | None) -> tuple[Dataset, list, list]:
    raw = datasets.CIFAR10(root, train=train)
    if stats is None:
        pixels = raw.data.reshape(-1, 3).astype(np.float64) / 255
        stats = (pixels.mean(0).tolist(), pixels.std(0).tolist())
    mean, std = stats
    ops = [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip()] if train else []
    raw.transform = T.Compose(ops + [T.ToTensor(), T.Normalize(mean, std)])
    return raw, mean, std


def _text(root: str, train: bool, stats: tuple | None) -> tuple[Dataset, list, list]:
    """The embedded public-domain text as next-character windows (no normalisation statistics)."""
    return datasets.CharText(seq_len=TEXT_SEQ_LEN, train=train), [], []


_LOADERS = {"digits": lambda root, train, stats: _idx_dataset(datasets.Digits, root, train, stats),
            "mnist": lambda root, train, stats: _idx_dataset(datasets.MNIST, root, train, stats),
            "fashion-mnist": lambda root, train, stats: _idx_dataset(datasets.FashionMNIST, root, train, stats),
            "cifar10": _cifar,
            "text": _text}


def load_data(name: str, root: str, *, stats: tuple | None = None, with_train: bool = True) -> Data:
    """The train and test splits of dataset `name`, normalised with `stats` = (mean, std) per
    channel, or with the train split's own statistics when `stats` is None. Missing files are one
    CLIError naming the file and the command that fetches them."""
    if name not in _LOADERS:
        raise CLIError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    try:
        train = None
        if with_train:
            train, mean, std = _LOADERS[name](root, True, stats)
            stats = (mean, std)
        test, mean, std = _LOADERS[name](root, False, stats)
    except DatasetNotFoundError as e:  # its message is for Python callers (download=True)
        raise CLIError(f"{name} is missing from {root} (looked for {e.missing}); fetch it with: "
                       f"python -m ember data fetch {name} --root {shlex.quote(root)}") from None
    except (OSError, RuntimeError, ValueError) as e:
        raise CLIError(f"cannot load {name} from {root!r}: {e}") from None
    if name == "text":
        return Data(train, test, INPUT_SHAPES[name], len(test.vocab), [], [], list(test.vocab.chars))
    return Data(train, test, INPUT_SHAPES[name], 10, list(mean), list(std))


def make_optimizer(name: str, params, lr: float, weight_decay: float) -> ember.optim.Optimizer:
    if name == "sgd":
        return ember.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=weight_decay)
    if name == "adam":
        return ember.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return ember.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def make_scheduler(name: str, opt, epochs: int):
    """An epoch-wise schedule: step (x0.1 at 1/2 and 3/4 of the run), cosine to 0, or a linear
    warm-up over the first tenth of the run (at least one epoch) followed by cosine."""
    sched = ember.optim.lr_scheduler
    if name == "step":
        return sched.MultiStepLR(opt, milestones=[max(1, epochs // 2), max(1, 3 * epochs // 4)], gamma=0.1)
    if name == "cosine":
        return sched.CosineAnnealingLR(opt, T_max=max(1, epochs))
    if name == "warmup-cosine":
        warm = max(1, epochs // 10)
        return sched.SequentialLR(opt, [sched.LinearLR(opt, start_factor=0.1, total_iters=warm),
                                        sched.CosineAnnealingLR(opt, T_max=max(1, epochs - warm))], milestones=[warm])
    return None


def _flat(logits, y) -> tuple:
    """Sequence models predict at every position: (N, T, C) logits and (N, T) targets become
    (N·T, C) and (N·T,), so loss and accuracy are per character. Images pass through."""
    if logits.dim() == 3:
        return logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    return logits, y


def _device_of(model: nn.Module) -> ember.device:
    return next(model.parameters()).device


def run_epoch_eval(model: nn.Module, loader: DataLoader, reduce: bool = False) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` over `loader` (per sample, or per predicted
    character for sequence models), in eval mode under `no_grad`, on the model's device.
    `reduce`: the sums are all-reduced over the process group first, so with each rank holding a
    disjoint shard every rank gets the metrics of the whole set (a collective: every rank calls it)."""
    model.eval()
    dev = _device_of(model)
    total_loss, correct, n = 0.0, 0, 0
    with ember.no_grad():
        for x, y in loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            logits, y = _flat(model(x), y)
            total_loss += F.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(dim=1) == y).sum().item())
            n += len(y)
    if reduce:
        total_loss, correct, n = _all_sum(total_loss, correct, n)
    return total_loss / n, correct / n


def _all_sum(*values: float) -> list[float]:
    """`values` summed over the ranks of the process group (float64, so counts stay exact)."""
    from ember import distributed as dist
    t = ember.tensor(list(map(float, values)), dtype=ember.float64)
    dist.all_reduce(t)
    return t.tolist()


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: without it the per-epoch summary line is all there is
        return None
    # disable=None turns the bar off when stderr is not a terminal (CI logs, tests)
    return tqdm(total=total, desc=desc, unit="batch", leave=False, disable=None, dynamic_ncols=True)


def train_step(model, opt) -> Callable:
    """One optimizer step on a batch, `step(x, y) -> (the detached loss, how many predictions were right)`:
    what `train_one_epoch` runs, and what `--compile` hands to ember.compile whole."""
    def step(x, y):
        logits, y = _flat(model(x), y)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(dim=1) == y).sum()
    return step


class CompiledStep:
    """`--compile`: `train_step(model, opt)` under ember.compile, captured once per batch shape and replayed
    (forward, backward and the optimizer's update in one program). Where a capture breaks (the step would
    then run eagerly), the step runs with the model compiled instead, `ember.compile(model)`, and `note`
    says why. `summary()` is one line on what ran."""

    def __init__(self, model, opt) -> None:
        self.model, self.opt = model, opt
        self.whole = ember.compile(train_step(model, opt))
        self.fallback: Callable | None = None
        self.model_compiled = None
        self.note: str | None = None

    def __call__(self, x, y):
        if self.fallback is not None:
            return self.fallback(x, y)
        out = self.whole(x, y)
        if self.whole.stats["eager"]:  # this batch's capture broke: the whole step cannot be replayed
            self.model_compiled = ember.compile(self.model)
            self.fallback = train_step(self.model_compiled, self.opt)
            self.note = (f"ember.compile: the training step cannot be captured whole ({self._breaks()}); the model "
                         f"is compiled instead")
        return out

    def _breaks(self) -> str:
        reasons = [f"{r} at {w}" for entries in self.whole.cache.values() for e in entries if e.program is None
                   for r, w in e.breaks]
        return "; ".join(dict.fromkeys(reasons)) or "a graph break"

    def summary(self) -> str:
        s = self.whole.stats
        if self.fallback is None:
            return (f"ember.compile: the training step ran as {_count(s['captures'], 'captured program')}, "
                    f"replayed {_count(s['replays'], 'time')}")
        m = self.model_compiled.__dict__["_compiled"].stats
        return (f"{self.note}: {_count(m['captures'], 'captured program')}, replayed {_count(m['replays'], 'time')}, "
                f"{_count(m['eager'], 'eager call')} (its children compiled where it broke)")


def train_one_epoch(model, opt, loader: DataLoader, desc: str, reduce: bool = False,
                    bar: bool = True, step: Callable | None = None,
                    on_step: Callable[[int, float], None] | None = None) -> tuple[float, float, float]:
    """One pass over `loader` on the model's device: (mean loss, accuracy, seconds).
    `reduce`: loss and accuracy are all-reduced over the process group (every rank's shard);
    `bar`: show a progress bar (rank 0 only under --distributed); `step`: what runs each batch (default
    `train_step(model, opt)`; `--compile`: a CompiledStep); `on_step(i, loss)` is called after batch i
    (1-based) with its loss (this rank's), e.g. to log it.
    Raises Diverged in the step whose loss (this rank's) is NaN or infinite."""
    model.train()
    dev = _device_of(model)
    step = step or train_step(model, opt)
    bar = _progress(len(loader), desc) if bar else None
    total_loss, correct, n = 0.0, 0, 0
    t0 = time.perf_counter()
    try:
        for i, (x, y) in enumerate(loader):
            # batches come pinned on CUDA (see `train`), so these copies are asynchronous
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            loss, hits = step(x, y)
            step_loss = loss.item()  # read for the running mean anyway: checking it costs no extra sync
            if not math.isfinite(step_loss):
                raise Diverged("training", i + 1, step_loss)
            if on_step is not None:
                on_step(i + 1, step_loss)
            count = y.numel()  # samples, or predicted characters of sequence models
            total_loss += step_loss * count
            correct += int(hits.item())
            n += count
            if bar is not None:
                bar.update(1)
                if i % 10 == 0:
                    bar.set_postfix(loss=f"{total_loss / n:.4f}", acc=f"{correct / n:.3f}",
                                    samples_s=f"{n / (time.perf_counter() - t0):.0f}", refresh=False)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    if reduce:
        total_loss, correct, n = _all_sum(total_loss, correct, n)
    return total_loss / n, correct / n, seconds


def _config(args: argparse.Namespace) -> dict[str, Any]:
    """The run's settings: the dataset's defaults overridden by whatever the command line gave."""
    if args.dataset not in DEFAULTS:
        raise CLIError(f"unknown dataset {args.dataset!r}; choose one of {', '.join(DATASETS)}")
    cfg = dict(DEFAULTS[args.dataset], dataset=args.dataset, seed=DEFAULT_SEED)
    cfg.update({k: v for k, v in vars(args).items() if k in RESULT_OPTIONS and v is not None})
    if cfg["epochs"] < 1 or cfg["batch_size"] < 1:
        raise CLIError(f"--epochs and --batch-size must be positive, got {cfg['epochs']} and {cfg['batch_size']}")
    if not (cfg["lr"] > 0 and math.isfinite(cfg["lr"])) or cfg["weight_decay"] < 0:
        raise CLIError(f"--lr must be a positive number and --weight-decay >= 0, got {cfg['lr']} and {cfg['weight_decay']}")
    if args.workers < 0:
        raise CLIError(f"--workers must be 0 (load in the main process) or more, got {args.workers}")
    return cfg


def _out_dir(args: argparse.Namespace, cfg: dict) -> str:
    return args.out or os.path.join("runs", f"{cfg['dataset']}-{cfg['model']}")


def show_config(args: argparse.Namespace) -> int:
    """`train --show-config`: print the run's settings as `train` would resolve them (the dataset's
    defaults under the options given) and exit 0, without reading data or training."""
    cfg = _config(args)
    rows = [("dataset", cfg["dataset"]), ("model", cfg["model"]), ("epochs", cfg["epochs"]),
            ("batch size", cfg["batch_size"]), ("optimizer", cfg["optimizer"]), ("lr", f"{cfg['lr']:g}"),
            ("weight decay", f"{cfg['weight_decay']:g}"), ("scheduler", cfg["scheduler"]), ("seed", cfg["seed"]),
            ("data dir", args.data_dir), ("out", _out_dir(args, cfg)), ("device", _device(args.device)),
            ("workers", args.workers), ("resume", "yes" if args.resume else "no"),
            ("min accuracy", f"{args.min_accuracy:g}"), ("distributed", "yes" if args.distributed else "no")]
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _device(name: str) -> ember.device:
    """The device of `--device` (checked to exist: one clear line when CUDA is unavailable)."""
    try:
        return ember.backend.resolve(name)
    except (TypeError, ValueError, RuntimeError) as e:
        raise CLIError(f"--device {name}: {e}") from None


def _write_curves(history: list[dict], path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    epochs = [h["epoch"] for h in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for split, style in (("train", "-o"), ("test", "-s")):
        ax_loss.plot(epochs, [h[f"{split}_loss"] for h in history], style, label=split, markersize=3)
        ax_acc.plot(epochs, [h[f"{split}_acc"] for h in history], style, label=split, markersize=3)
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def _finite_or_null(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None: strict JSON has no such numbers, and
    Python's json would write the bare NaN / Infinity that other parsers reject."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def _write_json(obj: Any, path: str) -> None:
    """Write `obj` to `path` atomically as strict JSON, non-finite floats as null."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(_finite_or_null(obj), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def _restore(ckpt_path: str, cfg: dict, model, opt, sched) -> tuple[int, list]:
    """Load a training checkpoint into model/optimizer/scheduler and the RNG: (epochs done, history)."""
    try:  # into host memory: load_state_dict then copies to the model's and optimizer's device
        ckpt = ember.load(ckpt_path, map_location="cpu")
    except (OSError, ValueError) as e:
        raise CLIError(f"cannot resume from {ckpt_path}: {e}") from None
    saved = ckpt.get("config", {})
    diff = [f"--{k.replace('_', '-')} {cfg[k]} (checkpoint: {saved.get(k)})" for k in RESULT_OPTIONS if saved.get(k) != cfg[k]]
    if diff:
        raise CLIError(f"cannot resume from {ckpt_path}: the run's settings differ from the checkpoint's: "
                       f"{'; '.join(diff)}. Resume with the same settings, or choose another --out")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    if sched is not None:
        sched.load_state_dict(ckpt["scheduler"])
    ember.set_rng_state(ckpt["rng"])
    return int(ckpt["epoch"]), list(ckpt["metrics"])


def _init_distributed(batch_size: int) -> tuple[int, int]:
    """Join the MPI process group for --distributed: (rank, world size). One clear error when mpi4py
    is missing or the global batch does not split evenly over the ranks."""
    from ember import distributed as dist
    if not dist.is_available():
        raise CLIError("--distributed needs mpi4py (pip install mpi4py mpich) and a launch under MPI: "
                       "mpiexec -n N python -m mpi4py -m ember train --distributed ...")
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if batch_size % world:
        raise CLIError(f"--batch-size {batch_size} is the global batch: it must divide evenly over the "
                       f"{world} processes (each takes batch_size / {world})")
    return rank, world


def _rank_gpu(name: str) -> ember.device:
    """Under --distributed, `--device cuda` is this process's own GPU, cuda:LOCAL_RANK (NCCL needs one GPU
    per process; LOCAL_RANK is the rank on this host, set by init_process_group); `cuda:N` is kept as
    given. The GPU is made current, so that every op and collective of this rank runs on it."""
    dev = ember.device(name)
    if dev.index is None:
        count = ember.cuda.device_count()
        local, here = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
        if here > count and os.environ.get("EMBER_DISABLE_NCCL", "") in ("", "0"):
            raise CLIError(f"--device cuda: {_count(here, 'process')} on this host but {_count(count, 'GPU')}; NCCL "
                           f"needs one GPU per process: start at most {count} per host (or set EMBER_DISABLE_NCCL=1 "
                           "to share GPUs, reducing gradients over MPI through host memory)")
        dev = ember.device("cuda", local % count)
    ember.cuda.set_device(dev.index)
    return dev


def train(args: argparse.Namespace) -> int:
    """The main job (module docstring). With `args.distributed` every rank of an MPI job runs this:
    the model is wrapped in DistributedDataParallel, each rank trains on its DistributedSampler shard
    with batch_size / world_size samples per step (so one optimizer step still sees the global batch),
    train and test metrics are all-reduced (every rank evaluates a disjoint shard of the test set),
    and only rank 0 prints, draws progress bars and writes files; the reload check runs on rank 0.
    Returns the exit status: 0, 1 (reload mismatch, or below --min-accuracy) or DIVERGED."""
    cfg = _config(args)
    out = _out_dir(args, cfg)
    ckpt_path = os.path.join(out, "checkpoint.safetensors")
    if args.resume and not os.path.exists(ckpt_path):
        raise CLIError(f"--resume: there is no checkpoint to continue from at {ckpt_path}; pass the --out of the "
                       f"run to continue, or leave out --resume to start a new run")
    distributed = bool(getattr(args, "distributed", False))
    compiled = bool(getattr(args, "compile", False))
    if compiled and distributed:
        raise CLIError("--compile does not combine with --distributed yet (DistributedDataParallel's gradient hooks "
                       "run Python code at every step, which a captured program cannot replay); leave out one of "
                       "them")
    _check_tensorboard(getattr(args, "tensorboard", None))
    rank, world = _init_distributed(cfg["batch_size"]) if distributed else (0, 1)
    lead = rank == 0
    log = print if lead else (lambda *a, **k: None)
    device = _device(getattr(args, "device", "cpu"))
    if distributed and device.type == "cuda":
        device = _rank_gpu(getattr(args, "device", "cuda"))
    # Same seed on every rank: identical initial weights (DDP broadcasts rank 0's anyway) and the
    # same RNG stream, so the checkpointed generator state (rank 0's) is valid for all ranks.
    ember.manual_seed(cfg["seed"])
    data = load_data(cfg["dataset"], args.data_dir)
    try:
        model = build_model(cfg["model"], data.in_shape, data.num_classes)
    except ValueError as e:
        raise CLIError(str(e)) from None
    model.to(device)  # before the optimizer is made: its state lives where the parameters do
    opt = make_optimizer(cfg["optimizer"], model.parameters(), cfg["lr"], cfg["weight_decay"])
    sched = make_scheduler(cfg["scheduler"], opt, cfg["epochs"])
    model_cfg = dict(model=cfg["model"], dataset=cfg["dataset"], in_shape=list(data.in_shape),
                     num_classes=data.num_classes, mean=data.mean, std=data.std)
    if data.vocab is not None:
        model_cfg["vocab"] = data.vocab
    start, history = 0, []
    if args.resume:
        # every rank reads the same file (before any rank can write it again: rank 0 writes only
        # after the first epoch's collectives, which wait for all ranks)
        start, history = _restore(ckpt_path, cfg, model, opt, sched)
        log(f"resuming from {ckpt_path} after epoch {start}")
    # Fresh (non-persistent) workers each epoch draw their seeds from the default generator at
    # that epoch, which the checkpoint restores: resumed runs see the same augmentations.
    pin = device.type == "cuda"
    net = model  # what trains: the DDP wrapper under --distributed; `model` is always the bare module
    if distributed:
        from ember.nn.parallel import DistributedDataParallel
        from ember.utils.data import DistributedSampler, Subset
        net = DistributedDataParallel(model)
        sampler = DistributedSampler(data.train, num_replicas=world, rank=rank, shuffle=True, seed=cfg["seed"])
        train_loader = DataLoader(data.train, batch_size=cfg["batch_size"] // world, sampler=sampler,
                                  num_workers=args.workers, pin_memory=pin)
        # a strided, unpadded shard (not DistributedSampler, whose padding would count samples twice):
        # the all-reduced sums are then exactly the whole test set's
        test_shard = Subset(data.test, range(rank, len(data.test), world))
        test_loader = DataLoader(test_shard, batch_size=1000, num_workers=args.workers, pin_memory=pin)
    else:
        sampler = None
        train_loader = DataLoader(data.train, batch_size=cfg["batch_size"], shuffle=True, num_workers=args.workers,
                                  pin_memory=pin)
        test_loader = DataLoader(data.test, batch_size=1000, num_workers=args.workers, pin_memory=pin)
    step = CompiledStep(net, opt) if compiled else None
    evaluated = ember.compile(model) if compiled else model  # what the per-epoch test runs
    if lead:  # only now: a run that fails on its data or model leaves no empty folder behind
        os.makedirs(out, exist_ok=True)
    tb = TensorBoardLog(args.tensorboard, len(train_loader), start) if lead and getattr(args, "tensorboard", None) \
        else None
    par = f", {_count(world, 'process')} x batch {cfg['batch_size'] // world}" if distributed else ""
    log(f"ember {ember.__version__}: {cfg['model']} ({_count(count_parameters(model), 'parameter')}) on "
        f"{cfg['dataset']} ({len(data.train):,} train / {len(data.test):,} test), {cfg['optimizer']} lr={cfg['lr']:g} "
        f"weight_decay={cfg['weight_decay']:g} scheduler={cfg['scheduler']}, batch {cfg['batch_size']}{par}, "
        f"{_count(cfg['epochs'], 'epoch')}, seed {cfg['seed']}, {_count(args.workers, 'worker')}, device {device}"
        f"{', ember.compile' if compiled else ''} -> {out}")
    for epoch in range(start + 1, cfg["epochs"] + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)  # a fresh shuffle each epoch, the same on every rank
        lr = opt.param_groups[0]["lr"]
        try:
            on_step = None if tb is None else (lambda i, loss, e=epoch: tb.step(e, i, loss))
            train_loss, train_acc, seconds = train_one_epoch(net, opt, train_loader,
                                                             f"epoch {epoch}/{cfg['epochs']}", reduce=distributed,
                                                             bar=lead, step=step, on_step=on_step)
            # evaluated on the bare module: DDP's forward may run collectives, and shards differ in batches
            test_loss, test_acc = run_epoch_eval(evaluated, test_loader, reduce=distributed)
            if not math.isfinite(test_loss):  # the epoch's last update broke the weights: not a checkpoint to keep
                raise Diverged("test", len(train_loader), test_loss)
        except Diverged as d:  # under --distributed the rank that sees it reports it; its exit aborts the job
            if tb is not None:
                tb.close()
            return _stop_diverged(d, epoch, len(train_loader), cfg, out, history, lead)
        if sched is not None:
            sched.step()
        history.append(dict(epoch=epoch, train_loss=train_loss, train_acc=train_acc, test_loss=test_loss,
                            test_acc=test_acc, lr=lr, seconds=seconds, samples_per_s=len(data.train) / seconds))
        if tb is not None:
            tb.epoch(history[-1], model)
        log(f"epoch {epoch:3d}/{cfg['epochs']}  train loss {train_loss:.4f} acc {train_acc:.4f}  "
            f"test loss {test_loss:.4f} acc {test_acc:.4f}  lr {lr:.2e}  {seconds:.1f} s "
            f"({len(data.train) / seconds:,.0f} samples/s)", flush=True)
        if lead:  # the replicas are identical after every step: one copy is the checkpoint
            ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict() if sched is not None else None, "epoch": epoch,
                        "rng": ember.get_rng_state(), "config": cfg, "model_config": model_cfg, "metrics": history},
                       ckpt_path)

    if step is not None:
        log(step.summary())
    if tb is not None:
        tb.close(cfg, history)
    status = _finish(args, out, model, model_cfg, cfg, history, data, device, test_loader) if lead else 0
    if distributed:
        # every rank exits with rank 0's verdict (a non-zero status under `python -m mpi4py` aborts the job)
        from ember import distributed as dist
        status = int(_all_sum(status)[0])
        dist.destroy_process_group()
    return status


class TensorBoardLog:
    """`--tensorboard DIR`: the run as TensorBoard event files (rank 0 writes them). The x axis of every chart
    counts optimizer steps: the loss of step s is logged at s, the metrics of epoch e at e x steps_per_epoch,
    so a resumed run continues the same curves (and hides what a crash logged after its checkpoint)."""

    def __init__(self, log_dir: str, steps_per_epoch: int, start_epoch: int) -> None:
        from ember.utils.tensorboard import SummaryWriter
        self.steps = steps_per_epoch
        self.writer = SummaryWriter(log_dir, purge_step=start_epoch * steps_per_epoch + 1 if start_epoch else None)

    def step(self, epoch: int, i: int, loss: float) -> None:
        self.writer.add_scalar("step/train_loss", loss, (epoch - 1) * self.steps + i)

    def epoch(self, record: dict, model: nn.Module) -> None:
        """One epoch's record (as in metrics.json) and a histogram of every parameter."""
        at = record["epoch"] * self.steps
        for key, tag in (("train_loss", "train_loss"), ("train_acc", "train_accuracy"), ("test_loss", "test_loss"),
                         ("test_acc", "test_accuracy"), ("lr", "lr")):
            self.writer.add_scalar(f"epoch/{tag}", record[key], at)
        for name, p in model.named_parameters():
            self.writer.add_histogram(f"weights/{name}", p, at)

    def close(self, cfg: dict | None = None, history: list | None = None) -> None:
        """Close the files; with the run's settings and history, first log them for the HPARAMS tab (the run
        DIR/hparams), with the final test loss and accuracy as its metrics."""
        if cfg is not None and history:
            last = history[-1]
            self.writer.add_hparams({k: cfg[k] for k in RESULT_OPTIONS},
                                    {"hparam/test_loss": last["test_loss"], "hparam/test_accuracy": last["test_acc"]},
                                    run_name="hparams", global_step=last["epoch"] * self.steps)
        self.writer.close()


def _check_tensorboard(log_dir: str | None) -> None:
    """`--tensorboard` needs tensorboardX: one clear line (on every rank, before any work) when it is missing."""
    if log_dir is None:
        return
    try:
        import ember.utils.tensorboard  # noqa: F401
    except ImportError as e:
        raise CLIError(f"--tensorboard {log_dir}: {e}") from None


def _stop_diverged(d: Diverged, epoch: int, steps: int, cfg: dict, out: str, history: list, lead: bool) -> int:
    """Report a diverged run in one line on stderr, record it in metrics.json (rank 0) and return DIVERGED.
    The checkpoint of the previous epoch is left as it is."""
    where = f"step {d.step} of {steps}" if d.split == "training" else f"after its last step, {d.step} of {steps}"
    kept = (f"the checkpoint of epoch {epoch - 1} is kept in {os.path.join(out, 'checkpoint.safetensors')}"
            if epoch > 1 else "no epoch completed, so there is no checkpoint")
    print(f"python -m ember train: error: the {d.split} loss became {d.loss} in epoch {epoch}, {where}: training "
          f"diverged, most often because the learning rate (--lr {cfg['lr']:g}) is too high; try a lower --lr. "
          f"Stopped: {kept}", file=sys.stderr)
    if lead:
        _write_json({"config": cfg, "epochs": history,
                     "diverged": {"epoch": epoch, "step": d.step, "split": d.split, "loss": d.loss}},
                    os.path.join(out, "metrics.json"))
    return DIVERGED


def _finish(args, out: str, model: nn.Module, model_cfg: dict, cfg: dict, history: list, data: Data,
            device: ember.device, test_loader: DataLoader) -> int:
    """Write model, metrics and curves, reload the model into a fresh instance and check it scores the
    same on the whole test split: the exit status (rank 0 alone under --distributed)."""
    if getattr(args, "distributed", False):  # test_loader holds this rank's shard: check on the whole split
        test_loader = DataLoader(data.test, batch_size=1000, num_workers=args.workers,
                                 pin_memory=device.type == "cuda")
    model_path = os.path.join(out, "model.safetensors")
    ember.save({"model": model.state_dict(), "config": model_cfg}, model_path)
    _write_json({"config": cfg, "epochs": history}, os.path.join(out, "metrics.json"))
    curves = os.path.join(out, "curves.png")
    plotted = _write_curves(history, curves)
    final_loss, final_acc = run_epoch_eval(model, test_loader)
    reloaded = _load_model(model_path, device=device)
    re_loss, re_acc = run_epoch_eval(reloaded, test_loader)
    same = re_acc == final_acc and re_loss == final_loss
    print(f"saved {model_path}, {os.path.join(out, 'metrics.json')}"
          + (f", {curves}" if plotted else " (install matplotlib for curves.png)"))
    print(f"reloaded {model_path} into a fresh model: test accuracy {re_acc:.4f} "
          f"{'matches' if same else 'DOES NOT MATCH'} the trained model's {final_acc:.4f}")
    if data.vocab is not None:
        text = sample(reloaded, datasets.Vocab(data.vocab), "In the beginning", 300, generator=ember.Generator().manual_seed(0))
        print(f"sampled from the reloaded model (temperature 0.8):\n{text}")
    if not same:
        return 1
    if final_acc < args.min_accuracy:
        print(f"test accuracy {final_acc:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


def _load_model(path: str, model_name: str | None = None, device: ember.device = ember.backend.CPU) -> nn.Module:
    """A fresh model rebuilt from a checkpoint's config (or as `model_name`), with its weights, on `device`
    (wherever the checkpoint was saved from)."""
    try:
        ckpt = ember.load(path, map_location="cpu")
    except FileNotFoundError:
        raise CLIError(f"no checkpoint at {path}") from None
    except (OSError, ValueError) as e:
        raise CLIError(f"cannot read checkpoint {path}: {e}") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise CLIError(f"{path} is not an ember training checkpoint (no 'model' entry); "
                       "use model.safetensors or checkpoint.safetensors from `python -m ember train`")
    cfg = ckpt.get("model_config") or ckpt.get("config") or {}
    name = model_name or cfg.get("model")
    if name is None or "in_shape" not in cfg:
        raise CLIError(f"{path} does not say which model it holds: pass --model and --dataset")
    try:
        model = build_model(name, tuple(cfg["in_shape"]), int(cfg["num_classes"]))
        model.load_state_dict(ckpt["model"])
    except (ValueError, RuntimeError, KeyError) as e:
        detail = " ".join(str(e).split())  # one line
        detail = detail if len(detail) <= 300 else detail[:297] + "..."
        held = cfg.get("model")
        what = (f"holds model {held!r}, not {name!r}" if held != name else
                f"holds weights that do not fit model {name!r} for inputs {tuple(cfg['in_shape'])}")
        raise CLIError(f"{path} {what}: {detail}") from None
    model.config = cfg
    return model.to(device)


def _mismatch(path: str, cfg: dict, name: str, detail: str) -> CLIError:
    """The one-line error for a checkpoint whose model does not fit dataset `name`: it names the
    checkpoint's model and dataset, the requested dataset, `detail` (how they differ) and the fix."""
    trained = cfg.get("dataset")
    fix = f"evaluate it with --dataset {trained}, or " if trained and trained != name else ""
    return CLIError(f"the {cfg['model']} model in {path}{f', trained on {trained},' if trained else ''} does not "
                    f"fit {name}: {detail}; {fix}pass a checkpoint trained on {name} "
                    f"(python -m ember train --dataset {name})")


def evaluate_checkpoint(args: argparse.Namespace) -> int:
    """`evaluate`: the checkpoint's model on a dataset's test split (by default the one it was trained
    on). A model that does not fit the dataset (input shape, class count, vocabulary) is a CLIError."""
    model = _load_model(args.checkpoint, args.model, _device(getattr(args, "device", "cpu")))
    cfg = model.config
    name = args.dataset or cfg.get("dataset")
    if name is None:
        raise CLIError("pass --dataset: the checkpoint does not name the dataset it was trained on")
    if name not in INPUT_SHAPES:
        raise CLIError(f"{args.checkpoint} names the dataset {name!r}, which is not one of {', '.join(DATASETS)}; "
                       f"pass --dataset")
    # checked before the data are read: the checkpoint's normalisation applies only to inputs of its shape
    shape = tuple(cfg["in_shape"])
    if shape != INPUT_SHAPES[name]:
        raise _mismatch(args.checkpoint, cfg, name, f"it takes inputs of shape {shape}, {name} has inputs of "
                                                    f"shape {INPUT_SHAPES[name]}")
    data = load_data(name, args.data_dir, stats=(cfg["mean"], cfg["std"]), with_train=False)
    what = "characters" if data.vocab is not None else "classes"
    if int(cfg["num_classes"]) != data.num_classes:
        raise _mismatch(args.checkpoint, cfg, name, f"it predicts {cfg['num_classes']} {what}, {name} has "
                                                    f"{data.num_classes}")
    if data.vocab is not None and cfg.get("vocab", data.vocab) != data.vocab:
        raise _mismatch(args.checkpoint, cfg, name, f"its vocabulary differs from that of {name}")
    net = ember.compile(model) if getattr(args, "compile", False) else model
    loss, acc = run_epoch_eval(net, DataLoader(data.test, batch_size=1000, num_workers=args.workers,
                                               pin_memory=_device_of(model).type == "cuda"))
    print(f"{args.checkpoint}: {cfg['model']} on {name} test split ({_count(len(data.test), 'sample')}): "
          f"loss {loss:.4f}, accuracy {acc:.4f}")
    return 0
