"""The helper functions a backward script defines where a formula is too long for one line (formulas.py names
them per entry; script.py writes each one used, once): plain torch, no autograd, each from the mathematics.
"""

from __future__ import annotations

# Helpers: plain torch functions written into a script that uses them (a formula too long for one line).
HELPERS: dict[str, str] = {
    "gelu_grad": '''
def gelu_grad(x):
    """d gelu(x)/dx = Φ(x) + x·φ(x)"""
    return 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
''',
    "gelu_tanh_grad": '''
def gelu_tanh_grad(x):
    """d/dx of gelu's tanh form, x/2·(1 + tanh(u)) with u = √(2/π)·(x + 0.044715·x³)"""
    k = math.sqrt(2 / math.pi)
    th = torch.tanh(k * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x)
''',
    "repeat_grad": '''
def repeat_grad(g, sizes, repeats):
    """each copy of the input in x.repeat(...) adds its block of g"""
    lead = len(repeats) - len(sizes)
    shape = list(g.shape[:lead])
    for r, s in zip(repeats[lead:], sizes):
        shape += [r, s]
    g = g.reshape(shape)
    return g.sum(tuple(range(lead)) + tuple(lead + 2 * k for k in range(len(sizes))))
''',
    "prod_grad": '''
def prod_grad(g, x, dim, keepdim):
    """each element's cotangent times the product of the others (zeros included): the products to its left
    and to its right, as exclusive cumulative products"""
    if dim is None:
        return prod_grad(g.reshape(1), x.reshape(-1), 0, True).reshape(x.shape)
    if not keepdim:
        g = g.unsqueeze(dim)
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    left = torch.cat([ones, x.narrow(dim, 0, x.shape[dim] - 1)], dim).cumprod(dim)
    right = torch.cat([x.narrow(dim, 1, x.shape[dim] - 1), ones], dim).flip(dim).cumprod(dim).flip(dim)
    return g * left * right
''',
    "nll_loss_grad": '''
def nll_loss_grad(g, logp, target, weight, reduction, ignore_index, total_weight):
    """-log p[target] per sample: the cotangent lands on the target's class only, weighted, masked"""
    w = torch.ones(logp.shape[-1 if logp.dim() == 1 else 1], dtype=logp.dtype) if weight is None else weight
    safe = torch.where(target == ignore_index, 0, target)
    coef = -w[safe] * (target != ignore_index)
    coef = coef * g / total_weight if reduction == "mean" else coef * g
    dim = 0 if logp.dim() == 1 else 1
    return torch.zeros_like(logp).scatter(dim, safe.unsqueeze(dim), coef.unsqueeze(dim))
''',
    "layer_norm_grad": '''
def layer_norm_grad(g, x, normalized_shape, mean, rstd, weight):
    """y = (x - mean)·rstd·weight + bias over the last len(normalized_shape) dims"""
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    xhat = (x - mean) * rstd
    gx = g * weight if weight is not None else g
    grad_x = rstd * (gx - gx.mean(dims, keepdim=True) - xhat * (gx * xhat).mean(dims, keepdim=True))
    rows = tuple(range(x.dim() - len(normalized_shape)))
    return grad_x, (g * xhat).sum(rows), g.sum(rows)
''',
    "batch_norm_grad": '''
def batch_norm_grad(g, x, mean, invstd, weight):
    """training-mode batch norm: statistics over every dim but the channels (dim 1)"""
    dims = (0,) + tuple(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gx = g * weight.reshape(shape) if weight is not None else g
    grad_x = invstd.reshape(shape) * (gx - gx.mean(dims, keepdim=True) - xhat * (gx * xhat).mean(dims, keepdim=True))
    return grad_x, (g * xhat).sum(dims), g.sum(dims)
''',
    "batch_norm_eval_grad": '''
def batch_norm_eval_grad(g, x, running_mean, running_var, eps, weight):
    """eval-mode batch norm: (x - running_mean) / sqrt(running_var + eps) · weight, the statistics constants"""
    dims = (0,) + tuple(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    invstd = (running_var + eps).rsqrt().reshape(shape)
    xhat = (x - running_mean.reshape(shape)) * invstd
    grad_x = g * invstd * (weight.reshape(shape) if weight is not None else 1)
    return grad_x, (g * xhat).sum(dims), g.sum(dims)
''',
    "group_norm_grad": '''
def group_norm_grad(g, x, mean, rstd, weight, groups):
    """group norm: layer norm over each group of channels (and every position), then a per-channel scale"""
    n, c = x.shape[:2]
    dims = (0,) + tuple(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    xhat = (x.reshape(n, groups, -1) - mean.reshape(n, groups, 1)) * rstd.reshape(n, groups, 1)
    gx = (g * weight.reshape(shape) if weight is not None else g).reshape(n, groups, -1)
    grad = rstd.reshape(n, groups, 1) * (gx - gx.mean(-1, keepdim=True) - xhat * (gx * xhat).mean(-1, keepdim=True))
    return grad.reshape(x.shape), (g * xhat.reshape(x.shape)).sum(dims), g.sum(dims)
''',
    "avg_pool_grad": '''
def avg_pool_grad(g, x, kernel, stride, padding, divisor):
    """each output is the sum of its window over divisor: every element of the window gets g / divisor"""
    n, c = x.shape[:2]
    k = kernel[0] * kernel[1]
    cols = (g / divisor).reshape(n, c, 1, -1).expand(n, c, k, g.shape[2] * g.shape[3]).reshape(n, c * k, -1)
    return torch.nn.functional.fold(cols, x.shape[2:], kernel, padding=padding, stride=stride)
''',
    "conv2d_grad": '''
def conv2d_grad(g, x, weight, stride, padding, dilation):
    """conv2d as a matrix product over unfolded patches: out = W · cols, so both grads are matrix products"""
    n, o = g.shape[0], g.shape[1]
    k = weight.shape[2:]
    cols = torch.nn.functional.unfold(x, k, dilation=dilation, padding=padding, stride=stride)
    g2 = g.reshape(n, o, -1)
    grad_w = (g2 @ cols.transpose(1, 2)).sum(0).reshape(weight.shape)
    grad_cols = weight.reshape(o, -1).t() @ g2
    grad_x = torch.nn.functional.fold(grad_cols, x.shape[2:], k, dilation=dilation, padding=padding, stride=stride)
    return grad_x, grad_w, g.sum((0, 2, 3))
''',
    "max_pool_grad": '''
def max_pool_grad(g, x, indices):
    """each window's cotangent goes to the element its max came from (indices into each flattened plane)"""
    flat = torch.zeros(x.shape[:-2] + (x.shape[-2] * x.shape[-1],), dtype=g.dtype)
    return flat.scatter_add(-1, indices.flatten(-2), g.flatten(-2)).reshape(x.shape)
''',
    "embedding_grad": '''
def embedding_grad(g, indices, num_weights, padding_idx):
    """each looked-up row adds its cotangent to the row of the table it came from"""
    d = g.shape[-1]
    rows = g.reshape(-1, d) * (indices.reshape(-1, 1) != padding_idx)
    return torch.zeros(num_weights, d, dtype=g.dtype).index_add(0, indices.reshape(-1), rows)
''',
}
