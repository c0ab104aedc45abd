"""Long output through a pager on a terminal, rendered Markdown for docs (issue 42), in a pseudo-terminal:
stdin and stdout a terminal, $PAGER a command of ours that keeps what it was given. Piped output stays
plain (tests/test_docs.py and tests/test_cli.py pin it)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(argv: list[str], pager: str | None, no_color: bool = True) -> tuple[int, str]:
    """`vjp ARGV` with stdin, stdout and stderr a pseudo-terminal: (exit code, what the terminal got)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    env.pop("PAGER", None)
    env.pop("MANPAGER", None)
    if no_color:
        env["NO_COLOR"] = "1"
    if pager is not None:
        env["PAGER"] = pager
    proc = subprocess.Popen(
        [sys.executable, "-m", "vjp_explorer", *argv], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    got = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            got += chunk
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=60)
    os.close(leader)
    return code, ANSI.sub("", got.decode(errors="replace"))


def test_functions_go_through_the_pager_on_a_terminal(tmp_path):
    paged = tmp_path / "paged.txt"
    code, screen = on_terminal(["functions"], f"cat > {paged}")
    assert code == 0, screen
    text = paged.read_text()
    count = re.search(r"(\d+) of the language's functions", text)
    assert count and int(count[1]) > 100, text[-300:]
    assert "sin(x)" in text and "relu(x)" in text
    assert len(text.splitlines()) > 500 and len(screen.splitlines()) < 5, screen[:500]  # none of it passed by


def test_docs_render_as_markdown_in_the_pager(tmp_path):
    paged = tmp_path / "paged.txt"
    code, screen = on_terminal(["docs", "json"], f"cat > {paged}")
    assert code == 0, screen
    text = ANSI.sub("", paged.read_text())
    raw = Path(__file__).resolve().parents[1].joinpath("docs", "json.md").read_text()
    assert raw.startswith("# ") and "](" in raw  # the page has headings and links to render
    assert "JSON and exit codes" in text
    assert not re.search(r"^#+ ", text, re.M), text[:300]  # headings rendered, not `# ...`
    assert not re.search(r"\]\([\w./#-]+\)", text), re.search(r".{40}\]\([\w./#-]+\).{10}", text)


def test_no_pager_prints_straight_to_the_terminal(tmp_path):
    paged = tmp_path / "paged.txt"
    code, screen = on_terminal(["docs", "json", "--no-pager"], f"cat > {paged}")
    assert code == 0 and not paged.exists()
    assert "JSON and exit codes" in screen and not re.search(r"^#+ ", screen, re.M)


@pytest.mark.parametrize("argv", [["functions", "relu"], ["docs", "limits"]])
def test_pager_cat_opts_out_and_the_text_is_the_same(argv):
    code, screen = on_terminal(argv, "cat")
    assert code == 0 and screen.strip(), screen


def test_piped_docs_stay_raw_markdown():
    r = subprocess.run([sys.executable, "-m", "vjp_explorer", "docs", "json"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("# ") and "](" in r.stdout
