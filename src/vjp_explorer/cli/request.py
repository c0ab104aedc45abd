"""The command line's Request: options, `--NAME VALUE` variables and an expression file, merged.

Each value's origin (errors.Origin) is recorded as it is taken, an option or a key of the file, so that
the library's messages name the place the user wrote it; nothing is reworded afterwards.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Origin, UsageError
from ..request import Origins, Request
from .support import limits_from_options, pairs

# the settings an expression file may give too: the Request's field -> the command line's option
SETTINGS = {
    "grad": "--grad",
    "upstream": "--upstream",
    "output": "--output",
    "dtype": "--dtype",
    "seed": "--seed",
    "backward_calls": "--backward-calls",
    "device": "--device",
}


@dataclass
class CommandLineOrigins(Origins):
    """Origins in the command line's words: an option, or a key of the expression file `path`."""

    path: str | None = None
    options: frozenset[str] = field(default_factory=frozenset)  # the command's own options: --grad, --help, ...

    def missing(self, name: str) -> str:
        how = (
            f"give it with --var {name}=VALUE (--{name} is one of vjp's own options)"
            if f"--{name}" in self.options
            else f"give each with --{name} VALUE (or --var {name}=VALUE, or --const {name}=VALUE for a constant)"
        )
        if self.path is not None:
            how = f"add {name} to [inputs] in {self.path} ([constants] for a constant), or {how}"
        return how


def build_request(ctx: Any, expression: str | None, file: Path | None, **o: Any) -> Request:
    """The Request of `vjp run` / `vjp explain`: the file's fields, then the command line's on top."""
    for problem in ctx.meta.get("vjp_problems", []):
        raise UsageError(problem)
    options = ctx.meta.get("vjp_options", [])
    _check_variable_names(ctx.meta.get("vjp_variables", []), options)
    named = [(name, value, f"--{name}") for name, value in ctx.meta.get("vjp_variables", [])]
    variables = named + [(name, value, f"--var {name}") for name, value in pairs(o["var"], "--var")]
    consts = [(name, value, f"--const {name}") for name, value in pairs(o["const"], "--const")]
    seen: set[str] = set()
    for name, _, _ in variables + consts:
        if name in seen:
            raise UsageError(f"The variable {name!r} is given twice; give each variable once.")
        seen.add(name)
    limits = limits_from_options(o)
    if expression == "-":
        expression = read_stdin(limits.program_chars)
    if file is not None:
        from ..language.files import load_request_fields

        if expression is not None:
            raise UsageError("Give either an expression or --file, not both.")
        req = Request(**load_request_fields(file, limits))
    else:
        if expression is None:
            raise UsageError("Give a program, e.g. vjp run '3*a + 2*b' --a 1,2 --b 3,4 (or --file FILE).")
        req = Request(expression)
    from_file = _file_origins(req) if file is not None else {}
    overridden = bool(variables or consts) or any(o.get(k) is not None for k in SETTINGS if k != "device")
    if overridden and req.expected is not None:
        # the numbers the file's source printed were for the file's own values, not these
        req.expected = None
        req.expected_dropped = True
    given: dict[str, Origin] = {}
    for name, value, where in variables:  # command-line values override the file's
        req.consts.pop(name, None)
        req.values[name] = value
        from_file.pop(f"constants.{name}", None)
        given[f"inputs.{name}"] = Origin(where, where)
    for name, value, where in consts:
        req.values.pop(name, None)
        req.consts[name] = value
        from_file.pop(f"inputs.{name}", None)
        given[f"constants.{name}"] = Origin(where, where)
    _apply_settings(req, o)
    for key, option in SETTINGS.items():
        if o.get(key) is not None:
            given[key] = Origin(option, option)
        elif key not in from_file:  # where it would go: the file names the key, the command line the option
            given[key] = Origin(option, option, req.source, key if req.source else None)
    given["program"] = from_file.pop("program", Origin("expression"))
    req.surface = "cli"
    req.origins = CommandLineOrigins({**from_file, **given}, req.source, frozenset(options))
    req.limits = limits
    return req


def _check_variable_names(variables: list[tuple[str, str]], options: list[str]) -> None:
    for name, _ in variables:
        if not name.isidentifier() or not name.isascii():
            import difflib

            near = difflib.get_close_matches("--" + name, options, n=1) if len(name) <= 40 else []
            shown = name if len(name) <= 40 else name[:37] + "..."
            minus = " A program that starts with a minus sign goes in parentheses." if name.startswith("-") else ""
            raise UsageError(
                f"--{shown} is neither an option nor a valid variable name.{minus}",
                hint=f"Did you mean {near[0]}?" if near else None,
            )


def read_stdin(limit: int) -> str:
    """`vjp run -`: the program from stdin, bounded: one character past the limit is enough for the parser
    to refuse it (`< /dev/zero` ends)."""
    try:
        return sys.stdin.read(limit + 1).rstrip()
    except (AttributeError, OSError, ValueError):  # `vjp run - <&-`: no stdin, or a closed one
        raise UsageError("'-' reads the program from stdin, but stdin is closed or unreadable.") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"'-' reads the program from stdin, which is not UTF-8 text ({e.reason}).") from None


def _file_origins(req: Request) -> dict[str, Origin]:
    """The origin of every value the expression file gave: its key there."""
    path = req.source or "the file"

    def key(name: str, option: str | None = None) -> Origin:
        return Origin(f"{path}: key {name!r}", option, path, name)

    out = {"program": key("program")}
    out |= {k: key(k, option) for k, option in SETTINGS.items() if k != "device" and getattr(req, k) is not None}
    out |= {f"inputs.{n}": key(f"inputs.{n}", f"--{n}") for n in req.values}
    out |= {f"constants.{n}": key(f"constants.{n}", f"--const {n}") for n in req.consts}
    return out


def _apply_settings(req: Request, o: dict[str, Any]) -> None:
    """The command line's settings, over the file's."""
    if o["grad"] is not None:
        req.grad = o["grad"][0]
        req.more_grads = tuple(o["grad"][1:])
        req.grad_label = "given"
    if o.get("upstream") is not None:
        req.upstream = o["upstream"]
        if o["grad"] is None:
            req.grad = None  # the file's grad gives way to the v the loss makes
    for key in ("output", "dtype", "seed", "backward_calls"):
        if o[key] is not None:
            setattr(req, key, o[key])
    req.symbolic = req.symbolic and o["symbolic"]
    req.retain_graph = o["retain_graph"]
    req.device = o["device"]
