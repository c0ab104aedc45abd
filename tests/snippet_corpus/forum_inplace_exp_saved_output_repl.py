>>> import torch
>>> t = torch.arange (3.0, requires_grad = True)
>>> u = 2 * t                             # (so it won't be a leaf variable)
>>> uexp = u.exp()                        # uexp is the gradient of u.exp()
>>> loss = uexp.sum()                     # (some dummy loss)
>>> u[0] = 666                            # inplace modification of u
>>> loss.backward (retain_graph = True)   # okay
>>> uexp[0] = 666                         # inplace modification of uexp
>>> loss.backward()
