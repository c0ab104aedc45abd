"""The interpreter's runtime pieces: frames, snippet functions, control-flow signals, operator tables."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any


class SnippetRaised(Exception):
    """The snippet raised, as Python with torch would: `exc` is the real exception, `node` where."""

    def __init__(self, exc: BaseException, node: ast.AST | None) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.node = node
        self.context: str | None = None  # what the tool found out about it (e.g. which tensors were freed)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
    ast.MatMult: ("@", operator.matmul),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift),
}
_INPLACE = {
    "+": operator.iadd,
    "-": operator.isub,
    "*": operator.imul,
    "/": operator.itruediv,
    "//": operator.ifloordiv,
    "%": operator.imod,
    "**": operator.ipow,
    "@": operator.imatmul,
    "&": operator.iand,
    "|": operator.ior,
    "^": operator.ixor,
    "<<": operator.ilshift,
    ">>": operator.irshift,
}
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}


class UserFunction:
    """A `def` or `lambda` of the snippet, called by the interpreter (and by torch through `as_callable`)."""

    def __init__(
        self,
        name: str,
        args: ast.arguments,
        body: list[ast.stmt] | ast.expr,
        scope: Scope,
        defaults: list[Any],
        kw_defaults: list[Any],
    ) -> None:
        self.name = name
        self.args = args
        self.body = body
        self.scope = scope
        self.defaults = defaults
        self.kw_defaults = kw_defaults

    def __repr__(self) -> str:
        return f"<function {self.name}>"


class Scope:
    """Names of one frame; lookups fall through to the enclosing frames, then the snippet's globals."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.vars: dict[str, Any] = {}
        self.parent = parent

    def find(self, name: str) -> tuple[bool, Any]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return True, scope.vars[name]
            scope = scope.parent
        return False, None


def bind_arguments(
    fn: UserFunction, args: list[Any], kwargs: dict[str, Any], frame: Scope, node: ast.AST | None
) -> None:
    """Bind a call's arguments to the parameters of a snippet function, as Python does."""
    a = fn.args
    names = [p.arg for p in a.args]
    if len(args) > len(names) and a.vararg is None:
        raise SnippetRaised(
            TypeError(f"{fn.name}() takes {len(names)} positional arguments but {len(args)} were given"), node
        )
    for n, v in zip(names, args, strict=False):
        frame.vars[n] = v
    if a.vararg is not None:
        frame.vars[a.vararg.arg] = tuple(args[len(names) :])
    extra = {}
    for k, v in kwargs.items():
        if k in names or any(p.arg == k for p in a.kwonlyargs):
            if k in frame.vars:
                raise SnippetRaised(TypeError(f"{fn.name}() got multiple values for argument '{k}'"), node)
            frame.vars[k] = v
        elif a.kwarg is not None:
            extra[k] = v
        else:
            raise SnippetRaised(TypeError(f"{fn.name}() got an unexpected keyword argument '{k}'"), node)
    if a.kwarg is not None:
        frame.vars[a.kwarg.arg] = extra
    first_default = len(names) - len(fn.defaults)
    for i, n in enumerate(names):
        if n not in frame.vars:
            if i >= first_default:
                frame.vars[n] = fn.defaults[i - first_default]
            else:
                raise SnippetRaised(TypeError(f"{fn.name}() missing 1 required positional argument: '{n}'"), node)
    for p, d in zip(a.kwonlyargs, fn.kw_defaults, strict=True):
        if p.arg not in frame.vars:
            if d is None:
                raise SnippetRaised(TypeError(f"{fn.name}() missing 1 required keyword-only argument: '{p.arg}'"), node)
            frame.vars[p.arg] = d
