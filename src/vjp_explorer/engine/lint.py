"""The singularity lint: where, at these values, an operation's derivative is infinite or undefined.

The trace is run again (no grad, the run's dtype) with each operation's operands remembered; an operation
whose derivative has a singularity where an operand is (log or sqrt at 0, a negative power of 0, division
by 0, the log or a fractional power of a negative number) is named with the elements where it happens.
This is the cause; a nan or inf in .grad (or one that a zero v hides) is the effect.
"""

from __future__ import annotations

from typing import Any

import torch

from ..language import program as P
from ..result import element_label
from .interpreter import Step, Val
from .nonfinite import _Recorder

MAX_FINDINGS = 4
MAX_ELEMENTS = 4


def _where(mask: Any, name: str) -> str:
    """`c[0], c[2]` for the first elements of a mask over an operand named `name`."""
    flat = mask.reshape(-1).nonzero().reshape(-1)
    shown = [element_label(name, tuple(mask.shape), int(k)) for k in flat[:MAX_ELEMENTS]]
    more = int(flat.numel()) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def singularities(
    steps: list[Step], leaves: dict[str, Any], consts: dict[str, Any], dtype: torch.dtype, source: str
) -> list[str]:
    """One sentence per operation whose derivative is infinite or undefined at some element here."""
    rec = _Recorder(dtype)
    env = {n: Val(t.detach()) for n, t in {**leaves, **consts}.items()}
    with torch.no_grad():
        for s in steps:
            rec.fixed = s.fixed  # the masks and made tensors of the forward
            env[s.target] = rec.value_of(s.expr, env)
    found: list[str] = []
    seen: set[str] = set()  # the same text twice (sqrt(x) - sqrt(x)) is named once
    for expr, _val in rec.made.values():
        if len(found) >= MAX_FINDINGS:
            break
        if not isinstance(expr, P.Call | P.BinOp) or source[expr.span[0] : expr.span[1]] in seen:
            continue
        operands = [expr.left, expr.right] if isinstance(expr, P.BinOp) else list(expr.args)
        vals = [rec.made[id(a)][1].v if id(a) in rec.made else None for a in operands]
        if not vals or not all(isinstance(v, torch.Tensor | float | int) for v in vals):
            continue
        text = source[expr.span[0] : expr.span[1]]
        names = [source[a.span[0] : a.span[1]] for a in operands]
        names = [n if n.isidentifier() else f"({n})" for n in names]
        x = torch.as_tensor(vals[0])
        why = None
        kind = expr.func if isinstance(expr, P.Call) else expr.op
        if kind in ("log", "sqrt"):
            if bool((x == 0).any()):
                deriv = "1/x" if kind == "log" else "1/(2·sqrt(x))"
                why = f"{text}: its derivative {deriv} is infinite where {_where(x == 0, names[0])} is 0"
            elif bool((x < 0).any()):
                why = f"{text} of a negative number at {_where(x < 0, names[0])}: nan, no real derivative"
        elif kind == "/" and len(vals) > 1:
            b = torch.as_tensor(vals[1])
            if bool((b == 0).any()):
                why = f"{text}: division by 0 where {_where(b == 0, names[1])} is 0 (d/da = 1/b, d/db = -a/b²)"
        elif kind in ("**", "pow") and len(vals) > 1:
            p = torch.as_tensor(vals[1], dtype=x.dtype)
            x_, p_ = torch.broadcast_tensors(x, p)
            zero = (x_ == 0) & (p_ < 1) & (p_ != 0)
            neg = (x_ < 0) & (p_ != torch.round(p_))
            if bool(zero.any()):
                why = (
                    f"{text}: d(x**p)/dx = p·x**(p-1) is infinite at x = 0 for p < 1, here at {_where(zero, names[0])}"
                )
            elif bool(neg.any()):
                why = f"{text}: a negative number to a fractional power at {_where(neg, names[0])}: nan"
        if why:
            seen.add(text)
            found.append(why)
    return found


__all__ = ["singularities"]
