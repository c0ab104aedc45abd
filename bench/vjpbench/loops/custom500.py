import torch


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * (s + x * s * (1 - s))


torch.manual_seed(0)
X = torch.randn(128, 16)
Y = torch.randn(128, 1)
w1 = torch.randn(16, 32, requires_grad=True)
w2 = torch.randn(32, 1, requires_grad=True)
opt = torch.optim.Adam([w1, w2], lr=0.01)
for step in range(500):
    opt.zero_grad()
    loss = ((Swish.apply(X @ w1) @ w2 - Y) ** 2).mean()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(step, round(loss.item(), 4))
