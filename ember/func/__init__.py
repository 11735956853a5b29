"""Function transforms, PyTorch's `torch.func`: `vmap`, `grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`,
`jacfwd`, `hessian`, `linearize`, `functional_call`, `stack_module_state`.

A transform takes a function and returns a function, and transforms compose: `vmap(grad(loss))` gives
per-example gradients, `jacfwd(jacrev(f))` the Hessian. How each is built on the two modes of
differentiation and on batching:

- `grad`/`vjp` (reverse mode): the inputs become fresh graph roots, f runs recording a graph, and the
  engine pulls the cotangent back through it (one backward pass per cotangent).
- `jvp` (forward mode): the inputs become dual tensors at a new forward-AD level and f's ops push the
  tangents along (ember.autograd.forward_ad).
- `vmap` (batching): f runs once on logical tensors whose arrays hold every example; each op is applied
  once to the stacked arrays by its batching rule (ember/func/_batching.py).
- `jacrev` = vmap of vjp over the rows of the identity (one batched backward pass), `jacfwd` = vmap of jvp
  over its columns (one batched forward pass): reverse mode costs one pass per output element, forward
  mode one per input element, so jacrev suits many inputs and few outputs, jacfwd the opposite.

Inside vmap, `grad` and `vjp` see batched inputs: they differentiate the physical (stacked) computation,
whose examples are independent, so the gradients come out per example. A vjp function called with
cotangents batched at a level it was not built under (`vmap(vjp_fn)`, as jacrev does) runs f again under
that level, so that its graph is batched like the cotangents; this costs one more (batched) forward pass
than PyTorch, which batches the backward pass of the one graph instead.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .._tensor import TENSOR_TYPES, Tensor
from ..autograd import forward_ad as fw
from ..autograd.grad_mode import MODE, enable_grad
from . import _batching as B
from ._tree import broadcast_prefix, flatten

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functional_call", "stack_module_state"]

_RANDOMNESS = ("error", "different", "same")


def _name(func) -> str:
    return getattr(func, "__name__", type(func).__name__)


def _is_tensor(x) -> bool:
    return isinstance(x, Tensor)


# ---------------------------------------------------------------------- vmap
def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size: int | None = None) -> Callable:
    """Vectorise `func` over a dimension of its inputs: `vmap(f)(xs)` is `stack([f(x) for x in xs])`, computed
    with one op application per op of f on all examples at once.

    in_dims: the mapped dimension of each input (an int, None for an input that is not mapped, or a container
    matching the inputs' structure); out_dims: where the mapped dimension goes in each output. randomness:
    "error" (random ops inside f raise), "different" (each example draws its own values), "same" (all examples
    share one draw). chunk_size: map at most that many examples at a time (None: all at once)."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
        if not args:
            raise ValueError(f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                             f"are trying to vmap over a function with no inputs. The latter is unsupported.")
        if not isinstance(in_dims, (int, tuple)):
            raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                             f"structure of inputs, got: {type(in_dims)}.")
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`: in_dims has "
                             f"{len(in_dims)} entries but there are {len(args)} inputs.")
        leaves, rebuild = flatten(args)
        dims = broadcast_prefix(in_dims, args, f"{where}: in_dims")
        size = None
        sizes = []
        for x, d in zip(leaves, dims):
            if d is None:
                continue
            if not _is_tensor(x):
                raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot "
                                 f"vmap over non-Tensor arguments, please use None as the respective in_dim")
            n = x.dim()
            if not -n <= d < n:
                raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {n} so expected in_dim to satisfy {-n} <= in_dim < {n}.")
            sizes.append(x.shape[d])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) != 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        size = sizes[0]
        if chunk_size is not None and chunk_size < size:
            return _chunked(func, leaves, dims, rebuild, kwargs, size, chunk_size, out_dims, randomness)
        return _vmap_call(func, leaves, dims, rebuild, kwargs, size, out_dims, randomness)

    return wrapped


def _vmap_call(func, leaves, dims, rebuild, kwargs, size, out_dims, randomness):
    level = B.enter(size, randomness)
    try:
        mapped = [B.logical(x.movedim(d, 0), level) if d is not None else x for x, d in zip(leaves, dims)]
        out = func(*rebuild(mapped), **kwargs)
        return _unmap(out, out_dims, level, size, func)
    finally:
        B.leave(level)


def _chunked(func, leaves, dims, rebuild, kwargs, size, chunk, out_dims, randomness):
    from ..ops.shape import cat
    parts = []
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        sub = [x.narrow(d, start, n) if d is not None else x for x, d in zip(leaves, dims)]
        parts.append(_vmap_call(func, sub, dims, rebuild, kwargs, n, out_dims, randomness))
    outs, rebuild_out = flatten(parts[0])
    ods = broadcast_prefix(out_dims, parts[0], "vmap: out_dims", "outputs")
    cols = [flatten(p)[0] for p in parts]
    return rebuild_out([cat([c[k] for c in cols], dim=od) if od is not None else outs[k]
                        for k, od in enumerate(ods)])


def _unmap(out, out_dims, level, size, func):
    leaves, rebuild = flatten(out)
    if out_dims is not None and not isinstance(out_dims, (int, tuple, list)):
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         f"collection of ints representing where in the outputs the vmapped dimension should appear.")
    ods = broadcast_prefix(out_dims, out, f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims",
                           "outputs")
    res = []
    for x, od in zip(leaves, ods):
        if not _is_tensor(x):
            if od is None:
                res.append(x)
                continue
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got type "
                             f"{type(x)}. Did you mean to set out_dims= to None for output?")
        batched = B.is_batched(x, level)
        if od is None:
            if batched:
                raise ValueError(f"vmap({_name(func)}, ..., out_dims=None): the output is batched (it depends on "
                                 f"the mapped inputs), so out_dims=None cannot return it; give it an out_dim")
            res.append(x)
            continue
        p = B.physical(x) if batched else x.unsqueeze(0).expand((size,) + tuple(x.shape))
        n = p.dim()
        if not -n <= od < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {od})")
        res.append(p.movedim(0, od) if od not in (0, -n) else p)
    return rebuild(res)


# ---------------------------------------------------------------------- reverse mode: grad, vjp
_depth = [0]  # transforms of reverse mode now running (an inner one keeps its graph for the outer ones)


def _levels_of(t) -> list:
    """The vmap levels `t` is batched at, outermost first."""
    out = []
    a = t._data
    while a.__class__ is B.BatchedArray:
        out.append(a.level)
        a = a.phys
    return out[::-1]


def _open_levels() -> list:
    return [(lv, size) for lv, size, _ in B.LEVELS.stack]


def _expand_all(t: Tensor) -> Tensor:
    """`t` batched at every open vmap level (a copy per example where it was not), so that what is computed from
    it is per example at every level."""
    for lv, size in _open_levels():
        if lv not in _levels_of(t):
            t = B.to_level(t, lv, size)
    return t


def _to_physical(t: Tensor) -> Tensor:
    """Every vmap level of `t` unwrapped: a plain tensor, batch dimensions in front (outermost first)."""
    while t._data.__class__ is B.BatchedArray:
        t = B.physical(t)
    return t


def _to_logical(p: Tensor, levels: list) -> Tensor:
    for lv in levels:
        p = B.logical(p, lv)
    return p


class _Prepared:
    """The differentiable inputs of a reverse-mode transform: each a fresh root of the graph f records (batched at
    every open vmap level, unwrapped to its physical tensor), connected to its outer graph when it had one."""

    def __init__(self, tensors: list, op: str) -> None:
        self.levels = [lv for lv, _ in _open_levels()]
        self.roots, self.logical = [], []
        for t in tensors:
            if not _is_tensor(t):
                raise TypeError(f"{op}: expected the differentiated inputs to be Tensors, got {type(t).__name__}")
            if not (t.is_floating_point()):
                raise RuntimeError(f"{op}: only Tensors of floating point dtype can require gradients (got an input "
                                   f"of dtype {t.dtype}); pass it as a non-differentiated argument")
            p = _to_physical(_expand_all(t))
            if p.requires_grad:
                root = p.view_as(p)
            else:  # a new leaf, which keeps the forward-mode tangents p carries (jacfwd of jacrev)
                root = _fresh_leaf(p)
            self.roots.append(root)
            self.logical.append(_to_logical(root, self.levels))


def _fresh_leaf(p: Tensor) -> Tensor:
    from .._tensor import make
    root = make(p._data, True)
    for lv in MODE.fw:
        tan = fw.tangent_of(p, lv)
        if tan is not None:
            fw.set_tangent(root, lv, tan)
    return root


def _pullback(outputs: list, prep: _Prepared, cotangents: list, retain_graph: bool) -> list:
    """The vector-Jacobian products of `outputs` (logical) with `cotangents` (logical, same shapes) with respect
    to `prep`'s inputs, as logical tensors of the prep's levels (zeros where an input does not reach an output)."""
    from ..autograd.engine import grad as engine_grad
    outs, cots = [], []
    for o, c in zip(outputs, cotangents):
        if not o.requires_grad:
            continue
        outs.append(_to_physical(_expand_all(o)))
        cots.append(_to_physical(_expand_all(c)))
    create = _depth[0] > 1 or any(r._edge is not None for r in prep.roots)
    gs = engine_grad(outs, prep.roots, cots, retain_graph=retain_graph or create, create_graph=create,
                     allow_unused=True) if outs else [None] * len(prep.roots)
    res = []
    for g, r, lg in zip(gs, prep.roots, prep.logical):
        res.append(_to_logical(g, prep.levels) if g is not None else _zeros_logical(lg))
    return res


def _zeros_logical(t: Tensor) -> Tensor:
    from .._creation import zeros_like
    return zeros_like(t)


def _argnums_tuple(argnums, nargs: int, op: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not nums or not all(isinstance(n, int) for n in nums):
        raise RuntimeError(f"{op}: argnums must be int or Tuple[int, ...], got: {argnums!r}")
    for n in nums:
        if not -nargs <= n < nargs:
            raise RuntimeError(f"Got argnum={n}, but only {nargs} positional inputs")
    return tuple(n % nargs for n in nums)


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """`(gradient, value)` of a scalar-valued `func` with respect to the arguments `argnums` (an int, or a tuple
    of ints: then a tuple of gradients; each argument may be a container of tensors, e.g. a dict of parameters).
    has_aux: func returns `(output, aux)` and the result is `(gradient, (value, aux))`."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad_and_value(f)(*args)")
        trees = [flatten(args[n]) for n in nums]
        _depth[0] += 1
        try:
            with enable_grad():
                prep = _Prepared([x for leaves, _ in trees for x in leaves], "grad_and_value(f)(*args)")
                new_args = list(args)
                k = 0
                for n, (leaves, rebuild) in zip(nums, trees):
                    new_args[n] = rebuild(prep.logical[k:k + len(leaves)])
                    k += len(leaves)
                out = func(*new_args, **kwargs)
                aux = None
                if has_aux:
                    if not (isinstance(out, tuple) and len(out) == 2):
                        raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                           "(output, aux) if has_aux is True")
                    out, aux = out
                if not _is_tensor(out):
                    raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                       f"{type(out).__name__}")
                if out.dim() != 0:
                    raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                       f"tensor with {out.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                                       f"APIs instead?")
                from .._creation import ones_like
                gs = _pullback([out], prep, [ones_like(out)], retain_graph=False)
        finally:
            _depth[0] -= 1
        grads, k = [], 0
        for leaves, rebuild in trees:
            grads.append(rebuild(gs[k:k + len(leaves)]))
            k += len(leaves)
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = out if _depth[0] else out.detach()
        return (g, (value, aux)) if has_aux else (g, value)

    return wrapper


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar-valued `func` with respect to the arguments `argnums` (see grad_and_value);
    with has_aux, `(gradient, aux)`."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    return wrapper


def vjp(func: Callable, *primals, has_aux: bool = False):
    """`(output, vjp_fn)`: func's output at `primals`, and the function taking cotangents (of the output's
    structure and shapes) to the vector-Jacobian products, one per primal. With has_aux, `(output, vjp_fn, aux)`.
    vjp_fn keeps the graph: it may be called many times."""
    trees = [flatten(p) for p in primals]
    _depth[0] += 1
    try:
        with enable_grad():
            prep = _Prepared([x for leaves, _ in trees for x in leaves], "vjp(f, *primals)")
            new, k = [], 0
            for leaves, rebuild in trees:
                new.append(rebuild(prep.logical[k:k + len(leaves)]))
                k += len(leaves)
            out = func(*new)
    finally:
        _depth[0] -= 1
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) if has_aux "
                               "is True")
        out, aux = out
    out_leaves, _ = flatten(out)
    for o in out_leaves:
        if not _is_tensor(o):
            raise RuntimeError(f"vjp(f, *primals): Expected f to return a Tensor or a container of Tensors, got "
                               f"{type(o).__name__}")
    made_at = set(prep.levels)

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        ct_leaves, _ = flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function: {len(ct_leaves)} cotangents for {len(out_leaves)} outputs")
        for i, (c, o) in enumerate(zip(ct_leaves, out_leaves)):
            if not _is_tensor(c) or tuple(c.shape) != tuple(o.shape):
                got = list(c.shape) if _is_tensor(c) else type(c).__name__
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {got} and output[{i}] has a "
                                   f"shape of {list(o.shape)}.")
        if any(lv not in made_at for c in ct_leaves for lv in _levels_of(c)):
            # cotangents batched at a level the graph is not (vmap(vjp_fn)): run f again under that level
            return vjp(func, *primals, has_aux=has_aux)[1](cotangents)
        _depth[0] += 1
        try:
            gs = _pullback(out_leaves, prep, ct_leaves, retain_graph=True)
        finally:
            _depth[0] -= 1
        res, k = [], 0
        for leaves, rebuild in trees:
            res.append(rebuild(gs[k:k + len(leaves)]))
            k += len(leaves)
        return tuple(res)

    value = out if _depth[0] else _detach_tree(out)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def _detach_tree(tree):
    leaves, rebuild = flatten(tree)
    return rebuild([x.detach() if _is_tensor(x) else x for x in leaves])


# ---------------------------------------------------------------------- forward mode: jvp
def jvp(func: Callable, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """`(output, jvp_out)`: func's output at `primals` and its Jacobian-vector product with `tangents` (a tuple
    of the primals' structure and shapes), by forward mode. With has_aux, `(output, jvp_out, aux)`."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected tangents to be a tuple of the primals' structure.")
    p_leaves, rebuild = flatten(primals)
    t_leaves, _ = flatten(tangents)
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure: {len(p_leaves)} primals and {len(t_leaves)} tangents.")
    for p, t in zip(p_leaves, t_leaves):
        if not (_is_tensor(p) and _is_tensor(t)):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to only contain Tensors")
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape, "
                               f"got {list(p.shape)} and {list(t.shape)}")
    level = fw._enter_level()
    try:
        duals = []
        for p, t in zip(p_leaves, t_leaves):
            for lv in _levels_of(t):  # a tangent batched where the primal is not (vmap of jvp): match it
                if lv not in _levels_of(p):
                    p = B.to_level(p, lv, B._size_of(lv))
            for lv in _levels_of(p):
                if lv not in _levels_of(t):
                    t = B.to_level(t, lv, B._size_of(lv))
            duals.append(fw.make_dual(p, t, level=level))
        out = func(*rebuild(duals))
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: (output, aux) "
                                   "if has_aux is True")
            out, aux = out
        o_leaves, o_rebuild = flatten(out)
        prim, tans = [], []
        for o in o_leaves:
            if not _is_tensor(o):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected f(*primals) to return only tensors, got "
                                   f"unsupported type {type(o).__name__}")
            tan = fw.tangent_of(o, level)
            if tan is None:
                if strict:
                    raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent of "
                                       "the inputs. This is not allowed with strict=True.")
                from .._creation import zeros_like
                tan = zeros_like(o)
            prim.append(fw.unpack_dual(o, level=level).primal if fw.tangent_of(o, level) is not None else o)
            tans.append(tan)
    finally:
        fw._exit_level(level)
    res = (o_rebuild(prim), o_rebuild(tans))
    return res + (aux,) if has_aux else res


def linearize(func: Callable, *primals) -> tuple:
    """`(output, jvp_fn)`: func's output at `primals` and a function taking tangents to the Jacobian-vector
    product at those primals. (PyTorch traces func once; ember's jvp_fn runs the forward-mode pass again on each
    call.)"""
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return out, jvp_fn


# ---------------------------------------------------------------------- Jacobians and the Hessian
def _basis(n: int, like: Tensor) -> Tensor:
    from .._creation import eye
    return eye(n, dtype=like.dtype, device=like.device)


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of `func` with respect to the arguments `argnums`, by reverse mode: vmap of the vjp over the
    rows of the identity, one row per output element. Result for an output of shape O and an input of shape I:
    shape O + I (nested: per output, then per argnum when argnums is a tuple)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacrev(f, argnums)(*args)")

        def f_of(*diff):
            a = list(args)
            for n, d in zip(nums, diff):
                a[n] = d
            return func(*a, **kwargs)

        res = vjp(f_of, *[args[n] for n in nums], has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        o_leaves, o_rebuild = flatten(out)
        in_leaves = [flatten(args[n])[0] for n in nums]
        total = sum(o.numel() for o in o_leaves)
        eye = _basis(total, o_leaves[0]) if o_leaves else None
        cots, start = [], 0
        for o in o_leaves:
            cots.append(eye[:, start:start + o.numel()].reshape((total,) + tuple(o.shape)))
            start += o.numel()
        rows = vmap(lambda *c: vjp_fn(o_rebuild(list(c))), chunk_size=chunk_size)(*cots)  # per primal: total x I
        jac_per_out, start = [], 0
        for o in o_leaves:
            per_arg = []
            for k, (leaves_k, rows_k) in enumerate(zip(in_leaves, rows)):
                r_leaves, r_rebuild = flatten(rows_k)
                per_arg.append(r_rebuild([r[start:start + o.numel()].reshape(tuple(o.shape) + tuple(x.shape))
                                          for r, x in zip(r_leaves, leaves_k)]))
            start += o.numel()
            jac_per_out.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        jac = o_rebuild(jac_per_out)
        return (jac, res[2]) if has_aux else jac

    return wrapper


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """The Jacobian of `func` with respect to `argnums`, by forward mode: vmap of the jvp over the columns of the
    identity, one column per input element. Same result layout as jacrev."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacfwd(f, argnums)(*args)")
        trees = [flatten(args[n]) for n in nums]
        leaves = [x for lv, _ in trees for x in lv]
        total = sum(x.numel() for x in leaves)
        eye = _basis(total, leaves[0])
        tans, start = [], 0
        for x in leaves:
            tans.append(eye[:, start:start + x.numel()].reshape((total,) + tuple(x.shape)))
            start += x.numel()

        def one_column(*t):
            prim, k = [], 0
            tan_args = []
            for leaves_k, rebuild in trees:
                prim.append(rebuild(leaves[k:k + len(leaves_k)]))
                tan_args.append(rebuild(list(t[k:k + len(leaves_k)])))
                k += len(leaves_k)

            def f_of(*diff):
                a = list(args)
                for n, d in zip(nums, diff):
                    a[n] = d
                return func(*a, **kwargs)

            r = jvp(f_of, tuple(prim), tuple(tan_args), has_aux=has_aux)
            return (r[1], r[2]) if has_aux else r[1]

        cols = vmap(one_column, randomness=randomness, out_dims=-1)(*tans)
        aux = None
        if has_aux:
            cols, aux = cols
            aux = _first_example(aux)
        o_leaves, o_rebuild = flatten(cols)
        jac = []
        for c in o_leaves:  # shape O + (total,): split the last dimension per input
            per_in, start = [], 0
            for x in leaves:
                per_in.append(c[..., start:start + x.numel()].reshape(tuple(c.shape[:-1]) + tuple(x.shape)))
                start += x.numel()
            per_arg, k = [], 0
            for leaves_k, rebuild in trees:
                per_arg.append(rebuild(per_in[k:k + len(leaves_k)]))
                k += len(leaves_k)
            jac.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        jac = o_rebuild(jac)
        return (jac, aux) if has_aux else jac

    return wrapper


def _first_example(tree):
    leaves, rebuild = flatten(tree)
    return rebuild([x[..., 0] if _is_tensor(x) else x for x in leaves])


def hessian(func: Callable, argnums=0) -> Callable:
    """The Hessian of a scalar `func`: jacfwd of jacrev (forward over reverse)."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------------- modules as functions
def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call `module` with its parameters and buffers replaced by the tensors of `parameter_and_buffer_dicts`
    (a dict name -> tensor, names as in `named_parameters()`/`named_buffers()`, or a tuple of such dicts), then
    put the module's own back. Tensors not named keep the module's own; with `tie_weights`, a tensor given for
    one of several names of one tied parameter replaces all of them; `strict` requires every name to be given."""
    from .._tensor import Tensor as _T
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (tuple, list)) else \
        (parameter_and_buffer_dicts,)
    given: dict = {}
    for d in dicts:
        for k, v in d.items():
            if k in given:
                raise ValueError(f"{k} appeared in multiple dictionaries; behavior of functional call is ambiguous")
            given[k] = v
    names = {}  # name -> (owner module, map name, key)
    by_tensor: dict = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)):
        names[name] = "_parameters"
        by_tensor.setdefault(id(t), []).append(name)
    for name, t in list(module.named_buffers(remove_duplicate=False)):
        names[name] = "_buffers"
        by_tensor.setdefault(id(t), []).append(name)
    unexpected = [k for k in given if k not in names]
    missing = [k for k in names if k not in given]
    if strict and (unexpected or missing):
        msg = []
        if unexpected:
            msg.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
        if missing:
            msg.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(msg))
    if unexpected and not strict:
        # PyTorch sets unknown names as attributes of the submodules; ember refuses, naming them
        raise RuntimeError(f"functional_call: {type(module).__name__} has no parameter or buffer named "
                           + ", ".join(f"'{k}'" for k in unexpected))
    if tie_weights:
        for ids, group in by_tensor.items():
            if len(group) > 1:
                chosen = [n for n in group if n in given]
                if len(chosen) > 1 and any(given[c] is not given[chosen[0]] for c in chosen[1:]):
                    raise ValueError(f"functional_call got multiple values for keys {chosen}, which are tied. "
                                     f"Consider using tie_weights=False")
                if chosen:
                    for n in group:
                        given.setdefault(n, given[chosen[0]])
    saved = []
    try:
        for name, value in given.items():
            if name not in names:
                continue
            owner, _, key = name.rpartition(".")
            sub = module.get_submodule(owner) if owner else module
            table = sub.__dict__[names[name]]
            if value is not None and not isinstance(value, _T):
                raise TypeError(f"functional_call: the value for '{name}' must be a Tensor, got {type(value).__name__}")
            saved.append((table, key, table[key]))
            table[key] = value
        args = () if args is None else (args if isinstance(args, tuple) else (args,))
        return module(*args, **(kwargs or {}))
    finally:
        for table, key, old in reversed(saved):
            table[key] = old


def stack_module_state(models) -> tuple[dict, dict]:
    """`(params, buffers)`: each a dict name -> the tensors of that name of every model stacked along a new first
    dimension (parameters as new leaves that require grad as the originals do), for vmap over an ensemble with
    functional_call."""
    from ..ops.shape import stack
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    names = [n for n, _ in models[0].named_parameters()]
    params = {}
    for n in names:
        ts = [dict(m.named_parameters())[n] for m in models]
        params[n] = stack([t.detach() for t in ts]).requires_grad_(ts[0].requires_grad)
    buffers = {n: stack([dict(m.named_buffers())[n] for m in models]) for n, _ in models[0].named_buffers()}
    return params, buffers
