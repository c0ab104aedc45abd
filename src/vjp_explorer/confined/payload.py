"""What of an event travels to the parent: its arrays within a budget of numbers.

The checks run in the child on every number; what crosses the pipe is what the transcript and the JSON show.
A call on a large model (LeNet's 61,706 parameters, a 100×1000 weight) would otherwise send millions of
numbers, past the channel's frame limit. Past NUMBERS, the largest arrays are left out first, in the order
of FIELDS (the explicit Jacobian first, what the call added to `.grad` last); each input says which of its
arrays were left out (`omitted`), its grad norm always travels, and the event says so in a note.
"""

from __future__ import annotations

import math
from typing import Any

from ..events import Event, LeafGrad

NUMBERS = 300_000  # numbers of one event's arrays sent to the parent (about 6 MB of JSON)
# an input's arrays, the first left out first
FIELDS = ("jacobian", "grad_before", "grad_after", "value", "jtv", "finite_difference", "grad")
_NAMES = {
    "jacobian": "J",
    "grad_before": ".grad before",
    "grad_after": ".grad after",
    "value": "values",
    "jtv": "Jᵀv from J",
    "finite_difference": "Jᵀv from finite differences",
    "grad": "grads",
}


def fit(event: Event, budget: int = NUMBERS, used: int = 0) -> None:
    """Leave out the largest arrays of `event` until its numbers, with `used` more sent beside them, fit
    `budget`; say what was left out."""
    sized = [(x, f, _count(x, f)) for x in event.inputs for f in FIELDS]
    infos = [*event.outputs, *event.v, *event.results, *event.reference]
    total = used + sum(n for _, _, n in sized) + sum(_numel(t.shape) for t in infos if t.values is not None)
    if total <= budget:
        return
    left: dict[str, list[str]] = {}
    for t in sorted(infos, key=lambda t: -_numel(t.shape)):  # a huge output and its v go before any grad
        if total <= budget or _numel(t.shape) < budget // 10:
            break
        if t.values is not None:
            total -= _numel(t.shape)
            t.values = None
            left.setdefault(t.name, []).append("values")
    order = sorted(sized, key=lambda s: (FIELDS.index(s[1]), -s[2]))
    for x, name, n in order:
        if total <= budget:
            break
        if n == 0:
            continue
        setattr(x, name, None)
        x.omitted.append(name)
        total -= n
        left.setdefault(x.name, []).append(_NAMES[name])
    said = "; ".join(f"{name}: {', '.join(what)}" for name, what in left.items())
    event.notes.append(f"{LEFT_OUT.format(budget)}{said}.")


# the note that says what was left out: the child's and the judge's (whose arrays come later) make one
LEFT_OUT = (
    "This call's arrays hold more than {:,} numbers, so some were not kept for the transcript and the JSON "
    "(the checks ran on all of them): "
)


def joined(notes: list[str], more: str) -> list[str]:
    """`notes` with the note `more` (what else was left out) merged into its own one, if it has one."""
    head = LEFT_OUT.format(NUMBERS)
    for k, note in enumerate(notes):
        if note.startswith(head) and more.startswith(head):
            return [*notes[:k], note.rstrip(".") + "; " + more[len(head) :], *notes[k + 1 :]]
    return [*notes, more]


def numbers(event: dict[str, Any]) -> int:
    """How many numbers an event (as the channel carries it) holds in its arrays."""
    infos = [*event["outputs"], *event["v"], *event["results"], *event["reference"]]
    held = sum(_numel(t["shape"]) for t in infos if t["values"] is not None)
    for x in event["inputs"]:
        n = _numel(x["shape"])
        held += sum(n for f in FIELDS if f != "jacobian" and x.get(f) is not None)
    return held


def _count(x: LeafGrad, name: str) -> int:
    value = getattr(x, name)
    if value is None:
        return 0
    n = _numel(x.shape)
    return n * len(value) if name == "jacobian" and isinstance(value, list) else n


def _numel(shape: Any) -> int:
    return math.prod(int(d) for d in shape) if shape else 1
