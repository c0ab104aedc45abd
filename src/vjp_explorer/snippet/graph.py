"""The backward graph of one snippet call: engine/backward_graph.py's probe, each node tied to its statement.

Each node is tied to the statement that created it through the replay's records, and to the snippet's name for
the value it made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine.backward_graph import GraphProbe

if TYPE_CHECKING:
    from .interp import Interpreter


def graph_probe(it: Interpreter, outs: list[Any], name_of: Callable[[Any], str]) -> GraphProbe:
    """A probe on the graph behind `outs`, naming leaves with `name_of` and lines through the replay."""

    def describe(node: Any) -> dict[str, Any]:
        leaf = getattr(node, "variable", None)
        line, source = statement(it, node)
        return {
            "leaf": None if leaf is None else name_of(leaf),
            "value_of": _bound_name(it, _made(it, node)),
            "line": line,
            "source": source,
        }

    return GraphProbe(outs, describe)


def _made(it: Interpreter, node: Any) -> Any:
    """The tensor whose grad_fn is `node`, among those the snippet recorded."""
    trace = it.replay
    for key in trace.made_by if trace is not None else ():
        t = trace.alive.get(key[0])
        if t is not None and t.grad_fn is node:
            return t
    return None


def _bound_name(it: Interpreter, t: Any) -> str | None:
    """The snippet's global name for a tensor, if one is bound to it."""
    if t is None:
        return None
    return next((name for name, value in it.globals.vars.items() if value is t), None)


def statement(it: Interpreter, node: Any) -> tuple[int | None, str | None]:
    trace = it.replay
    if trace is None:
        return None, None
    for key, rec in trace.made_by.items():
        t = trace.alive.get(key[0])
        if t is not None and t.grad_fn is node and rec.line:
            lines = it.src.original.split("\n")
            return rec.line, (lines[rec.line - 1].strip() if 0 < rec.line <= len(lines) else None)
    return None, None
