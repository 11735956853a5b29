"""`detect_anomaly`: record where each node was created and fail on the first NaN/inf gradient."""
from __future__ import annotations

import traceback

from .grad_mode import MODE


def creation_trace() -> str:
    """The user's stack at node creation (ember's own frames dropped)."""
    frames = [f for f in traceback.extract_stack()[:-1] if "/ember/" not in f.filename.replace("\\", "/")
              or "/tests/" in f.filename.replace("\\", "/")]
    return "".join(traceback.format_list(frames[-8:]))


class detect_anomaly:
    """Context manager (and decorator): while active, every node stores its forward traceback and
    backward raises RuntimeError naming the first op whose backward produced NaN or inf, with
    that traceback. Slows recording: use it for debugging only."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        self._prev = MODE.anomaly
        MODE.anomaly = self.check_nan

    def __exit__(self, *exc) -> None:
        MODE.anomaly = self._prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):
    """Set anomaly detection on or off (at once, and restored at the end of a `with` block)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = MODE.anomaly
        MODE.anomaly = bool(mode) and check_nan

    def __enter__(self) -> None:
        pass


def is_anomaly_enabled() -> bool:
    return MODE.anomaly
