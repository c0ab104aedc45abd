"""ValueSpec -> torch tensor, and torch tensor -> TensorData (a numpy array with its summary)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..errors import Origin, ValueSyntaxError
from ..language.values import ValueSpec
from ..result import Stats, TensorData

# the span the comparison and the elementwise route work in, a chunk at a time
CHUNK = 1 << 18  # elements per chunk: 1-2 MB temporaries stay in cache (1 << 20 runs twice as slow here)

NUMPY_DIMS = 64  # the most dimensions a numpy array has; torch allows more

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_tensor(
    spec: ValueSpec,
    origin: Origin,
    dtype: torch.dtype,
    gen: torch.Generator,
    device: str = "cpu",
    dtype_origin: Origin | None = None,
) -> torch.Tensor:
    """Build the tensor a ValueSpec describes (sizes were checked by the value parser).

    A value that overflows the dtype is refused, naming its `origin`; the hint says how to ask for
    float64 (`dtype_origin`: where the dtype is set).
    """
    wider = f"Use {dtype_origin.give_text('float64')}" if dtype_origin else "Use float64"
    hint = f"{wider} for larger magnitudes."
    g = spec.generator
    a = spec.args
    kw: dict[str, Any] = {"dtype": dtype, "device": device}
    # torch refuses a fill value, start or stop beyond the dtype's range with a RuntimeError of its own
    given = a[-1:] if g == "full" else a[:2] if g == "linspace" else a if g == "arange" else ()
    too_big = next((v for v in given if abs(v) > torch.finfo(dtype).max), None)
    if too_big is not None:
        raise ValueSyntaxError(
            f"{g}() is given {too_big:g}, which does not fit in {str(dtype).removeprefix('torch.')} "
            f"(it overflows to infinity); inputs must be finite.",
            hint=hint,
            origin=origin,
        )
    if g is None:
        assert spec.data is not None
        t = torch.tensor(spec.data, dtype=torch.float64).reshape(spec.shape).to(**kw)
    elif g == "ones":
        t = torch.ones(spec.shape, **kw)
    elif g == "zeros":
        t = torch.zeros(spec.shape, **kw)
    elif g == "full":
        t = torch.full(spec.shape, a[-1], **kw)
    elif g == "eye":
        t = torch.eye(*spec.shape, **kw)
    elif g == "arange":
        start, stop, step = (0.0, a[0], 1.0) if len(a) == 1 else (a[0], a[1], a[2] if len(a) == 3 else 1.0)
        t = torch.arange(start, stop, step, **kw)
    elif g == "linspace":
        t = torch.linspace(a[0], a[1], int(a[2]), **kw)
    elif g == "rand":
        t = torch.rand(spec.shape, generator=gen, dtype=dtype).to(device)
    elif g == "randn":
        t = torch.randn(spec.shape, generator=gen, dtype=dtype).to(device)
    else:  # pragma: no cover - the value parser knows the list
        raise AssertionError(g)
    if not all_finite(t):
        k = int((~torch.isfinite(t)).reshape(-1).nonzero()[0])
        raise ValueSyntaxError(
            f"element {k} does not fit in {str(dtype).removeprefix('torch.')} "
            f"(it overflows to infinity); inputs must be finite.",
            hint=hint,
            origin=origin,
        )
    return t


def all_finite(t: torch.Tensor) -> bool:
    """One pass: min and max are finite exactly when no element is inf or nan (nan propagates)."""
    if t.numel() == 0:
        return True
    lo, hi = torch.aminmax(t.detach().reshape(-1))
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def all_equal_to(t: torch.Tensor, value: float) -> bool:
    """Every element equals value (True for no elements): one float pass, its min and max, where a bool
    mask and .all() cost several on CPU and allocate a mask of the tensor's size."""
    if t.numel() == 0:
        return True
    lo, hi = (float(x) for x in torch.aminmax(t.detach().reshape(-1)))
    return lo == hi == value


def _norm(flat: torch.Tensor, top: float) -> float:
    """The 2-norm of a finite 1-d tensor whose largest |element| is `top`. A dot product in the native dtype
    (BLAS: about 3x faster than vector_norm here); where the sum of squares overflows, scaled by top."""
    if flat.dtype in (torch.float32, torch.float64):
        ss = float(torch.dot(flat, flat))
        if math.isfinite(ss) and ss >= torch.finfo(flat.dtype).tiny:  # else squares underflowed
            return math.sqrt(ss)
    if top == 0:
        return 0.0
    # no square overflows once scaled by the largest element (and underflow loses only negligible terms)
    return top * float(torch.linalg.vector_norm(flat.double() / top))


def _stats(flat: torch.Tensor) -> Stats:
    """min, max and norm of the finite elements of a non-empty 1-d tensor (nan where there is none), and its
    nan and inf counts: two float passes in the common case of no non-finite element."""
    lo_t, hi_t = torch.aminmax(flat)
    lo, hi = float(lo_t), float(hi_t)
    if math.isfinite(lo) and math.isfinite(hi):
        return Stats(lo, hi, _norm(flat, max(-lo, hi)), 0, 0)
    finite = torch.isfinite(flat)
    nfin = int(finite.sum())
    nan = int(torch.isnan(flat).sum())
    if not nfin:
        return Stats(math.nan, math.nan, math.nan, nan, flat.numel() - nan)
    vals = flat[finite]
    norm = float(torch.linalg.vector_norm(vals, dtype=torch.float64))
    return Stats(float(vals.min()), float(vals.max()), norm, nan, flat.numel() - nfin - nan)


def to_data(t: torch.Tensor) -> TensorData:
    """Copy-free (where possible) view of a tensor as a numpy array, with summary stats."""
    t = t.detach().to("cpu")
    shape = tuple(t.shape)
    flat = t.reshape(-1)
    n = flat.numel()
    if n == 0:
        return TensorData(np.zeros(0, t.numpy().dtype), Stats(math.nan, math.nan, 0.0, 0, 0), shape)
    constant = n > 1 and len(shape) <= NUMPY_DIMS and flat.stride(0) == 0
    if constant and math.isfinite(c := float(flat[0])):  # one number n times (expanded)
        one = flat[:1].contiguous().numpy()
        held = np.lib.stride_tricks.as_strided(one, shape, (0,) * len(shape))
        return TensorData(held, Stats(c, c, abs(c) * math.sqrt(n), 0, 0))
    flat = flat.contiguous()
    if len(shape) > NUMPY_DIMS:  # held flat, nested by its dims where it is read
        return TensorData(flat.numpy(), _stats(flat), shape)
    return TensorData(flat.numpy().reshape(shape), _stats(flat))
