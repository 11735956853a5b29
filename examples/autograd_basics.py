"""Autograd basics: gradients, higher-order derivatives, and Newton's method with them.

    python examples/autograd_basics.py
"""
import ember as torch

# Reverse mode: y = sum(tanh(x @ w)); dy/dx and dy/dw land in .grad.
x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
w = torch.randn(2, 3, requires_grad=True)
y = (x @ w).tanh().sum()
y.backward()
print("dy/dx =", x.grad)
print("dy/dw has shape", tuple(w.grad.shape))

# Higher order: backward formulas are ember ops, so create_graph=True differentiates them again.
t = torch.tensor(1.5, requires_grad=True)
f = t ** 3 - 2 * t
(d1,) = torch.autograd.grad(f, t, create_graph=True)   # 3t^2 - 2
(d2,) = torch.autograd.grad(d1, t, create_graph=True)  # 6t
(d3,) = torch.autograd.grad(d2, t)                     # 6
print(f"at t=1.5: f'={d1.item():.4f} (3t^2-2 = {3 * 1.5 ** 2 - 2:.4f}), f''={d2.item():.4f}, f'''={d3.item():.4f}")


# Newton's method for a minimum of g(v) = sum(v^4 - 3v^2 + v): v <- v - g'(v) / g''(v) per coordinate
# (g is separable, so the Hessian is diagonal and its diagonal is the gradient of sum(g')).
def g(v):
    return (v ** 4 - 3 * v ** 2 + v).sum()


v = torch.tensor([2.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
for step in range(8):
    (grad,) = torch.autograd.grad(g(v), v, create_graph=True)
    (hess_diag,) = torch.autograd.grad(grad.sum(), v)
    with torch.no_grad():
        v -= grad / hess_diag
    print(f"newton step {step + 1}: v = {v.detach().numpy().round(8)}  |g'(v)| = {grad.abs().max().item():.2e}")
(grad,) = torch.autograd.grad(g(v), v)
assert grad.abs().max().item() < 1e-10, "Newton's method should have converged"
print("stationary points found: g'(v) =", grad.detach().numpy())
