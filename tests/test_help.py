"""The command line's conventions: every option documented in --help with an example, shell completion."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from vjp_explorer.cli import app


@pytest.mark.parametrize("name", ["run", "explain", "check", "live"])
def test_every_option_has_help_with_an_example(name):
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    for param in command.params:
        if param.name == "help":
            continue
        text = getattr(param, "help", None) or ""
        assert "e.g." in text, f"vjp {name} {param.opts[0]}: {text!r}"


@pytest.mark.parametrize("name", ["run", "explain", "check", "live"])
def test_help_shows_every_option(vjp, name):
    shown = vjp(name, "--help").stdout
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option":
            assert param.opts[0] in shown, param.opts[0]


def test_shell_completion_is_offered():
    top = subprocess.run([sys.executable, "-m", "vjp_explorer", "--help"], capture_output=True, text=True)
    assert "--install-completion" in top.stdout and "--show-completion" in top.stdout
    # typer guesses the shell from the parent processes, which a test runner started from no shell lacks;
    # its own switch makes --show-completion take the shell by name instead
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = subprocess.run(
        [sys.executable, "-m", "vjp_explorer", "--show-completion", "bash"], capture_output=True, text=True, env=env
    )
    assert script.returncode == 0 and "complete" in script.stdout, script.stderr


def test_completion_lists_commands_and_options_without_torch():
    """What the shell runs on TAB: typer's completion mode, which must stay as light as --help."""
    code = (
        "import os, sys\n"
        "os.environ.update(_VJP_COMPLETE='complete_bash', COMP_WORDS='vjp run --gr', COMP_CWORD='2')\n"
        "from vjp_explorer.cli import app\n"
        "try:\n"
        "    app(prog_name='vjp')\n"
        "except SystemExit:\n"
        "    pass\n"
        "bad = [m for m in ('torch', 'sympy', 'textual') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--grad" in out.stdout and "--graph" in out.stdout
