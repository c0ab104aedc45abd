"""vjp-explorer: see what `y.backward(v)` computes: Jᵀv, term by term, checked by finite differences and sympy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import display

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .api import Request, explore
    from .errors import ExitCode, VjpError
    from .limits import Limits
    from .result import Result
    from .snippet import SnippetResult, run_snippet
    from .trusted import check

__all__ = [
    "ExitCode",
    "Limits",
    "Request",
    "Result",
    "SnippetResult",
    "VjpError",
    "__version__",
    "check",
    "explore",
    "run_snippet",
]

_WHERE = {
    "Request": "api",
    "explore": "api",
    "ExitCode": "errors",
    "Limits": "limits",
    "VjpError": "errors",
    "Result": "result",
    "check": "trusted",
    "run_snippet": "snippet",
    "SnippetResult": "snippet",
}


def __getattr__(name: str) -> Any:
    # imported on first use, so that `vjp --help` loads none of the library
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # the public API (what `from vjp_explorer import *` gives), not the submodules loaded so far
    return sorted(__all__)


def _html(result: Any) -> str:
    # Jupyter's view of a result (its _repr_html_): the renderer is imported only when a notebook asks
    from .render.notebook import html

    return html(result)


def _rich(result: Any) -> Any:
    from .render.notebook import renderable

    return renderable(result)


def _text(result: Any) -> str:
    from .render.notebook import plain

    return plain(result)


def _svg(graph: Any) -> str:
    from .render.graph_svg import svg

    return svg(graph)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext vjp_explorer`: the `%%vjp` cell magic (magic.py)."""
    from .magic import load_ipython_extension as load

    load(ipython)


def _document(result: Any, **options: Any) -> dict[str, Any]:
    # a result's to_dict(): the serializer sits above the result types, so they reach it through this hook
    from .result_json import document

    return document(result, **options)


display.html_view = _html
display.rich_view = _rich
display.text_view = _text
display.svg_view = _svg
display.document_view = _document
