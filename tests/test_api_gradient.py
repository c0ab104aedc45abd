"""`check()` takes v as `gradient=`, as `explore` does; a bad program in a notebook is one clean error."""

from __future__ import annotations

import pytest
import torch

import vjp_explorer
from vjp_explorer.errors import UsageError


def cube(x):
    return x**3


def test_check_takes_gradient_as_explore_does():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    r = vjp_explorer.check(cube, x, gradient=[0.5, 1.0, 2.0])
    # hand-derived: Jᵀv = 3x²·v = [1.5, 12, 54]
    call = r.to_dict()["events"][0]
    assert call["v"][0]["value"] == [0.5, 1.0, 2.0] and call["v_origin"] == "given"
    assert call["grads"]["x"] == pytest.approx([1.5, 12.0, 54.0])
    assert r.exit_code == 0 and "agrees with finite differences" in r.to_dict()["summary"]
    same = vjp_explorer.check(cube, x, v=[0.5, 1.0, 2.0]).to_dict()["events"][0]
    assert same["grads"] == call["grads"]


def test_check_refuses_v_given_twice():
    with pytest.raises(UsageError, match="given twice"):
        vjp_explorer.check(cube, torch.ones(2), gradient=[1, 1], v=[1, 1])


def test_a_vjp_error_renders_in_ipython_as_the_command_line_does():
    with pytest.raises(vjp_explorer.VjpError) as info:
        vjp_explorer.explore("sinn(x)", {"x": "1"})
    lines = info.value._render_traceback_()
    text = "\n".join(lines)
    assert "Did you mean sin" in text and "^^^^" in text and "sinn(x)" in text
    assert "Traceback" not in text and "File " not in text
