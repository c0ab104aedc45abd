"""Constant folding of the program's own nodes: safe values of constant subexpressions and conditions."""

from __future__ import annotations

import math

from . import program as P


class _Undefined(Exception):
    """A constant subexpression has no finite real value; the text says why."""


def fold(node: P.Expr) -> float | None:
    """The value of a constant subexpression, computed safely; None if it is not constant.

    Raises _Undefined for 1/0 and (-8)**0.5; returns inf when the value overflows. The
    operands' sizes are estimated before a power is computed, so 9**9**9 costs nothing.
    """
    if isinstance(node, P.Num):
        return node.value
    if isinstance(node, P.UnaryOp) and node.op == "-":
        v = fold(node.operand)
        return None if v is None else -v
    if not isinstance(node, P.BinOp) or node.op not in ("+", "-", "*", "/", "**"):
        return None
    a, b = fold(node.left), fold(node.right)
    if a is None or b is None:
        return None
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "*":
        return a * b
    if node.op == "/":
        if b == 0:
            raise _Undefined("divides by zero")
        return a / b
    # node.op == "**"
    if a == 0 and b < 0:
        raise _Undefined("divides by zero (0 to a negative power)")
    if a < 0 and not b.is_integer():
        raise _Undefined("has no real value (a negative number to a fractional power)")
    if abs(a) not in (0.0, 1.0):
        size = b * math.log10(abs(a))  # log10 of the result's magnitude
        if size > 308:
            return math.inf
        if size < -308:
            return 0.0  # underflows to zero, harmlessly
    try:
        return float(a**b)
    except OverflowError:
        return math.inf


def const_truth(node: P.Expr) -> bool | None:
    """Whether a condition made only of constants is true; None if it depends on a variable."""
    if isinstance(node, P.UnaryOp) and node.op == "not":
        inner = const_truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, P.BoolOp):
        truths = [const_truth(v) for v in node.values]
        if node.op == "and":
            return False if False in truths else None if None in truths else True
        return True if True in truths else None if None in truths else False
    try:
        if isinstance(node, P.Compare):
            vals = [fold(o) for o in node.operands]
            if any(v is None for v in vals):
                return None
            pairs = zip(node.ops, vals, vals[1:], strict=False)
            return all(_COMPARE[op](a, b) for op, a, b in pairs)  # type: ignore[arg-type]
        v = fold(node)
    except _Undefined:
        return None  # the expression check reports it
    return None if v is None else v != 0


_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
