"""nn utilities (PyTorch's `torch.nn.utils`): gradient clipping, parameters as one flat vector,
parametrizations (`parametrize`, `parametrizations`, and the older hook-based `weight_norm` and `spectral_norm`),
pruning (`prune`) and conv/linear-BatchNorm folding (`fusion`)."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from . import rnn  # noqa: F401
from . import fusion, parametrize, parametrizations, prune, stateless  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]
