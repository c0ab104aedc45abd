"""The cheap checks on program text before and right after `ast.parse`: brackets, tokens, tree size.

A mixin of the parser (language/parser.py). Hostile text is refused as early and as cheaply as possible,
each step before the work it protects.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from typing import TYPE_CHECKING

from ..errors import LimitError, ProgramSyntaxError

if TYPE_CHECKING:
    from ..errors import VjpError
    from ..limits import Limits
    from . import program as P

# CPython refuses decimal int literals over 4,300 digits, and any over 309 digits is
# beyond float range (so beyond every literal limit): refuse them before ast.parse
_MAX_DIGITS = 309


class TextChecks:
    """Checks of the program text that protect CPython's parser and our walks."""

    limits: Limits
    src: str
    line_starts: list[int]

    if TYPE_CHECKING:  # given by the parser

        def err(
            self, message: str, node: ast.AST | P.Span | None, hint: str | None = None, cls: type[VjpError] = ...
        ) -> VjpError: ...

    def _check_brackets(self) -> None:
        # before ast.parse: a clearer message than CPython's for unbalanced brackets, and
        # the depth limit on brackets (CPython gives up at 200 with "too many nested parentheses")
        src = self.src
        stack: list[int] = []
        pairs = {")": "(", "]": "[", "}": "{"}
        i, n = 0, len(src)
        while i < n:
            ch = src[i]
            if ch in "([{":
                stack.append(i)
                if len(stack) > self.limits.depth:
                    raise self.err(
                        f"Brackets are nested more than {self.limits.depth} deep "
                        f"(--limit depth=N to raise it); split the expression into assignments.",
                        (i, i + 1),
                        cls=LimitError,
                    )
            elif ch in pairs:
                if not stack or src[stack[-1]] != pairs[ch]:
                    opened = f" (it closes the {src[stack[-1]]!r} here)" if stack else ""
                    raise ProgramSyntaxError(f"Unmatched {ch!r}{opened}.", src, i, i + 1)
                stack.pop()
            elif ch == "#":
                # a comment runs to the end of the line; brackets inside it do not count
                nl = src.find("\n", i)
                i = n if nl == -1 else nl
                continue
            elif ch in "'\"":
                # brackets inside a string do not count either (strings are refused later, with
                # their own message); an unterminated one is left to ast.parse to report
                close = src.find(ch, i + 1)
                nl = src.find("\n", i + 1)
                if close == -1 or (nl != -1 and nl < close):
                    return
                i = close + 1
                continue
            i += 1
        if stack:
            i = stack[-1]
            raise ProgramSyntaxError(f"{src[i]!r} is never closed.", src, i, i + 1)

    def _check_tokens(self) -> None:
        """Before ast.parse: refuse what would make CPython's parser fail or recurse deeply.

        That is an int literal with thousands of digits (CPython raises on int('9'*5000))
        and a chain of operators longer than the depth limit (`-`*3000 + 'x' or `x**x**...`
        overflows its stack). Every count below is a lower bound of the nesting depth the
        syntax tree will have, so nothing the exact check after parsing accepts is refused.
        """
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(self.src).readline))
        except (tokenize.TokenError, SyntaxError):
            return  # malformed: ast.parse will say where
        limit = self.limits.depth
        # per bracket level: [additive ops, multiplicative ops, '**' ops, postfix x.a x(...) x[...], unary ops]
        counts = [[0, 0, 0, 0, 0]]
        what = (
            "'+'/'-' operators",
            "'*'/'/'/'@' operators",
            "'**' operators",
            "attribute accesses, calls or indexes",
            "unary operators ('-', '+', '~', 'not')",
        )
        expect_operand = True  # at the start, after an operator or an opening bracket
        after_dot = False
        for tok in tokens:
            kind, text = tok.type, tok.string
            top = counts[-1]
            bumped: int | None = None
            if kind in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if kind == tokenize.NUMBER:
                digits = text.replace("_", "")
                if digits.isdigit() and len(digits) > _MAX_DIGITS:
                    start = self._offset(tok.start)
                    raise self.err(
                        f"This number literal has {len(digits):,} digits; number literals are limited "
                        f"to {self.limits.literal:g} in magnitude (--limit literal=X).",
                        (start, start + len(text)),
                        cls=LimitError,
                    )
            if kind in (tokenize.NUMBER, tokenize.STRING) or (
                kind == tokenize.NAME and (not keyword.iskeyword(text) or text in ("True", "False", "None"))
            ):
                # an operand ends a run of unary operators and (unless it is an attribute) a '.' chain
                top[4] = 0
                if not after_dot:
                    top[3] = 0
                expect_operand = after_dot = False
                continue
            after_dot = False
            if kind == tokenize.NAME and text == "not":
                top[0] = top[1] = top[2] = 0
                top[4] += 1
                bumped = 4
            elif kind != tokenize.OP:  # NEWLINE, keywords, stray characters: a fresh start
                top[:] = [0, 0, 0, 0, 0]
            elif text in ("(", "[", "{"):
                if not expect_operand and text != "{":  # a call or an index of what came before
                    top[3] += 1
                    bumped = 3
                counts.append([0, 0, 0, 0, 0])
            elif text in (")", "]", "}"):
                if len(counts) > 1:
                    counts.pop()
                expect_operand = False  # a closed bracket is an operand (a call, a group)
                continue
            elif text == "." and not expect_operand:
                top[3] += 1
                bumped, after_dot = 3, True
            elif text in ("+", "-", "~") and expect_operand:
                top[4] += 1
                bumped = 4
            elif text in ("+", "-"):
                top[0] += 1
                top[1] = top[2] = top[3] = 0
                bumped = 0
            elif text in ("*", "/", "//", "%", "@") and not expect_operand:
                top[1] += 1
                top[2] = top[3] = 0
                bumped = 1
            elif text == "**" and not expect_operand:
                top[2] += 1
                top[3] = 0
                bumped = 2
            elif not expect_operand or text not in ("*", "**", "@"):
                top[:] = [0, 0, 0, 0, 0]  # ',', '=', ':', comparisons, ...: a new (sub)expression
            expect_operand = not after_dot
            if bumped is not None and top[bumped] > limit:
                start = self._offset(tok.start)
                raise self.err(
                    f"This expression nests more than {limit} levels deep: a chain of {top[bumped]} "
                    f"{what[bumped]} (--limit depth=N to raise it).",
                    (start, start + len(text)),
                    "Split it into assignments: t = ...; y = t ...",
                    cls=LimitError,
                )

    def _offset(self, pos: tuple[int, int]) -> int:
        """A tokenize (row, col) position as an offset into the source."""
        row, col = pos
        return self.line_starts[min(row, len(self.line_starts)) - 1] + col

    def _syntax_error(self, e: SyntaxError) -> ProgramSyntaxError:
        line = e.lineno or 1
        col = (e.offset or 1) - 1
        start = self.line_starts[min(max(line, 1), len(self.line_starts)) - 1] + max(col, 0)
        msg = (e.msg or "invalid syntax").rstrip(".")
        hint = None
        if "^" in self.src:
            hint = "Powers are written '**' (x**2), not '^'."
        elif "unexpected indent" in msg or "unindent" in msg or "expected an indented block" in msg:
            hint = "Indent the body of if/while/for consistently (spaces, not a mix with tabs)."
        return ProgramSyntaxError(f"The program is not valid Python syntax: {msg}.", self.src, start, start + 1, hint)

    def _check_size(self, tree: ast.AST) -> None:
        # iterative walk: count nodes and measure depth without recursion; each entry
        # carries the nearest node with a position, for the marker (Load, Add... have none)
        stack: list[tuple[ast.AST, int, ast.AST]] = [(tree, 0, tree)]
        count = 0
        self.stores: list[str] = []  # every name assigned, as often as it is (the parser's variables)
        while stack:
            node, depth, located = stack.pop()
            count += 1
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.stores.append(node.id)
            if count > self.limits.nodes:
                raise LimitError(
                    f"The program has more than {self.limits.nodes:,} syntax nodes "
                    f"(--limit nodes=N to raise it); shorten it."
                )
            if depth > self.limits.depth:
                raise self.err(
                    f"The program is nested more than {self.limits.depth} levels deep here "
                    f"(--limit depth=N to raise it).",
                    located if located is not tree else None,
                    "Split it into assignments: t = ...; y = t ...",
                    cls=LimitError,
                )
            for child in ast.iter_child_nodes(node):
                stack.append((child, depth + 1, child if hasattr(child, "lineno") else located))
