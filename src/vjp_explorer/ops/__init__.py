"""THE registry: one entry per function of the program language, with all its facts.

The parser, the interpreter, the exact routes (sympy per element, the elementwise route, finite
differences), `vjp functions` and docs/functions.md read it. Adding an elementwise function is
adding one entry (to elementwise.py or binary.py) and its numpy reference in tests/op_references.py.
No torch or sympy is imported here.
"""

from __future__ import annotations

from typing import Any

from . import binary, elementwise, linalg, losses, masks, reductions, shapes, structural
from .spec import OpSpec, Param, resolve, spellings

_ENTRIES = (
    *elementwise.ENTRIES,
    *binary.ENTRIES,
    *structural.ENTRIES,
    *reductions.ENTRIES,
    *shapes.ENTRIES,
    *masks.ENTRIES,
    *linalg.ENTRIES,
    *losses.ENTRIES,
)
REGISTRY: dict[str, OpSpec] = {s.name: s for s in _ENTRIES}
SPELLINGS: dict[str, OpSpec] = {n: s for s in REGISTRY.values() for n in s.names}
# attributes that are not calls: x.T, x.data
ATTRIBUTES = {"T": "t", "data": "detach"}


def lookup(spelling: str) -> OpSpec | None:
    """The entry a spelling names: `exp`, `torch.exp`, `.exp` (a method), `F.gelu`, `torch.special.erf`."""
    return SPELLINGS.get(spelling)


def is_function(name: str) -> bool:
    """Whether a bare name (exp, clip) is a function: such names cannot be variables."""
    return name in SPELLINGS and "." not in name


def function_list() -> str:
    """The names a user can call, for error messages: the bare name, or torch.f where there is none."""
    return ", ".join(sorted(s.names[0] for s in REGISTRY.values() if s.names))


# each name a spelling ends in (inv, vector_norm, mse_loss) -> a real spelling of its entry, the bare one first
_BASES: dict[str, str] = {}
for _s in REGISTRY.values():
    for _n in _s.names:
        _BASES.setdefault(_n.rsplit(".", 1)[-1], _s.names[0])


def by_base(name: str) -> OpSpec | None:
    """The entry one of whose spellings ends in `name` (torch.linalg.inv's for inv), for error hints."""
    return SPELLINGS.get(_BASES[name]) if name in _BASES else None


def near_names(name: str) -> list[str]:
    """Real spellings close to an unknown name (each one exists), for 'Did you mean ...?'."""
    import difflib

    return list(dict.fromkeys(_BASES[b] for b in difflib.get_close_matches(name, list(_BASES), n=3)))


def how_to_write(spec: OpSpec) -> str:
    """How a function may be written, as calls of each of its spellings (for error hints)."""
    forms = [f"x{n}()" if n.startswith(".") else f"{n}(x)" for n in spec.names]
    return f"Write {', '.join(forms[:-1])} or {forms[-1]}." if len(forms) > 1 else f"Write {forms[0]}."


def bound_params(spec: OpSpec, given: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The parameters a call gave, with the defaults torch uses for the others (for the exact rules)."""
    out: dict[str, Any] = {p.name: p.default for p in spec.params}
    out.update(dict(given))
    return out


__all__ = [
    "ATTRIBUTES",
    "REGISTRY",
    "SPELLINGS",
    "OpSpec",
    "Param",
    "bound_params",
    "by_base",
    "function_list",
    "how_to_write",
    "is_function",
    "lookup",
    "near_names",
    "resolve",
    "spellings",
]
