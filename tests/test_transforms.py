"""ember.datasets.transforms: values against straightforward references (slicing, np.pad, np.rot90,
torch's grid_sample), seeded reproducibility, dtypes, reprs and bad inputs."""
import math

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember
from ember._creation import default_generator
from ember.datasets import transforms as T


def img_u8(*shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def chw(*shape, seed=0, dtype=np.float32):
    return ember.from_numpy(np.random.default_rng(seed).random(shape).astype(dtype))


# ---------------------------------------------------------------------- ToTensor
def test_to_tensor_uint8_hwc_and_hw():
    a = img_u8(5, 4, 3)
    t = T.ToTensor()(a)
    assert isinstance(t, ember.Tensor) and t.dtype is ember.float32 and tuple(t.shape) == (3, 5, 4)
    np.testing.assert_array_equal(t.numpy(), a.transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    assert not t.requires_grad and not np.shares_memory(t.numpy(), a)
    g = img_u8(6, 7)
    np.testing.assert_array_equal(T.ToTensor()(g).numpy(), g[None].astype(np.float32) / np.float32(255))
    assert T.ToTensor()(np.array([[0, 255]], np.uint8)).numpy().tolist() == [[[0.0, 1.0]]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_to_tensor_float_arrays_are_not_rescaled(dtype):
    a = np.random.default_rng(1).random((4, 5, 2)).astype(dtype) * 7
    t = T.ToTensor()(a)
    assert t.numpy().dtype == dtype
    np.testing.assert_array_equal(t.numpy(), a.transpose(2, 0, 1))
    assert not np.shares_memory(t.numpy(), a)


def test_to_tensor_bad_inputs():
    with pytest.raises(TypeError, match="ToTensor.*ndarray.*list"):
        T.ToTensor()([[1, 2]])
    with pytest.raises(TypeError, match="ToTensor.*Tensor"):
        T.ToTensor()(ember.zeros(1, 2, 2))
    with pytest.raises(TypeError, match="ToTensor.*int32"):
        T.ToTensor()(np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="ToTensor.*4 dimensions"):
        T.ToTensor()(np.zeros((1, 2, 2, 1), np.uint8))


# ---------------------------------------------------------------------- Normalize
def test_normalize_values_and_out_of_place():
    x = chw(3, 4, 5)
    before = x.numpy().copy()
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    y = T.Normalize(mean, std)(x)
    ref = (before - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
    assert y.dtype is ember.float32 and y is not x
    np.testing.assert_array_equal(y.numpy(), ref)
    np.testing.assert_array_equal(x.numpy(), before)


def test_normalize_inplace_batch_and_single_value():
    x = chw(2, 3, 4, 4)
    ref = (x.numpy() - 0.5) / 0.5
    y = T.Normalize([0.5], [0.5], inplace=True)(x)
    assert y is x
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)


def test_normalize_keeps_float64_and_tracks_no_grad():
    x = chw(1, 3, 3, dtype=np.float64).requires_grad_()
    y = T.Normalize((0.5,), (2.0,))(x)
    assert y.dtype is ember.float64 and not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="inplace=True.*requires grad"):
        T.Normalize((0.5,), (2.0,), inplace=True)(x)


@requires_torch
def test_normalize_matches_torch_float32():
    x = chw(3, 6, 6, seed=3)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    t = torch.from_numpy(x.numpy().copy())
    ref = (t - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1)
    np.testing.assert_array_equal(T.Normalize(mean, std)(x).numpy(), ref.numpy())


def test_normalize_bad_inputs():
    with pytest.raises(ValueError, match="std.*zero"):
        T.Normalize((0.0,), (0.0,))(chw(1, 2, 2))
    with pytest.raises(ValueError, match="std.*zero"):  # 1e-50 underflows to 0 in float32
        T.Normalize((0.0, 0.0), (1.0, 1e-50))(chw(2, 2, 2))
    with pytest.raises(ValueError, match="mean has 3 values.*2 channel"):
        T.Normalize((0.1, 0.2, 0.3), (1, 1, 1))(chw(2, 4, 4))
    with pytest.raises(ValueError, match="std has 2 values.*3 channel"):
        T.Normalize((0.1,), (1, 1))(chw(3, 4, 4))
    with pytest.raises(ValueError, match=r"size \(..., C, H, W\).*\(4, 4\)"):
        T.Normalize((0.1,), (1,))(chw(4, 4))
    with pytest.raises(TypeError, match="float tensor.*int64"):
        T.Normalize((0.1,), (1,))(ember.zeros(1, 2, 2, dtype=ember.int64))
    with pytest.raises(TypeError, match="Tensor image.*ndarray.*ToTensor"):
        T.Normalize((0.1,), (1,))(np.zeros((1, 2, 2), np.float32))


# ---------------------------------------------------------------------- RandomCrop
def drawn_offsets(seed, h, w, th, tw):
    """The offsets RandomCrop draws after manual_seed(seed): the top row, then the left column."""
    ember.manual_seed(seed)
    g = default_generator.np
    return int(g.integers(0, h - th + 1)), int(g.integers(0, w - tw + 1))


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_random_crop_is_a_slice_of_the_padded_image(seed):
    x = chw(3, 10, 12, seed=seed)
    i, j = drawn_offsets(seed, 14, 16, 8, 9)
    ember.manual_seed(seed)
    y = T.RandomCrop((8, 9), padding=2)(x)
    padded = np.pad(x.numpy(), ((0, 0), (2, 2), (2, 2)))
    assert y.dtype is ember.float32 and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), padded[:, i:i + 8, j:j + 9])


@pytest.mark.parametrize("shape", [(10, 12), (10, 12, 3)])
def test_random_crop_on_arrays_keeps_layout_and_dtype(shape):
    a = img_u8(*shape)
    i, j = drawn_offsets(5, 12, 14, 6, 6)
    ember.manual_seed(5)
    out = T.RandomCrop(6, padding=1, fill=9)(a)
    widths = ((1, 1), (1, 1)) + (((0, 0),) if len(shape) == 3 else ())
    ref = np.pad(a, widths, constant_values=9)[i:i + 6, j:j + 6]
    assert out.dtype == np.uint8 and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)


def test_random_crop_padding_order_left_top_right_bottom():
    a = np.ones((3, 4), np.uint8)
    out = T.RandomCrop((3 + 2 + 4, 4 + 1 + 3), padding=(1, 2, 3, 4))(a)  # the crop is the whole padded image
    assert out.shape == (9, 8)
    np.testing.assert_array_equal(np.argwhere(out), np.argwhere(np.pad(a, ((2, 4), (1, 3)))))
    out2 = T.RandomCrop((3 + 2 * 2, 4 + 2 * 1), padding=(1, 2))(a)  # (left/right, top/bottom)
    np.testing.assert_array_equal(out2, np.pad(a, ((2, 2), (1, 1))))


def test_random_crop_per_channel_fill():
    a = np.zeros((2, 2, 3), np.uint8)
    out = T.RandomCrop(4, padding=1, fill=(10, 20, 30))(a)
    np.testing.assert_array_equal(out[0, 0], [10, 20, 30])
    np.testing.assert_array_equal(out[1, 1], [0, 0, 0])


@requires_torch
@pytest.mark.parametrize("ember_mode,torch_mode", [("reflect", "reflect"), ("edge", "replicate")])
def test_random_crop_padding_modes_match_torch_pad(ember_mode, torch_mode):
    x = chw(2, 6, 7, seed=4)
    i, j = drawn_offsets(3, 12, 13, 5, 5)
    ember.manual_seed(3)
    y = T.RandomCrop(5, padding=3, padding_mode=ember_mode)(x)
    ref = torch.nn.functional.pad(torch.from_numpy(x.numpy().copy())[None], (3, 3, 3, 3), mode=torch_mode)[0]
    np.testing.assert_array_equal(y.numpy(), ref.numpy()[:, i:i + 5, j:j + 5])


def test_random_crop_symmetric_mode_repeats_the_edge():
    row = np.array([[1, 2, 3, 4]], np.uint8)
    out = T.RandomCrop((1, 8), padding=(2, 0), padding_mode="symmetric")(row)
    assert out.tolist() == [[2, 1, 1, 2, 3, 4, 4, 3]]  # torchvision's documented example


def test_random_crop_pad_if_needed_pads_both_sides_by_the_shortfall():
    a = img_u8(5, 6)
    i, j = drawn_offsets(2, 5 + 2 * 3, 6 + 2 * 2, 8, 8)
    ember.manual_seed(2)
    out = T.RandomCrop(8, pad_if_needed=True)(a)
    np.testing.assert_array_equal(out, np.pad(a, ((3, 3), (2, 2)))[i:i + 8, j:j + 8])


def test_random_crop_seeded_reproducibility_and_variety():
    x = chw(1, 12, 12)
    t = T.RandomCrop(4)
    ember.manual_seed(11)
    first = [t(x).numpy() for _ in range(5)]
    ember.manual_seed(11)
    second = [t(x).numpy() for _ in range(5)]
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert len({a.tobytes() for a in first}) > 1


def test_random_crop_get_params_and_repr():
    ember.manual_seed(0)
    i, j, h, w = T.RandomCrop.get_params(np.zeros((10, 10)), (4, 5))
    assert (h, w) == (4, 5) and 0 <= i <= 6 and 0 <= j <= 5
    assert T.RandomCrop.get_params(chw(1, 4, 5), (4, 5)) == (0, 0, 4, 5)
    assert repr(T.RandomCrop(32, padding=4)) == "RandomCrop(size=(32, 32), padding=4)"


def test_random_crop_bad_inputs():
    with pytest.raises(ValueError, match=r"crop size \(5, 5\) is larger than the input image size \(4, 4\)"):
        T.RandomCrop(5)(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="3 element tuple"):
        T.RandomCrop(4, padding=(1, 2, 3))
    with pytest.raises(ValueError, match="non-negative ints.*-1"):
        T.RandomCrop(4, padding=-1)
    with pytest.raises(TypeError, match="padding arg"):
        T.RandomCrop(4, padding="1")
    with pytest.raises(ValueError, match="padding mode.*'wrap'"):
        T.RandomCrop(4, padding_mode="wrap")
    with pytest.raises(ValueError, match="size should be.*1, 2, 3"):
        T.RandomCrop((1, 2, 3))
    with pytest.raises(ValueError, match="fill has 2 values.*3 channel"):
        T.RandomCrop(4, padding=1, fill=(1, 2))(np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(TypeError, match="RandomCrop.*Tensor.*NumPy.*list"):
        T.RandomCrop(1)([[1]])
    with pytest.raises(ValueError, match=r"RandomCrop.*\(H, W\) or \(H, W, C\).*\(1, 2, 2, 1\)"):
        T.RandomCrop(1)(np.zeros((1, 2, 2, 1)))


# ---------------------------------------------------------------------- RandomHorizontalFlip
def test_horizontal_flip_follows_the_seeded_draws():
    x = chw(2, 3, 5)
    a = img_u8(3, 5, 3)
    ember.manual_seed(21)
    decisions = [default_generator.np.random() < 0.5 for _ in range(12)]
    assert 0 < sum(decisions) < 12
    ember.manual_seed(21)
    t = T.RandomHorizontalFlip()
    for flip in decisions[:6]:
        y = t(x)
        np.testing.assert_array_equal(y.numpy(), x.numpy()[..., ::-1] if flip else x.numpy())
    for flip in decisions[6:]:
        b = t(a)
        assert b.dtype == np.uint8
        np.testing.assert_array_equal(b, a[:, ::-1] if flip else a)


def test_horizontal_flip_extremes_and_repr():
    x = chw(1, 2, 3).requires_grad_()
    y = T.RandomHorizontalFlip(p=1.0)(x)
    assert not y.requires_grad and y.dtype is ember.float32
    np.testing.assert_array_equal(y.numpy(), x.detach().numpy()[..., ::-1])
    assert T.RandomHorizontalFlip(p=0.0)(x) is x
    assert repr(T.RandomHorizontalFlip()) == "RandomHorizontalFlip(p=0.5)"


# ---------------------------------------------------------------------- RandomRotation
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_rotation_by_zero_is_identity(mode):
    for img in (chw(3, 7, 9), img_u8(7, 9, 3), img_u8(5, 4)):
        out = T.RandomRotation((0, 0), interpolation=mode)(img)
        ref = img.numpy() if isinstance(img, ember.Tensor) else img
        got = out.numpy() if isinstance(out, ember.Tensor) else out
        assert got.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, atol=1e-5 if mode == "bilinear" else 0)


@pytest.mark.parametrize("mode", [T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR])
@pytest.mark.parametrize("angle,k", [(90, 1), (-90, -1), (180, 2)])
def test_rotation_by_right_angles_equals_rot90(mode, angle, k):
    x = chw(2, 6, 6, seed=2)
    y = T.RandomRotation((angle, angle), interpolation=mode)(x)  # positive angles turn counter-clockwise
    np.testing.assert_allclose(y.numpy(), np.rot90(x.numpy(), k, axes=(1, 2)), atol=1e-5)
    a = img_u8(5, 5, 3)
    np.testing.assert_array_equal(T.RandomRotation((angle, angle), interpolation=mode)(a), np.rot90(a, k))


def grid_sample_rotation(x: np.ndarray, angle: float, mode: str) -> np.ndarray:
    """Rotate (C, H, W) counter-clockwise about the centre with torch's affine_grid + grid_sample
    (align_corners=False, zero padding): an independent reference for fill=0."""
    c, h, w = x.shape
    r = math.radians(angle)
    theta = torch.tensor([[math.cos(r), -math.sin(r) * h / w, 0.0], [math.sin(r) * w / h, math.cos(r), 0.0]],
                         dtype=torch.float64)[None]
    grid = torch.nn.functional.affine_grid(theta, (1, c, h, w), align_corners=False)
    out = torch.nn.functional.grid_sample(torch.from_numpy(x.astype(np.float64))[None], grid, mode=mode,
                                          padding_mode="zeros", align_corners=False)
    return out[0].numpy()


@requires_torch
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("shape", [(2, 16, 16), (1, 12, 20)])
def test_rotation_matches_torch_grid_sample(mode, shape):
    x = chw(*shape, seed=5)
    ember.manual_seed(8)
    angle = float(default_generator.np.uniform(-15, 15))
    ember.manual_seed(8)
    y = T.RandomRotation(15, interpolation=mode)(x)
    np.testing.assert_allclose(y.numpy(), grid_sample_rotation(x.numpy(), angle, mode), atol=1e-5)


def test_rotation_fill_per_channel_and_uint8_bilinear():
    a = np.full((9, 9, 3), 100, np.uint8)
    out = T.RandomRotation((45, 45), fill=(1, 2, 3))(a)
    np.testing.assert_array_equal(out[0, 0], [1, 2, 3])  # a corner leaves the rotated square
    np.testing.assert_array_equal(out[4, 4], [100, 100, 100])
    b = T.RandomRotation((30, 30), interpolation="bilinear", fill=255)(img_u8(8, 8))
    assert b.dtype == np.uint8


def test_rotation_seeded_reproducibility_and_no_grad():
    x = chw(1, 10, 10).requires_grad_()
    t = T.RandomRotation(10)
    ember.manual_seed(3)
    a = [t(x) for _ in range(3)]
    ember.manual_seed(3)
    b = [t(x) for _ in range(3)]
    assert all(np.array_equal(u.numpy(), v.numpy()) for u, v in zip(a, b))
    assert not a[0].requires_grad and a[0].dtype is ember.float32
    ember.manual_seed(3)
    assert T.RandomRotation.get_params([-10.0, 10.0]) == pytest.approx(float(np.random.Generator(np.random.PCG64(3)).uniform(-10, 10)))


def test_rotation_center_is_the_pivot():
    a = np.zeros((7, 7), np.float32)
    a[1, 1] = 1.0
    # about the centre of pixel (1, 1) that pixel stays put; about the image centre it moves
    assert T.RandomRotation((90, 90), center=(1.5, 1.5))(a)[1, 1] == 1.0
    assert T.RandomRotation((90, 90))(a)[1, 1] == 0.0


def test_rotation_repr_and_bad_inputs():
    assert repr(T.RandomRotation(10)) == "RandomRotation(degrees=[-10.0, 10.0], interpolation=nearest, expand=False, fill=0)"
    assert repr(T.RandomRotation((0, 5), "bilinear", center=(1, 2), fill=3)) == \
        "RandomRotation(degrees=[0.0, 5.0], interpolation=bilinear, expand=False, center=(1, 2), fill=3)"
    with pytest.raises(ValueError, match="single number, it must be positive.*-3"):
        T.RandomRotation(-3)
    with pytest.raises(ValueError, match="sequence of length 2.*1, 2, 3"):
        T.RandomRotation((1, 2, 3))
    with pytest.raises(ValueError, match="interpolation 'bicubic' is not supported.*'nearest', 'bilinear'"):
        T.RandomRotation(5, interpolation="bicubic")
    with pytest.raises(NotImplementedError, match="expand=True"):
        T.RandomRotation(5, expand=True)
    with pytest.raises(ValueError, match="center.*length 2"):
        T.RandomRotation(5, center=(1,))
    with pytest.raises(ValueError, match="fill has 2 values.*3 channel"):
        T.RandomRotation(5, fill=(1, 2))(img_u8(4, 4, 3))


# ---------------------------------------------------------------------- Lambda, Compose
def test_lambda_and_compose():
    pipeline = T.Compose([T.RandomCrop(6, padding=1), T.ToTensor(), T.Normalize((0.5,), (0.5,)),
                          T.Lambda(lambda t: t * 2)])
    ember.manual_seed(0)
    out = pipeline(img_u8(8, 8))
    assert tuple(out.shape) == (1, 6, 6) and out.dtype is ember.float32
    assert float(out.numpy().min()) >= -2 and float(out.numpy().max()) <= 2
    assert repr(pipeline) == ("Compose(\n    RandomCrop(size=(6, 6), padding=1)\n    ToTensor()\n"
                              "    Normalize(mean=(0.5,), std=(0.5,))\n    Lambda()\n)")
    with pytest.raises(TypeError, match="lambd should be callable.*'int'"):
        T.Lambda(3)
