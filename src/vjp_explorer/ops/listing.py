"""The registry as people read it: `vjp functions [WORD]` and docs/functions.md.

Regenerate the reference with `python -m vjp_explorer.ops.listing > docs/functions.md`; a test keeps
the file equal to this output.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from . import REGISTRY, OpSpec

_KINDS = {
    "elementwise": "elementwise",
    "reduction": "reduction",
    "matmul": "matrix product",
    "transpose": "transpose",
    "softmax": "softmax along a dim",
    "detach": "cut from the graph",
    "general": "structural",
    "index": "moves elements",
}


def signature(spec: OpSpec) -> str:
    """exp(x), clamp(x, min=None, max=None), softmax(x, dim)."""
    parts = [p.name for p in spec.leading]
    parts += ["x", "y", "z"][: spec.tensors] if spec.tensors <= 3 else [f"x{i}" for i in range(spec.tensors)]
    if spec.variadic:
        parts.append("...")
    for p in spec.params:
        default = (
            "None" if p.default is None else repr(p.default) if isinstance(p.default, str | bool) else f"{p.default:g}"
        )
        parts.append(p.name if p.required else f"{p.name}={default}")
    shown = spec.names[0] if spec.names else spec.shown  # torch.add, torch.linalg.norm: a name one can call
    return f"{shown}({', '.join(parts)})"


def row(spec: OpSpec) -> dict[str, Any]:
    """One entry as plain data (the JSON of `vjp functions --json`)."""
    return {
        "name": spec.name,
        "signature": signature(spec),
        "spellings": [f"x{n}()" if n.startswith(".") else n for n in spec.names],
        "structure": _KINDS.get(spec.structure, spec.structure)
        + (" (binary)" if spec.elementwise and spec.tensors == 2 else "")
        + (" (ternary)" if spec.elementwise and spec.tensors == 3 else ""),
        "torch": spec.torch,
        "exact": spec.exact_route(),
        "kink": spec.kink,
        "doc": spec.doc,
        "example": spec.example,
    }


def rows(word: str | None = None) -> list[dict[str, Any]]:
    """The entries whose name, spellings, structure or doc hold `word` (all without one)."""
    specs = list(REGISTRY.values())
    if word:
        w = word.lower()
        specs = [s for s in specs if any(w in t.lower() for t in (s.name, s.structure, s.doc, *s.names))]
        if not specs:
            import difflib

            near = difflib.get_close_matches(word, list(REGISTRY), n=3)
            hint = f"Did you mean {', '.join(near)}?" if near else "Run vjp functions to see them all."
            raise UsageError(f"No function matches {word!r}.", hint=hint)
    return [row(s) for s in specs]


def markdown() -> str:
    """docs/functions.md: the language's functions, generated from the registry."""
    out = [
        "# Functions of the program language",
        "",
        "Generated from the op registry (`src/vjp_explorer/ops/`) by "
        "`python -m vjp_explorer.ops.listing > docs/functions.md`; tests/test_ops.py keeps it current.",
        "`vjp functions [WORD]` shows the same in the terminal.",
        "",
        "Each function runs as the real torch function named here. The exact routes (sympy per element, the",
        "elementwise route, matrix calculus) follow the rule shown; finite differences leave out the elements",
        "where a step crosses a kink. Where torch picks a derivative at a kink or a step, the exact rule takes",
        "the same value, so the checks compare with torch's convention and never call it a disagreement.",
        "",
    ]
    for r in rows():
        out += [f"## `{r['signature']}`", "", f"{r['doc']} (example: `{r['example']}`)", ""]
        out.append(f"- spellings: {', '.join(f'`{s}`' for s in r['spellings'])}")
        out.append(f"- structure: {r['structure']}; torch: `{r['torch']}`")
        out.append(f"- exact: `{r['exact']}`")
        if r["kink"]:
            out.append(f"- at kinks: {r['kink']}")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover - the docs generator
    print(markdown(), end="")
