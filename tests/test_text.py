"""Character-level text: the embedded public-domain text, CharText windows, the char-LM models, the
`--dataset text` main job and examples/char_lm.py."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.cli import main
from ember.cli.models import CharLSTM, CharTransformer, build_model, sample
from ember.datasets import CharText, Vocab, default_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def test_embedded_text_ships_with_its_licence():
    text = default_text()
    assert len(text) == 186_800 and text.startswith("In the beginning, God created the heavens and the earth.")
    assert len(Vocab(text)) == 67
    licence = os.path.join(ROOT, "ember", "datasets", "data", "GENESIS_LICENSE.txt")
    assert "public domain" in open(licence, encoding="utf-8").read().lower()


def test_windows_predict_the_next_character():
    train, test = CharText(seq_len=32), CharText(seq_len=32, train=False)
    assert train.vocab.chars == test.vocab.chars
    text = default_text()
    cut = int(len(text) * 0.9)
    assert len(train) == len(range(0, cut - 32, 32)) and len(test) == len(range(0, len(text) - cut - 32, 32))
    x, y = train[5]
    assert x.dtype == ember.int64 and x.shape == (32,) and y.shape == (32,)
    assert train.vocab.decode(x) == text[160:192] and train.vocab.decode(y) == text[161:193]
    x, y = test[-1]  # the held-out split is the end of the text
    assert test.vocab.decode(y)[-1] in text[cut:]
    overlapping = CharText("abcdefghij", seq_len=3, stride=1, test_fraction=0.2)
    assert [overlapping.vocab.decode(overlapping[i][0]) for i in range(len(overlapping))] == \
        ["abc", "bcd", "cde", "def", "efg"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(seq_len=0), "seq_len must be a positive int"),
    (dict(stride=0), "stride must be a positive int"),
    (dict(test_fraction=1.0), "test_fraction must be in"),
    (dict(text="short", seq_len=64), "fewer than seq_len"),
    (dict(text=""), "the text is empty"),
])
def test_chartext_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CharText(**kwargs)


def test_vocab_errors_name_the_culprit():
    v = Vocab("abc")
    assert v.decode(v.encode("cab")) == "cab"
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        v.encode("az")
    with pytest.raises(ValueError, match=r"indices must be in \[0, 3\)"):
        v.decode([0, 3])
    with pytest.raises(IndexError, match="out of range"):
        CharText("abcdefghijkl", seq_len=2)[99]


@pytest.mark.parametrize("name", ["lstm", "transformer"])
def test_char_models_learn_and_sample(name):
    """A few Adam steps on one batch lower the loss; sampling is reproducible by generator and
    leaves the model's mode alone."""
    ember.manual_seed(0)
    data = CharText(default_text()[:4000], seq_len=16)
    model = build_model(name, (16,), len(data.vocab))
    assert isinstance(model, CharLSTM if name == "lstm" else CharTransformer)
    x = ember.stack([data[i][0] for i in range(8)])
    y = ember.stack([data[i][1] for i in range(8)])
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        logits = model(x)
        assert logits.shape == (8, 16, len(data.vocab))
        loss = ember.nn.functional.cross_entropy(logits.reshape(-1, len(data.vocab)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    model.train()
    a = sample(model, data.vocab, "In the", 40, generator=ember.Generator().manual_seed(1))
    b = sample(model, data.vocab, "In the", 40, generator=ember.Generator().manual_seed(1))
    assert a == b and a.startswith("In the") and len(a) == 46 and model.training


def test_text_models_refuse_images_and_back():
    with pytest.raises(ValueError, match="is for character sequences"):
        build_model("lstm", (1, 8, 8), 10)
    with pytest.raises(ValueError, match="is for images"):
        build_model("mlp", (64,), 67)
    with pytest.raises(ValueError, match="exceed its context"):
        CharTransformer(10, context=8)(ember.zeros(1, 9, dtype=ember.int64))


def test_main_job_trains_a_char_lstm_saves_reloads_and_samples(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--dataset", "text", "--model", "lstm", "--epochs", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lstm" in text and "matches the trained model's" in text and "sampled from the reloaded model" in text
    sampled = text.split("sampled from the reloaded model (temperature 0.8):\n")[1]
    assert sampled.startswith("In the beginning") and len(sampled.strip()) >= 300
    epoch = json.loads((out / "metrics.json").read_text())["epochs"][0]
    assert epoch["test_loss"] < np.log(67) - 0.5  # well below a uniform guess over 67 characters
    cfg = ember.load(out / "model.safetensors")["config"]
    assert cfg["vocab"] == Vocab(default_text()).chars and cfg["in_shape"] == [64]
    assert main(["evaluate", "--checkpoint", str(out / "model.safetensors")]) == 0
    assert f"loss {epoch['test_loss']:.4f}" in capsys.readouterr().out


def test_text_dataset_with_an_image_model_is_one_line():
    r = subprocess.run([sys.executable, "-m", "ember", "train", "--dataset", "text", "--model", "cnn"],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "model 'cnn' is for images" in r.stderr


def test_char_lm_example_runs(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "char_lm.py"), "--epochs", "2",
                        "--max-chars", "20000", "--sample-chars", "50"],
                       capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    for name in ("lstm", "transformer"):
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith(f"{name} epoch")]
        assert len(lines) == 2
        first, last = (float(ln.split("train loss ")[1].split(",")[0]) for ln in (lines[0], lines[1]))
        assert last < first
        assert f"{name} sample: 'In the beginning" in r.stdout
