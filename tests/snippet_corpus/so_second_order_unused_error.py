import torch
x = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
y = torch.tensor([[5., 6.], [7., 8.]], requires_grad=True)
z = x + y
u = 2*z

grads_1 = torch.autograd.grad(outputs=(u,), inputs=(z,), grad_outputs=(torch.ones(u.size()),), create_graph=True)
print(f'du_dz: {grads_1[0]}')
print(f'Requires grad attribute of du_dz: {grads_1[0].requires_grad}')

for i in range(len(grads_1)):
    grads_1[i].requires_grad_(requires_grad=True)

grads2 = torch.autograd.grad(outputs=grads_1, inputs=(z,), grad_outputs=(torch.ones(u.size()),))
print(f'du2_dz2: {grads_2[0]}')
