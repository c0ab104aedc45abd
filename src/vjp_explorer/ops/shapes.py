"""Functions that only move elements (structure "index"): each output element is an input element or 0.

The exact routes need no rule for these: they run the same torch function on the element numbers and read
the elements back (see engine/symbolic.index_map)."""

from __future__ import annotations

from .spec import OpSpec, Param, spellings

ENTRIES = [
    OpSpec(
        "tril",
        1,
        (Param("diagonal", "int", default=0),),
        "index",
        "torch.tril",
        doc="the lower triangle (on and below a diagonal); the rest is 0",
        example="tril(W)",
        names=spellings("tril"),
    ),
    OpSpec(
        "triu",
        1,
        (Param("diagonal", "int", default=0),),
        "index",
        "torch.triu",
        doc="the upper triangle (on and above a diagonal); the rest is 0",
        example="triu(W, 1)",
        names=spellings("triu"),
    ),
]
