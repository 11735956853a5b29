"""Shape ops: reshape/view, transpose/permute, squeeze/unsqueeze, expand, cat/stack, split/chunk/unbind, ...

Where PyTorch returns a view, so does ember: the result's array is a NumPy view of the
input's, and `as_view` makes the result remember its base and so share its version
counter, so that an in-place change through either is seen (and caught by autograd) in both.

`split`, `chunk` and `unbind` return their pieces from one graph node with several outputs
(`MultiOutputOp`): the engine hands its backward one gradient per piece (None for unused
pieces), and the input's gradient is assembled in a single cat/stack, so backward costs
time linear in the input's size however many pieces there are.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, make, normalize_dim
from ..backend import on_device_of
from ..autograd.function import Op, dispatch
from .arithmetic import BroadcastTo, sum_to
from .convert import clone
from .unary import to_dtype
from .inplace import as_view
from .registry import Exports

_new = object.__new__

__all__ = ["reshape", "flatten", "unflatten", "ravel", "squeeze", "unsqueeze", "transpose", "swapaxes", "swapdims",
           "t", "permute", "movedim", "moveaxis", "broadcast_to", "broadcast_tensors", "broadcast_shapes", "tile",
           "flip", "fliplr", "flipud", "roll", "tril", "triu", "cat", "concat", "concatenate", "stack", "hstack",
           "vstack", "dstack", "atleast_1d", "atleast_2d", "atleast_3d", "split", "chunk", "unbind", "narrow"]


# ---------------------------------------------------------------------- helpers
def _ints(args, op: str, what: str = "size") -> tuple:
    """f(2, 3), f((2, 3)), f([2, 3]) or f(Size) as a tuple of ints (negative values allowed: -1 means infer/keep)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return tuple([a.__index__() for a in args])
    except (AttributeError, TypeError):
        raise TypeError(f"{op}(): {what} must be a tuple of ints, got {tuple(args)!r}") from None


def _int_or_ints(v, op: str, what: str) -> tuple:
    """An int or a sequence of ints, as a tuple."""
    return _ints((v,) if not isinstance(v, (tuple, list)) else v, op, what)


def _dims(dims, ndim: int, op: str) -> tuple:
    """Normalised, duplicate-free dims (PyTorch's error for a repeated dim)."""
    out = tuple([normalize_dim(d, ndim, op) for d in dims])
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"{op}(): dim {dup} appears multiple times in the list of dims {list(dims)}")
    return out


def _infer(sizes: tuple, numel: int, op: str) -> tuple:
    """`sizes` with its (at most one) -1 replaced so that the product is `numel`."""
    infer, known = None, 1
    for i, s in enumerate(sizes):
        if s == -1:
            if infer is not None:
                raise RuntimeError(f"{op}(): only one dimension can be inferred, got shape {list(sizes)}")
            infer = i
        elif s < 0:
            raise RuntimeError(f"{op}(): invalid shape dimension {s} at index {i} of shape {list(sizes)}")
        else:
            known *= s
    if infer is None:
        if known != numel:
            raise RuntimeError(f"{op}(): shape '{list(sizes)}' is invalid for input of size {numel}")
        return sizes
    if known == 0:
        if numel == 0:
            raise RuntimeError(f"{op}(): cannot reshape tensor of 0 elements into shape {list(sizes)} because the "
                               f"unspecified dimension size -1 can be any value and is ambiguous")
        raise RuntimeError(f"{op}(): shape '{list(sizes)}' is invalid for input of size {numel}")
    if numel % known:
        raise RuntimeError(f"{op}(): shape '{list(sizes)}' is invalid for input of size {numel}")
    return sizes[:infer] + (numel // known,) + sizes[infer + 1:]


def _zeros(like: Tensor, shape: tuple) -> Tensor:
    """A constant zero tensor of `shape` with like's dtype, on like's device."""
    with on_device_of(like._data):
        return make(backend.array_module(like._data).zeros(shape, like._data.dtype))


def _check_tensor(x, op: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")


# ---------------------------------------------------------------------- single-output ops
class View(Op):
    """z = x with a new shape (same elements in row-major order);  dz/dx = gz with x's shape.

    NumPy reshapes without a copy whenever the strides allow it, exactly when PyTorch's
    reshape gives a view; otherwise it copies (callers decide whether that is allowed)."""

    saves_inputs = False

    def forward(self, x, shape):
        self.in_shape = x.shape
        return x.reshape(shape)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return View.apply(gz, self.in_shape)


class Permute(Op):
    """z = x with its axes reordered (z.shape[i] = x.shape[axes[i]]);  dz/dx = gz with the inverse order."""

    saves_inputs = False

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Permute.apply(gz, tuple(np.argsort(self.axes).tolist()))


class Narrow(Op):
    """z = x[..., start:start + length] along `dim` (a view);  dz/dx = gz placed into zeros."""

    saves_inputs = False

    def forward(self, x, dim, start, length):
        self.in_shape, self.dim, self.start = x.shape, dim, start
        return x[(slice(None),) * dim + (slice(start, start + length),)]

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Embed.apply(gz, self.in_shape, self.dim, self.start)


class Embed(Op):
    """z = zeros of `shape` with g at [start, start + len) along `dim` (narrow's adjoint);  dz/dg = narrow(gz)."""

    saves_inputs = False

    def forward(self, g, shape, dim, start):
        self.dim, self.start, self.length = dim, start, g.shape[dim]
        with on_device_of(g):
            z = backend.array_module(g).zeros(shape, g.dtype)
        z[(slice(None),) * dim + (slice(start, start + g.shape[dim]),)] = g
        return z

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Narrow.apply(gz, self.dim, self.start, self.length)


class Tile(Op):
    """z = x tiled `reps` times per dim (x already has len(reps) dims);  dz/dx = sum of gz over the tiles."""

    saves_inputs = False

    def forward(self, x, reps):
        self.in_shape, self.reps = x.shape, reps
        return backend.array_module(x).tile(x, reps)

    jvp = Op.linear_jvp

    def backward(self, gz):
        # view gz as (r0, s0, r1, s1, ...) and sum the r axes: sum_to onto (1, s0, 1, s1, ...)
        split = tuple(v for r, s in zip(self.reps, self.in_shape) for v in (r, s))
        kept = tuple(v for s in self.in_shape for v in (1, s))
        return View.apply(sum_to(View.apply(gz, split), kept), self.in_shape)


class Flip(Op):
    """z = x reversed along `dims` (a copy, as in PyTorch);  dz/dx = gz reversed along the same dims."""

    saves_inputs = False

    def forward(self, x, dims):
        self.dims = dims
        return backend.array_module(x).flip(x, dims).copy() if dims else x.copy()

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Flip.apply(gz, self.dims)


class Roll(Op):
    """z = x rolled by `shifts` along `dims` (None: over the flattened array);  dz/dx = gz rolled back."""

    saves_inputs = False

    def forward(self, x, shifts, dims):
        self.shifts, self.dims = shifts, dims
        return backend.array_module(x).roll(x, shifts, dims)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Roll.apply(gz, tuple(-s for s in self.shifts) if self.dims is not None else -self.shifts, self.dims)


class Tril(Op):
    """z = lower triangle of x (elements with j - i <= diagonal kept);  dz/dx = tril(gz)."""

    saves_inputs = False

    def forward(self, x, diagonal):
        self.diagonal = diagonal
        return backend.array_module(x).tril(x, diagonal)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Tril.apply(gz, self.diagonal)


class Triu(Op):
    """z = upper triangle of x (elements with j - i >= diagonal kept);  dz/dx = triu(gz)."""

    saves_inputs = False

    def forward(self, x, diagonal):
        self.diagonal = diagonal
        return backend.array_module(x).triu(x, diagonal)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return Triu.apply(gz, self.diagonal)


def _cast_grads(node, pieces, dtypes) -> tuple:
    """One gradient per input: the piece cast back to the input's dtype, None where no gradient is needed."""
    return tuple([(p if p._data.dtype == d else to_dtype(p, dt.FROM_NP[d])) if node.needs(i) else None
                  for i, (p, d) in enumerate(zip(pieces, dtypes))])


def _tangents(node, t: tuple, inputs: tuple) -> list:
    """The inputs' tangents for joining them, zeros for an input without one (also an integer input, which
    `reapply` would keep as it is)."""
    z = node.result()
    return [ti if isinstance(ti, Tensor) else _zeros(z, x.shape) for ti, x in zip(t, inputs)]


class Cat(Op):
    """z = x0, x1, ... joined along `dim` (cast to the promoted dtype);  dz/dxi = the matching slice of gz."""

    saves_inputs = False

    def forward(self, *arrays, dim, dtype):
        self.dim = dim
        self.sizes = tuple([a.shape[dim] for a in arrays])
        self.dtypes = tuple([a.dtype for a in arrays])
        xp = backend.array_module(arrays[0])
        if dtype is None:
            return xp.concatenate(arrays, axis=dim)
        return xp.concatenate(arrays, axis=dim, dtype=dtype, casting="same_kind")

    def jvp(self, t, *inputs):
        return self.reapply(*_tangents(self, t, inputs))  # the tangents joined the same way

    def backward(self, gz):
        return _cast_grads(self, Split.apply(gz, self.sizes, self.dim), self.dtypes)


class Stack(Op):
    """z = x0, x1, ... (same shape) stacked along a new axis `dim`;  dz/dxi = gz[..., i, ...]."""

    saves_inputs = False

    def forward(self, *arrays, dim, dtype):
        self.dim = dim
        self.dtypes = tuple([a.dtype for a in arrays])
        return backend.array_module(arrays[0]).stack(arrays, axis=dim, dtype=dtype, casting="same_kind")

    def jvp(self, t, *inputs):
        return self.reapply(*_tangents(self, t, inputs))  # the tangents stacked the same way

    def backward(self, gz):
        return _cast_grads(self, Unbind.apply(gz, self.dim), self.dtypes)


# ---------------------------------------------------------------------- multi-output ops
class MultiOutputOp(Op):
    """An op of one Tensor `x` whose outputs are views of x, recorded as one node with `n_out` outputs.

    forward returns a tuple of arrays; backward receives a list with one gradient (or None,
    for an output that received none) per output and returns x's gradient. `dispatch` gives
    each output the edge `Slot(node, i)`, which the engine uses to gather the per-output
    gradients; `apply` marks the outputs as views of x."""

    saves_inputs = False

    jvp = Op.linear_jvp  # views: the same pieces of the tangent

    @classmethod
    def apply(cls, x: Tensor, *args) -> tuple:
        # the node's one edge is x's (the other arguments are constants): outputs are views of x
        return tuple([as_view(t, x) for t in dispatch(_new(cls), (x,), (x._data,) + args)])


class Split(MultiOutputOp):
    """zi = x[..., oi:oi + sizes[i]] along `dim` (views);  dz/dx = cat of the gzi (zeros for unused pieces)."""

    def forward(self, x, sizes, dim):
        self.sizes, self.dim = sizes, dim
        self.shape = x.shape
        pre = (slice(None),) * dim
        out, o = [], 0
        for s in sizes:
            out.append(x[pre + (slice(o, o + s),)])
            o += s
        return out

    def backward(self, grads):
        if len(grads) == 1:
            return grads[0]
        like = next(g for g in grads if g is not None)
        shape, dim = self.shape, self.dim
        parts = [g if g is not None else _zeros(like, shape[:dim] + (s,) + shape[dim + 1:])
                 for g, s in zip(grads, self.sizes)]
        return Cat.apply(*parts, dim=dim, dtype=None)


class Unbind(MultiOutputOp):
    """zi = x[..., i, ...] along `dim` (views);  dz/dx = stack of the gzi (zeros for unused pieces)."""

    def forward(self, x, dim):
        self.dim = dim
        self.shape = x.shape
        pre = (slice(None),) * dim
        # the trailing Ellipsis keeps a 0-d piece an array view (a bare integer index gives a NumPy scalar copy)
        return [x[pre + (i, Ellipsis)] for i in range(x.shape[dim])]

    def backward(self, grads):
        like = next(g for g in grads if g is not None)
        zero = None
        parts = []
        for g in grads:
            if g is None:
                if zero is None:  # one shared zero piece: stack copies it into place
                    zero = _zeros(like, self.shape[:self.dim] + self.shape[self.dim + 1:])
                g = zero
            parts.append(g)
        return Stack.apply(*parts, dim=self.dim, dtype=None)


# ---------------------------------------------------------------------- reshaping
def _reshape(x: Tensor, sizes: tuple, op: str, view_only: bool) -> Tensor:
    """x with shape `sizes` (-1 inferred): a view when the strides allow, else a copy (or an error if view_only)."""
    shape = _infer(sizes, x._data.size, op)
    a = x._data
    if not a.flags.c_contiguous:
        try:
            a.reshape(shape, copy=False)
        except ValueError:
            if view_only:
                raise RuntimeError(
                    f"{op}(): view size is not compatible with input tensor's size and stride (at least one dimension "
                    f"spans across two contiguous subspaces): cannot view shape {list(a.shape)} with strides "
                    f"{[s // a.itemsize for s in a.strides]} as {list(shape)}. Use .reshape(...) instead.") from None
            return View.apply(x, shape)  # a copy, as PyTorch's reshape of such a tensor
    return as_view(View.apply(x, shape), x)


_SHAPE_KW = {"permute": "dims", "tile": "dims", "flip": "dims", "reshape": "shape"}  # else "size"


def _shape_args(args, kw, op: str) -> tuple:
    """The ints of a `*args` shape (`f(2, 3)` or `f((2, 3))`) or of its keyword; TypeError when neither is given
    (the argument is required in PyTorch: `x.permute()` is not `x.permute(())`)."""
    if kw is not None:
        if args:
            raise TypeError(f"{op}(): got the shape both positionally and as a keyword")
        args = (kw,)
    elif not args:
        raise TypeError(f"{op}() missing 1 required positional argument: '{_SHAPE_KW.get(op, 'size')}'")
    return _ints(args, op, "shape")


def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """input with a new shape (one dim may be -1: inferred); a view when possible, else a copy."""
    _check_tensor(input, "reshape")
    return _reshape(input, _shape_args(args, shape, "reshape"), "reshape", False)


def view(self: Tensor, *args, size=None) -> Tensor:
    """A view of self with a new shape (one dim may be -1); RuntimeError when the strides make a view impossible."""
    return _reshape(self, _shape_args(args, size, "view"), "view", True)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    return _reshape(self, other.shape, "view_as", True)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return _reshape(self, other.shape, "reshape_as", False)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """input with dims start_dim..end_dim merged into one (a view when possible); 0-d gives shape (1,)."""
    shape = input.shape
    n = len(shape)
    if n == 0:
        return _reshape(input, (1,), "flatten", False)
    s, e = normalize_dim(start_dim, n, "flatten"), normalize_dim(end_dim, n, "flatten")
    if s > e:
        raise RuntimeError(f"flatten() has invalid args: start_dim cannot come after end_dim (got start_dim={start_dim}, "
                           f"end_dim={end_dim} for a {n}-D tensor)")
    if s == e:
        return input
    return _reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:], "flatten", False)


def ravel(input: Tensor) -> Tensor:
    """input flattened to 1-D (a view when possible)."""
    return _reshape(input, (input._data.size,), "ravel", False)


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """input with dim `dim` split into `sizes` (one may be -1) — always a view."""
    shape = input.shape
    d = normalize_dim(dim, len(shape), "unflatten")
    sizes = _int_or_ints(sizes, "unflatten", "sizes")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = shape[d] if shape else 1
    try:
        sizes = _infer(sizes, n, "unflatten")
    except RuntimeError as e:
        if "invalid for input" not in str(e):
            raise
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} ({n}) "
                           f"in the input tensor") from None
    return as_view(View.apply(input, shape[:d] + sizes + shape[d + 1:]), input)


def squeeze(input: Tensor, dim=None) -> Tensor:
    """A view of input without its size-1 dims (only those in `dim` when given; others are left alone)."""
    shape = input.shape
    if dim is None:
        new = tuple([s for s in shape if s != 1])
    else:
        dims = _dims(_int_or_ints(dim, "squeeze", "dim"), len(shape), "squeeze")
        new = tuple([s for i, s in enumerate(shape) if s != 1 or i not in dims])
    return as_view(View.apply(input, new), input)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """A view of input with a size-1 dim inserted at `dim` (in [-ndim-1, ndim])."""
    shape = input.shape
    d = normalize_dim(dim, len(shape) + 1, "unsqueeze")
    return as_view(View.apply(input, shape[:d] + (1,) + shape[d:]), input)


def _shape_1d(s: tuple) -> tuple:
    return (1,)


def _shape_2d(s: tuple) -> tuple:
    return (1,) * (2 - len(s)) + s


def _shape_3d(s: tuple) -> tuple:
    return (1, 1, 1) if not s else (1,) + s + (1,) if len(s) == 1 else s + (1,)


def _atleast(ts, n: int, new_shape) -> tuple:
    """Each tensor of ts as is when it has >= n dims, else viewed with the shape new_shape(shape)."""
    return tuple([x if x._data.ndim >= n else as_view(View.apply(x, new_shape(x.shape)), x) for x in ts])


def _atleast_args(tensors, n: int, new_shape):
    # one tensor in, one tensor out; several (or a sequence), a tuple
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return _atleast(tensors, n, new_shape)[0]
    return _atleast(tensors[0] if len(tensors) == 1 else tensors, n, new_shape)


def atleast_1d(*tensors):
    """Each tensor viewed with at least 1 dim (0-d becomes (1,))."""
    return _atleast_args(tensors, 1, _shape_1d)


def atleast_2d(*tensors):
    """Each tensor viewed with at least 2 dims: () -> (1, 1), (n,) -> (1, n)."""
    return _atleast_args(tensors, 2, _shape_2d)


def atleast_3d(*tensors):
    """Each tensor viewed with at least 3 dims: () -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    return _atleast_args(tensors, 3, _shape_3d)


# ---------------------------------------------------------------------- transposition
def permute(input: Tensor, *args, dims=None) -> Tensor:
    """A view of input with its dims reordered: result.shape[i] == input.shape[dims[i]]."""
    dims = _shape_args(args, dims, "permute")
    n = input._data.ndim
    if len(dims) != n:
        raise RuntimeError(f"permute(): number of dims don't match: the tensor has {n} dimensions but dims = "
                           f"{list(dims)} has {len(dims)}")
    axes = tuple([normalize_dim(d, n, "permute") for d in dims])
    if len(set(axes)) != n:
        raise RuntimeError(f"permute(): duplicate dims are not allowed: dims = {list(dims)} is not a permutation of "
                           f"the {n} dimensions")
    return as_view(Permute.apply(input, axes), input)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view of input with dims dim0 and dim1 swapped."""
    n = input._data.ndim
    d0, d1 = normalize_dim(dim0, n, "transpose"), normalize_dim(dim1, n, "transpose")
    axes = list(range(n))
    if n:
        axes[d0], axes[d1] = d1, d0
    return as_view(Permute.apply(input, tuple(axes)), input)


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    """Transpose of a matrix (a view); 0-d and 1-d tensors come back as they are (as views)."""
    n = input._data.ndim
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return as_view(Permute.apply(input, (1, 0) if n == 2 else tuple(range(n))), input)


def _T(self: Tensor) -> Tensor:
    """All dims reversed (a view); PyTorch deprecates this for tensors that are not 2-D."""
    n = self._data.ndim
    if n != 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and it "
                      "will throw an error in a future release. Consider `x.mT` to transpose batches of matrices or "
                      "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      UserWarning, stacklevel=2)
    return as_view(Permute.apply(self, tuple(range(n - 1, -1, -1))), self)


def _mT(self: Tensor) -> Tensor:
    """The last two dims swapped (a batch of matrix transposes; a view)."""
    n = self._data.ndim
    if n < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {n}-D tensor.")
    return transpose(self, -2, -1)


def movedim(input: Tensor, source, destination) -> Tensor:
    """A view of input with dims `source` moved to positions `destination` (the others keep their order)."""
    n = input._data.ndim
    src, dst = _int_or_ints(source, "movedim", "source"), _int_or_ints(destination, "movedim", "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                           f"the same number of dims as destination ({list(dst)} dims)")
    s = tuple([normalize_dim(d, n, "movedim") for d in src])
    d = tuple([normalize_dim(v, n, "movedim") for v in dst])
    for name, v, given in (("source", s, src), ("destination", d, dst)):
        if len(set(v)) != len(v):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(given)})")
    order = [i for i in range(n) if i not in s]
    for di, si in sorted(zip(d, s)):
        order.insert(di, si)
    return as_view(Permute.apply(input, tuple(order)), input)


moveaxis = movedim


# ---------------------------------------------------------------------- broadcasting and tiling
def _expand(x: Tensor, sizes: tuple, op: str) -> Tensor:
    shape = x.shape
    n, m = len(shape), len(sizes)
    if m < n:
        raise RuntimeError(f"{op}(): the number of sizes provided ({m}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({n}): size={list(sizes)}, tensor of shape {list(shape)}")
    lead = m - n
    target = list(sizes)
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"{op}(): The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            continue
        cur = shape[i - lead]
        if s == -1:
            target[i] = cur
        elif s != cur and (cur != 1 or s < 0):
            raise RuntimeError(f"{op}(): The expanded size of the tensor ({s}) must match the existing size ({cur}) at "
                               f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(shape)}")
    return as_view(BroadcastTo.apply(x, tuple(target)), x)


def expand(self: Tensor, *args, size=None) -> Tensor:
    """A read-only view of self with size-1 dims repeated (stride 0) to `size`; -1 keeps a dim; new dims lead."""
    return _expand(self, _shape_args(args, size, "expand"), "expand")


def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return _expand(self, other.shape, "expand_as")


def broadcast_to(input: Tensor, size) -> Tensor:
    """input expanded (as a view) to `size`, as `input.expand(size)`."""
    return _expand(input, _ints((size,) if not isinstance(size, (tuple, list)) else size, "broadcast_to"), "broadcast_to")


def broadcast_shapes(*shapes) -> tuple:
    """The shape that all of `shapes` broadcast to (RuntimeError naming the mismatch when there is none)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    out = []
    for i in range(1, max((len(s) for s in shapes), default=0) + 1):
        size = 1
        for s in shapes:
            if i <= len(s):
                v = s[-i]
                if v != 1:
                    if size != 1 and v != size:
                        raise RuntimeError(f"broadcast_shapes: the size of tensor a ({size}) must match the size of "
                                           f"tensor b ({v}) at non-singleton dimension {-i}: shapes "
                                           f"{[list(x) for x in shapes]} do not broadcast")
                    size = v
        out.append(size)
    return tuple(reversed(out))


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded (as views) to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple([_expand(t, shape, "broadcast_tensors") for t in tensors])


def repeat(self: Tensor, *sizes) -> Tensor:
    """self tiled sizes[i] times along dim i (extra leading sizes add dims), a copy;  NumPy's tile."""
    reps = _ints(sizes, "repeat", "repeats")
    n = self._data.ndim
    if len(reps) < n:
        raise RuntimeError(f"repeat(): Number of dimensions of repeat dims ({len(reps)}) can not be smaller than number "
                           f"of dimensions of tensor ({n})")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"repeat(): repeats must be non-negative, got {list(reps)}")
    x = self if len(reps) == n else as_view(View.apply(self, (1,) * (len(reps) - n) + self.shape), self)
    return Tile.apply(x, reps)


def tile(input: Tensor, *args, dims=None) -> Tensor:
    """input tiled dims[i] times along dim i; fewer dims than input.ndim are padded with leading 1s."""
    reps = _shape_args(args, dims, "tile")
    n = input._data.ndim
    return repeat(input, *((1,) * (n - len(reps)) + reps))


# ---------------------------------------------------------------------- flips, rolls, triangles
def flip(input: Tensor, *args, dims=None) -> Tensor:
    """input reversed along `dims` (a copy)."""
    d = _dims(_shape_args(args, dims, "flip"), input._data.ndim, "flip")
    return Flip.apply(input, d)


def fliplr(input: Tensor) -> Tensor:
    """input reversed along dim 1 (left/right); needs >= 2 dims."""
    if input._data.ndim < 2:
        raise RuntimeError(f"fliplr(): Input must be >= 2-d, got a {input._data.ndim}-d tensor")
    return Flip.apply(input, (1,))


def flipud(input: Tensor) -> Tensor:
    """input reversed along dim 0 (up/down); needs >= 1 dim."""
    if input._data.ndim < 1:
        raise RuntimeError("flipud(): Input must be >= 1-d, got a 0-d tensor")
    return Flip.apply(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """input with elements shifted by `shifts` along `dims`, wrapping around; dims None rolls the flattened tensor."""
    sh = _int_or_ints(shifts, "roll", "shifts")
    if dims is None:
        if len(sh) != 1:
            raise RuntimeError(f"roll(): shifts and dimensions must align. shifts: {len(sh)}, dims:0")
        return Roll.apply(input, sh[0], None)
    ds = _int_or_ints(dims, "roll", "dims")
    if len(sh) != len(ds):
        raise RuntimeError(f"roll(): shifts and dimensions must align. shifts: {len(sh)}, dims:{len(ds)}")
    n = input._data.ndim
    return Roll.apply(input, sh, tuple([normalize_dim(d, n, "roll") for d in ds]))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle of the last two dims (elements above diagonal `diagonal` zeroed)."""
    if input._data.ndim < 2:
        raise RuntimeError(f"tril(): input tensor must have at least 2 dimensions, got {input._data.ndim}")
    return Tril.apply(input, diagonal.__index__())


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle of the last two dims (elements below diagonal `diagonal` zeroed)."""
    if input._data.ndim < 2:
        raise RuntimeError(f"triu(): input tensor must have at least 2 dimensions, got {input._data.ndim}")
    return Triu.apply(input, diagonal.__index__())


# ---------------------------------------------------------------------- joining
def _tensor_list(tensors, op: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (tuple, list)):
        raise TypeError(f"{op}(): argument 'tensors' must be a tuple or list of Tensors, not {type(tensors).__name__}")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 'tensors', but got {type(x).__name__}")
    return list(tensors)


def _promoted_dtype(tensors: list):
    """PyTorch's promotion over all tensors; None when they already agree (no cast needed)."""
    d0 = tensors[0]._data.dtype
    target = d0
    for x in tensors[1:]:
        if x._data.dtype != target:
            target = dt.promote_types(target, x._data.dtype)
    return None if all(x._data.dtype == target for x in tensors) else target


def cat(tensors, dim: int = 0) -> Tensor:
    """The tensors joined along the existing dim `dim` (all other sizes must match; dtypes are promoted)."""
    ts = _tensor_list(tensors, "cat")
    if not ts:
        raise ValueError("cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(ts):
        if x._data.ndim == 0:
            raise RuntimeError(f"cat(): zero-dimensional tensor (at position {i}) cannot be concatenated")
    dtype = _promoted_dtype(ts)
    # PyTorch's legacy rule: 1-D empty tensors are skipped whatever the others' shapes
    used = [x for x in ts if x._data.shape != (0,)] or ts
    ref = used[0]._data.shape
    d = normalize_dim(dim, len(ref), "cat")
    pre, post = ref[:d], ref[d + 1:]
    for x in used:
        s = x._data.shape
        if s[:d] != pre or s[d + 1:] != post:
            _cat_mismatch(ts, ref, d)
    return Cat.apply(*used, dim=d, dtype=dtype)


def _cat_mismatch(ts: list, ref: tuple, d: int):
    """Raise PyTorch's error for the first tensor whose shape does not fit `ref` outside dim d."""
    for i, x in enumerate(ts):
        s = x._data.shape
        if s == (0,):
            continue
        if len(s) != len(ref):
            raise RuntimeError(f"cat(): Tensors must have same number of dimensions: got {len(ref)} and {len(s)}")
        for k in range(len(ref)):
            if k != d and s[k] != ref[k]:
                raise RuntimeError(f"cat(): Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref[k]} but got size {s[k]} for tensor number {i} in the list.")


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """The same-shaped tensors stacked along a new dim `dim` (dtypes are promoted)."""
    ts = _tensor_list(tensors, "stack")
    if not ts:
        raise RuntimeError("stack(): stack expects a non-empty TensorList")
    shape = ts[0].shape
    for i, x in enumerate(ts):
        if x.shape != shape:
            raise RuntimeError(f"stack(): stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                               f"and {list(x.shape)} at entry {i}")
    d = normalize_dim(dim, len(shape) + 1, "stack")
    return Stack.apply(*ts, dim=d, dtype=_promoted_dtype(ts))


def hstack(tensors) -> Tensor:
    """Join horizontally: along dim 0 for 1-D tensors, else dim 1 (0-d tensors count as 1-D)."""
    ts = _atleast(_tensor_list(tensors, "hstack"), 1, _shape_1d)
    return cat(ts, 0 if ts and ts[0]._data.ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Join vertically: along dim 0 after making every tensor at least 2-D ((n,) -> (1, n))."""
    return cat(_atleast(_tensor_list(tensors, "vstack"), 2, _shape_2d), 0)


def dstack(tensors) -> Tensor:
    """Join depth-wise: along dim 2 after making every tensor at least 3-D."""
    return cat(_atleast(_tensor_list(tensors, "dstack"), 3, _shape_3d), 2)


# ---------------------------------------------------------------------- splitting
def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of `tensor` along `dim`: pieces of split_size (the last may be smaller), or of the listed sizes."""
    shape = tensor.shape
    if not shape:
        raise IndexError("split(): Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim(dim, len(shape), "split")
    n = shape[d]
    if isinstance(split_size_or_sections, (tuple, list)):
        sizes = _ints(split_size_or_sections, "split", "split_sizes")
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                               f"split_sizes={list(sizes)}")
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={list(sizes)}")
    else:
        try:
            s = split_size_or_sections.__index__()
        except AttributeError:
            raise TypeError(f"split(): split_size_or_sections must be an int or a list of ints, got "
                            f"{type(split_size_or_sections).__name__}") from None
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
        if s == 0 and n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        k = max(-(-n // s), 1) if s else 1
        sizes = (s,) * (k - 1) + (n - s * (k - 1),)
    return Split.apply(tensor, sizes, d)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Views of input in pieces of ceil(n / chunks) along `dim` (so possibly fewer than `chunks` pieces)."""
    chunks = chunks.__index__()
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    shape = input.shape
    if not shape:
        raise IndexError("chunk(): Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim(dim, len(shape), "chunk")
    n = shape[d]
    if n == 0:  # PyTorch gives `chunks` empty pieces here
        return Split.apply(input, (0,) * chunks, d)
    return split(input, -(-n // chunks), d)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices input[..., i, ...] along `dim` (views), as a tuple."""
    n = input._data.ndim
    if n == 0:
        raise IndexError("unbind(): Dimension specified as 0 but tensor has no dimensions")
    return Unbind.apply(input, normalize_dim(dim, n, "unbind"))


def narrow(input: Tensor, dim: int, start, length: int) -> Tensor:
    """A view of input[..., start:start + length, ...] along `dim` (a negative start counts from the end)."""
    shape = input.shape
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, len(shape), "narrow")
    n = shape[d]
    start, length = start.__index__(), length.__index__()
    if not -n <= start <= n:
        raise IndexError(f"narrow(): start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative, got {length}")
    if start + length > n:
        raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return as_view(Narrow.apply(input, d, start, length), input)


def contiguous(self: Tensor, memory_format=None) -> Tensor:
    """self when its array is laid out in memory_format (default: C-contiguous), else a copy that is (gradient
    flows through unchanged)."""
    from .. import _memory_format as MF
    fmt = MF.check(memory_format, "contiguous")
    if fmt is MF.preserve_format:
        raise RuntimeError("contiguous(): preserve memory format is unsupported by the contiguous operator")
    return self if MF.is_in(self._data, fmt) else clone(self, memory_format=fmt)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=("reshape", "view", "view_as", "reshape_as", "flatten", "ravel", "unflatten", "squeeze", "unsqueeze",
             "permute", "transpose", "swapaxes", "swapdims", "t", "movedim", "moveaxis", "expand", "expand_as",
             "broadcast_to", "repeat", "tile", "flip", "fliplr", "flipud", "roll", "tril", "triu", "split", "chunk",
             "unbind", "narrow", "contiguous"),
    aliases={"T": property(_T), "mT": property(_mT)})
