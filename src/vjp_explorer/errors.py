"""The error classes: raised deep, caught once at the edge (the CLI), printed to stderr."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    """The process exit codes; documented in the README and pinned by tests."""

    OK = 0
    INTERNAL = 1
    BAD_INPUT = 2
    DISAGREE = 3
    SNIPPET_RAISED = 4  # a snippet raised, as plain Python with torch would (the error is explained)
    INTERRUPTED = 130


@dataclass(frozen=True)
class Origin:
    """Where a value came from, in the words of the front end that took it.

    The library words its messages about a value neutrally ("v has shape [3] but ..."); the error carries
    the value's Origin, whose `where` opens the printed message and labels the marker under the value's
    text. `give` says, for hints, how to give the value otherwise.
    """

    where: str  # "--grad", "f.toml: key 'grad'", or a parameter's name for the Python API
    option: str | None = None  # the command line's spelling of it, where there is one
    path: str | None = None  # the expression file it came from (or would go in)
    key: str | None = None  # the file's key for it: "grad", "inputs.x"

    def give(self, value: str, toml: str | None = None) -> str:
        """How to give the value `value` (written `toml` in a file): `--grad ones`, `grad = "ones" in f.toml ...`."""
        if self.path is not None and self.key is not None:
            text = f"{self.key} = {toml or value} in {self.path}"
            return text + (f" (or {self.option} {value} on the command line)" if self.option else "")
        if self.option is not None:
            return f"{self.option} {value}"
        return f"{self.where}={toml or value}"  # a keyword of the Python API: the value as Python writes it

    def give_text(self, text: str) -> str:
        """`give` for a value that a file writes as a string: `--grad ones`, `grad = "ones" in f.toml ...`."""
        return self.give(text, '"' + text + '"')


class VjpError(Exception):
    """Base of every error the tool reports on purpose (bad input, limits, ...).

    With `source` and a span it draws the offending line with a ^^^ marker under it. With an `origin`,
    the message opens with where the value came from, and the marker is labelled with it.
    """

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self,
        message: str,
        source: str | None = None,
        start: int = 0,
        end: int | None = None,
        hint: str | None = None,
        label: str = "expression",
        origin: Origin | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.source = source
        self.origin = origin
        self.label = origin.where if origin is not None else label
        n = len(source) if source is not None else 0
        self.start = max(0, min(start, n))
        self.end = max(self.start + 1, end if end is not None else self.start + 1)

    def came_from(self, origin: Origin) -> VjpError:
        """Name where the offending value came from, for an error raised where that was not known."""
        self.origin = origin
        self.label = origin.where
        return self

    def marker(self) -> str:
        """The source line holding the span, with ^^^ under the span."""
        src = self.source or ""
        line_start = src.rfind("\n", 0, self.start) + 1
        line_end = src.find("\n", self.start)
        if line_end == -1:
            line_end = len(src)
        line = src[line_start:line_end]
        lineno = src.count("\n", 0, self.start) + 1
        col = self.start - line_start
        width = max(1, min(self.end, line_end) - self.start)
        # long lines: show a window around the span so the marker stays on screen
        lo = max(0, col - 40) if len(line) > 100 else 0
        hi = min(len(line), col + min(width, 40) + 40) if len(line) > 100 else len(line)
        prefix = "..." if lo > 0 else ""
        suffix = "..." if hi < len(line) else ""
        shown = prefix + line[lo:hi] + suffix
        col = col - lo + len(prefix)
        width = max(1, min(width, hi - (col - len(prefix) + lo)))
        where = f"  {self.label}" + (f", line {lineno}" if "\n" in src.rstrip("\n") else "")
        where += f", column {self.start - line_start + 1}:"
        return f"{where}\n    {shown}\n    {' ' * col}{'^' * width}"

    def _render_traceback_(self) -> list[str]:
        """IPython's hook: in a notebook, the error as the command line prints it (the marker under the span),
        not the library's frames that raised it; the exception itself is unchanged (`%debug` still works)."""
        return [f"{type(self).__name__}: {self.render()}"]

    def render(self) -> str:
        """The whole message, as printed on stderr."""
        text = self.message
        if self.origin is not None:
            text = f"{self.origin.where}: {text}"
        if self.source is not None:
            text += "\n" + self.marker()
        if self.hint:
            text += "\n" + self.hint
        return text


class ProgramSyntaxError(VjpError):
    """The program text is not in our language."""


class ValueSyntaxError(VjpError):
    """A value (--NAME VALUE, --grad) is malformed."""


class ShapeError(VjpError):
    """Shapes do not fit (broadcasting, matmul, v against the output)."""


class ProgramError(VjpError):
    """The program is well formed but cannot run as given (unknown variable, missing value)."""


class LimitError(VjpError):
    """A resource limit would be exceeded; checked before the work is done."""


class FileFormatError(VjpError):
    """An expression file is unreadable or does not follow the format."""


class UsageError(VjpError):
    """The command line is wrong (options that clash, a missing argument)."""


class OutputError(VjpError):
    """stdout cannot take the output (a full disk); not the input's fault, so exit 1."""

    exit_code = ExitCode.INTERNAL
