"""v as a probe (issue 21 item 5, docs/probes.md): one-hot, basis, random, several v, --upstream."""

from __future__ import annotations

import json
import math

import pytest
import sympy
import torch

from documents import event, inputs, per_leaf
from vjp_explorer.engine import probe as PR
from vjp_explorer.engine.compare import TOLERANCES, compare_tensors

SEED = ["3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8"]
# the seed example's Jacobian by hand: y = 3a + 2b² + log(c), elementwise, so every block is diagonal
HAND_J = {
    "a": [[3, 0, 0], [0, 3, 0], [0, 0, 3]],
    "b": [[12, 0, 0], [0, 16, 0], [0, 0, 20]],  # 4b
    "c": [[1 / 6, 0, 0], [0, 1 / 7, 0], [0, 0, 1 / 8]],  # 1/c
}


def js(vjp, *args: str) -> dict:
    r = vjp("run", *args, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def close(a, b, rel=1e-6) -> bool:
    return torch.allclose(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64), rtol=rel)


def refused(r, *phrases: str) -> str:
    """A clear one-paragraph error, exit 2, no traceback."""
    out = r.stdout + r.stderr
    assert r.exit_code == 2, out
    assert "Traceback" not in out and "internal error" not in out, out
    assert r.stderr.startswith("error: "), r.stderr
    assert "\n\n" not in r.stderr.strip(), r.stderr
    for p in phrases:
        assert p in r.stderr, r.stderr
    return r.stderr


# ---------------------------------------------------------------------------------------------------- basis
def test_basis_rows_are_the_hand_derived_jacobian(vjp):
    d = js(vjp, *SEED, "--grad", "basis")
    assert event(d)["v_origin"] == "basis" and event(d)["v"][0]["value"] == [1.0, 1.0, 1.0]
    p = d["probe"]
    assert p["source"] == "basis" and "rows of J" in p["note"]
    for leaf, J in HAND_J.items():
        assert close(p["rows"][leaf], J), leaf
        assert close(p["rows"][leaf], per_leaf(d, "jacobian")[leaf]["value"]), leaf
    assert event(d)["checks"]["basis"]["status"] == "agree"


def test_basis_of_a_dense_program_past_the_loop_size_uses_the_batch_and_agrees(vjp):
    # y = sum(x)*x: J[i, j] = δij·Σx + x[i], at 70 outputs (> LOOP_ROWS: the batched route)
    n = 70
    d = js(vjp, "sum(x)*x", "--x", f"arange({n})", "--grad", "basis", "--dtype", "float64", "--no-symbolic")
    x = torch.arange(n, dtype=torch.float64)
    J = torch.eye(n, dtype=torch.float64) * x.sum() + x[:, None]
    assert torch.equal(torch.tensor(d["probe"]["rows"]["x"], dtype=torch.float64), J)
    assert "vmap" in d["probe"]["method"]
    assert event(d)["checks"]["basis"]["status"] == "agree"


def test_basis_of_an_elementwise_program_past_the_loop_size_batches_the_runs_graph(vjp):
    # J is diagonal (no torch.func in the J route): the one-hot vs go through the run's graph in one batch
    n = 70
    d = js(vjp, "x*x", "--x", f"arange({n})", "--grad", "basis", "--dtype", "float64", "--no-symbolic")
    x = torch.arange(n, dtype=torch.float64)
    assert torch.equal(torch.tensor(d["probe"]["rows"]["x"], dtype=torch.float64), torch.diag(2 * x))
    assert "is_grads_batched" in d["probe"]["method"]
    assert event(d)["checks"]["basis"]["status"] == "agree"


def test_basis_shows_rows_next_to_j(vjp):
    r = vjp("run", *SEED, "--grad", "basis")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "v as a probe" in r.stdout and "backward(eᵢ) → b.grad" in r.stdout and "J = ∂y/∂b" in r.stdout
    assert "basis" in r.stdout


def test_basis_past_its_budget_is_refused(vjp):
    refused(vjp("run", "x*2", "--x", "arange(5000)", "--grad", "basis"), "budget of 4,096 rows", "--grad eK")
    refused(
        vjp("run", "x*2", "--x", "arange(100)", "--grad", "basis", "--max-jacobian", "100"),
        "budget of 100 (--max-jacobian N)",
    )


# ---------------------------------------------------------------------------------------------------- one-hot
def test_e3_picks_row_3_of_a_dense_jacobian(vjp):
    # y = W @ x with W constant 4 x 3: row 3 of J is W[3]
    W = "[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]"
    d = js(vjp, "W @ x", "--const", f"W={W}", "--x", "1,1,1", "--grad", "e3")
    assert event(d)["v"][0]["value"] == [0.0, 0.0, 0.0, 1.0] and event(d)["v_origin"] == "one-hot"
    assert event(d)["grads"]["x"] == [10.0, 11.0, 12.0]
    assert event(d)["grads"]["x"] == per_leaf(d, "jacobian")["x"]["value"][3]
    assert d["probe"]["element"] == "y[3]" and d["probe"]["index"] == [3]
    assert "row 3 of J" in d["probe"]["note"]


def test_one_hot_multi_index_equals_its_flat_index(vjp):
    args = ["x*x", "--x", "[[1,2,3],[4,5,6]]"]
    multi = js(vjp, *args, "--grad", "e[1,2]")
    flat = js(vjp, *args, "--grad", "e5")
    assert event(multi)["v"][0]["value"] == event(flat)["v"][0]["value"] == [[0, 0, 0], [0, 0, 1.0]]
    assert event(multi)["grads"]["x"] == [[0, 0, 0], [0, 0, 12.0]]  # ∂(x²)/∂x = 2x at x = 6
    assert multi["probe"]["element"] == "y[1,2]" and multi["probe"]["index"] == [1, 2]


@pytest.mark.parametrize(
    ("grad", "phrases"),
    [
        ("e-1", ("negative", "shape [3]", "e0 to e2")),
        ("e999", ("past the last element", "shape [3]", "e0 to e2")),
        ("e3", ("shape [3]",)),
        ("e[1,2]", ("shape [3]", "1 index")),
        ("e[-1]", ("shape [3]",)),
        ("e1.5", ("not a one-hot v", "e[1,2]")),
    ],
)
def test_hostile_one_hot_indices(vjp, grad, phrases):
    refused(vjp("run", *SEED, "--grad", grad), *phrases)


# ---------------------------------------------------------------------------------------------------- random
def test_random_v_is_reproducible_and_leaves_other_random_values_alone(vjp):
    args = ["x*y0", "--x", "randn(4)", "--y0", "randn(4)"]
    one = js(vjp, *args, "--seed", "7", "--grad", "random")
    two = js(vjp, *args, "--seed", "7", "--grad", "random")
    other = js(vjp, *args, "--seed", "8", "--grad", "random")
    plain = js(vjp, *args, "--seed", "7", "--grad", "1,1,1,1")
    assert event(one)["v_origin"] == "random" and one["seed"] == 7
    assert event(one)["v"][0]["value"] == event(two)["v"][0]["value"] != event(other)["v"][0]["value"]
    values = [{n: x["value"] for n, x in inputs(d).items()} for d in (one, two, plain)]
    assert values[0] == values[1] == values[2]  # the inputs' draws do not change
    assert event(one)["v"][0]["value"] not in ([i["value"] for i in inputs(one).values()])
    assert "random combination of the rows" in one["probe"]["note"]
    assert all(c["status"] == "agree" for c in event(one)["checks"].values() if c["status"] != "skipped")


def test_random_without_a_seed_draws_one_and_shows_it(vjp):
    d = js(vjp, *SEED, "--grad", "random")
    assert isinstance(d["seed"], int)
    again = js(vjp, *SEED, "--grad", "random", "--seed", str(d["seed"]))
    assert event(again)["v"][0]["value"] == event(d)["v"][0]["value"]


# ---------------------------------------------------------------------------------------------------- several v
def test_several_grads_show_linearity(vjp):
    d = js(vjp, *SEED, "--grad", "1,0,0", "--grad", "0,1,0", "--grad", "e2")
    p = d["probe"]
    assert p["source"] == "several" and p["coefficients"] == [2.0, -1.0, 0.5]
    assert [v["source"] for v in p["vs"]] == ["given", "given", "one-hot"]
    assert p["combined"]["value"] == [2.0, -1.0, 0.5]
    b = [v["grads"]["b"] for v in p["vs"]]
    assert b == [[12.0, 0, 0], [0, 16.0, 0], [0, 0, 20.0]]
    assert p["combined"]["grads"]["b"] == [24.0, -16.0, 10.0]
    assert event(d)["v"][0]["value"] == [1.0, 0.0, 0.0]  # the run itself uses the first v
    assert event(d)["checks"]["linearity"]["status"] == "agree"


def test_a_later_ones_does_not_make_the_run_v_ones(vjp):
    # the run uses v1; a later --grad ones must not tell the exact routes that v is all ones
    d = js(vjp, "x*x + sum(x)", "--x", "1,2,3", "--grad", "1,0,0", "--grad", "ones")
    assert event(d)["grads"]["x"] == [3.0, 1.0, 1.0]
    assert all(c["status"] == "agree" for c in event(d)["checks"].values() if c["status"] != "skipped")
    assert not any(n["code"].startswith("ones_") for n in event(d)["notes"])


def test_the_linearity_check_catches_a_nonlinear_backward():
    """A backward that squares its incoming gradient (REFERENCE row 15) passes one-hot checks, not this one."""
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    J = torch.diag(2 * x.detach())

    def squaring(v):
        return {"x": (v * v) @ J}

    def right(v):
        return {"x": v @ J}

    vs = [torch.tensor([1.0, 0, 0]), torch.tensor([0, 1.0, 0])]
    tol = TOLERANCES["float32"]
    for backward, want in ((right, "agree"), (squaring, "disagree")):
        _, together, summed, _, sizes = PR.linearity_items(backward, vs, PR.coefficients(2))
        check = compare_tensors("linearity", "", [("x", together["x"], summed["x"])], tol, magnitudes=sizes)
        assert check.status == want
    # with α = β = 1 and one-hot v the squaring backward would pass: hence 2 and -1
    _, together, summed, _, _ = PR.linearity_items(squaring, vs, [1.0, 1.0])
    assert torch.equal(together["x"], summed["x"])
    assert y.requires_grad


def test_basis_and_upstream_take_no_other_grad(vjp):
    refused(vjp("run", *SEED, "--grad", "basis", "--grad", "1,0,0"), "basis", "alone")
    refused(vjp("run", *SEED, "--grad", "1,0,0", "--upstream", "sum(y)"), "--upstream", "one or the other")
    many = ["--grad", "1,0,0"] * (PR.MAX_GRADS + 1)
    refused(vjp("run", *SEED, *many), f"at most {PR.MAX_GRADS} values of v")


# ---------------------------------------------------------------------------------------------------- upstream
def test_upstream_v_is_dl_dy_by_sympy(vjp):
    d = js(vjp, *SEED, "--dtype", "float64", "--upstream", "sum(sin(y)*y)")
    ys = event(d)["outputs"][0]["value"]
    s = sympy.Symbol("s")
    dL = sympy.diff(sympy.sin(s) * s, s)  # L = Σ sin(y)·y, so dL/dy[i] = cos(y[i])·y[i] + sin(y[i])
    want = [float(dL.subs(s, sympy.Float(y, 30))) for y in ys]
    assert close(event(d)["v"][0]["value"], want, 1e-12)
    assert event(d)["v_origin"] == "upstream"
    assert d["probe"]["upstream"]["formula"] == "sum(sin(y)*y)"
    assert math.isclose(d["probe"]["upstream"]["loss"], sum(math.sin(y) * y for y in ys), rel_tol=1e-12)
    # and the grads are dL/dx: the chain rule, against the hand-derived J (diagonal: v * J)
    for leaf, J in HAND_J.items():
        assert close(event(d)["grads"][leaf], [want[i] * J[i][i] for i in range(3)], 1e-9), leaf
    assert event(d)["checks"]["upstream"]["status"] == "agree"


def test_upstream_by_finite_differences_and_method_syntax(vjp):
    d = js(vjp, "x*x", "--x", "1,2,3", "--dtype", "float64", "--upstream", "(y**2).sum()")
    y = event(d)["outputs"][0]["value"]

    def L(ys):
        return sum(t * t for t in ys)

    h = 1e-6
    fd = [(L([*y[:i], y[i] + h, *y[i + 1 :]]) - L([*y[:i], y[i] - h, *y[i + 1 :]])) / (2 * h) for i in range(3)]
    assert close(event(d)["v"][0]["value"], fd, 1e-6)
    assert event(d)["v"][0]["value"] == [2.0, 8.0, 18.0]  # 2y


def test_upstream_named_after_the_output(vjp):
    d = js(vjp, "h = 2*x", "--x", "1,2", "--upstream", "sum(h*h)")
    assert event(d)["v"][0]["value"] == [4.0, 8.0]


@pytest.mark.parametrize(
    ("loss", "phrases"),
    [
        ("sum(z**2)", ("'z'", "named y")),
        ("y**2", ("not a single number", "sum(")),
        ("sum(y) + q", ("'q'",)),
        ("3", ("does not use y",)),
        ("__import__('os')", ("--upstream: Unknown function",)),
        ("sum(y", ("--upstream",)),
        ("", ("--upstream", "sum(y**2)")),
    ],
)
def test_hostile_upstream(vjp, loss, phrases):
    refused(vjp("run", *SEED, "--upstream", loss), *phrases)


def test_upstream_in_explain_and_text(vjp):
    r = vjp("explain", *SEED, "--upstream", "sum(y**2)")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "v as a probe" in r.stdout and "L = sum(y**2)" in r.stdout and "chain rule" in r.stdout


def test_a_plain_run_has_no_probe_key(vjp):
    d = js(vjp, *SEED, "--grad", "0.1,1,0.0001")
    assert d["probe"] is None and event(d)["v_origin"] == "given"
