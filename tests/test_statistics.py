"""cov and corrcoef (ember/ops/statistics.py): PyTorch parity with weights and corrections, gradients, errors."""
import numpy as np
import pytest
from helpers import check_grad, compare_torch, rand, torch

import ember

RNG = np.random.default_rng(0)
FW = RNG.integers(1, 4, 6)
AW = RNG.random(6) + 0.1


def _kw(m, kw):
    return {k: (m.tensor(FW) if k == "fweights" else m.tensor(AW) if k == "aweights" else v) for k, v in kw.items()}


@pytest.mark.parametrize("kw", [{}, {"correction": 0}, {"correction": 2}, {"fweights": 1}, {"aweights": 1},
                                {"fweights": 1, "aweights": 1, "correction": 2}])
def test_cov_matches_torch(kw):
    for dtype in (np.float64, np.float32):
        compare_torch(lambda x: ember.cov(x, **_kw(ember, kw)), lambda x: torch.cov(x, **_kw(torch, kw)),
                      rand(3, 6).astype(dtype))


@pytest.mark.parametrize("shape", [(6,), (1, 6), (4, 6)])
def test_corrcoef_matches_torch(shape):
    compare_torch(lambda x: ember.corrcoef(x), lambda x: x.corrcoef(), rand(*shape))


def test_gradients():
    check_grad(lambda x: ember.cov(x, aweights=ember.tensor(AW)), rand(3, 6))
    check_grad(lambda x: ember.corrcoef(x), rand(3, 6))


def test_integer_input_and_errors():
    assert ember.cov(ember.tensor([1, 2, 4])).dtype is ember.float32
    with pytest.raises(RuntimeError, match="cov\\(\\): expected input to have two or fewer dimensions"):
        ember.cov(ember.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="expected fweights to have integral dtype"):
        ember.cov(ember.ones(2, 3), fweights=ember.ones(3))
    with pytest.raises(RuntimeError, match="same numel as there are observations .* 2 != 3"):
        ember.cov(ember.ones(2, 3), fweights=ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="aweights cannot be negative"):
        ember.cov(ember.ones(2, 3), aweights=ember.tensor([1.0, -1.0, 1.0]))
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        ember.cov(ember.ones(3, 1))
