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

The judge of a call record (confined/verdict.py) weighs the terms' size the second way only,
atol + max(rtol·|ref|, ROUNDOFF_UNITS·eps·m, e), and measures how far the forward's own rounding moves each
grad (into e): rtol·m let a backward 10x wrong pass where the terms cancel by 1e5.

A finite-difference reference brings its own error estimate e (|D(h) − D(h/2)| plus the evaluations' rounding,
engine/finite_diff.py); every door weighs it the same way, ERROR_WEIGHT times, as a size e/rtol in the rule
above (`with_error`). Beside the tolerances, FD_BUDGETS says per door how many evaluations buy "every column
of J" before the driver falls back to random directions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..limits import Limits
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


# The finite differences' error estimate counts once, in every door. It is |D(h) − D(h/2)| (plus rounding):
# about (3/4)·c·h² where the Richardson value it bounds is off by O(h⁴), so weight 1 is already a wide margin.
# Snippets used to allow 3 times it, added on top of the tolerance (programs and `vjp check` allowed it once,
# as a size): nothing measured asked for the factor 3, and it let a wrong gradient within 3e pass.
ERROR_WEIGHT = 1.0


@dataclass(frozen=True)
class Budget:
    """How many evaluations of the function buy every column of J by finite differences (4 per input
    element: h and h/2, both sides; engine/finite_diff.every_column); past them, random directions."""

    evals: int
    entries: int | None  # J kept whole (outputs × inputs) up to this many entries, where the door keeps it
    why: str


FD_BUDGETS = {
    "program": Budget(
        Limits.finite_difference_evals,
        None,
        "each evaluation runs the program through our interpreter in Python; the default of "
        "--limit finite_difference_evals (every column up to 50 input elements)",
    ),
    "snippet": Budget(
        401,
        None,
        "each evaluation replays the recorded ATen log at C speed, for every explained call of a snippet, "
        "loops included: every column up to 100 input elements",
    ),
    "functional": Budget(
        4_000,
        None,
        "a torch.autograd.functional or torch.func call returns J (or Jv) itself, so its reference is J: "
        "every column up to 1,000 input elements, the snippet's own function called each time",
    ),
    "second": Budget(
        1_000,
        None,
        "a second derivative (a Hessian, a derivative of a derivative): 8 calls per entry, half of them where "
        "it is symmetric",
    ),
    "check": Budget(
        8_000,
        1_000_000,
        "`vjp check` is one call the user asked to have checked: every column up to 2,000 input elements "
        "(and 2,000 outputs), J kept whole up to 10^6 entries for the diagnosis of a wrong backward",
    ),
}


def with_error(size: Any, error: Any, tol: Tolerance) -> Any:
    """The size a comparison with a finite-difference reference is weighed at: the larger of the route's size
    and ERROR_WEIGHT times the reference's error estimate over rtol (so that rtol times it is the error)."""
    return _max(size, ERROR_WEIGHT * error / tol.rtol)


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


__all__ = [
    "ERROR_WEIGHT",
    "FD_BUDGETS",
    "ROUNDOFF_UNITS",
    "TOLERANCES",
    "Budget",
    "allowed",
    "dtype_name",
    "eps",
    "roundoff_as_size",
    "table",
    "tolerance",
    "with_error",
]
