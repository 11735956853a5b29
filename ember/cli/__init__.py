"""`python -m ember COMMAND`: train, evaluate, data fetch, bench.

`train --distributed` and `bench --distributed` run data-parallel over MPI (ember.distributed).

Exit status: 0 done; 1 the trained model failed its check (reloaded, it scores differently, or it is
below --min-accuracy); 2 a mistake in the arguments or inputs (unknown model, missing data, a
checkpoint of another architecture or for another dataset, --resume without a checkpoint), told in
one line on stderr, not a traceback (set EMBER_DEBUG=1 to see the traceback); 3 the training loss
became NaN or infinite (one line naming the epoch and step).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (`--help` still shows the usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _defaults_table(defaults: dict[str, dict[str, Any]]) -> str:
    """The per-dataset defaults as the aligned text table of `train --help` (made from the table the
    code trains with, so the help cannot drift from it)."""
    keys = ("model", "epochs", "batch_size", "optimizer", "lr", "weight_decay", "scheduler")
    rows = [("dataset", *(f"--{k.replace('_', '-')}" for k in keys))]
    rows += [(name, *(f"{d[k]:g}" if isinstance(d[k], float) else str(d[k]) for k in keys))
             for name, d in defaults.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _parser() -> argparse.ArgumentParser:
    from ember.datasets._fetch import NAMES as FETCHABLE

    from .models import MODELS
    from .train import DATASETS, DEFAULT_SEED, DEFAULTS, DIVERGED, OPTIMIZERS, SCHEDULERS

    parser = _Parser(prog="python -m ember", description="ember's command line: the main job and tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    per_dataset = "default: per dataset, see below"
    # raw description and epilog: the table keeps its columns (the text is wrapped here by hand)
    p = sub.add_parser(
        "train", help="train a model, evaluate it every epoch, save it and reload it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a model on a dataset (default: the embedded digits), evaluate it on the test split\n"
                    "every epoch and checkpoint it; at the end write OUT/model.safetensors, metrics.json and\n"
                    "curves.png, and check that the model reloaded from disk scores the same.\n"
                    "Options left out take the dataset's defaults (below); --show-config prints the settings\n"
                    "a command line resolves to.",
        epilog=f"defaults per dataset:\n{_defaults_table(DEFAULTS)}\n\n"
               f"exit status: 0 done; 1 the reloaded model scores differently, or below --min-accuracy;\n"
               f"2 a mistake in the arguments or inputs (one line on stderr); {DIVERGED} the loss became NaN or\n"
               f"infinite (training diverged: one line naming the epoch and step).")
    p.add_argument("--model", choices=tuple(MODELS),
                   help=f"the network: image models mlp, resmlp, cnn, resnet; character models lstm, transformer "
                        f"({per_dataset})")
    p.add_argument("--dataset", choices=DATASETS, default="digits",
                   help="digits and text ship with ember; fetch mnist, fashion-mnist and cifar10 with "
                        "`python -m ember data fetch NAME` (default: %(default)s)")
    p.add_argument("--data-dir", default="data",
                   help="where mnist, fashion-mnist and cifar10 live (default: ./%(default)s)")
    p.add_argument("--epochs", type=int, help=f"passes over the training split ({per_dataset})")
    p.add_argument("--batch-size", type=int, help=f"samples per optimizer step ({per_dataset})")
    p.add_argument("--optimizer", choices=OPTIMIZERS,
                   help=f"sgd (momentum 0.9, Nesterov), adam or adamw ({per_dataset})")
    p.add_argument("--lr", type=float, help=f"the learning rate the schedule starts from ({per_dataset})")
    p.add_argument("--weight-decay", type=float,
                   help=f"L2 penalty (sgd, adam) or decoupled decay (adamw) ({per_dataset})")
    p.add_argument("--scheduler", choices=SCHEDULERS,
                   help=f"learning rate per epoch: constant (none), x0.1 at 1/2 and 3/4 of the run (step), cosine "
                        f"to 0 (cosine), or a linear warm-up over the first tenth then cosine (warmup-cosine) "
                        f"({per_dataset})")
    p.add_argument("--seed", type=int,
                   help=f"seeds everything random: initialisation, shuffling, dropout, augmentation "
                        f"(default: {DEFAULT_SEED})")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default: %(default)s)")
    p.add_argument("--out", help="output folder (default: runs/DATASET-MODEL)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose checkpoint is OUT/checkpoint.safetensors, with the same settings "
                        "(an error if there is none)")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit with status 1 below this test accuracy (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N: where the model trains (default: %(default)s)")
    p.add_argument("--show-config", action="store_true",
                   help="print the settings this command resolves to (model, epochs, batch size, optimizer, lr, "
                        "weight decay, scheduler, seed, folders, device) and exit without training")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel over MPI: launch N copies with `mpiexec -n N python -m mpi4py -m ember train "
                        "--distributed ...`; --batch-size is the global batch (split evenly over the processes), "
                        "metrics are all-reduced, and only rank 0 prints and writes files")
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also log the run to TensorBoard event files in DIR (needs tensorboardX: pip install "
                        "'ember[tensorboard]'): the training loss of every step, the train and test loss and accuracy "
                        "and the learning rate of every epoch, a histogram of each parameter every epoch, and the "
                        "hyper-parameters with the final test metrics; the x axis counts optimizer steps. Rank 0 "
                        "alone writes under --distributed; --resume hides the steps logged after the checkpoint "
                        "(default: no TensorBoard log)")
    p.add_argument("--compile", action="store_true",
                   help="ember.compile the whole training step (forward, loss, backward and the optimizer's update, "
                        "captured once per batch shape and replayed), or the model where the step cannot be "
                        "captured whole, and the evaluation forward; the same numbers as without it (not with "
                        "--distributed)")

    p = sub.add_parser("evaluate", help="evaluate a saved model on a dataset's test split")
    p.add_argument("--checkpoint", required=True, help="model.safetensors or checkpoint.safetensors from train")
    p.add_argument("--dataset", choices=DATASETS,
                   help="default: the dataset the model was trained on; another must fit the model's inputs and "
                        "classes")
    p.add_argument("--model", choices=tuple(MODELS), help="default: the model the checkpoint names")
    p.add_argument("--data-dir", default="data",
                   help="where mnist, fashion-mnist and cifar10 live (default: ./%(default)s)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")
    p.add_argument("--compile", action="store_true", help="run the model's forward under ember.compile")

    p = sub.add_parser("data", help="fetch datasets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION", parser_class=_Parser)
    f = data_sub.add_parser("fetch", help="download (or take from an offline source) and verify a dataset")
    f.add_argument("name", choices=FETCHABLE,
                   help="mnist and fashion-mnist: from the public mirrors, else from offline sources; cifar10: from "
                        "its public tarball")
    f.add_argument("--root", default="data",
                   help="destination root (default: ./%(default)s, what train's --data-dir reads)")

    sub.add_parser("bench", add_help=False, help="the reference benchmarks against hand-written NumPy and PyTorch "
                                                  "(docs/performance.md; `bench --help` for the options)")
    return parser


def _bench(argv: list[str]) -> int:
    """Run benchmarks/suite.py of the source checkout this ember comes from (benchmarks/ is not installed)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(os.path.join(root, "benchmarks", "suite.py")):
        print(f"python -m ember bench: error: no benchmarks/ folder next to this ember ({root}); the suite runs from "
              f"a clone of the repository (pip install -e .)", file=sys.stderr)
        return 2
    sys.path.insert(0, root)
    from benchmarks.suite import main as bench_main
    try:
        return bench_main(argv)
    except RuntimeError as e:  # a benchmark process failed: its stderr is in the message
        if os.environ.get("EMBER_DEBUG"):
            raise
        print(f"python -m ember bench: error: {e}", file=sys.stderr)
        return 1


def _lead_rank() -> bool:
    """False on the ranks other than 0 of an initialized ember.distributed process group."""
    dist = sys.modules.get("ember.distributed")
    return dist is None or not dist.is_initialized() or dist.get_rank() == 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its options are the suite's own
        return _bench(argv[1:])
    args = _parser().parse_args(argv)
    from .train import CLIError
    command = "data fetch" if args.command == "data" else args.command
    try:
        if args.command == "train":
            from .train import show_config, train
            return show_config(args) if args.show_config else train(args)
        if args.command == "evaluate":
            from .train import evaluate_checkpoint
            return evaluate_checkpoint(args)
        from ember.datasets import fetch
        fetch(args.name, args.root)  # it prints each source it tries and what it used
        return 0
    except (CLIError, RuntimeError, OSError) as e:
        if os.environ.get("EMBER_DEBUG"):
            raise
        if _lead_rank():  # under --distributed every rank fails alike: one line, not one per rank
            print(f"python -m ember {command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"python -m ember {command}: interrupted", file=sys.stderr)
        return 130
