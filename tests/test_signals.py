"""Signals and output faults, through the real console script in a subprocess.

Ctrl-C at any moment ends with 130 and no traceback; a reader that goes away, a full disk, an odd
terminal width, a stream that cannot encode our symbols, a deleted working directory and a closed
stdin each end in the documented way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from documents import event

VJP = Path(sys.executable).with_name("vjp")
if not VJP.exists():
    pytest.skip("no vjp console script next to this python", allow_module_level=True)

SEED = ["run", "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]
# about 4 s alone: start-up (typer, torch, sympy imports), a 300-step forward, backward and the checks
LONG = [
    "run",
    "y = x\nfor i in range(300):\n    y = sin(y)*1.0001",
    "--x",
    "randn(200)",
    "--grad",
    "ones",
    "--seed",
    "1",
]


def vjp(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([str(VJP), *args], **kw)


def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(tmp_path):
    # One process per moment, all started together, each signalled that long after its first line of
    # ours ran (`-X importtime` reports the import of vjp_explorer.entry, which installs the handler):
    # the moments fall in the imports of typer, torch (whose import used to swallow the
    # KeyboardInterrupt) and sympy, in the forward, backward and the checks. Before that first line the
    # signal meets Python's own start-up, which is not ours to change (see entry.py).
    moments = [0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 1.9]
    outs = [tmp_path / f"out{k}" for k in range(len(moments))]
    errs = [tmp_path / f"err{k}" for k in range(len(moments))]
    runs = []
    for out, err in zip(outs, errs, strict=True):
        with out.open("wb") as o, err.open("wb") as e:  # the child keeps its own copies of the descriptors
            runs.append(subprocess.Popen([sys.executable, "-X", "importtime", str(VJP), *LONG], stdout=o, stderr=e))
    ready: list[float | None] = [None] * len(moments)
    sent: list[bool | None] = [None] * len(moments)
    deadline = time.monotonic() + 120
    while None in sent and time.monotonic() < deadline:
        for k, p in enumerate(runs):
            if sent[k] is not None:
                continue
            if ready[k] is None and b"vjp_explorer.entry" in errs[k].read_bytes():
                ready[k] = time.monotonic()
            if p.poll() is not None:
                sent[k] = False  # finished first (a fast machine) or died: checked below
            elif ready[k] is not None and time.monotonic() >= ready[k] + moments[k]:
                p.send_signal(signal.SIGINT)
                sent[k] = True
        time.sleep(0.002)
    for p, at, was_sent, out, err in zip(runs, moments, sent, outs, errs, strict=True):
        p.wait(timeout=120)
        text = err.read_text(errors="replace")
        lines = [line for line in text.splitlines() if not line.startswith("import time:")]
        assert "Traceback" not in text and "Fatal" not in text, (at, lines)
        if was_sent:
            assert p.returncode == 130 and lines == ["interrupted"], (at, p.returncode, lines)
            assert out.read_bytes() == b"", at
        else:
            assert p.returncode == 0, (at, p.returncode, lines)


@pytest.mark.parametrize("args", [SEED, [*SEED, "--json"], ["examples"]])
def test_a_reader_that_is_gone_before_the_output_is_quiet(args):
    # `vjp ... | true`: the pipe is closed before the first byte; exit 0 as for `| head`, nothing on stderr
    with subprocess.Popen([str(VJP), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()
        err = reader.stderr.read().decode()
        assert reader.wait(timeout=120) == 0, err
    assert err == ""


@pytest.mark.parametrize("args", [SEED, ["examples"], ["examples", "--json"], ["run", "--help"], ["--version"]])
def test_a_full_disk_is_one_line_on_stderr(args):
    with open("/dev/full", "w") as full:
        r = vjp(*args, stdout=full, stderr=subprocess.PIPE, capture_output=False, text=True)
    assert r.returncode == 1, r.stderr
    assert r.stderr == "error: Cannot write the output to stdout: No space left on device.\n"


@pytest.mark.parametrize("columns", ["0", "1", "7", "-3", "abc", "99999999"])
def test_any_terminal_width_gives_the_whole_output(vjp, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    r = vjp(*SEED)
    assert r.exit_code == 0, r.stderr
    assert "symbolic           agree" in r.stdout and "jacobian           agree" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 1000


def test_a_stream_that_cannot_encode_our_symbols_gets_ascii_spellings():
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "120"}
    r = vjp(*SEED, env=env)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("ascii")
    assert "J^T v (from J)" in text and "sum_i v[i]*dy[i]/dx[j]" in " ".join(text.split())
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if "J^T v (from J)" in line)
    assert len(lines[header]) == len(lines[header + 1].rstrip()), "the table's header and rule line up"
    r = vjp(*SEED, "--json", env=env)
    assert r.returncode == 0 and r.stdout.isascii()
    assert event(json.loads(r.stdout))["grads"]["a"] == pytest.approx([0.3, 3, 0.0003])
    r = vjp("run", "x*2", "--x", "1,2", "--grad", "1", env=env)  # an error message with our symbols in it
    assert r.returncode == 2 and r.stderr.decode("ascii").startswith("error: --grad: v has shape []")


def test_a_latin1_stream_gets_ascii_spellings_and_its_own_letters():
    r = vjp("explain", "ones_not_derivative", env={**os.environ, "PYTHONIOENCODING": "latin-1", "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("latin-1")
    assert "x[0].grad = sum of 2 terms = 4" in text and "v[1]*dy[1]/dx[0] = 1 x A[1,0]" in text


def test_a_deleted_working_directory_is_a_clear_error(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    r = subprocess.run(
        ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{VJP}" run "x*2" --x 1'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: The current directory no longer exists") and "FATAL" not in r.stderr


def test_a_closed_stdin_is_a_clear_error():
    r = subprocess.run(["sh", "-c", f'"{VJP}" run - --x 1 <&-'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "stdin is closed" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("value", "shown"), [("0", False), ("", False), ("no", False), ("false", False), ("1", True), ("yes", True)]
)
def test_only_a_truthy_vjp_debug_turns_tracebacks_on(monkeypatch, value, shown):
    from vjp_explorer.cli import output as cli_output

    monkeypatch.setenv("VJP_DEBUG", value)
    error = RuntimeError("boom")
    if shown:
        with pytest.raises(RuntimeError):
            cli_output.fail(error, False)
    else:
        assert cli_output.fail(error, False).exit_code == 1


def test_ctrl_c_ends_with_130_when_the_parent_ignored_sigint(tmp_path):
    # A background job of a script (`vjp ... &` in sh) starts with SIGINT ignored, and Python keeps an
    # ignored SIGINT ignored: a `kill -INT` then did nothing and the run ended with exit 0. Our handler
    # replaces the ignore from our first line on; before it, the kernel discards the signal (entry.py).
    for delay in (0.0, 0.05, 0.3):
        script = (
            f'"{sys.executable}" -X importtime "{VJP}" {" ".join(repr(a) for a in SEED)} >/dev/null 2>"$0" & '
            'pid=$!; while ! grep -q vjp_explorer.entry "$0"; do sleep 0.002; done; '
            f'sleep {delay}; kill -INT $pid; wait $pid; echo "rc=$?"'
        )
        with_err = tmp_path / f"err{delay}"
        r = subprocess.run(["sh", "-c", script, str(with_err)], capture_output=True, text=True, timeout=120)
        lines = [x for x in with_err.read_text().splitlines() if not x.startswith("import time:")]
        assert r.stdout.strip() == "rc=130" and lines == ["interrupted"], (delay, r.stdout, lines)


# a snippet whose child lives a few seconds: torch imported, a backward, a sleep, then the transcript
SLOW_SNIPPET = (
    "import torch\nx = torch.ones(2, requires_grad=True)\n(x * x).sum().backward()\nimport time\ntime.sleep(4)\n"
)


@pytest.mark.parametrize("moment", ["before the child", "as the child starts", "while it runs", "while rendering"])
@pytest.mark.parametrize("to", ["process", "group"])
def test_ctrl_c_during_a_snippet_exits_130_and_leaves_no_scratch(tmp_path, moment, to):
    """Before the scratch folder exists, as soon as it does, a second into the child's run, and once it is
    gone again (the parent renders): 130, "interrupted", and the temporary folder empty. `group` is what a
    terminal's Ctrl-C does: SIGINT to the whole foreground process group."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    snippet = tmp_path / "slow.py"
    snippet.write_text(SLOW_SNIPPET)
    env = {**os.environ, "TMPDIR": str(temp)}
    err = tmp_path / "err"
    with err.open("wb") as e:
        p = subprocess.Popen(
            [sys.executable, "-X", "importtime", str(VJP), "run", str(snippet)],
            stdout=subprocess.DEVNULL,
            stderr=e,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    seen_scratch = None

    def signal_it() -> bool:
        if p.poll() is not None:
            return False
        os.killpg(p.pid, signal.SIGINT) if to == "group" else p.send_signal(signal.SIGINT)
        return True

    sent = False
    while time.monotonic() < deadline and p.poll() is None and not sent:
        scratch = list(temp.iterdir())
        if moment == "before the child" and b"vjp_explorer.entry" in err.read_bytes():
            sent = signal_it()
        elif scratch and seen_scratch is None:
            seen_scratch = time.monotonic()
            if moment == "as the child starts":
                sent = signal_it()
        elif moment == "while it runs" and seen_scratch and time.monotonic() > seen_scratch + 1.0:
            sent = signal_it()
        elif moment == "while rendering" and seen_scratch and not scratch:
            sent = signal_it()
        time.sleep(0.002)
    p.wait(timeout=120)
    lines = [x for x in err.read_text(errors="replace").splitlines() if not x.startswith("import time:")]
    assert list(temp.iterdir()) == [], moment
    assert "Traceback" not in "\n".join(lines)
    if sent:
        assert p.returncode == 130 and lines == ["interrupted"], (moment, p.returncode, lines)
    else:  # the run ended first (rendering a short transcript takes milliseconds): it ended as usual
        assert moment == "while rendering" and p.returncode == 0, (moment, p.returncode, lines)
