"""--code DIR (issue 40): each explained backward/grad call as a standalone script, one statement per node.

One snippet holds every case the issue names (its calls are the events); it runs once, confined, with --code.
Each callN.py is then run again here, standalone from another directory, and its gradients compared with the
.grad that real backward left (the event's `grads`, torch's own numbers: an independent oracle for a script
built from our table). The writer's defences (names, comments, a forged record) are tested without a run.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap

import pytest

SNIPPET = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
    c = torch.tensor([6.0, 7.0, 8.0], requires_grad=True)
    y = 3 * a + 2 * b * b + torch.log(c)
    y.backward(torch.tensor([0.1, 1.0, 0.0001]))
    x = torch.randn(4, 3)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    loss = F.cross_entropy(model(x), torch.tensor([0, 2, 1, 2]))
    loss.backward()
    img = torch.randn(2, 1, 6, 6, requires_grad=True)
    conv = torch.nn.Conv2d(1, 2, 3, padding=1)
    feat = F.max_pool2d(F.relu(conv(img)), 2)
    feat.flatten(1).sum().backward()
    q = torch.randn(2, 4, 3, requires_grad=True)
    ln = torch.nn.LayerNorm(3)
    h = ln(q)
    att = torch.softmax(h @ h.transpose(-1, -2) / 3 ** 0.5, dim=-1) @ h
    att.backward(torch.randn(2, 4, 3))
    w = torch.randn(4, 3, requires_grad=True)
    g = w.gather(1, torch.tensor([[0], [1], [2], [0]])).sum() + w[1:3, 0].sum() + w[torch.tensor([0, 0, 2])].sum()
    m = torch.where(w > 0, w, w * w)
    top, rest = torch.cat([m, w * 2], 0).split([3, 5], 0)
    (g + (top * 3).sum() + rest.pow(2).mean()).backward()
    A = torch.randn(2, 1, 3, 4, requires_grad=True)
    B = torch.randn(5, 4, 2, requires_grad=True)
    emb = torch.nn.Embedding(10, 4)
    e = emb(torch.tensor([[1, 2], [3, 1]]))
    s = torch.sin(A)
    fan = s * s + s
    chain = fan.reshape(2, 12).t().contiguous().view(3, 8).permute(1, 0)
    ((A @ B).sum() + e.sum() * 2 + chain.sum()).backward()


    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t ** 3

        @staticmethod
        def backward(ctx, grad):
            (t,) = ctx.saved_tensors
            return 3 * t ** 2 * grad


    u = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    z = torch.exp(Cube.apply(u)).sum()
    z.backward(retain_graph=True)
    z.backward()
    r = torch.tanh(u) * 2
    k = (r * r).sum()
    (gr,) = torch.autograd.grad(k, r)
    """
)
# each call: the nodes of its graph (as autograd names them; AccumulateGrad for every leaf reached) where
# they are few enough to count by hand
SEED_NODES = ["AddBackward0", "AddBackward0", "MulBackward0", "MulBackward0", "MulBackward0", "LogBackward0"]
SEED_NODES += ["AccumulateGrad"] * 3
# the trailing comment that names a node and its line (a leaf's AccumulateGrad: the .grad it adds to)
NAME = re.compile(r"  #\s*(\w+)(?:, line \d+|, \S+\.grad)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from typer.testing import CliRunner

    from vjp_explorer.cli import app

    root = tmp_path_factory.mktemp("code")
    src, out = root / "many.py", root / "out"
    src.write_text(SNIPPET)
    out.mkdir()
    argv = ["run", str(src), "--seed", "0", "--json", "--code", str(out), "--limit", "snippet_seconds=600"]
    r = CliRunner().invoke(app, argv)  # nine calls' checks: past the default minute on a busy machine
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["events"], out


def standalone(py, cwd):
    done = subprocess.run([sys.executable, str(py)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0])


def test_every_call_has_a_script_that_reproduces_grad_when_run_standalone(run, tmp_path):
    events, out = run
    assert [e["line"] for e in events] == [10, 14, 18, 23, 28, 36, 53, 54, 57]
    for e in events:
        code = e["backward_code"]
        assert code["file"] == f"call{e['index']}.py" and code["reproduces"] is True, (e["line"], code)
        got = standalone(out / code["file"], cwd=tmp_path)  # from another directory: it finds its .pt itself
        assert set(got) == set(e["grads"]), e["line"]
        for name, ref in e["grads"].items():
            mine, want = _flat(got[name]), _flat(ref)
            scale = max([abs(x) for x in want] + [1.0])
            assert max(abs(p - q) for p, q in zip(mine, want, strict=True)) <= 1e-4 * scale, (e["line"], name)


def test_one_commented_statement_per_node_in_the_order_autograd_ran_them(run):
    events, out = run
    for e in events:
        text = (out / e["backward_code"]["file"]).read_text()
        named = [m.group(1) for m in map(NAME.search, text.splitlines()) if m]
        assert len(named) == e["backward_code"]["nodes"], e["line"]
    seed = (out / "call1.py").read_text()
    assert sorted(m.group(1) for m in map(NAME.search, seed.splitlines()) if m) == sorted(SEED_NODES)
    # a node runs only once every path into it has added its part: the fan-out's sums come before sin's node
    five = (out / "call6.py").read_text()
    assert "+=" in five and five.index("SinBackward0") > five.rindex("+= part")


def test_the_scripts_use_no_autograd_and_name_what_the_snippet_names(run):
    events, out = run
    for e in events:
        text = (out / e["backward_code"]["file"]).read_text()
        tree = ast.parse(text)  # the code, not its comments (which quote the snippet's own lines)
        used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not used & {"backward", "autograd", "requires_grad", "requires_grad_", "func"}, e["line"]
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imports <= {"json", "math", "pathlib", "torch"}
    mlp = (out / "call2.py").read_text()
    assert 'grads["model.0.weight"]' in mlp and "NllLossBackward0, line 13 (loss)" in mlp
    assert "\nx = T[" in mlp  # the saved input, by its name in the snippet


def test_the_table_covers_the_issues_cases_and_a_custom_function_says_it_is_recorded(run):
    events, out = run
    custom = [e for e in events if e["line"] in (53, 54)]
    for e in events:
        if e in custom:
            assert e["backward_code"]["independent"] is False and e["backward_code"]["not_in_table"] == ["CubeBackward"]
            assert "a custom Function's backward, its result as recorded" in (out / f"call{e['index']}.py").read_text()
        else:
            assert e["backward_code"]["independent"] is True and e["backward_code"]["not_in_table"] == [], e["line"]


def test_an_autograd_grad_to_an_intermediate_returns_its_cotangent(run):
    events, out = run
    last = events[-1]
    assert last["call"] == "torch.autograd.grad" and list(last["grads"]) == ["r"]
    text = (out / last["backward_code"]["file"]).read_text()
    assert "TanhBackward0" not in text  # autograd stops at r: the nodes behind it do not run
    assert 'grads["r"] = ' in text
    assert [m.group(1) for m in map(NAME.search, text.splitlines()) if m] == ["SumBackward0", "MulBackward0"]


def _flat(x):
    return [v for item in x for v in _flat(item)] if isinstance(x, list) else [float(x)]


# ---------------------------------------------------------------- the folder, checked before the run


def test_a_missing_folder_is_refused_before_the_run(vjp, tmp_path):
    r = vjp("run", "seed000_ex1", "--code", str(tmp_path / "nope"))
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: --code {tmp_path / 'nope'}: the folder does not exist.")


def test_scripts_of_an_earlier_run_are_never_overwritten(vjp, tmp_path):
    (tmp_path / "call1.py").write_text("# mine\n")
    r = vjp("run", "seed000_ex1", "--code", str(tmp_path))
    assert r.exit_code == 2 and "already holds call1.py" in r.stderr and "never overwritten" in r.stderr
    assert (tmp_path / "call1.py").read_text() == "# mine\n"


# ---------------------------------------------------------------- what comes from the snippet never becomes code


def test_names_become_identifiers_or_generated_ones_and_comments_lose_line_breaks():
    from vjp_explorer.backward_code.script import _Names, comment, string

    names = _Names()
    assert names.new("W", "w") == "W"
    assert names.new("model.fc1.weight", "p") == "model_fc1_weight"
    assert names.new("x\nimport os", "saved") == "saved"
    assert names.new("class", "saved") == "saved_2"
    assert names.new("torch", "t") == "t"  # the script's own names are taken
    assert "\n" not in comment("a\nimport os\r\x1b[2J\u2028b") and comment("a\nb") == "a b"
    evil = 'x"]; import os; os.system("id"); grads["'
    assert ast.literal_eval(string(evil)) == evil


def test_a_forged_record_is_refused_or_kept_as_data():
    from vjp_explorer.backward_code.script import BadRecord, build, check_record

    node = {
        "name": "SumBackward1",
        "custom": False,
        "saved": {"dim": [0], "keepdim": False, "self_sym_sizes": [3]},
        "edges": [{"to": 1, "input_nr": 0, "shape": [3], "dtype": "float32"}],
        "received": [[]],
        "result": None,
        "leaf": None,
        "value_of": "y\nimport os",
        "line": 2,
        "source": "y = x.sum(0)\n__import__('os').system('id')",
    }
    leaf = {**node, "name": "AccumulateGrad", "saved": {}, "edges": [], "value_of": None, "leaf": "x\nimport os"}
    record = {
        "nodes": [node, leaf],
        "order": [0, 1],
        "roots": [{"node": 0, "input_nr": 0, "v": "t0"}],
        "results": [{"name": "x'\n__import__('os')", "node": 1, "input_nr": 0}],
        "names": {},
    }
    code = build(check_record(record), "call1", "title\nimport os").code
    tree = ast.parse(code)
    assert not any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__import__" for n in ast.walk(tree))
    assert {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} == {
        "json",
        "math",
        "pathlib",
        "torch",
    }
    for forged, where in [
        ({"dim": "0); import os; (0"}, "saved"),
        ("float32; import os", "dtype"),
        ("t0]; import os; T[t0", "v"),
    ]:
        bad = json.loads(json.dumps(record))
        if where == "saved":
            bad["nodes"][0]["saved"].update(forged)
        elif where == "dtype":
            bad["nodes"][0]["edges"][0]["dtype"] = forged
        else:
            bad["roots"][0]["v"] = forged
        with pytest.raises(BadRecord):
            check_record(bad)


# ---------------------------------------------------------------- a program's call


def test_a_programs_call_as_code_against_the_hand_derived_gradient(vjp, tmp_path):
    import math

    r = vjp("run", "h = sin(x); h*h + h", "--x", "1,2", "--grad", "ones", "--json", "--code", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    code = json.loads(r.stdout)["events"][0]["backward_code"]
    assert code["file"] == "call1.py" and code["reproduces"] is True and code["independent"] is True
    assert code["nodes"] == 4  # AddBackward0, MulBackward0, SinBackward0, AccumulateGrad
    got = standalone(tmp_path / "call1.py", cwd=tmp_path.parent)["x"]
    want = [(2 * math.sin(x) + 1) * math.cos(x) for x in (1.0, 2.0)]  # d(h² + h)/dx = (2h + 1)·cos x
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-6
    text = (tmp_path / "call1.py").read_text()
    assert "grad_h += " in text and "# SinBackward0, line 1 (h)" in text and "\nh = T[" in text


def test_the_report_shows_the_code_under_the_call(vjp, tmp_path):
    r = vjp("run", "3*a*a", "--a", "1,2", "--grad", "ones", "--code", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert f"backward as code: {tmp_path / 'call1.py'}, 3 statements" in " ".join(r.stdout.split())
    assert "# MulBackward0, line 1" in r.stdout and 'grads["a"] = ' in r.stdout
    assert f"wrote {tmp_path}" in r.stderr
