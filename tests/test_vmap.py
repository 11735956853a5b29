"""ember.func.vmap: every op family batched by its rule, against a Python loop over the examples (and, where PyTorch
is installed, against torch.func.vmap); in_dims/out_dims/nesting/chunking; randomness; per-example gradients and
ensembles; PyTorch's errors.

`CASES` holds one function per op family, written against a library namespace `T` (ember, or torch for the
parity test), and its inputs with the mapped dimension in place. `test_vmap_matches_loop` compares
`vmap(f, in_dims)` with `stack([f(example) ...])` and asserts that no op fell back to the per-example loop
(the "performance drop" warning), except for the ops a case names in `fallback`; `test_per_example_grad`
does the same for `vmap(grad(f))`, which runs the rules' batched-weight paths (grad's inputs are batched);
`test_nested_vmap` for vmap(vmap(f)) against a double loop; `test_vmap_matches_torch` against torch.func.vmap.
"""
from __future__ import annotations

import os
import re
import warnings
from typing import Callable, NamedTuple

import numpy as np
import pytest

import ember
from ember.func import functional_call, grad, jacfwd, jacrev, jvp, stack_module_state, vmap
from ember.func import _batching
from ember.func._batching import VmapError
from ember.ops import indexing as _indexing
from helpers import COMPILE, need_torch, torch

B = 3  # the mapped size
_rng = np.random.default_rng(0)


def f(*shape):
    return _rng.standard_normal(shape)


def pos(*shape):
    return _rng.uniform(0.2, 1.0, shape)


def prob(*shape):
    return _rng.uniform(0.05, 0.95, shape)


def ints(high: int, *shape):
    return _rng.integers(0, high, shape).astype(np.int64)


def spd(*shape):
    a = _rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


class Case(NamedTuple):
    id: str
    fn: Callable  # fn(T, *args): T is ember or torch
    args: tuple  # NumPy arrays (the mapped ones with B at their in_dim) and other constants
    in_dims: object = 0
    fallback: tuple = ()  # ops that still run per example (asserted: a new rule must update this)
    grad: object = True  # also check vmap(grad) of the function: True (every float input), False, or positions
    torch: bool = True  # also compare with torch.func.vmap


def C(id_, fn, *args, **kw) -> Case:
    return Case(id_, fn, args, **kw)


def Fn(T):
    return T.nn.functional


x3 = f(B, 3, 5)
CASES = [
    # ---- unary / elementwise math
    C("exp_tanh_sqrt", lambda T, x: T.exp(x) + T.tanh(x) * T.sqrt(T.abs(x)) - T.sigmoid(x).log(), x3),
    C("piecewise", lambda T, x: T.floor(x) + T.ceil(x) + T.round(x) + T.trunc(x) + T.sign(x) + x, x3),
    C("clamp", lambda T, x: T.clamp(x, -0.5, 0.5) + x.clamp(min=0.1), x3),
    C("clamp_tensor", lambda T, x, lo: T.clamp(x, min=lo), x3, f(B, 5)),
    C("pow_rpow", lambda T, x: x ** 2 + 2 ** x + T.pow(x.abs() + 1, 0.5), x3),
    C("special", lambda T, x: T.special.erf(x) + T.lgamma(x.abs() + 1) + T.special.expit(x) + T.sinh(x), x3),
    C("nan_to_num", lambda T, x: T.nan_to_num(x / (x > 0)), x3, grad=False),
    # ---- binary arithmetic with broadcasting and scalars
    C("binary_bcast", lambda T, x, y: x * y + x / (y.abs() + 1) - y, x3, f(B, 5)),
    C("binary_unbatched", lambda T, x, y: (x + y) * 2.5 - 1 / (y.abs() + 1), x3, f(5), in_dims=(0, None)),
    C("binary_in_dim1", lambda T, x, y: x * y, x3, f(5, B), in_dims=(0, 1)),
    C("binary_in_dim_neg", lambda T, x, y: T.maximum(x, y) + T.atan2(x, y), f(3, 5, B), f(B, 5), in_dims=(-1, 0)),
    C("scalar_ops", lambda T, x: 1.5 - x * 3 + x % 0.7 + x // 0.3, x3),
    C("lerp_addcmul", lambda T, x, y: T.lerp(x, y, 0.3) + T.addcmul(x, x, y, value=0.5), x3, f(B, 3, 5)),
    # ---- comparisons / where / logical
    C("where", lambda T, x, y: T.where(x > y, x, y) + T.where(x < 0, x, 0.0), x3, f(B, 3, 5)),
    C("where_unbatched_cond", lambda T, x, c: T.where(c > 0, x, -x), x3, f(3, 5), in_dims=(0, None)),
    C("compare_logical", lambda T, x, y: ((x > y) & (x < 0.5) | (y == 0)).float() + (x != y).float(), x3, f(B, 3, 5),
      grad=False),
    C("masked_fill", lambda T, x: x.masked_fill(x > 0.3, -1.0), x3),
    C("masked_fill_unbatched", lambda T, x, m: x.masked_fill(m, 2.0), x3, f(3, 5) > 0, in_dims=(0, None)),
    C("masked_fill_batched_mask", lambda T, x, m: x.masked_fill(m, 2.0), f(3, 5), f(B, 3, 5) > 0, in_dims=(None, 0)),
    C("all_any", lambda T, x: (x > 0).all(1).float() + (x > -1).any(-1).float() + (x > 0).all().float(), x3,
      grad=False),
    # ---- reductions
    C("sum", lambda T, x: x.sum() + x.sum(1).sum() + x.sum(-1, keepdim=True).sum() + x.sum((0, 1)), x3),
    C("mean_var_std", lambda T, x: x.mean(0) + x.var(1).sum() + x.std() + x.var(-1, keepdim=True, unbiased=False)[0],
      x3),
    C("prod", lambda T, x: x.prod(1).sum() + x.prod() + x.prod(-1, keepdim=True)[0], x3),
    C("amax_amin", lambda T, x: x.amax(1) + x.amin((0, 1)) + x.amax(), x3),
    C("max_min_dim", lambda T, x: (x.max(1), x.min(-1, keepdim=True), x.max(0), x.max() + x.min()), x3),
    C("argmax_argmin", lambda T, x: (x.argmax(1), x.argmin(), x.argmax(0, keepdim=True), x.argmin(-1)), x3,
      grad=False),
    C("logsumexp_norm", lambda T, x: (T.logsumexp(x, 1), x.norm(dim=0), x.norm(), T.linalg.vector_norm(x, 1, -1),
                                      T.linalg.vector_norm(x, float("inf"), 0)), x3),
    C("reduce_0d", lambda T, x: x.sum(0) + x.cumsum(0) + T.softmax(x, 0), f(B)),
    C("softmax", lambda T, x: T.softmax(x, 1) + Fn(T).log_softmax(x, -1) + T.softmax(x, 0), x3),
    C("cumsum_cumprod", lambda T, x: T.cumsum(x, 1) + T.cumprod(x, -1) + T.logcumsumexp(x, 0), x3),
    # ---- shape ops
    C("view_reshape", lambda T, x: x.view(15) + x.reshape(5, 3).reshape(-1) + x.flatten(), x3),
    C("reshape_noncontig", lambda T, x: x.transpose(0, 1).reshape(-1) + x.t().contiguous().view(-1), x3),
    C("flatten_unflatten", lambda T, x: x.unsqueeze(0).flatten(1) + x.unflatten(1, (5, 1)).flatten(0, 1).reshape(1, 15),
      x3),
    C("permute_transpose", lambda T, x: x.permute(1, 0) + x.transpose(-1, -2) + x.T + x.mT + x.movedim(0, -1), x3),
    C("squeeze_unsqueeze", lambda T, x: x.unsqueeze(1).squeeze(1) + x.unsqueeze(-1).squeeze()
      + x[:, None, :].squeeze(1),
      x3),
    C("expand", lambda T, x: x.unsqueeze(0).expand(2, 3, 5) + x[:, :1].expand(-1, 5) + T.broadcast_to(x, (2, 3, 5)),
      x3),
    C("expand_as", lambda T, x, y: x[:1].expand_as(y) + y, x3, f(B, 3, 5)),
    C("repeat_tile", lambda T, x: x.repeat(2, 1).sum(0) + x.repeat(2, 1, 2).sum(0)[:, :5] + T.tile(x, (2,))[:, :5], x3),
    C("flip_roll", lambda T, x: T.flip(x, (0, 1)) + T.fliplr(x) + T.roll(x, 1, 1) + T.roll(x, 2) + T.roll(x, (1, 2),
                                                                                                           (0, 1)), x3),
    C("narrow_select", lambda T, x: x.narrow(1, 1, 3).sum(1) + x.select(1, 2) + x[:, 2], x3),
    C("cat_stack", lambda T, x, y: T.cat([x, y], 0).sum(0) + T.stack([x, y], 1).sum(1) + T.stack([x, y], -1).sum(-1),
      x3, f(B, 3, 5)),
    C("cat_unbatched", lambda T, x, y: T.cat([x, y], -1), x3, f(3, 2), in_dims=(0, None)),
    C("split_chunk_unbind", lambda T, x: (x.split(2, 1), T.split(x, [1, 4], -1), x.chunk(2, 0), x.unbind(1)), x3),
    C("tril_triu_diag", lambda T, x: T.tril(x) + T.triu(x, 1) + T.diag_embed(x[0])[:3, :5]
      + T.diagonal(x.unsqueeze(0).expand(3, 3, 5), 0, 0, 1).T, x3),
    C("pad", lambda T, x: (Fn(T).pad(x, (1, 2)), Fn(T).pad(x, (1, 2, 0, 1), value=3.0)), x3),
    C("unfold_repeat_interleave", lambda T, x: (x.unfold(1, 2, 1), T.repeat_interleave(x, 2, 0), x.clone()), x3),
    C("nansum_frexp_sgn", lambda T, x: (T.nansum(x, 1), T.frexp(x)[0], T.frexp(x)[1], T.sgn(x)), x3, grad=(0,)),
    C("special_functions", lambda T, x: (T.special.chebyshev_polynomial_t(x, 3), T.special.bessel_j0(x),
                                         T.special.spherical_bessel_j0(x)), x3, grad=False),
    # ---- indexing with constant indices
    C("getitem_basic", lambda T, x: x[1] + x[-1, ::2].sum() + x[None, ..., 0].sum() + x[:, 1:4:2].sum(-1).sum(), x3),
    C("getitem_index_arrays", lambda T, x, i, m: (x[i], x[:, i], x[m], x[i, i + 1], x[1:, i[:2]]), x3,
      np.array([0, 2, 2]), np.array([True, False, True]), in_dims=(0, None, None)),
    C("getitem_separated_arrays", lambda T, x, i: x[i, :, i], f(B, 3, 2, 3), np.array([0, 2]), in_dims=(0, None),
      fallback=("GetItem",)),
    C("gather_unbatched_index", lambda T, x, i: T.gather(x, 1, i) + T.take_along_dim(x, i, 1), x3, ints(5, 3, 2),
      in_dims=(0, None)),
    C("index_select_unbatched", lambda T, x, i: (T.index_select(x, 1, i), x.index_select(0, i[1:2])),
      x3, np.array([4, 0, 4]), in_dims=(0, None)),
    C("scatter_unbatched_index", lambda T, x, i, s: (x.scatter(1, i, s), x.scatter_add(0, i, s),
                                                      x.index_add(1, i[0], s[:, :2].repeat(2, 1)[:3])),
      x3, ints(3, 2, 2), f(B, 2, 2), in_dims=(0, None, 0)),
    C("take_index_fill", lambda T, x, i, j: (T.take(x, i), x.index_fill(1, j, -1.0)), x3, ints(15, 2, 2),
      np.array([4, 1]), in_dims=(0, None, None)),
    C("diagonal_scatter_index_put", lambda T, x, s, v, i: (T.diagonal_scatter(x, s, 1),
                                                           T.index_put(x, (i,), v, accumulate=True)),
      f(B, 3, 4), f(B, 3), f(B, 2, 4), np.array([0, 0]), in_dims=(0, 0, 0, None)),
    # ---- matmul family, linear, einsum
    C("matmul", lambda T, x, y: x @ y, x3, f(B, 5, 2)),
    C("matmul_unbatched", lambda T, x, y, z: x @ y + (z @ x)[:3, :2] + T.mm(x, y), x3, f(5, 2), f(3, 3),
      in_dims=(0, None, None)),
    C("matmul_vectors", lambda T, x, v, w: x @ v + T.mv(x, v) + (w @ x) @ v + T.dot(v, v) + T.vdot(v, v), x3, f(B, 5),
      f(3), in_dims=(0, 0, None)),
    C("matmul_vector_unbatched", lambda T, x, v: x @ v + T.mv(x, v), x3, f(5), in_dims=(0, None)),
    C("bmm_baddbmm_addmm", lambda T, a, b, c: T.bmm(a, b) + T.baddbmm(c, a, b, beta=0.5, alpha=2.0)
      + T.addmm(c[0], a[0], b[0], beta=0.0), f(B, 2, 3, 4), f(B, 2, 4, 2), f(B, 2, 3, 2)),
    C("outer_tensordot", lambda T, u, v, x, y: T.outer(u, v) + T.tensordot(x, y, 1), f(B, 3), f(B, 5), x3, f(B, 5, 5)),
    C("einsum", lambda T, x, y: (T.einsum("ij,jk->ik", x, y) + T.einsum("...j,kj->...k", x, y.mT) + T.einsum("ij->", x),
                                 T.einsum("ii->i", y @ y.mT), T.einsum("ij,ij->j", x, x)), x3, f(B, 5, 2)),
    C("einsum_unbatched", lambda T, x, y: T.einsum("ij,jk->ik", x, y), x3, f(5, 2), in_dims=(0, None)),
    C("linear", lambda T, x, w, b: Fn(T).linear(x, w, b) + Fn(T).linear(x, w), x3, f(2, 5), f(2),
      in_dims=(0, None, None)),
    C("linear_1d", lambda T, x, w, b: Fn(T).linear(x, w, b), f(B, 5), f(2, 5), f(2), in_dims=(0, None, None)),
    C("linear_batched_weight", lambda T, x, w, b: Fn(T).linear(x, w, b), x3, f(B, 2, 5), f(B, 2)),
    C("bilinear", lambda T, a, b, w: Fn(T).bilinear(a, b, w), f(B, 3), f(B, 2), f(5, 3, 2), in_dims=(0, 0, None)),
    # ---- linalg
    C("det_inv_solve", lambda T, a, b: T.linalg.det(a) + T.linalg.inv(a).sum(-1).sum(-1) + T.linalg.solve(a, b).sum()
      + T.linalg.slogdet(a)[1], spd(B, 3, 3), f(B, 3, 2)),
    C("solve_unbatched_a", lambda T, a, b: T.linalg.solve(a, b) + T.linalg.solve(a, b[:, 0]).unsqueeze(-1), spd(3, 3),
      f(B, 3, 2), in_dims=(None, 0)),
    C("norms_decomps", lambda T, a: T.linalg.norm(a) + T.linalg.matrix_norm(a) + T.linalg.svdvals(a).sum()
      + T.linalg.eigvalsh(a).sum() + T.linalg.cholesky(a).sum() + T.linalg.qr(a)[1].abs().sum()
      + T.trace(a) + T.linalg.matrix_exp(a * 0.1).sum() + T.linalg.pinv(a).sum(), spd(B, 3, 3)),
    C("cross_triangular", lambda T, a, b, m: T.linalg.cross(a, b).sum()
      + T.linalg.solve_triangular(T.triu(m) + 3 * T.eye(3), a.mT, upper=True).sum(), f(B, 2, 3), f(B, 2, 3),
      f(B, 3, 3)),
    C("eig_lu_cholesky_solve", lambda T, a, b: (T.linalg.eigvals(a), T.linalg.lu_factor_ex(a)[0],
                                                 T.cholesky_solve(b, T.linalg.cholesky(a)),
                                                 T.linalg.matrix_power(a, 0), T.cdist(a, b.mT)),
      spd(B, 3, 3), f(B, 3, 2), grad=(1,), torch=False),  # (ember's eigvals are real, PyTorch's complex)
    # ---- nn: activations, norms, dropout, embedding
    C("activations", lambda T, x: Fn(T).relu(x) + Fn(T).gelu(x) + Fn(T).gelu(x, approximate="tanh") + Fn(T).silu(x)
      + Fn(T).elu(x) + Fn(T).leaky_relu(x, 0.1) + Fn(T).softplus(x) + Fn(T).mish(x) + Fn(T).hardtanh(x)
      + Fn(T).logsigmoid(x) + Fn(T).selu(x) + Fn(T).relu6(x) + Fn(T).hardswish(x) + Fn(T).hardsigmoid(x)
      + Fn(T).softsign(x) + Fn(T).tanhshrink(x) + Fn(T).softshrink(x) + Fn(T).hardshrink(x)
      + Fn(T).threshold(x, 0.1, 2.0)
      + Fn(T).celu(x), x3),
    C("glu_prelu", lambda T, x, w: Fn(T).glu(x, 1).sum(-1) + Fn(T).prelu(x, w).sum(-1), f(B, 3, 4), f(4),
      in_dims=(0, None)),
    C("layer_norm", lambda T, x, w, b: Fn(T).layer_norm(x, (5,), w, b) + Fn(T).layer_norm(x, (3, 5)), x3, f(5), f(5),
      in_dims=(0, None, None)),
    C("layer_norm_batched_weight", lambda T, x, w, b: Fn(T).layer_norm(x, (5,), w, b), x3, f(B, 5), f(B, 5)),
    C("rms_norm", lambda T, x, w: Fn(T).rms_norm(x, (5,), w, 1e-5), x3, f(5), in_dims=(0, None)),
    C("batch_norm_eval", lambda T, x, m, v, w, b: Fn(T).batch_norm(x, m, v, w, b, training=False), f(B, 2, 3, 4), f(3),
      pos(3), f(3), f(3), in_dims=(0, None, None, None, None)),
    C("group_instance_norm", lambda T, x, w, b: Fn(T).group_norm(x, 2, w, b) + Fn(T).instance_norm(x)
      + Fn(T).local_response_norm(x, 2), f(B, 2, 4, 5), f(4), f(4), in_dims=(0, None, None)),
    C("normalize_cosine", lambda T, x, y: Fn(T).normalize(x, dim=-1) + Fn(T).cosine_similarity(x, y).unsqueeze(-1)
      + Fn(T).pairwise_distance(x, y).unsqueeze(-1), x3, f(B, 3, 5)),
    C("dropout_eval", lambda T, x: Fn(T).dropout(x, 0.5, training=False) + Fn(T).dropout(x, 0.3, False), x3),
    C("embedding", lambda T, w, i: Fn(T).embedding(i, w), f(B, 6, 5), ints(6, 3, 2), in_dims=(0, None)),
    C("one_hot_given_classes", lambda T, x, i: x[:, :4] * Fn(T).one_hot(i, 4), x3, ints(4, 3), in_dims=(0, None),
      grad=True),
    # ---- nn: convolution, pooling, resampling
    C("conv1d", lambda T, x, w, b: Fn(T).conv1d(x, w, b, stride=1, padding=1), f(B, 2, 3, 7), f(2, 3, 3), f(2),
      in_dims=(0, None, None)),
    C("conv1d_unbatched_sample", lambda T, x, w: Fn(T).conv1d(x, w), f(B, 3, 7), f(2, 3, 3), in_dims=(0, None)),
    C("conv2d", lambda T, x, w, b: Fn(T).conv2d(x, w, b, padding=1, stride=2)
      + Fn(T).conv2d(x, w, dilation=2, padding=2)[..., :3, :3], f(B, 2, 3, 6, 6), f(2, 3, 3, 3), f(2),
      in_dims=(0, None, None)),
    C("conv2d_groups", lambda T, x, w: Fn(T).conv2d(x, w, groups=2), f(B, 1, 4, 5, 5), f(4, 2, 3, 3),
      in_dims=(0, None)),
    C("conv2d_batched_weight", lambda T, x, w, b: Fn(T).conv2d(x, w, b, padding=1), f(B, 2, 3, 5, 5), f(B, 2, 3, 3, 3),
      f(B, 2)),
    C("conv2d_weight_only", lambda T, x, w: Fn(T).conv2d(x, w, groups=1), f(2, 3, 5, 5), f(B, 2, 3, 3, 3),
      in_dims=(None, 0)),
    C("conv_transpose2d", lambda T, x, w: Fn(T).conv_transpose2d(x, w, stride=2), f(B, 2, 3, 4, 4), f(3, 2, 3, 3),
      in_dims=(0, None)),
    C("conv_transpose1d_batched_weight", lambda T, x, w: Fn(T).conv_transpose1d(x, w), f(B, 2, 3, 4), f(B, 3, 2, 3)),
    C("conv3d", lambda T, x, w: Fn(T).conv3d(x, w), f(B, 1, 3, 4, 4, 4), f(2, 3, 2, 2, 2), in_dims=(0, None)),
    C("conv_transpose3d", lambda T, x, w: Fn(T).conv_transpose3d(x, w), f(B, 1, 2, 2, 2, 2), f(2, 1, 2, 2, 2),
      in_dims=(0, None)),
    C("grid_sample", lambda T, x, th: Fn(T).grid_sample(x, Fn(T).affine_grid(th, (2, 1, 4, 4), align_corners=False),
                                                        align_corners=False), f(B, 2, 1, 4, 4), f(B, 2, 2, 3) * 0.5),
    C("max_pool", lambda T, x: Fn(T).max_pool2d(x, 2) + Fn(T).max_pool2d(x, 3, stride=2, padding=1)
      + Fn(T).max_pool1d(x.flatten(-2), 12)[..., None], f(B, 2, 3, 4, 6)),
    C("max_pool_indices", lambda T, x: Fn(T).max_pool2d(x, 2, return_indices=True), f(B, 2, 3, 4, 6)),
    C("avg_pool", lambda T, x: Fn(T).avg_pool2d(x, 2) + Fn(T).avg_pool2d(x, 2, padding=1)[..., :2, :2]
      + Fn(T).avg_pool1d(x.flatten(-2), 12)[..., None] + Fn(T).adaptive_avg_pool2d(x, 1)
      + Fn(T).adaptive_avg_pool2d(x, (2, 3))[..., :2, :2], f(B, 2, 3, 4, 4)),
    C("pool_unbatched_sample", lambda T, x: Fn(T).max_pool2d(x, 2) + Fn(T).avg_pool2d(x, 2), f(B, 3, 4, 4)),
    C("pool3d", lambda T, x: (Fn(T).max_pool3d(x, 2) + Fn(T).avg_pool3d(x, 2), Fn(T).lp_pool2d(x[:, 0], 2, 2)),
      f(B, 1, 2, 4, 4, 4)),
    C("interpolate_shuffle_fold", lambda T, x: Fn(T).interpolate(x, scale_factor=2).sum(-1).sum(-1)
      + Fn(T).interpolate(x, size=(5, 5), mode="bilinear").sum((-2, -1)) + Fn(T).pixel_shuffle(x, 2).sum((-2, -1, -3))[
          :, None] + Fn(T).fold(Fn(T).unfold(x, 2), (4, 4), 2).sum((-2, -1)), f(B, 2, 4, 4, 4)),
    # ---- losses, every reduction
    *[C(f"losses_{r}", lambda T, x, y, t, p, r=r: Fn(T).mse_loss(x, y, reduction=r) + Fn(T).l1_loss(x, y, reduction=r)
        + Fn(T).smooth_l1_loss(x, y, reduction=r) + Fn(T).huber_loss(x, y, reduction=r, delta=0.5)
        + Fn(T).binary_cross_entropy_with_logits(x, p, reduction=r) + Fn(T).kl_div(x, p, reduction=r)
        + Fn(T).soft_margin_loss(x, t, reduction=r), x3, f(B, 3, 5), np.sign(f(B, 3, 5)), prob(B, 3, 5), grad=(0, 1, 3))
      for r in ("mean", "sum", "none")],
    *[C(f"cross_entropy_{r}", lambda T, x, t, x2, t2, w, r=r: (
        Fn(T).cross_entropy(x, t, reduction=r),
        Fn(T).cross_entropy(x, t, weight=w, ignore_index=1, reduction=r),
        Fn(T).cross_entropy(x[0], t[0], reduction=r, label_smoothing=0.1),
        Fn(T).cross_entropy(x2, t2, reduction=r),
        Fn(T).cross_entropy(x, T.softmax(x * 2, -1), reduction=r, label_smoothing=0.2)),
        f(B, 3, 5), ints(5, B, 3), f(B, 2, 3, 2, 2), ints(3, B, 2, 2, 2), pos(5), in_dims=(0, 0, 0, 0, None),
        grad=(0, 2))
      for r in ("mean", "sum", "none")],
    C("cross_entropy_unbatched_target", lambda T, x, t: Fn(T).cross_entropy(x, t), f(B, 3, 5), ints(5, 3),
      in_dims=(0, None)),
    C("cross_entropy_all_ignored", lambda T, x, t: Fn(T).cross_entropy(x, t, ignore_index=0), f(B, 2, 3),
      np.array([[1, 2], [0, 0], [2, 0]]), torch=False),
    C("nll_unbatched_target", lambda T, x, t: Fn(T).nll_loss(x, t) + Fn(T).nll_loss(x, t, reduction="sum"),
      f(B, 3, 5), ints(5, 3), in_dims=(0, None)),
    C("attention", lambda T, q, k, v: Fn(T).scaled_dot_product_attention(q, k, v)
      + Fn(T).scaled_dot_product_attention(q, k, v, is_causal=True), f(B, 2, 3, 5), f(B, 2, 3, 5), f(B, 2, 3, 5)),
    C("attention_mask_unbatched_kv", lambda T, q, k, v, m: Fn(T).scaled_dot_product_attention(q, k, v, attn_mask=m)
      + Fn(T).scaled_dot_product_attention(q, k, v, attn_mask=m.double()), f(B, 2, 3, 5), f(2, 4, 5), f(2, 4, 5),
      f(3, 4) > -0.5, in_dims=(0, None, None, None)),
    C("attention_batched_mask", lambda T, q, k, v, m: Fn(T).scaled_dot_product_attention(q, k, v, attn_mask=m),
      f(2, 3, 5), f(2, 4, 5), f(2, 4, 5), f(B, 3, 4), in_dims=(None, None, None, 0)),
    # ---- sorting
    C("sort_topk", lambda T, x: (T.sort(x, 1), T.sort(x, -1, descending=True), T.argsort(x, 0), T.topk(x, 2, dim=1),
                                 T.topk(x, 2), T.kthvalue(x, 2, 1), T.median(x, 1), T.mode(x.round(), 1), x.max(1)),
      x3),
    C("median_all", lambda T, x: T.median(x), x3, fallback=("MedianAll",)),
    C("quantile_matrix_rank", lambda T, x: (T.quantile(x, 0.3, dim=1), T.linalg.matrix_rank(x)), x3,
      fallback=("Quantile", "Value"), grad=False),
]


# ---------------------------------------------------------------------- helpers
def _tree(x) -> list:
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _tree(z)]
    return [x]


def _dims(case: Case) -> tuple:
    d = case.in_dims
    return d if isinstance(d, tuple) else (d,) * len(case.args)


def _inputs(case: Case, lib=ember) -> list:
    return [(lib.tensor(a) if lib is ember else torch.from_numpy(np.array(a))) if isinstance(a, np.ndarray) else a
            for a in case.args]


def _loop(fn, args: list, dims: tuple, n: int) -> list:
    outs = [_tree(fn(*[x.select(d, b) if d is not None else x for x, d in zip(args, dims)])) for b in range(n)]
    return [ember.stack([o[k] for o in outs]) for k in range(len(outs[0]))]


def _fallbacks(record) -> list:
    return sorted({re.search(r"rule for (\w+)\.", str(w.message)).group(1) for w in record
                   if "performance drop" in str(w.message)})


def _close(got: list, ref: list, atol: float = 1e-9) -> None:
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert tuple(g.shape) == tuple(r.shape), f"output {k}: {tuple(g.shape)} vs {tuple(r.shape)}"
        assert g.dtype == r.dtype, f"output {k}: {g.dtype} vs {r.dtype}"
        np.testing.assert_allclose(g.detach().numpy(), r.detach().numpy(), rtol=1e-7, atol=atol, err_msg=f"output {k}")


def _run_vmap(fn, args, in_dims, **kw):
    _batching._warned.clear()  # (the fallback warning is given once per op: each case sees its own)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = vmap(fn, in_dims=in_dims, **kw)(*args)
    return out, _fallbacks(record)


# ---------------------------------------------------------------------- every op family against the loop
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vmap_matches_loop(case: Case) -> None:
    args, dims = _inputs(case), _dims(case)
    fn = lambda *a: case.fn(ember, *a)  # noqa: E731
    out, fallbacks = _run_vmap(fn, args, dims)
    n = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    _close(_tree(out), _loop(fn, args, dims, n))
    assert fallbacks == sorted(case.fallback), f"ops that ran once per example: {fallbacks}"


def _float_args(case: Case) -> tuple:
    """The positions of the inputs the per-example gradient is taken with respect to: every float one (mapped or
    not), unless the case names them."""
    if isinstance(case.grad, tuple):
        return case.grad
    return tuple(k for k, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")


GRAD_CASES = [c for c in CASES if c.grad and _float_args(c)]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_per_example_grad(case: Case) -> None:
    """vmap(grad(f)) against grad(f) per example, with respect to every float input, mapped or not: the physical
    graph's backward pass gives each example's gradient (grad's inputs are batched, so the rules of ops with a
    weight take their batched-weight paths)."""
    args, dims = _inputs(case), _dims(case)
    nums = _float_args(case)
    cots: dict = {}

    def loss(*a):
        total = ember.tensor(0.0)
        for k, o in enumerate(_tree(case.fn(ember, *a))):
            if o.is_floating_point():  # a fixed random cotangent per output, the same for every example
                c = cots.setdefault(k, np.random.default_rng(k).standard_normal(tuple(o.shape)))
                total = total + (o * ember.tensor(c)).sum()
        return total

    n = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    g, fallbacks = _run_vmap(grad(loss, argnums=nums), args, dims)
    ref = [grad(loss, argnums=nums)(*[x.select(d, b) if d is not None else x for x, d in zip(args, dims)])
           for b in range(n)]
    _close(list(g), [ember.stack([r[k] for r in ref]) for k in range(len(nums))], atol=1e-8)
    assert set(fallbacks) <= set(case.fallback), f"ops that ran once per example: {fallbacks}"


TORCH_CASES = [c for c in CASES if c.torch]


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.id for c in TORCH_CASES])
def test_vmap_matches_torch(case: Case) -> None:
    torch_ = need_torch()
    dims = _dims(case)
    out = _tree(vmap(lambda *a: case.fn(ember, *a), in_dims=dims)(*_inputs(case)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch's own fallback warnings)
        ref = _tree(torch_.func.vmap(lambda *a: case.fn(torch_, *a), in_dims=dims)(*_inputs(case, torch_)))
    assert len(out) == len(ref)
    for k, (o, r) in enumerate(zip(out, ref)):
        assert tuple(o.shape) == tuple(r.shape), f"output {k}: {tuple(o.shape)} vs {tuple(r.shape)}"
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-6, atol=1e-8, err_msg=f"output {k}")


# ---------------------------------------------------------------------- nested vmap
def _outer_variant(a, k: int):
    """A second example for the outer level: another draw of the same kind (indices permuted, masks negated)."""
    if a.dtype.kind == "f":
        return a * 0.5 + np.random.default_rng(k).uniform(0.0, 0.1, a.shape)
    if a.dtype.kind == "b":
        return ~a
    return np.flip(a, -1).copy() if a.ndim else a


NESTED = [(c, how) for c in CASES for how in ("same", "cross") if how == "same" or any(
    d is None and isinstance(a, np.ndarray) and a.dtype.kind == "f" for a, d in zip(c.args, _dims(c)))]


# a batched class weight of cross_entropy (the 'cross' variant maps it at the outer level) runs per example
NESTED_FALLBACK = {f"cross_entropy_{r}": ("CrossEntropy",) for r in ("mean", "sum", "none")}


@pytest.mark.parametrize("case,how", NESTED, ids=[f"{c.id}-{how}" for c, how in NESTED])
def test_nested_vmap(case: Case, how: str) -> None:
    """vmap(vmap(f)) against a double loop: 'same' maps the inner level's inputs at both levels; 'cross' maps at the
    outer level the float inputs the inner one does not (an outer-batched weight meets an inner-batched input)."""
    inner = _dims(case)
    outer = tuple((0 if d is not None else None) if how == "same" else
                  (0 if d is None and isinstance(a, np.ndarray) and a.dtype.kind == "f" else None)
                  for a, d in zip(case.args, inner))
    args = [np.stack([a, _outer_variant(a, k)]) if od == 0 else a for k, (a, od) in enumerate(zip(case.args, outer))]
    args = [ember.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    fn = lambda *a: case.fn(ember, *a)  # noqa: E731
    got, fallbacks = _run_vmap(vmap(fn, in_dims=inner), args, outer)
    got = _tree(got)
    assert set(fallbacks) <= set(case.fallback) | set(NESTED_FALLBACK.get(case.id, ())), fallbacks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = next(x.shape[d] for x, d in zip(args, outer) if d is not None)
        m = next(a.shape[d] for a, d in zip(case.args, inner) if d is not None)
        rows = [_loop(fn, [x.select(0, b) if d is not None else x for x, d in zip(args, outer)], inner, m)
                for b in range(n)]
    _close(got, [ember.stack([r[k] for r in rows]) for k in range(len(rows[0]))])


# ---------------------------------------------------------------------- in_dims, out_dims, chunk_size
def _t(*shape, seed: int = 0) -> ember.Tensor:
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape))


def test_containers_of_inputs_and_outputs():
    """in_dims as a tree prefix of tuple/dict inputs, keyword arguments passed unmapped, and out_dims per output
    (a tuple, a nested tuple, -1, None for an output that is not batched)."""
    d = {"a": _t(3, 4, seed=1), "b": _t(4, seed=2)}
    pair = (_t(4, 3, seed=3), _t(3, 4, seed=4))

    def fn(d, pair, scale=1.0):
        y = d["a"] * pair[0] + d["b"] - pair[1] * scale
        return y, (y.sum(), d["b"] * 2)

    out = vmap(fn, in_dims=({"a": 0, "b": None}, (1, 0)), out_dims=(1, (0, None)))(d, pair, scale=3.0)
    rows = [fn({"a": d["a"][i], "b": d["b"]}, (pair[0][:, i], pair[1][i]), scale=3.0) for i in range(3)]
    _close([out[0], out[1][0]], [ember.stack([r[0] for r in rows], 1), ember.stack([r[1][0] for r in rows])])
    assert out[1][1] is not None and np.allclose(out[1][1].numpy(), d["b"].numpy() * 2)  # returned as it is
    x = _t(3, 2, 5)
    _close([vmap(lambda v: v.sum(0), out_dims=-1)(x)], [ember.stack([x[i].sum(0) for i in range(3)], -1)])
    _close(list(vmap(lambda v: (v, (v * 2, v.T)), out_dims=(0, (1, -1)))(x)[1]),
           [x.movedim(0, 1) * 2, x.transpose(-1, -2).movedim(0, -1)])
    assert vmap(lambda v: (v, 3), out_dims=(0, None))(x)[1] == 3  # a non-tensor output with out_dim None


def test_chunk_size_matches_one_pass():
    x, w = _t(7, 3, 5, seed=5), _t(2, 5, seed=6)
    fn = lambda v, w: (ember.nn.functional.linear(v, w).softmax(-1), v.sum())  # noqa: E731
    full = vmap(fn, in_dims=(0, None), out_dims=(1, 0))(x, w)
    for chunk in (1, 2, 3, 7, 100):
        _close(list(vmap(fn, in_dims=(0, None), out_dims=(1, 0), chunk_size=chunk)(x, w)), list(full))


# ---------------------------------------------------------------------- randomness
RANDOM_FNS = {
    "dropout": lambda v: ember.nn.functional.dropout(v, 0.5),
    "rand_like": lambda v: v * 0 + ember.rand_like(v),
    "randn": lambda v: v * 0 + ember.randn(v.shape[-1], dtype=v.dtype),
    "alpha_dropout": lambda v: ember.nn.functional.alpha_dropout(v, 0.5, training=True),
    "rrelu": lambda v: ember.nn.functional.rrelu(v - 2, training=True),
}


@pytest.mark.parametrize("name", RANDOM_FNS)
def test_randomness_modes(name: str):
    """'error' raises PyTorch's error; 'same' draws once for every example; 'different' draws for each."""
    fn = RANDOM_FNS[name]
    x = ember.ones(4, 64, dtype=ember.float64)
    with pytest.raises(RuntimeError, match=re.escape("vmap: called random operation while in randomness error mode. "
                                                     "Please either use the 'same' or 'different' randomness flags on "
                                                     "vmap or perform the randomness operation out of vmap")):
        vmap(fn)(x)
    _batching._warned.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        same = vmap(fn, randomness="same")(x).numpy()
        different = vmap(fn, randomness="different")(x).numpy()
    assert _fallbacks(record) == []
    assert all(np.array_equal(same[0], row) for row in same[1:])
    assert not any(np.array_equal(different[0], row) for row in different[1:])
    one = fn(x[0]).numpy()
    if name.endswith("dropout"):  # every example's draw takes the values that one call outside vmap can take
        assert set(np.unique(np.round(different, 6))) <= set(np.unique(np.round(one, 6)))


# ---------------------------------------------------------------------- per-example gradients and ensembles
def _mlp(seed: int) -> ember.nn.Module:
    ember.manual_seed(seed)
    return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 3)).double()


# (EMBER_TEST_COMPILE=1 compiles every Module call and snapshots the module's tensors first, reading their values:
# functional_call inside vmap puts batched stand-ins there, which cannot be read)
_module_calls = pytest.mark.skipif(COMPILE, reason="tests/helpers.py compile_every_module reads the values of the "
                                                   "batched parameters that functional_call swaps in")


@_module_calls
def test_per_example_gradients_of_an_mlp():
    model = _mlp(0)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = _t(5, 4, seed=7), ember.tensor([0, 2, 1, 1, 0])

    def loss(p, xi, yi):
        return ember.nn.functional.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    _batching._warned.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        g = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    assert _fallbacks(record) == []
    for i in range(5):
        gi = grad(loss)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(g[k][i].numpy(), gi[k].numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
    # the mean of the per-example gradients is the batch gradient
    model.zero_grad()
    ember.nn.functional.cross_entropy(model(x), y).backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(g[k].mean(0).numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
    if torch is not None:  # and PyTorch's per-example gradients of the same network
        tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
        tm.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in params.items()})
        tp = {k: v.detach() for k, v in tm.named_parameters()}

        def tloss(p, xi, yi):
            out = torch.func.functional_call(tm, p, (xi.unsqueeze(0),))
            return torch.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        tg = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tp, torch.from_numpy(x.numpy()),
                                                                          torch.from_numpy(y.numpy()))
        for k in params:
            np.testing.assert_allclose(g[k].numpy(), tg[k].numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


class _Net(ember.nn.Module):
    """A small model touching the rules that a batched weight takes: embedding, conv, batch norm (eval), layer
    norm, pooling, linear."""

    def __init__(self):
        super().__init__()
        self.emb = ember.nn.Embedding(6, 4)
        self.conv = ember.nn.Conv2d(1, 2, 3, padding=1)
        self.bn = ember.nn.BatchNorm2d(2)
        self.ln = ember.nn.LayerNorm(8)
        self.fc = ember.nn.Linear(8 + 4, 3)

    def forward(self, img, tokens):
        h = ember.nn.functional.max_pool2d(ember.relu(self.bn(self.conv(img))), 2).flatten(1)
        return self.fc(ember.cat([self.ln(h), self.emb(tokens).mean(1)], 1))


@_module_calls
def test_ensemble_of_models_with_stacked_state():
    """stack_module_state + vmap(functional_call) over the models' parameters and buffers equals each model called
    on its own, with no op falling back to the per-example loop; and so do its gradients."""
    models = []
    for seed in range(3):
        ember.manual_seed(seed)
        m = _Net().double().eval()
        m.bn.running_mean.copy_(_t(2, seed=seed + 10))
        models.append(m)
    params, buffers = stack_module_state(models)
    img, tokens = _t(5, 1, 4, 4, seed=8), ember.tensor(np.random.default_rng(9).integers(0, 6, (5, 3)))
    base = models[0]
    call = lambda p, b, x, t: functional_call(base, (p, b), (x, t))  # noqa: E731
    _batching._warned.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = vmap(call, in_dims=(0, 0, None, None))(params, buffers, img, tokens)
        gs = vmap(grad(lambda p, b, x, t: call(p, b, x, t).square().sum()), in_dims=(0, 0, None, None))(
            params, buffers, img, tokens)
    assert _fallbacks(record) == []
    _close([out], [ember.stack([m(img, tokens) for m in models])])
    for i, m in enumerate(models):
        m.zero_grad()
        m(img, tokens).square().sum().backward()
        for k, p in m.named_parameters():
            np.testing.assert_allclose(gs[k][i].detach().numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


def test_jacobians_through_vmap():
    """jacrev (vmap of vjp) and jacfwd (vmap of jvp) of a function of several op families, per example (a vmap
    around them), against the loop."""
    w = _t(3, 4, seed=11)

    def f(x):
        return ember.nn.functional.layer_norm(ember.tanh(x @ w.T).softmax(-1) * x[:3], (3,))

    xs = _t(2, 4, seed=12)
    for jac in (jacrev, jacfwd):
        _close([vmap(jac(f))(xs)], [ember.stack([jac(f)(xs[i]) for i in range(2)])], atol=1e-10)
    _close([vmap(lambda x, t: jvp(f, (x,), (t,))[1])(xs, xs * 0.5)],
           [ember.stack([jvp(f, (xs[i],), (xs[i] * 0.5,))[1] for i in range(2)])])


# ---------------------------------------------------------------------- errors, as PyTorch's
ERRORS = [  # (id, call(vmap, T, x) with x of shape (3, 4), exception, the same message as PyTorch's)
    ("batch_sizes", lambda vmap, T, x: vmap(lambda a, b: a + b)(x, x[:2]), ValueError, True),
    ("in_dim_out_of_range", lambda vmap, T, x: vmap(lambda a: a, in_dims=2)(x), ValueError, True),
    ("in_dim_for_a_number", lambda vmap, T, x: vmap(lambda a, n: a * n, in_dims=(0, 0))(x, 3), ValueError, True),
    ("in_dims_type", lambda vmap, T, x: vmap(lambda a: a, in_dims="a")(x), ValueError, True),
    ("in_dims_none", lambda vmap, T, x: vmap(lambda a: a, in_dims=None)(x), ValueError, True),
    ("in_dims_all_none", lambda vmap, T, x: vmap(lambda a: a, in_dims=(None,))(x), ValueError, True),
    ("in_dims_structure", lambda vmap, T, x: vmap(lambda a, b: a, in_dims=(0,))(x, x), ValueError, False),
    ("in_dims_dict_keys", lambda vmap, T, x: vmap(lambda d: d["a"], in_dims=({"a": 0, "c": None},))({"a": x, "b": x}),
     ValueError, False),
    ("no_inputs", lambda vmap, T, x: vmap(lambda: x)(), ValueError, True),
    ("randomness_value", lambda vmap, T, x: vmap(lambda a: a, randomness="foo")(x), RuntimeError, True),
    ("chunk_size", lambda vmap, T, x: vmap(lambda a: a, chunk_size=0)(x), ValueError, True),
    ("out_dims_structure", lambda vmap, T, x: vmap(lambda a: (a, a), out_dims=(0, 0, 0))(x), ValueError, False),
    ("out_dims_type", lambda vmap, T, x: vmap(lambda a: a, out_dims="x")(x), ValueError, True),
    ("out_dim_out_of_range", lambda vmap, T, x: vmap(lambda a: a, out_dims=3)(x), IndexError, True),
    ("output_not_a_tensor", lambda vmap, T, x: vmap(lambda a: 3)(x), ValueError, True),
    ("out_dims_none_of_batched", lambda vmap, T, x: vmap(lambda a: a, out_dims=None)(x), ValueError, False),
    ("random_in_error_mode", lambda vmap, T, x: vmap(lambda a: T.nn.functional.dropout(a, 0.5))(x), RuntimeError, True),
    # data-dependent Python: ember's VmapError is a RuntimeError, as PyTorch's
    ("item", lambda vmap, T, x: vmap(lambda a: a.sum().item())(x), RuntimeError, False),
    ("float", lambda vmap, T, x: vmap(lambda a: float(a.sum()))(x), RuntimeError, False),
    ("bool_control_flow", lambda vmap, T, x: vmap(lambda a: a if a.sum() > 0 else -a)(x), RuntimeError, False),
    ("nonzero", lambda vmap, T, x: vmap(lambda a: T.nonzero(a))(x), RuntimeError, False),
    ("masked_select", lambda vmap, T, x: vmap(lambda a: a[a > 0])(x), RuntimeError, False),
]


@pytest.mark.parametrize("call,exc,same", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_as_pytorch(call, exc, same):
    x = _t(3, 4, seed=13)
    with pytest.raises(exc) as got:
        call(vmap, ember, x)
    assert not type(got.value).__module__.startswith("numpy")
    if torch is None:
        return
    with pytest.raises(exc) as ref:
        call(torch.func.vmap, torch, torch.from_numpy(x.numpy()))
    if same:
        assert str(got.value) == str(ref.value)
    else:  # the same first words (ember's message then says what it found)
        assert str(got.value)[:12] == str(ref.value)[:12] or isinstance(got.value, VmapError)


def test_data_dependent_error_names_the_cause():
    x = _t(3, 4, seed=14)
    with pytest.raises(VmapError, match=r"\.item\(\)|bool\(\)"):
        vmap(lambda a: a * 2 if a.max() > 0 else a)(x)
    with pytest.raises(VmapError, match="'item'"):
        vmap(lambda a: a.sum().item())(x)
    assert issubclass(VmapError, RuntimeError)


# ---------------------------------------------------------------------- indices that are batched
# The Python functions of these ops read the index values (a range check) before the op is applied, which a
# batched index cannot answer: they raise VmapError today (`BLOCKED`, an xfail that turns into a failure once they
# pass: then move them to CASES). The ops' rules are there: `INDEX_RULES` applies the ops directly, past those
# checks, and compares them with the loop.
def _grid(i, d):
    return _indexing._grid(i._data, d)


def _embed(w, i):
    return ember.ops.nn_misc.Embedding.apply(w, i._data, None, False)


INDEX_RULES = [  # (id, fn(x, index, src), inputs, in_dims)
    ("gather", lambda x, i, s: _indexing.Gather.apply(x, dim=1, grid=_grid(i, 1), ishape=tuple(i.shape)),
     (f(B, 3, 5), ints(5, B, 3, 2), f(B, 3, 2)), (0, 0, 0)),
    ("gather_unbatched_input", lambda x, i, s: _indexing.Gather.apply(x, dim=0, grid=_grid(i, 0),
                                                                       ishape=tuple(i.shape)),
     (f(3, 5), ints(3, B, 2, 5), f(B, 3, 2)), (None, 0, 0)),
    ("scatter_add", lambda x, i, s: _indexing.Scatter.apply(x, s, dim=1, grid=_grid(i, 1), ishape=tuple(i.shape),
                                                            reduce="add"), (f(B, 3, 5), ints(5, B, 3, 2), f(B, 3, 2)),
     (0, 0, 0)),
    ("scatter_unbatched_src", lambda x, i, s: _indexing.Scatter.apply(x, s, dim=1, grid=_grid(i, 1),
                                                                      ishape=tuple(i.shape)),
     (f(B, 3, 5), np.stack([np.stack([_rng.permutation(5)[:2] for _ in range(3)]) for _ in range(B)]), f(3, 2)),
     (0, 0, None)),
    ("index_select", lambda x, i, s: _indexing.IndexSelect.apply(x, dim=1, index=i._data),
     (f(B, 3, 5), ints(5, B, 4), f(B, 3, 2)), (0, 0, 0)),
    ("index_add", lambda x, i, s: _indexing.IndexAdd.apply(x, s, dim=1, index=i._data, alpha=2.0),
     (f(B, 3, 5), ints(5, B, 2), f(B, 3, 2)), (0, 0, 0)),
    ("take", lambda x, i, s: _indexing.Take.apply(x, index=i._data), (f(B, 3, 5), ints(15, B, 2, 2), f(B, 3, 2)),
     (0, 0, 0)),
    ("embedding", lambda x, i, s: _embed(x, i), (f(6, 5), ints(6, B, 3, 2), f(B, 3, 2)), (None, 0, 0)),
    ("embedding_batched_weight", lambda x, i, s: _embed(x, i), (f(B, 6, 5), ints(6, B, 3, 2), f(B, 3, 2)),
     (0, 0, 0)),
]


@pytest.mark.parametrize("fn,args,dims", [r[1:] for r in INDEX_RULES], ids=[r[0] for r in INDEX_RULES])
def test_rules_of_batched_indices(fn, args, dims):
    args = [ember.tensor(a) for a in args]
    out, fallbacks = _run_vmap(fn, args, dims)
    _close([out], _loop(fn, args, dims, B))
    assert fallbacks == []
    floats = tuple(k for k, a in enumerate(args) if a.is_floating_point())
    loss = lambda *a: (fn(*a) ** 2).sum()  # noqa: E731
    g, fallbacks = _run_vmap(grad(loss, argnums=floats), args, dims)
    ref = [grad(loss, argnums=floats)(*[x.select(d, b) if d is not None else x for x, d in zip(args, dims)])
           for b in range(B)]
    _close(list(g), [ember.stack([r[k] for r in ref]) for k in range(len(floats))])


BATCHED_INDEX = [  # (id, fn(T, x, index) with a batched index): their range checks read every example's values
    ("gather", lambda T, x, i: T.gather(x, 1, i)),
    ("take_along_dim", lambda T, x, i: T.take_along_dim(x, i, 1)),
    ("scatter_add", lambda T, x, i: x.scatter_add(1, i, x[:, :2])),
    ("index_select", lambda T, x, i: T.index_select(x, 1, i[0])),
    ("take", lambda T, x, i: T.take(x, i)),
    ("getitem", lambda T, x, i: x[i[0]]),
    ("cummax", lambda T, x, i: T.cummax(x, 1).values),
    ("embedding", lambda T, x, i: T.nn.functional.embedding(i, x)),
    ("nll_loss", lambda T, x, i: T.nn.functional.nll_loss(x, i[:, 0])),
    ("binary_cross_entropy", lambda T, x, i: T.nn.functional.binary_cross_entropy(x.sigmoid(), x.sigmoid() * 0.5)),
]
BLOCKED = [  # (id, fn(T, x, index) with a batched index): the public functions, blocked by a read of the values
    ("one_hot", lambda T, x, i: T.nn.functional.one_hot(i, 5).float() * x[0, 0]),  # (fills its result in Python)
]
_LAZY = os.environ.get("EMBER_LAZY") == "always"  # (lazy mode records the write as an op: no Python write there)
_SETITEM = pytest.param(lambda T, x, i: (lambda y: (y.__setitem__((slice(None), 0), 1.0), y)[1])(x.clone()),
                        id="setitem_no_grad", marks=pytest.mark.skipif(_LAZY, reason="recorded in lazy mode"))


@pytest.mark.parametrize("fn", [pytest.param(b[1], id=b[0]) for b in BATCHED_INDEX] + [_SETITEM])
def test_batched_indices_through_the_public_functions(fn):
    x, i = ember.tensor(f(B, 3, 5)), ember.tensor(ints(3, B, 3, 2))
    g = lambda a, j: fn(ember, a, j)  # noqa: E731
    out, fallbacks = _run_vmap(g, [x, i], (0, 0))
    _close(_tree(out), _loop(g, [x, i], (0, 0), B))


@pytest.mark.parametrize("fn", [pytest.param(b[1], id=b[0]) for b in BLOCKED])
@pytest.mark.xfail(raises=VmapError, strict=True, reason="the function reads a batched tensor's values in Python "
                                                         "before its op is applied (to be fixed in ember/ops)")
def test_blocked_by_a_read_of_the_values(fn):
    x, i = ember.tensor(f(B, 3, 5)), ember.tensor(ints(3, B, 3, 2))
    g = lambda a, j: fn(ember, a, j)  # noqa: E731
    out, fallbacks = _run_vmap(g, [x, i], (0, 0))
    _close(_tree(out), _loop(g, [x, i], (0, 0), B))
