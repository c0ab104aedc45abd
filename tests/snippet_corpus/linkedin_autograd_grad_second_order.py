# autograd.grad() - Gradient without .backward() 

import torch
x = torch.tensor([2.0], requires_grad=True)
y = x ** 3

grad = torch.autograd.grad(y, x)  # Returns (3x²,) → (12.0,)
print("dy/dx =", grad[0])         # tensor([12.])

# Higher-Order Gradients (grad of a grad, Second derivative)
x = torch.tensor([2.0], requires_grad=True)
y = x**3       # dy/dx = 3x² = 12

# First derivative
dy_dx = torch.autograd.grad(y, x, create_graph=True)[0]

# Second derivative (d²y/dx² = 6x = 12)
d2y_dx2 = torch.autograd.grad(dy_dx, x)[0]

print("Second derivative:", d2y_dx2)  # tensor([12.])
