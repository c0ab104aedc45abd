"""Why a snippet failed, in its own names and lines: when to look (`needs_diagnosis`), the second confined run
that looks (`find`), and the facts it sends worded as a Diagnosis (docs/why.md).

The first run carries no instrument, so a snippet that does not fail pays nothing; one that raised one of
autograd's famous errors, got a nan or inf gradient, or read a `.grad` as None is run once more, seeded the
same, with confined/diagnose.py's instruments on; its output is discarded. The child's facts are untrusted
text: each field is checked here, each string made safe for a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..confined.words import NO_GRADIENT
from .fixes import CONVERSIONS, fix_for
from .result import Diagnosis, Event

KINDS = ("inplace_modified", "backward_twice", "grad_none", "nonscalar_output", "no_grad_fn", "nonfinite_grad")

# PyTorch's own words for the failures a second run can explain (matched loosely across versions)
FAILURES = (
    "modified by an inplace operation",
    "backward through the graph a second time",
    "implicitly created only for scalar outputs",
    "does not require grad and does not have a grad_fn",
    "appears to not have been used in the graph",
)
NON_LEAF_WARNING = "is not a leaf Tensor is being accessed"


def needs_diagnosis(message: str | None, events: Iterable[Event], stdout: str, stderr: str, code: str) -> bool:
    """Whether the first run failed in a way the instruments can explain: PyTorch raised one of FAILURES, a
    gradient came out nan or inf, or the snippet printed None where it reads a `.grad` (or read the .grad of
    a non-leaf), a `.grad` that is None raised, or a backward left a used module's parameters without a gradient
    (its event's note) where the snippet reads .grad or steps an optimizer. Read from what the first run
    reported: nothing more is measured for a snippet that passes."""
    if message is not None and any(words in message for words in FAILURES):
        return True
    if any(_nonfinite(e) for e in events):
        return True
    if ".grad" in code and "None" in stdout:
        return True
    if ".grad" in code and message is not None and "NoneType" in message:
        return True  # `p.grad.norm()`, `w - lr * w.grad` on a .grad that is None
    if (".grad" in code or ".step(" in code) and any(NO_GRADIENT in n for e in events for n in e.notes):
        return True  # a backward left parameters without a gradient, and the snippet reads or steps them
    return NON_LEAF_WARNING in stderr


RAISED_KINDS = {  # the kind each of PyTorch's messages is diagnosed as, in the run that raised it
    "modified by an inplace operation": "inplace_modified",
    "backward through the graph a second time": "backward_twice",
    "implicitly created only for scalar outputs": "nonscalar_output",
    "does not require grad and does not have a grad_fn": "no_grad_fn",
    "appears to not have been used in the graph": "grad_none",
}


def consistent(found: list[Diagnosis], message: str | None, line: int | None, events: list[Event]) -> list[Diagnosis]:
    """The diagnoses of the second run that tell the first run's story: a raised kind only at the line where
    the first run raised that error, a nan only where the first run saw one. A snippet that does not repeat
    itself (a clock, a file it changes) may fail otherwise the second time; that is not said."""
    raised = next((kind for words, kind in RAISED_KINDS.items() if message is not None and words in message), None)
    nonfinite = any(_nonfinite(e) for e in events)
    out = []
    for d in found:
        if d.kind == "nonfinite_grad" and not nonfinite:
            continue
        early = d.kind == "grad_none" and d.cause.get("op") == "before backward"
        if early and (message is None or "NoneType" not in message or d.line != line):
            continue  # a .grad read as None before any backward is a mistake only where it raised
        if d.kind in ("inplace_modified", "backward_twice", "nonscalar_output", "no_grad_fn") and (
            d.kind != raised or d.line != line
        ):
            continue
        if d.kind == "nonfinite_grad" and d.spurious is False and _finite_by_differences(events, d.line):
            d = replace(d, spurious=True, text=d.text.replace(_LOCAL, _WHOLE))
        out.append(d)
    return out


# the child recomputes the op's own derivative; the judge's differences see the whole function's
_LOCAL = "the derivative itself is infinite or undefined at these values (recomputed in float64)."
_WHOLE = (
    "that op's own derivative is infinite here, yet the gradient of the whole is finite (finite differences of the "
    "forward say so, in the call's checks): backward multiplied the infinity by 0, an artefact of how it was "
    "computed."
)


def _finite_by_differences(events: list[Event], line: int) -> bool:
    """Whether a call at `line` has a check naming nan or inf grads where the differences are finite."""
    return any(c.spurious for e in events if e.line == line for c in e.checks if c.name == "finite_difference")


def _nonfinite(e: Event) -> bool:
    if e.diagnosis is not None and "non-finite" in e.diagnosis:
        return True
    return any(x.grad_norm is not None and not math.isfinite(x.grad_norm) for x in e.inputs)


def find(run: Any, lines: list[str], safe: Any) -> list[Diagnosis]:
    """Run the snippet again, confined, with the instruments on (`run(on_message=..., diagnose=True,
    trust=False)`: launch.run_confined with the first run's other arguments) and word what they found. The
    tool's own failure here (a limit, a crash of the re-run) leaves no diagnosis: the snippet's own error was
    reported already."""
    from ..errors import VjpError

    found: list[dict[str, Any]] = []

    def collect(frame: dict[str, Any]) -> None:
        if frame.get("type") == "diagnosis" and len(found) < MAX_DIAGNOSES:
            found.append(frame["diagnosis"])

    try:
        # confined even where the first run was trusted: a snippet's effects (files it writes) must not repeat
        run(on_message=collect, diagnose=True, trust=False)
    except VjpError:
        return []
    out: list[Diagnosis] = []
    for raw in found:
        try:
            d = _read(raw, safe)
        except (KeyError, TypeError, ValueError):
            continue  # a forged or malformed frame says nothing
        out.append(word(d, lines))
    return out


MAX_DIAGNOSES = 20  # a loop that fails the same way each step says it once per tensor (diagnose.py); at most these


def _read(raw: dict[str, Any], safe: Any) -> dict[str, Any]:
    """The child's facts, field by field: a kind of KINDS, ints for lines, safe text for names and ops."""
    kind = raw["kind"]
    if kind not in KINDS:
        raise ValueError(kind)

    def place(p: Any) -> dict[str, Any] | None:
        if p is None:
            return None
        line = p["line"]
        if line is not None and type(line) is not int:
            raise TypeError("line")
        return {"line": line, "op": safe(str(p["op"]))[:80]}

    if type(raw["line"]) is not int:
        raise TypeError("line")
    spurious = raw.get("spurious")
    facts = raw.get("facts") or {}
    if not isinstance(facts, dict):
        raise TypeError("facts")
    return {
        "kind": kind,
        "tensor": safe(str(raw["tensor"]))[:120],
        "line": raw["line"],
        "cause": place(raw["cause"]),
        "saved": place(raw.get("saved")),
        "spurious": spurious if spurious in (True, False) else None,
        "facts": _safe_facts(facts, safe),
    }


def _safe_facts(facts: dict[str, Any], safe: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in facts.items():
        if isinstance(value, bool) or (type(value) is int):
            out[str(key)] = value
        elif isinstance(value, str):
            out[str(key)] = safe(value)[:120]
        elif isinstance(value, list):
            out[str(key)] = [safe(str(v))[:60] if isinstance(v, str) else v for v in value[:8] if type(v) in (int, str)]
        elif isinstance(value, dict):
            out[str(key)] = _safe_facts(value, safe)
    return out


def word(d: dict[str, Any], lines: list[str]) -> Diagnosis:
    """The facts of one finding -> a Diagnosis: what happened, in a sentence or two, and the fix."""
    kind, name, line, cause, facts = d["kind"], d["tensor"] or "the tensor", d["line"], d["cause"], d["facts"]
    text = _TEXT[kind](name, line, cause, d, facts)
    fix = fix_for(kind, name, line, cause, d, facts, lines)
    kink = facts.get("kink")
    kinks = [_kink(kink)] if isinstance(kink, dict) and kink.get("convention") else []
    return Diagnosis(kind, d["tensor"], line, cause, fix, text, d["saved"], d["spurious"], kinks)


def _kink(k: dict[str, Any]) -> dict[str, Any]:
    """A kink the child named (already made safe), in Event.kinks's fields."""
    line = k.get("line")
    count = k.get("count")
    return {
        "op": str(k.get("op", "")),
        "line": line if type(line) is int else None,
        "input": str(k.get("input", "")),
        "elements": [str(e) for e in k.get("elements") or []],
        "count": count if type(count) is int else 0,
        "convention": str(k["convention"]),
    }


def _at(place: dict[str, Any] | None) -> str:
    if place is None or place.get("line") is None:
        return ""
    return f" at line {place['line']}"


def _inplace(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    saved, node = d["saved"], facts.get("node", "its backward node")
    was, now = facts.get("expected"), facts.get("version")
    more = facts.get("changes", 1)
    later = f" ({more} in-place changes in all)" if isinstance(more, int) and more > 1 else ""
    through = facts.get("through") or {}
    via = (
        f" through `{through['name']}`, which shares its memory ({through.get('op')}{_at(through)})"
        if through.get("name")
        else ""
    )
    return (
        f"`{saved['op']}`{_at(saved)} saved `{name}` for backward (version {was}); `{cause['op']}`{_at(cause)} "
        f"then changed it in place{via} (version {now}){later}. Backward at line {line} needs the saved value "
        f"({node}), and it is gone."
    )


def _twice(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    shared = facts.get("shared") or {}
    made = f"`{shared.get('op')}`{_at(shared)}" if shared.get("op") else "an earlier operation"
    what = f", which made `{name}`" if d["tensor"] else ""
    first = (
        f"The backward at line {cause['line']}, in an earlier iteration, freed what the graph saved; this call"
        if facts.get("loop")
        else f"The backward at line {cause['line']} freed what the graph saved; the backward at line {line}"
    )
    return f"{first} goes through the same part of it: {made}{what} ({facts.get('node', 'a node')})."


def _grad_none(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    op = cause["op"]
    if op == "non-leaf" and facts.get("made_by") in CONVERSIONS:
        return (
            f"`{name}` is not a leaf: it is a converted copy (dtype or device) of the tensor made{_at(cause)} "
            f"with requires_grad=True. That tensor is the leaf and gets the .grad; `{name}`, the copy, does not."
        )
    if op == "non-leaf":
        return (
            f"`{name}` is not a leaf (an operation{_at(cause)} made it): backward fills the .grad of leaves only, "
            "so its .grad stays None."
        )
    if op == "requires_grad never set":
        return f"`{name}` does not require grad (made{_at(cause)}), so no backward gives it a gradient."
    if op == "unused":
        return (
            f"`{name}` took no part in computing what the backward started from (it was never used there), "
            "so autograd never reached it and its .grad stays None."
        )
    if op == "before backward":
        return (
            f"`{name}.grad` is None until a backward call fills it: no backward had run yet at line {line}, "
            "so there was nothing to read or zero."
        )
    return (
        f"The path from the backward's output to `{name}` was cut at line {cause['line']} by {op}: "
        f"{_CUT_WORDS.get(op, 'this operation has no gradient')}, so autograd never reached `{name}`."
    )


_CUT_WORDS = {
    ".detach()": ".detach() returns the same values without a graph",
    ".data": ".data returns the same values without a graph",
    "torch.no_grad()": "inside torch.no_grad() no graph is recorded",
    ".item()": ".item() turns the value into a Python number, which has no graph",
    ".tolist()": ".tolist() turns the values into Python numbers, which have no graph",
    ".numpy()": ".numpy() hands the values to numpy, which has no graph",
    "float()": "float() turns the value into a Python number, which has no graph",
    "int()": "int() turns the value into a Python number, which has no graph",
    **dict.fromkeys(
        ("gt", "lt", "ge", "le", "eq", "ne", "logical_and", "logical_or", "logical_not", "isclose"),
        "a comparison gives a bool tensor: a step, with no gradient",
    ),
    **dict.fromkeys(("argmax", "argmin", "argsort"), "it returns indices (an integer tensor), which have no gradient"),
    "_to_copy": "a cast to an integer or bool dtype has no gradient",
}


def _nonscalar(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    shape = facts.get("shape") or []
    n = math.prod(int(s) for s in shape) if shape else 1
    return (
        f"`{name}` has shape {list(shape)} ({n} elements), and backward() without an argument uses v = 1, which "
        f"exists only for a single number. gradient= must be a tensor of shape {list(shape)}, one weight per "
        f"element of `{name}`: backward(v) computes Jᵀv, x.grad[j] = Σᵢ v[i]·∂{name}[i]/∂x[j]."
    )


def _no_graph(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    op = cause["op"]
    if op == "requires_grad never set":
        named = list(facts.get("leaves") or [])
        leaves = ", ".join(f"`{x}`" for x in named) or "the tensors it was computed from"
        made = f"`{named[0]}` made{_at(cause)}" if len(named) > 1 else f"made{_at(cause)}"  # the line is the first's
        return (
            f"`{name}` has no grad_fn: nothing it was computed from requires grad; requires_grad was never set on "
            f"{leaves} ({made})."
        )
    why = _CUT_WORDS.get(op, f"`{op}` has no gradient")
    return f"`{name}` has no grad_fn: its graph was lost at line {cause['line']} ({why})."


def _nonfinite_text(name: str, line: int, cause: dict[str, Any], d: dict[str, Any], facts: dict[str, Any]) -> str:
    op, node = cause["op"], facts.get("node", "")
    grad = f"`{name}.grad` holds nan or inf. " if d["tensor"] else ""
    text = f"{grad}The first nan/inf of the backward at line {line} came from `{op}`{_at(cause)} ({node}): "
    source = facts.get("from") or {}
    if source.get("op"):
        text += f"its input, from `{source['op']}`{_at(source)}, had overflowed to inf in float32; "
    elif facts.get("overflow"):
        text += f"the forward `{op}` itself overflowed to inf in float32 (float64 holds it finite); "
    if facts.get("backward_overflow"):
        dtype = facts["backward_overflow"]
        text += (
            f"the exact gradient is finite there but past {dtype}'s largest number (recomputed in float64), so "
            "backward overflowed: a right gradient too large for its dtype."
        )
    elif d["spurious"] is True:
        text += (
            "the exact derivative is finite there (recomputed in float64, a zero cotangent counted as no path), "
            "so the nan/inf is an artefact of how it was computed."
        )
    elif d["spurious"] is False:
        text += "the derivative itself is infinite or undefined at these values (recomputed in float64)."
    else:
        text += "whether the exact derivative is finite there could not be recomputed."
    kink = facts.get("kink") or {}
    if kink.get("convention"):
        named = kink.get("elements") or []
        word = "" if kink.get("input") else "elements " if len(named) > 1 else "element "
        at = f" at {word}{', '.join(named)}" if named else ""
        text += f" Its input sits on a kink or a singularity{at}: {kink['convention']}."
    return text


_TEXT = {
    "inplace_modified": _inplace,
    "backward_twice": _twice,
    "grad_none": _grad_none,
    "nonscalar_output": _nonscalar,
    "no_grad_fn": _no_graph,
    "nonfinite_grad": _nonfinite_text,
}
