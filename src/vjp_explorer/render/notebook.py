"""Result or SnippetResult -> HTML for Jupyter: what the terminal shows, rendered once more and exported by Rich."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, RenderableType

from ..result import Result

WIDTH = 100  # characters a line: a notebook's output cell is about this wide
PRE = (
    "<pre style=\"font-family: Menlo, 'DejaVu Sans Mono', consolas, 'Courier New', monospace; "
    'line-height: 1.2; white-space: pre; overflow-x: auto">{code}</pre>'
)


def renderable(result: Any) -> RenderableType:
    """What `vjp run` (or `vjp explain`, for a result with an explanation) shows for a result, worded for
    the Python API (keywords, not command-line options)."""
    if isinstance(result, Result):
        from . import text

        view = text.View.for_result(result, None, False)
        if result.explanation is not None:
            from .explain_view import render_explain

            return render_explain(result, view)
        return text.render_run(result, view)
    from . import snippet_view

    return snippet_view.render(result, explain=False, surface="api")


def plain(result: Any) -> str:
    """The report as plain text (`print(result)`), as wide as the terminal."""
    import shutil

    console = Console(
        file=io.StringIO(),
        width=shutil.get_terminal_size((WIDTH, 24)).columns,
        color_system=None,
        highlight=False,
        force_jupyter=False,
        force_terminal=False,
    )
    console.print(renderable(result))
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines())  # type: ignore[attr-defined]


def html(result: Any) -> str:
    """The report of a result as an HTML fragment, for Jupyter."""
    # force_jupyter=False: inside a kernel Rich would send a display of its own as it prints, and the
    # notebook would show the result twice (that display, then this HTML)
    console = Console(
        record=True,
        file=io.StringIO(),
        width=WIDTH,
        color_system="truecolor",
        highlight=False,
        force_jupyter=False,
    )
    console.print(renderable(result))
    return console.export_html(inline_styles=True, code_format=PRE)
