"""`vjp live`, driven by Textual's own harness (App.run_test and its pilot).

The numbers are checked against hand-derived values of the seed example y = 3a + 2b² + log(c):
∂y[k]/∂a[k] = 3, ∂y[k]/∂b[k] = 4·b[k], ∂y[k]/∂c[k] = 1/c[k], every other entry 0. So row i of J has
3, 4·b[i] and 1/c[i] at column i of each leaf, and x[j].grad = v[j]·∂y[j]/∂x[j].
"""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path

import numpy as np
import pytest

from documents import event
from vjp_explorer.live import ProgramSession, command_line, v_text
from vjp_explorer.request import Request

SEED = "3*a+2*b*b+log(c)"
VALUES = {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}
A, B, C = np.array([1.0, 2, 3]), np.array([3.0, 4, 5]), np.array([6.0, 7, 8])
DIAG = {"a": 3 * np.ones(3), "b": 4 * B, "c": 1 / C}  # the diagonal of each leaf's J, by hand
ARGV = [SEED, "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8"]


@pytest.fixture(autouse=True)
def _no_color(monkeypatch):
    # Textual pops NO_COLOR from the environment when an app starts; conftest's pin is put back after each test
    monkeypatch.setenv("NO_COLOR", "1")


def session(grad: str = "0.1,1,0.0001", **options) -> ProgramSession:
    return ProgramSession(Request(SEED, dict(VALUES), grad=grad, **options), [*ARGV, "--grad", grad])


def screen_text(app) -> str:
    """The characters on the screen, from Textual's own SVG export (Rich's: 12.2 by 24.4 units a cell)."""
    lines: dict[int, dict[int, str]] = {}
    svg = app.export_screenshot()
    for x, y, text in re.findall(r'<text[^>]*?x="([\d.]+)" y="([\d.]+)"[^>]*clip-path[^>]*>(.*?)</text>', svg):
        row, col = round((float(y) - 20) / 24.4), round(float(x) / 12.2)
        for k, ch in enumerate(html.unescape(text).replace("\xa0", " ")):
            lines.setdefault(row, {})[col + k] = ch
    out = []
    for row in range(max(lines) + 1 if lines else 0):
        cells = lines.get(row, {})
        out.append("".join(cells.get(c, " ") for c in range(max(cells) + 1 if cells else 0)).rstrip())
    return "\n".join(out)


def page_text(app) -> str:
    """The text of a pushed page (graph, keys): its renderable, rendered at 120 columns."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(app.screen.renderable)
    return console.file.getvalue()


def drive(app, size, script):
    """Run `script(pilot)` in the app at this terminal size; background runs are waited for after each key."""

    async def main():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())
    return app


async def settle(pilot):
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def grads(app) -> dict[str, np.ndarray]:
    return {lf.name: lf.grad for lf in app.session.frame.leaves}


def test_b_steps_v_through_the_rows_of_j():
    from vjp_explorer.render.live_app import LiveApp

    seen = []

    async def script(pilot):
        for _ in range(3):
            await pilot.press("b")
            quick = {lf.name: lf.jtv.copy() for lf in pilot.app.session.frame.leaves}  # from J, before backward
            await settle(pilot)
            f = pilot.app.session.frame
            seen.append((f.v.copy(), quick, grads(pilot.app), f.grad_from, screen_text(pilot.app)))

    drive(LiveApp(session()), (80, 24), script)
    for i, (v, quick, real, source, shown) in enumerate(seen):
        assert v.tolist() == [float(k == i) for k in range(3)]
        for leaf, diag in DIAG.items():
            row = np.where(np.arange(3) == i, diag, 0.0)  # row i of this leaf's J, by hand
            np.testing.assert_allclose(quick[leaf], row, rtol=1e-6)  # Jᵀv from J
            np.testing.assert_allclose(real[leaf], row, rtol=1e-6)  # then backward(v)'s .grad
        assert source == "backward"
        assert f"v = e{i}: Jᵀv is row y[{i}] of J" in shown
        assert f"▶ y[{i}]" in shown


def test_typed_v_moves_grad_jtv_and_the_ledger():
    from vjp_explorer.render.live_app import LiveApp

    out = {}

    async def script(pilot):
        await pilot.press("v")
        pilot.app.query_one("#v").value = ""
        await pilot.press(*"0.1,1,0.0001", "enter")
        out["quick"] = {lf.name: lf.jtv.copy() for lf in pilot.app.session.frame.leaves}
        await settle(pilot)
        await pilot.press("right", "down")  # leaf b, element 1
        out["text"] = screen_text(pilot.app)
        out["grads"] = grads(pilot.app)

    app = drive(LiveApp(session("ones")), (100, 40), script)
    v = np.array([0.1, 1, 0.0001])
    for leaf, diag in DIAG.items():
        np.testing.assert_allclose(out["quick"][leaf], v * diag, rtol=1e-6)
        np.testing.assert_allclose(out["grads"][leaf], v * diag, rtol=1e-6)
    assert app.selected == ("b", 1)
    text = out["text"]
    assert "b[1].grad = Σᵢ v[i]·∂y[i]/∂b[1]" in text
    assert "v[1]·∂y[1]/∂b[1] = 1 × 4*b[1] = 1 × 16 = 16" in text  # sympy's formula, b[1] = 4
    assert "Σ = 16; 2 zero term(s) left out" in text
    assert "(exact derivatives from sympy)" in text


def test_the_seed_numbers_on_the_main_screen_at_80x24_and_160x48():
    from vjp_explorer.render.live_app import LiveApp

    shown = {}

    async def script(pilot):
        shown[pilot.app.size] = screen_text(pilot.app)

    for size in ((80, 24), (160, 48)):
        drive(LiveApp(session()), size, script)
    small, big = shown.values()
    for text in (small, big):
        assert "3*a+2*b*b+log(c)" in text and "y shape [3]" in text and "float32" in text
        assert re.search(r"v = +0.1, 1, 0.0001 +given", text)
        assert "J = ∂y/∂x, rows y[i], columns x[j]" in text
        for number in ("0.3", "3", "0.0003", "1.2", "16", "0.002"):  # a.grad and b.grad of the seed
            assert re.search(rf"\s{re.escape(number)}\s", text), number
        assert "ledger  a[0].grad" in text
        # the one verdict line of every view stays on screen at 80x24 too
        assert "2 independent routes agree (sympy, finite differences) · with this v" in text
    # the big screen has room for all of it: c's grads and every check with the verdict
    for number in ("0.0166667", "0.142857", "1.25e-05"):
        assert number in big
    assert "finite_difference agree" in re.sub(" +", " ", big)
    assert "2 independent routes agree (sympy, finite differences)" in big
    assert small.count("\n") <= 24 and max(map(len, small.splitlines())) <= 80


def test_the_graph_shows_the_cotangents_under_the_current_v():
    from vjp_explorer.render.live_app import LiveApp, TextScreen

    pages = []

    async def script(pilot):
        await pilot.press("g")
        pages.append(page_text(pilot.app))
        assert isinstance(pilot.app.screen, TextScreen)
        await pilot.press("escape", "b")
        await settle(pilot)
        await pilot.press("g")
        pages.append(page_text(pilot.app))
        await pilot.press("escape")

    drive(LiveApp(session()), (80, 24), script)
    first, second = pages
    assert "AddBackward0" in first and "receives [0.1, 1, 0.0001]" in first
    assert "receives [1, 0, 0]" in second  # v = e0, run again with it
    assert "AccumulateGrad → b.grad" in second and "under this v" in second


def test_ones_random_and_an_upstream_loss():
    from vjp_explorer.render.live_app import LiveApp

    vs = []

    async def script(pilot):
        await pilot.press("1")
        vs.append(pilot.app.session.frame.v.copy())
        await pilot.press("r")
        vs.append((pilot.app.session.frame.v.copy(), pilot.app.session.frame.v_label))
        await settle(pilot)
        await pilot.press("u", *"sum(y**2)", "enter")
        await settle(pilot)
        await settle(pilot)
        vs.append((pilot.app.session.frame.v.copy(), grads(pilot.app)))

    drive(LiveApp(session(), seed=0), (80, 24), script)
    assert vs[0].tolist() == [1.0, 1.0, 1.0]
    random, label = vs[1]
    assert label == "random (numpy, seed 1)"
    np.testing.assert_array_equal(random, np.random.default_rng(1).standard_normal(3))
    v, g = vs[2]
    y = 3 * A + 2 * B * B + np.log(C)
    np.testing.assert_allclose(v, 2 * y, rtol=1e-6)  # dL/dy of sum(y**2)
    np.testing.assert_allclose(g["b"], 2 * y * 4 * B, rtol=1e-5)


def test_a_bad_v_is_refused_and_v_stays():
    from vjp_explorer.render.live_app import LiveApp

    notes = []

    async def script(pilot):
        await pilot.press("v")
        pilot.app.query_one("#v").value = ""
        await pilot.press(*"1,2", "enter")
        notes.extend(n.message for n in pilot.app._notifications)

    app = drive(LiveApp(session()), (80, 24), script)
    assert app.session.frame.v.tolist() == pytest.approx([0.1, 1, 0.0001])
    assert any("v has 2 number(s) but the output y has 3" in n for n in notes), notes


def test_c_prints_the_run_command_of_the_current_state():
    from vjp_explorer.render.live_app import LiveApp

    async def script(pilot):
        await pilot.press("b", "b")
        await settle(pilot)
        await pilot.press("c")

    app = drive(LiveApp(session()), (80, 24), script)
    assert app.return_value == "vjp run '3*a+2*b*b+log(c)' --a 1,2,3 --b 3,4,5 --c 6,7,8 --grad 0,1,0"


def test_without_j_each_v_runs_backward():
    from vjp_explorer.limits import DEFAULT_LIMITS
    from vjp_explorer.render.live_app import LiveApp

    limits = DEFAULT_LIMITS.with_overrides({"jacobian_entries": "1"})
    s = session(limits=limits, symbolic=False)
    assert all(lf.jacobian is None for lf in s.frame.leaves)
    quick = s.set_v(np.array([0.0, 1.0, 0.0]), "e1")  # no J: the old numbers, marked pending
    assert quick.pending and "J is not materialised" in quick.checks_note
    seen = []

    async def script(pilot):
        await pilot.press("b")
        await settle(pilot)
        seen.append(pilot.app.session.frame)

    drive(LiveApp(s), (80, 24), script)
    (frame,) = seen
    assert not frame.pending and frame.grad_from == "backward"
    real = {lf.name: lf.grad for lf in frame.leaves}
    assert frame.one_hot == 2  # b after e1
    for leaf, diag in DIAG.items():
        np.testing.assert_allclose(real[leaf], np.where(np.arange(3) == 2, diag, 0.0), rtol=1e-6)


def test_no_color_is_respected():
    from vjp_explorer.render.live_app import LiveApp

    app = LiveApp(session())
    assert app.no_color


def test_the_reproducing_command_and_v_text():
    assert v_text(np.array([0.1, 1, 1e-4]), (3,), "float32") == "0.1,1,0.0001"
    assert v_text(np.array([1.0, 2, 3, 4]), (2, 2), "float64") == "[[1,2],[3,4]]"
    s = session()
    argv = ["--file", "f.toml", "--grad=ones", "--upstream", "sum(y)", "--svg", "x.svg", "--graph", "--seed", "3"]
    assert command_line(argv, s.frame) == "vjp run --file f.toml --seed 3 --grad 0.1,1,0.0001"


TWO_CALLS = """import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
c = torch.tensor([6.0, 7.0, 8.0], requires_grad=True)
y = 3*a + 2*b*b + torch.log(c)
y.backward(torch.tensor([0.1, 1.0, 0.0001]), retain_graph=True)
(a * b).sum().backward()
"""


@pytest.fixture(scope="module")
def two_calls():
    from vjp_explorer.snippet import run_snippet

    return run_snippet(TWO_CALLS, "two_calls.py", seed=0, graph=True)


def test_a_snippets_events_are_listed_and_each_reweighed_from_j(two_calls):
    from vjp_explorer.live_snippet import SnippetSession
    from vjp_explorer.render.live_app import LiveApp

    seen = {}

    async def script(pilot):
        seen["list"] = screen_text(pilot.app)
        seen["recorded"] = grads(pilot.app)
        await pilot.press("b")  # the list has the keyboard; b still re-weights the event shown
        f = pilot.app.session.frame
        seen["e0"] = (f.v.copy(), grads(pilot.app), f.checks_note, screen_text(pilot.app))
        await pilot.press("down")  # the second call: (a*b).sum().backward()
        seen["second"] = (pilot.app.session.frame, screen_text(pilot.app))

    drive(LiveApp(SnippetSession(two_calls, ["two_calls.py"])), (100, 30), script)
    assert "#1 line 6" in seen["list"] and "#2 line 7" in seen["list"]
    v = np.array([0.1, 1, 0.0001])
    for leaf, diag in DIAG.items():
        np.testing.assert_allclose(seen["recorded"][leaf], v * diag, rtol=1e-6)  # what the call added
    v0, g0, note, text = seen["e0"]
    assert v0.tolist() == [1.0, 0.0, 0.0]
    for leaf, diag in DIAG.items():
        np.testing.assert_allclose(g0[leaf], np.where(np.arange(3) == 0, diag, 0.0), rtol=1e-6)
    assert "recorded v only" in note and "v = e0: Jᵀv is row y[0] of J" in text
    session = SnippetSession(two_calls, ["two_calls.py"])
    assert session.command_line() == "vjp run two_calls.py"
    session.set_v(np.array([0.0, 1.0, 0.0]), "e1")
    assert session.command_line().splitlines()[1].startswith("# call #1 with v = 0,1,0: write that v")
    second, text = seen["second"]
    assert second.out_shape == () and second.m == 1
    np.testing.assert_allclose(second.leaf("a").grad, B)  # ∂(Σ a·b)/∂a = b
    np.testing.assert_allclose(second.leaf("b").grad, A)


def test_an_event_without_j_is_shown_read_only(two_calls):
    from dataclasses import replace

    from vjp_explorer.live_snippet import NO_J, SnippetSession
    from vjp_explorer.render.live_app import LiveApp

    event = two_calls.events[0]
    blind = replace(event, inputs=[replace(x, jacobian=None) for x in event.inputs])
    result = replace(two_calls, events=[blind])
    notes = []

    async def script(pilot):
        await pilot.press("b")
        notes.extend(n.message for n in pilot.app._notifications)
        notes.append(screen_text(pilot.app))

    app = drive(LiveApp(SnippetSession(result, ["x.py"])), (100, 30), script)
    assert app.session.frame.readonly == NO_J
    assert app.session.frame.v.tolist() == pytest.approx([0.1, 1, 0.0001])
    assert any("re-weighting needs J" in n for n in notes[:-1]), notes
    assert "read-only: re-weighting needs J" in notes[-1]


def test_the_command_line_runs_the_app_and_c_reproduces_its_state(vjp, monkeypatch):
    import json

    from vjp_explorer.cli import live as cli_live
    from vjp_explorer.render.live_app import LiveApp

    async def keys(app):
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("b", "b")
            await settle(pilot)
            await pilot.press("c")
        return app.return_value

    monkeypatch.setattr(cli_live, "on_terminal", lambda: True)
    monkeypatch.setattr(LiveApp, "run", lambda app: asyncio.run(keys(app)))
    r = vjp("live", *ARGV, "--grad", "0.1,1,0.0001")
    assert r.exit_code == 0, r.stderr
    command = r.stdout.strip()
    assert command == "vjp run '3*a+2*b*b+log(c)' --a 1,2,3 --b 3,4,5 --c 6,7,8 --grad 0,1,0"
    import shlex

    again = vjp(*shlex.split(command)[1:], "--json")
    assert again.exit_code == 0
    got = event(json.loads(again.stdout))["grads"]
    for leaf, diag in DIAG.items():  # row 1 of J, as the live view showed it
        np.testing.assert_allclose(got[leaf], np.where(np.arange(3) == 1, diag, 0.0), rtol=1e-6)


@pytest.mark.parametrize(
    "args, words",
    [
        ([*ARGV, "--grad", "ones", "--json"], "--json does not apply to vjp live"),
        ([*ARGV, "--grad", "ones"], "needs a terminal"),
        (["3*a^2", "--a", "1,2", "--grad", "ones"], "'^' is bitwise xor"),
        (["seed000_ex1", "--grad", "ones"], "--grad does not apply to a snippet"),
        ([*ARGV, "--grad", "ones", "--trust"], "--trust applies to a snippet"),
    ],
)
def test_bad_input_is_one_paragraph_and_exit_2(vjp, args, words):
    r = vjp("live", *args)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and words in r.stderr


def test_a_big_j_is_drawn_in_blocks_with_its_nan_marked():
    import io

    from rich.console import Console

    from vjp_explorer.live import Frame, LeafFrame
    from vjp_explorer.render import live_view

    n = 100
    jac = np.diag(np.arange(1.0, n + 1))  # elementwise: the blocks on the diagonal only
    jac[90, 90] = np.nan
    leaf = LeafFrame("x", (n,), np.zeros(n), None, None, jac, "diagonal")
    v = np.zeros(n)
    v[95] = 1.0
    frame = Frame("f(x)", "y", (n,), np.zeros(n), v, "e95", (leaf,), (), "", "J")
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(live_view.jacobian_map(frame, ("x", 3)))
    lines = console.file.getvalue().splitlines()
    rows = [line for line in lines if "│" in line]
    assert len(rows) == -(-n // 9) == 12  # 9 x 9 entries a cell: 100 rows in 12
    assert rows[10].startswith("▶") and "!!" in rows[10]  # the nan's block (rows 90-98), the row e95 picks
    assert rows[0].count("·") == 2 * 11 and "█" in rows[-1]  # 11 off-diagonal blocks, 0 exactly: shown as ·
    grid, bm, bn = live_view._blocks(jac, n, n, 12, 36)
    assert live_view._blocks(jac, n, n, 12, 36)[0] is grid  # the same J: its map is reused
    assert live_view._blocks(jac.copy(), n, n, 12, 36)[0] is not grid


def test_s_saves_the_screen_as_svg_and_the_keys_page_opens(tmp_path, monkeypatch):
    from vjp_explorer.render.live_app import LiveApp

    monkeypatch.chdir(tmp_path)
    pages = []

    async def script(pilot):
        await pilot.press("s", "s")  # a second save keeps the first
        await pilot.press("question_mark")
        pages.append(page_text(pilot.app))
        await pilot.press("escape")

    drive(LiveApp(session()), (80, 24), script)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vjp-live-1.svg", "vjp-live.svg"]
    svg = (tmp_path / "vjp-live.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "ledger" in html.unescape(svg).replace("\xa0", " ")
    assert re.search(r"b +v = e0, e1, \.\.\.: one row of J at a time", pages[0])
    assert re.search(r"c +quit and print the vjp run command", pages[0])


def test_an_expression_file_opens_and_c_names_it(vjp, monkeypatch):
    from vjp_explorer.cli import live as cli_live
    from vjp_explorer.render.live_app import LiveApp

    async def keys(app):
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("b")
            await settle(pilot)
            await pilot.press("c")
        return app.return_value

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # the file, named as a user in the clone names it
    monkeypatch.setattr(cli_live, "on_terminal", lambda: True)
    monkeypatch.setattr(LiveApp, "run", lambda app: asyncio.run(keys(app)))
    r = vjp("live", "--file", "expressions/seed_3vector.toml")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "vjp run --file expressions/seed_3vector.toml --grad 1,0,0"


def test_backward_calls_accumulate_in_the_quick_answer_as_in_the_real_one():
    from vjp_explorer.render.live_app import LiveApp

    seen = []

    async def script(pilot):
        await pilot.press("b")
        seen.append({lf.name: (lf.grad.copy(), lf.jtv.copy()) for lf in pilot.app.session.frame.leaves})
        await settle(pilot)
        seen.append({lf.name: (lf.grad.copy(), lf.jtv.copy()) for lf in pilot.app.session.frame.leaves})
        await pilot.press("right", "down")
        seen.append(screen_text(pilot.app))

    drive(LiveApp(session(backward_calls=2)), (100, 40), script)
    quick, real, text = seen
    for leaf, diag in DIAG.items():
        row = 2 * np.where(np.arange(3) == 0, diag, 0.0)  # two calls: .grad holds 2 x row 0 of J
        for grad, jtv in (quick[leaf], real[leaf]):
            np.testing.assert_allclose(grad, row, rtol=1e-6)
            np.testing.assert_allclose(jtv, row, rtol=1e-6)
    assert "2 calls: 2× one call" in text
    assert "Σ = 0; 3 zero term(s) left out" in text  # b[1] under e0: no term


def test_color_never_makes_the_view_monochrome(vjp, monkeypatch):
    from vjp_explorer.cli import live as cli_live
    from vjp_explorer.render.live_app import LiveApp

    monkeypatch.delenv("NO_COLOR")
    seen = []

    async def keys(app):
        seen.append(app.no_color)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("q")

    monkeypatch.setattr(cli_live, "on_terminal", lambda: True)
    monkeypatch.setattr(LiveApp, "run", lambda app: asyncio.run(keys(app)))
    assert vjp("live", *ARGV, "--grad", "ones", "--color", "never").exit_code == 0
    assert seen == [True]
