"""What the program and the snippet commands share: NAME=VALUE options and the --limit parsing.

Its own module so that cli/snippet.py need not import the commands (cli/__init__.py, which imports it).
"""

from __future__ import annotations

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
