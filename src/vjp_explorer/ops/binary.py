"""The elementwise functions of two or more tensors (they broadcast as torch does)."""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings


def _tie(sp: Any, a: Any, b: Any, larger: bool) -> Any:
    # at a tie torch gives each side half the gradient (derivatives.yaml: grad / 2 where self == other)
    first = a > b if larger else a < b
    return sp.Piecewise((a, first), (b, sp.Ne(a, b)), ((a + b) / 2, True))


def _atan2_kinks(torch: Any, a: Any, b: Any) -> list[Any]:
    # atan2 jumps by 2*pi where a crosses 0 with b < 0 (the branch cut)
    return [torch.where(b < 0, torch.sign(a), 0.0)]


ENTRIES = [
    OpSpec(
        "pow",
        2,
        torch="torch.pow",
        exact=lambda sp, a, b: a**b,
        operator="**",
        doc="x**p (the operator **), with a tensor or a number exponent",
        example="pow(x, 3) + pow(2, x)",
        names=spellings("pow"),
    ),
    OpSpec(
        "atan2",
        2,
        torch="torch.atan2",
        exact=lambda sp, a, b: sp.atan2(a, b),
        evaluates=("atan2",),
        kink="atan2 jumps by 2*pi across its branch cut (a = 0, b < 0)",
        kinks=_atan2_kinks,
        doc="the angle of the point (b, a): atan(a/b) in the right quadrant",
        example="atan2(a, b)",
        names=spellings("atan2"),
    ),
    OpSpec(
        "maximum",
        2,
        torch="torch.maximum",
        exact=lambda sp, a, b: _tie(sp, a, b, larger=True),
        kink="at ties torch gives each side half the gradient",
        kinks=lambda torch, a, b: [torch.sign(a - b)],
        doc="the larger of a and b, elementwise",
        example="maximum(a, b)",
        names=spellings("maximum"),
    ),
    OpSpec(
        "minimum",
        2,
        torch="torch.minimum",
        exact=lambda sp, a, b: _tie(sp, a, b, larger=False),
        kink="at ties torch gives each side half the gradient",
        kinks=lambda torch, a, b: [torch.sign(a - b)],
        doc="the smaller of a and b, elementwise",
        example="minimum(a, b)",
        names=spellings("minimum"),
    ),
    OpSpec(
        "hypot",
        2,
        torch="torch.hypot",
        exact=lambda sp, a, b: sp.sqrt(a**2 + b**2),
        doc="sqrt(a**2 + b**2)",
        example="hypot(a, b)",
        names=spellings("hypot"),
    ),
    OpSpec(
        "lerp",
        3,
        torch="torch.lerp",
        exact=lambda sp, a, b, w: a + w * (b - a),
        doc="a + w*(b - a): from a towards b by the weight w",
        example="lerp(a, b, 0.25)",
        names=spellings("lerp"),
    ),
    OpSpec(
        "addcmul",
        3,
        (Param("value", "number", default=1.0),),
        torch="torch.addcmul",
        exact=lambda sp, a, b, c, value: a + value * b * c,
        doc="a + value*b*c",
        example="addcmul(a, b, c, value=0.5)",
        names=spellings("addcmul"),
    ),
]
