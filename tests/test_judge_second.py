"""Second derivatives judged out of the snippet's reach: a Hessian (torch.func.hessian,
torch.autograd.functional.hessian, jacrev(jacrev(f)), grad(grad(f))) of a one-number function of one input
goes to the judge as the function's recorded forward and the call's ∂²f/∂x², and the judge checks uᵀHw for
random u, w against central second differences of the replayed forward (no autograd).

These calls were checked in the snippet's process only, so a snippet that rewrote the tool's comparison
there could turn a wrong second derivative into `agree`. The oracle is hand-derived: for
f(x) = Σx³ + x₀x₁x₂ at x = [1, 2, 3], H = diag(6x) + the product's Hessian [[0, x₂, x₁], [x₂, 0, x₀], [x₁,
x₀, 0]]; the planted cube's backward detaches x, so autograd's Hessian of Σcube(x) is 0 where 6x is right.
"""

from __future__ import annotations

import pytest
import torch

from test_judge_functional import ROUTES
from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

RIGHT = """import torch

def f(x):
    return (x ** 3).sum() + x.prod()

x = torch.tensor([1.0, 2.0, 3.0])
H1 = torch.func.hessian(f)(x)
H2 = torch.autograd.functional.hessian(f, x)
H3 = torch.func.jacrev(torch.func.jacrev(f))(x)
d2 = torch.func.grad(torch.func.grad(lambda s: s ** 3 * torch.sin(s)))(torch.tensor(0.7))
print(H1[0].tolist(), H2[1].tolist(), H3[2].tolist(), round(float(d2), 4))
"""
RIGHT_NAMES = ["torch.func.hessian", "torch.autograd.functional.hessian", "torch.func.jacrev", "torch.func.grad"]

PLANTED = """import torch


class Cube(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * g  # planted: right at first order, its own derivative lost


x = torch.tensor([1.0, 2.0, 3.0])
"""
CALLS = """
H1 = torch.func.jacrev(torch.func.jacrev(lambda t: Cube.apply(t).sum()))(x)
H2 = torch.autograd.functional.hessian(lambda t: Cube.apply(t).sum(), x)
print(H1.abs().sum().item(), H2.abs().sum().item())
"""


def fd(event):
    return {c.name: c for c in event.checks}["finite_difference"]


def test_right_second_derivatives_are_judged_and_agree():
    r = run_snippet(RIGHT, seed=0)
    # by hand: H[0] = [6·1, x₂, x₁] = [6, 3, 2]; H[1] = [3, 12, 1]; H[2] = [2, 1, 18];
    # d²/ds²(s³ sin s) = 6s sin s + 6s² cos s − s³ sin s at s = 0.7
    import math

    s = 0.7
    second = 6 * s * math.sin(s) + 6 * s**2 * math.cos(s) - s**3 * math.sin(s)
    assert r.stdout == f"[6.0, 3.0, 2.0] [3.0, 12.0, 1.0] [2.0, 1.0, 18.0] {round(second, 4)}\n"
    assert [e.call for e in r.events] == RIGHT_NAMES
    for event in r.events:
        check = fd(event)
        assert check.status == "agree", (event.call, check)
        assert "second differences of the replayed forward" in check.compares and check.independent
        assert not any("snippet's word" in n for n in event.notes)
    assert r.exit_code == 0


def test_a_wrong_second_derivative_disagrees_in_the_judge():
    r = run_snippet(PLANTED + CALLS, seed=0)
    assert r.stdout == "0.0 0.0\n"  # plain torch: the planted backward's Hessian is 0
    for event in r.events:
        check = fd(event)
        assert check.status == "disagree", (event.call, check)
        assert "second differences of the replayed forward" in check.compares
    assert r.exit_code == 3


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_wrong_second_derivative_still_disagrees_however_the_snippet_rewrites_the_tool(route):
    r = run_snippet(PLANTED + ROUTES[route] + CALLS, seed=0, keep_partial=True)
    assert r.stdout == "0.0 0.0\n" and r.stopped is None  # type: ignore[attr-defined]
    assert [e.call for e in r.events] == ["torch.func.jacrev", "torch.autograd.functional.hessian"]  # type: ignore[attr-defined]
    assert all(fd(e).status == "disagree" for e in r.events)  # type: ignore[attr-defined]
    assert r.exit_code == 3  # type: ignore[attr-defined]


def test_a_second_derivative_in_two_arguments_stays_the_snippets_word():
    """∂²f/∂x∂y (argnums 0 then 1) has no record form yet: the child's check, said to be the child's."""
    src = """import torch
f = lambda x, y: (x * y ** 2).sum()
x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
M = torch.func.jacrev(torch.func.grad(f, argnums=0), argnums=1)(x, y)
print(M.tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[[6.0, 0.0], [0.0, 8.0]]\n"  # ∂²/∂y_j∂x_i of Σ x_i y_i² = 2 y_i δ_ij
    (event,) = r.events
    assert fd(event).status == "agree" and any("snippet's word" in n for n in event.notes)
    assert r.exit_code == 0


TWO = """
g = lambda a, b: (Cube.apply(a) * b).sum()
y = torch.tensor([2.0, -1.0, 0.5])
H = torch.autograd.functional.hessian(g, (x, y))
G = torch.func.jacrev(torch.func.jacrev(g, argnums=(0, 1)), argnums=(0, 1))(x, y)
print([b.diagonal().tolist() for row in H for b in row], bool(torch.equal(G[0][1], H[0][1])))
"""


def test_a_hessian_of_several_inputs_goes_to_the_judge_as_one_joined_matrix():
    """hessian(g, (x, y)) returns blocks ∂²g/∂x_a∂x_b; the judge checks them joined as one N × N matrix, so a
    planted backward (∂²/∂x² = 0 where 6x·y is right) disagrees, and the right blocks of f agree."""
    r = run_snippet(PLANTED + TWO, seed=0)
    # by hand, g = Σ x³·y: ∂²g/∂x² = diag(6x·y), planted 0; ∂²g/∂x∂y = diag(3x²); ∂²g/∂y² = 0
    assert r.stdout == "[[0.0, 0.0, 0.0], [3.0, 12.0, 27.0], [3.0, 12.0, 27.0], [0.0, 0.0, 0.0]] True\n"
    assert [e.call for e in r.events] == ["torch.autograd.functional.hessian", "torch.func.jacrev"]
    for event in r.events:
        assert fd(event).status == "disagree", (event.call, fd(event))
        assert "second differences of the replayed forward" in fd(event).compares
        assert not any("snippet's word" in n for n in event.notes)
    right = run_snippet(
        TWO.replace("Cube.apply(a)", "a ** 3").replace(
            "\ng = ", "import torch\nx = torch.tensor([1.0, 2.0, 3.0])\ng = ", 1
        ),
        seed=0,
    )
    assert right.stdout.startswith("[[12.0, -12.0, 9.0], [3.0, 12.0, 27.0]")
    assert all(fd(e).status == "agree" for e in right.events) and right.exit_code == 0


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_wrong_joined_hessian_still_disagrees_however_the_snippet_rewrites_the_tool(route):
    r = run_snippet(PLANTED + ROUTES[route] + TWO, seed=0, keep_partial=True)
    assert r.stdout.endswith("True\n") and r.stopped is None  # type: ignore[attr-defined]
    assert len(r.events) == 2 and all(fd(e).status == "disagree" for e in r.events)  # type: ignore[attr-defined]
    assert r.exit_code == 3  # type: ignore[attr-defined]


def test_the_judges_second_differences_match_a_hand_derived_contraction():
    """The engine's directional second difference, the judge's reference: uᵀHw of Σx³ is Σ 6xᵢuᵢwᵢ."""
    from vjp_explorer.engine.finite_diff import second_directional

    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    u = torch.tensor([0.3, 1.0, -0.7], dtype=torch.float64)
    w = torch.tensor([-1.2, 0.4, 2.0], dtype=torch.float64)
    ref, err = second_directional(lambda t: (t**3).sum().reshape(1), x, u, w)  # type: ignore[misc]
    assert ref == pytest.approx(float((6 * x * u * w).sum()), rel=1e-7) and 0 <= err < 1e-5
    kinked = second_directional(lambda t: t.abs().sum().reshape(1), torch.zeros(3, dtype=torch.float64), u, w)
    assert isinstance(kinked, str)  # |x| at 0: the two steps disagree, no reference
