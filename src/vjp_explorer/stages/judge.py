"""The program's call as the judge sees it: its forward run once more under the snippet's op log, written as
the one call record (calls.Record) and checked by the one judge (confined/verdict.judged), as a snippet's
call and `vjp check`'s are. The judge's finite differences are of torch's operators replayed from the
record, never of the program's interpreter or its sympy routes.

Where the judge cannot give a verdict (backward ran more than once, the call is past the budget or the
record's size, the forward holds a mask, an index, a branch or a kink the record would fix on autograd's
branch, the replay compares nothing), the program's own differences stand in: its interpreter run in
float64 (checks.finite_difference_check), which recomputes those and names a kink; the check's text says
which ran.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..language import program as P
from ..verdicts import Check
from .bind import Bound
from .context import RunContext

# elements of the inputs, constants and every result the forward computes, up to which a program's call is
# written as a record: it holds the point, the grads, v, the output and every constant read as arrays, and the
# judge replays the forward some hundred times
RECORD_ELEMENTS = 200_000


def judged_check(
    ctx: RunContext,
    prog: P.Program,
    fwd: Any,
    bound: Bound,
    out: Any,
    v: Any,
    grads: dict[str, Any],
    calls: int,
    state: Any,
) -> Check | None:
    """The judge's finite-difference check of the program's call; None where it gives none (why, beside each
    return: the program's own route then decides, and its check's text says it is the program's).
    `state`: the generator's state before the forward ran, so that the second run draws what the first did.
    The judge takes every column of J; where the program's budget (--limit finite_difference_evals and
    finite_difference_work) or the judge's own does not hold them, the program's route decides."""
    import torch

    from ..calls import RecordError
    from ..confined.checks import FD_EVALS
    from ..confined.kinks import piecewise
    from ..confined.verdict import judged
    from ..engine.finite_diff import every_column
    from ..engine.interpreter import Interpreter
    from ..trusted_judge import record_of
    from .checks import finite_difference_evals
    from .forward import work as forward_work

    if calls != 1:
        return None  # .grad holds the sum of several calls
    if (
        fwd.control
        or _indexes(fwd.steps)
        or any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for step in fwd.steps for t in step.fixed.values())
    ):
        return None  # a mask (x > 1), an index (argmax) or a branch: the record holds it fixed, the program's
        # route computes it afresh and sees it flip (a tie of argmax is a kink)
    if out.device.type != "cpu":
        return None  # --device cuda: the record's arrays and the judge's replay are the CPU's
    n = sum(x.numel() for x in bound.leaves.values())
    evals = finite_difference_evals(ctx, fwd, bound.leaves, bound.consts)
    if isinstance(evals, str) or not every_column(n, min(evals, FD_EVALS)):
        return None  # the program's budget holds no column-by-column differences here
    # every element the forward computes (a randn it draws too): the judge replays it some hundred times
    size = forward_work(fwd) + sum(x.numel() for x in [*bound.leaves.values(), *bound.consts.values()])
    if size > RECORD_ELEMENTS:
        return None  # more elements than a record holds
    # after the sizes: a mask and a copy of the output cost 60 MB at 10^7 elements, for no check
    if not bool(torch.isfinite(out.detach()[v != 0]).all()):
        return None  # an infinite output v weighs hides every column's moves: the program's route names it
    names = list(bound.leaves)

    def forward(*xs: Any) -> Any:
        env = {k: replace(val) for k, val in bound.env.items()}
        for name, x in zip(names, xs, strict=True):
            env[name] = replace(env[name], v=x)
        if bound.gen is not None and state is not None:
            bound.gen.set_state(state)
        y = Interpreter(prog, ctx.limits, bound.dtype, bound.gen).run(env).output.v
        return y.to(bound.dtype) if isinstance(y, torch.Tensor) and y.dtype != bound.dtype else y

    xs = [bound.leaves[n] for n in names]
    after = bound.gen.get_state() if bound.gen is not None else None
    try:
        with torch.enable_grad():
            record = record_of(forward, xs, xs, v, [grads[n] for n in names], names, whole=False)
    except RecordError:
        return None  # past the schema's caps (more dimensions than a record's array holds)
    finally:
        if after is not None:
            bound.gen.set_state(after)  # the generator as the run left it
    if record["forward"] is None:
        return None  # a forward the log cannot follow (numpy, a number read), said in 'unreplayable'
    if any(piecewise(op[0]) for op in record["forward"]["ops"]):
        # the judge differentiates relu, max, sort... on the branch autograd took at the point, as it must for
        # a snippet's network near its kinks; the program's route names an element whose step crosses one
        return None
    view, _, unverified = judged({"index": 0, "line": 1, "call": "Tensor.backward", "record": record})
    found = next((c for c in view.checks if c.name == "finite_difference"), None)
    if unverified is not None or found is None or found.status not in ("agree", "disagree"):
        return None  # no verdict (unverified, inconclusive, no element a reference, a replay that failed)
    shown = {}
    for name, x in zip(names, view.inputs, strict=True):
        if x.finite_difference is not None:
            shown[name] = torch.tensor(x.finite_difference, dtype=torch.float64)
    ctx.finite_difference = shown
    return found


def _indexes(steps: list[Any]) -> bool:
    """Whether the program computes an index from its values (argmax, argmin): the record holds it fixed."""
    return any(isinstance(e, P.Call) and e.func in ("argmax", "argmin") for s in steps for e in P.walk_exprs(s.expr))
