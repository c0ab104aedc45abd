"""`vjp live`'s code view (issue 40): the call's backward script stepped node by node, with each node's
cotangent in and out. The numbers are checked against the seed example's hand-derived chain rule
(y = 3a + 2b·b + log(c): LogBackward0 sends v/c, b's two MulBackward0 nodes send v·2b·... and b.grad = 4b·v);
the stepping model (live_code.py) is tested alone, the keys through Textual's pilot as test_live.py does.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from test_live import TWO_CALLS, drive, page_text, session
from vjp_explorer.live_code import CodeWalk, NoCode, code_walk

A, B, C = np.array([1.0, 2, 3]), np.array([3.0, 4, 5]), np.array([6.0, 7, 8])
V = np.array([0.1, 1, 0.0001])


@pytest.fixture(autouse=True)
def _no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(scope="module")
def seed_walk() -> CodeWalk:
    s = session()
    return code_walk(s.frame.code, s.frame.call)


def _values(c) -> np.ndarray:
    assert c is not None and c.numel == len(c.values)
    return np.array(c.values)


def test_each_node_autograd_ran_is_one_step_in_its_order(seed_walk):
    names = [s.node for s in seed_walk.steps]
    want = ["AddBackward0"] * 2 + ["MulBackward0"] * 3 + ["LogBackward0"] + ["AccumulateGrad"] * 3
    assert sorted(names) == sorted(want)
    assert names[0] == "AddBackward0"  # v enters at the output's node
    # a node runs only once every path into it has added its part: b's AccumulateGrad after both its products
    muls = [k for k, s in enumerate(seed_walk.steps) if s.node == "MulBackward0"]
    b_acc = next(k for k, s in enumerate(seed_walk.steps) if s.leaf == "b")
    assert sum(k < b_acc for k in muls) >= 2
    for s in seed_walk.steps:  # each step's statements are the node's, commented with its name
        assert s.statements and all(f"# {s.node}" in line or "a second path" in line for line in s.statements)
        assert s.leaf is not None or s.line == 1  # a program's one line made every node


def test_one_step_per_node_the_graph_saw_run():
    """The graph (--graph's probe: its own hooks, its own walk of the nodes) counts the nodes that ran; the code
    view has one step for each, by the same names."""
    s = session()
    walk = code_walk(s.frame.code, s.frame.call)
    ran = sorted(n["name"] for n in s.frame.graph if n["ran"])
    assert sorted(step.node for step in walk.steps) == ran and len(ran) == 9


def test_the_cotangents_in_and_out_are_the_chain_rules(seed_walk):
    steps = seed_walk.steps
    np.testing.assert_allclose(_values(steps[0].received), V, rtol=1e-6)  # v itself enters
    log = next(s for s in steps if s.node == "LogBackward0")
    np.testing.assert_allclose(_values(log.received), V, rtol=1e-6)
    (to_c,) = log.sent
    assert to_c.to == "c.grad"
    np.testing.assert_allclose(_values(to_c.cotangent), V / C, rtol=1e-6)  # d log(c)/dc = 1/c
    leaves = {s.leaf: _values(s.received) for s in steps if s.leaf is not None}
    np.testing.assert_allclose(leaves["a"], 3 * V, rtol=1e-6)
    np.testing.assert_allclose(leaves["b"], 4 * B * V, rtol=1e-6)  # both paths through b·b, added
    np.testing.assert_allclose(leaves["c"], V / C, rtol=1e-6)


def test_stepping_stays_within_the_pass(seed_walk):
    last = len(seed_walk.steps) - 1
    assert seed_walk.at == 0 and seed_walk.go(-1).at == 0
    assert seed_walk.go(3).step is seed_walk.steps[3]
    assert seed_walk.go(last + 5).at == last


def test_the_steps_are_the_scripts_statements(tmp_path):
    """The view shows what `--code DIR` writes: every commented statement of call1.py, each in one step."""
    from vjp_explorer.backward_code.files import for_program

    s = session()
    walk = code_walk(s.frame.code, 1)
    result = s.result
    for_program(result, tmp_path)
    text = (tmp_path / "call1.py").read_text()
    node_line = re.compile(r"  # (\w+Backward\d|AccumulateGrad|a second)")
    written = [_squash(line) for line in text.splitlines() if node_line.search(line)]
    shown = [_squash(line) for step in walk.steps for line in step.statements]
    assert shown == written


def _squash(line: str) -> str:
    return re.sub(r"\s+#", " #", line.strip())


def test_a_big_cotangent_keeps_its_first_values_shape_and_norm():
    import torch

    from vjp_explorer.engine.backward_capture import STEP_VALUES, CodeCapture

    x = torch.arange(200.0, requires_grad=True)
    y = (x * 2).sum()
    cap = CodeCapture([y], [torch.tensor(1.0)], [x], ["x"], lambda n: {}, lambda t: None)
    cap.start()
    y.backward()
    cap.stop()
    walk = code_walk(cap.payload(), 1)
    mul = next(s for s in walk.steps if s.node == "MulBackward0")
    (sent,) = mul.sent
    c = sent.cotangent
    assert c is not None and c.shape == (200,) and c.numel == 200 and len(c.values) == STEP_VALUES
    assert set(c.values) == {2.0} and c.norm == pytest.approx(2 * 200**0.5)


def test_a_call_without_a_capture_or_with_a_forged_one_says_why():
    with pytest.raises(NoCode, match="its tensors hold"):
        code_walk({"skipped": "its tensors hold 9 bytes"}, 1)
    with pytest.raises(NoCode, match="not captured"):
        code_walk(None, 1)
    with pytest.raises(NoCode, match="could not be read"):
        code_walk({"record": {"nodes": "no"}}, 1)
    s = session()
    payload = dict(s.frame.code)
    payload["steps"] = {"0": {"in": {"shape": [3], "norm": 1.0, "values": ["x"], "numel": 3}, "out": "no"}}
    walk = code_walk(payload, 1)
    assert walk.steps[0].received is None and all(e.cotangent is None for e in walk.steps[0].sent)


def test_n_opens_the_code_view_and_steps_node_by_node():
    from vjp_explorer.render.live_app import CodeScreen, LiveApp

    pages = []

    async def script(pilot):
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(pilot.app.screen, CodeScreen)
        pages.append(page_text(pilot.app))
        await pilot.press("n", "n")
        await pilot.pause()
        pages.append(page_text(pilot.app))
        await pilot.press("p")
        await pilot.pause()
        pages.append(page_text(pilot.app))
        await pilot.press("escape")
        await pilot.pause()
        pages.append(type(pilot.app.screen).__name__)

    drive(LiveApp(session()), (100, 30), script)
    first, third, second, after = pages
    assert "call1.py  ·  node 1 of 9: AddBackward0" in first and "made by line 1: 3*a+2*b*b+log(c)" in first
    assert re.search(r"receives\s+\[0\.1, 1, 0\.0001\]", first)
    assert "grad_y" in first and "under this v" in first
    assert "node 3 of 9: AccumulateGrad" in third
    assert re.search(r"adds\s+→ c\.grad\s+\[0\.0166667, 0\.142857, 1\.25e-05\]", third)  # v/c
    assert "node 2 of 9: LogBackward0" in second and "grad_log1 / c" in second
    assert after != "CodeScreen"


def test_a_snippets_call_steps_through_its_own_lines():
    from vjp_explorer.live_snippet import SnippetSession
    from vjp_explorer.render.live_app import LiveApp
    from vjp_explorer.snippet import run_snippet

    pages = []

    async def script(pilot):
        await pilot.press("down")  # the second call: (a * b).sum().backward()
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        pages.append(page_text(pilot.app))
        await pilot.press("end")
        await pilot.pause()
        pages.append(page_text(pilot.app))

    result = run_snippet(TWO_CALLS, "two_calls.py", seed=0, code=True)
    drive(LiveApp(SnippetSession(result, ["two_calls.py"])), (100, 30), script)
    first, last = pages
    assert "call2.py  ·  node 1 of 4: SumBackward0" in first and "line 7: (a * b).sum().backward()" in first
    assert re.search(r"sends\s+→ MulBackward0\s+\[1, 1, 1\]", first) and "recorded call" in first
    assert "node 4 of 4: AccumulateGrad" in last and re.search(r"adds\s+→ b\.grad\s+\[1, 2, 3\]", last)  # = a


def test_a_call_with_no_capture_is_told_not_opened():
    from vjp_explorer.live_snippet import SnippetSession
    from vjp_explorer.render.live_app import LiveApp
    from vjp_explorer.snippet import run_snippet

    seen = {}

    async def script(pilot):
        await pilot.press("n")
        await pilot.pause()
        seen["screen"] = type(pilot.app.screen).__name__
        seen["notes"] = [str(n.message) for n in pilot.app._notifications]

    result = run_snippet(TWO_CALLS, "two_calls.py", seed=0)  # without code: nothing captured
    drive(LiveApp(SnippetSession(result, ["two_calls.py"])), (100, 30), script)
    assert seen["screen"] != "CodeScreen" and any("not captured" in n for n in seen["notes"])


def test_past_the_budget_no_values_travel_and_the_view_says_so(monkeypatch):
    import torch

    from vjp_explorer.engine import backward_capture
    from vjp_explorer.render.live_code_view import code_page

    monkeypatch.setattr(backward_capture, "STEP_BUDGET", 5)  # the seed's 9 nodes send more than 5 values
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    cap = backward_capture.CodeCapture([y], [torch.tensor(1.0)], [x], ["x"], lambda n: {}, lambda t: None)
    cap.start()
    y.backward()
    cap.stop()
    payload = cap.payload()
    assert payload["steps"] == {}
    walk = code_walk(payload, 1)
    assert all(s.received is None for s in walk.steps)
    assert "not recorded" in page_text_of(code_page(walk, "note"))


def page_text_of(renderable) -> str:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(renderable)
    return console.file.getvalue()
