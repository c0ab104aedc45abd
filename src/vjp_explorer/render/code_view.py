"""--code: a call's backward script under the call it belongs to, syntax-highlighted, shortened past a screen.

The text shown is read from the file the tool wrote (backward_code/files.py): what the reader sees is what
`python callN.py` runs. The head (imports, helpers, loads) is left out; the statements, one per node, are shown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

SHOWN_LINES = 40  # statements shown of a long script; the rest is in the file


def section(summary: dict[str, Any]) -> list[RenderableType]:
    """The script's verdict line and its statements; or why no script was written."""
    if summary.get("file") is None:
        return [Text(f"backward as code: no script ({summary.get('skipped', 'not captured')})", style="yellow")]
    path = str(summary.get("path") or summary["file"])
    parts: list[RenderableType] = [Text(_verdict(summary, path), style="bold" if summary["reproduces"] else "yellow")]
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return parts
    body = _statements(text)
    if len(body) > SHOWN_LINES:
        body = [*body[:SHOWN_LINES], f"# ... {len(body) - SHOWN_LINES} more lines in {path}"]
    parts.append(Syntax("\n".join(body), "python", theme="ansi_dark", background_color="default", word_wrap=True))
    return [Group(*parts)]


def _verdict(s: dict[str, Any], path: str) -> str:
    said = f"backward as code: {path}, {s['nodes']} statements, one per node autograd ran"
    if s["reproduces"]:
        said += f"; reproduces .grad (max |Δ| = {s['max_abs_diff']:.3g})"
    elif s.get("error"):
        said += f"; did not run ({s['error']})"
    else:
        said += "; does NOT reproduce .grad" + (
            f" (max |Δ| = {s['max_abs_diff']:.3g})" if s.get("max_abs_diff") is not None else ""
        )
    if s["independent"]:
        said += "; every node from the formula table: an independent route"
    else:
        said += f"; not from the table: {', '.join(s['not_in_table'])} (not an independent route)"
    return said


def _statements(text: str) -> list[str]:
    """The lines from the first statement (after `grads = {}`) to the end, trailing blank lines dropped."""
    lines = text.split("\n")
    start = next((k + 1 for k, line in enumerate(lines) if line == "grads = {}"), 0)
    body = [re.sub(r"(\S)\s{2,}# ", r"\1  # ", line) for line in lines[start:]]  # the file's alignment: too wide
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return body
