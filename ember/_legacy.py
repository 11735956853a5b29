"""PyTorch's legacy tensor types: `ember.FloatTensor`, `LongTensor`, ... and `Tensor.new`.

Old PyTorch code builds tensors with `torch.FloatTensor(2, 3)` or `torch.LongTensor([1, 2])` and checks
`isinstance(t, torch.FloatTensor)`. Here each legacy type is a class whose constructor makes an ordinary
`Tensor` of its dtype (on the CPU) and whose `isinstance` test compares dtype and device, as PyTorch's do;
`Tensor.type()` returns their names as PyTorch spells them ('torch.FloatTensor'), so that comparisons
written for PyTorch hold.
"""
from __future__ import annotations

from . import _dtype as dt
from ._tensor import Size, Tensor

# dtype name -> legacy type name
_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
          "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
          "uint8": "ByteTensor", "bool": "BoolTensor"}


def type_name(d: dt.dtype, cuda: bool = False) -> str:
    """The legacy name of a tensor of dtype `d`: 'torch.FloatTensor', or 'torch.cuda.FloatTensor' on CUDA."""
    return ("torch.cuda." if cuda else "torch.") + _NAMES[d.name]


def _make_tensor(d: dt.dtype, args: tuple, device, what: str) -> Tensor:
    """`Type()`, `Type(*sizes)`, `Type(size)`, `Type(sequence)` or `Type(tensor)`, as PyTorch's legacy constructors."""
    from . import _creation as C
    if not args:
        return C.empty(0, dtype=d, device=device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t.dtype is not d:
            raise TypeError(f"{what}(): expected a tensor of dtype {d} (got {t.dtype}); convert it with "
                            f"t.to({d}) first")
        return t
    if len(args) == 1 and isinstance(args[0], Size):
        return C.empty(*args[0], dtype=d, device=device)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return C.empty(*args, dtype=d, device=device)  # sizes: uninitialised, as PyTorch's
    if len(args) == 1:
        return C.tensor(args[0], dtype=d, device=device)
    raise TypeError(f"{what}(): expected sizes (ints), a torch.Size, a sequence of numbers or a tensor, got "
                    f"{', '.join(type(a).__name__ for a in args)}")


class _LegacyType(type):
    """The metaclass of the legacy types: `isinstance(t, FloatTensor)` is "t is a float32 tensor on the CPU"."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and (obj.device.type == "cuda") == cls.is_cuda

    def __call__(cls, *args, device=None):
        return _make_tensor(cls.dtype, args, "cuda" if cls.is_cuda and device is None else device, cls.__name__)

    def __repr__(cls) -> str:
        return f"<class '{type_name(cls.dtype, cls.is_cuda)}'>"


def _legacy(d: dt.dtype, cuda: bool = False) -> type:
    return _LegacyType(_NAMES[d.name], (), {"dtype": d, "is_cuda": cuda, "__module__": "ember",
                                            "__doc__": f"The legacy type of {d} tensors on the "
                                                       f"{'GPU' if cuda else 'CPU'} (constructor and isinstance)."})


FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor = (_legacy(d) for d in (dt.float32, dt.float64, dt.float16,
                                                                             dt.bfloat16))
LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor = (
    _legacy(d) for d in (dt.int64, dt.int32, dt.int16, dt.int8, dt.uint8, dt.bool))
LEGACY = {c.__name__: c for c in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor,
                                  ShortTensor, CharTensor, ByteTensor, BoolTensor)}
# their `torch.cuda.*` counterparts (ember.cuda binds them)
CUDA_LEGACY = {name: _legacy(c.dtype, True) for name, c in LEGACY.items()}


def dtype_of_type(t) -> tuple[dt.dtype, bool | None]:
    """What `Tensor.type(t)` converts to: (dtype, on CUDA or not, or None for "keep the device"), from a dtype,
    a legacy type, or a legacy type's name ('torch.LongTensor', 'ember.cuda.FloatTensor', 'LongTensor')."""
    if isinstance(t, _LegacyType):
        return t.dtype, t.is_cuda
    if isinstance(t, str) and t.split(".")[-1] in LEGACY:
        parts = t.split(".")
        return LEGACY[parts[-1]].dtype, "cuda" in parts[:-1]
    return dt.as_dtype(t), None


def new(self: Tensor, *args, device=None) -> Tensor:
    """`Tensor.new(...)`: a tensor of self's dtype and device from sizes, a Size, data or a tensor, as the
    legacy constructors (`new()` is empty; `new(2, 3)` is uninitialised)."""
    return _make_tensor(self.dtype, args, self.device if device is None else device, "Tensor.new")
