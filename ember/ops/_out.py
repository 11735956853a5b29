"""`out=`: PyTorch's keyword that writes a function's result into a tensor the caller gives.

`OUT_FUNCTIONS` names every top-level function of PyTorch 2.13 that takes `out=`: derived once from
torch/_C/_VariableFunctions.pyi (each overload's parameters) and the signatures of torch's Python-level
functions, backend-internal names (cudnn_*, native_*, the *_copy forms of views) left out. `ember/ops/__init__.py`
wraps every exported ember function of those names with `with_out` at bind time (the factories of
`ember._creation` too), unless ember already defines its own `out` parameter. The wrapper costs one Python
call (~0.15 µs) when `out` is not given.

Semantics, as PyTorch's: the result is computed as without `out` and written into `out`, which is returned (a
tuple of tensors, as a named tuple where the function returns one, for the functions with several results).
`out` keeps its dtype: the result is cast into it when its category fits (bool < integer < float), else
RuntimeError; the functions of `EXACT_DTYPE` (and those with several results) need `out` to have the result's
dtype exactly. An `out` of another shape is resized (with PyTorch's UserWarning when it had elements). Writing
bumps `out`'s version counter. With grad mode on, `out=` is refused when an input or `out` requires grad. A
factory (`FACTORIES`) takes its dtype and device from `out` unless given.
"""
from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from .. import _capture
from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, bump_version, type_name, version
from ..autograd.grad_mode import MODE

OUT_FUNCTIONS = [
    "abs", "absolute", "acos", "acosh", "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "all",
    "amax", "amin", "aminmax", "angle", "any", "arange", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "argmax", "argmin", "argsort", "asin", "asinh", "atan", "atan2", "atanh", "baddbmm",
    "bernoulli", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "bmm", "bucketize", "cat", "ceil", "chain_matmul", "cholesky", "cholesky_inverse",
    "cholesky_solve", "clamp", "clamp_max", "clamp_min", "clip", "column_stack", "complex", "concat", "concatenate",
    "conj_physical", "copysign", "cos", "cosh", "cross", "cummax", "cummin", "cumprod", "cumsum", "deg2rad", "diag",
    "diff", "digamma", "div", "divide", "dot", "dstack", "empty", "eq", "erf", "erfc", "erfinv", "exp", "exp2",
    "expm1", "eye", "fix", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod", "frac", "frexp",
    "frobenius_norm", "full", "gather", "gcd", "ge", "geqrf", "ger", "greater", "greater_equal", "gt", "hardshrink",
    "heaviside", "histc", "histogram", "hstack", "hypot", "i0", "igamma", "igammac", "index_add", "index_copy",
    "index_reduce", "index_select", "inner", "inverse", "isin", "isneginf", "isposinf", "kron", "kthvalue", "lcm",
    "ldexp", "le", "lerp", "less", "less_equal", "lgamma", "linspace", "log", "log10", "log1p", "log2",
    "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logit", "logspace", "logsumexp", "lt", "lu_solve", "lu_unpack", "masked_select", "matmul",
    "matrix_power", "max", "maximum", "mean", "median", "min", "minimum", "mm", "mode", "msort", "mul",
    "multinomial", "multiply", "mv", "mvlgamma", "nan_to_num", "nanmean", "nanmedian", "nanquantile", "nansum",
    "narrow_copy", "ne", "neg", "negative", "nextafter", "nonzero", "nonzero_static", "norm", "normal", "not_equal",
    "nuclear_norm", "ones", "orgqr", "ormqr", "outer", "polar", "polygamma", "pow", "prod", "qr", "quantile",
    "rad2deg", "rand", "randint", "randn", "randperm", "range", "reciprocal", "remainder", "renorm", "round",
    "row_stack", "rsqrt", "scatter", "scatter_add", "scatter_reduce", "searchsorted", "sgn", "sigmoid", "sign",
    "signbit", "sin", "sinc", "sinh", "slice_scatter", "slogdet", "softmax", "sort", "sqrt", "square", "stack",
    "std", "sub", "subtract", "sum", "svd", "take", "take_along_dim", "tan", "tanh", "tensordot", "threshold",
    "topk", "triangular_solve", "tril", "triu", "true_divide", "trunc", "var", "vdot", "vstack", "where", "xlogy",
    "zeros"
]

# Functions whose `out` must have the result's dtype exactly ("Expected out tensor to have dtype float, but got
# double instead"): found by calling each of them in PyTorch 2.13 with float32 inputs and a float64 (or int32 for
# int64 results) `out`. Every function with several results behaves so too.
EXACT_DTYPE = frozenset([
    "abs", "absolute", "addmm", "amax", "amin", "aminmax", "argmax", "argmin", "argsort", "baddbmm", "bitwise_not",
    "bmm", "ceil", "clamp", "clamp_min", "complex", "conj_physical", "cross", "cummax", "cummin", "diag", "dot",
    "fix", "float_power", "floor", "frac", "frexp", "gather", "hardshrink", "heaviside", "histc", "histogram",
    "index_add", "index_copy", "index_reduce", "index_select", "inner", "inverse", "isin", "isneginf", "isposinf",
    "kthvalue", "log_softmax", "logcumsumexp", "masked_select", "matmul", "median", "mm", "mode", "msort",
    "multinomial", "mv", "nan_to_num", "nanmedian", "narrow_copy", "neg", "negative", "nonzero", "norm",
    "nuclear_norm", "polar", "qr", "renorm", "round", "scatter", "scatter_add", "scatter_reduce", "searchsorted",
    "sgn", "sign", "signbit", "slice_scatter", "slogdet", "softmax", "sort", "svd", "take", "take_along_dim",
    "tensordot", "topk", "triangular_solve", "tril", "triu", "trunc", "where"])

# Factories: without a dtype (device) of their own they make `out`'s.
FACTORIES = frozenset(["arange", "empty", "eye", "full", "linspace", "logspace", "ones", "rand", "randint", "randn",
                       "randperm", "range", "zeros"])

# ember functions left unwrapped: tests/test_registry.py holds `ember.softmax is ember.ops.nn_activation.softmax`
KEEP = frozenset(["softmax", "log_softmax"])

# PyTorch's names of scalar types: "result type Float can't be cast ..." and "... dtype float, but got double"
_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
           "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
_CTYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
          "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
          "bool": "bool"}


def wrap_all(functions: dict) -> None:
    """Give every function of `functions` (name -> function, as ember exports them) named in OUT_FUNCTIONS an
    `out=` keyword, in place."""
    for name in OUT_FUNCTIONS:
        fn = functions.get(name)
        if fn is not None and name not in KEEP:
            functions[name] = with_out(name, fn)


def with_out(name: str, fn):
    """fn with PyTorch's `out=` keyword (fn itself when it has an `out` parameter already)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and "out" in sig.parameters:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not kwargs:  # the common call: one test, ~0.15 µs
            return fn(*args)
        out = kwargs.pop("out", None)
        if out is None:
            return fn(*args, **kwargs)
        return call_into(name, fn, args, kwargs, out)

    if sig is not None:  # the signature shows `out` (keyword-only, before any **kwargs)
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
        params.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
        wrapper.__signature__ = sig.replace(parameters=params)
    return wrapper


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)


def call_into(name: str, fn, args: tuple, kwargs: dict, out):
    """fn(*args, **kwargs) written into `out` (a Tensor, or a sequence of them for several results)."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor (or a tuple of Tensors), not {type_name(o)}")
    if MODE.grad and (any(t._requires_grad for t in _tensors((args, kwargs, outs))) or kwargs.get("requires_grad")):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, but "
                           f"one of the arguments requires grad.")
    if name in FACTORIES and not isinstance(out, (tuple, list)):
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = out.dtype
        elif dt.as_dtype(kwargs["dtype"]) != out.dtype:
            raise RuntimeError(f"{name}(): dtype {_SCALAR[dt.as_dtype(kwargs['dtype']).name]} does not match dtype "
                               f"of out parameter ({_SCALAR[out.dtype.name]})")
        if kwargs.get("device") is None and out.device.type != "cpu":
            kwargs["device"] = out.device
    result = fn(*args, **kwargs)
    several = isinstance(result, tuple)
    if several != isinstance(out, (tuple, list)) or (several and len(result) != len(outs)):
        want = f"a tuple of {len(result)} Tensors" if several else "a Tensor"
        raise TypeError(f"{name}(): argument 'out' must be {want} for this call, got "
                        f"{f'a tuple of {len(outs)}' if isinstance(out, (tuple, list)) else type_name(out)}")
    exact = several or name in EXACT_DTYPE
    for o, r in zip(outs, result if several else (result,)):
        _write(name, o, r, exact)
    if not several:
        return out
    return type(result)(*outs) if hasattr(result, "_fields") else outs


def _write(name: str, out: Tensor, r: Tensor, exact: bool) -> None:
    """Write result r into out (cast, or resized when its shape differs), as PyTorch's out= does."""
    _capture.settle(r)
    src, dst = r._data, out._data
    if out.device != r.device:
        raise RuntimeError(f"{name}(): Expected out tensor to have device {r.device}, but got {out.device} instead")
    if src.dtype != dst.dtype:
        if exact:
            raise RuntimeError(f"{name}(): Expected out tensor to have dtype {_CTYPE[r.dtype.name]}, but got "
                               f"{_CTYPE[out.dtype.name]} instead")
        if _category(src.dtype) > _category(dst.dtype):
            raise RuntimeError(f"{name}(): result type {_SCALAR[r.dtype.name]} can't be cast to the desired output "
                               f"type {_SCALAR[out.dtype.name]}")
    if not backend.writable(dst):
        raise RuntimeError(f"{name}(): unsupported operation: more than one element of the written-to tensor refers "
                           f"to a single memory location (an expanded tensor); pass a tensor made with .clone()")
    _capture.writing(out)
    dst = out._data
    if dst.shape != src.shape:
        if dst.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(dst.shape)}, "
                          f"which does not match the required output shape {list(src.shape)}. This behavior is "
                          f"deprecated, and in a future PyTorch release outputs will not be resized unless they have "
                          f"zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                          f"elements with t.resize_(0).", UserWarning, stacklevel=4)
        if out._base is not None:  # new memory: no longer a view of its base (its version counter goes on)
            out._vc, out._base = version(out), None
        out._data = src.astype(dst.dtype, copy=True)
    else:
        backend.array_module(dst).copyto(dst, src, casting="unsafe")
    bump_version(out)


def _category(d: np.dtype) -> int:
    return 0 if d.kind == "b" else 1 if d.kind in "iu" else 2
