"""A snippet's diagnoses (snippet/why.py) -> Rich: why it failed, after PyTorch's own error, in one screen.

Also the kinks and ties a call's inputs sat on, with the convention PyTorch followed there (Event.kinks).
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from ..snippet.result import Diagnosis
from ..snippet.source import visible

TITLES = {
    "inplace_modified": "a saved tensor was changed in place",
    "backward_twice": "backward through a freed graph",
    "grad_none": "no gradient",
    "nonscalar_output": "backward() of a non-scalar output",
    "no_grad_fn": "an output without a graph",
    "nonfinite_grad": "a nan or inf gradient",
}


def render(diagnoses: list[Diagnosis]) -> list[RenderableType]:
    """One block per diagnosis: its kind and line, what happened, and the fix; nothing where there are none."""
    parts: list[RenderableType] = []
    for d in diagnoses:
        head = Text(f"\nwhy ({d.kind}), line {d.line}: ", style="bold magenta")
        head.append(TITLES.get(d.kind, d.kind), style="magenta")
        parts.append(head)
        parts.append(Text(visible(d.text)))
        parts.append(Text("fix: " + visible(d.fix), style="green"))
    return parts


def kinks(found: list[dict[str, Any]]) -> list[RenderableType]:
    """One line per operation whose input sat on a kink or tie (Event.kinks, a diagnosis's `kinks`): its line,
    PyTorch's convention there, and the elements."""
    parts: list[RenderableType] = []
    for k in found:
        where = f"line {k['line']}: " if k.get("line") else ""
        count = int(k.get("count") or 0)
        named = ", ".join(k.get("elements") or [])
        more = f" and {count - len(k.get('elements') or [])} more" if count > len(k.get("elements") or []) else ""
        element = "" if k.get("input") else "element " if count == 1 else "elements "
        named = named or visible(str(k.get("input") or ""))
        line = Text(f"kink: {where}", style="yellow")
        line.append(visible(str(k.get("convention", ""))))
        line.append(f" (at {element}{visible(named)}{more})" if named else "", style="dim")
        parts.append(line)
    return parts
