"""autograd.grad inside torch.vmap: one event with the batch shape, each sample's Jᵀv checked.

PyTorch's docs compute a Jacobian row by row as vmap of a vjp (`torch.autograd.grad` with a batch of v,
the pattern `is_grads_batched=True` names); the reference is J by central differences of the replayed
forward, and the oracle for the numbers is cos, the derivative of sin, by hand.
"""

from __future__ import annotations

import pytest
import torch

from test_confined_observe import observe

VJP_IN_VMAP = """
import torch
torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = x.sin()
def vjp(v):
    return torch.autograd.grad(y, x, v, retain_graph=True)[0]
jac = torch.vmap(vjp)(torch.eye(3))
"""


def test_a_vjp_in_vmap_is_one_event_with_the_batch_shape():
    (event,), ns = observe(VJP_IN_VMAP)
    assert event["call"] == "torch.autograd.grad in torch.vmap"
    assert event["v"][0]["shape"] == [3, 3] and any("batch of 3" in n for n in event["notes"])
    want = torch.diag(torch.cos(ns["x"].detach().double()))
    (got,) = event["results"]
    assert torch.tensor(got["values"], dtype=torch.float64).allclose(want, atol=1e-6)
    (ref,) = event["reference"]
    assert torch.tensor(ref["values"], dtype=torch.float64).allclose(want, atol=1e-8)
    # the judge's checks of the batch, contracted by random weights (functional_judged.batch_record)
    assert {c["name"]: c["status"] for c in event["checks"]} == {"jtv": "agree", "finite_difference": "agree"}
    assert ns["jac"].double().allclose(want, atol=1e-6)  # the snippet's own result, as Python computes it


# a custom Function whose backward is off by FACTOR (2: wrong, 1: right), its vjp taken for a batch of v
SIN = """import torch
class Sin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * FACTOR
    @staticmethod
    def vmap(info, in_dims, x):
        return Sin.apply(x), in_dims[0]
x = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
y = Sin.apply(x)
jac = torch.vmap(lambda v: torch.autograd.grad(y, x, v, retain_graph=True)[0])(torch.eye(3))
"""


def test_a_wrong_batched_gradient_disagrees():
    """A custom Function with a wrong backward, its vjp taken for a batch of v."""
    src = SIN.replace("FACTOR", "2")
    (event,), _ = observe(src)
    assert {c["name"]: c["status"] for c in event["checks"]} == {"jtv": "disagree", "finite_difference": "disagree"}
    (ref,) = event["reference"]
    assert torch.tensor(ref["values"], dtype=torch.float64).diagonal().tolist() == pytest.approx(
        torch.tensor([0.1, 0.2, 0.3]).double().cos().tolist(), rel=1e-8
    )


@pytest.mark.parametrize("route", ["none", "frame writer", "comparison routine", "finite-difference reference"])
def test_a_wrong_batched_gradient_disagrees_in_the_judge_however_the_snippet_rewrites_the_tool(route):
    """The batch goes to the judge contracted by random weights c: Σ_b c_b·grads[b] against
    Jᵀ(Σ_b c_b·v[b]) of the replayed forward, out of the snippet's reach."""
    from test_judge_tamper import REWRITES
    from vjp_explorer.confined.launch import confinement_available
    from vjp_explorer.snippet import run_snippet

    if confinement_available() is not None:
        pytest.skip("no confinement on this machine")
    attack = REWRITES.get(route, "")
    head, call = SIN.rsplit("jac = ", 1)  # the attack runs before the batched call
    for bad, want in ((True, "disagree"), (False, "agree")):
        src = head.replace("FACTOR", "2" if bad else "1") + attack + "jac = " + call
        r = run_snippet(src, seed=0, keep_partial=True)
        (event,) = r.events  # type: ignore[attr-defined]
        assert event.call == "torch.autograd.grad in torch.vmap"
        assert {c.name: c.status for c in event.checks} == {"jtv": want, "finite_difference": want}, (route, bad)
        assert all("replayed forward" in c.compares for c in event.checks)
        assert any("Σ_b c_b" in n for n in event.notes)
        assert r.exit_code == (3 if bad else 0)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("factor", "want", "code"), [("2", "disagree", 3), ("1", "agree", 0)])
def test_is_grads_batched_is_one_event_judged_as_a_batch(factor, want, code):
    """autograd.grad(..., is_grads_batched=True) broke the channel (its batched grads made an event whose
    grad did not fit its input); it is one event whose results hold one Jᵀv per row of v, judged as a batch."""
    from vjp_explorer.confined.launch import confinement_available
    from vjp_explorer.snippet import run_snippet

    if confinement_available() is not None:
        pytest.skip("no confinement on this machine")
    src = SIN.replace("FACTOR", factor).rsplit("jac = ", 1)[0] + (
        "(jac,) = torch.autograd.grad(y, x, torch.eye(3), is_grads_batched=True)\n"
        "print([round(t, 6) for t in jac.diagonal().tolist()])\n"
    )
    r = run_snippet(src, seed=0)
    cos = [round(float(c) * int(factor), 6) for c in torch.tensor([0.1, 0.2, 0.3]).cos()]
    assert r.stdout == f"{cos}\n"
    (event,) = r.events
    assert event.call == "torch.autograd.grad" and [res.shape for res in event.results] == [[3, 3]]
    assert {c.name: c.status for c in event.checks} == {"jtv": want, "finite_difference": want}
    assert r.exit_code == code
