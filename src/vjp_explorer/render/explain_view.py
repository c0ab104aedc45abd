"""Result (with .explanation) -> the `vjp explain` screen."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..language.unicode import visible
from ..result import Result
from . import text as T
from .checks_view import check_rows, verdict_line
from .numbers import fmt

MAX_TERMS = 8


def _section(title: str) -> Text:
    return Text(title, style="bold underline")


def render_explain(r: Result, view: T.View) -> RenderableType:
    """The five parts: cast and shapes, symbolic Jacobian, ledger, agreement, notes."""
    ex = r.explanation
    parts: list[RenderableType] = []
    title = r.meta.get("title")
    # the file's own words: escapes, bidi overrides and the like are shown, never sent to the terminal
    if title:
        parts.append(Text(visible(title), style="bold"))
    if r.meta.get("description"):
        parts.append(Text(visible(" ".join(r.meta["description"].split()))))
    if r.meta.get("source_note"):
        parts.append(Text("source: " + visible(r.meta["source_note"]), style="dim"))
    if title or r.meta.get("description"):
        parts.append(Text(""))
    parts += [T.header(r, view), Text("")]
    probe = T.probe_section(r, view)
    if probe is not None:
        parts += [probe, Text("")]

    parts.append(_section("1. who is who"))
    cast = Table.grid(padding=(0, 2))
    for c in ex.cast:
        cast.add_row(
            Text(c["name"], style="bold"), Text("shape [" + ", ".join(map(str, c["shape"])) + "]"), Text(c["role"])
        )
    parts += [cast, Text(ex.summary), Text("")]

    parts.append(_section("2. the Jacobian, symbolically"))
    if not ex.formulas:
        parts.append(Text(f"  not available: {ex.ledger_source}"))
    for leaf, f in ex.formulas.items():
        parts.append(Text.assemble(("  " + leaf + ": ", "bold cyan"), f.description))
        if f.numerical_cause:
            parts.append(Text(f"    why 0 here: {f.numerical_cause}", style="yellow"))
        if f.generic:
            parts.append(Text("    " + f.generic))
        elif f.entries and f.entries[0]["formula"] is not None:
            shown = f.entries if view.full else f.entries[:8]
            for e in shown:
                parts.append(Text(f"    ∂{e['y']}/∂{e['x']} = {_clip(e['formula'], view)}"))
            if len(shown) < len(f.entries):
                more = f"{len(f.entries) - len(shown)} more non-zero entries"
                parts.append(Text(f"    ... {more} ({T.all_of_them(r, 'r.explanation')})"))
    parts.append(Text(""))

    parts.append(_section(f"3. the ledger: each grad element, term by term ({_source(ex.ledger_source)})"))
    for leaf, entries in ex.ledger.items():
        parts.append(_ledger_table(r, leaf, entries, view))
    parts.append(Text(""))

    graph = T.graph_section(r)
    if graph is not None:
        parts += [graph, Text("")]
    parts.append(_section("4. every route, one answer"))
    parts += [check_rows(r.checks.values(), T.surface(r)), verdict_line(list(r.checks.values()))]
    note_items = T.notes(r)
    if note_items:
        parts += [Text(""), _section("5. notes"), *note_items[1:]]
    return Group(*parts)


def _source(s: str) -> str:
    return {"sympy": "exact derivatives from sympy", "autodiff": "derivatives from the autodiff Jacobian"}.get(s, s)


def _clip(s: str | None, view: T.View, width: int = 90) -> str:
    if s is None:
        return "?"
    return s if view.full or len(s) <= width else s[: width - 3] + "..."


def _term_text(r: Result, e, term, view: T.View) -> str:
    d = view.digits
    mult = f"{r.backward_calls} × " if r.backward_calls > 1 else ""
    v_i = fmt(term.v_i, d)
    step = ""
    if term.formula and term.formula != fmt(term.dy_dx, d):
        f = _clip(term.formula, view, 60)
        step = f" = {mult}{v_i} × {f}"
    text = f"{mult}v[{term.i}]·∂{term.y}/∂{e.element}{step} = {mult}{v_i} × {fmt(term.dy_dx, d)} = {fmt(term.value, d)}"
    if not math.isfinite(term.dy_dx):
        text += "   ← this derivative is infinite or undefined here"
    return text


def _ledger_table(r: Result, leaf: str, entries: list, view: T.View) -> RenderableType:
    """x[j].grad = its terms, one per line; one-term sums on one line; zero terms counted."""
    d = view.digits
    lines: list[Text] = []
    rows = view.rows(len(entries)) if view.full else view.rows(len(entries))[: max(8, 30 // max(1, len(r.leaves)))]
    for k in rows:
        if k is None:
            lines.append(Text("  ..."))
            continue
        e = entries[k]
        pad = " " * (len(e.element) + 10)
        tail = f"backward gave {fmt(e.grad, d)}"
        if e.zero_terms:
            tail += f"; {e.zero_terms} zero term(s) left out"
        if not e.terms:
            lines.append(Text(f"  {e.element}.grad = 0"))
        elif len(e.terms) == 1:
            lines.append(Text(f"  {e.element}.grad = {_term_text(r, e, e.terms[0], view)}"))
        else:
            lines.append(Text(f"  {e.element}.grad = Σ of {len(e.terms)} terms = {fmt(e.sum, d)}"))
            if view.full or len(e.terms) <= MAX_TERMS:
                shown = e.terms
            else:  # the largest terms (the ★ among them), in order of i
                top = sorted(e.terms, key=lambda t: -abs(t.value) if math.isfinite(t.value) else -math.inf)
                shown = sorted(top[:MAX_TERMS], key=lambda t: t.i)
            for term in shown:
                star = "★" if e.dominant == term.i else " "
                lines.append(Text(f"{pad[:-2]}{star} {_term_text(r, e, term, view)}   ({term.share:.0%})"))
            if len(shown) < len(e.terms):
                lines.append(
                    Text(f"{pad}... {len(e.terms) - len(shown)} more terms ({T.all_of_them(r, 'r.explanation')})")
                )
        lines.append(Text(pad + tail, style="dim"))
    return Group(*lines)
