"""The calls' records on their way to the judge: not events, a budget of their own, let go once handed on.

A record carries a model's parameters, grads and forward (base64): for a mid-size model far more than its
event. A training loop's checked calls used to count their records against `snippet_event_bytes` and the
parent kept every one until the run ended; here a loop whose records alone pass the event budget runs to
its end with every checked call judged, and the parent's memory (tracemalloc, this very process) stays
near one record, not all of them. The reference for "judged": the judge's finite differences agree with
the grads of a correct model, as plain torch computes them.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from vjp_explorer.confined import judging, protocol
from vjp_explorer.confined.launch import confinement_available, run_confined
from vjp_explorer.confined.protocol import FrameReader
from vjp_explorer.limits import DEFAULT_LIMITS

STEPS = 53  # checked calls of the loop's line: the 3rd, then every 10th (observe._plan): 13th, 23rd, ... 53rd
CHECKED = [3, 13, 23, 33, 43, 53]
# and the first: the loop is a new statement, whose forward is recorded until its first call (observe.py)
JUDGED = [1, *CHECKED]
LOOP = f"""
import torch
torch.ones(1, requires_grad=True).sum().backward()  # the one call explained in full (its event is large)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256))
x = torch.randn(2, 128)
for step in range({STEPS}):
    model.zero_grad()
    model(x).pow(2).sum().backward()
"""
PARAMETERS = 128 * 256 + 256 + 256 * 256 + 256  # 98,816 float32: 395 KB an array, 4 arrays and more a record
EVENT_BYTES = 1_000_000  # enough for the loop's events (a few KB each), far below its records

needs_confinement = pytest.mark.skipif(confinement_available() is not None, reason="no confinement here")


def _statuses(event: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in event["checks"]}


@needs_confinement
def test_a_loop_whose_records_pass_the_event_budget_runs_to_the_end_all_judged(monkeypatch):
    monkeypatch.setattr(judging, "IN_FLIGHT", 1)  # one record in flight at a time: the parent waits for the judge
    limits = DEFAULT_LIMITS.with_overrides({"snippet_explained_calls": "1", "snippet_event_bytes": str(EVENT_BYTES)})
    tracemalloc.start()
    try:
        out = run_confined(LOOP, limits=limits, observe=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.stopped is None, out.stopped and out.stopped.message
    assert out.unverified == []
    records, record_bytes, over = out.channel.records, out.channel.record_bytes, out.channel.records_over
    assert (records, over) == (1 + STEPS, 0)  # one per call, the unchecked ones without a forward
    # what the records measure: each checked call's carries its model's arrays, so together they pass the
    # event budget by far (before, they counted against it, and the run was stopped at the 3rd checked call)
    per_record = record_bytes // len(JUDGED)  # the unchecked calls' records are a few hundred bytes
    assert per_record > 4 * PARAMETERS * 4  # at, grads, before and the forward's copies: > 1.6 MB
    assert record_bytes > 5 * EVENT_BYTES
    loop = [e for _, e in out.events if e["line"] == 9]
    assert len(loop) == STEPS
    judged = [e["index"] - 1 for e in loop if _statuses(e).get("finite_difference") == "agree"]
    assert judged == JUDGED  # every checked call judged, and found right (the model's backward is torch's)
    assert all("record" not in e for _, e in out.events)  # the parent keeps no record past the judge
    kept = sum(len(json.dumps(e)) for _, e in out.events)
    assert kept < EVENT_BYTES
    # the parent's memory: near one record at a time (its frame, decoded, encoded for the judge), not all
    assert peak < 5 * per_record + kept + 4_000_000
    assert peak < record_bytes


@needs_confinement
def test_past_the_record_budget_the_checks_are_skipped_saying_which_limit():
    limits = DEFAULT_LIMITS.with_overrides({"snippet_explained_calls": "1", "snippet_record_bytes": "2500000"})
    out = run_confined(LOOP.replace(f"range({STEPS})", "range(23)"), limits=limits, observe=True)
    assert out.stopped is None and out.unverified == []
    loop = [e for _, e in out.events if e["line"] == 9]
    first, *later = [e for e in loop if e["index"] - 1 in JUDGED]
    assert _statuses(first)["finite_difference"] == "agree"  # the first record fits the budget
    for e in later:  # the next would pass it: sent without its forward, the check skipped with why
        (check,) = e["checks"]
        assert check["status"] == "skipped"
        assert "--limit snippet_record_bytes=N raises it" in check["reason"]
    assert len(later) == 3  # the 3rd, 13th and 23rd


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_a_record_frame_past_the_budget_is_not_even_decoded():
    """Checked before any work: past the budget, a record frame's bytes are dropped as they are (junk after
    its head included), and its event then gets a skipped check (judging.Judge)."""
    reader = FrameReader(record_budget=100)
    small = protocol.encode({"type": "record", "call": 1, "record": {}})
    junk = _frame(b'{"type":"record",' + b"\xff" * 200)  # not JSON: decoding it would be a protocol error
    frames = reader.feed(small + junk)
    assert [f["type"] for f in frames] == ["record", "record_over"]
    assert (reader.records, reader.records_over, reader.record_bytes) == (1, 1, len(small) - 4)
    assert reader.event_bytes == 0  # records are not events


def test_only_a_record_frame_may_pass_the_event_frame_size():
    reader = FrameReader(record_budget=1 << 30)
    big = b"x" * (protocol.MAX_FRAME + 10)
    reader.feed(protocol.encode({"type": "record", "call": 1, "record": {"pad": big.decode()}}))
    assert reader.record_bytes > protocol.MAX_FRAME
    with pytest.raises(protocol.ProtocolError):  # an event of that size is refused from its header on
        FrameReader(record_budget=1 << 30).feed(_frame(b'{"type":"event","event":{}}' + b" " * protocol.MAX_FRAME)[:64])
    forged = b'{"type":"record","event":{},"type":"event"}' + b" " * protocol.MAX_FRAME  # a valid event, decoded
    with pytest.raises(protocol.ProtocolError, match="dressed as a record"):  # JSON's last key wins
        FrameReader(record_budget=1 << 30).feed(_frame(forged))
