"""Ready-made parametrizations (PyTorch's `torch.nn.utils.parametrizations`): `weight_norm`, `spectral_norm`
and `orthogonal`, each registered with `parametrize.register_parametrization`."""
from __future__ import annotations

from enum import Enum, auto

import numpy as np

from ... import _creation as C
from ... import linalg
from ..._tensor import Tensor, make
from ...autograd.grad_mode import no_grad
from ...backend import device_of, on, to_host, transfer
from ...ops.nn_misc import normalize
from ...ops.shape import cat
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---------------------------------------------------------------------- orthogonal
def _is_orthogonal(Q: Tensor) -> bool:
    """Whether QᴴQ = I to 10·n·eps."""
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * float(np.finfo(Q._data.dtype).eps)
    return bool(C.eye(k, dtype=Q.dtype, device=Q.device).allclose(Q.mH @ Q, atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A = QR (A tall) with R's diagonal made non-negative (columns of Q flipped to match)."""
    Q, R = linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _geqrf(A: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK's geqrf of each matrix: R on and above the diagonal, the Householder vectors below, and their
    factors tau (no gradient: used only to initialise)."""
    a = to_host(A._data)
    h, tau = np.linalg.qr(a, mode="raw")  # h is geqrf's result transposed (LAPACK is column-major)
    dev = device_of(A._data)
    with on(dev):
        return make(transfer(np.ascontiguousarray(np.swapaxes(h, -1, -2)), dev)), make(transfer(tau, dev))


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H₁···H_k, Hᵢ = I - τᵢ·vᵢvᵢᴴ with vᵢ = (0, …, 0, 1, A[i+1:, i]) (A n×k, n ≥ k),
    as `torch.linalg.householder_product`; differentiable (applied one reflector at a time)."""
    n, k = A.shape[-2], A.shape[-1]
    V = A.tril(-1) + C.eye(n, k, dtype=A.dtype, device=A.device)
    Q = C.eye(n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], n, n)
    for i in range(k):  # Q ← Q·Hᵢ = Q - τᵢ·(Q vᵢ) vᵢᴴ
        v = V[..., i:i + 1]
        Q = Q - (Q @ v) * tau[..., i:i + 1].unsqueeze(-1) @ v.mH
    return Q[..., :k]


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """Maps an unconstrained n×k tensor X (n ≥ k; a wide one is transposed) to one with orthonormal columns:
    matrix_exp: Q = exp(A); cayley: Q = (I - A/2)⁻¹(I + A/2), for the skew-symmetric A = L - Lᴴ, L the lower
    triangle of X (padded to n×n), first k columns; householder: the product of the reflectors stored below
    X's diagonal. With use_trivialization, Q ← base·Q for a stored orthogonal `base` (set by right_inverse)."""

    base: Tensor

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                Id = C.eye(n, dtype=A.dtype, device=A.device)
                Q = linalg.solve(Id - A * 0.5, Id + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)  # (truncated to ±1 or 0, as PyTorch)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """An X mapped to Q (with trivialization: stores Q, orthogonalised by QR if it is not orthogonal and
        completed to a square matrix with random columns if it is not square, as `base`, and returns the X
        mapped to the identity)."""
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                # the diagonal of X carries the signs of the reflections (flipped where tau = 0: no reflection)
                diag = A.diagonal(dim1=-2, dim2=-1).sign() * (1 - 2 * (tau == 0.0).to(A.dtype))
                eye = C.eye(n, k, dtype=A.dtype, device=A.device)
                A = A * (1 - eye) + eye * diag.unsqueeze(-2)
                return A.mT if transpose else A
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = C.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            neg_Id = C.zeros_like(Q_init)
            neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_Id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain `module.<name>` (a matrix or a batch of matrices, m×n) to have orthonormal columns (m ≥ n)
    or rows (m < n): QᴴQ = I or QQᴴ = I.

    `orthogonal_map`: "matrix_exp" (default for square or complex tensors), "cayley" or "householder"
    (default otherwise). With `use_trivialization` (default) the parametrization keeps an orthogonal `base`
    (module.parametrizations.<name>[0].base) and maps from it (the dynamic trivialization), and the initial
    Q is the tensor itself if orthogonal, else its QR orthogonalisation. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---------------------------------------------------------------------- weight norm
def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """‖v‖₂ over every dim but `dim`, keeping them as size 1 (dim = -1: over all of v, a 0-d tensor)."""
    if dim == -1:
        return linalg.vector_norm(v)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return linalg.vector_norm(v, 2, others, keepdim=True) if others else v.abs()


class _WeightNorm(Module):
    """w = g·v/‖v‖, the norm over every dim but `dim` (dim None or -1: over all of v)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalisation (Salimans & Kingma): `module.<name>` = g·v/‖v‖, with the magnitude g
    (`parametrizations.<name>.original0`, shaped like the norm: size 1 but along `dim`) and the direction v
    (`original1`) trained separately. The norm is over every dim but `dim` (None: over the whole tensor).
    Returns the module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ---------------------------------------------------------------------- spectral norm
class _SpectralNorm(Module):
    """W/σ(W), σ the largest singular value of W seen as a matrix (dim `dim` first, the rest flattened),
    estimated by power iteration on the buffers `_u`, `_v` (n_power_iterations per access in training mode,
    none in eval mode); a vector is divided by its norm."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = C.randn(h, dtype=weight.dtype, device=weight.device)
            v = C.randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)  # start from good estimates of the singular vectors

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """u ← normalize(W v), v ← normalize(Wᴴ u), in place in the buffers."""
        with no_grad():
            for _ in range(n_power_iterations):
                normalize(weight_mat.mv(self._v), dim=0, eps=self.eps, out=self._u)
                normalize(weight_mat.mH.mv(self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # copies: the next power iteration must not change this graph
        sigma = u.vdot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectral normalisation (Miyato et al.): `module.<name>` = W/σ(W), σ the largest singular value of W
    (as a matrix with `dim` first), estimated by `n_power_iterations` power iterations at each access in
    training mode (state: the buffers `_u`, `_v` of `parametrizations.<name>[0]`). `dim` defaults to 1 for
    ConvTranspose layers, else 0. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..modules.conv import _ConvTranspose
        dim = 1 if isinstance(module, _ConvTranspose) else 0  # a transposed conv's weight is (in, out, ...)
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
