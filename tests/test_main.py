"""The main job, `python -m ember train`, end to end (and once as a real subprocess)."""
import os
import subprocess
import sys

import numpy as np

from ember.__main__ import main, spirals


def test_train_reaches_accuracy_saves_and_reloads(tmp_path, capsys):
    out = tmp_path / "model.npz"
    assert main(["train", "--out", str(out), "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "identical outputs" in text
    with np.load(out, allow_pickle=False) as f:
        assert set(f.files) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}
        assert f["fc1.weight"].shape == (64, 2)


def test_train_fails_loudly_when_accuracy_is_not_reached(tmp_path):
    assert main(["train", "--epochs", "1", "--out", str(tmp_path / "m.npz"), "--min-accuracy", "0.99"]) == 1


def test_spirals_are_deterministic():
    a, b = spirals(50, seed=3), spirals(50, seed=3)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], spirals(50, seed=4)[0])


def test_module_entry_point(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "ember", "train", "--epochs", "3", "--min-accuracy", "0",
                        "--out", str(tmp_path / "m.npz")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout
