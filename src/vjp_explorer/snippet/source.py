"""A pasted snippet's text -> code to run, plus what the source says it printed.

Handles REPL transcripts (`>>> ` and `... ` lines are code, the other lines are what the session printed)
and trailing comments that show output (`print(a.grad) # tensor([0.3000, ...])`). No torch here.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from ..errors import ProgramSyntaxError

# a comment that reads like printed output rather than prose
_OUTPUT_LIKE = re.compile(r"^\s*(tensor\(|Parameter|[-+]?(\d|\.\d|inf|nan)|\[|\(|True\b|False\b|None\b)")


def visible(text: str) -> str:
    """Text from outside, safe for a terminal (the project's one helper for it, in language/unicode.py)."""
    from ..language.unicode import visible as made_visible

    return made_visible(text)


@dataclass
class Source:
    """The code to run and what the pasted text says each statement printed."""

    original: str
    code: str
    repl: bool
    line_map: list[int]  # line of `code` (0-based) -> line of `original` (1-based)
    claimed: dict[int, list[str]] = field(default_factory=dict)  # code line (1-based) -> claimed output lines
    claimed_from: dict[int, str] = field(default_factory=dict)  # code line -> "transcript" | "comment"

    def original_line(self, code_line: int) -> int:
        """The line of the pasted text that holds code line `code_line` (1-based)."""
        if 1 <= code_line <= len(self.line_map):
            return self.line_map[code_line - 1]
        return code_line


def read_source(text: str, label: str) -> Source:
    """Split a pasted text into code and claimed output."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    repl = any(line.startswith(">>>") for line in lines)
    if not repl:
        return Source(text, text, False, list(range(1, len(lines) + 1)))
    code: list[str] = []
    line_map: list[int] = []
    outputs: dict[int, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            code.append(line[4:])
            line_map.append(number)
        elif line.strip() and code:
            outputs.setdefault(len(code), []).append(line)
    src = Source(text, "\n".join(code) + "\n", True, line_map)
    # output lines belong to the statement that ends just before them
    for after, out in outputs.items():
        src.claimed[after] = out
        src.claimed_from[after] = "transcript"
    return src


def parse(src: Source, label: str, max_chars: int, max_nodes: int) -> ast.Module:
    """The snippet's syntax tree, refused with a pointed message if it is not Python or too large."""
    if len(src.code) > max_chars:
        raise ProgramSyntaxError(
            f"The snippet is {len(src.code):,} characters long; the limit is {max_chars:,}.",
            hint="Raise it with --limit snippet_chars=N.",
        )
    try:
        tree = ast.parse(src.code, filename=label)
    except SyntaxError as e:
        line = src.original_line(e.lineno or 1)
        text = (e.text or "").rstrip("\n")
        col = max(0, (e.offset or 1) - 1)
        raise ProgramSyntaxError(
            f"{label}, line {line}: not valid Python: {e.msg.rstrip('.')}" + ("" if e.msg.endswith("?") else "."),
            source=text,
            start=col,
            label=f"{label}, line {line}",
            hint="A snippet is Python code (a REPL transcript with >>> prompts works too).",
        ) from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise ProgramSyntaxError(f"{label}: the snippet is nested too deeply to read ({type(e).__name__}).") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > max_nodes:
        raise ProgramSyntaxError(
            f"{label}: the snippet has {count:,} syntax nodes; the limit is {max_nodes:,}.",
            hint="Raise it with --limit snippet_nodes=N.",
        )
    _comments_as_output(src, tree)
    return tree


def _comments_as_output(src: Source, tree: ast.Module) -> None:
    """`print(x) # tensor([...])`: a comment after a print or a displayed expression that reads like output."""
    shows: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and node.lineno == node.end_lineno:
            call = node.value
            is_print = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
            if is_print or not isinstance(call, ast.Call) or _displays(call):
                shows.add(node.lineno)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src.code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        body = tok.string.lstrip("#").strip()
        if line in shows and line not in src.claimed and _OUTPUT_LIKE.match(body):
            src.claimed[line] = [body]
            src.claimed_from[line] = "comment"


def _displays(call: ast.Call) -> bool:
    """A bare call whose value a REPL shows (x.grad.zero_() shows the zeroed tensor; y.backward() shows nothing)."""
    return not (isinstance(call.func, ast.Attribute) and call.func.attr in ("backward", "append", "step", "zero_grad"))


def same_output(claimed: list[str], printed: str) -> bool:
    """Whether the source's claimed output matches what ran, ignoring spacing and the `...` of an abridged line."""
    want = " ".join(" ".join(claimed).split())
    got = " ".join(printed.split())
    if want == got:
        return True
    if "..." in want:  # `tensor([3.0000e-01, ...])`: the visible parts must appear in order
        pos = 0
        for part in (p.strip(" ,") for p in want.split("...")):
            found = got.find(part, pos)
            if part and found < 0:
                return False
            pos = found + len(part) if part else pos
        return True
    return False
