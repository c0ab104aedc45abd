"""Tensors made in a program: torch.tensor([...]), ones, zeros, full, eye, arange, linspace, rand, randn and
the *_like forms, with dtype= and requires_grad=.

A mixin of the parser (language/parser.py). Every argument is a literal, so the size is known and checked
against the limits here, before anything is allocated (the value language's own checks: values.py). A
top-level `x = torch.tensor([...], requires_grad=True)` (or `.requires_grad_()`) makes a leaf: the parser
lifts it out of the body into Program.made, and the run binds it as it binds a `--x` option.
"""

from __future__ import annotations

import ast
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import LimitError, Origin, VjpError
from . import program as P
from .literals import dotted, literal_number
from .values import ValueSpec, from_nested, generator_spec

if TYPE_CHECKING:
    from ..limits import Limits

SIZED = ("ones", "zeros", "rand", "randn", "empty")
MAKERS = (*SIZED, "tensor", "as_tensor", "full", "eye", "arange", "linspace")
LIKE = ("ones_like", "zeros_like", "full_like", "rand_like", "randn_like", "empty_like")
# dtype= spellings -> the names engine/constructors.py knows
DTYPE_NAMES = {
    "float": "float32",
    "float32": "float32",
    "float64": "float64",
    "double": "float64",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "long": "int64",
    "int64": "int64",
    "int": "int32",
    "int32": "int32",
    "bool": "bool",
}
FLOATING = ("float32", "float64", "float16", "bfloat16")


def maker_name(func: ast.expr) -> str | None:
    """`torch.ones`, `ones`, `torch.zeros_like` -> ones, ones, zeros_like; None for anything else."""
    name = dotted(func)
    base = name.removeprefix("torch.")
    return base if "." not in base and base in (*MAKERS, *LIKE) else None


def dtype_name(node: ast.expr) -> str | None:
    """`torch.float64` (or `torch.double`, a string 'float64') -> 'float64'; None if it names no dtype."""
    text = dotted(node) if isinstance(node, ast.Attribute) else ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    return DTYPE_NAMES.get(text.removeprefix("torch."))


class ConstructorParser:
    """The constructor part of the program parser."""

    limits: Limits
    src: str

    if TYPE_CHECKING:  # given by the parser

        def err(
            self, message: str, node: ast.AST | P.Span | None, hint: str | None = None, cls: type[VjpError] = ...
        ) -> VjpError: ...

        def _expr(self, node: ast.expr) -> P.Expr: ...

        def span(self, node: ast.AST) -> P.Span: ...

        def _whole_shape(self, n: ast.expr) -> bool: ...

    def _constructor(self, name: str, node: ast.Call, sp: P.Span) -> P.Const:
        kw = self._maker_keywords(name, node)
        if name in LIKE:
            return self._like(name, node, sp, kw)
        if name == "empty":
            raise self.err(
                "torch.empty() holds uninitialised memory: its numbers are whatever was there, so nothing can be "
                "checked against them.",
                node,
                "Use torch.zeros(...) or torch.ones(...).",
            )
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.err("'*' unpacking is not part of the language.", a)
        if name in ("tensor", "as_tensor"):
            if len(node.args) != 1:
                raise self.err(f"torch.{name}() takes one value: a number or a (nested) list of numbers.", node)
            spec, inferred = self._data(node.args[0])
            sizes = None
        else:
            spec, inferred, sizes = self._generated(name, node)
        dtype = kw.get("dtype", inferred)
        grad = bool(kw.get("requires_grad", False))
        if sizes is not None:
            if grad:
                raise self.err(
                    f"torch.{name}(..., requires_grad=True) makes a leaf, whose shape is needed before the run: "
                    "write its sizes as integer literals.",
                    node,
                )
            return P.Const(spec, dtype, sp, None, False, sizes)
        if grad and dtype not in (None, *FLOATING):
            raise self.err(
                f"Only tensors of floating point dtype can require gradients (torch's words); this one is {dtype}.",
                node,
                "Write the numbers with a decimal point (torch.tensor([1.0, 2.0], requires_grad=True)).",
            )
        return P.Const(spec, dtype, sp, None, grad)

    def _maker_keywords(self, name: str, node: ast.Call) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg == "dtype":
                d = dtype_name(k.value)
                if d is None:
                    raise self.err(
                        f"{name}(): dtype= must name a torch dtype: torch.float32, torch.float64, torch.long, "
                        "torch.bool, ...",
                        k.value,
                    )
                out["dtype"] = d
            elif k.arg == "requires_grad":
                if not (isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool)):
                    raise self.err(f"{name}(): requires_grad must be True or False.", k.value)
                out["requires_grad"] = k.value.value
            elif k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value == "cpu":
                continue  # where tensors live is the run's --device
            else:
                raise self.err(
                    f"{name}() has no keyword {k.arg!r} here (dtype= and requires_grad= are the ones it takes).",
                    k.value if k.arg is not None else node,
                )
        return out

    def _like(self, name: str, node: ast.Call, sp: P.Span, kw: dict[str, Any]) -> P.Const:
        want = 2 if name == "full_like" else 1
        if len(node.args) != want:
            raise self.err(f"torch.{name}() takes {'x, fill_value' if want == 2 else 'x'}.", node)
        if name == "empty_like":
            raise self.err("torch.empty_like() holds uninitialised memory.", node, "Use torch.zeros_like(x).")
        args: tuple[float, ...] = ()
        if want == 2:
            fill = literal_number(node.args[1])
            if fill is None or math.isnan(fill):
                raise self.err(f"torch.{name}(): fill_value must be a number literal.", node.args[1])
            args = (fill,)
        if kw.get("requires_grad"):
            raise self.err(f"torch.{name}(..., requires_grad=True): write the leaf with its own shape instead.", node)
        spec = ValueSpec(name, (), None, name.removesuffix("_like"), args)
        return P.Const(spec, kw.get("dtype"), sp, self._expr(node.args[0]))

    def _generated(self, name: str, node: ast.Call) -> tuple[ValueSpec, str | None, P.Sizes | None]:
        args = list(node.args)
        if name in SIZED or name == "full":
            fill = []
            if name == "full":
                if len(args) != 2:
                    raise self.err("torch.full() takes a size and a fill value: torch.full((2, 3), 0.5).", node)
                fill = [args.pop()]
            if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
                args = list(args[0].elts)
            args += fill
        read = [a for a in (args[:-1] if name == "full" else args) if literal_number(a) is None]
        if read and not any(isinstance(a, ast.Constant) and not isinstance(a.value, int | float) for a in args):
            return self._read_sizes(name, node, args)  # torch.zeros(len(x), 3): sizes read when it runs
        nums = []
        for a in args:
            v = literal_number(a)
            if v is None or not math.isfinite(v) and not (name == "full" and a is args[-1]):
                like = (
                    f" (for a tensor shaped like x: torch.{name}_like(x))" if name in ("zeros", "ones", "full") else ""
                )
                raise self.err(f"torch.{name}() takes number literals here{like}.", a)
            nums.append(v)
        integral = all(_int_literal(a) for a in args)
        text = self.src[slice(*self.span(node))]
        try:
            spec = generator_spec(name, tuple(nums), text, Origin(f"torch.{name}()"), self.limits)
        except VjpError as e:  # pointed at the call in the program instead
            raise self.err(e.message, node, e.hint, cls=type(e)) from None
        # torch.arange(5) counts in integers, as torch does; every other maker gives the default float dtype
        return spec, "int64" if name == "arange" and integral else None, None

    def _read_sizes(self, name: str, node: ast.Call, args: list[ast.expr]) -> tuple[ValueSpec, str | None, P.Sizes]:
        """A maker whose numbers the program computes: the parts as Sizes, a placeholder spec naming the maker."""
        if name == "full" and literal_number(args[-1]) is None:
            raise self.err("torch.full(): the fill value must be a number literal.", args[-1])
        parts: list[int | P.Expr] = []
        for a in args:
            v = literal_number(a)
            if v is not None and float(v).is_integer():
                parts.append(int(v))
            elif self._whole_shape(a):  # torch.zeros(x.shape), torch.ones(x.size())
                x = a.value if isinstance(a, ast.Attribute) else a.func.value  # type: ignore[attr-defined]
                parts.append(P.Scalar("shape", self._expr(x), None, self.span(a)))
            else:
                parts.append(self._expr(a))
        if name == "full":  # the fill value stays a literal number, and may be fractional
            parts[-1] = P.Num(float(literal_number(args[-1]) or 0.0), self.span(args[-1]))
        text = self.src[slice(*self.span(node))]
        integral = name == "arange" and all(_int_literal(a) or literal_number(a) is None for a in args)
        return (
            ValueSpec(text, (), generator=name),
            "int64" if integral else None,
            P.Sizes(tuple(parts), False, self.span(node)),
        )

    def _data(self, node: ast.expr) -> tuple[ValueSpec, str | None]:
        """The nested list of number literals (or True/False) of torch.tensor(...)."""
        kinds: set[str] = set()

        def walk(n: ast.expr, depth: int) -> Any:
            if depth > self.limits.value_depth:
                raise self.err(f"Lists are nested more than {self.limits.value_depth} deep.", n, cls=LimitError)
            if isinstance(n, ast.List | ast.Tuple):
                return [walk(e, depth + 1) for e in n.elts]
            if isinstance(n, ast.Constant) and isinstance(n.value, bool):
                kinds.add("bool")
                return float(n.value)
            v = literal_number(n)
            if v is None:
                raise self.err(
                    "torch.tensor() takes number literals here (a tensor of computed values is torch.stack([...]).",
                    n,
                )
            kinds.add("int" if _int_literal(n) else "float")
            return v

        obj = walk(node, 0)
        if isinstance(obj, list) and not obj:
            raise self.err("torch.tensor([]) has no elements; give at least one number.", node)
        if isinstance(obj, list) and len(str(obj)) > 10 * self.limits.elements:
            raise self.err("This tensor literal is too large.", node, cls=LimitError)
        try:
            spec = from_nested(obj, Origin("torch.tensor()"), self.limits)
        except VjpError as e:  # pointed at the literal in the program instead
            raise self.err(e.message, node, e.hint, cls=type(e)) from None
        if kinds == {"bool"}:
            return spec, "bool"
        # integers only: int64, as torch infers it; any float (or a bool mixed in): the default float dtype
        return spec, "int64" if kinds == {"int"} else None

    def _requires_grad_(self, node: ast.Call, receiver: P.Expr) -> P.Const:
        """`torch.tensor([...]).requires_grad_()`: the constructor made a leaf."""
        if node.args or node.keywords:
            value = node.args[0] if node.args else node.keywords[0].value
            if not (isinstance(value, ast.Constant) and value.value is True):
                raise self.err("requires_grad_() here takes no argument (or True).", value)
        if not isinstance(receiver, P.Const) or receiver.like is not None:
            raise self.err(
                "requires_grad_() makes a leaf only of a tensor made right there: "
                "x = torch.tensor([1.0, 2.0]).requires_grad_(); give other inputs with --NAME VALUE.",
                node,
            )
        if receiver.dtype not in (None, *FLOATING):
            raise self.err("Only tensors of floating point dtype can require gradients (torch's words).", node)
        return replace(receiver, requires_grad=True)


def lift_leaves(parser: Any, body: tuple[P.Stmt, ...]) -> tuple[tuple[P.Stmt, ...], dict[str, ValueSpec]]:
    """Top-level `x = <maker>(..., requires_grad=True)` statements out of the body, as leaves to bind; a
    requires_grad=True anywhere else is an error that says how to write it."""
    made: dict[str, ValueSpec] = {}
    kept: list[P.Stmt] = []
    for s in body:
        if isinstance(s, P.Assign) and isinstance(s.value, P.Const) and s.value.requires_grad:
            if s.target in made:
                raise parser.err(f"The leaf {s.target!r} is made twice.", s.span)
            made[s.target] = s.value.spec
            continue
        kept.append(s)
    for s in P.iter_stmts(tuple(kept)):
        for e in P.stmt_exprs(s):
            for n in P.walk_exprs(e):
                if isinstance(n, P.Const) and n.requires_grad:
                    raise parser.err(
                        "requires_grad=True makes a leaf: write it as its own top-level assignment "
                        "(x = torch.tensor([1.0, 2.0], requires_grad=True)), then use x.",
                        n.span,
                    )
    return tuple(kept), made


def made_leaf_given(prog: P.Program, given: dict[str, Any]) -> None:
    """Refuse a --NAME value for a leaf the program makes itself (x = torch.tensor(..., requires_grad=True))."""
    from ..errors import UsageError

    for name in given:
        if name in prog.made:
            raise UsageError(
                f"A value was given for {name!r}, but the program makes that leaf itself "
                f"({name} = ..., requires_grad=True); drop the option, or the assignment to take the value from it."
            )


def makes_random(prog: P.Program) -> bool:
    """Whether the program draws random numbers (rand, randn, their _like forms): then --seed is shown."""
    if any(spec.generator in ("rand", "randn") for spec in prog.made.values()):
        return True
    for s in P.iter_stmts(prog.body):
        for e in P.stmt_exprs(s):
            if any(isinstance(n, P.Const) and n.spec.generator in ("rand", "randn") for n in P.walk_exprs(e)):
                return True
    return False


def _int_literal(n: ast.expr) -> bool:
    """An integer literal, signed or not (-100 is a minus applied to 100), as torch infers int64 from it."""
    while isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        n = n.operand
    return isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool)
