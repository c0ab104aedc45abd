"""One backward call, explained: the unit a run (and, later, each `backward` of a snippet) is made of.

Inputs: the output, v, the leaves (and the intermediates whose grads are kept), the Jacobians computed on
the recorded graph, how many times to call backward. Outputs: a CallRecord: each leaf's .grad before and
after, J, Jᵀv from J, and the checks of .grad against Jᵀv (jtv, or jvp where J is too big).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import UsageError
from ..result import Check
from ..wording import CLI, option
from .checks import jtv_checks
from .context import RunContext
from .notes import saved_for_backward


@dataclass
class CallRecord:
    """What one explained backward call holds (tensors; the assembly turns them into plain data)."""

    v: Any
    calls: int
    grads_before: dict[str, Any]  # .grad of each leaf before the call: None where unset
    grads: dict[str, Any]  # after: zeros where torch left None
    none_grads: list[str]  # the leaves whose .grad torch left None (they do not reach the output)
    jacobians: dict[str, Any]  # engine.jacobian.LeafJacobian per leaf
    checks: dict[str, Check] = field(default_factory=dict)
    compared: list[tuple[str, Any, Any]] = field(default_factory=list)  # the jtv items, for a second weighing

    def jtv(self, name: str) -> Any:
        """Jᵀv from J for one leaf, as many times as backward ran (as .grad holds it); None past J's budget."""
        j = self.jacobians[name].jtv
        return None if j is None else (j * self.calls if self.calls > 1 else j)


def backward(
    out: Any,
    v: Any,
    leaves: dict[str, Any],
    kept: dict[str, Any],
    calls: int,
    retain_graph: bool,
    surface: str = CLI,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Call out.backward(v) `calls` times (calls 1 to N-1 with retain_graph, unless it is off). Returns the
    leaves' .grad before (None where unset), after (zeros where torch left None), and the leaves left None."""
    import torch

    # autograd.grad (used for the Jacobian) also fills retained grads: start clean
    for tensor in [*leaves.values(), *kept.values()]:
        tensor.grad = None
    before = {n: x.grad for n, x in leaves.items()}
    saved = saved_for_backward(out) if calls > 1 and not retain_graph else []
    for k in range(calls):
        # every call but the last keeps the graph: backward frees the tensors it saved (exp's result, the
        # operands of *), and the next call needs them
        try:
            out.backward(v, retain_graph=retain_graph and k < calls - 1)
        except RuntimeError as e:
            if "a second time" not in str(e):
                raise
            switch = option(surface, "no_retain_graph")
            raise UsageError(
                f"backward call {k + 1} of {calls} failed ({switch}): torch says '{_first_line(e)}'. "
                f"Call 1 ran without retain_graph=True, so it freed the intermediate values the graph saved for "
                f"backward ({', '.join(saved) or 'none listed'}); call {k + 1} needs them again.",
                hint=f"Drop {switch} (vjp then passes retain_graph=True to calls 1 to N-1, as the "
                "PyTorch message says), or, in your own code, run the forward again before each backward.",
            ) from None
    grads = {n: (x.grad if x.grad is not None else torch.zeros_like(x)) for n, x in leaves.items()}
    return before, grads, [n for n, x in leaves.items() if x.grad is None]


def explain_call(
    ctx: RunContext,
    fwd: Any,
    output: str,
    out: Any,
    v: Any,
    bound: Any,
    kept: dict[str, Any],
    jacs: dict[str, Any],
    calls: int,
    retain_graph: bool,
    how: dict[str, Any],
) -> CallRecord:
    """Run the backward call(s) and check .grad against Jᵀv from J (how: tol, big, mags); timed as the laps
    `backward` and `jtv check`."""
    started = time.perf_counter()
    if ctx.recorder is not None:
        ctx.recorder.watch(out, bound.leaves, v if ctx.req.code else None)
    try:
        before, grads, none_grads = backward(out, v, bound.leaves, kept, calls, retain_graph, ctx.req.surface)
    finally:
        if ctx.recorder is not None:
            ctx.recorder.finish()  # the hooks come off before any later pass through the graph
    record = CallRecord(v, calls, before, grads, none_grads, jacs)
    started = ctx.lap("backward", started)
    record.checks, record.compared = jtv_checks(grads, jacs, calls, how)
    hold_once(record, out, kept)
    ctx.lap("jtv check", started)
    return record


def hold_once(record: CallRecord, out: Any, kept: dict[str, Any]) -> None:
    """Hold equal arrays once, before the exact routes allocate theirs; the result shows the same numbers.
    Where Jᵀv from J is, bit for bit, the grad (with v = ones a diagonal block's Jᵀv comes from the same
    autograd pass as backward's), the grad's tensor stands for both, once the jtv check has compared them;
    the output's retained grad after one call is v (∂y/∂y·v), and v stands for it."""
    import torch

    if record.calls != 1:
        return
    for x in kept.values():
        if x is out and x.grad is not None and x.grad is not record.v and torch.equal(x.grad, record.v):
            x.grad = record.v
    for n, j in list(record.jacobians.items()):
        t, g = j.jtv, record.grads[n]
        # a constant (a stride-0 view) already costs nothing
        if t is None or t is g or not t.is_contiguous() or t.dtype != g.dtype or not torch.equal(t, g):
            continue
        record.jacobians[n] = replace(j, jtv=g, diagonal=g if j.diagonal is t else j.diagonal)
    record.compared = [(n, got, record.jacobians[n].jtv) for n, got, _ in record.compared]


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
