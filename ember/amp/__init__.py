"""`ember.amp`: automatic mixed precision, as `torch.amp`.

`autocast` runs a region's ops in an op-specific dtype (16-bit matmuls and convolutions, float32 reductions and
losses; ember/amp/autocast_mode.py has the op lists); `GradScaler` scales the loss so that float16 gradients do not
underflow, and skips the steps whose gradients overflowed. `ember.autocast` is `ember.amp.autocast`;
`ember.cpu.amp` and `ember.cuda.amp` hold PyTorch's deprecated per-device aliases.
"""
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "GradScaler"]
