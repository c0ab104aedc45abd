"""Result -> JSON: the documented schema; non-finite numbers as the strings "nan", "inf", "-inf"."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..result import JSON_SCHEMA_VERSION

if TYPE_CHECKING:
    from ..result import Check, Probe, Result, TensorData


def _clean(x: Any) -> Any:
    if isinstance(x, float):
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, list):
        return [_clean(i) for i in x]
    return x


def _values(t: TensorData, lazy: bool = False) -> Any:
    """The nested list (or number) of a tensor, JSON-safe; with lazy, the TensorData itself (streamed later)."""
    if lazy:
        return t
    v = t.tolist()
    if t.stats.nan or t.stats.inf:
        return _clean(v)
    return v


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
        "overflow": list(c.overflow),
        "spurious": list(c.spurious),
        "nonfinite": list(c.nonfinite),
        "worst": c.worst,
    }


def result_to_dict(r: Result, lazy: bool = False) -> dict[str, Any]:
    """The whole result in the README's schema (lazy: tensors left as TensorData, for streaming)."""

    def values(t: TensorData) -> Any:
        return _values(t, lazy)

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
    if r.probe is not None:
        d["probe"] = probe_to_dict(r.probe, values)
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
        d["upstream"] = {"formula": p.formula, "loss": _clean(p.loss)}
    return d


PRETTY_LIMIT = 100_000  # numbers in all: up to here the JSON is indented, beyond it compact and streamed
CHUNK = 65_536


def dumps(r: Result) -> str:
    """The JSON text (strict: allow_nan=False, so a stray nan would fail loudly here)."""
    parts: list[str] = []
    write_json(r, parts.append)
    return "".join(parts)


def write_json(r: Result, write: Callable[[str], Any]) -> None:
    """Write the JSON: indented when small; compact and streamed tensor by tensor when big, so that
    10^7-element tensors never exist as Python lists all at once (json's indenting encoder is pure Python)."""
    total = sum(i.value.numel for i in r.inputs.values()) + sum(i.value.numel for i in r.intermediates.values())
    total += r.output.numel + r.grad.numel
    total += sum(g.numel for g in r.grads.values()) * 4
    total += sum(j.value.numel for j in r.jacobians.values() if j.value is not None)
    if r.probe is not None and r.probe.rows is not None:
        total += sum(t.numel for t in r.probe.rows.values())
    if total <= PRETTY_LIMIT:
        write(json.dumps(result_to_dict(r), indent=2, allow_nan=False, ensure_ascii=True))
        return
    _stream(result_to_dict(r, lazy=True), write)


def _stream(obj: Any, write: Callable[[str], Any]) -> None:
    from ..result import TensorData

    if isinstance(obj, TensorData):
        _stream_tensor(obj, write)
    elif isinstance(obj, dict):
        write("{")
        for k, (key, value) in enumerate(obj.items()):
            write(("," if k else "") + json.dumps(key, ensure_ascii=True) + ":")
            _stream(value, write)
        write("}")
    elif isinstance(obj, list | tuple):
        write("[")
        for k, value in enumerate(obj):
            if k:
                write(",")
            _stream(value, write)
        write("]")
    else:
        write(json.dumps(_clean(obj), allow_nan=False, ensure_ascii=True))


def _stream_tensor(t: TensorData, write: Callable[[str], Any]) -> None:
    """A tensor as nested JSON arrays, one row (last dimension) at a time, in chunks."""
    if not t.shape:
        write(json.dumps(_clean(float(t.flat[0])), allow_nan=False))
        return
    clean = bool(t.stats.nan or t.stats.inf)
    last = t.shape[-1]
    outer = t.shape[:-1]
    rows = t.numel // last if last else 0
    for r in range(rows):
        idx = []
        k = r
        for n in reversed(outer):
            idx.append(k % n)  # innermost outer dimension first
            k //= n
        opens = next((i for i, (j, _) in enumerate(zip(idx, reversed(outer), strict=True)) if j != 0), len(idx))
        closes = next((i for i, (j, n) in enumerate(zip(idx, reversed(outer), strict=True)) if j != n - 1), len(idx))
        write("[" * opens + "[")
        for start in range(r * last, (r + 1) * last, CHUNK):
            seg = t.flat[start : min(start + CHUNK, (r + 1) * last)]
            chunk = seg.tolist() if isinstance(seg, memoryview) else list(seg)
            if clean:
                chunk = _clean(chunk)
            text = json.dumps(chunk, allow_nan=False)[1:-1]
            write(("," if start > r * last else "") + text)
        write("]" + "]" * closes + ("," if r < rows - 1 else ""))
