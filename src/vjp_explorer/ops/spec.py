"""What one registry entry holds: every fact about a function of the program language.

Nothing here imports torch or sympy: the torch function is named by its dotted path and resolved on
first use, and the exact rules receive the sympy module as their first argument, so `vjp --help`
and the parser stay light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Param:
    """A parse-time constant parameter: `dim`, `keepdim`, `p`, `min`, ..."""

    name: str
    # "dim" (int), "dims" (int or tuple of ints), "dimlist" (dims, given to torch as a tuple), "bool",
    # "number", "int", "shape" (ints, as a tuple or as the remaining positional arguments: reshape(2, 3)),
    # "choice" (one of `choices`), "string" (a short string the entry checks itself: an einsum equation)
    kind: str
    required: bool = False
    default: float | str | None = None  # the value torch uses when it is not given
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpSpec:
    """One function: its spellings, signature, structure, torch call, exact rule and conventions."""

    name: str
    tensors: int  # tensor operands (the receiver of a method call is the first)
    params: tuple[Param, ...] = ()
    # elementwise (its tensors broadcast) | reduction | matmul | transpose | softmax | detach |
    # general (the exact routes apply `rule` to whole arrays) | index (every output element is an input
    # element or 0: the exact routes run the torch function on element numbers)
    structure: str = "elementwise"
    torch: str = ""  # dotted path of the real torch function that runs, e.g. torch.nn.functional.gelu
    # the exact rule: (sympy, *elements, **params) -> a sympy expression; None for the structural ops,
    # which the exact routes build from sums, products and index maps
    exact: Callable[..., Any] | None = None
    unsupported: str = ""  # why the exact routes skip it (then exact is None)
    operator: str = ""  # the same as this operator of the language (pow is **)
    evaluates: tuple[str, ...] = ()  # the sympy function classes this torch function computes
    kink: str = ""  # torch's convention where the function has a kink or a step
    # (torch, *tensors, **params) -> tensors whose change means a step crossed a kink (finite differences)
    kinks: Callable[..., list[Any]] | None = None
    doc: str = ""
    example: str = ""
    names: tuple[str, ...] = ()  # every spelling: f, torch.f, .f (a method), F.f, torch.nn.functional.f, ...
    # structure "general": (ctx, *arrays, **params) -> array, on numpy object arrays of sympy expressions;
    # ctx.sp is sympy and ctx.value(expr) the number an expression has at the inputs (to pick a branch)
    rule: Callable[..., Any] | None = None
    # multiply-adds of one call, from its operands' shapes and its parameters (the multiply_adds budget)
    work: Callable[..., int] | None = None
    leading: tuple[Param, ...] = ()  # parameters written before the tensors: einsum("ij,j->i", W, x)
    variadic: bool = False  # `tensors` is the least number of tensor operands; more may follow
    sequence: bool = False  # the tensors go to torch as one list: torch.cat([a, b], dim=0)
    # torch returns a tuple of tensors (chunk, split, unbind, max with dim): the program takes one of them,
    # by index or unpacking; the parser adds the parameters `item` (which) and `unpack` (how many names)
    tuple_result: bool = False
    # tensor operands torch takes by keyword (gather(input, dim, index) has its dim between them), and those
    # that are indices (integer tensors): the exact routes pass their values, not their element numbers
    tensor_names: tuple[str, ...] = ()
    index_args: tuple[int, ...] = ()
    # the index operand may instead hold probabilities, of the input's own shape (cross_entropy's target)
    probabilities: bool = False

    @property
    def shown(self) -> str:
        """The name a user writes: max_dim is max(x, dim)."""
        return self.name.removesuffix("_dim")

    @property
    def elementwise(self) -> bool:
        return self.structure == "elementwise"

    def call_torch(self, *tensors: Any, **params: Any) -> Any:
        """The real torch function on these tensors, with the parameters the program gave."""
        given = {k: v for k, v in params.items() if v is not None}
        lead = [given.pop(p.name) for p in self.leading if p.name in given]
        item, unpack = given.pop("item", None), given.pop("unpack", None)
        if self.sequence:
            out = resolve(self.torch)(*lead, list(tensors), **given)
        elif self.tensor_names:
            out = resolve(self.torch)(*lead, **dict(zip(self.tensor_names, tensors, strict=True)), **given)
        else:
            out = resolve(self.torch)(*lead, *tensors, **given)
        if not self.tuple_result:
            return out
        shown = self.shown
        if item is None:
            raise ValueError(f"{shown}() gives a tuple of tensors: take one, x.{shown}(...)[0], or unpack them")
        if unpack is not None and unpack != len(out):  # Python's own check of a, b = ...
            many = "too many" if len(out) > unpack else "not enough"
            raise ValueError(f"{many} values to unpack (expected {unpack}, got {len(out)})")
        if not -len(out) <= item < len(out):
            raise IndexError(f"{shown}() gave {len(out)} tensors; there is no [{item}]")
        return out[item]

    def exact_route(self) -> str:
        """How the exact routes follow it, in words (for listings and docs)."""
        if self.operator:
            return f"as the operator {self.operator}"
        if self.rule is not None:
            return f"structural ({self.structure}): {self.doc}, built from sympy expressions of the elements"
        if self.structure == "index":
            return "structural (index): each output element is an input element (or 0), as torch picks it"
        if self.exact is not None:
            import sympy

            xs = [sympy.Symbol(n) for n in "xyz"[: self.tensors]]
            defaults = {p.name: _sym_default(sympy, p) for p in self.params if p.kind == "number"}
            return f"sympy: {self.exact(sympy, *xs, **defaults)}"
        if self.unsupported:
            return f"unsupported: {self.unsupported}"
        return f"structural ({self.structure}): built element by element from sums and products"


def _sym_default(sympy: Any, p: Param) -> Any:
    d = p.default
    if d is None:
        return sympy.Symbol(p.name)
    return sympy.Integer(int(d)) if d is not None and float(d).is_integer() else sympy.Float(d)


@cache
def resolve(path: str) -> Callable[..., Any]:
    """torch.nn.functional.gelu -> the function (a path from our own registry, never user text)."""
    module, _, attr = path.rpartition(".")
    if module.endswith(".Tensor"):  # a method only: torch.Tensor.float
        return getattr(importlib.import_module(module.removesuffix(".Tensor")).Tensor, attr)  # type: ignore[no-any-return]
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def spellings(
    name: str, *, torch: bool = True, method: bool = True, functional: bool = False, special: str = ""
) -> tuple[str, ...]:
    """The names a function answers to: always `name`; `torch.name` and `.name` where torch has them;
    `F.name` and `torch.nn.functional.name` for torch.nn.functional; `torch.special.<special>`."""
    out = [name]
    if torch:
        out.append(f"torch.{name}")
    if method:
        out.append(f".{name}")
    if functional:
        out += [f"F.{name}", f"torch.nn.functional.{name}"]
    if special:
        out.append(f"torch.special.{special}")
    return tuple(out)
