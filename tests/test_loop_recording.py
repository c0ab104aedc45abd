"""Recording costs nothing where nothing is checked: the forward log runs only before a checked call.

At each backward call the observer decides whether the next call from that line is checked (the first
three calls of a line, then every 10th, then every 100th); the log's dispatch mode is on the stack only
for the forwards that lead to such a call. The snippet reads the dispatch stack's depth itself.
"""

from __future__ import annotations

import ast

import pytest

from test_confined_observe import checks, observe

LOOP = """
import torch
torch.manual_seed(0)
w = torch.randn(5, requires_grad=True)
x = torch.randn(5)
modes = []
for step in range(30):
    modes.append(torch._C._len_torch_dispatch_stack())
    loss = (w * x).tanh().sum()
    loss.backward()
"""


def test_the_log_is_on_the_stack_only_for_forwards_of_checked_calls():
    events, ns = observe(LOOP)
    checked = [e["index"] for e in events if checks(e).get("finite_difference") == "agree"]
    assert checked == [1, 2, 3, 13, 23]
    assert [k + 1 for k, on in enumerate(ns["modes"]) if on] == checked  # call k+1's forward ran under the log
    skipped = [checks(e)["finite_difference"] for e in events if e["index"] not in checked]
    assert set(skipped) == {"skipped"}
    assert ns["w"].grad.tolist() == pytest.approx((30 * x_tanh_grad(ns)).tolist(), rel=1e-5)  # each ran once


def x_tanh_grad(ns: dict):
    w, x = ns["w"].detach(), ns["x"]
    return x * (1 - (w * x).tanh() ** 2)


def test_a_line_first_seen_while_the_log_is_off_says_why_it_is_not_checked():
    src = LOOP.replace(
        "    loss.backward()", "    loss.backward()\n    if step == 7:\n        (w * 2).sum().backward()"
    )
    events, _ = observe(src)
    late = next(e for e in events if "(w * 2)" in e["source"])
    (check,) = [c for c in late["checks"] if c["name"] == "finite_difference"]
    assert check["status"] == "skipped" and "log was off" in check["reason"]


def test_which_statements_may_reach_a_backward_call():
    import ast

    from vjp_explorer.confined.observe_parts import Statements

    s = Statements()

    def may(src: str) -> bool:
        return s.may_backward(ast.parse(src).body[0])

    assert may("y = model(x)")  # not a loop: cheap to log, its backward may come in the next statement
    assert not may("for i in range(9):\n    preds.append(model(x))")  # an evaluation loop
    assert may("for i in range(9):\n    loss(x).backward()")
    assert not may("def step(x):\n    return inner(x)")  # a definition runs nothing
    assert not may("for i in range(9):\n    step(x)")
    assert not may("def inner(x):\n    torch.autograd.grad(f(x), x)")
    assert may("for i in range(9):\n    step(x)")  # step calls inner, which takes a gradient
    assert may("[train(b) for b in batches]") is False  # train is not defined to reach one


def test_a_function_defined_before_any_call_still_marks_the_loops_that_call_it():
    """The observer reads every statement's definitions, also while the log runs anyway (before any call)."""
    from vjp_explorer.confined.observe import Observer

    ob = Observer(lambda message: None, "<s>", {})
    try:  # before any call the log goes on: it comes off again, or it logs every later test here
        for src in ["def train(x):\n    loss(x).backward()", "y = 1"]:  # both before any backward call
            ob.before_statement(ast.parse(src).body[0])
    finally:
        ob.recorder.__exit__(None, None, None)
    assert ob.statements.may_backward(ast.parse("for e in range(3):\n    train(x)").body[0])
