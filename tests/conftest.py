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
