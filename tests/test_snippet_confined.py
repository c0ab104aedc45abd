"""The snippet door as users meet it since it runs snippets as real Python in the confined child: functional
calls as events, hooks that change a gradient, outputs named as written, loops folded, a limit that keeps
what ran, and the --trust / --allow-read options. Each run starts a child (about a second): one snippet
covers several facts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vjp_explorer.snippet import run_snippet

FUNCTIONAL = """\
import torch
from torch.autograd.functional import jacobian, vjp, jvp, hessian

class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g  # wrong: 2 * x * g

def f(x):
    return x ** 2 * torch.sin(x)

x = torch.tensor([1.0, 2.0, 3.0])
print(jacobian(f, x).diagonal())
print(vjp(f, x, torch.tensor([1.0, 0.5, 0.1]))[1])
print(jvp(f, x, torch.ones(3))[1])
print(hessian(lambda t: (t ** 3).sum(), x).diagonal())
print(torch.func.grad(lambda t: (t ** 3).sum())(x))
print(jacobian(Square.apply, x).diagonal())
print(torch.autograd.gradcheck(torch.sin, (x.double().requires_grad_(),)))
"""


def test_functional_calls_are_events_checked_by_finite_differences_and_gradcheck_is_not():
    r = run_snippet(FUNCTIONAL, "functional.py", seed=0)
    assert r.error is None and r.stdout.count("\n") == 7
    verdicts = [(e.call.rsplit(".", 1)[-1], e.checks[0].status) for e in r.events]
    assert verdicts == [
        ("jacobian", "agree"),
        ("vjp", "agree"),
        ("jvp", "agree"),
        ("hessian", "agree"),  # central second differences of the function
        ("grad", "agree"),
        ("jacobian", "disagree"),  # the custom backward's 3x where 2x is right
    ]  # gradcheck's own hundreds of autograd calls are not events
    wrong = r.events[-1]
    assert [round(v, 4) for v in [wrong.results[0].values[i][i] for i in range(3)]] == [3.0, 6.0, 9.0]
    assert [round(wrong.reference[0].values[i][i], 4) for i in range(3)] == [2.0, 4.0, 6.0]
    assert r.exit_code == 3
    assert repr(r) == "<SnippetResult 'functional.py': 6 backward/grad calls, 1 disagree, exit 3>"
    assert str(r).startswith("snippet functional.py") and "jacobian" in str(r)


HOOKS_AND_NAMES = """\
import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * 3
y.register_hook(lambda g: g * 2)
y.sum().backward()
z = x ** 3
(dz,) = torch.autograd.grad(z.sum(), x, create_graph=True)
z.register_hook(print)
torch.autograd.backward([z[0], z[1]], [torch.tensor(1.0), torch.tensor(2.0)])
"""


def test_a_hook_that_changes_the_gradient_is_not_a_disagreement_and_outputs_are_named_as_written():
    r = run_snippet(HOOKS_AND_NAMES, "hooks.py", seed=0)
    assert r.error is None, r.error
    hooked, grad, printed = r.events
    assert {c.status for c in hooked.checks} == {"skipped"} and "by design" in hooked.checks[0].reason
    assert any("register_hook" in n for n in hooked.notes)
    assert [o.name for o in hooked.outputs] == ["y.sum()"]
    assert [o.name for o in grad.outputs] == ["z.sum()"]
    assert [o.name for o in printed.outputs] == ["z[0]", "z[1]"]
    assert {c.status for c in printed.checks} == {"agree"}  # a hook that only prints changes nothing
    assert r.exit_code == 0


LOOP = """\
import torch
torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
x, t = torch.randn(16, 3), torch.randn(16)
for step in range(25):
    loss = ((x @ w - t) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad = None
print(round(loss.item(), 4))
"""


def test_a_loop_folds_into_one_table_and_its_later_calls_are_sampled(vjp, runner):
    from vjp_explorer.cli import app

    out = runner.invoke(app, ["run", "--snippet", LOOP, "--seed", "0"], env={"COLUMNS": "100"})
    assert out.exit_code == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert text.count("╰ backward #") == 3  # the first three in full
    assert "… 22 more calls from line 7" in text
    assert "#25" in text and "20 folded calls of a loop not checked (every 10th is, every 100th past 100)" in text
    js = json.loads(vjp("run", "--snippet", LOOP, "--seed", "0", "--json").stdout)
    events = js["events"]
    assert len(events) == 25 and all(x["grad_norm"] is not None for e in events for x in e["inputs"])
    checked = [e["index"] for e in events if any(c["status"] == "agree" for c in e["checks"].values())]
    assert checked == [1, 2, 3, 13, 23]  # in full, then every tenth of the line


def test_a_limit_keeps_what_ran_in_the_json_and_exits_2(vjp):
    src = "import torch\nx = torch.ones(2, requires_grad=True)\n(x * x).sum().backward()\nprint('ran')\n"
    src += "while True:\n    pass\n"
    out = vjp("run", "--snippet", src, "--json", "--limit", "snippet_seconds=8")
    assert out.exit_code == 2
    doc = json.loads(out.stdout)
    assert doc["stdout"] == "ran\n" and len(doc["events"]) == 1 and doc["exit_code"] == 2
    assert "wall-clock" in doc["stopped"]["message"] and "snippet_seconds" in doc["stopped"]["hint"]
    assert "wall-clock" in out.stderr and "Traceback" not in out.stderr


def test_allow_read_and_trust_open_what_the_confinement_closes(vjp, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "v.txt").write_text("1,2,3")
    script = tmp_path / "reads.py"
    script.write_text(
        "import torch\n"
        f"vals = [float(s) for s in open({str(data / 'v.txt')!r}).read().split(',')]\n"
        "x = torch.tensor(vals, requires_grad=True)\n(x * x).sum().backward()\nprint(x.grad)\n"
    )
    shut = vjp("run", str(script))
    assert shut.exit_code == 4 and "PermissionError" in shut.stdout and "--allow-read DIR" in shut.stdout
    opened = vjp("run", str(script), "--allow-read", str(data))
    assert opened.exit_code == 0 and "tensor([2., 4., 6.])" in opened.stdout
    trusted = vjp("run", str(script), "--trust")
    assert trusted.exit_code == 0 and "tensor([2., 4., 6.])" in trusted.stdout
    program = vjp("run", "3*a", "--a", "1", "--trust")
    assert program.exit_code == 2 and "--trust applies to a snippet" in program.stderr


@pytest.mark.parametrize("name", ["torch", "np"])
def test_a_snippet_that_never_imports_gets_pythons_error_explained(name):
    r = run_snippet(f"x = {name}.ones(3)\n", "noimport.py", seed=0)
    assert r.error is not None and r.error.type == "NameError"
    assert r.error.explanation is not None and "import" in r.error.explanation


def test_the_parent_never_imports_the_childs_observation():
    code = (
        "import sys\nfrom vjp_explorer.snippet import run_snippet\n"
        "run_snippet('import torch\\nx = torch.ones(2, requires_grad=True)\\nx.sum().backward()\\n', seed=0)\n"
        "print(sorted(m for m in sys.modules if m.startswith('vjp_explorer.confined.')))"
    )
    out = _python(code)
    assert "observe" not in out and "record" not in out


def _python(code: str) -> str:
    """What a fresh interpreter running `code` printed (what it imported is its own, not this worker's)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_parent_of_a_shown_run_imports_neither_torch_nor_numpy_nor_sympy():
    # its imports run beside the two processes that import torch, on a machine of two cores (bench (s))
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom vjp_explorer.cli import app\n"
        "src = 'import torch\\nx = torch.ones(2, requires_grad=True)\\n(x * x).sum().backward()\\n'\n"
        "r = CliRunner().invoke(app, ['run', '--snippet', src, '--seed', '0'])\n"
        "assert r.exit_code == 0 and 'agree' in r.output, r.output\n"
        "print(sorted(m for m in ('torch', 'numpy', 'sympy') if m in sys.modules))"
    )
    assert _python(code) == "[]"


def test_the_snippets_process_never_imports_the_judge():
    # the judge's modules (the replay's finite differences, the interpreter) cost the child 0.1 s at its
    # first backward call, on the run's critical path, for checks it does not make
    code = (
        "import sys\nfrom vjp_explorer.confined import runner\nfrom vjp_explorer.confined.observe import observer_for\n"
        "frames = []\n"
        "src = 'import torch\\nx = torch.ones(2, requires_grad=True)\\n(x.sin() * x).sum().backward()\\n'\n"
        "explain = {'calls': 5, 'jacobian_rows': 100, 'record_bytes': 1 << 20, 'graph': False, 'code': False}\n"
        "runner.run(src, frames.append, filename='s.py', observe=observer_for(frames.append, 's.py', 0, explain))\n"
        "assert [f['type'] for f in frames].count('record') == 1, frames\n"
        "judge = ['vjp_explorer.confined.verdict', 'vjp_explorer.engine.finite_diff']\n"
        "judge.append('vjp_explorer.engine.interpreter')\n"
        "sys.__stdout__.write(repr(sorted(m for m in judge if m in sys.modules)))"
    )
    out = _python(code)
    assert out.endswith("[]"), out


def test_a_complex_call_is_skipped_with_its_reason_and_prints_what_python_prints():
    src = "import torch\nz = torch.tensor([1+2j, 3-1j], requires_grad=True)\n"
    src += "(z * z.conj()).real.sum().backward()\nprint(z.grad)\n"
    r = run_snippet(src, "complex.py", seed=0)
    assert r.stdout == "tensor([2.+4.j, 6.-2.j])\n" and not any(w for s in r.steps for w in s.warnings)
    (check,) = r.events[0].checks
    assert check.status == "skipped" and "complex" in check.reason and r.exit_code == 0


def test_what_atexit_functions_print_reaches_the_transcript_and_the_json(vjp):
    src = (
        "import atexit, torch\nx = torch.ones(2, requires_grad=True)\n"
        "atexit.register(lambda: print('at exit', x.grad))\n(x * 3).sum().backward()\nprint('body')\n"
    )
    out = vjp("run", "--snippet", src, "--json")
    doc = json.loads(out.stdout)
    assert doc["stdout"] == "body\nat exit tensor([3., 3.])\n" and out.exit_code == 0
    assert doc["at_exit"] == {"stdout": "at exit tensor([3., 3.])\n", "warnings": []}
    assert doc["steps"][-1]["stdout"] == "body\n"  # not the last statement's output
    shown = vjp("run", "--snippet", src).stdout
    assert shown.index("body") < shown.index("at exit (functions registered with atexit)") < shown.index("[3., 3.]")


def test_a_refused_process_or_download_is_explained_with_what_to_do(vjp):
    loader = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "for batch in DataLoader(torch.arange(8.0), batch_size=4, num_workers=2):\n    print(batch)\n"
    )
    out = vjp("run", "--snippet", loader, "--json")
    err = json.loads(out.stdout)["error"]
    assert out.exit_code == 4 and err["type"] == "PermissionError" and err["line"] == 3
    assert "may not start processes" in err["explanation"] and "num_workers=0" in err["explanation"]
    assert "--trust" in err["explanation"]
    swallowed = "import os\nstatus = os.system('ls')\nprint(status != 0)\n"
    out = vjp("run", "--snippet", swallowed, "--json")
    doc = json.loads(out.stdout)
    assert out.exit_code == 0 and doc["stdout"] == "True\n"
    texts = [n["text"] for n in doc["notes"]]
    assert [n for n in texts if n.startswith("Line 2: ") and "os.system(ls)" in n and "--trust" in n]


def test_a_relative_read_is_explained_by_the_working_directory(vjp, tmp_path, monkeypatch):
    (tmp_path / "data.csv").write_text("1,2\n")
    monkeypatch.chdir(tmp_path)
    src = "print(open('data.csv').read().strip())\n"
    out = vjp("run", "--snippet", src, "--json")
    err = json.loads(out.stdout)["error"]
    assert err["type"] == "FileNotFoundError" and "--allow-read ." in err["explanation"]
    out = vjp("run", "--snippet", src, "--allow-read", ".", "--json")
    assert json.loads(out.stdout)["stdout"] == "1,2\n" and out.exit_code == 0
    out = vjp("run", "--snippet", "open('missing.csv')", "--allow-read", ".", "--json")
    assert json.loads(out.stdout)["error"]["explanation"] is None  # it is not there: Python's story


def test_a_large_model_runs_through_with_its_largest_arrays_left_out():
    """A 1000×100 weight: J (64,000 numbers per row), values and .grad would pass the channel's frame limit;
    the largest arrays are left out, named, and the run goes on, its checks run on every number."""
    src = (
        "import torch\nw = torch.randn(1000, 100, requires_grad=True)\nx = torch.randn(64, 1000)\n"
        "loss = (x @ w).pow(2).sum()\nloss.backward()\nprint(w.grad.shape, round(w.grad.norm().item() / 1e4))\n"
    )
    r = run_snippet(src, seed=0)
    assert r.exit_code == 0 and r.stopped is None and r.stdout.startswith("torch.Size([1000, 100]) ")
    (e,) = r.events
    (w,) = e.inputs
    assert {c.name: c.status for c in e.checks} == {"jtv": "agree", "finite_difference": "agree"}
    assert w.omitted and w.grad is not None and all(getattr(w, name) is None for name in w.omitted)
    assert round(w.grad_norm / 1e4) == int(r.stdout.split()[-1])
    assert any("not kept" in n and "w: J" in n for n in e.notes)
    shown = str(r)
    assert "—" in shown and "w[999,99]" in shown


def test_an_error_raised_in_code_a_statement_called_names_both_lines():
    src = (
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        return x * 2\n    @staticmethod\n    def backward(ctx, g):\n        raise RuntimeError('broken')\n"
        "x = torch.ones(2, requires_grad=True)\nF.apply(x).sum().backward()\n"
    )
    r = run_snippet(src, seed=0)
    assert (r.error.type, r.error.line, r.exit_code) == ("RuntimeError", 8, 4)
    assert "RuntimeError at line 8, inside the statement at line 10: broken" in str(r)


def test_a_compiled_function_runs_and_its_call_is_checked():
    """torch.compile used to trace the forward log's own frames (out of memory, or past the time limit)."""
    src = (
        "import torch\n@torch.compile\ndef f(x):\n    return torch.sin(x) ** 2\n"
        "x = torch.ones(3, requires_grad=True)\nf(x).sum().backward()\nprint(x.grad)\n"
    )
    r = run_snippet(src, seed=0)
    assert r.error is None and r.stdout == "tensor([0.9093, 0.9093, 0.9093])\n"
    (e,) = r.events
    assert {c.name: c.status for c in e.checks} == {"jtv": "agree", "finite_difference": "agree"}
