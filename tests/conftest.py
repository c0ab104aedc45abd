"""Shared fixtures: a CliRunner with the terminal pinned, and the library entry point."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from vjp_explorer.cli import app

# pin the terminal so Rich output is stable: no colour, a fixed width
os.environ["NO_COLOR"] = "1"
os.environ["COLUMNS"] = "120"
os.environ.pop("VJP_DEBUG", None)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def vjp(runner: CliRunner):
    """Invoke `vjp ARGS...` in-process; returns the click Result (stdout, stderr, exit_code)."""

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input)

    return invoke


@pytest.fixture
def vjp_at(runner: CliRunner):
    """`vjp ARGS...` in-process with the terminal WIDTH columns wide; returns stdout (exit 0 asserted)."""

    def invoke(width: int, *args: str) -> str:
        r = runner.invoke(app, list(args), env={"COLUMNS": str(width)})
        assert r.exit_code == 0, r.stdout + r.stderr
        return r.stdout

    return invoke


@pytest.fixture(autouse=True)
def no_dispatch_mode_left():
    """A test that leaves a torch dispatch mode on the stack (the op log, entered in this process by `vjp
    check`) would log every later test's operations in this worker: fail the test that left it."""
    yield
    import sys

    if "torch" not in sys.modules:
        return
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode

    left = []
    while _get_current_dispatch_mode() is not None:
        left.append(type(_pop_mode()).__name__)
    assert not left, f"the test left dispatch modes on the stack: {left}"
