"""Literal numbers of programs: number constants, named constants (math.pi, float('inf')), dotted names."""

from __future__ import annotations

import ast
import math


def dotted(node: ast.expr) -> str:
    """`torch.nn.functional` for a chain of plain attribute accesses on a name, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


# named constants a program may use wherever a number literal goes
NAMED_CONSTANTS = {
    "math.pi": math.pi,
    "math.e": math.e,
    "math.tau": math.tau,
    "torch.pi": math.pi,
    "torch.e": math.e,
    "math.inf": math.inf,
    "torch.inf": math.inf,
}


def named_constant(node: ast.expr) -> float | None:
    """math.pi, torch.pi, math.e, float('inf'), float('-inf'): their value, else None."""
    if isinstance(node, ast.Attribute):
        return NAMED_CONSTANTS.get(dotted(node))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].value.strip().lower() in ("inf", "-inf", "+inf", "infinity", "-infinity")
    ):
        return -math.inf if node.args[0].value.strip().startswith("-") else math.inf
    return None


def literal_number(node: ast.expr) -> float | None:
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        try:
            return sign * float(node.value)
        except OverflowError:
            return math.inf
    named = named_constant(node)
    return None if named is None else sign * named
