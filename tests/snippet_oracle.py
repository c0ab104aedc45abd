"""The independent route for snippets: plain Python with torch runs the same code, as a REPL would.

Test code only, on the project's own corpus: it runs each snippet with Python itself in a subprocess
(statement by statement, bare expressions displaying their value), which the tool never does. All snippets
of one call share one process, each with a fresh namespace, seed and print options.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_RUNNER = textwrap.dedent(
    """
    import ast, contextlib, io, json, sys
    import math
    import torch
    import torch as T
    import torch.nn as nn
    import torch.nn.functional as F
    from torch import tensor
    from torch.autograd import Variable, Function, grad
    jobs = json.loads(sys.stdin.read())
    base = dict(globals())
    results = []
    for src, seed in jobs:
        torch.set_printoptions(profile="default")
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.manual_seed(seed)
        ns = dict(base)
        buf = io.StringIO()
        err = None
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            try:
                for node in ast.parse(src).body:
                    if isinstance(node, ast.Expr):
                        code = compile(ast.Interactive([node]), "<snippet>", "single")
                    else:
                        code = compile(ast.Module([node], []), "<snippet>", "exec")
                    exec(code, ns)
            except BaseException as e:
                msg = str(e).strip().splitlines()
                err = {"type": type(e).__name__, "message": msg[0] if msg else ""}
        results.append({"stdout": buf.getvalue(), "error": err})
    print(json.dumps(results))
    """
)


def code_of(text: str) -> str:
    """A REPL transcript keeps its `>>> `/`... ` lines; anything else is code as it stands."""
    lines = text.splitlines()
    if not any(line.startswith(">>>") for line in lines):
        return text
    return "\n".join(line[4:] for line in lines if line.startswith((">>> ", "... ")) or line in (">>>", "...")) + "\n"


def plain_python(texts: list[str], seed: int = 0) -> list[dict]:
    """For each snippet: what plain Python with torch prints, and the exception it stops at (or None)."""
    jobs = json.dumps([[code_of(t), seed] for t in texts])
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=jobs, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
