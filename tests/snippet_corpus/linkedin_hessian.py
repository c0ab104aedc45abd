# Compute Jacobian and Hessian
import torch
from torch.autograd.functional import hessian

def f(x):
    return (x[0] ** 2 + x[1] ** 3)

x = torch.tensor([1.0, 2.0], requires_grad=True)
hess = hessian(f, x)
print("Hessian matrix:\n", hess)
