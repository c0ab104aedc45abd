"""Forward mode judged out of the snippet's reach: Ju from torch.func.jvp, torch.autograd.functional.jvp and
torch.autograd.forward_ad (make_dual ... unpack_dual(...).tangent) goes to the judge as the function's
recorded forward, the tangents u and the call's Ju (calls.TANGENT), and the judge compares Ju element by
element with central differences of the replayed forward along u (no autograd, engine/finite_diff).

These calls were checked in the snippet's process only, so a snippet that rewrote the tool's comparison
there could turn a wrong forward-mode formula into `agree`. The oracle is hand-derived: for
f(x, y) = sin(x)·y + x², Ju = (cos(x)·y + 2x)·u_x + sin(x)·u_y; the planted Function's jvp gives 4x·t where
d(x²) = 2x·t is right.
"""

from __future__ import annotations

import math

import pytest

from test_judge_functional import ROUTES
from vjp_explorer.calls import RecordError, validate_record
from vjp_explorer.confined.checks import TANGENT
from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

RIGHT = """import torch
import torch.autograd.forward_ad as fwad

def f(x, y):
    return torch.sin(x) * y + x ** 2

x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
y = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
u = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
w = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
_, a = torch.func.jvp(f, (x, y), (u, w))
_, b = torch.autograd.functional.jvp(f, (x, y), (u, w))
with fwad.dual_level():
    c = fwad.unpack_dual(f(fwad.make_dual(x, u), fwad.make_dual(y, w))).tangent
print([round(t, 6) for t in a.tolist()], bool((a == b).all()), bool((a == c).all()))
"""
RIGHT_NAMES = ["torch.func.jvp", "torch.autograd.functional.jvp", "torch.autograd.forward_ad.unpack_dual"]

PLANTED = """import torch
import torch.autograd.forward_ad as fwad


class Square(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 4 * x * t  # planted: 2 * x * t is right


x = torch.tensor([1.0, 2.0, 3.0])
u = torch.ones(3)
"""
CALLS = """
_, a = torch.func.jvp(Square.apply, (x,), (u,))
with fwad.dual_level():
    c = fwad.unpack_dual(Square.apply(fwad.make_dual(x, u))).tangent
print(a.tolist(), c.tolist())
"""
PLANTED_NAMES = ["torch.func.jvp", "torch.autograd.forward_ad.unpack_dual"]


def fd(event):
    return {c.name: c for c in event.checks}["finite_difference"]


def test_right_derivatives_along_tangents_are_judged_and_agree():
    r = run_snippet(RIGHT, seed=0)
    xs, ys, us, ws = [0.5, 1.0, 2.0], [1.0, -2.0, 3.0], [1.0, 0.0, 0.5], [0.0, 1.0, 1.0]
    want = [(math.cos(x) * y + 2 * x) * u + math.sin(x) * w for x, y, u, w in zip(xs, ys, us, ws, strict=True)]
    assert r.stdout == f"{[round(t, 6) for t in want]} True True\n"
    assert [e.call for e in r.events] == RIGHT_NAMES
    for event in r.events:
        check = fd(event)
        assert check.status == "agree", (event.call, check)
        assert check.compares == TANGENT and check.independent
        assert not any("snippet's word" in n for n in event.notes)
        (ref,) = event.reference  # the judge's differences, shown beside the result
        assert ref.values == pytest.approx(want, rel=1e-8)
    assert r.exit_code == 0


def test_a_wrong_forward_mode_formula_disagrees_in_the_judge():
    r = run_snippet(PLANTED + CALLS, seed=0)
    assert r.stdout == "[4.0, 8.0, 12.0] [4.0, 8.0, 12.0]\n"  # plain torch: the planted jvp, 4x
    assert [e.call for e in r.events] == PLANTED_NAMES
    for event in r.events:
        check = fd(event)
        assert check.status == "disagree", (event.call, check)
        assert "factor 2" in (check.reason or "")
        assert [ref.values for ref in event.reference] == [pytest.approx([2.0, 4.0, 6.0], rel=1e-6)]
    # the function run again with requires_grad names the custom Function it passes through (a dual's forward
    # keeps no grad_fn to name it by)
    assert "look at its jvp" in (r.events[0].diagnosis or "")
    assert r.exit_code == 3


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_wrong_forward_mode_formula_still_disagrees_however_the_snippet_rewrites_the_tool(route):
    r = run_snippet(PLANTED + ROUTES[route] + CALLS, seed=0, keep_partial=True)
    assert r.stdout == "[4.0, 8.0, 12.0] [4.0, 8.0, 12.0]\n" and r.stopped is None  # type: ignore[attr-defined]
    assert [e.call for e in r.events] == PLANTED_NAMES  # type: ignore[attr-defined]
    assert all(fd(e).status == "disagree" for e in r.events)  # type: ignore[attr-defined]
    assert r.exit_code == 3  # type: ignore[attr-defined]


def test_a_function_of_two_outputs_is_judged_output_by_output():
    src = """import torch
x = torch.tensor([0.3, -1.2])
_, (a, b) = torch.func.jvp(lambda t: (t.exp(), (t * t).sum()), (x,), (torch.tensor([1.0, 2.0]),))
print([round(v, 5) for v in a.tolist()], round(float(b), 5))
"""
    r = run_snippet(src, seed=0)
    ex = [math.exp(0.3), 2 * math.exp(-1.2)]  # exp(x)·u
    assert r.stdout == f"{[round(v, 5) for v in ex]} {round(2 * 0.3 * 1 + 2 * -1.2 * 2, 5)}\n"
    (event,) = r.events
    assert fd(event).status == "agree" and fd(event).compares == TANGENT
    assert [ref.name for ref in event.reference] == ["jvp[0]", "jvp[1]"]


def test_a_tangent_at_a_kink_is_no_reference_and_never_a_disagreement():
    """relu at 0 along u: torch's forward mode gives 0 there (its convention); the differences on the held
    replay follow the same side, so the call agrees or the element is named as no reference, never wrong."""
    src = """import torch
x = torch.tensor([0.0, 1.0, -1.0])
_, t = torch.func.jvp(torch.relu, (x,), (torch.ones(3),))
print(t.tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[0.0, 1.0, 0.0]\n"
    assert fd(r.events[0]).status in ("agree", "skipped") and r.exit_code == 0


def test_a_jvp_of_a_derivative_stays_the_snippets_word():
    """jvp(grad(f)) (a Hessian-vector product) has no tangent record form yet: the child's check, said so."""
    src = """import torch
f = lambda x: (x ** 3).sum()
x = torch.tensor([1.0, 2.0])
_, hv = torch.func.jvp(torch.func.grad(f), (x,), (torch.tensor([1.0, 0.0]),))
print(hv.tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[6.0, 0.0]\n"
    (event,) = r.events
    assert fd(event).status == "agree" and any("snippet's word" in n for n in event.notes)


def _record(**tangent):
    from vjp_explorer.calls import encode_bytes

    def array(shape):
        n = math.prod(shape)
        return encode_bytes("float64", shape, b"\0" * (8 * n))

    base = {
        "forward": None,
        "unreplayable": "x",
        "outputs": [array([3])],
        "v": [],
        "at": [array([2])],
        "grads": [None],
        "before": [None],
        "names": ["x"],
        "cheap": False,
        "jacobian_rows": 128,
        "hook": None,
        "customs": [],
        "second": None,
        "tangent": {"u": [array([2])], "result": [array([3])]},
    }
    base["tangent"].update({k: [array(s) for s in v] for k, v in tangent.items()})
    return base


def test_a_tangent_record_must_fit_its_inputs_and_outputs():
    validate_record(_record())
    for bad in ({"u": [[3]]}, {"result": [[2]]}, {"result": [[3], [3]]}, {"u": []}):
        with pytest.raises(RecordError, match="tangents"):
            validate_record(_record(**bad))
    with pytest.raises(RecordError, match="v per output"):
        validate_record({**_record(), "v": _record()["outputs"]})


# what an outside bug hunt found in the first version of this door: each a right derivative read wrong,
# or a call not observed at all
FOUND = """import torch
import torch.autograd.forward_ad as fwad
import torch.nn.functional as F
from torch.func import jvp

torch.manual_seed(0)
x = torch.tensor([3.0, 4.0], dtype=torch.float64)
u = torch.tensor([1.0, 0.0], dtype=torch.float64)

def normed(t):
    with torch.no_grad():
        n = t.norm()
    return t / n

a = jvp(normed, (x,), (u,))[1]                                       # 1: forward mode goes through no_grad
b = torch.autograd.functional.jvp(normed, x, u)[1]                   # 2: the double-backward trick does not
c = torch.autograd.functional.jvp(lambda t: t ** 3, torch.tensor(0.7, dtype=torch.float64))[1]  # 3: v omitted
p = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor(0.5)}
d = jvp(lambda q: (q["w"] * q["b"]).sin(), (p,), ({"w": torch.ones(2), "b": torch.tensor(1.0)},))[1]  # 4: dicts
e = jvp(lambda s, A: A * torch.sin(50 * s), (torch.tensor([0.01, 0.02], dtype=torch.float64),
        torch.tensor(1e5, dtype=torch.float64)), (torch.ones(2, dtype=torch.float64),
        torch.tensor(0.0, dtype=torch.float64)))[1]                 # 5: a big input without a tangent
g = jvp(lambda t: F.dropout(t.sin(), p=0.5), (torch.randn(6),), (torch.ones(6),))[1]  # 6: its own mask again
fwad.enter_dual_level()
stale = fwad.make_dual(torch.tensor(2e4), torch.tensor(0.0))
fwad.exit_dual_level()
with fwad.dual_level():                                              # 7: a closed level's dual is no input
    h = fwad.unpack_dual(torch.sin(50 * fwad.make_dual(torch.tensor([0.01, 0.02]), torch.ones(2)))).tangent
print([round(float(t), 6) for t in (*a, *b, c, *d, *e, *h)])
"""


def test_the_bug_hunts_right_derivatives_agree_and_are_all_observed():
    r = run_snippet(FOUND, seed=0)
    assert r.error is None and r.exit_code == 0, [(e.call, e.line, fd(e)) for e in r.events]
    assert len(r.events) == 7
    for event in r.events:
        assert fd(event).status == "agree", (event.call, event.line, fd(event))
        assert fd(event).compares == TANGENT
    # by hand: d(x/|x|) along (1, 0) at (3, 4) is (16, −12)/125; with |x| held, (1, 0)/5; d(t³) = 3t²
    assert r.stdout.startswith(f"[{0.128}, {-0.096}, {0.2}, {0.0}, {round(3 * 0.7**2, 6)}, ")


def test_what_the_replay_cannot_follow_is_skipped_saying_why_never_a_disagreement():
    src = """import torch
import torch.autograd.forward_ad as fwad
from torch.func import jvp
x = torch.tensor([0.5, -1.0, 0.3])

def written(t):
    y = t * 2
    y[0] = y[1] * 3.0 + 1      # a write through a view: the log loses the base's new version
    return y.sin()

print(jvp(written, (x,), (torch.ones(3),))[1].tolist())
with fwad.dual_level():
    d = fwad.make_dual(x.clone(), torch.ones(3))
    d.mul_(2)                  # the dual changed after make_dual
    print(fwad.unpack_dual(d.sin()).tangent.tolist())
print(jvp(lambda t: 1 / t, (torch.tensor([0.0, 2.0]),), (torch.ones(2),))[1].tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.exit_code == 0 and r.error is None
    written, changed, pole = (fd(e) for e in r.events)
    assert written.status == "skipped" and "through an index or a view" in (written.reason or "")
    assert changed.status == "skipped" and "changed in place after make_dual" in (changed.reason or "")
    assert pole.status == "agree" and "no reference at jvp[0]" in (pole.reason or "")  # 1/x at 0: a pole


def test_the_jvp_fn_of_linearize_is_judged_call_by_call():
    """torch.func.linearize(f, x) returns f(x) and a jvp_fn: each call of it is a jvp event, judged as one."""
    src = (
        PLANTED
        + """
_, jfn = torch.func.linearize(Square.apply, x)
print(jfn(u).tolist())
_, sfn = torch.func.linearize(torch.sin, x)
print([round(t, 6) for t in sfn(torch.tensor([1.0, 0.0, 2.0])).tolist()])
"""
    )
    r = run_snippet(src, seed=0)
    want = [round(math.cos(a) * t, 6) for a, t in ((1.0, 1.0), (2.0, 0.0), (3.0, 2.0))]  # cos(2)·0 is -0.0
    assert r.stdout == f"[4.0, 8.0, 12.0]\n{want}\n"
    assert [e.call for e in r.events] == ["torch.func.linearize"] * 2
    planted, right = (fd(e) for e in r.events)
    assert planted.status == "disagree" and "factor 2" in (planted.reason or "")
    assert right.status == "agree" and right.compares == TANGENT
    assert r.events[1].reference[0].values == pytest.approx([math.cos(1.0), 0.0, 2 * math.cos(3.0)], rel=1e-6)
    assert r.exit_code == 3


def test_an_output_that_does_not_depend_on_the_inputs_says_so_and_shows_no_reference():
    """A constant function and an integer result have derivative 0 by definition: skipped with that reason,
    and no reference beside the result (the child's differences of a step function, 1/(2h), were shown)."""
    src = """import torch
x = torch.tensor([1.0, 2.0])
_, a = torch.func.jvp(lambda t: torch.ones(2), (x,), (torch.ones(2),))
_, b = torch.func.jvp(lambda t: (t > 1).long(), (x,), (torch.ones(2),))
print(a.tolist(), b.tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[0.0, 0.0] [0, 0]\n"
    constant, integer = (fd(e) for e in r.events)
    assert constant.status == integer.status == "skipped"
    assert "does not depend on its inputs" in (constant.reason or "")
    assert "integer tensor" in (integer.reason or "")
    assert all(e.reference == [] for e in r.events) and r.exit_code == 0


def test_a_float32_gradient_past_the_dtypes_range_is_an_overflow_not_a_disagreement():
    """exp(2)·1e38 = 7.4e38 is past float32's largest number (3.4e38): torch's inf there is an overflow of a
    right gradient, said so, never `disagree`."""
    src = """import torch
y = torch.tensor([2.0, 1.0], requires_grad=True)
torch.exp(y).backward(torch.tensor([1e38, 1.0]))
print(y.grad.tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == f"[inf, {float(torch_exp1())}]\n"
    (event,) = r.events
    assert fd(event).status == "agree" and list(fd(event).overflow) == ["y[0]"]
    assert "overflowed its dtype at y[0]" in (event.diagnosis or "")
    (why,) = [d for d in r.diagnoses if d.kind == "nonfinite_grad"]  # the cause: backward overflowed, not a pole
    assert "past float32's largest number" in why.text and "scale the loss" in why.fix
    assert r.exit_code == 0


def torch_exp1():
    import torch

    return torch.exp(torch.tensor(1.0)).item()
