"""Result -> JSON: the documented schema; non-finite numbers as the strings "nan", "inf", "-inf"."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..result import Check, Result, TensorData


def _clean(x: Any) -> Any:
    if isinstance(x, float):
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, list):
        return [_clean(i) for i in x]
    return x


def values(t: TensorData) -> Any:
    """The nested list (or number) of a tensor, JSON-safe."""
    v = t.tolist()
    if t.stats.nan or t.stats.inf:
        return _clean(v)
    return v


def tensor(t: TensorData) -> dict[str, Any]:
    """{shape, value}."""
    return {"shape": list(t.shape), "value": values(t)}


def check(c: Check) -> dict[str, Any]:
    """One check, JSON-safe."""
    return {
        "status": c.status,
        "compares": c.compares,
        "max_abs_diff": _clean(c.max_abs_diff),
        "max_rel_diff": _clean(c.max_rel_diff),
        "tolerance": None if c.tolerance is None else {"rtol": c.tolerance.rtol, "atol": c.tolerance.atol},
        "reason": c.reason,
        "undefined": list(c.undefined),
        "worst": c.worst,
    }


def result_to_dict(r: Result) -> dict[str, Any]:
    """The whole result in the README's schema."""
    d: dict[str, Any] = {
        "schema": 1,
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
            }
            for n, j in r.jacobians.items()
        },
        "jtv": {n: (values(t) if t is not None else None) for n, t in r.jtv.items()},
        "symbolic": None if r.symbolic is None else {n: values(t) for n, t in r.symbolic.items()},
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
    if r.explanation is not None:
        d["explain"] = r.explanation.to_dict()
    return d


def dumps(r: Result, indent: int | None = 2) -> str:
    """The JSON text (strict: allow_nan=False, so a stray nan would fail loudly here)."""
    return json.dumps(result_to_dict(r), indent=indent, allow_nan=False, ensure_ascii=False)
