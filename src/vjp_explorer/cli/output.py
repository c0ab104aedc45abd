"""The command line's output: what it writes to stdout and stderr, and how an error ends the process.

Rendered text is written in one piece in what the stream can encode; an error becomes one paragraph on
stderr and an exit code (errors.ExitCode), never a traceback unless --debug asks for one.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import typer

from ..errors import ExitCode, OutputError, VjpError


def fail(e: BaseException, debug: bool) -> typer.Exit:
    from ..language.unicode import visible

    if isinstance(e, VjpError):
        write("error: " + visible(e.render()) + "\n", err=True)
        return typer.Exit(int(e.exit_code))
    if isinstance(e, KeyboardInterrupt):
        write("interrupted\n", err=True)
        return typer.Exit(int(ExitCode.INTERRUPTED))
    if debug or os.environ.get("VJP_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
        raise e
    write(
        visible(f"internal error: {type(e).__name__}: {e}")
        + "\nThis is a bug in vjp-explorer; please report it with the command you ran. Run again with --debug "
        "(or VJP_DEBUG=1) for the traceback.\n",
        err=True,
    )
    return typer.Exit(int(ExitCode.INTERNAL))


# our symbols, spelled in ASCII for a stream that cannot encode them (PYTHONIOENCODING=ascii, latin-1)
_ASCII_SPELLINGS = {"ᵀ": "^T", "∂": "d", "Σ": "sum", "ᵢ": "_i", "·": "*", "×": "x", "±": "+/-", "Δ": "diff"}


_ASCII_SPELLINGS |= {"δ": "delta", "Π": "prod", "⊙": "(.)", "←": "<-", "•": "*", "★": "*"}


def _ascii_box(c: str) -> str:
    """A table's box-drawing character as |, - or + (a crossing or corner); any other character unchanged."""
    if not "\u2500" <= c <= "\u257f":
        return c
    import unicodedata

    name = unicodedata.name(c)
    return "+" if " AND " in name else "|" if name.endswith("VERTICAL") else "-" if "HORIZONTAL" in name else "+"


def can_encode(text: str, err: bool = False) -> bool:
    encoding = getattr(sys.stderr if err else sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def write(text: str | list[str], err: bool = False) -> None:
    """Write already rendered output to stdout (or stderr), in what the stream can encode.

    Where the stream cannot take our symbols they are spelled in ASCII (Jᵀv as J^T v), anything else
    as a backslash escape. A reader that went away (`| head`) ends stdout quietly; any other fault
    writing stdout (a full disk) is an OutputError. A fault on stderr leaves nothing to tell it with.
    """
    stream = sys.stderr if err else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    parts = [text] if isinstance(text, str) else text
    try:
        for part in parts:
            if not part.isascii() and not can_encode(part, err):
                part = re.sub("ᵀ(?=[A-Za-z])", "^T ", part)
                part = "".join(_ASCII_SPELLINGS.get(c) or _ascii_box(c) for c in part)
                part = part.encode(encoding, "backslashreplace").decode(encoding)
            stream.write(part)
        stream.flush()
    except BrokenPipeError:
        if not err:
            silence_stdout()
    except (OSError, ValueError) as e:
        if err:
            return
        silence_stdout()
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise OutputError(f"Cannot write the output to stdout: {reason}.") from None


def render(*renderables: Any) -> str:
    """What Rich would print on stdout, as a string: written in one piece by write.

    Rich renders into a buffer, never onto stdout itself, so that only write meets a full disk or
    a closed pipe; colour follows whether stdout is a terminal, as it would.
    """
    import io

    from rich.console import Console

    styled = colour()
    console = Console(
        file=io.StringIO(),
        force_terminal=styled,
        highlight=False,
        color_system="auto" if styled else None,
        force_jupyter=False,
    )
    # COLUMNS=0 (or a terminal a few columns wide) would print nothing or a column of fragments
    console.width = min(max(console.width, 40), 1000)
    for renderable in renderables:
        console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    # Rich pads every line to the width of its table; a file or a pipe gets lines without trailing spaces
    return _PADDING.sub(lambda m: m[0].replace(" ", ""), file.getvalue())


_PADDING = re.compile(r"(?: |\x1b\[[0-9;]*m)+$", re.M)  # trailing spaces, among styles that are kept
COLOUR = ["auto"]  # --color: auto, always or never (set by the option's callback before the command runs)


def colour() -> bool:
    """Whether to write ANSI styles: --color, else NO_COLOR (none at all), else FORCE_COLOR, else a terminal."""
    if COLOUR[0] != "auto":
        return COLOUR[0] == "always"
    # NO_COLOR (no-color.org) means no ANSI codes at all, not just no colours: no bold or dim either
    if os.environ.get("NO_COLOR", "") != "":
        return False
    if os.environ.get("FORCE_COLOR", "") != "":  # force-color.org
        return True
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def emit(
    result: Any,
    json_: bool,
    full: bool,
    verbose: bool,
    digits: int | None,
    explain: bool = False,
    export: tuple[Path | None, Path | None] = (None, None),
) -> None:
    if json_:
        from ..render.json_out import write_json

        parts: list[str] = []  # all of it before the first byte: no truncated JSON if anything fails
        write_json(result, parts.append, full)
        parts.append("\n")
        write(parts)
        if export == (None, None):
            return
    from ..render import text

    view = text.View.for_result(result, digits, full, verbose, ascii=not can_encode("Jᵀv∂Σ"))
    if explain:
        from ..render.explain_view import render_explain

        shown = render_explain(result, view)
    else:
        shown = text.render_run(result, view)
    if not json_:  # with --json, stdout has the JSON and the files what the terminal would have shown
        write(render(shown))
    from ..render.export import export as save_export

    save_export(shown, export, "vjp explain" if explain else "vjp run")


def paged(renderables: list[Any], pager: bool = True) -> None:
    """Long output (`vjp functions`, `vjp docs TOPIC`): through a pager where stdout and stdin are a
    terminal (Rich's pager: $MANPAGER or $PAGER, else less; PAGER=cat or --no-pager opts out), else
    written as `render` writes it, so that a pipe or a file gets the same plain text as before."""
    if not pager or not on_terminal():
        write(render(*renderables))
        return
    from rich.console import Console

    styled = colour()
    os.environ.setdefault("LESS", "FRX")  # as git: quit if it fits one screen, keep colours, leave it shown
    console = Console(
        force_terminal=True, highlight=False, color_system="auto" if styled else None, no_color=not styled
    )
    with console.pager(styles=styled):
        for renderable in renderables:
            console.print(renderable)


def on_terminal() -> bool:
    """Whether stdout and stdin are a terminal (a pager needs both: it reads keys from stdin)."""
    try:
        return sys.stdout.isatty() and sys.stdin.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more (nor the final flush) fails on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's capture): nothing to do
        pass
