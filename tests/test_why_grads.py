"""Why a gradient is missing or not finite (docs/why.md): snippets that run to their end but read a `.grad`
autograd never wrote, or get a nan/inf gradient, rebuilt small from issues and forum threads. The expected
tensor, lines and ops are read off each snippet by hand; whether the exact derivative is finite (`spurious`)
is derived by hand too (the masked branch's derivative is 0; a norm has none at zero). Correct code of the
same shapes gets no diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from vjp_explorer.snippet import run_snippet
from vjp_explorer.snippet.why import needs_diagnosis

WHY_DOC = (Path(__file__).resolve().parents[1] / "docs" / "why.md").read_text()
DOCUMENTED = {"item", "where_sqrt"}  # shown in docs/why.md, in the run's words

ITEM = """\
import torch
h = torch.tensor([1.0, 2.0], requires_grad=True)
q = h.sum().item() * 2
loss2 = torch.tensor(q, requires_grad=True)
loss2.backward()
print(h.grad)
"""

DETACHED = """\
import torch
w = torch.randn(3, requires_grad=True)
v = torch.randn(3, requires_grad=True)
loss = (w * v.detach()).sum()
loss.backward()
print(v.grad)
"""

NUMPY = """\
import torch
w = torch.randn(3, requires_grad=True)
a = w.detach().numpy()
b = torch.tensor(a * 2, requires_grad=True)
loss = (b * b).sum()
loss.backward()
print(w.grad)
"""

UNUSED = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 2)
        self.fc2 = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc1(x)


model = Net()
loss = model(torch.randn(3, 2)).sum()
loss.backward()
print(model.fc2.weight.grad)
"""

NON_LEAF = """\
import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * 2
z = y.sum()
z.backward()
print(y.grad)
"""

WHERE_SQRT = """\
import torch
x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
y = torch.where(x > 0, torch.sqrt(x), torch.zeros_like(x))
y.sum().backward()
print(x.grad)
"""

WHERE_LOG = """\
import torch
x = torch.tensor([0.0, 2.0], requires_grad=True)
y = torch.where(x > 0, torch.log(x), x)
y.sum().backward()
print(x.grad)
"""

NORM_AT_ZERO = """\
import torch
x = torch.zeros(3, requires_grad=True)
n = torch.sqrt((x ** 2).sum())
n.backward()
print(x.grad)
"""

EXP_OVERFLOW = """\
import torch
x = torch.tensor([100.0, 1.0], requires_grad=True)
e = torch.exp(x)
p = e / e.sum()
p[1].backward()
print(x.grad)
"""

# kind, tensor, line, the cause's line and op, spurious (nonfinite only), what the fix must say
FOUND = {
    "item": (ITEM, [("grad_none", "h", 6, (3, ".item()"))], None, "line 3: keep the computation in torch tensors"),
    "detach": (DETACHED, [("grad_none", "v", 6, (4, ".detach()"))], None, "`loss = (w * v).sum()`"),
    "numpy": (NUMPY, [("grad_none", "w", 7, (3, ".detach()"))], None, ".numpy() and a tensor made again"),
    "unused": (
        UNUSED,
        # diagnosed where the snippet reads its .grad (line 18); fc2.bias, neither read nor stepped, is only
        # named in the call's note
        [("grad_none", "model.fc2.weight", 18, (None, "unused"))],
        None,
        "find_unused_parameters=True",
    ),
    "non_leaf": (NON_LEAF, [("grad_none", "y", 6, (3, "non-leaf"))], None, "`y.retain_grad()` right after line 3"),
    "where_sqrt": (
        WHERE_SQRT,
        [("nonfinite_grad", "x", 4, (3, "sqrt"))],
        True,
        "`y = torch.where(x > 0, torch.sqrt(torch.where(x > 0, x, 1.0)), torch.zeros_like(x))`",
    ),
    "where_log": (
        WHERE_LOG,
        [("nonfinite_grad", "x", 4, (3, "log"))],
        True,
        "`y = torch.where(x > 0, torch.log(torch.where(x > 0, x, 1.0)), x)`",
    ),
    "norm_at_zero": (NORM_AT_ZERO, [("nonfinite_grad", "x", 4, (3, "sqrt"))], False, "torch.linalg.vector_norm"),
    "exp_overflow": (EXP_OVERFLOW, [("nonfinite_grad", "x", 5, (4, "div"))], True, "line 3: `exp` overflows float32"),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_each_missing_or_nonfinite_gradient_is_traced_to_its_line(name):
    code, want, spurious, fix = FOUND[name]
    r = run_snippet(code, f"{name}.py", seed=0)
    assert r.error is None and r.exit_code in (0, 3)  # the snippet ran to its end, as with plain Python
    got = [(d.kind, d.tensor, d.line, (d.cause["line"], d.cause["op"])) for d in r.diagnoses]
    assert got == want
    d = r.diagnoses[0]
    assert fix in d.fix, d.fix
    if name in DOCUMENTED:
        assert d.text in WHY_DOC and d.fix in WHY_DOC, "docs/why.md is stale"
    if d.kind == "nonfinite_grad":
        assert d.spurious is spurious
        assert r.to_dict()["diagnoses"][0]["spurious"] is spurious
        assert "nan" in r.stdout  # what the snippet printed is what plain torch gives, unchanged


CORRECT_GRAD_SHAPES = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(3, 2)).sum()
print(f"loss {loss.item():.0f}")
loss.backward()
print(all(p.grad is not None for p in model.parameters()))
opt.step()
opt.zero_grad()
print(model[0].weight.grad)
x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
safe = torch.where(x > 0, x, torch.ones_like(x))
y = torch.where(x > 0, torch.sqrt(safe), torch.zeros_like(x))
y.sum().backward()
print(x.grad)
z = torch.zeros(3, requires_grad=True)
torch.linalg.vector_norm(z).backward()
print(z.grad)
h = torch.tensor([1.0, 2.0], requires_grad=True)
s = h * 2
s.retain_grad()
s.sum().backward()
print(s.grad, h.grad)
"""


def test_correct_code_of_the_same_shapes_gets_no_diagnosis():
    # prints None (zero_grad sets .grad to None) and reads .grad: a second run is made, and finds nothing
    r = run_snippet(CORRECT_GRAD_SHAPES, "correct_grads.py", seed=0)
    assert r.error is None and "None" in r.stdout and "nan" not in r.stdout
    assert r.diagnoses == []


def test_the_second_run_is_made_only_for_a_failure_the_instruments_explain():
    # read from the first run's report alone: a snippet that passes pays for nothing more
    assert not needs_diagnosis(None, [], "tensor([2., 2.])\n", "", "print(x.grad)")
    assert not needs_diagnosis("name 'np' is not defined", [], "", "", "x.grad")
    assert not needs_diagnosis(None, [], "None\n", "", "print(x)")  # no .grad is read
    assert needs_diagnosis(None, [], "None\n", "", "print(x.grad)")
    assert needs_diagnosis("Trying to backward through the graph a second time (or ...", [], "", "", "")
    warned = "UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed."
    assert needs_diagnosis(None, [], "", warned, "")


STEPPED_UNUSED = UNUSED.replace(
    "model = Net()\n", "model = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
).replace("print(model.fc2.weight.grad)", "opt.step()")

GRAD_ARITHMETIC = """\
import torch
w = torch.randn(3, requires_grad=True)
v = torch.randn(3, requires_grad=True)
loss = (w * v.detach()).sum()
loss.backward()
for p in (w, v):
    p.data -= 0.1 * p.grad
"""


def test_a_parameter_an_optimizer_steps_without_a_gradient_is_named_though_nothing_failed():
    # plain torch: SGD skips a parameter whose .grad is None, silently; fc2 never took part in the forward
    r = run_snippet(STEPPED_UNUSED, "stepped_unused.py", seed=0)
    assert r.error is None and r.stdout == ""
    (e,) = r.events
    assert any("`model.fc2.weight`, `model.fc2.bias` got no gradient from this call" in n for n in e.notes)
    got = [(d.kind, d.tensor, d.line, (d.cause["line"], d.cause["op"])) for d in r.diagnoses]
    assert got == [("grad_none", f"model.fc2.{p}", 18, (None, "unused")) for p in ("weight", "bias")]


def test_a_none_grad_that_raised_is_traced_to_where_its_path_was_cut():
    r = run_snippet(GRAD_ARITHMETIC, "grad_arithmetic.py", seed=0)
    assert r.error is not None and r.error.line == 7 and "NoneType" in r.error.message  # Python's own error
    got = [(d.kind, d.tensor, d.line, (d.cause["line"], d.cause["op"])) for d in r.diagnoses]
    assert got == [("grad_none", "v", 7, (4, ".detach()"))]


def test_a_model_used_whole_gets_no_note_and_no_second_run():
    used = STEPPED_UNUSED.replace("return self.fc1(x)", "return self.fc2(self.fc1(x))")
    r = run_snippet(used, "used.py", seed=0)
    assert r.error is None and r.diagnoses == []
    assert not any("got no gradient" in n for e in r.events for n in e.notes)
    assert not needs_diagnosis(None, r.events, r.stdout, "", used)
