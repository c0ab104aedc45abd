import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 10)
y = x.sum(1, keepdim=True)
for step in range(3000):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    if step % 1000 == 0:
        print(step, round(loss.item(), 4))
