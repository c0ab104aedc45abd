"""A hand-written gradient against autograd's: the verdict, and the kind of mistake, from numbers and shapes.

Pure functions of numpy arrays (no torch), unit-tested on hand-made arrays. Agreement is of the gradient as a
whole: |written − autograd| within the tolerance table's rule for the coarser dtype of the two, scaled by the
largest entry of autograd's gradient (engine/tolerance.py), so entries that differ only by rounding agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.tolerance import TOLERANCES, dtype_name

VERDICTS = ("agree", "disagree", "shape")
# every kind of mistake, in the order they are tried (the shape-only ones first)
KINDS = ("keepdim", "missing_sum", "transposed", "missing_accumulation", "sign", "factor", "wrong_index", "other")


def bound(truth: np.ndarray, *dtypes: str) -> float:
    """How far a gradient may be from `truth` and agree: atol + rtol · max|truth|, at the coarser dtype."""
    tols = [TOLERANCES[dtype_name(d)] for d in dtypes] or [TOLERANCES["float32"]]
    tol = max(tols, key=lambda t: t.rtol)
    top = float(np.nanmax(np.abs(truth))) if truth.size and not np.isnan(truth).all() else 0.0
    return tol.atol + tol.rtol * top


def rounding_floor(chain: float, *dtypes: str) -> float:
    """The rounding of a chain whose gradients reach `chain` in size: ROUNDOFF_UNITS units of the coarser
    dtype at that size. A line whose true gradient is 0 (a softmax's shift, a max's logits) is a sum of terms
    of the chain's size, so its value is noise of this size; two such gradients agree."""
    from ..engine.tolerance import ROUNDOFF_UNITS, eps

    return ROUNDOFF_UNITS * max((eps(d) for d in dtypes), default=eps("float32")) * chain


def close(a: np.ndarray, b: np.ndarray, allowed: float) -> bool:
    """Same shape, and every entry within `allowed` (a nan where both have one counts as equal)."""
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    return bool(np.all(diff <= allowed))  # a nan on one side only fails the comparison


def verdict(written: np.ndarray, truth: np.ndarray, allowed: float) -> str:
    """`agree`, `disagree`, or `shape`: the values match once put in the tensor's shape, the shape does not."""
    if written.shape == truth.shape:
        return "agree" if close(written, truth, allowed) else "disagree"
    if written.size == truth.size and close(written.reshape(truth.shape), truth, allowed):
        return "shape"
    return "disagree"


def kind(written: np.ndarray, truth: np.ndarray, allowed: float, uses: int = 1, accumulated: bool = False) -> str:
    """The kind of mistake in a gradient that does not agree (KINDS). `uses`: how many edges of the graph
    read the tensor; `accumulated`: the learner added to the gradient (`+=`) or built it in several steps."""
    if written.shape != truth.shape:
        if written.size == truth.size and close(written.reshape(truth.shape), truth, allowed):
            return "keepdim"
        summed = sum_to(written, truth.shape)
        if summed is not None and close(summed, truth, allowed):
            return "missing_sum"
        if written.ndim == 2 and close(written.T, truth, allowed):
            return "transposed"
        return "other"
    if written.ndim == 2 and written.shape[0] == written.shape[1] and close(written.T, truth, allowed):
        return "transposed"
    if uses >= 2 and not accumulated:  # before factor: a scalar's wrong value is always some factor of the right
        return "missing_accumulation"
    c = factor_of(written, truth)
    if c is not None and close(written, c * truth, allowed * max(1.0, abs(c))):
        return "sign" if abs(c + 1) < 1e-3 else "factor"
    if _moved(written, truth, allowed):
        return "wrong_index"
    return "other"


def factor_of(written: np.ndarray, truth: np.ndarray) -> float | None:
    """The c that makes c · truth closest to written (least squares); None for a zero truth or non-finite data."""
    if not (np.all(np.isfinite(written)) and np.all(np.isfinite(truth))):
        return None
    norm = float(np.sum(truth * truth))
    if norm == 0.0:
        return None
    return float(np.sum(written * truth)) / norm


def sum_to(written: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`written` summed down to `shape`, where a tensor of `shape` broadcasts to written's: the sum the
    backward of a broadcast needs; None where it does not broadcast so."""
    try:
        if np.broadcast_shapes(tuple(shape), written.shape) != written.shape:
            return None
    except ValueError:
        return None
    lead = written.ndim - len(shape)
    out = written.sum(axis=tuple(range(lead))) if lead else written
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and out.shape[k] != 1)
    return out.sum(axis=axes, keepdims=True) if axes else out


def _moved(written: np.ndarray, truth: np.ndarray, allowed: float) -> bool:
    """The right values at wrong positions: the same entries in another order, or the entries where both
    are nonzero equal while the nonzero positions differ (an index that picks other rows or columns)."""
    a, b = written.reshape(-1), truth.reshape(-1)
    if a.size < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return False
    if close(np.sort(a), np.sort(b), allowed):
        return True
    on_a, on_b = np.abs(a) > allowed, np.abs(b) > allowed
    both = on_a & on_b
    return bool(np.any(on_a != on_b) and np.any(both) and np.all(np.abs(a[both] - b[both]) <= allowed))


def cmp(written: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    """What the learners' `cmp(s, dt, t)` prints: exact (every entry equal after broadcasting), approximate
    (torch.allclose's defaults, rtol 1e-5 and atol 1e-8) and the largest difference (None where the shapes
    do not broadcast)."""
    try:
        a, b = np.broadcast_arrays(written, truth)
    except ValueError:  # where cmp itself raises: shapes that do not broadcast (a transposed gradient)
        return {"exact": False, "approximate": False, "max_abs_diff": None}
    diff = np.abs(a - b)
    return {
        "exact": bool(np.all(a == b)),
        "approximate": bool(np.all(diff <= 1e-8 + 1e-5 * np.abs(b))),
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
    }
