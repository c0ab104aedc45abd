"""Flags as users type them: a mistyped flag, PyTorch's spellings of a dtype, completion of values."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from documents import event

RUN = ["run", "x*2", "--x", "1,2", "--grad", "ones"]


@pytest.mark.parametrize("args", [[*RUN, "--jsn"], ["run", "x*2", "--x", "1,2", "--jsn", "--grad", "ones"]])
def test_a_mistyped_flag_gets_did_you_mean(vjp, args):
    r = vjp(*args)
    assert r.exit_code == 2
    assert r.stderr == "error: No such option --jsn; did you mean --json?\n"
    assert r.stdout == ""


def test_a_mistyped_flag_with_a_value_is_still_a_variable(vjp):
    r = vjp("run", "x*jsn", "--x", "1,2", "--jsn", "3", "--grad", "ones", "--json")
    assert r.exit_code == 0, r.stderr
    assert event(json.loads(r.stdout))["grads"]["jsn"] == pytest.approx(3.0)
    r = vjp(*RUN, "--jsn", "3")
    assert r.exit_code == 2 and "did you mean --json?" in r.stderr and "no variable 'jsn'" in r.stderr


def test_a_variable_without_its_value_says_so(vjp):
    r = vjp("run", "x*2", "--x", "--grad", "ones")
    assert r.exit_code == 2 and r.stderr.startswith("error: --x needs a value"), r.stderr


@pytest.mark.parametrize("spelling", ["float64", "double", "torch.float64", "torch.double"])
def test_dtype_takes_pytorchs_spellings(vjp, spelling):
    r = vjp(*RUN, "--dtype", spelling, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["dtype"] == "float64"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--dtype", "float16", "error: --dtype: must be float32 or float64"), ("--device", "tpu", "error: --device:")],
)
def test_dtype_and_device_are_refused_before_torch_is_imported(option, value, message):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from vjp_explorer.cli import app\n"
        f"r = CliRunner().invoke(app, {[*RUN, option, value]!r})\n"
        "print(r.exit_code, 'torch' in sys.modules, 'sympy' in sys.modules)\n"
        "print(r.stderr, end='')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    first, _, err = out.stdout.partition("\n")
    assert first == "2 False False", out.stdout + out.stderr
    assert err.startswith(message), err


def _complete(words: str) -> list[str]:
    from pathlib import Path

    vjp = Path(sys.executable).with_name("vjp")
    # the word being completed: a new one after a space, else the last one typed
    at = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {**os.environ, "_VJP_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(at)}
    r = subprocess.run([str(vjp)], capture_output=True, text=True, env=env, timeout=60)
    return r.stdout.split()


def test_shell_completion_of_dtype_device_and_example_names():
    assert _complete("vjp run x --dtype f") == ["float32", "float64"]
    assert _complete("vjp run x --device ") == ["cpu", "cuda"]
    assert "seed_3vector" in _complete("vjp explain seed_")
    assert "seed000_ex1" in _complete("vjp run seed0")


COMMANDS = [
    RUN,
    ["explain", "seed_3vector"],
    ["run", "seed000_ex1", "--seed", "0"],
    ["examples"],
    ["functions", "relu"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0] + " " + a[1] if len(a) > 1 else a[0])
def test_output_in_a_pipe_has_no_trailing_padding(vjp, args):
    r = vjp(*args)
    assert r.exit_code == 0, r.stderr
    padded = [line for line in r.stdout.splitlines() if line != line.rstrip()]
    assert padded == []


@pytest.mark.parametrize(
    ("env", "flag", "styled"),
    [
        ({"NO_COLOR": None, "FORCE_COLOR": None}, [], False),  # a pipe: plain
        ({"NO_COLOR": None, "FORCE_COLOR": "1"}, [], True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, [], False),  # NO_COLOR means no styles at all
        ({"NO_COLOR": "1", "FORCE_COLOR": None}, ["--color", "always"], True),  # the flag wins
        ({"NO_COLOR": None, "FORCE_COLOR": "1"}, ["--color", "never"], False),
        ({"NO_COLOR": None, "FORCE_COLOR": None}, ["--color", "auto"], False),
    ],
)
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0] + " " + a[1] if len(a) > 1 else a[0])
def test_color_flag_force_color_and_no_color(runner, args, env, flag, styled):
    from vjp_explorer.cli import app

    r = runner.invoke(app, [*args, *flag], env=env)
    assert r.exit_code == 0, r.stderr
    assert ("\x1b[" in r.stdout) is styled
    assert not any(line.rstrip() != line for line in r.stdout.splitlines())


def test_check_takes_color_too(vjp, tmp_path):
    mod = tmp_path / "ops.py"
    mod.write_text("def square(x):\n    return x * x\n")
    r = vjp("check", f"{mod}:square", "--x", "1,2", "--grad", "1,1", "--color", "always")
    assert r.exit_code == 0, r.stderr
    assert "\x1b[" in r.stdout


def test_docs_prints_the_bundled_pages(vjp):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs"
    r = vjp("docs")
    assert r.exit_code == 0 and "json          JSON and exit codes" in r.stdout
    r = vjp("docs", "json")
    assert r.exit_code == 0 and r.stdout == (root / "json.md").read_text()
    r = vjp("docs", "jsn")
    assert r.exit_code == 2 and "Did you mean json?" in r.stderr


@pytest.mark.parametrize(("command", "says"), [(["examples"], "'.[].name'"), (["functions"], "'.[].name'")])
def test_help_names_what_the_command_prints(vjp, command, says):
    r = vjp(*command, "--help")
    assert says in " ".join(r.stdout.split()) and ".grads" not in r.stdout
    r = vjp("check", "--help")
    assert "jq .summary" in " ".join(r.stdout.split()) and ".grads" not in r.stdout
