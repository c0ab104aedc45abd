import torch
a = torch.tensor([1.],requires_grad=True)
b = torch.tensor([2.],requires_grad=True)
c = torch.mul(a,b)
c.backward()
print(a.grad,b.grad)
# tensor([2.]) tensor([1.])

# tensor类型需要为float。
a = torch.tensor([1,2,3],dtype=torch.float,requires_grad=True)
b = torch.tensor([2,2,3],dtype=torch.float,requires_grad=True)
c = torch.mul(a,b)
gradient = torch.ones_like(a)
c.backward(gradient)
print(a.grad,b.grad)
# tensor([2., 2., 3.]) tensor([1., 2., 3.])
