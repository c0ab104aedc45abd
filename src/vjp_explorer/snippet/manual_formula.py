"""The right line for a hand-written gradient, written from the formula table of `--code`
(backward_code/formulas.py) with the snippet's own names: `dprobs = dlogprobs / probs`.

The child sends the one node that read the tensor as plain data (its name, the edge, its saved values with
each tensor named as the snippet names it, the learner's name for the gradient it received); this module
checks that data and asks the table. Nothing here runs: the result is text to show.
"""

from __future__ import annotations

from typing import Any

from .checked import Malformed

MAX_DEPTH = 8  # nesting of a saved value (a list of ints is 1)


def expression(data: Any, shape: list[int]) -> str | None:
    """The right expression for the gradient of a tensor of `shape` read by the node `data` describes; None
    where the data is absent or the table cannot write that node. Raises Malformed for forged data."""
    if data is None:
        return None
    node, edge, grad, saved, edges, received = _checked(data)
    from ..backward_code.formulas import FORMULAS, At, Unwritable, lit

    entry = FORMULAS.get(node)
    if entry is None or edge >= len(edges):
        return None
    names = {}
    for value in saved.values():
        if isinstance(value, dict) and "tensor" in value:
            if value["tensor"] is None:
                return None  # a saved tensor the snippet has no name for
            names[value["tensor"]] = value["tensor"]
    at = At(grads=[grad], saved=saved, names=names, edges=edges, received=received)
    try:
        exprs = entry.rule(at)
    except (Unwritable, KeyError, TypeError, IndexError, ValueError, ZeroDivisionError):
        return None
    expr = exprs[edge] if edge < len(exprs) else None
    if expr is None:
        return None
    spread = entry.broadcasts is True or (isinstance(entry.broadcasts, tuple) and edge in entry.broadcasts)
    if spread and received and received[0] != shape:
        expr = f"({expr}).sum_to_size({lit(shape)})"  # a broadcast input's gradient is summed back
    return expr


def _checked(data: Any) -> tuple[str, int, str, dict[str, Any], list[Any], list[list[int] | None]]:
    fields = {"node", "edge", "grad", "saved", "edges", "received"}
    if type(data) is not dict or set(data) != fields:
        raise Malformed("a manual frame's formula without exactly its fields")
    node, edge, grad, saved = data["node"], data["edge"], data["grad"], data["saved"]
    if type(node) is not str or not node.isidentifier() or type(edge) is not int or edge < 0:
        raise Malformed("a manual frame's formula node is not what it should be")
    if type(grad) is not str or not grad.isidentifier():
        raise Malformed("a manual frame's formula grad is not a name")
    if type(saved) is not dict or not all(type(k) is str and k.isidentifier() for k in saved):
        raise Malformed("a manual frame's formula saved is not an object of names")
    for value in saved.values():
        _plain(value, 0)
    edges = data["edges"]
    if type(edges) is not list or not all(e is None or _edge(e) for e in edges):
        raise Malformed("a manual frame's formula edges are not what they should be")
    received = data["received"]
    if type(received) is not list or not all(_shape(r) for r in received):
        raise Malformed("a manual frame's formula received is not a list of shapes")
    return node, edge, grad, saved, edges, received


def _plain(value: Any, depth: int) -> None:
    """A saved value: a number, text, bool or None, a list of them, or a tensor by name ({"tensor": name})."""
    if depth > MAX_DEPTH:
        raise Malformed("a manual frame's formula saved value is nested too deep")
    if value is None or type(value) in (int, float, bool, str):
        return
    if type(value) is list:
        for v in value:
            _plain(v, depth + 1)
        return
    if type(value) is dict and set(value) == {"tensor"}:
        name = value["tensor"]
        if name is None or (type(name) is str and name.isidentifier()):
            return
    if type(value) is dict and set(value) == {"unreadable"} and type(value["unreadable"]) is str:
        return
    raise Malformed("a manual frame's formula saved value is not plain")


def _edge(e: Any) -> bool:
    return (
        type(e) is dict
        and set(e) == {"shape", "dtype"}
        and _shape(e["shape"])
        and e["dtype"]
        in (
            None,
            *("float16", "bfloat16", "float32", "float64"),
        )
    )


def _shape(s: Any) -> bool:
    return type(s) is list and len(s) <= 64 and all(type(n) is int and 0 <= n < 2**31 for n in s)
