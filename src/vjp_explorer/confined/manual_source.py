"""A learner's hand-written gradients found in a snippet's text with `ast`: `dX`, `X_grad`, `grad_X`.

Pure reading of the source (no torch, nothing run): the parent reads it to decide whether the child
watches anything at all (a snippet with none runs exactly as before), the child to know which tensors to
watch at each backward call and which statements to run again with true upstream gradients
(confined/manual.py). A name pairs with `X` when `X` is assigned in the snippet too and the name is first
assigned after a backward call; a comment `# grad of X` on the assignment's line names `X` outright.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

_GRAD_OF = re.compile(r"#\s*grad(?:ient)?\s+of\s+([A-Za-z_]\w*)", re.IGNORECASE)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NAMED = re.compile(r"d.|.+_grad$|grad_.")  # the names `_named_of` reads: dX, X_grad, grad_X


@dataclass
class Pair:
    """One hand-written gradient: the variable `name` holds the learner's gradient of the tensor `of`."""

    name: str
    of: str
    line: int  # where `name` is last assigned
    reads: list[str] = field(default_factory=list)  # other hand-written gradients its statements read
    accumulated: bool = False  # made by more than one statement, added to (`+=`), or from two upstream gradients
    # the statements that make it, in order (a loop whole): run again in the child with true upstream grads
    stmts: list[ast.stmt] = field(default_factory=list, repr=False, compare=False)


def pairs(source: str) -> list[Pair]:
    """The hand-written gradients of `source`, in the order of the line each is last assigned on; [] for
    text Python cannot parse (the runner says why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    first_backward = _first_backward(tree)
    if first_backward is None:
        return []
    comments = _grad_comments(source) if _GRAD_OF.search(source) else {}  # tokenize only where one may be
    writes = _writes(tree, first_backward)
    if not comments and not any(_NAMED.match(name) for name in writes):
        return []  # the usual snippet: one walk of its tree, and nothing changes
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found: dict[str, Pair] = {}
    for name, made in writes.items():
        lines = [line for line, _ in made]
        if min(lines) <= first_backward:  # a forward value (`dt = 0.1`), not a gradient made after backward
            continue
        of = next((comments[line] for line in lines if line in comments), None) or _named_of(name, assigned)
        if of is None or of == name or of not in assigned:
            continue
        stmts = list(dict.fromkeys(stmt for _, stmt in made))
        if any(_autograd_made(stmt) for stmt in stmts):
            continue  # `df = torch.autograd.grad(f, x)[0]`, `dW = W.grad`: autograd's gradient, not the learner's
        augmented = any(isinstance(stmt, ast.AugAssign) for stmt in stmts)
        found[name] = Pair(name, of, max(lines), accumulated=len(made) > 1 or augmented, stmts=stmts)
    for pair in found.values():
        read = {n.id for stmt in pair.stmts for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        pair.reads = sorted(other for other in read if other in found and other != pair.name)
        pair.accumulated = pair.accumulated or len(pair.reads) >= 2  # `dx = dy * w + dz` sums two uses at once
    return sorted(found.values(), key=lambda p: p.line)


def _named_of(name: str, assigned: set[str]) -> str | None:
    """`X` for `dX`, `X_grad` and `grad_X` where the snippet assigns `X`."""
    for of in (name[1:] if name.startswith("d") else "", name.removesuffix("_grad"), name.removeprefix("grad_")):
        if of and of != name and of in assigned:
            return of
    return None


def _first_backward(tree: ast.Module) -> int | None:
    """The last line of the first call to `.backward(...)` or `autograd.grad(...)` (inside a training loop too)."""
    lines = [
        node.end_lineno or node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and (node.func.attr == "backward" or (node.func.attr == "grad" and isinstance(node.func.value, ast.Attribute)))
    ]
    return min(lines, default=None)


def _autograd_made(stmt: ast.stmt) -> bool:
    """Whether a statement reads a `.grad` or calls `grad(...)` or `.backward(...)`: autograd computes it."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute) and node.attr in ("grad", "backward"):
            return True
        if isinstance(node, ast.Name) and node.id == "grad" and isinstance(node.ctx, ast.Load):
            return True
    return False


def _writes(tree: ast.Module, backward: int) -> dict[str, list[tuple[int, ast.stmt]]]:
    """Each name bound (or written into, `dC[ix] += ...`) by an assignment: its lines and the statement to run
    again for it: the assignment itself, or the outermost loop around it that starts after the first backward
    call (`for k in ...: dC[ix] += ...` runs as a whole; a training loop does not run again)."""
    writes: dict[str, list[tuple[int, ast.stmt]]] = {}

    def visit(stmts: list[ast.stmt], loop: ast.stmt | None) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a function's own locals are not the snippet's variables
            starts = isinstance(stmt, _LOOPS) and stmt.lineno > backward
            outer = loop if loop is not None else stmt if starts else None
            for name in _targets(stmt):
                writes.setdefault(name, []).append((stmt.lineno, outer or stmt))
            for body in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, body, None)
                if isinstance(inner, list):
                    visit(inner, outer)
            for handler in getattr(stmt, "handlers", []):
                visit(handler.body, outer)

    visit(tree.body, None)
    return writes


def _targets(stmt: ast.stmt) -> list[str]:
    """The variables an assignment statement writes: `x = ...`, `x += ...`, `x[i] = ...`, `x[i] += ...`."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    else:
        return []
    names = []
    for target in targets:
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Name):
            names.append(target.id)
    return names


def _grad_comments(source: str) -> dict[int, str]:
    """Line -> X for each comment `# grad of X`."""
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and (m := _GRAD_OF.search(token.string)):
                found[token.start[0]] = m.group(1)
    except (tokenize.TokenError, SyntaxError):
        return found
    return found
