"""Tables of numbers that fit any width without cutting a number.

A number is never wrapped, folded or ellipsised: when the columns do not fit the width the table is given,
they are split into blocks of columns, each with the row labels repeated; only the headers and the row
labels may wrap. Rich's own tables shrink every column alike when they run out of room (`1.25e…`), so
the widths here are chosen before Rich sees the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

SEPARATOR = 3  # a column's share of the rule and padding between two columns (pad_edge=False, show_edge=False)
# rows past which a block's body is written as plain lines, exactly as Rich would lay them out: Rich renders
# every cell through its whole layout (about 1 ms a row), so a loop's 3,000 folded calls took 3 s to print
PLAIN_ROWS = 50


def _width(text: str | Text) -> int:
    return Text(text).cell_len if isinstance(text, str) else text.cell_len


def _longest_word(text: str | Text) -> int:
    plain = text if isinstance(text, str) else text.plain
    return max((Text(w).cell_len for w in plain.split()), default=0)


@dataclass
class NumberTable:
    """A labelled table of numbers (rows: labels, columns: numbers), split into column blocks to fit.

    `rows` holds (label, cells); a cell is a number already formatted (a string), never cut. A row whose
    label is None is a gap (`...`).
    """

    corner: str | Text
    headers: Sequence[str | Text]
    rows: list[tuple[str | Text | None, Sequence[str | Text]]] = field(default_factory=list)
    caption: str | None = None

    def add_row(self, label: str | Text | None, *cells: str | Text) -> None:
        self.rows.append((label, cells))

    def _number_widths(self) -> list[int]:
        widths = [1] * len(self.headers)
        for _, cells in self.rows:
            for j, c in enumerate(cells):
                widths[j] = max(widths[j], _width(c))
        return widths

    def _label_width(self, limit: int) -> tuple[int, int]:
        """The label column's least and natural width (never wider than `limit`)."""
        labels = max((_width(label) for label, _ in self.rows if label is not None), default=3)
        least = max(labels, _longest_word(self.corner), 3)
        return min(least, limit), min(max(least, _width(self.corner)), limit)

    def _columns(self) -> tuple[list[int], list[int]]:
        """Each number column's least width (its numbers, and the header's longest word) and its natural one."""
        numbers = self._number_widths()
        least = [max(n, _longest_word(h)) for n, h in zip(numbers, self.headers, strict=True)]
        natural = [max(n, _width(h)) for n, h in zip(least, self.headers, strict=True)]
        return least, natural

    def blocks(self, width: int) -> Iterator[Table | Group]:
        """The tables to print one under the other, each at most `width` wide (where a number fits at all)."""
        least, natural = self._columns()
        widest = max(least, default=0)
        label_least, label_natural = self._label_width(max(3, width - SEPARATOR - widest))
        if label_natural <= width // 4:  # a short title over the labels stays on one line
            label_least = label_natural
        groups: list[list[int]] = []
        used = width + 1
        for j, w in enumerate(least):
            if used + SEPARATOR + w > width and (not groups or groups[-1]):
                groups.append([])
                used = label_least
            groups[-1].append(j)
            used += SEPARATOR + w
        groups = _balanced(groups, least, width - label_least) if len(groups) > 1 else groups or [[]]
        for k, group in enumerate(groups):
            widths = {j: least[j] for j in group}
            spare = width - label_least - sum(SEPARATOR + w for w in widths.values())
            label = min(label_natural, label_least + max(0, spare))
            spare -= label - label_least
            for j in group:  # room left: the headers unwrapped, left to right
                grow = min(natural[j] - least[j], max(0, spare))
                widths[j] += grow
                spare -= grow
            yield self._table(group, widths, label, last=k == len(groups) - 1)

    def _table(self, group: list[int], widths: dict[int, int], label_width: int, last: bool) -> Table | Group:
        caption = self.caption if last else None
        plain = len(self.rows) > PLAIN_ROWS and caption is None and self._plain(group, widths, label_width)
        t = Table(show_edge=False, header_style="bold", pad_edge=False, caption=caption)
        t.add_column(_text(self.corner), width=label_width, overflow="fold")
        for j in group:
            t.add_column(_text(self.headers[j]), justify="right", width=widths[j], overflow="fold")
        for label, cells in self.rows[:1] if plain else self.rows:
            if label is None:
                t.add_row("...", *("" for _ in group))
                continue
            t.add_row(_text(label), *(_number(cells[j]) for j in group))
        if not plain:
            return t
        lines = []  # the rows after the first as Rich lays them out: the label left, each number right
        for label, cells in self.rows[1:]:
            text = "..." if label is None else str(label)
            line = text + " " * (label_width - cell_len(text))
            for j in group:
                cell = "" if label is None else str(cells[j])
                line += " │ " + " " * (widths[j] - cell_len(cell)) + cell
            lines.append(line)
        return Group(t, Text("\n".join(lines), no_wrap=True, overflow="ignore"))

    def _plain(self, group: list[int], widths: dict[int, int], label_width: int) -> bool:
        """Whether every label and number is unstyled text that fits its column on one line."""
        for label, cells in self.rows:
            if label is None:
                continue
            if not isinstance(label, str) or "\n" in label or cell_len(label) > label_width:
                return False
            for j in group:
                cell = cells[j]
                if not isinstance(cell, str) or "\n" in cell or cell_len(cell) > widths[j]:
                    return False
        return True

    def natural_width(self) -> int:
        _, natural = self._columns()
        return self._label_width(10**6)[1] + sum(SEPARATOR + w for w in natural)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        least, _ = self._columns()
        narrowest = self._label_width(10**6)[0] + SEPARATOR + max(least, default=0)
        return Measurement(min(narrowest, options.max_width), min(self.natural_width(), options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for k, table in enumerate(self.blocks(options.max_width)):
            if k:
                yield Text("")
            yield table


def _text(x: str | Text) -> Text:
    return Text(x) if isinstance(x, str) else x


def _number(x: str | Text) -> Text:
    t = Text(x) if isinstance(x, str) else x.copy()
    t.no_wrap = True  # its column is as wide as its widest number: nothing to wrap, nothing to cut
    return t


def _balanced(groups: list[list[int]], least: list[int], room: int) -> list[list[int]]:
    """The same number of blocks, with the columns shared out evenly (5, 5, 2 becomes 4, 4, 4) where they fit."""
    n, k = len(least), len(groups)
    size = -(-n // k)
    even = [list(range(i, min(n, i + size))) for i in range(0, n, size)]
    fits = all(sum(SEPARATOR + least[j] for j in g) <= room for g in even)
    return even if fits and len(even) == k else groups


@dataclass
class ValueGrid:
    """Rows of a name, its value(s) and a description; no word of a value (a number) is ever cut.

    Where the columns cannot all keep their longest word on one line, each row's later cells go on lines of
    their own under the value, rather than wrap a number across lines or end it in an ellipsis.
    """

    styles: tuple[str, ...]
    rows: list[tuple[Text, ...]] = field(default_factory=list)

    def add_row(self, *cells: Text) -> None:
        self.rows.append(cells)

    def _longest(self, k: int) -> int:
        return max((_longest_word(r[k]) for r in self.rows), default=0)

    def _fits(self, width: int) -> bool:
        n = len(self.styles)
        first = max((r[0].cell_len for r in self.rows), default=0)
        room = width - first - 2 * (n - 1)
        return room >= sum(max(self._longest(k), 1) for k in range(1, n)) + max(
            (self._longest(k) for k in range(1, n)), default=0
        )

    def _grid(self, stacked: bool) -> Table:
        t = Table.grid(padding=(0, 2))
        t.add_column(style=self.styles[0], no_wrap=True)
        if stacked:
            t.add_column(style=self.styles[1], min_width=max(self._longest(k) for k in range(1, len(self.styles))))
        else:
            for k, style in enumerate(self.styles[1:], 1):
                t.add_column(style=style, min_width=self._longest(k))
        for r in self.rows:
            if not stacked:
                t.add_row(*r)
                continue
            t.add_row(r[0], r[1])
            for k, cell in enumerate(r[2:], 2):
                t.add_row(Text(""), Text.assemble(cell, style=self.styles[k]))
        return t

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._grid(not self._fits(options.max_width)))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._grid(not self._fits(options.max_width))
