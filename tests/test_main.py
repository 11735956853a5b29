"""The main job, `python -m ember train|evaluate|data`, end to end: the embedded digits, generated
MNIST-format files, checkpoints that survive SIGKILL, and one-line errors."""
import copy
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
from ember.cli import main

from helpers import make_mnist_like

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def weights(path) -> dict:
    return {k: v.numpy() for k, v in ember.load(path)["model"].items()}


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "ember", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=ROOT)


def test_default_job_on_digits_reaches_accuracy_and_reloads(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--min-accuracy", "0.96"]) == 0
    text = capsys.readouterr().out
    assert "resmlp" in text and "digits" in text and "matches the trained model's" in text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["epochs"] == len(metrics["epochs"]) == 30
    last = metrics["epochs"][-1]
    assert set(last) == {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "lr", "seconds", "samples_per_s"}
    assert last["test_acc"] >= 0.96 and last["train_loss"] < metrics["epochs"][0]["train_loss"]
    assert text.count("test loss") == 30  # one summary line per epoch
    ckpt = ember.load(out / "checkpoint.safetensors")
    assert ckpt["epoch"] == 30 and set(ckpt) >= {"model", "optimizer", "scheduler", "rng", "metrics", "config"}
    pytest.importorskip("matplotlib")
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_command_reproduces_the_final_accuracy(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--epochs", "3", "--model", "mlp"]) == 0
    final = json.loads((out / "metrics.json").read_text())["epochs"][-1]["test_acc"]
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(out / "model.safetensors")]) == 0
    assert f"accuracy {final:.4f}" in capsys.readouterr().out


@pytest.mark.parametrize("model", ["cnn", "resnet"])
def test_convolutional_models_train_on_digits(tmp_path, model):
    assert main(["train", "--out", str(tmp_path), "--model", model, "--epochs", "2", "--batch-size", "128"]) == 0
    assert json.loads((tmp_path / "metrics.json").read_text())["epochs"][-1]["test_acc"] > 0.5


def test_mnist_format_files_train_and_evaluate(tmp_path, capsys):
    make_mnist_like(tmp_path / "data")
    out = tmp_path / "run"
    args = ["--dataset", "mnist", "--data-dir", str(tmp_path / "data"), "--model", "cnn"]
    assert main(["train", *args, "--out", str(out), "--epochs", "3", "--batch-size", "32", "--min-accuracy", "0.9"]) == 0
    assert "400 train / 200 test" in capsys.readouterr().out
    assert main(["evaluate", "--checkpoint", str(out / "model.safetensors"), "--data-dir", str(tmp_path / "data")]) == 0
    assert "mnist test split (200 samples)" in capsys.readouterr().out


def test_workers_give_the_same_weights_as_the_main_process(tmp_path):
    base = ["train", "--epochs", "2", "--model", "mlp", "--optimizer", "sgd", "--lr", "0.05"]
    assert main([*base, "--out", str(tmp_path / "w0")]) == 0
    assert main([*base, "--out", str(tmp_path / "w2"), "--workers", "2"]) == 0
    a, b = weights(tmp_path / "w0" / "model.safetensors"), weights(tmp_path / "w2" / "model.safetensors")
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_seed_decides_the_weights(tmp_path):
    for seed in (1, 1, 2):
        assert main(["train", "--epochs", "1", "--seed", str(seed), "--out", str(tmp_path / f"s{seed}")]) == 0
    w1, w2 = weights(tmp_path / "s1" / "model.safetensors"), weights(tmp_path / "s2" / "model.safetensors")
    assert not np.array_equal(w1["1.weight"], w2["1.weight"])


@pytest.mark.parametrize("scheduler,optimizer", [("step", "sgd"), ("warmup-cosine", "adam"), ("none", "adamw")])
def test_schedules_and_optimizers(tmp_path, scheduler, optimizer):
    assert main(["train", "--epochs", "4", "--scheduler", scheduler, "--optimizer", optimizer, "--lr", "0.01",
                 "--out", str(tmp_path)]) == 0
    lrs = [e["lr"] for e in json.loads((tmp_path / "metrics.json").read_text())["epochs"]]
    expected = {"step": [0.01, 0.01, 0.001, 0.0001], "warmup-cosine": None, "none": [0.01] * 4}[scheduler]
    if expected is None:  # one warm-up epoch from lr/10, then cosine from lr
        np.testing.assert_allclose(lrs[:2], [0.001, 0.01])
        assert lrs[2] < lrs[1] and lrs[3] < lrs[2]
    else:
        np.testing.assert_allclose(lrs, expected)


def test_sigkill_mid_epoch_then_resume_gives_the_uninterrupted_weights(tmp_path):
    # small batches make epochs long enough (~0.2 s) that each kill lands mid-run, at a random point
    common = ["train", "--epochs", "12", "--model", "resmlp", "--batch-size", "8", "--seed", "3"]
    full = run_cli(*common, "--out", str(tmp_path / "full"))
    assert full.returncode == 0, full.stderr
    rng = np.random.default_rng(0)
    out = tmp_path / "killed"
    for attempt in range(2):  # kill twice, at different moments after the first checkpoint
        resume = ["--resume"] if attempt else []  # --resume needs a checkpoint: the first attempt starts the run
        proc = subprocess.Popen([sys.executable, "-m", "ember", *common, "--out", str(out), *resume],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV, cwd=ROOT)
        seen = ""
        while "/12  train loss" not in seen:  # wait for an epoch summary line
            line = proc.stdout.readline()
            assert line, "the run ended before finishing an epoch"
            seen = line
        while not (out / "checkpoint.safetensors").exists():  # written just after the summary line
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.0, 0.3)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    assert not (out / "model.safetensors").exists()
    resumed = run_cli(*common, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    a, b = weights(tmp_path / "full" / "model.safetensors"), weights(out / "model.safetensors")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    full_metrics = json.loads((tmp_path / "full" / "metrics.json").read_text())["epochs"]
    resumed_metrics = json.loads((out / "metrics.json").read_text())["epochs"]
    assert [m["test_acc"] for m in full_metrics] == [m["test_acc"] for m in resumed_metrics]


def test_resume_with_other_settings_is_refused(tmp_path, capsys):
    assert main(["train", "--epochs", "1", "--out", str(tmp_path)]) == 0
    assert main(["train", "--epochs", "1", "--lr", "0.5", "--out", str(tmp_path), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--lr 0.5 (checkpoint: 0.003)" in err


@pytest.mark.parametrize("args,message", [
    (["train", "--model", "transformer9"], "invalid choice: 'transformer9'"),
    (["train", "--dataset", "mnist", "--data-dir", "{tmp}/nothing"], "fetch mnist"),
    (["train", "--dataset", "cifar10", "--data-dir", "{tmp}/nothing"], "cifar10"),
    (["train", "--epochs", "0"], "--epochs and --batch-size must be positive"),
    (["train", "--lr", "-1"], "--lr must be a positive number"),
    (["train", "--workers", "-2"], "--workers must be 0"),
    (["train", "--out", "{tmp}/notes.txt"], "File exists"),
    (["evaluate", "--checkpoint", "{tmp}/model.safetensors", "--dataset", "cifar10"], "cifar10"),
    (["evaluate", "--checkpoint", "{tmp}/missing.safetensors"], "no checkpoint at"),
    (["evaluate", "--checkpoint", "{tmp}/notes.txt"], "cannot read checkpoint"),
    (["data", "fetch", "cifar100"], "invalid choice: 'cifar100'"),
])
def test_bad_arguments_give_one_clear_line(tmp_path, args, message):
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    from ember.cli.models import build_model
    ember.save({"model": build_model("mlp", (1, 8, 8), 10).state_dict(),
                "config": {"model": "mlp", "in_shape": [1, 8, 8], "num_classes": 10, "mean": [0.3], "std": [0.4]}},
               tmp_path / "model.safetensors")
    r = run_cli(*[a.format(tmp=tmp_path) for a in args], timeout=60)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert message in r.stderr


def test_checkpoint_of_another_architecture_gives_one_line(tmp_path, capsys):
    assert main(["train", "--epochs", "1", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(tmp_path / "model.safetensors"), "--model", "cnn"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds model 'resmlp', not 'cnn'" in err
    ckpt = ember.load(tmp_path / "model.safetensors")
    ckpt["model"].pop("1.weight")
    ember.save(ckpt, tmp_path / "damaged.safetensors")
    assert main(["evaluate", "--checkpoint", str(tmp_path / "damaged.safetensors")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "do not fit model 'resmlp'" in err and "1.weight" in err
    ember.save({"weights": ember.zeros(3)}, tmp_path / "other.safetensors")
    assert main(["evaluate", "--checkpoint", str(tmp_path / "other.safetensors")]) == 2
    assert "not an ember training checkpoint" in capsys.readouterr().err


def test_data_fetch_reports_its_source(tmp_path, monkeypatch, capsys):
    import ember.datasets
    calls = []
    def fake_fetch(name, root, log=print):
        calls.append((name, root))
        log("fetched from a test")
        return "fetched from a test"

    monkeypatch.setattr(ember.datasets, "fetch", fake_fetch)
    assert main(["data", "fetch", "fashion-mnist", "--root", str(tmp_path)]) == 0
    assert calls == [("fashion-mnist", str(tmp_path))] and capsys.readouterr().out == "fetched from a test\n"


def test_help_lists_every_option():
    r = run_cli("train", "--help", timeout=60)
    assert r.returncode == 0
    for opt in ("--model", "--dataset", "--data-dir", "--epochs", "--batch-size", "--optimizer", "--lr",
                "--weight-decay", "--scheduler", "--seed", "--workers", "--out", "--resume"):
        assert opt in r.stdout


def make_cifar_like(root, per_batch: int = 24, seed: int = 0) -> None:
    """CIFAR-10's binary layout (records of 1 label byte + 3x32x32 pixel bytes) with class-coloured images."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, per_batch).astype(np.uint8)
        pixels = rng.integers(0, 80, (per_batch, 3, 32, 32)).astype(np.uint8)
        pixels[np.arange(per_batch), labels % 3, 8:24, 8:24] = 25 * labels[:, None, None]
        records = np.concatenate([labels[:, None], pixels.reshape(per_batch, -1)], axis=1)
        (folder / name).write_bytes(records.tobytes())


def test_cifar10_with_augmentation_in_workers(tmp_path, capsys):
    make_cifar_like(tmp_path / "data")
    out = tmp_path / "run"
    assert main(["train", "--dataset", "cifar10", "--data-dir", str(tmp_path / "data"), "--epochs", "2",
                 "--batch-size", "16", "--workers", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "resnet" in text and "120 train / 24 test" in text and "matches the trained model's" in text
    cfg = ember.load(out / "model.safetensors")["config"]
    assert cfg["in_shape"] == [3, 32, 32] and len(cfg["mean"]) == len(cfg["std"]) == 3


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_compile_trains_to_the_same_accuracy_and_weights(tmp_path, capsys, model):
    base = ["train", "--model", model, "--epochs", "2"]
    assert main([*base, "--out", str(tmp_path / "eager")]) == 0
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "compiled"), "--compile"]) == 0
    text = capsys.readouterr().out
    assert ", ember.compile ->" in text and "matches the trained model's" in text
    # the whole step was captured (the full batches and the last, smaller one) and replayed
    m = re.search(r"ember\.compile: the training step ran as (\d+) captured programs?, replayed (\d+) times", text)
    assert m and 1 <= int(m.group(1)) <= 2 and int(m.group(2)) > 0, text
    eager, compiled = (json.loads((tmp_path / d / "metrics.json").read_text())["epochs"] for d in ("eager", "compiled"))
    for key in ("train_acc", "test_acc"):
        assert [e[key] for e in compiled] == [e[key] for e in eager]
    for key in ("train_loss", "test_loss"):
        np.testing.assert_allclose([e[key] for e in compiled], [e[key] for e in eager], rtol=1e-5)
    a, b = weights(tmp_path / "eager" / "model.safetensors"), weights(tmp_path / "compiled" / "model.safetensors")
    assert a.keys() == b.keys()  # the bare model's keys (no `_orig_mod.`)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert main(["evaluate", "--checkpoint", str(tmp_path / "compiled" / "model.safetensors"), "--compile"]) == 0
    assert f"accuracy {compiled[-1]['test_acc']:.4f}" in capsys.readouterr().out


def test_compiled_step_falls_back_to_the_compiled_model_where_it_cannot_be_captured():
    from ember.cli.train import CompiledStep, train_step
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    twin = copy.deepcopy(model)
    for m in (model, twin):  # a hook is Python code at every call: a capture breaks on it
        m[0].register_forward_hook(lambda mod, args, out: None)
    step = CompiledStep(model, ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    ref = train_step(twin, ember.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9))
    x, y = ember.randn(6, 4), ember.randint(0, 3, (6,))
    for _ in range(4):
        (loss, hits), (want, want_hits) = step(x, y), ref(x, y)
        assert loss.item() == want.item() and hits.item() == want_hits.item()
    assert step.fallback is not None and "hooks" in step.note
    assert "the model is compiled instead" in step.summary()


def test_compile_with_distributed_is_one_clear_line(capsys):
    assert main(["train", "--compile", "--distributed"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--compile does not combine with --distributed" in err
