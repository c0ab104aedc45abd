import torch as pt
x = pt.tensor(1., dtype=pt.float, requires_grad=True)
print(type(x))
print(x)

x = pt.tensor(1, dtype=pt.int, requires_grad=True)
print(type(x))
print(x)
