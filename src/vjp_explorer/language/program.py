"""Our own small program representation: what the parser produces and the engines run.

Nothing here is Python code: it is data, built only by the whitelisting parser.
Both the torch engine and the sympy engine interpret these nodes, so the two can
never run different programs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from types import EllipsisType
from typing import Any

Span = tuple[int, int]


@dataclass(frozen=True)
class Num:
    """A number literal (always finite)."""

    value: float
    span: Span
    integral: bool = False

    def children(self) -> tuple[Expr, ...]:
        return ()


@dataclass(frozen=True)
class Name:
    """A variable reference: a leaf, a constant or an intermediate."""

    id: str
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return ()


@dataclass(frozen=True)
class BinOp:
    """`left op right` with op one of + - * / ** @."""

    op: str
    left: Expr
    right: Expr
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def rebuild(self, kids: tuple[Expr, ...]) -> BinOp:
        return replace(self, left=kids[0], right=kids[1])


@dataclass(frozen=True)
class UnaryOp:
    """`-x`, `+x`, `~x` or `not x`."""

    op: str
    operand: Expr
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def rebuild(self, kids: tuple[Expr, ...]) -> UnaryOp:
        return replace(self, operand=kids[0])


Static = int | float | bool | str | tuple[int, ...] | None


@dataclass(frozen=True)
class Sizes:
    """A size or dim parameter read from the program's values when the call runs, as PyTorch code writes
    one: `x.view(len(x), -1)`, `y.reshape(x.shape)`, `x.sum(dim=d)`. The interpreter replaces it by the
    plain number or tuple before the step is recorded, so every route after the forward sees a static one."""

    # ints, expressions of one whole number, and Scalar("shape", x): every size of x, in order
    parts: tuple[int | Expr, ...]
    one: bool  # an int or dim parameter: one number, not a tuple
    span: Span

    def exprs(self) -> tuple[Expr, ...]:
        return tuple(p for p in self.parts if not isinstance(p, int))

    def rebuild(self, kids: tuple[Expr, ...]) -> Sizes:
        rest = iter(kids)
        return replace(self, parts=tuple(p if isinstance(p, int) else next(rest) for p in self.parts))


@dataclass(frozen=True)
class Call:
    """A whitelisted function: `f(x)`, `torch.f(x)` or `x.f()` all become this.

    `args` are the tensor operands; `params` the parse-time constants (dim, keepdim, p), or Sizes read
    when the call runs.
    """

    func: str
    args: tuple[Expr, ...]
    params: tuple[tuple[str, Static | Sizes], ...]
    span: Span

    def param(self, name: str) -> Static:
        """The value of a static parameter (None where not given)."""
        value = dict(self.params).get(name)
        assert not isinstance(value, Sizes), "Sizes are resolved by the interpreter before any route reads them"
        return value

    @property
    def sized(self) -> bool:
        """Whether a parameter is still to be read from the program's values (Sizes)."""
        return any(isinstance(v, Sizes) for _, v in self.params)

    def children(self) -> tuple[Expr, ...]:
        return self.args + tuple(e for _, v in self.params if isinstance(v, Sizes) for e in v.exprs())

    def rebuild(self, kids: tuple[Expr, ...]) -> Call:
        args, rest = kids[: len(self.args)], iter(kids[len(self.args) :])
        params = tuple(
            (n, v.rebuild(tuple(next(rest) for _ in v.exprs())) if isinstance(v, Sizes) else v) for n, v in self.params
        )
        return replace(self, args=args, params=params)


@dataclass(frozen=True)
class Compare:
    """A chain `a < b <= c`: a number for conditions of `if` and `while`, a mask (as in torch) on tensors."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return self.operands

    def rebuild(self, kids: tuple[Expr, ...]) -> Compare:
        return replace(self, operands=kids)


@dataclass(frozen=True)
class BoolOp:
    """`a and b`, `a or b`."""

    op: str
    values: tuple[Expr, ...]
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return self.values

    def rebuild(self, kids: tuple[Expr, ...]) -> BoolOp:
        return replace(self, values=kids)


@dataclass(frozen=True)
class Slice:
    """`start:stop:step` inside an index: each an integer literal, None, or an expression that gives an integer
    when it runs (a loop variable: x[i:i + 2])."""

    start: Any
    stop: Any
    step: Any

    def bounds(self) -> tuple[Any, Any, Any]:
        return (self.start, self.stop, self.step)


@dataclass(frozen=True)
class Range:
    """`range(a, b)` or `list(range(a, b))` inside an index: the list of ints it gives, its bounds integer
    literals or expressions read when it runs (`x[range(len(x)), y]`); the trace records the list."""

    start: Any
    stop: Any
    step: Any

    def bounds(self) -> tuple[Any, Any, Any]:
        return (self.start, self.stop, self.step)


# one part of an index: an int, a slice, a range, None (a new axis), `...`, a list of ints, or an expression (a
# mask, an index tensor, or an integer such as a loop variable)
IndexItem = int | Slice | Range | None | EllipsisType | tuple[int, ...] | Any


@dataclass(frozen=True)
class Index:
    """`x[...]`: the static parts checked by the parser, the rest (masks, index tensors, loop variables) as
    expressions."""

    value: Expr
    items: tuple[IndexItem, ...]
    span: Span

    def children(self) -> tuple[Expr, ...]:
        parts: list[Expr] = [self.value]
        for i in self.items:
            if is_expr(i):
                parts.append(i)  # type: ignore[arg-type]
            elif isinstance(i, Slice | Range):
                parts += [b for b in i.bounds() if is_expr(b)]
        return tuple(parts)

    def rebuild(self, kids: tuple[Expr, ...]) -> Index:
        rest = iter(kids[1:])

        def one(i: IndexItem) -> IndexItem:
            if is_expr(i):
                return next(rest)
            if isinstance(i, Slice | Range):
                return type(i)(*(next(rest) if is_expr(b) else b for b in i.bounds()))
            return i

        return replace(self, value=kids[0], items=tuple(one(i) for i in self.items))


@dataclass(frozen=True)
class Update:
    """`y[...] = value` as a value: y with those elements replaced (the assignment stores it back in y). Run out
    of place, as `y += ...` is; torch's refusal on a leaf that requires grad is kept."""

    index: Index  # y[...]: the tensor and the elements written
    value: Expr
    span: Span

    def children(self) -> tuple[Expr, ...]:
        return (self.index, self.value)

    def rebuild(self, kids: tuple[Expr, ...]) -> Update:
        return replace(self, index=kids[0], value=kids[1])  # type: ignore[arg-type]


@dataclass(frozen=True)
class Const:
    """A tensor the program makes from literals: torch.tensor([...]), ones(2, 3), randn(3), eye(2).

    `spec` is a language.values.ValueSpec (sizes checked by the parser); `dtype` None means the run's own
    floating dtype (torch's default dtype), "int64" or "bool" what torch.tensor infers or dtype= names.
    `like` is the tensor whose shape a *_like form copies (zeros_like(x)). `sizes`: the maker's number
    arguments read from the program's values (torch.zeros(len(x), 3)); the interpreter writes the spec they
    give before the step is recorded."""

    spec: Any
    dtype: str | None
    span: Span
    like: Expr | None = None
    requires_grad: bool = False  # a leaf: lifted out of the body by the parser (Program.made)
    sizes: Sizes | None = None

    def children(self) -> tuple[Expr, ...]:
        return (() if self.like is None else (self.like,)) + (() if self.sizes is None else self.sizes.exprs())

    def rebuild(self, kids: tuple[Expr, ...]) -> Const:
        like, rest = (kids[0], kids[1:]) if self.like is not None else (None, kids)
        return replace(self, like=like, sizes=self.sizes.rebuild(rest) if self.sizes is not None else None)


# the math module's functions of one number a program may call (math.sqrt(d)); each gives a Python float
MATH_FUNCTIONS = frozenset({"sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "atan", "fabs"})


@dataclass(frozen=True)
class Scalar:
    """A plain Python number read from a tensor, as PyTorch code reads one: its size (`len(x)`, `x.size(-1)`,
    `x.shape[0]`, `x.numel()`, `x.dim()`), or a `math` function of one element (`math.sqrt(d)`). A constant
    to backward, as the Python number is."""

    what: str  # len | size | numel | dim, or a math function: sqrt, exp, log, ...; shape only inside Sizes
    value: Expr
    dim: int | None
    span: Span
    count: int | None = None  # `a, b = x.size()`: the names the sizes are unpacked into (x must have as many)

    def children(self) -> tuple[Expr, ...]:
        return (self.value,)

    def rebuild(self, kids: tuple[Expr, ...]) -> Scalar:
        return replace(self, value=kids[0])


Expr = Num | Name | BinOp | UnaryOp | Call | Compare | BoolOp | Index | Update | Const | Scalar
_EXPR_TYPES = (Num, Name, BinOp, UnaryOp, Call, Compare, BoolOp, Index, Update, Const, Scalar)


def is_expr(x: Any) -> bool:
    """Whether x is an expression node (and not a static part of an index)."""
    return isinstance(x, _EXPR_TYPES)


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
    # leaves the program makes itself (x = torch.tensor([...], requires_grad=True)): name -> values.ValueSpec
    made: dict[str, Any] = field(default_factory=dict, compare=False)


def walk_exprs(expr: Expr) -> list[Expr]:
    """Every node of an expression tree, iteratively (no recursion limit to hit)."""
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack += reversed(node.children())
    return out


def transform(expr: Expr, fn: Any) -> Expr:
    """The tree rebuilt bottom-up, each node passed through fn(node) after its children were (a generic map:
    loop variables bound, drawn values fixed). Nodes whose children did not change are kept as they are."""
    kids = expr.children()
    if kids:
        new = tuple(transform(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new, kids, strict=True)):
            expr = expr.rebuild(new)  # type: ignore[union-attr]
    return fn(expr)


def iter_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement, nested ones included, in program order."""
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, If):
            stack += list(reversed(s.orelse)) + list(reversed(s.body))
        elif isinstance(s, While | For):
            stack += list(reversed(s.body))


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement evaluates itself (not those of its body)."""
    if isinstance(s, Assign | ExprStmt):
        return [s.value]
    if isinstance(s, If | While):
        return [s.test]
    return []
