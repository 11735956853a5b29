"""`ember.utils.tensorboard`: TensorBoard logs, as `torch.utils.tensorboard`.

`SummaryWriter` writes TensorBoard event files: scalars, histograms, images, text, hyper-parameters,
the graph of a model and embeddings, to be read by `tensorboard --logdir runs`. The files themselves
(the record format, the protocol buffers, the queue that writes them in the background) are
tensorboardX's, an optional dependency: `pip install 'ember[tensorboard]'` (or `pip install tensorboardX`).

Values may be ember Tensors (on any device, with or without grad: they are read, never recorded),
NumPy arrays or Python numbers, wherever PyTorch takes a torch.Tensor. Images are encoded as PNG here
(zlib, no Pillow needed); `add_figure` needs matplotlib.

    from ember.utils.tensorboard import SummaryWriter
    with SummaryWriter("runs/exp1") as w:
        for step in range(100):
            w.add_scalar("loss", loss, step)
"""
from __future__ import annotations

import functools
import itertools
import math
import os
import queue
import socket
import struct
import threading
import time
import weakref
import zlib
from datetime import datetime
from typing import Any, Mapping, Sequence

import numpy as np

try:
    from google.protobuf import struct_pb2
    from tensorboardX.embedding import append_pbtxt, make_mat, make_tsv
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboardX.proto.attr_value_pb2 import AttrValue
    from tensorboardX.proto.event_pb2 import Event, SessionLog
    from tensorboardX.proto.graph_pb2 import GraphDef
    from tensorboardX.proto.node_def_pb2 import NodeDef
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo
    from tensorboardX.proto.plugin_text_pb2 import TextPluginData
    from tensorboardX.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboardX.proto.versions_pb2 import VersionDef
    from tensorboardX.summary import make_histogram
except ImportError as e:
    raise ImportError(f"ember.utils.tensorboard writes TensorBoard files with tensorboardX, which cannot be imported "
                      f"({e}): pip install 'ember[tensorboard]' (or pip install tensorboardX)") from e

from .._tensor import Slot, Tensor

__all__ = ["FileWriter", "SummaryWriter"]


def _numpy(x: Any, what: str) -> np.ndarray:
    """`x` (an ember Tensor, a NumPy array or a number) as a NumPy array on the host."""
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x) and not isinstance(x, (str, bytes)):
        return np.asarray(x)
    raise NotImplementedError(f"{what}: got {type(x).__name__}, but an ember Tensor, a NumPy array or a number is "
                              f"expected")


@functools.lru_cache(maxsize=1)
def _tensorflow_bins() -> list[float]:
    """The bucket limits of `bins="tensorflow"`: ±1e-12·1.1^k up to 1e20, and 0 (TensorFlow's histogram buckets).
    Built by repeated multiplication, as TensorFlow and PyTorch do, so the limits are bit for bit theirs."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-p for p in reversed(pos)] + [0.0] + pos


# ---------------------------------------------------------------------------- images
def _grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """(N, C, H, W) images tiled row by row into one (3, rows·H, ncols·W) image (unused cells stay 0);
    grayscale is repeated into RGB."""
    if images.shape[1] == 1:
        images = np.repeat(images, 3, axis=1)
    if images.shape[1] != 3:
        raise AssertionError(f"add_images(): a batch of images needs 1 or 3 channels, got shape {images.shape}")
    n, c, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    padded = np.zeros((nrows * ncols, c, h, w), images.dtype)
    padded[:n] = images
    return padded.reshape(nrows, ncols, c, h, w).transpose(2, 0, 3, 1, 4).reshape(c, nrows * h, ncols * w)


def _to_hwc(img: np.ndarray, dataformats: str) -> np.ndarray:
    """`img` laid out as `dataformats` (NCHW, NHWC, CHW, HWC, HW, WH, ...) as one (H, W, C) image with 3 or 4
    channels: a batch is tiled into a grid, grayscale repeated into RGB."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW") or not {"H", "W"} <= set(fmt):
        raise AssertionError(f"dataformats must name each of H and W once and may add C and N, got {dataformats!r}")
    if img.ndim != len(fmt):
        raise AssertionError(f"the image has {img.ndim} dimensions (shape {img.shape}) but dataformats "
                             f"{dataformats!r} names {len(fmt)}")
    if len(fmt) == 4:
        return _grid(img.transpose([fmt.index(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = img.transpose([fmt.index(c) for c in "HWC"])
        return np.repeat(hwc, 3, axis=2) if hwc.shape[2] == 1 else hwc
    return np.repeat(img.transpose([fmt.index(c) for c in "HW"])[:, :, None], 3, axis=2)


def _png(img: np.ndarray) -> bytes:
    """PNG file bytes of an (H, W, C) uint8 image, C = 3 (RGB) or 4 (RGBA): 8 bits per sample, each row
    with filter 0 (none), deflated by zlib (the PNG specification, section 'Chunk layout')."""
    h, w, c = img.shape
    if c not in (3, 4):
        raise AssertionError(f"an image needs 1, 3 or 4 channels, got {c} (shape {img.shape})")
    rows = np.concatenate([np.zeros((h, 1), np.uint8), np.ascontiguousarray(img).reshape(h, w * c)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2 if c == 3 else 6, 0, 0, 0)  # colour type 2: RGB, 6: RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) \
        + chunk(b"IEND", b"")


def _image_summary(tag: str, img_tensor: Any, dataformats: str) -> Summary:
    img = _to_hwc(_numpy(img_tensor, "add_image()"), dataformats)
    # uint8 is taken as 0..255, any other dtype as 0..1 (PyTorch's rule); out-of-range values are clipped
    scale = 1 if img.dtype == np.uint8 else 255
    img = (img.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    h, w, c = img.shape
    return Summary(value=[Summary.Value(tag=tag, image=Summary.Image(height=h, width=w, colorspace=c,
                                                                     encoded_image_string=_png(img)))])


def _figure_to_chw(figure, close: bool) -> np.ndarray:
    try:
        import matplotlib.backends.backend_agg as agg
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(f"add_figure() draws the figure with matplotlib, which cannot be imported ({e}): "
                          f"pip install matplotlib") from e
    canvas = agg.FigureCanvasAgg(figure)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    if close:
        plt.close(figure)
    return rgba[:, :, :3].transpose(2, 0, 1)


# ---------------------------------------------------------------------------- hyper-parameters
_HPARAMS = "hparams"


def _hparams_summary(content: HParamsPluginData, tag: str) -> Summary:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=_HPARAMS,
                                                                  content=content.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def _hparams(hparam_dict: dict, metric_dict: dict, domain_discrete: dict | None) -> tuple[Summary, Summary, Summary]:
    """The three summaries of TensorBoard's hparams plugin: the experiment (hyper-parameter and metric names),
    the session's start (the values) and its end."""
    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError(f"add_hparams(): hparam_dict and metric_dict must be dicts, got "
                        f"{type(hparam_dict).__name__} and {type(metric_dict).__name__}")
    domain_discrete = domain_discrete or {}
    if not isinstance(domain_discrete, dict):
        raise TypeError(f"add_hparams(): hparam_domain_discrete must be a dict, got {type(domain_discrete).__name__}")
    for k, v in domain_discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"add_hparams(): hparam_domain_discrete[{k!r}] must be a list of values of the type of "
                            f"hparam_dict[{k!r}]")
    infos, start = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, Tensor):
            v = float(v.item())
        # int and float before bool, as PyTorch: a bool is logged as the number 0 or 1
        field, kind = (("number_value", "DATA_TYPE_FLOAT64") if isinstance(v, (int, float)) else
                       ("string_value", "DATA_TYPE_STRING") if isinstance(v, str) else
                       (None, None))
        if field is None:
            raise ValueError(f"add_hparams(): hparam_dict[{k!r}] is a {type(v).__name__}; a value must be an int, "
                             f"float, str, bool or ember Tensor")
        setattr(start.hparams[k], field, v)
        domain = (struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in domain_discrete[k]])
                  if k in domain_discrete else None)
        infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=domain))
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (_hparams_summary(HParamsPluginData(experiment=experiment, version=0), "_hparams_/experiment"),
            _hparams_summary(HParamsPluginData(session_start_info=start, version=0), "_hparams_/session_start_info"),
            _hparams_summary(HParamsPluginData(session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS")),
                                               version=0), "_hparams_/session_end_info"))


# ---------------------------------------------------------------------------- the graph
def _shape_attr(shape: tuple) -> AttrValue:
    dims = [TensorShapeProto.Dim(size=n) for n in shape]
    return AttrValue(list=AttrValue.ListValue(shape=[TensorShapeProto(dim=dims)]))


def _flat_tensors(obj) -> list[Tensor]:
    """The tensors of a model's input or output: a Tensor, or a tuple/list/dict of them (one level)."""
    if isinstance(obj, Tensor):
        return [obj]
    items = obj.values() if isinstance(obj, Mapping) else obj if isinstance(obj, (list, tuple)) else ()
    return [t for t in items if isinstance(t, Tensor)]


def _graph_def(model, input_to_model, verbose: bool) -> GraphDef:
    """A GraphDef of one forward of `model` on `input_to_model`, read off ember's autograd graph.

    The forward runs in eval mode with grad recording on and the floating-point inputs made to require grad,
    so every op leaves a node. Forward hooks on every submodule give each op the scope of the innermost module
    that ran it ("Net/Sequential[features]/Conv2d[0]/Conv2d"), the grouping TensorBoard draws as boxes:
    when a module returns, the nodes reachable from its outputs that no inner module claimed, down to the
    nodes that produced its inputs, are its own. Nodes are named by the forward op (`MulBackward` -> `Mul`);
    parameters by their module and name, inputs and outputs as "input/input.N" and "output/output.N"."""
    from .. import enable_grad
    from ..nn import Module

    if not isinstance(model, Module):
        raise TypeError(f"add_graph(): model must be an ember.nn.Module, got {type(model).__name__}")
    inputs = _flat_tensors(() if input_to_model is None else input_to_model)
    if input_to_model is not None and not inputs:
        raise TypeError(f"add_graph(): input_to_model must be a Tensor or a tuple/list of Tensors, got "
                        f"{type(input_to_model).__name__}")
    traced = [x.detach().requires_grad_(True) if x.is_floating_point() else x for x in inputs]

    root = type(model).__name__
    scopes: dict[int, str] = {}  # id(module) -> scope
    for path, m in model.named_modules():
        parent, _, last = path.rpartition(".")
        scopes[id(m)] = root if not path else f"{scopes[id(model.get_submodule(parent))]}/{type(m).__name__}[{last}]"
    owner: dict[int, str] = {}  # id(graph node) -> scope of the module that ran it
    shapes: dict[int, tuple] = {}  # id(graph node) -> shape of its output, where a module returned it
    boundaries: list[set] = []

    def node_of(edge):
        return edge.node if type(edge) is Slot else edge

    def edge(t: Tensor):
        node = t.grad_fn  # settles a deferred (lazy) result first: its edge is only a placeholder until then
        return None if node is None else t._edge

    def pre(module, args):
        boundaries.append({id(node_of(e)) for e in map(edge, _flat_tensors(args)) if e is not None})

    def post(module, args, output):
        stop, scope = boundaries.pop(), scopes[id(module)]
        stack = []
        for t in _flat_tensors(output):
            e = edge(t)
            if e is not None:
                if type(e) is not Slot:
                    shapes.setdefault(id(e), tuple(t.shape))
                stack.append(node_of(e))
        while stack:
            n = stack.pop()
            if isinstance(n, Tensor) or id(n) in owner or id(n) in stop:
                continue
            owner[id(n)] = scope
            stack.extend(node_of(e) for e in n.next if e is not None)

    handles = [h for m in model.modules() for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))]
    was_training = model.training
    try:
        model.eval()
        with enable_grad():
            outputs = _flat_tensors(model(*traced))
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()

    params = {id(p): name for name, p in model.named_parameters()}
    input_ids = {id(t): i for i, t in enumerate(traced)}
    nodes: list[NodeDef] = []
    names: dict[int, str] = {}  # id(graph node or leaf) -> its NodeDef's name
    ops: dict[int, str] = {}
    taken: dict[str, int] = {}

    def unique(name: str) -> str:
        k = taken.get(name, 0)
        taken[name] = k + 1
        return name if k == 0 else f"{name}_{k}"

    def leaf(t: Tensor) -> str:
        if id(t) in input_ids:
            name, op = f"input/input.{input_ids[id(t)]}", "IO Node"
        elif id(t) in params:
            mod, _, attr = params[id(t)].rpartition(".")
            name, op = f"{scopes[id(model.get_submodule(mod))]}/{attr}", "Parameter"
        else:
            name, op = unique(f"{root}/Tensor"), "Tensor"
        nodes.append(NodeDef(name=name, op=op, attr={"_output_shapes": _shape_attr(tuple(t.shape))}))
        return name

    # name every node before writing edges: a depth-first walk from the outputs (graphs can be deep: no recursion)
    order, stack = [], [node_of(edge(t)) for t in outputs if edge(t) is not None]
    while stack:
        n = stack.pop()
        if id(n) in names:
            continue
        if isinstance(n, Tensor):
            names[id(n)] = leaf(n)
            continue
        op = n.name()
        op = ops[id(n)] = op[:-len("Backward")] if op.endswith("Backward") and op != "Backward" else op
        names[id(n)] = unique(f"{owner.get(id(n), root)}/{op}")
        order.append(n)
        stack.extend(node_of(e) for e in n.next if e is not None)

    def source(e) -> str:
        """The NodeDef input naming what edge `e` carries: "name", or "name:k" for output k > 0 of a node."""
        return names[id(e.node)] + (f":{e.nr}" if e.nr else "") if type(e) is Slot else names[id(e)]

    for n in reversed(order):
        attr = {"_output_shapes": _shape_attr(shapes[id(n)])} if id(n) in shapes else {}
        nodes.append(NodeDef(name=names[id(n)], op=ops[id(n)], input=[source(e) for e in n.next if e is not None],
                             attr=attr))
    for k, t in enumerate(outputs):
        e = edge(t)
        if e is None and id(t) not in names:  # the model returned a leaf (an input, a parameter) as it is
            names[id(t)] = leaf(t)
        nodes.append(NodeDef(name=f"output/output.{k}", op="IO Node", input=[names[id(t)] if e is None else source(e)],
                             attr={"_output_shapes": _shape_attr(tuple(t.shape))}))
    if verbose:
        for nd in nodes:
            print(f"{nd.name} = {nd.op}({', '.join(nd.input)})")
    return GraphDef(node=nodes, versions=VersionDef(producer=22))


# ---------------------------------------------------------------------------- event files
_STOP = object()
_file_ids = itertools.count()


def _write_events(events: queue.Queue, writer: EventsWriter, flush_secs: float, errors: list) -> None:
    """The writing thread: events from the queue into the file, flushed at least every `flush_secs` seconds.
    A failure (a full disk) is kept in `errors` for the program's next call to raise."""
    next_flush = time.monotonic() + flush_secs
    while True:
        try:
            event = events.get(timeout=max(0.0, next_flush - time.monotonic()))
        except queue.Empty:
            event = None
        if event is _STOP:
            events.task_done()
            return
        try:
            if event is not None:
                writer.write_event(event)
            if time.monotonic() >= next_flush:
                writer.flush()
                next_flush = time.monotonic() + flush_secs
        except Exception as e:  # noqa: BLE001 - whatever it is, the program hears of it
            errors.append(e)
        finally:
            if event is not None:
                events.task_done()


def _close(events: queue.Queue, thread: threading.Thread, writer: EventsWriter) -> None:
    events.put(_STOP)
    thread.join()
    writer.close()


class FileWriter:
    """The event file of one run directory (PyTorch's `FileWriter`): events are queued (at most `max_queue`;
    adding then waits) and a background thread writes them with tensorboardX's `EventsWriter`, flushing the
    file at least every `flush_secs` seconds. `flush()` returns once everything added is on disk. The file is
    named as TensorBoard names its own, events.out.tfevents.<time>.<host>.<pid>.<n><filename_suffix>, so two
    writers of one directory never share a file."""

    def __init__(self, log_dir: str, max_queue: int = 10, flush_secs: float = 120, filename_suffix: str = "") -> None:
        self.log_dir = os.fspath(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self._writer = EventsWriter(os.path.join(self.log_dir, "events"),
                                    f".{os.getpid()}.{next(_file_ids)}{filename_suffix}")
        self._events: queue.Queue = queue.Queue(max_queue)
        self._errors: list = []
        self._thread = threading.Thread(target=_write_events,
                                        args=(self._events, self._writer, flush_secs, self._errors),
                                        name=f"tensorboard writer {self.log_dir}", daemon=True)
        self._thread.start()
        # closed when collected or at exit, so nothing queued is lost if the program never calls close()
        self._finalizer = weakref.finalize(self, _close, self._events, self._thread, self._writer)

    def get_logdir(self) -> str:
        return self.log_dir

    def _check(self) -> None:
        if self._errors:
            raise OSError(f"writing the event file in {self.log_dir} failed: {self._errors.pop(0)}")

    def add_event(self, event: Event, step: int | None = None, walltime: float | None = None) -> None:
        self._check()
        if not self._finalizer.alive:
            raise OSError(f"FileWriter of {self.log_dir} is closed")
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self._events.put(event)

    def add_summary(self, summary: Summary, global_step: int | None = None, walltime: float | None = None) -> None:
        self.add_event(Event(summary=summary), global_step, walltime)

    def flush(self) -> None:
        """Return once every event added so far is written and the file flushed."""
        if self._finalizer.alive:
            self._events.join()
            self._writer.flush()
        self._check()

    def close(self) -> None:
        self._finalizer()
        self._check()


# ---------------------------------------------------------------------------- the writer
class SummaryWriter:
    """Writes TensorBoard event files into `log_dir`, as `torch.utils.tensorboard.SummaryWriter`.

    `log_dir` defaults to runs/<date>_<time>_<hostname><comment>. An event file is created at once; what is
    added goes to a queue of `max_queue` entries written in the background and at least every `flush_secs`
    seconds (`flush()` writes it now). `purge_step`: a run resumed at step T after a crash at T+X tells
    TensorBoard to hide the events of steps >= T already in `log_dir`. `filename_suffix` ends the event
    file's name. Use as a context manager, or call `close()`.
    """

    def __init__(self, log_dir: str | os.PathLike | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs, self.filename_suffix = max_queue, flush_secs, filename_suffix
        self.file_writer: FileWriter | None = None
        self.all_writers: dict[str, FileWriter] | None = None
        self._projector_written = False
        self._get_file_writer()

    def _new_writer(self, log_dir: str) -> FileWriter:
        return FileWriter(log_dir, self.max_queue, self.flush_secs, self.filename_suffix)

    def _get_file_writer(self) -> FileWriter:
        """The writer of `log_dir`, opened again (into a new event file) after `close()`."""
        if self.file_writer is None:
            self.file_writer = self._new_writer(self.log_dir)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                self.file_writer.add_event(Event(step=self.purge_step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=self.purge_step, session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> str:
        """The directory the event files go to."""
        return self.log_dir

    def _add(self, summary: Summary, global_step: int | None, walltime: float | None) -> None:
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # ------------------------------------------------------------------ scalars
    @staticmethod
    def _scalar(tag: str, value: Any, new_style: bool = False, double_precision: bool = False) -> Summary:
        v = _numpy(value, "add_scalar()").squeeze()
        if v.ndim != 0:
            raise AssertionError(f"add_scalar({tag!r}): scalar_value must hold one element, got shape {v.shape}")
        v = float(v)
        if not new_style:
            return Summary(value=[Summary.Value(tag=tag, simple_value=v)])
        proto = TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision else \
            TensorProto(float_val=[v], dtype="DT_FLOAT")
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        return Summary(value=[Summary.Value(tag=tag, tensor=proto, metadata=meta)])

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        """Log one number under `tag` at `global_step` (`walltime`: seconds since the epoch, default now).
        `new_style` stores it as a tensor (float32, or float64 with `double_precision`) instead of the
        classic float field."""
        self._add(self._scalar(tag, scalar_value, new_style, double_precision), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Log several numbers in one chart `main_tag`: each goes, as `main_tag`, into its own run
        log_dir/<main_tag with / as _>_<tag>, which TensorBoard draws as one line per tag."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            run = base + "/" + main_tag.replace("/", "_") + "_" + tag
            if run not in self.all_writers:
                self.all_writers[run] = self._new_writer(run)
            self.all_writers[run].add_summary(self._scalar(main_tag, value), global_step, walltime)

    # ------------------------------------------------------------------ histograms
    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: Any = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        """Log the distribution of `values` (any shape). `bins`: "tensorflow" (TensorBoard's exponential
        buckets), any of `numpy.histogram`'s (a count, edges, "auto", "fd", ...); `max_bins` merges
        neighbouring buckets down to at most that many."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = _tensorflow_bins()
        values = _numpy(values, "add_histogram()").astype(float)
        self._add(Summary(value=[Summary.Value(tag=tag, histo=make_histogram(values, bins, max_bins))]),
                  global_step, walltime)

    def add_histogram_raw(self, tag: str, min: float, max: float, num: int, sum: float, sum_squares: float,
                          bucket_limits: Sequence[float], bucket_counts: Sequence[float],
                          global_step: int | None = None, walltime: float | None = None) -> None:
        """Log a histogram already counted: `bucket_counts[i]` values up to `bucket_limits[i]`."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError(f"add_histogram_raw({tag!r}): bucket_limits and bucket_counts must have the same length, "
                             f"got {len(bucket_limits)} and {len(bucket_counts)}")
        histo = HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                               bucket_limit=list(bucket_limits), bucket=list(bucket_counts))
        self._add(Summary(value=[Summary.Value(tag=tag, histo=histo)]), global_step, walltime)

    # ------------------------------------------------------------------ images
    def add_image(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                  dataformats: str = "CHW") -> None:
        """Log an image: (3, H, W) by default; `dataformats` says the layout of others ("HWC", "HW", "CHW" with 1
        or 4 channels, ...). uint8 values are 0..255, any other dtype 0..1; out-of-range values are clipped."""
        self._add(_image_summary(tag, img_tensor, dataformats), global_step, walltime)

    def add_images(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                   dataformats: str = "NCHW") -> None:
        """Log a batch of images, (N, 3, H, W) by default, tiled into one image 8 columns wide."""
        self._add(_image_summary(tag, img_tensor, dataformats), global_step, walltime)

    def add_figure(self, tag: str, figure: Any, global_step: int | None = None, close: bool = True,
                   walltime: float | None = None) -> None:
        """Log a matplotlib figure (or a list of figures, tiled) as an image; `close` closes it afterwards."""
        if isinstance(figure, list):
            self.add_image(tag, np.stack([_figure_to_chw(f, close) for f in figure]), global_step, walltime,
                           dataformats="NCHW")
        else:
            self.add_image(tag, _figure_to_chw(figure, close), global_step, walltime, dataformats="CHW")

    # ------------------------------------------------------------------ text, hyper-parameters, graph, embeddings
    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """Log a string (Markdown) under `tag` (TensorBoard shows it as <tag>/text_summary)."""
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
            plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
        proto = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
                            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        self._add(Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta, tensor=proto)]),
                  global_step, walltime)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None,
                    run_name: str | None = None, global_step: int | None = None) -> None:
        """Log one run's hyper-parameters (int, float, str, bool or one-element Tensor values) and final metrics,
        for TensorBoard's HPARAMS tab, into the run log_dir/<run_name> (default: the current time). The
        metrics are also logged there as scalars, so their tags should differ from those of `add_scalar`.
        `hparam_domain_discrete`: {name: [every value it can take]}."""
        exp, start, end = _hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        run = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=run) as w:
            for summary in (exp, start, end):
                w.file_writer.add_summary(summary, global_step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def add_graph(self, model, input_to_model: Any = None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """Log the graph of `model` run on `input_to_model` (a Tensor or a tuple of Tensors), for TensorBoard's
        GRAPHS tab. ember records the graph its autograd builds (see `_graph_def`); there is no tracer, so
        `use_strict_trace` has no effect. `verbose` prints the nodes."""
        self._get_file_writer().add_event(Event(graph_def=_graph_def(model, input_to_model, verbose)
                                                .SerializeToString()))

    def add_embedding(self, mat: Any, metadata: Sequence | None = None, label_img: Any = None,
                      global_step: int | None = None, tag: str = "default",
                      metadata_header: Sequence | None = None) -> None:
        """Log an embedding for TensorBoard's projector: `mat` (N, D) rows, optional `metadata` (N labels, or
        N rows of columns named by `metadata_header`) and `label_img` (N, C, H, W) thumbnails."""
        mat = _numpy(mat, "add_embedding()")
        if mat.ndim != 2:
            raise AssertionError(f"add_embedding(): mat must be 2-d (points x features), got shape {mat.shape}")
        step = 0 if global_step is None else global_step
        subdir = f"{str(step).zfill(5)}/{tag.replace('%', '%25').replace('/', '%2f').replace(chr(92), '%5c')}"
        save_path = os.path.join(self._get_file_writer().get_logdir(), subdir)
        if os.path.isfile(save_path):
            raise NotADirectoryError(f"add_embedding(): {save_path} exists and is a file")
        os.makedirs(save_path, exist_ok=True)
        imgs = None if label_img is None else _numpy(label_img, "add_embedding(label_img)")
        if metadata is not None:
            if len(metadata) != mat.shape[0]:
                raise AssertionError(f"add_embedding(): {len(metadata)} metadata rows for {mat.shape[0]} points")
            make_tsv(list(metadata), save_path, metadata_header=metadata_header)
        if imgs is not None:
            if imgs.ndim != 4 or imgs.shape[0] != mat.shape[0]:
                raise AssertionError(f"add_embedding(): label_img must be (N, C, H, W) with N = {mat.shape[0]} "
                                     f"points, got shape {imgs.shape}")
            self._sprite(imgs, save_path)
        make_mat(mat, save_path)
        append_pbtxt(metadata, imgs, self._get_file_writer().get_logdir(), subdir, step, tag)

    @staticmethod
    def _sprite(imgs: np.ndarray, save_path: str) -> None:
        """The projector's sprite.png: the N thumbnails in a square grid of ceil(sqrt(N)) columns."""
        side = math.ceil(math.sqrt(imgs.shape[0]))
        grid = _grid(imgs, ncols=side).transpose(1, 2, 0)
        square = np.zeros((grid.shape[1], grid.shape[1], 3), np.float32)
        square[:grid.shape[0]] = grid
        with open(os.path.join(save_path, "sprite.png"), "wb") as f:
            f.write(_png((square * 255).clip(0, 255).astype(np.uint8)))

    # ------------------------------------------------------------------ lifetime
    def flush(self) -> None:
        """Write everything queued to disk now."""
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()

    def close(self) -> None:
        """Write everything queued and close the event files (a later add opens a new file)."""
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = self.all_writers = None

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
