"""A live Frame (live.py) -> Rich renderables: J as a heat-map, Jᵀv and .grad, the ledger, the checks, the graph.

The Textual app (live_app.py) places them; tests render them into a fixed-width console. Heat-map cells
reuse heatmap.py's glyphs and colours, so sign and size read without colour too (NO_COLOR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..language.unicode import visible
from ..live import Frame, LeafFrame, ledger
from ..result import element_label
from .checks_view import checks_section
from .checks_view import verdict_line as one_verdict_line
from .heatmap import NEGATIVE, NEGATIVE_STYLE, POSITIVE, POSITIVE_STYLE
from .numbers import fmt, fmt_shape

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
    ("n", "the call's backward as code, node by node (n, p step), each node's cotangent in and out"),
    ("PgUp PgDn", "scroll the view (the checks are at the bottom)"),
    ("s", "save the view as SVG"),
    ("c", "quit and print the vjp run command of this state"),
    ("?, F1", "these keys"),
    ("ctrl+p", "the command palette: these actions by name"),
    ("q, ctrl+c", "quit"),
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


def jacobian_map(frame: Frame, selected: tuple[str, int] | None = None, width: int | None = None) -> RenderableType:
    """J = [∂y/∂x for each leaf] as one grid of glyphs, each leaf on its own scale; a one-hot v's row marked ▶
    and reversed, the selected element's column marked ▲ below. Within `width` columns where given: more
    entries share a cell rather than a row wrap."""
    import numpy as np

    if any(lf.jacobian is None for lf in frame.leaves):
        return Text(_no_j(frame)[0].upper() + _no_j(frame)[1:] + ".", style="dim")
    m = frame.m
    per = max(2, MAP_COLS // max(1, len(frame.leaves)))
    if width is not None:  # the row labels, `▶ `, and a `│` and two characters a cell per leaf
        labels_wide = max(len(element_label(frame.out_name, frame.out_shape, r)) for r in range(min(m, MAP_ROWS)))
        per = max(1, min(per, (width - labels_wide - 3 - len(frame.leaves)) // (2 * max(1, len(frame.leaves)))))
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
        room = wide * grid.shape[1]  # the block's width; its name shortens to fit, a space before the next
        name = lf.name if len(lf.name) <= room else lf.name[: max(0, room - 1)] + "…"
        head.append(name.ljust(room + 1), style="bold")
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


def _no_j(frame: Frame) -> str:
    """Why J is not there, in the frame's own terms: a snippet's call says why (its read-only line above);
    a program's J is past the jacobian_entries limit."""
    if frame.readonly is not None:
        return "J was not built for this call (the reason is above), so v cannot re-weigh it"
    return "J is not materialised (too large): each v runs backward(v) instead"


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


LABEL_LEAST = 6  # the label column's narrowest width (`net.…`): labels shorten, numbers never do
LABEL_EASY = 12  # a label column this wide reads well: the width the side-by-side layout asks for


@dataclass
class GradsTable:
    """Per leaf element: its value, the .grad backward(v) left and Jᵀv from J; numbers never cut.

    Each number column is as wide as its widest number; the label column takes what is left and shortens
    its labels with `…`. Where even the shortest labels leave no room for every column, the columns go
    into blocks one under the other (as render/fit.py does for `vjp run`), each with the labels again.
    """

    title: Text
    caption: str | None
    headers: tuple[str, ...]
    rows: list[tuple[str | None, tuple[str, ...], str]]  # (label or None for a gap, numbers, style)

    def number_widths(self) -> list[int]:
        widths = [Text(h).cell_len for h in self.headers]
        for label, cells, _ in self.rows:
            if label is not None:  # a gap (`...`) has no numbers
                widths = [max(w, Text(c).cell_len) for w, c in zip(widths, cells, strict=True)]
        return widths

    def label_width(self) -> int:
        return max([Text(label).cell_len for label, _, _ in self.rows if label is not None] + [Text("x[j]").cell_len])

    def least_width(self, label: int = LABEL_LEAST) -> int:
        """The width all the columns need in one block, with labels `label` wide."""
        return min(label, self.label_width()) + sum(1 + w for w in self.number_widths())

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        natural = self.label_width() + sum(1 + w for w in self.number_widths())
        least = LABEL_LEAST + 1 + max(self.number_widths(), default=1)
        return Measurement(min(least, options.max_width), min(natural, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        widths = self.number_widths()
        groups: list[list[int]] = [[]]
        used = min(LABEL_LEAST, self.label_width())
        for k, w in enumerate(widths):  # a column that does not fit starts the next block
            if groups[-1] and used + 1 + w > width:
                groups.append([])
                used = min(LABEL_LEAST, self.label_width())
            groups[-1].append(k)
            used += 1 + w
        yield self.title
        for n, group in enumerate(groups):
            label = max(1, min(self.label_width(), width - sum(1 + widths[k] for k in group)))
            t = Table(show_edge=False, pad_edge=False, header_style="bold", box=None, padding=(0, 1, 0, 0))
            t.add_column(Text("x[j]"), width=label, no_wrap=True, overflow="ellipsis")
            for k in group:
                t.add_column(self.headers[k], justify="right", width=widths[k], no_wrap=True)
            for name, cells, style in self.rows:
                if name is None:
                    t.add_row("...", *("" for _ in group))
                    continue
                t.add_row(Text(name, no_wrap=True, overflow="ellipsis"), *(cells[k] for k in group), style=style)
            if n:
                yield Text("")
            yield t
        if self.caption:
            yield Text(self.caption)


def grads_table(frame: Frame, selected: tuple[str, int] | None, digits: int = 6) -> GradsTable:
    """Per leaf element: its value, the .grad backward(v) leaves and Jᵀv from J; the selected row reversed."""
    source = ".grad: what backward(v) left" if frame.grad_from == "backward" else ".grad = Jᵀv from J (no backward)"
    caption = f"{frame.calls} calls: {frame.calls}× one call" if frame.calls > 1 else None
    rows: list[tuple[str | None, tuple[str, ...], str]] = []
    for lf in frame.leaves:
        at = selected[1] if selected is not None and selected[0] == lf.name else 0
        for j in _window(lf.numel, at):
            if j is None:
                rows.append((None, (), ""))
                continue
            cells = (
                fmt(float(lf.value[j]), digits),
                fmt(float(lf.grad[j]), digits) if lf.grad is not None else "…",
                fmt(float(lf.jtv[j]), digits) if lf.jtv is not None else "-",
            )
            rows.append((element_label(lf.name, lf.shape, j), cells, "reverse" if selected == (lf.name, j) else ""))
    return GradsTable(Text(source, style="bold underline"), caption, ("value", ".grad", "Jᵀv (J)"), rows)


def ledger_view(frame: Frame, leaf: str, j: int, digits: int = 6) -> RenderableType:
    """x[j].grad = Σᵢ v[i]·∂y[i]/∂x[j]: every non-zero term (the largest few past LEDGER_TERMS), then the sum."""
    lf: LeafFrame = frame.leaf(leaf)
    name = element_label(leaf, lf.shape, j)
    if frame.m == 1:  # one output number: one term, no index (`∂y.sum()[i]` reads as indexing a sum)
        sum_of = f"v·∂{frame.out_name}/∂{name}"
    else:
        out = frame.out_name if frame.out_name.isidentifier() else f"({frame.out_name})"
        sum_of = f"Σᵢ v[i]·∂{out}[i]/∂{name}"
    title = Text(f"ledger  {name}.grad = {sum_of}", style="bold underline")
    if lf.jacobian is None:
        return Group(title, Text(f"not available: {_no_j(frame)}", style="dim"))
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
    # the one renderer of check rows and the verdict line (checks_view.py), brief as a live screen needs
    return checks_section(frame.checks, brief=True, after=f"; {frame.checks_note}" + (" …" if frame.pending else ""))


def verdict_line(frame: Frame) -> Text:
    """The verdict that stays on screen: the one line every view ends its checks with (checks_view.py), and
    for which v the checks ran."""
    if not frame.checks:
        return Text("checks none ran", style="dim")
    t = one_verdict_line(frame.checks)
    when = {"ran with this v": "with this v"}.get(frame.checks_note, frame.checks_note.split(";")[0])
    return t.append(f" · {when}" + (" …" if frame.pending else ""), style="dim")


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
