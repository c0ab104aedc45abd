>>> x = torch.tensor([1.0], requires_grad=True)
>>> y = x * 2 # is_leaf = False
>>> print(y)
tensor([2.], grad_fn=<MulBackward0>)

>>> x = torch.tensor([1.0])
>>> y = x * 2
>>> print(y)
tensor([2.])
>>> y.requires_grad = True # is_leaf = True
>>> print(y)
tensor([2.], requires_grad=True)
