# Hooks - inspect or modify gradients
# Print gradient as it flows
import torch

x = torch.tensor([2.0], requires_grad=True)

def print_grad(grad):
    print("Gradient flowing through:", grad)

handle = x.register_hook(print_grad)

y = x**2 + 3*x
y.backward()
