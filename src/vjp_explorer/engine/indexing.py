"""`x[...]` with torch's own semantics: ints, slices, `...`, None, lists of ints, masks and index tensors.

The static parts were checked by the parser; the result's shape comes from torch on meta tensors (no data)
before the real indexing allocates anything (a mask selects at most every element, so it is bounded by the
indexed tensor's size). The result depends on the leaves densely: an index moves elements.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ProgramError
from ..language import program as P
from .vals import Val, dense, first_line, grow

_INDEX_DTYPES = (torch.bool, torch.uint8, torch.int64, torch.int32, torch.int16, torch.int8)


def resolve(items: tuple[Any, ...], value: Any) -> tuple[Any, ...]:
    """The Python index torch reads: slices as slice objects, lists as lists, and each expression (in a part or
    a slice bound) given by value(expr): an int or a tensor."""
    out: list[Any] = []
    for item in items:
        if P.is_expr(item):
            out.append(value(item))
        elif isinstance(item, P.Slice):
            out.append(slice(*(value(b) if P.is_expr(b) else b for b in item.bounds())))
        elif isinstance(item, P.Range):
            out.append(list(range(*(value(b) if P.is_expr(b) else b for b in item.bounds()))))
        elif isinstance(item, tuple):
            out.append(list(item))
        else:
            out.append(item)
    return tuple(out)


def _index_value(it: Any, e: P.Index, env: dict[str, Val]) -> Any:
    """How the interpreter gives an index part that is an expression: an int (a loop variable) or a tensor."""

    def value(item: P.Expr) -> Any:
        v = it.value_of(item, env).v
        if isinstance(v, bool) or not isinstance(v, torch.Tensor) and not float(v).is_integer():
            raise it.err(ProgramError, f"An index must be an integer; this one is {v}.", e.span)
        if not isinstance(v, torch.Tensor):
            return int(v)  # a loop variable, or arithmetic on one: x[i], x[2 - i], x[i:i + 2]
        if v.ndim == 0 and v.dtype in _INDEX_DTYPES[2:]:
            return int(v)  # torch reads a 0-d integer index as the int (and the shape check runs on meta)
        if v.dtype not in _INDEX_DTYPES:
            raise it.err(
                ProgramError,
                f"An index must be an int, a slice, a list of ints, a mask (a bool tensor such as x > 0) or an "
                f"integer tensor; this one is a {str(v.dtype).removeprefix('torch.')} tensor (torch: 'tensors "
                "used as indices must be long, int, byte or bool tensors').",
                e.span,
            )
        return v

    return value


def index(it: Any, e: P.Index, env: dict[str, Val]) -> Val:
    x = it.value_of(e.value, env)
    t = x.v if isinstance(x.v, torch.Tensor) else torch.as_tensor(float(x.v), dtype=it.dtype)

    k = resolve(e.items, _index_value(it, e, env))
    tensors = [p for p in k if isinstance(p, torch.Tensor)]
    try:
        if any(v.dtype in (torch.bool, torch.uint8) for v in tensors):
            shape: tuple[int, ...] = (t.numel(),)  # a mask selects at most every element
        else:
            meta = tuple(
                torch.empty(p.shape, dtype=p.dtype, device="meta") if isinstance(p, torch.Tensor) else p for p in k
            )
            shape = tuple(torch.empty(t.shape, dtype=t.dtype, device="meta")[meta].shape)
        it._charge(shape, e.span)
        out = t[k]
    except (IndexError, RuntimeError, ValueError, TypeError) as err:
        raise it.err(ProgramError, f"Indexing failed: {first_line(err)}", e.span, _hint(err)) from None
    return Val(out, dense(x), grow(x.size))


def update(it: Any, e: P.Update, env: dict[str, Val]) -> Val:
    """`y[...] = value`: a copy of y with those elements replaced, as torch's in-place write leaves y."""
    y = it.value_of(e.index.value, env)
    t = y.v if isinstance(y.v, torch.Tensor) else torch.as_tensor(float(y.v), dtype=it.dtype)
    if t.requires_grad and t.is_leaf:
        raise it.err(
            ProgramError,
            "torch refuses this: 'a leaf Variable that requires grad is being used in an in-place operation'.",
            e.span,
            "Write into a tensor made for it (y = torch.zeros(3); y[0] = ...), or build the result with "
            "torch.stack, torch.cat or torch.where.",
        )
    val = it.value_of(e.value, env)
    v = val.v if isinstance(val.v, torch.Tensor) else float(val.v)
    made_by = type(t.grad_fn).__name__ if t.grad_fn is not None else None
    if not it.replaying and (y.reads > 1 or made_by not in (None, "CopySlices", "IndexPutBackward0")):
        # vjp writes out of place; torch writes in place, and its backward then fails wherever an operation
        # saved the old value ('modified by an inplace operation'), or another name shares it: refuse those
        raise it.err(
            ProgramError,
            f"Writing into {e.index.value.id if isinstance(e.index.value, P.Name) else 'this tensor'}[...] here "  # type: ignore[union-attr]
            "is refused: vjp runs such a write out of place, which matches torch only for a tensor made to be "
            "written into and read by nothing else before (y = torch.zeros(3); y[0] = ...; y[1] = ...). Here "
            + ("it was read elsewhere first" if y.reads > 1 else f"it was made by an operation ({made_by})")
            + ", where torch's in-place write may make backward fail ('modified by an inplace operation').",
            e.span,
            "Build the result without writing: torch.stack, torch.cat, torch.where or masked_fill.",
        )
    k = resolve(e.index.items, _index_value(it, e.index, env))
    it._charge(tuple(t.shape), e.span)
    try:
        out = t.clone()
        out[k] = v
    except (IndexError, RuntimeError, ValueError, TypeError) as err:
        raise it.err(ProgramError, f"Assigning into the index failed: {first_line(err)}", e.span, _hint(err)) from None
    return Val(out, dense(y, val), grow(y.size, val.size))


def _hint(err: BaseException) -> str | None:
    text = str(err)
    if "out of bounds" in text:
        return "Indices count from 0 to size - 1, or from -size to -1 from the end."
    if "mask" in text:
        return "A mask must have the shape of the dimensions it indexes: x[x > 0] or W[:, m] with m of W's width."
    return None
