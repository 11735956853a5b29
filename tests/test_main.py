"""The main job, `python -m ember train`, end to end (and once as a real subprocess)."""
import os
import subprocess
import sys

import numpy as np

import ember

from ember.__main__ import main, spirals


def test_train_reaches_accuracy_saves_and_reloads(tmp_path, capsys):
    out = tmp_path / "model.safetensors"
    assert main(["train", "--out", str(out), "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "identical outputs" in text
    ckpt = ember.load(out)
    assert set(ckpt) == {"model", "optimizer", "epoch"} and ckpt["epoch"] == 200
    assert list(ckpt["model"]) == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert ckpt["model"]["0.weight"].shape == (64, 2)
    assert len(ckpt["optimizer"]["state"]) == 6  # momentum buffers, resumable


def test_train_fails_loudly_when_accuracy_is_not_reached(tmp_path):
    assert main(["train", "--epochs", "1", "--out", str(tmp_path / "m.safetensors"), "--min-accuracy", "0.99"]) == 1


def test_spirals_are_deterministic():
    a, b = spirals(50, seed=3), spirals(50, seed=3)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], spirals(50, seed=4)[0])


def test_module_entry_point(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "ember", "train", "--epochs", "3", "--min-accuracy", "0",
                        "--out", str(tmp_path / "m.safetensors")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout
