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
_LINEAR = (
    "backward(0) vs 0, backward(2v) vs 2·backward(v) and backward(v + r) vs backward(v) + backward(r) for a "
    "random r: a backward must be linear in v"
)
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

    full = _every_column(v.numel(), sum(x.numel() for x in leaves))
    return finite_differences_of(f, leaves, v, BUDGET.evals if full else 0, columns=full)


def close(got: Any, ref: Any, err: Any, tol: Tolerance) -> Any:
    """Elementwise: |got − ref| within the table's first weighing, the reference's error estimate as its size."""
    import torch

    from .engine.tolerance import allowed, with_error

    same = (got == ref) | (torch.isnan(got) & torch.isnan(ref))  # the same inf, or nan both ways: left out
    return same | ((got - ref).abs() <= allowed(ref, with_error(0.0, err, tol), tol))


def compare(
    event: Event,
    fn: Any,
    xs: list[Any],
    leaves: list[Any],
    v: Any,
    grads: list[Any],
    wide: Any = None,
    record: dict[str, Any] | None = None,
) -> None:
    """The judge's checks of the call's record (trusted_judge.py), or, where it cannot replay the forward,
    the finite-difference check of the forward itself; then the diagnosis from probing the backward with
    other v. `wide` makes the context (promoted) in which the door's reference runs its whole forward in
    float64."""
    import torch

    from .engine.finite_diff import DIRECTIONS
    from .trusted_judge import judge

    wide = wide or nullcontext
    judged = record is not None and judge(event, record)
    m, n = v.numel(), sum(x.numel() for x in leaves)
    if getattr(fn, "draws", False):
        event.notes.append(
            "The forward draws random numbers: every run of it here starts from the generators' state of the "
            "checked call, so each draws the same numbers; the replay holds that draw fixed."
        )
    if getattr(fn, "draws", False) and any(x.dtype != torch.float64 for x in leaves):
        # a float64 run draws other numbers: the door's own differences would be of another function
        why = f"the forward draws random numbers, and a float64 run of it draws others than {event.inputs[0].dtype}"
        if not judged:
            event.checks.append(Check("finite_difference", "skipped", _FD, reason=why))
        event.checks.append(Check("jacobian", "skipped", _JAC, reason=why))
        event.diagnosis = "; ".join(_linearity(fn, xs, leaves, v, event, _tol(leaves))) or None
        return
    if not _every_column(m, n):  # the probes in v (a few backward calls) at any size
        if not judged:
            event.notes.append(
                f"{n:,} input and {m:,} output elements: checked along {DIRECTIONS} random directions, not "
                "element by element (the full Jacobian would take too long)."
            )
            event.checks.append(_directional_check(differences(within(fn, wide), xs, leaves, v), leaves, grads))
        event.diagnosis = "; ".join(_linearity(fn, xs, leaves, v, event, _tol(leaves))) or None
        return
    fd = differences(within(fn, wide), xs, leaves, v)  # every column: the Jacobian check and the diagnosis
    if not judged:
        event.checks.append(_fd_check(event, fd, leaves, grads, v))
    event.diagnosis = diagnose(fn, xs, leaves, v, event, wide, fd)


def _every_column(m: int, n: int) -> bool:
    """Whether the door's differences take every column of J (m output, n input elements)."""
    return m * n <= FULL and n <= MAX_ELEMENTS and m <= MAX_ELEMENTS


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
        shown = ref.clone()
        shown[mask] = float("nan")  # no reference there, as every door writes it
        event.inputs[k].finite_difference = shown.tolist()
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
    if fd.nothing_compared():  # every element left out: nothing was compared, no evidence either way
        return replace(check, status="skipped", reason=reason or None)
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
    once, twice = backward_of(fn, xs, leaves, v), backward_of(fn, xs, leaves, 2 * v)
    if offsets and all(
        (a is None) == (b is None) and (a is None or bool(torch.equal(a, b))) for a, b in zip(zero, once, strict=True)
    ):
        findings.append(
            "backward(0) = backward(v): the backward ignores grad_output (it returns the local derivative "
            "without multiplying by grad_output); smallest v that shows it: v = 0"
        )
    elif offsets:
        findings.append(
            f"backward(0) is not 0 (it gives {float(offsets[0][0]):.6g} where grad_output is 0): the gradient "
            "has an offset, a term that does not scale with grad_output; smallest v that shows it: v = 0"
        )
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
    if not findings:
        findings += _additive(fn, xs, leaves, v, event, tol, once)
    event.checks.append(
        Check("linearity", "disagree" if findings else "agree", _LINEAR, reason="; ".join(findings) or None)
    )
    return findings


def _additive(
    fn: Any, xs: list[Any], leaves: list[Any], v: Any, event: Event, tol: Tolerance, once: list[Any]
) -> list[str]:
    """backward(v + r) must be backward(v) + backward(r) for a random r of both signs: a backward of |g| or
    of g.clamp(min=0) is homogeneous for positive factors and right for every one-hot and all-positive v."""
    import torch

    r = torch.randn(v.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(v.dtype)
    both, alone = backward_of(fn, xs, leaves, v + r), backward_of(fn, xs, leaves, r)
    for k, (a, b, c) in enumerate(zip(both, once, alone, strict=True)):
        if a is None or b is None or c is None:
            continue
        finite = torch.isfinite(a) & torch.isfinite(b) & torch.isfinite(c)
        a, b, c = (t[finite].double() for t in (a, b, c))
        if not a.numel():
            continue
        # weighed at the gradients' whole size, not each element's: an element near 0 by cancellation
        # carries the rounding of its terms, which are of that size
        size = float(b.abs().max() + c.abs().max())
        if not bool(close(a, b + c, tol.rtol * size * torch.ones_like(a), tol).all()):
            return [
                f"{event.inputs[k].name}: backward is not linear in v (backward(v + r) ≠ backward(v) + backward(r) "
                "for a random r of both signs): it uses grad_output non-linearly, e.g. its absolute value or a "
                "clamp; all-positive and one-hot v, as gradcheck uses, cannot show this; smallest v that shows it: "
                "one with a negative entry"
            ]
    return []


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
    refs, errs = _references(fd, custom)
    if custom and fd.nothing_compared():
        why = "finite differences are no reference at any element (see finite_difference): no J to compare with"
        event.checks.append(Check("jacobian", "skipped", _JAC, reason=why))
        custom = []
    elif custom:  # every one-hot v at once: with linearity, right rows mean a right backward for every v
        event.checks.append(_jacobian_check(event, custom, refs, errs, tol))
    if event.status != "disagree":
        return None
    float32 = leaves and leaves[0].dtype == torch.float32 and not getattr(fn, "draws", False)  # float64 draws others
    if float32 and not findings and _right_in_float64(fn, xs, v, wide, fd, custom):
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


def _references(fd: Any, custom: list[Any]) -> tuple[list[Any], list[Any]]:
    """The differences' J and its error per input, with the columns of the elements they are no reference at
    (a kink: relu at 0, a tie in max) taken from the custom J itself, so that those are not compared: at a
    kink any one-sided derivative is a convention (torch's own relu passes 0), not a mistake."""
    refs, errs = [], []
    for k, mine in enumerate(custom):
        ref, mask = fd.columns[f"x{k}"].clone(), fd.left_out[f"x{k}"].reshape(-1)
        ref[:, mask] = mine[:, mask]
        refs.append(ref)
        errs.append(fd.column_error[f"x{k}"])
    return refs, errs


def _jacobian_check(event: Event, custom: list[Any], refs: list[Any], errs: list[Any], tol: Tolerance) -> Check:
    """J from one-hot rows of the custom backward against the differences' J, entry by entry, each entry
    weighed at its error estimate."""
    from .engine.compare import compare_tensors

    names = [x.name for x in event.inputs]
    entries = [f"dy/d{n}" for n in names]  # J's entries labelled as the program door labels them: dy/dx[i,j]
    items = list(zip(entries, custom, refs, strict=True))
    sizes = {n: e / tol.rtol for n, e in zip(entries, errs, strict=True)}
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
    kept = [~fd.left_out[key].reshape(-1) for key in keys]  # where the differences are a reference
    pairs = [(g.reshape(-1)[m], fd.jtv[key].reshape(-1)[m], fd.error[key].reshape(-1)[m])
             for g, key, m in zip(g64, keys, kept, strict=True) if g is not None]  # fmt: skip
    if any(g is None for g in g64):
        return False
    pairs += [
        (a[:, m], fd.columns[key][:, m], fd.column_error[key][:, m])
        for a, key, m in zip(rows, keys, kept, strict=False)
    ]
    return all(bool(close(a.double(), r, e, tol).all()) for a, r, e in pairs)


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
