"""The independent route for snippets: plain Python with torch runs the same code, as `python FILE.py` would
(a REPL transcript as the REPL would).

Test code only, on the project's own corpus: it runs each snippet with Python itself in a subprocess, unconfined
and without the tool's observation. All snippets
of one call share one process, each with a fresh namespace, seed and print options.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_RUNNER = textwrap.dedent(
    """
    import ast, builtins, contextlib, io, json, random, sys
    import numpy
    import torch
    jobs = json.loads(sys.stdin.read())
    results = []
    for src, seed, repl in jobs:
        torch.set_printoptions(profile="default")
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.manual_seed(seed)
        random.seed(seed)
        numpy.random.seed(seed)
        ns = {"__name__": "__main__", "__builtins__": builtins}
        buf = io.StringIO()
        err = None
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            try:
                if repl:  # the REPL: statement by statement, a bare expression displays its value; an
                    # exception is printed and the session reads the next line (the first is the run's error)
                    for node in ast.parse(src).body:
                        mode = "single" if isinstance(node, ast.Expr) else "exec"
                        tree = ast.Interactive([node]) if mode == "single" else ast.Module([node], [])
                        try:
                            exec(compile(tree, "<stdin>", mode), ns)
                        except Exception as e:
                            msg = str(e).strip().splitlines()
                            err = err or {"type": type(e).__name__, "message": msg[0] if msg else ""}
                else:  # python FILE.py: the whole module, a bare expression prints nothing
                    exec(compile(src, "snippet.py", "exec"), ns)
            except BaseException as e:
                msg = str(e).strip().splitlines()
                err = err or {"type": type(e).__name__, "message": msg[0] if msg else ""}
        results.append({"stdout": buf.getvalue(), "error": err})
    print(json.dumps(results))
    """
)


def is_transcript(text: str) -> bool:
    return any(line.startswith(">>>") for line in text.splitlines())


def code_of(text: str) -> str:
    """A REPL transcript keeps its `>>> `/`... ` lines; anything else is code as it stands."""
    lines = text.splitlines()
    if not is_transcript(text):
        return text
    return "\n".join(line[4:] for line in lines if line.startswith((">>> ", "... ")) or line in (">>>", "...")) + "\n"


# a REPL transcript was copied from a session that had imported these (the tool says so in a note)
SESSION = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\nimport math\n"
    "from torch.autograd import Variable\n"
)


def plain_python(texts: list[str], seed: int = 0) -> list[dict]:
    """For each snippet: what plain Python with torch prints, and the exception it stops at (or None)."""
    jobs = json.dumps([[(SESSION if is_transcript(t) else "") + code_of(t), seed, is_transcript(t)] for t in texts])
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=jobs, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
