"""Functions that choose by a mask (a bool tensor such as x > 0) and dtype conversions of masks and values.

A mask is a constant at the point (comparisons are steps): the exact routes read its elements as 0 and 1,
so the rule picks the branch torch takes; finite differences count a mask that flips under a step as a kink.
"""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings


def _where(sp: Any, c: Any, a: Any, b: Any) -> Any:
    return sp.Piecewise((a, sp.Ne(c, 0)), (b, True))


def _masked_fill(sp: Any, x: Any, m: Any, value: Any) -> Any:
    return sp.Piecewise((value, sp.Ne(m, 0)), (x, True))


def _all_any(which: str) -> Any:
    def rule(ctx: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
        # a test of the values at the point: a constant (0 or 1), as the mask it reduces
        import numpy as np

        truth = np.vectorize(lambda e: ctx.value(e) != 0, otypes=[bool])(x)
        axis = None if x.ndim == 0 or dim is None else dim % x.ndim
        out = (np.all if which == "all" else np.any)(truth, axis=axis, keepdims=bool(keepdim))
        return np.vectorize(lambda b: ctx.sp.Integer(int(b)), otypes=[object])(np.asarray(out))

    return rule


ENTRIES = [
    OpSpec(
        "all",
        1,
        (Param("dim", "dim"), Param("keepdim", "bool")),
        "general",
        "torch.all",
        rule=_all_any("all"),
        kinks=lambda torch, x, **_: [x != 0],
        doc="whether every element is true (not 0): a mask, a constant to backward; for `if (x > 0).all():`",
        example="(x > 0).all()",
        names=spellings("all"),
    ),
    OpSpec(
        "any",
        1,
        (Param("dim", "dim"), Param("keepdim", "bool")),
        "general",
        "torch.any",
        rule=_all_any("any"),
        kinks=lambda torch, x, **_: [x != 0],
        doc="whether some element is true (not 0): a mask, a constant to backward",
        example="(x > 1).any()",
        names=spellings("any"),
    ),
    OpSpec(
        "where",
        3,
        torch="torch.where",
        exact=_where,
        doc="a where the mask is True, else b (x.where(mask, y) is torch.where(mask, x, y)); the branch not "
        "taken gets a zero gradient, yet its own backward still runs: 0 × inf = nan there",
        example="torch.where(x > 0, x, 0.1 * x)",
        names=spellings("where", method=False),
    ),
    OpSpec(
        "masked_fill",
        2,
        (Param("value", "number", True),),
        torch="torch.masked_fill",
        exact=_masked_fill,
        doc="value where the mask is True, else x (the filled elements get a zero gradient)",
        example="x.masked_fill(x < 0, 0.0)",
        names=spellings("masked_fill"),
    ),
    OpSpec(
        "float",
        1,
        (),
        "index",
        "torch.Tensor.float",
        doc="the tensor as float32 (a mask's True and False as 1 and 0)",
        example="(x > 0).float() * x",
        names=(".float",),
    ),
    OpSpec(
        "double",
        1,
        (),
        "index",
        "torch.Tensor.double",
        doc="the tensor as float64 (a mask's True and False as 1 and 0)",
        example="(x > 0).double() * x",
        names=(".double",),
    ),
]
