"""`bench --only ops` cases for the spatial ops beyond 2-D (ember/ops/nn_spatial.py, nn_interpolate.py): 3-D
pooling and convolution, interpolate and grid_sample, each against the same work written in NumPy."""
import numpy as np

from benchmarks.ops import Case


def _vol(rng):
    return {"x": rng.standard_normal((8, 16, 16, 32, 32)).astype(np.float32)}


def _conv3(rng):
    return {"x": rng.standard_normal((4, 16, 16, 32, 32)).astype(np.float32),
            "w": (rng.standard_normal((32, 16, 3, 3, 3)) * 0.1).astype(np.float32)}


def _np_conv3(a):
    """3x3x3 'same' convolution as im2col (a strided window view, copied) and one GEMM per image."""
    x, w = a["x"], a["w"]
    n, c, d, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    s = xp.strides
    cols = np.lib.stride_tricks.as_strided(xp, (n, c, 3, 3, 3, d, h, wd), s[:2] + s[2:] + s[2:])
    cols = np.ascontiguousarray(cols).reshape(n, c * 27, d * h * wd)
    return np.matmul(w.reshape(w.shape[0], -1), cols).reshape(n, w.shape[0], d, h, wd)


def _img(rng):
    return {"x": rng.standard_normal((8, 64, 32, 32)).astype(np.float32)}


def _np_bilinear_x2(a):
    """Separable two-tap blend along H, then W (align_corners=False)."""
    def along(x, axis):
        n = x.shape[axis]
        src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0).astype(np.float32)
        i0 = src.astype(np.int64)
        lam = (src - i0).astype(np.float32)
        shape = [1] * x.ndim
        shape[axis] = -1
        return (np.take(x, i0, axis) * (1 - lam).reshape(shape)
                + np.take(x, np.minimum(i0 + 1, n - 1), axis) * lam.reshape(shape))
    return along(along(a["x"], 2), 3)


def _grid(rng):
    return {"x": rng.standard_normal((8, 16, 64, 64)).astype(np.float32),
            "g": rng.uniform(-1, 1, (8, 64, 64, 2)).astype(np.float32)}


def _np_grid_sample(a):
    """Bilinear sampling with zero padding: four corner gathers weighted by the fractional parts."""
    x, g = a["x"], a["g"]
    n, c, h, w = x.shape
    ix, iy = ((g[..., 0] + 1) * w - 1) / 2, ((g[..., 1] + 1) * h - 1) / 2
    x0, y0 = np.floor(ix), np.floor(iy)
    flat = x.reshape(n, c, -1)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            xx, yy = x0 + dx, y0 + dy
            inside = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
            idx = (np.clip(yy, 0, h - 1) * w + np.clip(xx, 0, w - 1)).astype(np.int64).reshape(n, 1, -1)
            wt = ((ix - x0 if dx else 1 - (ix - x0)) * (iy - y0 if dy else 1 - (iy - y0)) * inside).reshape(n, 1, -1)
            out = out + np.take_along_axis(flat, idx, 2) * wt
    return out


CASES = [
    Case("max_pool3d k2 (8,16,16,32,32)", _vol, lambda E, a: E.nn.functional.max_pool3d(a["x"], 2),
         ("reshape + max", lambda a: a["x"].reshape(8, 16, 8, 2, 16, 2, 16, 2).max((3, 5, 7))),
         lambda T, a: T.nn.functional.max_pool3d(a["x"], 2), grad=True),
    Case("avg_pool3d k3 s2 p1 (8,16,16,32,32)", _vol, lambda E, a: E.nn.functional.avg_pool3d(a["x"], 3, 2, 1),
         None, lambda T, a: T.nn.functional.avg_pool3d(a["x"], 3, 2, 1), grad=True),
    Case("conv3d 16->32 k3 p1 (4,16,16,32,32)", _conv3, lambda E, a: E.nn.functional.conv3d(a["x"], a["w"], padding=1),
         ("im2col + matmul", _np_conv3), lambda T, a: T.nn.functional.conv3d(a["x"], a["w"], padding=1), grad=True),
    Case("interpolate bilinear x2 (8,64,32,32)", _img,
         lambda E, a: E.nn.functional.interpolate(a["x"], scale_factor=2, mode="bilinear"),
         ("take + blend", _np_bilinear_x2),
         lambda T, a: T.nn.functional.interpolate(a["x"], scale_factor=2, mode="bilinear"), grad=True),
    Case("interpolate bicubic antialias 224->112 (8,3,224,224)",
         lambda rng: {"x": rng.standard_normal((8, 3, 224, 224)).astype(np.float32)},
         lambda E, a: E.nn.functional.interpolate(a["x"], size=112, mode="bicubic", antialias=True), None,
         lambda T, a: T.nn.functional.interpolate(a["x"], size=112, mode="bicubic", antialias=True), grad=True),
    Case("grid_sample bilinear (8,16,64,64)", _grid,
         lambda E, a: E.nn.functional.grid_sample(a["x"], a["g"], align_corners=False),
         ("corner gathers", _np_grid_sample),
         lambda T, a: T.nn.functional.grid_sample(a["x"], a["g"], align_corners=False), grad=True),
]
