"""Sizes parameters and index ranges (language.program.Sizes, Range) read from the program's values.

`x.view(len(x), -1)`, `y.reshape(x.shape)`, `x.sum(dim=d)`, `x[range(len(x)), y]`: the interpreter reads
each part (a size of a tensor, a number the program computed, a constant) and writes the plain number,
tuple or list of indices into the expression before the step is recorded, so the trace, and every route
that reads it, holds static ones.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ..errors import Origin, ProgramError, VjpError
from ..language import program as P


def resolve(it: Any, expr: P.Expr, env: dict[str, Any]) -> P.Expr:
    """The expression with every Sizes parameter replaced by its value at this point of the run."""

    def fix(e: P.Expr) -> P.Expr:
        if isinstance(e, P.Call) and e.sized:
            params = tuple((n, read(it, v, env, e) if isinstance(v, P.Sizes) else v) for n, v in e.params)
            return replace(e, params=params)
        if isinstance(e, P.Const) and e.sizes is not None:
            return made(it, e, env)
        if isinstance(e, P.Index) and any(isinstance(i, P.Range) for i in e.items):
            return replace(e, items=tuple(indices(it, i, env, e) if isinstance(i, P.Range) else i for i in e.items))
        return e

    return P.transform(expr, fix)


def read(it: Any, sizes: P.Sizes, env: dict[str, Any], call: P.Call) -> int | tuple[int, ...]:
    """The number (an int or dim parameter) or tuple of sizes the parts give now."""
    out = [_whole(it, x, call.func, sizes.span) for x in numbers(it, sizes, env, call.func)]
    if not sizes.one:
        return tuple(out)
    if len(out) != 1:
        raise it.err(ProgramError, f"{call.func}(): this parameter takes one number, not {len(out)}.", sizes.span)
    return out[0]


def numbers(it: Any, sizes: P.Sizes, env: dict[str, Any], fname: str) -> list[float]:
    """Every part's value now: ints as given, every size of x for x.shape, one number for an expression."""
    out: list[float] = []
    for part in sizes.parts:
        if isinstance(part, int):
            out.append(float(part))
        elif isinstance(part, P.Scalar) and part.what == "shape":  # x.shape, x.size(): every size of x
            out.extend(float(d) for d in getattr(it.value_of(part.value, env).v, "shape", ()))
        else:
            value = it.value_of(part, env).v
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:
                    raise it.err(
                        ProgramError,
                        f"{fname}(): a size or dim is one number; this is a tensor of shape {list(value.shape)}.",
                        sizes.span,
                    )
                value = value.item()
            if isinstance(value, bool):
                raise it.err(ProgramError, f"{fname}(): a size or dim is a number, not {value}.", sizes.span)
            out.append(float(value))
    return out


def _whole(it: Any, value: float, fname: str, span: P.Span) -> int:
    if not value.is_integer():
        raise it.err(ProgramError, f"{fname}(): a size or dim must be a whole number, not {value:g}.", span)
    return int(value)


def indices(it: Any, r: P.Range, env: dict[str, Any], at: P.Index) -> tuple[int, ...]:
    """The ints of range(start, stop, step) at this point, as a static list of indices."""
    start, stop, step = (
        b
        if b is None or isinstance(b, int)
        else _whole(it, numbers(it, P.Sizes((b,), True, at.span), env, "range")[0], "range", at.span)
        for b in r.bounds()
    )
    assert stop is not None  # the parser requires it
    if step == 0:
        raise it.err(ProgramError, "range() arg 3 must not be zero.", at.span)
    out = range(start or 0, stop, step or 1)
    if len(out) > it.limits.elements:
        raise it.err(ProgramError, f"range() gives {len(out):,} indices, past the elements limit.", at.span)
    if not out:
        raise it.err(ProgramError, "This range is empty, so the index selects nothing.", at.span)
    return tuple(out)


def made(it: Any, e: P.Const, env: dict[str, Any]) -> P.Const:
    """torch.zeros(len(x), 3) and friends: the spec their numbers give now, checked as literal ones are
    (positive whole sizes, the elements limit) before anything is made."""
    from ..language.values import generator_spec

    assert e.sizes is not None
    name = e.spec.generator
    given = numbers(it, e.sizes, env, f"torch.{name}")
    try:
        spec = generator_spec(name, tuple(given), e.spec.text, Origin(f"torch.{name}()"), it.limits)
    except VjpError as err:  # pointed at the call in the program
        message = f"torch.{name}(): {err.message.removeprefix(f'{name}(): ')}"
        raise it.err(type(err), message, e.span, err.hint) from None
    return replace(e, spec=spec, sizes=None)
