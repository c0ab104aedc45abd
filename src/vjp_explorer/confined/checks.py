"""The checks of one observed call, run on the replay of the forward the child recorded.

The Jacobian of the replay (`jtv`, a consistency check) and central differences of it (`finite_difference`,
independent of autograd, through the shared driver engine/finite_diff.py), compared with the call's grads at
the one tolerance table's bounds, weighed by the size of backward's terms and by the forward's own rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch

from ..engine.tolerance import FD_BUDGETS, ROUNDOFF_UNITS, allowed, eps, tolerance, with_error
from ..events import Event, LeafGrad, element_index
from ..verdicts import Check
from .pattern import mistake_pattern

JACOBIAN_ROWS = 128  # J of the replay for outputs up to this many elements (one autograd call per row)
FD_EVALS = FD_BUDGETS["snippet"].evals  # every column of J up to 100 input elements, else random directions
JTV = "the call's grads vs Jᵀv from the Jacobian of the replayed forward (autograd of the replay, float64)"
JTV_VJP = "the call's grads vs Jᵀv by one vjp of the replayed forward (autograd of the replay, float64)"
FD = "the call's grads vs Jᵀv from central differences of the replayed forward (float64, no autograd)"
FD_DIR = "<u, the call's grads> vs (f(x + hu) - f(x - hu))/2h · v of the replayed forward, random u (float64)"
SECOND = (
    "uᵀ(the call's ∂²f/∂x²)w vs second differences of the replayed forward along random u, w (float64, no autograd)"
)
TANGENT = "the call's Ju vs central differences of the replayed forward along u (float64, no autograd)"
SHOWN = 10_000  # elements of a reference shown beside a call's results, at most


def outside_the_log() -> Any:
    """The log's dispatch mode off the stack for a while: what runs now is not recorded, and runs at C speed."""
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()


def flat(replay: Any) -> Callable[..., torch.Tensor]:
    """The replay as one function to one flat tensor: every output's elements in order."""

    def f(*xs: torch.Tensor) -> torch.Tensor:
        ys = [y.reshape(-1) for y in replay(*xs)]
        return torch.cat(ys) if ys else torch.zeros(0, dtype=torch.float64)

    return f


def vjp_of(replay: Any, x0: list[torch.Tensor], v: torch.Tensor) -> list[torch.Tensor] | str:
    """Jᵀv of the replay in float64 by autograd of the replay itself (our graph), one flat tensor per input;
    or why not."""
    try:
        return _vjp(flat(replay), [x.clone().requires_grad_() for x in x0], v)
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        return f"the replay failed ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"


def _vjp(f: Any, xs: list[torch.Tensor], v: torch.Tensor) -> list[torch.Tensor]:
    """Jᵀv of f at xs (v flat, over f's flat output), one flat float64 tensor per input (zeros: unused)."""
    with torch.enable_grad():
        y = f(*xs)
        if not y.requires_grad:
            return [torch.zeros(x.numel(), dtype=torch.float64) for x in xs]
        # v through a scalar root, not grad_outputs (which imports torch.fx and sympy, 0.4 s)
        gs = torch.autograd.grad((y * v.to(y.dtype)).sum(), xs, allow_unused=True)
    return [
        torch.zeros(x.numel(), dtype=torch.float64) if g is None else g.detach().reshape(-1).to(torch.float64)
        for g, x in zip(gs, xs, strict=True)
    ]


def forward_rounding(
    replay: Any, x0: list[torch.Tensor], leaves: list[torch.Tensor], v: torch.Tensor, wide: list[torch.Tensor] | str
) -> list[torch.Tensor]:
    """Per input element, twice |Jᵀv of the replay in the forward's own dtypes − Jᵀv of it in float64|: how
    far the forward's rounding alone moves the gradient (a float32 loss whose residuals cancel), allowed on
    top of the tolerance. Both are autograd of the recorded ATen forward, never the snippet's own backward.
    Twice: the call itself rounded in its own order (other kernels, other threads), which may land as far
    again on the other side; where the rounding is the gradient's whole size, one measured difference was
    the allowance to the last digit and a difference of 5e-7 in 8.26 read `disagree` on autograd's own
    float32 gradient of (1 − cos x)/x²."""

    if isinstance(wide, str):  # the float64 replay has no vjp: no allowance beyond the table's
        return [torch.zeros(x.numel(), dtype=torch.float64) for x in x0]
    try:
        own = [x.to(leaf.dtype).clone().requires_grad_() for x, leaf in zip(x0, leaves, strict=True)]
        found = [torch.zeros(x.numel(), dtype=torch.float64) for x in x0]
        for n in thread_counts():
            with on_threads(n):
                native = _vjp(flat(replay.in_native_dtypes()), own, v)
            found = [
                torch.maximum(f, (a - b).abs().nan_to_num(0.0, 0.0, 0.0))
                for f, a, b in zip(found, native, wide, strict=True)
            ]
        return [2 * f for f in found]
    except (RuntimeError, ValueError, TypeError, IndexError):
        return [torch.zeros(x.numel(), dtype=torch.float64) for x in x0]


def thread_counts() -> list[int]:
    """The judge's own thread count, then each other the snippet's process may run torch's kernels with
    (VJP_SNIPPET_THREADS, set by the parent for the judge): a float32 reduction rounds by how it is split
    among threads, so a replay that is to match the snippet's call is tried on each (`on_threads`)."""
    import os

    own = torch.get_num_threads()
    given = (int(p) for p in os.environ.get("VJP_SNIPPET_THREADS", "").split(",") if p.isdigit())
    return list(dict.fromkeys([own, *(n for n in given if 0 < n <= 256)]))


@contextmanager
def on_threads(n: int) -> Iterator[None]:
    """torch's kernels on n threads for the block, then on the judge's count again."""
    own = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(own)


def term_sizes_of(replay: Any, x0: list[torch.Tensor], v: torch.Tensor) -> list[torch.Tensor] | None:
    """Σ|terms| backward adds up per input element (engine/term_sizes.py), on the replay; None where the
    replay cannot be run through autograd that way."""
    from ..engine.term_sizes import term_sizes

    try:
        return [t.reshape(-1) for t in term_sizes(flat(replay), x0, v)]
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None


def jacobian(replay: Any, x0: list[torch.Tensor]) -> list[torch.Tensor]:
    """J of the replay by autograd of the replay itself (our graph: no snippet code runs again)."""
    xs = [x.clone().requires_grad_() for x in x0]
    with torch.enable_grad():
        ys = [y.reshape(-1) for y in replay(*xs)]
    y = torch.cat(ys) if ys else torch.zeros(0, dtype=torch.float64)
    rows: list[list[torch.Tensor]] = [[] for _ in xs]
    for i in range(y.numel()):
        gs = (
            torch.autograd.grad(y[i], xs, retain_graph=True, allow_unused=True) if y.requires_grad else [None] * len(xs)
        )
        for k, g in enumerate(gs):
            rows[k].append(torch.zeros(xs[k].numel(), dtype=torch.float64) if g is None else g.reshape(-1))
    return [
        torch.stack(r) if r else torch.zeros(0, x.numel(), dtype=torch.float64) for r, x in zip(rows, xs, strict=True)
    ]


def compare(
    name: str,
    compares: str,
    event: Event,
    leaves: list[torch.Tensor],
    got: list[torch.Tensor],
    refs: list[torch.Tensor],
    errs: list[torch.Tensor],
    masks: list[torch.Tensor],
    sizes: list[torch.Tensor] | None,
    prior: list[Any],
) -> Check:
    """Each grad element against its reference within the dtype's tolerance (engine/tolerance.py), scaled by
    `sizes`: the size of the terms Jᵀv adds up (Σ|v·J| where J is known) and the grad it accumulated onto, as
    the caller weighs them (verdict.py: ROUNDOFF_UNITS units of roundoff), and the reference's own error
    estimate (the one rule: engine/tolerance.with_error); elements in `masks` are no reference, left out."""
    worst, bad, tol, pairs, spurious, overflow, undefined = 0.0, [], "", [], [], [], []
    blind: list[str] = []  # elements that pass only by an error estimate as large as the reference itself
    compared = 0
    most: tuple[float, str | None] = (-math.inf, None)  # how far past its tolerance, and which element
    for k, x in enumerate(leaves):
        g, ref = got[k], refs[k]
        # an infinite or undefined reference weighs nothing (its tolerance would be infinite): no reference there
        nonref = ~torch.isfinite(ref) & ~masks[k] & ~((torch.isnan(g) & torch.isnan(ref)) | (g == ref))
        for i in torch.nonzero(nonref).reshape(-1).tolist()[:10]:
            undefined.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        mask = masks[k] | nonref
        past = torch.zeros(g.shape, dtype=torch.bool)  # an inf where the value is past the dtype's range
        if x.is_floating_point() and x.dtype != torch.float64:
            past = torch.isinf(g) & torch.isfinite(ref) & (ref.abs() > torch.finfo(x.dtype).max) & (g * ref > 0)
        for i in torch.nonzero(past & ~mask).reshape(-1).tolist()[:10]:
            overflow.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        scale = ref.abs() if sizes is None else torch.maximum(sizes[k], ref.abs())
        if prior[k] is not None:
            scale = scale + prior[k]
        table = tolerance(x.dtype)  # the one table
        units = f"{ROUNDOFF_UNITS}·eps" if ROUNDOFF_UNITS * eps(x.dtype) < table.rtol else f"{table.rtol:g}"
        tol = f"|Δ| <= {table.atol:g} + max({table.rtol:g}·|ref|, {units}·(Σ|v·J| + |.grad before|), its error) "
        tol += f"({_dtype(x)})"
        diff = (g - ref).abs()
        same = (torch.isnan(g) & torch.isnan(ref)) | (g == ref) | past  # nan on both, the same inf, an overflow
        room = allowed(ref, with_error(scale, errs[k], table), table)
        # the reference's error (float32's own rounding or overflow, the differences' estimate) is as large as
        # the reference: what passes only by it is no evidence (norm's float32 gradient at 1e20 is 0, not 0.71)
        unsure = ~mask & ~same & (diff <= room) & (diff > allowed(ref, scale, table)) & (errs[k] >= ref.abs())
        for i in torch.nonzero(unsure).reshape(-1).tolist()[:10]:
            blind.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        mask = mask | unsure
        compared += int((~mask).sum())
        over = ~mask & ~same & ~(diff <= room)
        for i in torch.nonzero(over).reshape(-1).tolist()[:10]:
            bad.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        if bool(over.any()):  # the element past its tolerance the most (a nan or inf: past any)
            excess = torch.where(over, (diff - room).nan_to_num(math.inf), -math.inf).reshape(-1)
            at = int(excess.argmax())
            if float(excess[at]) > most[0]:
                most = (float(excess[at]), f"{event.inputs[k].name}{element_index(list(x.shape), at)}")
        nonfinite = over & ~torch.isfinite(g) & torch.isfinite(ref)  # nan or inf where the reference is finite
        for i in torch.nonzero(nonfinite).reshape(-1).tolist()[:10]:
            spurious.append(f"{event.inputs[k].name}{element_index(list(x.shape), i)}")
        if bool(nonfinite.any()):  # |nan − r| is nan, |inf − r| inf: off by more than any number (as every door)
            worst = math.inf
        finite = diff[torch.isfinite(diff) & ~mask]
        if finite.numel():
            worst = max(worst, float(finite.max()))
        kept = torch.isfinite(diff) & ~mask & ~past
        pairs.append(torch.stack([g[kept].reshape(-1), ref[kept].reshape(-1)]).to(torch.float64))
    reason = ("differs at " + ", ".join(bad)) if bad else None
    both = torch.cat(pairs, 1) if pairs else torch.zeros(2, 0, dtype=torch.float64)
    nonzero = both[1] != 0  # relative to nonzero references only, as every door's checks say it
    rel = float(((both[0] - both[1]).abs()[nonzero] / both[1].abs()[nonzero]).max()) if bool(nonzero.any()) else 0.0
    if bad and (pattern := mistake_pattern(both)):
        reason = f"{reason}; {pattern}"
    status = "disagree" if bad else "agree"
    if blind:
        said = (
            f"no evidence at {', '.join(blind[:6])}{' and more' if len(blind) > 6 else ''}: the difference passes "
            "only by the reference's error estimate (the forward's own rounding or overflow in its dtype, or the "
            "differences'), which is as large as the reference"
        )
        reason = f"{reason}; {said}" if reason else said
        status = "inconclusive" if status == "agree" and not compared else status
    return Check(
        name,
        status,
        compares,
        max_abs_diff=worst,
        max_rel_diff=rel,
        worst=most[1],
        tolerance=tol,
        reason=reason,
        spurious=tuple(spurious),
        overflow=tuple(overflow),
        undefined=tuple(undefined),
    )


def left_out(event: Event, check: Check, fd: Any) -> Check:
    """Name the elements finite differences are no reference at (a kink, an infinite derivative)."""
    left: dict[str, list[str]] = {}
    for key, causes in fd.causes.items():
        k = int(key[1:])
        for j, cause in causes.items():
            left.setdefault(cause, []).append(f"{event.inputs[k].name}{element_index(event.inputs[k].shape, j)}")
    if not left:
        return check
    parts = [
        ", ".join(at[:6]) + (f" and {len(at) - 6} more" if len(at) > 6 else "") + f" ({c})" for c, at in left.items()
    ]
    text = "not a reference at " + "; at ".join(parts)
    if fd.nothing_compared():  # every element left out: nothing was compared, no evidence either way
        return replace(check, status="skipped", reason=text)
    return replace(check, reason=f"{check.reason}; {text}" if check.reason else text)


def directions(
    fd: Any, leaves: list[torch.Tensor], got: list[torch.Tensor], rounding: list[torch.Tensor] | None = None
) -> Check:
    """<u, grads> against the differences along each random direction u (more than 100 input elements, or
    a folded call), allowing Σ|u|·(how far the forward's own rounding moves each grad element)."""
    if not fd.directions:
        return Check("finite_difference", "skipped", FD_DIR, reason=f"no usable direction: {fd.kink_reason}")
    table = tolerance(leaves[0].dtype)
    worst, bad = 0.0, []
    for k, ((ref, err, _), u) in enumerate(zip(fd.directions, fd.us, strict=True)):
        products = [u[f"x{i}"].reshape(-1) * g for i, g in enumerate(got)]
        dot = float(sum(float(p.sum()) for p in products))
        size = float(sum(float(p.abs().sum()) for p in products))
        moved = sum(float((u[f"x{i}"].reshape(-1).abs() * r).sum()) for i, r in enumerate(rounding or []))
        diff = abs(dot - ref)
        worst = max(worst, diff) if diff == diff else worst
        if not diff <= allowed(0.0, with_error(size, err, table), table) + moved:
            bad.append(f"direction {k + 1}: <u, grads> = {dot:.6g}, finite differences {ref:.6g}")
    return Check(
        "finite_difference",
        "disagree" if bad else "agree",
        f"{FD_DIR} ({len(fd.directions)} directions, {fd.evals} evaluations)",
        max_abs_diff=worst,
        tolerance=f"|Δ| <= {table.atol:g} + max({table.rtol:g}·Σ|u·grad|, the differences' error)"
        " + Σ|u|·(the forward's own rounding of the grads)",
        reason="; ".join(bad) or fd.kink_reason or None,
    )


def joined(replay: Any, x0: list[torch.Tensor]) -> tuple[torch.Tensor, Any]:
    """The inputs as one flat vector z, and the replay as a function of z (one input: as it is)."""
    if len(x0) == 1:
        return x0[0], replay
    sizes, shapes = [x.numel() for x in x0], [x.shape for x in x0]

    def of(z: torch.Tensor) -> list[torch.Tensor]:
        return replay(*(p.reshape(s) for p, s in zip(z.split(sizes), shapes, strict=True)))

    return torch.cat([x.reshape(-1) for x in x0]), of


def second(replay: Any, x0: torch.Tensor, dtype: torch.dtype, result: torch.Tensor, line: int) -> Check:
    """A second derivative H = ∂²f/∂x² the call returned, against central second differences of the replayed
    one-number forward along random u and w (seeded by the call's line, drawn here, in the judge): uᵀHw is
    weighed at Σ|u|·|H|·|w| and the differences' error, as `directions` weighs a first derivative. A wrong
    entry of H shows but for a set of (u, w) of measure zero."""
    from ..engine.finite_diff import DIRECTIONS, FDUnavailable, second_directional

    n = x0.numel()
    h = result.to(torch.float64).reshape(n, n)
    gen = torch.Generator().manual_seed(line)
    table = tolerance(dtype)
    worst, bad, why, used = 0.0, [], None, 0
    f = flat(replay)
    for k in range(DIRECTIONS):
        u, w = (torch.randn(n, generator=gen, dtype=torch.float64) for _ in range(2))
        try:
            found = second_directional(f, x0, u.reshape(x0.shape), w.reshape(x0.shape))
        except FDUnavailable as e:
            found = str(e)
        if isinstance(found, str):
            why = found
            continue
        ref, err = found
        got, size = float(u @ h @ w), float(u.abs() @ h.abs() @ w.abs())
        diff = abs(got - ref)
        worst, used = (max(worst, diff) if diff == diff else worst), used + 1
        if not diff <= allowed(0.0, with_error(size, err, table), table):
            bad.append(f"pair {k + 1}: uᵀHw = {got:.6g}, second differences {ref:.6g}")
    if not used:
        return Check("finite_difference", "skipped", SECOND, reason=f"no usable pair of directions: {why}")
    return Check(
        "finite_difference",
        "disagree" if bad else "agree",
        f"{SECOND} ({used} pairs of directions)",
        max_abs_diff=worst,
        tolerance=f"|Δ| <= {table.atol:g} + max({table.rtol:g}·Σ|u|·|H|·|w|, the differences' error)",
        reason="; ".join(bad) or why,
    )


def tangent(
    replay: Any, x0: list[torch.Tensor], us: list[torch.Tensor], results: list[torch.Tensor], names: list[str]
) -> tuple[Check, list[Any]]:
    """Ju the call gave (one result per output) against central differences of the replayed forward along
    u, element by element, by the one rule (`compare`), allowing the forward's own rounding of Ju (forward
    mode of the replay in its own dtypes against float64) and ROUNDOFF_UNITS·eps·max|Ju|; and the reference
    for the view, per result (None past SHOWN elements)."""
    from ..engine.finite_diff import derivative_along
    from ..engine.tolerance import roundoff_as_size

    try:
        ref, err = derivative_along(flat(replay), x0, [u.to(torch.float64) for u in us])
    except RuntimeError as e:
        why = f"the replay failed ({str(e).splitlines()[0][:200]})" if str(e) else "the replay failed"
        return Check("finite_difference", "skipped", TANGENT, reason=why), [None] * len(results)
    if ref.numel() != sum(r.numel() for r in results):
        why = f"the replayed forward gives {ref.numel()} numbers where Ju has {sum(r.numel() for r in results)}"
        return Check("finite_difference", "skipped", TANGENT, reason=why), [None] * len(results)
    got = [r.detach().reshape(-1).to(torch.float64) for r in results]
    if ref.numel() and bool((ref == 0).all()) and any(bool(g.ne(0).any()) for g in got):
        why = (
            "the replayed forward is constant along u while Ju is not 0: a step of the forward the log did not "
            "follow (an in-place write through a view), or a Ju that is wrong; not decided"
        )
        return Check("finite_difference", "skipped", TANGENT, reason=why), [None] * len(results)
    err = err + _tangent_rounding(replay, x0, us)
    sizes = [r.numel() for r in results]
    refs, errs = list(ref.split(sizes)), list(err.split(sizes))
    masks = [~torch.isfinite(r) for r in refs]  # a kink, or a step off the domain: no reference there
    known = ref[torch.isfinite(ref)]
    top = float(known.abs().max()) if known.numel() else 0.0
    scales = [
        torch.full_like(r, float(roundoff_as_size(top, x.dtype, tolerance(x.dtype))))
        for r, x in zip(refs, results, strict=True)
    ]
    view = Event(0, 0, "", "", [], [], "", False, False, [])
    view.inputs = [
        LeafGrad(n, list(r.shape), _dtype(r), None, None, None, None) for n, r in zip(names, results, strict=True)
    ]
    check = compare("finite_difference", TANGENT, view, results, got, refs, errs, masks, scales, [None] * len(results))
    table = tolerance(results[0].dtype) if results else tolerance(torch.float64)
    check = replace(
        check,
        tolerance=f"|Δ| <= {table.atol:g} + max({table.rtol:g}·|ref|, the differences' error, "
        f"{ROUNDOFF_UNITS}·eps·max|ref|) ({_dtype(results[0]) if results else 'float64'})",
    )
    left = [
        f"{view.inputs[k].name}{element_index(view.inputs[k].shape, i)}"
        for k, m in enumerate(masks)
        for i in torch.nonzero(m).reshape(-1).tolist()[:6]
    ]
    if left:
        text = f"no reference at {', '.join(left[:6])} (a step crosses a kink or leaves the domain)"
        all_left = all(bool(m.all()) for m in masks)
        check = replace(
            check,
            status="skipped" if all_left else check.status,
            reason=text if all_left or not check.reason else f"{check.reason}; {text}",
        )
    shown = [r.reshape(x.shape).tolist() if r.numel() <= SHOWN else None for r, x in zip(refs, results, strict=True)]
    return check, shown


def _tangent_rounding(replay: Any, x0: list[torch.Tensor], us: list[torch.Tensor]) -> torch.Tensor | float:
    """Per output element, |Ju by forward mode of the replay in the forward's own dtypes − the same in
    float64|: how far the forward's rounding alone moves Ju (0 where the replay has no forward mode)."""
    from torch.func import jvp

    try:
        wide = jvp(flat(replay), tuple(x0), tuple(u.to(torch.float64) for u in us))[1]
        xs = tuple(x.to(u.dtype) if x.is_floating_point() else x for x, u in zip(x0, us, strict=True))
        own = jvp(flat(replay.in_native_dtypes()), xs, tuple(us))[1]
        return (own.to(torch.float64) - wide).abs().nan_to_num(0.0, 0.0, 0.0)
    except Exception:  # noqa: BLE001 - an op without a forward-mode formula: no allowance beyond the table's
        return 0.0


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def unheld_kinks(check: Check, unheld: list[str]) -> Check:
    """A finite-difference disagreement where the replay runs through a kink it cannot hold at the point
    (a norm at 0, a median over all): the step may have crossed it, so the check is inconclusive, never
    `disagree` for a reason of its own."""
    if check.status != "disagree" or not unheld:
        return check
    why = (
        f"{', '.join(unheld)} has a kink the replay cannot hold at the point: the differences may step across "
        f"it ({check.reason})"
    )
    return replace(check, status="inconclusive", reason=why)
