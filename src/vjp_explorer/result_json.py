"""Every door's result -> the one JSON document (docs/json.md, schema 5); non-finite numbers as the strings
"nan", "inf", "-inf".

One document for a program, a snippet and `vjp check`: `{"schema": 5, "kind", "torch", "events", "notes",
"exit_code", ...}`. Each backward/grad call is one event object with the same keys for every door (a
door's own facts inside it, null where the door has none), each check one check object, every tensor
`{name, shape, dtype, value}`, inputs a list, notes `{code, text}`; then the kind's own keys, what the run itself
was (the program and its values, the snippet's transcript, the checked target). Below render/; the results reach
it through display.py's hook (their `to_dict`), so they never import it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .verdicts import Check, status_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from .events import Event, LeafGrad, TensorInfo
    from .result import Probe, Result, TensorData
    from .snippet.result import SnippetResult

# 5: one document for every door (kind, events, run); 4: checks say "independent", a status may be
# "inconclusive" (docs/json.md says what moved)
JSON_SCHEMA_VERSION = 5

# An array of more elements than this is written as a summary unless the caller asks for every number
# (`vjp run --json --full`, or `--save FILE.npz` for the numbers in binary); docs/json.md documents it.
SUMMARY_ABOVE = 100_000
SUMMARY_EDGE = 5  # the first and the last elements a summary shows, in row-major order


def clean(x: Any) -> Any:
    if isinstance(x, float):
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, list):
        return [clean(i) for i in x]
    return x


def summary(t: TensorData) -> dict[str, Any]:
    """A big array as the terminal shows it: shape, dtype, min, max and norm of the finite elements, the
    nan and inf counts, and its first and last elements (row-major)."""
    n = t.numel
    edge = min(SUMMARY_EDGE, n)
    return {
        "summary": True,
        "shape": list(t.dims),
        "dtype": str(t.dtype),
        "numel": n,
        "min": clean(float(t.stats.min)),
        "max": clean(float(t.stats.max)),
        "norm": clean(float(t.stats.norm)),
        "nan": t.stats.nan,
        "inf": t.stats.inf,
        "first": clean([float(x) for x in t.flat[:edge]]),
        "last": clean([float(x) for x in t.flat[n - edge :]]),
    }


def tensor_json(t: TensorData, lazy: bool = False, full: bool = True) -> Any:
    """The nested list (or number) of a tensor, JSON-safe, or its summary past SUMMARY_ABOVE elements
    unless full; with lazy, the TensorData itself (streamed later)."""
    if not full and t.numel > SUMMARY_ABOVE:
        return summary(t)
    if lazy:
        return t
    v = t.tolist()
    if t.stats.nan or t.stats.inf:
        return clean(v)
    return v


def _clean_all(x: Any) -> Any:
    """`clean` through dicts, lists and tuples too (graph nodes, a snippet's events: nested plain data)."""
    if isinstance(x, dict):
        return {k: _clean_all(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean_all(v) for v in x]
    return clean(x)


_json_safe = _clean_all


def check(c: Check) -> dict[str, Any]:
    """One check, JSON-safe: the same object for every door. `tolerance` is `{rtol, atol, rule}`: the stated
    bounds of the dtype (null where a door states its rule in words only) and the rule in words (null where
    the bounds say it all)."""
    stated = c.tolerance if c.tolerance is not None and not isinstance(c.tolerance, str) else None
    return {
        "name": c.name,
        "status": c.status,
        "compares": c.compares,
        "max_abs_diff": clean(c.max_abs_diff),
        "max_rel_diff": clean(c.max_rel_diff),
        "tolerance": None
        if c.tolerance is None
        else {
            "rtol": None if stated is None else stated.rtol,
            "atol": None if stated is None else stated.atol,
            "rule": c.tolerance if isinstance(c.tolerance, str) else None,
        },
        "reason": c.reason,
        "undefined": list(c.undefined),
        "overflow": list(c.overflow),
        "spurious": list(c.spurious),
        "nonfinite": list(c.nonfinite),
        "worst": c.worst,
        "independent": c.independent,
    }


def document(result: Any, **options: Any) -> dict[str, Any]:
    """The one document of any door's result: a program's Result, a SnippetResult, a check's CheckResult."""
    from .result import Result

    if isinstance(result, Result):
        return result_to_dict(result, **options)
    return snippet_to_dict(result)


def result_to_dict(r: Result, lazy: bool = False, full: bool = False) -> dict[str, Any]:
    """A program's run as the one document (kind "program"): one event, the program's backward(v); arrays
    past SUMMARY_ABOVE elements as summaries unless full; lazy leaves the arrays written whole as
    TensorData, for streaming."""

    def values(t: TensorData | None) -> Any:
        return None if t is None else tensor_json(t, lazy, full)

    def tensor(name: str, t: TensorData) -> dict[str, Any]:
        return {"name": name, "shape": list(t.dims), "dtype": str(t.dtype), "value": values(t)}

    def leaf(name: str) -> dict[str, Any]:
        i, j = r.inputs[name], r.jacobians.get(name)
        grad = r.grads.get(name)
        return {
            **tensor(name, i.value),
            "requires_grad": i.requires_grad,
            "grad_before": None,  # a program's leaves start with no .grad
            "grad_after": values(grad),
            "grad": values(grad),
            "jtv": values(r.jtv.get(name)),
            "jacobian": None
            if j is None
            else {
                "shape": list(j.shape),
                "value": values(j.value),
                "method": j.method,
                "structure": j.structure,
                "diagonal": values(j.diagonal),
                "reason": j.reason,
                "why": j.why,
                "same_pass": j.same_pass,
            },
            "symbolic": None if r.symbolic is None else values(r.symbolic.get(name)),
            "finite_difference": values(r.finite_difference.get(name)),
            "grad_norm": None if grad is None else clean(float(grad.stats.norm)),
            "omitted": [],
        }

    checks = list(r.checks.values())
    event = {
        "index": 0,
        "line": None,
        "source": f"{r.output_name}.backward(v)",
        "call": "Tensor.backward",
        "backward_calls": r.backward_calls,
        "outputs": [tensor(r.output_name, r.output)],
        "v": [tensor(r.output_name, r.grad)],
        "v_origin": r.grad_source,
        "retain_graph": r.retain_graph,
        "create_graph": False,
        "inputs": [leaf(n) for n in r.inputs],
        "grads": {n: values(g) for n, g in r.grads.items()},
        "checks": {c.name: check(c) for c in checks},
        "status": status_of(checks),
        "notes": [{"code": n.code, "text": n.text} for n in r.notes],
        "diagnosis": None,
        "graph": None if r.graph is None else _clean_all(r.graph),
        "results": [],
        "reference": [],
        "backward_code": _backward_code(r.backward_code),
        "kinks": [],  # a program names its kinks in notes (the op registry's facts)
    }
    run: dict[str, Any] = {
        "title": r.meta.get("title"),
        "description": r.meta.get("description"),
        "source": r.meta.get("source_note"),
        "program": r.program,
        "dtype": r.dtype,
        "device": r.device,
        "seed": r.meta.get("seed") if r.meta.get("uses_random") else None,
        "intermediates": {
            n: {
                "shape": list(i.value.shape),
                "value": values(i.value),
                "grad": values(i.grad),
            }
            for n, i in r.intermediates.items()
        },
        "control": [{"kind": c.kind, "line": c.line, "count": c.count, "text": c.text} for c in r.control],
        "probe": None if r.probe is None else probe_to_dict(r.probe, values),
        "explain": None if r.explanation is None else r.explanation.to_dict(),
    }
    return _document("program", _torch_version(), [event], [], int(r.exit_code), run)


def _document(
    kind: str, torch: str | None, events: list[Any], notes: list[Any], exit_code: int, run: dict[str, Any]
) -> dict[str, Any]:
    """The document's frame, the same keys in this order for every kind, then the kind's own keys (`run`)."""
    return {
        "schema": JSON_SCHEMA_VERSION,
        "kind": kind,
        "torch": torch,
        "events": events,
        "notes": notes,
        "exit_code": exit_code,
        **run,
    }


def _backward_code(code: dict[str, Any] | None) -> Any:
    # --code: what the call's script did; a capture not yet written out (its "record") stays out of the document
    return None if code is None or "record" in code else _clean_all(code)


def _torch_version() -> str | None:
    # a program's run has imported torch already; the document only names its version
    import sys

    torch = sys.modules.get("torch")
    return None if torch is None else str(torch.__version__)


def _info(t: TensorInfo) -> dict[str, Any]:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "value": _json_safe(t.values)}


def _input(x: LeafGrad, jacobian_method: str | None) -> dict[str, Any]:
    return {
        "name": x.name,
        "shape": list(x.shape),
        "dtype": x.dtype,
        "value": _json_safe(x.value),
        "requires_grad": True,
        "grad_before": _json_safe(x.grad_before),
        "grad_after": _json_safe(x.grad_after),
        "grad": _json_safe(x.grad),
        "jtv": _json_safe(x.jtv),
        "jacobian": None
        if x.jacobian is None
        else {
            "shape": [len(x.jacobian), len(x.jacobian[0]) if x.jacobian else 0],
            "value": _json_safe(x.jacobian),
            "method": jacobian_method,
            "structure": None,
            "diagonal": None,
            "reason": None,
            "why": None,
            "same_pass": False,
        },
        "symbolic": None,
        "finite_difference": _json_safe(x.finite_difference),
        "grad_norm": _json_safe(x.grad_norm),
        "omitted": list(x.omitted),
    }


# how each door built an event's J (rows: output elements, flattened)
_JACOBIAN_METHOD = {
    "snippet": "autograd.grad rows of the replayed forward (float64)",
    "check": "autograd.grad rows of the replayed forward (float64)",  # the judge's, as a snippet's
}


def event_to_dict(e: Event, kind: str) -> dict[str, Any]:
    """One backward/grad call of a snippet or of `vjp check`: the same keys as a program's event."""
    return {
        "index": e.index,
        "line": e.line if kind == "snippet" else None,
        "source": e.source,
        "call": e.call,
        "backward_calls": 1,
        "outputs": [_info(o) for o in e.outputs],
        "v": [_info(v) for v in e.v],
        "v_origin": e.v_origin,
        "retain_graph": e.retain_graph,
        "create_graph": e.create_graph,
        "inputs": [_input(x, _JACOBIAN_METHOD.get(kind)) for x in e.inputs],
        "grads": {x.name: _json_safe(x.grad) for x in e.inputs},
        "checks": {c.name: check(c) for c in e.checks},
        "status": e.status,
        "notes": [{"code": None, "text": n} for n in e.notes],
        "diagnosis": e.diagnosis,
        "graph": None if e.graph is None else _clean_all(e.graph),
        "results": [_info(t) for t in e.results],
        "reference": [_info(t) for t in e.reference],
        "backward_code": _backward_code(e.backward_code),
        "kinks": _json_safe(list(e.kinks)),
    }


def snippet_to_dict(r: SnippetResult) -> dict[str, Any]:
    """A snippet's run (kind "snippet") or a check of the user's own function (kind "check") as the one
    document: its events, and beside them the transcript or the target."""
    from dataclasses import asdict

    events = [event_to_dict(e, r.kind) for e in r.events]
    notes = [{"code": None, "text": n} for n in r.notes]
    run: dict[str, Any]
    if r.kind == "check":
        from .check_result import summary

        run = {"target": r.label, "summary": summary(r)}
    else:
        run = {
            "source": r.label,
            "seed": r.seed,
            "seed_given": r.seed_given,
            "repl": r.repl,
            "stdout": r.stdout,
            "steps": [asdict(s) for s in r.steps],
            "error": None if r.error is None else asdict(r.error),
            "at_exit": None if r.at_exit is None else asdict(r.at_exit),
            "stopped": None if r.stopped is None else {"message": r.stopped.message, "hint": r.stopped.hint},
            "diagnoses": [d.to_dict() for d in r.diagnoses],
            **_manual(r),
        }
    return _json_safe(_document(r.kind, r.torch_version, events, notes, r.exit_code, run))


def _manual(r: SnippetResult) -> dict[str, Any]:
    """The learner's hand-written gradients (docs/manual.md): `manual`, one object per line, and
    `manual_first_wrong`, the line of the first that does not agree (null where all agree or there are none)."""
    return {"manual": [], "manual_first_wrong": None} if r.manual is None else r.manual.to_json()


def probe_to_dict(p: Probe, values: Callable[[TensorData], Any]) -> dict[str, Any]:
    """The `probe` key (docs/probes.md): present only when v is a probe (--grad e3/basis/random, several
    --grad, --upstream); what it read off J."""
    d: dict[str, Any] = {"source": p.source, "texts": list(p.texts), "note": p.note}
    if p.source == "one-hot":
        d["index"] = list(p.index or ())
        d["element"] = p.element
    if p.rows is not None:
        d["rows"] = {n: values(t) for n, t in p.rows.items()}
        d["method"] = p.method
    if p.vs:
        d["vs"] = [
            {
                "text": v.text,
                "source": v.source,
                "value": values(v.value),
                "grads": {n: values(g) for n, g in v.grads.items()},
            }
            for v in p.vs
        ]
        d["coefficients"] = list(p.coefficients)
        if p.combined is not None:
            d["combined"] = {
                "value": values(p.combined),
                "grads": {n: values(g) for n, g in (p.combined_grads or {}).items()},
            }
    if p.formula is not None:
        d["upstream"] = {"formula": p.formula, "loss": clean(p.loss)}
    return d
