import torch

torch.manual_seed(0)
X = torch.randn(256, 20)
Y = (X[:, 0] + X[:, 1] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
for step in range(3000):
    opt.zero_grad()
    loss = loss_fn(model(X), Y)
    loss.backward()
    opt.step()
    if step % 500 == 0:
        print(step, round(loss.item(), 4))
