# A two-layer net's backward, written by hand after autograd's (docs/manual.md): one line is wrong.
import torch

torch.manual_seed(0)
x = torch.randn(8, 4)
y = torch.randn(8, 3)
W1 = torch.randn(4, 5, requires_grad=True)
b1 = torch.zeros(5, requires_grad=True)
W2 = torch.randn(5, 3, requires_grad=True)
b2 = torch.zeros(3, requires_grad=True)
h_pre = x @ W1 + b1
h = torch.tanh(h_pre)
out = h @ W2 + b2
loss = ((out - y) ** 2).mean()
loss.backward()

dout = 2 * (out - y) / out.numel()
dW2 = h.T @ dout
db2 = dout.sum(0)
dh = dout @ W2.T
dh_pre = dh * (1 - h)
dW1 = x.T @ dh_pre
db1 = dh_pre.sum(0)
