"""What the confinement refused a snippet, in the snippet's terms: a process it tried to start, the network
it tried to reach, a file outside what it may read or write.

The kernel refuses (seccomp, Landlock); this module only reads, in the confined child, where a refusal came
from, so the parent can say why a line failed and what to do about it. Two sources:
- the exception a refusal raised, read from its whole traceback, library frames included (a DataLoader's
  workers fail inside multiprocessing, a download inside socket or urllib);
- Python's audit events for attempts the snippet's own code may swallow (`os.system` returns a status and
  prints nothing; a `try`/`except` around a download), recorded only while the snippet runs confined.
Nothing here is a guard: the audit hook decides nothing and a snippet could fool it; the boundary is the OS.
"""

from __future__ import annotations

import errno
import re
import sys
import traceback
from typing import Any

KINDS = ("process", "network", "files", "system", "cwd")

# where in a traceback an attempt to start a process, or to reach the network, shows
_PROCESS_FILES = ("/multiprocessing/", "/concurrent/futures/process.py", "/subprocess.py", "/pty.py")
_NETWORK_FILES = ("/socket.py", "/urllib/", "/http/client.py", "/ssl.py", "/requests/", "/urllib3/")
# a snippet's own line that starts a process directly (os.fork(), os.system(...), os.execv(...), ...)
_PROCESS_CALL = re.compile(r"\b(fork|forkpty|system|popen|posix_spawnp?|spawn[lv]p?e?|exec[lv]p?e?)\s*\(")
# the library behind an attempt, named as users know it
_VIA = (
    ("/torch/utils/data/", "a DataLoader with num_workers > 0"),
    ("/torch/hub.py", "torch.hub's download"),
    ("/torchvision/datasets/", "a torchvision dataset's download"),
    ("/multiprocessing/", "multiprocessing"),
    ("/subprocess.py", "subprocess"),
    ("/urllib/", "urllib"),
    ("/requests/", "requests"),
)

# audit events of attempts the confinement refuses whatever their arguments
_AUDITED = {
    "os.system": "process",
    "subprocess.Popen": "process",
    "os.fork": "process",
    "os.forkpty": "process",
    "os.posix_spawn": "process",
    "os.exec": "process",
    "os.spawn": "process",
    "socket.connect": "network",
    "socket.getaddrinfo": "network",
}
_MAX_ATTEMPTS = 20  # attempts kept per run (a loop of os.system calls says so once per line anyway)


def of_exception(exc: BaseException, stack: traceback.StackSummary) -> tuple[str | None, str]:
    """The refusal behind a confined snippet's exception, and the library it came through ("" if none)."""
    if not isinstance(exc, OSError):
        return None, ""
    files = [frame.filename for frame in stack]
    via = next((name for part, name in _VIA if any(part in f for f in files)), "")
    last = stack[-1].line or "" if len(stack) else ""
    if any(p in f for f in files for p in _PROCESS_FILES) or (
        isinstance(exc, PermissionError) and _PROCESS_CALL.search(last)
    ):
        return "process", via
    if any(p in f for f in files for p in _NETWORK_FILES):
        return "network", via
    if isinstance(exc, FileNotFoundError) and isinstance(exc.filename, (str, bytes)):
        name = exc.filename.decode("utf-8", "replace") if isinstance(exc.filename, bytes) else exc.filename
        return ("cwd" if not name.startswith("/") else None), ""  # looked for in the scratch folder, not yours
    if isinstance(exc, PermissionError):  # Landlock refuses a path with EACCES; seccomp a system call with EPERM
        # (a chmod, utime or readlink of a path included: the file is not the point, the call is)
        return ("files" if exc.errno == errno.EACCES else "system"), via
    return None, ""


class Attempts:
    """Audit events of refused attempts, by the top-level statement running when they happened."""

    def __init__(self) -> None:
        self.line = 0
        self.seen: set[tuple[str, int]] = set()
        self.pending: list[dict[str, Any]] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)
        sys.unraisablehook = _quiet_after_refusal(sys.unraisablehook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        kind = _AUDITED.get(event)
        if kind is None or (kind, self.line) in self.seen or len(self.seen) >= _MAX_ATTEMPTS:
            return
        self.seen.add((kind, self.line))
        self.pending.append({"type": "refused", "kind": kind, "what": _what(event, args), "line": self.line})

    def take(self) -> list[dict[str, Any]]:
        taken, self.pending = self.pending, []
        return taken


# the __del__ of a DataLoader iterator whose worker start was refused: half-built, it fails on an attribute
# its __init__ never set, and Python prints that traceback after the refusal, which already says it all
_HALF_BUILT = {"_MultiProcessingDataLoaderIter.__del__"}


def _quiet_after_refusal(hook: Any) -> Any:
    """sys.unraisablehook without the noise a refused start leaves behind (_HALF_BUILT); the rest as before."""

    def quiet(unraisable: Any) -> None:
        if getattr(unraisable.object, "__qualname__", None) in _HALF_BUILT:
            return
        hook(unraisable)

    return quiet


def _what(event: str, args: tuple[Any, ...]) -> str:
    """The attempt in a few words: the command, the program, the address."""
    try:
        if event == "os.system":
            detail = _short(args[0])
        elif event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"):
            detail = _short(args[1] if event == "subprocess.Popen" else args[0])
        elif event in ("socket.connect", "socket.getaddrinfo"):
            detail = _short(args[1] if event == "socket.connect" else args[0])
        else:
            detail = ""
    except Exception:  # noqa: BLE001 - odd arguments: the event's name says enough
        detail = ""
    return f"{event}({detail})" if detail else event


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."
