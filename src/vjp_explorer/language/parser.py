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
import math
import re
import warnings
from collections.abc import Iterator

from ..errors import LimitError, Origin, ProgramSyntaxError, VjpError
from ..limits import DEFAULT_LIMITS, Limits
from ..ops import is_function
from . import program as P
from .calls import CallParser
from .constructors import ConstructorParser, lift_leaves
from .folding import _Undefined, const_truth, fold
from .indexing import IndexParser
from .scan import TextChecks
from .unicode import first_bad_char, sentence, visible
from .whitelist import BINOPS, CMPOPS, NAME, NODE_WORDS, RESERVED, WHY_NOT, names_the_namespace

# the names a bare final expression is assigned to, in order of preference
_OUTPUT_NAMES = ("y", "out", "output", "result")


_THE_OUTPUT = Origin("output")


def parse_program(
    source: str, output: str | None = None, limits: Limits = DEFAULT_LIMITS, output_origin: Origin = _THE_OUTPUT
) -> P.Program:
    """Parse program text into a Program, or raise ProgramSyntaxError / LimitError.

    `output` names the output variable (None: the last one assigned); `output_origin` says where that
    name came from, for the message when the program has no such variable.
    """
    return _Parser(source, limits).parse(output, output_origin)


class _Parser(TextChecks, CallParser, IndexParser, ConstructorParser):
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
    def parse(self, output: str | None, output_origin: Origin) -> P.Program:
        src = self.src
        if not src.strip():
            raise ProgramSyntaxError("The program is empty.", src, 0, 1, "Give an expression such as '3*a + 2*b'.")
        bad = first_bad_char(src, comments=True)
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
            return self._program(tree, output, output_origin)
        except RecursionError:
            # only with --limit depth raised far beyond the default: our own walk is recursive
            raise LimitError(
                f"The program is nested too deeply for this tool (depth limit {self.limits.depth}); "
                "split it into assignments."
            ) from None

    # ------------------------------------------------------------------ statements
    def _program(self, tree: ast.Module, output: str | None, output_origin: Origin) -> P.Program:
        # names the program assigns are variables even where a function has that name (t, sign); so is t
        self.variables = {"t", *self.stores}
        self.int_names = {
            s.targets[0].id: int(s.value.value)
            for s in tree.body
            if isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Constant)
            and type(s.value.value) is int
            and self.stores.count(s.targets[0].id) == 1
        }
        body, made = lift_leaves(self, self._block(tree.body, top=True))
        if not body:
            raise ProgramSyntaxError("The program has no statements.", self.src, 0, len(self.src))
        nstmts = sum(1 for _ in P.iter_stmts(body))
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
        free += tuple(n for n in made if n not in free)  # a leaf made and never read: its grad is 0
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
                    f"the output {output!r} is not a variable of the program (it has: {known}).", origin=output_origin
                )
            out = output
        else:
            target = _last_target(body[-1])
            if target is None:
                raise self.err(
                    "Cannot tell which variable is the output: the last statement assigns none, or its branches "
                    "assign different names.",
                    body[-1].span,
                    f"Name it with {output_origin.give_text('NAME')}.",
                )
            out = target
        return P.Program(
            source=self.src,
            body=body,
            free=free,
            assigned=assigned,
            output=out,
            first_use=first_use,
            has_control_flow=any(isinstance(s, P.If | P.While | P.For) for s in P.iter_stmts(body)),
            synthetic_output=synthetic is not None,
            loop_vars=loop_vars,
            output_note=note,
            made=made,
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
                for e in P.stmt_exprs(s):
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
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple | ast.List):
                out += self._unpack(s)
                continue
            st = self._stmt(s)
            if st is not None:
                out.append(st)
        return tuple(out)

    def _unpack(self, s: ast.Assign) -> list[P.Stmt]:
        """`a, b = x.chunk(2)`: one assignment per name, each taking its tensor of the tuple."""
        names = s.targets[0].elts  # type: ignore[attr-defined]
        if not all(isinstance(n, ast.Name) for n in names) or not 1 <= len(names) <= self.limits.call_operands:
            raise self.err("Unpack into plain names: a, b = x.chunk(2).", s.targets[0])
        sp = self.span(s)
        # `_` takes a value nobody reads (m, _ = x.max(dim=1)); the first name always runs, so that the
        # unpacking's own check (as many values as names) runs too
        kept = [(k, n) for k, n in enumerate(names) if n.id != "_" or k == 0]  # type: ignore[attr-defined]
        if self._whole_shape(s.value):  # a, b = x.size() (or x.shape): one size each
            x = s.value.value if isinstance(s.value, ast.Attribute) else s.value.func.value  # type: ignore[attr-defined]
            tensor = self._expr(x)
            return [P.Assign(self._unpacked(n), P.Scalar("size", tensor, k, sp, count=len(names)), sp) for k, n in kept]
        return [
            P.Assign(self._unpacked(n), self._take(s.value, k, s.value, sp, unpack=len(names)), sp) for k, n in kept
        ]

    def _unpacked(self, n: ast.Name) -> str:
        """An unpacking's target; `_` (a value nobody reads) keeps its name, which no other statement may assign."""
        return "_" if n.id == "_" else self._target(n)

    def _stmt(self, s: ast.stmt) -> P.Stmt | None:
        sp = self.span(s)
        if isinstance(s, ast.Assign | ast.AugAssign) and isinstance(_first_target(s), ast.Subscript):
            return self._update(s, sp)
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                raise self.err("Assign to one plain name (y = ...).", s.targets[0] if s.targets else s)
            target = self._target(s.targets[0])
            return P.Assign(target, self._expr(s.value), sp)
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise self.err("Augmented assignment needs a plain name (y += ...).", s.target)
            op = BINOPS.get(type(s.op))
            if op is None and not isinstance(s.op, ast.Mod):
                raise self.err(WHY_NOT.get(type(s.op), "This operator is not supported."), s)
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
            if const_truth(test):
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
        if isinstance(s, ast.Pass) or names_the_namespace(s):
            return None
        if isinstance(s, ast.AnnAssign):
            raise self.err("Type annotations are not part of the language; write 'y = ...'.", s)
        raise self.err(
            NODE_WORDS.get(type(s), f"'{type(s).__name__}' statements are not part of the language."),
            s,
            "A program is assignments (y = ...), one final expression, and if/while/for.",
        )

    def _update(self, s: ast.Assign | ast.AugAssign, sp: P.Span) -> P.Assign:
        """`y[0] = a * b` and `y[i] += ...`: y becomes y with those elements replaced."""
        target = _first_target(s)
        assert isinstance(target, ast.Subscript)
        if isinstance(s, ast.Assign) and len(s.targets) != 1 or not isinstance(target.value, ast.Name):
            raise self.err("Assign into an index of a plain name: y[0] = ....", target)
        name = self._target(target.value)
        index = self._subscript(target, self.span(target))
        if not isinstance(index, P.Index):
            raise self.err("A tuple cannot be assigned into.", target)
        value = self._expr(s.value)
        if isinstance(s, ast.AugAssign):
            op = BINOPS.get(type(s.op))
            if op is None and not isinstance(s.op, ast.Mod):
                raise self.err(WHY_NOT.get(type(s.op), "This operator is not supported."), s)
            value = P.Call("remainder", (index, value), (), sp) if op is None else P.BinOp(op, index, value, sp)
        return P.Assign(name, P.Update(index, value, sp), sp, augmented=True)

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
        self._check_name(node)  # a function's name may be a variable too (t = ...): calls stay calls
        return node.id

    def _check_name(self, node: ast.Name) -> None:
        if not NAME.match(node.id):
            raise self.err(
                f"The name {node.id!r} is not allowed: names start with a letter and hold letters, digits and '_'.",
                node,
            )
        if node.id in RESERVED:
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
        # an integer constant expression, which may read names assigned an integer once (n = 5; range(1, n + 1))
        if isinstance(node, ast.BinOp | ast.Name | ast.UnaryOp):
            expr = P.transform(
                self._expr(ast.UnaryOp(ast.USub(), node, **_pos(node)) if neg else node),
                lambda e: (
                    P.Num(float(self.int_names[e.id]), e.span, True)
                    if isinstance(e, P.Name) and e.id in self.int_names
                    else e
                ),
            )
            try:
                value = fold(expr)
            except _Undefined:
                value = None
            if value is not None and math.isfinite(value) and value.is_integer():
                if abs(value) > self.limits.literal:
                    raise self.err(f"This {where} bound is larger than {self.limits.literal:g}.", node, cls=LimitError)
                return int(value)
        raise self.err(
            f"{where} takes integers known before the program runs: literals, or names assigned one "
            "(n = 5; range(1, n + 1)).",
            node,
        )

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
            raise self.err(NODE_WORDS[ast.JoinedStr], node)
        if isinstance(node, ast.Name):
            self._check_name(node)
            if is_function(node.id) and node.id not in self.variables:
                raise self.err(f"{node.id!r} is a function; call it: {node.id}(x).", node)
            return P.Name(node.id, sp)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # a % b on tensors is torch.remainder
            return P.Call("remainder", (self._expr(node.left), self._expr(node.right)), (), sp)
        if isinstance(node, ast.BinOp):
            op = BINOPS.get(type(node.op))
            if op is None:
                raise self.err(WHY_NOT.get(type(node.op), "This operator is not supported."), self._op_span(node))
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
            if isinstance(node.op, ast.Invert):
                return P.UnaryOp("~", self._expr(node.operand), sp)
            raise self.err("This unary operator is not supported.", node)
        if isinstance(node, ast.Compare):
            ops = []
            for o in node.ops:
                if type(o) not in CMPOPS:
                    raise self.err("Only < <= > >= == != compare values.", node)
                ops.append(CMPOPS[type(o)])
            return P.Compare(tuple(ops), tuple(self._expr(e) for e in [node.left, *node.comparators]), sp)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return P.BoolOp(op, tuple(self._expr(v) for v in node.values), sp)
        if isinstance(node, ast.Call):
            return self._call(node, sp)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, sp)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, sp)
        if isinstance(node, ast.Tuple):
            raise self.err("Tuples are only allowed as keyword values such as dim=(0, 1).", node)
        raise self.err(NODE_WORDS.get(type(node), f"'{type(node).__name__}' is not part of the language."), node)

    def _check_constant(self, node: P.BinOp) -> None:
        # constant subexpressions that overflow (a*9**9**9) or have no value (a*(1/0)) are
        # refused before any work; the bound leaves room for products of legal literals
        bound = self.limits.literal * 1e10
        try:
            value = fold(node)
        except _Undefined as e:
            raise self.err(f"This constant expression {e}.", node.span, "Write the number you mean instead.") from None
        if value is not None and not abs(value) <= bound:
            raise self.err(
                f"This constant expression overflows: its value is beyond {bound:g} "
                f"(the literal limit x 1e10; --limit literal=X).",
                node.span,
                cls=LimitError,
            )

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


def _first_target(s: ast.Assign | ast.AugAssign) -> ast.expr | None:
    return s.target if isinstance(s, ast.AugAssign) else (s.targets[0] if s.targets else None)


def _pos(node: ast.AST) -> dict[str, int]:
    return {k: getattr(node, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}


def _output_names() -> Iterator[str]:
    """y, out, output, result, then y1, y2, ...: a program may already use the first four."""
    yield from _OUTPUT_NAMES
    k = 1
    while True:
        yield f"y{k}"
        k += 1


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
