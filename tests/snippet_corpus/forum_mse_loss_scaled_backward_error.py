import torch
x = torch.tensor(torch.tensor([1.,2.,3.,4.,5.]))
x.requires_grad_(True)
target = torch.tensor(torch.tensor([5.,4.,3.,2.,1.]))
out = torch.nn.functional.mse_loss(x, target, reduction = 'mean')
out.backward(torch.tensor(float(2.)))
print(x.grad)
# the outpu is tensor([-3.2, -1.6, 0.0, 1.6, 3.2])
# besides, if I exec like this: out.backward(torch.tensor([2,3,4,5,6])), I will get a RuntimeError.
out.backward(torch.tensor([2,3,4,5,6]))
