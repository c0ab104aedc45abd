"""How results show themselves in Jupyter: a hook the package fills, so that result modules import no renderer.

`Result` and `SnippetResult` define `_repr_html_`, which asks `html(result)`; the package's `__init__` sets
`html_view` to a function that imports render/notebook.py when first called. Without it (the hook unset),
Jupyter shows the result's repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

html_view: Callable[[Any], str] | None = None


def html(result: Any) -> str | None:
    """The HTML a notebook shows for a result (what the terminal shows), or None."""
    return None if html_view is None else html_view(result)
