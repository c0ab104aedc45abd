import torch
import torch.nn.functional as F

# F.relu6(x) = torch.clamp(x, 0, 6)  — identical functions
for x_val, label in [(0.0, "lower boundary"), (6.0, "upper boundary")]:
    x1 = torch.tensor(x_val, requires_grad=True)
    F.relu6(x1).backward()

    x2 = torch.tensor(x_val, requires_grad=True)
    torch.clamp(x2, 0.0, 6.0).backward()

    print(f"x={x_val} ({label}):  F.relu6={x1.grad.item()}  torch.clamp={x2.grad.item()}")

print()

# F.hardtanh(x, -1, 1) = torch.clamp(x, -1, 1)  — identical functions
for x_val, label in [(-1.0, "lower boundary"), (1.0, "upper boundary")]:
    x1 = torch.tensor(x_val, requires_grad=True)
    F.hardtanh(x1, -1.0, 1.0).backward()

    x2 = torch.tensor(x_val, requires_grad=True)
    torch.clamp(x2, -1.0, 1.0).backward()

    print(f"x={x_val} ({label}):  F.hardtanh={x1.grad.item()}  torch.clamp={x2.grad.item()}")
