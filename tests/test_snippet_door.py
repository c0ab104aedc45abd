"""The confined snippet door (snippet/door.py): real Python in the confined child, read back as a SnippetResult.

Checked against plain `python FILE.py` on the same file, and against hand-derived grads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.snippet.door import run_snippet

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = ROOT / "src" / "vjp_explorer" / "examples" / "snippets"

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="this machine cannot confine")


def test_the_seed_snippet_prints_what_python_prints_and_explains_its_call(tmp_path):
    path = SNIPPETS / "seed000_ex1.py"
    plain = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    r = run_snippet(path.read_text(), str(path), seed=0)
    assert r.stdout == plain.stdout and r.error is None
    (e,) = r.events
    assert e.line == 8 and [x.name for x in e.inputs] == ["a", "b", "c"]
    assert e.inputs[1].finite_difference == pytest.approx([1.2, 16.0, 2e-3], rel=1e-6)
    assert {c.name: c.status for c in e.checks} == {"jtv": "agree", "finite_difference": "agree"}
    assert all(s.claim is None or s.claim.matches for s in r.steps)
    assert r.exit_code == 0


def test_a_change_through_data_is_named_and_disagrees():
    text = (
        "import torch\nx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\nc = torch.full((3,), 2.0)\n"
        "y = x * c\nc.data.mul_(2.5)\ny.sum().backward()\nprint(x.grad)\n"
    )
    r = run_snippet(text, "data.py")
    assert r.stdout == "tensor([5., 5., 5.])\n"
    (e,) = r.events
    assert {c.name: c.status for c in e.checks}["finite_difference"] == "disagree"
    assert e.notes and e.notes[0].startswith("c changed after the forward")
    assert r.exit_code == 3


def test_a_bare_expression_prints_nothing_and_the_snippet_error_is_pythons():
    r = run_snippet("x = 1.0\nx\nx.backward()\n", "bare.py")
    assert r.stdout == "" and r.error is not None
    assert (r.error.type, r.error.message) == ("AttributeError", "'float' object has no attribute 'backward'")
    assert r.error.line == 3 and r.exit_code == 4


def test_the_snippet_runs_as_python_not_as_an_allow_list():
    text = (
        "import functools, time, torch\n"
        "@functools.lru_cache\ndef f(n):\n    return torch.ones(n, requires_grad=True)\n"
        "x = f(3)\nx.register_hook(print)\n(x * 2).sum().backward()\n"
        "print(torch.autograd.gradcheck(lambda t: t.sin(), torch.randn(2, dtype=torch.double, requires_grad=True)))\n"
    )
    r = run_snippet(text, "free.py", seed=0)
    assert r.error is None, r.error
    assert r.stdout == "tensor([2., 2., 2.])\nTrue\n"
