"""Run a snippet as `python FILE.py` runs it (or a REPL transcript as the REPL did), one top-level statement
at a time, with each statement's output captured and sent as a frame.

The only place the project runs a user's code with exec (besides trusted.py's door for one's own module).
It runs in the confined child, after the confinement: the text it runs came through the pipe.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import errno
import io
import linecache
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from . import refusals

Send = Callable[[dict[str, Any]], None]

CHUNK = 64 << 10  # characters of output buffered before a long statement sends them early
FLUSH_SECONDS = 0.5  # and every this often: a statement a limit stops keeps what it printed until then
TRACEBACK_CHARS = 64 << 10  # a traceback longer than this is cut (a deep recursion's, say)


class Observer(Protocol):
    """Told around each top-level statement (the autograd observation hooks in here)."""

    def before_statement(self, stmt: ast.stmt) -> None: ...

    def after_statement(self, stmt: ast.stmt) -> None: ...


class _Bytes(io.BufferedIOBase):
    """The binary side of a _Stream (`sys.stdout.buffer`): bytes decoded as UTF-8 (a character split across
    writes waits for its rest), written as text."""

    def __init__(self, text: _Stream) -> None:
        import codecs

        self._text, self._decode = text, codecs.getincrementaldecoder("utf-8")("replace")

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raw = bytes(data)
        self._text.write(self._decode.decode(raw))
        return len(raw)

    def flush(self) -> None:
        self._text.flush()


class _Stream(io.TextIOBase):
    """sys.stdout or sys.stderr of the snippet: text collected per statement, sent in chunks as frames."""

    def __init__(self, name: str, fd: int, flush_chunk: Callable[[str, str], None]) -> None:
        self.name, self._fd, self._flush_chunk = name, fd, flush_chunk
        self.buffer = _Bytes(self)  # sys.stdout.buffer.write(b"...") as python's own stream takes it
        self.parts: list[str] = []
        self.size = 0
        self.lock = threading.Lock()  # the snippet writes while the flusher (keep_sending) takes

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd  # the raw pipe: what a C library writes there reaches the parent as raw output

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self.lock:
            self.parts.append(text)
            self.size += len(text)
            full = self.size >= CHUNK
        if full:
            whole = self.take()
            # one frame per CHUNK characters, well below the frame's size (6 bytes a character at most):
            # a 100 MB print reaches the parent's output limit, not the channel's
            for start in range(0, len(whole), CHUNK):
                self._flush_chunk(self.name, whole[start : start + CHUNK])
        return len(text)

    def take(self) -> str:
        with self.lock:
            text = "".join(self.parts)
            self.parts, self.size = [], 0
        return text


def keep_sending(streams: list[_Stream], early: Callable[[str, str], None], gate: threading.Lock) -> threading.Event:
    """A daemon thread that sends what the snippet printed every FLUSH_SECONDS, so a statement a limit stops
    (a training loop past the clock) keeps its output; `gate` orders it with the statement frames, and the
    event it returns stops it before the run's last frames."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(FLUSH_SECONDS):
            with gate:
                for stream in streams:
                    text = "" if stop.is_set() else stream.take()
                    if text:
                        early(stream.name, text)

    threading.Thread(target=loop, name="vjp-output", daemon=True).start()
    return stop


def transcript_source(text: str) -> str:
    """A REPL transcript's code: `>>> ` and `... ` lines without their prompts, every other line (the
    REPL's output) blank, so line numbers stay those of the transcript."""
    lines = []
    for line in text.splitlines():
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            lines.append(line[4:])
        else:
            lines.append("")
    return "\n".join(lines) + "\n"


def is_transcript(text: str) -> bool:
    """Whether `text` reads as a REPL transcript: its first line of code opens with the `>>> ` prompt."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.lstrip().startswith(">>>")


def run(
    source: str,
    send: Send,
    *,
    filename: str = "<snippet>",
    mode: str = "script",
    observers: Iterable[Observer] = (),
    observe: Callable[[dict[str, Any]], Observer] | None = None,
    confined: bool = False,
    go_on: bool = True,
) -> None:
    """Run `source` (mode "script", or "repl" for a transcript), sending a "statement" frame per top-level
    statement, then "done"; or an "error" (or "exit") frame where the snippet stops. A transcript goes on
    past an exception, as the REPL did: a "raised" frame (the error's fields) follows that statement's
    frame; `go_on=False` stops there as a script does (the second run that diagnoses the first error).
    `observe`, given the snippet's namespace, makes one more observer (the autograd one) before the first
    statement runs. `confined`: the child is confined, so what the kernel refuses is read back and said
    (refusals.py)."""
    observers = list(observers)
    if mode == "repl":
        source = transcript_source(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for tracebacks
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:  # Python says so before it runs a line; so do we
        send(_error_frame(exc, filename, False))
        return
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=filename, __builtins__=builtins, __doc__=ast.get_docstring(tree, clean=False))
    if mode == "repl":  # the session the transcript was copied from imported these before its first line
        for _name, statement in session_imports(tree):
            exec(statement, module.__dict__)  # our own fixed import lines, not the user's text
    sys.argv = [filename]  # as `python FILE.py` has it (argparse's usage names the file)
    sys.modules["__main__"] = module  # classes the snippet defines pickle as __main__.Name, as in `python FILE.py`
    if observe is not None:
        observers.append(observe(module.__dict__))
    current = {"line": 0, "early": 0}
    attempts = refusals.Attempts() if confined else None
    if attempts is not None:
        attempts.install()

    def early(stream: str, text: str) -> None:
        current["early"] += 1
        send({"type": "output", "line": current["line"], "stream": stream, "text": text})

    stdout, stderr = _Stream("stdout", 1, early), _Stream("stderr", 2, early)
    sys.stdout, sys.stderr = stdout, stderr
    gate = threading.Lock()
    flusher = keep_sending([stdout, stderr], early, gate)
    flags = 0
    end: dict[str, Any] = {"type": "done"}
    try:
        for stmt in tree.body:
            current["line"] = stmt.lineno
            if attempts is not None:
                attempts.line = stmt.lineno
            flags |= _future_flags(stmt)
            stopped = _run_statement(stmt, module.__dict__, filename, mode, flags, observers, confined, go_on)
            for frame in attempts.take() if attempts is not None else ():
                send(frame)
            with gate:
                text = {"stdout": stdout.take(), "stderr": stderr.take()}
                send({"type": "statement", "line": stmt.lineno, "end_line": stmt.end_lineno or stmt.lineno, **text})
            if stopped is not None and stopped["type"] == "raised":
                send(stopped)  # the REPL printed the traceback and read the next line
            elif stopped is not None:
                end = stopped
                break
        for observer in observers:  # after the snippet's last statement: the hand-written gradients
            after_run = getattr(observer, "after_run", None)
            if after_run is not None:
                after_run()
        with gate:
            flusher.set()
        _run_at_exit(send, stdout, stderr, current)
    finally:
        with gate:
            flusher.set()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    send(end)


def _run_at_exit(send: Send, stdout: _Stream, stderr: _Stream, current: dict[str, int]) -> None:
    """What the snippet registered with atexit runs now, as at `python FILE.py`'s end (after its last
    statement, its traceback or its sys.exit), with its output captured like a statement's; Python itself
    reports an exception there ("Exception ignored in atexit callback") on stderr and goes on."""
    import atexit

    if not atexit._ncallbacks():
        return
    current["line"], current["early"] = 0, 0
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: S110 - a KeyboardInterrupt or the like at the very end: Python too stops there
        pass
    out, err = stdout.take(), stderr.take()
    if out or err or current["early"]:  # torch registers atexit functions of its own, which print nothing
        send({"type": "at_exit", "stdout": out, "stderr": err})


# what a REPL transcript copied from a session may use without showing its import
SESSION = {
    "torch": "import torch",
    "nn": "import torch.nn as nn",
    "F": "import torch.nn.functional as F",
    "np": "import numpy as np",
    "math": "import math",
    "Variable": "from torch.autograd import Variable",
}


def session_imports(tree: ast.AST) -> list[tuple[str, str]]:
    """The SESSION names a transcript reads but never binds itself, with the import that binds each."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return [(name, line) for name, line in SESSION.items() if name in read and name not in bound]


def _future_flags(stmt: ast.stmt) -> int:
    """A `from __future__ import x` changes how the statements after it compile, as it does in a file."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return sum(getattr(getattr(__future__, a.name, None), "compiler_flag", 0) for a in stmt.names)
    return 0


def _run_statement(
    stmt: ast.stmt,
    namespace: dict[str, Any],
    filename: str,
    mode: str,
    flags: int,
    observers: list[Observer],
    confined: bool,
    go_on: bool = False,
) -> dict[str, Any] | None:
    """Run one statement; None when it ran to its end, else the frame that says why the snippet stops, or
    (a transcript's, with `go_on`) a "raised" frame: an exception the REPL printed before reading the next
    line. sys.exit, a KeyboardInterrupt and a limit of the confinement (memory, file size) end it there."""
    try:
        if mode == "repl":  # "single" echoes a bare expression's value through sys.displayhook, as the REPL
            code = compile(ast.Interactive([stmt]), filename, "single", flags=flags, dont_inherit=True)
        else:
            code = compile(ast.Module([stmt], type_ignores=[]), filename, "exec", flags=flags, dont_inherit=True)
        for observer in observers:
            observer.before_statement(stmt)
        exec(code, namespace)
        for observer in observers:
            observer.after_statement(stmt)
    except SystemExit as exc:
        return _exit_frame(exc, stmt.lineno)
    except BaseException as exc:  # the snippet's own error, KeyboardInterrupt included: Python's story
        frame = _error_frame(exc, filename, confined)
        if mode == "repl" and go_on and isinstance(exc, Exception) and frame["resource"] is None:
            frame["type"] = "raised"
        return frame
    return None


def _exit_frame(exc: SystemExit, line: int) -> dict[str, Any]:
    """sys.exit(code) as python exits: an int is the status, None is 0, anything else is printed and 1."""
    code = exc.code
    if code is None or type(code) is int:
        return {"type": "exit", "line": line, "code": int(code or 0) & 0xFF, "message": ""}
    return {"type": "exit", "line": line, "code": 1, "message": _text(code)}


def _error_frame(exc: BaseException, filename: str, confined: bool) -> dict[str, Any]:
    """The snippet's exception as plain data, its traceback cut to the snippet's own frames; in a confined
    run, the refusal behind it (a process, the network, a file), read from the whole traceback."""
    tb = traceback.TracebackException.from_exception(exc, limit=200)
    refusal, via = refusals.of_exception(exc, tb.stack) if confined else (None, "")
    frames = [f for f in tb.stack if f.filename == filename]
    tb.stack = traceback.StackSummary.from_list(frames)
    line = frames[-1].lineno if frames else getattr(exc, "lineno", None)
    try:
        text = "".join(tb.format())
    except Exception:  # a hostile __str__ or __repr__ on the exception
        text = f"{type(exc).__name__}: <unprintable>\n"
    if len(text) > TRACEBACK_CHARS:
        text = text[: TRACEBACK_CHARS // 2] + "\n[... cut ...]\n" + text[-TRACEBACK_CHARS // 2 :]
    code = getattr(exc, "errno", None)
    return {
        "type": "error",
        "exc_type": type(exc).__qualname__ if type(exc).__module__ == "builtins" else _type_name(type(exc)),
        "message": _text(exc),
        "line": line if type(line) is int else None,
        "traceback": text,
        "errno": code if type(code) is int else None,
        "resource": _resource(exc),
        "refusal": refusal,
        "via": via,
    }


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _text(value: object) -> str:
    try:
        text = str(value)
    except Exception:
        return "<unprintable>"
    return text if len(text) <= TRACEBACK_CHARS else text[:TRACEBACK_CHARS] + " [... cut ...]"


def _resource(exc: BaseException) -> str | None:
    """The limit an exception means, where it means one: a failed allocation is the memory limit (numpy's
    is a MemoryError, torch's a RuntimeError from its allocator), EFBIG the file size, EMFILE the open files."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, RuntimeError) and "can't allocate memory" in _text(exc)[:2000]:
        return "memory"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOMEM, errno.EFBIG, errno.EMFILE):
        return {errno.ENOMEM: "memory", errno.EFBIG: "file_size", errno.EMFILE: "open_files"}[exc.errno]
    return None
