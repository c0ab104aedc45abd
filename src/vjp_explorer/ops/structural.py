"""Reductions, products, transposes, softmax and detach: the exact routes build these from sums,
products and index maps of the elements, so their entries carry no elementwise rule."""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings

_DIMS = (Param("dim", "dims"), Param("keepdim", "bool"))


def _norm_kinks(torch: Any, x: Any, **_: Any) -> list[Any]:
    return [(x != 0).any().reshape(1).double()]  # a norm is not smooth where all its elements are 0


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
        (Param("p", "number"), Param("dim", "dims"), Param("keepdim", "bool")),
        "reduction",
        "torch.linalg.vector_norm",
        kink="a norm is not smooth where all its elements are 0",
        kinks=_norm_kinks,
        doc="p-norm (default 2)",
        example="x.norm(p=1)",
        names=spellings("norm"),
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
        names=spellings("matmul"),
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
