"""Linear algebra beyond matmul: products (dot, inner, outer, mv, bmm, einsum), det, inverse, diag.

Each product's `work` gives its multiply-adds from the operands' shapes, so the multiply_adds budget
refuses a huge one before it runs; einsum's equation is checked here, before torch sees it."""

from __future__ import annotations

import math
from typing import Any

from .reductions import np_
from .spec import OpSpec, Param, spellings

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_EXACT_SIZE = 5  # det and inverse are written out exactly up to 5 x 5 (the formula grows as n!)


def einsum_work(equation: str, *shapes: tuple[int, ...]) -> int:
    """The multiply-adds of einsum(equation, *operands): the product of the sizes of all its distinct labels
    (each output element sums a product over every combination of the summed labels). Raises ValueError,
    with what is wrong, for an equation that does not fit the operands."""
    eq = equation.replace(" ", "")
    if not eq or any(ch not in _LETTERS and ch not in ",->." for ch in eq):
        raise ValueError(f"the equation {equation!r} may hold only the letters a-z, A-Z, ',', '->' and '...'")
    if eq.count("->") > 1 or eq.count(">") != eq.count("->"):
        raise ValueError(f"the equation {equation!r} has more than one '->' or a stray '-' or '>'")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"the equation {equation!r} names {len(terms)} operand(s); {len(shapes)} are given")
    sizes: dict[str, int] = {}
    batch: list[int] = []
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        labels = _labels(term, equation)
        named = [c for c in labels if c != "."]
        rest = len(shape) - len(named)
        if rest < 0 or (rest > 0 and "." not in labels):
            raise ValueError(
                f"operand {k} has {len(shape)} dimension(s), but {term!r} in the equation names {len(named)}"
            )
        dims = iter(shape)
        for c in labels:
            if c == ".":
                ell = [next(dims) for _ in range(rest)]
                width = max(len(batch), len(ell))
                old = [1] * (width - len(batch)) + batch
                new = [1] * (width - len(ell)) + ell
                if any(p != q and 1 not in (p, q) for p, q in zip(old, new, strict=True)):
                    raise ValueError(f"the '...' dimensions of the operands do not broadcast ({old} and {new})")
                batch = [max(p, q) for p, q in zip(old, new, strict=True)]
                continue
            n = next(dims)
            if sizes.get(c, n) != n and 1 not in (sizes[c], n):
                raise ValueError(f"the label {c!r} has sizes {sizes[c]} and {n} in different places")
            sizes[c] = max(sizes.get(c, n), n)
    if rhs:
        out = _labels(rhs, equation)
        named = [c for c in out if c != "."]
        if len(set(named)) != len(named) or any(c not in sizes for c in named):
            raise ValueError(f"the output {rhs!r} repeats a label or names one no operand has")
    return math.prod(sizes.values()) * math.prod(batch)


def _labels(term: str, equation: str) -> list[str]:
    """The labels of one term, '...' as one '.' entry."""
    if term.count("...") > 1 or term.replace("...", "").count("."):
        raise ValueError(f"the term {term!r} of {equation!r} may hold '...' once, and no other '.'")
    return list(term.replace("...", "."))


def _einsum(ctx: Any, *arrays: Any, equation: str) -> Any:
    np = np_()
    return np.asarray(np.einsum(equation.replace(" ", ""), *arrays, optimize=False), dtype=object)


def _square(x: Any, what: str) -> None:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{what} needs square matrices")
    if x.shape[-1] > _EXACT_SIZE:
        raise ValueError(f"the exact {what} is written out only up to {_EXACT_SIZE} x {_EXACT_SIZE}")


def _det(ctx: Any, x: Any) -> Any:
    np = np_()
    _square(x, "det")
    out = np.empty(x.shape[:-2], dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = ctx.sp.Matrix(x[idx].tolist()).det(method="berkowitz")
    return out


def _inverse(ctx: Any, x: Any) -> Any:
    np = np_()
    _square(x, "inverse")
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(x.shape[:-2]):
        m = ctx.sp.Matrix(x[idx].tolist())
        d = m.det(method="berkowitz")
        if ctx.value(d) == 0:
            raise ValueError("the matrix is singular: it has no inverse")
        out[idx] = np.array((m.adjugate() / d).tolist(), dtype=object)
    return out


def _square_work(x: tuple[int, ...]) -> int:
    return math.prod(x[:-2]) * (x[-1] if x else 1) ** 3


ENTRIES = [
    OpSpec(
        "dot",
        2,
        (),
        "general",
        "torch.dot",
        rule=lambda ctx, a, b: ctx.sp.Add(*(a * b)),
        work=lambda a, b: math.prod(a),
        doc="the dot product of two 1-D tensors: sum(a*b)",
        example="dot(a, b)",
        names=spellings("dot")[1:],
    ),
    OpSpec(
        "inner",
        2,
        (),
        "general",
        "torch.inner",
        rule=lambda ctx, a, b: a * b if a.ndim == 0 or b.ndim == 0 else np_().inner(a, b),
        work=lambda a, b: math.prod(a) * math.prod(b[:-1]),
        doc="sums of products over the last dimension of both (a*b for scalars)",
        example="inner(A, B)",
        names=spellings("inner")[1:],
    ),
    OpSpec(
        "outer",
        2,
        (),
        "general",
        "torch.outer",
        rule=lambda ctx, a, b: np_().multiply.outer(a, b),
        work=lambda a, b: math.prod(a) * math.prod(b),
        doc="the outer product of two 1-D tensors: out[i, j] = a[i]*b[j]",
        example="outer(a, b)",
        names=(*spellings("outer")[1:], "torch.ger", ".ger"),
    ),
    OpSpec(
        "mv",
        2,
        (),
        "general",
        "torch.mv",
        rule=lambda ctx, A, x: np_().matmul(A, x),
        work=lambda A, x: math.prod(A),
        doc="matrix times vector: A (n x m) @ x (m)",
        example="mv(W, x)",
        names=spellings("mv")[1:],
    ),
    OpSpec(
        "bmm",
        2,
        (),
        "general",
        "torch.bmm",
        rule=lambda ctx, A, B: np_().matmul(A, B),
        work=lambda A, B: math.prod(A) * (B[-1] if len(B) == 3 else 1),
        doc="batched matrix product of 3-D tensors: (b x n x m) @ (b x m x p)",
        example="bmm(A, B)",
        names=spellings("bmm")[1:],
    ),
    OpSpec(
        "einsum",
        1,
        (),
        "general",
        "torch.einsum",
        rule=_einsum,
        work=lambda *shapes, equation: einsum_work(equation, *shapes),
        leading=(Param("equation", "string", True),),
        variadic=True,
        doc="Einstein summation: einsum('ij,j->i', W, x); labels a-z A-Z, ',', '->', '...'",
        example="einsum('ij,j->i', W, x)",
        names=spellings("einsum", method=False),
    ),
    OpSpec(
        "det",
        1,
        (),
        "general",
        "torch.linalg.det",
        rule=_det,
        work=_square_work,
        kink="at a singular matrix torch's backward can give 0 where the cofactors are not (pytorch#104675): "
        "the exact and finite-difference checks then disagree",
        doc=f"the determinant of square matrices (batched); exact up to {_EXACT_SIZE} x {_EXACT_SIZE}",
        example="det(W)",
        names=(*spellings("det")[1:], "torch.linalg.det"),
    ),
    OpSpec(
        "inverse",
        1,
        (),
        "general",
        "torch.linalg.inv",
        rule=_inverse,
        work=_square_work,
        doc=f"the inverse of square matrices (batched); exact up to {_EXACT_SIZE} x {_EXACT_SIZE}",
        example="inverse(W) @ x",
        names=(*spellings("inverse")[1:], "torch.linalg.inv"),
    ),
    OpSpec(
        "diag",
        1,
        (Param("diagonal", "int", default=0),),
        "index",
        "torch.diag",
        doc="a 1-D tensor as the diagonal of a square matrix, or the diagonal of a 2-D tensor",
        example="diag(x) @ W",
        names=spellings("diag")[1:],
    ),
    OpSpec(
        "diagonal",
        1,
        (Param("offset", "int", default=0), Param("dim1", "dim", default=0), Param("dim2", "dim", default=1)),
        "index",
        "torch.diagonal",
        doc="the diagonal of two dimensions (dim1, dim2), shifted by offset",
        example="diagonal(W, 1)",
        names=spellings("diagonal")[1:],
    ),
]
