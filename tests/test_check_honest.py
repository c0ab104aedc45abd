"""`vjp check` is honest where finite differences are no reference, and strict where v hides a mistake.

Found from outside: a correct backward was called wrong at a kink (torch's own relu at 0, a tie in max) and
where the forward computes in float32 (every difference unsettled), while `finite_difference` said `agree`
having compared nothing; a backward of |grad_output| passed, since every one-hot and all-positive v agrees;
past 2,000 elements the linearity check did not run at all. The oracles are hand-derived: relu' is 0 or 1
away from 0 and torch passes 0 at 0; sin' = cos.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from planted import FUNCTIONS
from vjp_explorer.trusted import check, load_target

# the planted module's _fn helper (tests/planted.py), and the functions found from outside
MODULE = FUNCTIONS + textwrap.dedent(
    """

    Relu = _fn("Relu", lambda x: x.clamp(min=0), lambda x, g: g * (x > 0))
    Cast32 = _fn("Cast32", lambda x: torch.sin(x.float()), lambda x, g: torch.cos(x) * g)
    AbsG = _fn("AbsG", lambda x: 2 * x, lambda x, g: 2 * g.abs())
    SquareG = _fn("SquareG", lambda x: 2 * x, lambda x, g: 2 * g * g)
    IgnoreG = _fn("IgnoreG", lambda x: x * x, lambda x, g: 2 * x)


    def first_max(x):
        return x.max(dim=0).values.reshape(1)


    class Cube(torch.autograd.Function):  # torch.func's form: forward without ctx, then setup_context
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g


    def loud(x):
        print("\\x1b[31mcalled")
        return x * 3


    print("imported")
    """
)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "honest_ops.py"
    path.write_text(MODULE)
    return path


def _check(ops, name, x, v=None):
    obj, label = load_target(f"{ops}:{name}")
    return check(obj, torch.tensor(x), v=None if v is None else torch.tensor(v), label=label)


def _status(result):
    return {c.name: c.status for c in result.events[0].checks}


def test_a_right_backward_at_a_kink_agrees_where_differences_are_a_reference(ops):
    r = _check(ops, "Relu", [-1.0, 0.0, 2.0], [1.0, 1.0, 1.0])
    assert r.events[0].inputs[0].grad == [0.0, 0.0, 1.0]  # torch's convention at 0: the gradient 0
    # the judge holds clamp on torch's branch at 0 (it passes 1); the custom backward's 0 is as right there
    assert _status(r) == {"jtv": "agree", "finite_difference": "agree", "linearity": "agree", "jacobian": "agree"}
    for c in r.events[0].checks[:2]:
        assert "x[1]" in c.reason and "kink" in c.reason  # named, not compared
    assert r.exit_code == 0


def test_a_tie_in_max_is_a_convention_not_a_mistake(ops):
    r = _check(ops, "first_max", [2.0, 2.0, 1.0])
    assert r.exit_code == 0 and "disagree" not in _status(r).values()


def test_a_float32_cast_inside_the_forward_is_replayed_in_float64(ops):
    # sin(x.float()): the forward itself, run in float64, is float32 inside, too coarse for differences (the
    # door's own Jacobian check has no reference); the judge replays the recorded ATen ops in float64
    r = _check(ops, "Cast32", [0.3, 1.2, 2.5], [1.0, 1.0, 1.0])
    status = _status(r)
    assert status["finite_difference"] == "agree" and status["jacobian"] == "skipped", r.events[0].checks
    assert r.exit_code == 0
    assert r.events[0].inputs[0].finite_difference == pytest.approx(torch.cos(torch.tensor([0.3, 1.2, 2.5])).tolist())
    from vjp_explorer.verdicts import headline

    assert headline(r.events[0].checks).startswith("1 independent route agrees")


@pytest.mark.parametrize("name", ["AbsG"])
def test_a_backward_of_the_absolute_value_of_grad_output_is_not_linear(ops, name):
    r = _check(ops, name, [1.0, 2.0, 3.0], [1.0, 1.0, 1.0])  # every one-hot row and v = ones agree
    assert _status(r)["linearity"] == "disagree" and r.exit_code == 3
    assert "backward(v + r)" in (r.events[0].diagnosis or "")


def test_linearity_is_checked_past_the_size_where_j_is_built(ops):
    x = torch.linspace(0, 3, 3000)
    obj, label = load_target(f"{ops}:SquareG")
    r = check(obj, x, v=torch.ones(3000), label=label)
    assert _status(r)["linearity"] == "disagree" and r.exit_code == 3
    assert "not linear in v" in (r.events[0].diagnosis or "")


def test_a_backward_that_ignores_grad_output_is_named_so(ops):
    r = _check(ops, "IgnoreG", [1.0, 2.0, 3.0], [0.5, 1.0, 2.0])
    assert r.exit_code == 3 and "ignores grad_output" in (r.events[0].diagnosis or "")


def test_the_verdict_line_names_finite_differences_not_sympy(vjp, ops):
    res = vjp("check", f"{ops}:Relu", "--x", "-1,0,2", "--grad", "1,1,1")
    assert res.exit_code == 0, res.output
    assert "sympy" not in res.stdout and "independent route" in res.stdout


def test_what_the_module_prints_goes_to_stderr_made_visible(vjp, ops):
    res = vjp("check", f"{ops}:loud", "--x", "1,2", "--json")
    doc = json.loads(res.stdout)  # stdout is the document only
    assert doc["kind"] == "check" and res.exit_code == 0
    assert "imported" in res.stderr and "called" in res.stderr and "\x1b" not in res.stderr


def test_a_program_whose_differences_compare_nothing_has_no_agreeing_route(vjp):
    res = vjp("run", "relu(x)", "--x", "0,0", "--grad", "ones", "--no-symbolic", "--json")
    doc = json.loads(res.stdout)
    assert doc["events"][0]["checks"]["finite_difference"]["status"] == "skipped"
    assert res.exit_code == 0


def test_grad_ones_given_is_said_to_be_given(vjp, ops):
    def origin(*grad):
        res = vjp("check", f"{ops}:Relu", "--x", "1,2", *grad, "--json")
        return json.loads(res.stdout)["events"][0]["v_origin"]

    assert origin("--grad", "ones") == "ones" and origin() == "ones (default)"


def test_a_function_in_setup_context_form_takes_its_forwards_parameters(vjp, ops):
    """forward(x) with setup_context has no ctx to drop: `--x` is its parameter (it read 'takes none')."""
    res = vjp("check", f"{ops}:Cube", "--x", "1,2,-1.5", "--grad", "1,1,1", "--json")
    assert res.exit_code == 0, res.stderr
    (x,) = json.loads(res.stdout)["events"][0]["inputs"]
    assert x["grad"] == [3.0, 12.0, 6.75]  # 3x²
