"""ember: a small deep-learning framework on NumPy with PyTorch's API.

`import ember as torch` runs ordinary PyTorch code for everything ember covers.
"""
import warnings as _warnings

from ._dtype import (bfloat16, bool, double, dtype, float, float16, float32, float64, get_default_dtype, half, int,  # noqa: A004
                     int8, int16, int32, int64, long, set_default_dtype, short, uint8)
from ._tensor import Size, Tensor
from .backend import device, get_default_device, set_default_device
from .backend import allocator as _allocator  # noqa: F401  (raises glibc's malloc thresholds at import)
from . import ops as _ops  # binds the Tensor methods and operators
from . import autograd
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ._creation import (Generator, arange, as_tensor, bernoulli, default_generator, empty, empty_like, eye,
                        from_numpy, full, full_like, get_rng_state, initial_seed, linspace, logspace, manual_seed,
                        multinomial, normal, ones, ones_like, rand, rand_like, randint, randint_like, randn,
                        randn_like, randperm, seed, set_rng_state, tensor, zeros, zeros_like)
globals().update(_ops.FUNCTIONS)  # every op family's declared functions (ember/ops/registry.py)
from ._runtime import (are_deterministic_algorithms_enabled, can_cast, detach, e, finfo,  # noqa: E402
                       get_deterministic_debug_mode, get_float32_matmul_precision, get_num_interop_threads,
                       get_num_threads, iinfo, inf, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                       is_deterministic_algorithms_warn_only_enabled, is_storage, is_tensor, is_warn_always_enabled,
                       nan, newaxis, numel, pi, promote_types, result_type, set_anomaly_enabled,
                       set_deterministic_debug_mode, set_float32_matmul_precision, set_flush_denormal,
                       set_num_interop_threads, set_num_threads, set_warn_always, typename,
                       use_deterministic_algorithms)
from ._creation import (bartlett_window, binomial, blackman_window, hamming_window, hann_window,  # noqa: E402
                        kaiser_window, poisson)
from ._creation import range_ as range  # noqa: E402,A004  (torch.range: deprecated, end included)
from ._format import set_printoptions  # noqa: E402
from ._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format  # noqa: E402,E501
from ._legacy import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,  # noqa: E402
                      HalfTensor, IntTensor, LongTensor, ShortTensor)
from ._legacy import new as _new  # noqa: E402
Tensor.new = _new
Tensor.bernoulli, Tensor.multinomial = bernoulli, multinomial  # (the factories' Tensor-method forms)
from . import cuda, distributed, viz
from . import linalg, special, sparse  # noqa: E402  (namespaces over the ops)
from .cuda import OutOfMemoryError  # noqa: E402  (torch.OutOfMemoryError is torch.cuda's)
from ._legacy import CUDA_LEGACY as _CUDA_LEGACY  # noqa: E402
for _name, _cls in _CUDA_LEGACY.items():  # ember.cuda.FloatTensor, ...: the legacy types on the GPU
    setattr(cuda, _name, _cls)
del _name, _cls
from . import backends, random, testing  # noqa: E402
from .serialization import save, load
from . import nn, optim, utils  # noqa: E402  (after the ops: nn, optim and utils.data build on them)
# the nn.functional ops PyTorch also exports as `torch.<name>` with the same positional arguments (those whose
# torch-level form differs, e.g. torch.embedding(weight, input) or losses taking reduction as an int, are not)
for _name in ("adaptive_avg_pool1d", "alpha_dropout", "avg_pool1d", "bilinear", "celu", "celu_",
              "channel_shuffle", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "cosine_similarity", "dropout", "feature_alpha_dropout", "group_norm", "hardshrink",
              "layer_norm", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d", "pairwise_distance",
              "pdist", "pixel_shuffle", "pixel_unshuffle", "prelu", "relu_", "rms_norm", "rrelu", "rrelu_", "selu",
              "selu_", "threshold", "threshold_"):
    if _name not in globals() and hasattr(nn.functional, _name):
        globals()[_name] = getattr(nn.functional, _name)
del _name
adaptive_max_pool1d = nn.functional.adaptive_max_pool1d_with_indices  # (torch's returns values and indices)
from . import amp, cpu  # noqa: E402  (mixed precision: torch.amp, torch.cpu.amp; ember.cuda.amp is set by ember.cuda)
from .amp import autocast  # noqa: E402
from .amp.autocast_mode import (autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache,  # noqa: E402
                                get_autocast_cpu_dtype, get_autocast_dtype, get_autocast_gpu_dtype,
                                is_autocast_cache_enabled, is_autocast_cpu_enabled, is_autocast_enabled,
                                set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled,
                                set_autocast_dtype, set_autocast_enabled, set_autocast_gpu_dtype)
from . import compiler, _dynamo  # noqa: E402  (after nn: compiled modules are Modules)
from . import func  # noqa: E402  (function transforms: vmap, grad, jvp, jacrev, ...)
from .func import vmap  # noqa: E402  (torch.vmap is torch.func.vmap)
from .compiler import compile  # noqa: E402,A004  (ember.compile, as torch.compile)
from ._lazy import lazy  # noqa: E402  (lazy evaluation: `with ember.lazy():`, or EMBER_LAZY=1)

# NumPy's floating-point warnings (log(0), x/0, overflow) are PyTorch's silent inf/NaN:
# silence them for ember's own calls only, leaving the user's NumPy code untouched.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember(\.|$)")

__version__ = "0.1.0"

from . import _coverage  # noqa: E402


def __getattr__(name: str):
    """A PyTorch name ember lacks: an AttributeError saying why, and where the coverage is listed."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _coverage.missing("ember", name)


import os as _os  # noqa: E402
if _os.environ.get("EMBER_LAZY", "0") not in ("", "0"):
    lazy().__enter__()  # the whole program (its main thread) runs lazily: values are computed when needed
del _os
