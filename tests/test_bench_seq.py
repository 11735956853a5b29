"""benchmarks/seq.py: ember and PyTorch run the same sequence-model step from the same weights."""
import numpy as np
import pytest
from helpers import requires_torch

from benchmarks import seq


@requires_torch
@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_ember_and_pytorch_steps_start_from_the_same_loss(kind):
    steps = seq.cases(kind, batch=2)
    assert list(steps) == ["ember", "pytorch"]
    e, t = steps["ember"](), steps["pytorch"]()
    # dropout (transformer) draws different masks in the two frameworks: equal up to that
    tol = 1e-5 if kind == "lstm" else 0.05
    np.testing.assert_allclose(float(e), float(t), rtol=tol)
    assert float(steps["ember"]()) < float(e)  # Adam moved the weights
