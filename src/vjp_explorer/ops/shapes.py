"""Functions that only move elements (structure "index"): each output element is an input element or 0.

The exact routes need no rule for these: they run the same torch function on the element numbers and read
the elements back (see engine/symbolic.index_map). The interpreter asks torch for the result's shape on meta
tensors first, so x.repeat(10**6, 10**6) is refused by the budgets before anything is allocated.
"""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings


def _index(name: str, params: tuple[Param, ...], torch: str, doc: str, example: str, **kw: Any) -> OpSpec:
    names = kw.pop("names", None) or spellings(name)
    tensors = kw.pop("tensors", 1)
    return OpSpec(name, tensors, params, "index", torch, doc=doc, example=example, names=names, **kw)


_DIM0 = Param("dim", "dim", default=0)

ENTRIES = [
    _index(
        "tril",
        (Param("diagonal", "int", default=0),),
        "torch.tril",
        "the lower triangle (on and below a diagonal); the rest is 0",
        "tril(W)",
    ),
    _index(
        "triu",
        (Param("diagonal", "int", default=0),),
        "torch.triu",
        "the upper triangle (on and above a diagonal); the rest is 0",
        "triu(W, 1)",
    ),
    _index(
        "reshape",
        (Param("shape", "shape", True),),
        "torch.reshape",
        "the same elements in a new shape (one size may be -1)",
        "x.reshape(2, 3)",
    ),
    _index(
        "view",
        (Param("size", "shape", True),),
        "torch.Tensor.view",
        "reshape, as a view of the same memory",
        "x.view(-1)",
        names=(".view",),
    ),
    _index(
        "flatten",
        (Param("start_dim", "dim", default=0), Param("end_dim", "dim", default=-1)),
        "torch.flatten",
        "dims start_dim..end_dim merged into one",
        "x.flatten()",
    ),
    _index(
        "unflatten",
        (Param("dim", "dim", True), Param("sizes", "shape", True)),
        "torch.unflatten",
        "one dim split into sizes",
        "x.unflatten(0, (2, 3))",
    ),
    _index(
        "squeeze",
        (Param("dim", "dims"),),
        "torch.squeeze",
        "dims of size 1 removed (all of them, or those named)",
        "x.squeeze(0)",
    ),
    _index("unsqueeze", (Param("dim", "dim", True),), "torch.unsqueeze", "a dim of size 1 inserted", "x.unsqueeze(1)"),
    _index("permute", (Param("dims", "dimlist", True),), "torch.permute", "the dims reordered", "W.permute(1, 0)"),
    _index(
        "movedim",
        (Param("source", "dims", True), Param("destination", "dims", True)),
        "torch.movedim",
        "dims moved to new positions",
        "x.movedim(0, -1)",
    ),
    _index(
        "expand",
        (Param("size", "shape", True),),
        "torch.Tensor.expand",
        "size-1 dims repeated (a view; -1 keeps a size); the grad sums over the copies",
        "x.expand(3, -1)",
        names=(".expand",),
    ),
    _index(
        "expand_as",
        (),
        "torch.Tensor.expand_as",
        "expand to the shape of another tensor",
        "x.expand_as(W)",
        names=(".expand_as",),
        tensors=2,
    ),
    _index(
        "broadcast_to",
        (Param("size", "shape", True),),
        "torch.broadcast_to",
        "expand to a shape by broadcasting",
        "torch.broadcast_to(x, (2, 3))",
    ),
    _index(
        "repeat",
        (Param("repeats", "shape", True),),
        "torch.Tensor.repeat",
        "the tensor tiled: repeats copies along each dim",
        "x.repeat(2, 1)",
        names=(".repeat",),
    ),
    _index(
        "tile",
        (Param("dims", "shape", True),),
        "torch.tile",
        "the tensor tiled (as repeat, leading dims added as needed)",
        "torch.tile(x, (2,))",
    ),
    _index(
        "flip",
        (Param("dims", "dimlist", True),),
        "torch.flip",
        "the order of the elements reversed along dims (x[::-1] in numpy)",
        "x.flip(0)",
    ),
    _index(
        "roll",
        (Param("shifts", "int", True), Param("dims", "dims")),
        "torch.roll",
        "the elements shifted cyclically",
        "x.roll(1, 0)",
    ),
    _index(
        "narrow",
        (Param("dim", "dim", True), Param("start", "int", True), Param("length", "int", True)),
        "torch.narrow",
        "length elements from start along dim",
        "x.narrow(0, 1, 2)",
    ),
    _index("clone", (), "torch.clone", "a copy (the grad passes straight through)", "x.clone()"),
    _index(
        "contiguous",
        (),
        "torch.Tensor.contiguous",
        "the same values in contiguous memory",
        "x.t().contiguous()",
        names=(".contiguous",),
    ),
    _index(
        "cat",
        (_DIM0,),
        "torch.cat",
        "tensors joined along an existing dim",
        "torch.cat([a, b], dim=0)",
        names=("cat", "torch.cat", "concat", "torch.concat", "concatenate", "torch.concatenate"),
        variadic=True,
        sequence=True,
    ),
    _index(
        "stack",
        (_DIM0,),
        "torch.stack",
        "tensors of one shape stacked along a new dim",
        "torch.stack([a, b], dim=1)",
        names=("stack", "torch.stack"),
        variadic=True,
        sequence=True,
    ),
    _index(
        "hstack",
        (),
        "torch.hstack",
        "tensors joined along dim 1 (dim 0 for 1-D ones)",
        "torch.hstack([a, b])",
        names=("hstack", "torch.hstack"),
        variadic=True,
        sequence=True,
    ),
    _index(
        "vstack",
        (),
        "torch.vstack",
        "tensors stacked as rows",
        "torch.vstack([a, b])",
        names=("vstack", "torch.vstack"),
        variadic=True,
        sequence=True,
    ),
    _index(
        "diag_embed",
        (),
        "torch.diag_embed",
        "a vector as the diagonal of a matrix (zeros elsewhere)",
        "torch.diag_embed(x)",
        names=("diag_embed", "torch.diag_embed"),
    ),
    _index(
        "chunk",
        (Param("chunks", "int", True), _DIM0),
        "torch.chunk",
        "a tuple of about equal pieces along dim: take one ([0]) or unpack them (a, b = x.chunk(2))",
        "a, b = x.chunk(2)",
        tuple_result=True,
    ),
    _index(
        "split",
        (Param("split_size_or_sections", "intlist", True), _DIM0),
        "torch.split",
        "a tuple of pieces of a given size (or sizes) along dim: index or unpack it",
        "x.split(2)[1]",
        tuple_result=True,
    ),
    _index(
        "unbind",
        (_DIM0,),
        "torch.unbind",
        "a tuple of the slices along dim: index or unpack it",
        "a, b = W.unbind(0)",
        tuple_result=True,
    ),
    _index(
        "gather",
        (Param("dim", "dim", True),),
        "torch.gather",
        "out[i][j] = x[index[i][j]][j] along dim (dim 0 here): elements picked by an integer tensor",
        "x.gather(1, torch.tensor([[0], [1]]))",
        tensors=2,
        tensor_names=("input", "index"),
        index_args=(1,),
    ),
    _index(
        "index_select",
        (Param("dim", "dim", True),),
        "torch.index_select",
        "the slices along dim at the positions an integer tensor lists",
        "x.index_select(0, torch.tensor([2, 0]))",
        tensors=2,
        tensor_names=("input", "index"),
        index_args=(1,),
    ),
]
