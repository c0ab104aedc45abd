"""A live Frame (live.py) -> Rich renderables: J as a heat-map, Jᵀv and .grad, the ledger, the checks, the graph.

The Textual app (live_app.py) places them; tests render them into a fixed-width console. Heat-map cells
reuse heatmap.py's glyphs and colours, so sign and size read without colour too (NO_COLOR).
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..language.unicode import visible
from ..live import Frame, LeafFrame, ledger
from ..result import element_label
from .heatmap import NEGATIVE, NEGATIVE_STYLE, POSITIVE, POSITIVE_STYLE
from .numbers import fmt, fmt_shape
from .text import STATUS_STYLE

MAP_ROWS = 12  # rows of the live heat-map: more output elements share a row
MAP_COLS = 36  # columns of all the leaves' blocks together
TABLE_ROWS = 9  # rows of the .grad table: a window around the selected element
LEDGER_TERMS = 6  # terms of the ledger written out; the largest, in order of i

KEYS = [
    ("v", "edit v (Enter applies, Esc leaves)"),
    ("b", "v = e0, e1, ...: one row of J at a time"),
    ("1", "v = all ones"),
    ("r", "v = random (seeded, the seed shown)"),
    ("u", "v = dL/dy for a loss typed in, e.g. sum(y**2)"),
    ("↑ ↓", "select an element of a leaf (its ledger); in a snippet's list of events, the event"),
    ("e, Esc", "a snippet: into its list of events, and out of it (to the elements)"),
    ("← →", "the previous or next leaf"),
    ("g", "the backward graph, with each node's cotangent"),
    ("PgUp PgDn", "scroll the view (the checks are at the bottom)"),
    ("s", "save the view as SVG"),
    ("c", "quit and print the vjp run command of this state"),
    ("?", "these keys"),
    ("q", "quit"),
]


def header(frame: Frame) -> Text:
    """The program (or the event), the output and the dtype, in one line."""
    out = f"{frame.out_name} shape {fmt_shape(frame.out_shape)}"
    t = Text.assemble((visible(frame.title), "bold"), f"   {out}   {frame.dtype}")
    if frame.readonly:
        t.append(f"\n{frame.readonly}", style="yellow")
    return t


def v_label(frame: Frame, digits: int = 6) -> Text:
    """What v is and where it came from, next to the editable row."""
    t = Text(f"{frame.v_label}", style="bold")
    if frame.m > 12:
        t.append(f"  ({frame.m} numbers; |v| = {fmt(float(abs(frame.v).max(initial=0.0)), 3)} at most)")
    return t


def v_entry(frame: Frame) -> str:
    """v as the editable row shows it (and as it is typed): 0.1, 1, 0.0001."""
    from ..live import v_text

    return v_text(frame.v, frame.out_shape, frame.dtype).replace(",", ", ")


_GRIDS: dict[int, tuple[Any, Any]] = {}  # id(J) -> (J, its map): J is the same for every v, only the marks move


def _blocks(jac, m: int, n: int, rows: int, cols: int):
    """Per cell of the map, the entry largest in size of its block (nan where the block holds one), and the
    block's sides. Two passes over J (a maximum and a minimum per block), once per J: a new v reuses them
    (about 12 ms of the 50 a change of v may take at 10^6 entries, bench/live.py)."""
    key = id(jac)
    hit = _GRIDS.get(key)
    if hit is not None and hit[0] is jac and hit[1][3] == (rows, cols):  # the entry holds J: its id is not reused
        return hit[1][:3]
    import numpy as np

    b = max(-(-m // rows), -(-n // cols))  # entries per side of a cell: square blocks keep a diagonal one
    bm, bn = min(b, m), min(b, n)
    r0, c0 = np.arange(0, m, bm), np.arange(0, n, bn)
    hi = np.maximum.reduceat(np.maximum.reduceat(jac, r0, axis=0), c0, axis=1)
    lo = np.minimum.reduceat(np.minimum.reduceat(jac, r0, axis=0), c0, axis=1)
    grid = np.where(np.abs(hi) >= np.abs(lo), hi, lo)
    if len(_GRIDS) >= 16:
        _GRIDS.clear()
    _GRIDS[key] = (jac, (grid, bm, bn, (rows, cols)))
    return grid, bm, bn


def _cell(x: float, scale: float) -> tuple[str, str]:
    if not math.isfinite(x):
        return "!", "bold magenta"
    if x == 0.0:
        return "·", "dim"
    level = min(3, int(4 * abs(x) / scale)) if scale > 0 else 3
    glyphs, styles = (POSITIVE, POSITIVE_STYLE) if x > 0 else (NEGATIVE, NEGATIVE_STYLE)
    return glyphs[level], styles[level]


def jacobian_map(frame: Frame, selected: tuple[str, int] | None = None) -> RenderableType:
    """J = [∂y/∂x for each leaf] as one grid of glyphs, each leaf on its own scale; a one-hot v's row marked ▶
    and reversed, the selected element's column marked ▲ below."""
    import numpy as np

    if any(lf.jacobian is None for lf in frame.leaves):
        return Text("J is not materialised (too large): each v runs backward(v) instead.", style="dim")
    m = frame.m
    per = max(2, MAP_COLS // max(1, len(frame.leaves)))
    blocks = []
    for lf in frame.leaves:
        assert lf.jacobian is not None
        grid, bm, bn = _blocks(lf.jacobian, m, lf.numel, MAP_ROWS, per)
        finite = np.abs(grid[np.isfinite(grid)])  # the largest entries of the blocks: max |J| but where nan
        blocks.append((lf, grid, bm, bn, float(finite.max()) if finite.size else 0.0))
    bm = blocks[0][2] if blocks else 1
    rows = blocks[0][1].shape[0] if blocks else 0
    labels = [element_label(frame.out_name, frame.out_shape, r * bm) for r in range(rows)]
    width = max((len(s) for s in labels), default=1)
    hot = frame.one_hot
    wide = 2
    head = Text(" " * (width + 3))
    for lf, grid, _, _, _ in blocks:
        head.append(f"{lf.name}".ljust(wide * grid.shape[1] + 1)[: wide * grid.shape[1] + 1], style="bold")
    lines: list[RenderableType] = [Text("J = ∂y/∂x, rows y[i], columns x[j]", style="bold underline"), head]
    for r in range(rows):
        picked = hot is not None and r * bm <= hot < (r + 1) * bm
        line = Text("▶ " if picked else "  ", style="bold")
        line.append(labels[r].ljust(width), style="reverse bold" if picked else "")
        for _, grid, _, _, scale in blocks:
            line.append("│")
            for c in range(grid.shape[1]):
                glyph, style = _cell(float(grid[r, c]), scale)
                line.append(glyph * wide, style=style + (" reverse" if picked else ""))
        lines.append(line)
    if selected is not None:
        mark = Text(" " * (width + 2))
        for lf, grid, _, bn, _ in blocks:
            col = selected[1] // bn if lf.name == selected[0] else -1
            mark.append(" " + "".join("▲ " if c == col else "  " for c in range(grid.shape[1])))
        lines.append(mark)
    return Group(*lines)


def map_legend(frame: Frame) -> Text:
    """How to read the heat-map, and which row a one-hot v picks."""
    sign = "".join(reversed(POSITIVE)) + " > 0  " + "".join(reversed(NEGATIVE)) + " < 0  · 0  (each leaf its own scale)"
    t = Text(sign, style="dim")
    hot = frame.one_hot
    if hot is not None:
        row = element_label(frame.out_name, frame.out_shape, hot)
        t.append(f"\nv = e{hot}: Jᵀv is row {row} of J, each .grad that row's part", style="bold")
    return t


def _window(n: int, at: int, size: int = TABLE_ROWS) -> list[int | None]:
    if n <= size:
        return list(range(n))
    lo = max(0, min(at - size // 2, n - size))
    rows: list[int | None] = list(range(lo, lo + size))
    if lo > 0:
        rows[0] = None
    if lo + size < n:
        rows[-1] = None
    return rows


def grads_table(frame: Frame, selected: tuple[str, int] | None, digits: int = 6) -> RenderableType:
    """Per leaf element: its value, the .grad backward(v) leaves and Jᵀv from J; the selected row reversed."""
    source = ".grad: what backward(v) left" if frame.grad_from == "backward" else ".grad = Jᵀv from J (no backward)"
    t = Table(show_edge=False, pad_edge=False, header_style="bold", box=None, padding=(0, 1), title_justify="left")
    t.title = Text(source, style="bold underline")
    if frame.calls > 1:
        t.caption, t.caption_justify = f"{frame.calls} calls: {frame.calls}× one call", "left"
    t.add_column("x[j]", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column(".grad", justify="right", no_wrap=True)
    t.add_column("Jᵀv (J)", justify="right", no_wrap=True)
    for lf in frame.leaves:
        at = selected[1] if selected is not None and selected[0] == lf.name else 0
        for j in _window(lf.numel, at):
            if j is None:
                t.add_row("...", "", "", "")
                continue
            style = "reverse" if selected == (lf.name, j) else ""
            t.add_row(
                Text(element_label(lf.name, lf.shape, j)),
                fmt(float(lf.value[j]), digits),
                fmt(float(lf.grad[j]), digits) if lf.grad is not None else "…",
                fmt(float(lf.jtv[j]), digits) if lf.jtv is not None else "-",
                style=style,
            )
    return t


def ledger_view(frame: Frame, leaf: str, j: int, digits: int = 6) -> RenderableType:
    """x[j].grad = Σᵢ v[i]·∂y[i]/∂x[j]: every non-zero term (the largest few past LEDGER_TERMS), then the sum."""
    lf: LeafFrame = frame.leaf(leaf)
    name = element_label(leaf, lf.shape, j)
    title = Text(f"ledger  {name}.grad = Σᵢ v[i]·∂{frame.out_name}[i]/∂{name}", style="bold underline")
    if lf.jacobian is None:
        return Group(title, Text("not available: J is not materialised for this leaf", style="dim"))
    e = ledger(frame, leaf, j)
    mult = f"{frame.calls} × " if frame.calls > 1 else ""
    shown = e.terms
    if len(shown) > LEDGER_TERMS:
        top = sorted(shown, key=lambda t: -abs(t.value) if math.isfinite(t.value) else -math.inf)
        shown = sorted(top[:LEDGER_TERMS], key=lambda t: t.i)
    lines: list[RenderableType] = [title]
    for term in shown:
        star = "★" if e.dominant == term.i and len(e.terms) > 1 else " "
        v_i = fmt(term.v_i, digits)
        step = f" = {mult}{v_i} × {term.formula}" if term.formula and term.formula != fmt(term.dy_dx, digits) else ""
        lines.append(
            Text(
                f"{star} v[{term.i}]·∂{term.y}/∂{name}{step} = {mult}{v_i} × "
                f"{fmt(term.dy_dx, digits)} = {fmt(term.value, digits)}   ({term.share:.0%})"
            )
        )
    if len(shown) < len(e.terms):
        lines.append(Text(f"  ... {len(e.terms) - len(shown)} more terms", style="dim"))
    zero = f"; {e.zero_terms} zero term(s) left out" if e.zero_terms else ""
    lines.append(Text(f"  Σ = {fmt(e.sum, digits)}{zero}", style="bold"))
    source = {"sympy": "exact derivatives from sympy", "autodiff": "derivatives from the autodiff J"}
    lines.append(Text(f"  ({source.get(frame.ledger_source, 'derivatives from J')})", style="dim"))
    return Group(*lines)


def checks_view(frame: Frame) -> RenderableType:
    """Each check's verdict in one line, the headline, and for which v they ran."""
    t = Table.grid(padding=(0, 1))
    for c in frame.checks:
        diff = f"max |Δ| = {fmt(c.max_abs_diff, 3)}" if c.max_abs_diff is not None else (c.reason or "")[:40]
        kind = "independent" if c.independent else "consistency"
        t.add_row(Text(c.name), Text(c.status, style=STATUS_STYLE.get(c.status, "")), Text(kind, style="dim"), diff)
    note = Text(f"{frame.headline}; {frame.checks_note}", style="bold")
    if frame.pending:
        note.append(" …", style="yellow")
    return Group(Text("checks", style="bold underline"), t, note)


def verdict_line(frame: Frame) -> Text:
    """The checks in one line that stays on screen: how many agree, which disagree, and for which v."""
    t = Text("checks ", style="bold")
    if not frame.checks:
        return t.append("none ran", style="dim")
    for status in ("disagree", "inconclusive", "agree", "skipped"):
        names = [c.name for c in frame.checks if c.status == status]
        if not names:
            continue
        shown = f"{len(names)} {status}" + (f" ({', '.join(names)})" if status in ("disagree", "inconclusive") else "")
        t.append(shown + "  ", style=STATUS_STYLE.get(status, ""))
    when = {"ran with this v": "with this v"}.get(frame.checks_note, frame.checks_note.split(";")[0])
    t.append(f"· {when}" + (" …" if frame.pending else ""), style="dim")
    return t


def graph_view(frame: Frame) -> RenderableType:
    """The backward graph (graph_view.tree) with what each node received, and for which v."""
    if frame.graph is None:
        return Text("No graph for this call: the door did not record one.", style="dim")
    from .graph_view import tree

    title = f"{frame.out_name}.backward(v): the nodes torch ran, each with what it received"
    return Group(*tree(frame.graph, title), Text(frame.graph_note, style="dim"))


def keys_view() -> RenderableType:
    """The keys, one a line."""
    t = Table.grid(padding=(0, 2))
    for key, what in KEYS:
        t.add_row(Text(key, style="bold"), Text(what))
    return Group(Text("keys", style="bold underline"), t, Text("Esc or ? closes this", style="dim"))


def main_view(frame: Frame, selected: tuple[str, int] | None, digits: int = 6) -> RenderableType:
    """The whole main screen below v, in one renderable: for the SVG export and for tests."""
    parts: list[RenderableType] = [header(frame), jacobian_map(frame, selected), map_legend(frame)]
    parts.append(grads_table(frame, selected, digits))
    if selected is not None:
        parts.append(ledger_view(frame, *selected, digits))
    parts.append(checks_view(frame))
    return Group(*parts)
