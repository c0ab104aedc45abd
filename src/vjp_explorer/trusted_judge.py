"""`vjp check`'s call as the judge sees it: the user's forward recorded by the snippet's op log, in this
process (the trusted door), written as the one call record (calls.Record) and checked by the one judge
(confined/verdict.judged), as a custom Function of a snippet is.

The forward is recorded as a custom Function's forward is in a snippet: every operation on the inputs is
logged (grad on or off), and a value read as a Python number (.item(), .tolist(), .numpy()) makes the
forward one the log cannot follow. Where it cannot (numpy inside the forward, an operator torch does not
own), the record says why, and the door's own reference stands in: the forward itself run in float64
(trusted_checks.py). The judge runs torch's operators from the record only, never the user's code.
"""

from __future__ import annotations

from typing import Any

from .events import Event, LeafGrad
from .verdicts import Check

# why there is no replay, where the recorded forward does not reach the output
_UNSEEN = "the forward computes it outside torch (numpy, Python numbers) or through an operator the log cannot follow"


def record_of(
    fn: Any, xs: list[Any], leaves: list[Any], v: Any, grads: list[Any], names: list[str], whole: bool = True
) -> dict[str, Any]:
    """The call record of `fn(*xs).backward(v)`, whose grads of `leaves` were `grads`: the forward as the
    op log recorded it (or why there is none), v, the point and the grads as arrays. `whole`: fn is a custom
    backward's forward, all of it differentiated (its no-grad parts too); else, as a snippet's, what runs under
    no_grad or is detached is a constant of the forward (a program's forward)."""
    import torch

    from . import calls
    from .confined import oplog
    from .confined.checks import JACOBIAN_ROWS
    from .confined.observe_parts import as_made
    from .confined.record import NotReplayable, Recorder
    from .confined.record_parts import watch_numbers

    rec = Recorder()
    rec.custom_depth = 1 if whole else 0  # the whole function is the forward: no-grad parts, number reads
    undo = watch_numbers(rec)
    try:
        with rec:
            y = fn(*xs)
    finally:
        undo()
        rec.custom_depth = 0
    forward, why, made = None, None, [y]
    if not isinstance(y, torch.Tensor) or y.is_complex() or any(x.is_complex() for x in leaves):
        why = "complex tensors: the references here are real; torch's conjugate convention is not checked"
    else:
        try:
            replay = rec.replay([y], leaves, _UNSEEN)
            made = as_made(replay, replay.leaf_values(), leaves, [y])
            forward = oplog.export(rec, [y], leaves)
        except NotReplayable as e:
            why = str(e)
        except (oplog.Unsendable, RuntimeError) as e:
            why = f"the recorded forward could not be written down ({str(e).splitlines()[0][:200]})"
    arrays = forward is not None
    record = {
        "forward": forward,
        "unreplayable": why,
        "outputs": [oplog.array(o.detach()) for o in made] if arrays else [],
        "v": [oplog.array(v.detach())] if arrays else [],
        "at": [oplog.array(x.detach()) for x in leaves] if arrays else [],
        "grads": [None if g is None else oplog.array(g) for g in grads] if arrays else [],
        "before": [None for _ in leaves] if arrays else [],
        "names": list(names) if arrays else [],
        "cheap": False,
        "jacobian_rows": JACOBIAN_ROWS,
        "hook": None,
        "customs": [],
        "second": None,
        "tangent": None,
    }
    return dict(calls.validate_record(record))  # the one schema, as every door's record meets it


def judge(event: Event, record: dict[str, Any]) -> bool:
    """The judge's checks of the call on `event`, with the arrays it shows beside each input (J, Jᵀv, the
    differences); False (and a note why) where the record holds no forward to replay or the judge found it
    inconsistent, and the door's own reference must stand in."""
    from .confined.verdict import judged

    if record["forward"] is None:
        event.notes.append(
            f"The judge cannot replay this forward: {record['unreplayable']}. The reference is the forward "
            "itself, run in float64."
        )
        return False
    view, _, unverified = judged({"index": event.index, "line": event.line, "call": event.call, "record": record})
    if unverified is not None or not _compared(view.checks):
        why = unverified or next((c.reason for c in view.checks if c.reason), "no check compared anything")
        event.notes.append(
            f"The judge's replay of the recorded forward gave no verdict: {why}. The reference is the forward "
            "itself, run in float64."
        )
        return False
    for mine, theirs in zip(event.inputs, view.inputs, strict=True):
        _arrays(mine, theirs)
    event.checks.extend(view.checks)
    event.notes.extend(view.notes)
    return True


def _compared(checks: list[Check]) -> bool:
    """Whether the judge's finite-difference check compared anything (its verdict is evidence)."""
    return any(c.name == "finite_difference" and c.status in ("agree", "disagree") for c in checks)


def _arrays(mine: LeafGrad, theirs: LeafGrad) -> None:
    mine.jtv, mine.jacobian, mine.finite_difference = theirs.jtv, theirs.jacobian, theirs.finite_difference
    mine.omitted += theirs.omitted
