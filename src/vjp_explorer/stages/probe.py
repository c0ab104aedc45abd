"""v as a probe (docs/probes.md): the v of each --grad or of --upstream, and what it reads off J.

The probes are one-hot, random, basis and several v; their extra backward passes and checks run while the
graph is still there.

Inputs: the probe kinds and specs (bind.probe_specs), the output, the leaves, the Jacobians. Outputs: the
v's, and the Probe with its checks (basis, linearity, upstream).
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import Origin
from ..language import program as P
from ..language.values import ValueSpec
from ..result import Check, Probe, ProbeV, element_label
from .bind import Bound
from .context import RunContext
from .forward import grad_v


def probe_vs(
    ctx: RunContext,
    kinds: list[Any],
    specs: list[ValueSpec | None],
    up_prog: P.Program | None,
    out: Any,
    prog: P.Program,
    bound: Bound,
) -> list[tuple[Any, str]]:
    """(v, source) for every --grad (or the one --upstream makes)."""
    import torch

    from ..engine import probe as PR

    shape = tuple(out.shape)
    if up_prog is not None:
        assert ctx.req.upstream is not None
        v, loss = PR.upstream_v(up_prog, out, prog.output, ctx.limits, ctx.req.origins.of("upstream"))
        ctx.upstream_loss = loss
        return [(v, "upstream")]
    n_random = sum(1 for k in kinds if k is not None and k.kind == "random")
    randoms = PR.random_v(shape, out.dtype, ctx.req.device, bound.seed, n_random) if n_random else []
    vs: list[tuple[Any, str]] = []
    for k, spec in zip(kinds, specs, strict=True):
        if k is None:
            first_ones = ctx.v_ones
            v, source = grad_v(ctx, spec, out, prog, bound.gen)
            if vs:  # only the run's own v (the first) says whether v is ones
                ctx.v_ones = first_ones
            vs.append((v, "ones" if source == "ones" else "given"))
        elif k.kind == "one-hot":
            flat = PR.one_hot_index(k, shape, prog.output, ctx.req.origins.of("grad"))
            v = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
            v[flat] = 1
            vs.append((v.reshape(shape), "one-hot"))
        elif k.kind == "random":
            vs.append((randoms.pop(0), "random"))
        else:  # basis: the run itself uses v = ones, the sum of every e_i
            n = sum(x.numel() for x in bound.leaves.values())
            PR.check_basis_budget(out.numel(), n, prog.output, ctx.limits.jacobian_entries, ctx.req.origins.of("grad"))
            ctx.v_ones = True
            vs.append((torch.ones_like(out), "basis"))
    return vs


def run_probe(
    ctx: RunContext,
    kinds: list[Any],
    vs: list[tuple[Any, str]],
    up_prog: P.Program | None,
    out: Any,
    bound: Bound,
    jacs: dict[str, Any],
    fwd: Any,
    prog: P.Program,
) -> tuple[Probe, dict[str, Check]]:
    """The probe's extra backward passes and checks, run while the graph is still there."""

    from ..engine import probe as PR
    from ..engine.compare import TOLERANCES, compare_tensors, skipped
    from ..engine.tensors import to_data

    leaves = bound.leaves

    tol = TOLERANCES[ctx.req.dtype]
    o = prog.output
    checks: dict[str, Check] = {}
    texts = [str(g) if not isinstance(g, ValueSpec) else g.text for g in (ctx.req.grad, *ctx.req.more_grads)]
    if up_prog is not None:
        return _upstream_probe(ctx, up_prog, out, leaves, vs[0][0], o)
    if len(vs) > 1:
        coeffs = PR.coefficients(len(vs))
        combo, together, summed, each, sizes = PR.linearity_items(
            lambda v: PR.grads_for(out, leaves, v), [v for v, _ in vs], coeffs
        )
        text = PR.combo_text(coeffs)
        checks["linearity"] = compare_tensors(
            "linearity",
            f"backward({text}) vs the same combination of each backward(v_k): Jᵀ(αv + βw) = αJᵀv + βJᵀw",
            [(n, together[n], summed[n]) for n in leaves],
            tol,
            magnitudes=sizes,
            autodiff=True,
        )
        pvs = [
            ProbeV(t, s, to_data(v), {n: to_data(g) for n, g in e.items()})
            for t, (v, s), e in zip(texts, vs, each, strict=True)
        ]
        note = PR.NOTES["several"].format(combo=text)
        for k, (_, s) in zip(kinds, vs, strict=True):
            if s in ("one-hot", "random") and k is not None:
                note += " " + kind_note(k, s, out, o)
        return (
            Probe(
                "several",
                texts,
                note,
                vs=pvs,
                coefficients=coeffs,
                combined=to_data(combo),
                combined_grads={n: to_data(g) for n, g in together.items()},
            ),
            checks,
        )
    kind, source = kinds[0], vs[0][1]
    if source == "basis":
        func = any(j.method in ("jacrev", "jacfwd") for j in jacs.values())
        started = time.perf_counter()
        rows, method = PR.basis_rows(out, leaves, fwd, bound.consts, o, use_func=func)
        ctx.lap("basis rows", started)  # the backward passes alone; "probe" adds the check
        m = out.numel()
        have = [
            (f"d{o}/d{n}", rows[n].reshape(m, -1), j.full.reshape(m, -1)) for n, j in jacs.items() if j.full is not None
        ]
        compares = f"rows of J from one backward per one-hot v ({method}) vs J from the Jacobian route"
        checks["basis"] = (
            compare_tensors("basis", compares, have, tol, autodiff=True)
            if have
            else skipped("basis", compares, "no Jacobian was materialised to compare with")
        )
        note = PR.NOTES["basis"].format(out=o)
        return Probe("basis", texts, note, rows={n: to_data(r) for n, r in rows.items()}, method=method), checks
    probe = Probe(source, texts, kind_note(kind, source, out, o))
    if source == "one-hot":
        from ..result import unravel

        flat = PR.one_hot_index(kind, tuple(out.shape), o, ctx.req.origins.of("grad"))
        probe.index = unravel(tuple(out.shape), flat)
        probe.element = element_label(o, tuple(out.shape), flat)
    return probe, checks


def _upstream_probe(
    ctx: RunContext, up_prog: P.Program, out: Any, leaves: dict[str, Any], v: Any, o: str
) -> tuple[Probe, dict[str, Check]]:
    """--upstream: Jᵀv with v = dL/dy against dL/dx from one backward through the program and the loss."""
    import torch

    from ..engine import probe as PR
    from ..engine.compare import TOLERANCES, compare_tensors

    formula = ctx.req.upstream or ""
    loss = PR.upstream_loss(up_prog, out, o, ctx.limits, out.dtype, ctx.req.origins.of("upstream"))
    chain = torch.autograd.grad(loss, list(leaves.values()), retain_graph=True, allow_unused=True)
    direct = PR.grads_for(out, leaves, v)
    items = [
        (n, direct[n], torch.zeros_like(x) if g is None else g) for (n, x), g in zip(leaves.items(), chain, strict=True)
    ]
    checks = {
        "upstream": compare_tensors(
            "upstream",
            f"Jᵀv with v = dL/d{o} vs dL/dx from one backward through the program and the loss (the chain rule)",
            items,
            TOLERANCES[ctx.req.dtype],
            autodiff=True,
        )
    }
    note = PR.NOTES["upstream"].format(out=o, formula=formula.strip())
    return Probe("upstream", [formula], note, formula=formula.strip(), loss=ctx.upstream_loss), checks


def kind_note(kind: Any, source: str, out: Any, o: str) -> str:
    """The note of a one-hot or random v."""
    from ..engine import probe as PR

    if source == "one-hot":
        flat = PR.one_hot_index(kind, tuple(out.shape), o, Origin("grad"))  # validated before: it cannot raise
        el = element_label(o, tuple(out.shape), flat)
        return f"{kind.text}: " + PR.NOTES["one-hot"].format(el=el, k=flat)
    return f"{kind.text}: " + PR.NOTES["random"]
