"""The document `vjp check --json` prints, and the line that sums a check up: plain data, no torch.

A check is one call of the user's own function, not a snippet: its document has no transcript (`repl`,
`stdout`, `steps`) and no snippet call fields (`line`, `retain_graph`, `graph`, `grad_before`), and it says
what it is (`"kind": "check"`, its own `schema`). docs/json.md describes it; tests/test_check.py pins it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .snippet.result import Event, SnippetResult

CHECK_SCHEMA_VERSION = 1
# what a check's call says of each input: no .grad before or after (the check calls autograd.grad)
INPUT_KEYS = ("name", "shape", "dtype", "value", "grad", "finite_difference")


class CheckResult(SnippetResult):
    """What `vjp_explorer.check` returns: a SnippetResult of kind "check" (one event, the call checked), so
    the renderers and notebooks show it as they show a snippet's call, with the check's own JSON document."""

    def to_dict(self) -> dict[str, Any]:
        return check_to_dict(self)


def check_to_dict(r: SnippetResult) -> dict[str, Any]:
    """The check's JSON-ready document (non-finite numbers as strings)."""
    from .snippet.result import _json_safe

    (event,) = r.events
    return _json_safe(
        {
            "schema": CHECK_SCHEMA_VERSION,
            "kind": "check",
            "check": {
                "target": r.label,
                "torch": r.torch_version,
                "call": _call(event),
                "summary": summary(r),
                "exit_code": r.exit_code,
            },
        }
    )


def _call(e: Event) -> dict[str, Any]:
    inputs = [{k: v for k, v in asdict(x).items() if k in INPUT_KEYS} for x in e.inputs]
    return {
        "source": e.source,
        "outputs": [asdict(o) for o in e.outputs],
        "v": [asdict(v) for v in e.v],
        "v_origin": e.v_origin,
        "inputs": inputs,
        "grads": {x.name: x.grad for x in e.inputs},
        "checks": [asdict(c) for c in e.checks],
        "status": e.status,
        "diagnosis": e.diagnosis,
        "notes": list(e.notes),
    }


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
