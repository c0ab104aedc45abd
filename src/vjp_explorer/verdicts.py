"""A check and its verdict, one type for every door: what `vjp run`, a snippet's events and `vjp check`
compare, and how their verdicts read. Plain data with no numpy, so the snippet door reaches its child
process without importing it (the parent's imports then overlap the child's import of torch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


# One format for an element's label everywhere (every door, the JSON and the text view): `W[0,1]`, no space,
# so that a label reads the same in a narrow table and in a note.
def unravel(shape: tuple[int, ...], k: int) -> tuple[int, ...]:
    """The multi-index of flat (row-major) position k."""
    idx = []
    for n in reversed(shape):
        idx.append(k % n)
        k //= n
    return tuple(reversed(idx))


def index_label(name: str, idx: tuple[int, ...]) -> str:
    """`b[1]`, `W[0,1]`; the bare name for a 0-d tensor (empty index)."""
    return f"{name}[{','.join(map(str, idx))}]" if idx else name


def element_label(name: str, shape: tuple[int, ...], k: int) -> str:
    """The label of flat position k of a tensor of this shape."""
    return index_label(name, unravel(shape, k))


@dataclass(frozen=True)
class Tolerance:
    """|a - b| <= atol + rtol * |b|, per dtype."""

    rtol: float
    atol: float


# the four verdicts of a check: only "disagree" makes exit code 3
VERDICTS = ("agree", "disagree", "skipped", "inconclusive")
# Whether a check's reference is computed without autograd (sympy, finite differences: independent evidence
# about backward) or is a second autograd computation (a consistency check). `jacobian` (the explicit
# Jacobian against sympy, entry by entry) has sympy as its reference: independent, and counted with
# `symbolic` as one route, sympy. Checks of other names are consistency checks unless they say otherwise.
INDEPENDENT = {"symbolic": True, "jacobian": True, "finite_difference": True}
# the independent checks that are one route, for the headline's count
ROUTE = {"symbolic": "sympy", "jacobian": "sympy", "finite_difference": "finite differences"}


@dataclass(frozen=True)
class Check:
    """One agreement check between two routes to the same numbers: one type for every door.

    `status` is one of VERDICTS: agree, disagree, skipped (did not run; `reason` says why) or inconclusive
    (ran, but could not decide within its budget; `reason` says why). `independent` says whether the
    reference uses no autograd (INDEPENDENT by name, unless given)."""

    name: str
    status: str  # agree | disagree | skipped | inconclusive
    compares: str
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    tolerance: Tolerance | str | None = None  # a stated (rtol, atol), or the rule in words
    reason: str | None = None
    undefined: tuple[str, ...] = ()  # elements where the derivative is infinite or undefined (nan) here
    overflow: tuple[str, ...] = ()  # elements where the dtype overflowed (inf) but the exact value is finite
    worst: str | None = None  # element with the largest difference
    # elements where the route checked gave nan or ±inf but the exact value is finite: a wrong gradient
    spurious: tuple[str, ...] = ()
    # elements non-finite in both routes of a check with no exact side (backward vs the autodiff Jacobian)
    nonfinite: tuple[str, ...] = ()
    independent: bool | None = None  # None: from INDEPENDENT by name

    def __post_init__(self) -> None:
        if self.independent is None:
            object.__setattr__(self, "independent", INDEPENDENT.get(self.name, False))


def status_of(checks: Sequence[Check]) -> str:
    """A call's verdict from its checks: disagree if one does, else agree, inconclusive, or skipped."""
    states = {c.status for c in checks}
    return next((s for s in ("disagree", "agree", "inconclusive") if s in states), "skipped")


def _route(c: Check) -> str:
    """The independent route a check stands for: `vjp check`'s J is against finite differences, a program's
    against sympy."""
    if c.name == "jacobian" and "sympy" not in c.compares and "finite differences" in c.compares:
        return "finite differences"
    return ROUTE.get(c.name, c.name)


def headline(checks: Sequence[Check]) -> str:
    """What the checks say, counting only independent routes: "2 independent routes agree (sympy, finite
    differences)"; where none ran, that is said plainly."""
    ran = [c for c in checks if c.independent and c.status in ("agree", "disagree")]
    routes = list(dict.fromkeys(_route(c) for c in ran))
    bad = [c.name for c in checks if c.status == "disagree"]
    unsure = [c.name for c in checks if c.status == "inconclusive"]
    if bad:
        text = f"{', '.join(bad)} disagree{'s' if len(bad) == 1 else ''}"
    elif routes:
        n = len(routes)
        text = f"{n} independent route{'s' if n > 1 else ''} agree{'' if n > 1 else 's'} ({', '.join(routes)})"
    else:
        text = "no independent route ran (sympy and finite differences were skipped): only consistency checks"
    if unsure:
        text += f"; {', '.join(unsure)} inconclusive"
    return text


def script_route(code: Any) -> list[Check]:
    """A call's --code script as a route for the verdict line: one agreeing independent check where it ran,
    reproduced .grad, and every node came from the formula table (it then shares no kernel with autograd's
    backward: docs/code.md), named by its file; else none (a script with a recorded or ATen node is not
    independent, and one that did not reproduce says so under the call, not here)."""
    if not isinstance(code, dict) or code.get("reproduces") is not True or code.get("independent") is not True:
        return []
    said = "independent: .grad vs the gradients the call's backward script computes, every node from the table"
    return [Check(f"the backward script {code.get('file')}", "agree", said, code.get("max_abs_diff"), independent=True)]
