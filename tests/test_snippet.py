"""Snippet mode: the seeds' code runs verbatim and prints what plain Python prints; each backward is explained."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from snippet_oracle import plain_python
from vjp_explorer.snippet import run_snippet

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "expressions" / "snippets").glob("*.py"))


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict]:
    return dict(zip((p.name for p in SEEDS), plain_python([p.read_text() for p in SEEDS], seed=0), strict=True))


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_seed_prints_what_plain_python_prints(path, oracle):
    want = oracle[path.name]
    got = run_snippet(path.read_text(), path.name, seed=0)
    assert got.stdout == want["stdout"]
    if want["error"] is None:
        assert got.error is None
    else:
        assert got.error is not None
        assert (got.error.type, got.error.message) == (want["error"]["type"], want["error"]["message"])


def _grads(result, event):
    return {x.name: x.grad for x in result.events[event].inputs}


def test_seed_3vector_numbers():
    r = run_snippet((ROOT / "expressions/snippets/seed000_ex1.py").read_text(), seed=0)
    (e,) = r.events
    assert e.v_origin == "given" and e.retain_graph
    g = _grads(r, 0)
    assert g["a"] == pytest.approx([0.3, 3.0, 3e-4], rel=1e-6)
    assert g["b"] == pytest.approx([1.2, 16.0, 2e-3], rel=1e-6)
    assert g["c"] == pytest.approx([1 / 60, 1 / 7, 1.25e-5], rel=1e-6)
    # J is diagonal: 3, 4b, 1/c, and Jᵀv equals what backward added
    b = next(x for x in e.inputs if x.name == "b")
    assert b.jacobian == [[12.0, 0.0, 0.0], [0.0, 16.0, 0.0], [0.0, 0.0, 20.0]]
    assert [c.status for c in e.checks if c.name == "jtv"] == ["agree"]
    assert all(claim.matches for s in r.steps if (claim := s.claim) is not None)
    assert r.exit_code == 0


def test_accumulation_shows_before_and_after():
    r = run_snippet((ROOT / "expressions/snippets/seed000_ex4.py").read_text(), seed=0)
    first, second = r.events
    a1 = next(x for x in first.inputs if x.name == "a")
    a2 = next(x for x in second.inputs if x.name == "a")
    assert (a1.grad_before, a1.grad_after) == (None, 3.0)
    assert (a2.grad_before, a2.grad_after, a2.grad) == (3.0, 6.0, 3.0)
    assert any("accumulate" in n for n in second.notes)
    assert r.stdout == "tensor(6.)\ntensor(8.)\ntensor(2.)\n"


def test_onehot_sequence_with_zeroing():
    r = run_snippet((ROOT / "expressions/snippets/seed000_variable.py").read_text(), seed=0)
    assert [e.inputs[0].grad for e in r.events] == [
        [[2.0, 0.0, 0.0, 0.0]],
        [[0.0, 2.0, 0.0, 0.0]],
        [[2.0, 2.0, 2.0, 2.0]],
        [[2.0, 2.0, 2.0, 2.0]],
    ]
    assert "row 0 of J" in " ".join(r.events[0].notes)
    assert "column sums" in " ".join(r.events[2].notes)
    assert r.events[1].inputs[0].grad_before == [[0.0, 0.0, 0.0, 0.0]]  # zeroed between the calls


def test_official_example_gives_4_5():
    r = run_snippet((ROOT / "expressions/snippets/seed003_official.py").read_text(), seed=0)
    assert r.events[0].inputs[0].grad == [[4.5, 4.5], [4.5, 4.5]]
    assert r.events[0].v_origin == "scalar default 1"


def test_pin_memory_raises_as_torch_does_and_is_explained():
    r = run_snippet((ROOT / "expressions/snippets/seed000_ex3_empty.py").read_text(), seed=0)
    assert r.error is not None and r.error.line == 2 and r.error.type == "RuntimeError"
    assert "uninitialised memory" in (r.error.explanation or "")
    assert r.exit_code == 4


def test_repl_transcript_compares_with_the_source():
    # the transcript uses torch without importing it (its session had); the import shifts lines by one
    text = ">>> import torch\n" + (ROOT / "expressions/snippets/seed002_repl.py").read_text()
    r = run_snippet(text, seed=0)
    assert r.repl and r.error is None
    claims = {s.line: s.claim for s in r.steps if s.claim is not None}
    assert claims[8].matches  # `y.requires_grad` printed True, as the transcript says
    assert not claims[3].matches  # unseeded randn: other numbers than the source's
    assert claims[16].matches  # x.grad.zero_() shows zeros
    third = r.events[2]
    want = [2 * x * w for row, w in zip(third.inputs[0].value, (1.0, 0.1, 0.01), strict=True) for x in row]
    assert [g for row in third.inputs[0].grad for g in row] == pytest.approx(want, rel=1e-6)


BACKWARD_TWICE = """import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x * x).sum()
y.backward()
y.backward()
"""


def test_backward_twice_raises_with_torchs_message_and_explains():
    r = run_snippet(BACKWARD_TWICE, seed=0)
    assert r.error is not None and r.error.line == 5
    assert r.error.message.startswith("Trying to backward through the graph a second time")
    assert "retain_graph=True" in (r.error.explanation or "")
    assert len(r.events) == 1


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import torch\nx = torch.ones(3, requires_grad=True)\n(x * 2).backward()", "grad can be implicitly created"),
        ("import torch\nx = torch.ones(3)\n(x * 2).sum().backward()", "element 0 of tensors does not require grad"),
        (
            "import torch\nx = torch.ones(3, requires_grad=True)\ny = x.exp()\ny.add_(1)\ny.sum().backward()",
            "inplace operation",
        ),
        ("import torch\nx = torch.ones(3, requires_grad=True)\n(x * 2).backward(torch.ones(2))", "Mismatch in shape"),
    ],
)
def test_pytorch_errors_are_reported_and_explained(code, message):
    r = run_snippet(code, seed=0)
    assert r.error is not None and message in r.error.message
    assert r.error.explanation
    assert r.exit_code == 4


def test_autograd_grad_with_create_graph_second_derivative():
    code = """import torch
x = torch.tensor(2.0, requires_grad=True)
y = x ** 3
(g,) = torch.autograd.grad(y, x, create_graph=True)
print(g)
g.backward()
print(x.grad)
"""
    r = run_snippet(code, seed=0)
    assert r.stdout == plain_python([code])[0]["stdout"]
    first, second = r.events
    assert first.call == "torch.autograd.grad" and first.inputs[0].grad == 12.0
    assert second.inputs[0].grad == 12.0  # d/dx 3x^2 = 6x
    assert [c.status for c in first.checks] == ["agree", "agree"]


def test_non_leaf_grad_warning_and_none():
    code = "import torch\nx = torch.ones(2, requires_grad=True)\ny = x * 2\ny.sum().backward()\nprint(y.grad)\n"
    r = run_snippet(code, seed=0)
    assert r.stdout == "None\n"
    assert any("not a leaf Tensor" in w for s in r.steps for w in s.warnings)


def test_a_snippet_without_import_torch_fails_as_python_does_and_says_why():
    code = "x = torch.ones(2, requires_grad=True)\nprint(x)\n"
    r = run_snippet(code, seed=0)
    (want,) = plain_python([code], seed=0)
    assert r.error is not None and r.error.line == 1
    assert (r.error.type, r.error.message) == (want["error"]["type"], want["error"]["message"])
    assert "import torch" in (r.error.explanation or "")
    assert r.stdout == "" and r.events == []


def test_control_flow_functions_and_fstrings_match_python():
    code = """import torch
def f(x, k=2):
    return (x ** k).sum()
xs = [torch.tensor(float(i), requires_grad=True) for i in range(1, 4)]
total = 0
for i, x in enumerate(xs):
    if i % 2 == 0:
        total = total + f(x)
    else:
        total = total + f(x, k=3)
total.backward()
print(f"grads: {[x.grad.item() for x in xs]}", sep="")
print("%.3f" % total.item())
sq = lambda t: t * t
w = torch.linspace(0, 1, 5, requires_grad=True)
out = sq(w)[1:4].sum() + w[-1]
out.backward()
w.grad
with torch.no_grad():
    w -= 0.1 * w.grad
w
"""
    r = run_snippet(code, seed=0)
    want = plain_python([code])[0]
    assert want["error"] is None
    assert r.stdout == want["stdout"]
    assert all(e.status == "agree" for e in r.events)


def test_cli_json_contract(vjp):
    res = vjp("run", str(ROOT / "expressions/snippets/seed000_ex1.py"), "--seed", "0", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["schema"] == 5 and d["kind"] == "snippet" and "run" not in d and "snippet" not in d
    s = d  # the transcript's keys sit at the top level, beside the events
    assert s["seed"] == 0 and s["error"] is None and d["exit_code"] == 0
    ev = d["events"][0]
    assert ev["line"] == 8 and ev["call"] == "Tensor.backward" and ev["status"] == "agree"
    assert [x["name"] for x in ev["inputs"]] == ["a", "b", "c"]
    assert ev["v"][0]["value"] == pytest.approx([0.1, 1.0, 1e-4])
    assert set(ev["inputs"][0]) >= {"grad_before", "grad_after", "grad", "jtv", "jacobian"}


def test_cli_stdin_and_bundled_names(vjp):
    res = vjp("explain", "--snippet", "-", "--seed", "1", input=BACKWARD_TWICE)
    assert res.exit_code == 4
    assert "Trying to backward through the graph a second time" in res.stdout
    res = vjp("run", "seed003_official", "--seed", "0")
    assert res.exit_code == 0 and "4.5" in res.stdout
    res = vjp("examples")
    assert "seed000_ex1" in res.stdout


def test_cli_refuses_program_options_for_a_snippet(vjp):
    res = vjp("run", "seed000_ex1", "--grad", "1,2,3")
    assert res.exit_code == 2
    assert "--grad does not apply to a snippet" in res.stderr


def test_cli_missing_snippet_file(vjp, tmp_path):
    res = vjp("run", str(tmp_path / "nope.py"))
    assert res.exit_code == 2 and "no such file" in res.stderr


CUSTOM = """import torch
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return k * x ** 3
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        print("backward ran", ctx.needs_input_grad)
        return BODY, None
x = torch.tensor([1.0, 2.0, -1.5], requires_grad=True)
y = Cube.apply(x, 2.0)
y.backward(torch.tensor([0.5, 1.0, 2.0]))
print(x.grad)
"""


@pytest.mark.parametrize(
    ("body", "verdict", "pattern"),
    [
        ("3 * ctx.k * x ** 2 * g", "agree", None),
        ("2 * ctx.k * x ** 2 * g", "disagree", "same factor 0.666667"),
        ("-3 * ctx.k * x ** 2 * g", "disagree", "sign is flipped"),
        ("3 * ctx.k * x ** 2 * g + 1", "disagree", "same amount 1"),
        ("3 * ctx.k * x ** 2 * g * g", "disagree", None),  # squares v: invisible with one-hot v alone
    ],
)
def test_custom_function_backward_is_checked_against_its_forward(body, verdict, pattern):
    code = CUSTOM.replace("BODY", body)
    r = run_snippet(code, seed=0)
    assert r.stdout == plain_python([code])[0]["stdout"]  # the custom backward ran once, printing once
    (event,) = r.events
    fd = next(c for c in event.checks if c.name == "finite_difference")
    assert fd.status == verdict
    assert event.inputs[0].finite_difference == pytest.approx([3.0, 24.0, 27.0], rel=1e-6)  # 3k·x²·v
    if pattern:
        assert pattern in (fd.reason or "")
    if verdict == "disagree":
        assert "custom Function Cube" in (event.diagnosis or "")
        assert r.exit_code == 3


@pytest.mark.parametrize(
    ("code", "where", "node"),
    [
        (
            "import torch\nx = torch.tensor([30.0, 89.0, 100.0], requires_grad=True)\ny = torch.log(torch.exp(x))\n"
            "y.backward(torch.ones(3))",
            ["x[1]", "x[2]"],
            "ExpBackward0",
        ),
        (
            "import torch\nx = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)\n"
            "y = torch.where(x > 0, torch.log(x), torch.zeros_like(x))\ny.sum().backward()",
            ["x[0]"],
            "LogBackward0",
        ),
    ],
)
def test_spurious_nan_is_a_disagreement_with_its_cause(code, where, node):
    r = run_snippet(code, seed=0)
    (event,) = r.events
    fd = next(c for c in event.checks if c.name == "finite_difference")
    assert fd.status == "disagree" and all(w in (fd.reason or "") for w in where)
    assert node in (event.diagnosis or "")
    assert r.exit_code == 3


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nz = torch.tensor([0.0, 1.0], requires_grad=True)\ntorch.log(z).sum().backward()",
        "import torch\nz = torch.tensor([0.0, 1.0], requires_grad=True)\n(1 / z).sum().backward()",
        "import torch\nz = torch.tensor([0.0, 4.0], requires_grad=True)\ntorch.sqrt(z).sum().backward()",
    ],
)
def test_a_genuinely_infinite_derivative_is_undefined_not_wrong(code):
    r = run_snippet(code, seed=0)
    (event,) = r.events
    assert event.status != "disagree"
    fd = next(c for c in event.checks if c.name == "finite_difference")
    assert "not a reference at z[0]" in (fd.reason or "")
    assert r.exit_code == 0


def test_kinks_are_differentiated_at_the_point():
    """relu at 0: the replay holds the branch autograd took (relu'(0) = 0), so r[0] is compared, not left out."""
    r = run_snippet(
        "import torch\nr = torch.tensor([0.0, 2.0, -1.0], requires_grad=True)\ntorch.relu(r).sum().backward()", seed=0
    )
    fd = next(c for c in r.events[0].checks if c.name == "finite_difference")
    assert fd.status == "agree" and "r[0]" not in (fd.reason or "")
    assert r.events[0].inputs[0].finite_difference == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)


def test_large_inputs_are_checked_along_random_directions():
    code = (
        "import torch\nw = torch.randn(40, 40, requires_grad=True)\n(w @ w).tanh().sum().backward()\n"
        "print(torch.randn(3))\n"
    )
    r = run_snippet(code, seed=0)
    fd = next(c for c in r.events[0].checks if c.name == "finite_difference")
    assert fd.status == "agree" and "random u" in fd.compares
    assert r.stdout == plain_python([code])[0]["stdout"]  # the check draws from its own generator, not the snippet's


def test_a_hook_that_scales_the_gradient_is_not_called_wrong():
    code = (
        "import torch\nv = torch.ones(3, requires_grad=True)\nw = v * 1\nw.register_hook(lambda g: g * 2)\n"
        "w.backward(torch.ones(3))\n"
    )
    r = run_snippet(code, seed=0)
    fd = next(c for c in r.events[0].checks if c.name == "finite_difference")
    assert fd.status == "skipped" and "hook" in (fd.reason or "")


FUNCTIONAL = """import torch
from torch.autograd.functional import jacobian, vjp, jvp, hessian
from torch.func import grad, jacrev, jacfwd
from torch.func import hessian as func_hessian
def f(x, y):
    return torch.stack([x[0] * y[1], torch.sin(x[1]) + y[0] ** 2])
def g(x):
    return x.exp() * x[0]
x = torch.tensor([0.5, -1.0])
y = torch.tensor([2.0, 3.0])
print(jacobian(f, (x, y)))
print(vjp(f, (x, y), torch.tensor([1.0, 0.5]))[1])
print(jvp(f, (x, y), (torch.ones(2), torch.zeros(2)))[1])
print(hessian(lambda t: (t ** 3).sum() + t[0] * t[1], x))
print(grad(lambda t: (torch.sin(t) * t).sum())(x))
print(jacrev(g)(x), jacfwd(g)(x), func_hessian(lambda t: (t ** 3).sum())(x))
"""


def test_functional_and_func_transforms_print_what_python_prints():
    # the confined door does not observe torch.autograd.functional / torch.func calls as events yet
    (want,) = plain_python([FUNCTIONAL], seed=0)
    r = run_snippet(FUNCTIONAL, seed=0)
    assert want["error"] is None and r.error is None, r.error
    assert r.stdout == want["stdout"]


def test_a_wrong_gradient_past_16_elements_is_still_named():
    code = """import torch
class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        wrong = 2 * x * g
        wrong[7] = 0.0
        return wrong
x = torch.linspace(1, 2, 50, requires_grad=True)
Twice.apply(x).sum().backward()
"""
    r = run_snippet(code, seed=0)
    fd = next(c for c in r.events[0].checks if c.name == "finite_difference")
    assert fd.status == "disagree" and "x[7]" in (fd.reason or "") and "x[8]" not in (fd.reason or "")


@pytest.mark.parametrize("n", [100, 1000])
def test_relu_at_zero_along_random_directions_is_not_a_false_alarm(n):
    r = run_snippet(f"import torch\nx = torch.zeros({n}, requires_grad=True)\ntorch.relu(x).sum().backward()\n", seed=0)
    fd = next(c for c in r.events[0].checks if c.name == "finite_difference")
    assert fd.status == "agree" and "kink" not in (fd.reason or "")  # held at the point: no direction crosses


def test_json_grads_shortcut(vjp):
    res = vjp("run", "seed000_ex1", "--seed", "0", "--json")
    ev = json.loads(res.stdout)["events"][0]
    assert ev["grads"]["a"] == pytest.approx([0.3, 3.0, 3e-4])
    assert ev["grads"] == {x["name"]: x["grad"] for x in ev["inputs"]}


MODULE_SNIPPETS = [
    # submodules, a parameter, a helper method, a plain attribute, Sequential and an optimizer step
    """import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self, hidden=4):
        super(Net, self).__init__()
        self.body = nn.Sequential(nn.Linear(3, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, 1)
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.eps = 0.5

    def squash(self, h):
        return F.softplus(h) + self.eps

    def forward(self, x):
        return self.squash(self.head(self.body(x))) * self.scale

torch.manual_seed(0)
net = Net()
print(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(5, 3)
loss = net(x).pow(2).mean()
loss.backward()
print(net.scale.grad, net.head.bias.grad)
print([n for n, p in net.named_parameters()])
opt.step()
print(net.head.bias)
""",
    # no __init__ of its own, forward hook-free, called twice: grads accumulate
    """import torch
class Square(torch.nn.Module):
    def forward(self, x):
        return x * x
sq = Square()
a = torch.tensor([1.0, -2.0], requires_grad=True)
sq(a).sum().backward()
sq(a).sum().backward()
print(a.grad)
""",
]


MODULE_SNIPPETS.append("""import torch
from torch import nn

class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out)])
        self.act = nn.ReLU()

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x

torch.manual_seed(0)
model = MLP(4, 8, 3)
x = torch.randn(2, 4)
target = torch.tensor([0, 2])
loss = nn.CrossEntropyLoss()(model(x), target)
loss.backward()
for name, p in model.named_parameters():
    print(name, p.grad.shape, round(p.grad.norm().item(), 4))
""")


@pytest.mark.parametrize("code", MODULE_SNIPPETS, ids=["net", "no_init", "module_list"])
def test_nn_module_subclasses_run_as_plain_python_does(code):
    (want,) = plain_python([code], seed=0)
    got = run_snippet(code, "module.py", seed=0)
    assert want["error"] is None and got.error is None, (want["error"], got.error)
    address = re.compile(r" at 0x[0-9a-f]+")
    assert address.sub("", got.stdout) == address.sub("", want["stdout"])
    assert got.events and all(e.status == "agree" for e in got.events)
    fd = [c for e in got.events for c in e.checks if c.name == "finite_difference"]
    assert fd and all(c.status == "agree" for c in fd), fd  # the replay varies the module's parameters


def test_torch_func_vjp_and_jvp_run_as_python_runs_them():
    code = """import torch
from torch.func import vjp, jvp

def f(x, y):
    return x.sin() * y

x = torch.tensor([0.5, 1.0, 2.0])
y = torch.tensor([1.0, 2.0, 3.0])
out, vjp_fn = vjp(f, x, y)
gx, gy = vjp_fn(torch.tensor([0.1, 1.0, 0.0001]))
print(gx, gy)
o2, t = jvp(f, (x, y), (torch.ones(3), torch.zeros(3)))
print(t)
"""
    (want,) = plain_python([code], seed=0)
    got = run_snippet(code, "func.py", seed=0)
    assert got.error is None and got.stdout == want["stdout"]
    assert not any(s.warnings for s in got.steps)  # torch's own deprecation warnings stay hidden, as in a script


# ---------------------------------------------------------------- numpy, as autograd snippets use it


NUMPY_SNIPPET = """import numpy as np
import torch
a = np.array([1.0, 2.0, 3.0])
x = torch.tensor(a, requires_grad=True)
(x ** 2).sum().backward()
print(x.grad.numpy())
g = x.grad.numpy()
print(np.allclose(g, 2 * a), g.shape, g.dtype)
x.grad.numpy()
z = torch.from_numpy(np.ones((2, 2), dtype=np.float32))
print(z.dtype, np.round(np.exp(a), 3).tolist(), a.reshape(3, 1).T.sum())
print(np.float32(1.5), np.tile(a, 2).shape, np.repeat(np.ones((2, 1)), 3, axis=1).sum(), a.repeat(2)[:3])
"""


def test_numpy_in_a_snippet_prints_what_python_prints():
    (want,) = plain_python([NUMPY_SNIPPET], seed=0)
    got = run_snippet(NUMPY_SNIPPET, seed=0)
    assert want["error"] is None and got.error is None
    assert got.stdout == want["stdout"]
    assert "[2. 4. 6.]" in got.stdout and "array(" not in got.stdout  # a bare expression in a script echoes nothing
    assert [x.grad for x in got.events[0].inputs] == [[2.0, 4.0, 6.0]]


def test_sys_exit_ends_the_snippet_with_pythons_status_and_sys_stdout_buffer_takes_bytes():
    """sys.exit(5) read as success (exit 0, nothing said); sys.stdout.buffer did not exist."""
    src = (
        'import sys\nsys.stdout.buffer.write(b"bytes \\xc3")\nsys.stdout.buffer.write(b"\\xa9\\n")\n'
        'print("hi")\nsys.exit(5)\nprint("never")\n'
    )
    r = run_snippet(src, seed=0)
    assert r.stdout == "bytes é\nhi\n"  # a character split across two writes, joined as python joins it
    assert r.error is not None and (r.error.type, r.error.message, r.error.line) == ("SystemExit", "5", 5)
    assert r.exit_code == 4
    said = run_snippet('import sys\nsys.exit("fatal: no data")\n', seed=0)
    assert said.error is not None and said.error.message == "fatal: no data" and said.exit_code == 4
    assert run_snippet("import sys\nsys.exit(0)\n", seed=0).exit_code == 0


def test_one_off_lines_past_the_explained_calls_still_get_their_checks():
    """Past the calls explained in full (50), a line's first calls were left unchecked as 'past the first calls
    of a line', though each line ran once: they get the cheap checks, as a loop's first calls do."""
    body = "".join(f"(x * {k}.0).sum().backward()\n" for k in range(1, 56))
    r = run_snippet("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n" + body, seed=0)
    assert len(r.events) == 55
    assert all(any(c.status == "agree" for c in e.checks) for e in r.events), [e.checks for e in r.events[50:]]


def test_hvp_and_vhp_make_no_events_of_torchs_own_grad_calls():
    """hvp and vhp call autograd.grad themselves: those calls were events with a skip reason about loops."""
    src = """import torch
from torch.autograd.functional import hvp, vhp
f = lambda w: (w ** 3).sum()
w = torch.tensor([1.0, 2.0])
print(hvp(f, w, torch.ones(2))[1].tolist(), vhp(f, w, torch.tensor([1.0, 0.0]))[1].tolist())
"""
    r = run_snippet(src, seed=0)
    assert r.stdout == "[6.0, 12.0] [6.0, 0.0]\n" and r.events == [] and r.exit_code == 0  # H = diag(6w)


def test_what_a_snippet_writes_to_descriptor_1_itself_is_shown_in_a_note():
    """os.write(1, ...) went to the child's raw pipe and was dropped; its place among the prints is not known."""
    r = run_snippet('import os\nprint("before")\nos.write(1, b"raw write\\n")\nprint("after")\n', seed=0)
    assert r.stdout == "before\nafter\n"
    assert any("raw write" in n and "file descriptor" in n for n in r.notes)


WENT_ON = """>>> import torch
>>> x = torch.tensor([1.0, 2.0], requires_grad=True)
>>> y = x * 2
>>> y.backward()
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
RuntimeError: grad can be implicitly created only for scalar outputs
>>> y.backward(torch.tensor([0.1, 1.0]))
>>> x.grad
tensor([0.2000, 2.0000])
>>> undefined_name
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
NameError: name 'undefined_name' is not defined
>>> print(x.grad.sum())
tensor(2.2000)
"""


def test_a_transcript_goes_on_past_a_traceback_as_the_repl_did():
    """The forum's usual transcript: the error first, then the call that works. The REPL printed the
    traceback and read the next line; so does the run, and it prints what the REPL printed."""
    (want,) = plain_python([WENT_ON], seed=0)
    r = run_snippet(WENT_ON, seed=0)
    assert r.stdout == want["stdout"] == "tensor([0.2000, 2.0000])\ntensor(2.2000)\n"
    raised = {s.line: s.raised.type for s in r.steps if s.raised is not None}
    assert raised == {4: "RuntimeError", 11: "NameError"}
    assert r.error is not None and (r.error.type, r.error.line) == ("RuntimeError", 4) == (want["error"]["type"], 4)
    assert r.exit_code == 4  # the snippet raised, as documented; the call after it is explained and agrees
    (event,) = r.events
    assert event.inputs[0].grad == pytest.approx([0.2, 2.0]) and event.status == "agree"
    assert all(s.claim.matches for s in r.steps if s.claim is not None)  # each traceback as the transcript's
    assert [d.kind for d in r.diagnoses] == ["nonscalar_output"]  # the first error's, found in a run stopping there
    doc = r.to_dict()
    assert [s["raised"]["type"] for s in doc["steps"] if s["raised"]] == ["RuntimeError", "NameError"]
    assert "2 statements raised (lines 4, 11) and the REPL went on" in str(r).replace("\n", " ")


def test_a_script_still_stops_at_its_first_exception():
    script = "import torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).backward()\nprint('never')\n"
    r = run_snippet(script, seed=0)
    assert r.error is not None and r.error.line == 3 and r.stdout == "" and len(r.steps) == 3  # print never runs
    assert all(s.raised is None for s in r.steps) and "The snippet stops here" in str(r)
