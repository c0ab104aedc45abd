"""A program's call goes to the one judge (issue 36): its forward, run again under the op log, is written as
the call record (calls.Record, schema-checked) and the judge's finite differences of torch's operators
replayed from it are the program's finite-difference check. Where the judge gives no verdict (backward ran
more than once, more input elements than the budget takes column by column, a record too large) the
program's own differences of its interpreter stand in, and the check's text says which ran.

References are derived by hand: Jᵀv of 3a + 2b² + log c at v is (3v, 4bv, v/c).
"""

from __future__ import annotations

import json

import pytest
import sympy
import torch

from vjp_explorer import calls, explore
from vjp_explorer.confined.checks import FD as JUDGE_FD
from vjp_explorer.stages import judge

SEED = ("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"})
V = [0.1, 1.0, 0.0001]


def test_the_seed_examples_differences_are_the_judges():
    r = explore(*SEED, grad="0.1,1,0.0001")
    c = r.checks["finite_difference"]
    assert c.status == "agree" and c.compares == JUDGE_FD and c.independent
    b, cc = torch.tensor([3.0, 4.0, 5.0]), torch.tensor([6.0, 7.0, 8.0])
    v = torch.tensor(V).double()  # v as the float32 run holds it
    want = {"a": 3 * v, "b": 4 * b.double() * v, "c": v / cc.double()}
    for name, ref in want.items():  # the judge's Jᵀv is what the view shows beside the grads
        assert torch.allclose(torch.as_tensor(r.finite_difference[name]), ref, rtol=1e-9, atol=1e-12)


def test_a_wrong_grad_is_a_disagreement_of_the_judge(monkeypatch):
    # the real backward's .grad of b replaced by 2bv (the factor 2 of b² forgotten): the judge says so
    real = torch.Tensor.backward

    def wrong(self, gradient=None, *args, **kwargs):
        real(self, gradient, *args, **kwargs)
        for x in wrong.leaves:
            if x.grad is not None and x.shape == (3,) and torch.equal(x.detach(), torch.tensor([3.0, 4.0, 5.0])):
                x.grad = x.grad / 2

    wrong.leaves = []
    import vjp_explorer.stages.bind as bind

    made = bind.bind_values

    def keep(*args, **kwargs):
        bound = made(*args, **kwargs)
        wrong.leaves = list(bound.leaves.values())
        return bound

    monkeypatch.setattr(bind, "bind_values", keep)
    monkeypatch.setattr(torch.Tensor, "backward", wrong)
    r = explore(*SEED, grad="0.1,1,0.0001")
    c = r.checks["finite_difference"]
    assert c.compares == JUDGE_FD and c.status == "disagree" and int(r.exit_code) == 3
    assert c.worst is not None and c.worst.startswith("b[")


def test_a_program_that_draws_is_judged_on_the_same_draw():
    # the judge's run of the forward starts from the generator's state of the first: x * randn(3)'s Jᵀv is
    # the drawn vector times v, and differences of another draw would disagree
    r = explore("x*randn(3)", {"x": "1,2,3"}, grad="ones", seed=3)
    c = r.checks["finite_difference"]
    assert c.status == "agree" and c.compares == JUDGE_FD
    assert torch.allclose(torch.as_tensor(r.finite_difference["x"]), torch.as_tensor(r.grads["x"]).double(), rtol=1e-6)


@pytest.mark.parametrize(
    ("program", "values", "options"),
    [
        (*SEED, {"backward_calls": 2}),  # .grad holds 2·Jᵀv: the program's route weighs the accumulation
        ("sum(x*x)", {"x": "linspace(1, 2, 60)"}, {}),  # 60 inputs: past every column, random directions
    ],
)
def test_where_the_judge_gives_no_verdict_the_programs_differences_stand_in(program, values, options):
    r = explore(program, values, grad="ones" if "b" in values else None, **options)
    c = r.checks["finite_difference"]
    assert c.status == "agree" and c.compares != JUDGE_FD and "central differences" in c.compares


def test_the_record_is_the_one_schema(monkeypatch):
    seen = []
    import vjp_explorer.trusted_judge as tj

    made = tj.record_of

    def keep(*args, **kwargs):
        rec = made(*args, **kwargs)
        seen.append(rec)
        return rec

    monkeypatch.setattr(tj, "record_of", keep)
    explore(*SEED, grad="0.1,1,0.0001")
    (rec,) = seen
    assert calls.validate_record(rec) == rec and rec["forward"] is not None
    assert rec["names"] == ["a", "b", "c"] and [a["shape"] for a in rec["at"]] == [[3], [3], [3]]


def test_a_call_past_the_records_size_is_the_programs(monkeypatch):
    monkeypatch.setattr(judge, "RECORD_ELEMENTS", 8)
    r = explore(*SEED, grad="0.1,1,0.0001")
    assert r.checks["finite_difference"].compares != JUDGE_FD and r.checks["finite_difference"].status == "agree"


# Found from outside on the judge's route (a read-only hunt against plain torch)


@pytest.mark.parametrize("program", ["x.detach()*x", "x*sum(x).detach()", "detach(x)*x + x"])
def test_a_detach_is_a_constant_of_the_record(program):
    # torch: the detached factor is held, x.detach()*x has grad x (docs/functions.md's own example)
    r = explore(program, {"x": "2,3"}, grad="ones")
    c = r.checks["finite_difference"]
    assert c.status == "agree" and c.compares == JUDGE_FD and int(r.exit_code) == 0


def test_a_mask_or_a_kink_goes_to_the_programs_route_which_names_it():
    # x*(x > 1) jumps at 1 and relu has a kink at 0: the record would hold them on autograd's branch
    for program, x, at in [("x*(x>1)", "1,2,3", "x[0]"), ("relu(x)*2", "0,1", "x[0]")]:
        c = explore(program, {"x": x}, grad="ones", dtype="float64").checks["finite_difference"]
        assert c.compares != JUDGE_FD and c.status == "agree" and f"not a reference at {at}" in (c.reason or "")


def test_an_agreement_only_by_an_error_as_large_as_the_value_is_no_evidence():
    # norm at 1e20 in float32: x² overflows, torch's grad is [0, 0], the derivative 1/√2 each; the judge's
    # float32 allowance is the whole gradient, so it says nothing, and the program's float64 differences decide
    r = explore("norm(x)", {"x": "1e20,1e20"}, grad="ones", symbolic=False)
    assert r.grads["x"].tolist() == [0.0, 0.0]
    c = r.checks["finite_difference"]
    assert c.status == "disagree" and int(r.exit_code) == 3


@pytest.mark.parametrize(
    ("a", "dtype"),
    [
        ("[[1000,2000,5000],[2000,4000,7000],[3000,1000,1000]]", "float64"),
        ("[[1,2,3],[2,4,6],[1,1,1]]", "float32"),  # singular: every cofactor of the last row is 0
    ],
)
def test_a_zero_cofactor_of_det_is_weighed_at_its_terms_size(a, dtype):
    # det's gradient is the cofactor matrix; a cofactor of 0 (1000·4000 − 2000·2000) comes back from LU as
    # ±1e-10 in float64: rounding at the size of its products, not a wrong gradient
    r = explore("torch.det(A)", {"A": a}, dtype=dtype)
    A = torch.tensor(json.loads(a), dtype=getattr(torch, dtype), requires_grad=True)
    torch.det(A).backward()
    assert torch.equal(torch.as_tensor(r.grads["A"]), A.grad)
    # the oracle: the exact cofactors. LAPACK's path for a singular float32 matrix depends on the CPU: MKL on
    # an AMD EPYC gives all 0 here, where the cofactors of the first two rows are not (a wrong gradient)
    exact = torch.tensor(sympy.Matrix(json.loads(a)).adjugate().T.tolist(), dtype=torch.float64)
    right = bool(((A.grad.double() - exact).abs() <= 1e-3 * exact.abs().max()).all())
    want = ("agree", 0) if right else ("disagree", 3)
    assert ({k: c.status for k, c in r.checks.items()}["symbolic"], int(r.exit_code)) == want


def test_a_wrong_cofactor_still_disagrees():
    # the looser size of det's terms still catches a transposed gradient of a non-symmetric matrix
    from vjp_explorer.engine.term_sizes import term_sizes

    A = torch.tensor([[2.0, 1.0, 0.5], [0.3, 3.0, 1.0], [1.0, 0.2, 4.0]], dtype=torch.float64)
    (sizes,) = term_sizes(torch.det, [A], torch.tensor(1.0, dtype=torch.float64))
    cof = torch.det(A) * torch.linalg.inv(A).T
    wrong = cof.T
    assert bool(((wrong - cof).abs() > 1e-6 * sizes).any())  # the tolerance's scale is far below the mistake
    assert bool((sizes >= cof.abs() - 1e-12).all())  # and never below the cofactors themselves


@pytest.mark.parametrize(("program", "x"), [("x[argmax(x)]", "1,1,0"), ("x[argmin(x)]*3", "2,2,5")])
def test_an_index_computed_from_the_values_goes_to_the_programs_route(program, x):
    # torch's central differences of x[argmax(x)] at a tie [1, 1, 0] are [0.5, 0.5, 0]: the record would hold
    # the index fixed and agree on [1, 0, 0]; the program's route sees the tie move and names it
    c = explore(program, {"x": x}, dtype="float64").checks["finite_difference"]
    assert c.compares != JUDGE_FD and "not a reference at x[0], x[1]" in (c.reason or "")


def test_what_the_forward_draws_counts_toward_the_records_size():
    # a randn of 60,000 elements inside the forward: the judge would replay it hundreds of times
    r = explore("sum(tanh(randn(300, 200) @ x))", {"x": "randn(200)"}, seed=0, symbolic=False)
    assert r.checks["finite_difference"].compares != JUDGE_FD


def test_softplus_past_its_threshold_is_a_kink_not_a_disagreement():
    # torch's softplus is x itself past beta*x = 20: a jump of 2e-9 at 20 that central differences straddle;
    # torch's grad sigmoid(20) is right (float64), and the element is no reference, named
    r = explore("softplus(x)", {"x": "20,1"}, grad="ones", dtype="float64")
    x = torch.tensor([20.0, 1.0], dtype=torch.float64, requires_grad=True)
    torch.nn.functional.softplus(x).sum().backward()
    assert torch.equal(torch.as_tensor(r.grads["x"]), x.grad) and int(r.exit_code) == 0
    assert "not a reference at x[0]" in (r.checks["finite_difference"].reason or "")


@pytest.mark.parametrize("program", ["sum(sin(x.float())*x)", "exp(x.float()).sum()"])
def test_a_float64_program_that_computes_in_float32_takes_float32s_tolerance(program):
    # autograd rounds cos to float32 where the forward does: 4.7e-7 off sympy's float64 value, torch's right
    r = explore(program, {"x": "1,2,3"}, dtype="float64")
    assert r.checks["symbolic"].status == "agree" and int(r.exit_code) == 0
    assert "0.0001" in str(r.checks["symbolic"].tolerance)  # float32's rtol
    plain = explore(program.replace(".float()", ""), {"x": "1,2,3"}, dtype="float64").checks["symbolic"]
    assert "1e-09" in str(plain.tolerance)  # float64's, where nothing is computed in float32
