"""Tensors the program makes: torch.tensor([...]), ones, zeros, full, eye, arange, linspace, rand, randn and
the *_like forms. Their sizes were checked by the parser (or come from an existing tensor) and are charged
to the budgets before torch allocates; the tensor made is recorded in the step (Step.fixed), so every route
replays the very numbers torch used, random draws included. They are constants: no leaf reaches them."""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ProgramError
from ..language import program as P
from .vals import Val, first_line

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}


def make(it: Any, e: P.Const, env: dict[str, Val]) -> Val:
    if it.replaying and id(e) in it.fixed:
        made = it.fixed[id(e)]
        if e.dtype is None and made.is_floating_point() and made.dtype != it.dtype:
            made = made.to(it.dtype)  # the replay's own default dtype (float64 for finite differences), exactly
        return Val(made, {})
    spec = e.spec
    shape = tuple(spec.shape)
    dtype = DTYPES[e.dtype] if e.dtype is not None else it.dtype
    if e.like is not None:
        x = it.value_of(e.like, env).v
        t = x if isinstance(x, torch.Tensor) else torch.as_tensor(float(x), dtype=it.dtype)
        shape = tuple(t.shape)
        dtype = DTYPES[e.dtype] if e.dtype is not None else t.dtype
    it._charge(shape, e.span)
    try:
        out = _build(spec, shape, dtype, it.gen)
    except (RuntimeError, ValueError, TypeError) as err:
        raise it.err(ProgramError, f"{spec.generator or 'tensor'}() failed: {first_line(err)}", e.span) from None
    it.fixed[id(e)] = out
    return Val(out, {})


def _build(spec: Any, shape: tuple[int, ...], dtype: torch.dtype, gen: Any) -> torch.Tensor:
    g, a = spec.generator, spec.args
    if g is None:
        return torch.tensor(spec.data, dtype=torch.float64).reshape(shape).to(dtype)
    if g == "ones":
        return torch.ones(shape, dtype=dtype)
    if g == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if g == "full":
        return torch.full(shape, a[-1], dtype=dtype)
    if g == "eye":
        return torch.eye(*shape, dtype=dtype)
    if g == "arange":
        start, stop, step = (0.0, a[0], 1.0) if len(a) == 1 else (a[0], a[1], a[2] if len(a) == 3 else 1.0)
        return torch.arange(start, stop, step, dtype=dtype)
    if g == "linspace":
        return torch.linspace(a[0], a[1], int(a[2]), dtype=dtype)
    if gen is None:
        gen = torch.Generator().manual_seed(0)
    if g == "rand":
        return torch.rand(shape, generator=gen, dtype=dtype)
    if g == "randn":
        return torch.randn(shape, generator=gen, dtype=dtype)
    raise AssertionError(g)  # pragma: no cover - the parser knows the list
