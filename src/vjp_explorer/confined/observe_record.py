"""What the judge gets for one observed call (observe.py): the recorded forward from the leaves to the
outputs as data (oplog.py), v, the grads, or why there is none (past a line's budget of full checks, complex
tensors, a forward the log does not hold). Notes where the snippet changed a value behind autograd's back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from ..events import Event
from . import checks, oplog
from .observe_parts import FULL_PER_LINE, as_made
from .record import NotReplayable, serial

if TYPE_CHECKING:
    from .calls import Call


class Observer(Protocol):
    """What of observe.Observer the record reads (a protocol: observe.py imports this module)."""

    recorder: Any
    depth: int
    namespace: dict[str, Any]
    jacobian_rows: Any
    hooks: Any

    def name_of(self, t: torch.Tensor) -> str: ...

    def unseen(self) -> str: ...


def record_of(obs: Observer, c: Call, event: Event, got: list[Any]) -> dict[str, Any]:
    """What the judge needs to check this call: the forward (or why there is none), v, the grads."""
    why: str | None = None
    forward = None
    made: list[torch.Tensor] = []  # the outputs as the recorded forward made them (as_made)
    if not c.checked:
        why = f"past the first {FULL_PER_LINE} calls of a line, every {c.every}th is checked"
    elif any(t.is_complex() for t in [*c.outs, *c.leaves]):
        why = "complex tensors: the references here are real; torch's conjugate convention is not checked"
    elif not (all(isinstance(v, torch.Tensor) for v in c.v_used) and c.leaves):
        why = ""  # nothing to check (no input, or a v torch will refuse): no check at all
    else:
        try:
            forward = forward_of(obs, event, c.outs, c.leaves, got)
            made = forward.pop("made")
        except NotReplayable as e:
            why = str(e)
        except (oplog.Unsendable, RuntimeError) as e:
            why = f"the recorded forward could not be written down ({str(e).splitlines()[0][:200]})"
    with checks.outside_the_log(), torch._C.DisableTorchFunction():
        return {
            "forward": forward,
            "unreplayable": why,
            "outputs": [oplog.array(o) for o in made] if forward is not None else [],
            "v": [oplog.array(v) for v in c.v_used] if forward is not None else [],
            "at": [oplog.array(x) for x in c.leaves] if forward is not None else [],
            "grads": [None if g is None else oplog.array(g) for g in got] if forward is not None else [],
            "before": [None if b is None else oplog.array(b) for b in c.before] if forward is not None else [],
            "names": [x.name for x in event.inputs] if forward is not None else [],
            "cheap": not c.explain,
            "jacobian_rows": obs.jacobian_rows,
            "hook": obs.hooks.changed,
            "customs": list(c.customs),
            "second": None,
            "tangent": None,
        }


def _changed(obs: Observer, replay: Any, leaves: list[torch.Tensor]) -> list[str]:
    """The tensors the forward read that hold other values now (`c.data.mul_(2.5)` after the forward)."""
    current: dict[int, torch.Tensor] = {serial(t): t for t in leaves}
    for value in list(obs.namespace.values()):
        if isinstance(value, torch.Tensor):
            current.setdefault(serial(value), value)
        elif isinstance(value, torch.nn.Module):
            for t in [*value.parameters(), *value.buffers()]:
                current.setdefault(serial(t), t)
    changed = obs.recorder.changed_inputs(replay.entries, current)
    return [obs.name_of(current[s]) for s in changed]


def forward_of(
    obs: Observer, event: Event, outs: list[torch.Tensor], leaves: list[torch.Tensor], got: list[Any]
) -> dict[str, Any]:
    """The forward from the leaves to the outputs as data for the judge; NotReplayable where the log
    does not hold it (with where it may have run instead)."""
    if any(x.layout != torch.strided for x in leaves):
        raise NotReplayable(
            "a sparse leaf: autograd's gradient lives on its stored entries only, and these finite "
            "differences perturb dense tensors; shown, not checked"
        )
    obs.recorder.paused += 1
    obs.depth += 1  # what runs here is not the snippet's
    try:
        # anomaly mode (the snippet's own) would keep a stack per replayed op: off while the log is read
        with (
            checks.outside_the_log(),
            torch._C.DisableTorchFunction(),
            torch.autograd.set_detect_anomaly(False),
        ):
            replay = obs.recorder.replay(outs, leaves, obs.unseen())
            x0 = replay.leaf_values()
            read = replay.reads() if any(x is None for x in x0) else set()
            for k, x in enumerate(x0):
                # a non-leaf the gradient is taken at, which the replay reads as its input (autograd cuts
                # the graph there); or an input the replay never reads that gets no gradient (allow_unused)
                unread = serial(leaves[k]) not in read and serial(leaves[k]) not in {serial(o) for o in outs}
                if x is None and unread and got[k] is not None and bool(got[k].detach().ne(0).any()):
                    name = obs.name_of(leaves[k])
                    raise NotReplayable(
                        f"{name} got a gradient, yet the recorded forward never read it: {obs.unseen()}"
                    )
            changed = _changed(obs, replay, leaves)
            forward = oplog.export(obs.recorder, outs, leaves)
            made = as_made(replay, x0, leaves, outs)
    finally:
        obs.recorder.paused -= 1
        obs.depth -= 1
    if changed:
        event.notes.append(
            f"{', '.join(changed)} changed after the forward read {'them' if len(changed) > 1 else 'it'} "
            "(through .data or an in-place write autograd cannot see): backward used the values it saved, "
            "the replay the values the forward read."
        )
    if any(m is not o for m, o in zip(made, outs, strict=True)):
        event.notes.append(
            "The output is not what the recorded forward gives: a value on its way was changed through .data "
            "or an in-place write autograd cannot see; backward used the values it saved, the replay those "
            "the forward made."
        )
    return {**forward, "made": made}
