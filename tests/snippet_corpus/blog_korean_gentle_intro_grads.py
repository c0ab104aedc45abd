import torch

a = torch.tensor([2., 3.], requires_grad=True)
b = torch.tensor([6., 4.], requires_grad=True)

Q = 3*a**3 - b**2

grad = torch.tensor([1., 1.])

Q.backward(gradient=grad)

print(a.grad, b.grad)
# tensor([36., 81.]) tensor([-12., -8.])
# 손계산과 동일한 결과가 나오는 것을 볼 수 있다.
