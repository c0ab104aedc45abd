"""Result (with .explanation) -> the `vjp explain` screen."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..result import Result
from . import text as T
from .numbers import fmt

MAX_TERMS = 8


def _section(title: str) -> Text:
    return Text(title, style="bold underline")


def render_explain(r: Result, view: T.View) -> RenderableType:
    """The five parts: cast and shapes, symbolic Jacobian, ledger, agreement, notes."""
    ex = r.explanation
    parts: list[RenderableType] = []
    title = r.meta.get("title")
    if title:
        parts += [Text(title, style="bold"), Text("")]
    parts += [T.header(r, view), Text("")]

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
        if f.generic:
            parts.append(Text("    " + f.generic))
        elif f.entries and f.entries[0]["formula"] is not None:
            shown = f.entries if view.full else f.entries[: view.max_rows // 2]
            for e in shown:
                parts.append(Text(f"    ∂{e['y']}/∂{e['x']} = {_clip(e['formula'], view)}"))
            if len(shown) < len(f.entries):
                parts.append(Text(f"    ... {len(f.entries) - len(shown)} more non-zero entries (--full)"))
    parts.append(Text(""))

    parts.append(_section(f"3. the ledger: each grad element, term by term ({_source(ex.ledger_source)})"))
    for leaf, entries in ex.ledger.items():
        parts.append(_ledger_table(r, leaf, entries, view))
    parts.append(Text(""))

    parts.append(_section("4. three routes, one answer"))
    parts += [T.check_line(c) for c in r.checks.values()]
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


def _ledger_table(r: Result, leaf: str, entries: list, view: T.View) -> RenderableType:
    out = r.output_name
    d = view.digits
    t = Table(show_edge=False, header_style="bold", pad_edge=False)
    t.add_column(Text(f"{leaf}[j].grad"))
    t.add_column(Text(f"= Σᵢ v[i] · ∂{out}[i]/∂{leaf}[j]   (the terms; ★ marks the largest)"))
    t.add_column(Text("Σ terms (exact)"), justify="right")
    t.add_column(Text(".grad (backward)"), justify="right")
    idx = view.rows(len(entries))
    mult = f"{r.backward_calls} × " if r.backward_calls > 1 else ""
    for k in idx:
        if k is None:
            t.add_row("...", "", "", "")
            continue
        e = entries[k]
        lines = []
        for term in e.terms[: (None if view.full else MAX_TERMS)]:
            star = " ★" if e.dominant == term.i and len(e.terms) > 1 else ""
            v_i = fmt(term.v_i, d)
            step = ""
            if term.formula and term.formula != fmt(term.dy_dx, d):
                step = f" = {mult}{v_i} × {_clip(term.formula, view, 40)}"
            lines.append(
                f"{mult}v[{term.i}]·∂{term.y}/∂{e.element}{step} = {mult}{v_i} × {fmt(term.dy_dx, d)}"
                f" = {fmt(term.value, d)}" + (f"  ({term.share:.0%})" if len(e.terms) > 1 else "") + star
            )
        if len(e.terms) > MAX_TERMS and not view.full:
            lines.append(f"... {len(e.terms) - MAX_TERMS} more terms (--full)")
        if e.zero_terms:
            lines.append(f"+ {e.zero_terms} zero term(s) (v[i] = 0 or ∂{out}[i]/∂{e.element} = 0)")
        if not e.terms:
            lines.insert(0, "0")
        t.add_row(Text(e.element), Text("\n".join(lines)), fmt(e.sum, d), fmt(e.grad, d))
    return t
