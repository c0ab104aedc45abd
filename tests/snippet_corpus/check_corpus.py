"""Run every snippet of the corpus the way plain Python with torch runs it in a REPL, and record the result.

Each ``NAME.py`` next to this file is run in a fresh Python process (so that no snippet can leave state
behind for the next one: hooks, grad mode, default dtype, the random generator), with the semantics of
``shared/hooks/snippet_truth.py``: REPL prompts and output lines removed, a preamble that imports torch,
torch.nn.functional as F, math, Variable, ..., ``torch.manual_seed(0)`` first, then the snippet statement by
statement, a bare expression displaying its value as the REPL does. The result is written to
``expected.json``: ``{file: {"stdout": ..., "error": {"type", "message", "line"} or null}}``.

    python tests/snippet_corpus/check_corpus.py            # run all, write expected.json
    python tests/snippet_corpus/check_corpus.py --check    # run all, compare with expected.json, write nothing
    python tests/snippet_corpus/check_corpus.py NAME ...   # run some, print their records
    python tests/snippet_corpus/check_corpus.py --stats    # how many snippets use each construct

Checks made on every run: a snippet finishes in under MAX_SECONDS (its own statements, torch's import not
counted), prints no object address (``at 0x...``: it would differ between runs), and ``--check`` finds the
same record as the committed file (determinism). The exit status is 1 when a check fails.

The semantics are reimplemented here rather than imported so that the corpus runs without the shared
folder; where ``/work/shared/hooks/snippet_truth.py`` exists, ``--cross-check`` also runs each snippet
through it and requires the same record. One difference, on purpose: the error's "line" is the line of the
snippet file (prompts included, preamble not counted) where the top-level statement that raised begins;
snippet_truth gives null there for everything but a SyntaxError, so the cross-check ignores "line".
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected.json"
MAX_SECONDS = 2.0
SHARED_TRUTH = Path("/work/shared/hooks/snippet_truth.py")

# Identical to snippet_truth.PREAMBLE.
PREAMBLE = (
    "import math\nimport torch\nimport torch as T\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    "from torch import tensor\nfrom torch.autograd import Variable, Function, grad\n"
)


def clean(text: str) -> str:
    """A REPL transcript (lines starting with '>>> ') keeps its code lines; other text is kept as is."""
    return clean_with_lines(text)[0]


def clean_with_lines(text: str) -> tuple[str, list[int]]:
    """clean(), and for each line of its result the line of `text` it came from (1-based)."""
    lines = text.splitlines()
    if not any(line.startswith(">>>") for line in lines):
        return text, list(range(1, len(lines) + 1))
    out, where = [], []
    for i, line in enumerate(lines, 1):
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            out.append(line[4:])
            where.append(i)
    return "\n".join(out) + "\n", where


def run(src: str, seed: int = 0) -> dict:
    """Statement by statement, as the REPL: a bare expression is compiled in 'single' mode and displays.

    As snippet_truth.run, except that the error's "line" is that of the top-level statement that raised
    (snippet_truth gives null for every exception but SyntaxError), counted in `src`."""
    import torch

    torch.manual_seed(seed)
    ns = {"__name__": "__main__"}
    buf = io.StringIO()
    err = None
    node = None
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        try:
            tree = ast.parse(src)
            for node in tree.body:
                if isinstance(node, ast.Expr):
                    code = compile(ast.Interactive([node]), "<snippet>", "single")
                else:
                    code = compile(ast.Module([node], []), "<snippet>", "exec")
                exec(code, ns)
        except BaseException as e:  # noqa: BLE001
            msg = str(e).strip().splitlines()
            line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) else getattr(node, "lineno", None)
            err = {"type": type(e).__name__, "message": msg[0] if msg else "", "line": line}
    return {"stdout": buf.getvalue(), "error": err}


def run_snippet(text: str) -> dict:
    """A snippet file's text: preamble, clean, run; the error's line is counted in the file itself."""
    code, where = clean_with_lines(text)
    rec = run(PREAMBLE + code)
    err = rec["error"]
    if err and err["line"] is not None:
        n = err["line"] - PREAMBLE.count("\n")
        err["line"] = where[n - 1] if 1 <= n <= len(where) else None
    return rec


def snippets() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)


def _child(path: str, via_shared: bool) -> None:
    """Runs in the child process: one snippet, one JSON line with its record and its time."""
    text = Path(path).read_text(encoding="utf-8")
    import torch  # noqa: F401  (imported before the clock starts)

    if via_shared:
        import importlib.util

        spec = importlib.util.spec_from_file_location("snippet_truth", SHARED_TRUTH)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        t0 = time.perf_counter()
        rec = mod.run(mod.PREAMBLE + mod.clean(text))
    else:
        t0 = time.perf_counter()
        rec = run_snippet(text)
    rec["seconds"] = time.perf_counter() - t0
    sys.stdout.write(json.dumps(rec) + "\n")


def run_one(path: Path, via_shared: bool = False) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    cmd = [sys.executable, __file__, "--child", str(path)] + (["--via-shared"] if via_shared else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"{path.name}: the child process failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")


def constructs(text: str) -> set[str]:
    """The constructs a snippet uses, read from its syntax tree (for --stats: what an interpreter of
    pasted snippets must support first). Names are matched by their last attribute, so `torch.where`,
    `x.where` and `where` all count as `where`."""
    tree = ast.parse(clean(text))
    found: set[str] = set()
    calls: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            calls[name] = calls.get(name, 0) + 1
            for kw in n.keywords:
                if kw.arg in ("retain_graph", "create_graph", "grad_outputs", "allow_unused", "gradient"):
                    found.add(f"kw:{kw.arg}")
            if name == "backward" and (n.args or any(k.arg == "gradient" for k in n.keywords)):
                found.add("backward(v)")
            if name == "backward" and not n.args and not any(k.arg == "gradient" for k in n.keywords):
                found.add("backward()")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("F",):
                found.add("F.*")
            if (
                isinstance(f, ast.Attribute)
                and f.attr.endswith("_")
                and not f.attr.startswith("_")
                and f.attr not in ("requires_grad_",)
            ):
                found.add("inplace-method")
        elif isinstance(n, ast.AugAssign):
            found.add("augassign (+=, -=)")
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript):
                    found.add("index-assign")
                if isinstance(t, ast.Attribute) and t.attr == "grad":
                    found.add("x.grad = ...")
                if isinstance(t, ast.Attribute) and t.attr == "requires_grad":
                    found.add("x.requires_grad = ...")
                if isinstance(t, ast.Tuple):
                    found.add("tuple-assign")
        elif isinstance(n, ast.Subscript):
            found.add("indexing/slicing")
        elif isinstance(n, ast.JoinedStr):
            found.add("f-string")
        elif isinstance(n, ast.FunctionDef):
            found.add("def")
        elif isinstance(n, ast.ClassDef):
            found.add("class (autograd.Function)")
        elif isinstance(n, ast.Lambda):
            found.add("lambda")
        elif isinstance(n, ast.For):
            found.add("for")
        elif isinstance(n, ast.While):
            found.add("while")
        elif isinstance(n, ast.If):
            found.add("if")
        elif isinstance(n, ast.Try):
            found.add("try/except")
        elif isinstance(n, ast.With):
            found.add("with (no_grad)")
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            found.add("import")
        elif isinstance(n, ast.Compare) and any(isinstance(o, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for o in n.ops):
            found.add("comparison")
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            found.add("@")
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow):
            found.add("**")
        elif isinstance(n, ast.Attribute) and n.attr in ("grad", "data", "is_leaf", "requires_grad", "grad_fn"):
            found.add(f".{n.attr}")
    for node in tree.body:  # displayed values: bare expressions at top level other than calls returning None
        if isinstance(node, ast.Expr) and not (
            isinstance(node.value, ast.Call)
            and isinstance(node.value.func, (ast.Attribute, ast.Name))
            and getattr(node.value.func, "attr", getattr(node.value.func, "id", ""))
            in ("print", "backward", "remove", "retain_grad")
        ):
            found.add("bare expression (displayed)")
    if calls.get("backward", 0) + calls.get("grad", 0) > 1 or (
        calls.get("backward", 0) and any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(tree))
    ):
        found.add("several backward/grad calls")
    for name in (
        "print",
        "grad",
        "zero_",
        "retain_grad",
        "register_hook",
        "detach",
        "requires_grad_",
        "where",
        "sum",
        "mean",
        "norm",
        "exp",
        "log",
        "sqrt",
        "sigmoid",
        "relu",
        "clamp",
        "pow",
        "matmul",
        "mm",
        "dot",
        "clone",
        "item",
        "ones_like",
        "tensor",
        "ones",
        "zeros",
        "randn",
        "rand",
        "arange",
        "eye",
        "linspace",
        "full",
        "reshape",
        "view",
        "cat",
        "stack",
        "softmax",
        "Variable",
        "apply",
        "jacobian",
        "hessian",
        "vjp",
        "jvp",
        "hvp",
        "Linear",
        "no_grad",
        "FloatTensor",
        "t",
    ):
        if calls.get(name):
            found.add(f"{name}()")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="snippet files or names (default: all)")
    ap.add_argument("--check", action="store_true", help="compare with expected.json instead of writing it")
    ap.add_argument("--cross-check", action="store_true", help="also run through shared snippet_truth.py")
    ap.add_argument("--stats", action="store_true", help="count the snippets using each construct; run nothing")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--via-shared", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child, a.via_shared)
        return 0

    paths = snippets()
    if a.names:
        wanted = {Path(n).stem for n in a.names}
        paths = [p for p in paths if p.stem in wanted]
    if a.stats:
        counts: dict[str, int] = {}
        for p in paths:
            for c in constructs(p.read_text(encoding="utf-8")):
                counts[c] = counts.get(c, 0) + 1
        for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:4d}  {c}")
        print(f"({len(paths)} snippets)")
        return 0
    records, problems = {}, []
    for p in paths:
        rec = run_one(p)
        secs = rec.pop("seconds")
        records[p.name] = rec
        if secs >= MAX_SECONDS:
            problems.append(f"{p.name}: took {secs:.2f} s (limit {MAX_SECONDS} s)")
        if ADDRESS.search(rec["stdout"]):
            problems.append(f"{p.name}: prints an object address, which differs between runs")
        if a.cross_check and SHARED_TRUTH.exists():
            other = run_one(p, via_shared=True)
            other.pop("seconds")
            strip = lambda r: {**r, "error": r["error"] and {**r["error"], "line": None}}  # noqa: E731
            if strip(other) != strip(rec):
                problems.append(f"{p.name}: snippet_truth.py gives a different record")
        status = "error " + rec["error"]["type"] if rec["error"] else "ok"
        print(f"{p.name:45s} {secs:6.3f} s  {status}", file=sys.stderr)

    if a.names and not a.check:
        print(json.dumps(records, indent=1, ensure_ascii=False))
    elif a.check:
        old = json.loads(EXPECTED.read_text(encoding="utf-8"))
        for name, rec in records.items():
            if old.get(name) != rec:
                problems.append(f"{name}: differs from expected.json")
        if not a.names:
            for name in sorted(set(old) - set(records)):
                problems.append(f"{name}: in expected.json but no such snippet")
    else:
        EXPECTED.write_text(json.dumps(records, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    for msg in problems:
        print("PROBLEM:", msg, file=sys.stderr)
    print(
        f"{len(records)} snippets, {sum(1 for r in records.values() if r['error'])} end in an error, "
        f"{len(problems)} problems",
        file=sys.stderr,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
