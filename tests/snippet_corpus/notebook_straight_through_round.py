import torch

a = torch.tensor([1, 2, 4.], requires_grad = True)
print('{0: <7}'.format('a:'), a.grad)

out = a.sigmoid()
print('{0: <7}'.format('out:'),out)
out.sum().backward()
print('{0: <7}'.format('a.grad:'),a.grad)

## add detach
c = out.detach()
print('{0: <7}'.format('c:'),c)

# c.sum().backward() # can not backward

# cutoff backward by detach
def round_pass(x):
    y = x.round()
    y_grad = x
    return y.detach() - y_grad.detach() + y_grad

a = torch.tensor([1, 2, 4.5], requires_grad = True)
a = 2 * a
m = round_pass(a)
m.sum().backward()
print(a,'\n',a.grad)

print("*"*60)
x = torch.tensor([1, 2, 4.5], requires_grad = True)
y = torch.tensor([1, 2, 4.5], requires_grad = True)
z = round_pass(x) + y
z.sum().backward()
print('{0:<7}'.format("z:"), x)
print('{0:<7}'.format("x.grad:"), x.grad)
print('{0:<7}'.format("y.grad:"), x.grad)
