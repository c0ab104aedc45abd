"""`vjp explain`: the ledger, the formulas, and notes that appear exactly when they apply."""

from __future__ import annotations

import json

import pytest

from documents import event, per_leaf


def explain(vjp, *args):
    r = vjp("explain", *args, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def codes(d):
    return {n["code"] for n in event(d)["notes"]}


def test_seed_ledger_terms(vjp):
    d = explain(vjp, "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001")
    ex = d["explain"]
    c0 = ex["ledger"]["c"][0]
    assert c0["element"] == "c[0]"
    assert len(c0["terms"]) == 1 and c0["zero_terms"] == 2
    term = c0["terms"][0]
    assert term["i"] == 0
    assert term["formula"] == "1/c[0]"
    assert term["v_i"] == pytest.approx(0.1, rel=1e-6)
    assert term["dy_dx"] == pytest.approx(1 / 6, rel=1e-7)
    assert c0["sum"] == pytest.approx(1 / 60, rel=1e-6)
    f = ex["jacobian_formulas"]
    assert f["c"]["structure"] == "diagonal"
    assert f["c"]["generic"] == "∂y[k]/∂c[k] = 1/c[k]"
    assert f["b"]["generic"] == "∂y[k]/∂b[k] = 4*b[k]"


def test_dense_ledger_shares_and_dominant_term(vjp):
    d = explain(vjp, "A @ x", "--x", "1,1", "--const", "A=[[1,2],[3,4]]", "--grad", "ones")
    x0 = d["explain"]["ledger"]["x"][0]
    assert [t["value"] for t in x0["terms"]] == [1.0, 3.0]
    assert [round(t["share"], 2) for t in x0["terms"]] == [0.25, 0.75]
    assert x0["dominant"] == 1
    assert [t["formula"] for t in x0["terms"]] == ["A[0,0]", "A[1,0]"]
    assert "ones_not_derivative" in codes(d)


def test_ones_note_only_when_J_is_not_diagonal(vjp):
    assert "ones_not_derivative" not in codes(explain(vjp, "x * x", "--x", "1,2", "--grad", "ones"))
    assert "ones_diagonal" in codes(explain(vjp, "x * x", "--x", "1,2", "--grad", "ones"))
    assert "ones_not_derivative" not in codes(
        explain(vjp, "A @ x", "--x", "1,1", "--const", "A=eye(2)", "--grad", "1,2")
    )
    assert "ones_not_derivative" in codes(explain(vjp, "torch.softmax(z, dim=0)", "--z", "1,2", "--grad", "ones"))


def test_unused_leaf_note_and_zero_block(vjp):
    d = explain(vjp, "u = c * 5; y = a * a", "--a", "1,2", "--c", "3,4", "--grad", "1,1")
    assert "unused_leaf" in codes(d)
    assert event(d)["grads"]["c"] == [0.0, 0.0]
    assert per_leaf(d, "jacobian")["c"]["structure"] == "zero"
    assert d["explain"]["jacobian_formulas"]["c"]["structure"] == "zero"
    assert "unused_leaf" not in codes(explain(vjp, "a * c", "--a", "1,2", "--c", "3,4", "--grad", "1,1"))


def test_nonfinite_note_names_the_element(vjp):
    d = explain(vjp, "torch.sqrt(x)", "--x", "0,4", "--grad", "ones")
    notes = [n for n in event(d)["notes"] if n["code"] == "nonfinite_grad"]
    assert notes and "x[0].grad is inf" in notes[0]["text"]
    assert event(d)["checks"]["symbolic"]["undefined"] == ["x[0]"]
    assert "nonfinite_grad" not in codes(explain(vjp, "torch.sqrt(x)", "--x", "1,4", "--grad", "ones"))


def test_loop_note_and_formula_follows_the_path(vjp):
    d = explain(vjp, "y = x * 2\nwhile y.data.norm() < 10:\n    y = y * 2", "--x", "1", "--grad", "1")
    assert d["control"][0]["count"] == 3
    assert d["explain"]["jacobian_formulas"]["x"]["generic"] == "∂y/∂x = 16"
    assert "control_flow" in codes(d)
    assert "control_flow" not in codes(explain(vjp, "x * 2", "--x", "1"))


def test_formulas_use_the_programs_names(vjp):
    d = explain(vjp, "y = torch.tanh(W @ x)", "--W", "[[1,2],[3,4]]", "--x", "0.1,0.2", "--grad", "1,0")
    entries = d["explain"]["jacobian_formulas"]["x"]["entries"]
    assert entries[0]["formula"] == "W[0,0]*(1 - y[0]**2)"


def test_latex_formulas(vjp):
    r = vjp("explain", "torch.log(c)", "--c", "2", "--latex", "--json")
    assert r.exit_code == 0, r.stderr
    ex = json.loads(r.stdout)["explain"]
    assert ex["jacobian_formulas"]["c"]["generic"] == "\\frac{\\partial y}{\\partial c} = \\frac{1}{c}"


def test_explain_terminal_sections(vjp):
    r = vjp("explain", "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001")
    assert r.exit_code == 0, r.stderr
    for phrase in [
        "1. who is who",
        "2. the Jacobian",
        "3. the ledger",
        "4. every route",
        "∂y[k]/∂c[k] = 1/c[k]",
        "c[0].grad = v[0]·∂y[0]/∂c[0] = 0.1 × 1/c[0] = 0.1 × 0.166667 = 0.0166667",
    ]:
        assert phrase in r.stdout, phrase
