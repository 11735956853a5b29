"""A custom differentiable function with `ember.autograd.Function`, checked by gradcheck.

    python examples/custom_function.py
"""
import ember as torch
from ember.autograd import Function, gradcheck


class SmoothClamp(Function):
    """y = lo + (hi - lo) * sigmoid(x): a clamp to (lo, hi) with a gradient everywhere.
    dy/dx = (y - lo) * (hi - y) / (hi - lo)."""

    @staticmethod
    def forward(ctx, x, lo: float, hi: float):
        y = lo + (hi - lo) * torch.sigmoid(x)
        ctx.save_for_backward(y)
        ctx.lo, ctx.hi = lo, hi
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        # one gradient per forward input: the two constants get None
        return grad_y * (y - ctx.lo) * (ctx.hi - y) / (ctx.hi - ctx.lo), None, None


x = torch.randn(5, dtype=torch.float64, requires_grad=True)
y = SmoothClamp.apply(x, -1.0, 2.0)
y.sum().backward()
print("y =", y.detach().numpy().round(4))
print("dy/dx =", x.grad.numpy().round(4))
# Compare the analytic backward with central finite differences (float64).
assert gradcheck(lambda t: SmoothClamp.apply(t, -1.0, 2.0), (x,))
print("gradcheck passed")
