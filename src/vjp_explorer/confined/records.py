"""The calls' records on their way to the judge, from the snippet's process: each in a "record" frame of its
own (not an event: the parent passes it on and keeps none of it), within the run's budget of records.

The budget (Limits.snippet_record_bytes) is checked here before a record is sent, and again by the parent's
reader before it decodes one (protocol.FrameReader): past it, or past a record frame's size, the record
goes without its forward, saying why, and the judge skips the call's check with that reason.
"""

from __future__ import annotations

from typing import Any

from . import protocol

EMPTY: dict[str, Any] = {"outputs": [], "v": [], "at": [], "grads": [], "before": [], "names": []}


class RecordBudget:
    """The bytes of records one run may still send to the judge."""

    def __init__(self, budget: int) -> None:
        self.budget, self.sent = budget, 0

    def send(self, send: Any, index: int, record: dict[str, Any]) -> None:
        """Send the record of call `index` (before its event), or, past a limit, the record without its forward."""
        frame = {"type": "record", "call": index, "record": record}
        size = len(protocol.encode(frame)) - 4 if record["forward"] is not None else 0
        why = None
        if size > protocol.MAX_RECORD_FRAME:
            why = f"the recorded forward is larger than a record frame ({protocol.MAX_RECORD_FRAME:,} bytes)"
        elif self.sent + size > self.budget:
            why = (
                f"not checked: the records this run sent to the judge reached {self.budget:,} bytes, the "
                "limit (--limit snippet_record_bytes=N raises it)"
            )
        if why is not None:
            frame["record"] = {**record, **EMPTY, "forward": None, "unreplayable": why}
            size = len(protocol.encode(frame)) - 4
        send(frame)
        self.sent += size
