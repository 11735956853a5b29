"""`python -m ember COMMAND`: train, evaluate, data fetch, bench.

`train --distributed` and `bench --distributed` run data-parallel over MPI (ember.distributed).

Mistakes in the arguments or inputs (unknown model, missing data, a checkpoint of another
architecture) end with one line on stderr and exit status 2, not a traceback; set
EMBER_DEBUG=1 to see the traceback.
"""
from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (`--help` still shows the usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from .models import MODELS
    from .train import DATASETS, OPTIMIZERS, SCHEDULERS

    parser = _Parser(prog="python -m ember", description="ember's command line: the main job and tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("train", help="train a model, evaluate it every epoch, save it and reload it",
                       description="Train a model on a dataset (default: the embedded digits). Options left out take "
                                   "the dataset's defaults (see docs/results.md).")
    p.add_argument("--model", choices=tuple(MODELS),
                   help="default: resmlp (cnn on fashion-mnist, resnet on cifar10, lstm on text)")
    p.add_argument("--dataset", choices=DATASETS, default="digits")
    p.add_argument("--data-dir", default="data",
                   help="where MNIST/Fashion-MNIST/CIFAR-10 live (default: ./data; digits and text ship with ember)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--optimizer", choices=OPTIMIZERS)
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--scheduler", choices=SCHEDULERS)
    p.add_argument("--seed", type=int)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    p.add_argument("--out", help="output folder (default: runs/DATASET-MODEL)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.safetensors")
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit with status 1 below this test accuracy")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N: where the model trains")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel over MPI: launch N copies with `mpiexec -n N python -m mpi4py -m ember train "
                        "--distributed ...`; --batch-size is the global batch (split evenly over the processes), "
                        "metrics are all-reduced, and only rank 0 prints and writes files")

    p = sub.add_parser("evaluate", help="evaluate a saved model on a dataset's test split")
    p.add_argument("--checkpoint", required=True, help="model.safetensors or checkpoint.safetensors from train")
    p.add_argument("--dataset", choices=DATASETS, help="default: the dataset the model was trained on")
    p.add_argument("--model", choices=tuple(MODELS), help="default: the model the checkpoint names")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")

    p = sub.add_parser("data", help="fetch datasets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION", parser_class=_Parser)
    f = data_sub.add_parser("fetch", help="download (or take from an offline source) and verify a dataset")
    f.add_argument("name", choices=("mnist", "fashion-mnist"))
    f.add_argument("--root", default="data", help="destination root (default: ./data, what train's --data-dir reads)")

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
    try:
        if args.command == "train":
            from .train import train
            return train(args)
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
            print(f"python -m ember {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"python -m ember {args.command}: interrupted", file=sys.stderr)
        return 130
