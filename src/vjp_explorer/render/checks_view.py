"""A call's checks on the terminal: one renderer of the check rows and the verdict line, for every door and view.

`vjp run` and `vjp explain` (render/text.py), a snippet's events and `vjp check` (render/snippet_view.py) and
`vjp live` (render/live_view.py) all draw their checks here, so a check reads the same wherever it shows:
its name, its verdict, whether it is independent evidence or a consistency check, and what it compared.
`brief` rows say the verdict, the largest difference and the reason; full rows also say what was compared
and the tolerance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Group
from rich.text import Text

from ..verdicts import Check, Tolerance, headline
from ..wording import CLI, SNIPPET, option
from .fit import ValueGrid
from .numbers import fmt

STATUS_STYLE = {"agree": "bold green", "disagree": "bold red", "skipped": "yellow", "inconclusive": "yellow"}
LISTED = 6  # elements named in a row's lists (undefined, spurious, ...) before "..."


def tolerance_text(tol: Tolerance | str) -> str:
    """A check's tolerance in words: the table's first weighing, or the rule a check states itself."""
    if isinstance(tol, str):
        return tol
    return f"|Δ| <= {fmt(tol.atol, 3)} + {fmt(tol.rtol, 3)}·max(|exact|, Σ|terms|)"


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items[:LISTED]) + (" ..." if len(items) > LISTED else "")


def check_detail(c: Check, said_to: str = CLI, brief: bool = False) -> Text:
    """What a check compares, the measured difference and the tolerance (or why it was skipped); brief: the
    kind of evidence, the largest difference and the reason only."""
    # whether the reference uses no autograd (independent evidence) or is a second autograd computation
    kind = "independent" if c.independent else "consistency"
    if c.status == "skipped":
        return Text(f"{kind}: skipped, {c.reason}" if brief else f"{kind}: {c.compares}: skipped, {c.reason}")
    t = Text(kind if brief else f"{kind}: {c.compares}")
    if c.max_abs_diff is not None:
        rel = "" if brief or c.max_rel_diff is None else f", max rel = {fmt(c.max_rel_diff, 3)}"
        t.append(f"{'; ' if brief else chr(10)}max |Δ| = {fmt(c.max_abs_diff, 3)}{rel}")
    if c.tolerance is not None and not brief:
        t.append(f"; tolerance {tolerance_text(c.tolerance)}")
    if c.status == "disagree" and c.worst:
        t.append(f"\nfails the tolerance most at {c.worst}", "red")
    if c.reason:  # of a check that ran: what it left out, or why a second weighing was not possible
        t.append(f"\n{c.reason}", "yellow")
    if c.spurious:
        t.append(
            f"\nnan or inf from backward where the exact value is finite (a wrong gradient): {_listed(c.spurious)}",
            "red",
        )
    if c.undefined:
        why = "the exact value is infinite or undefined"
        t.append(f"\nundefined or infinite at this point ({why}): {_listed(c.undefined)}", "yellow")
    if c.nonfinite:
        t.append(
            f"\nnan or inf in both routes (the exact checks say whether rightly): {_listed(c.nonfinite)}", "yellow"
        )
    if c.overflow:
        t.append(
            f"\noverflowed the dtype (inf) where the exact value is finite: {_listed(c.overflow)}; "
            "compute in float64 (.double())"
            if said_to == SNIPPET
            else f"try {option(said_to, 'dtype', 'float64')}",
            "yellow",
        )
    return t


def check_rows(checks: Iterable[Check], said_to: str = CLI, brief: bool = False) -> ValueGrid:
    """The checks as a grid, one row each: name, verdict, and check_detail (options named for `said_to`)."""
    t = ValueGrid(("bold", "", ""))
    for c in checks:
        t.add_row(Text(c.name), Text(c.status, style=STATUS_STYLE.get(c.status, "")), check_detail(c, said_to, brief))
    return t


def verdict_line(checks: Sequence[Check], after: str = "") -> Text:
    """The verdict in one line: only independent routes count as evidence (verdicts.headline)."""
    return Text(headline(checks) + after, style="bold")


def checks_section(
    checks: Sequence[Check], said_to: str = CLI, brief: bool = False, after: str = "", counted: Sequence[Check] = ()
) -> Group:
    """The checks' heading, their rows and the verdict line: a call's checks, in every view. `counted` are routes
    shown elsewhere (--code's script, under its code) that the verdict line counts too."""
    return Group(
        Text("checks", style="bold underline"),
        check_rows(checks, said_to, brief),
        verdict_line([*checks, *counted], after),
    )


__all__ = ["STATUS_STYLE", "check_detail", "check_rows", "checks_section", "tolerance_text", "verdict_line"]
