"""Functional calls judged out of the snippet's reach: a planted wrong custom backward (4x where 2x is right)
reached through torch.func.vjp, torch.autograd.functional.vjp, torch.func.grad, torch.func.jacrev and
torch.autograd.functional.jacobian (J, judged as Jᵀv for a random v), run by snippets that
attack the tool inside their own process, as a hostile snippet would write them.

These calls were checked in the snippet's process (confined/functional.py), so patching its comparison or
its finite differences there turned a wrong backward into `agree`. Now the child only records the function's
forward and the call's result, and the judge checks them (confined/functional._judged): each route still
gets `disagree`, exit 3; a call whose record is held back is unverified, exit 2. The reference is
hand-derived: d(x²)/dx = 2x, so at x = [1, 2, 3] the grads are [2, 4, 6]; the planted backward gives 4x.
"""

from __future__ import annotations

import pytest

from test_judge_tamper import AGREE, REWRITES
from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.errors import ProgramError
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

# the setup_context form: torch.func's transforms take no other
PLANTED = """import torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 4 * x * g  # planted: 2 * x * g is right


x = torch.tensor([1.0, 2.0, 3.0])
"""
CALLS = """
_, vjp_fn = torch.func.vjp(Square.apply, x)
(g1,) = vjp_fn(torch.ones(3))
_, g2 = torch.autograd.functional.vjp(Square.apply, x, torch.ones(3))
g3 = torch.func.grad(lambda t: Square.apply(t).sum())(x)
J1 = torch.func.jacrev(Square.apply)(x)
J2 = torch.autograd.functional.jacobian(Square.apply, x)
print(g1, g2, g3, J1.diagonal(), J2.diagonal())
"""
NAMES = [
    "torch.func.vjp",
    "torch.autograd.functional.vjp",
    "torch.func.grad",
    "torch.func.jacrev",
    "torch.autograd.functional.jacobian",
]
PLANTED_GRADS = " ".join(["tensor([ 4.,  8., 12.])"] * 5)  # plain torch: 4x, and J's diagonal 4x

ROUTES = {
    **{name: REWRITES[name] for name in ("frame writer", "comparison routine", "finite-difference reference")},
    "the functional checker": """
import vjp_explorer.confined.functional as functional
from vjp_explorer.verdicts import Check
def forged(event, kind, refs, got, dtype, compares, independent):
    event.checks.append(Check("finite_difference", "agree", compares))
functional._compare = forged
""",
}


def run(attack: str) -> object:
    return run_snippet(PLANTED + attack + CALLS, seed=0, keep_partial=True)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_functional_call_of_a_wrong_backward_still_disagrees_however_the_snippet_rewrites_the_tool(route):
    r = run(ROUTES[route])
    assert r.stdout.strip() == PLANTED_GRADS  # type: ignore[attr-defined]
    assert r.stopped is None, r.stopped and r.stopped.message  # type: ignore[attr-defined]
    assert [e.call for e in r.events] == NAMES  # type: ignore[attr-defined]
    for event in r.events:  # type: ignore[attr-defined]
        fd = {c.name: c for c in event.checks}["finite_difference"]
        assert fd.status == "disagree", (event.call, fd)
        assert "factor 2" in (fd.reason or "")  # 4x against 2x, element by element
    assert r.exit_code == 3  # type: ignore[attr-defined]


def test_a_functional_call_whose_record_is_held_back_is_unverified():
    attack = """
import vjp_explorer.confined.protocol as protocol
real_write = protocol.write_frame
def write_frame(fd, message):
    if message.get("type") != "record":  # the records never leave; the events (checks forged) do
        if message.get("type") == "event":
            message["event"]["checks"] = [CHECK]
        real_write(fd, message)
protocol.write_frame = write_frame
""".replace("CHECK", AGREE)
    r = run(attack)
    assert r.exit_code == 2 and isinstance(r.stopped, ProgramError)  # type: ignore[attr-defined]
    for name in NAMES:
        assert f"({name}, line" in r.stopped.message  # type: ignore[attr-defined]
    assert "without the record of its forward" in r.stopped.message  # type: ignore[attr-defined]
    assert all(c.status != "agree" for e in r.events for c in e.checks)  # type: ignore[attr-defined]


def test_a_backward_call_whose_record_claims_the_child_checked_it_still_gets_no_agree():
    """The mark a derivative of a derivative's record carries (its check stays the child's) is believed of a
    functional call only: forged onto a backward call's record, with a forged `agree`, it changes nothing."""
    from test_judge_tamper import PLANTED as BACKWARD
    from vjp_explorer.calls import CHECKED_IN_CHILD

    forge = f"""
protocol.write_frame = real_write
held["record"]["record"].update(forward=None, unreplayable={CHECKED_IN_CHILD!r}, outputs=[], v=[], at=[],
                                grads=[], before=[], names=[])
held["message"]["event"]["checks"] = [{AGREE}]
put(held["record"])
put(held["message"])
"""
    src = BACKWARD + REWRITES["a forged event on the channel, checks only"] + "Square.apply(x).sum().backward()\n"
    r = run_snippet(src + forge, seed=0, keep_partial=True)
    (event,) = r.events  # type: ignore[attr-defined]
    assert [c.status for c in event.checks] == ["skipped"]  # the judge's: nothing to replay, said why
    assert not any("snippet's word" in n for n in event.notes)


VMAPPED = """
Square.generate_vmap_rule = True  # vmap needs it of a custom Function
xs = torch.stack([x, 2 * x])
G = torch.func.vmap(torch.func.grad(lambda t: Square.apply(t).sum()))(xs)
J = torch.func.vmap(torch.func.jacrev(Square.apply))(xs)
print(G.tolist(), J.diagonal(dim1=1, dim2=2).tolist())
"""


@pytest.mark.parametrize("route", ["none", *sorted(ROUTES)])
def test_a_wrong_backward_under_vmap_still_disagrees_however_the_snippet_rewrites_the_tool(route):
    """vmap(grad(f)) and vmap(jacrev(f)) go to the judge as one function of the whole batch (the samples
    summed, or stacked with J block-diagonal): per sample 4x where 2x is right, so factor 2 again."""
    r = run_snippet(PLANTED + ROUTES.get(route, "") + VMAPPED, seed=0, keep_partial=True)
    want = [[4.0, 8.0, 12.0], [8.0, 16.0, 24.0]]
    assert r.stdout == f"{want} {want}\n" and r.stopped is None  # type: ignore[attr-defined]
    assert [e.call for e in r.events] == ["torch.func.vmap"] * 2  # type: ignore[attr-defined]
    for event in r.events:  # type: ignore[attr-defined]
        fd = {c.name: c for c in event.checks}["finite_difference"]
        assert fd.status == "disagree" and "replayed forward" in fd.compares, (event.call, fd)
        assert not any("snippet's word" in n for n in event.notes)
    assert r.exit_code == 3  # type: ignore[attr-defined]


def test_right_derivatives_under_vmap_are_judged_and_agree():
    src = """import torch
from torch.func import grad, jacfwd, vmap
xs = torch.tensor([[0.1, 0.2, 0.3], [1.0, -1.0, 2.0]], dtype=torch.float64)
G = vmap(grad(lambda t, s: (torch.sin(t) * t).sum() * s), in_dims=(0, None))(xs, torch.tensor(2.0))
K = vmap(jacfwd(lambda t: t ** 3))(xs)
print(G[1].tolist(), K[1].diagonal().tolist())
"""
    import math

    r = run_snippet(src, seed=0)
    row = [1.0, -1.0, 2.0]  # d/dt 2·t·sin t = 2(sin t + t cos t); d(t³) = 3t²
    g = [2 * (math.sin(t) + t * math.cos(t)) for t in row]
    assert r.stdout == f"{g} {[3 * t * t for t in row]}\n"
    for event in r.events:
        fd = {c.name: c for c in event.checks}["finite_difference"]
        assert fd.status == "agree" and "replayed forward" in fd.compares
        assert not any("snippet's word" in n for n in event.notes)
    assert r.exit_code == 0


def test_a_hessian_under_vmap_stays_the_snippets_word():
    src = """import torch
H = torch.func.vmap(torch.func.hessian(lambda t: (t ** 3).sum()))(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
print(H[1].tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[[18.0, 0.0], [0.0, 24.0]]\n"
    (event,) = r.events
    assert any("snippet's word" in n for n in event.notes) and r.exit_code == 0
