"""`ember.optim`: optimizers and learning-rate schedules (PyTorch's `torch.optim`)."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .adadelta import Adadelta
from .adamax import Adamax
from .nadam import NAdam
from .radam import RAdam
from .sparse_adam import SparseAdam
from .rprop import Rprop
from .asgd import ASGD
from .adafactor import Adafactor
from .lbfgs import LBFGS
from . import swa_utils
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "SparseAdam", "Rprop", "ASGD", "Adafactor", "LBFGS", "lr_scheduler", "swa_utils"]
