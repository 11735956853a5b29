"""The README's code and the scripts in examples/ run as documented (MNIST ones on generated
MNIST-format files)."""
import os
import re
import subprocess
import sys

import pytest

from helpers import make_mnist_like

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run(args, cwd, timeout=180):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


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
    out = run([os.path.join(ROOT, "examples", "autograd_basics.py")], tmp_path)
    assert "f'''=6.0000" in out and "stationary points found" in out


def test_custom_function(tmp_path):
    assert "gradcheck passed" in run([os.path.join(ROOT, "examples", "custom_function.py")], tmp_path)


@pytest.mark.parametrize("script", ["mnist_resmlp.py", "mnist_cnn.py"])
def test_mnist_examples_on_generated_files(tmp_path, script):
    make_mnist_like(tmp_path / "data", n_train=256, n_test=100)
    out = run([os.path.join(ROOT, "examples", script), "--data-dir", "data", "--epochs", "2"], tmp_path)
    accuracy = float(re.findall(r"test accuracy (\d\.\d+)", out)[-1])
    assert accuracy > 0.5, out
    assert any(p.suffix == ".safetensors" for p in tmp_path.iterdir())
    if script == "mnist_cnn.py":  # a second run resumes from the checkpoint and has nothing left to do
        out = run([os.path.join(ROOT, "examples", script), "--data-dir", "data", "--epochs", "2"], tmp_path)
        assert "resumed after epoch 2" in out and "test accuracy" not in out
