"""`torch.nn.utils.stateless`: PyTorch's older home of `functional_call`, deprecated there since 2.0 in favour of
`torch.func.functional_call` (ember.func.functional_call), to which this one hands over after the same warning."""
from __future__ import annotations

import warnings


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """ember.func.functional_call, with PyTorch's FutureWarning."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in "
                  "a future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
                  "replacement.", FutureWarning, stacklevel=2)
    from ...func import functional_call as fc
    return fc(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
