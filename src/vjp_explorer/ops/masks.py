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


ENTRIES = [
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
