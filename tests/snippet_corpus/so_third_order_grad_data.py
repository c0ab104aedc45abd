import torch
x = torch.tensor(3., requires_grad=True)
y = x**2
dy_dx = torch.autograd.grad(outputs=(y,), inputs=(x,), create_graph=True)
print(f'dy_dx at x={x.data}:\t\t{dy_dx[0].data}')
d2y_dx2 = torch.autograd.grad(outputs=dy_dx, inputs=(x,), create_graph=True)
print(f'd2y_dx2 at x={x.data}:\t{d2y_dx2[0].data}')
d3y_dx3 = torch.autograd.grad(outputs=d2y_dx2, inputs=(x,))
print(f'd3y_dx3 at x={x.data}:\t{d3y_dx3[0].data}')
