"""Second order as autograd does it: a create_graph gradient keeps its dependence on its inputs in the replay.

A MAML inner step `fast = w - lr * grad(inner, w, create_graph=True)` makes the outer loss a function of w
through the gradient too; the reference must differentiate through it. The oracle is hand-derived: for a
least-squares loss L(w) = |Xw - y|²/m the outer gradient is (I - lr·H)ᵀ ∇L_out(fast) with H = 2XᵀX/m.
"""

from __future__ import annotations

import pytest
import torch

from test_confined_observe import checks, observe

MAML = """
import torch
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
x = torch.tensor([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]])
y = torch.tensor([1.0, -2.0])
xq = torch.tensor([[0.2, 1.0, -1.0], [2.0, 0.1, 0.4]])
yq = torch.tensor([0.5, 1.5])
inner = ((x @ w - y) ** 2).mean()
(g,) = torch.autograd.grad(inner, w, create_graph=True)
fast = w - 0.1 * g
outer = ((xq @ fast - yq) ** 2).mean()
outer.backward()
"""


def _by_hand() -> list[float]:
    w = torch.tensor([0.5, -1.0, 2.0]).double()  # the float32 numbers the snippet holds, exactly
    x = torch.tensor([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]).double()
    y = torch.tensor([1.0, -2.0]).double()
    xq = torch.tensor([[0.2, 1.0, -1.0], [2.0, 0.1, 0.4]]).double()
    yq = torch.tensor([0.5, 1.5]).double()
    g = 2 * x.T @ (x @ w - y) / 2
    fast = w - 0.1 * g
    h = 2 * x.T @ x / 2
    outer_grad = 2 * xq.T @ (xq @ fast - yq) / 2
    return ((torch.eye(3, dtype=torch.float64) - 0.1 * h).T @ outer_grad).tolist()


def test_a_maml_step_is_checked_through_its_inner_gradient():
    events, ns = observe(MAML)
    inner, outer = events
    want = _by_hand()
    assert ns["w"].grad.tolist() == pytest.approx(want, rel=1e-5)  # autograd is right
    assert outer["inputs"][0]["finite_difference"] == pytest.approx(want, rel=1e-7)
    assert outer["inputs"][0]["jtv"] == pytest.approx(want, rel=1e-9)
    assert checks(inner) == checks(outer) == {"jtv": "agree", "finite_difference": "agree"}


MAML_LOOP = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
params = dict(net.named_parameters())
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(4):
    xs, ys = torch.randn(5, 4), torch.randn(5, 1)
    loss = ((torch.func.functional_call(net, params, (xs,)) - ys) ** 2).mean()
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
    fast = {k: p - 0.1 * g for (k, p), g in zip(params.items(), grads)}
    xq, yq = torch.randn(5, 4), torch.randn(5, 1)
    outer = ((torch.func.functional_call(net, fast, (xq,)) - yq) ** 2).mean()
    opt.zero_grad()
    outer.backward()
    opt.step()
"""


def test_a_maml_loop_through_a_tanh_network_agrees_at_every_checked_call():
    events, _ = observe(MAML_LOOP)
    assert len(events) == 8
    outer = events[1::2]
    for e in outer[:3]:  # the first three calls of a line are checked in full
        assert checks(e)["finite_difference"] == "agree", e["checks"]
    assert "disagree" not in [c["status"] for e in events for c in e["checks"]]


def test_a_custom_backward_wrong_only_at_second_order_disagrees():
    """A custom square whose backward detaches x: right at first order (the inner call agrees), wrong at
    second (the outer call misses the Hessian term), and the reference through the recomputed inner
    gradient says so."""
    src = """
import torch
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x.detach()
w = torch.tensor([0.5, -1.0], requires_grad=True)
inner = Square.apply(w).sum()
(g,) = torch.autograd.grad(inner, w, create_graph=True)
outer = ((w - 0.1 * g) ** 2).sum()
outer.backward()
"""
    inner, outer = observe(src)[0]
    assert checks(inner)["finite_difference"] == "agree"
    # by hand: fast = w - 0.2w = 0.8w, outer = Σ(0.8w)², d/dw = 2·0.8·0.8·w = 1.28w
    assert outer["inputs"][0]["finite_difference"] == pytest.approx([0.64, -1.28], rel=1e-7)
    assert checks(outer)["finite_difference"] == "disagree"
