"""--code is invisible to the snippet (issue 40): what the scripts need (each node's line) must not change what
the snippet can observe. The snippet prints anomaly mode's state, whether its nodes keep a forward stack, the
torch-function mode stack, and the warnings of a failing custom backward; plain Python running the same file is
the oracle, and the run with --code must print what the run without it prints, and what Python prints.
(--code once turned anomaly mode on: every one of these lines differed.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SNIPPET = textwrap.dedent(
    """
    import warnings

    import torch

    print("anomaly", torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).sum()
    print("forward stack kept", "traceback_" in y.grad_fn.metadata)
    print("function modes", torch._C._len_torch_function_stack())
    y.backward()
    print("grad", x.grad.tolist())


    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("no")


    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            Bad.apply(x).sum().backward()
        except ValueError:
            print("raised")
    print("warnings", [str(w.message)[:40] for w in caught])
    print("anomaly after", torch.is_anomaly_enabled())
    """
)


def test_the_snippet_sees_the_same_state_with_and_without_code(vjp, tmp_path):
    src = tmp_path / "state.py"
    src.write_text(SNIPPET)
    plain = subprocess.run([sys.executable, str(src)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "anomaly False" in plain.stdout and "warnings []" in plain.stdout  # what the oracle says, by hand
    without = vjp("run", str(src), "--json")
    out = tmp_path / "code"
    out.mkdir()
    with_code = vjp("run", str(src), "--json", "--code", str(out))
    printed = []
    for r in (without, with_code):
        assert r.exit_code == 0, r.output
        printed.append(json.loads(r.stdout)["stdout"])
    assert printed[0] == plain.stdout
    assert printed[1] == plain.stdout
    # and the script still names the line that made each node, which is what --code needed anomaly mode for
    text = (out / "call1.py").read_text()
    assert "MulBackward0, line 8" in text and "SumBackward0, line 8 (y)" in text
