import torch
from torch.autograd import Variable

def hook_y(grad):
    print(grad)
x = Variable(torch.ones(2, 2), requires_grad=True)
y = x + 2
z = y * y * 3
h = y.register_hook(hook_y)
out = z.mean()
out.backward()

x = Variable(torch.ones(2, 2), requires_grad=True)
y = x + 2
y.retain_grad()
z = y * y * 3
out = z.mean()
out.backward()
print(y.grad)
