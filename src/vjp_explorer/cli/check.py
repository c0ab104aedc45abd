"""`vjp check MODULE.py:NAME --x VALUE ...`: inputs from the command line, then check.check, then a renderer."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import LimitError, Origin, UsageError
from ..snippet.source import visible


def check_command(
    ctx: Any,
    target: str,
    grad: str | None,
    dtype: str | None,
    json_: bool,
    full: bool,
    debug: bool,
    write: Callable[..., None],
    render: Callable[..., str],
    consts: list[str] | None = None,
) -> int:
    for problem in ctx.meta.get("vjp_problems", []):
        raise UsageError(problem)
    given = dict(ctx.meta.get("vjp_variables", []))
    fixed = _constants(consts or [])
    if both := sorted(set(fixed) & set(given)):
        raise UsageError(f"{', '.join(both)} is given twice, as --NAME and as --const; give it once.")
    given.update(fixed)
    if dtype not in (None, "float32", "float64"):
        raise UsageError(f"--dtype must be float32 or float64, not {visible(dtype)!r}.")
    import io

    from ..trusted import check, load_target

    printed = io.StringIO()  # what the user's module prints: never on stdout, which holds the check (or JSON)
    with _captured(printed):
        obj, label = load_target(target)  # SystemExit there too is its UsageError
    _said(printed, target, write)
    names = _names(obj, label, target, given)
    import torch

    from ..engine.tensors import make_tensor
    from ..language.values import parse_value

    tdtype = torch.float64 if dtype == "float64" else torch.float32
    gen = torch.Generator().manual_seed(0)
    dtype_origin = Origin("--dtype", "--dtype")
    origins = [Origin(f"--{n}", f"--{n}") for n in names]
    try:
        inputs = [
            given[n]
            if n in fixed and isinstance(given[n], (int, float, bool))
            else make_tensor(parse_value(given[n], o), o, tdtype, gen, dtype_origin=dtype_origin)
            for n, o in zip(names, origins, strict=True)
        ]
        v = None
        if grad is not None:
            grad_origin = Origin("--grad", "--grad")
            spec = parse_value(grad, grad_origin, allow_ones=True)
            v = (
                "ones"
                if spec.generator == "ones_like"
                else make_tensor(spec, grad_origin, tdtype, gen, dtype_origin=dtype_origin)
            )
    except LimitError as e:  # vjp check has no --limit: the value must be smaller
        e.message = e.message.replace(" (--limit elements=N)", " (vjp check takes no --limit: check a smaller input)")
        raise
    try:
        with _captured(printed):
            constants = tuple(k for k, n in enumerate(names) if n in fixed)
            result = _exits(lambda: check(obj, *inputs, v=v, label=label, constants=constants), f"checking {label}")
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's forward or backward raised (or torch refused it)
        if debug:
            raise
        first = (str(e).splitlines() or [""])[0]
        raise UsageError(
            f"{label} raised {type(e).__name__} while being checked: {visible(first)}",
            hint="Run it with these inputs in Python to see the traceback (or add --debug).",
        ) from None
    finally:
        _said(printed, target, write)
    from ..render import snippet_view

    if json_:
        parts: list[str] = []
        snippet_view.write_json(result, parts.append)  # result.to_dict(): the check's own document
        write(parts)
    else:
        write(render(snippet_view.render(result, explain=True, full=full)))
        if result.exit_code == 3:
            write("error: the backward is wrong (exit 3); see the diagnosis above.\n", err=True)
    return result.exit_code


def _names(obj: Any, label: str, target: str, given: dict[str, Any]) -> list[str]:
    """The parameters to pass, in order: every one given, a defaulted one left out from the last back;
    UsageError for a name the function does not take or one it needs that was not given."""
    from ..trusted import defaulted, parameters

    try:
        names = parameters(obj)
    except (TypeError, ValueError):
        raise UsageError(f"{label}: cannot read its parameters; is it a function or an autograd.Function?") from None
    optional = defaulted(obj)
    while names and names[-1] in optional and names[-1] not in given:  # left out: its default stands
        names = names[:-1]
    missing = [n for n in names if n not in given]
    unknown = [n for n in given if n not in names and n not in optional]
    if unknown:
        takes = (
            f"its positional parameters are: {', '.join(parameters(obj))}"
            if parameters(obj)
            else "it takes no positional parameters"
        )
        raise UsageError(f"{label} has no parameter {', '.join(visible(n) for n in unknown)}; {takes}.")
    if missing:
        raise UsageError(
            f"Give a value for {', '.join(missing)}: vjp check {visible(target)} "
            + " ".join(f"--{n} VALUE" for n in names)
            + ".",
            hint="A value held fixed, with no gradient asked of it (an exponent, a flag), goes as --const NAME=VALUE: "
            "a number is passed as a Python number.",
        )
    return names


def _exits(run: Callable[[], Any], doing: str) -> Any:
    """run(), where the user's code calling sys.exit() (or raising SystemExit) is a usage error, exit 2: the
    check did not happen, and no exit status of the user's choosing may pass for the check's."""
    try:
        return run()
    except SystemExit as e:
        raise UsageError(
            f"{doing}: the user's code called sys.exit({visible(repr(e.code)) if e.code is not None else ''}), "
            "so nothing was checked.",
            hint="vjp check calls your function and its backward; neither may end the process.",
        ) from None


@contextmanager
def _captured(printed: Any) -> Iterator[None]:
    """What the user's code writes (print, sys.stderr, a warning, descriptor 1) collected in `printed`, to be
    shown on stderr with its control characters made visible: stdout holds the check, or its JSON, alone."""
    import contextlib

    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), _fd1_to_stderr():
        yield


@contextmanager
def _fd1_to_stderr() -> Iterator[None]:
    """What the user's code writes to file descriptor 1 itself (os.write, a C extension) goes to stderr while
    it runs: stdout holds the check, or its JSON, alone."""
    import os
    import sys

    try:
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()  # what is buffered for the real stdout goes there first
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no descriptor 1 or 2 to guard with
        yield
        return
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _constants(items: list[str]) -> dict[str, Any]:
    """--const NAME=VALUE: a Python number (or True, False) where VALUE is one (an exponent n: passed as 3, not
    a tensor), else the value's text, made a tensor that asks no gradient."""
    from .support import pairs

    found: dict[str, Any] = {}
    for name, text in pairs(items, "--const"):
        value = {"True": True, "False": False}.get(text.strip(), _number(text.strip()))
        found[name] = text if value is None else value
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(
                f"--const {visible(name)}={visible(text)}: not a finite number.",
                hint="A constant is a finite number (3, -2, 0.5, 1e-3), True or False, or a tensor's values.",
            )
    return found


def _number(text: str) -> int | float | None:
    """An int or a float written plainly (3, -2, 0.5, 1e-3), else None."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def _said(printed: Any, target: str, write: Callable[..., None]) -> None:
    """What the user's module printed so far, on stderr with its control characters made visible."""
    text = printed.getvalue()
    if text:
        printed.seek(0)
        printed.truncate()
        write(f"{visible(target)} printed (shown here, on stderr; stdout holds the check):\n{visible(text)}", err=True)
