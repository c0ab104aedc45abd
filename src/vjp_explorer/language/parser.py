"""Program text -> our Program, through Python's `ast` and a whitelist.

The text is parsed by `ast.parse` only (never compiled or run); every node is
then checked against the whitelist and rebuilt as our own representation.
Anything not explicitly allowed is an error that points at its span.

Hostile text is refused as early and as cheaply as possible, each step before
the work it protects: its length (before anything), non-ASCII and control
characters, bracket nesting, then a token scan for huge int literals and
operator chains deep enough to overflow CPython's parser; only then ast.parse,
followed by an iterative walk counting nodes and depth, and the whitelist.
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import re
import tokenize
import warnings
from collections.abc import Iterator

from ..errors import LimitError, ProgramSyntaxError, VjpError
from ..limits import DEFAULT_LIMITS, Limits
from ..ops import ATTRIBUTES, OpSpec, Param, by_base, function_list, how_to_write, is_function, lookup, near_names
from . import program as P
from .unicode import first_bad_char, sentence, visible

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
# module names people paste from numpy/functional code: refused with a pointer to the torch name
_OTHER_MODULES = {"np", "numpy", "F", "nn", "math", "jnp", "sp", "scipy"}
_RESERVED = {"torch", "range", "True", "False", "None"}
_WHY_NOT = {
    ast.BitXor: "'^' is bitwise xor in Python; write powers as '**' (x**2)",
    ast.FloorDiv: "'//' (floor division) has no derivative; use '/'",
    ast.BitAnd: "'&' is not supported; use 'and' in conditions",
    ast.BitOr: "'|' is not supported; use 'or' in conditions",
    ast.LShift: "Shifts are not supported",
    ast.RShift: "Shifts are not supported",
}
_NODE_WORDS = {
    ast.Lambda: "Lambdas are not part of the language",
    ast.ListComp: "Comprehensions are not part of the language",
    ast.SetComp: "Comprehensions are not part of the language",
    ast.DictComp: "Comprehensions are not part of the language",
    ast.GeneratorExp: "Generator expressions are not part of the language",
    ast.NamedExpr: "':=' (walrus) is not part of the language; use a separate assignment",
    ast.JoinedStr: "Strings are not part of the language; programs hold numbers, names and calls",
    ast.Subscript: "Indexing (x[...]) is not part of the language",
    ast.Starred: "'*' unpacking is not part of the language",
    ast.Import: "Imports are not part of the language",
    ast.ImportFrom: "Imports are not part of the language",
    ast.FunctionDef: "Defining functions is not part of the language",
    ast.ClassDef: "Classes are not part of the language",
    ast.Await: "'await' is not part of the language",
    ast.Yield: "'yield' is not part of the language",
    ast.IfExp: "'a if c else b' is not supported; use an if statement",
    ast.List: "List literals are not part of programs; give values with --NAME VALUE",
    ast.Dict: "Dict literals are not part of the language",
    ast.Set: "Set literals are not part of the language",
    ast.Slice: "Slices are not part of the language",
    ast.AsyncFunctionDef: "Defining functions is not part of the language",
    ast.Return: "'return' is not part of the language: the last statement is the output",
    ast.Delete: "'del' is not part of the language",
    ast.Global: "'global' is not part of the language",
    ast.Nonlocal: "'nonlocal' is not part of the language",
    ast.With: "'with' is not part of the language",
    ast.AsyncWith: "'with' is not part of the language",
    ast.AsyncFor: "'async for' is not part of the language",
    ast.Try: "'try' is not part of the language",
    ast.Raise: "'raise' is not part of the language",
    ast.Assert: "'assert' is not part of the language",
    ast.Break: "'break' is not part of the language; loops end by their condition or range",
    ast.Continue: "'continue' is not part of the language",
    ast.Match: "'match' is not part of the language; use if statements",
    ast.YieldFrom: "'yield' is not part of the language",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _NODE_WORDS[ast.TryStar] = "'try' is not part of the language"
# the names a bare final expression is assigned to, in order of preference
_OUTPUT_NAMES = ("y", "out", "output", "result")
# CPython refuses decimal int literals over 4,300 digits, and any over 309 digits is
# beyond float range (so beyond every literal limit): refuse them before ast.parse
_MAX_DIGITS = 309
_MAX_DIM = 64  # a dim= value, or the length of a dim=(...) tuple: no tensor here has more dims
_MAX_STRING = 200  # a string parameter: reduction='mean', an einsum equation


def parse_program(source: str, output: str | None = None, limits: Limits = DEFAULT_LIMITS) -> P.Program:
    """Parse program text into a Program, or raise ProgramSyntaxError / LimitError."""
    return _Parser(source, limits).parse(output)


class _Parser:
    def __init__(self, source: str, limits: Limits) -> None:
        if len(source) > limits.program_chars:  # before any other work on the text
            raise LimitError(
                f"The program is {len(source):,} characters long; the limit is "
                f"{limits.program_chars:,} (raise it with --limit program_chars=N)."
            )
        # Python reads a lone '\r' as a line break too; with every break made '\n' the
        # line numbers of ast and of our markers agree
        source = source.replace("\r\n", "\n").replace("\r", "\n")
        self.src = source
        self.limits = limits
        starts = [0]
        for m in re.finditer("\n", source):
            starts.append(m.end())
        self.line_starts = starts

    # ------------------------------------------------------------------ errors
    def err(
        self,
        message: str,
        node: ast.AST | P.Span | None,
        hint: str | None = None,
        cls: type[VjpError] = ProgramSyntaxError,
    ) -> VjpError:
        start, end = self.span(node) if isinstance(node, ast.AST) else (node or (0, len(self.src)))
        return cls(sentence(message), self.src, start, end, hint)

    def span(self, node: ast.AST) -> P.Span:
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        start = self.line_starts[lineno - 1] + col
        end_lineno = getattr(node, "end_lineno", None) or lineno
        end_col = getattr(node, "end_col_offset", None)
        end = self.line_starts[end_lineno - 1] + end_col if end_col is not None else start + 1
        return start, max(end, start + 1)

    # ------------------------------------------------------------------ entry
    def parse(self, output: str | None) -> P.Program:
        src = self.src
        if not src.strip():
            raise ProgramSyntaxError("The program is empty.", src, 0, 1, "Give an expression such as '3*a + 2*b'.")
        bad = first_bad_char(src)
        if bad is not None:
            pos, what = bad
            # the marker is drawn on a copy with control characters made visible, so an
            # escape sequence or a bidi override in the program cannot act on the terminal
            raise ProgramSyntaxError(sentence(f"The program contains {what}"), visible(src), pos, pos + 1)
        self._check_brackets()
        self._check_tokens()
        try:
            with warnings.catch_warnings():
                # CPython warns (on stderr) about '1if x' or '"\d"'; as errors they become
                # SyntaxErrors with a position, reported like any other
                warnings.simplefilter("error", SyntaxWarning)
                warnings.simplefilter("error", DeprecationWarning)
                tree = ast.parse(src, mode="exec")
        except SyntaxError as e:
            raise self._syntax_error(e) from None
        except (RecursionError, MemoryError):
            # CPython's parser ran out of stack; _check_tokens catches the usual causes
            # first, so this is reached only with a raised --limit depth
            raise LimitError(
                f"The program is nested too deeply to parse (the depth limit is {self.limits.depth}); "
                "split it into assignments."
            ) from None
        except ValueError as e:
            raise ProgramSyntaxError(f"The program cannot be parsed: {e}.", src, 0, len(src)) from None
        self._check_size(tree)
        try:
            return self._program(tree, output)
        except RecursionError:
            # only with --limit depth raised far beyond the default: our own walk is recursive
            raise LimitError(
                f"The program is nested too deeply for this tool (depth limit {self.limits.depth}); "
                "split it into assignments."
            ) from None

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
        while stack:
            node, depth, located = stack.pop()
            count += 1
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

    # ------------------------------------------------------------------ statements
    def _program(self, tree: ast.Module, output: str | None) -> P.Program:
        body = self._block(tree.body, top=True)
        if not body:
            raise ProgramSyntaxError("The program has no statements.", self.src, 0, len(self.src))
        nstmts = sum(1 for _ in _iter_stmts(body))
        if nstmts > self.limits.statements:
            raise LimitError(
                f"The program has {nstmts} statements; the limit is {self.limits.statements} (--limit statements=N)."
            )
        for stmt in body[:-1]:
            if isinstance(stmt, P.ExprStmt):
                raise self.err(
                    "This expression's value is thrown away: only the last statement may be a bare expression.",
                    stmt.span,
                    "Assign it to a name (z = ...) or remove it.",
                )
        free, assigned, first_use, loop_vars = self._names(body)
        synthetic = None
        note = None
        last = body[-1]
        if isinstance(last, P.ExprStmt):
            taken = set(free) | set(assigned) | set(loop_vars)
            synthetic = next(n for n in _output_names() if n not in taken)
            body = body[:-1] + (P.Assign(synthetic, last.value, last.span),)
            assigned = assigned + (synthetic,)
            if synthetic != _OUTPUT_NAMES[0] and output is None:
                note = self._output_note(last, synthetic)
        if output is not None:
            if output not in assigned and output not in free:
                known = ", ".join(assigned + free) or "none"
                raise ProgramSyntaxError(
                    f"--output {output!r} is not a variable of the program (it has: {known}).",
                    self.src,
                    0,
                    len(self.src),
                )
            out = output
        else:
            target = _last_target(body[-1])
            if target is None:
                raise self.err(
                    "Cannot tell which variable is the output: the last statement assigns none, or its branches "
                    "assign different names.",
                    body[-1].span,
                    "Name it with --output NAME.",
                )
            out = target
        return P.Program(
            source=self.src,
            body=body,
            free=free,
            assigned=assigned,
            output=out,
            first_use=first_use,
            has_control_flow=any(isinstance(s, P.If | P.While | P.For) for s in _iter_stmts(body)),
            synthetic_output=synthetic is not None,
            loop_vars=loop_vars,
            output_note=note,
        )

    def _output_note(self, last: P.ExprStmt, name: str) -> str:
        """Why a bare final expression is named `name` and not y: the program already uses y."""
        text = " ".join(self.src[last.span[0] : last.span[1]].split())
        shown = text if len(text) <= 40 else text[:37] + "..."
        tried = []
        for n in _output_names():
            if n == name:
                break
            tried.append(repr(n))
        names = tried[0] if len(tried) == 1 else ", ".join(tried[:-1]) + " and " + tried[-1]
        verb = "is already a variable" if len(tried) == 1 else "are already variables"
        return (
            f"the last statement, {shown!r}, is a bare expression: its value is the output, and vjp names it "
            f"{name!r} because {names} {verb} of the program (a bare final expression is named y, else the first "
            f"of out, output, result, y1, y2, ... that is free). Assign it to choose the name: z = {shown}."
        )

    def _names(
        self, body: tuple[P.Stmt, ...]
    ) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, P.Span], tuple[str, ...]]:
        """Free names (inputs), assigned names, first uses and loop variables, in program order."""
        defined: set[str] = set()
        free: list[str] = []
        assigned: list[str] = []
        first_use: dict[str, P.Span] = {}
        loop_vars: list[str] = []

        def visit(stmts: tuple[P.Stmt, ...]) -> None:
            for s in stmts:
                if isinstance(s, P.For):
                    if s.var in defined and s.var not in loop_vars:
                        raise self.err(f"The loop variable {s.var!r} is also a tensor variable.", s.span)
                    loop_vars.append(s.var)
                    defined.add(s.var)
                for e in _stmt_exprs(s):
                    for n in _names_in(e):
                        first_use.setdefault(n.id, n.span)
                        if n.id not in defined and n.id not in free:
                            free.append(n.id)
                if isinstance(s, P.Assign):
                    if s.target in loop_vars:
                        raise self.err(f"{s.target!r} is a loop variable and cannot be assigned.", s.span)
                    defined.add(s.target)
                    if s.target not in assigned:
                        assigned.append(s.target)
                elif isinstance(s, P.If):
                    visit(s.body)
                    visit(s.orelse)
                elif isinstance(s, P.While | P.For):
                    visit(s.body)

        visit(body)
        return tuple(free), tuple(assigned), first_use, tuple(dict.fromkeys(loop_vars))

    def _block(self, stmts: list[ast.stmt], top: bool = False) -> tuple[P.Stmt, ...]:
        out: list[P.Stmt] = []
        for s in stmts:
            st = self._stmt(s)
            if st is not None:
                out.append(st)
        return tuple(out)

    def _stmt(self, s: ast.stmt) -> P.Stmt | None:
        sp = self.span(s)
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                raise self.err("Assign to one plain name (y = ...).", s.targets[0] if s.targets else s)
            target = self._target(s.targets[0])
            return P.Assign(target, self._expr(s.value), sp)
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise self.err("Augmented assignment needs a plain name (y += ...).", s.target)
            op = _BINOPS.get(type(s.op))
            if op is None and not isinstance(s.op, ast.Mod):
                raise self.err(_WHY_NOT.get(type(s.op), "This operator is not supported."), s)
            target = self._target(s.target)
            tspan = self.span(s.target)
            left, right = P.Name(target, tspan), self._expr(s.value)
            value = P.Call("remainder", (left, right), (), sp) if op is None else P.BinOp(op, left, right, sp)
            return P.Assign(target, value, sp, augmented=True)
        if isinstance(s, ast.Expr):
            return P.ExprStmt(self._expr(s.value), sp)
        if isinstance(s, ast.If):
            return P.If(self._expr(s.test), self._block(s.body), self._block(s.orelse), sp)
        if isinstance(s, ast.While):
            if s.orelse:
                raise self.err("'while ... else' is not supported.", s)
            test = self._expr(s.test)
            if _const_truth(test):
                # there is no 'break': a loop whose condition cannot change runs until the limit stops it
                raise self.err(
                    f"This loop's condition is always true, so the loop would run until the iteration "
                    f"limit ({self.limits.iterations:,}) stopped it.",
                    s.test,
                    "Use a condition the body changes, e.g. 'while y.norm() < 1000:', or 'for i in range(N):'.",
                    cls=LimitError,
                )
            return P.While(test, self._block(s.body), sp)
        if isinstance(s, ast.For):
            return self._for(s, sp)
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.AnnAssign):
            raise self.err("Type annotations are not part of the language; write 'y = ...'.", s)
        raise self.err(
            _NODE_WORDS.get(type(s), f"'{type(s).__name__}' statements are not part of the language."),
            s,
            "A program is assignments (y = ...), one final expression, and if/while/for.",
        )

    def _for(self, s: ast.For, sp: P.Span) -> P.For:
        if s.orelse:
            raise self.err("'for ... else' is not supported.", s)
        if not isinstance(s.target, ast.Name):
            raise self.err("The loop variable must be a plain name.", s.target)
        var = self._target(s.target)
        it = s.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and not it.keywords
            and 1 <= len(it.args) <= 3
        ):
            raise self.err("Loops run over range(N) only: 'for i in range(10):'.", it)
        nums = [self._int_literal(a, "range()") for a in it.args]
        start, stop, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) == 3 else 1)
        if step == 0:
            raise self.err("range() step must not be zero.", it)
        count = len(range(start, stop, step))
        if count > self.limits.iterations:
            raise self.err(
                f"This loop would run {count:,} times; the limit is {self.limits.iterations:,} "
                f"iterations in all (--limit iterations=N to raise it).",
                it,
                cls=LimitError,
            )
        return P.For(var, start, stop, step, self._block(s.body), sp)

    def _target(self, node: ast.Name) -> str:
        self._check_name(node)
        if is_function(node.id):
            raise self.err(f"{node.id!r} is a function; choose another variable name.", node)
        return node.id

    def _check_name(self, node: ast.Name) -> None:
        if not _NAME.match(node.id):
            raise self.err(
                f"The name {node.id!r} is not allowed: names start with a letter and hold letters, digits and '_'.",
                node,
            )
        if node.id in _RESERVED:
            raise self.err(f"{node.id!r} is reserved and cannot be used as a variable.", node)

    def _int_literal(self, node: ast.expr, where: str) -> int:
        neg = False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            neg, node = True, node.operand
        if isinstance(node, ast.Constant) and type(node.value) is int:
            v = -node.value if neg else node.value
            if abs(v) > self.limits.literal:
                raise self.err(
                    f"This {where} bound is larger than {self.limits.literal:g} (--limit literal=X).",
                    node,
                    cls=LimitError,
                )
            return v
        raise self.err(f"{where} takes integer literals here, such as range(10) or range(0, 10, 2).", node)

    # ------------------------------------------------------------------ expressions
    def _expr(self, node: ast.expr) -> P.Expr:
        sp = self.span(node)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or v is None:
                raise self.err(
                    f"{v!r} is only allowed as a keyword value such as keepdim=True; "
                    "conditions compare numbers, as in 'if y.sum() > 0:'.",
                    node,
                )
            if v is Ellipsis:
                raise self.err("'...' is not part of the language.", node)
            if isinstance(v, int | float):
                fv = float(v) if not isinstance(v, int) or abs(v) < 10**300 else math.inf
                if not math.isfinite(fv) or abs(fv) > self.limits.literal:
                    raise self.err(
                        f"This number literal is larger than {self.limits.literal:g} (--limit literal=X to raise it).",
                        sp,
                        cls=LimitError,
                    )
                return P.Num(fv, sp, integral=float(fv).is_integer() and isinstance(v, int))
            if isinstance(v, complex):
                raise self.err("Complex numbers are not supported.", node)
            raise self.err(_NODE_WORDS[ast.JoinedStr], node)
        if isinstance(node, ast.Name):
            self._check_name(node)
            if is_function(node.id):
                raise self.err(f"{node.id!r} is a function; call it: {node.id}(x).", node)
            return P.Name(node.id, sp)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # a % b on tensors is torch.remainder
            return P.Call("remainder", (self._expr(node.left), self._expr(node.right)), (), sp)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.err(_WHY_NOT.get(type(node.op), "This operator is not supported."), self._op_span(node))
            out = P.BinOp(op, self._expr(node.left), self._expr(node.right), sp)
            self._check_constant(out)
            return out
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return P.UnaryOp("-", self._expr(node.operand), sp)
            if isinstance(node.op, ast.UAdd):
                return self._expr(node.operand)
            if isinstance(node.op, ast.Not):
                return P.UnaryOp("not", self._expr(node.operand), sp)
            raise self.err("'~' is not supported.", node)
        if isinstance(node, ast.Compare):
            ops = []
            for o in node.ops:
                if type(o) not in _CMPOPS:
                    raise self.err("Only < <= > >= == != compare values.", node)
                ops.append(_CMPOPS[type(o)])
            return P.Compare(tuple(ops), tuple(self._expr(e) for e in [node.left, *node.comparators]), sp)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return P.BoolOp(op, tuple(self._expr(v) for v in node.values), sp)
        if isinstance(node, ast.Call):
            return self._call(node, sp)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, sp)
        if isinstance(node, ast.Tuple):
            raise self.err("Tuples are only allowed as keyword values such as dim=(0, 1).", node)
        raise self.err(_NODE_WORDS.get(type(node), f"'{type(node).__name__}' is not part of the language."), node)

    def _check_constant(self, node: P.BinOp) -> None:
        # constant subexpressions that overflow (a*9**9**9) or have no value (a*(1/0)) are
        # refused before any work; the bound leaves room for products of legal literals
        bound = self.limits.literal * 1e10
        try:
            value = _fold(node)
        except _Undefined as e:
            raise self.err(f"This constant expression {e}.", node.span, "Write the number you mean instead.") from None
        if value is not None and not abs(value) <= bound:
            raise self.err(
                f"This constant expression overflows: its value is beyond {bound:g} "
                f"(the literal limit x 1e10; --limit literal=X).",
                node.span,
                cls=LimitError,
            )

    def _attribute(self, node: ast.Attribute, sp: P.Span) -> P.Expr:
        attr = node.attr
        if attr.startswith("_"):
            raise self.err(f"The attribute {attr!r} is not allowed.", node)
        dotted = _dotted(node)
        if lookup(dotted) is not None:
            raise self.err(f"{dotted} is a function; call it: {dotted}(x).", node)
        if isinstance(node.value, ast.Name) and node.value.id == "torch":
            raise self.unknown_function(f"torch.{attr}", node)
        if _dotted(node.value).startswith("torch."):
            raise self._torch_submodule(node)
        if attr in ATTRIBUTES:
            return P.Call(ATTRIBUTES[attr], (self._expr(node.value),), (), sp)
        if lookup(f".{attr}") is not None:
            raise self.err(f".{attr} is a method; call it: x.{attr}().", node)
        raise self.err(
            f"Unknown attribute {attr!r}. Attributes are .T and .data; methods are: {function_list()}.", node
        )

    def _torch_submodule(self, node: ast.Attribute) -> VjpError:
        # torch.nn.functional.relu, torch.linalg.norm, torch.os...: only torch.<function> exists here
        name = _dotted(node)
        spec = by_base(node.attr)
        hint = how_to_write(spec) if spec else f"The functions are: {function_list()}."
        return self.err(f"{name} is not available: of torch's modules, only the spellings listed are.", node, hint)

    def _op_span(self, node: ast.BinOp) -> P.Span:
        """The span of the operator itself (the '^' in 2*b^2), for the marker."""
        left_end = self.span(node.left)[1]
        right_start = self.span(node.right)[0]
        gap = self.src[left_end:right_start]
        stripped = gap.strip(" \t()")
        if stripped:
            at = left_end + gap.index(stripped)
            return at, at + len(stripped)
        return self.span(node)

    def unknown_function(self, name: str, node: ast.AST) -> VjpError:

        if name.endswith(".backward"):
            return self.err(
                "backward() is not part of the program: vjp calls y.backward(v) for you on the output.",
                node,
                "Give v with --grad (e.g. --grad 0.1,1,0.0001), and the output with --output NAME.",
            )
        base = name.split(".")[-1]
        spec = by_base(base)
        if spec is not None:  # a real function, under a name torch does not give it (x.gelu())
            what = f".{base}() is not a tensor method in torch" if name.startswith(".") else f"torch has no {name}"
            return self.err(f"{what}; {base} is spelled otherwise.", node, how_to_write(spec))
        near = near_names(base)
        hint = f"Did you mean {', '.join(near)}?" if near else None
        return self.err(f"Unknown function {name!r}. The functions are: {function_list()}.", node, hint)

    def _call(self, node: ast.Call, sp: P.Span) -> P.Expr:
        func = node.func
        receiver: ast.expr | None = None
        spec: OpSpec | None
        if isinstance(func, ast.Name):
            spec = lookup(func.id)
            if spec is None:
                raise self.unknown_function(func.id, func)
        elif isinstance(func, ast.Attribute):
            if func.attr.startswith("_"):
                raise self.err(f"The attribute {func.attr!r} is not allowed.", func)
            spec = lookup(_dotted(func))  # torch.exp, F.gelu, torch.special.erf, torch.nn.functional.relu
            if spec is not None and _dotted(func).startswith("F.") and len(node.args) < spec.tensors:
                spec = None  # F.softmax(dim=1): a method of a variable named F
            if spec is not None:
                pass
            elif isinstance(func.value, ast.Name) and func.value.id == "torch":
                raise self.unknown_function(f"torch.{func.attr}", func)
            elif _dotted(func.value).startswith("torch."):
                raise self._torch_submodule(func)
            elif (
                isinstance(func.value, ast.Name)
                and func.value.id in _OTHER_MODULES
                and (lookup(f".{func.attr}") is None or _looks_like_module_call(func.attr, node))
            ):
                known = by_base(func.attr)
                near = near_names(func.attr)
                raise self.err(
                    f"{func.value.id}.{func.attr} is not available: only torch's names are. "
                    + (how_to_write(known) if known else f"The functions are: {function_list()}."),
                    func,
                    None if known or not near else f"Did you mean {', '.join(near)}?",
                )
            else:
                spec = lookup(f".{func.attr}")
                if spec is None:
                    # report the leftmost problem first: in __import__('os').system() that is __import__
                    self._expr(func.value)
                    raise self.unknown_function(f".{func.attr}", func)
                receiver = func.value
        else:
            hint = None
            if isinstance(func, ast.Constant | ast.BinOp | ast.UnaryOp | ast.Call):
                hint = "Multiplication is written with '*': 2*(x + 1), not 2(x + 1)."
            raise self.err("Only named functions can be called.", func, hint)
        name = spec.name
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.err("'*' unpacking is not part of the language.", a)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err("'**' unpacking is not part of the language.", kw.value)
        positional = list(node.args)
        params: dict[str, P.Static] = {}
        for p in spec.leading:  # einsum("ij,j->i", W, x): parameters before the tensors
            if positional and receiver is None:
                params[p.name] = self._static(p, positional.pop(0), name)
        positional = ([receiver] if receiver is not None else []) + positional
        if len(positional) < spec.tensors:
            raise self.err(f"{name}() takes {spec.tensors} tensor argument(s).", node)
        count = len(positional) if spec.variadic else spec.tensors
        if count > self.limits.call_operands:
            raise self.err(
                f"{name}() got {count} tensor operands; the limit is {self.limits.call_operands} "
                "(--limit call_operands=N).",
                node,
                cls=LimitError,
            )
        if name in ("max", "min") and len(positional) == 2 and _literal_number(positional[1]) is not None:
            raise self.err(
                f"torch.{name}(x, {ast.unparse(positional[1])}) reduces along a dimension (values and indices), "
                "which is not supported here.",
                positional[1],
                f"For the {name}imum with a number write clamp_{name}(x, n); for the whole tensor, {name}(x).",
            )
        tensors = tuple(self._expr(a) for a in positional[:count])
        extra = positional[count:]
        for k, (p, a) in enumerate(zip(spec.params, extra, strict=False)):
            if p.kind == "shape" and len(extra) > k + 1:  # reshape(2, 3): the rest of the positionals
                params[p.name] = self._shape(extra[k:], name, p.name, node)
                break
            params[p.name] = self._static(p, a, name)
        else:
            if len(extra) > len(spec.params):
                raise self.err(f"{name}() got too many arguments ({self._signature(spec)}).", extra[len(spec.params)])
        by_name = {p.name: p for p in (*spec.leading, *spec.params)}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err("'**' unpacking is not part of the language.", kw.value)
            if kw.arg not in by_name:
                raise self.err(f"{name}() has no keyword {kw.arg!r} ({self._signature(spec)}).", kw.value)
            if kw.arg in params:
                raise self.err(f"{name}() got {kw.arg!r} twice.", kw.value)
            params[kw.arg] = self._static(by_name[kw.arg], kw.value, name)
        for p in (*spec.leading, *spec.params):
            if p.required and p.name not in params:
                raise self.err(f"{name}() needs {p.name}= ({self._signature(spec)}).", node)
        ordered = tuple((p.name, params[p.name]) for p in (*spec.leading, *spec.params) if p.name in params)
        return P.Call(name, tensors, ordered, sp)

    @staticmethod
    def _signature(spec: OpSpec) -> str:
        tensors = ["x", "y", "z"][: spec.tensors] if spec.tensors <= 3 else [f"x{i}" for i in range(spec.tensors)]
        if spec.variadic:
            tensors.append("...")
        lead = [p.name for p in spec.leading]
        parts = lead + tensors + [p.name if p.required else f"{p.name}=..." for p in spec.params]
        return f"{spec.name}({', '.join(parts)})"

    def _static(self, p: Param, node: ast.expr, fname: str) -> P.Static:
        if p.kind in ("choice", "string"):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                want = " or ".join(repr(c) for c in p.choices) if p.choices else "a string literal"
                raise self.err(f"{fname}(): {p.name} must be {want}.", node)
            text = node.value
            if p.choices and text not in p.choices:
                allowed = ", ".join(repr(c) for c in p.choices)
                raise self.err(f"{fname}(): {p.name} must be one of {allowed}.", node)
            if len(text) > _MAX_STRING or not all(" " <= ch <= "~" for ch in text):
                raise self.err(f"{fname}(): {p.name} must be at most {_MAX_STRING} printable ASCII characters.", node)
            return text
        if p.kind == "shape":
            if isinstance(node, ast.Tuple | ast.List):
                return self._shape(node.elts, fname, p.name, node)
            return self._shape([node], fname, p.name, node)
        if p.kind == "int":
            v = _literal_number(node)
            if v is None or not float(v).is_integer() or abs(v) > self.limits.literal:
                raise self.err(f"{fname}(): {p.name} must be an integer literal.", node)
            return int(v)
        if p.kind == "bool":
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return node.value
            raise self.err(f"{fname}(): {p.name} must be True or False.", node)
        if p.kind == "number" and p.choices:  # norm's p: a number, or one of its strings ('fro'), or inf
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in p.choices
                and node.value != "inf"
            ):
                return node.value
            if "inf" in p.choices and (inf := _infinity(node)) is not None:
                return inf
            v = _literal_number(node)
            if v is None or not math.isfinite(v) or abs(v) > self.limits.literal:
                words = ["a number literal", *(repr(c) for c in p.choices if c != "inf")]
                words += ["float('inf')"] if "inf" in p.choices else []
                raise self.err(f"{fname}(): {p.name} must be {', '.join(words[:-1])} or {words[-1]}.", node)
        if p.kind == "number":
            v = _literal_number(node)
            if v is None or not math.isfinite(v) or abs(v) > self.limits.literal:
                raise self.err(f"{fname}(): {p.name} must be a number literal.", node)
            return v
        if p.kind == "dims" and isinstance(node, ast.Tuple | ast.List):
            if len(node.elts) > _MAX_DIM:
                raise self.err(f"{fname}(): {p.name}= lists more than {_MAX_DIM} dimensions.", node)
            dims = tuple(self._dim(e, fname, p.name) for e in node.elts)
            if not dims:
                raise self.err(f"{fname}(): {p.name}=() is empty.", node)
            return dims
        return self._dim(node, fname, p.name)

    def _shape(self, nodes: list[ast.expr], fname: str, pname: str, at: ast.AST) -> tuple[int, ...]:
        """A shape written as integer literals: (2, 3), [2, 3] or the arguments 2, 3; -1 once, to infer."""
        if len(nodes) > _MAX_DIM:
            raise self.err(f"{fname}(): {pname} has more than {_MAX_DIM} dimensions.", at)
        sizes = []
        for n in nodes:
            v = _literal_number(n)
            if v is None or not float(v).is_integer() or isinstance(n, ast.Constant) and isinstance(n.value, float):
                raise self.err(f"{fname}(): {pname} must be integer literals, e.g. (2, 3).", n)
            if v < -1 or v > self.limits.elements:
                raise self.err(
                    f"{fname}(): the size {int(v)} is out of range (-1, to infer it, or 0 to "
                    f"{self.limits.elements:,}, the elements limit).",
                    n,
                )
            sizes.append(int(v))
        if sizes.count(-1) > 1:
            raise self.err(f"{fname}(): only one size can be -1 (inferred).", at)
        return tuple(sizes)

    def _dim(self, node: ast.expr, fname: str, pname: str) -> int:
        v = _literal_number(node)
        if v is None or not float(v).is_integer() or isinstance(node, ast.Constant) and isinstance(node.value, float):
            raise self.err(f"{fname}(): {pname} must be an integer literal.", node)
        if abs(v) > _MAX_DIM:
            raise self.err(f"{fname}(): {pname}={int(v)} is out of range (at most {_MAX_DIM}).", node)
        return int(v)


def _dotted(node: ast.expr) -> str:
    """`torch.nn.functional` for a chain of plain attribute accesses on a name, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _output_names() -> Iterator[str]:
    """y, out, output, result, then y1, y2, ...: a program may already use the first four."""
    yield from _OUTPUT_NAMES
    k = 1
    while True:
        yield f"y{k}"
        k += 1


def _looks_like_module_call(name: str, node: ast.Call) -> bool:
    """np.log(x) or F.softmax(x, dim=0): a module function given the tensor, not a method (F.sum())."""
    spec = lookup(name)
    if spec is None or spec.tensors != 1 or not node.args:
        return False
    return _literal_number(node.args[0]) is None and not isinstance(node.args[0], ast.Tuple)


def _infinity(node: ast.expr) -> float | None:
    """float('inf'), math.inf, torch.inf, with a sign: the only infinities a parameter may be written as."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign, node = (-1.0 if isinstance(node.op, ast.USub) else 1.0), node.operand
    if _dotted(node) in ("math.inf", "torch.inf"):
        return sign * math.inf
    if (
        isinstance(node, ast.Call)
        and _dotted(node.func) == "float"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in ("inf", "-inf")
    ):
        return sign * (math.inf if node.args[0].value == "inf" else -math.inf)
    return None


def _literal_number(node: ast.expr) -> float | None:
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        try:
            return sign * float(node.value)
        except OverflowError:
            return math.inf
    return None


class _Undefined(Exception):
    """A constant subexpression has no finite real value; the text says why."""


def _fold(node: P.Expr) -> float | None:
    """The value of a constant subexpression, computed safely; None if it is not constant.

    Raises _Undefined for 1/0 and (-8)**0.5; returns inf when the value overflows. The
    operands' sizes are estimated before a power is computed, so 9**9**9 costs nothing.
    """
    if isinstance(node, P.Num):
        return node.value
    if isinstance(node, P.UnaryOp) and node.op == "-":
        v = _fold(node.operand)
        return None if v is None else -v
    if not isinstance(node, P.BinOp) or node.op == "@":
        return None
    a, b = _fold(node.left), _fold(node.right)
    if a is None or b is None:
        return None
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "*":
        return a * b
    if node.op == "/":
        if b == 0:
            raise _Undefined("divides by zero")
        return a / b
    # node.op == "**"
    if a == 0 and b < 0:
        raise _Undefined("divides by zero (0 to a negative power)")
    if a < 0 and not b.is_integer():
        raise _Undefined("has no real value (a negative number to a fractional power)")
    if abs(a) not in (0.0, 1.0):
        size = b * math.log10(abs(a))  # log10 of the result's magnitude
        if size > 308:
            return math.inf
        if size < -308:
            return 0.0  # underflows to zero, harmlessly
    try:
        return float(a**b)
    except OverflowError:
        return math.inf


def _const_truth(node: P.Expr) -> bool | None:
    """Whether a condition made only of constants is true; None if it depends on a variable."""
    if isinstance(node, P.UnaryOp) and node.op == "not":
        inner = _const_truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, P.BoolOp):
        truths = [_const_truth(v) for v in node.values]
        if node.op == "and":
            return False if False in truths else None if None in truths else True
        return True if True in truths else None if None in truths else False
    try:
        if isinstance(node, P.Compare):
            vals = [_fold(o) for o in node.operands]
            if any(v is None for v in vals):
                return None
            pairs = zip(node.ops, vals, vals[1:], strict=False)
            return all(_COMPARE[op](a, b) for op, a, b in pairs)  # type: ignore[arg-type]
        v = _fold(node)
    except _Undefined:
        return None  # the expression check reports it
    return None if v is None else v != 0


_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _iter_stmts(body: tuple[P.Stmt, ...]) -> Iterator[P.Stmt]:
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, P.If):
            stack += list(reversed(s.orelse)) + list(reversed(s.body))
        elif isinstance(s, P.While | P.For):
            stack += list(reversed(s.body))


def _last_target(stmt: P.Stmt) -> str | None:
    if isinstance(stmt, P.Assign):
        return stmt.target
    if isinstance(stmt, P.While | P.For):
        return _last_target(stmt.body[-1]) if stmt.body else None
    if isinstance(stmt, P.If):
        a = _last_target(stmt.body[-1]) if stmt.body else None
        b = _last_target(stmt.orelse[-1]) if stmt.orelse else None
        if stmt.orelse and a != b:
            return None
        return a
    return None


def _names_in(expr: P.Expr) -> list[P.Name]:
    return [n for n in P.walk_exprs(expr) if isinstance(n, P.Name)]


def _stmt_exprs(s: P.Stmt) -> list[P.Expr]:
    if isinstance(s, P.Assign | P.ExprStmt):
        return [s.value]
    if isinstance(s, P.If | P.While):
        return [s.test]
    return []
