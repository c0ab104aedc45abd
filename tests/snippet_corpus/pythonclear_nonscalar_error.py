import torch
x = torch.tensor([5., 5.], requires_grad=True)
y = torch.tensor([8., 8.], requires_grad=True)
A=x*y
#calculate the gradient
A.backward()
print(x.grad)
print(y.grad)
