"""`python -m ember train --distributed` and `bench --distributed` under `mpiexec -n 2`, end to end:
one set of output files, rank 0 alone printing, all-reduced metrics equal to the whole test split's,
and one-line errors (batch that does not split, MPI missing)."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ember.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None and shutil.which("mpiexec") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpiexec")


def mpi_train(*args, n=2, timeout=120):
    cmd = ["mpiexec", "-n", str(n), sys.executable, "-m", "mpi4py", "-m", "ember", "train", "--distributed", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout, cwd=ROOT)


@needs_mpi
def test_two_ranks_train_write_one_set_of_files_and_report_whole_split_metrics(tmp_path, capsys):
    out = tmp_path / "run"
    proc = mpi_train("--epochs", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    # rank 0 alone prints: each line once
    assert text.count("2 processes x batch 32") == 1
    assert len(re.findall(r"^epoch +1/2", text, re.M)) == 1 and len(re.findall(r"^epoch +2/2", text, re.M)) == 1
    assert text.count("matches the trained model's") == 1 and "DOES NOT MATCH" not in text
    files = set(os.listdir(out))
    assert files - {"curves.png"} == {"checkpoint.safetensors", "model.safetensors", "metrics.json"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    # the all-reduced test metrics are those of the whole test split, evaluated here in one process
    assert main(["evaluate", "--checkpoint", str(out / "model.safetensors")]) == 0
    acc = float(re.search(r"accuracy (\d\.\d+)", capsys.readouterr().out).group(1))
    assert acc == pytest.approx(metrics["epochs"][-1]["test_acc"], abs=1e-4)
    assert metrics["epochs"][-1]["test_acc"] > 0.85  # 2 epochs on digits, data-parallel, still learns


@needs_mpi
def test_global_batch_that_does_not_split_is_one_error_line(tmp_path):
    proc = mpi_train("--epochs", "1", "--batch-size", "63", "--out", str(tmp_path / "run"), timeout=60)
    assert proc.returncode != 0
    msg = "--batch-size 63 is the global batch: it must divide evenly over the 2 processes"
    assert proc.stderr.count(msg) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_distributed_without_mpi4py_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # `import mpi4py` now raises ImportError
    assert main(["train", "--distributed", "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m ember train: error: --distributed needs mpi4py")


def test_train_without_distributed_flag_does_not_touch_mpi(tmp_path, capsys):
    import ember.distributed as dist
    assert main(["train", "--epochs", "1", "--batch-size", "63", "--out", str(tmp_path / "run")]) == 0
    assert not dist.is_initialized()
    assert "processes x batch" not in capsys.readouterr().out


@needs_mpi
def test_bench_distributed_quick_prints_the_scaling_table():
    proc = subprocess.run([sys.executable, "-m", "ember", "bench", "--distributed", "--quick"], capture_output=True,
                          text=True, env=ENV, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = {m.group(1): m for m in re.finditer(r"^\| (W[12]) [^|]+\| ([\d,.]+) \([^|]+\| ([\d,.]+) \([^|]+\| (\d+)% \|$",
                                                 proc.stdout, re.M)}
    assert set(rows) == {"W1", "W2"}
    for m in rows.values():
        one, two, eff = (float(m.group(i).replace(",", "")) for i in (2, 3, 4))
        assert one > 0 and two > 0 and eff == pytest.approx(100 * two / (2 * one), abs=1)
    bw = re.findall(r"^\| (\d+) MB \| [\d.]+ \| ([\d,.]+) ", proc.stdout, re.M)
    assert [mb for mb, _ in bw] == ["1", "25", "100"] and all(float(v.replace(",", "")) > 0 for _, v in bw)


def test_bench_distributed_without_mpiexec_is_one_error_line(monkeypatch, capsys):
    sys.path.insert(0, ROOT)
    import benchmarks.distributed as bd
    import benchmarks.suite  # noqa: F401  (imported before find_spec is patched)
    monkeypatch.setattr(bd.shutil, "which", lambda name: None)
    monkeypatch.setattr(bd.importlib.util, "find_spec", lambda name: object())
    assert main(["bench", "--distributed", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m ember bench: error: bench --distributed needs mpiexec on PATH "
                   "(pip install mpich, or your MPI's launcher)"]
