"""Utilities outside the tensor core, as `torch.utils`: `data` (datasets, samplers, DataLoader), `checkpoint`
(activation checkpointing: `checkpoint`, `checkpoint_sequential`), and
`tensorboard` (TensorBoard event files; imported on its own, `from ember.utils.tensorboard import
SummaryWriter`, as in PyTorch, since it needs the optional tensorboardX)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
