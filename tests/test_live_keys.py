"""`vjp live`'s help as Textual apps give it (issue 42): F1 and ? show the keys, Ctrl-C quits, vjp's own
actions are in the command palette; a second-order call says why it has no J; the ledger's names read right.
Driven by Textual's own pilot (the real terminal is tests/test_live_terminal.py)."""

from __future__ import annotations

import numpy as np
import pytest

from test_live import ARGV, SEED, VALUES, drive, page_text, screen_text, settle
from vjp_explorer.live import ProgramSession
from vjp_explorer.request import Request

SECOND_ORDER = """\
import torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x ** 3
dy, = torch.autograd.grad(y.sum(), x, create_graph=True)
d2, = torch.autograd.grad(dy.sum(), x)
"""


@pytest.fixture(autouse=True)
def _no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # Textual pops it when an app starts


def program_app():
    from vjp_explorer.render.live_app import LiveApp

    return LiveApp(ProgramSession(Request(SEED, dict(VALUES), grad="0.1,1,0.0001"), list(ARGV)))


@pytest.mark.parametrize("key", ["f1", "question_mark"])
def test_f1_and_question_mark_show_the_keys(key):
    seen = {}

    async def script(pilot):
        await pilot.press(key)
        await pilot.pause()
        seen["page"] = page_text(pilot.app)
        await pilot.press(key)  # the same key closes it
        await pilot.pause()
        seen["after"] = type(pilot.app.screen).__name__

    drive(program_app(), (80, 24), script)
    assert "keys" in seen["page"] and "ctrl+c" in seen["page"] and "F1" in seen["page"], seen["page"]
    assert seen["after"] != "TextScreen"


@pytest.mark.parametrize("where", ["main", "keys page", "typing v"])
def test_ctrl_c_quits_from_anywhere(where):
    async def script(pilot):
        if where == "keys page":
            await pilot.press("question_mark")
        elif where == "typing v":
            await pilot.press("v")
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()

    app = drive(program_app(), (80, 24), script)
    assert app.return_code == 0  # the app exited (None when it did not: Textual's "press ctrl+q" hint)
    assert app.return_value is None  # as q: no command line printed


def test_the_command_palette_holds_vjps_own_actions():
    seen = {}

    async def script(pilot):
        titles = [c.title for c in pilot.app.get_system_commands(pilot.app.screen)]
        seen["titles"] = titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "all ones":
            await pilot.press("space" if ch == " " else ch)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        seen["v"] = pilot.app.session.frame.v.tolist()
        seen["screen"] = screen_text(pilot.app)

    drive(program_app(), (120, 40), script)
    assert seen["titles"][0].startswith("v = e0") and any("all ones" in t for t in seen["titles"])
    assert any(t == "Quit the application" or "Quit" in t for t in seen["titles"])  # Textual's own stay
    assert seen["v"] == [1.0, 1.0, 1.0], seen["screen"]  # chosen from the palette, applied as `1` would
    assert "ones" in seen["screen"]


def test_footer_keeps_keys_and_quit_at_80_columns():
    seen = {}

    async def script(pilot):
        seen["screen"] = screen_text(pilot.app)

    drive(program_app(), (80, 24), script)
    footer = seen["screen"].splitlines()[-1]
    assert "? keys" in footer and "q quit" in footer, footer


@pytest.fixture(scope="module")
def second_order():
    from vjp_explorer.snippet import run_snippet

    return run_snippet(SECOND_ORDER, "second.py", seed=0)


def test_a_second_order_call_gets_its_j_from_the_replay(second_order):
    from vjp_explorer.live_snippet import SnippetSession
    from vjp_explorer.render.live_app import LiveApp

    seen = {}

    async def script(pilot):
        await pilot.press("down")  # the second event: autograd.grad(dy.sum(), x)
        await pilot.pause()
        seen["screen"] = screen_text(pilot.app)

    app = drive(LiveApp(SnippetSession(second_order, ["second.py"])), (120, 40), script)
    frame = app.session.frame
    # the replay now recomputes a create_graph gradient from its inputs (issue 38), so this call's J is
    # built: d(Σ dy)/dx with dy = 3x² is 6x, and the call can be re-weighted like any other
    assert frame.title.startswith("#2") and frame.readonly is None, frame.readonly
    np.testing.assert_allclose(frame.leaf("x").jacobian.reshape(-1), 6 * np.array([1.0, 2.0, 3.0]), rtol=1e-6)
    screen = " ".join(seen["screen"].split())
    assert "too large" not in screen, seen["screen"]
    # what backward left is still shown, as torch computed it: d²(Σx³)/dx² = 6x
    np.testing.assert_allclose(frame.leaf("x").grad, 6 * np.array([1.0, 2.0, 3.0]))


def test_the_ledger_of_a_scalar_output_does_not_index_it(second_order):
    import io

    from rich.console import Console

    from vjp_explorer.live_snippet import event_frame
    from vjp_explorer.render.live_view import ledger_view

    frame = event_frame(second_order.events[0])  # grad(y.sum(), x): one output number
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(ledger_view(frame, "x", 0))
    text = console.file.getvalue()
    assert "y.sum()[i]" not in text and "x[0].grad = v·∂y.sum()/∂x[0]" in text, text
    assert "= 1 × 3 = 3" in text  # ∂(Σx³)/∂x[0] = 3·1² by hand
