"""Small shared pieces: repeated measurements, targets, number formatting, Markdown tables."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    """Repeated measurements of one quantity."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Target:
    """A goal the team set; reported, never enforced. passed is None when it was not measured."""

    name: str
    limit: str
    measured: str
    passed: bool | None

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "**FAIL**", None: "n/a"}[self.passed]


def median(s: Series | None) -> float | None:
    """The median of a series that may be missing."""
    return None if s is None else s.median


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing."""
    return None if a is None or b is None or b == 0 else a / b


def fmt_s(seconds: float | None) -> str:
    """Seconds with a unit that keeps 3 significant digits."""
    if seconds is None:
        return "—"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def fmt_series_s(s: Series | None) -> str:
    """'median (min–max)' in seconds-with-unit."""
    if s is None or not s.values:
        return "—"
    if s.n == 1:
        return fmt_s(s.median)
    return f"{fmt_s(s.median)} ({fmt_s(min(s.values))}–{fmt_s(max(s.values))})"


def fmt_series_mb(s: Series | None) -> str:
    """'median (min–max)' of a size in MB."""
    if s is None or not s.values:
        return "—"
    if s.n == 1:
        return f"{s.median:,.0f} MB"
    return f"{s.median:,.0f} MB ({min(s.values):,.0f}–{max(s.values):,.0f})"


def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}×"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (| in cells escaped)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(headers), line(["---"] * len(headers)), *(line(r) for r in rows)])


@dataclass
class Section:
    """One part of the report: a heading, its Markdown body and the targets it checked."""

    title: str
    body: str
    targets: list[Target]
