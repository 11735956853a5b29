"""`python -m ember ...` as a new user meets it, run as a subprocess: a checkpoint that does not fit a
dataset, a run whose loss becomes NaN, --resume without a checkpoint, `train --help` and
--show-config, missing data and a `data fetch` root that cannot be made, and the wording of what the
job prints. Every error is one line on stderr with a stated exit status. No test touches the network."""
import json
import os
import re
import subprocess
import sys

import pytest

import ember
from ember.cli.models import build_model
from ember.datasets import CharText

from helpers import make_mnist_like
from test_main import make_cifar_like

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# No network and no npm / apt-get even if a regression reached a source: HTTPS goes to a closed local
# port, and PATH finds no tools (the interpreter is called by its full path).
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           https_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", PATH=os.devnull)


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ember", *map(str, args)], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=ROOT)


def one_error_line(r, status: int = 2) -> str:
    """The single stderr line of a run that must have failed with `status`."""
    assert r.returncode == status, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as strict JSON parsers do."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: bare {constant}")
    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------------- a checkpoint that does not fit the dataset
# The input shape of each dataset's samples, stated here independently of ember.cli.train.INPUT_SHAPES.
SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion-mnist": (1, 28, 28), "cifar10": (3, 32, 32),
          "text": (64,)}
VOCAB = CharText(seq_len=64, train=False).vocab.chars  # the shipped text's characters


def save_checkpoint(path, model: str, dataset: str, num_classes: int | None = None) -> None:
    """A freshly initialised `model` saved as `train` saves model.safetensors after training on `dataset`."""
    shape = SHAPES[dataset]
    text = dataset == "text"
    num_classes = num_classes or (len(VOCAB) if text else 10)
    cfg = dict(model=model, dataset=dataset, in_shape=list(shape), num_classes=num_classes,
               mean=[] if text else [0.2] * shape[0], std=[] if text else [0.3] * shape[0])
    if text:
        cfg["vocab"] = VOCAB
    ember.save({"model": build_model(model, shape, num_classes).state_dict(), "config": cfg}, path)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Small MNIST, Fashion-MNIST and CIFAR-10 files, so that every dataset is there to be loaded."""
    root = tmp_path_factory.mktemp("data")
    make_mnist_like(root, n_train=20, n_test=10)
    make_mnist_like(root, folder="FashionMNIST", n_train=20, n_test=10)
    make_cifar_like(root, per_batch=4)
    return root


# (model, the dataset it was trained on, the dataset asked for): every pair whose input shapes differ
SHAPE_MISMATCHES = [(m, "text", d) for m in ("lstm", "transformer")
                    for d in ("digits", "mnist", "fashion-mnist", "cifar10")]
SHAPE_MISMATCHES += [("resmlp", "digits", d) for d in ("mnist", "fashion-mnist", "cifar10", "text")]
SHAPE_MISMATCHES += [("cnn", "mnist", d) for d in ("digits", "cifar10", "text")]
SHAPE_MISMATCHES += [("resnet", "cifar10", d) for d in ("digits", "mnist", "text")]


@pytest.mark.parametrize("model,trained,asked", SHAPE_MISMATCHES)
def test_checkpoint_for_inputs_of_another_shape_is_one_line(tmp_path, data_dir, model, trained, asked):
    ckpt = tmp_path / "model.safetensors"
    save_checkpoint(ckpt, model, trained)
    line = one_error_line(run_cli("evaluate", "--checkpoint", ckpt, "--dataset", asked, "--data-dir", data_dir))
    assert f"the {model} model in {ckpt}, trained on {trained}, does not fit {asked}" in line
    assert f"inputs of shape {SHAPES[trained]}" in line and f"{asked} has inputs of shape {SHAPES[asked]}" in line
    assert f"evaluate it with --dataset {trained}" in line


@pytest.mark.parametrize("model,dataset,num_classes,detail", [
    ("mlp", "digits", 5, "it predicts 5 classes, digits has 10"),
    ("lstm", "text", 50, f"it predicts 50 characters, text has {len(VOCAB)}"),
])
def test_checkpoint_with_another_class_count_is_one_line(tmp_path, model, dataset, num_classes, detail):
    ckpt = tmp_path / "model.safetensors"
    save_checkpoint(ckpt, model, dataset, num_classes)
    line = one_error_line(run_cli("evaluate", "--checkpoint", ckpt))  # the dataset the checkpoint names
    assert f"the {model} model in {ckpt}, trained on {dataset}, does not fit {dataset}: {detail}" in line


def test_checkpoint_that_fits_another_dataset_is_evaluated(tmp_path, data_dir):
    ckpt = tmp_path / "model.safetensors"
    save_checkpoint(ckpt, "cnn", "mnist")  # Fashion-MNIST has MNIST's shape and class count
    r = run_cli("evaluate", "--checkpoint", ckpt, "--dataset", "fashion-mnist", "--data-dir", data_dir)
    assert r.returncode == 0, r.stderr
    assert "cnn on fashion-mnist test split (10 samples)" in r.stdout


def test_checkpoint_of_another_architecture_names_both(tmp_path):
    ckpt = tmp_path / "model.safetensors"
    save_checkpoint(ckpt, "lstm", "text")
    line = one_error_line(run_cli("evaluate", "--checkpoint", ckpt, "--model", "mlp"))
    assert f"{ckpt} holds model 'lstm', not 'mlp'" in line


# ---------------------------------------------------------------------- a loss that becomes NaN
DIVERGED = 3


def test_loss_that_becomes_nan_stops_the_run_in_one_line(tmp_path):
    out = tmp_path / "run"
    line = one_error_line(run_cli("train", "--lr", "1e6", "--epochs", "2", "--out", out), status=DIVERGED)
    m = re.search(r"the training loss became (nan|inf|-inf) in epoch (\d), step (\d+) of 23: training diverged", line)
    assert m, line
    assert "learning rate (--lr 1e+06) is too high; try a lower --lr" in line and "DOES NOT MATCH" not in line
    metrics = strict_json((out / "metrics.json").read_text())
    assert metrics["diverged"] == {"epoch": int(m[2]), "step": int(m[3]), "split": "training", "loss": None}
    assert len(metrics["epochs"]) == int(m[2]) - 1
    assert not (out / "model.safetensors").exists()  # no final model from broken weights


def test_divergence_keeps_the_last_good_checkpoint_and_resume_works(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--epochs", "2", "--model", "mlp", "--out", out]
    assert run_cli(*args).returncode == 0
    # Make the run's checkpoint that of epoch 1 with one NaN weight: epoch 2 then diverges in its first
    # step, whatever the platform's rounding.
    ckpt_path = out / "checkpoint.safetensors"
    ckpt = ember.load(ckpt_path)
    good = ckpt["model"]["1.weight"].clone()
    ckpt["model"]["1.weight"][0, 0] = float("nan")
    ckpt.update(epoch=1, metrics=ckpt["metrics"][:1])
    ember.save(ckpt, ckpt_path)
    kept = ckpt_path.read_bytes()
    (out / "model.safetensors").unlink()

    first = one_error_line(run_cli(*args, "--resume"), status=DIVERGED)
    assert "the training loss became nan in epoch 2, step 1 of 23: training diverged" in first
    assert f"the checkpoint of epoch 1 is kept in {ckpt_path}" in first
    assert ckpt_path.read_bytes() == kept and not (out / "model.safetensors").exists()
    metrics = strict_json((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1] and metrics["diverged"]["loss"] is None

    again = run_cli(*args, "--resume")  # the kept checkpoint resumes, and the run is reproduced to the step
    assert f"resuming from {ckpt_path} after epoch 1" in again.stdout
    assert one_error_line(again, status=DIVERGED) == first

    ckpt = ember.load(ckpt_path)
    ckpt["model"]["1.weight"] = good
    ember.save(ckpt, ckpt_path)
    done = run_cli(*args, "--resume")
    assert done.returncode == 0, done.stderr
    metrics = strict_json((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2] and "diverged" not in metrics


def test_metrics_json_writes_non_finite_floats_as_null(tmp_path):
    from ember.cli.train import _write_json
    _write_json({"loss": float("nan"), "epochs": [{"acc": float("inf")}, {"acc": -float("inf")}], "lr": 0.5},
                str(tmp_path / "m.json"))
    assert strict_json((tmp_path / "m.json").read_text()) == {"loss": None, "epochs": [{"acc": None}, {"acc": None}],
                                                              "lr": 0.5}


# ---------------------------------------------------------------------- --resume
def test_resume_without_a_checkpoint_is_an_error(tmp_path):
    out = tmp_path / "run"
    r = run_cli("train", "--epochs", "1", "--out", out, "--resume")
    line = one_error_line(r)
    assert f"--resume: there is no checkpoint to continue from at {out / 'checkpoint.safetensors'}" in line
    assert "leave out --resume to start a new run" in line
    assert r.stdout == "" and not out.exists()  # nothing trained, nothing written


# ---------------------------------------------------------------------- train --help and --show-config
def test_every_train_option_says_what_it_does_and_its_default():
    import argparse
    from ember.cli import _parser
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices["train"]._actions:
        assert action.help, f"{action.option_strings} has no help"
        if action.nargs != 0:  # an option with a value (flags are off unless given)
            assert "default" in action.help, f"{action.option_strings} does not say its default"


def test_train_help_prints_the_defaults_table():
    from ember.cli.train import DEFAULTS
    r = run_cli("train", "--help")
    assert r.returncode == 0 and r.stderr == ""
    text = r.stdout
    assert "docs/results.md" not in text
    words = " ".join(text.split())  # argparse wraps the help lines
    assert words.count("default: per dataset, see below") == 7  # model, epochs, batch size, optimizer, lr, wd, sched
    assert "{sgd,adam,adamw}" in text and "{none,step,cosine,warmup-cosine}" in text and "(default: 0)" in text
    table = text.split("defaults per dataset:\n", 1)[1]
    for name, d in DEFAULTS.items():
        row = [name, d["model"], str(d["epochs"]), str(d["batch_size"]), d["optimizer"], f"{d['lr']:g}",
               f"{d['weight_decay']:g}", d["scheduler"]]
        assert re.search(r"^  " + r"\s+".join(map(re.escape, row)) + r"$", table, re.M), (name, table)
    assert "3 the loss became NaN" in text


def show_config(*args) -> dict:
    r = run_cli("train", *args, "--show-config")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in r.stdout.splitlines())


def test_show_config_prints_the_resolved_settings_without_training(tmp_path):
    cfg = show_config("--dataset", "mnist")
    assert cfg == {"dataset": "mnist", "model": "resmlp", "epochs": "10", "batch size": "128", "optimizer": "adamw",
                   "lr": "0.002", "weight decay": "0.0001", "scheduler": "cosine", "seed": "0", "data dir": "data",
                   "out": os.path.join("runs", "mnist-resmlp"), "device": "cpu", "workers": "0", "resume": "no",
                   "min accuracy": "0", "distributed": "no"}
    out = tmp_path / "run"
    cfg = show_config("--dataset", "text", "--model", "transformer", "--lr", "0.01", "--seed", "5", "--out", out)
    assert ((cfg["model"], cfg["lr"], cfg["seed"], cfg["epochs"], cfg["out"])
            == ("transformer", "0.01", "5", "8", str(out)))
    assert not out.exists()  # nothing written, nothing trained
    assert "--epochs and --batch-size must be positive" in one_error_line(run_cli("train", "--epochs", "0",
                                                                                  "--show-config"))


# ---------------------------------------------------------------------- missing data, and where data fetch cannot write
@pytest.mark.parametrize("dataset", ["mnist", "fashion-mnist", "cifar10"])
def test_missing_data_is_one_line_with_the_command_that_fetches_it(tmp_path, dataset):
    root, out = tmp_path / "nothing", tmp_path / "run"
    line = one_error_line(run_cli("train", "--dataset", dataset, "--data-dir", root, "--out", out))
    assert line.startswith(f"python -m ember train: error: {dataset} is missing from {root} (looked for {root}")
    assert line.endswith(f"; fetch it with: python -m ember data fetch {dataset} --root {root}")
    assert line.count("data fetch") == 1 and "download=True" not in line
    assert not out.exists()  # a run that cannot start leaves no folder behind


@pytest.mark.parametrize("name", ["mnist", "cifar10"])
@pytest.mark.parametrize("where", ["under a file", "in /proc"])
def test_fetch_into_a_folder_that_cannot_be_made_fails_first_alone(tmp_path, name, where):
    if where == "in /proc":
        if not os.path.isdir("/proc/self"):
            pytest.skip("no /proc here")
        root, reason = "/proc/ember-test", "/proc does not allow it"
    else:
        (tmp_path / "notes.txt").write_text("a regular file")
        root, reason = tmp_path / "notes.txt" / "data", f"{tmp_path / 'notes.txt'} is a file, not a folder"
    r = run_cli("data", "fetch", name, "--root", root, timeout=60)
    line = one_error_line(r)
    assert line.startswith("python -m ember data fetch: error: ") and "cannot create the folder" in line
    assert reason in line and line.endswith("choose another root")
    assert r.stdout == ""  # reported before any source was tried


# ---------------------------------------------------------------------- what the job prints
def test_counts_are_pluralised(tmp_path):
    r = run_cli("train", "--epochs", "1", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0]
    assert ", 1 epoch, " in header and ", 0 workers, " in header and "1 epochs" not in header
    r = run_cli("evaluate", "--checkpoint", tmp_path / "run" / "model.safetensors")
    assert r.returncode == 0 and "digits test split (355 samples)" in r.stdout
