"""The planted mistakes, as their authors would write them: custom torch.autograd.Functions, each with one
kind of wrong backward (the eleven kinds `vjp check` diagnoses, and a spurious nan). Source text, so that
each door can take it its own way: imported by `vjp check`, run as a snippet, planted in a program."""

from __future__ import annotations

import textwrap

FUNCTIONS = textwrap.dedent(
    """
    import torch


    def _fn(name, fwd, bwd):
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return fwd(x)

        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return bwd(x, g)

        return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                        "backward": staticmethod(backward)})


    Factor = _fn("Factor", lambda x: x ** 3, lambda x, g: 2 * x ** 2 * g)
    Sign = _fn("Sign", lambda x: x ** 3, lambda x, g: -3 * x ** 2 * g)
    Offset = _fn("Offset", lambda x: x ** 3, lambda x, g: 3 * x ** 2 * g + 1)
    Squares = _fn("Squares", lambda x: x ** 3, lambda x, g: 3 * x ** 2 * g * g)
    Zeros = _fn("Zeros", lambda x: x ** 3, lambda x, g: torch.zeros_like(x))
    Nothing = _fn("Nothing", lambda x: x ** 3, lambda x, g: None)
    Precision = _fn("Precision", lambda x: x ** 2, lambda x, g: ((x + 3e4) ** 2 - (x - 3e4) ** 2) / 6e4 * g)
    Nan = _fn("Nan", lambda x: x ** 3, lambda x, g: torch.where(torch.arange(3) == 1, torch.nan, 3 * x ** 2 * g))
    OneRow = _fn(
        "OneRow",
        lambda x: torch.cumsum(x, 0),
        lambda x, g: torch.flip(torch.cumsum(torch.flip(g, [0]), 0), [0]) + g[0] * torch.tensor([0.0, 1.0, 0.0]),
    )
    Shape = _fn("Shape", lambda x: x * 2, lambda x, g: g[:2] * 2)
    Count = _fn("Count", lambda x: x * 2, lambda x, g: (g * 2, g))


    class Transposed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, W, x):
            ctx.save_for_backward(W, x)
            return W @ x

        @staticmethod
        def backward(ctx, g):
            W, x = ctx.saved_tensors
            return torch.outer(g, x), W @ g
    """
)

# and one without a mistake, as a module of its own (x², backward 2·x·g)
SQUARE = """import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g
"""
