"""The parent's side: start the confined child, feed it the snippet, keep its clock, read what it says.

`run_confined` returns an Outcome (what ran, its output, the snippet's own exception) even when the snippet
stopped early; why it stopped, when the tool stopped it (a limit, a broken channel, a crash), is
`Outcome.stopped`, an error of errors.py with the option that raises the limit. Nothing the child sends is
run or unpickled: frames are JSON, checked field by field (protocol.py).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..calls import RecordError
from ..errors import LimitError, ProgramError, UsageError, VjpError
from ..limits import DEFAULT_LIMITS, Limits
from . import protocol, sandbox, scratch
from .outcome import (
    MAX_MANUAL,
    MAX_REFUSED,
    Outcome,
    Refused,
    Statement,
    events_error,
    exception_from,
    protocol_error,
    resource_error,
    signal_error,
)
from .protocol import FrameReader, ProtocolError, safe_text

OnMessage = Callable[[dict[str, Any]], None]

_READ = 1 << 16
# the variables the child keeps from the user's environment: torch's and its BLAS's thread settings
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS")


class ConfinementUnavailableError(UsageError):
    """This machine cannot confine a snippet (no Landlock or seccomp); --trust runs it unconfined."""


class _Live:
    """The runs under way in this process, for the Ctrl-C path (`abandon`): each scratch folder, with its
    child once started. `opening` counts runs between making a folder (or a child) and recording it."""

    def __init__(self) -> None:
        self.runs: dict[str, subprocess.Popen[bytes] | None] = {}
        self.opening = 0
        self.lock = threading.Lock()


_live = _Live()


@contextmanager
def _recording() -> Iterator[None]:
    """Make something `abandon` must know of and record it, with no Ctrl-C in between: SIGINT is held
    back in this thread, and `abandon`, run from another, waits while `opening` is set."""
    main = threading.current_thread() is threading.main_thread()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
    with _live.lock:
        _live.opening += 1
    try:
        yield
    finally:
        with _live.lock:
            _live.opening -= 1
        if held is not None and signal.SIGINT not in held:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def abandon() -> None:
    """Kill the child of every run under way, wait for it, and remove its scratch folder: the Ctrl-C path
    (entry.py), which leaves through os._exit right after, so no `finally` of a run gets to do it."""
    deadline = time.monotonic() + 2.0
    while _live.opening and time.monotonic() < deadline:
        time.sleep(0.005)  # a run in another thread is recording its folder or child: let it finish
    for folder, proc in list(_live.runs.items()):
        if proc is not None:
            _kill_group(proc)
            _wait_dead(proc, deadline)
        scratch.remove(folder)
        _live.runs.pop(folder, None)


def _wait_dead(proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Until the killed child is gone (it could still write into its folder), reaping it if nobody has."""
    while proc.returncode is None and time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return  # reaped by the run's own thread
        if pid == proc.pid:
            return
        time.sleep(0.005)


def confinement_available() -> str | None:
    """None when this machine can confine a snippet, else why not (in words for the user)."""
    return sandbox.unavailable()


def unavailable_error(reason: str) -> ConfinementUnavailableError:
    return ConfinementUnavailableError(
        f"cannot confine the snippet: {reason}. vjp does not run a snippet unconfined unless asked",
        hint="--trust runs it as `python FILE.py` would, with your own rights (your files, network and GPU)",
    )


def scrubbed_env(scratch: str) -> dict[str, str]:
    """The child's environment: what Python and torch need, nothing of the user's but thread counts."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
    }
    env.update({name: os.environ[name] for name in _THREAD_VARS if name in os.environ})
    return env


def run_confined(
    text: str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    allow_read: Iterable[str | os.PathLike[str]] = (),
    trust: bool = False,
    mode: str = "script",
    filename: str = "<snippet>",
    on_message: OnMessage | None = None,
    observe: bool = False,
    seed: int | None = None,
    graph: bool = False,
    diagnose: bool = False,
    code: bool = False,
    manual: bool = False,
    meanwhile: Callable[[], object] | None = None,
) -> Outcome:
    """Run `text` in a fresh child process, confined unless `trust`, and say what happened.

    mode "script" runs it as `python FILE.py`, "repl" as the REPL ran a transcript. `on_message` sees each
    checked frame as it arrives (for a live view). Raises ConfinementUnavailableError before anything runs
    where the machine cannot confine; every other way a run ends is in the Outcome. `diagnose`: the second
    run of a snippet that failed, with confined/diagnose.py's instruments (its "diagnosis" frames). `manual`:
    the snippet writes gradients by hand, which the child pairs with autograd's (its "manual" frames).
    `meanwhile` runs once, right after the snippet is sent, while the child imports torch (the caller's own
    imports for what comes after the run, off the run's critical path).
    """
    if mode not in ("script", "repl"):
        raise ValueError(f"mode must be 'script' or 'repl', not {mode!r}")
    if len(text) > limits.snippet_chars:
        raise LimitError(
            f"the snippet has {len(text):,} characters, more than the limit of {limits.snippet_chars:,}",
            hint=f"--limit snippet_chars={len(text)} raises it",
        )
    if not trust:
        reason = confinement_available()
        if reason:
            raise unavailable_error(reason)
    dirs = [str(Path(d).resolve()) for d in allow_read]
    with _recording():
        folder = tempfile.mkdtemp(prefix="vjp-snippet-")
        _live.runs[folder] = None
    judge = None
    try:
        session = _Session(limits, on_message)
        session.meanwhile = meanwhile
        session.outcome.mirrored = not trust and _mirror(folder, dirs)
        session.start(folder, dirs, trust)
        if observe:  # the checks are made out of the snippet's reach, by a process started beside it
            from .judging import Judge

            session.judge = judge = Judge(limits, trust, deadline=session.started + limits.snippet_seconds)
            with _recording():  # a Ctrl-C kills the judge and removes its folder too (abandon)
                judge.start()
                _live.runs[judge.scratch] = judge.proc
        explain = {
            "calls": limits.snippet_explained_calls,
            "jacobian_rows": limits.snippet_jacobian_rows,
            "record_bytes": limits.snippet_record_bytes,  # the records' own budget (records.py)
            "graph": graph,
            "code": code,  # --code: each explained call's backward graph, for its script (code_capture.py)
        }
        session.extra = {"observe": observe, "seed": seed, "explain": explain, "diagnose": diagnose}
        if manual:  # only then: a snippet without hand-written gradients gets the frame it always got
            session.extra["manual"] = True
        outcome = session.talk(text, mode, filename)
        if judge is not None:
            outcome.unverified = judge.settle(outcome.events, judge.deadline, stopped=outcome.stopped is not None)
        return outcome
    finally:
        if judge is not None:
            judge.end()
            _live.runs.pop(judge.scratch, None)
        proc = _live.runs.get(folder)
        if proc is not None and proc.returncode is None:  # talk() never ran (it ends with the child reaped)
            _kill_group(proc)
            _reap(proc, kill_after=5.0)
        scratch.remove(folder)  # the child is dead: nothing moves under the removal
        _live.runs.pop(folder, None)


class _Session:
    """One child's life: started, fed, read with a clock, ended, its end explained."""

    def __init__(self, limits: Limits, on_message: OnMessage | None) -> None:
        self.limits = limits
        self.on_message = on_message
        self.outcome = Outcome(channel=FrameReader(record_budget=limits.snippet_record_bytes))
        self.reader: FrameReader = self.outcome.channel  # type: ignore[assignment]
        self.output_chars = 0
        self.message_bytes = 0  # all that came on the message pipe
        self.pending: dict[str, str] = {"stdout": "", "stderr": ""}
        self.pending_line = 0  # the statement the pending output came from (it has not ended)
        self.raw: list[bytes] = []
        self.killed_for: VjpError | None = None
        self.ended = False  # "done", "error" or "exit" seen: the child said why it ends
        self.unavailable: str | None = None
        self.resource: str | None = None  # the limit the snippet's exception means, if it means one
        self.ready: dict[str, Any] | None = None  # the child's "ready": confined, the snippet sent
        self.extra: dict[str, Any] = {}  # more for the snippet frame: observe, seed, explain
        self.judge: Any = None  # judging.Judge: what the observer says about calls goes there too
        self.meanwhile: Callable[[], object] | None = None  # run once the snippet is sent (run_confined)

    def start(self, folder: str, read_dirs: list[str], trust: bool) -> None:
        message_r, message_w = os.pipe()
        output_r, output_w = os.pipe()
        self.folder = folder
        try:
            with _recording():  # the child inherits SIGINT held back; it lets it through first (child.py)
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-m", "vjp_explorer.confined.child"],
                    stdin=subprocess.PIPE,
                    stdout=output_w,
                    stderr=output_w,
                    cwd=os.getcwd() if trust else folder,
                    env=dict(os.environ) if trust else scrubbed_env(folder),
                    start_new_session=True,  # its own process group, which the clock kills whole
                    close_fds=True,
                    pass_fds=(message_w,),
                )
                _live.runs[folder] = self.proc
        finally:
            os.close(message_w)
            os.close(output_w)
        self.started = time.monotonic()
        self.measured_at, self.measure_every = self.started, _MEASURE_EVERY
        self.message_fd, self.output_fd = message_r, output_r
        config = {
            "type": "config",
            "message_fd": message_w,
            "scratch": folder,
            "read_dirs": read_dirs,
            "limits": {name: getattr(self.limits, name) for name in _CHILD_LIMITS},
            "trust": trust,
            "parent_pid": os.getpid(),
        }
        self._send(config)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(protocol.encode(message))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone; its end is explained from its exit status

    def talk(self, text: str, mode: str, filename: str) -> Outcome:
        """Read the child until both pipes close, sending the snippet once it says it is confined."""
        self.snippet = {"type": "snippet", "text": text, "mode": mode, "filename": filename, **self.extra}
        try:
            self._loop()
        finally:
            self._end()
        return self._explain()

    def _loop(self) -> None:
        deadline = self.started + self.limits.snippet_seconds
        with selectors.DefaultSelector() as sel:
            sel.register(self.message_fd, selectors.EVENT_READ, self._on_messages)
            sel.register(self.output_fd, selectors.EVENT_READ, self._on_output)
            while sel.get_map() and self.killed_for is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill(self._wall_limit())
                    break
                for key, _ in sel.select(timeout=min(left, 0.5)):
                    data = os.read(key.fd, _READ)
                    if not data:
                        sel.unregister(key.fd)
                        continue
                    key.data(data)
                if time.monotonic() >= self.measured_at + self.measure_every and self.killed_for is None:
                    self._measure()

    def _measure(self) -> None:
        """The scratch folder's size against its limit; the next measure comes later the longer this took."""
        began = time.monotonic()
        limit = self.limits.snippet_scratch_bytes
        try:
            used = scratch.size(self.folder, stop_at=limit)
        except (scratch.Unmeasurable, OSError) as e:
            self._kill(
                ProgramError(
                    f"the snippet's scratch folder cannot be measured: {e}; it was stopped",
                    hint="vjp bounds what a snippet leaves on disk, so it must be able to read all of it",
                )
            )
            return
        self.measured_at = time.monotonic()
        self.measure_every = max(_MEASURE_EVERY, 4 * (self.measured_at - began))
        if used > limit:
            self._kill(
                LimitError(
                    f"the snippet's scratch folder grew past {limit:,} bytes, the limit; it was stopped",
                    hint=f"--limit snippet_scratch_bytes=N raises it (now {limit})",
                )
            )

    def _on_output(self, data: bytes) -> None:
        self.raw.append(data)
        self._count(len(data))

    def _on_messages(self, data: bytes) -> None:
        self.message_bytes += len(data)
        budget = self.limits.snippet_event_bytes + 6 * self.limits.snippet_output_chars + _OTHER_FRAME_BYTES
        budget += self.limits.snippet_record_bytes + protocol.MAX_RECORD_FRAME  # the records: their own budget
        if self.message_bytes > budget:  # counted before decoding: what the parent holds stays near these bytes
            said = f"the snippet sent more than {budget:,} bytes of frames, more than vjp reads back from one run"
            self._kill(events_error("snippet_event_bytes", self.limits.snippet_event_bytes, said))
            return
        try:
            frames = self.reader.feed(data)
        except ProtocolError as e:
            self._kill(protocol_error(e))
            return
        most = self.limits.snippet_event_bytes
        if self.reader.event_bytes > most or self.reader.event_items > most // EVENT_BYTES_PER_ITEM:
            used = f"{self.reader.event_bytes:,} bytes in {self.reader.event_items:,} JSON items"
            said = f"the snippet sent {used} of events, past the limit of {most:,} bytes"
            said += f" (and an item per {EVENT_BYTES_PER_ITEM} bytes)"
            self._kill(events_error("snippet_event_bytes", most, said))
            return
        for frame in frames:
            if self.killed_for is not None:
                return
            self._on_frame(frame)

    def _on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        # "ready" or "unavailable" first and once (after it the snippet runs, and could forge either)
        if self.ended or (kind in ("ready", "unavailable")) != (self.ready is None):
            self._kill(protocol_error(ProtocolError(f"a {kind!r} frame out of turn")))
            return
        if kind == "ready":
            self.ready = frame
            self.outcome.confined, self.outcome.landlock_abi = frame["confined"], frame["landlock_abi"]
            self._send(self.snippet)
            self._close_stdin()
            meanwhile, self.meanwhile = self.meanwhile, None
            if meanwhile is not None:
                meanwhile()
        elif kind == "unavailable":
            self.unavailable = safe_text(frame["reason"])
            self.ended = True
        elif kind == "output":
            self.pending[frame["stream"]] += frame["text"]
            self.pending_line = frame["line"]
            self._count(len(frame["text"]))
        elif kind == "statement":
            self._count(len(frame["stdout"]) + len(frame["stderr"]))
            out, err = self.pending["stdout"] + frame["stdout"], self.pending["stderr"] + frame["stderr"]
            self.pending = {"stdout": "", "stderr": ""}
            self.outcome.statements.append(Statement(frame["line"], frame["end_line"], out, err))
        elif kind == "at_exit":
            if self.outcome.at_exit is not None:
                self._kill(protocol_error(ProtocolError("a second 'at_exit' frame")))
                return
            self._count(len(frame["stdout"]) + len(frame["stderr"]))
            out, err = self.pending["stdout"] + frame["stdout"], self.pending["stderr"] + frame["stderr"]
            self.pending = {"stdout": "", "stderr": ""}
            self.outcome.at_exit = Statement(0, 0, out, err)
        elif kind == "raised":  # a transcript goes on past it; the first one is the run's error, as a script's
            statements = self.outcome.statements
            if self.snippet["mode"] != "repl" or not statements or statements[-1].raised is not None:
                self._kill(protocol_error(ProtocolError("a 'raised' frame with no transcript's statement of its own")))
                return
            statements[-1].raised = exception_from(frame)
            if self.outcome.exception is None:
                self.outcome.exception = statements[-1].raised
                self.outcome.exit_code = 1
        elif kind == "error":
            self.outcome.exception = exception_from(frame)
            self.resource = frame["resource"]
            self.outcome.exit_code = 1
            self.ended = True
        elif kind == "exit":
            self.outcome.exit_code = frame["code"]
            self.outcome.exited = (frame["line"], frame["code"], safe_text(frame["message"][:2000]))
            self.ended = True
        elif kind == "refused":
            if len(self.outcome.refused) < MAX_REFUSED:
                self.outcome.refused.append(Refused(frame["kind"], safe_text(frame["what"][:200]), frame["line"]))
        elif kind in ("event", "started", "ended", "unobserved", "verdict", "record", "record_over"):
            if kind == "event" and len(self.outcome.events) >= self.limits.snippet_events:
                count = self.limits.snippet_events
                said = f"the snippet sent more than {count:,} events, the most vjp reads back from one run"
                self._kill(events_error("snippet_events", count, said))
                return
            if not self._calls(frame):
                return
        elif kind == "manual":
            if len(self.outcome.manual) >= MAX_MANUAL:
                self._kill(protocol_error(ProtocolError(f"more than {MAX_MANUAL} 'manual' frames")))
                return
            self.outcome.manual.append(frame["manual"])
        elif kind == "done":
            self.ended = True
        if self.on_message is not None and self.killed_for is None and kind not in ("record", "record_over"):
            self.on_message(frame)  # (a record is the judge's only: passed on, not kept, not shown)

    def _calls(self, frame: dict[str, Any]) -> bool:
        """A frame about calls: to the judge (checked against the call record's schema), an event kept."""
        try:
            if frame["type"] == "verdict" or self.judge is None and frame["type"] not in ("event", "record_over"):
                raise RecordError(f"a {frame['type']!r} frame, which only the judge may send")
            if self.judge is not None:
                self.judge.take(frame)
        except RecordError as e:
            self._kill(protocol_error(ProtocolError(str(e))))
            return False
        if frame["type"] == "event":
            self.outcome.events.append((len(self.outcome.statements), frame["event"]))
        return True

    def _close_stdin(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass

    def _count(self, chars: int) -> None:
        self.output_chars += chars
        limit = self.limits.snippet_output_chars
        if self.output_chars > limit and self.killed_for is None:
            self._kill(
                LimitError(
                    f"the snippet printed more than {limit:,} characters, the limit; it was stopped",
                    hint=f"--limit snippet_output_chars=N raises it (now {limit})",
                )
            )

    def _wall_limit(self) -> LimitError:
        seconds = self.limits.snippet_seconds
        return LimitError(
            f"the snippet ran for {seconds:g} s of wall-clock time, the limit; it was stopped",
            hint=f"--limit snippet_seconds=N raises it (now {seconds:g})",
        )

    def _kill(self, why: VjpError) -> None:
        self.killed_for = why
        _kill_group(self.proc)

    def _end(self) -> None:
        """Make sure the child is dead and reaped (Ctrl-C included), and every pipe closed."""
        if not self.ended:  # never poll(): it would reap the child, and its resource usage with it
            _kill_group(self.proc)
        self._close_stdin()
        self.status, usage = _reap(self.proc, kill_after=5.0)
        self.outcome.wall_seconds = time.monotonic() - self.started
        self.outcome.cpu_seconds = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
        for fd in (self.message_fd, self.output_fd):
            os.close(fd)
        self.outcome.raw_output = b"".join(self.raw).decode("utf-8", "replace")

    def _explain(self) -> Outcome:
        """Why the child ended, as the tool's own error where the tool or the kernel stopped it."""
        outcome = self.outcome
        if self.unavailable is not None:
            raise unavailable_error(self.unavailable)
        if self.pending["stdout"] or self.pending["stderr"]:  # a stopped statement: what it printed is shown
            line = self.pending_line
            outcome.statements.append(Statement(line, line, self.pending["stdout"], self.pending["stderr"]))
        if self.killed_for is not None:
            outcome.stopped = self.killed_for
        elif outcome.exception is not None and self.resource is not None:
            outcome.stopped = resource_error(self.resource, outcome.exception, self.limits)
        elif self.status is not None and self.status < 0:
            outcome.stopped = signal_error(-self.status, outcome.cpu_seconds, self.limits)
        elif not self.ended:
            outcome.stopped = ProgramError(
                f"the snippet's process ended (status {self.status}) before it finished",
                hint="the snippet (or a C library it called) ended the process directly, as with os._exit",
            )
        return outcome


# the events' JSON items (lists, objects, elements) allowed: one per this many bytes of snippet_event_bytes,
# so that decoded (about 100 bytes an item at worst) they stay within a few times the bytes; a float in a list,
# what real events carry, costs about 20 bytes of JSON
EVENT_BYTES_PER_ITEM = 32
_MEASURE_EVERY = 0.5  # seconds between two measures of the scratch folder, at least
# the message pipe's bytes besides events: output and statement frames are bounded by snippet_output_chars
# (6 bytes a character at most, as a JSON escape), the others are a few per statement
_OTHER_FRAME_BYTES = 64 << 20


_CHILD_LIMITS = ("snippet_memory_bytes", "snippet_cpu_seconds", "snippet_file_bytes", "snippet_open_files")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and its process group (it may have left the group: the pid is killed first)."""
    for kill in (lambda: os.kill(proc.pid, signal.SIGKILL), lambda: os.killpg(proc.pid, signal.SIGKILL)):
        try:
            if proc.returncode is None:
                kill()
        except (ProcessLookupError, PermissionError):
            pass


def _reap(proc: subprocess.Popen[bytes], kill_after: float) -> tuple[int | None, Any]:
    """Wait for the child (killing it if it lingers), with its resource usage: (exit code or -signal, rusage)."""
    deadline = time.monotonic() + kill_after
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped already (by Popen's own bookkeeping)
            return proc.returncode, None
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            _kill_group(proc)
        time.sleep(0.01)


_MIRRORED_ENTRIES = 10_000  # a working directory with more entries is not mirrored (its reads fail, explained)


def _mirror(scratch: str, dirs: list[str]) -> bool:
    """Where the user's working directory is readable (--allow-read names it or a folder above it), link its
    entries into the scratch folder, so the snippet's relative reads (`open("data.csv")`) find what
    `python FILE.py` would. The links are read-only as their targets are (Landlock judges the resolved path):
    a write through one is refused, a new file lands in the scratch folder; a change of mode, owner, times or
    attributes through one, and reading where it points, are refused whole (seccomp). Whether it mirrored."""
    cwd = Path(os.getcwd()).resolve()
    if not any(cwd == Path(d) or cwd.is_relative_to(d) for d in dirs):
        return False
    try:
        names = os.listdir(cwd)
        if len(names) > _MIRRORED_ENTRIES:
            return False
        for name in names:
            os.symlink(cwd / name, os.path.join(scratch, name))
    except OSError:
        return False
    return True
