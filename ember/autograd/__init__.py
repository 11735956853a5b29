"""Reverse-mode automatic differentiation: the engine, grad modes, custom Functions and checks."""
from . import forward_ad
from . import functional
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["forward_ad", "functional", "backward", "grad", "Function", "FunctionCtx", "gradcheck", "gradgradcheck", "GradcheckError",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled"]
