"""The README's code and the scripts in examples/ run as documented (MNIST ones on generated
MNIST-format files, the training ones for an epoch or two): they honour --epochs, write only
under runs/, and mnist_cnn.py resumes an interrupted run and reports on a finished one."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
from helpers import make_mnist_like

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
CNN_CHECKPOINT = os.path.join("runs", "examples", "mnist_cnn.safetensors")


def run(args, cwd, timeout=180, status=0) -> str:
    """Run a Python script; check its exit status and return its stdout and stderr."""
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout)
    assert r.returncode == status, r.stdout + r.stderr
    return r.stdout + r.stderr


def readme_blocks() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_has_a_library_example_of_about_twenty_lines():
    blocks = readme_blocks()
    assert blocks and any(15 <= len(b.strip().splitlines()) <= 25 for b in blocks)


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_python_blocks_run(tmp_path, index):
    script = tmp_path / "block.py"
    script.write_text(readme_blocks()[index])
    run([str(script)], tmp_path)


def test_autograd_basics(tmp_path):
    out = run([os.path.join(EXAMPLES, "autograd_basics.py")], tmp_path)
    assert "f'''=6.0000" in out and "stationary points found" in out


def test_forward_reverse_tables(tmp_path):
    """The worked example of docs/autodiff.md: the tangent along x1 is 1/x1 + x2 = 5.5 in both modes."""
    out = run([os.path.join(EXAMPLES, "forward_reverse.py")], tmp_path)
    assert "dy/dx1 = 5.5000 (1/x1 + x2 = 5.5)" in out and "dy/dx1 = 5.5000, dy/dx2 = 1.7163" in out


def test_custom_function(tmp_path):
    assert "gradcheck passed" in run([os.path.join(EXAMPLES, "custom_function.py")], tmp_path)


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mnist")
    make_mnist_like(root, n_train=256, n_test=100)
    return root


def mnist(script, data, *args, cwd, **kw) -> str:
    return run([os.path.join(EXAMPLES, script), "--data-dir", str(data), *args], cwd, **kw)


def epochs_printed(out: str) -> list[tuple[int, int]]:
    return [(int(e), int(n)) for e, n in re.findall(r"^epoch (\d+)/(\d+):", out, re.M)]


def accuracies(out: str) -> list[float]:
    return [float(a) for a in re.findall(r"test accuracy (\d\.\d+)", out)]


def listing(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("script", ["mnist_resmlp.py", "mnist_cnn.py"])
def test_mnist_examples_train_for_epochs_and_write_only_under_runs(tmp_path, mnist_dir, script):
    data_before = listing(mnist_dir)
    out = mnist(script, mnist_dir, "--epochs", "2", cwd=tmp_path)
    assert epochs_printed(out) == [(1, 2), (2, 2)], out
    assert accuracies(out)[-1] > 0.5, out
    path = f"runs/examples/{script[:-3]}.safetensors"
    assert listing(tmp_path) == ["runs", "runs/examples", path]
    assert listing(mnist_dir) == data_before
    saved = ember.load(tmp_path / path)
    if script == "mnist_cnn.py":  # a checkpoint of the finished run
        assert (saved["epoch"], saved["epochs"]) == (2, 2) and saved["model"]["0.weight"].shape == (16, 1, 3, 3)
    else:  # the trained model's state_dict
        assert saved["1.weight"].shape == (100, 784)


def test_mnist_cnn_rerun_of_a_finished_run_prints_the_saved_models_accuracy(tmp_path, mnist_dir):
    (accuracy,) = accuracies(mnist("mnist_cnn.py", mnist_dir, "--epochs", "1", cwd=tmp_path))
    out = mnist("mnist_cnn.py", mnist_dir, "--epochs", "1", cwd=tmp_path)
    assert f"{CNN_CHECKPOINT}: already finished (epoch 1 of 1); test accuracy {accuracy:.4f}" in out, out
    assert epochs_printed(out) == [], out


def test_mnist_cnn_refuses_a_checkpoint_of_another_number_of_epochs(tmp_path, mnist_dir):
    mnist("mnist_cnn.py", mnist_dir, "--epochs", "1", cwd=tmp_path)
    out = mnist("mnist_cnn.py", mnist_dir, "--epochs", "2", cwd=tmp_path, status=1)
    assert (f"{CNN_CHECKPOINT} holds a run of --epochs 1 (epoch 1 done): rerun with --epochs 1 to resume it, "
            "or delete it or pass another --checkpoint to start a run of --epochs 2") in out, out


def test_mnist_cnn_resumes_an_interrupted_run_and_ends_as_an_uninterrupted_one(tmp_path, mnist_dir):
    epochs = "20"  # so that the run is far from its end when the test kills it after epoch 1
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    whole.mkdir()
    cut.mkdir()
    mnist("mnist_cnn.py", mnist_dir, "--epochs", epochs, cwd=whole)
    p = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "mnist_cnn.py"), "--data-dir", str(mnist_dir),
                          "--epochs", epochs], stdout=subprocess.PIPE, text=True, env=ENV, cwd=cut)
    for line in p.stdout:
        if line.startswith("epoch 1/"):
            p.kill()
            break
    p.wait(timeout=60)
    p.stdout.close()
    assert p.returncode == -9, "the run ended before the test could interrupt it"
    done = ember.load(cut / CNN_CHECKPOINT)["epoch"]
    assert 1 <= done < 20
    out = mnist("mnist_cnn.py", mnist_dir, "--epochs", epochs, cwd=cut)
    assert f"{CNN_CHECKPOINT}: resumed after epoch {done} of 20" in out, out
    assert epochs_printed(out) == [(e, 20) for e in range(done + 1, 21)], out
    a, b = ember.load(whole / CNN_CHECKPOINT)["model"], ember.load(cut / CNN_CHECKPOINT)["model"]
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)


def test_char_lm_trains_both_models_for_epochs_and_writes_nothing(tmp_path):
    out = run([os.path.join(EXAMPLES, "char_lm.py"), "--max-chars", "5000", "--epochs", "2", "--sample-chars", "20"],
              tmp_path)
    assert re.findall(r"^(\w+) epoch (\d+)/(\d+):", out, re.M) == [
        ("lstm", "1", "2"), ("lstm", "2", "2"), ("transformer", "1", "2"), ("transformer", "2", "2")], out
    assert re.findall(r"^(\w+) sample: 'In the beginning", out, re.M) == ["lstm", "transformer"], out
    assert listing(tmp_path) == []


@pytest.mark.parametrize("script", ["mnist_resmlp.py", "mnist_cnn.py", "char_lm.py"])
def test_training_examples_refuse_fewer_than_one_epoch(tmp_path, script):
    out = run([os.path.join(EXAMPLES, script), "--epochs", "0"], tmp_path, status=2)
    assert "--epochs must be at least 1, got 0" in out, out
    assert listing(tmp_path) == []
