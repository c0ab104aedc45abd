"""The checks: each route's Jᵀv (or J) against backward's .grad, within a stated tolerance.

Where a first comparison fails, it is weighed once more at the size of the terms autograd adds up.

Inputs: the grads of the backward calls, the Jacobians, the exact routes' results, v. Outputs: Check
records (result.py), named as in docs/json.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from ..engine.tolerance import ROUNDOFF_UNITS, eps, with_error
from ..errors import FileFormatError
from ..language import program as P
from ..result import Check, Tolerance, element_label
from ..wording import option
from .context import RunContext
from .exact import OUT_OF_TIME, later_sizes, limit_hint
from .forward import work as forward_work

SYM = ".grad from backward(v) vs Jᵀv from sympy's exact derivatives"
JTV = ".grad from backward(v) vs Jᵀv from the explicit Jacobian"
JVP = "<u, Jᵀv> from backward(v) vs <Ju, v> from a forward-mode JVP, random u"
JAC = "explicit Jacobian (autodiff) vs sympy's exact derivatives, entry by entry"
STEP_COST = 200  # one step of the interpreter, in elements: the budget then holds 50,000 steps (about 3 s)
_FD = ".grad from backward(v) vs Jᵀv from central differences of the program in float64 (no autograd)"
_FD_DIR = "<u, .grad> from backward(v) vs (f(x + hu) - f(x - hu))/2h · v, central differences in float64"


def finite_difference_evals(ctx: RunContext, fwd: Any, leaves: dict[str, Any], consts: dict[str, Any]) -> int | str:
    """How many evaluations of the program the finite differences may take (finite_difference_evals, and
    finite_difference_work over what one evaluation costs); why none, where not even the random directions fit."""
    from ..engine.finite_diff import DIRECTIONS

    lim = ctx.limits
    # what one evaluation reads and writes: its inputs (a matrix W of a matvec) and every step's result
    inputs = sum(x.numel() for x in [*leaves.values(), *consts.values()])
    # and its steps: our interpreter runs each in Python, which costs as much as STEP_COST elements at least
    work = max(1, inputs + forward_work(fwd) + STEP_COST * len(fwd.steps))
    if (4 * DIRECTIONS + 1) * work > lim.finite_difference_work:
        return (
            f"each evaluation of the program runs {len(fwd.steps):,} steps and reads and computes "
            f"{work - STEP_COST * len(fwd.steps):,} elements, as much as {work:,} elements with a step's own cost "
            f"({STEP_COST:,}); "
            f"{4 * DIRECTIONS + 1} evaluations would pass the budget of {lim.finite_difference_work:,} "
            f"({limit_hint(ctx, 'finite_difference_work=N')})"
        )
    return min(lim.finite_difference_evals, lim.finite_difference_work // work)


def finite_difference_check(
    ctx: RunContext,
    fwd: Any,
    output: str,
    leaves: dict[str, Any],
    consts: dict[str, Any],
    v: Any,
    grads: dict[str, Any],
    calls: int,
    mags: dict[str, Any],
    how: dict[str, Any],
    later: tuple[Any, Any, float],
) -> Check:
    """The finite-difference check: .grad against Jᵀv (or ⟨u, Jᵀv⟩) from central differences of the
    program in float64, within its budget, at a tolerance that takes the differences' error estimate."""
    import torch

    from ..engine import compare
    from ..engine.finite_diff import FDUnavailable, directional_pairs, finite_differences

    lim = ctx.limits
    n = sum(x.numel() for x in leaves.values())
    max_evals = finite_difference_evals(ctx, fwd, leaves, consts)
    if isinstance(max_evals, str):
        return compare.skipped("finite_difference", _FD, max_evals)
    try:
        fd = finite_differences(fwd.steps, output, leaves, consts, v, max_evals)
    except FDUnavailable as e:
        return compare.skipped("finite_difference", _FD, str(e))
    if fd.method == "full":
        ctx.finite_difference = {n: torch.where(fd.left_out[n], torch.nan, fd.jtv[n] * calls) for n in leaves}
        return _fd_every_column(ctx, fd, leaves, v, grads, calls, mags, how, later)
    if not fd.directions:
        return compare.skipped("finite_difference", _FD, f"no usable direction: {fd.kink_reason}")
    pairs, scales = directional_pairs(fd, grads, mags, how["tol"], calls)
    compares = (
        f"{_FD_DIR} ({len(fd.directions)} random u, {fd.evals} evaluations; the full Jacobian would take "
        f"{4 * n + 1}, more than finite_difference_evals = {lim.finite_difference_evals:,})"
    )
    check = compare.compare_tensors("finite_difference", compares, pairs, magnitudes=scales, exact=True, **how)
    if check.status == "disagree":  # weighed again at the size of the terms autograd added, as written
        sym, sym_sizes, started = later
        terms, why = later_sizes(ctx, sym, sym_sizes, v, leaves, started)
        dtype = next(iter(grads.values())).dtype
        in_dtype = [(label, got.to(dtype), ref) for label, got, ref in pairs]
        along = (
            {
                label: torch.tensor(
                    math.fsum(float((u[name].abs() * terms[name].double().cpu() * calls).sum()) for name in terms),
                    dtype=torch.float64,
                )
                for (label, _, _), u in zip(pairs, fd.us, strict=True)
            }
            if terms
            else {}
        )
        check = reweigh(ctx, check, in_dtype, along, scales, why, {**how, "exact": True})
    return replace(check, reason=fd.kink_reason or check.reason or None)


def _fd_every_column(
    ctx: RunContext,
    fd: Any,
    leaves: dict[str, Any],
    v: Any,
    grads: dict[str, Any],
    calls: int,
    mags: dict[str, Any],
    how: dict[str, Any],
    later: tuple[Any, Any, float],
) -> Check:
    """.grad against the finite differences' Jᵀv, element by element, where every column of J was taken;
    the elements where the differences are no reference (a kink, an infinite derivative) are left out."""

    from ..engine import compare

    items, sizes = [], {}
    left: dict[str, list[str]] = {}  # why -> the elements finite differences are no reference at
    for name in leaves:
        mask = fd.left_out[name]
        got = grads[name].detach().cpu().clone()  # in its dtype: a second weighing uses its eps
        ref = fd.jtv[name] * calls
        got[mask] = 0.0
        ref[mask] = 0.0
        items.append((name, got, ref))
        route = mags[name].double().cpu() if name in mags else 0.0
        sizes[name] = with_error(route, fd.error[name] * calls, how["tol"])
        for k, cause in fd.causes.get(name, {}).items():
            left.setdefault(cause, []).append(element_label(name, tuple(mask.shape), k))
    compares = f"{_FD}, every column of J ({fd.evals} evaluations)"
    check = compare.compare_tensors("finite_difference", compares, items, magnitudes=sizes, exact=True, **how)
    if check.status == "disagree":
        sym, sym_sizes, started = later
        terms, why = later_sizes(ctx, sym, sym_sizes, v, leaves, started)
        terms = {k: m * calls for k, m in terms.items()}
        check = reweigh(ctx, check, items, terms, sizes, why, {**how, "exact": True})
    if left:
        parts = [
            ", ".join(at[:6]) + (f" and {len(at) - 6} more" if len(at) > 6 else "") + f" ({cause})"
            for cause, at in left.items()
        ]
        said = "not a reference at " + "; at ".join(parts)
        # every element left out: nothing was compared, so no evidence either way (never an agreeing route)
        return replace(check, status="skipped", reason=said) if fd.nothing_compared() else replace(check, reason=said)
    return check


def backward_terms(fwd: Any, output: str, bound: Any, v: Any, rows: int = 0) -> dict[str, Any]:
    """Per leaf, Σ|terms| backward adds up (engine/term_sizes.py), on the program's trace replayed in float64;
    with rows, per entry of J instead (m × n, for outputs of at most `rows` elements). {} where the trace
    cannot be replayed with autograd, or the output has more rows."""
    import torch

    from ..engine.interpreter import replay
    from ..engine.term_sizes import jacobian_term_sizes, term_sizes

    names = list(bound.leaves)
    consts = {k: (c.double() if c.is_floating_point() else c).detach() for k, c in bound.consts.items()}

    def f(*xs: Any) -> Any:
        out = replay(fwd.steps, output, {**consts, **dict(zip(names, xs, strict=True))}, torch.float64)
        return out if isinstance(out, torch.Tensor) else torch.as_tensor(out, dtype=torch.float64)

    xs = [bound.leaves[n] for n in names]
    try:
        sizes = jacobian_term_sizes(f, xs, rows) if rows else term_sizes(f, xs, v)
    except (RuntimeError, ValueError, TypeError, IndexError):  # a trace autograd cannot run again in float64
        return {}
    return {} if sizes is None else dict(zip(names, sizes, strict=True))


def reweigh(
    ctx: RunContext, first: Check, items: Any, terms: dict[str, Any], mags: dict[str, Any], why: str | None, how: Any
) -> Check:
    """A failed check weighed once more: each element's scale also takes ROUNDOFF_UNITS·eps·(size of its
    terms) / rtol, so the allowance there is that many units of roundoff of the terms, not rtol of them."""

    from ..engine import compare

    if not terms:
        if why and OUT_OF_TIME in why:  # running out of a budget says nothing about the gradient
            return compare.inconclusive(first, f"{why}: the first weighing failed, and a second could not be made")
        return replace(first, reason=why) if why else first
    if how["tol"].rtol == 0:  # a tolerance of 0 asks for the same bits: no allowance for rounding
        return first
    got = items[0][1]
    unit = eps(got.dtype if got.is_floating_point() else "float64")  # the table's eps of the dtype checked
    factor = ROUNDOFF_UNITS * unit / how["tol"].rtol
    scaled = {n: m.double() * factor for n, m in terms.items()}
    again = compare.compare_tensors(first.name, first.compares, items, magnitudes=larger(scaled, mags), **how)
    if again.status == "agree":
        ctx.reweighed.append(first.name)
    return again


def _flatten(x: Any) -> list[float]:
    out: list[float] = []
    stack = [x]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(float(item))
    return out


def expected_check(exp: Any, prog: P.Program, out: Any, grads: dict[str, Any], fwd: Any, where: str) -> Check:
    """The run against the numbers the source document printed (an expression file's [expect])."""
    import torch

    from ..engine import compare

    wanted: list[tuple[str, Any, Any]] = []
    if exp.output is not None:
        wanted.append((prog.output, out, exp.output))
    for name, numbers in (exp.grads or {}).items():
        if name not in grads:
            raise FileFormatError(
                f"{where}: key 'expect.grads.{name}': {name!r} is not a leaf of the program ({', '.join(grads)})."
            )
        wanted.append((f"{name}.grad", grads[name], numbers))
    items = []
    for label, tensor, numbers in wanted:
        want = _flatten(numbers)
        if tensor.numel() != len(want):
            raise FileFormatError(
                f"{where}: [expect]: {label} has {tensor.numel()} element(s) but the file lists {len(want)} number(s)."
            )
        items.append((label, tensor.detach().cpu(), torch.tensor(want, dtype=torch.float64).reshape(tensor.shape)))
    if exp.loops is not None:
        counts = [c.count for c in fwd.control if c.kind != "if"]
        if len(counts) != len(exp.loops):
            raise FileFormatError(
                f"{where}: [expect]: 'loops' lists {len(exp.loops)} loop(s) but the run went through {len(counts)}."
            )
        items.append(("loop iterations", torch.tensor(counts, dtype=torch.float64), torch.tensor(exp.loops).double()))
    return compare.compare_tensors(
        "expected",
        "the run vs the numbers the source printed ([expect] of the file)",
        items,
        Tolerance(exp.rtol, exp.atol),
    )


def huge_columns(sym: Any, v: Any) -> dict[str, Any]:
    """Per leaf of the per-element route with an exact entry beyond float64 (2**(10**10)): the grad elements
    whose Jᵀv takes such an entry with v != 0, finite exactly though the float64 sum reads inf."""
    nz = v.detach().reshape(-1).cpu() != 0
    out = {}
    for n, entries in sym.huge.items():
        if entries:
            J = sym.matrix(n)
            out[n] = ((~J.isfinite() & sym.finite_mask(n)) & nz[:, None]).any(0)
    return out


def larger(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per leaf, the elementwise larger of two size estimates (where only one exists, that one)."""
    import torch

    return {n: torch.maximum(a[n], b[n].to(a[n].dtype)) if n in a and n in b else a.get(n, b.get(n)) for n in {*a, *b}}


def magnitudes(v: Any, jacs: dict[str, Any], calls: int) -> dict[str, Any]:
    """Per leaf element, Σᵢ |v[i]·∂y[i]/∂x[j]|: the size of the terms a grad element sums, for tolerances."""
    out = {}
    av = None  # |v|, made only for a leaf that needs it
    for n, j in jacs.items():
        # a diagonal block has one term per element: Σ|v·J| is |v[k]·J[k,k]|, the size of the reference
        # itself, which the comparison already uses; no full-size magnitude array is needed
        if j.diagonal is None and j.full is not None:
            if av is None:
                av = v.detach().abs().reshape(-1).nan_to_num(0.0, 0.0, 0.0)
            leaf_shape = j.full.shape[v.dim() :]
            jm = j.full.detach().abs().reshape(av.numel(), -1).nan_to_num(0.0, 0.0, 0.0)
            m = (av @ jm).reshape(leaf_shape)
            out[n] = m * calls if calls > 1 else m
    return out


def jtv_checks(
    grads: dict[str, Any], jacs: dict[str, Any], calls: int, how: dict[str, Any]
) -> tuple[dict[str, Check], list[tuple[str, Any, Any]]]:
    """Route 2: .grad against Jᵀv contracted from the explicit Jacobian (check `jtv`). Returns the check and
    the items compared (a later weighing reuses them)."""
    from ..engine import compare

    tol, mags = how["tol"], how["mags"]
    checks: dict[str, Check] = {}
    have = [(n, grads[n], j.jtv * calls if calls > 1 else j.jtv) for n, j in jacs.items() if j.jtv is not None]
    if have:
        checks["jtv"] = compare.compare_tensors("jtv", JTV, have, tol, mags, how["big"], autodiff=True)
    return checks, have


def jvp_check(
    ctx: RunContext,
    checks: dict[str, Check],
    fwd: Any,
    output: str,
    bound: Any,
    grads: dict[str, Any],
    jacs: dict[str, Any],
    v: Any,
    calls: int,
    how: dict[str, Any],
) -> Check | None:
    """The adjoint identity ⟨u, Jᵀv⟩ = ⟨Ju, v⟩ with forward mode, whose formulas are not backward's (check
    `jvp`, a consistency check; the only autodiff check of the leaves whose J is too big). Past
    `jvp_elements` it runs only where no independent route decided: forward mode then costs about as much as
    the forward and backward themselves, and adds nothing to an exact route that compared every element."""
    import torch

    from ..engine import compare
    from ..engine.jacobian import random_vjp_check

    names = list(jacs)
    if not names:
        return None
    elements = max(v.numel(), *(bound.leaves[n].numel() for n in names))
    decided = [
        k for k in ("symbolic", "finite_difference") if k in checks and checks[k].status in ("agree", "disagree")
    ]
    if elements > ctx.limits.jvp_elements and decided:
        return compare.skipped(
            "jvp",
            JVP,
            f"{elements:,} elements, more than jvp_elements = {ctx.limits.jvp_elements:,}: forward mode would cost "
            f"about a forward and a backward more, and {' and '.join(decided)} (independent) already compared "
            "every element (--limit jvp_elements=N runs it)",
        )
    tol = how["tol"]
    once = grads if calls == 1 else {n: grads[n] / calls for n in names}  # no copies of the grads for one call
    adjoint = random_vjp_check(fwd, bound.leaves, bound.consts, names, once, v, output)
    if adjoint is None:
        return None
    if not all(math.isfinite(x) for x in adjoint[:3]):
        return compare.skipped(
            "jvp", JVP, "<Ju, v> is not finite at this point: the adjoint identity compares finite sums"
        )
    a, b, size, us = adjoint
    how["us"] = us  # for a second weighing (jvp_weighed_again)
    label = "<u, Jᵀv>"
    missing = [n for n, j in jacs.items() if j.jtv is None]
    which = f" (the only route for {', '.join(missing)}, whose Jacobian is not materialised)" if missing else ""
    return compare.compare_tensors(
        "jvp",
        f"{JVP}{which}",
        [(label, torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))],
        tol,
        {label: torch.tensor(size, dtype=torch.float64)},  # a sum of many terms: their size sets the scale
        autodiff=True,
    )


def in_order(found: dict[str, Check], jvp: Check | None) -> dict[str, Check]:
    """The checks in the order they are shown: jtv, then jvp (run last, after the independent routes), then
    the rest as they came."""
    first = {k: found[k] for k in ("jtv",) if k in found}
    if jvp is not None:
        first["jvp"] = jvp
    return {**first, **{k: c for k, c in found.items() if k not in first}}


def jvp_weighed_again(ctx: RunContext, checks: dict[str, Check], adjoint_us: Any, calls: int, dtype: Any) -> Check:
    """The adjoint check disagrees: weighed once more at the size of backward's terms along u (Σ_j |u_j|·M_j,
    M from the absolute backward), as every route is. If it still disagrees while an independent route
    (symbolic, finite_difference) agrees with backward(v), the two autograd computations differ by forward
    mode's own rounding (a sum that cancels to about 0) or by another one-sided derivative at a kink or a tie:
    inconclusive, with why, never a verdict against backward. With no independent route agreeing, it stands."""
    c = checks["jvp"]
    terms = ctx.terms()
    if terms and c.max_abs_diff is not None and c.tolerance is not None and isinstance(c.tolerance, Tolerance):
        if adjoint_us is not None:
            along = math.fsum(float((adjoint_us[n].abs() * terms[n]).sum()) for n in adjoint_us if n in terms)
        else:  # u drawn a span at a time: |u| <= 4 for all but 6e-5 of normal draws
            along = 4 * math.fsum(float(m.sum()) for m in terms.values())
        allowance = ROUNDOFF_UNITS * eps(dtype) * along * calls
        if c.max_abs_diff <= c.tolerance.atol + allowance:  # (no rounding note: that speaks of the exact routes)
            return replace(
                c, status="agree", reason=f"agrees within {ROUNDOFF_UNITS} units of roundoff of backward's terms"
            )
    exact = [k for k in ("symbolic", "finite_difference") if k in checks and checks[k].status == "agree"]
    if not exact:
        return c
    return replace(
        c,
        status="inconclusive",
        reason=f"forward mode differs (max |Δ| = {c.max_abs_diff:.3g}) while {' and '.join(exact)} "
        f"{'agree' if len(exact) > 1 else 'agrees'} with backward(v), an independent route: the two autograd "
        "computations differ by forward mode's own rounding, or by another one-sided derivative at a kink or a "
        "tie; this consistency check cannot decide",
    )


def symbolic_checks(
    ctx: RunContext,
    fwd: Any,
    output: str,
    bound: Any,
    out: Any,
    v: Any,
    grads: dict[str, Any],
    jacs: dict[str, Any],
    have: list[tuple[str, Any, Any]],
    checks: dict[str, Check],
    how: dict[str, Any],
) -> tuple[Any, Any, dict[str, Any] | None]:
    """Route 3: .grad against sympy's exact Jᵀv (check `symbolic`), J entry by entry (`jacobian`), and the jtv
    check weighed again where it failed. Adds to `checks`; returns (the per-element SymbolicJacobian or None,
    the route's sizes of the terms, the exact Jᵀv as TensorData or None)."""
    from ..engine import compare
    from ..engine.symbolic import SymbolicTimeout, time_budget
    from ..engine.tensors import to_data
    from .exact import symbolic_route

    started = time.perf_counter()
    leaves, calls, tol, mags = bound.leaves, ctx.req.backward_calls, how["tol"], how["mags"]
    if not ctx.req.symbolic:
        checks["symbolic"] = compare.skipped("symbolic", SYM, f"turned off ({option(ctx.req.surface, 'no_symbolic')})")
        return None, {}, None
    sym, sym_grads, reason, sym_sizes = symbolic_route(ctx, fwd, leaves, bound.consts, out, v, output)
    symbolic_grads = None
    if sym_grads is None:
        checks["symbolic"] = compare.skipped("symbolic", SYM, reason or "")
        return sym, sym_sizes, None
    huge = huge_columns(sym, v) if sym is not None else {}
    known = sym_sizes if isinstance(sym_sizes, dict) else {}
    strict = {"tol": tol, "overflow_at": how["big"], "finite": huge, "exact": True}
    # the comparison keeps to what is left of the sympy budget (a comparison that has finished stands: its
    # second weighing is not cut short here)
    try:
        with time_budget(ctx.left(started, 0.05)):
            if calls > 1:
                sym_grads = {n: g * calls for n, g in sym_grads.items()}
            sym_items = [(n, grads[n], sym_grads[n]) for n in leaves]
            first = compare.compare_tensors(
                "symbolic",
                SYM + (f" ({reason})" if reason else ""),
                sym_items,
                tol,
                larger({n: m * calls for n, m in known.items()}, mags),
                how["big"],
                huge,
                exact=True,
            )
    except SymbolicTimeout:
        total = ctx.limits.symbolic_seconds
        checks["symbolic"] = compare.skipped(
            "symbolic",
            SYM,
            f"sympy's Jᵀv was not compared within {total:g} s in all ({limit_hint(ctx, 'symbolic_seconds=S')})",
        )
    else:
        symbolic_grads = {n: to_data(g) for n, g in sym_grads.items()}
        checks["symbolic"] = first
        if first.status == "disagree":
            # the exact values are no measure of autograd's rounding where a derivative cancels (1 - tanh(u)**2
            # at a saturated u, the product rule's terms of (x + c)*(x - c)): weigh those elements again, at a
            # few units of roundoff of the size of their terms
            terms, why = later_sizes(ctx, sym, sym_sizes, v, leaves, started)
            scaled = {n: m * calls for n, m in terms.items()}
            checks["symbolic"] = reweigh(ctx, first, sym_items, scaled, mags, why, strict)
    if sym is None and any(j.full is not None for j in jacs.values()):
        checks["jacobian"] = compare.skipped(
            "jacobian", JAC, "the structure-aware route checks Jᵀv, not each entry of J"
        )
    if sym is not None:
        _jacobian_check(ctx, sym, output, out, leaves, jacs, checks, how, started)
    if checks.get("jtv") is not None and checks["jtv"].status == "disagree":
        # backward(v) adds v·(x - c) + v·(x + c) where the J route multiplies v by their (rounded) sum: both
        # autograd, both right up to the rounding of those terms. Weigh them as above
        terms, why = later_sizes(ctx, sym, sym_sizes, v, leaves, started)
        scaled = {n: m * calls for n, m in terms.items()}
        checks["jtv"] = reweigh(ctx, checks["jtv"], have, scaled, mags, why, {"tol": tol, "autodiff": True})
    return sym, sym_sizes, symbolic_grads


def _jacobian_check(
    ctx: RunContext,
    sym: Any,
    output: str,
    out: Any,
    leaves: dict[str, Any],
    jacs: dict[str, Any],
    checks: dict[str, Check],
    how: dict[str, Any],
    started: float,
) -> None:
    """The explicit Jacobian against the per-element route's, entry by entry (check `jacobian`)."""
    from ..engine import compare

    jitems = [
        (f"d{output}/d{n}", full.reshape(out.numel(), -1), sym.matrix(n))
        for n in leaves
        if (full := jacs[n].full) is not None
    ]
    if not jitems:
        return
    jleaf = {f"d{output}/d{n}": n for n in leaves}
    jhuge = {label: sym.finite_mask(jleaf[label]) for label, *_ in jitems if sym.huge.get(jleaf[label])}
    strict = {"tol": how["tol"], "overflow_at": how["big"], "finite": jhuge, "exact": True}
    checks["jacobian"] = compare.compare_tensors("jacobian", JAC, jitems, **strict)
    if checks["jacobian"].status == "disagree":
        # as for Jᵀv, entry by entry (size_matrix is cached: the symbolic check may have asked already)
        sizes, why = later_sizes(ctx, sym, None, None, leaves, started)
        # backward's own terms, entry by entry (one absolute backward per row): no sympy, so no budget
        mine = ctx.jacobian_terms() if ctx.jacobian_terms is not None else {}
        sizes = larger({n: m.double() for n, m in sizes.items()}, mine)
        why = None if mine else why
        jsizes = {f"d{output}/d{n}": m for n, m in sizes.items()}
        checks["jacobian"] = reweigh(ctx, checks["jacobian"], jitems, jsizes, {}, why, strict)


# the singularity lint runs on programs that compute at most this many elements (a second, gradient-free
# pass over the trace), and on any size where a grad is nan or inf
LINT_WORK = 100_000


def singularities(fwd: Any, bound: Any, grads: dict[str, Any], source: str) -> list[str]:
    """Where, at these values, an operation's derivative is infinite or undefined (engine.lint); run on small
    programs, and at any size where a grad is not finite."""
    from ..engine.tensors import all_finite

    if forward_work(fwd) > LINT_WORK and all(all_finite(g) for g in grads.values()):
        return []
    from ..engine.lint import singularities as lint

    return lint(fwd.steps, bound.leaves, bound.consts, bound.dtype, source)


def nonfinite_origin(checks: dict[str, Check], fwd: Any, output: str, bound: Any, v: Any, source: str) -> Any:
    """Where a wrong nan or inf entered the backward pass (engine.nonfinite), when a check found one."""
    if not any(c.spurious for c in checks.values()):
        return None
    from ..engine.nonfinite import find_origin

    return find_origin(fwd.steps, output, bound.leaves, bound.consts, v, source)
