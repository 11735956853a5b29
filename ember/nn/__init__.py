"""`ember.nn`: modules, parameters, functional ops, initialisation and utilities (PyTorch's `torch.nn`)."""
from .parameter import Parameter
from .modules import *  # noqa: F401,F403
from . import functional, init, utils  # noqa: F401
from . import parallel  # noqa: F401,E402
from .parallel import DataParallel  # noqa: E402


def __getattr__(name: str):
    """A PyTorch name ember lacks: an AttributeError saying why, and where the coverage is listed."""
    if name.startswith("__"):
        raise AttributeError(name)
    from .._coverage import missing
    raise missing("nn", name)
