# low_level.py
# approximate sin(x) using 3rd degree polynomial
import numpy as np
import torch as T
device = T.device('cpu')

class Poly(T.nn.Module):
  # f(x) = ax^3 + bx^2 + cx + d
  def __init__(self):
    super(Poly, self).__init__()  # pre Python 3.3
    self.a = T.nn.Parameter( T.randn((1)).to(device) )
    self.b = T.nn.Parameter( T.randn((1)).to(device) )
    self.c = T.nn.Parameter( T.randn((1)).to(device) )
    self.d = T.nn.Parameter( T.randn((1)).to(device) )

  def forward(self, x):
    y = (self.a * x**3) + (self.b * x**2) + \
      (self.c * x) + self.d
    return y

T.manual_seed(1)
poly = Poly().to(device)
lo = -np.pi; hi = np.pi  # range of input vals
loss_func = T.nn.MSELoss()
optimizer = T.optim.SGD(poly.parameters(), lr=1.0e-4)
for i in range(3):
  x = (hi - lo) * T.rand((100)).to(device) + lo
  y = T.sin(x)
  optimizer.zero_grad()
  oupt = poly(x)
  loss_val = loss_func(oupt, y)
  loss_val.backward()
  optimizer.step()
  print(i, loss_val.item())
print(poly.a.grad, poly.d.grad)
