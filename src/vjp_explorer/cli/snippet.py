"""The command line's snippet door: `vjp run FILE.py`, `vjp explain --snippet -`, a bundled seed snippet.

Reads the snippet (bounded, regular files only), refuses the options that belong to programs, runs the
snippet pipeline and hands the result to a renderer. Returns the exit code.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..snippet.source import visible
from .support import limits_from_options

# options of `run`/`explain` that describe a program's inputs; a snippet makes its own
_PROGRAM_ONLY = {
    "var": "--var",
    "const": "--const",
    "grad": "--grad",
    "upstream": "--upstream",
    "output": "--output",
    "dtype": "--dtype",
    "backward_calls": "--backward-calls",
    "max_jacobian": "--max-jacobian",
}


def snippet_command(
    ctx: Any,
    expression: str | None,
    explain: bool,
    o: dict[str, Any],
    write: Callable[..., None],
    render: Callable[..., str],
) -> int:
    want_graph = bool(o.get("graph")) or o.get("dot") is not None
    result = snippet_result(ctx, expression, o, want_graph, keep_partial=True)
    label = result.label
    from ..render import snippet_view

    if o.get("dot") is not None:
        _write_dot(Path(o["dot"]), result)
    if o.get("code") is not None:
        from ..backward_code.files import for_snippet

        for_snippet(result, Path(o["code"]))
    if want_graph and not o.get("graph"):
        for event in result.events:
            event.graph = None  # asked only for the file
    if o.get("json_"):
        parts: list[str] = []
        snippet_view.write_json(result, parts.append)
        write(parts)
    else:
        shown = snippet_view.render(result, explain=explain, full=bool(o.get("full")))
        write(render(shown))
        from ..render.export import export

        export(shown, (o.get("svg"), o.get("html")), f"vjp {'explain' if explain else 'run'} {label}")
        if result.exit_code == 3 and result.stopped is None:
            write("error: a check disagrees (exit 3); see the event's checks above.\n", err=True)
    if result.stopped is not None:
        raise result.stopped  # after what ran: its one-paragraph message on stderr, and its exit code
    return result.exit_code


def snippet_result(
    ctx: Any,
    expression: str | None,
    o: dict[str, Any],
    graph: bool = True,
    keep_partial: bool = False,
    code: bool | None = None,
) -> Any:
    """The snippet's run (a SnippetResult), after refusing the options that belong to programs; `code`: capture
    each call's backward for a script (default: as --code asks)."""
    for problem in ctx.meta.get("vjp_problems", []):
        raise UsageError(problem)
    names = [f"--{n}" for n, _ in ctx.meta.get("vjp_variables", [])]
    names += [flag for key, flag in _PROGRAM_ONLY.items() if o.get(key)]
    if names:
        raise UsageError(
            f"{', '.join(visible(n) for n in names)} {'does' if len(names) == 1 else 'do'} not apply to a snippet: "
            "a snippet makes its own tensors and calls backward itself.",
            hint="Change the values in the snippet, or run a program instead: vjp run '3*a' --a 1,2.",
        )
    limits = limits_from_options(o)
    for folder in o.get("allow_read") or ():  # as --svg and --code refuse a folder that is not there
        if not Path(folder).is_dir():
            raise UsageError(
                f"--allow-read {visible(str(folder))}: not a folder (it does not exist, or is a file).",
                hint="Give a folder the snippet may read, e.g. --allow-read data/.",
            )
    text, label = _read(expression, o.get("snippet"), limits.snippet_chars)
    from ..snippet import run_snippet

    return run_snippet(
        text,
        label,
        seed=o.get("seed"),
        limits=limits,
        graph=graph,
        allow_read=[str(p) for p in o.get("allow_read") or ()],
        trust=bool(o.get("trust")),
        keep_partial=keep_partial,
        code=o.get("code") is not None if code is None else code,
        meanwhile=_views,
    )


def _views() -> None:
    """Import what shows the run, while the child imports torch: off the run's critical path."""
    from ..render import snippet_view  # noqa: F401


def _write_dot(path: Path, result: Any) -> None:
    from ..render.graph_view import write_dot

    write_dot(path, [(e.index, f"#{e.index} line {e.line}: {e.source}", e.graph) for e in result.events if e.graph])


def _read(expression: str | None, snippet: str | None, max_chars: int) -> tuple[str, str]:
    """The snippet's text and the label its messages use."""
    if snippet is not None and expression is not None:
        raise UsageError("Give either a snippet file or --snippet TEXT, not both.")
    if snippet == "-":
        try:
            text = sys.stdin.read(max_chars + 1)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise UsageError(f"The snippet on standard input cannot be read ({type(e).__name__}).") from None
        return text, "<stdin>"
    if snippet is not None:
        return snippet, "<snippet>"
    assert expression is not None
    from ..language.files import resolve_example

    path = Path(expression)
    if not _exists(path):
        found = resolve_example(expression)
        if found is None:
            raise UsageError(f"{visible(expression)}: no such file.", hint="vjp examples lists the bundled snippets.")
        # a bundled example is labelled by its name, which runs it again anywhere (`vjp run NAME`), not by
        # the absolute path of an install (long, and the user's own)
        return read_text(found, max_chars), visible(expression)
    return read_text(path, max_chars), visible(str(path))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def read_text(path: Path, max_chars: int) -> str:
    """A regular file's text, read bounded; a FIFO, device or directory is refused without blocking."""
    shown = visible(str(path))
    try:
        st = os.stat(path)
    except OSError as e:
        raise UsageError(f"{shown}: cannot be read ({e.strerror}).") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe or a device)"
        raise UsageError(f"{shown}: is {kind}; a snippet is read from a file or from --snippet -.")
    try:
        with open(path, "rb") as f:
            raw = f.read(4 * max_chars + 4)
    except OSError as e:
        raise UsageError(f"{shown}: cannot be read ({e.strerror}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UsageError(f"{shown}: is not UTF-8 text (byte {e.start}, line {line}).") from None
    if "\x00" in text:
        raise UsageError(f"{shown}: contains a NUL byte; it is not a text file.")
    return text
