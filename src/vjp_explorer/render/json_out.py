"""Result -> JSON: the documented schema; non-finite numbers as the strings "nan", "inf", "-inf"."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..result_json import clean as _clean
from ..result_json import result_to_dict, tensor_json

if TYPE_CHECKING:
    from ..result import Result, TensorData


PRETTY_LIMIT = 100_000  # numbers in all: up to here the JSON is indented, beyond it compact and streamed
CHUNK = 65_536


def dumps(r: Result, full: bool = False) -> str:
    """The JSON text (strict: allow_nan=False, so a stray nan would fail loudly here); arrays past
    result_json.SUMMARY_ABOVE elements as summaries unless full."""
    parts: list[str] = []
    write_json(r, parts.append, full)
    return "".join(parts)


def write_json(r: Result, write: Callable[[str], Any], full: bool = False) -> None:
    """Write the JSON: indented when small; compact and streamed tensor by tensor when big (with --full),
    so that 10^7-element tensors never exist as Python lists all at once (json's indenting encoder is
    pure Python)."""
    d = result_to_dict(r, lazy=True, full=full)
    if _numbers(d) <= PRETTY_LIMIT:
        write(json.dumps(_resolve(d), indent=2, allow_nan=False, ensure_ascii=True))
        return
    _stream(d, write)


def _numbers(obj: Any) -> int:
    """How many numbers the arrays written whole hold (TensorData leaves of a lazy dict)."""
    from ..result import TensorData

    if isinstance(obj, TensorData):
        return obj.numel
    if isinstance(obj, dict):
        return sum(_numbers(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_numbers(v) for v in obj)
    return 0


def _resolve(obj: Any) -> Any:
    """A lazy dict with its TensorData leaves made nested lists (JSON-safe)."""
    from ..result import TensorData

    if isinstance(obj, TensorData):
        return tensor_json(obj)
    if isinstance(obj, dict):
        return {k: _resolve(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve(v) for v in obj]
    return obj


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
    if not t.dims:
        write(json.dumps(_clean(float(t.flat[0])), allow_nan=False))
        return
    clean = bool(t.stats.nan or t.stats.inf)
    last = t.dims[-1]
    outer = t.dims[:-1]
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
            chunk = seg.tolist()
            if clean:
                chunk = _clean(chunk)
            text = json.dumps(chunk, allow_nan=False)[1:-1]
            write(("," if start > r * last else "") + text)
        write("]" + "]" * closes + ("," if r < rows - 1 else ""))
