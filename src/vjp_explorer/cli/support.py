"""What the program and the snippet commands share: NAME=VALUE options, the --limit parsing, output files.

Its own module so that cli/snippet.py need not import the commands (cli/__init__.py, which imports it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError


def pairs(items: list[str] | None, flag: str) -> list[tuple[str, str]]:
    """The NAME=VALUE items of a repeatable option, or a usage error naming the option."""
    out = []
    for item in items or []:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"{flag} takes NAME=VALUE, got {item!r}.")
        out.append((name.strip(), value))
    return out


def limits_from_options(o: dict[str, Any]) -> Any:
    """The limits with --limit and --max-jacobian applied (before any file is read: file_bytes counts)."""
    from ..limits import DEFAULT_LIMITS, limit_names

    overrides = dict(pairs(o["limit"], "--limit"))
    if o["max_jacobian"] is not None:
        if o["max_jacobian"] < 1:
            raise UsageError(f"--max-jacobian must be a positive number of entries, not {o['max_jacobian']}.")
        overrides["jacobian_entries"] = str(o["max_jacobian"])
    if not overrides:
        return DEFAULT_LIMITS
    try:
        return DEFAULT_LIMITS.with_overrides(overrides)
    except KeyError as e:
        raise UsageError(f"--limit: unknown limit {e.args[0]!r}; the limits are: {', '.join(limit_names())}.") from None
    except ValueError as e:
        raise UsageError(f"--limit: {e}.") from None


def is_file(text: Any) -> bool:
    """Whether a path (or a program's text, which is rarely one) names an existing file."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def distinct_files(o: dict[str, Any], read: list[Any]) -> None:
    """Refuse an output file named twice (--svg a --html a: the second would overwrite the first) or one that
    is the file being run (--svg prog.toml would replace the program with its picture)."""
    from ..outfiles import same_file

    given = [(f"--{key}", Path(o[key])) for key in ("svg", "html", "dot", "save") if o.get(key) is not None]
    read = [Path(r) for r in read if r is not None and is_file(r)]
    for k, (option, path) in enumerate(given):
        for other, earlier in given[:k]:
            if same_file(path, earlier):
                raise UsageError(f"{option} {path} is also given to {other}: each file holds one thing; name two.")
        for source in read:
            if same_file(path, Path(source)):
                raise UsageError(f"{option} {path}: that is the file being run; writing there would replace it.")
