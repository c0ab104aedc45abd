"""Why it failed (docs/why.md): autograd's famous errors rebuilt small from issues, forum threads and courses,
each run as a snippet (two confined children: the run, then the diagnosis run). The expected tensor, lines and
ops are read off the snippet by hand; PyTorch's own error must still be there, unchanged, before them. Correct
code of the same shape gets no diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from vjp_explorer.snippet import run_snippet

WHY_DOC = (Path(__file__).resolve().parents[1] / "docs" / "why.md").read_text()
DOCUMENTED = {"iadd", "bptt", "nonscalar", "never_set"}  # shown in docs/why.md, in the run's words

RELU_INPLACE = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        return self.act(h)


net = Net()
out = net(torch.randn(2, 3))
out.sum().backward()
"""

IADD = """\
import torch
w = torch.randn(3, requires_grad=True)
x = torch.exp(w)
y = x * 2
x += 1
y.sum().backward()
"""

SLICE = """\
import torch
w = torch.randn(4, requires_grad=True)
h = torch.tanh(w)
h[0] = 0.0
h.sum().backward()
"""

STEP_BETWEEN = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 2)
out = model(x)
loss1 = out.pow(2).mean()
loss2 = out.abs().mean()
loss1.backward(retain_graph=True)
opt.step()
loss2.backward()
"""

GAN = """\
import torch
import torch.nn as nn
G = nn.Linear(2, 2)
D = nn.Linear(2, 1)
optG = torch.optim.SGD(G.parameters(), lr=0.1)
optD = torch.optim.SGD(D.parameters(), lr=0.1)
z = torch.randn(4, 2)
fake = G(z)
d_loss = D(fake).mean()
optD.zero_grad()
d_loss.backward()
optD.step()
g_loss = -D(fake).mean()
optG.zero_grad()
g_loss.backward()
optG.step()
"""

SAM = """\
import torch
import torch.nn as nn
model = nn.Linear(2, 1)
x, y = torch.randn(4, 2), torch.randn(4, 1)
loss = ((model(x) - y) ** 2).mean()
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p.add_(0.05 * p.grad)
loss.backward()
"""

BPTT = """\
import torch
W = torch.randn(3, 3, requires_grad=True)
h = torch.zeros(3)
for t in range(3):
    x = torch.randn(3)
    h = torch.tanh(W @ h + x)
    loss = h.sum()
    loss.backward()
"""

NONSCALAR = """\
import torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x * 2
y.backward()
"""

DETACHED = """\
import torch
w = torch.randn(3, requires_grad=True)
feat = (w * 2).detach()
loss = (feat ** 2).sum()
loss.backward()
"""

DATA = """\
import torch
w = torch.randn(3, requires_grad=True)
y = (w.data * 3).sum()
y.backward()
"""

NO_GRAD = """\
import torch
w = torch.randn(3, requires_grad=True)
with torch.no_grad():
    y = w * 2
y.sum().backward()
"""

NEVER_SET = """\
import torch
x = torch.tensor([1.0, 2.0])
y = (x * 2).sum()
y.backward()
"""

GRAD_UNUSED = """\
import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([3.0, 4.0], requires_grad=True)
y = (x * w.detach()).sum()
gx, gw = torch.autograd.grad(y, [x, w])
"""

# the PyTorch 0.4 migration guide's example: a detached alias changed in place (a REPL transcript)
DETACHED_ALIAS = """\
>>> a = torch.tensor([1,2,3.], requires_grad = True)
>>> out = a.sigmoid()
>>> c = out.detach()
>>> c.zero_()
tensor([ 0.,  0.,  0.])

>>> out.sum().backward()
"""

# kind, tensor, the line it surfaced at, the cause's line and op, the saving op's line and op (in-place only)
RAISED = {
    "relu_inplace": (RELU_INPLACE, "inplace_modified", "h", 18, (13, "relu"), (12, "sigmoid")),
    "iadd": (IADD, "inplace_modified", "x", 6, (5, "add_"), (3, "exp")),
    "slice": (SLICE, "inplace_modified", "h", 5, (4, "__setitem__"), (3, "tanh")),
    "step_between": (STEP_BETWEEN, "inplace_modified", "model.2.weight", 11, (10, "add_"), (6, "linear")),
    "gan": (GAN, "backward_twice", "fake", 15, (11, "backward"), None),
    "sam": (SAM, "backward_twice", "", 10, (6, "backward"), None),
    "bptt": (BPTT, "backward_twice", "h", 8, (8, "backward"), None),
    "nonscalar": (NONSCALAR, "nonscalar_output", "y", 4, (4, "backward"), None),
    "detach": (DETACHED, "no_grad_fn", "loss", 5, (3, ".detach()"), None),
    "data": (DATA, "no_grad_fn", "y", 4, (3, ".data"), None),
    "no_grad": (NO_GRAD, "no_grad_fn", "y.sum()", 5, (4, "torch.no_grad()"), None),
    "never_set": (NEVER_SET, "no_grad_fn", "y", 4, (2, "requires_grad never set"), None),
    "grad_unused": (GRAD_UNUSED, "grad_none", "w", 5, (4, ".detach()"), None),
    "detached_alias": (DETACHED_ALIAS, "inplace_modified", "out", 7, (4, "zero_"), (2, "sigmoid")),
}

# what each fix must say, in the snippet's own words (read off the snippet by hand)
FIXES = {
    "relu_inplace": "line 9: make the layer with inplace=False (`self.act = nn.ReLU(inplace=False)`)",
    "iadd": "`x = x + 1`",
    "slice": "`h = h.clone()` just before `h[0] = 0.0`",
    "step_between": "run the forward again after it",
    "gan": "`fake.detach()`",
    "sam": "Run the forward again before the backward at line 10",
    "bptt": "`h = h.detach()`",
    "nonscalar": "`y.sum().backward()`",
    "detach": "`feat = (w * 2)`",
    "data": "`y = (w * 3).sum()`",
    "no_grad": "outside `with torch.no_grad():`",
    "never_set": "`x = torch.tensor([1.0, 2.0], requires_grad=True)`",
    "grad_unused": "`y = (x * w).sum()`",
    "detached_alias": "line 3: `c` shares its memory with `out` (detach): make it a copy (`c = out.detach()`",
}

PYTORCH_SAYS = {
    "inplace_modified": "modified by an inplace operation",
    "backward_twice": "Trying to backward through the graph a second time",
    "nonscalar_output": "grad can be implicitly created only for scalar outputs",
    "no_grad_fn": "does not require grad and does not have a grad_fn",
    "grad_none": "appears to not have been used in the graph",
}


@pytest.mark.parametrize("name", list(RAISED))
def test_each_famous_error_is_named_in_the_snippets_own_names_and_lines(name):
    code, kind, tensor, line, (cause_line, cause_op), saved = RAISED[name]
    r = run_snippet(code, f"{name}.py", seed=0)
    assert r.error is not None and PYTORCH_SAYS[kind] in r.error.message  # PyTorch's own error, unchanged
    assert r.error.line == line and r.exit_code == 4
    assert len(r.diagnoses) == 1, r.diagnoses
    d = r.diagnoses[0]
    assert (d.kind, d.tensor, d.line, d.cause) == (kind, tensor, line, {"line": cause_line, "op": cause_op})
    if saved is not None:
        assert d.saved == {"line": saved[0], "op": saved[1]}
    assert FIXES[name] in d.fix, d.fix
    if name in DOCUMENTED:
        assert d.text in WHY_DOC and d.fix in WHY_DOC, "docs/why.md is stale"
    as_json = r.to_dict()["diagnoses"][0]
    assert as_json["kind"] == kind and as_json["cause"] == {"line": cause_line, "op": cause_op}
    assert ("saved" in as_json) == (kind == "inplace_modified") and "spurious" not in as_json


CORRECT_RAISING_SHAPES = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(inplace=True), nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
W = torch.randn(3, 3, requires_grad=True)
h = torch.zeros(3)
for t in range(3):
    out = model(torch.randn(4, 2))
    loss1, loss2 = out.pow(2).mean(), out.abs().mean()
    opt.zero_grad()
    loss1.backward(retain_graph=True)
    loss2.backward()
    opt.step()
    fake = G(torch.randn(4, 2))
    D(fake.detach()).mean().backward()
    (-D(fake).mean()).backward()
    h = h.detach()
    h = torch.tanh(W @ h + torch.randn(3))
    h.sum().backward()
x = torch.exp(W)
y = x * 2
x = x + 1
y.sum().backward()
z = torch.tanh(W).clone()
z[0] = 0.0
z.sum().backward()
v = W * 2
v.backward(torch.ones_like(v))
print(W.grad is not None)
"""


def test_correct_code_of_the_same_shapes_runs_and_gets_no_diagnosis():
    r = run_snippet(CORRECT_RAISING_SHAPES, "correct.py", seed=0)
    assert r.error is None and r.stdout == "True\n"
    assert r.diagnoses == [] and r.to_dict()["diagnoses"] == []


def test_the_terminal_shows_pytorchs_error_then_the_diagnosis(vjp, tmp_path):
    path = tmp_path / "inplace.py"
    path.write_text(IADD)
    result = vjp("run", str(path), "--seed", "0")
    assert result.exit_code == 4
    out = result.output
    error = out.index("RuntimeError at line 6: one of the variables needed for gradient computation")
    why = out.index("why (inplace_modified), line 6: a saved tensor was changed in place")
    assert error < why
    assert "`exp` at line 3 saved `x` for backward (version 0); `add_` at line 5 then changed it" in out
    assert "fix: line 5: `x = x + 1` makes a new tensor" in out


def test_a_trusted_snippet_is_diagnosed_in_a_confined_run_so_its_effects_do_not_repeat(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = "open('runs.txt', 'a').write('ran\\n')\n" + IADD  # the trusted run writes here, the diagnosis cannot
    r = run_snippet(code, "trusted.py", seed=0, trust=True)
    assert r.error is not None and [(d.kind, d.line) for d in r.diagnoses] == [("inplace_modified", 7)]
    assert (tmp_path / "runs.txt").read_text() == "ran\n"  # once: the confined second run wrote in its scratch


@pytest.mark.parametrize(
    ("line", "cut", "words"),
    [
        ("loss = (x > 0.5).float().sum()", {"line": 3, "op": "gt"}, "a comparison gives a bool tensor"),
        ("loss = x.argmax().float()", {"line": 3, "op": "argmax"}, "it returns indices"),
        ("loss = torch.tensor(x.sum().item())", {"line": 3, "op": ".item()"}, ".item() turns the value"),
    ],
)
def test_a_graph_lost_at_a_step_or_a_python_number_names_that_line(line, cut, words):
    """x requires grad, so "requires_grad was never set" (and its fix, a new leaf cut off from x) was wrong:
    the graph was lost where a comparison, an index or .item() left the floats."""
    src = f"import torch\nx = torch.tensor([0.1, 0.9, 0.3], requires_grad=True)\n{line}\nloss.backward()\n"
    r = run_snippet(src, seed=0)
    (d,) = [d for d in r.diagnoses if d.kind == "no_grad_fn"]
    assert d.cause == cut and words in d.text and "never set" not in d.text
    assert "requires_grad=True" not in d.fix
