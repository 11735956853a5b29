"""Recurrent layers: RNN, LSTM, GRU and their cells (PyTorch's names, parameters, initialisation and shapes).

Every parameter starts ~ U(-1/√hidden_size, 1/√hidden_size). Each layer-direction is one graph node
(`ember.ops.nn_rnn.rnn_layer`) over time-major packed data; a padded input is packed trivially (all
sequences active at every step), so padded and PackedSequence inputs share one code path.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ... import cat, stack
from ..._creation import empty
from ..._tensor import Tensor
from ...backend import to_host
from ...ops import nn_activation as F
from ...ops.nn_rnn import rnn_layer
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU: parameters weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k},
    bias_hh_l{k} (and weight_hr_l{k} for an LSTM with proj_size > 0)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             f"being zeroed, got dropout={dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        for name, v in (("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
            if v <= 0:
                raise ValueError(f"{name} must be greater than zero, got {name}={v}")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"proj_size should be a positive integer or zero to disable projections, got "
                             f"proj_size={proj_size!r}")
        if proj_size >= hidden_size:
            raise ValueError(f"proj_size has to be smaller than hidden_size (got proj_size={proj_size}, "
                             f"hidden_size={hidden_size})")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real_h = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for d in range(dirs):
                in_size = input_size if layer == 0 else real_h * dirs
                shapes = [("weight_ih", (gate, in_size)), ("weight_hh", (gate, real_h))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                suffix = "_reverse" if d == 1 else ""
                names = []
                for base, shape in shapes:
                    name = f"{base}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(shape, dtype=dtype, device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        k = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -k, k)

    def flatten_parameters(self) -> None:
        """A no-op (PyTorch compacts cuDNN weights here)."""

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n) for n in self._flat_weights_names]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------ forward
    def _check_hidden(self, h: Tensor, expected: tuple, what: str) -> None:
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(h.shape)}")

    def forward(self, input, hx=None):
        name = type(self).__name__
        is_lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        real_h = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        if packed:
            data, bsz_t, sorted_idx, unsorted_idx = input
            # batch_sizes drive the Python loop over steps: host ints (PyTorch keeps them on the CPU too)
            bsz = to_host(bsz_t._data).astype(np.int64, copy=False)
            batched = True
            b = int(bsz[0])
            if data.dim() != 2:
                raise ValueError(f"{name}: expected PackedSequence data to be 2D, got {data.dim()}D")
            x = data
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{name}: input must be a Tensor or a PackedSequence, got {type(input).__name__}")
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D tensor instead")
            batched = input.dim() == 3
            sorted_idx = unsorted_idx = None
            if not batched:
                input = input.unsqueeze(1)
            elif self.batch_first:
                input = input.transpose(0, 1)
            t, b = input.shape[0], input.shape[1]
            bsz = np.full(t, b, np.int64)
            x = input.reshape(t * b, input.shape[2])
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.shape[-1]}")
        if x.shape[0] == 0 or b == 0:
            raise RuntimeError(f"{name}: expected a non-empty input, got input of size {list(x.shape)}")
        hs = [real_h, self.hidden_size] if is_lstm else [real_h]
        if hx is None:
            states = [None] * len(hs)
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
                states = list(hx)
            else:
                if not isinstance(hx, Tensor):
                    raise TypeError(f"{name}: hx must be a Tensor, got {type(hx).__name__}")
                states = [hx]
            for i, (s, size) in enumerate(zip(states, hs)):
                if not batched:
                    if s.dim() != 2:
                        raise RuntimeError(f"For unbatched 2-D input, hx{' and cx' if is_lstm else ''} should also be "
                                           f"2-D but got ({s.dim()}-D) tensor{'s' if is_lstm else ''}")
                    s = s.unsqueeze(1)
                elif s.dim() != 3:
                    raise RuntimeError(f"For batched 3-D input, hx{' and cx' if is_lstm else ''} should also be 3-D "
                                       f"but got ({s.dim()}-D) tensor{'s' if is_lstm else ''}")
                what = f"hidden[{i}]" if is_lstm else "hidden"
                self._check_hidden(s, (self.num_layers * dirs, b, size), what)
                if sorted_idx is not None:
                    s = s.index_select(1, sorted_idx)
                states[i] = s
        h_n, c_n = [], []
        layer_in = x
        params = self._all_weights
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                ws = [getattr(self, n) for n in params[k]]
                w_ih, w_hh = ws[0], ws[1]
                b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
                w_hr = ws[-1] if self.proj_size > 0 else None
                h0 = None if states[0] is None else states[0][k]
                c0 = None if not is_lstm or states[1] is None else states[1][k]
                res = rnn_layer(self._op_mode(), layer_in, bsz, d == 1, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
                outs.append(res[0])
                h_n.append(res[1])
                if is_lstm:
                    c_n.append(res[2])
            layer_in = outs[0] if dirs == 1 else cat(outs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        out = layer_in
        hn = stack(h_n, 0)
        cn = stack(c_n, 0) if is_lstm else None
        if unsorted_idx is not None:
            hn = hn.index_select(1, unsorted_idx)
            cn = cn.index_select(1, unsorted_idx) if is_lstm else None
        if packed:
            output = PackedSequence(out, bsz_t, sorted_idx, unsorted_idx)
        else:
            output = out.reshape(len(bsz), b, out.shape[-1])
            if not batched:
                output = output.squeeze(1)
                hn = hn.squeeze(1)
                cn = cn.squeeze(1) if is_lstm else None
            elif self.batch_first:
                output = output.transpose(0, 1)
        return (output, (hn, cn)) if is_lstm else (output, hn)

    def _op_mode(self) -> str:
        return self.mode


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh) (or relu). Returns (output, h_n)."""

    def __init__(self, *args, **kwargs) -> None:
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:  # PyTorch's positional order: input_size, hidden_size, num_layers, nonlinearity, ...
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """LSTM with PyTorch's gates (i, f, g, o) and optional projection h_t = (o ⊙ tanh c_t) W_hrᵀ.
    Returns (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """GRU with PyTorch's gates (r, z, n): n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)),
    h' = (1 − z) ⊙ n + z ⊙ h. Returns (output, h_n)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("GRU", *args, **kwargs)


# ---------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """One step: parameters weight_ih (gates·H, I), weight_hh (gates·H, H), bias_ih, bias_hh."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, dtype=dtype, device=device))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        k = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -k, k)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _step(self, mode: str, input: Tensor, hx: tuple) -> tuple:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        b = input.shape[0]
        states = []
        for i, s in enumerate(hx):
            if s is not None:
                if s.dim() != (2 if batched else 1):
                    raise RuntimeError(f"{name}: Expected hidden to be {2 if batched else 1}D for "
                                       f"{2 if batched else 1}D input, got {s.dim()}D instead")
                if not batched:
                    s = s.unsqueeze(0)
                if s.shape[0] != b:
                    raise RuntimeError(f"Input batch size {b} doesn't match hidden{i} batch size {s.shape[0]}")
                if s.shape[1] != self.hidden_size:
                    raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, expected "
                                       f"{self.hidden_size}")
            states.append(s)
        c0 = states[1] if mode == "LSTM" else None
        res = rnn_layer(mode, input, np.array([b], np.int64), False, states[0], c0, self.weight_ih, self.weight_hh,
                        self.bias_ih, self.bias_hh)
        out = (res[1], res[2]) if mode == "LSTM" else (res[1],)
        if not batched:
            out = tuple(o.squeeze(0) for o in out)
        return out


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh) (or relu); input (B, I) or (I,), hx zeros when omitted."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input, (hx,))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c'); hx = (h, c), zeros when omitted."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple:
        if hx is None:
            hx = (None, None)
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"LSTMCell: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        return self._step("LSTM", input, tuple(hx))


class GRUCell(RNNCellBase):
    """One GRU step: returns h'; hx zeros when omitted."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("GRU", input, (hx,))[0]
