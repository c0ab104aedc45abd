"""Reductions and scans whose exact rule works on whole arrays of sympy expressions (structure "general").

The helpers at the top (`np_`, `each`, `axes_of`, `total`, `extreme`, `vector_norm`) are shared with the
loss and linear-algebra entries: each rule is a composition of these on numpy object arrays."""

from __future__ import annotations

import math
from typing import Any

from .spec import OpSpec, Param, spellings


def np_() -> Any:
    import numpy  # the exact routes only: listing the registry imports no numpy

    return numpy


def each(fn: Any, *arrays: Any) -> Any:
    """fn applied to every element (the arrays broadcast), as an object array."""
    return np_().vectorize(fn, otypes=[object])(*arrays)


def axes_of(x: Any, dim: Any) -> tuple[int, ...]:
    """The reduced axes: all of them for dim=None, else dim (int or tuple) made non-negative."""
    if x.ndim == 0:
        return ()
    if dim is None:
        return tuple(range(x.ndim))
    return tuple(sorted({d % x.ndim for d in (dim if isinstance(dim, tuple) else (dim,))}))


def count(x: Any, dim: Any) -> int:
    return math.prod(x.shape[a] for a in axes_of(x, dim))


def total(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The sum over dim, as an object array (a 0-d one for a full reduction)."""
    np = np_()
    if x.ndim == 0:
        return x
    return np.asarray(np.sum(x, axis=axes_of(x, dim), keepdims=bool(keepdim)), dtype=object)


def number(sp: Any, v: Any) -> Any:
    """A parameter as an exact sympy number (never from text: v is an int, float or bool)."""
    return sp.Integer(int(v)) if float(v).is_integer() else sp.Float(float(v), 30)


def extreme(ctx: Any, x: Any, dim: Any = None, keepdim: bool = False, largest: bool = True) -> Any:
    """max/min over dim as torch's amax/amin differentiate it: tied elements share the gradient evenly,
    so the exact value is their mean (equal values; its derivative 1/k for each of the k ties)."""
    np = np_()
    if x.ndim == 0:
        return x
    axes = axes_of(x, dim)
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    out = np.empty(rows.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        row = list(rows[idx])
        vals = [ctx.value(e) for e in row]
        best = max(vals) if largest else min(vals)
        tied = [e for e, v in zip(row, vals, strict=True) if v == best]
        out[idx] = ctx.sp.Add(*tied) / len(tied)
    if keepdim:
        out = out.reshape([1 if d in axes else n for d, n in enumerate(x.shape)])
    return out


def vector_norm(ctx: Any, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    """The vector p-norm over dim (all elements for dim=None), as torch.linalg.vector_norm."""
    sp = ctx.sp
    p = 2.0 if ord is None or ord == "fro" else float(ord)
    if p == math.inf or p == -math.inf:
        return extreme(ctx, each(sp.Abs, x), dim, keepdim, largest=p > 0)
    if p == 0:  # the count of nonzero elements: a step function, derivative 0
        return total(each(lambda e: sp.Integer(int(ctx.value(e) != 0)), x), dim, keepdim)
    if p == 1:
        return total(each(sp.Abs, x), dim, keepdim)
    if p == 2:
        return each(sp.sqrt, total(each(lambda e: e**2, x), dim, keepdim))
    pe = number(sp, p)
    return each(lambda s: s ** (1 / pe), total(each(lambda e: sp.Abs(e) ** pe, x), dim, keepdim))


def _logsumexp(ctx: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return each(ctx.sp.log, total(each(ctx.sp.exp, x), dim, keepdim))


def _cumsum(ctx: Any, x: Any, dim: Any) -> Any:
    return x if x.ndim == 0 else np_().cumsum(x, axis=dim % x.ndim)


def _cumprod(ctx: Any, x: Any, dim: Any) -> Any:
    return x if x.ndim == 0 else np_().multiply.accumulate(x, axis=dim % x.ndim)


def _max(ctx: Any, x: Any, *other: Any, largest: bool = True) -> Any:
    if other:  # torch.max(a, b): the elementwise maximum, ties split evenly as torch.maximum does
        return each(lambda a, b: _tie(ctx.sp, a, b, largest), x, other[0])
    return extreme(ctx, x, None, False, largest)


def _tie(sp: Any, a: Any, b: Any, larger: bool) -> Any:
    first = a > b if larger else a < b
    return sp.Piecewise((a, first), (b, sp.Ne(a, b)), ((a + b) / 2, True))


def _max_dim(ctx: Any, x: Any, dim: int, keepdim: bool = False, item: int = 0, largest: bool = True, **_: Any) -> Any:
    """max/min along dim as torch's max(x, dim) differentiates it: the whole gradient goes to the element its
    indices name (the first of the ties), not shared as amax does; item 1 is those indices (no gradient)."""
    if item % 2 == 1:
        return _argmax(ctx, x, dim, keepdim, largest)
    np = np_()
    if x.ndim == 0:
        return x
    ax = dim % x.ndim
    moved = np.moveaxis(x, ax, -1)
    res = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(res.shape):
        row = list(moved[idx])
        vals = [ctx.value(e) for e in row]
        res[idx] = row[vals.index(max(vals) if largest else min(vals))]
    return np.expand_dims(res, ax) if keepdim else res


def _max_dim_kinks(torch: Any, x: Any, dim: int = 0, **_: Any) -> list[Any]:
    # a tie along dim moves the gradient from one element to another: a step of the function torch follows
    return [(x == torch.amax(x, dim=dim, keepdim=True)).double(), (x == torch.amin(x, dim=dim, keepdim=True)).double()]


def _max_kinks(torch: Any, x: Any, *other: Any, **_: Any) -> list[Any]:
    if other:
        return [torch.sign(x - other[0])]
    return [(x == x.max()).double()]  # which elements are the largest: a perturbation that changes it crosses a tie


def _extreme_kinks(torch: Any, x: Any, dim: Any = None, keepdim: bool = False, **_: Any) -> list[Any]:
    d = () if dim is None else dim
    return [(x == torch.amax(x, dim=d, keepdim=True)).double(), (x == torch.amin(x, dim=d, keepdim=True)).double()]


def _argmax(ctx: Any, x: Any, dim: Any = None, keepdim: bool = False, largest: bool = True) -> Any:
    np = np_()
    sp = ctx.sp
    flat = x.reshape(-1) if dim is None or x.ndim == 0 else None
    if flat is not None:
        vals = [ctx.value(e) for e in flat]
        best = max(vals) if largest else min(vals)
        out = np.asarray(sp.Integer(vals.index(best)), dtype=object)  # torch picks the first of the ties
        return out.reshape((1,) * x.ndim) if keepdim else out
    ax = dim % x.ndim
    moved = np.moveaxis(x, ax, -1)
    res = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(res.shape):
        vals = [ctx.value(e) for e in moved[idx]]
        res[idx] = sp.Integer(vals.index(max(vals) if largest else min(vals)))
    return np.expand_dims(res, ax) if keepdim else res


def _var(
    ctx: Any,
    x: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    correction: Any = None,
    root: bool = False,
) -> Any:
    sp = ctx.sp
    c = correction if correction is not None else 0 if unbiased is False else 1
    n = count(x, dim)
    if n - c <= 0:
        raise ValueError(f"{'std' if root else 'var'} of {n} element(s) with correction={c:g} divides by {n - c:g}")
    mean = total(x, dim, True) / sp.Integer(n)
    v = total(each(lambda e: e**2, x - mean), dim, keepdim) / number(sp, n - c)
    return each(sp.sqrt, v) if root else v


def _trace(ctx: Any, x: Any) -> Any:
    return ctx.sp.Add(*(x[i, i] for i in range(min(x.shape))))


def _positive_sign(torch: Any, x: Any, **_: Any) -> list[Any]:
    return [torch.sign(x)]


_VAR = (Param("dim", "dims"), Param("unbiased", "bool"), Param("keepdim", "bool"), Param("correction", "number"))
_AMAX = (Param("dim", "dims"), Param("keepdim", "bool"))
_ARG = (Param("dim", "dim"), Param("keepdim", "bool"))
_TIES = "at ties torch splits the gradient evenly among the tied elements"

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
    OpSpec(
        "cumprod",
        1,
        (Param("dim", "dim", True),),
        "general",
        "torch.cumprod",
        rule=_cumprod,
        doc="running products along dim",
        example="cumprod(x, dim=0)",
        names=spellings("cumprod"),
    ),
    OpSpec(
        "max",
        1,
        (),
        "general",
        "torch.max",
        rule=_max,
        kink=f"{_TIES} (max(x)); max(a, b) is maximum(a, b), each side half at a tie",
        kinks=_max_kinks,
        variadic=True,
        doc="the largest element (max(x)), or the elementwise maximum of two tensors (max(a, b))",
        example="x.max() + torch.max(a, b)",
        names=spellings("max"),
    ),
    OpSpec(
        "min",
        1,
        (),
        "general",
        "torch.min",
        rule=lambda ctx, x, *other: _max(ctx, x, *other, largest=False),
        kink=f"{_TIES} (min(x)); min(a, b) is minimum(a, b), each side half at a tie",
        kinks=_max_kinks,
        variadic=True,
        doc="the smallest element (min(x)), or the elementwise minimum of two tensors (min(a, b))",
        example="x.min() + torch.min(a, b)",
        names=spellings("min"),
    ),
    OpSpec(
        "max_dim",
        1,
        (Param("dim", "dim", True), Param("keepdim", "bool")),
        "general",
        "torch.max",
        rule=_max_dim,
        kink="at ties torch's max(x, dim) gives the whole gradient to the first tied element (its index)",
        kinks=_max_dim_kinks,
        tuple_result=True,
        doc="max(x, dim): the largest elements along dim and their indices, (values, indices); written "
        "x.max(dim=1).values, torch.max(x, 1)[0] or v, i = x.max(1)",
        example="x.max(dim=1).values",
    ),
    OpSpec(
        "min_dim",
        1,
        (Param("dim", "dim", True), Param("keepdim", "bool")),
        "general",
        "torch.min",
        rule=lambda ctx, x, dim, keepdim=False, item=0, **_: _max_dim(ctx, x, dim, keepdim, item, largest=False),
        kink="at ties torch's min(x, dim) gives the whole gradient to the first tied element (its index)",
        kinks=_max_dim_kinks,
        tuple_result=True,
        doc="min(x, dim): the smallest elements along dim and their indices, (values, indices); written "
        "x.min(dim=1).values, torch.min(x, 1)[0] or v, i = x.min(1)",
        example="x.min(dim=0).values",
    ),
    OpSpec(
        "amax",
        1,
        _AMAX,
        "general",
        "torch.amax",
        rule=lambda ctx, x, dim=None, keepdim=False: extreme(ctx, x, dim, keepdim, largest=True),
        kink=_TIES,
        kinks=_extreme_kinks,
        doc="the largest elements along dim (all of them by default)",
        example="amax(x, dim=0)",
        names=spellings("amax"),
    ),
    OpSpec(
        "amin",
        1,
        _AMAX,
        "general",
        "torch.amin",
        rule=lambda ctx, x, dim=None, keepdim=False: extreme(ctx, x, dim, keepdim, largest=False),
        kink=_TIES,
        kinks=_extreme_kinks,
        doc="the smallest elements along dim (all of them by default)",
        example="amin(x, dim=0)",
        names=spellings("amin"),
    ),
    OpSpec(
        "argmax",
        1,
        _ARG,
        "general",
        "torch.argmax",
        rule=_argmax,
        kink="an index (integer): no gradient flows through it; at ties torch picks the first",
        doc="the index of the largest element (flattened, or along dim); an integer, not differentiable",
        example="x * argmax(x)",
        names=spellings("argmax"),
    ),
    OpSpec(
        "argmin",
        1,
        _ARG,
        "general",
        "torch.argmin",
        rule=lambda ctx, x, dim=None, keepdim=False: _argmax(ctx, x, dim, keepdim, largest=False),
        kink="an index (integer): no gradient flows through it; at ties torch picks the first",
        doc="the index of the smallest element (flattened, or along dim); an integer, not differentiable",
        example="x * argmin(x)",
        names=spellings("argmin"),
    ),
    OpSpec(
        "var",
        1,
        _VAR,
        "general",
        "torch.var",
        rule=_var,
        doc="variance over dim: sum((x - mean)**2) / (n - correction); correction 1 (unbiased) by default",
        example="x.var(dim=0, unbiased=False)",
        names=spellings("var")[1:],
    ),
    OpSpec(
        "std",
        1,
        _VAR,
        "general",
        "torch.std",
        rule=lambda ctx, x, **p: _var(ctx, x, **p, root=True),
        kink="where all the elements are equal (std = 0) torch takes the gradient as 0; sqrt has no derivative there",
        doc="standard deviation over dim: sqrt of var (same correction)",
        example="x.std(correction=0)",
        names=spellings("std")[1:],
    ),
    OpSpec(
        "trace",
        1,
        (),
        "general",
        "torch.trace",
        rule=_trace,
        doc="the sum of the diagonal of a 2-D tensor",
        example="trace(W)",
        names=spellings("trace")[1:],
    ),
]
