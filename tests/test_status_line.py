"""Feedback on long work (issue 31): past a delay, one status line on stderr, only on a terminal, never
with --json, cleared before the output so that nothing is left on the screen."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from planted import SQUARE

ARGV = ["run", "3*a + 2*b*b + log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "ones"]
SNIPPET = ["run", "src/vjp_explorer/examples/snippets/seed000_ex1.py", "--seed", "0"]


def run_with_terminal_stderr(
    argv: list[str], after: str = "0", no_color: bool = False
) -> tuple[int, str, bytes, float]:
    """`vjp ARGV` with stderr a pseudo-terminal and stdout a pipe: (exit code, stdout, stderr's bytes, s)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "VJP_STATUS_AFTER": after, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vjp_explorer", *argv], stdout=subprocess.PIPE, stderr=follower, env=env
    )
    os.close(follower)
    err = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            err += chunk
        elif proc.poll() is not None:
            break
    assert proc.stdout is not None
    with proc.stdout:
        out = proc.stdout.read().decode()
    code = proc.wait()
    os.close(leader)
    return code, out, err, time.perf_counter() - started


def plain(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "vjp_explorer", *argv], capture_output=True, text=True, env=env)


CHECK = ["check", "{module}:Square", "--x", "1,2,3"]  # {module}: a file the test writes


@pytest.mark.parametrize("argv", [ARGV, SNIPPET, CHECK], ids=["program", "snippet", "check"])
def test_a_terminal_sees_what_is_happening_and_nothing_is_left(argv, tmp_path):
    module = tmp_path / "square.py"
    module.write_text(SQUARE)
    argv = [a.format(module=module) for a in argv]
    code, out, err, _ = run_with_terminal_stderr(argv)
    assert code == 0, err
    text = err.decode(errors="replace")
    assert "importing torch" in text or "running" in text or "checking" in text, text
    # the line is cleared and the cursor shown again after its last update: no garbage on the screen
    assert text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l") >= 0, repr(text[-200:])
    assert "\x1b[2K" in text[text.rfind("importing") if "importing" in text else 0 :]
    assert out == plain(argv).stdout  # stdout is as it is without a terminal


@pytest.mark.parametrize("extra", [["--json"]], ids=["json"])
def test_json_on_a_terminal_gets_no_status_line(extra):
    code, out, err, _ = run_with_terminal_stderr([*ARGV, *extra])
    assert code == 0 and out.startswith("{") and err == b""


def test_a_pipe_gets_no_status_line():
    env = {**os.environ, "VJP_STATUS_AFTER": "0"}
    r = subprocess.run([sys.executable, "-m", "vjp_explorer", *ARGV], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == ""


def test_a_quick_run_shows_no_line_and_the_line_does_not_delay_exit():
    code, _, err, took = run_with_terminal_stderr(["run", "3*a", "--a", "1", "--no-symbolic"], after="60")
    assert code == 0 and err == b""
    assert took < 30  # the timer thread (60 s) is a daemon, cancelled at the end: exit does not wait for it


@pytest.mark.parametrize(("extra", "no_color"), [([], True), (["--color", "never"], False)], ids=["NO_COLOR", "never"])
def test_the_spinner_is_not_coloured_when_colour_is_off(extra, no_color):
    """The spinner was green under NO_COLOR=1 and --color never: its console now writes no style at all."""
    code, _, err, _ = run_with_terminal_stderr([*ARGV, *extra], no_color=no_color)
    text = err.decode(errors="replace")
    # the line was drawn (which stage a frame catches depends on the machine's load; the stages are not timed)
    assert code == 0 and "\x1b[?25l" in text and ("importing torch" in text or "running" in text), text
    styles = re.findall(r"\x1b\[[0-9;]*m", text)  # SGR codes: colour, bold, reset (cursor codes are not SGR)
    assert styles == [], styles[:5]


def test_the_spinner_is_coloured_by_default_so_the_test_above_can_fail():
    code, _, err, _ = run_with_terminal_stderr(ARGV)
    assert code == 0 and re.search(r"\x1b\[[0-9;]*m", err.decode(errors="replace"))
