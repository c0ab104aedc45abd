"""The confined child does what `python FILE.py` (or the REPL) does, within its folders; the parent reads
its frames as untrusted data. The escape attempts are in test_confined_hostile.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vjp_explorer.confined import launch, protocol, runner
from vjp_explorer.confined.launch import ConfinementUnavailableError, confinement_available, run_confined
from vjp_explorer.confined.protocol import FrameReader, ProtocolError, safe_text

confined_only = pytest.mark.skipif(confinement_available() is not None, reason=f"{confinement_available()}")

SEED = """\
import torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x ** 2
y.backward(torch.tensor([1.0, 0.1, 0.01]))
x.grad
print(x.grad)
print(y.grad_fn.name(), x.grad.sum().item())
"""


@confined_only
def test_a_torch_snippet_prints_what_python_prints(tmp_path):
    """The independent route: the same file run by plain python (a bare expression prints nothing)."""
    path = tmp_path / "seed.py"
    path.write_text(SEED)
    plain = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True)
    outcome = run_confined(SEED)
    assert outcome.stopped is None and outcome.exception is None
    assert outcome.stdout == plain.stdout
    assert [s.line for s in outcome.statements] == [1, 2, 3, 4, 5, 6, 7]
    assert outcome.statements[5].stdout == "tensor([2.0000, 0.4000, 0.0600])\n"


@confined_only
def test_a_transcript_echoes_as_the_repl_did():
    transcript = textwrap.dedent(
        """\
        >>> import torch
        >>> x = torch.ones(2, requires_grad=True)
        >>> (x * 3).sum().backward()
        >>> x.grad
        tensor([3., 3.])
        >>> for i in range(2):
        ...     i
        ...
        0
        1
        """
    )
    assert runner.is_transcript(transcript)
    outcome = run_confined(transcript, mode="repl")
    assert outcome.stopped is None and outcome.exception is None, outcome
    assert outcome.stdout == "tensor([3., 3.])\n0\n1\n"
    assert [s.line for s in outcome.statements] == [1, 2, 3, 4, 6]  # the transcript's own line numbers


@confined_only
def test_torch_save_writes_in_the_scratch_folder_which_is_gone_afterwards():
    code = "import os, torch\ntorch.save(torch.arange(3), 'w.pt')\nprint(os.getcwd())\nprint(torch.load('w.pt'))"
    outcome = run_confined(code)
    assert outcome.exception is None, outcome
    scratch, loaded = outcome.stdout.splitlines()
    assert loaded == "tensor([0, 1, 2])"
    assert Path(scratch).name.startswith("vjp-snippet-") and not Path(scratch).exists()


@confined_only
def test_allow_read_makes_a_folder_readable_and_trust_reads_anything(tmp_path):
    (tmp_path / "data.txt").write_text("hello")
    code = f"print(open({str(tmp_path / 'data.txt')!r}).read())"
    assert run_confined(code).exception.type == "PermissionError"
    assert run_confined(code, allow_read=[tmp_path]).stdout == "hello\n"
    write = f"open({str(tmp_path / 'new.txt')!r}, 'w')"
    assert run_confined(write, allow_read=[tmp_path]).exception.type == "PermissionError"  # read, not write
    trusted = run_confined(code, trust=True)
    assert trusted.stdout == "hello\n" and not trusted.confined


@confined_only
def test_python_semantics_exit_syntax_future_and_stdin():
    exited = run_confined("print(1)\nimport sys\nsys.exit(3)\nprint(2)")
    assert (exited.stdout, exited.exit_code, exited.stopped) == ("1\n", 3, None)
    bad = run_confined("x = 1\ny = (")
    assert bad.exception.type == "SyntaxError" and bad.statements == [] and bad.exception.line == 2
    future = run_confined("from __future__ import annotations\ndef f(x: Undefined): pass\nprint(f.__annotations__)")
    assert future.stdout == "{'x': 'Undefined'}\n"
    assert run_confined("input()").exception.type == "EOFError"
    raised = run_confined("def f():\n    1 / 0\nf()")
    assert raised.exception.type == "ZeroDivisionError" and raised.exception.line == 2 and raised.exit_code == 1
    assert raised.exception.traceback.count('File "<snippet>"') == 2  # the snippet's frames, not the runner's


@confined_only
def test_atexit_functions_run_at_the_end_with_their_output_kept(tmp_path):
    """After the last statement, an error or sys.exit, as python runs them; an exception there is Python's
    "Exception ignored" on stderr, and the next function still runs."""
    code = textwrap.dedent(
        """\
        import atexit, sys
        def boom():
            raise ValueError("in exit")
        atexit.register(print, "last")
        atexit.register(boom)
        atexit.register(print, "first")
        print("body")
        """
    )
    for tail, exit_code in (("", 0), ("sys.exit(3)\n", 3), ("1 / 0\n", 1)):
        path = tmp_path / "exit.py"
        path.write_text(code + tail)
        plain = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
        outcome = run_confined(code + tail)
        assert outcome.stdout == plain.stdout == "body\nfirst\nlast\n"
        assert outcome.at_exit is not None and outcome.at_exit.stdout == "first\nlast\n"
        assert "Exception ignored in atexit callback" in outcome.at_exit.stderr and "ValueError" in outcome.stderr
        assert (outcome.exit_code, plain.returncode, outcome.stopped) == (exit_code, exit_code, None)
    assert run_confined("print(1)").at_exit is None


@confined_only
def test_what_the_confinement_refused_is_read_back_by_kind_and_library():
    """The kernel refuses; the child reads where a refusal came from (the whole traceback, and audit events
    for attempts the snippet's own code swallows), so the parent can say why a line failed."""
    loader = run_confined(
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "for batch in DataLoader(torch.arange(8.0), batch_size=4, num_workers=2):\n    print(batch)\n"
    )
    assert (loader.exception.type, loader.exception.refusal) == ("PermissionError", "process")
    assert "DataLoader" in loader.exception.via
    assert run_confined("import os\nos.fork()").exception.refusal == "process"
    assert run_confined("open('/etc/passwd').read()").exception.refusal == "files"
    assert run_confined("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)").exception.refusal == "system"
    net = run_confined("import urllib.request\nurllib.request.urlopen('http://example.com')")
    assert (net.exception.refusal, net.exception.via) == ("network", "urllib")
    assert run_confined("x = {}\nx['a']").exception.refusal is None
    swallowed = run_confined("import os\nprint(os.system('ls /') != 0)\nfor _ in range(3):\n    os.system('ls')")
    assert swallowed.stdout == "True\n" and swallowed.exception is None
    assert [(r.kind, r.what, r.line) for r in swallowed.refused] == [
        ("process", "os.system(ls /)", 2),
        ("process", "os.system(ls)", 3),  # once per top-level statement, not per call
    ]
    trusted = run_confined("import os\nos.system('true')\nopen('/nonexistent/x', 'w')", trust=True)
    assert trusted.refused == [] and trusted.exception.refusal is None  # nothing is refused with trust


@confined_only
def test_a_readable_working_directory_shows_in_the_scratch_folder_read_only(tmp_path, monkeypatch):
    """`open("data.csv")` finds the user's file where --allow-read names the folder vjp runs in; a write
    through the link is refused and the user's file stays as it was; a new file lands in the scratch folder."""
    (tmp_path / "data.csv").write_text("1,2\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.txt").write_text("more\n")
    monkeypatch.chdir(tmp_path)
    code = (
        "import sys\nprint(sys.argv)\nprint(open('data.csv').read(), open('sub/more.txt').read())\n"
        "open('new.txt', 'w').write('x')\nopen('data.csv', 'a').write('x')\n"
    )
    mirrored = run_confined(code, allow_read=["."], filename="train.py")
    assert mirrored.mirrored and mirrored.stdout == "['train.py']\n1,2\n more\n\n"
    exc = mirrored.exception
    assert (exc.type, exc.line, exc.refusal) == ("PermissionError", 5, "files")
    assert (tmp_path / "data.csv").read_text() == "1,2\n" and not (tmp_path / "new.txt").exists()
    unread = run_confined(code)
    assert not unread.mirrored and (unread.exception.type, unread.exception.refusal) == ("FileNotFoundError", "cwd")
    assert run_confined("open('/nowhere/x')").exception.refusal is None  # an absolute path: Python's own story


@confined_only
def test_a_memory_error_the_snippet_catches_is_its_own():
    outcome = run_confined("try:\n    bytearray(10**12)\nexcept MemoryError:\n    print('caught')")
    assert outcome.stdout == "caught\n" and outcome.stopped is None


def test_without_the_kernel_s_mechanisms_it_refuses_and_names_trust(monkeypatch):
    monkeypatch.setattr(launch, "confinement_available", lambda: "this kernel has no Landlock")
    with pytest.raises(ConfinementUnavailableError) as e:
        run_confined("print(1)")
    assert "no Landlock" in e.value.render() and "--trust" in e.value.render()
    assert e.value.exit_code == 2


def test_frames_are_checked_before_they_are_believed():
    good = protocol.encode({"type": "statement", "line": 1, "end_line": 1, "stdout": "x", "stderr": ""})
    reader = FrameReader()
    assert reader.feed(good[:3]) == [] and reader.feed(good[3:])[0]["stdout"] == "x"
    bad = [
        b"\xff\xff\xff\xff",  # a frame larger than the limit: refused before anything is allocated
        protocol.encode({"type": "statement", "line": "1", "end_line": 1, "stdout": "", "stderr": ""}),
        protocol.encode({"type": "statement", "line": 1, "end_line": 1, "stdout": "", "stderr": "", "x": 1}),
        protocol.encode({"type": "pickle"}),
        b"\x00\x00\x00\x02[]",
        b"\x00\x00\x00\x04\xff\xfe{}",
        b"\x00\x00\x10\x00" + b"[" * 4096,
    ]
    for data in bad:
        with pytest.raises(ProtocolError):
            FrameReader().feed(data)


def test_safe_text_shows_control_characters_as_escapes():
    assert safe_text("a\tb\nc") == "a\tb\nc"
    assert safe_text("\x1b[31mred\x07\r") == "\\x1b[31mred\\x07\\r"
    assert safe_text("abc\u202edef") == "abc\\u202edef"
    assert safe_text("naïve π") == "naïve π"


def test_the_transcript_reader_keeps_line_numbers():
    assert runner.transcript_source(">>> a = 1\n>>> a\n1\n>>> if a:\n...     a\n...\n1\n") == (
        "a = 1\na\n\nif a:\n    a\n\n\n"
    )


def _gone(pid: int) -> bool:
    """The process has ended and been reaped (a zombie still answers kill 0; its /proc stat says Z)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@confined_only
def test_ctrl_c_in_the_parent_leaves_no_child():
    seen: list[int] = []

    def interrupt(frame):
        if frame["type"] == "statement" and frame["stdout"]:
            seen.append(int(frame["stdout"]))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_confined("import os\nprint(os.getpid())\nimport time\ntime.sleep(60)", on_message=interrupt)
    assert seen and _gone(seen[0])


@confined_only
def test_the_child_dies_with_its_parent(tmp_path):
    """PDEATHSIG: a parent killed outright (no finally runs) takes the child with it."""
    parent = textwrap.dedent(
        """\
        import sys
        from vjp_explorer.confined.launch import run_confined
        def show(frame):
            if frame["type"] == "statement" and frame["stdout"]:
                print(frame["stdout"], end="", flush=True)
        run_confined("import os\\nprint(os.getpid(), os.getcwd())\\nimport time\\ntime.sleep(60)", on_message=show)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid, scratch = proc.stdout.readline().split()
    child = int(pid)
    proc.kill()
    proc.wait()
    proc.stdout.close()
    shutil.rmtree(scratch)  # a parent killed outright cannot delete it (docs/confinement.md)
    for _ in range(200):
        if _gone(child):
            break
        time.sleep(0.01)
    assert _gone(child)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_seccomp_filter_jumps_inside_itself_and_ends_in_a_return(arch):
    """Checked without a kernel, so the aarch64 table (not run here) is checked too."""
    from vjp_explorer.confined import seccomp

    prog = seccomp.program(arch, pid=1234)
    jumps = {0x15, 0x35, 0x45}
    for i, (code, jt, jf, _k) in enumerate(prog):
        if code in jumps:
            assert i + 1 + max(jt, jf) < len(prog), (i, code, jt, jf)
    assert prog[-1] == (0x06, 0, 0, 0x7FFF0000)
    table = seccomp.numbers(arch)
    assert len(set(table.values())) == len(table)  # no two names share a number
    assert all(name in table for name in (*seccomp.SELF_ONLY, "clone", "clone3", "prctl", "execve", "socket"))
    assert all(name in table for name in (*seccomp.SELF_OR_ZERO, *seccomp.WHO_SELF, "mmap", "shmget", "fchmodat"))
