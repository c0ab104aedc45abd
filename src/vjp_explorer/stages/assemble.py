"""Assemble: the run's tensors and findings -> one plain Result (numbers only; no torch, no rule inside).

Inputs: the program, the request, the bound values, the Forward, the explained backward call, the checks,
the notes and the probe. Output: the Result every renderer reads.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..display import Graph
from ..language import program as P
from ..language.values import ValueSpec
from ..result import Check, Control, Input, Intermediate, Jacobian, Note, Probe, Result, TensorData
from ..wording import API, api_words
from .bind import Bound
from .call import CallRecord
from .context import RunContext
from .notes import control_text


def _same(text: str | None) -> str | None:
    return text


def assemble(
    ctx: RunContext,
    prog: P.Program,
    specs: dict[str, ValueSpec],
    bound: Bound,
    fwd: Any,
    out: Any,
    call: CallRecord,
    grad_source: str,
    kept: dict[str, Any],
    symbolic: dict[str, TensorData] | None,
    checks: dict[str, Check],
    notes: list[Note],
    probe: Probe | None,
) -> Result:
    """The Result: every tensor as TensorData, with the checks, notes, control flow and timings."""
    from ..engine.tensors import to_data

    req, leaves = ctx.req, bound.leaves
    words = api_words if req.surface == API else _same  # the engine's texts spell the command line's options
    control = [
        Control(c.kind, prog.source.count("\n", 0, c.span[0]) + 1, c.count, control_text(c.kind, c.count))
        for c in fwd.control
    ]
    jacobians = {
        n: Jacobian(
            leaf=n,
            shape=(*out.shape, *leaves[n].shape),
            method=j.method,
            structure=j.structure,
            value=to_data(j.full) if j.full is not None else None,
            diagonal=to_data(j.diagonal) if j.diagonal is not None else None,
            reason=words(j.reason),
            why=j.why,
            same_pass=j.same_pass,
        )
        for n, j in call.jacobians.items()
    }
    inputs = {
        n: Input(n, to_data(leaves[n] if n in leaves else bound.consts[n]), n in leaves, specs[n].text)
        for n in prog.free
    }
    intermediates = {
        n: Intermediate(n, to_data(x), to_data(x.grad) if x.grad is not None else None) for n, x in kept.items()
    }
    rec = ctx.recorder
    return Result(
        program=prog.source,
        output_name=prog.output,
        dtype=req.dtype,
        device=req.device,
        inputs=inputs,
        output=to_data(out),
        grad=to_data(call.v),
        grad_source=grad_source,
        backward_calls=call.calls,
        retain_graph=call.calls > 1 and req.retain_graph,
        grads={n: to_data(g) for n, g in call.grads.items()},
        jacobians=jacobians,
        # N x Jᵀv after N calls, as .grad and the symbolic route report it
        jtv={n: (to_data(t) if (t := call.jtv(n)) is not None else None) for n in call.jacobians},
        symbolic=symbolic,
        finite_difference={n: to_data(t) for n, t in ctx.finite_difference.items()},
        checks={n: replace(c, reason=words(c.reason)) for n, c in checks.items()},
        notes=[Note(n.code, words(n.text) or "") for n in notes],
        control=control,
        intermediates=intermediates,
        timings=ctx.timings,
        meta={
            "seed": bound.seed,
            "title": req.title,
            "description": req.description,
            "file": req.source,
            "source_note": req.source_note,
            "uses_random": bound.uses_random,
            "latex": req.latex,
            "surface": req.surface,
        },
        probe=replace(probe, note=words(probe.note) or "") if probe is not None else None,
        graph=Graph(rec.graph) if req.graph and rec is not None and rec.graph is not None else None,
        backward_code=rec.code if rec is not None else None,
    )
