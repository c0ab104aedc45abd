"""The import graph of src/vjp_explorer has no cycles and no upward arrows, lazy imports included.

Built from the source with ast (module-level and function-level imports, relative ones resolved),
so an import hidden inside a function to dodge a cycle is still counted, and so is an import under
`if TYPE_CHECKING:`: it never runs, but a module that names another's types depends on it all the same, and a
circle hidden there is a circle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "vjp_explorer"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# Each entry: (importer prefix, forbidden prefix). A prefix matches the module or its submodules.
FORBIDDEN = [
    *[(f"{PACKAGE}.language", f"{PACKAGE}.{up}") for up in ("engine", "snippet", "render", "api", "cli")],
    (f"{PACKAGE}.language", "torch"),
    (f"{PACKAGE}.language", "sympy"),
    (f"{PACKAGE}.render", "torch"),
    (f"{PACKAGE}.render", "sympy"),
    (f"{PACKAGE}.result", f"{PACKAGE}.render"),
    *[(f"{PACKAGE}.stages", f"{PACKAGE}.{up}") for up in ("api", "cli", "render", "snippet", "explain")],
    (f"{PACKAGE}.request", f"{PACKAGE}.api"),
    # the child records, the doors read: the confined child never imports the snippet door above it
    (f"{PACKAGE}.confined", f"{PACKAGE}.snippet"),
    # the judge (engine) replays what a door recorded; it never reaches into the confinement
    (f"{PACKAGE}.engine", f"{PACKAGE}.confined"),
    # the plain types below the doors and the renderers
    *[(f"{PACKAGE}.{low}", f"{PACKAGE}.{up}") for low in ("events", "verdicts") for up in ("render", "snippet")],
]

# Cycles allowed for now, each with why; any other cycle fails the test.
ALLOWED_CYCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted(p for p in SRC.rglob("*.py") if "examples/snippets" not in p.as_posix())
    }


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `name` imports, anywhere in its body; `from pkg import mod` counts as pkg.mod only."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & known
            found |= submodules
            # `from . import guards` runs the package's __init__ anyway; only a name defined there is an edge
            if len(submodules) < len(node.names):
                found.add(target)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def internal(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph restricted to our modules; a package's __init__ is not an edge to its children."""
    return {name: {t for t in targets if t in g} for name, targets in g.items()}


def strongly_connected(g: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one module (a cycle), found iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(g[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_sees_lazy_and_relative_imports():
    g = graph()
    assert f"{PACKAGE}.cli" in g[f"{PACKAGE}.entry"]  # imported inside main(), not at module level
    assert f"{PACKAGE}.ops.steps" in g[f"{PACKAGE}.ops.binary"]  # `from . import steps`, inside a function
    assert f"{PACKAGE}.engine.tensors" in g[f"{PACKAGE}.engine.compare"]  # `from . import tensors`
    assert f"{PACKAGE}.language.program" in g[f"{PACKAGE}.language.parser"]
    assert "torch" in g[f"{PACKAGE}.engine.tensors"]


def test_the_graph_counts_type_checking_imports(tmp_path):
    (tmp_path / "m.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vjp_explorer.render import text\n"
    )
    assert f"{PACKAGE}.render.text" in imports_of(f"{PACKAGE}.m", tmp_path / "m.py", {f"{PACKAGE}.render.text"})


def test_a_cycle_and_an_upward_arrow_are_caught():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(g) == [{"a", "b", "c"}]
    assert upward({f"{PACKAGE}.language.files": {f"{PACKAGE}.api", "torch"}}) == [
        f"{PACKAGE}.language.files -> torch",
        f"{PACKAGE}.language.files -> {PACKAGE}.api",
    ]


def test_no_import_cycles():
    cycles = [c for c in strongly_connected(internal(graph())) if frozenset(c) not in ALLOWED_CYCLES]
    assert not cycles, f"import cycles: {[sorted(c) for c in cycles]}"


def upward(g: dict[str, set[str]]) -> list[str]:
    """The arrows that point up: a FORBIDDEN pair, or anything but the entry points importing cli."""
    bad = []
    for name, targets in g.items():
        for target in targets:
            bad += [f"{name} -> {target}" for low, high in FORBIDDEN if within(name, low) and within(target, high)]
            if target == f"{PACKAGE}.cli" and name not in (f"{PACKAGE}.entry", f"{PACKAGE}.__main__"):
                bad.append(f"{name} -> {target}")
    return sorted(bad)


def test_nothing_imports_upward():
    bad = upward(graph())
    assert not bad, "upward imports:\n" + "\n".join(bad)
