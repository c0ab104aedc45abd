"""The CLI through CliRunner: options, values, errors, exit codes, stdin, terminal output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from documents import event, inputs, per_leaf

SEED = ["run", "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]


def ok(r):
    assert r.exit_code == 0, r.stdout + r.stderr
    return r


def bad(r, *phrases, code=2):
    out = r.stdout + r.stderr
    assert r.exit_code == code, out
    assert "Traceback" not in out
    for p in phrases:
        assert p in r.stderr, r.stderr
    return r


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["explain", "--help"],
        ["live", "--help"],
        ["examples", "--help"],
        ["functions", "--help"],
    ],
)
def test_help_imports_neither_torch_nor_sympy(argv):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from vjp_explorer.cli import app\n"
        f"r = CliRunner().invoke(app, {argv!r})\n"
        "assert r.exit_code == 0, r.output\n"
        "bad = [m for m in ('torch', 'sympy', 'textual') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_command_has_help_and_an_example(vjp):
    for cmd in ("run", "explain", "live", "examples", "functions"):
        r = ok(vjp(cmd, "--help"))
        assert "Example" in r.stdout, cmd


def test_seed_terminal_output_has_the_columns_and_no_ansi(vjp):
    r = ok(vjp(*SEED))
    out = r.stdout
    assert "\x1b[" not in out
    for phrase in [".grad (backward)", "Jᵀv (from J)", "Jᵀv (sympy)", "J = ∂y/∂c", "c[0]", "0.0166667", "1.25e-05"]:
        assert phrase in out, phrase
    assert "agree" in out and "disagree" not in out


def test_jtv_from_backwards_own_pass_is_no_column_of_its_own(vjp):
    # elementwise with v = ones: J's diagonal is autograd.grad(y, x, ones), backward's own pass, so Jᵀv
    # from J would repeat .grad bit for bit; the table leaves it out and says why in one line
    r = ok(vjp("run", "3*a + 2*b*b", "--a", "1,2", "--b", "1,4", "--grad", "ones"))
    assert "Jᵀv (from J)" not in r.stdout.replace("no Jᵀv (from J) for", "")
    assert "no Jᵀv (from J) for a, b: J's diagonal came from backward's own pass (v = ones)" in r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("b[1]"))
    assert [c.split()[0] for c in row.split("│")[1:4]] == ["4", "16", "16"], row  # value, .grad, sympy
    # the same program with another v: Jᵀv from J (diagonal · v) is a number of its own, shown
    r = ok(vjp("run", "3*a + 2*b*b", "--a", "1,2", "--b", "1,4", "--grad", "1,2"))
    assert "Jᵀv (from J)" in r.stdout and "backward's own pass" not in r.stdout
    # a dense J (W@x) is never backward's pass, even with v = ones
    r = ok(vjp("run", "W@x", "--x", "1,2", "--const", "W=[[1,2],[3,4]]", "--grad", "ones"))
    assert "Jᵀv (from J)" in r.stdout and "backward's own pass" not in r.stdout
    d = json.loads(ok(vjp("run", "3*a + 2*b*b", "--a", "1,2", "--b", "1,4", "--grad", "ones", "--json")).stdout)
    assert per_leaf(d, "jacobian")["a"]["same_pass"] is True and per_leaf(d, "jtv")["b"] == event(d)["grads"]["b"]


def test_json_only_json_on_stdout(vjp):
    r = ok(vjp(*SEED, "--json"))
    d = json.loads(r.stdout)
    assert r.stderr == ""
    assert event(d)["grads"]["b"] == pytest.approx([1.2, 16.0, 0.002], rel=1e-6)


def test_program_from_stdin(vjp):
    r = ok(vjp("run", "-", "--x", "1,2", "--grad", "1,1", "--json", input="y = x * x\n"))
    assert event(json.loads(r.stdout))["grads"]["x"] == [2.0, 4.0]


def test_var_for_a_name_that_clashes_with_an_option(vjp):
    r = ok(vjp("run", "grad * help", "--var", "grad=2", "--var", "help=3", "--json"))
    d = json.loads(r.stdout)
    assert event(d)["grads"] == {"grad": 3.0, "help": 2.0}


def test_equals_form_and_negative_values(vjp):
    r = ok(vjp("run", "x * y", "--x=-1,2", "--y", "-3,-4", "--grad", "-1,1", "--json"))
    d = json.loads(r.stdout)
    assert event(d)["grads"]["x"] == [3.0, -4.0]
    assert event(d)["grads"]["y"] == [1.0, 2.0]


def test_options_before_the_program(vjp):
    r = ok(vjp("run", "--grad", "1,1", "--x", "1,2", "x*3", "--json"))
    assert event(json.loads(r.stdout))["grads"]["x"] == [3.0, 3.0]


@pytest.mark.parametrize("argv", [["(-2*x)", "--x", "1,2"], ["--x", "1,2", "--", "-2*x"]])
def test_a_program_that_starts_with_a_minus_sign(vjp, argv):
    # the README's two ways: parentheses, or the program after `--` at the end
    r = ok(vjp("run", "--json", "--grad", "ones", *argv))
    assert event(json.loads(r.stdout))["grads"]["x"] == [-2.0, -2.0]


@pytest.mark.parametrize("program", ["-2*x", "-x*2", "-(x)", "- x"])
def test_a_program_that_starts_with_a_minus_sign_gets_the_two_ways_named(vjp, program):
    r = bad(vjp("run", program, "--x", "1,2", "--grad", "ones"), "starts with a minus sign", "parentheses", " -- ")
    assert r.stdout == "" and "Usage:" not in r.stderr
    assert len(r.stderr) < 400  # a long program is shortened in the message


def test_many_leading_minus_signs_read_as_an_option_get_a_short_message(vjp):
    r = bad(vjp("run", "-" * 3000 + "x", "--x", "1"), "neither an option", "parentheses")
    assert r.stdout == "" and len(r.stderr) < 400


def test_const_is_not_a_leaf(vjp):
    r = ok(vjp("run", "W @ x", "--x", "1,2", "--const", "W=[[1,2],[3,4]]", "--grad", "1,0", "--json"))
    d = json.loads(r.stdout)
    assert inputs(d)["W"]["requires_grad"] is False
    assert set(event(d)["grads"]) == {"x"} and set(per_leaf(d, "jacobian")) == {"x"}
    assert event(d)["grads"]["x"] == [1.0, 2.0]


def test_missing_value_names_the_inputs(vjp):
    bad(vjp("run", "a + b", "--a", "1"), "No value for 'b'", "inputs are: a, b")


def test_value_for_unused_name(vjp):
    bad(vjp("run", "a * 2", "--a", "1", "--b", "2"), "'b'", "inputs are: a")


def test_value_for_an_intermediate(vjp):
    bad(vjp("run", "z = a * 2; y = z + 1", "--a", "1", "--z", "2"), "intermediate")


def test_typo_of_an_option_is_named(vjp):
    r = bad(vjp("run", "a * 2", "--a", "1,2", "--grads", "1,1"), "'grads'")
    assert "--grad" in r.stderr


def test_variable_given_twice(vjp):
    bad(vjp("run", "a * 2", "--a", "1", "--var", "a=2"), "given twice")


def test_value_and_const_for_the_same_name(vjp):
    bad(vjp("run", "a * b", "--a", "1", "--b", "1", "--const", "a=2"), "given twice")


def test_non_scalar_output_without_grad_quotes_torch(vjp):
    r = bad(vjp("run", "x * 2", "--x", "1,2,3"), "grad can be implicitly created only for scalar outputs")
    assert "--grad" in r.stderr and "[3]" in r.stderr


def test_grad_of_the_wrong_shape(vjp):
    bad(vjp("run", "x * 2", "--x", "1,2,3", "--grad", "1,2"), "output space", "[2]", "[3]", "Mismatch in shape")


def test_grad_ones_equals_backward_of_sum(vjp):
    a = json.loads(ok(vjp("run", "x * x", "--x", "1,2,3", "--grad", "ones", "--json")).stdout)
    b = json.loads(ok(vjp("run", "(x * x).sum()", "--x", "1,2,3", "--json")).stdout)
    assert event(a)["grads"] == event(b)["grads"]


def test_output_that_does_not_require_grad(vjp):
    bad(vjp("run", "y = c * 2", "--const", "c=1"), "nothing to differentiate")
    bad(vjp("run", "z = a * 2; y = c * 3", "--a", "1", "--const", "c=1"), "does not require grad")


def test_dtype_float64_and_bad_dtype(vjp):
    d = json.loads(ok(vjp("run", "x / 3", "--x", "1", "--dtype", "float64", "--json")).stdout)
    assert d["dtype"] == "float64"
    assert event(d)["grads"]["x"] == 1 / 3
    bad(vjp("run", "x / 3", "--x", "1", "--dtype", "float16"), "float32 or float64")


def test_random_values_are_seeded(vjp):
    a = json.loads(ok(vjp("run", "x.pow(2)", "--x", "randn(3,3)", "--seed", "0", "--grad", "ones", "--json")).stdout)
    b = json.loads(ok(vjp("run", "x.pow(2)", "--x", "randn(3,3)", "--seed", "0", "--grad", "ones", "--json")).stdout)
    assert event(a)["grads"] == event(b)["grads"] and a["seed"] == 0
    import torch

    torch.manual_seed(0)
    x = torch.randn(3, 3)
    assert inputs(a)["x"]["value"] == x.tolist()


def test_unknown_limit_and_bad_limit(vjp):
    bad(vjp("run", "x*2", "--x", "1", "--limit", "nope=3"), "unknown limit")
    bad(vjp("run", "x*2", "--x", "1", "--limit", "iterations"), "NAME=VALUE")


def test_disagreement_exits_3(vjp, monkeypatch):
    from vjp_explorer.engine import compare
    from vjp_explorer.result import Tolerance

    # a zero tolerance in float32: sympy's exact values differ from float32 arithmetic in the last bits
    monkeypatch.setitem(compare.TOLERANCES, "float32", Tolerance(0.0, 0.0))
    r = vjp(*SEED, "--json")
    assert r.exit_code == 3, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert event(d)["checks"]["symbolic"]["status"] == "disagree"
    assert d["exit_code"] == 3
    r = vjp(*SEED)
    assert r.exit_code == 3 and "disagree" in r.stdout and "exit 3" in r.stderr


def test_internal_error_is_short_without_traceback(vjp, monkeypatch):
    import vjp_explorer.api as api

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(api, "run", boom)
    r = vjp(*SEED)
    assert r.exit_code == 1
    assert "internal error" in r.stderr and "please report" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_markup_in_user_text_prints_literally(vjp):
    r = ok(vjp("run", "y = x * 2  # [/red] [bold]", "--x", "1", "--verbose"))
    assert "[/red] [bold]" in r.stdout


def test_big_tensors_are_summarised(vjp):
    r = ok(vjp("run", "x * 2", "--x", "linspace(0, 1, 1000)", "--grad", "ones"))
    assert len(r.stdout.splitlines()) < 120
    assert "..." in r.stdout
    assert "not materialised" in r.stdout or "more than a screen" in r.stdout


def test_nonfinite_values_in_json_are_strings(vjp):
    r = ok(vjp("run", "torch.log(x)", "--x", "0,1", "--grad", "ones", "--json"))
    d = json.loads(r.stdout)
    assert event(d)["outputs"][0]["value"][0] == "-inf"
    assert event(d)["grads"]["x"] == ["inf", 1.0]
    assert event(d)["checks"]["symbolic"]["status"] == "agree"
    assert event(d)["checks"]["symbolic"]["undefined"] == ["x[0]"]
    assert any(n["code"] == "nonfinite_grad" for n in event(d)["notes"])


def test_reported_edge_cases(vjp):
    # transposing a 0-d value is a no-op in torch, and in the symbolic route
    ok(vjp("run", "z = transpose(x.sum(), 0, 0)", "--x", "1,2"))
    # sympy overflowing is a skipped check, not a crash
    r = ok(vjp("run", "z = -3 ** (pow(c, c) / 3)", "--c", "1e30", "--dtype", "float64", "--json"))
    assert event(json.loads(r.stdout))["checks"]["symbolic"]["status"] == "skipped"
    # a variable named like an option: only --var works, and the message says so
    bad(vjp("run", "grad*2", "--grad", "1"), "--var grad=VALUE")
    bad(vjp("run", "2*3"), "no inputs")
    r = bad(vjp("run", "y = x*2\nz = y", "--x", "1", "--y", "2"), "intermediate")
    assert "did you mean" not in r.stderr


def test_full_stops_at_the_terminal_cap_and_says_so(vjp):
    from vjp_explorer.render.text import FULL_MAX

    r = ok(vjp("run", "2*a", "--a", f"linspace(0, 1, {FULL_MAX + 1})", "--grad", "ones", "--full"))
    # (the caption wraps at the table's width, narrower where J's Jᵀv is .grad itself and has no column)
    assert f"--full shows {FULL_MAX:,} rows; --json --full has all" in " ".join(r.stdout.split())
    assert r.stdout.count("\n") < 200
    # under the table, not in a cell: the element column stays narrow and the numbers stay whole
    header = next(line for line in r.stdout.splitlines() if line.startswith("element"))
    assert header.index("┃") < 16, header
    r = ok(vjp("run", "2*a", "--a", "linspace(0, 1, 30)", "--grad", "ones", "--full"))
    assert "a[29]" in r.stdout and "a[15]" in r.stdout and "at most" not in r.stdout


def _console_script() -> str:
    from pathlib import Path

    path = Path(sys.executable).with_name("vjp")
    if not path.exists():
        pytest.skip("no vjp console script next to this python")
    return str(path)


def test_console_script_flushes_everything_and_keeps_exit_codes(tmp_path):
    # main() leaves through os._exit after flushing: a redirect must still get every byte
    vjp = _console_script()
    out = tmp_path / "out.json"
    with out.open("w") as f:
        r = subprocess.run([vjp, *SEED, "--json"], stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert event(json.loads(out.read_text()))["grads"]["c"] == pytest.approx([0.1 / 6, 1 / 7, 0.0001 / 8])
    r = subprocess.run([vjp, "run", "3*"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "column 3" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([vjp, "frobnicate"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "frobnicate" in r.stderr


def test_a_reader_that_stops_early_is_not_an_error():
    # `vjp run ... --json | head -c 100`: the pipe closes while vjp is still writing megabytes
    vjp = _console_script()
    with subprocess.Popen(
        [vjp, "run", "2*a", "--a", "linspace(0, 1, 200000)", "--grad", "ones", "--json", "--full"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as p:
        assert p.stdout is not None and p.stderr is not None
        head = p.stdout.read(100)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0, err
    assert head.startswith(b'{"schema"') and err == ""


@pytest.mark.parametrize("args", [["examples", "--json"], [*SEED, "--json"], SEED])
def test_a_closed_stdout_is_not_an_error(args):
    import shlex

    vjp = _console_script()
    cmd = shlex.join([vjp, *args]) + " >&-"  # the shell starts vjp with descriptor 1 closed
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
