"""The elementwise functions of two or more tensors (they broadcast as torch does)."""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings


def _tie(sp: Any, a: Any, b: Any, larger: bool) -> Any:
    # at a tie torch gives each side half the gradient (derivatives.yaml: grad / 2 where self == other)
    first = a > b if larger else a < b
    return sp.Piecewise((a, first), (b, sp.Ne(a, b)), ((a + b) / 2, True))


def _rounded(sp: Any, q: Any, mode: Any) -> Any:
    from . import steps  # imports sympy: only when an exact rule runs

    # torch's backward of a rounded quotient is 0 everywhere (derivatives.yaml: div with rounding_mode)
    return q if mode is None else steps.floor(q) if mode == "floor" else steps.trunc(q)


def _quotient_kinks(mode: str) -> Any:
    # the rounded quotient changes exactly where a remainder jumps
    return lambda torch, a, b, **_: [torch.div(a, b, rounding_mode=mode)]


def _div_kinks(torch: Any, a: Any, b: Any, rounding_mode: Any = None, **_: Any) -> list[Any]:
    return [] if rounding_mode is None else [torch.div(a, b, rounding_mode=rounding_mode)]


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
    OpSpec(
        "add",
        2,
        (Param("alpha", "number", default=1.0),),
        torch="torch.add",
        exact=lambda sp, a, b, alpha: a + alpha * b,
        doc="a + alpha*b (the operator + for alpha=1)",
        example="torch.add(a, b, alpha=2)",
        names=spellings("add")[1:],
    ),
    OpSpec(
        "sub",
        2,
        (Param("alpha", "number", default=1.0),),
        torch="torch.sub",
        exact=lambda sp, a, b, alpha: a - alpha * b,
        doc="a - alpha*b (the operator - for alpha=1)",
        example="torch.sub(a, b)",
        names=(*spellings("sub")[1:], "torch.subtract", ".subtract"),
    ),
    OpSpec(
        "mul",
        2,
        torch="torch.mul",
        exact=lambda sp, a, b: a * b,
        doc="a*b (the operator *)",
        example="torch.mul(a, b)",
        names=(*spellings("mul")[1:], "torch.multiply", ".multiply"),
    ),
    OpSpec(
        "div",
        2,
        (Param("rounding_mode", "choice", choices=("trunc", "floor")),),
        torch="torch.div",
        exact=lambda sp, a, b, rounding_mode=None: _rounded(sp, a / b, rounding_mode),
        kink="with rounding_mode the quotient is a step function: torch takes its derivative as 0 everywhere",
        kinks=_div_kinks,
        doc="a/b (the operator /); rounded toward zero ('trunc') or down ('floor') with rounding_mode",
        example="torch.div(a, b, rounding_mode='floor')",
        names=(*spellings("div")[1:], "torch.divide", ".divide", "torch.true_divide", ".true_divide"),
    ),
    OpSpec(
        "remainder",
        2,
        torch="torch.remainder",
        exact=lambda sp, a, b: a - b * _rounded(sp, a / b, "floor"),
        kink="a - b*floor(a/b): it jumps where a/b crosses an integer; torch takes floor's derivative as 0",
        kinks=_quotient_kinks("floor"),
        doc="the remainder with the sign of b, as Python's % (the operator %)",
        example="remainder(a, 2.0)",
        names=spellings("remainder"),
    ),
    OpSpec(
        "fmod",
        2,
        torch="torch.fmod",
        exact=lambda sp, a, b: a - b * _rounded(sp, a / b, "trunc"),
        kink="a - b*trunc(a/b): it jumps where a/b crosses an integer; torch takes trunc's derivative as 0",
        kinks=_quotient_kinks("trunc"),
        doc="the remainder with the sign of a, as C's fmod",
        example="fmod(a, 2.0)",
        names=spellings("fmod"),
    ),
    OpSpec(
        "addcdiv",
        3,
        (Param("value", "number", default=1.0),),
        torch="torch.addcdiv",
        exact=lambda sp, a, b, c, value: a + value * b / c,
        doc="a + value*b/c",
        example="addcdiv(a, b, c, value=0.5)",
        names=spellings("addcdiv"),
    ),
]
