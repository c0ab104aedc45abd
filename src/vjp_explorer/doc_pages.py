"""`vjp docs [TOPIC]`: the Markdown pages of docs/, shipped inside the package (vjp_explorer.docs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


def _root() -> Traversable:
    from importlib import resources

    return resources.files("vjp_explorer.docs")


def topics() -> list[str]:
    """The pages' names: language, json, ... (their file names without .md)."""
    return sorted(e.name.removesuffix(".md") for e in _root().iterdir() if e.name.endswith(".md"))


def pages() -> list[tuple[str, str]]:
    """Each page's name and its title (its first line, without the #)."""
    out = []
    for name in topics():
        first = _root().joinpath(f"{name}.md").read_text(encoding="utf-8").split("\n", 1)[0]
        out.append((name, first.lstrip("# ").strip()))
    return out


def page(topic: str) -> str:
    """The page's Markdown text, or a usage error that lists the pages."""
    name = topic.removesuffix(".md").rsplit("/", 1)[-1]
    names = topics()
    if name not in names:
        import difflib

        near = difflib.get_close_matches(name, names, n=1)
        raise UsageError(
            f"no page {topic!r} in vjp's documentation.",
            hint=(f"Did you mean {near[0]}? " if near else "") + f"The pages: {', '.join(names)}.",
        )
    return _root().joinpath(f"{name}.md").read_text(encoding="utf-8")
