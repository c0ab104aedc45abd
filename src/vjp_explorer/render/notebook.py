"""Result or SnippetResult -> HTML for Jupyter: what the terminal shows, rendered once more and exported by Rich."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from ..result import Result

WIDTH = 100  # characters a line: a notebook's output cell is about this wide
PRE = (
    "<pre style=\"font-family: Menlo, 'DejaVu Sans Mono', consolas, 'Courier New', monospace; "
    'line-height: 1.2; white-space: pre; overflow-x: auto">{code}</pre>'
)


def html(result: Any) -> str:
    """The `vjp run` (or `vjp explain`, for a result with an explanation) screen of a result, as an HTML fragment."""
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
    if isinstance(result, Result):
        from . import text

        view = text.View.for_result(result, None, False)
        if result.explanation is not None:
            from .explain_view import render_explain

            console.print(render_explain(result, view))
        else:
            console.print(text.render_run(result, view))
    else:
        from . import snippet_view

        console.print(snippet_view.render(result, explain=False))
    return console.export_html(inline_styles=True, code_format=PRE)
