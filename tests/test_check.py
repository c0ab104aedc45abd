"""vjp check (the trusted door): deliberately wrong custom Functions, each with exactly its diagnosis."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

import vjp_explorer
from planted import FUNCTIONS
from vjp_explorer.errors import VjpError
from vjp_explorer.trusted import check, load_target

# the planted mistakes (tests/planted.py, shared with test_three_doors.py), and a few more functions
MODULE = FUNCTIONS + textwrap.dedent(
    """

    Right = _fn("Right", lambda x: x ** 3, lambda x, g: 3 * x ** 2 * g)


    class Linear(Transposed):  # the same forward, the right backward
        @staticmethod
        def backward(ctx, g):
            W, x = ctx.saved_tensors
            return torch.outer(g, x), W.T @ g


    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x * x

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return g1 * x.cos() + 2 * x * g2


    class TwoWrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x * x

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return g1 * x.cos() + 2 * x * g1  # the second output's cotangent is never used


    def plain(x):
        return torch.sin(x) * x


    def boom(x):
        raise ValueError("my bug")
    """
)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "my_ops.py"
    path.write_text(MODULE)
    return path


def _run(ops, name, *inputs, v=None):
    obj, label = load_target(f"{ops}:{name}")
    return check(obj, *inputs, v=v, label=label)


X = torch.tensor([1.0, 2.0, -1.5])
V = torch.tensor([0.5, 1.0, 2.0])


@pytest.mark.parametrize(
    ("name", "diagnosis"),
    [
        ("Factor", "off by the factor 0.666667"),
        ("Sign", "the sign is flipped"),
        ("Offset", "has an offset, a term that does not scale with grad_output"),
        ("Squares", "not linear in v"),
        ("Zeros", "ignores this input"),
        ("Nothing", "returned None"),
        ("OneRow", "only row 0 of J is wrong"),
        ("Shape", "wrong shape: the gradient for input 0 has shape [2], the input has [3]"),
        ("Count", "backward returns 2 gradients; it must return one per input of forward (1)"),
    ],
)
def test_each_kind_of_mistake_gets_its_diagnosis(ops, name, diagnosis):
    r = _run(ops, name, X, v=V)
    (event,) = r.events
    assert event.status == "disagree" and r.exit_code == 3
    assert diagnosis in (event.diagnosis or ""), event.diagnosis


def test_the_wrong_elements_are_named(ops):
    r = _run(ops, "Factor", X, v=V)
    checks = {c.name: c for c in r.events[0].checks}
    # expected 3x²v = [1.5, 12, 13.5]; returned 2x²v = [1, 8, 9]: the judge's checks of the call's record
    for name in ("jtv", "finite_difference"):
        assert "differs at x[0], x[1], x[2]" in checks[name].reason and "factor 0.666667" in checks[name].reason
    (x,) = r.events[0].inputs
    assert x.jtv == pytest.approx([1.5, 12.0, 13.5]) and x.finite_difference == pytest.approx([1.5, 12.0, 13.5])


def test_transposed_jacobian(ops):
    W = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    r = _run(ops, "Transposed", W, torch.tensor([1.0, 2.0]), v=torch.tensor([1.0, 1.0]))
    assert "transposed" in (r.events[0].diagnosis or "")
    assert [x.name for x in r.events[0].inputs] == ["W", "x"]


def test_float32_precision_is_not_called_a_bug(ops):
    r = _run(ops, "Precision", torch.tensor([1.37, 2.91, 0.53]))
    assert r.events[0].status == "disagree"
    assert "float32 precision" in (r.events[0].diagnosis or "")
    r64 = _run(ops, "Precision", torch.tensor([1.37, 2.91, 0.53], dtype=torch.float64))
    assert r64.events[0].status == "agree"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("name", "inputs"),
    [
        ("Right", [torch.tensor(1.5)]),
        ("Right", [torch.tensor([1.0, 2.0, -1.5])]),
        ("Right", [torch.tensor([[1.0, 2.0], [0.5, -1.0]])]),
        ("Linear", [torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([1.0, -2.0])]),
        ("Two", [torch.tensor([0.5, -1.0, 2.0])]),
        ("plain", [torch.tensor([0.3, 1.2])]),
    ],
)
def test_correct_backwards_agree(ops, name, inputs, dtype):
    r = _run(ops, name, *[x.to(dtype) for x in inputs])
    assert r.events[0].status == "agree" and r.events[0].diagnosis is None and r.exit_code == 0


def test_python_api_is_exported(ops):
    obj, _ = load_target(f"{ops}:Right")
    r = vjp_explorer.check(obj, X, v=V)
    assert r.events[0].inputs[0].grad == pytest.approx([1.5, 12.0, 13.5])
    assert r.to_dict()["kind"] == "check" and "steps" not in r.to_dict()


def test_large_inputs_are_checked_along_directions(ops):
    obj, _ = load_target(f"{ops}:plain")
    r = check(obj, torch.linspace(-1, 1, 10_000))
    checks = {c.name: c for c in r.events[0].checks}
    assert r.events[0].status == "agree" and "random u" in checks["finite_difference"].compares
    # past J's rows, Jᵀv is one vjp of the replayed forward: still element by element
    assert checks["jtv"].status == "agree" and "vjp" in checks["jtv"].compares


def test_cli_check(vjp, ops):
    res = vjp("check", f"{ops}:Factor", "--x", "1,2,-1.5", "--grad", "0.5,1,2")
    assert res.exit_code == 3 and "off by the factor" in res.stdout
    res = vjp("check", f"{ops}:Right", "--x", "1,2,-1.5", "--json")
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert d["events"][0]["status"] == "agree"


def test_check_json_is_the_one_document_of_kind_check(vjp, ops):
    # docs/json.md: a check is one call of your function, the one document's kind "check"
    res = vjp("check", f"{ops}:Factor", "--x", "1,2,-1.5", "--grad", "0.5,1,2", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 3 and set(doc) == {
        "schema",
        "kind",
        "torch",
        "events",
        "notes",
        "exit_code",
        "target",
        "summary",
    }
    assert doc["kind"] == "check" and doc["schema"] == 5 and doc["exit_code"] == 3
    d = doc
    assert d["target"].endswith("my_ops.py:Factor")
    (call,) = doc["events"]
    assert call["line"] is None and call["source"].endswith("(x)") and call["call"] == "check"
    (x,) = call["inputs"]
    # Jᵀv of x³ at v by hand: 3x²v; the backward gives 2x²v
    assert x["finite_difference"] == pytest.approx([1.5, 12.0, 13.5], rel=1e-9) and x["grad"] == [1.0, 8.0, 9.0]
    assert {n: (c["status"], c["independent"]) for n, c in call["checks"].items()} == {
        "jtv": ("disagree", False),
        "finite_difference": ("disagree", True),
        "linearity": ("agree", False),
        "jacobian": ("disagree", True),
    }
    assert "off by the factor 0.666667" in call["diagnosis"]
    # nothing of a snippet's transcript, and no word of backward/grad calls explained
    text = json.dumps(doc)
    for key in ('"repl"', '"stdout"', '"steps"', '"seed"'):
        assert key not in text, key
    assert "explained" not in d["summary"] and d["summary"].startswith("the custom backward is wrong")
    right = json.loads(vjp("check", f"{ops}:Right", "--x", "1,2,-1.5", "--json").stdout)
    assert right["summary"].startswith("the custom backward agrees with finite differences")
    text = vjp("check", f"{ops}:Right", "--x", "1,2,-1.5").stdout
    assert "explained" not in text and "the custom backward agrees with finite differences" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.py:f", "--x", "1"], "cannot be read"),
        (["{ops}:missing", "--x", "1"], "has no 'missing'"),
        (["{ops}:boom", "--x", "1"], "my bug"),
        (["{ops}:plain"], "Give a value for x"),
        (["{ops}:plain", "--x", "1", "--y", "2"], "no parameter y"),
        (["{ops}", "--x", "1"], "MODULE.py:NAME"),
    ],
)
def test_cli_check_bad_input(vjp, ops, args, message):
    res = vjp("check", *[a.format(ops=ops) for a in args])
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_load_target_refuses_a_directory(tmp_path):
    with pytest.raises(VjpError):
        load_target(f"{tmp_path}:f")


def test_a_backward_that_squares_v_is_caught_even_with_v_ones(ops):
    # gradcheck's one-hot v cannot see g * g; with v = ones the grads even match finite differences
    r = _run(ops, "Squares", X)
    checks = {c.name: c.status for c in r.events[0].checks}
    # one-hot rows (gradcheck's default) see nothing either: 1² = 1
    assert checks == {"jtv": "agree", "finite_difference": "agree", "linearity": "disagree", "jacobian": "agree"}
    assert r.exit_code == 3


def test_two_outputs_checked_as_one(ops):
    r = _run(ops, "TwoWrong", X)
    assert r.events[0].status == "disagree" and any("2 tensors" in n for n in r.events[0].notes)
    # one-hot rows of the first output pick up a stray 2x term, those of the second get nothing: all 6 rows
    assert "6 of 18 Jacobian entries are wrong" in (r.events[0].diagnosis or "")


MODULE_W = """
import torch

W = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))  # float32, at module level


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return W @ x

    @staticmethod
    def backward(ctx, g):
        return W.T @ g


class Transposed(Linear):  # the same forward; the backward applies W where Wᵀ is needed
    @staticmethod
    def backward(ctx, g):
        return W @ g
"""


def test_a_float32_module_global_is_promoted_for_the_float64_reference(vjp, tmp_path):
    path = tmp_path / "linear_ops.py"
    path.write_text(MODULE_W)
    r = vjp("check", f"{path}:Linear", "--x", "1,2,3", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    event = json.loads(r.stdout)["events"][0]
    w = torch.randn(3, 3, generator=torch.Generator().manual_seed(0)).double()
    want = w.T @ torch.ones(3, dtype=torch.float64)  # Jᵀv of W@x at v = ones, by hand
    assert event["inputs"][0]["finite_difference"] == pytest.approx(want.tolist(), rel=1e-6)
    assert any("W" in n["text"] and "promoted to float64" in n["text"] for n in event["notes"])
    r = vjp("check", f"{path}:Transposed", "--x", "1,2,3")
    assert r.exit_code == 3 and "transposed" in r.stdout


def test_promotion_is_undone_after_the_reference_runs(tmp_path):
    import importlib.util

    from vjp_explorer.trusted import check

    path = tmp_path / "linear_ops2.py"
    path.write_text(MODULE_W)
    spec = importlib.util.spec_from_file_location("linear_ops2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = check(module.Linear, torch.tensor([1.0, 2.0, 3.0]))
    assert result.exit_code == 0 and module.W.dtype == torch.float32


HYPER = """import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return x ** n

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.n * x ** (ctx.n - 1), None


def powr(x, n=3):
    return x ** n
"""


def test_a_number_the_backward_takes_no_gradient_of_goes_as_a_const_and_a_default_may_be_left_out(vjp, tmp_path):
    """Function.apply(x, 3), with backward returning None for n, read as wrong (n forced a tensor that asks a
    gradient); powr(x, n=3) demanded --n. By hand, d/dx x³ at (1, 2) = (3, 12)."""
    path = tmp_path / "hyper.py"
    path.write_text(HYPER)
    res = vjp("check", f"{path}:Cube", "--x", "1,2", "--const", "n=3", "--json")
    assert res.exit_code == 0, res.stdout
    (event,) = json.loads(res.stdout)["events"]
    assert event["status"] == "agree" and [x["name"] for x in event["inputs"]] == ["x"]
    assert event["inputs"][0]["grad"] == [3.0, 12.0]
    assert vjp("check", f"{path}:powr", "--x", "1,2").exit_code == 0  # n=3, its default
    missing = vjp("check", f"{path}:Cube", "--x", "1,2")
    assert missing.exit_code == 2 and "--const NAME=VALUE" in missing.stderr


def test_what_the_users_code_writes_to_descriptor_1_never_reaches_the_json(tmp_path):
    """os.write(1, ...) in the user's forward (a C extension's printf) landed in stdout, once per evaluation,
    and broke the JSON; it goes to stderr while the user's code runs. Run as a user runs it, in a process."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "noisy.py"
    path.write_text("import os\n\ndef f(x):\n    os.write(1, b'noise\\n')\n    return x * x\n")
    vjp = Path(sys.executable).with_name("vjp")
    res = subprocess.run([str(vjp), "check", f"{path}:f", "--x", "1,2", "--json"], capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout)["exit_code"] == 0
    assert "noise" in res.stderr
