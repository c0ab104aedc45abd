"""The exact routes to Jᵀv within the sympy budget: per element, the elementwise formula, matrix calculus.

Per element is sympy's derivative of every output element with respect to every input element.

Inputs: the Forward, the leaves, the constants, the output and v. Outputs: the per-element SymbolicJacobian
(or None), Jᵀv per leaf (or None, with the reason), and the size of Jᵀv's terms where the route gives it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..language import program as P
from ..wording import option
from .context import RunContext
from .forward import work as forward_work

# the size of Jᵀv's terms per leaf, from a route: known up front (matrix calculus), or a function that gives
# it when a check fails without it (the elementwise route)
Sizes = dict[str, Any] | Callable[[], dict[str, Any]]
# what a reason says where sizes could not be had within the sympy budget (a check then is inconclusive)
OUT_OF_TIME = "not computed within the sympy budget"


def symbolic_route(
    ctx: RunContext, fwd: Any, leaves: dict[str, Any], consts: dict[str, Any], out: Any, v: Any, output: str
) -> tuple[Any, dict[str, Any] | None, str | None, Sizes]:
    """(the per-element SymbolicJacobian or None, Jᵀv per leaf from sympy or None, a reason or note,
    the size of Jᵀv's terms per leaf where the route gives it, now or when asked (Sizes))."""
    import torch

    from ..engine import elementwise_route
    from ..engine import symbolic as S
    from ..engine.pointwise import is_elementwise

    m = out.numel()
    n = sum(x.numel() for x in leaves.values())
    entries = m * n
    work = forward_work(fwd)
    # a constant the executed steps never read (one used only in an if's condition) gets no symbols
    read = {e.id for s in fwd.steps for e in P.walk_exprs(s.expr) if isinstance(e, P.Name)}
    consts_read = sum(x.numel() for k, x in consts.items() if k in read)
    budget = ctx.limits.symbolic_seconds
    elementwise = is_elementwise(fwd.steps, fwd.output.deps)
    reason = None
    if entries > ctx.limits.symbolic_entries:
        reason = (
            f"too large for the exact per-element check: {m:,} outputs x {n:,} inputs = {entries:,} "
            f"derivatives (limit {ctx.limits.symbolic_entries:,}; {limit_hint(ctx, 'symbolic_entries=N')})"
        )
    elif work + consts_read > ctx.limits.symbolic_entries * 5:
        reason = (
            f"the program computes {work:,} intermediate elements and reads {consts_read:,} constant ones, "
            f"more than 5 x symbolic_entries for per-element sympy ({limit_hint(ctx, 'symbolic_entries=N')})"
        )
    elif m * min(fwd.output.size[0], 10**12) * min(fwd.output.size[1], n) > ctx.limits.symbolic_cost:
        nodes, syms = fwd.output.size
        reason = (
            f"the exact per-element derivatives would cost about {m:,} outputs x {nodes:,} expression "
            f"nodes x {min(syms, n):,} symbols, more than the budget of {ctx.limits.symbolic_cost:,} "
            f"({limit_hint(ctx, 'symbolic_cost=N')})"
        )
    else:
        lv = {k: (tuple(x.shape), x.detach().double().reshape(-1).tolist()) for k, x in leaves.items()}
        # an integer constant (an index, class targets) goes as Python ints: a literal integer tensor in sympy
        cv = {
            k: (tuple(x.shape), (x.double() if x.is_floating_point() else x).detach().reshape(-1).tolist())
            for k, x in consts.items()
            if k in read
        }
        t0 = time.perf_counter()
        try:
            with S.time_budget(budget):
                sym = S.symbolic_jacobian(fwd.steps, output, lv, cv, keep_formulas=ctx.req.explain)
        except S.SymbolicTimeout:
            reason = f"sympy did not finish within {budget:g} s ({limit_hint(ctx, 'symbolic_seconds=S')})"
            sym = None
        except S.Unsupported as e:
            return None, None, f"not supported symbolically: {e}", {}
        except RecursionError:
            return None, None, "the expression is too deep for sympy", {}
        except (OverflowError, ValueError, ZeroDivisionError) as e:
            return None, None, f"sympy could not evaluate the exact derivatives here ({type(e).__name__}: {e})", {}
        budget = ctx.left(t0, 0.05)  # one budget for both routes
        if sym is not None:
            vf = v.detach().double().cpu().reshape(-1)
            grads = {}
            for name, x in leaves.items():
                J = sym.matrix(name)
                # a zero v drops a term, unless its derivative is infinite or undefined: 0·inf has no value
                keep = (J != 0) & ((vf != 0)[:, None] | ~torch.isfinite(J))
                terms = torch.where(keep, vf[:, None] * J, torch.zeros_like(J))
                grads[name] = terms.sum(0).reshape(x.shape)
            return sym, grads, None, {}
    if not elementwise:
        return _matrix_route(ctx, fwd, leaves, consts, v, output, reason or "", budget)
    # structure-aware: an elementwise program is one scalar formula, differentiated once per leaf
    return _structured(
        ctx,
        "the elementwise route",
        "failed",
        reason or "",
        budget,
        lambda: (
            *elementwise_route.elementwise_vjp(fwd.steps, output, leaves, consts, v, fwd.output.deps, ctx.v_ones),
            "elementwise program: each leaf's scalar derivative from sympy, evaluated on all elements",
        ),
    )


def _matrix_route(
    ctx: RunContext,
    fwd: Any,
    leaves: dict[str, Any],
    consts: dict[str, Any],
    v: Any,
    output: str,
    reason: str,
    budget: float,
) -> tuple[None, dict[str, Any] | None, str, Sizes]:
    """Jᵀv from sympy's matrix calculus on MatrixSymbols: a sympy cost that does not grow with n."""
    from ..engine import matrix_calculus as M

    def run() -> tuple[dict[str, Any], dict[str, Any], str]:
        grads, sizes, how = M.matrix_vjp(fwd.steps, output, leaves, consts, v, ctx.limits.elements)
        return grads, sizes, f"{M.NOTE}, {how}"

    return _structured(ctx, "matrix calculus", "cannot follow this program", reason, budget, run)


def _structured(
    ctx: RunContext, route: str, failed: str, reason: str, budget: float, run: Any
) -> tuple[None, dict[str, Any] | None, str, Sizes]:
    """A structure-aware route within what is left of the sympy budget: (None, Jᵀv, note, sizes), or the
    reason the per-element check gave and this route's own."""
    from ..engine import symbolic as S

    try:
        with S.time_budget(budget):
            grads, sizes, note = run()
    except S.SymbolicTimeout:
        total = ctx.limits.symbolic_seconds
        return None, None, f"{reason}; {route} did not finish within {total:g} s in all either", {}
    except (S.Unsupported, RecursionError, OverflowError, ValueError, ZeroDivisionError) as e:
        return None, None, f"{reason}; {route} {failed}: {e}", {}
    return None, grads, note, sizes


def later_sizes(
    ctx: RunContext, sym: Any, sizes: Any, v: Any, leaves: dict[str, Any], started: float
) -> tuple[dict[str, Any], str | None]:
    """After a disagreement: the size of the terms autograd adds up, per leaf: the larger of backward's own
    (an absolute backward, engine/term_sizes.py; no sympy, so no budget) and the exact route's where it
    defers them (the per-element route: its size_matrix, as Σᵢ |v[i]|·size[i, j] with v, entry by entry
    without; the elementwise route: its sizes function), within what is left of the sympy budget. Returns
    the sizes and, where none could be had, why."""
    route, why = _route_sizes(ctx, sym, sizes, v, leaves, started)
    if v is None:  # entry by entry: backward's own terms are per grad element, not per entry of J
        return route, why
    mine = ctx.terms()
    if not mine:
        return route, why
    if not route:
        return mine, None
    import torch

    both = {n: torch.maximum(route[n].double(), mine[n]) if n in route else mine[n] for n in mine}
    return both, None


def _route_sizes(
    ctx: RunContext, sym: Any, sizes: Any, v: Any, leaves: dict[str, Any], started: float
) -> tuple[dict[str, Any], str | None]:
    """The exact route's own sizes of the terms (as written), within what is left of the sympy budget."""
    import torch

    from ..engine import symbolic as S

    left = ctx.left(started, 0.5)
    try:
        with S.time_budget(left):
            if sym is not None:
                mats = {n: m for n in sym.values if (m := sym.size_matrix(n)) is not None}
                if v is None:
                    return mats, None
                av = v.detach().double().cpu().reshape(-1).abs().nan_to_num(0.0, 0.0, 0.0)
                return {n: (av @ m).reshape(leaves[n].shape) for n, m in mats.items()}, None
            if callable(sizes):
                return {n: torch.as_tensor(m).reshape(leaves[n].shape) for n, m in sizes().items()}, None
    except S.SymbolicTimeout:
        return {}, f"the size of the terms was {OUT_OF_TIME} of {left:.3g} s"
    except (S.Unsupported, RecursionError, OverflowError, ValueError, ZeroDivisionError) as e:
        return {}, f"the size of the terms could not be computed ({type(e).__name__})"
    return {}, None


def limit_hint(ctx: RunContext, setting: str) -> str:
    """How to raise a limit, in the words of the front end that asked: `--limit steps=N` or
    `limits=Limits(steps=N)`."""
    return option(ctx.req.surface, "limit", setting)
