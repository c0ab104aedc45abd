"""`vjp live FILE.py`: a snippet's backward/grad calls as live Frames, one per event, re-weighted from J.

A snippet is not run again when v changes: its events are what the snippet did. Where the snippet door built
J for a call (LeafGrad.jacobian), Jᵀv under a new v is that J's product with it, as backward(v) would compute
it on the recorded graph; where it did not, the event is shown read-only and says that re-weighting needs J.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

import numpy as np

from .errors import UsageError
from .live import Frame, LeafFrame, reweigh

NO_J = "read-only: re-weighting needs J, and the snippet door did not build it for this call"


def no_j_reason(event: Any) -> str:
    """Why this call is read-only, in the door's words where it gave them: a check it skipped says what was
    missing (a gradient of a gradient: the recorded forward never made it), never "too large" for a small J."""
    reasons = [c.reason for c in event.checks if c.status == "skipped" and c.reason]
    if reasons:
        return f"{NO_J}: {reasons[0]}"
    return NO_J


def _flat(values: Any) -> np.ndarray:
    return np.asarray(values if values is not None else [], dtype=np.float64).reshape(-1)


def event_frame(event: Any) -> Frame:
    """One event (snippet/result.py's Event) as a Frame: its outputs and v flattened together, J per input."""
    outs = event.outputs
    if len(outs) == 1:
        out_name, out_shape = outs[0].name, tuple(outs[0].shape)
    else:  # several outputs (autograd.backward of a list): J's rows are their elements, one after another
        out_name, out_shape = "outputs", (sum(int(np.prod(o.shape)) for o in outs),)
    output = np.concatenate([_flat(o.values) for o in outs]) if outs else np.zeros(0)
    v = np.concatenate([_flat(t.values) for t in event.v]) if event.v else np.ones(output.size)
    leaves = []
    for x in event.inputs:
        jac = None
        if x.jacobian is not None:
            jac = np.asarray(x.jacobian, dtype=np.float64).reshape(output.size, -1)
        grad = _flat(x.grad) if x.grad is not None else None
        jtv = _flat(x.jtv) if x.jtv is not None else None
        leaves.append(LeafFrame(x.name, tuple(x.shape), _flat(x.value), grad, jtv, jac))
    readonly = None
    if not leaves or any(lf.jacobian is None for lf in leaves) or v.size != output.size:
        readonly = no_j_reason(event)
    return Frame(
        title=f"#{event.index} line {event.line}: {event.source}",
        out_name=out_name,
        out_shape=out_shape,
        output=output,
        v=v,
        v_label=event.v_origin,
        leaves=tuple(leaves),
        checks=tuple(event.checks),
        checks_note="ran for the recorded v",
        grad_from="backward",
        graph=event.graph,
        graph_note="the cotangents of the recorded call (its own v)",
        code=event.backward_code,
        call=event.index,
        dtype=outs[0].dtype if outs else "float32",
        ledger_source="autodiff",
        readonly=readonly,
    )


class SnippetSession:
    """A snippet's events, each a Frame that a new v re-weights from its J."""

    kind = "snippet"

    def __init__(self, result: Any, argv: list[str]) -> None:
        self.result = result
        self.argv = argv
        self.recorded = [event_frame(e) for e in result.events]
        self.frames = list(self.recorded)
        self.k = 0
        if not self.frames:
            raise UsageError(
                f"{result.label}: the snippet made no backward or grad call, so there is nothing to explore live.",
                hint=f"vjp run {shlex.quote(result.label)} shows what it printed.",
            )
        self.frame = self.frames[0]

    def select(self, k: int) -> Frame:
        self.k = k
        self.frame = self.frames[k]
        return self.frame

    def set_v(self, v: np.ndarray, label: str) -> Frame:
        if self.frame.readonly is not None:
            raise UsageError(f"This call is {self.frame.readonly}.")
        back = self.recorded[self.k]
        same = np.array_equal(v, back.v)
        frame = back if same else reweigh(back, v, label)
        if not same:
            frame = replace(
                frame,
                checks_note="ran for the recorded v only: re-weighting from J runs nothing again",
                graph_note="the cotangents of the recorded call (its own v, not this one)",
            )
        self.frame = self.frames[self.k] = frame
        return frame

    def recompute(self, v: np.ndarray, label: str) -> Frame | None:
        return None  # J answered: the snippet itself is not run again

    def upstream(self, loss: str) -> tuple[np.ndarray, str]:
        raise UsageError("u works for programs: a snippet's v comes from its own code (change it there).")

    def accept(self, frame: Frame) -> bool:
        return False

    def command_line(self) -> str:
        """`vjp run FILE.py`; a snippet takes no --grad, so a v changed here is told on a comment line."""
        from .live import v_text

        line = shlex.join(["vjp", "run", *[a for a in self.argv if a != "--graph"]])
        f, recorded = self.frame, self.recorded[self.k]
        if not np.array_equal(f.v, recorded.v):
            v = v_text(f.v, f.out_shape, f.dtype)
            line += f"\n# call #{self.k + 1} with v = {v}: write that v in the snippet's call ({f.title})"
        return line
