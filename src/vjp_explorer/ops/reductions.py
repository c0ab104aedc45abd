"""Reductions and scans whose exact rule works on whole arrays of sympy expressions (structure "general")."""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings


def _axis(x: Any, dim: Any) -> Any:
    if x.ndim == 0:
        return None
    return dim % x.ndim if isinstance(dim, int) else None if dim is None else tuple(d % x.ndim for d in dim)


def _logsumexp(ctx: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    sp = ctx.sp
    exp = _np().vectorize(sp.exp, otypes=[object])(x)
    total = _np().sum(exp, axis=_axis(x, dim), keepdims=bool(keepdim))
    return _np().vectorize(sp.log, otypes=[object])(total)


def _cumsum(ctx: Any, x: Any, dim: Any) -> Any:
    return x if x.ndim == 0 else _np().cumsum(x, axis=dim % x.ndim)


def _np() -> Any:
    import numpy  # the exact routes only: listing the registry imports no numpy

    return numpy


ENTRIES = [
    OpSpec(
        "logsumexp",
        1,
        (Param("dim", "dims", True), Param("keepdim", "bool")),
        "general",
        "torch.logsumexp",
        rule=_logsumexp,
        doc="log(sum(exp(x))) along dim, computed without overflow",
        example="logsumexp(x, dim=0)",
        names=spellings("logsumexp", special="logsumexp"),
    ),
    OpSpec(
        "cumsum",
        1,
        (Param("dim", "dim", True),),
        "general",
        "torch.cumsum",
        rule=_cumsum,
        doc="running sums along dim",
        example="cumsum(x, dim=0)",
        names=spellings("cumsum"),
    ),
]
