"""Expression files: a documented TOML format -> Request.

Read with the standard library's tomllib after size, type and encoding checks;
every problem names the file, the key and what was expected.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, VjpError
from ..limits import DEFAULT_LIMITS, Limits
from .values import ValueSpec, from_nested, parse_value

KEYS = {
    "title": "a one-line title (string)",
    "description": "what the example shows (string)",
    "source": "where the example comes from (string)",
    "program": "the program (string; a multi-line string for several statements)",
    "inputs": "a table NAME = VALUE of the leaves (requires grad)",
    "constants": "a table NAME = VALUE of constants (no grad)",
    "grad": "v of backward(v): a value, or 'ones'",
    "output": "the output variable (string)",
    "dtype": "'float32' or 'float64'",
    "seed": "an integer seed for rand/randn values",
    "backward_calls": "how many times backward runs without zeroing .grad (integer)",
    "symbolic": "run the sympy check (boolean, default true)",
    "expect": "a table of what the source printed: output, grads.NAME, rtol, atol, loops",
}
EXPECT_KEYS = {"output", "grads", "rtol", "atol", "loops", "note"}


@dataclass(frozen=True)
class Expected:
    """Numbers a source document printed, to be checked against the run."""

    output: Any = None
    grads: dict[str, Any] | None = None
    rtol: float = 1e-4
    atol: float = 1e-6
    loops: list[int] | None = None


@dataclass(frozen=True)
class Example:
    """A bundled expression file."""

    name: str
    path: Path
    title: str


def _err(path: Path | str, message: str, hint: str | None = None) -> FileFormatError:
    return FileFormatError(f"{path}: {message}", hint=hint)


def read_toml(path: Path, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The parsed TOML of an expression file, after size, encoding and depth checks."""
    try:
        if path.is_dir():
            raise _err(path, "is a directory, not an expression file.")
        size = path.stat().st_size
    except FileNotFoundError:
        raise _err(path, "no such file.", "Run 'vjp examples' to list the bundled files.") from None
    except OSError as e:
        raise _err(path, f"cannot be read ({e.strerror}).") from None
    if size > limits.file_bytes:
        raise _err(
            path, f"is {size:,} bytes; expression files are at most {limits.file_bytes:,} bytes (--limit file_bytes=N)."
        )
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise _err(path, f"cannot be read ({e.strerror}).") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte-order mark, as some editors write: harmless
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _err(path, f"is not UTF-8 text (byte {e.start}, line {line}).") from None
    if "\x00" in text:
        raise _err(path, "contains a NUL byte; it is not a text file.")
    _check_depth(path, text, limits.file_depth)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(path, f"is not valid TOML: {e}.") from None
    except RecursionError:
        raise _err(path, "is nested too deeply.") from None
    except ValueError:  # tomllib refuses integers of more than 4300 digits
        raise _err(
            path,
            "holds an integer with thousands of digits; write numbers of a reasonable size "
            "(values must fit in float64 anyway).",
        ) from None
    return data


def _check_depth(path: Path, text: str, limit: int) -> None:
    # tomllib recurses on nested arrays/inline tables and raises RecursionError: refuse first.
    # Brackets inside strings are skipped; a bracket at a line start opens a table header.
    depth = 0
    quote = ""
    i = 0
    n = len(text)
    line_start = True
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
            i += 1
            continue
        if ch == "#":
            j = text.find("\n", i)
            i = n if j == -1 else j
            continue
        if text.startswith('"""', i) or text.startswith("'''", i):
            quote = text[i : i + 3]
            i += 3
            continue
        if ch in "\"'":
            quote = ch
            i += 1
            continue
        if ch in "[{" and not (line_start and ch == "[" and depth == 0):
            depth += 1
            if depth > limit + 34:  # values may nest lists (value_depth 32) inside a table
                line = text.count("\n", 0, i) + 1
                raise _err(path, f"line {line}: arrays/tables are nested too deeply (more than {limit + 34}).")
        elif ch in "]}" and depth:
            depth -= 1
        line_start = ch == "\n" or (line_start and ch in " \t")
        i += 1


def _type_name(v: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(v), type(v).__name__)


def _value(path: Path, key: str, v: Any, limits: Limits, allow_ones: bool = False) -> ValueSpec:
    label = f"{path.name}: {key}"
    try:
        if isinstance(v, str):
            return parse_value(v, label, limits, allow_ones=allow_ones)
        if isinstance(v, bool) or not isinstance(v, int | float | list):
            raise _err(
                path,
                f"key {key!r}: expected a value (a number, an array of numbers or a string such as "
                f"'ones(3)'), got {_type_name(v)}.",
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise _err(path, f"key {key!r}: {v} is not a finite number; inputs must be finite.")
        return from_nested(v, label, limits)
    except VjpError as e:
        if isinstance(e, FileFormatError):
            raise
        if e.source is None and not e.message.startswith(label):
            e.message = f"{label}: {e.message}"
        raise


def load_request(path: Path | str, limits: Limits = DEFAULT_LIMITS) -> Any:  # -> api.Request
    """Read an expression file into a Request (values already parsed)."""
    from ..api import Request

    path = Path(path)
    if not path.exists() and path.parent == Path(".") and (bundled := resolve_example(path.name)):
        path = bundled  # `vjp explain seed_3vector`: a bundled example by name
    data = read_toml(path, limits)
    for key in data:
        if key not in KEYS:
            near = difflib.get_close_matches(key, list(KEYS), n=1)
            raise _err(
                path,
                f"unknown key {key!r}.",
                (f"Did you mean {near[0]!r}? " if near else "") + "Known keys: " + ", ".join(KEYS) + ".",
            )

    def get(key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
        if key not in data:
            if required:
                raise _err(path, f"the key {key!r} is missing: {KEYS[key]}.")
            return None
        v = data[key]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise _err(path, f"key {key!r}: expected {KEYS[key]}, got {_type_name(v)}.")
        return v

    program = get("program", str, required=True)
    inputs = get("inputs", dict) or {}
    constants = get("constants", dict) or {}
    if not inputs:
        raise _err(path, "the table [inputs] is missing or empty: give each leaf as NAME = VALUE.")
    values = {}
    for name, v in inputs.items():
        values[name] = _value(path, f"inputs.{name}", v, limits)
    consts = {}
    for name, v in constants.items():
        if name in values:
            raise _err(path, f"{name!r} is both in [inputs] and [constants].")
        consts[name] = _value(path, f"constants.{name}", v, limits)
    grad = None
    if "grad" in data:
        grad = _value(path, "grad", data["grad"], limits, allow_ones=True)
    dtype = get("dtype", str)
    if dtype is not None and dtype not in ("float32", "float64"):
        raise _err(path, f"key 'dtype': expected 'float32' or 'float64', got {dtype!r}.")
    seed = get("seed", int)
    calls = get("backward_calls", int)
    symbolic = get("symbolic", bool)
    req = Request(
        program=program,
        values=values,  # type: ignore[arg-type]
        consts=consts,  # type: ignore[arg-type]
        grad=grad,
        output=get("output", str),
        dtype=dtype or "float32",
        seed=seed,
        backward_calls=calls if calls is not None else 1,
        symbolic=True if symbolic is None else symbolic,
        title=get("title", str),
        source=str(path),
        grad_label="given in the file",
        description=get("description", str),
        source_note=get("source", str),
        expected=_expected(path, get("expect", dict)),
        limits=limits,
    )
    return req


def _expected(path: Path, table: dict[str, Any] | None) -> Expected | None:
    if table is None:
        return None
    for key in table:
        if key not in EXPECT_KEYS:
            raise _err(path, f"unknown key 'expect.{key}'; known: {', '.join(sorted(EXPECT_KEYS))}.")
    grads = table.get("grads")
    if grads is not None and not isinstance(grads, dict):
        raise _err(path, f"key 'expect.grads': expected a table NAME = numbers, got {_type_name(grads)}.")
    for k in ("rtol", "atol"):
        if k in table and (isinstance(table[k], bool) or not isinstance(table[k], int | float) or table[k] < 0):
            raise _err(path, f"key 'expect.{k}': expected a non-negative number.")

    def numbers(key: str, v: Any) -> None:
        stack = [v]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, bool) or not isinstance(item, int | float):
                raise _err(
                    path, f"key 'expect.{key}': expected numbers (or nested arrays of numbers), got {_type_name(item)}."
                )
            elif not math.isfinite(float(item)):
                raise _err(path, f"key 'expect.{key}': expected finite numbers, got {item}.")

    if "output" in table:
        numbers("output", table["output"])
    for name, v in (grads or {}).items():
        numbers(f"grads.{name}", v)
    loops = table.get("loops")
    if loops is not None and not (isinstance(loops, list) and all(type(x) is int for x in loops)):
        raise _err(path, "key 'expect.loops': expected an array of integers (iterations of each loop).")
    return Expected(
        output=table.get("output"),
        grads=grads,
        rtol=float(table.get("rtol", 1e-4)),
        atol=float(table.get("atol", 1e-6)),
        loops=loops,
    )


def bundled_examples() -> list[Example]:
    """The expression files shipped with the package, sorted by name."""
    from importlib import resources

    root = resources.files("vjp_explorer.examples")
    items = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        path = Path(str(entry))
        try:
            title = str(read_toml(path).get("title", entry.name))
        except VjpError:
            title = "(unreadable)"
        items.append(Example(entry.name.removesuffix(".toml"), path, title))
    return items


def resolve_example(name: str) -> Path | None:
    """A bundled example by name (with or without .toml), for `vjp explain NAME`."""
    for ex in bundled_examples():
        if name in (ex.name, ex.name + ".toml"):
            return ex.path
    return None
