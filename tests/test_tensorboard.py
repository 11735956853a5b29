"""`ember.utils.tensorboard.SummaryWriter` and `python -m ember train --tensorboard DIR`.

The event files are read back with a real reader: TensorBoard's own loader when tensorboard is installed,
else the TFRecord framing checked record by record (lengths and masked CRC-32C, with tensorboardX's
`masked_crc32c`) and the events parsed with tensorboardX's protocol buffers. Skips without tensorboardX.
"""
from __future__ import annotations

import glob
import math
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

tensorboardX = pytest.importorskip("tensorboardX")

import ember  # noqa: E402
from ember.utils.tensorboard import SummaryWriter  # noqa: E402
from tensorboardX.proto.event_pb2 import Event  # noqa: E402
from tensorboardX.proto.graph_pb2 import GraphDef  # noqa: E402
from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData  # noqa: E402
from tensorboardX.record_writer import masked_crc32c  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------- reading event files back
def _records(path: str):
    """The payloads of a TFRecord file: u64 length, u32 masked CRC of the length, data, u32 masked CRC of the data."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[pos + 8:pos + 12])[0] == masked_crc32c(header), f"bad length CRC in {path}"
        payload = data[pos + 12:pos + 12 + n]
        assert struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])[0] == masked_crc32c(payload), f"bad CRC in {path}"
        yield payload
        pos += 16 + n


def _load(path: str) -> list:
    try:
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    except ImportError:
        return [Event.FromString(r) for r in _records(path)]
    return list(LegacyEventFileLoader(path).Load())


def events(run: str) -> list:
    """Every event of the event files directly in `run` (not its sub-runs), oldest file first."""
    files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")), key=os.path.getmtime)
    assert files, f"no event file in {run}"
    return [e for f in files for e in _load(f)]


def values(run: str, tag: str) -> list[tuple[int, object]]:
    """(step, Summary.Value) of every summary value with `tag` in `run`."""
    return [(e.step, v) for e in events(run) if e.HasField("summary") for v in e.summary.value if v.tag == tag]


def scalars(run: str, tag: str) -> list[tuple[int, float]]:
    return [(s, v.simple_value) for s, v in values(run, tag)]


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB/RGBA PNG whose rows use filter 0, as ember writes them: (H, W, C) uint8 (checks the CRCs)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    c = {2: 3, 6: 4}[colour]
    assert depth == 8 and b"IEND" in chunks
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + w * c)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(h, w, c)


def image_of(run: str, tag: str) -> np.ndarray:
    (_, v), = values(run, tag)
    img = decode_png(v.image.encoded_image_string)
    assert (v.image.height, v.image.width, v.image.colorspace) == img.shape
    try:
        import io

        from PIL import Image
    except ImportError:
        return img
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(v.image.encoded_image_string))), img)
    return img


# ---------------------------------------------------------------------------- the writer
def test_default_log_dir_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1", filename_suffix=".v1") as w:
        run = w.get_logdir()
        w.add_scalar("x", 1.0)
    import socket
    parent, name = os.path.split(run)
    assert parent == "runs" and name.endswith("_" + socket.gethostname() + "_lr0.1") and name[:3].isalpha()
    (f,) = glob.glob(os.path.join(run, "events.out.tfevents.*"))
    assert f.endswith(".v1")
    first = events(run)[0]
    assert first.file_version == "brain.Event:2"


def test_scalars_from_tensors_arrays_and_numbers(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("loss", ember.tensor(0.5), 0)
        w.add_scalar("loss", ember.tensor([0.25], dtype=ember.float64, requires_grad=True), 1)
        w.add_scalar("loss", np.float32(0.125), 2)
        w.add_scalar("loss", np.array([[2.0]]), 3)
        w.add_scalar("loss", 3, 4, walltime=1234.5)
        w.add_scalar("new", ember.tensor(1.5), 7, new_style=True)
        w.add_scalar("new64", 1 / 3, 8, new_style=True, double_precision=True)
    assert scalars(str(tmp_path), "loss") == [(0, 0.5), (1, 0.25), (2, 0.125), (3, 2.0), (4, 3.0)]
    assert [e.wall_time for e in events(str(tmp_path)) if e.step == 4] == [1234.5]
    (step, v), = values(str(tmp_path), "new")
    assert step == 7 and list(v.tensor.float_val) == [1.5] and v.metadata.plugin_data.plugin_name == "scalars"
    (_, v), = values(str(tmp_path), "new64")
    assert list(v.tensor.double_val) == [1 / 3]


def test_scalar_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(AssertionError, match=r"add_scalar\('x'\): scalar_value must hold one element, got shape "
                                                 r"\(2,\)"):
            w.add_scalar("x", ember.ones(2))
        with pytest.raises(NotImplementedError, match=r"add_scalar\(\): got list, but an ember Tensor, a NumPy array "
                                                      r"or a number is expected"):
            w.add_scalar("x", [1.0])


def test_scalar_of_a_cuda_tensor(tmp_path, cuda):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("gpu", ember.tensor(2.5, device="cuda"), 1)
        w.add_histogram("gpu_h", ember.arange(4.0, device="cuda"), 1)
    assert scalars(str(tmp_path), "gpu") == [(1, 2.5)]
    assert values(str(tmp_path), "gpu_h")[0][1].histo.num == 4


def test_add_scalars_writes_one_run_per_tag(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalars("run/loss", {"train": step, "test": ember.tensor(step * 2.0)}, step)
    assert scalars(str(tmp_path / "run_loss_train"), "run/loss") == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert scalars(str(tmp_path / "run_loss_test"), "run/loss") == [(0, 0.0), (1, 2.0), (2, 4.0)]


def test_histograms(tmp_path):
    x = ember.randn(1000, dtype=ember.float64)
    a = x.numpy()
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("h", x, 5)
        w.add_histogram("auto", a, 6, bins="auto")
        w.add_histogram("ten", a, 7, bins=10, max_bins=4)
        w.add_histogram_raw("raw", min=0.0, max=3.0, num=3, sum=3.0, sum_squares=5.0, bucket_limits=[1.0, 2.0, 3.0],
                            bucket_counts=[1, 1, 1], global_step=8)
    (step, v), = values(str(tmp_path), "h")
    h = v.histo
    assert step == 5 and h.num == 1000 and sum(h.bucket) == 1000
    assert h.min == a.min() and h.max == a.max() and math.isclose(h.sum, a.sum()) and math.isclose(h.sum_squares, a @ a)
    # "tensorflow" bins are TensorBoard's default buckets: the same as tensorboardX's writer uses
    ref = tensorboardX.summary.histogram("h", a, bins=tensorboardX.SummaryWriter(str(tmp_path / "x")).default_bins)
    ref = ref.value[0].histo
    assert list(h.bucket_limit) == list(ref.bucket_limit) and list(h.bucket) == list(ref.bucket)
    counts, _ = np.histogram(a, bins="auto")
    assert sum(values(str(tmp_path), "auto")[0][1].histo.bucket) == counts.sum()
    ten = tensorboardX.summary.histogram("ten", a, bins=10, max_bins=4).value[0].histo  # 10 buckets merged in pairs
    assert values(str(tmp_path), "ten")[0][1].histo.SerializeToString() == ten.SerializeToString()
    assert len(ten.bucket) == 1 + 5
    assert list(values(str(tmp_path), "raw")[0][1].histo.bucket) == [1, 1, 1]


def test_histogram_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ValueError, match="The input has no element"):
            w.add_histogram("e", ember.zeros(0))
        with pytest.raises(ValueError, match=r"add_histogram_raw\('r'\): bucket_limits and bucket_counts must have the "
                                             r"same length, got 2 and 1"):
            w.add_histogram_raw("r", 0, 1, 1, 1, 1, [0.5, 1.0], [1])


def test_images_in_every_layout(tmp_path):
    rng = np.random.default_rng(0)
    chw = rng.random((3, 5, 4), dtype=np.float32)
    hwc = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    gray = rng.random((5, 4)) * 1.5 - 0.25  # out of [0, 1]: clipped
    batch = rng.random((10, 1, 2, 3), dtype=np.float32)
    rgba = rng.random((4, 5, 4), dtype=np.float32)
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", ember.tensor(chw), 1)
        w.add_image("hwc", hwc, 2, dataformats="HWC")
        w.add_image("hw", ember.tensor(gray), 3, dataformats="HW")
        w.add_image("rgba", rgba, 4)
        w.add_image("one", chw[:1], 5)
        w.add_images("batch", ember.tensor(batch), 6)
    to8 = lambda f: (f.astype(np.float32) * 255).clip(0, 255).astype(np.uint8)  # noqa: E731
    run = str(tmp_path)
    assert np.array_equal(image_of(run, "chw"), to8(chw.transpose(1, 2, 0)))
    assert np.array_equal(image_of(run, "hwc"), hwc)
    assert np.array_equal(image_of(run, "hw"), np.repeat(to8(gray)[:, :, None], 3, axis=2))
    assert np.array_equal(image_of(run, "rgba"), to8(rgba.transpose(1, 2, 0)))
    assert np.array_equal(image_of(run, "one"), np.repeat(to8(chw[0])[:, :, None], 3, axis=2))
    grid = image_of(run, "batch")  # 10 images, 8 per row: 2 rows, the last 6 cells empty
    assert grid.shape == (2 * 2, 8 * 3, 3)
    assert np.array_equal(grid[2:4, 3:6, 1], to8(batch[9, 0])) and not grid[2:, 6:].any()
    assert np.array_equal(grid[0:2, 21:24, 0], to8(batch[7, 0]))


def test_image_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(AssertionError, match=r"the image has 2 dimensions \(shape \(4, 4\)\) but dataformats 'CHW' "
                                                 r"names 3"):
            w.add_image("x", np.zeros((4, 4)))
        with pytest.raises(AssertionError, match="dataformats must name each of H and W once"):
            w.add_image("x", np.zeros((4, 4)), dataformats="HH")
        with pytest.raises(AssertionError, match=r"a batch of images needs 1 or 3 channels, got shape \(2, 2, 4, 4\)"):
            w.add_images("x", np.zeros((2, 2, 4, 4)))


def test_figure(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = plt.figure(figsize=(2, 1), dpi=50)
    plt.plot([0, 1], [1, 0])
    with SummaryWriter(tmp_path) as w:
        w.add_figure("fig", fig, 3)
        w.add_figure("figs", [plt.figure(figsize=(1, 1), dpi=20), plt.figure(figsize=(1, 1), dpi=20)], 4)
    assert image_of(str(tmp_path), "fig").shape == (50, 100, 3)
    assert image_of(str(tmp_path), "figs").shape == (20, 40, 3)
    assert not plt.get_fignums()  # closed


def test_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "**lr** = 0.1 ✓", 2)
    (step, v), = values(str(tmp_path), "notes/text_summary")
    assert step == 2 and list(v.tensor.string_val) == ["**lr** = 0.1 ✓".encode()]
    assert v.metadata.plugin_data.plugin_name == "text"


def test_hparams(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.1, "opt": "sgd", "layers": ember.tensor(3), "nesterov": True, "skip": None},
                      {"hparam/accuracy": 0.9, "hparam/loss": ember.tensor(0.25)},
                      hparam_domain_discrete={"opt": ["sgd", "adam"]}, run_name="trial1", global_step=10)
    run = str(tmp_path / "trial1")
    plugin = {}
    for _, v in values(run, "_hparams_/experiment") + values(run, "_hparams_/session_start_info") + \
            values(run, "_hparams_/session_end_info"):
        assert v.metadata.plugin_data.plugin_name == "hparams"
        plugin[v.tag] = HParamsPluginData.FromString(v.metadata.plugin_data.content)
    exp = plugin["_hparams_/experiment"].experiment
    assert [h.name for h in exp.hparam_infos] == ["lr", "opt", "layers", "nesterov"]
    assert [m.name.tag for m in exp.metric_infos] == ["hparam/accuracy", "hparam/loss"]
    assert [x.string_value for x in exp.hparam_infos[1].domain_discrete.values] == ["sgd", "adam"]
    hp = plugin["_hparams_/session_start_info"].session_start_info.hparams
    assert hp["lr"].number_value == 0.1 and hp["opt"].string_value == "sgd" and hp["layers"].number_value == 3
    assert hp["nesterov"].number_value == 1.0 and "skip" not in hp  # a bool is a number, as in PyTorch
    assert scalars(run, "hparam/loss") == [(10, 0.25)] and scalars(run, "hparam/accuracy")[0][0] == 10


def test_hparams_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError, match="hparam_dict and metric_dict must be dicts, got list and dict"):
            w.add_hparams([("lr", 0.1)], {})
        with pytest.raises(ValueError, match=r"hparam_dict\['f'\] is a list; a value must be an int, float, str"):
            w.add_hparams({"f": [1]}, {})
        with pytest.raises(TypeError, match=r"hparam_domain_discrete\['lr'\] must be a list of values of the type"):
            w.add_hparams({"lr": 0.1}, {}, hparam_domain_discrete={"lr": ["a"]})


class Net(ember.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = ember.nn.Linear(4, 8)
        self.body = ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Linear(8, 3))

    def forward(self, x):
        return self.body(self.fc1(x.flatten(1))).log_softmax(-1)


def test_graph(tmp_path, capsys):
    net = Net()
    net.train()
    with SummaryWriter(tmp_path) as w:
        w.add_graph(net, ember.randn(2, 2, 2), verbose=True)
    (g,) = [GraphDef.FromString(e.graph_def) for e in events(str(tmp_path)) if e.graph_def]
    nodes = {n.name: n for n in g.node}
    assert len(nodes) == len(g.node)  # unique names
    for n in g.node:
        for i in n.input:
            assert i.split(":")[0] in nodes, f"{n.name} reads {i}, which is no node"
    lin1, lin2 = nodes["Net/Linear[fc1]/Linear"], nodes["Net/Sequential[body]/Linear[1]/Linear"]
    assert list(lin1.input)[1:] == ["Net/Linear[fc1]/weight", "Net/Linear[fc1]/bias"]
    flat = nodes[lin1.input[0]]  # flatten, in the model's own scope
    assert flat.name.startswith("Net/") and flat.name.count("/") == 1 and list(flat.input) == ["input/input.0"]
    assert list(lin2.input)[1:] == ["Net/Sequential[body]/Linear[1]/weight", "Net/Sequential[body]/Linear[1]/bias"]
    assert nodes[lin2.input[0]].op == "Relu" and lin2.input[0].startswith("Net/Sequential[body]/ReLU[0]/")
    assert nodes["input/input.0"].op == "IO Node"
    assert nodes["Net/Linear[fc1]/weight"].op == "Parameter"
    assert [d.size for d in nodes["Net/Linear[fc1]/weight"].attr["_output_shapes"].list.shape[0].dim] == [8, 4]
    out = nodes["output/output.0"]
    assert out.op == "IO Node" and nodes[out.input[0]].op == "LogSoftmax"
    assert [d.size for d in lin2.attr["_output_shapes"].list.shape[0].dim] == [2, 3]  # the module's output
    assert net.training and not net._forward_hooks and not net.fc1._forward_pre_hooks  # restored
    assert f"Net/Linear[fc1]/Linear = Linear({flat.name}, Net/Linear[fc1]/weight, Net/Linear[fc1]/bias)" in \
        capsys.readouterr().out


def test_graph_errors(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError, match="add_graph\\(\\): model must be an ember.nn.Module, got function"):
            w.add_graph(lambda x: x, ember.ones(1))
        with pytest.raises(TypeError, match="input_to_model must be a Tensor or a tuple/list of Tensors, got str"):
            w.add_graph(Net(), "x")


def test_embedding(tmp_path):
    mat = ember.randn(5, 3)
    with SummaryWriter(tmp_path) as w:
        w.add_embedding(mat, metadata=list("abcde"), label_img=ember.rand(5, 3, 2, 2), global_step=3, tag="a/b")
        w.add_embedding(mat.numpy(), metadata=[[1, "x"]] * 5, metadata_header=["n", "s"])
    sub = tmp_path / "00003" / "a%2fb"
    got = np.loadtxt(sub / "tensors.tsv", delimiter="\t", dtype=np.float32)
    assert np.array_equal(got, mat.numpy())
    assert (sub / "metadata.tsv").read_text().split() == list("abcde")
    assert decode_png((sub / "sprite.png").read_bytes()).shape == (6, 6, 3)  # 3x3 cells of 2x2
    assert (tmp_path / "00000" / "default" / "metadata.tsv").read_text().splitlines()[0] == "n\ts"
    cfg = (tmp_path / "projector_config.pbtxt").read_text()
    assert 'tensor_name: "a/b:00003"' in cfg and 'image_path: "00003/a%2fb/sprite.png"' in cfg
    assert cfg.count("embeddings {") == 2
    with SummaryWriter(tmp_path) as w, pytest.raises(AssertionError, match="2 metadata rows for 5 points"):
        w.add_embedding(mat, metadata=["a", "b"])


def test_purge_step_flush_close_and_reopen(tmp_path):
    w = SummaryWriter(tmp_path, purge_step=4, max_queue=1000, flush_secs=1000)
    w.add_scalar("x", 1.0, 4)
    w.flush()
    assert scalars(str(tmp_path), "x") == [(4, 1.0)]
    first = events(str(tmp_path))
    assert first[1].step == 4 and first[2].session_log.status == first[2].session_log.START
    w.close()
    w.close()  # twice is fine
    w.flush()  # and so is flushing a closed writer
    w.add_scalar("x", 2.0, 5)  # a new event file, beside the first
    w.close()
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 2
    assert scalars(str(tmp_path), "x") == [(4, 1.0), (5, 2.0)]


def test_tensorboard_reads_it(tmp_path):
    """TensorBoard's own EventAccumulator, where tensorboard is installed."""
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.add_histogram("w", ember.randn(50), 2)
        w.add_image("img", np.ones((3, 2, 2)), 2)
        w.add_graph(Net(), ember.randn(1, 4))
    acc = ea.EventAccumulator(str(tmp_path), size_guidance={ea.IMAGES: 0})
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]
    assert acc.Histograms("w")[0].histogram_value.num == 50
    assert (acc.Images("img")[0].width, acc.Images("img")[0].height) == (2, 2)
    assert len(acc.Graph().node) > 5


def test_without_tensorboardx_the_import_says_how_to_install():
    code = ("import sys; sys.modules['tensorboardX'] = None\n"
            "try:\n    import ember.utils.tensorboard\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "pip install 'ember[tensorboard]' (or pip install tensorboardX)" in out.stdout, out.stderr


# ---------------------------------------------------------------------------- python -m ember train --tensorboard
def test_train_logs_the_run(tmp_path, capsys):
    from ember.cli import main
    tb = tmp_path / "tb"
    status = main(["train", "--dataset", "digits", "--model", "mlp", "--epochs", "2", "--batch-size", "256",
                   "--out", str(tmp_path / "out"), "--tensorboard", str(tb)])
    assert status == 0, capsys.readouterr().err
    run = str(tb)
    steps = [s for s, _ in scalars(run, "step/train_loss")]
    per_epoch = len(steps) // 2
    assert steps == list(range(1, 2 * per_epoch + 1)) and per_epoch > 0
    import json
    history = json.load(open(tmp_path / "out" / "metrics.json"))["epochs"]
    for key, tag in (("train_loss", "train_loss"), ("test_acc", "test_accuracy"), ("lr", "lr")):
        got = scalars(run, f"epoch/{tag}")
        assert [s for s, _ in got] == [per_epoch, 2 * per_epoch]
        assert [v for _, v in got] == pytest.approx([h[key] for h in history], rel=1e-6)
    hist = {v.tag for e in events(run) if e.HasField("summary") for v in e.summary.value if v.HasField("histo")}
    assert hist == {f"weights/{n}" for n, _ in ember.cli.models.build_model("mlp", (1, 8, 8), 10).named_parameters()}
    assert [s for s, _ in values(run, sorted(hist)[0])] == [per_epoch, 2 * per_epoch]
    final = history[-1]["test_acc"]
    assert scalars(str(tb / "hparams"), "hparam/test_accuracy") == [(2 * per_epoch, pytest.approx(final))]
    # resumed from the checkpoint of epoch 2: TensorBoard is told to hide what was logged after it
    status = main(["train", "--dataset", "digits", "--model", "mlp", "--epochs", "2", "--batch-size", "256",
                   "--out", str(tmp_path / "out"), "--tensorboard", str(tb), "--resume"])
    assert status == 0
    starts = [e.step for e in events(run) if e.HasField("session_log") and e.session_log.status == e.session_log.START]
    assert starts == [2 * per_epoch + 1]


def test_train_without_tensorboardx_is_one_line(tmp_path):
    code = ("import sys; sys.modules['tensorboardX'] = None\nfrom ember.cli import main\n"
            f"sys.exit(main(['train', '--epochs', '1', '--out', {str(tmp_path / 'o')!r}, '--tensorboard', 'tb']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("python -m ember train: error: --tensorboard tb: ") and "pip install" in r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v mpiexec"], capture_output=True).returncode != 0
                    or __import__("importlib").util.find_spec("mpi4py") is None, reason="needs mpi4py and mpiexec")
def test_distributed_train_logs_from_rank_0_only(tmp_path):
    tb = tmp_path / "tb"
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    r = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", "-m", "ember", "train", "--distributed",
                        "--model", "mlp", "--epochs", "1", "--batch-size", "256", "--out", str(tmp_path / "out"),
                        "--tensorboard", str(tb)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(glob.glob(str(tb / "events.out.tfevents.*"))) == 1  # rank 0's
    steps = [s for s, _ in scalars(str(tb), "step/train_loss")]
    assert steps == list(range(1, len(steps) + 1)) and scalars(str(tb), "epoch/lr")[0][0] == len(steps)
