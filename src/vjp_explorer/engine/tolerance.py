"""The one tolerance table: per dtype, and how a tolerance is weighed by the size of the terms a route summed.

Every door (programs, snippets, `vjp check`) compares through this table. An element passes when

    |got − ref| <= atol + rtol · max(|ref|, m)                                (first weighing)

with m the size of the terms the route summed to get ref (J's contraction Σᵢ |v[i]·J[i, j]|; the finite
differences' own error estimate / rtol). Where that fails, the element is weighed once more:

    |got − ref| <= atol + max(rtol · max(|ref|, m), ROUNDOFF_UNITS · eps · M)  (second weighing)

with M the size of the terms backward itself added up (engine/term_sizes.py: an absolute backward, or the
exact route's Σ|terms| as written). That allows for rounding where equal terms cancel, never for a wrong
gradient: a backward off by 1e-9 of a term of size 1e9 still disagrees in float64. Sizes come from the
dtype checked, `got`'s dtype: a float32 .grad rounds at float32's eps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..result import Tolerance

# float32 keeps ~7 significant digits; a few ops in a chain lose a little more. float16/bfloat16 keep 3 and 2.
TOLERANCES = {
    "float64": Tolerance(rtol=1e-9, atol=1e-14),
    "float32": Tolerance(rtol=1e-4, atol=1e-7),
    "float16": Tolerance(rtol=1e-2, atol=1e-3),
    "bfloat16": Tolerance(rtol=5e-2, atol=1e-2),
}
EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
# the second weighing: this many units of roundoff (eps of the dtype checked) of the size of the terms
ROUNDOFF_UNITS = 16


def dtype_name(dtype: Any) -> str:
    """'float32' for torch.float32, 'float32' or a numpy dtype; float32 for anything not in the table."""
    name = str(dtype).removeprefix("torch.")
    return name if name in TOLERANCES else "float32"


def tolerance(dtype: Any) -> Tolerance:
    """The (rtol, atol) of a dtype (torch dtype or its name); an unknown one gets float32's."""
    return TOLERANCES[dtype_name(dtype)]


def eps(dtype: Any) -> float:
    """The unit roundoff of a dtype (torch dtype or its name)."""
    return EPS[dtype_name(dtype)]


def allowed(ref: Any, route_size: Any, tol: Tolerance) -> Any:
    """The first weighing's bound on |got − ref|: atol + rtol·max(|ref|, route_size) (numbers or tensors)."""
    return tol.atol + tol.rtol * _max(abs(ref), route_size)


def roundoff_as_size(terms: Any, dtype: Any, tol: Tolerance) -> Any:
    """The size M of backward's terms expressed as a size the first weighing's rule takes: ROUNDOFF_UNITS ·
    eps · M / rtol, so that rtol times it is that many units of roundoff of M."""
    return terms * (ROUNDOFF_UNITS * eps(dtype) / tol.rtol)


def _max(a: Any, b: Any) -> Any:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return max(a, b)
    import torch

    return torch.maximum(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))


@dataclass(frozen=True)
class Row:
    """One row of the printed table."""

    dtype: str
    rtol: float
    atol: float
    eps: float


def table() -> list[Row]:
    """The tolerance table, one row per dtype, as `vjp tolerances` prints it and docs/checks.md shows it."""
    return [Row(n, t.rtol, t.atol, EPS[n]) for n, t in TOLERANCES.items()]


__all__ = ["ROUNDOFF_UNITS", "TOLERANCES", "allowed", "dtype_name", "eps", "roundoff_as_size", "table", "tolerance"]
