"""Forward-mode AD (torch.autograd.forward_ad) as a JVP event, checked against finite differences.

The snippet is PyTorch's own forward-mode tutorial; the oracle is the hand-derived Ju = 2·primal·tangent.
A custom Function with a wrong jvp formula must disagree.
"""

from __future__ import annotations

import pytest
import torch

from test_confined_observe import observe

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch's

TUTORIAL = """
import torch
import torch.autograd.forward_ad as fwAD
torch.manual_seed(0)
primal = torch.randn(4, 3)
tangent = torch.randn(4, 3)
def fn(x, y):
    return x ** 2 + y ** 2
plain_tensor = torch.randn(4, 3)
with fwAD.dual_level():
    dual_input = fwAD.make_dual(primal, tangent)
    dual_output = fn(dual_input, plain_tensor)
    jvp = fwAD.unpack_dual(dual_output).tangent
"""


def test_the_forward_mode_tutorial_is_one_jvp_event_that_agrees():
    (event,), ns = observe(TUTORIAL)
    assert event["call"] == "torch.autograd.forward_ad.unpack_dual"
    want = 2 * ns["primal"].double() * ns["tangent"].double()
    (got,), (ref,) = event["results"], event["reference"]
    assert torch.tensor(got["values"], dtype=torch.float64).allclose(want, atol=1e-5)
    assert torch.tensor(ref["values"], dtype=torch.float64).allclose(want, rtol=1e-8, atol=1e-9)
    assert [c["status"] for c in event["checks"]] == ["agree"]
    assert ns["jvp"].double().allclose(want, atol=1e-5)  # the snippet's result is Python's


def test_a_custom_function_with_a_wrong_jvp_disagrees():
    src = """
import torch
import torch.autograd.forward_ad as fwAD
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_forward(y)
        return y
    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y * 2
x = torch.tensor([0.0, 1.0])
with fwAD.dual_level():
    out = Exp.apply(fwAD.make_dual(x, torch.ones(2)))
    t = fwAD.unpack_dual(out).tangent
"""
    (event,), _ = observe(src)
    (ref,) = event["reference"]
    assert ref["values"] == pytest.approx([1.0, torch.tensor(1.0).exp().item()], rel=1e-7)
    assert [c["status"] for c in event["checks"]] == ["disagree"]
