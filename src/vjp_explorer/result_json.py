"""Result -> a JSON-ready dict in the documented schema; non-finite numbers as the strings "nan", "inf", "-inf".

Below render/; `Result.to_dict()` reaches it through display.py's hook, so the result never imports it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from .result import Check, Probe, Result, TensorData

JSON_SCHEMA_VERSION = 4  # 4: checks say "independent"; a status may be "inconclusive"

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
    """`clean` through dicts and lists too (the backward graph's nodes are nested plain data)."""
    if isinstance(x, dict):
        return {k: _clean_all(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean_all(v) for v in x]
    return clean(x)


def check(c: Check) -> dict[str, Any]:
    """One check, JSON-safe."""
    return {
        "status": c.status,
        "compares": c.compares,
        "max_abs_diff": clean(c.max_abs_diff),
        "max_rel_diff": clean(c.max_rel_diff),
        "tolerance": (
            c.tolerance
            if c.tolerance is None or isinstance(c.tolerance, str)
            else {"rtol": c.tolerance.rtol, "atol": c.tolerance.atol}
        ),
        "reason": c.reason,
        "undefined": list(c.undefined),
        "overflow": list(c.overflow),
        "spurious": list(c.spurious),
        "nonfinite": list(c.nonfinite),
        "worst": c.worst,
        "independent": c.independent,
    }


def result_to_dict(r: Result, lazy: bool = False, full: bool = False) -> dict[str, Any]:
    """The whole result in the documented schema (docs/json.md): arrays past SUMMARY_ABOVE elements as
    summaries unless full; lazy leaves the arrays written whole as TensorData, for streaming."""

    def values(t: TensorData) -> Any:
        return tensor_json(t, lazy, full)

    d: dict[str, Any] = {
        "schema": JSON_SCHEMA_VERSION,
        "title": r.meta.get("title"),
        "description": r.meta.get("description"),
        "source": r.meta.get("source_note"),
        "program": r.program,
        "dtype": r.dtype,
        "device": r.device,
        "seed": r.meta.get("seed") if r.meta.get("uses_random") else None,
        "inputs": {
            n: {"shape": list(i.value.shape), "value": values(i.value), "requires_grad": i.requires_grad}
            for n, i in r.inputs.items()
        },
        "output": {"name": r.output_name, "shape": list(r.output.shape), "value": values(r.output)},
        "grad": {"shape": list(r.grad.shape), "value": values(r.grad), "source": r.grad_source},
        "backward_calls": r.backward_calls,
        "grads": {n: values(g) for n, g in r.grads.items()},
        "jacobian": {
            n: {
                "shape": list(j.shape),
                "value": values(j.value) if j.value is not None else None,
                "method": j.method,
                "structure": j.structure,
                "diagonal": values(j.diagonal) if j.diagonal is not None else None,
                "reason": j.reason,
                "why": j.why,
                "same_pass": j.same_pass,
            }
            for n, j in r.jacobians.items()
        },
        "jtv": {n: (values(t) if t is not None else None) for n, t in r.jtv.items()},
        "symbolic": None if r.symbolic is None else {n: values(t) for n, t in r.symbolic.items()},
        "finite_difference": {n: values(t) for n, t in r.finite_difference.items()},
        "checks": {n: check(c) for n, c in r.checks.items()},
        "intermediates": {
            n: {
                "shape": list(i.value.shape),
                "value": values(i.value),
                "grad": values(i.grad) if i.grad is not None else None,
            }
            for n, i in r.intermediates.items()
        },
        "control": [{"kind": c.kind, "line": c.line, "count": c.count, "text": c.text} for c in r.control],
        "notes": [{"code": n.code, "text": n.text} for n in r.notes],
        "exit_code": int(r.exit_code),
    }
    if r.probe is not None:
        d["probe"] = probe_to_dict(r.probe, values)
    if r.graph is not None:
        d["graph"] = _clean_all(r.graph)
    if r.backward_code is not None and "record" not in r.backward_code:  # --code: what the script did
        d["backward_code"] = _clean_all(r.backward_code)
    if r.explanation is not None:
        d["explain"] = r.explanation.to_dict()
    return d


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
