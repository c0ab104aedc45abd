>>> import torch
>>> a = torch.tensor([1, 2, 3, 4], requires_grad=True, dtype=torch.float32)
>>> a
tensor([1., 2., 3., 4.], requires_grad=True)
>>> b = torch.tensor([1, 2, 1, 2], requires_grad=True, dtype=torch.float32)
>>> b
tensor([1., 2., 1., 2.], requires_grad=True)
>>> c = torch.clamp(a * b, 1, 5)
>>> c
tensor([1., 4., 3., 5.], grad_fn=<ClampBackward1>)
>>> d = c.sum()
>>> d
tensor(13., grad_fn=<SumBackward0>)
>>> d.backward()
>>> b.grad
tensor([1., 2., 3., 0.])
>>> a.grad
tensor([1., 2., 1., 0.])
