"""`vjp live`'s code view, as plain data: a call's backward script stepped through node by node.

Each step is one node autograd ran, in its order: the statements the script (backward_code/script.py, as
`--code` writes it) has for that node, the line of the user's code that made the node, and the cotangent the
node received and the one it sent along each edge (the first values of each, as the capture kept them:
engine/backward_capture.py). The payload came from the snippet's process: the record is checked by the
script's own `check_record`, the values here; nothing of it becomes code that runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

NO_CODE = "no code view: the call's backward graph was not captured"


class NoCode(ValueError):
    """A call without a code view, and why (the capture skipped it, or its record could not be read)."""


@dataclass(frozen=True)
class Cotangent:
    """What flowed along one edge: its shape, norm and first values (flat; `numel` says how many there are)."""

    shape: tuple[int, ...]
    norm: float
    values: tuple[float, ...]
    numel: int


@dataclass(frozen=True)
class Sent:
    """One edge of a node: where its cotangent went (a node, or a leaf's .grad) and the cotangent."""

    to: str
    cotangent: Cotangent | None


@dataclass(frozen=True)
class CodeStep:
    """One node: its statements in the script, where the user's code made it, its cotangent in and out."""

    node: str  # as autograd names it: MulBackward0
    line: int | None
    source: str | None
    value_of: str | None  # the name the user's code gave the value the node made
    leaf: str | None  # an AccumulateGrad's leaf: the node adds what it received to leaf.grad
    statements: tuple[str, ...]
    received: Cotangent | None
    sent: tuple[Sent, ...]


@dataclass(frozen=True)
class CodeWalk:
    """A call's script, one node at a time; `at` is the step shown."""

    file: str  # the script's name, as --code DIR would write it
    steps: tuple[CodeStep, ...]
    independent: bool  # every node from the formula table
    not_in_table: tuple[str, ...]
    at: int = 0

    @property
    def step(self) -> CodeStep:
        return self.steps[self.at]

    def go(self, k: int) -> CodeWalk:
        """The walk at step k (kept within the steps: the first and last stay where they are)."""
        return replace(self, at=min(max(k, 0), len(self.steps) - 1))


def code_walk(payload: Any, index: int) -> CodeWalk:
    """Call `index`'s walk from what the capture sent (a Result's or an event's raw `backward_code`); NoCode
    with the reason where there is none."""
    from .backward_code.script import BadRecord, build, check_record

    if not isinstance(payload, dict) or "record" not in payload:
        why = payload.get("skipped") if isinstance(payload, dict) else None
        raise NoCode(f"no code view: {why}" if isinstance(why, str) else NO_CODE)
    try:
        record = check_record(payload["record"])
        script = build(record, f"call{index}", "")
    except BadRecord as e:
        raise NoCode(f"no code view: the call's record could not be read ({e})") from None
    nodes = record["nodes"]
    raw = payload.get("steps")
    raw = raw if isinstance(raw, dict) else {}
    steps = []
    for i, statements in script.steps:
        node = nodes[i]
        got = raw.get(str(i))
        got = got if isinstance(got, dict) else {}
        out = got.get("out")
        out = out if isinstance(out, list) else []
        sent = tuple(
            Sent(_target(nodes, e["to"]), _cotangent(out[k]) if k < len(out) else None)
            for k, e in enumerate(node["edges"])
            if e["to"] is not None
        )
        steps.append(
            CodeStep(
                node=node["name"],
                line=node["line"],
                source=node["source"],
                value_of=node["value_of"],
                leaf=(node["leaf"] or "a leaf") if node["name"] == "AccumulateGrad" else None,
                statements=tuple(statements),
                received=_cotangent(got.get("in")),
                sent=sent,
            )
        )
    if not steps:
        raise NoCode("no code view: backward ran no node for this call")
    not_in_table = tuple(sorted(set(script.aten + script.recorded)))
    return CodeWalk(f"call{index}.py", tuple(steps), script.covered, not_in_table)


def _target(nodes: list[dict[str, Any]], to: int) -> str:
    node = nodes[to]
    if node["name"] == "AccumulateGrad":
        return f"{node['leaf'] or 'a leaf'}.grad"
    return f"{node['name']} ({node['value_of']})" if node["value_of"] else str(node["name"])


def _cotangent(d: Any) -> Cotangent | None:
    """A cotangent from the payload, if it is one (shape, norm, numbers); else None: shown as unknown."""
    if not isinstance(d, dict):
        return None
    shape, norm, values, numel = d.get("shape"), d.get("norm"), d.get("values"), d.get("numel")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        return None
    if type(numel) is not int or numel != math.prod(shape) or not isinstance(norm, (int, float)):
        return None
    if not isinstance(values, list) or not all(type(x) in (int, float) for x in values) or len(values) > numel:
        return None
    return Cotangent(tuple(shape), float(norm), tuple(float(x) for x in values), numel)
