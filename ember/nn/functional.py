"""`ember.nn.functional`: the differentiable functions behind the layers (PyTorch's `torch.nn.functional`).

The ops themselves live in `ember/ops/nn_*.py`, beside the rest of the op library.
"""
from ..ops.nn_activation import *  # noqa: F401,F403
from ..ops.nn_attention import *  # noqa: F401,F403
from ..ops.nn_conv import *  # noqa: F401,F403
from ..ops.nn_fold import *  # noqa: F401,F403
from ..ops.nn_interpolate import *  # noqa: F401,F403
from ..ops.nn_loss import *  # noqa: F401,F403
from ..ops.nn_misc import *  # noqa: F401,F403
from ..ops.linalg_ext import pdist  # noqa: F401  (torch.nn.functional.pdist is torch.pdist)
from ..ops.nn_more import *  # noqa: F401,F403
from ..ops.nn_norm import *  # noqa: F401,F403
from ..ops.nn_pad import *  # noqa: F401,F403
from ..ops.nn_pool import *  # noqa: F401,F403
from ..ops.nn_spatial import *  # noqa: F401,F403


def __getattr__(name: str):
    """A PyTorch name ember lacks: an AttributeError saying why, and where the coverage is listed."""
    if name.startswith("__"):
        raise AttributeError(name)
    from .._coverage import missing
    raise missing("nn.functional", name)
