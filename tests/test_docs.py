"""Docs cannot drift: the transcripts are real output, CI runs the README's test command, and the
reference docs name every JSON key, exit code, limit and module there is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import transcripts

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("path", transcripts.FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_transcripts_are_current(monkeypatch, path):
    monkeypatch.chdir(ROOT)  # the transcripts name files relative to the repository
    text = path.read_text()
    fresh = transcripts.regenerate(text)
    same = transcripts.comparable(fresh) == transcripts.comparable(text)
    assert same, f"{path.name}: transcripts are stale: run python tests/transcripts.py --write"


def test_the_readme_keeps_its_transcripts_and_the_docs_the_rest():
    readme = transcripts.README.read_text()
    assert readme.count("<!-- transcript -->") >= 4  # a program, its JSON, an error, a snippet
    assert "$ vjp run seed000_ex1 --seed 0" in readme
    assert sum(p.read_text().count("<!-- transcript -->") for p in transcripts.FILES) >= 12
    assert len(readme.splitlines()) <= 250  # the README is for newcomers; the reference is in docs/


def test_the_readme_links_every_doc():
    readme = (ROOT / "README.md").read_text()
    for path in [*sorted(DOCS.glob("*.md")), ROOT / "bench/README.md"]:
        assert f"]({path.relative_to(ROOT).as_posix()})" in readme, path


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    assert ci in (ROOT / "README.md").read_text()
    assert "pytest" in ci and "constraints.txt" in ci


def test_docs_document_every_json_key_exit_code_and_limit():
    json_doc = (DOCS / "json.md").read_text()
    from test_json import FRAME, RUN  # the pinned top-level keys: one list for both tests

    for key in sorted(FRAME | RUN):
        assert f"| `{key}`" in json_doc or f"`{key}`" in json_doc, key
    from vjp_explorer.errors import ExitCode
    from vjp_explorer.limits import limit_names

    for doc in ((ROOT / "README.md").read_text(), json_doc):
        for code in ExitCode:
            assert re.search(rf"^\| {int(code)} \|", doc, re.M), code
    limits_doc = (DOCS / "limits.md").read_text()
    for name in limit_names():
        assert f"| `{name}` |" in limits_doc, name


def test_architecture_names_every_module():
    doc = (DOCS / "architecture.md").read_text()
    src = ROOT / "src" / "vjp_explorer"
    for path in src.rglob("*.py"):
        if "examples/snippets" in path.as_posix():
            continue  # the bundled snippets are data, not modules
        if path.name == "__init__.py" and not path.read_text().strip():
            continue  # an empty package marker has nothing to describe
        assert f"| `{path.relative_to(src.parent).as_posix()}` |" in doc, path
