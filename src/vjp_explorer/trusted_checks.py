"""The checks and the diagnosis of `vjp check` (trusted.py): the custom backward against the forward.

The reference is the one finite-difference driver (engine/finite_diff.py: its step rule, its Richardson
extrapolation and its error estimate), run on the user's forward in float64 within the "check" row of
engine/tolerance.py's FD_BUDGETS; every comparison weighs that error estimate by the one rule
(engine/tolerance.with_error and allowed, as programs and snippets do), and the check itself is built by
engine/compare.py's compare_tensors, as the program door builds its own (the snippet door builds its checks
in confined/checks.py, on the same rule). The diagnosis probes the backward with other v (0, 2·v, one-hot rows) and
names the kind of mistake from J's rows and columns.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from .engine.tolerance import FD_BUDGETS
from .events import Event, element_index
from .result import Check, Tolerance

BUDGET = FD_BUDGETS["check"]  # every column up to 2,000 inputs; J kept whole up to 10^6 entries
FULL = BUDGET.entries or 0  # output × input entries up to which the whole Jacobian is built both ways
MAX_ELEMENTS = BUDGET.evals // 4  # input (and output) elements up to which every element is checked

_FD = "the custom backward's grads vs Jᵀv from central differences of the forward (float64)"
_FD_DIR = (
    "⟨u, grads⟩ of the custom backward vs v·(f(x + hu) − f(x − hu))/2h, central differences of the forward "
    "(float64) along random directions u"
)
_LINEAR = "backward(0) vs 0 and backward(2v) vs 2·backward(v): a backward must be linear in v"
_JAC = "J from the custom backward (one-hot v, row by row) vs J from finite differences of the forward"


def backward_of(fn: Any, xs: list[Any], leaves: list[Any], v: Any) -> list[Any]:
    """The custom backward's grads for v (None where it gave none), through real autograd."""
    import torch

    y = fn(*xs)
    got = torch.autograd.grad(y, leaves, v, allow_unused=True)
    return [g if g is None else g.detach() for g in got]


def within(fn: Any, wide: Any) -> Any:
    """fn, each call run inside the context `wide()` (the whole forward in float64)."""

    def fn64(*args: Any) -> Any:
        with wide():
            return fn(*args)

    return fn64


def differences(fn64: Any, xs: list[Any], leaves: list[Any], v: Any) -> Any:
    """The shared driver on the forward as a function of its leaves (the other inputs as given): every
    column of J, kept for the diagnosis, within FULL entries and MAX_ELEMENTS elements; else directions."""
    from .engine.finite_diff import finite_differences_of

    index = [k for k, x in enumerate(xs) if any(x is leaf for leaf in leaves)]

    def f(*moved: Any) -> Any:
        args = list(xs)
        for k, x in zip(index, moved, strict=True):
            args[k] = x
        return fn64(*args).reshape(-1)

    m, n = v.numel(), sum(x.numel() for x in leaves)
    full = m * n <= FULL and n <= MAX_ELEMENTS and m <= MAX_ELEMENTS
    return finite_differences_of(f, leaves, v, BUDGET.evals if full else 0, columns=full)


def close(got: Any, ref: Any, err: Any, tol: Tolerance) -> Any:
    """Elementwise: |got − ref| within the table's first weighing, the reference's error estimate as its size."""
    from .engine.tolerance import allowed, with_error

    return (got - ref).abs() <= allowed(ref, with_error(0.0, err, tol), tol)


def compare(
    event: Event, fn: Any, xs: list[Any], leaves: list[Any], v: Any, grads: list[Any], wide: Any = None
) -> None:
    """The finite-difference check for v, then the diagnosis from probing the backward with other v. `wide`
    makes the context (promoted) in which the reference runs its whole forward in float64."""
    from .engine.finite_diff import DIRECTIONS

    wide = wide or nullcontext
    fd = differences(within(fn, wide), xs, leaves, v)
    if fd.method == "directional":
        event.notes.append(
            f"{sum(x.numel() for x in leaves):,} input and {v.numel():,} output elements: checked along "
            f"{DIRECTIONS} random directions, not element by element (the full Jacobian would take too long)."
        )
        event.checks.append(_directional_check(fd, leaves, grads))
        return
    event.checks.append(_fd_check(event, fd, leaves, grads, v))
    event.diagnosis = diagnose(fn, xs, leaves, v, event, wide, fd)


def _tol(leaves: list[Any]) -> Tolerance:
    from .engine.tolerance import tolerance

    return tolerance(leaves[0].dtype if leaves else "float32")


def _fd_check(event: Event, fd: Any, leaves: list[Any], grads: list[Any], v: Any) -> Check:
    """.grad against the driver's Jᵀv element by element, each weighed at the larger of Σᵢ|v[i]·J[i, j]|
    and the differences' error estimate; elements where differences are no reference are left out."""
    import torch

    from .engine.compare import compare_tensors
    from .engine.tolerance import with_error

    tol = _tol(leaves)
    av = v.detach().reshape(-1).abs().to(torch.float64)
    items, sizes, bad, left = [], {}, [], []
    for k, (x, g) in enumerate(zip(leaves, grads, strict=True)):
        key, name = f"x{k}", event.inputs[k].name
        ref, mask = fd.jtv[key].clone(), fd.left_out[key]
        event.inputs[k].finite_difference = ref.tolist()
        got = torch.zeros_like(x) if g is None or g.shape != x.shape else g.detach().clone()
        got[mask], ref[mask] = 0.0, 0.0
        size = with_error((av @ fd.columns[key].abs().nan_to_num(0.0)).reshape(x.shape), fd.error[key], tol)
        items.append((name, got, ref))
        sizes[name] = size
        if g is None and bool((ref != 0).any()):
            bad.append(f"{name}: backward returned None, but its gradient is not zero")
        elif g is not None and g.shape != x.shape:
            bad.append(f"{name}: shape {list(g.shape)} instead of {list(x.shape)}")
        else:
            wrong = ~close(got.double(), ref, size * tol.rtol, tol)
            for j in torch.nonzero(wrong.reshape(-1)).reshape(-1).tolist()[:10]:
                bad.append(f"{name}{element_index(list(x.shape), j)} ({float(got.reshape(-1)[j]):.6g} vs "
                           f"{float(ref.reshape(-1)[j]):.6g})")  # fmt: skip
        left += [f"{name}{element_index(list(x.shape), j)} ({why})" for j, why in fd.causes.get(key, {}).items()]
    check = compare_tensors("finite_difference", f"{_FD} ({fd.evals} evaluations)", items, tol, sizes, exact=True)
    reason = "; ".join(p for p in ("differs at " + ", ".join(bad) if bad else "", _left(left)) if p)
    return replace(check, status="disagree" if bad else check.status, reason=reason or None)


def _left(left: list[str]) -> str:
    more = f" and {len(left) - 6} more" if len(left) > 6 else ""
    return f"not a reference at {', '.join(left[:6])}{more}" if left else ""


def _directional_check(fd: Any, leaves: list[Any], grads: list[Any]) -> Check:
    """⟨u, grads⟩ against the differences along the driver's random directions, as the program door weighs them."""
    import torch

    from .engine.compare import compare_tensors, skipped
    from .engine.finite_diff import directional_pairs

    if not fd.directions:
        return skipped("finite_difference", _FD_DIR, f"no usable direction: {fd.kink_reason}")
    tol = _tol(leaves)
    got = {f"x{k}": torch.zeros_like(x) if g is None else g for k, (x, g) in enumerate(zip(leaves, grads, strict=True))}
    pairs, scales = directional_pairs(fd, got, {}, tol)
    compares = f"{_FD_DIR} ({len(fd.directions)} random u, {fd.evals} evaluations)"
    check = compare_tensors("finite_difference", compares, pairs, tol, scales, exact=True)
    return replace(check, reason=fd.kink_reason or None)


def _linearity(fn: Any, xs: list[Any], leaves: list[Any], v: Any, event: Event, tol: Tolerance) -> list[str]:
    """backward(0) must be 0 and backward(2v) 2·backward(v): the findings where not (nan and inf left to
    the finite-difference check, which names them)."""
    import torch

    findings: list[str] = []
    zero = backward_of(fn, xs, leaves, torch.zeros_like(v))
    offsets = [g[torch.isfinite(g) & (g != 0)] for g in zero if g is not None]
    offsets = [g for g in offsets if g.numel()]
    if offsets:
        findings.append(
            f"backward(0) is not 0 (it adds {float(offsets[0][0]):.6g} whatever grad_output "
            "is): the gradient has a constant offset; smallest v that shows it: v = 0"
        )
    once, twice = backward_of(fn, xs, leaves, v), backward_of(fn, xs, leaves, 2 * v)
    for k, (a, b) in enumerate(zip(once, twice, strict=True)):
        if a is None or b is None or offsets:
            continue
        finite = torch.isfinite(a) & torch.isfinite(b)
        if not bool(close(b[finite].double(), 2 * a[finite].double(), 0 * a[finite].double(), tol).all()):
            findings.append(
                f"{event.inputs[k].name}: backward is not linear in v (backward(2v) ≠ 2·backward(v)): "
                "it uses grad_output non-linearly, e.g. squares it; one-hot v, as gradcheck uses, "
                "cannot show this; smallest v that shows it: 2·v"
            )
            break
    event.checks.append(
        Check("linearity", "disagree" if findings else "agree", _LINEAR, reason="; ".join(findings) or None)
    )
    return findings


def diagnose(fn: Any, xs: list[Any], leaves: list[Any], v: Any, event: Event, wide: Any, fd: Any) -> str | None:
    """Name the kind of mistake, probing the backward with one-hot rows, 0·v, 2·v and float64."""
    import torch

    tol = _tol(leaves)
    spurious = [s for c in event.checks for s in c.spurious]
    findings = (
        [f"backward gives nan or inf at {', '.join(spurious)}, where finite differences give a finite derivative"]
        if spurious
        else []
    )
    findings += _linearity(fn, xs, leaves, v, event, tol)
    custom = _custom_jacobian(fn, xs, leaves, v.numel()) if fd.columns else []
    refs = [fd.columns[f"x{k}"] for k in range(len(leaves))] if custom else []
    errs = [fd.column_error[f"x{k}"] for k in range(len(leaves))] if custom else []
    if custom:  # every one-hot v at once: with linearity, right rows mean a right backward for every v
        event.checks.append(_jacobian_check(event, custom, refs, errs, tol))
    if event.status != "disagree":
        return None
    if leaves and leaves[0].dtype == torch.float32 and not findings and _right_in_float64(fn, xs, v, wide, fd, custom):
        return "in float64 the backward agrees: this is float32 precision (rounding), not a bug in the formula"
    once = backward_of(fn, xs, leaves, v)
    for k, x in enumerate(leaves):
        g, name = once[k], event.inputs[k].name
        if g is None:
            findings.append(f"{name}: backward returned None, but {name} requires grad and the output depends on it")
        elif bool(g.abs().max() == 0) and bool(fd.jtv[f"x{k}"].abs().max() > 0):
            findings.append(f"{name}: the gradient is all zeros: the backward ignores this input")
        elif custom:
            findings.extend(_jacobian_pattern(name, custom[k], refs[k], errs[k], x.shape, tol))
    return "; ".join(findings) or None


def _jacobian_check(event: Event, custom: list[Any], refs: list[Any], errs: list[Any], tol: Tolerance) -> Check:
    """J from one-hot rows of the custom backward against the differences' J, entry by entry, each entry
    weighed at its error estimate."""
    from .engine.compare import compare_tensors

    names = [x.name for x in event.inputs]
    items = list(zip(names, custom, refs, strict=True))
    sizes = {n: e / tol.rtol for n, e in zip(names, errs, strict=True)}
    check = compare_tensors("jacobian", _JAC, items, tol, sizes, exact=True)
    wrong = [n for n, a, b, e in zip(names, custom, refs, errs, strict=True) if not bool(close(a, b, e, tol).all())]
    reason = f"wrong entries in the Jacobian of {', '.join(wrong)}" if wrong else None
    return replace(check, status="disagree" if wrong else check.status, reason=reason)


def _right_in_float64(fn: Any, xs: list[Any], v: Any, wide: Any, fd: Any, custom: list[Any]) -> bool:
    """Whether the custom backward, run in float64 (module globals included), agrees with the differences:
    its Jᵀv, and its J where J was built (a mistake that v happens to hide must not pass for rounding)."""
    import torch

    from .engine.tolerance import tolerance

    tol = tolerance("float64")
    xs64 = [x.detach().double().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in xs]
    leaves64 = [x for x in xs64 if isinstance(x, torch.Tensor) and x.requires_grad]
    with wide():  # forward and the custom backward both in float64
        g64 = backward_of(fn, xs64, leaves64, v.double())
        rows = _custom_jacobian(fn, xs64, leaves64, v.numel()) if custom else []
    keys = [f"x{k}" for k in range(len(leaves64))]
    pairs = [(g, fd.jtv[key], fd.error[key]) for g, key in zip(g64, keys, strict=True)]
    pairs += [(a, fd.columns[key], fd.column_error[key]) for a, key in zip(rows, keys, strict=False)]
    return all(a is not None and bool(close(a.double(), r, e, tol).all()) for a, r, e in pairs)


def _custom_jacobian(fn: Any, xs: list[Any], leaves: list[Any], m: int) -> list[Any]:
    """J from the custom backward (one-hot v, one call per row), per input, float64 (zeros where None)."""
    import torch

    y = fn(*xs)
    rows: list[list[Any]] = [[] for _ in leaves]
    for i in range(m):
        e = torch.zeros_like(y)
        e.view(-1)[i] = 1
        for k, g in enumerate(backward_of(fn, xs, leaves, e)):
            rows[k].append(
                torch.zeros(leaves[k].numel(), dtype=torch.float64) if g is None else g.reshape(-1).to(torch.float64)
            )
    return [torch.stack(r) for r in rows]


def _jacobian_pattern(name: str, got: Any, ref: Any, err: Any, shape: Any, tol: Tolerance) -> list[str]:
    """What the custom Jacobian of one input does wrong: transposed, a factor, a sign, one row or column."""
    import torch

    ok = close(got, ref, err, tol)
    if bool(ok.all()):
        return []
    if got.shape[0] == got.shape[1] and bool(close(got, ref.T, err.T, tol).all()):
        return [
            f"{name}: the Jacobian is transposed (the backward computes J·v instead of Jᵀ·v, e.g. W @ g "
            "where Wᵀ @ g is needed)"
        ]
    nz = ~close(torch.zeros_like(ref), ref, err, tol)  # entries the differences tell apart from 0
    if bool(nz.any()) and bool(close(got[~nz], ref[~nz], err[~nz], tol).all()):
        r = float((got[nz] / ref[nz]).median())
        if not math.isclose(r, 1.0) and bool(close(got, r * ref, abs(r) * err, tol).all()):
            return [
                f"{name}: every entry is off by the factor {r:.6g}"
                + (" (the sign is flipped)" if math.isclose(r, -1.0) else "")
            ]
    rows = torch.nonzero(~ok.all(dim=1)).reshape(-1).tolist()
    cols = torch.nonzero(~ok.all(dim=0)).reshape(-1).tolist()
    if len(rows) == 1 and got.shape[0] > 1:
        return [
            f"{name}: only row {rows[0]} of J is wrong (output element {rows[0]}): smallest v that shows it: "
            f"one-hot at {rows[0]}"
        ]
    if len(cols) == 1 and got.shape[1] > 1:
        return [f"{name}: only the gradient of {name}{element_index(shape, cols[0])} is wrong (column {cols[0]} of J)"]
    return [
        f"{name}: {int((~ok).sum())} of {ok.numel()} Jacobian entries are wrong (rows {rows[:6]}, columns {cols[:6]})"
    ]
