"""A stopped run keeps what ran: what a statement printed before a limit stopped it is shown.

A training loop is one top-level statement; its prints used to wait for the statement's end, so a loop
stopped by the clock showed nothing at all. The child now sends what was printed every FLUSH_SECONDS, and
the parent keeps what arrived from the statement that never ended.
"""

from __future__ import annotations

import pytest

from vjp_explorer.confined.launch import confinement_available, run_confined
from vjp_explorer.limits import DEFAULT_LIMITS

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

LOOP = """
print("start")
for i in range(100):
    print("step", i)
    if i == 3:
        while True:
            pass
"""


def test_a_loop_stopped_by_the_clock_keeps_what_it_printed():
    limits = DEFAULT_LIMITS.with_overrides({"snippet_seconds": "3"})
    out = run_confined(LOOP, limits=limits)
    assert out.stopped is not None and "snippet_seconds" in (out.stopped.hint or "")
    assert [s.stdout for s in out.statements] == ["start\n", "step 0\nstep 1\nstep 2\nstep 3\n"]
    assert out.statements[-1].line == 3  # the for statement, which never ended


def test_output_is_not_sent_twice_nor_out_of_order_when_the_run_ends():
    src = "import time\nfor i in range(6):\n    print(i)\n    time.sleep(0.2)\nprint('end')\n"
    out = run_confined(src)
    assert out.stopped is None
    assert "".join(s.stdout for s in out.statements) == "0\n1\n2\n3\n4\n5\nend\n"
    assert out.statements[-1].stdout == "end\n" and out.statements[-2].line == 2
