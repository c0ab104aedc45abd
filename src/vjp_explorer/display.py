"""How results show themselves in Jupyter, print and rich.print: hooks that keep renderers out of results.

`Result` and `SnippetResult` define `_repr_html_`, which asks `html(result)`; `Result.__rich__` and
`__str__` ask `rich(result)` and `text(result)`; `to_dict` asks `document(result)`, the JSON document.
The package's `__init__` sets the hooks to functions that import their module when first called.
Without them (unset), a result shows its repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

html_view: Callable[[Any], str] | None = None
rich_view: Callable[[Any], Any] | None = None
text_view: Callable[[Any], str] | None = None
svg_view: Callable[[Any], str] | None = None
document_view: Callable[..., dict[str, Any]] | None = None


def html(result: Any) -> str | None:
    """The HTML a notebook shows for a result (what the terminal shows), or None."""
    return None if html_view is None else html_view(result)


def rich(result: Any) -> Any:
    """The Rich renderable of a result (what the terminal shows), or its repr."""
    return repr(result) if rich_view is None else rich_view(result)


def text(result: Any) -> str:
    """The report of a result as plain text, or its repr."""
    return repr(result) if text_view is None else text_view(result)


def svg(graph: Any) -> str | None:
    """The SVG picture a notebook shows for a backward graph, or None."""
    return None if svg_view is None else svg_view(graph)


class Graph(list):  # type: ignore[type-arg]
    """A backward graph's nodes (plain dicts, as the JSON has them) that a notebook shows as an SVG picture,
    as torchviz's make_dot does (render/graph_svg.py draws it; no Graphviz binary). Still a list: JSON,
    `len`, indexing and iteration see the nodes."""

    def _repr_svg_(self) -> str | None:
        return svg(list(self))


def document(result: Any, **options: Any) -> dict[str, Any]:
    """The JSON document of a result (docs/json.md), through the hook the package's `__init__` sets."""
    if document_view is None:
        raise RuntimeError("vjp_explorer's __init__ sets display.document_view; import vjp_explorer first")
    return document_view(result, **options)
