"""`--code DIR`: each explained call's script and tensors written (callN.py, callN.pt), run, and compared.

The folder is checked before the run (it exists, may be written, and holds no callN.py or callN.pt of an
earlier run: those are never overwritten). After the run each call's record (engine/backward_capture.py's plain
data) is checked, its script written by script.py, and the script run as the user will run it: `python -I
callN.py` in a fresh process with an empty environment, the folder as its working directory, and a timeout;
never in the tool's own process. What it prints is compared with the gradient backward gave.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .script import DTYPES, BadRecord, build, check_record

RUN_SECONDS = 120  # one script's run (importing torch is most of it); past this it counts as not reproduced
_OURS = re.compile(r"call\d+\.(py|pt)")
_RTOL = {"float64": 1e-9, "float16": 1e-2, "bfloat16": 5e-2}  # else float32's 1e-4 (engine/tolerance.py)


def check_dir(path: Path) -> None:
    """Refuse, before any work, a folder the scripts cannot go to, or one holding an earlier run's scripts."""
    shown = str(path)
    if not path.is_dir():
        what = "is a file" if path.exists() else "does not exist"
        raise UsageError(f"--code {shown}: the folder {what}.", hint="Give a folder; create it first.")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--code {shown}: the folder may not be written.")
    taken = sorted(p.name for p in path.iterdir() if _OURS.fullmatch(p.name))
    if taken:
        raise UsageError(
            f"--code {shown}: the folder already holds {', '.join(taken[:3])}{' ...' if len(taken) > 3 else ''} "
            "from an earlier run; they are never overwritten.",
            hint="Give an empty folder, or remove those files first.",
        )


@dataclass
class Written:
    """One call's script: where it is, what the JSON says of it, and its text for the report."""

    path: Path
    summary: dict[str, Any]
    text: str
    grads: dict[str, Any]  # what backward gave, to compare with
    dtypes: dict[str, str]


def write_call(
    folder: Path, index: int, raw: Any, title: str, grads: dict[str, Any], dtypes: dict[str, str]
) -> Written | dict[str, Any]:
    """Call `index`'s script and tensors written (`check` runs it and compares it with `grads`, each input's
    gradient from backward as nested lists, None where it got none); the JSON summary alone where no script
    could be written."""
    stem = f"call{index}"
    if not isinstance(raw, dict) or "record" not in raw:
        why = raw.get("skipped") if isinstance(raw, dict) and isinstance(raw.get("skipped"), str) else None
        return {"file": None, "skipped": why or "the call's backward graph was not captured"}
    try:
        record = check_record(raw["record"])
        tensors = {k: decode(v) for k, v in dict(raw["tensors"]).items()}
        numbers = {k: float(t) for k, t in tensors.items() if t.dim() == 0 and t.is_floating_point()}
        script = build(record, stem, title, numbers)
    except (BadRecord, KeyError, TypeError, ValueError) as e:
        return {"file": None, "skipped": f"the call's record could not be read ({e})"}
    missing = [k for k in script.keys if k not in tensors]
    if missing:
        return {"file": None, "skipped": "the record lacks tensors its script needs"}
    import torch

    py, pt = folder / f"{stem}.py", folder / f"{stem}.pt"
    with open(pt, "xb") as f:  # "x": never over a file that appeared since the folder was checked
        torch.save({k: tensors[k] for k in dict.fromkeys(script.keys)}, f)
    with open(py, "x", encoding="utf-8") as f:
        f.write(script.code)
    summary: dict[str, Any] = {
        "file": py.name,
        "nodes": script.nodes,
        "reproduces": False,  # until check() has run it
        "max_abs_diff": None,
        "independent": script.covered,
        "not_in_table": sorted(set(script.aten + script.recorded)),
    }
    return Written(py, summary, script.code, grads, dtypes)


def check(written: list[Written]) -> None:
    """Run each script as the user will (a few at a time: most of each run is importing torch) and compare
    what it prints with backward's gradients."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(lambda w: run(w.path), written))
    for w, (got, error) in zip(written, outcomes, strict=True):
        diff, same = compare(got, w.grads, w.dtypes) if got is not None else (None, False)
        w.summary.update(reproduces=same, max_abs_diff=diff)
        if error:
            w.summary["error"] = error


def decode(d: Any) -> Any:
    """A tensor sent as {dtype, shape, data (base64)}, checked: a known dtype, the bytes its shape needs."""
    import torch

    if not isinstance(d, dict) or d.get("dtype") not in DTYPES:
        raise ValueError("a tensor of an unknown dtype")
    shape = d["shape"]
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("a tensor shape that is not one")
    dtype = getattr(torch, d["dtype"])
    raw = base64.b64decode(str(d["data"]), validate=True)
    n = math.prod(shape)
    if len(raw) != n * torch.empty((), dtype=dtype).element_size():
        raise ValueError("a tensor whose bytes do not match its shape")
    if n == 0:
        return torch.zeros(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def run(py: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Run a script as a user would, isolated (-I: no user site, no PYTHON* variables), its folder as the
    working directory, an empty environment, a timeout; its one line of JSON, or why there is none."""
    env = {"PATH": os.defpath, "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-I", py.name],
            cwd=py.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"the script ran past {RUN_SECONDS} s"
    except OSError as e:
        return None, f"the script could not be started ({e.strerror})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"the script failed: {last[:300]}"
    lines = done.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if len(lines) == 1 else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        return None, "the script did not print one line of JSON"
    return out, None


def compare(got: dict[str, Any], grads: dict[str, Any], dtypes: dict[str, str]) -> tuple[float | None, bool]:
    """The largest |script − backward| over every input, and whether each is within its dtype's tolerance
    (rtol of the largest |gradient| of that input: the script sums in another order than autograd's kernels)."""
    import torch

    worst, same = 0.0, True
    for name, ref in grads.items():
        mine = got.get(name)
        if ref is None or mine is None:
            same = same and ref is None and mine is None
            continue
        a = torch.tensor(_numbers(mine), dtype=torch.float64)
        b = torch.tensor(_numbers(ref), dtype=torch.float64)
        if a.shape != b.shape:
            return None, False
        if not a.numel():
            continue
        both = torch.isfinite(a) & torch.isfinite(b)
        if not torch.equal(torch.isnan(a), torch.isnan(b)) or not torch.equal(
            a[~both & ~torch.isnan(a)], b[~both & ~torch.isnan(b)]
        ):
            same = False
        d = float((a[both] - b[both]).abs().max()) if bool(both.any()) else 0.0
        scale = float(b[both].abs().max()) if bool(both.any()) else 0.0
        worst = max(worst, d)
        same = same and d <= 1e-7 + _RTOL.get(dtypes.get(name, ""), 1e-4) * scale
    return worst, same


def _numbers(x: Any) -> Any:
    """Nested lists with the JSON's "nan"/"inf" strings read back as floats."""
    if isinstance(x, list):
        return [_numbers(v) for v in x]
    if isinstance(x, str):
        return float(x)
    return float(x)


def for_snippet(result: Any, folder: Path) -> None:
    """Each explained event's script written into `folder`; its `backward_code` becomes the JSON summary."""
    written: list[Written] = []
    for e in result.events:
        if e.backward_code is None:
            continue
        grads = {x.name: x.grad for x in e.inputs if "grad" not in x.omitted}  # left out for size: not compared
        dtypes = {x.name: x.dtype for x in e.inputs}
        title = f"call {e.index}, line {e.line}: {e.source}"
        done = write_call(folder, e.index, e.backward_code, title, grads, dtypes)
        e.backward_code = _summary(done)  # a Written's summary is filled in by check()
        if isinstance(done, Written):
            written.append(done)
    check(written)
    _said(folder, len(written))


def _summary(done: Written | dict[str, Any]) -> dict[str, Any]:
    if isinstance(done, Written):
        done.summary["path"] = str(done.path)
        return done.summary  # the same dict: check() fills it in
    return done


def _said(folder: Path, count: int) -> None:
    from ..outfiles import wrote

    if count:
        wrote(folder, f"{count} backward script{'s' if count != 1 else ''}, callN.py with callN.pt")


def for_program(result: Any, folder: Path) -> None:
    """A program's backward call written into `folder` as call1.py (stages capture it with `Request.code`);
    with --backward-calls N, .grad holds N times one call's Jᵀv, and the script is compared with one call."""
    if result.backward_code is None:
        return
    calls = max(1, int(result.backward_calls))
    grads = {n: (g / calls).tolist() for n, g in result.grads.items() if g is not None}
    title = f"{result.output_name}.backward(v) of the program: {result.program}"
    done = write_call(folder, 1, result.backward_code, title, grads, dict.fromkeys(grads, result.dtype))
    result.backward_code = _summary(done)
    if isinstance(done, Written):
        check([done])
    _said(folder, int(isinstance(done, Written)))
