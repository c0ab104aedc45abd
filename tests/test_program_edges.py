"""Program-door cases an outside hunt found wrong, each against plain torch or the derivative by hand.

Internal errors (exit 1) or refusals of valid input: a mask that selects another count of elements under a
finite-difference step, a sum over no elements, a step torch refuses (binary cross-entropy of p = 0 - h).
False disagreements at a singular point: sympy's 0/0 that tends to 0 from both sides was read as -inf
(atan2 at the origin, x**y with y = 0 at x = 0). Wrong numbers with every check agreeing: `h += 1` where
another name shares h's tensor (torch writes in place, so the other name changes too)."""

from __future__ import annotations

import json

import pytest


def doc(res):
    assert res.exit_code in (0, 3), res.stderr
    return json.loads(res.stdout)


def grad(d, name):
    (x,) = [x for x in d["events"][0]["inputs"] if x["name"] == name]
    return x["grad"]


@pytest.mark.parametrize(
    ("program", "values", "want"),
    [
        ("x[x > 1] * 2", ["--x", "1,2,3", "--grad", "ones"], {"x": [0.0, 2.0, 2.0]}),
        ("x[x > 5].sum()", ["--x", "1,2"], {"x": [0.0, 0.0]}),
        ("x[2:2].sum() + x[0]", ["--x", "1,2,3"], {"x": [1.0, 0.0, 0.0]}),
        # torch's own grad at p = 0 is 0 ((p - t)/max(p(1 - p), eps)); both exact routes abstain there
        ("F.binary_cross_entropy(p, t)", ["--p", "0,0.5", "--const", "t=0,1"], {"p": [0.0, -1.0]}),
    ],
)
def test_masks_empty_selections_and_domain_edges_run_and_agree(vjp, program, values, want):
    d = doc(vjp("run", program, *values, "--json"))
    assert d["exit_code"] == 0
    for name, g in want.items():
        assert grad(d, name) == pytest.approx(g)


@pytest.mark.parametrize(
    ("program", "values"),
    [("torch.atan2(x, y)", ["--x", "0", "--y", "0", "--dtype", "float64"]), ("x ** y", ["--x", "0", "--const", "y=0"])],
)
def test_a_0_over_0_that_tends_to_0_is_undefined_never_a_disagreement(vjp, program, values):
    d = doc(vjp("run", program, *values, "--json"))
    assert d["exit_code"] == 0
    assert d["events"][0]["checks"]["symbolic"]["status"] == "agree"
    assert grad(d, "x") == 0.0  # torch's own value at the point


def test_an_augmented_assignment_to_a_shared_tensor_is_refused(vjp):
    res = vjp("run", "-", "--x", "1,2", "--grad", "ones", input="h = x * 2\ng = h\nh += 1\ny = g * h\n")
    assert res.exit_code == 2 and "g names the same tensor" in res.stderr and "line 3" in res.stderr
    ok = doc(vjp("run", "-", "--x", "1,2", "--grad", "ones", "--json", input="h = x * 2\nh += 1\ny = h * h\n"))
    assert grad(ok, "x") == [12.0, 20.0]  # d/dx (2x + 1)² = 4(2x + 1), as torch gives it
