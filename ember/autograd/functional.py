"""Higher-level differentiation of whole functions, PyTorch's `torch.autograd.functional`:
`vjp`, `jvp`, `jacobian`, `hessian`, `hvp`, `vhp`.

Each takes `func` and `inputs` (a Tensor or a tuple of Tensors) and differentiates func at inputs:
- vjp: vᵀ J (reverse mode, one backward pass);
- jvp: J v (forward mode, one pass of dual tensors; PyTorch computes it by a double backward, which gives
  the same values);
- jacobian: J, one vjp per output element (vectorize=True: all of them at once through ember.func.vmap,
  strategy="forward-mode": one jvp per input element instead);
- hessian: the Jacobian of the gradient of a scalar func;
- vhp/hvp: vᵀ H and H v from a double backward (equal, the Hessian being symmetric).

Results follow the structure of `inputs` and of func's outputs: a Tensor where the user passed or returned a
Tensor, a tuple where they used tuples. With `create_graph=True` the results are part of the graph (so they can
be differentiated again); otherwise they are detached. `strict=True` refuses outputs that do not depend on the
inputs, where the non-strict result is zeros.
"""
from __future__ import annotations

from typing import Callable

from .._tensor import Tensor
from .engine import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x, arg: str, fn: str) -> tuple[bool, tuple]:
    if isinstance(x, tuple):
        items = x
        is_tuple = True
    else:
        items, is_tuple = (x,), False
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but the "
                                f"value at index {i} has type {type(t)}.")
            raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but the given "
                            f"{arg} has type {type(t)}.")
    return is_tuple, tuple(items)


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh roots for the inputs: views keeping their graph when a graph of the result is wanted, else detached."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _outputs(func, inputs, fn: str) -> tuple[bool, tuple]:
    return _as_tuple(func(*inputs), "outputs of the user-provided function", fn)


def _check_differentiable(outputs, strict: bool, fn: str) -> None:
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                                   f"must be computed in a differentiable manner from the input when running in strict "
                                   f"mode.")


def _grads(outputs, inputs, cots, create_graph: bool, strict: bool, retain: bool = True,
           what: str = "The output of the user-provided function") -> tuple:
    """Σ cotᵀ ∂output/∂input for each input: zeros where an input does not reach the outputs (an error in
    strict mode)."""
    pairs = [(o, c) for o, c in zip(outputs, cots) if o.requires_grad]
    if pairs:
        gs = _grad([o for o, _ in pairs], list(inputs), [c for _, c in pairs], retain_graph=retain or create_graph,
                   create_graph=create_graph, allow_unused=True)
    else:
        gs = [None] * len(inputs)
    res = []
    for i, (g, x) in enumerate(zip(gs, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{what} is independent of input {i}. This is not allowed in strict mode.")
            from .._creation import zeros_like
            g = zeros_like(x)
        res.append(g)
    return tuple(res)


def _finish(values: tuple, is_tuple: bool, create_graph: bool):
    vs = tuple(v if create_graph else v.detach() for v in values)
    return vs if is_tuple else vs[0]


def _check_v(v, like: tuple, fn: str, what: str) -> tuple:
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the {what} a single Tensor with a single element.")
        from .._creation import ones_like
        return (ones_like(like[0]),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}.")
    for a, b in zip(vs, like):
        if a.shape != b.shape:
            raise RuntimeError(f"v has invalid size: should be {b.shape} but got {a.shape}.")
    return vs


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(inputs), vᵀ J)`: v has the outputs' structure (None for a single-element output)."""
    is_in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func, xs, "vjp")
        _check_differentiable(outs, strict, "vjp")
        vs = _check_v(v, outs, "vjp", "user-provided function returns")
        gs = _grads(outs, xs, vs, create_graph, strict)
    return _finish(outs, is_out_tuple, create_graph), _finish(gs, is_in_tuple, create_graph)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(inputs), J v)`: v has the inputs' structure (None for a single-element input), by forward mode."""
    from . import forward_ad as fw
    is_in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    vs = _check_v(v, xs, "jvp", "input to the user-provided function is")
    level = fw._enter_level()
    try:
        with enable_grad():
            duals = tuple(fw.make_dual(x if create_graph else x.detach(), t, level=level) for x, t in zip(xs, vs))
            is_out_tuple, outs = _outputs(func, duals, "jvp")
            prim, tans = [], []
            for i, o in enumerate(outs):
                t = fw.tangent_of(o, level)
                if t is None:
                    if strict:
                        raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                                           f"This is not allowed in strict mode.")
                    from .._creation import zeros_like
                    t = zeros_like(o)
                    prim.append(o)
                else:
                    prim.append(fw.unpack_dual(o, level=level).primal)
                tans.append(t)
    finally:
        fw._exit_level(level)
    return _finish(tuple(prim), is_out_tuple, create_graph), _finish(tuple(tans), is_out_tuple, create_graph)


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of func at inputs: entry [i][j] (as the structures of outputs and inputs allow) has shape
    outputs[i].shape + inputs[j].shape. Reverse mode: one vjp per output element (vectorize: all at once);
    strategy="forward-mode" (with vectorize=True): one jvp per input element."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                         'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer '
                         'to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` and "
                                      "`strategy=\"forward-mode\"` are not supported together (yet). Please either set "
                                      "`create_graph=False` or `strategy=\"reverse-mode\"`.")
        if not vectorize:
            raise NotImplementedError("torch.autograd.functional.jacobian: `strategy=\"forward-mode\"` only "
                                      "implemented together with `vectorize=True`.")
    is_in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    if vectorize:
        from .. import func as F
        if strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        transform = F.jacfwd if strategy == "forward-mode" else F.jacrev
        with enable_grad():
            xs2 = _prepare(xs, create_graph)
            is_out_tuple, outs = _outputs(func, xs2, "jacobian")
            jac = transform(lambda *a: func(*a), argnums=tuple(range(len(xs))))(*xs2)
        per_out = jac if is_out_tuple else (jac,)
        rows = []
        for row in per_out:
            row = tuple(r if create_graph else r.detach() for r in row)
            rows.append(row if is_in_tuple else row[0])
        return tuple(rows) if is_out_tuple else rows[0]
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func, xs, "jacobian")
        _check_differentiable(outs, strict, "jacobian")
        from .._creation import zeros
        rows = []
        for i, o in enumerate(outs):
            n = o.numel()
            cols = [[] for _ in xs]
            for k in range(n):
                e = zeros(n, dtype=o.dtype, device=o.device)
                e[k] = 1
                gs = _grads([o], xs, [e.reshape(o.shape)], create_graph, strict,
                            what=f"Output {i} of the user-provided function")
                for j, g in enumerate(gs):
                    cols[j].append(g)
            from ..ops.shape import stack
            row = tuple((stack(c) if c else zeros((0,) + tuple(x.shape), dtype=o.dtype)).reshape(
                tuple(o.shape) + tuple(x.shape)) for c, x in zip(cols, xs))
            row = tuple(r if create_graph else r.detach() for r in row)
            rows.append(row if is_in_tuple else row[0])
    return tuple(rows) if is_out_tuple else rows[0]


def _scalar_func(func, fn: str):
    def f(*xs):
        is_out_tuple, outs = _outputs(func, xs, fn)
        if is_out_tuple or outs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {fn} should contain a single element")
        return outs[0].reshape(())
    return f


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar func: the Jacobian of its gradient ([i][j] of shape inputs[i].shape +
    inputs[j].shape for tuple inputs)."""
    is_in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")
    f = _scalar_func(func, "hessian")
    if vectorize:  # the Jacobian's vmap batches the gradient too: the function transforms' grad
        from ..func import grad as F_grad
        g = F_grad(f, argnums=tuple(range(len(xs))))
        return jacobian(g if is_in_tuple else (lambda a: g(a)[0]), xs if is_in_tuple else xs[0],
                        create_graph=create_graph, strict=strict, vectorize=True, strategy=outer_jacobian_strategy)

    def gradient(*a):
        with enable_grad():
            o = f(*a)
            _check_differentiable((o,), strict, "hessian")
            return _grads([o], a, [o.new_ones(())], True, strict)

    return jacobian(gradient if is_in_tuple else (lambda a: gradient(a)[0]), xs if is_in_tuple else xs[0],
                    create_graph=create_graph, strict=strict, vectorize=vectorize, strategy=outer_jacobian_strategy)


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(inputs), vᵀ H)` for a scalar func, by a double backward."""
    is_in_tuple, xs = _as_tuple(inputs, "inputs", "vhp")
    vs = _check_v(v, xs, "vhp", "input to the user-provided function is")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        o = _scalar_func(func, "vhp")(*xs)
        _check_differentiable((o,), strict, "vhp")
        gs = _grads([o], xs, [o.new_ones(())], True, strict)
        if not any(g.requires_grad for g in gs):
            if strict:
                raise RuntimeError("The jacobian of the user-provided function is independent of input 0. This is not "
                                   "allowed in strict mode when create_graph=True.")
            res = tuple(g * 0 for g in gs)
        else:
            res = _grads(gs, xs, vs, create_graph, strict, what="The jacobian of the user-provided function")
    return _finish((o,), False, create_graph), _finish(res, is_in_tuple, create_graph)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """`(func(inputs), H v)` for a scalar func; equal to vhp's vᵀ H, the Hessian being symmetric."""
    return vhp(func, inputs, v, create_graph, strict)
