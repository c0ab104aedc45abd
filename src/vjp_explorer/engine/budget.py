"""The run's budgets, checked from shapes alone before an operation allocates: elements, memory, multiply-adds.

Result shapes come first, without computing anything: matmul's by its rule, every other registry
function's from torch itself on meta tensors.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import LimitError
from ..language import program as P
from ..ops import OpSpec
from .vals import first_line


def check_numel(it: Any, shape: tuple[int, ...], span: P.Span) -> None:
    """Refuse a tensor of more elements than the limit allows, before it is made."""
    n = math.prod(shape)
    if n > it.limits.elements:
        raise it.err(
            LimitError,
            f"This operation would make a tensor of shape {list(shape)} ({n:,} elements); "
            f"the limit is {it.limits.elements:,} (--limit elements=N).",
            span,
        )


def charge(it: Any, shape: tuple[int, ...], span: P.Span, work: int = 0, transient: int = 0) -> None:
    """Check an operation against the run's budgets before it runs, then count it.

    Memory: every result the program computes is counted three times its size (the value, what
    autograd saves for backward, the grad backward gives it), summed over the run with the inputs
    (counted by Interpreter.run): a deterministic bound from shapes, not a measurement (freed buffers and
    malloc's thresholds vary from run to run).
    `transient` is memory the operation needs only while it runs (matmul's broadcast operands).
    Work: a matrix product's multiply-adds, three times (the forward and the two products of its
    backward), summed over the run.
    """
    check_numel(it, shape, span)
    size = math.prod(shape) * it.dtype.itemsize
    need = it.memory + 3 * size + transient
    if need > it.limits.memory_bytes:
        raise it.err(
            LimitError,
            f"This operation would bring the run's memory estimate to {_bytes(need)}: each value the program "
            f"computes counts three times its size (the value, what autograd saves for backward, its grad), "
            f"{_bytes(it.memory)} so far and {_bytes(3 * size + transient)} for this one (shape "
            f"{list(shape)}). The limit is memory_bytes = {_bytes(it.limits.memory_bytes)}; raise it with "
            f"--limit memory_bytes=N (bytes).",
            span,
        )
    if it.work + 3 * work > it.limits.multiply_adds:
        raise it.err(
            LimitError,
            f"This matrix product would bring the run's arithmetic to {it.work + 3 * work:.3g} multiply-adds "
            f"({work:.3g} for its forward, twice that for its backward, {it.work:.3g} before it). The limit "
            f"is multiply_adds = {it.limits.multiply_adds:.3g}; raise it with --limit multiply_adds=N.",
            span,
        )
    it.memory += 3 * size
    it.work += 3 * work


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """torch.matmul's result shape for operands of these shapes; None where they do not fit."""
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    try:
        batch = tuple(torch.broadcast_shapes(a2[:-2], b2[:-2]))
    except RuntimeError:
        return None
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def meta_shape(spec: OpSpec, xs: list[torch.Tensor], params: dict[str, Any]) -> tuple[int, ...]:
    """The shape of spec's result, from torch on meta tensors (no data, no arithmetic)."""
    try:
        meta = spec.call_torch(*(torch.empty(x.shape, dtype=x.dtype, device="meta") for x in xs), **params)
        return tuple(meta.shape)
    except NotImplementedError:  # a shape that depends on the values (a boolean mask): at most the input's
        return (max(x.numel() for x in xs),)
    except AssertionError as err:  # some of torch's meta functions check their arguments with assert
        raise RuntimeError(first_line(err)) from None


def _bytes(n: int) -> str:
    """A byte count as people read it: 8.59 GB, 750 MB."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"
