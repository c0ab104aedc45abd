"""`x[...]` in programs: the static parts of an index checked at parse time, as torch would check them.

A mixin of the parser (language/parser.py). Ints and slice bounds are integer literals within the elements
limit, a slice step is positive (torch refuses negative steps), at most one `...`, lists hold integer
literals; anything else inside the brackets is an expression that must give a mask or an index tensor.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..errors import LimitError
from ..ops import lookup
from . import program as P
from .literals import dotted, literal_number

if TYPE_CHECKING:
    from ..errors import VjpError
    from ..limits import Limits

_MAX_ITEMS = 64  # parts of one index: no tensor has more dimensions


class IndexParser:
    """The indexing part of the program parser."""

    limits: Limits

    if TYPE_CHECKING:  # given by the parser

        def err(
            self, message: str, node: ast.AST | P.Span | None, hint: str | None = None, cls: type[VjpError] = ...
        ) -> VjpError: ...

        def _expr(self, node: ast.expr) -> P.Expr: ...

        def span(self, node: ast.AST) -> P.Span: ...

        def _take(self, node: ast.expr, item: int, at: ast.AST, sp: P.Span, unpack: int | None = None) -> P.Call: ...

        def _dim(self, node: ast.expr, fname: str, pname: str) -> int: ...

    def _tuple_call(self, node: ast.Call) -> bool:
        """Whether this call names a registry function that gives a tuple (chunk, split, unbind)."""
        func = node.func
        name = dotted(func) if not isinstance(func, ast.Attribute) or dotted(func).startswith("torch.") else ""
        spec = lookup(name) if name else lookup(f".{func.attr}") if isinstance(func, ast.Attribute) else None
        if spec is not None and spec.name in ("max", "min"):  # max(x, dim) gives (values, indices); max(x) not
            method = isinstance(func, ast.Attribute) and not name
            positional = [func.value, *node.args] if isinstance(func, ast.Attribute) and method else list(node.args)
            has_dim = len(positional) == 2 and literal_number(positional[1]) is not None
            return has_dim or any(kw.arg in ("dim", "keepdim") for kw in node.keywords)
        return spec is not None and spec.tuple_result

    def _subscript(self, node: ast.Subscript, sp: P.Span) -> P.Expr:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":  # x.shape[0]: a Python int
            return P.Scalar("size", self._expr(node.value.value), self._dim(node.slice, "shape", "index"), sp)
        if isinstance(node.value, ast.Call) and self._tuple_call(node.value):  # x.chunk(2)[0]
            k = literal_number(node.slice)
            if k is None or not float(k).is_integer() or abs(k) > 1000:
                raise self.err("A tuple of tensors is indexed by an integer literal: x.chunk(2)[0].", node.slice)
            return self._take(node.value, int(k), node, sp)
        value = self._expr(node.value)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(parts) > _MAX_ITEMS:
            raise self.err(f"This index has more than {_MAX_ITEMS} parts; no tensor has that many dimensions.", node)
        items = tuple(self._index_item(p) for p in parts)
        if sum(1 for i in items if i is Ellipsis) > 1:
            raise self.err(
                "An index can only have a single '...' (torch: 'an index can only have a single ellipsis').", node
            )
        return P.Index(value, items, sp)

    def _index_item(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            bounds = [self._bound(b, "a slice bound") for b in (node.lower, node.upper)]
            step = self._bound(node.step, "a slice step")
            if isinstance(step, int) and step <= 0:
                raise self.err(
                    "torch refuses a slice step that is not positive ('step must be greater than zero'): "
                    "x[::-1] is numpy, not PyTorch.",
                    node.step,  # type: ignore[arg-type]
                    "Reverse with flip: x.flip(0), or torch.flip(x, dims=(0,)).",
                )
            return P.Slice(bounds[0], bounds[1], step)
        if isinstance(node, ast.Constant):
            if node.value is Ellipsis or node.value is None:
                return node.value
            if isinstance(node.value, bool):
                raise self.err("A bool index is not supported here; index with a mask such as x > 0.", node)
            if isinstance(node.value, str):
                raise self.err(
                    "Strings cannot index a tensor; an index is an int, a slice (1:3), '...', None, a list of "
                    "ints or a mask (x > 0).",
                    node,
                )
        if isinstance(node, ast.Constant | ast.UnaryOp) and literal_number(node) is not None:
            return self._index_int(node, "an index")
        ranged = _range_call(node)
        if ranged is not None:  # x[range(len(x)), y], x[list(range(n)), y]
            if not 1 <= len(ranged.args) <= 3 or ranged.keywords:
                raise self.err("range() takes stop, or start, stop[, step].", ranged)
            bounds = [self._bound(a, "a range bound") for a in ranged.args]
            start, stop, step = ([None, *bounds] if len(bounds) == 1 else bounds) + [None] * (3 - max(2, len(bounds)))
            return P.Range(start, stop, step)
        if isinstance(node, ast.List | ast.Tuple):
            if len(node.elts) > self.limits.elements:
                raise self.err(f"This index list is longer than the elements limit ({self.limits.elements:,}).", node)
            if not node.elts:
                raise self.err("An empty index list selects nothing; give at least one index.", node)
            return tuple(self._index_int(e, "an index in a list") for e in node.elts)
        return self._expr(node)

    def _bound(self, node: ast.expr | None, what: str) -> Any:
        """A slice bound: None, an integer literal, or an expression (a loop variable) checked when it runs."""
        if node is None:
            return None
        if literal_number(node) is not None or isinstance(node, ast.Constant):
            return self._index_int(node, what)
        return self._expr(node)

    def _index_int(self, node: ast.expr, what: str) -> int:
        v = literal_number(node)
        if v is None or not float(v).is_integer() or isinstance(node, ast.Constant) and isinstance(node.value, float):
            raise self.err(
                f"{what[0].upper()}{what[1:]} must be an integer literal (not a loop variable or a tensor).",
                node,
                "Index with a mask (x[x > 0]) or an integer tensor for indices computed by the program.",
            )
        if abs(v) > self.limits.elements:
            raise self.err(
                f"{what[0].upper()}{what[1:]}, {int(v):,}, is beyond any tensor's size (the elements limit is "
                f"{self.limits.elements:,}; --limit elements=N).",
                node,
                cls=LimitError,
            )
        return int(v)


def _range_call(node: ast.expr) -> ast.Call | None:
    """The range(...) call of `range(...)` or `list(range(...))`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "list"
        and len(node.args) == 1
    ):
        node = node.args[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        return node
    return None
