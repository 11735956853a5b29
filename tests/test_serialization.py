"""ember.save / ember.load (safetensors on disk, never pickle) and the RNG state in checkpoints."""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import re
import struct
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.serialization as ser
from helpers import requires_torch, torch

try:
    import safetensors.numpy as st_numpy
except ImportError:  # interop tests skip
    st_numpy = None
try:
    import safetensors.torch as st_torch
except ImportError:
    st_torch = None

requires_safetensors = pytest.mark.skipif(st_numpy is None, reason="the safetensors package is not installed")
requires_st_torch = pytest.mark.skipif(st_torch is None or torch is None, reason="safetensors.torch and torch needed")

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


def sample(dtype, shape=(3, 4), seed=0) -> np.ndarray:
    """Values that exercise a dtype: extremes, signs, inf/nan/-0.0 for floats."""
    rng = np.random.default_rng(seed)
    d = np.dtype(dtype)
    n = math.prod(shape)
    if d.kind == "b":
        a = rng.random(n) < 0.5
    elif d.kind in "iu":
        info = np.iinfo(d)
        a = rng.integers(info.min, info.max, n, dtype=d, endpoint=True)
        a[:2] = info.min, info.max
    else:
        a = rng.standard_normal(n).astype(d)
        special = np.array([np.inf, -np.inf, np.nan, -0.0, np.finfo(d).tiny / 2, np.finfo(d).max], d)
        a[:min(n, 6)] = special[:min(n, 6)]
    return a.reshape(shape)


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical values (NaNs included) and equal dtype and shape."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same(a, b, path="obj"):
    """Deep equality that also checks types (tuple vs list, int vs float vs bool, dict vs OrderedDict)."""
    assert type(a) is type(b) or (isinstance(a, ember.Tensor) and type(b) is ember.Tensor), \
        f"{path}: {type(a)} vs {type(b)}"
    if isinstance(a, ember.Tensor):
        assert same_array(a._data, b._data), path
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), path
        for (ka, va), kb in zip(a.items(), b.keys()):
            assert type(ka) is type(kb), f"{path}: key {ka!r}"
            assert_same(va, b[kb], f"{path}[{ka!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    elif isinstance(a, float):
        assert a == b and math.copysign(1, a) == math.copysign(1, b), path
    else:
        assert a == b, path


def roundtrip(obj, tmp_path, **load_kw):
    p = tmp_path / "ckpt.safetensors"
    ember.save(obj, p)
    return ember.load(p, **load_kw)


def header_of(path) -> tuple[int, dict]:
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8:8 + n])


def write_raw(path, header: dict, data: bytes = b"", n: int | None = None) -> None:
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if n is None else n) + text + data)


# ====================================================================== round trips
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip_every_dtype(dtype, tmp_path):
    t = ember.from_numpy(sample(dtype))
    out = roundtrip(t, tmp_path)
    assert type(out) is ember.Tensor and out.dtype is t.dtype
    assert same_array(out._data, t._data)


@pytest.mark.parametrize("make", [
    lambda: ember.tensor(3.5),                                      # 0-d
    lambda: ember.tensor(7, dtype=ember.int16),
    lambda: ember.zeros(0),                                         # 0-size
    lambda: ember.zeros(3, 0, 2, dtype=ember.int64),
    lambda: ember.arange(24.).reshape(2, 3, 4).permute(2, 0, 1),    # non-contiguous
    lambda: ember.arange(20).reshape(4, 5)[::2, 1::2],
    lambda: ember.from_numpy(np.arange(10.)[::-1]),                 # negative stride
    lambda: ember.from_numpy(np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3))),  # stride 0
    lambda: ember.from_numpy(sample(np.bool_, (5, 6))).t(),
], ids=["0d-float", "0d-int16", "empty", "empty-3d", "permuted", "strided", "reversed", "broadcast", "bool-t"])
def test_roundtrip_shapes_and_layouts(make, tmp_path):
    t = make()
    out = roundtrip({"t": t}, tmp_path)["t"]
    assert out.shape == t.shape and out.dtype is t.dtype
    assert same_array(out._data, t._data)


def test_loaded_tensors_are_fresh_plain_tensors(tmp_path):
    p = ember.nn.Parameter(ember.randn(3, 2))
    t = ember.randn(4, requires_grad=True)
    out = roundtrip({"p": p, "t": t}, tmp_path)
    for k, src in (("p", p), ("t", t)):
        o = out[k]
        assert type(o) is ember.Tensor and not o.requires_grad and o.is_leaf
        assert o._data.flags.writeable and o._data.flags.owndata and o._data.flags.c_contiguous
        assert o._data.ctypes.data % o._data.itemsize == 0
        assert same_array(o._data, src._data)
        o._data[...] = 0  # writable, and independent of the source
        assert not np.all(src._data == 0)


def test_nested_structure_with_every_scalar_kind(tmp_path):
    w, b = ember.randn(3, 2), ember.zeros(3)
    obj = {
        "model": OrderedDict([("fc.weight", w), ("fc.bias", b)]),
        "optimizer": {"state": {0: {"step": ember.tensor(3.0), "exp_avg": ember.ones(3, 2)}, 1: {}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0,
                                        "amsgrad": False, "foreach": None, "maximize": False, "params": [0, 1]}]},
        "epoch": 3,
        "rng": ember.get_rng_state(),
        "floats": [math.inf, -math.inf, math.nan, -0.0, 0.0, 5e-324, 1.7976931348623157e308, 0.1, 1.0],
        "ints": [0, -1, 2 ** 63, -(2 ** 80), 10 ** 30],
        "bools": (True, False),
        "strings": ["", "ünïcødé ✓", "with \"quotes\" and \n newline", "{\"tensor\": \"x\"}"],
        "none": None,
        "empty": [[], (), {}, OrderedDict()],
        "keys": {1: "int", -2: "neg", 2.5: "float", False: "bool", None: "none", (1, "a", (2.0, None)): "tuple",
                 "s": "str", math.inf: "inf"},
        "tuple_of_tensors": (w, [b, {"deep": (ember.ones(1, dtype=ember.uint8),)}]),
    }
    out = roundtrip(obj, tmp_path)
    assert_same(obj, out)
    assert type(out["model"]) is OrderedDict and type(out["optimizer"]["state"]) is dict
    assert isinstance(out["optimizer"]["param_groups"][0]["betas"], tuple)


def test_top_level_containers_and_scalars(tmp_path):
    leaf = ember.ones(1)
    deep: list = [leaf]
    for _ in range(100):
        deep = [deep, (leaf,)]
    for obj in ([ember.ones(2), 3], (1, 2.0), 42, "hi", None, 2.5, {}, [], deep):
        assert_same(obj, roundtrip(obj, tmp_path))


def test_numpy_scalars_are_saved_as_python_numbers(tmp_path):
    out = roundtrip({"a": np.float32(0.5), "b": np.int64(7), "c": np.bool_(True), "d": np.float64(1.5),
                     "e": np.str_("s")}, tmp_path)
    assert_same(out, {"a": 0.5, "b": 7, "c": True, "d": 1.5, "e": "s"})


@requires_torch
def test_torch_optimizer_state_dict_roundtrips_exactly(tmp_path):
    """A real PyTorch Adam/SGD state_dict (int keys, betas tuple, None, bools) in ember's checkpoint."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    opts = [torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True),
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)]
    model(torch.randn(5, 4)).sum().backward()
    for opt in opts:
        opt.step()

    def to_ember(x):
        if isinstance(x, torch.Tensor):
            return ember.from_numpy(x.detach().numpy().copy())
        if isinstance(x, dict):
            return type(x)((k, to_ember(v)) for k, v in x.items())
        if isinstance(x, (list, tuple)):
            return type(x)(to_ember(v) for v in x)
        return x

    ck = {"model": to_ember(model.state_dict()), "opts": [to_ember(o.state_dict()) for o in opts], "epoch": 1}
    out = roundtrip(ck, tmp_path)
    assert_same(ck, out)
    assert list(out["opts"][0]["state"].keys()) == [0, 1, 2, 3]
    assert out["opts"][0]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_shared_tensors_are_stored_once_and_load_shared(tmp_path):
    w = ember.randn(4, 3)
    view_same = w.detach()           # a different Tensor over exactly the same memory
    part = w[1:]                     # overlapping but not the same view: stored on its own
    obj = OrderedDict([("enc.weight", w), ("dec.weight", w), ("alias", view_same), ("part", part)])
    p = tmp_path / "tied.safetensors"
    ember.save(obj, p)
    _, header = header_of(p)
    assert sorted(k for k in header if k != "__metadata__") == ["enc.weight", "part"]
    out = ember.load(p)
    assert out["enc.weight"] is out["dec.weight"] is out["alias"]
    assert out["part"] is not out["enc.weight"] and same_array(out["part"]._data, part._data)
    assert list(out) == list(obj)


def test_tensor_names_follow_keys_and_paths(tmp_path):
    p = tmp_path / "c.safetensors"
    ember.save({"model": {"a.b": ember.ones(1)}, "model.a": {"b": ember.ones(2)}, "__metadata__": ember.ones(3),
                "opt": {"state": {0: {"exp_avg": ember.ones(4)}}}}, p)
    _, header = header_of(p)
    names = set(header) - {"__metadata__"}
    assert names == {"model.a.b", "model.a.b~1", "__metadata__~1", "opt.state.0.exp_avg"}
    out = ember.load(p)
    assert out["__metadata__"].shape == (3,) and out["model.a"]["b"].shape == (2,)


def test_file_layout_follows_the_safetensors_spec(tmp_path):
    p = tmp_path / "m.safetensors"
    sd = OrderedDict(a=ember.ones(3, dtype=ember.int8), b=ember.ones(2, 2, dtype=ember.float64),
                     c=ember.ones(5, dtype=ember.float16), d=ember.ones(1, dtype=ember.bool))
    ember.save(sd, p)
    raw = p.read_bytes()
    n, header = header_of(p)
    assert (8 + n) % 8 == 0 and raw[8:9] == b"{"
    meta = header["__metadata__"]
    assert all(isinstance(v, str) for v in meta.values())
    assert json.loads(meta["ember"])["version"] == ser.FORMAT_VERSION
    dtypes = {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}
    assert dtypes == {"a": "I8", "b": "F64", "c": "F16", "d": "BOOL"}
    for k, v in header.items():
        if k != "__metadata__":
            begin, end = v["data_offsets"]
            item = {"I8": 1, "F64": 8, "F16": 2, "BOOL": 1}[v["dtype"]]
            assert begin % item == 0  # every tensor aligned to its item size
            assert raw[8 + n + begin:8 + n + end] == sd[k]._data.astype(sd[k]._data.dtype.newbyteorder("<")).tobytes()
    assert len(raw) == 8 + n + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    sd = {"x": ember.randn(2, 3), "n": 4}
    ember.save(sd, buf)
    buf.seek(0)
    assert_same(sd, ember.load(buf))

    class Stream:  # read() only: no seek, no readinto
        def __init__(self, data):
            self.b = io.BytesIO(data)

        def read(self, n=-1):
            return self.b.read(n)

    assert_same(sd, ember.load(Stream(buf.getvalue())))
    with open(tmp_path / "f.st", "wb") as f:
        ember.save(sd, f)
    with open(tmp_path / "f.st", "rb") as f:
        assert_same(sd, ember.load(f))
    assert_same(sd, ember.load(str(tmp_path / "f.st")))


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="binary mode"):
        ember.save({}, io.StringIO())
    with pytest.raises(TypeError, match="path .* or a binary file"):
        ember.save({}, 42)
    with pytest.raises(TypeError, match="path .* or a binary file"):
        ember.load(3.5)
    with pytest.raises(TypeError, match=r"cannot save a builtins.set at obj\['a'\]\[0\]"):
        ember.save({"a": [{1, 2}]}, tmp_path / "x")
    with pytest.raises(TypeError, match=r"cannot save a builtins.object at obj\['opt'\]\['state'\]\[0\]"):
        ember.save({"opt": {"state": {0: object()}}}, tmp_path / "x")
    with pytest.raises(TypeError, match="dict key of type Tensor"):
        ember.save({ember.ones(1): 1}, tmp_path / "x")
    with pytest.raises(TypeError, match="complex"):
        ember.save([1j], tmp_path / "x")
    cyc: list = [1]
    cyc.append(cyc)
    with pytest.raises(ValueError, match=r"reference cycle at obj\[1\]"):
        ember.save(cyc, tmp_path / "x")
    assert not os.listdir(tmp_path)  # nothing was written for any of these
    with pytest.raises(RuntimeError, match="Parent directory .*nope does not exist"):
        ember.save({}, tmp_path / "nope" / "x.st")


def test_missing_file_is_file_not_found_naming_it(tmp_path):
    p = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError, match=re.escape(str(p))):
        ember.load(p)


def test_save_writes_through_symlink_and_keeps_permissions(tmp_path):
    real = tmp_path / "real.st"
    ember.save({"a": 1}, real)
    os.chmod(real, 0o640)
    link = tmp_path / "link.st"
    link.symlink_to(real)
    ember.save({"a": 2}, link)
    assert link.is_symlink() and ember.load(real) == {"a": 2}
    assert (os.stat(real).st_mode & 0o777) == 0o640


# ====================================================================== map_location / weights_only
def test_map_location_forms(tmp_path):
    sd = {"w": ember.randn(2, 2)}
    p = tmp_path / "m.st"
    ember.save(sd, p)
    for loc in (None, "cpu", ember.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}):
        assert_same(sd, ember.load(p, map_location=loc))
    seen = []
    out = ember.load(p, map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert seen == ["cpu"] and np.allclose(out["w"]._data, 2 * sd["w"]._data)
    assert_same(sd, ember.load(p, map_location=lambda t, loc: None))
    assert_same(sd, ember.load(p, weights_only=False))
    assert_same(sd, ember.load(p, weights_only=True))
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="not available"):
            ember.load(p, map_location="cuda")
    with pytest.raises(TypeError, match="map_location"):
        ember.load(p, map_location=3)
    with pytest.raises(TypeError, match="map_location returned int"):
        ember.load(p, map_location=lambda t, loc: 3)


# ====================================================================== interop
@requires_safetensors
def test_state_dict_reads_with_safetensors_numpy(tmp_path):
    sd = OrderedDict((f"layer{i}.{np.dtype(d).name}", ember.from_numpy(sample(d, (2, 3), seed=i)))
                     for i, d in enumerate(DTYPES))
    sd["noncontig"] = ember.arange(12.).reshape(3, 4).t()
    p = tmp_path / "sd.safetensors"
    ember.save(sd, p)
    got = st_numpy.load_file(str(p))
    assert set(got) == set(sd)
    for k, t in sd.items():
        assert same_array(got[k], t._data), k
    from safetensors import safe_open
    with safe_open(str(p), "np") as f:
        assert "ember" in f.metadata()


@requires_safetensors
def test_plain_safetensors_file_loads_as_dict(tmp_path):
    arrays = {f"t_{np.dtype(d).name}": sample(d, (3, 2), seed=i) for i, d in enumerate(DTYPES)}
    arrays["scalar"] = np.array(2.5, np.float32)
    arrays["empty"] = np.zeros((0, 4), np.float64)
    p = tmp_path / "plain.safetensors"
    st_numpy.save_file(arrays, str(p), metadata={"format": "np", "ember2": "not ours"})
    out = ember.load(p)
    assert type(out) is dict and set(out) == set(arrays)
    for k, a in arrays.items():
        assert type(out[k]) is ember.Tensor and same_array(out[k]._data, a), k
    buf = io.BytesIO(st_numpy.save(arrays))
    assert set(ember.load(buf)) == set(arrays)


def _torch_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).double()


def _ember_mlp(sd, x):
    """The same MLP in ember ops, from a state_dict with PyTorch's key names."""
    h = ember.relu(x @ sd["0.weight"].t() + sd["0.bias"])
    return h @ sd["2.weight"].t() + sd["2.bias"]


@requires_st_torch
def test_torch_weights_load_in_ember_with_identical_outputs(tmp_path):
    model = _torch_mlp()
    p = tmp_path / "torch.safetensors"
    st_torch.save_file(model.state_dict(), str(p))
    sd = ember.load(p)
    assert set(sd) == set(model.state_dict())
    x = np.random.default_rng(0).standard_normal((4, 6))
    want = model(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(_ember_mlp(sd, ember.from_numpy(x))._data, want, rtol=1e-13, atol=1e-15)


@requires_st_torch
def test_ember_weights_load_in_torch_with_identical_outputs(tmp_path):
    rng = np.random.default_rng(1)
    sd = OrderedDict([("0.weight", ember.from_numpy(rng.standard_normal((5, 6)))),
                      ("0.bias", ember.from_numpy(rng.standard_normal(5))),
                      ("2.weight", ember.from_numpy(rng.standard_normal((3, 5)))),
                      ("2.bias", ember.from_numpy(rng.standard_normal(3)))])
    p = tmp_path / "ember.safetensors"
    ember.save(sd, p)
    model = _torch_mlp()
    model.load_state_dict(st_torch.load_file(str(p)))
    x = rng.standard_normal((4, 6))
    np.testing.assert_allclose(model(torch.from_numpy(x)).detach().numpy(), _ember_mlp(sd, ember.from_numpy(x))._data,
                               rtol=1e-13, atol=1e-15)  # same weights; only BLAS summation order differs
    # every dtype comes back the same through torch
    sd2 = {np.dtype(d).name: ember.from_numpy(sample(d, (2, 2), seed=3)) for d in DTYPES}
    ember.save(sd2, p)
    got = st_torch.load_file(str(p))
    for k, t in sd2.items():
        assert same_array(got[k].numpy(), t._data), k


@requires_st_torch
def test_bfloat16_round_trips_with_torch(tmp_path):
    src = torch.tensor([1.5, -2.0, 3.140625, float("inf")], dtype=torch.bfloat16)
    p = tmp_path / "bf16.safetensors"
    st_torch.save_file({"w": src, "b": torch.ones(2)}, str(p))
    out = ember.load(p)
    assert out["w"].dtype is ember.bfloat16 and out["w"]._data.flags.owndata
    np.testing.assert_array_equal(out["w"].float()._data, src.float().numpy())
    ember.save(out, p)  # and back: torch reads ember's BF16
    back = st_torch.load_file(str(p))
    assert back["w"].dtype == torch.bfloat16 and torch.equal(back["w"], src)


def test_bfloat16_reads_as_float32_without_ml_dtypes(tmp_path, monkeypatch):
    """Without ml_dtypes ember has no bfloat16 array type: BF16 data load as float32 (exactly), with a warning."""
    import ember.serialization as S
    p = tmp_path / "bf16.safetensors"
    ember.save({"w": ember.tensor([1.5, -2.0, 3.140625]).bfloat16()}, p)
    monkeypatch.delitem(S._DTYPES, "BF16")
    with pytest.warns(UserWarning, match="w are bfloat16"):
        out = ember.load(p)
    assert out["w"].dtype is ember.float32
    np.testing.assert_array_equal(out["w"]._data, [1.5, -2.0, 3.140625])


# ====================================================================== corrupt and foreign files
def expect_bad(path, match: str = "") -> ValueError:
    with pytest.raises(ValueError, match=re.escape(str(path))) as e:
        ember.load(path)
    assert re.search(match, str(e.value)), str(e.value)
    return e.value


@pytest.fixture
def good_file(tmp_path):
    obj = {"model": OrderedDict(w=ember.randn(3, 4), b=ember.arange(5), m=ember.tensor([True, False])),
           "epoch": 2, "betas": (0.9, 0.99)}
    p = tmp_path / "good.safetensors"
    ember.save(obj, p)
    return p, p.read_bytes()


def test_truncated_at_every_position(good_file, tmp_path):
    p, raw = good_file
    bad = tmp_path / "trunc.safetensors"
    for cut in range(len(raw)):
        bad.write_bytes(raw[:cut])
        expect_bad(bad)
    # and with bytes appended
    bad.write_bytes(raw + b"\0")
    expect_bad(bad, "trailing bytes")


def test_flipped_header_bytes(good_file, tmp_path):
    p, raw = good_file
    n = struct.unpack("<Q", raw[:8])[0]
    bad = tmp_path / "flip.safetensors"
    for i in range(8 + n):  # the high bit: the length is wrong, or the header is no longer UTF-8
        b = bytearray(raw)
        b[i] ^= 0x80
        bad.write_bytes(bytes(b))
        expect_bad(bad)
    rng = np.random.default_rng(0)
    loaded = 0
    for i in rng.integers(0, 8 + n, 300):  # a low bit: a clear error or, where the JSON stays valid, a load
        b = bytearray(raw)
        b[i] ^= 1 << int(rng.integers(0, 7))
        bad.write_bytes(bytes(b))
        try:
            ember.load(bad)
            loaded += 1
        except ValueError as e:
            assert str(bad) in str(e)
    assert loaded < 300


@pytest.mark.parametrize("content,match", [
    (b"", "fewer than the 8"),
    (b"\x01\x02\x03", "fewer than the 8"),
    (struct.pack("<Q", 2 ** 62) + b"{}", "over the .*limit"),
    (struct.pack("<Q", 50) + b"{}", "runs past the end"),
    (struct.pack("<Q", 2) + b"[]", "does not start with"),
    (struct.pack("<Q", 4) + b"{1:}", "not valid JSON"),
    (struct.pack("<Q", 3) + b"{\xff}", "not UTF-8"),
    (b"garbage that is not a checkpoint at all, honestly", ""),
    (bytes(np.random.default_rng(3).integers(0, 256, 1000, dtype=np.uint8)), ""),
    (pickle.dumps({"a": 1}), "pickle"),
    (b"PK\x03\x04" + bytes(100), "zip archive"),
    (b"\x93NUMPY\x01\x00" + bytes(100), "numpy.load"),
], ids=["empty", "short", "huge-len", "len-past-end", "not-object", "bad-json", "not-utf8", "text", "random",
        "pickle", "zip", "npy"])
def test_foreign_files(content, match, tmp_path):
    p = tmp_path / "foreign.bin"
    p.write_bytes(content)
    expect_bad(p, match)


@requires_torch
def test_torch_save_file_is_refused(tmp_path):
    p = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, str(p))
    expect_bad(p, "torch.save")


F32_2x2 = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}


@pytest.mark.parametrize("header,data,match", [
    ({"a": {"dtype": "F32", "shape": [10 ** 6, 10 ** 6], "data_offsets": [0, 4 * 10 ** 12]}}, bytes(16),
     "run past the end"),
    ({"a": {"dtype": "F32", "shape": [10 ** 6, 10 ** 6], "data_offsets": [0, 16]}}, bytes(16), "need 4000000000000"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}, bytes(12), "need 16"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 0]}}, bytes(16), "0 <= begin <= end"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [-16, 0]}}, bytes(16), "0 <= begin <= end"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16, 3]}}, bytes(16), "data_offsets"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0.0, 16]}}, bytes(16), "data_offsets"),
    ({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [4, 20]}}, bytes(20), "belong to no tensor"),
    ({"a": F32_2x2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, bytes(16), "overlaps"),
    ({"a": F32_2x2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [20, 28]}}, bytes(28), "belong to no tensor"),
    ({"a": F32_2x2}, bytes(24), "trailing bytes"),
    ({"a": {"dtype": "F33", "shape": [2, 2], "data_offsets": [0, 16]}}, bytes(16), "unknown dtype 'F33'"),
    ({"a": {"dtype": 5, "shape": [2, 2], "data_offsets": [0, 16]}}, bytes(16), "unknown dtype 5"),
    ({"a": {"dtype": "U32", "shape": [2, 2], "data_offsets": [0, 16]}}, bytes(16), "U32, which ember does not"),
    ({"a": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}}, bytes(16), "non-negative integers"),
    ({"a": {"dtype": "F32", "shape": [2.0, 2], "data_offsets": [0, 16]}}, bytes(16), "non-negative integers"),
    ({"a": {"dtype": "F32", "shape": [True, 4], "data_offsets": [0, 16]}}, bytes(16), "non-negative integers"),
    ({"a": {"dtype": "F32", "shape": "2x2", "data_offsets": [0, 16]}}, bytes(16), "non-negative integers"),
    ({"a": {"dtype": "F32", "shape": [0, 2 ** 70], "data_offsets": [0, 0]}}, b"", "larger than any array"),
    ({"a": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}, bytes(4), "larger than any array"),
    ({"a": {"dtype": "F32", "data_offsets": [0, 16]}}, bytes(16), "missing shape"),
    ({"a": [1, 2]}, bytes(16), "expected an object"),
    ({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x02", "other than 0 and 1"),
    ({"__metadata__": {"k": 1}}, b"", "map from strings to strings"),
    ({"__metadata__": ["x"]}, b"", "map from strings to strings"),
], ids=lambda v: None)
def test_bad_headers(header, data, match, tmp_path):
    p = tmp_path / "bad.safetensors"
    write_raw(p, header, data)
    expect_bad(p, match)


@pytest.mark.parametrize("text,match", [
    ('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
     "duplicate key 'a'"),
    ('{"__metadata__":{"x":"1"},"a":NaN}', "NaN"),
    ('{"a":' * 100000 + "1" + "}" * 100000, "nested too deeply"),
], ids=["duplicate-key", "nan", "deep"])
def test_bad_json_headers(text, match, tmp_path):
    p = tmp_path / "bad.safetensors"
    raw = text.encode()
    p.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(4))
    expect_bad(p, match)


def _with_tree(tree, version=1, tensors=("a",)):
    header = {"__metadata__": {"ember": json.dumps({"version": version, "tree": tree}) if version is not None
                               else tree}}
    for i, name in enumerate(tensors):
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
    return header, bytes(4 * len(tensors))


@pytest.mark.parametrize("header_data,match", [
    (_with_tree({"tensor": "zz"}), "refers to tensor 'zz', which is not in the file"),
    (_with_tree({"dict": [["k", {"tensor": "b"}]]}), "refers to tensor 'b'"),
    (_with_tree({"tensor": "a"}, version=99), "newer ember"),
    (_with_tree({"tensor": "a"}, version=0), "unknown checkpoint format"),
    (_with_tree("{not json", version=None), "not valid JSON"),
    (_with_tree('{"tree": 1}', version=None), "integer 'version'"),
    (_with_tree({"pickle": "x"}), "unexpected node"),
    (_with_tree({"tensor": "a", "extra": 1}), "unexpected node"),
    (_with_tree({"dict": [["k"]]}), r"\[key, value\] pair"),
    (_with_tree({"dict": [[[1], 2]]}), "dict key must be"),
    (_with_tree({"dict": [["k", 1], ["k", 2]]}), "repeated keys"),
    (_with_tree({"float": "1e999"}), "unexpected node"),
    (_with_tree({"tuple": 3}), "unexpected node"),
    (_with_tree('{"version": 1, "tree": ' + "[" * 100000 + "]" * 100000 + "}", version=None), "nested too deeply"),
    (_with_tree('{"version": 1, "tree": ' + '{"tuple": [' * 600 + "]}" * 600 + "}", version=None), "nested too deeply"),
], ids=["missing-tensor", "missing-in-dict", "newer", "version-0", "not-json", "no-version", "unknown-tag",
        "extra-field", "bad-pair", "list-key", "repeated-key", "bad-float", "bad-tuple", "deep-lists", "deep-tuples"])
def test_bad_ember_metadata(header_data, match, tmp_path):
    header, data = header_data
    p = tmp_path / "bad.safetensors"
    write_raw(p, header, data)
    expect_bad(p, match)


def test_huge_claims_are_refused_before_allocation(tmp_path):
    """10^12 elements claimed by a tiny file: refused from the header alone, quickly and without MemoryError."""
    import tracemalloc
    p = tmp_path / "huge.safetensors"
    write_raw(p, {"a": {"dtype": "F64", "shape": [10 ** 12], "data_offsets": [0, 8 * 10 ** 12]}}, bytes(64))
    tracemalloc.start()
    try:
        expect_bad(p, "run past the end")
        assert tracemalloc.get_traced_memory()[1] < 10 ** 6
    finally:
        tracemalloc.stop()


def test_never_a_partial_load(good_file, tmp_path, monkeypatch):
    """A file that shrinks while being read: an error, never a structure with missing tensors."""
    p, raw = good_file
    real = ser._read_into
    calls = []

    def failing(fh, view, bad, what):
        calls.append(what)
        if len(calls) == 4:  # after the header and two tensors
            raise bad(f"the file ended after 0 of the {len(view)} bytes of {what}")
        real(fh, view, bad, what)

    monkeypatch.setattr(ser, "_read_into", failing)
    with pytest.raises(ValueError, match="ended after"):
        ember.load(p)


# ====================================================================== atomic writes
def _files(d):
    return sorted(os.listdir(d))


@pytest.mark.parametrize("where", ["mid-write", "fsync", "replace", "interrupt"])
def test_failed_save_keeps_the_old_file(where, tmp_path, monkeypatch):
    p = tmp_path / "ckpt.safetensors"
    old = {"w": ember.randn(64, 64), "epoch": 1}
    ember.save(old, p)
    before = p.read_bytes()
    if where in ("mid-write", "interrupt"):
        real = ser._write_all
        count = [0]
        exc = RuntimeError("disk full") if where == "mid-write" else KeyboardInterrupt()

        def flaky(f, data):
            count[0] += 1
            if count[0] == 2:  # the header went out; die while writing the first tensor's bytes
                real(f, memoryview(data).cast("B")[:100])
                raise exc
            real(f, data)

        monkeypatch.setattr(ser, "_write_all", flaky)
    elif where == "fsync":
        monkeypatch.setattr(ser.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
    else:
        monkeypatch.setattr(ser.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises((RuntimeError, OSError, KeyboardInterrupt)):
        ember.save({"w": ember.randn(64, 64), "epoch": 2}, p)
    monkeypatch.undo()
    assert p.read_bytes() == before and _files(tmp_path) == ["ckpt.safetensors"]
    assert_same(old, ember.load(p))


def test_save_replaces_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "c.st"
    for epoch in range(3):
        ember.save({"epoch": epoch, "w": ember.ones(epoch + 1)}, p)
        assert _files(tmp_path) == ["c.st"]
        assert ember.load(p)["epoch"] == epoch


# ====================================================================== RNG state
def test_rng_state_is_a_byte_tensor():
    ember.manual_seed(11)
    s = ember.get_rng_state()
    assert type(s) is ember.Tensor and s.dtype is ember.uint8 and s.shape == (64,) and not s.requires_grad
    assert isinstance(ember.Generator().get_state(), ember.Tensor)


def test_rng_state_in_a_checkpoint_resumes_identically(tmp_path):
    ember.manual_seed(1234)
    ember.rand(5)
    ember.randn(3)  # consumes a buffered 32-bit value in some draws: state must hold it all
    ember.randint(0, 10, (7,), dtype=ember.int32)
    p = tmp_path / "resume.st"
    ember.save({"rng": ember.get_rng_state(), "epoch": 1}, p)
    want = [ember.rand(4).tolist(), ember.randn(2, 2).tolist(), ember.randperm(9).tolist()]
    ember.manual_seed(0)
    ember.rand(100)
    ember.set_rng_state(ember.load(p)["rng"])
    assert [ember.rand(4).tolist(), ember.randn(2, 2).tolist(), ember.randperm(9).tolist()] == want
    assert ember.initial_seed() == 1234


def test_generator_state_roundtrip_and_independence():
    g = ember.Generator().manual_seed(-5)
    ember.rand(3, generator=g)
    st = g.get_state()
    a = ember.rand(6, generator=g).tolist()
    other = ember.Generator().manual_seed(99)
    assert other.set_state(st) is other and other.initial_seed() == -5
    assert ember.rand(6, generator=other).tolist() == a
    st._data[...] = 0  # the returned state is a copy: changing it changes no generator
    assert ember.rand(2, generator=g).tolist() == ember.rand(2, generator=other).tolist()


def test_rng_state_legacy_dict_form():
    ember.manual_seed(3)
    d = ember.default_generator.np.bit_generator.state
    a = ember.rand(3).tolist()
    ember.set_rng_state(d)
    assert ember.rand(3).tolist() == a
    with pytest.raises(ValueError, match="invalid NumPy bit-generator state"):
        ember.set_rng_state({"bit_generator": "PCG64"})


def test_bad_rng_states():
    s = ember.get_rng_state()
    with pytest.raises(TypeError, match="ByteTensor"):
        ember.set_rng_state([1, 2, 3])
    with pytest.raises(TypeError, match="uint8"):
        ember.set_rng_state(s.to(ember.float32))
    with pytest.raises(RuntimeError, match="64 bytes.*got 10"):
        ember.set_rng_state(s[:10])
    junk = s.clone()
    junk._data[0] ^= 1
    with pytest.raises(RuntimeError, match="not an ember RNG state"):
        ember.set_rng_state(junk)
    even = s.clone()
    even._data[24] &= 0xFE  # PCG64's increment is always odd
    with pytest.raises(RuntimeError, match="not an ember RNG state"):
        ember.Generator().set_state(even)
