"""Comparisons and logical operators on tensors: masks, as in PyTorch (`x > 0`, `m & n`, `~m`).

A mask is a constant to backward (comparisons are steps): it carries no dependence on the leaves, and the
interpreter records its value in the step (Step.fixed), which every route replays. The finite-difference
route computes it afresh instead and counts a mask that flips under a step as a kink.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ProgramError, ShapeError
from ..language import program as P
from .vals import Val, first_line

_TORCH = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne}
_PY = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def compare(it: Any, e: P.Compare, vals: list[Val]) -> Val:
    """`a < b`: a Python bool of two numbers, a bool tensor (a mask) where a side is a tensor. A chain
    `a < b < c` of tensors is `(a < b) and (b < c)` in Python, which needs single elements, as in torch."""
    if not any(isinstance(v.v, torch.Tensor) for v in vals):
        ok = all(_PY[op](float(a.v), float(b.v)) for op, a, b in zip(e.ops, vals, vals[1:], strict=False))
        return Val(ok)
    if len(e.ops) > 1:
        ok = all(_PY[op](it._scalar(a, e), it._scalar(b, e)) for op, a, b in zip(e.ops, vals, vals[1:], strict=False))
        return Val(ok)
    if it.replay_masks and id(e) in it.fixed:
        return Val(it.fixed[id(e)], {})
    a, b = vals
    mask = _apply(it, e, lambda x, y: _TORCH[e.ops[0]](x, y), a, b, e.ops[0])
    if not it.replaying:  # the forward records it; a replay must not overwrite the record
        it.fixed[id(e)] = mask
    it.on_mask(mask)
    return Val(mask, {})


def logical(it: Any, e: P.BinOp, a: Val, b: Val) -> Val:
    """`m & n`, `m | n`: torch's bitwise operators, logical on bool masks; refused on floats, as torch does."""
    fn = torch.bitwise_and if e.op == "&" else torch.bitwise_or
    return Val(_apply(it, e, fn, a, b, e.op), {})


def invert(it: Any, e: P.UnaryOp, x: Val) -> Val:
    """`~m`: logical not of a bool mask (torch refuses it on floats)."""
    t = x.v if isinstance(x.v, torch.Tensor) else None
    if t is None or t.dtype != torch.bool:
        what = "a number" if t is None else f"a {str(t.dtype).removeprefix('torch.')} tensor"
        raise it.err(
            ProgramError,
            f"'~' inverts a mask (a bool tensor such as x > 0); here it is given {what}.",
            e.span,
            "Write ~(x > 0), or 1 - m for a mask already made a float.",
        )
    it._charge(tuple(t.shape), e.span)
    return Val(~t, {})


def _apply(it: Any, e: Any, fn: Any, a: Val, b: Val, op: str) -> Any:
    try:
        shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    except RuntimeError:
        raise it.err(
            ShapeError,
            f"Shapes {list(a.shape)} and {list(b.shape)} do not broadcast for '{op}'.",
            e.span,
            "Broadcasting matches trailing dimensions; each pair must be equal or 1.",
        ) from None
    it._charge(shape, e.span)
    x, y = (v.v if isinstance(v.v, torch.Tensor) else v.v for v in (a, b))
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x, dtype=y.dtype if isinstance(x, bool) else it.dtype)
    try:
        return fn(x, y)
    except (RuntimeError, TypeError) as err:
        raise it.err(ProgramError, f"'{op}' failed: {first_line(err)}", e.span) from None
