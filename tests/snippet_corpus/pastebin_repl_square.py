>>> import torch
>>> a = torch.tensor([2.0], requires_grad=True)
>>> b = a * a
>>> b
tensor([4.], grad_fn=<MulBackward0>)
>>> b.backward()
>>> a.grad
tensor([4.])
