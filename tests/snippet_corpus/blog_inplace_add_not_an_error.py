import torch
x = torch.tensor([1.0], requires_grad=True)
y = x * 2
y.add_(1) # Inplace operation
z = y.sum()
z.backward() # Raises RuntimeError
print(x.grad)
