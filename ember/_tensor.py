"""Tensor: an array, its gradient and its place in the autograd graph.

The class holds only state and the methods that are not ops; every differentiable
operation (arithmetic, reductions, indexing, ...) is defined in `ember.ops` and bound
onto `Tensor` there, so that one file holds each op's forward and backward.
"""
from __future__ import annotations

import weakref
from operator import attrgetter

import numpy as np

from . import _capture
from . import _dtype as dt
from . import backend

_new = object.__new__
_ndarray = np.ndarray
_on_make = None  # under ember.compile's capture: told of every tensor made (set_make_hook)


class Size(tuple):
    """A tensor's shape: a tuple of ints (as `torch.Size`)."""

    __slots__ = ()

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"ember.Size({list(self)})"

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r


class Tensor:
    """A multi-dimensional array with reverse-mode automatic differentiation.

    Attributes mirror PyTorch: `data` (a Tensor sharing this one's storage, outside the graph),
    `grad`, `requires_grad`, `grad_fn` (the graph node that produced it; None for leaves),
    `is_leaf`, `name`.

    The backing array (NumPy or CuPy) is the slot `_data`. `data`, `grad` and `requires_grad` are
    properties whose setters check what PyTorch checks; they are stored in the slots `_data`,
    `_grad` and `_requires_grad`, which ember's own code (ops, engine, optimizers) reads and
    writes directly so that the checks cost nothing on the hot paths.
    """

    # `_fw` (forward-mode tangents, ember.autograd.forward_ad) is left unset by `make`: only dual tensors have it
    __slots__ = ("_data", "_grad", "_requires_grad", "_edge", "_vc", "_base", "name", "_hooks", "_fw", "__weakref__")
    __array_priority__ = 1000

    def __new__(cls, *args, requires_grad: bool = False, dtype=None, device=None) -> "Tensor":
        # PyTorch's legacy constructor: Tensor(data) copies data as float32; Tensor(2, 3) is uninitialised.
        if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            arr = to_array(args[0], dt.np_dtype(dtype) if dtype is not None else dt.NP_DEFAULT_FLOAT, "Tensor")
        else:
            arr = np.empty(shape_arg(args, "Tensor"), dt.np_dtype(dtype) if dtype is not None else dt.NP_DEFAULT_FLOAT)
        if device is not None:
            arr = backend.transfer(arr, backend.resolve(device))
        t = make(arr, cls=cls)
        if requires_grad is not False:
            t.requires_grad_(requires_grad)
        return t

    def __init__(self, *args, **kwargs) -> None:
        pass  # all set up in __new__ (by `make`, the one constructor)

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> "Size":
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape (a `Size`), or the length of dimension `dim`."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[normalize_dim(dim, self._data.ndim, "size")]

    def dim(self) -> int:
        return self._data.ndim

    ndim = property(dim)

    def ndimension(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    def data_ptr(self) -> int:
        """The address of the first element (host or device memory): two tensors share memory where their
        ranges overlap, and a view's address lies inside its base's."""
        a = self._data
        return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr

    @property
    def dtype(self) -> dt.dtype:
        return dt.FROM_NP[self._data.dtype]

    @property
    def device(self) -> backend.device:
        return backend.device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return dt.is_float(self._data.dtype)

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the array is laid out in memory_format: C-contiguous by default, or ember.channels_last
        (N, H, W, C in memory) or channels_last_3d."""
        if memory_format is None:
            return self._data.flags.c_contiguous
        from . import _memory_format as MF
        return MF.is_in(self._data, MF.check(memory_format, "is_contiguous"))

    @property
    def grad_fn(self):
        if _capture.ACTIVE is not None:
            _capture.settle(self)
        e = self._edge
        return e.node if type(e) is Slot else e

    @property
    def is_leaf(self) -> bool:
        return self._edge is None

    @property
    def _version(self) -> int:
        """How many in-place changes the storage has seen (shared by a tensor and all its views)."""
        b = self._base
        return (b if b is not None else self)._vc

    @property
    def retains_grad(self) -> bool:
        if _capture.ACTIVE is not None:
            _capture.settle(self)
        e = self._edge
        if e is None:
            return False
        node, nr = (e.node, e.nr) if type(e) is Slot else (e, 0)
        return node._retain is not None and nr in node._retain

    # ------------------------------------------------------------------ conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The backing NumPy array (shared memory, as in PyTorch)."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if _capture.ACTIVE is not None:
            _capture.read(self, "numpy()")
        if type(self._data) is not _ndarray:
            if not force:
                raise TypeError(f"can't convert {self.device} tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")
            return self._data.get()
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # NumPy operators and ufuncs that mix arrays and Tensors run as ember ops (np_array + t -> Tensor).
        from .ops import numpy_ufunc
        return numpy_ufunc(ufunc, method, inputs, kwargs)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        if _capture.ACTIVE is not None:
            _capture.read(self, "item()")
        return self._data.item()

    def tolist(self):
        if _capture.ACTIVE is not None:
            _capture.read(self, "tolist()")
        return self._data.tolist()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {'no' if self._data.size == 0 else 'more than one'} value "
                               f"is ambiguous (shape {list(self._data.shape)})")
        if _capture.ACTIVE is not None:
            _capture.read(self, "bool()")
        return bool(self._data)

    # float()/int()/complex() raise ValueError (as PyTorch does) where .item() raises RuntimeError
    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def _scalar(self, op: str):
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars: {op}() got a tensor of "
                             f"shape {list(self._data.shape)} ({self._data.size} elements)")
        if _capture.ACTIVE is not None:
            _capture.read(self, f"{op}()")
        return self._data.item()

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an index, got {self.dtype} of shape {tuple(self.shape)}")
        if _capture.ACTIVE is not None:
            _capture.read(self, "an index (__index__)")
        return int(self._data.item())

    __hash__ = object.__hash__  # == is elementwise, so hash by identity as PyTorch does

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reduce_ex__(self, protocol):
        # pickling (e.g. DataLoader workers) keeps data, requires_grad and name; never the graph
        return (_rebuild, (self.numpy(force=True), self.requires_grad, self.name))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment. "
                               "If you were attempting to deepcopy a module, this may be because of a torch.nn.utils.weight_norm usage")
        t = make(self._data.copy(), self.requires_grad, None, type(self))
        t.name = self.name
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    # ------------------------------------------------------------------ autograd
    def backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's `.grad` (or only `inputs`')."""
        from .autograd.engine import backward
        backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set `requires_grad` on a leaf (in place); returns self."""
        if requires_grad.__class__ is not bool:
            raise TypeError(f"requires_grad_(): argument 'requires_grad' must be bool, not {type_name(requires_grad)}")
        if requires_grad and not dt.is_float(self._data.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients, got {self.dtype}")
        if not requires_grad and self._edge is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a computed "
                               "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
        if _capture.ACTIVE is not None:
            _capture.refuse("requires_grad_() on a tensor (a replay would not set it)")
        self._requires_grad = requires_grad
        return self

    def detach(self) -> "Tensor":
        """A new leaf sharing this tensor's data (and version counter), outside the graph."""
        t = make(self._data)
        t._base = self._base if self._base is not None else self  # shares storage, so the version counter
        if _capture.ACTIVE is not None and _capture.ACTIVE.depth == 0:
            _capture.ACTIVE.detach(self, t)
        return t

    def detach_(self) -> "Tensor":
        if _capture.ACTIVE is not None:
            _capture.settle(self)
        self._edge = None
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep `.grad` on this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if _capture.ACTIVE is not None:
            _capture.settle(self)
        e = self._edge
        if e is None:
            return  # leaves always keep their grad
        if _capture.ACTIVE is not None:
            _capture.refuse("retain_grad()")
        node, nr = (e.node, e.nr) if type(e) is Slot else (e, 0)
        if node._retain is None:
            node._retain = {}
            node._hooked = True
        node._retain[nr] = weakref.ref(self)

    def register_hook(self, hook) -> "RemovableHandle":
        """Call `hook(grad)` when this tensor's gradient is computed; a non-None return replaces the gradient."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if _capture.ACTIVE is not None:
            _capture.refuse("Tensor.register_hook (the hook is Python code)")
            _capture.settle(self)
        e = self._edge
        if e is None:
            if self._hooks is None:
                self._hooks = LeafHooks()
            hooks = self._hooks
        else:
            node, nr = (e.node, e.nr) if type(e) is Slot else (e, 0)
            if node._pre_hooks is None:
                node._pre_hooks = {}
                node._hooked = True
            hooks = node._pre_hooks.setdefault(nr, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook) -> "RemovableHandle":
        """Call `hook(self)` during `backward()` once this leaf's `.grad` holds all of this pass's gradient.

        Fires once per backward pass that accumulated into `.grad` (not for `autograd.grad`, which
        leaves `.grad` alone); the return value must be None."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._edge is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._hooks is None:
            self._hooks = LeafHooks()
        if self._hooks.post is None:
            self._hooks.post = []
        self._hooks.post.append(hook)
        return RemovableHandle(self._hooks.post, hook)

    # ------------------------------------------------------------------ repr
    def __repr__(self) -> str:
        from ._format import format_tensor
        if _capture.ACTIVE is not None:
            _capture.read(self, "printing (repr)")
        return format_tensor(self)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return self.item().__format__(spec)
        if spec:  # as PyTorch (object.__format__): a format spec needs a 0-d tensor
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__: only a 0-d tensor takes a "
                            f"format spec, got shape {list(self._data.shape)} (use .item() or .tolist())")
        return repr(self)

    # ------------------------------------------------------------------ checked attributes
    def _get_data(self) -> "Tensor":
        return make(self._data)  # its own version counter: changes through it are not seen by autograd

    def _set_data(self, value) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type_name(value)}")
        if _capture.ACTIVE is not None:
            _capture.settle(value)  # (ember.lazy: the array that is shared is a computed one)
            _capture.settle(self)
        new = value._data
        if self._requires_grad and not dt.is_float(new.dtype):
            raise RuntimeError(f"data set to a tensor that requires gradients must be floating point or complex dtype "
                               f"(got {value.dtype})")
        if new.__class__ is not self._data.__class__:
            raise RuntimeError(f"Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have "
                               f"incompatible tensor type: {self.device} and {value.device}; move one with .to(...) first")
        self._data = new

    def _del_data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    data = property(_get_data, _set_data, _del_data,
                    doc="A Tensor sharing this tensor's storage, with requires_grad=False and no grad_fn: changes made "
                        "through it are invisible to autograd (its version counter is its own). Assigning a Tensor "
                        "swaps this tensor's storage (shape and dtype may change), as in PyTorch.")

    def _set_grad(self, g) -> None:
        if g is not None:
            if _capture.ACTIVE is not None:
                _capture.settle(g)  # (ember.lazy: a gradient is a computed array)
            _check_grad(self, g)
        self._grad = g

    # the getters are C-level (attrgetter): reading .grad or .requires_grad costs no Python frame
    grad = property(attrgetter("_grad"), _set_grad, lambda self: self._set_grad(None),
                    doc="The gradient accumulated by backward() (None until then); assignable to a Tensor of this "
                        "tensor's shape, dtype and device, or None; `del t.grad` sets it to None.")

    def _set_requires_grad(self, value) -> None:
        if value.__class__ is not bool:
            raise RuntimeError(f"requires_grad must be a bool, got {type_name(value)}")
        if self._edge is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables."
                               + ("" if value else " If you want to use a computed variable in a subgraph that doesn't "
                                  "require differentiation use var_no_grad = var.detach()."))
        if value and not dt.is_float(self._data.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients, got {self.dtype}")
        if _capture.ACTIVE is not None:
            _capture.refuse("setting requires_grad on a tensor (a replay would not set it)")
        self._requires_grad = value

    def _del_requires_grad(self) -> None:
        raise RuntimeError("requires_grad can't be deleted: set it to True or False")

    requires_grad = property(attrgetter("_requires_grad"), _set_requires_grad, _del_requires_grad,
                             doc="Whether autograd records operations on this tensor (settable on leaves only).")


def _check_grad(t: Tensor, g) -> None:
    """PyTorch's checks on `t.grad = g`: a Tensor (not t itself) of t's shape, dtype and device."""
    if not isinstance(g, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type_name(g)}")
    if g is t:
        raise RuntimeError("can't assign Variable as its own grad")
    if g._data.dtype != t._data.dtype:
        raise RuntimeError(f"attempting to assign a gradient with dtype '{g.dtype}' to a tensor with dtype "
                           f"'{t.dtype}'. Please ensure that the gradient and the tensor have the same dtype")
    if g._data.__class__ is not t._data.__class__ or g.device != t.device:
        raise RuntimeError(f"attempting to assign a gradient located on device '{g.device}' to a tensor located on "
                           f"device '{t.device}'. Please ensure that the gradient and the tensor are on the same device")
    if g._data.shape != t._data.shape:
        raise RuntimeError(f"attempting to assign a gradient of size '{list(g._data.shape)}' to a tensor of size "
                           f"'{list(t._data.shape)}'. Please ensure that the gradient and the tensor are the same size")


TENSOR_TYPES = {Tensor}  # Tensor and its subclasses (nn.Parameter, ...): a set test is cheaper than isinstance


def _register_subclass(cls, **kwargs) -> None:
    TENSOR_TYPES.add(cls)


Tensor.__init_subclass__ = classmethod(_register_subclass)


class Slot:
    """Edge to output `nr` of a node with several outputs (single-output nodes are their own edge)."""

    __slots__ = ("node", "nr")

    def __init__(self, node, nr: int) -> None:
        self.node, self.nr = node, nr


class LeafHooks(list):
    """A leaf's hooks: the list holds the gradient hooks (`register_hook`), `post` the
    post-accumulate-grad hooks (None until one is registered, so the engine tests one attribute)."""

    __slots__ = ("post",)

    def __init__(self) -> None:
        super().__init__()
        self.post = None


class RemovableHandle:
    """Returned by `register_hook`: `remove()` unregisters the hook."""

    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks: list, hook) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass  # already removed: removing twice is harmless, as in PyTorch

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def version(t: Tensor) -> int:
    """The version counter of t's storage (views count on the tensor they were taken from)."""
    b = t._base
    return (b if b is not None else t)._vc


def bump_version(t: Tensor) -> None:
    """Record an in-place change of t's storage."""
    b = t._base
    (b if b is not None else t)._vc += 1
    if _capture.ACTIVE is not None:
        _capture.refuse("an in-place write outside a captured op")


def make(data, requires_grad: bool = False, edge=None, cls: type = Tensor) -> Tensor:
    """The one constructor: wrap an array (already of the right dtype) in a new Tensor (or Tensor
    subclass `cls`) with no gradient, version 0 and no base. The hot path of every op."""
    t = _new(cls)
    t._data = data
    t._grad = None
    t._requires_grad = requires_grad
    t._edge = edge
    t._vc = 0
    t._base = None
    t.name = None
    t._hooks = None
    if _on_make is not None:
        _on_make(t)
    return t


@_capture.traced
def constant(a) -> "Tensor":
    """A tensor of array `a`, made from shapes and constants (never from a tensor's values): under
    ember.compile's capture it is recorded as a call that makes it again at every replay."""
    return make(a)


def set_make_hook(hook) -> None:
    """Have `hook(t)` called for every tensor made (None: stop). Used by ember.compile's capture."""
    global _on_make
    _on_make = hook


def _rebuild(data, requires_grad, name):
    t = make(data)
    if requires_grad:
        t._requires_grad = True
    t.name = name
    return t


def type_name(v) -> str:
    """A value's type as an error message names it: `int`, `numpy.bool`, `ember.Tensor`."""
    t = type(v)
    if t.__module__ == "builtins":
        return t.__name__
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def normalize_dim(d, ndim: int, op: str) -> int:
    """Normalise a possibly negative dimension index, with PyTorch's error when out of range."""
    try:
        d = d.__index__()
    except AttributeError:
        raise TypeError(f"{op}(): dim must be an int, got {type(d).__name__}") from None
    n = ndim if ndim > 0 else 1
    if not -n <= d < n:
        raise IndexError(f"{op}(): Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n if ndim > 0 else 0


def shape_arg(args, op: str) -> tuple:
    """Accept f(2, 3), f((2, 3)), f([2, 3]) or f(Size) as a shape, as PyTorch does."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        shape = tuple(a.__index__() for a in args)
    except (AttributeError, TypeError):
        raise TypeError(f"{op}(): size must be a tuple of ints, got {args!r}") from None
    for s in shape:
        if s < 0:
            raise RuntimeError(f"{op}(): trying to create tensor with negative dimension {s}: {list(shape)}")
    return shape


def to_array(data, np_dtype, op: str):
    """Convert user data (nested lists, numbers, arrays, Tensors) to an array; np_dtype None infers as PyTorch does."""
    if isinstance(data, Tensor):
        data = data._data
        return data.astype(np_dtype, copy=False) if np_dtype is not None else data
    if type(data) is not _ndarray and hasattr(data, "__cuda_array_interface__"):
        return data if np_dtype is None else data.astype(np_dtype, copy=False)
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat_first(data)):
        data = _untensor(data)
    try:
        arr = np.asarray(data)
    except ValueError as e:
        ragged = _ragged(data)
        if ragged:
            raise ValueError(f"{op}(): {ragged}; nested sequences must be rectangular") from None
        raise ValueError(f"{op}(): could not convert data to a tensor ({e}); nested sequences must be rectangular") from None
    if arr.dtype == object:
        raise TypeError(f"{op}(): could not infer dtype of {type(data).__name__}; data must be numbers, "
                        f"(nested) lists of numbers or arrays")
    if np_dtype is None:
        k = arr.dtype.kind
        if k == "f":
            if not isinstance(data, np.ndarray) and not isinstance(data, np.generic):
                np_dtype = dt.NP_DEFAULT_FLOAT  # Python floats become the default dtype
        elif k in "iu":
            if not isinstance(data, (np.ndarray, np.generic)):
                np_dtype = dt.NP_INT64
            elif arr.dtype not in dt.FROM_NP:
                np_dtype = dt.NP_INT64
        elif k == "b":
            pass
        elif arr.dtype == dt.bfloat16.np:
            pass
        else:
            raise TypeError(f"{op}(): unsupported data type {arr.dtype}; ember supports bool, integer and float data")
        if np_dtype is None and arr.dtype not in dt.FROM_NP:
            raise TypeError(f"{op}(): unsupported NumPy dtype {arr.dtype}; use one of {', '.join(d.name for d in dt.ALL)}")
    if arr.dtype in dt.LOW_FLOATS or np_dtype in dt.LOW_FLOATS:
        dt.low_precision_used()
    return arr if np_dtype is None else arr.astype(np_dtype, copy=False)


def _ragged(data, dim: int = 0) -> str | None:
    """For a ragged nested list/tuple: PyTorch's "expected sequence of length L at dim d (got M)"; else None."""
    if not isinstance(data, (list, tuple)) or not data:
        return None
    lens = [len(x) if isinstance(x, (list, tuple)) else None for x in data]
    first = lens[0]
    for n in lens[1:]:
        if n != first:
            return (f"expected sequence of length {first} at dim {dim + 1} (got {n})" if first is not None and
                    n is not None else f"expected every item at dim {dim + 1} to be a sequence, or none of them")
    for x in data:
        r = _ragged(x, dim + 1)
        if r:
            return r
    return None


def _flat_first(data):
    while isinstance(data, (list, tuple)) and data:
        yield data[0]
        data = data[0]


def _untensor(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_untensor(x) for x in data]
    return data
