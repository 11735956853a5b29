"""What ember deliberately leaves out of PyTorch's API, so that a script reaching for it is told so.

`ember`, `ember.nn` and `ember.nn.functional` end with a module `__getattr__` that calls `missing`: a name
listed here raises an AttributeError saying why ember lacks it and pointing to docs/coverage.md; any other
unknown name raises the ordinary AttributeError, with the same pointer.
"""
from __future__ import annotations

DOC = "docs/coverage.md"

_NO_COMPLEX = "ember has no complex dtypes (its arrays are real NumPy arrays)"
_NO_QUANT = "ember has no quantized tensors or quantization workflow"
_NO_STORAGE = "ember has no storage objects: a tensor's memory is its NumPy (or CuPy) array"
_CUDA_ONLY = "a CUDA/accelerator-specific feature that ember's CuPy backend does not provide"

# (module, name) -> why ember does not have it; module "ember" also covers ember.Tensor's namespace names
LACKING: dict[tuple[str, str], str] = {}


def _add(module: str, names: str, why: str) -> None:
    for n in names.split():
        LACKING[(module, n)] = why


_add("ember", "jit", "TorchScript (torch.jit) is not part of ember: ember.compile captures and replays Python "
     "instead")
_add("ember", "fx export onnx _dynamo_export", "graph export (torch.fx, torch.export, ONNX) is not part of ember; "
     "ember.compile's graphs can be drawn with ember.viz / explain().to_dot()")
_add("ember", "distributions", "torch.distributions is not built in ember")
_add("ember", "fft stft istft", "ember has no FFT module (its results are complex)")
_add("ember", "complex complex64 complex128 cfloat cdouble complex32 chalf view_as_complex view_as_real polar "
     "real imag angle", _NO_COMPLEX)
_add("ember", "quantization ao quantize_per_tensor quantize_per_channel dequantize qint8 quint8 qint32 quint4x2 "
     "quint2x4 fake_quantize_per_tensor_affine fake_quantize_per_channel_affine", _NO_QUANT)
_add("ember", "Storage TypedStorage UntypedStorage FloatStorage DoubleStorage LongStorage IntStorage ByteStorage "
     "BoolStorage HalfStorage BFloat16Storage", _NO_STORAGE)
_add("ember", "float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu uint16 uint32 uint64",
     "ember supports bool, uint8, int8-int64, float16, bfloat16, float32 and float64 (no float8 or wide unsigned "
     "dtypes)")
_add("ember", "mps xpu mtia accelerator", _CUDA_ONLY.replace("CUDA/accelerator", "non-CUDA accelerator"))
_add("ember", "hub", "torch.hub (downloading models from GitHub) is not part of ember")
_add("ember", "package library _C classes", "PyTorch's C++ extension and operator-registration machinery has "
     "no counterpart in ember (ops are Python classes: ember/ops/)")
_add("ember", "nested masked", "nested (ragged) and masked tensors are not part of ember")
_add("ember", "profiler", "torch.profiler is not part of ember: use py-spy or pyinstrument (docs/performance.md)")
_add("nn", "quantized qat quantizable intrinsic", _NO_QUANT)
_add("nn", "SyncBatchNorm", "ember.distributed reduces gradients over MPI but has no synchronised batch norm")
_add("nn", "AdaptiveLogSoftmaxWithLoss", "not built in ember")
_add("nn.functional", "scaled_mm scaled_grouped_mm grouped_mm", _CUDA_ONLY)


def missing(module: str, name: str) -> AttributeError:
    """The AttributeError for `module.name` (module "ember", "nn" or "nn.functional")."""
    where = "ember" if module == "ember" else f"ember.{module}"
    why = LACKING.get((module, name))
    if why is not None:
        return AttributeError(f"module '{where}' has no attribute '{name}': {why}. What ember covers of PyTorch's "
                              f"API and what it leaves out: {DOC}")
    return AttributeError(f"module '{where}' has no attribute '{name}' (PyTorch's names that ember covers, and "
                          f"those it leaves out: {DOC})")
