"""Our own small program representation: what the parser produces and the engines run.

Nothing here is Python code: it is data, built only by the whitelisting parser.
Both the torch engine and the sympy engine interpret these nodes, so the two can
never run different programs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Span = tuple[int, int]


@dataclass(frozen=True)
class Num:
    """A number literal (always finite)."""

    value: float
    span: Span
    integral: bool = False


@dataclass(frozen=True)
class Name:
    """A variable reference: a leaf, a constant or an intermediate."""

    id: str
    span: Span


@dataclass(frozen=True)
class BinOp:
    """`left op right` with op one of + - * / ** @."""

    op: str
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True)
class UnaryOp:
    """`-x`, `+x` or `not x`."""

    op: str
    operand: Expr
    span: Span


Static = int | float | bool | str | tuple[int, ...] | None


@dataclass(frozen=True)
class Call:
    """A whitelisted function: `f(x)`, `torch.f(x)` or `x.f()` all become this.

    `args` are the tensor operands; `params` the parse-time constants (dim, keepdim, p).
    """

    func: str
    args: tuple[Expr, ...]
    params: tuple[tuple[str, Static], ...]
    span: Span

    def param(self, name: str) -> Static:
        """The value of a static parameter (None where not given)."""
        return dict(self.params).get(name)


@dataclass(frozen=True)
class Compare:
    """A chain `a < b <= c`, for conditions of `if` and `while`."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class BoolOp:
    """`a and b`, `a or b`."""

    op: str
    values: tuple[Expr, ...]
    span: Span


Expr = Num | Name | BinOp | UnaryOp | Call | Compare | BoolOp


@dataclass(frozen=True)
class Assign:
    """`name = value` (augmented assignments are lowered to this)."""

    target: str
    value: Expr
    span: Span
    augmented: bool = False  # written `y += ...`: run out of place, as `y = y + ...`


@dataclass(frozen=True)
class ExprStmt:
    """A bare expression: allowed only as the last statement, where it is the output."""

    value: Expr
    span: Span


@dataclass(frozen=True)
class If:
    """`if cond: ... else: ...`; the branch is chosen by the value at these inputs."""

    test: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class While:
    """`while cond: ...`, bounded by the iteration limit."""

    test: Expr
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class For:
    """`for i in range(...)`: the loop variable is a plain integer, not a tensor."""

    var: str
    start: int
    stop: int
    step: int
    body: tuple[Stmt, ...]
    span: Span


Stmt = Assign | ExprStmt | If | While | For


@dataclass(frozen=True)
class Program:
    """A parsed program: statements plus what the parser learned about its names."""

    source: str
    body: tuple[Stmt, ...]
    free: tuple[str, ...]  # names read before any assignment, in order of first use
    assigned: tuple[str, ...]  # names assigned somewhere, in order of first assignment
    output: str  # the variable holding the output
    first_use: dict[str, Span] = field(default_factory=dict, compare=False)
    has_control_flow: bool = False
    synthetic_output: bool = False  # the output is a bare final expression, named by us (y, out, ...)
    loop_vars: tuple[str, ...] = ()
    # when a bare final expression could not be named y (the program uses y): which name it got and why
    output_note: str | None = None


def walk_exprs(expr: Expr) -> list[Expr]:
    """Every node of an expression tree, iteratively (no recursion limit to hit)."""
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, BinOp):
            stack += [node.right, node.left]
        elif isinstance(node, UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, Call):
            stack += list(reversed(node.args))
        elif isinstance(node, Compare):
            stack += list(reversed(node.operands))
        elif isinstance(node, BoolOp):
            stack += list(reversed(node.values))
    return out
