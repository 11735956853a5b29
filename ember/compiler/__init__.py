"""`ember.compile` and lazy evaluation: capture a program once, optimise it, replay it.

    model = ember.compile(model)          # or @ember.compile on a function, or model.compile()
    step = ember.compile(train_step)      # forward, loss.backward() and optimizer.step() in one program

Capture (`trace`) runs the function once, eagerly, recording every op application at the
`dispatch` seam; guards (`api`) decide when a captured program applies; a program (`program`)
is the trace as one generated flat function. See docs/compile.md.
"""
from __future__ import annotations

from typing import Any, Callable

from .api import (BACKENDS, CACHE_SIZE_LIMIT, MODES, OPTIONS, CompiledFunction, ExplainOutput, explain, is_compiling,
                  reset)
from .module import OptimizedModule
from .trace import GraphBreak

__all__ = ["compile", "reset", "is_compiling", "explain", "GraphBreak", "CompiledFunction", "ExplainOutput",
           "OptimizedModule", "CACHE_SIZE_LIMIT"]


def _check(fullgraph, dynamic, backend, mode, options) -> None:
    if not isinstance(fullgraph, bool):
        raise TypeError(f"compile(): fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic not in (None, True, False):
        raise TypeError(f"compile(): dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: {', '.join(MODES)}")
    if callable(backend):
        raise NotImplementedError("compile(): custom backend callables are not supported by ember; use "
                                  f"backend in {BACKENDS}")
    if backend not in BACKENDS:
        raise ValueError(f"compile(): unknown backend {backend!r}; ember accepts {', '.join(map(repr, BACKENDS))} "
                         f"(all run ember's capture-and-replay compiler)")
    if options is not None:
        if not isinstance(options, dict):
            raise TypeError(f"compile(): options must be a dict, got {type(options).__name__}")
        for k in options:
            if k not in OPTIONS:
                raise RuntimeError(f"compile(): unknown option {k!r}; ember's compiler has "
                                   f"{'the options ' + ', '.join(OPTIONS) if OPTIONS else 'no options'}")


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str = "ember", mode: str | None = None, options: dict | None = None,
            disable: bool = False) -> Any:
    """Compile a function or a Module (PyTorch's torch.compile).

    On a function: a `CompiledFunction` (called like it). On a Module: an `OptimizedModule`
    wrapping it (`._orig_mod`; its parameters, buffers, state_dict keys under `_orig_mod.`,
    train()/eval() and attributes are the original's). Without `model`: a decorator.

    fullgraph: raise `GraphBreak` (naming the reason and the file and line) instead of running a
        function that cannot be captured whole eagerly.
    dynamic: True treats the batch (first) dimension of the inputs as symbolic from the start;
        None does so once a second batch size is seen; False recaptures per shape. A program is
        shared across batch sizes only when no constant of it derives from the batch size.
    mode: every PyTorch mode is accepted. All capture, remove dead code, free by liveness and replay
        one generated function without the Python code (which is what "reduce-overhead" asks of CUDA
        graphs in PyTorch). "max-autotune" (and "max-autotune-no-cudagraphs") also run the optimizers'
        updates as fused numba loops in replays (the `compile` extra; bit-identical results): faster
        steps, for a one-time 0.5-0.9 s and ~120 MiB per process (numba's import and LLVM).
    backend: "ember" (also accepted: PyTorch's "inductor", "eager", "aot_eager": all ember's compiler).
    disable: return `model` itself.
    """
    _check(fullgraph, dynamic, backend, mode, options)
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable)
        return decorate
    if disable:
        return model
    from ..nn.modules.module import Module
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                               options=options)
    if not callable(model):
        raise RuntimeError(f"compile(): expected a callable or a Module, got {type(model).__name__}")
    return CompiledFunction(model, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options, backend=backend)
