# Custom Autograd function - manually define the forward and backward passes of a function 

# Define Square with custom backward
import torch
from torch.autograd import Function

class Square(Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input ** 2

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 2 * input

x = torch.tensor([3.0], requires_grad=True)
square = Square.apply
y = square(x)
y.backward()
print("Custom grad:", x.grad)  # Should be 2 * 3 = 6
