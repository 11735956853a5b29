"""benchmarks/lazy.py runs, and what it times in lazy mode really is deferred (and equals eager)."""
from __future__ import annotations

import os

import pytest

from ember import _lazy

pytestmark = pytest.mark.skipif(os.environ.get("EMBER_LAZY", "0") not in ("", "0"), reason="the process is lazy")


def test_lazy_benchmark_runs_and_defers(tmp_path, capsys):
    from benchmarks import lazy
    before = dict(_lazy.STATS)
    out = lazy.main(["--repeats", "1", "--sample", "0.005", "--no-torch", "--json", str(tmp_path / "l.json")])
    for case in ("gelu", "dead", "mlp-step", "chain"):
        assert out[case]["ember"]["ms"] > 0 and out[case]["ember-lazy"]["ms"] > 0
        assert "ratios" in out[case]
    assert "ember-lazy-noreuse" in out["gelu"] and "numpy" in out["gelu"]
    assert _lazy.STATS["deferred"] > before["deferred"]
    assert _lazy.STATS["reused"] > before["reused"]
    assert (tmp_path / "l.json").exists()
    text = capsys.readouterr().out
    assert "gelu: ms per step" in text and "ember-lazy" in text
