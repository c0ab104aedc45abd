"""Docs cannot drift: the README's transcripts are real output, CI runs the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

import transcripts

ROOT = Path(__file__).resolve().parents[1]


def test_readme_transcripts_are_current(monkeypatch):
    monkeypatch.chdir(ROOT)  # the transcripts name files relative to the repository
    text = transcripts.README.read_text()
    assert text.count("<!-- transcript -->") >= 5
    fresh = transcripts.regenerate(text)
    assert fresh == text, "README transcripts are stale: run python tests/transcripts.py --write"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    assert ci in (ROOT / "README.md").read_text()
    assert "pytest" in ci and "constraints.txt" in ci


def test_readme_documents_every_json_key_exit_code_and_limit():
    readme = (ROOT / "README.md").read_text()
    from test_json import TOP  # the pinned top-level keys: one list for both tests

    for key in sorted(TOP | {"explain"}):
        assert f"| `{key}`" in readme or f"`{key}`" in readme, key
    from vjp_explorer.errors import ExitCode
    from vjp_explorer.limits import limit_names

    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \|", readme, re.M), code
    for name in limit_names():
        assert f"| `{name}` |" in readme, name
