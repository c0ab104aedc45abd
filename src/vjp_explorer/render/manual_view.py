"""A snippet's hand-written gradients (snippet/manual.py) -> Rich: the learners' cmp table, the first wrong line.

The table has a row per hand-written gradient; below it, the first wrong line's diagnosis (docs/manual.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from ..snippet.source import visible
from .numbers import fmt

if TYPE_CHECKING:  # annotations only: snippet.manual imports numpy, which a run without manual gradients skips
    from ..snippet.manual import Manual, ManualLine

STYLES = {"agree": "green", "disagree": "bold red", "shape": "yellow"}


def render(manual: Manual | None) -> list[RenderableType]:
    """The cmp table and the first wrong line's diagnosis; nothing for a snippet with no hand-written gradient."""
    if manual is None:
        return []
    if not manual.lines:
        said = "hand-written gradients: none could be paired with a tensor that a backward call reached"
        return [Text("\n" + said, style="dim")]
    table = Table(title="hand-written gradients against autograd's (cmp)", title_justify="left", box=None)
    for column in ("line", "name", "exact", "approximate", "max diff", "verdict"):
        table.add_column(column, justify="right" if column in ("line", "max diff") else "left")
    for m in manual.lines:
        table.add_row(
            str(m.line),
            visible(m.name),
            str(m.exact),
            str(m.approximate),
            "—" if m.max_abs_diff is None else fmt(m.max_abs_diff, 4),
            Text(_verdict(m), style=STYLES.get(m.verdict, "")),
        )
    parts: list[RenderableType] = [Text(""), table]
    first = manual.first_wrong
    if first is None:
        parts.append(Text("every hand-written gradient agrees with autograd's", style="green"))
        return parts
    head = Text(f"first wrong line {first.line}: ", style="bold red")
    head.append(f"{visible(first.name)} ({first.kind or first.verdict})", style="red")
    parts.append(head)
    parts.append(Text(visible(first.why)))
    if first.expected is not None:  # from the formula table of --code (docs/code.md)
        parts.append(Text("autograd's formula: " + visible(first.expected), style="green"))
    return parts


def summary(manual: Manual | None) -> str:
    """The closing line's words on the hand-written gradients: how many agree, and the first wrong line."""
    if manual is None or not manual.lines:
        return ""
    agree = sum(1 for m in manual.lines if m.verdict == "agree")
    said = f"; {agree} of {len(manual.lines)} hand-written gradients agree"
    first = manual.first_wrong
    return said if first is None else f"{said} (first wrong: line {first.line}, {visible(first.name)})"


def _verdict(m: ManualLine) -> str:
    if m.kind == "inherits":  # wrong only because a line above is: said once, there
        return f"inherits from {m.inherits_from}"
    return m.verdict if m.kind is None else f"{m.verdict}: {m.kind}"
