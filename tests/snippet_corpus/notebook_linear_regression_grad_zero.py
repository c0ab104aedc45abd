import torch

N = 10
D_in = 1
D_out = 1

_ = torch.manual_seed(42)
X = torch.randn(N, D_in)
print(f"X[:3]: {X[:3]}")

W_true = torch.tensor([[2.0]])
b_true = torch.tensor(1.0)
print(f"X.shape: {X.shape}")
print(f"W_true: {W_true}")
print(f"b_true: {b_true}")

y_true = X @ W_true + b_true
print("---- y_true[:3]:")
print(y_true[:3])

lr, epochs = 0.07, 40

_ = torch.manual_seed(42)
W, b = (
    torch.randn(D_in, D_out, requires_grad=True),
    torch.randn(1, requires_grad=True),
)
print(f"W.shape: {W.shape}")
print(f"W[:3]: {W[:3]}")
print(f"b: {b}")

for i in range(epochs):
    y_hat = X @ W + b
    loss = torch.mean((y_hat - y_true) ** 2)
    loss.backward()
    with torch.no_grad():
        W -= lr * W.grad
        b -= lr * b.grad

    W.grad.zero_()
    b.grad.zero_()
    # print(f"Epoch {i + 1}/{epochs}, Loss: {loss.item():.4f}")

print(f"Final Loss: {loss.item():.4f}")
# final W and b
# final y_hats
# true y_hats
print(f"Final W: {W}")
print(f"Final b: {b}")
print(f"Final y_hats: {y_hat}")
print(f"True y_hats: {y_true}")
