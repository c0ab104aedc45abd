"""Comprehensions in snippets: list, set and dict comprehensions and generator expressions, run eagerly."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .names import refuse
from .runtime import Scope

if TYPE_CHECKING:
    from .interp import Interpreter


def comprehension(it: Interpreter, e: ast.expr, scope: Scope) -> Any:
    """A list, set or dict comprehension or a generator expression: every item made at once, in a scope of its own."""
    inner = Scope(scope)
    results: list[Any] = []
    gens = e.generators  # type: ignore[attr-defined]

    def loop(i: int) -> None:
        if i == len(gens):
            it.tick(e)
            if isinstance(e, ast.DictComp):
                results.append((it.eval(e.key, inner), it.eval(e.value, inner)))
            else:
                results.append(it.eval(e.elt, inner))  # type: ignore[attr-defined]
            return
        g = gens[i]
        if g.is_async:
            raise refuse("async comprehension")
        for item in it.real(list, it.eval(g.iter, inner if i else scope), node=g.iter):
            it.assign(g.target, item, inner)
            if all(it.truth(it.eval(c, inner), c) for c in g.ifs):
                loop(i + 1)

    loop(0)
    if isinstance(e, ast.SetComp):
        return set(results)
    if isinstance(e, ast.DictComp):
        return dict(results)
    return results if isinstance(e, ast.ListComp) else iter(results)
