"""torch.func calls as events: argnums, has_aux, 0-d inputs, second derivatives, vmap, torch.func.vjp/jvp.

Each call of the snippet is one event; the tool's own finite-difference evaluations and the autograd calls
torch makes inside a transform (or inside the function torch.func.vjp returns) are not. The oracles are
independent of the child's wrappers: plain torch.autograd.functional in this process, closed forms (sin'' =
−sin), and a planted wrong custom Function whose event must disagree. Each snippet starts a child (about a
second): one snippet covers several facts."""

from __future__ import annotations

import torch
import torch.autograd.functional as AF

from vjp_explorer.snippet import run_snippet

ARGNUMS = """\
import torch
from torch.func import grad, jacrev, jacfwd

def predict(w, b, x):
    return (w @ x + b).tanh()

w = torch.tensor([[0.5, -1.0, 0.3], [0.2, 0.4, -0.7], [1.1, 0.0, 0.6]])
b = torch.tensor([0.1, -0.2, 0.3])
x = torch.tensor([0.9, -0.4, 1.3])
J2 = jacrev(predict, argnums=2)(w, b, x)
Jb = jacrev(predict, 1)(w, b, x)
Jw, Jb2 = jacrev(predict, argnums=(0, 1))(w, b, x)
g = grad(lambda w, x: predict(w, b, x).sum(), argnums=1)(w, x)
gx, aux = grad(lambda x: (x.sin().sum(), x.cos()), has_aux=True)(x)
Jf = jacfwd(predict, argnums=2)(w, b, x)
c = grad(lambda t: torch.sin(t))(torch.tensor(0.7))
for _ in range(5):
    gl = grad(lambda t: t.sin().sum())(x)
lin = torch.nn.Linear(3, 2)
p = {k: v.detach() for k, v in lin.named_parameters()}
gp = grad(lambda p, x: torch.func.functional_call(lin, p, (x,)).sum())(p, x)
print(J2.shape, Jw.shape, aux.shape, c.item())
"""

W = torch.tensor([[0.5, -1.0, 0.3], [0.2, 0.4, -0.7], [1.1, 0.0, 0.6]])
B = torch.tensor([0.1, -0.2, 0.3])
X = torch.tensor([0.9, -0.4, 1.3])


def _predict(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (w @ x + b).tanh()


def _values(info: object) -> torch.Tensor:
    return torch.tensor(info.values, dtype=torch.float64)  # type: ignore[attr-defined]


def _close(info: object, oracle: torch.Tensor, tol: float = 1e-5) -> bool:
    got = _values(info)
    return got.shape == oracle.shape and bool(torch.allclose(got, oracle.double(), atol=tol, rtol=tol))


def test_argnums_has_aux_and_zero_d_inputs_are_one_event_each_checked_by_finite_differences():
    r = run_snippet(ARGNUMS, "argnums.py", seed=0)
    assert r.error is None, r.error
    assert [(e.line, e.call.rsplit(".", 1)[-1], e.status) for e in r.events] == [
        (10, "jacrev", "agree"),
        (11, "jacrev", "agree"),
        (12, "jacrev", "agree"),
        (13, "grad", "agree"),
        (14, "grad", "agree"),
        (15, "jacfwd", "agree"),
        (16, "grad", "agree"),
        *[(18, "grad", "agree")] * 3,
        *[(18, "grad", "skipped")] * 2,  # a loop's calls past the first three: checked every 10th, as backward's
        (21, "grad", "agree"),  # with respect to a dict of parameters
    ]
    jw, jb, jx = AF.jacobian(_predict, (W, B, X))  # the oracle: plain torch, unwrapped in this process
    j2, j1, j01, g1, aux, jf, zero_d = r.events[:7]
    assert all(_close(e.results[0], X.cos()) for e in r.events[7:12])
    by_dict = r.events[12]  # d sum(Wx + b) / dW = 1 xᵀ, / db = 1: one block per parameter
    assert _close(by_dict.results[0], torch.ones(2, 1) * X) and _close(by_dict.results[1], torch.ones(2))
    assert _close(by_dict.reference[0], torch.ones(2, 1) * X)
    assert _close(j2.results[0], jx) and _close(jf.results[0], jx) and _close(j2.reference[0], jx)
    assert _close(j1.results[0], jb) and _close(j1.reference[0], jb)
    assert [len(j01.results), len(j01.reference)] == [2, 2]  # a tuple of argnums: a tuple of blocks
    assert _close(j01.results[0], jw) and _close(j01.results[1], jb) and _close(j01.reference[0], jw)
    assert _close(g1.results[0], jx.sum(0)) and _close(g1.reference[0], jx.sum(0))
    assert _close(aux.results[0], X.cos()) and len(aux.results) == 1  # the derivative, not the aux
    assert zero_d.results[0].shape == [] and _close(zero_d.reference[0], torch.tensor(0.7).cos())
    assert r.exit_code == 0


SECOND = """\
import torch
from torch.func import grad, jacrev, hessian, vmap, vjp, jvp

def f(x):
    return x.sin().sum()

x = torch.tensor([0.5, -1.0, 2.0])
H1 = jacrev(jacrev(f))(x)
H2 = hessian(f)(x)
d2 = grad(grad(lambda t: torch.sin(t)))(torch.tensor(0.7))
xs = torch.tensor([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
G = vmap(grad(f))(xs)
Jb = vmap(jacrev(torch.sin))(xs)
def inner(v):
    return grad(f)(v) * 2
I = vmap(inner)(xs)
_, vjp_fn = vjp(torch.sin, x)
(vx,) = vjp_fn(torch.ones(3))
hv = jvp(grad(f), (x,), (torch.ones(3),))[1]
_, hvp_fn = vjp(grad(f), x)
(hv2,) = hvp_fn(torch.tensor([1.0, 2.0, 3.0]))
def outer(t):
    return grad(f)(t).sum()
go = grad(outer)(x)
H3 = torch.autograd.functional.hessian(f, x)
print(H1.shape, G.shape, I.shape, vx.shape, hv.shape, go.shape)
"""


def test_second_derivatives_vmap_and_func_vjp_jvp_are_single_events_and_torch_s_own_calls_are_not():
    r = run_snippet(SECOND, "second.py", seed=0)
    assert r.error is None, r.error
    # one event per call: jacrev(jacrev(f)) is one (not the inner one per finite-difference evaluation),
    # grad inside vmap(inner) none (batched tensors), the autograd.grad inside vjp_fn none
    assert [(e.line, e.call, e.status) for e in r.events] == [
        (8, "torch.func.jacrev", "agree"),
        (9, "torch.func.hessian", "agree"),
        (10, "torch.func.grad", "agree"),
        (12, "torch.func.vmap", "agree"),
        (13, "torch.func.vmap", "agree"),
        (18, "torch.func.vjp", "agree"),
        (19, "torch.func.jvp", "agree"),
        (21, "torch.func.vjp", "agree"),
        (24, "torch.func.grad", "agree"),
        (25, "torch.autograd.functional.hessian", "agree"),
    ]
    x = torch.tensor([0.5, -1.0, 2.0])
    xs = torch.tensor([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    h = torch.diag(-x.sin())  # sin'' = −sin: a closed form, no autograd
    h1, h2, d2, g, jb, vjp_e, jvp_e, hvp_e, go, h3 = r.events
    for e in (h1, h2, h3):
        assert _close(e.results[0], h) and _close(e.reference[0], h)
        assert "second differences" in e.checks[0].compares and e.checks[0].independent
    assert _close(d2.results[0], -torch.tensor(0.7).sin()) and _close(d2.reference[0], -torch.tensor(0.7).sin())
    assert _close(g.results[0], xs.cos()) and _close(g.reference[0], xs.cos())
    assert _close(jb.reference[0], torch.stack([torch.diag(row.cos()) for row in xs]))
    assert _close(vjp_e.results[0], x.cos()) and _close(jvp_e.results[0], -x.sin())
    assert _close(hvp_e.reference[0], -x.sin() * torch.tensor([1.0, 2.0, 3.0]))
    # outer's finite differences call grad(f) itself: they check, but are not independent of autograd
    assert _close(go.results[0], -x.sin()) and go.checks[0].independent is False
    assert r.exit_code == 0


WRONG = """\
import torch
from torch.func import grad, jacrev, vmap

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
        return 2 * x * x * g  # wrong: 3 * x * x * g

x = torch.tensor([0.5, -1.0, 2.0])
w = torch.tensor(1.5)
g, aux = grad(lambda w, x: (w * Cube.apply(x).sum(), w), argnums=1, has_aux=True)(w, x)
J = jacrev(Cube.apply)(x)
G = vmap(grad(lambda x: Cube.apply(x).sum()))(torch.stack([x, 2 * x]))
H = jacrev(jacrev(lambda x: Cube.apply(x).sum()))(x)
print(g, J.diagonal(), G, H.diagonal())
"""


def test_a_wrong_custom_backward_inside_a_transform_disagrees():
    r = run_snippet(WRONG, "wrong.py", seed=0)
    assert r.error is None, r.error
    assert [(e.line, e.call, e.status) for e in r.events] == [
        (22, "torch.func.grad", "disagree"),
        (23, "torch.func.jacrev", "disagree"),
        (24, "torch.func.vmap", "disagree"),
        (25, "torch.func.jacrev", "disagree"),
    ]
    x = torch.tensor([0.5, -1.0, 2.0])
    g, j, batch, h = r.events
    assert _close(g.results[0], 1.5 * 2 * x**2) and _close(g.reference[0], 1.5 * 3 * x**2)
    assert _close(j.results[0], torch.diag(2 * x**2)) and _close(j.reference[0], torch.diag(3 * x**2))
    assert _close(batch.reference[0], 3 * torch.stack([x, 2 * x]) ** 2)
    assert _close(h.results[0], torch.diag(4 * x)) and _close(h.reference[0], torch.diag(6 * x))
    assert r.exit_code == 3


def test_a_kink_at_the_point_is_no_reference_not_a_disagreement():
    """relu at 0: central differences average the slopes either side (0.5), torch's derivative is 0; the
    judge's replay differentiates at the point as torch's forward went, so neither call disagrees."""
    src = (
        "import torch\nx = torch.arange(-2., 3.)\n"
        "print(torch.autograd.functional.jacobian(torch.relu, x).diagonal())\n"
        "print(torch.func.grad(lambda t: torch.relu(t).sum())(x))\n"
    )
    r = run_snippet(src, seed=0)
    assert r.exit_code == 0 and len(r.events) == 2
    # the checks are the judge's: its replay holds the kink where torch's forward took it (relu'(0) = 0), so
    # the entry at 0 is checked against torch's convention, not left without a reference
    for e in r.events:
        (c,) = [c for c in e.checks if c.name == "finite_difference"]
        assert c.status == "agree"
    jac, grad = r.events
    step = (torch.arange(-2.0, 3.0) > 0).double()
    assert _close(jac.results[0], torch.diag(step)) and _close(grad.results[0], step)
