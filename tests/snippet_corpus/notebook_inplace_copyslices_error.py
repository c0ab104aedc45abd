import torch

x = torch.tensor([1.,3.])
w1 = torch.tensor([[2.],[1.]],requires_grad=True)
w2 = torch.tensor([9.],requires_grad=True)
w2.is_leaf

# x
# w1——>d
#      w2——>f

d = torch.matmul(x, w1)
f = torch.matmul(d, w2)
d[:] = 4
# d是计算df/dw2梯度值依赖的节点
f.backward()
