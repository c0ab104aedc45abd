import torch
def test_bug():
    a = torch.tensor([-1.0, 0.5, 1.0], requires_grad=True)
    l = torch.log1p(a)[a > -1].sum()  # This will include only a[1] and a[2]
    l.backward()
    print(a.grad)
if __name__ == "__main__":
    test_bug()
