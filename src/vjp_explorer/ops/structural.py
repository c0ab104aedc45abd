"""Reductions, products, transposes, softmax and detach: the exact routes build these from sums,
products and index maps of the elements, so their entries carry no elementwise rule."""

from __future__ import annotations

from typing import Any

from .reductions import axes_of, each, extreme, total, vector_norm
from .spec import OpSpec, Param, spellings

_DIMS = (Param("dim", "dims"), Param("keepdim", "bool"))


def _norm_kinks(torch: Any, x: Any, **_: Any) -> list[Any]:
    return [(x != 0).any().reshape(1).double()]  # a norm is not smooth where all its elements are 0


def _matrix_dims(x: int, dim: Any, ord: Any) -> tuple[int, int] | None:
    """The two dims of a matrix norm (torch.linalg.norm), or None for a vector norm."""
    if isinstance(dim, tuple) and len(dim) == 2:
        return dim[0], dim[1]
    if dim is None and ord is not None and x == 2:
        return 0, 1
    return None


def _linalg_norm_check(x: tuple[int, ...], ord: Any = None, dim: Any = None, keepdim: Any = None) -> int:
    mat = _matrix_dims(len(x), dim, ord)
    if mat is not None and ord in (2, -2, "nuc"):
        raise ValueError(
            f"the matrix norm ord={ord!r} is a function of the singular values, which vjp does not support; "
            "use ord='fro', 1, -1, float('inf') or torch.linalg.vector_norm"
        )
    if mat is None and ord in ("fro", "nuc") and dim is not None:
        raise ValueError(f"ord={ord!r} is a matrix norm: give two dims (dim=(0, 1))")
    return 0


def _linalg_norm(ctx: Any, x: Any, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Any:
    mat = _matrix_dims(x.ndim, dim, ord)
    if mat is None or ord in (None, "fro"):
        return vector_norm(ctx, x, 2.0 if ord is None else ord, dim, keepdim)
    r, c = (d % x.ndim for d in mat)
    # 1: the largest column sum of |x|, inf: the largest row sum (torch: amax of the sums, ties even)
    summed, other = (r, c) if abs(float(ord)) == 1 else (c, r)
    sums = total(each(ctx.sp.Abs, x), summed, keepdim=True)
    out = extreme(ctx, sums, other, keepdim=True, largest=float(ord) > 0)
    return out if keepdim else out.reshape([n for d, n in enumerate(out.shape) if d not in axes_of(x, (r, c))])


ENTRIES = [
    OpSpec(
        "sum",
        1,
        _DIMS,
        "reduction",
        "torch.sum",
        doc="sum of the elements",
        example="x.sum(dim=0)",
        names=spellings("sum"),
    ),
    OpSpec(
        "mean",
        1,
        _DIMS,
        "reduction",
        "torch.mean",
        doc="mean of the elements",
        example="x.mean()",
        names=spellings("mean"),
    ),
    OpSpec(
        "prod",
        1,
        (Param("dim", "dim"), Param("keepdim", "bool")),
        "reduction",
        "torch.prod",
        doc="product of the elements",
        example="x.prod()",
        names=spellings("prod"),
    ),
    OpSpec(
        "norm",
        1,
        (Param("p", "number", default=2.0, choices=("fro", "inf")), Param("dim", "dims"), Param("keepdim", "bool")),
        "general",
        "torch.norm",
        rule=lambda ctx, x, p=2.0, dim=None, keepdim=False: vector_norm(ctx, x, p, dim, keepdim),
        kink="a norm is not smooth where all its elements are 0; p=inf splits the gradient evenly among ties",
        kinks=_norm_kinks,
        doc="p-norm of the elements (default 2; 'fro' is 2; float('inf') the largest |x|), over dim",
        example="x.norm(p=1)",
        names=spellings("norm"),
    ),
    OpSpec(
        "vector_norm",
        1,
        (Param("ord", "number", default=2.0, choices=("inf",)), Param("dim", "dims"), Param("keepdim", "bool")),
        "general",
        "torch.linalg.vector_norm",
        rule=lambda ctx, x, ord=2.0, dim=None, keepdim=False: vector_norm(ctx, x, ord, dim, keepdim),
        kink="a norm is not smooth where all its elements are 0; ord=inf splits the gradient evenly among ties",
        kinks=_norm_kinks,
        doc="the vector ord-norm of the elements over dim (all of them by default)",
        example="torch.linalg.vector_norm(x, ord=1)",
        names=("torch.linalg.vector_norm",),
    ),
    OpSpec(
        "linalg_norm",
        1,
        (Param("ord", "number", choices=("fro", "nuc", "inf")), Param("dim", "dims"), Param("keepdim", "bool")),
        "general",
        "torch.linalg.norm",
        rule=_linalg_norm,
        work=_linalg_norm_check,
        kink="a norm is not smooth where all its elements are 0; ord=inf, 1 split the gradient evenly among ties",
        kinks=_norm_kinks,
        doc="vector norm (1-D, or an int dim), or matrix norm (2-D, or two dims): 'fro', 1, -1, inf, -inf "
        "(2, -2 and 'nuc' need singular values and are refused)",
        example="torch.linalg.norm(W)",
        names=("torch.linalg.norm",),
    ),
    OpSpec(
        "matmul",
        2,
        (),
        "matmul",
        "torch.matmul",
        operator="@",
        doc="matrix product, same as @",
        example="matmul(W, x)",
        names=(*spellings("matmul"), "torch.linalg.matmul"),
    ),
    OpSpec(
        "mm",
        2,
        (),
        "matmul",
        "torch.mm",
        doc="matrix product of 2-D tensors",
        example="mm(A, B)",
        names=spellings("mm"),
    ),
    OpSpec(
        "transpose",
        1,
        (Param("dim0", "dim", True), Param("dim1", "dim", True)),
        "transpose",
        "torch.transpose",
        doc="swap two dimensions",
        example="transpose(W, 0, 1)",
        names=spellings("transpose"),
    ),
    OpSpec(
        "t",
        1,
        (),
        "transpose",
        "torch.t",
        doc="transpose of a tensor of at most 2 dims",
        example="W.t()",
        names=spellings("t"),
    ),
    OpSpec(
        "softmax",
        1,
        (Param("dim", "dim", True),),
        "softmax",
        "torch.softmax",
        doc="exp(x)/sum(exp(x)) along dim",
        example="softmax(x, dim=0)",
        names=spellings("softmax", functional=True, special="softmax"),
    ),
    OpSpec(
        "log_softmax",
        1,
        (Param("dim", "dim", True),),
        "softmax",
        "torch.log_softmax",
        doc="x - logsumexp(x) along dim",
        example="log_softmax(x, dim=0)",
        names=spellings("log_softmax", functional=True, special="log_softmax"),
    ),
    OpSpec(
        "detach",
        1,
        (),
        "detach",
        "torch.detach",
        doc="the value, cut from the graph (as .data)",
        example="x.detach() * x",
        names=spellings("detach"),
    ),
]
