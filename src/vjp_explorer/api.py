"""explore(...) -> Result: the one entry point the CLI, the tests and notebooks use.

Data flows one way, one stage after another (src/vjp_explorer/stages/): parse -> bind values -> forward
-> v -> Jacobians -> the backward call(s) -> exact routes and checks -> notes -> assemble. torch and sympy
are imported inside the stages, so that importing the package (and `vjp --help`) costs neither.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .errors import Origin, UsageError, VjpError
from .request import Request, ValueLike
from .result import Check, Result
from .stages import bind, checks, forward, judge, probe
from .stages.assemble import assemble
from .stages.call import explain_call
from .stages.context import RunContext
from .stages.notes import Facts, notes_for
from .stages.parse import parse_request
from .wording import API, api_words


def explore(
    program: str | Request,
    values: Mapping[str, ValueLike] | None = None,
    *,
    gradient: ValueLike | None = None,
    **options: Any,
) -> Result:
    """Run a program at the given values: backward(v), Jacobians, Jᵀv and the symbolic check.

    Values (and v) are value text (`"1,2,3"`, `"randn(3)"`), numbers, nested lists, torch tensors or numpy
    arrays. `gradient` is v, the argument of `y.backward(gradient)` (`grad=` is the same keyword, kept); the
    other keywords are the fields of Request."""
    if isinstance(program, Request):
        if gradient is not None or values or options:
            raise UsageError("Give either a Request or a program with its values and keywords, not both.")
        return run(program)
    if gradient is not None:
        if options.get("grad") is not None:
            raise UsageError("v is given twice, as gradient= and as grad=; give it once (gradient=).")
        options["grad"] = gradient
    req = Request(program, dict(values or {}), **options)
    if gradient is not None:
        req.origins.given.setdefault("grad", Origin("gradient"))
    try:
        return run(req)
    except VjpError as e:
        if req.surface == API:  # a message worded where the surface is not known spells the command line's
            e.message, e.hint = api_words(e.message) or "", api_words(e.hint)
            e.args = (e.message,)
        raise


def run(req: Request) -> Result:
    """The stages of one exploration, in order; each lap is timed in Result.timings."""
    ctx = RunContext(req)
    bind.check_request(req)
    prog = parse_request(req)
    t = ctx.lap("parse", ctx.t0)
    specs, const_specs = bind.check_names(req, prog)
    kinds, grad_specs, up_prog = bind.probe_specs(req, prog)
    t = ctx.lap("values", t)

    import torch

    from .engine.compare import TOLERANCES
    from .engine.jacobian import compute_jacobians

    t = ctx.lap("import torch", t)
    bound = bind.bind_values(req, prog, specs, const_specs, kinds, grad_specs)
    t = ctx.lap("inputs", t)
    state = bound.gen.get_state() if bound.gen is not None else None  # the judge's run draws what this one did
    fwd, out = forward.run_forward(prog, bound, ctx)
    if kinds or up_prog is not None:
        vs = probe.probe_vs(ctx, kinds, grad_specs, up_prog, out, prog, bound)
        v, grad_source = vs[0]
    else:
        v, grad_source = forward.grad_v(ctx, grad_specs[0] if grad_specs else None, out, prog, bound.gen)
    kept = forward.kept_intermediates(prog, bound.env, bound.leaves)
    t = ctx.lap("forward", t)
    jacs = compute_jacobians(fwd, bound.leaves, bound.consts, v, req.limits, prog.output)
    t = ctx.lap("jacobian", t)
    found_probe, probe_checks = None, dict[str, Check]()
    if kinds or up_prog is not None:
        found_probe, probe_checks = probe.run_probe(ctx, kinds, vs, up_prog, out, bound, jacs, fwd, prog)
        t = ctx.lap("probe", t)

    calls = req.backward_calls
    ctx.backward_terms = lambda: checks.backward_terms(fwd, prog.output, bound, v)
    ctx.jacobian_terms = lambda: checks.backward_terms(fwd, prog.output, bound, v, rows=req.limits.symbolic_entries)
    tol = TOLERANCES[forward.tolerance_dtype(fwd, req.dtype)]
    how: dict[str, Any] = {"tol": tol, "big": float(torch.finfo(bound.dtype).max)}
    how["mags"] = checks.magnitudes(v, jacs, calls)
    call = explain_call(ctx, fwd, prog.output, out, v, bound, kept, jacs, calls, req.retain_graph, how)
    t = time.perf_counter()
    ctx.singular = checks.singularities(fwd, bound, call.grads, prog.source)
    t = ctx.lap("singularity lint", t)
    found = dict(call.checks)
    sym, sym_sizes, symbolic = checks.symbolic_checks(
        ctx, fwd, prog.output, bound, out, v, call.grads, jacs, call.compared, found, how
    )
    t = ctx.lap("symbolic", t)
    fd_how = {"tol": how["tol"], "overflow_at": how["big"]}
    by_judge = judge.judged_check(ctx, prog, fwd, bound, out, v, call.grads, calls, state)
    found["finite_difference"] = by_judge or checks.finite_difference_check(
        ctx,
        fwd,
        prog.output,
        bound.leaves,
        bound.consts,
        v,
        call.grads,
        calls,
        how["mags"],
        fd_how,
        (sym, sym_sizes, t),
    )
    t = ctx.lap("finite differences", t)
    # after the independent routes: past jvp_elements it runs only where neither of them decided
    jvp = checks.jvp_check(ctx, found, fwd, prog.output, bound, call.grads, jacs, v, calls, how)
    if jvp is not None and jvp.status == "disagree":
        found["jvp"] = jvp
        jvp = checks.jvp_weighed_again(ctx, found, how.get("us"), calls, bound.dtype)
    found = checks.in_order(found, jvp)
    t = ctx.lap("jvp check", t)
    if req.expected is not None:
        found["expected"] = checks.expected_check(req.expected, prog, out, call.grads, fwd, req.source or "the file")
    found.update(probe_checks)
    ctx.origin = checks.nonfinite_origin(found, fwd, prog.output, bound, v, prog.source)

    facts = Facts(
        prog, fwd, bound.leaves, call.grads, jacs, v, grad_source, call.none_grads, calls, found, req.dtype,
        ctx.v_ones, ctx.singular, ctx.origin, ctx.reweighed, req.expected_dropped, req.surface,
        req.retain_graph,
    )  # fmt: skip
    res = assemble(
        ctx, prog, {**specs, **const_specs}, bound, fwd, out, call, grad_source, kept, symbolic, found,
        notes_for(facts), found_probe,
    )  # fmt: skip
    ctx.lap("result", t)
    ctx.timings["total"] = round(time.perf_counter() - ctx.t0, 6)
    if req.explain:
        from .explain import build_explanation

        if req.progress is not None:
            req.progress("explaining: the formulas and the ledger")
        res.explanation = build_explanation(res, prog, fwd, sym, req.limits)
    return res


__all__ = ["Request", "explore"]
