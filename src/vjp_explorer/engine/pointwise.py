"""Which traced programs compute element by element, so that a span of elements can be run on its own.

Each output element comes from the same elements of the inputs: the elementwise route evaluates such a
program's derivative a span at a time, and the adjoint check replays it so. No sympy here, so that the
autodiff checks can ask without importing it.
"""

from __future__ import annotations

from ..language import program as P
from ..ops import REGISTRY
from .interpreter import Step

_ELEMENTWISE_CALLS = frozenset(s.name for s in REGISTRY.values() if s.elementwise and s.exact is not None)


def is_elementwise(steps: list[Step], deps: dict[str, str]) -> bool:
    """True if every op is elementwise and the output depends on each leaf diagonally."""
    if any(kind != "diag" for kind in deps.values()):
        return False
    for s in steps:
        for node in P.walk_exprs(s.expr):
            if isinstance(node, P.BinOp) and node.op == "@":
                return False
            if isinstance(node, P.Call) and node.func not in _ELEMENTWISE_CALLS:
                return False
            if isinstance(node, P.Compare | P.BoolOp | P.Index | P.Update | P.Const):  # masks, picks, made tensors
                return False
            if isinstance(node, P.BinOp | P.UnaryOp) and node.op in ("&", "|", "~"):
                return False
    return True
