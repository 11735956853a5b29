"""docs/coverage.md's promise: a PyTorch name ember deliberately lacks raises an AttributeError saying why and
pointing to the page, and the table of such names (ember/_coverage.py) lists only names that really are absent."""
import os

import pytest

import ember
import ember.nn.functional as F
from ember._coverage import DOC, LACKING

MODULES = {"ember": ember, "nn": ember.nn, "nn.functional": F}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("module, name", sorted(LACKING))
def test_lacking_names_are_absent_and_explained(module, name):
    mod = MODULES[module]
    assert name not in vars(mod), f"{module}.{name} exists now: remove it from ember/_coverage.py and docs/coverage.md"
    with pytest.raises(AttributeError, match=f"has no attribute '{name}': .*{DOC}"):
        getattr(mod, name)


def test_unknown_names_still_raise_attribute_error():
    with pytest.raises(AttributeError, match=f"no attribute 'not_a_torch_name' .*{DOC}"):
        ember.not_a_torch_name
    assert not hasattr(ember, "not_a_torch_name") and not hasattr(F, "nope")
    with pytest.raises(AttributeError):
        ember.__wrapped__  # dunder probes (inspect, pickle) get the plain error


def test_the_page_exists_and_a_cudnn_script_runs():
    assert os.path.isfile(os.path.join(ROOT, DOC))
    torch = ember
    torch.backends.cudnn.benchmark = True  # the first line of many scripts
    torch.backends.cudnn.benchmark = False
