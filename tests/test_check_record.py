"""`vjp check` builds the one call record and the one judge checks it (trusted_judge.py), as it checks a custom
Function's call in a snippet; where the forward leaves torch, the door's own reference stands in, said so.

The references are by hand: d(x³)/dx = 3x², and a ReLU's derivative is 1 above 0 and 0 below.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from vjp_explorer import calls
from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet import run_snippet
from vjp_explorer.trusted import check, load_target
from vjp_explorer.trusted_judge import record_of

MODULE = textwrap.dedent(
    """
    import torch


    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g


    class ViaNumpy(Cube):  # the right backward of a forward computed in numpy: no op log reaches the output
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.from_numpy(x.detach().numpy() ** 3)


    class ViaItem(Cube):  # a wrong backward (2x² where 3x² is right) of a forward that reads .item()
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            s = x.sum().item()
            return x ** 3 + 0 * s

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x ** 2 * g


    class Unread(torch.autograd.Function):  # y = 2x; a gradient for b, which the forward never reads
        @staticmethod
        def forward(ctx, x, b):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g, torch.ones(3)


    class Relu(torch.autograd.Function):  # the textbook ReLU: its derivative at 0 is taken as 0
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x > 0)


    class ReluPlus(torch.autograd.Function):  # relu(x) + 3x: at 0 any value in [3, 4] is a one-sided one
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0) + 3 * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.where(x == 0, torch.full_like(x, AT_ZERO), 3 + (x > 0).to(x.dtype))


    AT_ZERO = 3.0


    class Drop(torch.autograd.Function):  # dropout: each call draws its own mask
        @staticmethod
        def forward(ctx, x):
            m = (torch.rand_like(x) > 0.5).to(x.dtype)
            ctx.save_for_backward(m)
            return x * m

        @staticmethod
        def backward(ctx, g):
            (m,) = ctx.saved_tensors
            return g * m


    class DropForgetting(Drop):  # wrong: the mask is left out of the backward
        @staticmethod
        def backward(ctx, g):
            return g


    def noisy(x):  # plain autograd through a draw: torch's backward is right for the draw it made
        return torch.nn.functional.dropout(x * torch.randn_like(x), p=0.5, training=True)


    class ReluTwice(Relu):  # wrong above 0 (2 where 1 is right), right at the kink
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * (x > 0)
    """
)
X = torch.tensor([1.0, 2.0, -1.5])


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "record_ops.py"
    path.write_text(MODULE)
    return path


def _check(ops, name, *xs):
    obj, label = load_target(f"{ops}:{name}")
    return check(obj, *xs, label=label)


def _status(r):
    return {c.name: c.status for c in r.events[0].checks}


def test_the_record_is_the_one_record_and_replays_the_forward(ops):
    obj, _ = load_target(f"{ops}:Cube")
    x = X.clone().requires_grad_()
    g = 3 * X**2
    record = record_of(obj.apply, [x], [x], torch.ones(3), [g], ["x"])
    assert calls.validate_record(record) == record  # the schema every door's record meets
    assert record["forward"] is not None and record["unreplayable"] is None and record["names"] == ["x"]
    assert [op[0] for op in record["forward"]["ops"]] == ["aten::pow.Tensor_Scalar"]


def test_the_judge_checks_a_custom_function_of_vjp_check(ops):
    r = _check(ops, "Cube", X)
    assert r.exit_code == 0 and _status(r) == {
        "jtv": "agree",
        "finite_difference": "agree",
        "linearity": "agree",
        "jacobian": "agree",
    }
    (x,) = r.events[0].inputs
    assert x.jtv == pytest.approx((3 * X.double() ** 2).tolist(), rel=1e-12)  # autograd of the replayed x³
    assert torch.tensor(x.jacobian, dtype=torch.float64).allclose(torch.diag(3 * X.double() ** 2), rtol=1e-12)


def test_a_forward_in_numpy_falls_back_to_the_forward_itself_and_says_so(ops):
    r = _check(ops, "ViaNumpy", X)
    assert r.exit_code == 0 and _status(r) == {"finite_difference": "agree", "linearity": "agree", "jacobian": "agree"}
    assert any("cannot replay this forward" in n and "the forward itself" in n for n in r.events[0].notes)
    assert r.events[0].inputs[0].finite_difference == pytest.approx((3 * X.double() ** 2).tolist(), rel=1e-8)


def test_a_number_read_in_the_forward_is_no_replay_and_the_wrong_backward_is_caught(ops):
    r = _check(ops, "ViaItem", X)
    assert r.exit_code == 3 and _status(r)["finite_difference"] == "disagree"
    assert any("Python number" in n for n in r.events[0].notes)


def test_a_gradient_of_an_input_the_forward_never_reads_is_wrong(ops):
    # the judge calls the record inconsistent (unverified); the forward itself says the gradient of b is 0
    r = _check(ops, "Unread", X, torch.zeros(3))
    assert r.exit_code == 3 and _status(r)["finite_difference"] == "disagree"
    assert any("never read" in n for n in r.events[0].notes)


def test_a_custom_relu_at_its_kink_is_a_convention_not_a_mistake(ops):
    at = torch.tensor([-1.0, 0.0, 2.0])
    right = _check(ops, "Relu", at)
    assert right.exit_code == 0 and right.events[0].inputs[0].grad == [0.0, 0.0, 1.0]
    assert all("x[1]" in c.reason and "kink" in c.reason for c in right.events[0].checks[:2])
    wrong = _check(ops, "ReluTwice", at)  # wrong where the function is smooth: still wrong
    assert wrong.exit_code == 3 and _status(wrong)["jtv"] == "disagree" and "x[2]" in wrong.events[0].checks[0].reason


def test_the_largest_relative_difference_is_measured(ops):
    r = _check(ops, "ViaItem", X)  # 2x² against 3x²: every element off by a third of its reference
    assert r.events[0].checks[0].max_rel_diff == pytest.approx(1 / 3, rel=1e-6)


@pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")
def test_the_snippet_door_takes_the_same_convention_at_a_kink(ops):
    src = MODULE + textwrap.dedent(
        """
        x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        Relu.apply(x).sum().backward()
        print(x.grad)
        y = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        ReluTwice.apply(y).sum().backward()
        """
    )
    r = run_snippet(src, seed=0)
    assert r.stdout == "tensor([0., 0., 1.])\n" and r.exit_code == 3
    right, wrong = r.events
    assert right.status == "agree" and any("kink" in (c.reason or "") for c in right.checks)
    assert wrong.status == "disagree" and "y[2]" in (wrong.checks[0].reason or "")


@pytest.mark.parametrize(("at_zero", "code"), [(3.0, 0), (4.0, 0), (3.5, 0), (-1000.0, 3), (5.0, 3)])
def test_at_a_kink_only_a_value_between_the_one_sided_derivatives_passes(ops, at_zero, code):
    import importlib.util

    spec = importlib.util.spec_from_file_location("kink_ops", ops)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.AT_ZERO = at_zero
    r = check(module.ReluPlus, torch.tensor([0.0, 1.0, -2.0]), label="ReluPlus")
    assert r.exit_code == code, r.events[0].checks


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("name", "code"), [("Drop", 0), ("noisy", 0), ("DropForgetting", 3)])
def test_a_random_forward_is_checked_as_the_draw_the_call_made(ops, name, code, dtype):
    """Every run of the forward starts from the same generator state, so the probes and the replay are of the
    call's own draw (it was a false 'backward is not linear in v', exit 3, on torch's own dropout); the
    caller's generator is left as it was. In float32, a float64 run would draw other numbers: the door's own
    Jacobian check is skipped, saying so; the judge's replay holds the draw fixed and decides."""
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    r = _check(ops, name, torch.arange(1.0, 9.0, dtype=dtype))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert r.exit_code == code, r.events[0].checks
    status = _status(r)
    assert status["jtv"] == status["finite_difference"] == ("agree" if code == 0 else "disagree")
    assert status["linearity"] == "agree"
    assert status["jacobian"] == ("skipped" if dtype == torch.float32 else "agree" if code == 0 else "disagree")
    assert any("draws the same numbers" in n for n in r.events[0].notes)
