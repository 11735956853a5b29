"""PyTorch's `torch._dynamo` names that user code calls, on ember's compiler (ember.compiler)."""
from .compiler import explain, reset  # noqa: F401
from .compiler.api import CACHE_SIZE_LIMIT


class _Config:
    """`torch._dynamo.config`: cache_size_limit is read by ember.compiler.api at each capture."""

    @property
    def cache_size_limit(self) -> int:
        from .compiler import api
        return api.CACHE_SIZE_LIMIT

    @cache_size_limit.setter
    def cache_size_limit(self, n: int) -> None:
        from .compiler import api
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"cache_size_limit must be a non-negative int, got {n!r}")
        api.CACHE_SIZE_LIMIT = n


config = _Config()
__all__ = ["explain", "reset", "config", "CACHE_SIZE_LIMIT"]
