"""The finite-difference route against derivatives derived by hand (numpy), for every function of the
language, and the check it feeds: kinks left out and named, directional past the budget, skipped past
the work budget, a wrong nan caught where sympy is skipped."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from documents import event
from vjp_explorer import explore
from vjp_explorer.engine.finite_diff import finite_differences
from vjp_explorer.engine.interpreter import Interpreter, Val
from vjp_explorer.language.parser import parse_program
from vjp_explorer.limits import DEFAULT_LIMITS

RNG = np.random.default_rng(19)
X = RNG.uniform(0.2, 1.5, 4)  # in every function's domain, away from relu's and abs's kink
W = RNG.normal(size=(3, 4))
V3, V4 = RNG.normal(size=3), RNG.normal(size=4)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


# program, Jᵀv derived by hand (x = X, v = V4 for 4 outputs, V3 for 3, 1 for a scalar)
CASES = {
    "log(x)": V4 / X,
    "exp(x)": V4 * np.exp(X),
    "sin(x)": V4 * np.cos(X),
    "cos(x)": -V4 * np.sin(X),
    "tan(x)": V4 / np.cos(X) ** 2,
    "tanh(x)": V4 * (1 - np.tanh(X) ** 2),
    "sigmoid(x)": V4 * _sig(X) * (1 - _sig(X)),
    "relu(x)": V4 * 1.0,
    "sqrt(x)": V4 / (2 * np.sqrt(X)),
    "abs(x)": V4 * 1.0,
    "pow(x, 3)": V4 * 3 * X**2,
    "x ** 0.5": V4 * 0.5 * X**-0.5,
    "sum(x)": np.ones(4),
    "mean(x)": np.full(4, 0.25),
    "prod(x)": np.prod(X) / X,
    "norm(x)": X / np.linalg.norm(X),
    "W @ x": W.T @ V3,
    "matmul(W, x)": W.T @ V3,
    "softmax(x, dim=0)": (np.diag(_softmax(X)) - np.outer(_softmax(X), _softmax(X))).T @ V4,
    "log_softmax(x, dim=0)": (np.eye(4) - np.outer(np.ones(4), _softmax(X))).T @ V4,
    "t(x) * 2": 2 * V4,
    "transpose(x, 0, 0) * x": 2 * X * V4,
    "detach(x) * x": X * V4,
}


def fd_of(program: str, max_evals: int = 200):
    prog = parse_program(program, None, DEFAULT_LIMITS)
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    consts = {"W": torch.tensor(W)} if "W" in program else {}
    env = {"x": Val(x, {"x": "diag"}, (1, 1)), **{k: Val(c, {}) for k, c in consts.items()}}
    fwd = Interpreter(prog, DEFAULT_LIMITS, torch.float64).run(env)
    out = fwd.output.v
    v = torch.tensor(V3 if out.numel() == 3 else V4 if out.numel() == 4 else [1.0], dtype=torch.float64)
    return finite_differences(fwd.steps, prog.output, {"x": x}, consts, v.reshape(out.shape), max_evals), v


@pytest.mark.parametrize("program", list(CASES))
def test_every_function_against_hand_derivatives(program):
    fd, _ = fd_of(program)
    assert fd.method == "full"
    assert not fd.left_out["x"].any()
    got = fd.jtv["x"].numpy()
    err = fd.error["x"].numpy()
    want = CASES[program]
    # within the reported error estimate (and it is an honest one: small)
    assert np.all(np.abs(got - want) <= err + 1e-12 * np.abs(want)), (got, want, err)
    assert np.all(err <= 1e-6 * (1 + np.abs(want)))


def test_directional_route_against_hand_derivative():
    fd, v = fd_of("W @ x", max_evals=4)
    assert fd.method == "directional" and len(fd.directions) == 2
    jtv = W.T @ V3
    for (ref, err, _), u in zip(fd.directions, fd.us, strict=True):
        assert abs(ref - float(u["x"].numpy() @ jtv)) <= err + 1e-12


def test_seed_example_has_the_check():
    r = explore("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, grad="0.1,1,0.0001")
    c = r.checks["finite_difference"]
    assert c.status == "agree" and "replayed forward" in c.compares and c.reason is None  # the judge's
    # with backward called twice the program's own route stands in, every column of J
    c = explore(
        "3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, grad="0.1,1,0.0001", backward_calls=2
    ).checks["finite_difference"]
    assert c.status == "agree" and "every column of J (37 evaluations)" in c.compares and c.reason is None


def test_kink_is_named_not_a_disagreement():
    # relu(x)*x at 0: d/dx = 2x for x > 0, 0 for x < 0; torch's convention at 0 is 0. No reference there
    r = explore("relu(x)*x", {"x": "0,1,-2"}, grad="1,1,1")
    c = r.checks["finite_difference"]
    assert c.status == "agree" and int(r.exit_code) == 0
    assert c.reason == (
        "not a reference at x[0] (a step crosses a kink of the program (relu or abs at 0, a norm at 0, a mask such "
        "as x > 0 that flips))"
    )
    # sqrt at 0: the step to -h leaves the domain; the other element is checked
    c = explore("sqrt(x)", {"x": "0,4"}, grad="1,1").checks["finite_difference"]
    assert (
        c.status == "agree" and c.reason is not None and c.reason.startswith("not a reference at x[0] (a step leaves")
    )


def test_directional_past_the_budget_and_skipped_past_the_work():
    r = explore("tanh(W@x)", {"x": "randn(60)"}, consts={"W": "randn(60,60)"}, grad="ones", seed=3)
    c = r.checks["finite_difference"]
    assert c.status == "agree" and "2 random u, 9 evaluations" in c.compares
    from vjp_explorer.limits import Limits

    r = explore("x*2", {"x": "ones(100)"}, grad="ones", limits=Limits(finite_difference_work=500))
    c = r.checks["finite_difference"]
    assert c.status == "skipped" and "limits=Limits(finite_difference_work=N)" in (c.reason or "")


def test_wrong_nan_caught_where_sympy_is_skipped(vjp):
    r = vjp("run", "log(exp(x))", "--x", "30,89,100", "--grad", "1,1,1", "--no-symbolic", "--json")
    assert r.exit_code == 3
    d = json.loads(r.stdout)
    c = event(d)["checks"]["finite_difference"]
    assert c["status"] == "disagree" and c["spurious"] == ["x[1]", "x[2]"]
    assert any("ExpBackward0" in n["text"] for n in event(d)["notes"] if n["code"] == "wrong_nonfinite_grad")


def test_output_not_finite_skips_the_check():
    r = explore("1/x", {"x": "0,2"}, grad="1,1")
    c = r.checks["finite_difference"]
    assert c.status == "skipped" and "y[0]" in (c.reason or "") and int(r.exit_code) == 0


def test_the_budget_counts_what_an_evaluation_reads():
    # tanh(W@x) with W 100 x 100: each evaluation reads W's 10,000 entries, not only the 200 it computes
    from vjp_explorer.limits import Limits

    r = explore(
        "tanh(W@x)",
        {"x": "randn(100)"},
        consts={"W": "randn(100,100)"},
        grad="ones",
        seed=1,
        limits=Limits(finite_difference_work=50_000),
    )
    c = r.checks["finite_difference"]
    assert c.status == "skipped" and "reads and computes 10,200 elements" in (c.reason or "")


def test_float_conversion_does_not_round_the_float64_differences():
    # .float() is the identity to backward; the float64 evaluation must not round back to float32 there
    # (the focal loss of the program corpus: exit 3 from finite differences alone)
    r = explore(
        "t = targets.float(); F.binary_cross_entropy_with_logits(x, t, reduction='none').mean()",
        {"x": "0.5,-1.0,2.0,0.1"},
        consts={"targets": "1,0,1,0"},
    )
    assert r.checks["finite_difference"].status == "agree", r.checks["finite_difference"]
    assert r.exit_code == 0


def test_the_driver_takes_a_plain_callable_every_column_and_along_directions():
    """finite_differences_of(f, xs, v, budget): what the snippet child calls with its ATen replay. The
    oracle is the hand-derived gradient of Σ v·(x² + sin(x)·y): v·(2x + cos(x)·y) and v·sin(x)."""
    import torch

    from vjp_explorer.engine.finite_diff import finite_differences_of

    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    y = torch.tensor([1.5, 0.5, -2.0], dtype=torch.float64)
    v = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    want_x, want_y = v * (2 * x + torch.cos(x) * y), v * torch.sin(x)

    def f(a, b):
        return a * a + torch.sin(a) * b

    full = finite_differences_of(f, [x, y], v, max_evals=200)
    assert full.method == "full" and full.evals == 4 * 6 + 1
    assert torch.allclose(full.jtv["x0"], want_x, rtol=1e-9) and torch.allclose(full.jtv["x1"], want_y, rtol=1e-9)
    cheap = finite_differences_of(f, [x, y], v, max_evals=10)
    assert cheap.method == "directional" and len(cheap.directions) == 2
    for (ref, err, _), u in zip(cheap.directions, cheap.us, strict=True):
        exact = float(u["x0"] @ want_x + u["x1"] @ want_y)
        assert abs(ref - exact) <= 1e-8 * max(1.0, abs(exact)) and err < 1e-6


def test_vjp_tolerances_prints_the_one_table(vjp):
    from vjp_explorer.engine.tolerance import TOLERANCES

    r = vjp("tolerances")
    assert r.exit_code == 0
    for name, tol in TOLERANCES.items():
        assert f"{name:<9} {tol.rtol:<8g} {tol.atol:<8g}" in r.stdout
    assert "eps64^(1/3)" in r.stdout


@pytest.mark.parametrize("door", ["program", "snippet", "functional", "check"])
def test_one_budget_rule_decides_every_column_for_each_door(door):
    """One table, one rule: a door's evaluations buy every column of J for evals // 4 input elements (4
    evaluations each); one element more falls back to random directions. The oracle is the hand-derived Jᵀv
    of Σ v·x² (2·v·x) on the full side."""
    from vjp_explorer.engine.finite_diff import finite_differences_of
    from vjp_explorer.engine.tolerance import FD_BUDGETS

    evals = FD_BUDGETS[door].evals
    n = evals // 4
    x = torch.linspace(0.5, 1.5, n + 1, dtype=torch.float64)
    v = torch.linspace(-1.0, 1.0, n + 1, dtype=torch.float64)
    full = finite_differences_of(lambda a: a * a, [x[:n]], v[:n], evals)
    assert full.method == "full" and full.evals == 4 * n + 1
    assert torch.allclose(full.jtv["x0"], 2 * v[:n] * x[:n], rtol=1e-9, atol=1e-12)
    assert finite_differences_of(lambda a: a * a, [x], v, evals).method == "directional"


def test_the_docs_table_is_the_budget_table():
    from pathlib import Path

    from vjp_explorer.engine.tolerance import FD_BUDGETS

    text = (Path(__file__).resolve().parents[1] / "docs" / "checks.md").read_text()
    for door, budget in FD_BUDGETS.items():
        assert f"| {door} | {budget.evals:,}" in text, door


def test_one_error_weight_for_every_door():
    """|got − ref| <= atol + max(rtol·max(|ref|, m), e): the differences' error e counts once, worked by
    hand for float64 (rtol 1e-9, atol 1e-14): ref 2, m 3, e 1e-6 allow 1e-14 + 1e-6; e 1e-12 allows
    1e-14 + 3e-9."""
    from vjp_explorer.engine.tolerance import ERROR_WEIGHT, allowed, tolerance, with_error

    tol = tolerance("float64")
    assert ERROR_WEIGHT == 1.0
    assert allowed(2.0, with_error(3.0, 1e-6, tol), tol) == pytest.approx(1e-14 + 1e-6, rel=1e-12)
    assert allowed(2.0, with_error(3.0, 1e-12, tol), tol) == pytest.approx(1e-14 + 3e-9, rel=1e-12)
