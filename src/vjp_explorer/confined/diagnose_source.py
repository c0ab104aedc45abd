"""The snippet's own text, read with `ast` for a diagnosis (confined/diagnose.py): which names a line reads,
where a name got its value, what a line assigns or calls backward on. Nothing here runs the text."""

from __future__ import annotations

import ast
import re


def python_sources(tree: ast.Module, line: int) -> list[int]:
    """The lines where the names read at `line` got values that left torch (`.item()`, `.numpy()`, float()),
    following the snippet's plain assignments back a few steps."""
    found: list[int] = []
    names = names_read(tree, line)
    seen: set[str] = set()
    for _ in range(4):
        nxt: set[str] = set()
        for name in names - seen:
            seen.add(name)
            stmt = last_assignment(tree, name, line)
            if stmt is None:
                continue
            if leaves_torch(stmt):
                found.append(stmt.lineno)
            nxt |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} if hasattr(stmt, "value") else set()
        names = nxt
    return found


def names_read(tree: ast.Module, line: int) -> set[str]:
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt) and stmt.lineno == line and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return set()


def last_assignment(tree: ast.Module, name: str, line: int) -> ast.stmt | None:
    best = None
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.lineno <= line:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for tt in targets for t in ast.walk(tt)):
                if best is None or stmt.lineno >= best.lineno:
                    best = stmt
    return best


def leaves_torch(stmt: ast.stmt) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in ("item", "tolist", "numpy"):
                return True
            if isinstance(f, ast.Name) and f.id in ("float", "int"):
                return True
    return False


def assigned(tree: ast.Module | None, line: int | None) -> str | None:
    """The one name a statement at `line` assigns (`h = torch.tanh(...)` -> h), if it assigns one."""
    if tree is None or line is None:
        return None
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and stmt.lineno == line:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                return targets[0].id
    return None


def written_output(source: str) -> str | None:
    """`y.sum()` of `y.sum().backward()` as the line writes it."""
    try:
        tree = ast.parse(source.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            return ast.unparse(node.func.value)
    return None


def read_grad_of(source: str) -> str | None:
    found = re.search(r"([\w.]+)\.grad\b", source)
    return found.group(1) if found else None
