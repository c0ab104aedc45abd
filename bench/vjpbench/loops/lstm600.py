import torch

torch.manual_seed(0)
vocab, tags, dim = 20, 5, 16
emb = torch.nn.Embedding(vocab, dim)
lstm = torch.nn.LSTM(dim, dim, batch_first=True)
head = torch.nn.Linear(dim, tags)
params = [*emb.parameters(), *lstm.parameters(), *head.parameters()]
opt = torch.optim.SGD(params, lr=0.1)
words = torch.randint(0, vocab, (8, 12))
labels = words % tags
for step in range(600):
    opt.zero_grad()
    out, _ = lstm(emb(words))
    loss = torch.nn.functional.cross_entropy(head(out).reshape(-1, tags), labels.reshape(-1))
    loss.backward()
    opt.step()
    if step % 200 == 0:
        print(step, round(loss.item(), 4))
