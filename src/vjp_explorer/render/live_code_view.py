"""`vjp live`'s code view (live_code.py's walk) -> Rich: one node of the backward script at a time.

What the page shows, top to bottom: where the walk is (node k of n), the line of the user's code that made the
node, the node's statements as `--code` writes them (syntax-highlighted), the cotangent it received and the
one it sent along each edge, and the nodes just before and after it. Everything from the snippet is shown as
plain Text (never markup).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from ..live_code import CodeWalk, Cotangent
from .numbers import fmt, fmt_shape

AROUND = 3  # nodes listed before and after the one shown
KEYS_LINE = "n → space: next node · p ←: previous · Home End: first, last · Esc: back"


def code_page(walk: CodeWalk, note: str, digits: int = 6) -> RenderableType:
    """The page of the walk's current node; `note` says for which v the values are."""
    step = walk.step
    head = Text(f"{walk.file}  ·  node {walk.at + 1} of {len(walk.steps)}: ", style="bold")
    head.append(step.node, style="bold cyan")
    where = Text("made by ", style="dim")
    if step.leaf is not None:
        where = Text(f"the leaf {step.leaf}: backward adds what reaches it to {step.leaf}.grad", style="dim")
    elif step.line is not None:
        where.append(f"line {step.line}", style="bold")
        if step.source:
            where.append(f": {step.source}")
    else:
        where.append("torch itself (no line of the code of its own)")
    if step.value_of:
        where.append(f"  ({step.value_of})", style="dim")
    code = Syntax(
        "\n".join(step.statements) or "pass",
        "python",
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )
    flows = Table.grid(padding=(0, 2))
    flows.add_row(Text("receives", style="bold"), Text(""), cotangent_text(step.received, digits))
    for sent in step.sent:
        flows.add_row(Text("sends", style="bold"), Text(f"→ {sent.to}"), cotangent_text(sent.cotangent, digits))
    if step.leaf is not None:
        flows.add_row(Text("adds", style="bold"), Text(f"→ {step.leaf}.grad"), cotangent_text(step.received, digits))
    elif not step.sent:
        flows.add_row(Text("sends", style="bold"), Text("nothing on"), Text(""))
    parts: list[RenderableType] = [head, where, Text(""), code, Text(""), flows, Text(""), _around(walk)]
    source = "every node from the formula table"
    if not walk.independent:
        source = f"not from the table: {', '.join(walk.not_in_table)}"
    parts += [Text(""), Text(f"{note}; {source}", style="dim"), Text(KEYS_LINE, style="dim")]
    return Group(*parts)


def cotangent_text(c: Cotangent | None, digits: int = 6) -> Text:
    """[0.1, 1, 0.0001], with its shape; past the values kept, an ellipsis and the norm of the whole."""
    if c is None:
        return Text("not recorded", style="dim")
    numbers = ", ".join(fmt(x, digits) for x in c.values)
    more = c.numel > len(c.values)
    text = Text(f"[{numbers}{', …' if more else ''}]")
    said = f"  shape {fmt_shape(c.shape)}"
    if more:
        said += f", the first {len(c.values)} of {c.numel}; norm {fmt(c.norm, digits)}"
    text.append(said, style="dim")
    return text


def _around(walk: CodeWalk) -> RenderableType:
    """The nodes around the current one, in autograd's order: where the walk is in the whole pass."""
    t = Table.grid(padding=(0, 1))
    lo, hi = max(0, walk.at - AROUND), min(len(walk.steps), walk.at + AROUND + 1)
    if lo > 0:
        t.add_row(Text(""), Text(f"… {lo} before", style="dim"))
    for k in range(lo, hi):
        s = walk.steps[k]
        label = f"{k + 1:>3} {s.node}" + (f", line {s.line}" if s.line is not None else "")
        label += f" → {s.leaf}.grad" if s.leaf is not None else ""
        t.add_row(Text("▶" if k == walk.at else " "), Text(label, style="bold" if k == walk.at else "dim"))
    if hi < len(walk.steps):
        t.add_row(Text(""), Text(f"… {len(walk.steps) - hi} after", style="dim"))
    return t
