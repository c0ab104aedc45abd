import torch

# f(x) = x^3
# f'(x) = 3x^2 -> f'([1, 2]) = [3, 12]
# f''(x) = 6x -> f''([1, 2]) = [6, 12]

x = torch.tensor([[1.0], [2.0]], requires_grad=True)

f = x**3

# torch.ones_like(f) 
# Since grad can be implicitly created only for scalar outputs,
# we have to specify grad_outputs to get a vector return.

# create_graph
# If True, graph of the derivative will be constructed, 
# allowing to compute higher order derivative products.

# [0]
# Return Type: Tuple[Tensor, …]
f_x = torch.autograd.grad(outputs=f, inputs=x, grad_outputs=torch.ones_like(f), create_graph=True)[0]

f_xx = torch.autograd.grad(f_x, x, torch.ones_like(f), create_graph=True)[0]

# print(type(f_x))
print('f_x')
print(f_x)

# print(type(f_xx))
print('f_xx')
print(f_xx)

# f(x, t) = x^3 + xt + t^2
x = torch.tensor([[1.0], [2.0]], requires_grad=True)
t = torch.tensor([[3.0], [4.0]], requires_grad=True)

f = x**3 + x*t + t**2

f_x = torch.autograd.grad(f, x, torch.ones_like(f), create_graph=True)[0]
f_t = torch.autograd.grad(f, t, torch.ones_like(f), create_graph=True)[0]

f_xt = torch.autograd.grad(f_x, t, torch.ones_like(f), create_graph=True)[0]
f_tx = torch.autograd.grad(f_t, x, torch.ones_like(f), create_graph=True)[0]

print(f_x, f_t)
print(f_xt, f_tx)
