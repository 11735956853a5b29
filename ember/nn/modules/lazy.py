"""Lazy modules: layers whose input size is inferred from their first input (PyTorch's `LazyLinear`, `LazyConv2d`, ...).

Until its first call a lazy module holds `UninitializedParameter`s and `UninitializedBuffer`s: placeholders that
know their dtype, device and requires_grad but not their shape, and refuse to be computed with. The first call runs
a forward pre-hook (`_infer_parameters`) before `forward`: `initialize_parameters(input)` reads the input's size,
`materialize`s each placeholder (in place: the same object becomes a `Parameter` or a plain `Tensor`, so an
optimizer built before the call trains the real parameters), initialises them with the regular layer's
`reset_parameters`, and the module's class becomes the regular one (`type(m) is nn.Linear`).

`load_state_dict` into a lazy module materialises its placeholders from the checkpoint's shapes first (`_lazy_load_hook`,
called by `Module.load_state_dict`), and `state_dict()` lists the placeholders themselves until then.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import _dtype as dt
from ... import backend
from ..._creation import tensor
from ..._dtype import long
from ..._tensor import Tensor, make, shape_arg
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .linear import Linear
from .module import Module
from .more import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .normalization import BatchNorm1d, BatchNorm2d

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear", "LazyConv1d",
           "LazyConv2d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


# ---------------------------------------------------------------------- placeholders
# what an uninitialised tensor still answers (its metadata, a few conversions that stay uninitialised, and ember's
# own `detach`, which tooling uses to snapshot a module's tensors); everything else raises ValueError, as PyTorch
_ALLOWED = frozenset({"materialize", "cls_to_become", "shape", "size", "ndim", "dtype", "device", "is_cuda",
                      "requires_grad", "requires_grad_", "grad", "grad_fn", "is_leaf", "retains_grad", "data", "name",
                      "is_floating_point", "is_complex", "get_device", "copy_", "detach", "to", "cpu", "cuda", "half",
                      "float", "double", "bfloat16", "char", "short", "int", "long"})
_CONVERSIONS = ("to", "cpu", "cuda", "half", "float", "double", "bfloat16", "char", "short", "int", "long")


def _refusal(cls_name: str, what: str) -> ValueError:
    return ValueError(f"Attempted to use an uninitialized parameter in {what}. This error happens when you are using a "
                      f"`LazyModule` or explicitly manipulating `ember.nn.{cls_name}` objects. When using LazyModules "
                      f"call `forward` with a dummy batch to initialize the parameters before calling ember functions")


class UninitializedTensorMixin:
    """A tensor of unknown shape: `materialize(shape)` gives it storage and turns it into `cls_to_become`."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give this tensor an (uninitialised) array of `shape`, on `device` with `dtype` (default: its own), and
        make it a `cls_to_become` (Parameter or Tensor): the same object, so references to it stay valid."""
        d = self._data
        dev = backend.resolve(device) if device is not None else backend.device_of(d)
        np_dtype = dt.np_dtype(dtype) if dtype is not None else d.dtype
        with backend.on(dev):
            self._data = backend.module_for(dev).empty(shape_arg((shape,), "materialize"), np_dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually happens "
                           "in `load_state_dict` when trying to load an uninitialized parameter into an initialized "
                           "one. Call `forward` to initialize the parameters before accessing their attributes.")

    def __getattribute__(self, name: str):
        if name[0] == "_" or name in _ALLOWED:
            return object.__getattribute__(self, name)
        raise _refusal(type(self).__name__, f"Tensor.{name}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = make(self._data.copy(), self._requires_grad, None, type(self))
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (_rebuild_uninitialized, (type(self), self._requires_grad, dt.FROM_NP[self._data.dtype]))


def _rebuild_uninitialized(cls, requires_grad: bool, dtype):
    return cls(requires_grad=requires_grad, dtype=dtype)


def _refusing(name: str):
    def method(self, *args, **kwargs):
        raise _refusal(type(self).__name__, f"the operator {name}")
    method.__name__ = name
    return method


def _converting(name: str):
    """`Tensor.<name>` (a dtype or device conversion) that keeps an uninitialised tensor uninitialised (so that
    `module.double()` or `.to(device)` before the first call applies to the materialised parameters)."""
    convert = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        t = convert(self, *args, **kwargs)
        if t is self:
            return self
        return make(t._data, self._requires_grad and dt.is_float(t._data.dtype), None, type(self))
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
              "__matmul__", "__rmatmul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__",
              "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lt__", "__le__",
              "__gt__", "__ge__", "__getitem__", "__setitem__", "__len__", "__iter__", "__bool__", "__float__",
              "__int__", "__index__", "__array__"):
    setattr(UninitializedTensorMixin, _name, _refusing(_name))
for _name in _CONVERSIONS:
    setattr(UninitializedTensorMixin, _name, _converting(_name))
del _name


def _placeholder(cls, requires_grad: bool, device, dtype) -> Tensor:
    np_dtype = dt.np_dtype(dtype) if dtype is not None else dt.NP_DEFAULT_FLOAT
    dev = backend.resolve(device) if device is not None else backend.CPU
    with backend.on(dev):
        arr = backend.module_for(dev).empty((0,), np_dtype)
    return make(arr, requires_grad, None, cls)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet (a lazy module's, before its first call): `isinstance(p, Parameter)`
    holds; its dtype, device and requires_grad are set; computing with it raises ValueError until
    `materialize(shape)` makes it a Parameter."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return _placeholder(cls, requires_grad, device, dtype)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass  # all set up in __new__


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet: `materialize(shape)` makes it a plain Tensor."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        return _placeholder(cls, requires_grad, device, dtype)


def is_lazy(t) -> bool:
    """Whether t is an UninitializedParameter or UninitializedBuffer."""
    return isinstance(t, UninitializedTensorMixin)


# ---------------------------------------------------------------------- the mixin
class LazyModuleMixin:
    """Makes a layer lazy: it infers its parameters' shapes from its first input. A subclass lists the regular
    layer after this mixin, sets `cls_to_become` to it, replaces the parameters whose shape depends on the input
    by UninitializedParameters (buffers by UninitializedBuffers) and implements `initialize_parameters(*inputs)`."""

    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # first of the forward pre-hooks: the ones a user registers later see the materialised module
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialise and initialise the parameters from the inputs of the first call."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer of this module (not its children) is still uninitialised."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module: Module, args: tuple, kwargs: dict | None = None) -> None:
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """As Module's, but an uninitialised tensor is listed itself (there is nothing to detach)."""
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if t is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = t if keep_vars or is_lazy(t) else t.detach()

    def _lazy_load_hook(self, state_dict, prefix: str) -> None:
        """Called by `Module.load_state_dict` before it checks shapes: each uninitialised tensor with an initialised
        entry in `state_dict` takes that entry's shape (its values are then loaded as usual)."""
        with no_grad():
            for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
                key = prefix + name
                if t is not None and is_lazy(t) and key in state_dict and not is_lazy(state_dict[key]):
                    value = state_dict[key]
                    t.materialize(tuple(value.shape) if hasattr(value, "shape") else np.shape(value))


def _input(m: Module, input) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{m._get_name()}: expected a Tensor input, got {type(input).__name__}")
    return input


def _all_or_none(m: Module, names: tuple) -> bool:
    """Whether m's tensors `names` are all uninitialised (False: all materialised); a mix (a partial checkpoint
    loaded) is an error: materialising the rest would re-initialise the loaded ones."""
    lazy = [n for n in names if is_lazy(getattr(m, n))]
    done = [n for n in names if getattr(m, n) is not None and n not in lazy]
    if lazy and done:
        raise RuntimeError(f"{m._get_name()}: {', '.join(lazy)} uninitialized while {', '.join(done)} were loaded from a "
                           f"checkpoint; load all of them (or none) before the first call")
    return bool(lazy)


def _inferred(m: Module, attr: str, from_input: int, from_params: int) -> None:
    """After a checkpoint materialised m's parameters, its size attribute `attr` is still 0: take it from the
    input, checked against the size the parameters have."""
    if from_input != from_params:
        raise RuntimeError(f"{m._get_name()}: the {attr} inferred from the input ({from_input}) is not the {attr} of "
                           f"the loaded parameters ({from_params})")
    setattr(m, attr, from_input)


# ---------------------------------------------------------------------- Linear
class LazyLinear(LazyModuleMixin, Linear):
    """A Linear layer whose in_features is inferred from the first input's last dim (out_features given)."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        x = _input(self, input)
        if x.dim() == 0:
            raise RuntimeError(f"{self._get_name()}: expected input of shape (*, in_features), got a 0-d tensor")
        if _all_or_none(self, ("weight", "bias")):
            with no_grad():
                self.in_features = x.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        elif self.in_features == 0:
            _inferred(self, "in_features", x.shape[-1], self.weight.shape[-1])


# ---------------------------------------------------------------------- convolutions
class _LazyConvMixin(LazyModuleMixin):
    """in_channels from the first input, (N, C_in, *spatial) or unbatched (C_in, *spatial)."""

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        unbatched = self._nd + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {list(input.shape)}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        in_channels = self._get_in_channels(_input(self, input))
        if _all_or_none(self, ("weight", "bias")):
            if in_channels % self.groups != 0:
                raise ValueError(f"in_channels must be divisible by groups ({type(self).__name__}: {in_channels} input "
                                 f"channels, groups={self.groups})")
            with no_grad():
                self.in_channels = in_channels
                if self.transposed:
                    shape = (in_channels, self.out_channels // self.groups) + self.kernel_size
                else:
                    shape = (self.out_channels, in_channels // self.groups) + self.kernel_size
                self.weight.materialize(shape)
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()
        elif self.in_channels == 0:
            w = self.weight.shape
            _inferred(self, "in_channels", in_channels, w[0] if self.transposed else w[1] * self.groups)


class LazyConv1d(_LazyConvMixin, Conv1d):
    """A Conv1d whose in_channels is inferred from the first input."""

    cls_to_become = Conv1d

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConv2d(_LazyConvMixin, Conv2d):
    """A Conv2d whose in_channels is inferred from the first input."""

    cls_to_become = Conv2d

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConvTranspose1d(_LazyConvMixin, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is inferred from the first input."""

    cls_to_become = ConvTranspose1d

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConvTranspose2d(_LazyConvMixin, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is inferred from the first input."""

    cls_to_become = ConvTranspose2d

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


# ---------------------------------------------------------------------- normalisation
class _LazyNormBase(LazyModuleMixin):
    """num_features from the first input's channel dim. As PyTorch's lazy norms, affine and track_running_stats
    default to True (also for the instance norms, whose eager forms default to False)."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=long, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _feature_dim(self, input: Tensor) -> int:
        return 1

    def initialize_parameters(self, input: Tensor) -> None:
        x = _input(self, input)
        if x.dim() not in self._dims:
            raise ValueError(f"{self._get_name()}: expected {self._dims_text} input (got {x.dim()}D input of shape "
                             f"{list(x.shape)})")
        c = x.shape[self._feature_dim(x)]
        if _all_or_none(self, ("weight", "bias", "running_mean", "running_var")):
            with no_grad():
                self.num_features = c
                for t in (self.weight, self.bias, self.running_mean, self.running_var):
                    if t is not None:
                        t.materialize((c,))
                self.reset_parameters()
        elif self.num_features == 0:  # loaded from a checkpoint, or nothing to learn or track
            held = [t.shape[0] for t in (self.weight, self.running_mean) if t is not None]
            _inferred(self, "num_features", c, held[0] if held else c)


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A BatchNorm1d whose num_features is inferred from the first input (N, C) or (N, C, L)."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A BatchNorm2d whose num_features is inferred from the first input (N, C, H, W)."""

    cls_to_become = BatchNorm2d


class _LazyInstanceNorm(_LazyNormBase):
    def _feature_dim(self, input: Tensor) -> int:
        return input.dim() - self._no_batch_dim  # (an unbatched input's channels are its dim 0)


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """An InstanceNorm1d whose num_features is inferred from the first input (N, C, L) or (C, L)."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """An InstanceNorm2d whose num_features is inferred from the first input (N, C, H, W) or (C, H, W)."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """An InstanceNorm3d whose num_features is inferred from the first input (N, C, D, H, W) or (C, D, H, W)."""

    cls_to_become = InstanceNorm3d
