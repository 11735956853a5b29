"""`ember.cuda`: whether a CUDA device can be used. The CuPy backend is an optional layer; without
it every query answers 'no GPU' and moving a tensor to CUDA raises one clear error."""
from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0
