import torch

x = torch.tensor(5.0, requires_grad=True)
x

y = x ** 3

y

y.backward()

x.grad

y.backward()
x.grad
