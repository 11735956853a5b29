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


@needs_mpi
def test_two_ranks_with_worker_processes_train_exactly_as_without(tmp_path):
    """--workers 2 under mpiexec: every rank forks its own loader workers; the shards, batches and so
    the whole run are the same as loading in the main process."""
    runs = {}
    for w in ("0", "2"):
        proc = mpi_train("--epochs", "2", "--workers", w, "--out", str(tmp_path / w))
        assert proc.returncode == 0, proc.stderr
        epochs = json.loads((tmp_path / w / "metrics.json").read_text())["epochs"]
        runs[w] = [{k: v for k, v in e.items() if k not in ("seconds", "samples_per_s")} for e in epochs]
    assert runs["2"] == runs["0"]


@needs_mpi
def test_two_ranks_on_cuda_use_one_gpu_each_and_reduce_over_nccl(tmp_path):
    """--device cuda under mpiexec: rank r trains on cuda:r (LOCAL_RANK) and DDP's buckets go over
    NCCL (on tests/_fakecuda.py where there is no GPU; it reports what its NCCL carried)."""
    out = tmp_path / "run"
    cmd = ["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", os.path.join(ROOT, "tests", "_dist_cli.py"),
           "train", "--distributed", "--device", "cuda", "--epochs", "2", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert text.count("2 processes x batch 32") == 1 and "device cuda:0 ->" in text
    assert text.count("matches the trained model's") == 1 and "DOES NOT MATCH" not in text
    assert json.loads((out / "metrics.json").read_text())["epochs"][-1]["test_acc"] > 0.85
    # (not anchored at line starts: mpiexec may interleave the two ranks' output)
    carried = dict(re.findall(r"NCCL rank (\d): (\{[^}]*\})", text))
    import ember
    if not ember.cuda.is_available():  # the fake CUDA: 23 steps an epoch, one bucket each, on the rank's own GPU
        assert set(carried) == {"0", "1"}, text
        for r in ("0", "1"):
            calls = eval(carried[r])  # noqa: S307 - a dict literal printed by tests/_dist_cli.py
            assert {dev for dev, _ in calls} == {int(r)}, calls
            assert calls[int(r), "allReduce"] == 2 * 23 and calls[int(r), "bcast"] > 0, calls


def test_rank_gpu_is_the_local_rank_and_refuses_more_ranks_than_gpus(cuda, monkeypatch):
    from ember.cli.train import CLIError, _rank_gpu
    import ember
    n = ember.cuda.device_count()
    monkeypatch.delenv("EMBER_DISABLE_NCCL", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(n))
    monkeypatch.setenv("LOCAL_RANK", str(n - 1))
    try:
        assert _rank_gpu("cuda") == ember.device("cuda", n - 1) and ember.cuda.current_device() == n - 1
        monkeypatch.setenv("LOCAL_RANK", "0")
        assert _rank_gpu(f"cuda:{n - 1}") == ember.device("cuda", n - 1)  # an explicit GPU is kept
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(n + 1))
        with pytest.raises(CLIError, match=f"--device cuda: {n + 1} processes on this host but {n} GPU"):
            _rank_gpu("cuda")
        monkeypatch.setenv("EMBER_DISABLE_NCCL", "1")  # sharing GPUs is allowed without NCCL
        monkeypatch.setenv("LOCAL_RANK", str(n))
        assert _rank_gpu("cuda") == ember.device("cuda", 0)
    finally:
        ember.cuda.set_device(0)


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
