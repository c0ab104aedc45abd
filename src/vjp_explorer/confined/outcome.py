"""What one confined run did (`Outcome`: its statements, output, the snippet's own exception), all of it
plain data built from untrusted frames, and the errors that say why the tool stopped it (a limit, a crash, a
broken channel), each naming the option that raises the limit. launch.py fills it in.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from ..errors import LimitError, ProgramError, VjpError
from ..limits import Limits
from .protocol import FrameReader, ProtocolError, safe_text


@dataclass
class Statement:
    """One top-level statement that ran to its end, with what it printed."""

    line: int
    end_line: int
    stdout: str = ""
    stderr: str = ""
    raised: SnippetException | None = None  # a transcript's statement raised and the REPL went on


@dataclass
class SnippetException:
    """The snippet's own exception, as Python raised it (type, message, traceback of its frames)."""

    type: str
    message: str
    line: int | None
    traceback: str
    errno: int | None = None
    refusal: str | None = None  # what the confinement refused behind it: process, network or files
    via: str = ""  # the library the refused attempt came through (a DataLoader's workers, urllib, ...)


@dataclass
class Refused:
    """An attempt the confinement refused: `kind` process or network, `what` the call, at a top-level line."""

    kind: str
    what: str
    line: int


MAX_REFUSED = 20
MAX_MANUAL = 1000  # hand-written gradients read back from one run (one frame each)


@dataclass
class Outcome:
    """What one confined run did, all of it plain data; fields from the child are untrusted text."""

    statements: list[Statement] = field(default_factory=list)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (statement index, event) observed
    exception: SnippetException | None = None
    exit_code: int = 0  # what `python FILE.py` would have exited with (sys.exit, an exception: 1)
    exited: tuple[int, int, str] | None = None  # sys.exit: (line, status, the message Python prints)
    stopped: VjpError | None = None  # the tool stopped the snippet: a limit, a crash, a broken channel
    at_exit: Statement | None = None  # what the snippet's atexit functions printed, after its last statement
    refused: list[Refused] = field(default_factory=list)  # attempts the confinement refused (audited)
    mirrored: bool = False  # the user's working directory is readable and its entries linked into the scratch
    raw_output: str = ""  # what reached fd 1 and 2 directly (os.write, C libraries), not through sys.stdout
    confined: bool = False
    landlock_abi: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    unverified: list[str] = field(default_factory=list)  # calls the judge could not vouch for, and why
    manual: list[dict[str, Any]] = field(default_factory=list)  # hand-written gradients (confined/manual.py)
    channel: FrameReader | None = None  # what the child sent, counted: its records for the judge (none kept)

    @property
    def stdout(self) -> str:
        return "".join(s.stdout for s in self._all())

    @property
    def stderr(self) -> str:
        return "".join(s.stderr for s in self._all())

    def _all(self) -> list[Statement]:
        return self.statements + ([self.at_exit] if self.at_exit is not None else [])


def events_error(name: str, value: int, said: str) -> LimitError:
    return LimitError(f"{said}; it was stopped", hint=f"--limit {name}=N raises it (now {value})")


_RESOURCES = {
    "memory": ("snippet_memory_bytes", "the snippet asked for more memory than the limit of {:,} bytes"),
    "file_size": ("snippet_file_bytes", "the snippet wrote a file past the limit of {:,} bytes"),
    "open_files": ("snippet_open_files", "the snippet opened more files at once than the limit of {:,}"),
}


def resource_error(resource: str, exc: SnippetException, limits: Limits) -> LimitError:
    """A failed allocation (MemoryError, torch's "can't allocate memory"), EFBIG or EMFILE: the limit."""
    name, text = _RESOURCES[resource]
    value = getattr(limits, name)
    where = f" (line {exc.line})" if exc.line is not None else ""
    return LimitError(text.format(value) + where + "; it was stopped", hint=f"--limit {name}=N raises it (now {value})")


def signal_error(signum: int, cpu_seconds: float, limits: Limits) -> VjpError:
    """A child the kernel ended with a signal: which limit, or which fault, that was."""
    cpu = limits.snippet_cpu_seconds
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_seconds >= cpu - 0.5):
        return LimitError(
            f"the snippet used {cpu_seconds:.0f} s of CPU time, the limit of {cpu} s (all its threads together)",
            hint=f"--limit snippet_cpu_seconds=N raises it (now {cpu})",
        )
    if signum == signal.SIGKILL:
        memory = limits.snippet_memory_bytes
        return LimitError(
            "the snippet's process was killed by the system (SIGKILL), most likely for lack of memory",
            hint=f"--limit snippet_memory_bytes=N lowers what it may take (now {memory}), so that it fails cleanly",
        )
    if signum == signal.SIGSYS:
        return ProgramError("the snippet made a system call the confinement forbids (SIGSYS); it was stopped")
    if signum == signal.SIGXFSZ:
        return resource_error("file_size", SnippetException("", "", None, ""), limits)
    name = signal.Signals(signum).name if signum in signal.Signals.__members__.values() else str(signum)
    return ProgramError(f"the snippet's process ended with signal {name}, as `python FILE.py` would have crashed")


def protocol_error(e: ProtocolError) -> ProgramError:
    return ProgramError(
        f"the snippet broke the channel vjp reads its results from ({safe_text(str(e))}); it was stopped",
        hint="a snippet must not write to file descriptors it did not open",
    )


def exception_from(frame: dict[str, Any]) -> SnippetException:
    return SnippetException(
        type=safe_text(frame["exc_type"]),
        message=safe_text(frame["message"]),
        line=frame["line"],
        traceback=safe_text(frame["traceback"]),
        errno=frame["errno"],
        refusal=frame["refusal"],
        via=safe_text(frame["via"][:200]),
    )
