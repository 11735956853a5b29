"""Products of tensors: matmul and its 2-D/3-D/1-D forms, outer, einsum, tensordot, addmm, baddbmm.

Every gradient is itself a product: for z = x @ y, dx = gz @ yᵀ and dy = xᵀ @ gz; for an
einsum, the gradient of one operand is the einsum of the upstream gradient with the other
operands, the equation rearranged. Backward is written with these ops (plus the views
shape.View and shape.Permute), so higher derivatives come for free. Every op here is linear in
each operand separately, so its forward derivative is the product rule, z' = x' @ y + x @ y'
(`Op.multilinear_jvp`): the same op applied with one operand at a time replaced by its tangent.

Speed: a float32 matmul forward is one BLAS call; a batch of rows times a weight matrix,
(B, n, k) @ (k, m), is folded into one (B·n, k) @ (k, m) GEMM (NumPy would run B small
GEMMs, ~15x slower); einsum of two or more operands always runs with `optimize=True`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, normalize_dim
from ..autograd.grad_mode import MODE
from ..backend import on_device_of
from ..autograd.function import Op
from .arithmetic import broadcast_to, sum_to
from .shape import Permute, View
from .unary import to_dtype
from .inplace import as_view
from .registry import Exports

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "outer", "ger", "einsum", "tensordot", "addmm", "baddbmm"]

# PyTorch's C type names, used in its dtype-mismatch messages ("float != double")
_CNAME = {"float32": "float", "float64": "double", "float16": "half", "int64": "long", "int32": "int",
          "int16": "short", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def c_type_name(a) -> str:
    return _CNAME.get(a.dtype.name, a.dtype.name)


def _x(shape) -> str:
    """A shape as PyTorch writes it in matmul messages: 2x3."""
    return "x".join(str(s) for s in shape)


# ---------------------------------------------------------------------- the product rule (forward mode)
# ---------------------------------------------------------------------- private views used in backward
def _mt(x: Tensor) -> Tensor:
    """x with its last two dimensions swapped (a view), differentiably."""
    n = x._data.ndim
    return Permute.apply(x, tuple(range(n - 2)) + (n - 1, n - 2))


class _DiagEmbed(Op):
    """z = zeros of `shape` with g written where the labels of `target` repeat (e.g. 'ii': onto the diagonal);
    dz/dg = the einsum `target->unique` (the diagonal again). `unique` lists target's labels once, in order."""

    saves_inputs = False

    def forward(self, g, target, unique, shape):
        self.target, self.unique = target, unique
        xp = backend.array_module(g)
        with on_device_of(g):
            out = xp.zeros(shape, g.dtype)
            idx = []
            for axis_label, n in zip(target, shape):
                view = [1] * len(unique)
                view[unique.index(axis_label)] = n
                idx.append(xp.arange(n).reshape(view))
        out[tuple(idx)] = g
        return out

    def backward(self, gz):
        return Einsum.apply(gz, subs=(self.target,), osub=self.unique), None, None, None

    jvp = Op.multilinear_jvp  # linear in g: the same embedding of g'


# ---------------------------------------------------------------------- matmul
def _fold_rows(x, y) -> bool:
    """Whether x (..., n, k) @ y (k, m) can run as one (rows, k) @ (k, m) GEMM on a view of x."""
    return x.ndim > 2 and y.ndim == 2 and x.flags.c_contiguous


class Matmul(Op):
    """z = x @ y with NumPy/PyTorch matmul rules (1-D operands promoted to a row/column, leading dims broadcast);
    dx = gz @ yᵀ, dy = xᵀ @ gz, summed over the batch dimensions the operand was broadcast along;
    z' = x' @ y + x @ y'."""

    jvp = Op.multilinear_jvp

    def forward(self, x, y):
        if y.ndim > 2 and y.__class__ is np.ndarray and y.size and not any(y.strides[:-2]) and x.ndim >= y.ndim \
                and np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) == x.shape[:-2]:
            # y is one matrix repeated along its leading dimensions (a stride-0 expand: the weight that vmap's grad
            # copies per example): one product with that matrix, not one per copy (128 GEMVs reading the weight
            # 128 times against one GEMM: 4x faster for W1 at batch 128)
            y = y[(0,) * (y.ndim - 2)]
        if _fold_rows(x, y):
            k, m = y.shape
            lead = x.shape[:-1]
            return (x.reshape(math.prod(lead), k) @ y).reshape(lead + (m,))
        if x.ndim > 2 and y.ndim >= 2 and x.shape[-1] == 1:
            # stacked outer products (a batch of per-example weight gradients under vmap): NumPy's stacked matmul
            # with an inner dimension of 1 takes a slow loop (128x512x1 @ 128x1x784: 1.25 s; the broadcast
            # product, the same numbers: 0.1 s)
            return x * y
        return np.matmul(x, y)

    def backward(self, gz, x, y):
        xd, yd = x.ndim, y.ndim
        if xd == 1 and yd == 1:  # dot product: gz is 0-d
            return (gz * y if self.needs(0) else None), (gz * x if self.needs(1) else None)
        # view 1-D operands as a 1xk row / kx1 column (and gz to match), as matmul's forward does
        x2 = View.apply(x, (1, x.shape[0])) if xd == 1 else x
        y2 = View.apply(y, (y.shape[0], 1)) if yd == 1 else y
        gz2 = gz
        if xd == 1:
            gz2 = View.apply(gz, gz.shape[:-1] + (1, gz.shape[-1]))
        elif yd == 1:
            gz2 = View.apply(gz, gz.shape + (1,))
        gx = gy = None
        if self.needs(0):
            gx = Matmul.apply(gz2, _mt(y2))
            if gx.shape != x2.shape:
                gx = sum_to(gx, x2.shape)
            if xd == 1:
                gx = View.apply(gx, x.shape)
        if self.needs(1):
            if x2.ndim > 2 and y2.ndim == 2:
                # (rows, k)ᵀ @ (rows, m): one GEMM instead of a batch of them summed afterwards
                k, m = y2.shape
                rows = math.prod(x2.shape[:-1])
                gy = Matmul.apply(_mt(View.apply(x2, (rows, k))), View.apply(gz2, (rows, m)))
            else:
                gy = Matmul.apply(_mt(x2), gz2)
                if gy.shape != y2.shape:
                    gy = sum_to(gy, y2.shape)
            if yd == 1:
                gy = View.apply(gy, y.shape)
        return gx, gy


def _need_tensors(op: str, *named) -> None:
    for pos, (name, v) in enumerate(named, 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(v).__name__}")


def _same_dtype(op: str, x, y) -> None:
    if x.dtype != y.dtype:
        raise RuntimeError(f"{op}(): expected m1 and m2 to have the same dtype, but got: {c_type_name(x)} != {c_type_name(y)}")
    if x.dtype.kind == "b":
        # NotImplementedError is a RuntimeError, as in PyTorch
        raise NotImplementedError(f"{op}(): not implemented for 'Bool' tensors; convert them with .float() or .long() first")


def _matmul_error(op: str, xs: tuple, ys: tuple) -> RuntimeError:
    """The error for shapes that matmul cannot combine."""
    if len(xs) == 1 and len(ys) == 1:
        return RuntimeError(f"{op}(): inconsistent tensor size, expected vectors of the same number of elements, "
                            f"but got shapes {list(xs)} and {list(ys)}")
    k2 = ys[-2] if len(ys) > 1 else ys[0]
    if xs[-1] != k2:
        return RuntimeError(f"{op}(): mat1 and mat2 shapes cannot be multiplied ({_x(xs)} and {_x(ys)})")
    bx, by = xs[:-2], ys[:-2]
    n = max(len(bx), len(by))
    bx, by = (1,) * (n - len(bx)) + bx, (1,) * (n - len(by)) + by
    for d, (a, b) in enumerate(zip(bx, by)):
        if a != b and a != 1 and b != 1:
            return RuntimeError(f"{op}(): the batch dimensions of shapes {list(xs)} and {list(ys)} cannot be broadcast: "
                                f"the size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton "
                                f"dimension {d}")
    return RuntimeError(f"{op}(): shapes {list(xs)} and {list(ys)} cannot be multiplied")


def _apply_matmul(op: str, a: Tensor, b: Tensor) -> Tensor:
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        a, b = cast_args(Matmul, a, b)
    x, y = a._data, b._data
    if x.dtype is not y.dtype or x.dtype.kind == "b":
        _same_dtype(op, x, y)
    try:
        return Matmul.apply(a, b)
    except ValueError:
        backend.check_same_device(op, (x, y))  # CuPy reports arrays of two GPUs as a ValueError too
        raise _matmul_error(op, x.shape, y.shape) from None


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with broadcasting: 1-D·1-D is a dot product (0-d), a 1-D operand is a row (first) or a
    column (second) removed from the result, and dimensions before the last two broadcast."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        _need_tensors("matmul", ("input", input), ("other", other))
    if input._data.ndim == 0 or other._data.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {input._data.ndim}D "
                           f"and {other._data.ndim}D")
    return _apply_matmul("matmul", input, other)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """(n, k) @ (k, m) -> (n, m); both operands must be matrices."""
    _need_tensors("mm", ("input", input), ("mat2", mat2))
    if input._data.ndim != 2:
        raise RuntimeError(f"mm(): self must be a matrix, but got a {input._data.ndim}-D tensor of shape {list(input.shape)}")
    if mat2._data.ndim != 2:
        raise RuntimeError(f"mm(): mat2 must be a matrix, but got a {mat2._data.ndim}-D tensor of shape {list(mat2.shape)}")
    return _apply_matmul("mm", input, mat2)


def _check_batches(op: str, b1: Tensor, b2: Tensor) -> None:
    for name, t in (("batch1", b1), ("batch2", b2)):
        if t._data.ndim != 3:
            raise RuntimeError(f"{op}(): {name} must be a 3D tensor, but got a {t._data.ndim}-D tensor of shape {list(t.shape)}")
    s1, s2 = b1.shape, b2.shape
    if s2[0] != s1[0] or s2[1] != s1[2]:
        raise RuntimeError(f"{op}(): Expected size for first two dimensions of batch2 tensor to be: [{s1[0]}, {s1[2]}] "
                           f"but got: [{s2[0]}, {s2[1]}] (batch1 {list(s1)}, batch2 {list(s2)})")


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """(b, n, k) @ (b, k, m) -> (b, n, m), with equal batch sizes (no broadcasting)."""
    _need_tensors("bmm", ("input", input), ("mat2", mat2))
    _check_batches("bmm", input, mat2)
    return _apply_matmul("bmm", input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """(n, k) @ (k,) -> (n,)."""
    _need_tensors("mv", ("input", input), ("vec", vec))
    if input._data.ndim != 2 or vec._data.ndim != 1:
        raise RuntimeError(f"mv(): expected a matrix and a vector, but got shapes {list(input.shape)} and {list(vec.shape)}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv(): size mismatch, got mat ({_x(input.shape)}) and vec ({vec.shape[0]})")
    return _apply_matmul("mv", input, vec)


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """Σᵢ xᵢ·yᵢ of two 1-D tensors of the same length (a 0-d tensor)."""
    _need_tensors("dot", ("input", input), ("tensor", tensor))
    if input._data.ndim != 1 or tensor._data.ndim != 1:
        raise RuntimeError(f"dot(): 1D tensors expected, but got {input._data.ndim}D and {tensor._data.ndim}D tensors")
    if input.shape != tensor.shape:
        raise RuntimeError(f"dot(): inconsistent tensor size, expected tensor {list(input.shape)} and src "
                           f"{list(tensor.shape)} to have the same number of elements")
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, tensor = cast_args(Matmul, input, tensor)
    if input._data.dtype != tensor._data.dtype:
        raise RuntimeError(f"dot(): expected both vectors to have same dtype, but found {c_type_name(input._data)} and "
                           f"{c_type_name(tensor._data)}")
    return _apply_matmul("dot", input, tensor)


class Outer(Op):
    """z[i, j] = x[i]·y[j];  dx = gz @ y, dy = x @ gz;  z' = x' ⊗ y + x ⊗ y'."""

    jvp = Op.multilinear_jvp

    def forward(self, x, y):
        return x[:, None] * y

    def backward(self, gz, x, y):
        return (Matmul.apply(gz, y) if self.needs(0) else None), (Matmul.apply(x, gz) if self.needs(1) else None)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors (dtypes promoted as for `*`)."""
    _need_tensors("outer", ("input", input), ("vec2", vec2))
    for name, t in (("self", input), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise RuntimeError(f"outer(): Expected 1-D argument {name}, but got {t._data.ndim}-D (shape {list(t.shape)})")
    if input._data.dtype is not vec2._data.dtype:
        target = dt.FROM_NP[dt.result_type(input._data, vec2._data)]
        input, vec2 = to_dtype(input, target), to_dtype(vec2, target)
    return Outer.apply(input, vec2)


ger = outer


# ---------------------------------------------------------------------- addmm, baddbmm
class AddMatmul(Op):
    """z = beta·c + alpha·(a @ b) (c broadcast to the result; ignored when beta = 0);
    dc = beta·gz summed to c's shape, da = alpha·gz @ bᵀ, db = alpha·aᵀ @ gz."""

    def forward(self, c, a, b, beta, alpha):
        self.beta, self.alpha = beta, alpha
        out = np.matmul(a, b)  # a fresh array: scale and add in place, no temporaries
        if alpha != 1:
            out *= alpha
        if beta == 1:
            out += c
        elif beta != 0:  # beta = 0: c is not read at all, so NaN/inf in it do not propagate (as PyTorch)
            out += beta * c
        return out

    def backward(self, gz, c, a, b):
        beta, alpha = self.beta, self.alpha
        gc = ga = gb = None
        if self.needs(0):
            gc = sum_to(gz if beta == 1 else gz * beta, c.shape)
        if self.needs(1):
            ga = Matmul.apply(gz, _mt(b))
            ga = ga if alpha == 1 else ga * alpha
        if self.needs(2):
            gb = Matmul.apply(_mt(a), gz)
            gb = gb if alpha == 1 else gb * alpha
        return gc, ga, gb

    def jvp(self, t, c, a, b):
        """z' = beta·c' + alpha·(a' @ b + a @ b') (c' broadcast to the result; not read when beta = 0)."""
        tc, ta, tb = t
        z = None
        if isinstance(ta, Tensor):
            z = Matmul.apply(ta, b)
        if isinstance(tb, Tensor):
            z = Matmul.apply(a, tb) if z is None else z + Matmul.apply(a, tb)
        if z is not None and self.alpha != 1:
            z = z * self.alpha
        if isinstance(tc, Tensor) and self.beta != 0:
            tc = tc if self.beta == 1 else tc * self.beta
            z = tc if z is None else z + tc
        return 0 if z is None else z


def _add_matmul(op: str, input: Tensor, a: Tensor, b: Tensor, beta, alpha, out_shape: tuple) -> Tensor:
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, a, b = cast_args(AddMatmul, input, a, b)
    dts = (input._data.dtype, a._data.dtype, b._data.dtype)
    if not dts[0] == dts[1] == dts[2]:
        raise RuntimeError(f"{op}(): expected input, mat1 and mat2 to have the same dtype, but got "
                           f"{c_type_name(input._data)}, {c_type_name(a._data)} and {c_type_name(b._data)}")
    _same_dtype(op, a._data, b._data)
    try:
        ok = np.broadcast_shapes(input.shape, out_shape) == out_shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{op}(): input of shape {list(input.shape)} cannot be broadcast to the result shape "
                           f"{list(out_shape)}")
    if dts[1].kind != "f":  # integer tensors: PyTorch truncates the scalars to integers
        beta, alpha = int(beta), int(alpha)
    return AddMatmul.apply(input, a, b, beta=beta, alpha=alpha)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·(mat1 @ mat2) for matrices mat1 (n, k), mat2 (k, m); input broadcasts to (n, m)."""
    _need_tensors("addmm", ("input", input), ("mat1", mat1), ("mat2", mat2))
    for name, t in (("mat1", mat1), ("mat2", mat2)):
        if t._data.ndim != 2:
            raise RuntimeError(f"addmm(): {name} must be a matrix, got {t._data.ndim}-D tensor of shape {list(t.shape)}")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"addmm(): mat1 and mat2 shapes cannot be multiplied ({_x(mat1.shape)} and {_x(mat2.shape)})")
    return _add_matmul("addmm", input, mat1, mat2, beta, alpha, (mat1.shape[0], mat2.shape[1]))


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta·input + alpha·bmm(batch1, batch2); input broadcasts to the result (b, n, m)."""
    _need_tensors("baddbmm", ("input", input), ("batch1", batch1), ("batch2", batch2))
    _check_batches("baddbmm", batch1, batch2)
    return _add_matmul("baddbmm", input, batch1, batch2, beta, alpha, batch1.shape[:2] + (batch2.shape[2],))


# ---------------------------------------------------------------------- einsum
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # ASCII order: implicit output sorts like PyTorch
_ELL = "..."


class Einsum(Op):
    """z = einsum(subs -> osub) of the operands, every subscript a letter, no ellipsis, sizes equal across operands;
    d operand_i = einsum(osub, subs_j (j ≠ i) -> labels of subs_i), broadcast along the labels that only
    operand i has, and written onto the diagonal where operand i repeats a label. Linear in each operand:
    z' = Σᵢ the same einsum with operand i replaced by its tangent."""

    jvp = Op.multilinear_jvp

    def forward(self, *arrays, subs, osub):
        # (not `self.out`: Node keeps a saved result there)
        self.subs, self.osub = subs, osub
        self.shapes = tuple(a.shape for a in arrays)
        eq = ",".join(subs) + "->" + osub
        xp = backend.array_module(arrays[0])
        if len(arrays) == 1:
            self.saves_inputs = False  # the gradient of a one-operand einsum needs only gz
            return xp.einsum(eq, arrays[0])
        return xp.einsum(eq, *arrays, optimize=True)  # plain einsum is many times slower on large contractions

    def backward(self, gz, *inputs):
        subs, out, n = self.subs, self.osub, len(self.subs)
        grads = []
        for i, s in enumerate(subs):
            if not self.needs(i):
                grads.append(None)
                continue
            others = [j for j in range(n) if j != i]
            unique = "".join(dict.fromkeys(s))
            seen = set(out).union(*(subs[j] for j in others))
            kept = "".join(c for c in unique if c in seen)
            if not others and kept == out:
                g = gz
            else:
                g = Einsum.apply(gz, *(inputs[j] for j in others), subs=(out,) + tuple(subs[j] for j in others), osub=kept)
            if kept != unique:  # labels summed within operand i alone: its gradient is constant along them
                size = dict(zip(s, self.shapes[i]))
                g = View.apply(g, tuple(size[c] if c in seen else 1 for c in unique))
                g = broadcast_to(g, tuple(size[c] for c in unique))
            if len(unique) != len(s):
                g = _DiagEmbed.apply(g, s, unique, self.shapes[i])
            grads.append(g)
        return tuple(grads)


def _tokens(eq: str, start: int, stop: int, who: str) -> list:
    """Labels of one term of the equation (eq[start:stop]), with _ELL for an ellipsis; spaces are skipped."""
    toks, k = [], start
    while k < stop:
        c = eq[k]
        if c == " ":
            k += 1
        elif c == ".":
            if eq[k:k + 3] != _ELL or k + 3 > stop:
                raise RuntimeError(f"einsum(): found '.' for {who} that is not part of any ellipsis")
            if _ELL in toks:
                raise RuntimeError(f"einsum(): found more than one ellipsis for {who}")
            toks.append(_ELL)
            k += 3
        elif c in _LETTERS:
            toks.append(c)
            k += 1
        else:
            raise RuntimeError(f"einsum(): invalid subscript given at index {k} in the equation string, "
                               f"subscripts must be in [a-zA-Z]")
    return toks


def _parse(equation: str, operands: tuple) -> tuple:
    """(subscript strings, output string, operands) with ellipses spelt out as fresh letters and the
    size-1 dimensions that broadcast against a larger size squeezed out of their operand."""
    arrow = equation.find("->")
    lhs_end = arrow if arrow >= 0 else len(equation)
    terms, start = [], 0
    for k in range(lhs_end + 1):
        if k == lhs_end or equation[k] == ",":
            terms.append((start, k))
            start = k + 1
    if len(operands) > len(terms):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if len(operands) < len(terms):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    toks = [_tokens(equation, a, b, f"operand {i}") for i, (a, b) in enumerate(terms)]
    out_toks = _tokens(equation, arrow + 2, len(equation), "output") if arrow >= 0 else None

    # ellipsis dimensions become fresh letters, right-aligned across operands (they broadcast)
    n_ell = 0
    for i, (t, x) in enumerate(zip(toks, operands)):
        labels, nd = len(t) - (_ELL in t), x._data.ndim
        if _ELL not in t and labels != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({labels}) does not match the number "
                               f"of dimensions ({nd}) for operand {i} and no ellipsis was given")
        if labels > nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({labels}) is more than the number "
                               f"of dimensions ({nd}) for operand {i}")
        if _ELL in t:
            n_ell = max(n_ell, nd - labels)
    used = {c for t in toks for c in t}
    free = [c for c in _LETTERS if c not in used]
    if n_ell > len(free):
        raise RuntimeError(f"einsum(): too many dimensions: the equation and the {n_ell} dimensions covered by "
                           f"ellipsis need more than {len(_LETTERS)} distinct subscripts")
    ell = "".join(free[:n_ell])
    subs = []
    for t, x in zip(toks, operands):
        if _ELL in t:
            e = x._data.ndim - (len(t) - 1)
            p = t.index(_ELL)
            t = t[:p] + list(ell[n_ell - e:]) + t[p + 1:]
        subs.append("".join(t))

    # sizes: equal within an operand, equal or 1 (broadcast) across operands
    size: dict = {}
    for i, (s, x) in enumerate(zip(subs, operands)):
        mine: dict = {}
        for c, n in zip(s, x.shape):
            if c in mine:
                if mine[c] != n:
                    raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the sizes don't match, "
                                       f"{n} != {mine[c]}")
                continue
            mine[c] = n
            seen = size.get(c)
            if seen is None or seen == 1:
                size[c] = n
            elif n != seen and n != 1:
                if c in ell:
                    raise RuntimeError(f"einsum(): dimension {ell.index(c)} covered by ellipsis in operand {i} has size {n} "
                                       f"which does not broadcast with previously seen ellipsis with size {seen} for the "
                                       f"respective dimension")
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which does not broadcast with "
                                   f"previously seen size {seen}")

    if out_toks is None:  # implicit output: ellipsis dims, then the labels used exactly once, sorted
        counts: dict = {}
        for t in toks:
            for c in t:
                if c != _ELL:
                    counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1))
    else:
        out = ""
        for c in out_toks:
            if c == _ELL:
                out += ell
            elif c in out:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            elif c not in used:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input operand")
            else:
                out += c

    # a size-1 dimension broadcast against a larger one: the operand is constant along that label, so drop it
    ops = list(operands)
    for i, (s, x) in enumerate(zip(subs, operands)):
        drop = [p for p, (c, n) in enumerate(zip(s, x.shape)) if n == 1 and size[c] != 1]
        if drop:
            subs[i] = "".join(c for p, c in enumerate(s) if p not in drop)
            ops[i] = View.apply(x, tuple(n for p, n in enumerate(x.shape) if p not in drop))
    return tuple(subs), out, ops


def _sublist_equation(args: tuple) -> tuple:
    """einsum(op0, sublist0, op1, sublist1, ..., [out_sublist]) as (equation, operands); labels are ints in [0, 52)."""
    def term(sub) -> str:
        s = ""
        for v in sub:
            if v is Ellipsis:
                s += _ELL
            elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < len(_LETTERS):
                s += _LETTERS[v]  # 0..25 -> A..Z, 26..51 -> a..z, as PyTorch
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {v!r}")
        return s
    ops, subs = args[0:len(args) - len(args) % 2:2], args[1::2]
    eq = ",".join(term(s) for s in subs[:len(ops)])
    if len(args) % 2:
        eq += "->" + term(args[-1])
    return eq, ops


def einsum(*args) -> Tensor:
    """Einstein summation: einsum('ij,jk->ik', a, b). Operands may also be given as one list, or in sublist form
    einsum(a, [0, 1], b, [1, 2], [0, 2]). Supports '...' (broadcast), implicit output (no '->': the labels used
    once, sorted), repeated labels (diagonals, traces) and size-1 dimensions broadcast against larger ones."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one operand "
                         "and its subscripts list")
    if isinstance(args[0], str):
        equation, operands = args[0], args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
    else:
        equation, operands = _sublist_equation(args)
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operand {i} must be a Tensor, not {type(t).__name__}")
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        operands = cast_args(Einsum, *operands)
    dtype = operands[0]._data.dtype
    for t in operands[1:]:
        if t._data.dtype != dtype:
            raise RuntimeError(f"einsum(): expected all operands to have the same dtype, but got {c_type_name(operands[0]._data)} "
                               f"and {c_type_name(t._data)}")
    subs, out, ops = _parse(equation, operands)
    r = Einsum.apply(*ops, subs=subs, osub=out)
    if len(ops) == 1:
        x = operands[0]
        if backend.array_module(r._data).may_share_memory(r._data, x._data):
            # a permutation or diagonal of one operand is a view of it, as in PyTorch: share the version counter
            as_view(r, x)
    return r


# ---------------------------------------------------------------------- tensordot
class Tensordot(Einsum):
    """z = Σ over the paired dims of a's free dims ⊗ b's free dims (np.tensordot); its gradients are those of the
    equivalent einsum (`subs` -> `osub`), inherited from Einsum."""

    def forward(self, x, y, subs, osub, axes):
        self.subs, self.osub, self.shapes = subs, osub, (x.shape, y.shape)
        return backend.array_module(x).tensordot(x, y, axes)


def _dims_list(v, op: str, dims) -> list:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return [int(v)]
    if isinstance(v, (list, tuple)) and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in v):
        return [int(d) for d in v]
    raise RuntimeError(f"{op} expects dims to be int or tuple[list[int], list[int]] or list[list[int]] containing two "
                       f"lists, but got dims={dims!r}")


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract the last `dims` dims of a with the first `dims` of b, or the dims paired by dims=(dims_a, dims_b);
    the result has a's remaining dims then b's."""
    _need_tensors("tensordot", ("a", a), ("b", b))
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        if dims < 0:
            raise RuntimeError(f"tensordot(): expects dims >= 0, but got dims={dims}")
        if dims > na or dims > nb:
            raise RuntimeError(f"tensordot(): expects dims <= ndim of both inputs ({na} and {nb}), but got dims={dims}")
        da, db = list(range(na - dims, na)), list(range(dims))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        da, db = _dims_list(dims[0], "tensordot()", dims), _dims_list(dims[1], "tensordot()", dims)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot(): both dimension lists should have same length, got {da} and {db}")
    else:
        raise RuntimeError(f"tensordot() expects dims to be int or tuple[list[int], list[int]] or list[list[int]] "
                           f"containing two lists, but got dims={dims!r}")
    da, db = [normalize_dim(d, na, "tensordot") for d in da], [normalize_dim(d, nb, "tensordot") for d in db]
    for ds in (da, db):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"tensordot(): dim {next(d for d in ds if ds.count(d) > 1)} appears multiple times in "
                               f"the list of dims")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot(): contracted dimensions need to match, but first has size {a.shape[i]} in "
                               f"dim {i} and second has size {b.shape[j]} in dim {j} (shapes {list(a.shape)} and "
                               f"{list(b.shape)})")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"tensordot(): both inputs should have the same dtype, but got {c_type_name(a._data)} and "
                           f"{c_type_name(b._data)}")
    if na + nb - len(db) > len(_LETTERS):
        raise RuntimeError(f"tensordot(): inputs with {na} and {nb} dimensions are too many for ember's einsum labels")
    sa = _LETTERS[:na]
    fresh = iter(_LETTERS[na:])
    pair = dict(zip(db, da))
    sb = "".join(sa[pair[j]] if j in pair else next(fresh) for j in range(nb))
    out = "".join(c for i, c in enumerate(sa) if i not in da) + "".join(c for j, c in enumerate(sb) if j not in pair)
    return Tensordot.apply(a, b, subs=(sa, sb), osub=out, axes=(da, db))


# ---------------------------------------------------------------------- operators on Tensor
def _matmul_operator(a, b):
    return matmul(a, b) if isinstance(b, Tensor) else NotImplemented


def _rmatmul_operator(a, b):
    return matmul(b, a) if isinstance(b, Tensor) else NotImplemented


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=("matmul", "mm", "bmm", "mv", "dot", "outer", "ger", "addmm", "baddbmm"),
    aliases={"__matmul__": _matmul_operator, "__rmatmul__": _rmatmul_operator})
