"""One backward or grad call as plain data: the event every door explains (a program's call, each call of a
snippet, the call `vjp check` makes) and every view and the JSON document show.

Plain dataclasses of lists, numbers and strings (no numpy, no torch), at the bottom of the package, so that
the confined child (which records events), the doors and the renderers all share them without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .verdicts import Check, index_label, status_of, unravel


@dataclass
class TensorInfo:
    """A tensor as the snippet held it: shape, dtype and values (nested lists, float64)."""

    name: str
    shape: list[int]
    dtype: str
    values: Any


@dataclass
class LeafGrad:
    """What one backward/grad call did to one input: its .grad before and after, and Jᵀv from the Jacobian."""

    name: str
    shape: list[int]
    dtype: str
    value: Any
    grad_before: Any  # None where .grad was None
    grad_after: Any
    grad: Any  # what this call contributed: after - before for backward, the returned tensor for grad
    jtv: Any = None  # Jᵀv from the explicit Jacobian (float64), None where it was not built
    jacobian: Any = None  # rows: output elements (flattened), columns: this input's elements (flattened)
    finite_difference: Any = None  # Jᵀv from central differences of the replayed forward (float64)
    grad_norm: float | None = None  # the 2-norm of `grad`, kept where the tensors are not (a folded loop)
    omitted: list[str] = field(default_factory=list)  # arrays above left out (None) for size (confined/payload.py)


@dataclass
class Event:
    """One backward or grad call of the snippet, explained."""

    index: int
    line: int
    source: str
    call: str  # Tensor.backward, torch.autograd.backward, torch.autograd.grad
    outputs: list[TensorInfo]
    v: list[TensorInfo]
    v_origin: str  # given | scalar default 1 | grad_outputs
    retain_graph: bool
    create_graph: bool
    inputs: list[LeafGrad]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    diagnosis: str | None = None  # where a nan/inf entered the backward pass, and the fix
    graph: list[dict[str, Any]] | None = None  # with --graph: the nodes backward ran (see snippet/graph.py)
    results: list[TensorInfo] = field(default_factory=list)  # a functional call's derivative (J, Jᵀv, Jv, H)
    reference: list[TensorInfo] = field(default_factory=list)  # the same from finite differences
    # with --code: the script of this call's backward (backward_code/files.py: file, nodes, reproduces, ...)
    backward_code: dict[str, Any] | None = None
    # inputs its forward met on a kink or tie: {"op", "line", "input", "elements", "count", "convention"}
    # (confined/conventions.py; docs/why.md)
    kinks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return status_of(self.checks)


def element_index(shape: Any, flat: int) -> str:
    """The index of flat position `flat` in a tensor of `shape`, as `[i,j]` (empty for a 0-d tensor): the
    one label format of verdicts.index_label."""
    return index_label("", unravel(tuple(shape), flat))
