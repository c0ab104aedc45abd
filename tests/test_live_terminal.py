"""`vjp live` in a real terminal (tmux) at 80x24 and 120x40 (issue 42): on a small MLP's snippet every number
is whole (labels may shorten), the footer keeps `? keys` and `q quit`, Ctrl-C quits, and a snippet piped
in (`cat f.py | vjp live -`) is read as `vjp run -` reads it. The numbers expected are torch's own, computed
here by running the same model in plain Python: an oracle independent of the view."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")

MLP = """\
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
x = torch.randn(5, 3)
y = net(x)
loss = y.pow(2).mean()
loss.backward()
"""
CUT = re.compile(r"[-\d.]…|…\d")  # a number ended (or begun) by an ellipsis


def oracle() -> dict[str, list[float]]:
    """The snippet's .grad of each parameter, from torch itself, in the snippet's own float32."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.randn(5, 3)
    net(x).pow(2).mean().backward()
    return {f"net.{name}": p.grad.reshape(-1).tolist() for name, p in net.named_parameters()}


_SERVERS = itertools.count()


class Terminal:
    """A tmux server of our own (its own socket): one window of a given size running one command."""

    def __init__(self, tmp: Path, width: int, height: int, command: str) -> None:
        # a socket of its own: the last test's server (same worker, same size) may not have gone yet
        self.socket = f"vjp-test-{os.getpid()}-{width}x{height}-{next(_SERVERS)}"
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "TMUX")}
        script = f"cd {shlex.quote(str(tmp))} && {command}; echo EXIT=$?; sleep 120"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), script, env=env)

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        argv = ["tmux", "-L", self.socket, "-f", os.devnull, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=True, timeout=30).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for(self, text: str, timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                time.sleep(0.5)  # a frame may still be drawing
                return self.screen()
            time.sleep(0.5)
        raise AssertionError(f"{text!r} never showed:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal(tmp_path):
    opened: list[Terminal] = []

    def start(width: int, height: int, command: str) -> Terminal:
        opened.append(Terminal(tmp_path, width, height, command))
        return opened[-1]

    (tmp_path / "mlp.py").write_text(MLP)
    yield start
    for t in opened:
        t.close()


VJP = f"{shlex.quote(sys.executable)} -m vjp_explorer"


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40)])
def test_a_snippets_numbers_are_never_cut_and_ctrl_c_quits(terminal, width, height):
    t = terminal(width, height, f"{VJP} live mlp.py")
    screen = t.wait_for("q quit")
    lines = screen.splitlines()
    assert len(lines) <= height and all(len(line) <= width for line in lines)
    assert not CUT.search(screen), screen
    # the first rows of the table: net.2.weight's elements, each .grad in full as torch computed it
    want = oracle()["net.2.weight"]
    from vjp_explorer.render.numbers import fmt

    for j in range(4):
        assert f" {fmt(want[j], 6)} " in screen + " ", (fmt(want[j], 6), screen)
    footer = lines[-1]
    assert "? keys" in footer and "q quit" in footer, footer
    t.keys("C-c")
    after = t.wait_for("EXIT=", timeout=30)
    assert "EXIT=0" in after, after


def test_a_snippet_piped_in_is_read_as_a_snippet(terminal):
    t = terminal(120, 40, f"cat mlp.py | {VJP} live -")
    screen = t.wait_for("q quit")
    assert "loss.backward()" in screen and "Imports are not part" not in screen, screen
    t.keys("q")
    assert "EXIT=0" in t.wait_for("EXIT=", timeout=30)
