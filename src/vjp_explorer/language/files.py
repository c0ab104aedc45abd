"""Expression files: a documented TOML format -> the fields of a Request.

Read with the standard library's tomllib after size, type and encoding checks;
every problem names the file, the key and what was expected.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, LimitError, Origin, VjpError
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
        # non-blocking, so that a FIFO is opened (and refused below) instead of waiting forever for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise _err(path, "no such file.", not_found_hint(path.name)) from None
    except IsADirectoryError:
        raise _err(path, "is a directory, not an expression file.") from None
    except (OSError, ValueError) as e:
        raise _err(path, f"cannot be read ({getattr(e, 'strerror', None) or e}).") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _err(path, "is a directory, not an expression file.")
        if not stat.S_ISREG(info.st_mode):
            mode = info.st_mode
            kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            raise _err(path, f"is {kind}, not a regular file; expression files are read only from regular files.")
        if info.st_size > limits.file_bytes:
            raise _err(
                path,
                f"is {info.st_size:,} bytes; expression files are at most {limits.file_bytes:,} bytes "
                "(--limit file_bytes=N).",
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(limits.file_bytes + 1)  # bounded: the file may grow between fstat and read
    except OSError as e:
        raise _err(path, f"cannot be read ({e.strerror}).") from None
    finally:
        os.close(fd)
    if len(raw) > limits.file_bytes:
        raise _err(
            path,
            f"is more than {limits.file_bytes:,} bytes; expression files are at most {limits.file_bytes:,} bytes "
            "(--limit file_bytes=N).",
        )
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte-order mark, as some editors write: harmless
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _err(path, f"is not UTF-8 text (byte {e.start}, line {line}).") from None
    if "\x00" in text:
        raise _err(path, "contains a NUL byte; it is not a text file.")
    _check_brackets(path, text, limits)
    _check_dotted_keys(path, text, limits)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _err(path, f"is not valid TOML: {e}.") from None
    except RecursionError:
        # reached only with file_depth/value_depth raised far beyond their defaults
        raise LimitError(
            f"{path}: is nested too deeply for Python's TOML reader (tomllib gives up after a few hundred "
            f"levels, whatever --limit file_depth={limits.file_depth} and value_depth={limits.value_depth} allow)."
        ) from None
    except ValueError:  # tomllib refuses integers of more than 4300 digits
        raise _err(
            path,
            "holds an integer with thousands of digits; write numbers of a reasonable size "
            "(values must fit in float64 anyway).",
        ) from None
    _check_nesting(path, data, limits)
    return data


# what the bracket scan stops at: outside strings, and inside each kind of string
_OUTSIDE = re.compile(r"[\[\]{}\"'#]")
_IN_STRING = {
    '"': re.compile(r'[\\"\n]'),
    '"""': re.compile(r'[\\"]'),
    "'": re.compile(r"['\n]"),
    "'''": re.compile("'"),
}


def _check_brackets(path: Path, text: str, limits: Limits) -> None:
    """Before tomllib: refuse brackets nested deeper than any file the exact check accepts.

    tomllib recurses on nested arrays and inline tables (and raises RecursionError at a few hundred
    levels), so hostile nesting is refused here, in one pass over the text. Every '[' or '{' of a value
    is one table or array, and an accepted file has at most file_depth of them around a value plus
    value_depth lists inside it: deeper brackets are refused here, anything else is measured exactly
    by _check_nesting on the parsed data. Brackets in strings and comments do not count; a '[' that
    starts a line outside any value opens a table header, which is counted there instead.
    """
    limit = limits.file_depth + limits.value_depth
    depth = 0
    quote = ""
    i = 0
    while True:
        if quote:
            m = _IN_STRING[quote].search(text, i)
            if m is None:
                return  # an unterminated string: tomllib says where
            i = m.start()
            ch = text[i]
            if ch == "\\":  # only basic strings stop at a backslash: an escape, skip what it escapes
                i += 2
            elif ch == "\n":  # a one-line string ends at the line's end (tomllib refuses it)
                quote = ""
                i += 1
            elif len(quote) == 1:
                quote = ""
                i += 1
            elif text.startswith(quote, i):  # a multi-line string may end in up to two more quotes: """a""""
                run = len(text[i : i + 5]) - len(text[i : i + 5].lstrip(quote[0]))
                i += max(3, run)
                quote = ""
            else:
                i += 1
            continue
        m = _OUTSIDE.search(text, i)
        if m is None:
            return
        i = m.start()
        ch = text[i]
        if ch == "#":
            j = text.find("\n", i)
            if j == -1:
                return
            i = j + 1
            continue
        if ch in "\"'":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        if ch in "[{":
            if ch == "[" and depth == 0 and _at_line_start(text, i):
                i += 1  # a table header [name] or [[name]]: its tables are counted by _check_nesting
                continue
            depth += 1
            if depth > limit:
                raise LimitError(
                    f"{path}: tables and arrays are nested too deeply here: more than {limit} levels, beyond "
                    f"what file_depth ({limits.file_depth} tables/arrays around a value) and value_depth "
                    f"({limits.value_depth} lists inside a value) allow together (raise them with --limit "
                    "file_depth=N or --limit value_depth=N).",
                    text,
                    i,
                    i + 1,
                    label=str(path),
                )
        elif depth:
            depth -= 1
        i += 1


# one part of a dotted key, in any of TOML's three spellings: bare, "basic" (with escapes) or 'literal'
_KEY_PART = r"""(?:[\w-]++|"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+')"""


def _check_dotted_keys(path: Path, text: str, limits: Limits) -> None:
    """Before tomllib: refuse a dotted key of more parts than file_depth allows tables (a.b.c is three
    nested tables), whether its parts are bare, quoted or literal, with or without spaces around the dots.
    tomllib takes time quadratic in the parts (a 200 kB key a.a.a... or "a"."a"... takes minutes).
    Possessive, word-anchored matching: one linear pass, also over long runs of text that are not keys."""
    parts = limits.file_depth + limits.value_depth
    m = re.search(r"(?<![\w-])(?:" + _KEY_PART + r"[ \t]*+\.[ \t]*+){" + str(parts) + ",}", text)
    if m is not None:
        raise LimitError(
            f"{path}: a dotted key has more than {parts} parts here; each part is one level of tables, and "
            f"file_depth ({limits.file_depth}) allows no such nesting (raise it with --limit file_depth=N).",
            text,
            m.start(),
            min(m.end(), m.start() + 40),
            label=str(path),
        )


def _at_line_start(text: str, i: int) -> bool:
    """Whether only spaces and tabs come before position i on its line."""
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def _is_value_key(keys: tuple[str | int, ...]) -> bool:
    """Whether the key holds a value (numbers, or a nested list of them) whose lists count as value_depth."""
    if keys == ("grad",) or keys == ("expect", "output"):
        return True
    if len(keys) == 2 and keys[0] in ("inputs", "constants") and isinstance(keys[1], str):
        return True
    return len(keys) == 3 and keys[:2] == ("expect", "grads") and isinstance(keys[2], str)


def _key_path(keys: tuple[str | int, ...]) -> str:
    """inputs.x, expect.grads.a, title[0][1]: how a place in the file is named in messages."""
    text = ""
    for k in keys:
        if isinstance(k, int):
            text += f"[{k}]"
        else:
            part = k if len(k) <= 30 else k[:27] + "..."
            text += ("." if text else "") + part
    return text if len(text) <= 120 else text[:58] + "..." + text[-58:]


def _check_nesting(path: Path, data: dict[str, Any], limits: Limits) -> None:
    """The exact nesting checks, on the parsed file (iteratively: no recursion to overflow).

    file_depth bounds the tables and arrays around the values: a top-level table such as [inputs] is
    level 1, expect.grads level 2, an inline table or an array one level more than what holds it. A
    value's own nested list (an input, a constant, grad, expect.output, expect.grads.NAME) does not
    count there: value_depth bounds it, as for a value given on the command line.
    """
    # (node, its key path, counted tables/arrays around it, its list depth inside a value or None)
    stack: list[tuple[Any, tuple[str | int, ...], int, int | None]] = [(data, (), -1, None)]
    while stack:
        node, keys, outer, in_value = stack.pop()
        if isinstance(node, list) and in_value is not None:
            depth = in_value + 1
            if depth > limits.value_depth:
                while keys and isinstance(keys[-1], int):  # name the value, not the element: inputs.x
                    keys = keys[:-1]
                raise LimitError(
                    f"{path}: key {_key_path(keys)!r}: lists are nested more than {limits.value_depth} deep "
                    "(value_depth; raise it with --limit value_depth=N)."
                )
            items: list[tuple[Any, tuple[str | int, ...], int, int | None]] = [
                (v, (*keys, k), outer, depth) for k, v in enumerate(node) if isinstance(v, list | dict)
            ]
        elif isinstance(node, list | dict):
            level = outer + 1  # the document itself is level 0
            if level > limits.file_depth:
                raise LimitError(
                    f"{path}: key {_key_path(keys)!r}: tables and arrays are nested more than "
                    f"{limits.file_depth} deep here (file_depth; raise it with --limit file_depth=N)."
                )
            pairs = node.items() if isinstance(node, dict) else enumerate(node)
            items = [
                (v, (*keys, k), level, 0 if isinstance(v, list) and _is_value_key((*keys, k)) else None)
                for k, v in pairs
                if isinstance(v, list | dict)
            ]
        else:
            continue
        stack.extend(reversed(items))  # depth first, in document order: the first offending key is named


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
    origin = Origin(f"{path}: key {key!r}", path=str(path), key=key)
    if isinstance(v, str):
        return parse_value(v, origin, limits, allow_ones=allow_ones)
    if isinstance(v, bool) or not isinstance(v, int | float | list):
        raise _err(
            path,
            f"key {key!r}: expected a value (a number, an array of numbers or a string such as "
            f"'ones(3)'), got {_type_name(v)}.",
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise _err(path, f"key {key!r}: {v} is not a finite number; inputs must be finite.")
    return from_nested(v, origin, limits)


def load_request_fields(path: Path | str, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Read an expression file into the fields of an api.Request (values already parsed).

    A dict, not the Request itself, so that the language does not import the api above it.
    """
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
    if seed is not None and not 0 <= seed < 2**63:  # the bounds explore() checks for --seed
        raise _err(path, f"key 'seed': expected an integer from 0 to 2**63 - 1, got {seed}.")
    calls = get("backward_calls", int)
    if calls is not None and not 1 <= calls <= 100:  # the bounds explore() checks for --backward-calls
        raise _err(path, f"key 'backward_calls': expected an integer from 1 to 100, got {calls}.")
    symbolic = get("symbolic", bool)
    return {
        "program": program,
        "values": values,
        "consts": consts,
        "grad": grad,
        "output": get("output", str),
        "dtype": dtype or "float32",
        "seed": seed,
        "backward_calls": calls if calls is not None else 1,
        "symbolic": True if symbolic is None else symbolic,
        "title": get("title", str),
        "source": str(path),
        "grad_label": "given in the file",
        "description": get("description", str),
        "source_note": get("source", str),
        "expected": _expected(path, get("expect", dict)),
        "limits": limits,
    }


def _shown(v: Any) -> str:
    """A value from the file as a message quotes it: an integer of hundreds of digits is cut short."""
    text = str(v) if isinstance(v, int | float) else _type_name(v)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"


def _expected(path: Path, table: dict[str, Any] | None) -> Expected | None:
    if table is None:
        return None
    for key in table:
        if key not in EXPECT_KEYS:
            raise _err(path, f"unknown key 'expect.{key}'; known: {', '.join(sorted(EXPECT_KEYS))}.")
    grads = table.get("grads")
    if grads is not None and not isinstance(grads, dict):
        raise _err(path, f"key 'expect.grads': expected a table NAME = numbers, got {_type_name(grads)}.")
    for k, top in (("rtol", 1.0), ("atol", math.inf)):
        v = table.get(k, 0.0)
        # nan compares false with everything: a check under rtol = nan would agree whatever the numbers
        if isinstance(v, bool) or not isinstance(v, int | float) or not (0 <= v <= top and math.isfinite(v)):
            shown = "a number from 0 to 1" if k == "rtol" else "a finite number, 0 or more"
            raise _err(path, f"key 'expect.{k}': expected {shown}, got {_shown(v)}.")

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
            elif not (isinstance(item, float) or abs(item) <= 2**1023) or not math.isfinite(item):
                raise _err(path, f"key 'expect.{key}': expected finite numbers, got {_shown(item)}.")

    if "output" in table:
        numbers("output", table["output"])
    for name, v in (grads or {}).items():
        numbers(f"grads.{name}", v)
    loops = table.get("loops")
    # counts are compared as float64 numbers: past 2**53 they would not even be told apart
    bad = [x for x in loops if not (type(x) is int and 0 <= x <= 2**53)] if isinstance(loops, list) else [loops]
    if loops is not None and bad:
        raise _err(
            path,
            "key 'expect.loops': expected an array of integers from 0 to 2**53 (iterations of each loop), "
            f"got {_shown(bad[0])}.",
        )
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
    for entry in sorted(root.joinpath("snippets").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            items.append(Example(entry.name.removesuffix(".py"), Path(str(entry)), _snippet_title(entry.name)))
    return items


def _snippet_title(name: str) -> str:
    return "snippet: " + SNIPPET_TITLES.get(name, "PyTorch code")


# what each bundled snippet (the seeds' code blocks, in snippets/) shows
SNIPPET_TITLES = {
    "seed000_ex1.py": "y.backward([0.1, 1.0, 0.0001]) on three 3-vector leaves",
    "seed000_ex2.py": "a scalar output: backward() with the default v = 1",
    "seed000_ex3_empty.py": "torch.empty(..., pin_memory=True): raises without an accelerator",
    "seed000_ex4.py": "two backward calls: gradients accumulate (6, 8, 2)",
    "seed000_variable.py": "Variable, one-hot v per call with zeroing in between",
    "seed002_repl.py": "a REPL transcript: x.pow(2), .sum() then backward(), weighted rows",
    "seed003_loop.py": "the doubling while loop with v = [0.1, 1.0, 0.0001]",
    "seed003_official.py": "the official x + 2 -> y*y*3 -> mean example, 4.5 everywhere",
}


def example_names() -> list[str]:
    """The names of the bundled expression files (without reading them), sorted."""
    from importlib import resources

    root = resources.files("vjp_explorer.examples")
    return sorted(e.name.removesuffix(".toml") for e in root.iterdir() if e.name.endswith(".toml"))


def not_found_hint(name: str) -> str:
    """What to say about a file or example name that is not there: the closest bundled names, or all."""
    names = example_names()
    stem = name.removesuffix(".toml")
    near = difflib.get_close_matches(stem, names, n=3, cutoff=0.6)
    if near:
        quoted = [repr(n) for n in near]
        which = (
            f"the bundled example {quoted[0]}"
            if len(near) == 1
            else f"one of the bundled examples {', '.join(quoted[:-1])} or {quoted[-1]}"
        )
        return f"Did you mean {which}? ('vjp examples' lists all {len(names)} with their titles.)"
    return f"The bundled examples are: {', '.join(names)} ('vjp examples' shows their titles)."


def resolve_example(name: str) -> Path | None:
    """A bundled example by name (with or without .toml), for `vjp explain NAME` (no file is read)."""
    from importlib import resources

    for entry in resources.files("vjp_explorer.examples").iterdir():
        if entry.name.endswith(".toml") and name in (entry.name, entry.name.removesuffix(".toml")):
            return Path(str(entry))
    for entry in resources.files("vjp_explorer.examples").joinpath("snippets").iterdir():
        if entry.name.endswith(".py") and name in (entry.name, entry.name.removesuffix(".py")):
            return Path(str(entry))  # a bundled snippet
    return None
