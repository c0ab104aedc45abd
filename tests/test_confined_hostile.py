"""The confined child, tried as an attacker would: every case must end with a clear, documented outcome,
and nothing may escape: no marker written outside the scratch folder, no secret read, no process started,
no connection made, no signal delivered to the parent.

Each case is a snippet run through run_confined. A marker file lives in a folder the test owns: any escape
that reaches the file system (or starts a program that would) writes it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vjp_explorer.confined.launch import confinement_available, run_confined
from vjp_explorer.confined.outcome import Outcome
from vjp_explorer.confined.protocol import safe_text
from vjp_explorer.errors import LimitError, ProgramError
from vjp_explorer.limits import DEFAULT_LIMITS

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason=f"{confinement_available()}")

SECRET = "SECRET-7f3a9c"  # planted in a file outside every allowed folder; no output may contain it

# a pickle that runs a shell command when loaded (the payload of the torch.load and np.load cases)
PAYLOAD = """
import os
class Payload:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
"""


# writes `data` to every descriptor the child may hold: its message pipe among them
TO_EVERY_FD = """
import os
for fd in range(3, 64):
    try:
        os.write(fd, {data})
    except OSError:
        pass
"""


def frame(message: dict) -> str:
    """A well-formed frame as a bytes literal, doubled braces and all (the cases go through str.format)."""
    body = json.dumps(message).encode()
    return repr(struct.pack(">I", len(body)) + body).replace("{", "{{").replace("}", "}}")


@dataclass
class Case:
    name: str
    code: str
    # what a case must end with: ("exception", type names), ("limit", limit name), ("stopped", words in
    # the message), ("prints", text in stdout); every case also gets the checks of `no_escape`
    expect: tuple[str, ...]
    limits: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("write outside", "open('{marker}', 'w').write('x')", ("exception", "PermissionError")),
    Case("make a folder outside", "import os; os.mkdir('{marker}')", ("exception", "PermissionError")),
    Case(
        "link out of scratch",
        "import os; os.symlink('{secret}', 'l'); open('l').read()",
        ("exception", "PermissionError"),
    ),
    Case("read a planted secret", "print(open('{secret}').read())", ("exception", "PermissionError")),
    Case("list the home folder", "import os; print(os.listdir('{home}'))", ("exception", "PermissionError")),
    Case(
        "read ~/.ssh",
        "import os; print(os.listdir('{home}/.ssh'))",
        ("exception", "PermissionError", "FileNotFoundError"),
    ),
    Case("read /etc/passwd", "print(open('/etc/passwd').read())", ("exception", "PermissionError")),
    Case("parent's environ", "print(open('/proc/{ppid}/environ').read())", ("exception", "PermissionError")),
    Case("parent's cwd", "import os; print(os.listdir('/proc/{ppid}/cwd'))", ("exception", "PermissionError")),
    Case("parent's memory", "print(open('/proc/{ppid}/mem', 'rb').read(8))", ("exception", "PermissionError")),
    Case("all of /proc", "import os; print(os.listdir('/proc'))", ("exception", "PermissionError")),
    Case("own source file", "print(open(__file__).read())", ("exception", "PermissionError")),
    # glibc's system() answers "exit status 127" (32512) when it cannot start the shell: no process ran
    Case("os.system", "import os; print(os.system('touch {marker}'))", ("prints", "32512")),
    Case(
        "subprocess.run", "import subprocess; subprocess.run(['touch', '{marker}'])", ("exception", "PermissionError")
    ),
    Case("os.fork", "import os; os.fork()", ("exception", "PermissionError")),
    Case(
        "os.posix_spawn",
        "import os; os.posix_spawn('/usr/bin/touch', ['t', '{marker}'], {{}})",
        ("exception", "PermissionError"),
    ),
    Case("os.execv", "import os; os.execv('/usr/bin/touch', ['t', '{marker}'])", ("exception", "PermissionError")),
    Case(
        "ctypes libc system",
        "import ctypes; print(ctypes.CDLL(None).system(b'touch {marker}'))",
        ("prints", "32512"),
    ),
    Case(
        "ctypes raw fork and execve",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.syscall(57), libc.syscall(58), libc.syscall(59, b'/usr/bin/touch', None, None))
        print(libc.syscall(56, 17, 0, 0, 0, 0))
        """,
        ("prints", "-1 -1 -1\n-1"),
    ),
    Case("exec of os.system", "exec(\"print(__import__('os').system('touch {marker}'))\")", ("prints", "32512")),
    Case(
        "eval of subprocess",
        "eval(\"__import__('subprocess').run(['touch', '{marker}'])\")",
        ("exception", "PermissionError"),
    ),
    Case(
        "__subclasses__ walk to Popen",
        """
        import subprocess
        popen = [c for c in object.__subclasses__() if c.__name__ == 'Popen'][0]
        popen(['touch', '{marker}'])
        """,
        ("exception", "PermissionError"),
    ),
    Case(
        "__subclasses__ walk to os.system",
        """
        w = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]
        print(w.__init__.__globals__['system']('touch {marker}'))
        """,
        ("prints", "32512"),
    ),
    Case(
        "pickle through np.load",
        PAYLOAD
        + textwrap.dedent("""
        import numpy as np
        np.save('p.npy', np.array([Payload()], dtype=object), allow_pickle=True)
        np.load('p.npy', allow_pickle=True)
        print('loaded')
        """),
        ("prints", "loaded"),
    ),
    Case(
        "pickle through torch.load",
        PAYLOAD
        + textwrap.dedent("""
        import torch
        torch.save(Payload(), 'p.pt')
        print(torch.load('p.pt', weights_only=False))
        """),
        ("prints", "32512"),
    ),
    Case(
        "torch cpp_extension",
        """
        import torch.utils.cpp_extension as ext
        ext.load_inline('evil', 'int f() {{ return system("touch {marker}"); }}', functions=['f'])
        """,
        ("exception", "PermissionError", "RuntimeError", "FileNotFoundError", "OSError"),
    ),
    Case(
        "tcp connect",
        "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)",
        ("exception", "PermissionError"),
    ),
    Case(
        "udp send",
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))",
        ("exception", "PermissionError"),
    ),
    Case(
        "abstract unix socket",
        "import socket; socket.socket(socket.AF_UNIX).connect('\\0{abstract}')",
        ("exception", "PermissionError"),
    ),
    Case("fork bomb", "import os\nwhile True:\n    os.fork()", ("exception", "PermissionError")),
    Case(
        "thread bomb",
        """
        import threading, time
        while True:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        """,
        ("exception", "RuntimeError"),
        {"snippet_memory_bytes": "1000000000"},
    ),
    Case(
        "bytearray bomb", "x = bytearray(3 * 10**9)", ("limit", "snippet_memory_bytes"), {"snippet_memory_bytes": "1e9"}
    ),
    Case(
        "growing list bomb",
        "x = []\nwhile True:\n    x.append(bytearray(10**7))",
        ("limit", "snippet_memory_bytes"),
        {"snippet_memory_bytes": "1e9"},
    ),
    Case(
        "numpy bomb",
        "import numpy as np\nx = np.ones(10**9)",
        ("limit", "snippet_memory_bytes"),
        {"snippet_memory_bytes": "1e9"},
    ),
    Case(
        "torch.empty bomb",
        "import torch\nx = torch.empty(10**9)",
        ("limit", "snippet_memory_bytes"),
        {"snippet_memory_bytes": "1e9"},
    ),
    # shared anonymous memory is counted by no limit (RLIMIT_DATA counts private memory only): refused whole
    Case(
        "shared mmap bomb",
        "import mmap\nm = mmap.mmap(-1, 10**10)",
        ("exception", "PermissionError"),
        {"snippet_memory_bytes": "1e9"},
    ),
    Case(
        "a shared mapping within the address space",
        "import mmap\nm = mmap.mmap(-1, 1_800_000_000)\nm[::4096] = b'x' * (1_800_000_000 // 4096)",
        ("exception", "PermissionError"),
        {"snippet_memory_bytes": "3e8"},
    ),
    Case(
        "a memfd",
        "import os, mmap\nfd = os.memfd_create('m')\nos.ftruncate(fd, 10**9)\nm = mmap.mmap(fd, 10**9)",
        ("exception", "PermissionError"),
        {"snippet_memory_bytes": "3e8"},
    ),
    Case(
        "a shared mapping of /dev/zero",
        "import mmap\nf = open('/dev/zero', 'r+b')\nm = mmap.mmap(f.fileno(), 10**9)",
        ("exception", "PermissionError"),
        {"snippet_memory_bytes": "3e8"},
    ),
    Case(
        "POSIX shared memory in /dev/shm",
        "from multiprocessing import shared_memory\nshared_memory.SharedMemory(create=True, size=10**9)",
        ("exception", "PermissionError", "FileNotFoundError"),
    ),
    Case(
        "one huge print",
        "print('x' * 100_000_000)",
        ("limit", "snippet_output_chars"),
    ),
    Case(
        "cpu bomb",
        "while True:\n    pass",
        ("limit", "snippet_cpu_seconds"),
        {"snippet_cpu_seconds": "1", "snippet_seconds": "20"},
    ),
    Case(
        "cpu bomb that catches SIGXCPU",
        "import signal\nsignal.signal(signal.SIGXCPU, lambda *a: None)\nwhile True:\n    pass",
        ("limit", "snippet_cpu_seconds"),
        {"snippet_cpu_seconds": "1", "snippet_seconds": "20"},
    ),
    Case(
        "sleep past the clock", "import time\ntime.sleep(60)", ("limit", "snippet_seconds"), {"snippet_seconds": "1.5"}
    ),
    Case(
        "huge print",
        "while True:\n    print('x' * 100000)",
        ("limit", "snippet_output_chars"),
        {"snippet_output_chars": "1e6"},
    ),
    Case(
        "huge raw write",
        "import os\nwhile True:\n    os.write(1, b'x' * 100000)",
        ("limit", "snippet_output_chars"),
        {"snippet_output_chars": "1e6"},
    ),
    Case(
        "big file",
        "open('f', 'wb').write(b'x' * 2_000_000)",
        ("limit", "snippet_file_bytes"),
        {"snippet_file_bytes": "1e6"},
    ),
    Case(
        "open files",
        "fs = [open('/dev/null') for _ in range(100)]",
        ("limit", "snippet_open_files"),
        {"snippet_open_files": "50"},
    ),
    Case("signal the parent", "import os, signal; os.kill({ppid}, signal.SIGUSR1)", ("exception", "PermissionError")),
    Case("signal every process", "import os; os.kill(-1, 0)", ("exception", "PermissionError")),
    Case("signal the parent's group", "import os; os.killpg(os.getpgid({ppid}), 0)", ("exception", "PermissionError")),
    Case(
        "outlive the parent",
        "import ctypes; libc = ctypes.CDLL(None); print(libc.prctl(1, 0, 0, 0, 0), libc.prctl(4, 1, 0, 0, 0))",
        ("prints", "-1 -1"),
    ),
    Case("ptrace the parent", "import ctypes; print(ctypes.CDLL(None).ptrace(16, {ppid}, 0, 0))", ("prints", "-1")),
    Case("junk on the message pipe", TO_EVERY_FD.format(data="b'\\xff' * 64"), ("stopped", "broke the channel")),
    Case(
        "a frame of unknown type",
        TO_EVERY_FD.format(data=frame({"type": "\x1b[31mevil"})),
        ("stopped", "broke the channel"),
    ),
    Case(
        "a frame past its size",
        TO_EVERY_FD.format(data="b'\\x7f\\xff\\xff\\xff' + b'x' * 64"),
        ("stopped", "broke the channel"),
    ),
    Case(
        "a frame nested past JSON's depth",
        TO_EVERY_FD.format(data="(lambda b: len(b).to_bytes(4, 'big') + b)(b'[' * 100000 + b']' * 100000)"),
        ("stopped", "broke the channel"),
    ),
    Case(
        "a forged unavailable frame",
        TO_EVERY_FD.format(data=frame({"type": "unavailable", "reason": "forged"})),
        ("stopped", "out of turn"),
    ),
    Case("deep recursion", "def f(n):\n    return f(n + 1)\nf(0)", ("exception", "RecursionError")),
    Case(
        "recursion past the C stack",
        "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6):\n    x = [x]\nstr(x)",
        ("stopped", "SIGSEGV"),
    ),
]


def _ids(case: Case) -> str:
    return case.name.replace(" ", "-")


@pytest.fixture
def world(tmp_path):
    """The test's own folder (a marker's place and a planted secret), a TCP and a UDP listener, an abstract
    unix socket, and a SIGUSR1 handler that records a signal from the child."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract = f"vjp-test-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + abstract)
    unix.listen()
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *a: got.append(a))
    values = {
        "marker": str(tmp_path / "marker"),
        "secret": str(secret),
        "home": str(Path.home()),
        "ppid": os.getpid(),
        "port": tcp.getsockname()[1],
        "udp": udp.getsockname()[1],
        "abstract": abstract,
    }
    yield values, tmp_path, (tcp, udp, unix), got
    signal.signal(signal.SIGUSR1, old)
    for s in (tcp, udp, unix):
        s.close()


def no_escape(outcome: Outcome, tmp_path: Path, sockets, signals) -> None:
    """Nothing reached the test's folder, its sockets or its process; the secret is in no output."""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt", "snippet.py"]
    everything = outcome.stdout + outcome.stderr + outcome.raw_output
    if outcome.exception is not None:
        everything += outcome.exception.message + outcome.exception.traceback
    assert SECRET not in everything
    for s in sockets:
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.recvfrom(1) if s.type == socket.SOCK_DGRAM else s.accept()
    assert not signals


def check_expected(outcome: Outcome, expect: tuple[str, ...]) -> None:
    kind, *words = expect
    if kind == "exception":
        assert outcome.stopped is None, outcome.stopped and outcome.stopped.render()
        assert outcome.exception is not None and outcome.exception.type in words, outcome
    elif kind == "limit":
        assert isinstance(outcome.stopped, LimitError), outcome
        assert f"--limit {words[0]}=" in (outcome.stopped.hint or ""), outcome.stopped.render()
    elif kind == "stopped":
        assert isinstance(outcome.stopped, ProgramError), outcome
        assert words[0] in outcome.stopped.render()
        assert "Traceback" not in outcome.stopped.render()
    else:
        assert outcome.stopped is None and words[0] in outcome.stdout, outcome


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_hostile_snippet_is_contained(case, world):
    values, tmp_path, sockets, signals = world
    code = textwrap.dedent(case.code).format(**values)
    source = tmp_path / "snippet.py"  # where the snippet "is": the child must not read it back
    source.write_text(code)
    limits = DEFAULT_LIMITS.with_overrides({"snippet_seconds": "20", **case.limits})
    outcome = run_confined(code, limits=limits, filename=str(source))
    assert outcome.confined and outcome.landlock_abi >= 1
    check_expected(outcome, case.expect)
    no_escape(outcome, tmp_path, sockets, signals)


def test_the_snippet_runs_in_another_process(tmp_path):
    """Not in the parent: its pid differs, its parent is this process, and the parent's globals are not its."""
    code = "import os, sys\nprint(os.getpid(), os.getppid(), 'pytest' in sys.modules)"
    outcome = run_confined(code)
    pid, ppid, pytest_loaded = outcome.stdout.split()
    assert int(pid) != os.getpid() and int(ppid) == os.getpid() and pytest_loaded == "False"
    assert "pytest" in sys.modules


# --- the child touches only itself (issue 37) ---------------------------------------------------------------

_IOPRIO_GET, _IOPRIO_SET = 252, 251  # x86_64; the sibling tests run where the filter's table is tested
_libc = ctypes.CDLL(None, use_errno=True)


def _process_state(pid: int) -> dict:
    """What another process's settings are: its limits, nice value, affinity, policy and I/O priority."""
    return {
        "limits": Path(f"/proc/{pid}/limits").read_text(),
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
        "affinity": os.sched_getaffinity(pid),
        "policy": os.sched_getscheduler(pid),
        "ioprio": _libc.syscall(_IOPRIO_GET, 1, pid),
    }


# what each attempt of a snippet came to: 'changed', or the errno it was refused with
ATTEMPT = """
def attempt(call):
    try:
        call()
        return 'changed'
    except OSError as e:
        return e.errno
"""

TOUCH_OTHERS = (
    ATTEMPT
    + """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
for pid in ({sibling}, {ppid}):
    print([
        attempt(lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (4, 4))),
        attempt(lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, 0))),
        attempt(lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        attempt(lambda: os.sched_setaffinity(pid, {{0}})),
        attempt(lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
        attempt(lambda: os.sched_setparam(pid, os.sched_param(0))),
        libc.syscall(251, 1, pid, (3 << 13) | 7),  # ioprio_set(IOPRIO_WHO_PROCESS, pid, idle class)
        libc.syscall(279, pid, 0, None, None, None, 0),  # move_pages of nothing: allowed means reachable
        libc.syscall(256, pid, 64, None, None),  # migrate_pages
    ])
user, group = os.PRIO_USER, os.PRIO_PGRP
print(attempt(lambda: os.setpriority(user, os.getuid(), 19)), attempt(lambda: os.setpriority(group, 0, 19)))
print(libc.syscall(251, 3, os.getuid(), (3 << 13) | 7))  # ioprio_set(IOPRIO_WHO_USER, ...)
resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))
resource.prlimit(os.getpid(), resource.RLIMIT_CORE, (0, 0))
os.setpriority(os.PRIO_PROCESS, 0, 5)
os.sched_setaffinity(0, {{0}})
print('own', os.getpriority(os.PRIO_PROCESS, 0), os.sched_getaffinity(0), libc.syscall(251, 1, 0, (2 << 13) | 7))
"""
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the I/O priority call numbers are x86_64's")
def test_no_other_process_is_touched(tmp_path):
    """A sibling the test starts and the parent itself keep their limits, nice value, affinity, scheduling
    policy and I/O priority; the snippet changes its own."""
    sibling = subprocess.Popen(["sleep", "60"])
    try:
        before = {pid: _process_state(pid) for pid in (sibling.pid, os.getpid())}
        code = TOUCH_OTHERS.format(sibling=sibling.pid, ppid=os.getpid())
        outcome = run_confined(code, limits=DEFAULT_LIMITS.with_overrides({"snippet_seconds": "30"}))
        after = {pid: _process_state(pid) for pid in (sibling.pid, os.getpid())}
    finally:
        sibling.kill()
        sibling.wait()
    assert outcome.stopped is None and outcome.exception is None, outcome
    assert after == before
    denied = str([errno.EPERM] * 6 + [-1, -1, -1])
    assert outcome.stdout.splitlines()[:4] == [denied, denied, "1 1", "-1"], outcome.stdout
    assert outcome.stdout.splitlines()[4] == "own 5 {0} 0"


def _sysv_ids() -> dict[str, set[str]]:
    ids = {}
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        ids[kind] = {line.split()[1] for line in lines}
    return ids


def _mqueues() -> set[str]:
    return set(os.listdir("/dev/mqueue")) if os.path.isdir("/dev/mqueue") else set()


IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
print(libc.shmat({shmid}, None, 0) in (None, 2**64 - 1), ctypes.get_errno())  # another's segment: (void *) -1
print(libc.shmget(0, 64 << 20, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 1, 0o1600))  # IPC_PRIVATE
print(libc.syscall(240, b'vjp-test-queue', os.O_CREAT | os.O_RDWR, 0o600, None))  # mq_open
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="mq_open's number here is x86_64's")
def test_no_ipc_object_is_read_or_outlives_the_run():
    """Another process's SysV segment holds a secret: the snippet cannot attach it, nor make a segment, a
    queue or a semaphore set of its own that would outlive the run."""
    _libc.shmat.restype = ctypes.c_void_p
    shmid = _libc.shmget(0, 4096, 0o1600)
    assert shmid >= 0
    address = _libc.shmat(shmid, None, 0)
    ctypes.memmove(address, SECRET.encode(), len(SECRET))
    _libc.shmdt(ctypes.c_void_p(address))
    try:
        before, queues = _sysv_ids(), _mqueues()
        outcome = run_confined(IPC.format(shmid=shmid))
        assert outcome.stopped is None and outcome.exception is None, outcome
        assert outcome.stdout.splitlines() == [f"True {errno.EPERM}", "-1 -1 -1", "-1"]
        assert SECRET not in outcome.stdout + outcome.raw_output
        assert _sysv_ids() == before and _mqueues() == queues
    finally:
        _libc.shmctl(shmid, 0, None)  # IPC_RMID


METADATA = (
    ATTEMPT
    + """
import os
target, uid, gid = {target!r}, os.getuid(), os.getgid()
tries = [
    attempt(lambda: os.chmod(target, 0o666)),
    attempt(lambda: os.chmod('data.txt', 0o666)),  # through the working directory's mirror, with --allow-read
    attempt(lambda: os.utime(target, (0, 0))),
    attempt(lambda: os.utime('data.txt', None)),
    attempt(lambda: os.chown(target, uid, gid)),
    attempt(lambda: os.setxattr(target, 'user.evil', b'1')),
    attempt(lambda: os.removexattr(target, 'user.vjp')),
    attempt(lambda: os.truncate(target, 0)),
    attempt(lambda: os.rename(target, target + '.moved')),
]
try:
    fd = os.open(target, os.O_RDONLY)  # with --allow-read: a read-only descriptor is all it gets
except OSError as e:
    tries.append(e.errno)
else:
    tries += [
        attempt(lambda: os.fchmod(fd, 0o666)),
        attempt(lambda: os.utime(fd, (0, 0))),
        attempt(lambda: os.fchown(fd, uid, gid)),
        attempt(lambda: os.setxattr(fd, 'user.evil', b'1')),
        attempt(lambda: os.removexattr(fd, 'user.vjp')),
        attempt(lambda: os.ftruncate(fd, 0)),
    ]
tries += [attempt(lambda: print(os.readlink({outside!r}))), attempt(lambda: print(os.readlink('data.txt')))]
print(tries)
"""
)


def _metadata(path: Path) -> tuple:
    st = path.stat()
    try:
        xattrs = {name: os.getxattr(path, name) for name in os.listxattr(path)}
    except OSError:
        xattrs = {}
    return path.read_bytes(), st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, xattrs


@pytest.mark.parametrize("allow_read", [False, True], ids=["confined", "allow-read"])
def test_no_file_outside_the_scratch_changes(tmp_path, monkeypatch, allow_read):
    """Bytes, mode, owner, times and extended attributes of a file outside the scratch stay as they were, with
    and without --allow-read of its folder (whose entries then show in the scratch as links); readlink
    reveals no link's target."""
    target = tmp_path / "data.txt"
    target.write_text("precious")
    target.chmod(0o640)
    try:
        os.setxattr(target, "user.vjp", b"kept")
    except OSError:
        pass  # a file system without user xattrs: the rest still holds
    outside = tmp_path / "secret-link"
    outside.symlink_to("/the/link/target/is/" + SECRET)
    monkeypatch.chdir(tmp_path)
    before = _metadata(target)
    outcome = run_confined(
        METADATA.format(target=str(target), outside=str(outside)), allow_read=[tmp_path] if allow_read else []
    )
    assert outcome.stopped is None and outcome.exception is None, outcome
    assert outcome.mirrored == allow_read
    assert _metadata(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt", "secret-link"]
    tries = json.loads(outcome.stdout.replace("'", '"'))
    assert "changed" not in tries, tries
    assert SECRET not in outcome.stdout + outcome.raw_output and str(tmp_path) not in outcome.stdout


# --- nothing left behind (issue 37) ---------------------------------------------------------------------------

DEEP = """
import os
for _ in range(3000):
    os.mkdir('d')
    open('d/f', 'w').write('x')
    os.chdir('d')
os.mkdir('locked', 0)
os.mkdir('write-only', 0o300)
open('write-only/f', 'w').write('x')
os.symlink('/etc/passwd', 'link')
print('made')
"""

ENDINGS = {
    "done": ("print('x')", {}),
    "raised": ("1 / 0", {}),
    "child killed": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", {}),
    "wall clock": ("open('f', 'w').write('x')\nimport time\ntime.sleep(60)", {"snippet_seconds": "2"}),
    "output limit": ("open('f', 'w').write('x')\nwhile True:\n    print('x' * 1000)", {"snippet_output_chars": "1e5"}),
    "3000-deep tree": (DEEP, {}),
    "scratch limit": (
        "for i in range(10**6):\n    open(f'f{i}', 'wb').write(b'x' * 10**6)",
        {"snippet_scratch_bytes": "2e7"},
    ),
}


@pytest.mark.parametrize("name", ENDINGS)
def test_the_temporary_folder_is_empty_after_every_ending(tmp_path, monkeypatch, name):
    code, limits = ENDINGS[name]
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    outcome = run_confined(code, limits=DEFAULT_LIMITS.with_overrides({"snippet_seconds": "30", **limits}))
    assert list(temp.iterdir()) == []
    if name == "scratch limit":
        assert isinstance(outcome.stopped, LimitError), outcome
        assert "--limit snippet_scratch_bytes=" in (outcome.stopped.hint or "")
    if name == "3000-deep tree":  # done, or stopped for folders deeper than the parent measures
        assert outcome.stdout == "made\n" or "cannot be measured" in outcome.stopped.render(), outcome


# --- the parent trusts nothing from the child (issue 37) -------------------------------------------------

# an event as the child sends it (abridged from a real one: y = x ** 2, y.backward(v), with --graph)
_SUMMARY = {"shape": [2], "norm": 1.0, "values": [1.0, 0.1]}
EVENT = {
    "index": 1,
    "line": 1,
    "source": "y.backward(v)",
    "call": "Tensor.backward",
    "outputs": [{"name": "y", "shape": [2], "dtype": "float32", "values": [1.0, 4.0]}],
    "v": [{"name": "v", "shape": [2], "dtype": "float32", "values": [1.0, 0.1]}],
    "v_origin": "given",
    "retain_graph": False,
    "create_graph": False,
    "inputs": [
        {
            "name": "x",
            "shape": [2],
            "dtype": "float32",
            "value": [1.0, 2.0],
            "grad_before": None,
            "grad_after": [2.0, 0.4],
            "grad": [2.0, 0.4],
            "jtv": [2.0, 0.4],
            "jacobian": [[2.0, 0.0], [0.0, 4.0]],
            "finite_difference": None,
            "grad_norm": 2.04,
            "omitted": [],
        }
    ],
    "checks": [{"name": "jtv", "status": "agree", "compares": "J", "tolerance": "1e-7", "independent": False}],
    "notes": [],
    "diagnosis": None,
    "graph": [
        {
            "id": 0,
            "name": "PowBackward0",
            "leaf": None,
            "value_of": "y",
            "line": 1,
            "source": "y = x ** 2",
            "ran": True,
            "arriving": _SUMMARY,
            "edges": [{"to": 1, "input_nr": 0, "value": _SUMMARY, "local": _SUMMARY}],
        },
        {
            "id": 1,
            "name": "AccumulateGrad",
            "leaf": "x",
            "value_of": None,
            "line": None,
            "source": None,
            "ran": True,
            "arriving": _SUMMARY,
            "edges": [],
        },
    ],
    "results": [],
    "reference": [],
}


def _forged(change) -> dict:
    event = json.loads(json.dumps(EVENT))
    change(event)
    return event


FORGERIES = {
    "a field missing": lambda e: e.pop("inputs"),
    "a field of another type": lambda e: e["inputs"][0].update(shape="2"),
    "fewer values than the shape": lambda e: e["outputs"][0].update(values=[1.0]),
    "a value that is an object": lambda e: e["inputs"][0].update(grad={"a": 1}),
    "a check's status a list": lambda e: e["checks"][0].update(status=["agree"]),
    "an unknown field": lambda e: e["inputs"][0].update(evil=1),
    "a graph edge to no node": lambda e: e["graph"][0]["edges"][0].update(to=7),
    "a graph node without its name": lambda e: e["graph"][1].pop("name"),
    "a graph node out of place": lambda e: e["graph"].reverse(),
    "a Jacobian row too short": lambda e: e["inputs"][0].update(jacobian=[[2.0]]),
    "an array nested past its depth": lambda e: e["inputs"][0].update(value=json.loads("[" * 70 + "]" * 70)),
}


def test_a_genuine_event_is_read():
    from vjp_explorer.snippet.door import _event

    event = _event(EVENT, 1, safe_text)
    assert event.inputs[0].grad == [2.0, 0.4] and event.graph is not None and len(event.graph) == 2


@pytest.mark.parametrize("name", FORGERIES)
def test_a_forged_event_is_a_broken_channel(name):
    from vjp_explorer.snippet.door import _event

    with pytest.raises(ProgramError) as caught:
        _event(_forged(FORGERIES[name]), 1, safe_text)
    assert "broke the channel" in caught.value.render()


FORGE = """
import os, stat, struct
frame = {frame}
for fd in range(3, 64):
    if os.path.exists(f'/proc/self/fd/{{fd}}') and stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.write(fd, frame)
"""


@pytest.mark.parametrize("name", ["a graph edge to no node", "fewer values than the shape"])
def test_a_forged_event_ends_the_command_with_one_paragraph(vjp, tmp_path, name):
    """Through the whole command, renderers included (--graph draws the graph): exit 2, no traceback."""
    snippet = tmp_path / "forge.py"
    snippet.write_text(FORGE.format(frame=frame({"type": "event", "event": _forged(FORGERIES[name])})))
    r = vjp("run", str(snippet), "--graph")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "broke the channel" in r.stderr and "Traceback" not in r.stderr + r.stdout
    assert r.stderr.strip().count("\n\n") == 0


RAISED = {
    "type": "raised",
    "exc_type": "RuntimeError",
    "message": "forged",
    "line": 1,
    "traceback": "",
    "errno": None,
    "resource": None,
    "refusal": None,
    "via": "",
}


@pytest.mark.parametrize("where", ["a script", "a transcript, before any statement ended"])
def test_a_forged_raised_frame_is_a_broken_channel(vjp, tmp_path, where):
    """Only a transcript's statement that ended may be followed by the exception the REPL went on past."""
    code = FORGE.format(frame=frame(RAISED))
    if where != "a script":  # the whole forgery is one statement: the frame comes before its statement frame
        code = ">>> exec(" + repr(code) + ")\n"
    snippet = tmp_path / "forge.py"
    snippet.write_text(code)
    r = vjp("run", str(snippet))
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "broke the channel" in r.stderr and "Traceback" not in r.stderr + r.stdout


FLOOD = """
import os, stat, struct
body = {body}
frame = struct.pack('>I', len(body)) + body
fds = [fd for fd in range(3, 64) if os.path.exists(f'/proc/self/fd/{{fd}}') and stat.S_ISFIFO(os.fstat(fd).st_mode)]
for _ in range(1000):
    for fd in fds:
        os.write(fd, frame)
"""
MEASURE = """
import sys
from vjp_explorer.snippet.door import run_snippet
from vjp_explorer.errors import VjpError
try:
    run_snippet(sys.stdin.read(), seed=1)
except VjpError as e:
    print(e.render())
# VmHWM, this process's own peak: ru_maxrss would include the peak of the process it was forked from (the
# kernel carries it over exec), a test worker grown large by the tests before
print(next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""
# the costliest JSON to decode, per byte and per item (docs/confinement.md, "The parent's memory")
HEAD = 'b\'{"type": "event", "event": '  # the start of an event frame's bytes literal, as Python source
FLOODS = {
    "objects": HEAD + "{\"x\": [' + b'{\"a\": 0},' * 1_000_000 + b'0]}}'",
    "wide characters": HEAD + "{\"x\": \"' + ('\\U0001F600' + 'a' * 6_000_000).encode() + b'\"}}'",
    "many events": HEAD + "{}}'",
}
PARENT_PEAK_BYTES = 600 << 20  # the bound docs/confinement.md states for the default limits


@pytest.mark.parametrize("name", FLOODS)
def test_a_flood_of_events_stops_with_the_parent_under_its_bound(name):
    code = FLOOD.format(body=FLOODS[name])
    r = subprocess.run([sys.executable, "-c", MEASURE], input=code, capture_output=True, text=True, timeout=300)
    *said, peak = r.stdout.strip().splitlines()
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "--limit snippet_event" in "\n".join(said) or "broke the channel" in "\n".join(said), said
    assert int(peak) < PARENT_PEAK_BYTES, int(peak) >> 20


# --- crashes that were the tool's, not the snippet's (issue 37) --------------------------------------------

COMPLEX = """
import torch
z = torch.tensor([1+2j, 3-1j], requires_grad=True)
(z * z.conj()).real.sum().backward()
w = torch.tensor([1+1j, 2+0j], requires_grad=True)
u = w * w
u.backward(torch.ones_like(u))
print(z.grad, w.grad)
"""


def test_a_complex_backward_is_an_event_not_an_internal_error(vjp, tmp_path):
    """Each call is an event whose check is skipped with its reason; the grads are those plain torch gives
    (by hand: d/dz of |z|^2 is 2z under torch's convention, and w*w with v = 1 gives 2·conj(w))."""
    snippet = tmp_path / "complex.py"
    snippet.write_text(COMPLEX)
    r = vjp("run", str(snippet), "--graph")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "tensor([2.+4.j, 6.-2.j]) tensor([2.-2.j, 4.+0.j])" in r.stdout
    assert "(2+4j)" in r.stdout and "(2-2j)" in r.stdout and "complex tensors" in r.stdout
    doc = json.loads(vjp("run", str(snippet), "--json").stdout)
    assert [e["grads"] for e in doc["events"]] == [{"z": ["(2+4j)", "(6-2j)"]}, {"w": ["(2-2j)", "(4+0j)"]}]
    assert all(
        c["status"] == "skipped" and "complex" in c["reason"] for e in doc["events"] for c in e["checks"].values()
    )


def test_a_refused_dataloader_worker_says_why_without_torch_traceback(vjp, tmp_path):
    snippet = tmp_path / "loader.py"
    snippet.write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "for b in DataLoader(TensorDataset(torch.ones(8, 2)), batch_size=4, num_workers=2):\n    print(b)\n"
    )
    r = vjp("run", str(snippet))
    assert r.exit_code == 4, r.stdout + r.stderr
    assert "num_workers=0 loads the same batches" in " ".join(r.stdout.split())
    assert "Traceback" not in r.stdout + r.stderr and "Exception ignored" not in r.stdout + r.stderr


def test_a_check_skipped_for_memory_is_named_in_the_summary_line():
    """The child ran out of memory reading a 40M-element call back (its check's reason says so): the last
    line says so too, with the limit that gives more, not only "not checked (each says why)"."""
    from vjp_explorer.render.snippet_view import _summary
    from vjp_explorer.snippet.result import Event, SnippetResult
    from vjp_explorer.verdicts import Check

    short = Check("finite_difference", "skipped", "FD", reason="the tool could not read this call back (MemoryError: )")
    other = Check("finite_difference", "skipped", "FD", reason="complex tensors: the references here are real")
    events = [
        Event(k + 1, 4, "y.backward()", "Tensor.backward", [], [], "", False, False, [], [c])
        for k, c in enumerate([short, other])
    ]
    result = SnippetResult("s.py", 1, False, False, "2", [], events, None, [], "")
    line = _summary(result).plain
    assert "1 not checked for lack of memory (--limit snippet_memory_bytes=N gives more)" in line
    assert "1 not checked (each says why)" in line
