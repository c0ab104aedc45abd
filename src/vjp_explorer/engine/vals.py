"""The values the interpreter passes around: a tensor with its dependence on the leaves and its formula size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

DIAG = "diag"
DENSE = "dense"


@dataclass
class Val:
    """A value during interpretation: a tensor (or plain number) and its dependence on leaves."""

    v: Any  # torch.Tensor | float | bool
    deps: dict[str, str] = field(default_factory=dict)
    # estimated size of one element's exact formula: (expression nodes, leaf symbols it holds);
    # lets the symbolic check be skipped from the sizes alone, before sympy builds anything
    size: tuple[int, int] = (1, 0)
    reads: int = 0  # how often the program read it by name (a write into an index needs it unread elsewhere)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.v.shape) if isinstance(self.v, torch.Tensor) else ()


_CAP = 10**15


def grow(*sizes: tuple[int, int], times: int = 1) -> tuple[int, int]:
    """The formula size of an op on operands of these sizes, repeated `times` (matmul, reductions)."""
    nodes = times * (sum(s[0] for s in sizes) + 1)
    syms = times * sum(s[1] for s in sizes)
    return min(nodes, _CAP), min(syms, _CAP)


def first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def merge(*sides: Val, shape: tuple[int, ...]) -> dict[str, str]:
    # an elementwise op keeps a diagonal dependence only if the operand was not broadcast up
    deps: dict[str, str] = {}
    for side in sides:
        widened = side.shape != shape
        for leaf, kind in side.deps.items():
            k = DENSE if widened or kind == DENSE else DIAG
            deps[leaf] = DENSE if deps.get(leaf) == DENSE else k
    return deps


def dense(*vals: Val) -> dict[str, str]:
    return {leaf: DENSE for v in vals for leaf in v.deps}
