"""One renderer of a call's checks (render/checks_view.py): `vjp run`, `vjp explain`, a snippet's events,
`vjp check` and `vjp live` draw the same rows and the same verdict line for the same checks."""

from __future__ import annotations

import io

from rich.console import Console

from vjp_explorer import explore
from vjp_explorer.render.checks_view import check_rows, checks_section, verdict_line
from vjp_explorer.verdicts import Check, Tolerance

SEED = "3*a+2*b*b+log(c)"
VALUES = {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}


def text(renderable, width: int = 100) -> str:
    """What the terminal shows, its runs of spaces and line breaks folded (a grid pads and wraps its cells)."""
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(renderable)
    return " ".join(console.file.getvalue().split())


def test_a_row_says_name_verdict_kind_and_what_it_compared():
    checks = [
        Check(
            "finite_difference", "disagree", "grads vs differences", 0.5, 0.25, Tolerance(1e-4, 1e-7), worst="x[1,2]"
        ),
        Check("jtv", "skipped", "grads vs Jᵀv", reason="J past its budget"),
    ]
    shown = text(checks_section(checks))
    assert shown.startswith("checks finite_difference disagree independent: grads vs differences")
    assert "max |Δ| = 0.5, max rel = 0.25; tolerance |Δ| <= 1e-07 + 0.0001·max(|exact|, Σ|terms|)" in shown
    assert "fails the tolerance most at x[1,2]" in shown
    assert "jtv skipped consistency: grads vs Jᵀv: skipped, J past its budget" in shown
    assert shown.endswith("J past its budget finite_difference disagrees")
    brief = text(check_rows(checks, brief=True))
    assert "independent; max |Δ| = 0.5 fails" in brief and "tolerance |" not in brief


def test_run_and_explain_show_the_shared_rows_and_verdict():
    from vjp_explorer.render import explain_view
    from vjp_explorer.render import text as T

    r = explore(SEED, VALUES, grad="0.1,1,0.0001")
    rows = text(check_rows(r.checks.values()))
    line = text(verdict_line(list(r.checks.values())))
    assert line == "2 independent routes agree (sympy, finite differences)"
    run = text(T.render_run(r, T.View()))
    assert rows in run and line in run
    r = explore(SEED, VALUES, grad="0.1,1,0.0001", explain=True)
    shown = text(explain_view.render_explain(r, T.View()))
    assert text(check_rows(r.checks.values())) in shown and line in shown


def test_a_snippet_event_and_live_show_the_shared_rows():
    from vjp_explorer.api import Request
    from vjp_explorer.live import ProgramSession
    from vjp_explorer.render import live_view, snippet_view
    from vjp_explorer.snippet import run_snippet

    r = run_snippet("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n(x * x).sum().backward()\n")
    (event,) = r.events
    shown = text(snippet_view.render(r), width=120)
    assert text(check_rows(event.checks, brief=True), width=113) + " " + text(verdict_line(event.checks)) in shown
    frame = ProgramSession(Request(SEED, dict(VALUES), grad="ones"), ["vjp", "live"]).frame
    live = text(live_view.checks_view(frame))
    assert text(check_rows(frame.checks, brief=True)) in live
