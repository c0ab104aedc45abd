"""Snippets come from strangers: what Python cannot read is refused before a child starts, a bomb is stopped
with exit 2 and its limit named, and the snippet's own errors and output stay the snippet's."""

from __future__ import annotations

import time

import pytest

from vjp_explorer.errors import VjpError
from vjp_explorer.limits import DEFAULT_LIMITS
from vjp_explorer.snippet import run_snippet

REFUSED_BEFORE_A_CHILD = {
    "(" * 300 + "1" + ")" * 300: "not valid Python",
    "x = 1" + " + 1" * 3000: "nested too deeply",
    "x = " + "[" * 1000 + "]" * 1000: "not valid Python",
}


@pytest.mark.parametrize("code", list(REFUSED_BEFORE_A_CHILD), ids=["parens", "sum", "lists"])
def test_what_python_cannot_read_is_refused_before_a_child_starts(code):
    start = time.monotonic()
    with pytest.raises(VjpError) as e:
        run_snippet(code, seed=0)
    assert time.monotonic() - start < 1  # the parent's parse refuses it: no child was started
    assert REFUSED_BEFORE_A_CHILD[code] in e.value.render()
    assert e.value.exit_code == 2


BOMBS = {  # the confined door's own corpus is tests/test_confined_hostile.py; these pass through run_snippet
    "while True:\n    pass": ("wall-clock", "5"),
    # its wall clock is long, so that a loaded machine's slow child start never reads as the output limit failing
    "print('x' * 5_000_000)": ("printed more than", "60"),
}


@pytest.mark.parametrize("code", list(BOMBS), ids=["loop", "print"])
def test_bombs_are_stopped_with_the_limit_named(code):
    phrase, seconds = BOMBS[code]
    limits = DEFAULT_LIMITS.with_overrides({"snippet_seconds": seconds, "snippet_output_chars": "100000"})
    start = time.monotonic()
    with pytest.raises(VjpError) as e:
        run_snippet(code, seed=0, limits=limits)
    assert time.monotonic() - start < float(seconds) + 25  # stopped, not hung; slack for a loaded machine
    assert phrase in e.value.render() and "--limit snippet_" in e.value.render()
    assert e.value.exit_code == 2


def test_a_hook_that_raises_stops_the_snippet_as_python_would():
    code = """import torch
x = torch.ones(2, requires_grad=True)
def hook(g):
    raise ValueError('boom')
x.register_hook(hook)
(x * 2).sum().backward()
"""
    r = run_snippet(code, seed=0)
    assert r.error is not None and (r.error.type, r.error.message) == ("ValueError", "boom")


def test_printing_a_huge_tensor_is_summarised_by_torch():
    r = run_snippet("import torch\nx = torch.zeros(10**6)\nprint(x)\n", seed=0)
    assert "..." in r.stdout and len(r.stdout) < 200


def test_try_except_catches_the_snippets_own_errors():
    code = "try:\n    x = 1 / 0\nexcept ZeroDivisionError as e:\n    print('caught', e)\n"
    assert run_snippet(code, seed=0).stdout == "caught division by zero\n"


def test_the_snippet_leaves_torch_settings_as_they_were():
    import torch

    run_snippet(
        "import torch\ntorch.set_printoptions(precision=1)\ntorch.set_default_dtype(torch.float64)\n"
        "torch.set_grad_enabled(False)\n",
        seed=0,
    )
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()
    assert str(torch.tensor([1.23456])) == "tensor([1.2346])"


def test_error_points_at_the_line(vjp):
    res = vjp("run", "--snippet", "import torch\nx = torch.ones(2)\ny = x.cuda_thing()\n")
    assert res.exit_code == 4  # Python's own AttributeError, raised in the child
    assert "AttributeError at line 3" in res.stdout and "Traceback" not in res.output
    res = vjp("run", "--snippet", "import torch\nx = torch.ones(2)\ny = x +\n")
    assert res.exit_code == 2  # not Python: refused before a child starts
    assert "line 3" in res.stderr and "^" in res.stderr and "Traceback" not in res.stderr


def test_control_characters_never_reach_the_terminal(vjp):
    res = vjp("run", "--snippet", "print('\\x1b]0;pwned\\x07\\x1b[2J')\n# \u202e comment\n", "--seed", "0")
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout
    res = vjp("run", "--snippet", "print('\\x1b[2J')", "--json")
    assert "\x1b" not in res.stdout


def test_a_v_that_is_not_a_tensor_is_left_to_torch():
    # found by fuzzing: the probes assumed a tensor v; torch itself raises TypeError here, and so do we
    r = run_snippet("import torch\na = torch.ones(1, requires_grad=True)\n(a * 2).backward(float('nan'))\n", seed=0)
    assert r.error is not None and r.error.type == "TypeError" and r.events == []
