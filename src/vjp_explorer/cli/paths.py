"""What the command line reads an argument as: a snippet file, an expression file, a program, a folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import UsageError


def is_snippet_path(text: str | None) -> bool:
    """`vjp run seed.py`, or the name of a bundled snippet (`vjp explain seed000_ex1`)."""
    if text is None or "\n" in text or ";" in text or len(text) > 4096:
        return False
    if text.endswith(".py"):
        return True
    from ..language.files import resolve_example

    found = resolve_example(text)
    return found is not None and found.suffix == ".py"


def looks_like_file(text: str, given: bool = False) -> bool:
    """`vjp explain x.toml`, `vjp explain seed_3vector` (a bundled name), or an existing file, rather than a
    program. An existing file without .toml counts only when no variable is given (`vjp explain x --x 1`
    stays a program even next to a file named x)."""
    if "\n" in text or ";" in text:
        return False
    if text.endswith(".toml"):
        return True
    from ..language.files import resolve_example

    if resolve_example(text) is not None:
        return True
    return not given and is_file(text)


def is_file(text: str) -> bool:
    """An existing path that is not a program: a file, or a directory or device (read_toml says which)."""
    if not text.strip() or len(text) > 4096:  # "" is no path (Path("") is the current directory)
        return False
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # a name too long for the OS, a NUL byte: not a file
        return False


def is_snippet_text(text: str) -> bool:
    """Text read from stdin (`vjp run -`) that is a PyTorch snippet rather than a program: it imports, or
    calls backward or autograd.grad itself (a program never does: vjp calls backward for it)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return bool(re.search(r"^\s*(import|from)\s", text, re.M))  # broken Python: the snippet door says where
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("backward", "grad")
        ):
            return True
    return False


def not_a_program(text: str, command: str = "explain") -> UsageError | None:
    """For `vjp explain WORD` (or `vjp run WORD`, named by `command`) with no variables given: WORD meant as
    a file or an example that does not exist.

    A bare name (`vjp explain seed_scalr`), a path (`vjp explain expressions/nope`) or a file name
    (`notes.txt`) cannot run as a program without values anyway; say that it is neither a file nor a
    bundled example, and which are.
    Anything else (`vjp explain '3*a'`) is left to run as a program, whose error names what is missing.
    """
    import keyword

    from ..language.files import not_found_hint
    from ..ops import is_function

    shown = text if len(text) <= 200 else text[:197] + "..."
    if is_function(text) or keyword.iskeyword(text) or text == "torch":
        return None  # runs as a program, whose error says what the word is ('sin' is a function)
    if text.isidentifier() and text.isascii():
        return UsageError(
            f"{shown!r} is neither an expression file nor the name of a bundled example.",
            hint=f"{not_found_hint(text)} To {command} the program {shown!r} instead, give its value: "
            f"vjp {command} {shown} --{shown} VALUE.",
        )
    if "\n" in text:
        return None
    file_name = re.fullmatch(r"[\w.-]+\.(txt|json|ya?ml|py|md|cfg|ini)", text, re.ASCII) is not None
    if not file_name and not any(sep in text for sep in ("/", "\\", os.sep)):
        return None
    # expressions/nope reads as a path; x/2 and a/b stay programs (whose error asks for the values)
    parts = re.split(r"[/\\]", text)
    path_like = re.fullmatch(r"[\w.~/\\-]+", text, re.ASCII) is not None and len(parts) > 1 and len(parts[0]) >= 3
    if file_name or path_like or text.startswith((".", "~", "/", "\\")) or is_dir(os.path.dirname(text)):
        return UsageError(
            f"{shown}: no such file (nor the name of a bundled example).",
            hint=not_found_hint(Path(text).name),
        )
    return None


def is_dir(text: str) -> bool:
    try:
        return bool(text) and len(text) <= 4096 and Path(text).is_dir()
    except (OSError, ValueError):
        return False
