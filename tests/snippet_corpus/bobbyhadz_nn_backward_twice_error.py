import torch

in_dim, out_dim = (5, 2)

inputs = torch.randn(in_dim)

target = torch.tensor([1, 2], dtype=torch.float32)

model = torch.nn.Linear(in_dim, out_dim, bias=True)

out = model(inputs)

loss = torch.nn.CrossEntropyLoss()

computed_loss = loss(out, target)

computed_loss.backward()

# ⛔️ RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.
computed_loss.backward()

for p in model.parameters():
    print(p.grad)
