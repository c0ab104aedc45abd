import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True) 

# 3. 解决上述报错

## 3.1 法一
# If you want the operation to be differentiable, you can work around the limitation by cloning the leaf variable (or use a non-inplace version of the operator).

x2 = x.clone()  # clone the variable
x2 += 1  # in-place operation
print(x2)

## 3.2 法二
# If you don’t intend for the operation to be differentiable, you can use torch.no_grad:

with torch.no_grad():
    x += 1
    print(x)
    print(x.requires_grad)
print(x)
print(x.requires_grad)
