"""Snippet-door findings of a test from outside, each pinned with its oracle: plain Python's own behaviour
and hand-derived gradients.

- `w.grad.zero_()` before any backward raises (plain Python: AttributeError on None); the why block says
  .grad is None until a backward fills it, and a `print(w.grad)` before backward that raises nothing is no
  mistake and gets no why block.
- A learner's `db = dpre.sum(0, keepdim=True)` for a bias of shape [4] keeps a dimension too many: the
  advice is to drop it, not to add keepdim.
- A gradient that is mathematically 0 (a softmax is shift-invariant, so dL/dm = −Σ dL/dz = 0 for the max
  subtracted from the logits) agrees whatever rounding noise either side holds.
"""

from __future__ import annotations

import pytest

from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

ZERO_BEFORE = """import torch
torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
for i in range(3):
    w.grad.zero_()
    loss = ((w * x).sum() - 1) ** 2
    loss.backward()
"""

PRINT_BEFORE = """import torch
w = torch.tensor([1.0, 2.0], requires_grad=True)
print(w.grad)
(w * w).sum().backward()
print(w.grad)
"""


def test_zeroing_a_grad_before_any_backward_is_explained():
    r = run_snippet(ZERO_BEFORE, seed=0)
    assert r.exit_code == 4 and "NoneType" in r.error.message  # as plain Python raises it
    (d,) = r.diagnoses
    assert (d.kind, d.tensor, d.line, d.cause["op"]) == ("grad_none", "w", 6, "before backward")
    assert "until a backward call fills it" in d.text and "is not None" in d.fix


def test_reading_none_before_backward_without_an_error_is_no_mistake():
    r = run_snippet(PRINT_BEFORE, seed=0)
    assert r.stdout == "None\ntensor([2., 4.])\n" and r.exit_code == 0
    assert r.diagnoses == []


KEEPDIM_EXTRA = """import torch
torch.manual_seed(0)
x = torch.randn(6, 4)
W = torch.randn(4, 4, requires_grad=True)
b = torch.zeros(4, requires_grad=True)
out = torch.relu(x @ W + b)
loss = out.pow(2).sum() / 6
loss.backward()
dout = out / 3
dpre = dout * (out > 0).float()
db = dpre.sum(0, keepdim=True)
dW = x.T @ dpre
"""


def test_a_kept_dimension_too_many_is_advised_away():
    r = run_snippet(KEEPDIM_EXTRA, seed=0)
    first = r.manual.first_wrong
    assert first is not None and first.name == "db" and first.verdict == "shape" and first.kind == "keepdim"
    assert first.shape == [1, 4] and first.expected_shape == [4]
    assert "reduce without keepdim=True" in first.why
    assert [m.verdict for m in r.manual.lines if m.name == "dW"] == ["agree"]  # 2·out/6 · relu' through x


SHIFT = """import torch
torch.manual_seed(1)
logits = torch.randn(8, 5, requires_grad=True)
Y = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
m = logits.max(1, keepdim=True).values
z = logits - m
loss = -torch.log_softmax(z, 1)[range(8), Y].mean()
loss.backward()
dz = torch.softmax(z, 1)
dz[range(8), Y] -= 1
dz = dz / 8
dm = -dz.sum(1, keepdim=True)
"""


def test_a_gradient_that_is_zero_up_to_rounding_on_both_sides_agrees():
    r = run_snippet(SHIFT, seed=0)
    lines = {m.name: m for m in r.manual.lines}
    assert lines["dz"].verdict == "agree"
    assert lines["dm"].verdict == "agree", lines["dm"]


OVERFLOWED = """import torch
logits = torch.tensor([[100.0, 0.0, -100.0]], requires_grad=True)
p = torch.exp(logits) / torch.exp(logits).sum(dim=1, keepdim=True)
loss = -torch.log(p[0, 2])
loss.backward()
print(logits.grad)
"""


def test_a_nan_grad_where_the_reference_is_finite_is_named_not_read_as_zero_difference():
    """exp(100) overflows float32, so .grad is nan; the true gradient is softmax − one-hot = [1, ~0, −1]."""
    r = run_snippet(OVERFLOWED, seed=0)
    assert r.stdout == "tensor([[nan, nan, nan]])\n" and r.exit_code == 3
    fd = {c.name: c for c in r.events[0].checks}["finite_difference"]
    assert fd.status == "disagree" and fd.max_abs_diff == float("inf")  # off by more than any number, not 0
    assert list(fd.spurious) == ["logits[0,0]", "logits[0,1]", "logits[0,2]"]
    assert r.events[0].inputs[0].finite_difference[0] == pytest.approx([1.0, 0.0, -1.0], abs=1e-6)


CONVERTED = """import torch
torch.manual_seed(0)
w = torch.randn(4, requires_grad=True).double()
x = torch.randn(4, dtype=torch.float64)
loss = (w * x).sum()
loss.backward()
print(w.grad)
"""


def test_a_leaf_converted_after_requires_grad_is_named_as_the_copy():
    """`.double()` after requires_grad=True: `w` is the copy, plain Python prints None (with its warning)."""
    r = run_snippet(CONVERTED, seed=0)
    assert r.stdout == "None\n" and r.exit_code == 0
    (d,) = r.diagnoses
    assert (d.kind, d.tensor, d.line, d.cause) == ("grad_none", "w", 7, {"line": 3, "op": "non-leaf"})
    assert "converted copy" in d.text and "dtype=torch.float64" in d.fix and "requires_grad=True" in d.fix


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_finite_convention_where_the_exact_derivative_is_infinite_is_undefined(vjp, dtype):
    """BCE clamps its log at −100, so torch's gradient at a = 0 (b = 1) is −5e11 where the exact one is −∞:
    checks.md lists such an element under `undefined`, not a disagreement (it read exit 3)."""
    import json

    r = vjp("run", "F.binary_cross_entropy(a, b)", "--a", "0,0.5", "--const", "b=1,0.5", "--dtype", dtype, "--json")
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["events"][0]["checks"]
    assert checks["symbolic"]["status"] == "agree" and checks["symbolic"]["undefined"] == ["a[0]"]
    assert checks["jacobian"]["status"] == "agree"


@pytest.mark.parametrize(
    ("program", "values"),
    [("(x**2).mean() - x.mean()**2", "10000,10001,10003"), ("(x + 1e7)**2 - 1e14", "1,2")],
)
def test_differences_of_a_sum_that_cancels_are_weighed_at_its_terms_size(vjp, program, values):
    """The variance as E[x²] − E[x]² at a mean of 1e4 (a textbook's formula): the float64 differences round at
    the size of x² (1e8), not of the variance (1); their error estimate took the output's size and autograd's
    right gradient read `finite_difference disagree`, exit 3. Sympy is the exact check and agrees."""
    import json

    r = vjp("run", program, "--x", values, "--grad", "ones", "--dtype", "float64", "--json")
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["events"][0]["checks"]
    assert checks["finite_difference"]["status"] == checks["symbolic"]["status"] == "agree"


@pytest.mark.parametrize(("program", "x"), [("1/x", "1e-30"), ("1/x", "1e-20"), ("torch.exp(-x*x*1e14)*1e7", "1e-12")])
def test_steps_that_jump_over_a_pole_or_a_spike_are_no_reference(vjp, program, x):
    """h = 6e-6 steps over 1/x's pole at 1e-30 (both sides of opposite sign, both tiny beside 1e30) or over a
    Gaussian of width 1e-7: the differences were a confident wrong reference (+1.4e11 against −1e60) and read
    `disagree`, exit 3. Both sides a thousandth of the point's value: left out, saying why; sympy decides."""
    import json

    r = vjp("run", program, "--x", x, "--dtype", "float64", "--json")
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["events"][0]["checks"]
    fd = checks["finite_difference"]
    assert fd["status"] == "skipped" and "jump over a pole" in fd["reason"]
    assert checks["symbolic"]["status"] == "agree"
