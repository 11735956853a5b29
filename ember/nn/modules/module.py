"""`Module`: the base of every layer and model.

A Module owns three ordered name → value maps, filled by attribute assignment:
`_parameters` (Parameters), `_buffers` (non-trainable tensors such as running statistics)
and `_modules` (sub-modules). Everything else (traversal, `state_dict`, `to`, hooks) walks
those maps, so a parameter's name is its attribute path: `fc1.weight`, `0.bias`,
`bn.running_mean` — the same names PyTorch gives, which is what lets a PyTorch state_dict
load into the same architecture built with ember.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

import numpy as np

from ... import _dtype as dt
from ... import _memory_format as MF
from ... import _capture
from ..._tensor import RemovableHandle, Tensor, bump_version
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter

__all__ = ["Module"]

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def addindent(s: str, n: int) -> str:
    """Indent every line of `s` but the first by n spaces (nesting in the printed tree)."""
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class of all layers. Subclasses call `super().__init__()` first, assign Parameters,
    buffers (`register_buffer`) and sub-modules as attributes, and define `forward`.
    Calling the module runs its forward pre-hooks, `forward`, then its forward hooks."""

    training: bool

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ takes none "
                            f"(pass them to your own __init__ and call super().__init__() without them)")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()

    # ------------------------------------------------------------------ the call
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if "_compiled_call" in d and d["_compiled_call"] is not None:  # Module.compile() was called
            return d["_compiled_call"](*args, **kwargs)
        if not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]):
            return self.forward(*args, **kwargs)  # the common case: no hooks, one extra frame
        return self._call_with_hooks(args, kwargs)

    def _call(self, *args, **kwargs):
        """The uncompiled call (what Module.compile() compiles): `__call__` without its compiled branch."""
        d = self.__dict__
        if not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]):
            return self.forward(*args, **kwargs)  # the common case: no hooks, one extra frame
        return self._call_with_hooks(args, kwargs)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls in place (PyTorch's Module.compile): `ember.compile`'s arguments."""
        from ...compiler import CompiledFunction, compile as _compile
        fn = _compile(self._call, *args, **kwargs)
        if isinstance(fn, CompiledFunction):
            fn.module = self
            self.__dict__["_compiled_call"] = fn
        else:  # disable=True
            self.__dict__["_compiled_call"] = None

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        if _capture.ACTIVE is not None:
            _capture.refuse(f"the hooks of {type(self).__name__} (Python code at every call)")
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {r!r}")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        bw = self._backward_hooks or self._backward_pre_hooks
        if bw:
            state = _BackwardHookState(self)
            args = state.wrap_inputs(args)
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called:
                    try:
                        hook(self, args, kwargs, None) if hid in self._forward_hooks_with_kwargs else hook(self, args, None)
                    except Exception:
                        pass  # the forward's own exception is the one the user needs
            raise
        for hid, hook in list(self._forward_hooks.items()):
            r = hook(self, args, kwargs, result) if hid in self._forward_hooks_with_kwargs else hook(self, args, result)
            if r is not None:
                result = r
        if bw:
            result = state.wrap_outputs(result)
        return result

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{qualified_type_name(value)}' as parameter '{name}' "
                                f"(ember.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, keep="_modules")
            d["_modules"][name] = value
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{qualified_type_name(value)}' as child module '{name}' "
                                f"(ember.nn.Module or None expected)")
            d["_modules"][name] = None
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{qualified_type_name(value)}' as buffer '{name}' (ember.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name: str, d: dict, keep: str) -> None:
        """Drop `name` from every map but `keep`, where reassignment overwrites it in place (keeping its order)."""
        d.pop(name, None)
        for key in ("_parameters", "_buffers", "_modules"):
            if key != keep:
                d[key].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name: str):
        # only called when normal lookup fails: parameters, buffers and sub-modules live in their maps
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            m = d.get(key)
            if m is not None and name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if name in d[key]:
                del d[key][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(set(keys))

    def _check_name(self, name, kind: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder, e.g. `bias=False`) under `name`."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{qualified_type_name(param)}' object to parameter '{name}' "
                            f"(ember.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             f"explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             f"the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is saved in the state_dict (unless `persistent=False`) and moved
        by `to()`, but is not a parameter (e.g. BatchNorm's running mean)."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{qualified_type_name(tensor)}' object to buffer '{name}' (ember.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a sub-module under `name` (same as attribute assignment, for names that are not identifiers)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{qualified_type_name(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The sub-module at dotted path `target` ('' is self)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(_not_a(mod, item, "an nn.Module", target))
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters or mod._parameters[name] is None:
            raise AttributeError(_not_a(mod, name, "an nn.Parameter", target))
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers or mod._buffers[name] is None:
            raise AttributeError(_not_a(mod, name, "a buffer", target))
        return mod._buffers[name]

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, "Module"]]:
        """(dotted name, module) for this module and every descendant, depth first, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs; a parameter shared by two modules is listed once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ modes and bulk changes
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (Dropout drops, BatchNorm uses batch statistics) on this module and all below."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    @_capture.opaque
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default), or to zeros in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g = p.grad = g.detach()
                g._data[...] = 0

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call `fn` on every sub-module (children first) and then on self, e.g. for custom init."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Replace the array of every parameter and buffer by `fn(tensor)._data`, keeping the
        Parameter objects (optimizers built earlier keep working, as in PyTorch)."""
        for m in self.modules():
            for key, p in m._parameters.items():
                if p is None:
                    continue
                new = fn(p)
                if _capture.ACTIVE is not None:
                    _capture.settle(new)  # (ember.lazy: the parameter takes a computed array)
                if new._data is not p._data:
                    p._data = new._data
                    if p.grad is not None:
                        p.grad = fn(p.grad)
            for key, b in m._buffers.items():
                if b is not None:
                    m._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """`to(dtype)`, `to(device)`, `to(device, dtype)`, `to(tensor)`, `to(memory_format=...)`: convert parameters
        and buffers in place. A dtype applies only to floating-point tensors (integer buffers such as counters are
        kept); a memory format only to 4-d (channels_last) or 5-d (channels_last_3d) ones."""
        from ...backend import device as Device
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        memory_format = kwargs.pop("memory_format", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, dt.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, Device)):
                device = a
            elif a is not None:
                raise TypeError(f"to() received an invalid combination of arguments: {qualified_type_name(a)}")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            if device is not None:
                t = t.to(device)
            if dtype is not None and dt.is_float(t._data.dtype):
                t = t.to(dtype)
            if memory_format is not None and (memory_format is MF.contiguous_format or (t.ndim, memory_format) in (
                    (4, MF.channels_last), (5, MF.channels_last_3d))):  # (as PyTorch: only the tensors of that rank)
                t = t.to(memory_format=memory_format)
            return t
        with no_grad():
            return self._apply(convert)

    def float(self) -> "Module":
        return self.to(dt.float32)

    def double(self) -> "Module":
        return self.to(dt.float64)

    def half(self) -> "Module":
        return self.to(dt.float16)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device=None) -> "Module":
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def type(self, dst_type) -> "Module":
        return self.to(dst_type)

    def share_memory(self) -> "Module":
        return self  # NumPy arrays need no sharing step

    # ------------------------------------------------------------------ state_dict
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict:
        """An ordered map from dotted names to the parameters and persistent buffers (detached;
        they share memory with the module, so copy them to keep a snapshot)."""
        if args:  # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
        for mprefix, m in self.named_modules(prefix=prefix.rstrip(".") if prefix else ""):
            m._save_to_state_dict(destination, mprefix + "." if mprefix else "", keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, assign: bool = False) -> None:
        """Load this module's own persistent entries (no recursion) from `state_dict`: copied into the
        existing tensors, in place, so optimizers holding the parameters see the new values; or, with
        `assign`, the state dict's tensors take their places (a parameter stays a Parameter and keeps
        its requires_grad, as in PyTorch). `load_state_dict` has checked keys and shapes already;
        subclasses may override to accept older layouts."""
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if t is None or key not in state_dict or name in self._non_persistent_buffers_set:
                continue
            value = state_dict[key]
            if assign:
                if name in self._parameters:
                    self._parameters[name] = Parameter(value, requires_grad=t.requires_grad)
                else:
                    self._buffers[name] = value
                continue
            if _capture.ACTIVE is not None:
                _capture.writing(t)
            t._data[...] = value._data if isinstance(value, Tensor) else np.asarray(value)
            bump_version(t)

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from `state_dict` (ember tensors, NumPy arrays or anything
        array-like, e.g. a PyTorch state_dict) into this module, in place, keeping this module's
        dtypes and devices. With `assign=True` the state dict's ember Tensors replace the module's
        instead (their dtype, device and storage are kept; parameters stay Parameters with the
        module's requires_grad; an optimizer made before then still holds the old parameters).

        Returns `(missing_keys, unexpected_keys)`. With `strict=True` (default) any missing or
        unexpected key is an error; a shape mismatch is an error either way. Every check runs
        before anything is loaded, so a failed load leaves the module unchanged."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {qualified_type_name(state_dict)}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        # ---- lazy modules (ember/nn/modules/lazy.py): their uninitialised parameters take the checkpoint's shapes
        for prefix, m in self.named_modules():
            if hasattr(type(m), "_lazy_load_hook"):
                m._lazy_load_hook(state_dict, prefix + "." if prefix else "")
        # ---- end lazy modules
        self._check_state_dict(state_dict, missing, unexpected, errors, assign)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        with no_grad():
            for prefix, m in self.named_modules():
                m._load_from_state_dict(state_dict, prefix + "." if prefix else "", assign)
        return _IncompatibleKeys(missing, unexpected)

    def _check_state_dict(self, state_dict: dict, missing: list, unexpected: list, errors: list,
                          assign: bool = False) -> None:
        own: dict[str, Tensor] = {}
        for prefix, m in self.named_modules(remove_duplicate=False):
            p = prefix + "." if prefix else ""
            for name, t in m._parameters.items():
                if t is not None:
                    own[p + name] = t
            for name, t in m._buffers.items():
                if t is not None and name not in m._non_persistent_buffers_set:
                    own[p + name] = t
        for key, t in own.items():
            if key not in state_dict:
                if not self._tolerates_missing(key):
                    missing.append(key)
                continue
            value = state_dict[key]
            if assign and not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected ember.Tensor or Tensor-like object '
                              f"from checkpoint but received {type(value)} (assign=True keeps the checkpoint's "
                              f"tensors; load it with assign=False to copy other arrays)")
                continue
            try:
                shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
            except Exception:  # noqa: BLE001
                errors.append(f'While copying the parameter named "{key}", expected an array-like value, got '
                              f"{qualified_type_name(value)}")
                continue
            kind = value._data.dtype.kind if isinstance(value, Tensor) else np.asarray(value).dtype.kind
            if kind not in "biuf":
                errors.append(f'While copying the parameter named "{key}", got a value of dtype '
                              f"{getattr(value, 'dtype', '?')}, which is not a number type")
            elif tuple(shape) != tuple(t.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {_fmt_shape(shape)} from "
                              f"checkpoint, the shape in current model is {_fmt_shape(t.shape)}.")
        for key in state_dict:
            if key not in own:
                unexpected.append(key)

    def _tolerates_missing(self, key: str) -> bool:
        """Keys a module accepts as absent (BatchNorm's `num_batches_tracked` in old checkpoints)."""
        mod_path, _, name = key.rpartition(".")
        try:
            mod = self.get_submodule(mod_path)
        except AttributeError:
            return False
        return name in getattr(mod, "_optional_state_keys", ())

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args)` (or `hook(module, args, kwargs)` with `with_kwargs=True`) runs before
        forward; a non-None return replaces the arguments."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend,
                              self._forward_pre_hooks_with_kwargs if with_kwargs else None)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """`hook(module, args, output)` runs after forward; a non-None return replaces the output."""
        h = self._add_hook(self._forward_hooks, hook, prepend,
                           self._forward_hooks_with_kwargs if with_kwargs else None)
        if always_call:
            self._forward_hooks_always_called.add(h.id)
        return h

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_input, grad_output)` runs when the gradients with respect to the module's
        tensor inputs are computed; a non-None return (a tuple) replaces grad_input."""
        return self._add_hook(self._backward_hooks, hook, prepend, None)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_output)` runs when the gradients of the module's outputs are known;
        a non-None return replaces grad_output."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend, None)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        raise NotImplementedError("register_backward_hook is deprecated in PyTorch and not provided by ember; "
                                  "use register_full_backward_hook")

    @staticmethod
    def _add_hook(table: OrderedDict, hook: Callable, prepend: bool, kw_set: set | None) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {qualified_type_name(hook)}")
        h = _HookHandle(table, kw_set)
        table[h.id] = hook
        if prepend:
            table.move_to_end(h.id, last=False)
        if kw_set is not None:
            kw_set.add(h.id)
        return h

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in the printed tree (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for key, m in self._modules.items():
            lines.append(f"({key}): " + addindent(repr(m), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    # ------------------------------------------------------------------ pickling / copying
    def __getstate__(self) -> dict:
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


class _HookHandle(RemovableHandle):
    """A handle whose `remove()` deletes a hook from a Module's ordered hook table."""

    _next_id = itertools.count()

    def __init__(self, table: OrderedDict, kw_set: set | None) -> None:
        self.id = next(_HookHandle._next_id)
        self._table = table
        self._kw = kw_set

    def remove(self) -> None:
        self._table.pop(self.id, None)
        if self._kw is not None:
            self._kw.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


# ---------------------------------------------------------------------- full backward hooks
class _BackwardHookState:
    """Identity ops around a module's tensor inputs and outputs that see their gradients.

    The outputs' identity receives grad_output (and runs backward pre-hooks, which may
    replace it); the inputs' identity receives grad_input, runs the backward hooks with both
    and returns what they return. When no input requires grad, the hooks run from the
    outputs' side with grad_input all None (as in PyTorch)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.grad_output = None
        self.n_in = 0
        self.in_needs_grad = False

    def wrap_inputs(self, args: tuple) -> tuple:
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_in = len(idx)
        tensors = [args[i] for i in idx]
        self.in_needs_grad = any(t.requires_grad for t in tensors)
        if not self.in_needs_grad or not self.module._backward_hooks:
            return args
        wrapped = _HookIdentity.apply(self, "in", *tensors)
        if not isinstance(wrapped, tuple):
            wrapped = (wrapped,)
        args = list(args)
        for i, w in zip(idx, wrapped):
            args[i] = w
        return tuple(args)

    def wrap_outputs(self, result):
        single = isinstance(result, Tensor)
        outs = (result,) if single else result
        if not isinstance(outs, (tuple, list)):
            return result
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return result
        wrapped = _HookIdentity.apply(self, "out", *[outs[i] for i in idx])
        if not isinstance(wrapped, tuple):
            wrapped = (wrapped,)
        new = list(outs)
        for i, w in zip(idx, wrapped):
            new[i] = w
        return new[0] if single else type(outs)(new)

    def on_grad_output(self, grads: tuple) -> tuple:
        m = self.module
        for hook in list(m._backward_pre_hooks.values()):
            r = hook(m, grads)
            if r is not None:
                grads = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        self.grad_output = grads
        if not self.in_needs_grad:
            for hook in list(m._backward_hooks.values()):
                r = hook(m, (None,) * self.n_in, grads)
                if r is not None and any(x is not None for x in (r if isinstance(r, tuple) else (r,))):
                    raise RuntimeError("a backward hook returned gradients for inputs that do not require grad")
        return grads

    def on_grad_input(self, grads: tuple) -> tuple:
        m = self.module
        for hook in list(m._backward_hooks.values()):
            r = hook(m, grads, self.grad_output)
            if r is not None:
                r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                if len(r) != len(grads):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, "
                                       f"but expected {len(grads)}")
                grads = r
        return grads


class _HookIdentity(Function):
    @staticmethod
    def forward(ctx, state, side, *tensors):
        ctx.state, ctx.side = state, side
        ctx.set_materialize_grads(False)
        outs = tuple(t.view_as(t) for t in tensors)
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        grads = ctx.state.on_grad_output(grads) if ctx.side == "out" else ctx.state.on_grad_input(grads)
        return (None, None) + tuple(grads)


def _not_a(mod: Module, name: str, kind: str, target: str) -> str:
    """PyTorch's message for a `get_submodule`/`get_parameter`/`get_buffer` path that does not lead to a `kind`."""
    if hasattr(mod, name):
        found = type(getattr(mod, name)).__name__
        return f"`{name}` is not {kind} ({type(mod).__name__}.{name} is a {found}; looking up '{target}')"
    return f"{type(mod).__name__} has no attribute `{name}` (looking up '{target}')"


def qualified_type_name(v) -> str:
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _fmt_shape(shape) -> str:
    return f"ember.Size({list(shape)})"
