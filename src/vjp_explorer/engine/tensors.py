"""ValueSpec -> torch tensor, and torch tensor -> TensorData (plain Python numbers)."""

from __future__ import annotations

import math

import torch

from ..errors import ValueSyntaxError
from ..language.values import ValueSpec
from ..result import Stats, TensorData

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_tensor(
    spec: ValueSpec, label: str, dtype: torch.dtype, gen: torch.Generator, device: str = "cpu"
) -> torch.Tensor:
    """Build the tensor a ValueSpec describes (sizes were checked by the value parser)."""
    g = spec.generator
    a = spec.args
    kw = {"dtype": dtype, "device": device}
    if g is None:
        assert spec.data is not None
        t = torch.tensor(spec.data, dtype=torch.float64).reshape(spec.shape).to(**kw)  # type: ignore[arg-type]
    elif g == "ones":
        t = torch.ones(spec.shape, **kw)  # type: ignore[arg-type]
    elif g == "zeros":
        t = torch.zeros(spec.shape, **kw)  # type: ignore[arg-type]
    elif g == "full":
        t = torch.full(spec.shape, a[-1], **kw)  # type: ignore[arg-type]
    elif g == "eye":
        t = torch.eye(*spec.shape, **kw)  # type: ignore[arg-type]
    elif g == "arange":
        start, stop, step = (0.0, a[0], 1.0) if len(a) == 1 else (a[0], a[1], a[2] if len(a) == 3 else 1.0)
        t = torch.arange(start, stop, step, **kw)  # type: ignore[arg-type]
    elif g == "linspace":
        t = torch.linspace(a[0], a[1], int(a[2]), **kw)  # type: ignore[arg-type]
    elif g == "rand":
        t = torch.rand(spec.shape, generator=gen, dtype=dtype).to(device)
    elif g == "randn":
        t = torch.randn(spec.shape, generator=gen, dtype=dtype).to(device)
    else:  # pragma: no cover - the value parser knows the list
        raise AssertionError(g)
    if not bool(torch.isfinite(t).all()):
        k = int((~torch.isfinite(t)).reshape(-1).nonzero()[0])
        raise ValueSyntaxError(
            f"{label}: element {k} does not fit in {str(dtype).removeprefix('torch.')} "
            f"(it overflows to infinity); inputs must be finite.",
            hint="Use --dtype float64 for larger magnitudes.",
        )
    return t


def to_data(t: torch.Tensor) -> TensorData:
    """Copy-free (where possible) view of a tensor as plain Python numbers, with summary stats."""
    t = t.detach().to("cpu")
    flat = t.reshape(-1).contiguous()
    if flat.numel() == 0:
        return TensorData(tuple(t.shape), [], Stats(math.nan, math.nan, 0.0, 0, 0))
    finite = torch.isfinite(flat)
    nfin = int(finite.sum())
    if nfin == flat.numel():
        lo, hi = float(flat.min()), float(flat.max())
        norm = float(torch.linalg.vector_norm(flat.double()))
    elif nfin:
        vals = flat[finite]
        lo, hi = float(vals.min()), float(vals.max())
        norm = float(torch.linalg.vector_norm(vals.double()))
    else:
        lo = hi = norm = math.nan
    nan = int(torch.isnan(flat).sum())
    stats = Stats(lo, hi, norm, nan, flat.numel() - nfin - nan)
    try:
        data: memoryview | list[float] = memoryview(flat.numpy())
    except (RuntimeError, TypeError, ImportError):  # no numpy: plain list
        data = flat.tolist()
    return TensorData(tuple(t.shape), data, stats)
