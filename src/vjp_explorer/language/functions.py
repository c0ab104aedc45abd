"""The whitelist of functions: names, arities and static parameters.

The language layer knows only what a function accepts; the engines hold how
torch and sympy compute it. A name that is not here does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """A parse-time constant parameter: `dim`, `keepdim`, `p`, ..."""

    name: str
    kind: str  # "dim" (int), "dims" (int or tuple of ints), "bool", "number"
    required: bool = False


@dataclass(frozen=True)
class FunctionSpec:
    """What one whitelisted function accepts and how it behaves structurally."""

    name: str
    tensors: int  # tensor operands (the receiver of a method call is the first)
    params: tuple[Param, ...] = ()
    kind: str = "elementwise"  # elementwise | reduction | matmul | transpose | softmax | detach
    doc: str = ""


_DIMS = (Param("dim", "dims"), Param("keepdim", "bool"))

_SPECS = [
    FunctionSpec("log", 1, doc="natural logarithm"),
    FunctionSpec("exp", 1, doc="e**x"),
    FunctionSpec("sin", 1),
    FunctionSpec("cos", 1),
    FunctionSpec("tan", 1),
    FunctionSpec("tanh", 1),
    FunctionSpec("sigmoid", 1, doc="1/(1+exp(-x))"),
    FunctionSpec("relu", 1, doc="max(x, 0); derivative 0 at 0, as in torch"),
    FunctionSpec("sqrt", 1),
    FunctionSpec("abs", 1, doc="|x|; derivative sign(x), 0 at 0, as in torch"),
    FunctionSpec("pow", 2, doc="x**p"),
    FunctionSpec("sum", 1, _DIMS, "reduction"),
    FunctionSpec("mean", 1, _DIMS, "reduction"),
    FunctionSpec("prod", 1, (Param("dim", "dim"), Param("keepdim", "bool")), "reduction"),
    FunctionSpec(
        "norm",
        1,
        (Param("p", "number"), Param("dim", "dims"), Param("keepdim", "bool")),
        "reduction",
        "p-norm (default 2)",
    ),
    FunctionSpec("matmul", 2, kind="matmul", doc="matrix product, same as @"),
    FunctionSpec("mm", 2, kind="matmul", doc="matrix product of 2-D tensors"),
    FunctionSpec(
        "transpose",
        1,
        (Param("dim0", "dim", True), Param("dim1", "dim", True)),
        "transpose",
    ),
    FunctionSpec("t", 1, kind="transpose", doc="transpose of a tensor of at most 2 dims"),
    FunctionSpec("softmax", 1, (Param("dim", "dim", True),), "softmax"),
    FunctionSpec("log_softmax", 1, (Param("dim", "dim", True),), "softmax"),
    FunctionSpec("detach", 1, kind="detach", doc="the value, cut from the graph (as .data)"),
]

FUNCTIONS: dict[str, FunctionSpec] = {s.name: s for s in _SPECS}

# attributes that are not calls: x.T, x.data
ATTRIBUTES = {"T": "t", "data": "detach"}

ELEMENTWISE = frozenset(s.name for s in _SPECS if s.kind == "elementwise" and s.tensors == 1)


def function_list() -> str:
    """The names a user can call, for error messages."""
    return ", ".join(sorted(FUNCTIONS))
