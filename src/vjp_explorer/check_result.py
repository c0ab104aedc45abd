"""What `vjp check` returns, and the line that sums a check up: plain data, no torch.

A check is one call of the user's own function, not a snippet: its document (result_json.py, kind "check")
has one event, the call checked, and beside it the target and this summary, no transcript. docs/json.md
describes it; tests/test_check.py pins it.
"""

from __future__ import annotations

from .snippet.result import SnippetResult


class CheckResult(SnippetResult):
    """What `vjp_explorer.check` returns: a SnippetResult of kind "check" (one event, the call checked), so
    the renderers and notebooks show it as they show a snippet's call, and its document is the one document."""


def summary(r: SnippetResult) -> str:
    """One line: whether the custom backward is wrong, and what says so; only independent checks (whose
    reference is finite differences of the forward, not the backward) count as evidence that it is right."""
    (event,) = r.events
    bad = [c.name for c in event.checks if c.status == "disagree"]
    if bad:
        return f"the custom backward is wrong: {', '.join(bad)} disagree{'s' if len(bad) == 1 else ''} (exit 3)"
    agree = [c.name for c in event.checks if c.independent and c.status == "agree"]
    if not agree:
        return "no independent check ran: nothing says whether the custom backward is right"
    rest = "".join(f"; {c.name} {c.status}" for c in event.checks if c.status != "agree")
    return f"the custom backward agrees with finite differences of the forward ({', '.join(agree)}){rest}"
