"""The notes catalogue: every explanation a run may add, with its code, its condition and its text.

A reader scans CATALOGUE top to bottom; the result lists the notes in this order.

Each entry's `texts(facts)` gives the note's text, once per place it applies (none where it does not).
The codes are a contract (docs/json.md lists them, a test keeps the list and this catalogue in step).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine.tolerance import ROUNDOFF_UNITS
from ..language import program as P
from ..result import Check, Note, element_label
from ..wording import API, option

# the second weighing after a disagreement: this many units of roundoff (eps of the dtype) of the size of
# the terms autograd adds up. A bound on rounding, not a new rtol: a gradient off by more still disagrees


@dataclass(frozen=True)
class Facts:
    """What the notes read: the run's program, tensors and checks, and what earlier stages found."""

    prog: P.Program
    fwd: Any  # engine.interpreter.Forward
    leaves: dict[str, Any]
    grads: dict[str, Any]
    jacs: dict[str, Any]
    v: Any
    grad_source: str
    none_grads: list[str]
    calls: int
    checks: dict[str, Check]
    dtype: str
    v_ones: bool
    singular: list[str]
    origin: Any
    reweighed: list[str]
    expected_dropped: bool
    surface: str = API  # who asked, for the options a note names (wording.py)
    retain_graph: bool = True  # calls 1 to N-1 passed retain_graph=True

    def option(self, key: str, value: str | None = None) -> str:
        """The option `key` as the front end that asked spells it."""
        return option(self.surface, key, value)


@dataclass(frozen=True)
class NoteKind:
    """One entry of the catalogue."""

    code: str
    when: str  # the condition, in words
    texts: Callable[[Facts], list[str]]


def _output_named(f: Facts) -> list[str]:
    return [f.prog.output_note] if f.prog.output_note else []


def _default_v(f: Facts) -> list[str]:
    out = f.prog.output
    if not f.grad_source.startswith("default"):
        return []
    return [f"{out!r} is a single number, so backward() uses v = 1: the grads are the plain derivatives d{out}/dx."]


def _unused_leaf(f: Facts) -> list[str]:
    out = f.prog.output
    return [
        f"{n!r} does not influence {out!r}: its Jacobian block is zero and its grad is "
        f"zeros here (torch itself leaves {n}.grad as None)."
        for n in f.none_grads
    ]


def _all_ones(f: Facts) -> bool:
    from ..engine.tensors import all_equal_to

    return f.v_ones or all_equal_to(f.v, 1.0)


def _ones_not_derivative(f: Facts) -> list[str]:
    dense = [n for n, j in f.jacs.items() if j.structure == "dense"]
    if not (dense and f.v.numel() > 1 and _all_ones(f)):
        return []
    return [
        f"v = ones with a non-diagonal Jacobian ({', '.join(dense)}): each grad element is a column sum of J, "
        f"sum_i d{f.prog.output}[i]/dx[j], not 'the derivative of each output'."
    ]


def _ones_diagonal(f: Facts) -> list[str]:
    diagonal = f.jacs and all(j.structure in ("diagonal", "zero") for j in f.jacs.values())
    if not (diagonal and f.v.numel() > 1 and _all_ones(f)):
        return []
    return [
        "v = ones and every Jacobian block is diagonal: here (and only then) each grad "
        f"element is the derivative of the matching output element, d{f.prog.output}[k]/dx[k]."
    ]


def _expect_skipped(f: Facts) -> list[str]:
    if not f.expected_dropped:
        return []
    return [
        "the file's [expect] numbers were not checked: options on the command line changed what they were printed for."
    ]


def _accumulated(f: Facts) -> list[str]:
    calls = f.calls
    if calls == 1:
        return []
    return [
        f"backward ran {calls} times without zeroing: .grad accumulates, so each grad is "
        f"{calls} x Jᵀv; every route here reports that same quantity, {calls} x Jᵀv, as .grad holds it. "
        "Zero .grad (x.grad = None) between calls to get Jᵀv alone."
    ]


def _retain_graph(f: Facts) -> list[str]:
    calls = f.calls
    if calls == 1:
        return []
    first = ("call 1" if calls == 2 else f"calls 1 to {calls - 1}") + " passed retain_graph=True"
    saved = saved_for_backward(f.fwd.output.v)
    if not f.retain_graph:  # the run got here, so no call needed what an earlier one freed
        return [
            f"{first.replace('passed', 'ran without')}, and the graph did not need it: none of its operations "
            "saves a tensor for backward (a sum, + and - need none), so nothing was freed between calls."
        ]
    if not saved:
        return [
            f"{first}, which this graph does not need: none of its operations saves a tensor for backward "
            "(a sum, + and - need none), so nothing is freed and torch runs the next call without it too."
        ]
    return [
        f"{first}: each backward frees the values the graph saved for it (here "
        f"{', '.join(saved)}), and the next call needs them. Without it torch raises 'Trying to backward "
        f"through the graph a second time' on call 2 ({f.option('no_retain_graph')} shows it). The last call "
        "frees the graph."
    ]


def saved_for_backward(out: Any) -> list[str]:
    """What the graph behind `out` saves for backward, in words: "exp's result", "mul's inputs" (one per
    kind of operation, in the order backward meets them). Read from the nodes' saved-tensor slots, which
    stay listed after a backward has freed their values."""
    seen: set[int] = set()
    stack, found = [getattr(out, "grad_fn", None)], dict[str, None]()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        slots = [a.removeprefix("_raw_saved_") for a in dir(node) if a.startswith("_raw_saved_")]
        op = re.sub(r"Backward\d*$", "", node.name().rpartition("::")[2]).lower()
        if "result" in slots:
            found[f"{op}'s result"] = None
        if set(slots) - {"result"}:
            found[f"{op}'s inputs"] = None
        stack += [nf for nf, _ in reversed(node.next_functions)]
    return list(found)


def _singularity(f: Facts) -> list[str]:
    if not f.singular:
        return []
    return [
        "at these values a derivative is infinite or undefined (found from the program and the values, "
        "before backward's numbers are read): " + "; ".join(f.singular) + "."
    ]


def _first_nonfinite(f: Facts) -> list[tuple[str, str, float, int]]:
    """(leaf, label, value, count) of the first non-finite element of each grad that has one."""
    import torch

    from ..engine.tensors import all_finite

    found = []
    for n, g in f.grads.items():
        if not all_finite(g):  # (one float pass; the mask only where there is something to find)
            bad = ~torch.isfinite(g)
            k = int(bad.reshape(-1).nonzero()[0])
            found.append((n, element_label(n, tuple(g.shape), k), float(g.reshape(-1)[k]), int(bad.sum())))
    return found


def _listed(f: Facts, field: str) -> set[str]:
    return {e for c in f.checks.values() for e in getattr(c, field)}


def _wrong_nonfinite_grad(f: Facts) -> list[str]:
    spurious = _listed(f, "spurious")
    return [
        f"{label}.grad is {val} ({count} non-finite element(s) in {n}.grad) but the exact "
        "derivative there is finite: backward's value is wrong, not undefined"
        + (f"; {f.origin.text(f.option('dtype', 'float64'))}" if f.origin is not None else ".")
        for n, label, val, count in _first_nonfinite(f)
        if label in spurious
    ]


def _nonfinite_grad(f: Facts) -> list[str]:
    spurious, overflowed, undefined = (_listed(f, k) for k in ("spurious", "overflow", "undefined"))
    texts = []
    for n, label, val, count in _first_nonfinite(f):
        if label in spurious:
            continue
        if label in overflowed:
            why = f"{f.dtype} overflowed: the exact derivative is finite but larger than the dtype's range" + (
                f" (run with {f.option('dtype', 'float64')})" if f.dtype != "float64" else ", the largest torch has"
            )
        elif val != val:  # nan
            why = (
                "nan comes from 0 x inf or 0/0 in the chain rule (e.g. a factor that is 0 times a derivative "
                "that is infinite here, such as sqrt or log at 0), or from a point where the derivative "
                "is undefined"
            )
        elif label in undefined:
            why = "the exact derivative is infinite here too (e.g. log or 1/x at 0, sqrt at 0)"
        else:
            why = "the derivative is infinite at this point (e.g. log or 1/x at 0, sqrt at 0)"
        texts.append(f"{label}.grad is {val} ({count} non-finite element(s) in {n}.grad): {why}.")
    return texts


def _nan_output(f: Facts) -> list[str]:
    import torch

    out = f.prog.output
    y = f.fwd.output.v.detach()
    # (one float pass, in which nan propagates: a bool mask and .any() cost several on CPU)
    if not (y.numel() and math.isnan(float(torch.aminmax(y.reshape(-1))[0]))):
        return []
    nan_y = torch.isnan(y)
    k = int(nan_y.reshape(-1).nonzero()[0])
    return [
        f"{element_label(out, tuple(y.shape), k)} is nan ({int(nan_y.sum())} nan element(s) in {out}): "
        "the forward left the real numbers or met 0/0 there (the log or sqrt of a negative number, a "
        "negative number to a fractional power, 0/0, inf - inf). backward does not look: it multiplies "
        "the local derivatives it computes from the inputs (log's is 1/x, whatever log(x) gave), so the "
        ".grad there may even be finite, the derivative of no real function. Where the exact derivative "
        "is undefined too, the exact checks list such elements as undefined."
    ]


def _rounding_allowance(f: Facts) -> list[str]:
    if not f.reweighed:
        return []
    c = f.checks[f.reweighed[0]]
    which = " and ".join(f"the {n} check" for n in f.reweighed)
    return [
        f"{which} {'agree' if len(f.reweighed) > 1 else 'agrees'} only when weighed at the size "
        f"of the numbers autograd adds up (max |Δ| = {c.max_abs_diff or 0:.3g}, max rel = "
        f"{c.max_rel_diff or 0:.3g}; largest difference at {c.worst}): there the exact "
        "value is a sum or difference of numbers much larger than itself, such as the product rule's "
        "terms in (x + 1e7)*(x - 1e7), 1 - tanh(u)**2 where tanh(u) rounds to 1, or s*(1 - s) for a "
        f"saturated sigmoid, and {f.dtype} rounding of those numbers is that large. Such "
        f"elements are allowed {ROUNDOFF_UNITS} units of roundoff of that size, no more."
        + (f" {f.option('dtype', 'float64')} gives more digits there." if f.dtype != "float64" else "")
    ]


def _float32_disagrees(f: Facts) -> list[str]:
    checks, spurious = f.checks, _listed(f, "spurious")
    failed = [c.name for c in checks.values() if c.status == "disagree" and c.name in ("symbolic", "jacobian")]
    only_wrong_nonfinite = all(not checks[c].worst or checks[c].worst in spurious for c in failed)
    if only_wrong_nonfinite and f.origin is not None and not f.origin.overflow:
        failed = []  # not float32's doing: float64 multiplies 0 by inf too
    if not failed or f.dtype != "float32":
        return []
    return [_float32_hint(failed, f.fwd, f.leaves, f.option("dtype", "float64"))]


def _float32_hint(failed: list[str], fwd: Any, leaves: dict[str, Any], wider: str) -> str:
    """What to try when a float32 run disagrees with the exact routes: float64, and whether the program's
    values come near the edges of float32's range (where squares and products underflow or overflow)."""
    import torch

    tiny, huge = math.inf, 0.0
    values = [*leaves.values(), *(getattr(val, "v", None) for val in fwd.env.values())]
    for t in values:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            a = t.detach().abs().double().reshape(-1)
            a = a[torch.isfinite(a)]
            if a.numel():
                huge = max(huge, float(a.max()))
                if bool((a > 0).any()):
                    tiny = min(tiny, float(a[a > 0].min()))
    text = (
        f"the {' and '.join(failed)} check{'s disagree' if len(failed) > 1 else ' disagrees'} in float32, which "
        "keeps about 7 significant digits "
        "between 1.2e-38 and 3.4e38"
    )
    if tiny < 1e-19 or huge > 1e19:
        edge = f"{tiny:.3g}" if tiny < 1e-19 else f"{huge:.3g}"
        text += (
            f": values of the program here reach {edge}, whose square (in x*x, a norm, a product) is out of "
            "that range, so torch's float32 result loses its digits there"
        )
    return text + f". Run with {wider}: if it agrees there, the difference is float32's, not autograd's."


def _augmented_assignment(f: Facts) -> list[str]:
    prog = f.prog
    aug = [s for s in _walk_statements(prog.body) if isinstance(s, P.Assign) and s.augmented]
    if not aug:
        return []
    names = sorted({s.target for s in aug})
    on_leaf = [n for n in names if n in prog.free]
    text = (
        f"{', '.join(n + ' += ...' for n in names)} (and -=, *=, /=) runs out of place, as "
        f"{names[0]} = {names[0]} + ...: a new tensor. In PyTorch an in-place += on a tensor that "
        "autograd saved for backward raises 'one of the variables needed for gradient computation has "
        "been modified by an inplace operation'"
    )
    if on_leaf:
        text += (
            f"; on the leaf {on_leaf[0]!r} it raises 'a leaf Variable that requires grad is being used in an "
            "in-place operation'"
        )
    return [text + "."]


def _walk_statements(body: tuple[P.Stmt, ...]) -> list[P.Stmt]:
    out: list[P.Stmt] = []
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        out.append(s)
        if isinstance(s, P.If):
            stack += list(reversed(s.orelse)) + list(reversed(s.body))
        elif isinstance(s, P.While | P.For):
            stack += list(reversed(s.body))
    return out


def control_text(kind: str, count: int) -> str:
    """What one loop or if did, in words."""
    if kind == "if":
        return "the if took its " + ("first branch" if count else "else branch")
    return f"the {kind} loop ran {count} time" + ("" if count == 1 else "s")


def _control_flow(f: Facts) -> list[str]:
    texts = []
    for c in f.fwd.control:
        line = f.prog.source.count("\n", 0, c.span[0]) + 1
        texts.append(
            f"line {line}: {control_text(c.kind, c.count)}; the graph (and so J) records only "
            "the path taken at these inputs."
        )
    return texts


CATALOGUE: tuple[NoteKind, ...] = (
    NoteKind("output_named", "the program gave no name to its output, so vjp named it", _output_named),
    NoteKind("default_v", "the output is a single number and no --grad was given: v = 1", _default_v),
    NoteKind("unused_leaf", "a leaf does not reach the output (torch leaves its .grad None)", _unused_leaf),
    NoteKind("ones_not_derivative", "v = ones and some Jacobian block is dense", _ones_not_derivative),
    NoteKind("ones_diagonal", "v = ones and every Jacobian block is diagonal (or zero)", _ones_diagonal),
    NoteKind("expect_skipped", "a file's [expect] was dropped because options changed the run", _expect_skipped),
    NoteKind("accumulated", "backward ran more than once (--backward-calls N)", _accumulated),
    NoteKind("retain_graph", "backward ran more than once: calls 1 to N-1 kept the graph", _retain_graph),
    NoteKind("singularity", "the lint found a derivative infinite or undefined at these values", _singularity),
    NoteKind(
        "wrong_nonfinite_grad", "a grad is nan or inf where the exact derivative is finite", _wrong_nonfinite_grad
    ),
    NoteKind("nonfinite_grad", "a grad is nan or inf, and the exact derivative is not finite either", _nonfinite_grad),
    NoteKind("nan_output", "the output holds a nan", _nan_output),
    NoteKind("rounding_allowance", "a check agreed only when weighed at its terms' size", _rounding_allowance),
    NoteKind(
        "float32_disagrees", "an exact check disagrees in float32 (not because of a wrong nan)", _float32_disagrees
    ),
    NoteKind("augmented_assignment", "the program uses +=, -=, *= or /=", _augmented_assignment),
    NoteKind("control_flow", "a loop or an if ran (one note per loop or if)", _control_flow),
)


def notes_for(f: Facts) -> list[Note]:
    """The notes that apply to this run, in the catalogue's order."""
    return [Note(kind.code, text) for kind in CATALOGUE for text in kind.texts(f)]
