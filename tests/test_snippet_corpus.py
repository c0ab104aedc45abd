"""65 real autograd snippets (sources in tests/snippet_corpus/SOURCES.md) paste unchanged.

Each runs twice: in plain Python with torch (the oracle, statement by statement as a REPL) and through the
snippet interpreter; the printed text must be the same, the error (if any) the same, and the verdicts must
call out exactly the snippets whose gradient is really wrong (a nan where the math is finite, values changed
behind autograd's back).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from snippet_oracle import plain_python
from vjp_explorer.snippet import run_snippet

CORPUS = sorted(p for p in (Path(__file__).parent / "snippet_corpus").glob("*.py") if p.name != "check_corpus.py")
ADDRESS = re.compile(r" at 0x[0-9a-f]+")

# the gradient these compute is wrong, and the tool must say so (exit 3)
WRONG = {
    "issue68425_where_exp_nan.py": "ExpBackward0",  # where(): exp overflows in the branch not taken
    "issue156212_where_nan_input.py": None,
    "issue187297_where_sqrt_nan.py": "SqrtBackward0",
    "issue108618_where_log2_vs_loop.py": "Log2Backward0",
    "issue152088_log1p_mask.py": None,
}


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict]:
    return dict(zip((p.name for p in CORPUS), plain_python([p.read_text() for p in CORPUS], seed=0), strict=True))


def test_the_corpus_is_large_and_sourced():
    assert len(CORPUS) >= 60
    sources = (CORPUS[0].parent / "SOURCES.md").read_text()
    assert all(p.name in sources for p in CORPUS)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_snippet_runs_as_plain_python_does(path, oracle):
    want = oracle[path.name]
    got = run_snippet(path.read_text(), path.name, seed=0)
    assert ADDRESS.sub("", got.stdout) == ADDRESS.sub("", want["stdout"])
    if want["error"] is None:
        assert got.error is None
    else:
        assert got.error is not None and (got.error.type, got.error.message) == (
            want["error"]["type"],
            want["error"]["message"],
        )
    failed = [c.reason for e in got.events for c in e.checks if "the check itself failed" in (c.reason or "")]
    assert not failed, failed
    disagree = [e for e in got.events if e.status == "disagree"]
    if path.name in WRONG:
        assert disagree, "a wrong gradient must not be called agree"
        node = WRONG[path.name]
        if node:
            assert node in (disagree[0].diagnosis or "")
    else:
        assert not disagree, [(e.line, [(c.name, c.reason) for c in e.checks]) for e in disagree]
