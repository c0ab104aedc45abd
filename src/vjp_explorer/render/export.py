"""Save exactly what the terminal shows as SVG or HTML (Rich records the console and exports it)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console, RenderableType

from ..errors import UsageError
from ..outfiles import wrote


def save(renderable: RenderableType, svg: Path | None, html: Path | None, width: int, title: str) -> None:
    """Render once more into a recording console of the terminal's width and write the files asked for."""
    console = Console(record=True, file=io.StringIO(), width=width, color_system="truecolor", highlight=False)
    console.print(renderable)
    for path, kind in ((svg, "svg"), (html, "html")):
        if path is None:
            continue
        text = (
            console.export_svg(title=title, clear=False)
            if kind == "svg"
            else console.export_html(inline_styles=True, clear=False)
        )
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--{kind} {path}: cannot write the file ({e.strerror}).") from None
        wrote(Path(path), f"what the terminal shows, as {kind.upper()}")


def export(shown: RenderableType, paths: tuple[Path | None, Path | None], title: str) -> None:
    """--svg/--html: the same renderable, recorded at the width the terminal got."""
    if paths == (None, None):
        return
    width = min(max(Console(file=io.StringIO()).width, 40), 1000)
    save(shown, paths[0], paths[1], width, title)
