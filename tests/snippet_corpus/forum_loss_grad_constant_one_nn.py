import torch
from torch import nn
model = nn.Linear(1, 1)
print("#"*7)
print("Case 1")
print("#"*7)
# Case 1: No tensor has the grad attribute, none of the learnt gradients
# is saved
# This is a leaf, but has no grad attribute
x = torch.randn(1, 1)
print(x)
print(x.is_leaf) # True
print(x.grad) # None
# Forward pass, compute loss
out = model(x)
loss = out**2
# The following will print None, since we haven't computed any gradients
# yet. (Also because neither variable has a grad attribute!)
print(loss.grad) # None
print(x.grad) # None
# This computes the gradients of loss w.r.t the leaf nodes
# (which is just x). Since loss is a 1-element tensor, this method
# implicitly sets loss.grad to torch.ones_like(loss).
# But this setting is temporary, and is not saved because loss is
# not a leaf. So loss.grad remains at None after this call.
loss.backward()
# The following will print None since, while we did compute the
# gradients of loss w.r.t x, neither loss nor x has a grad attribute
print(loss.grad) # None
print(x.grad) # None
print("")
print("*"*7)
print("Case 2")
print("*"*7)
# Case 2: The one leaf tensor has the grad attribute, so its
# learnt gradient is saved
# This is a leaf, and has a grad attribute because we told so.
# This grad attribute is initialized to None.
y = torch.randn(1, 1, requires_grad=True)
print(y)
print(y.is_leaf) # True
print(y.grad) # None
# Forward pass, compute loss
out = model(y)
loss = out**2
loss.backward()
print(y.grad)
