"""Each command's help shows a `--json | jq PATH` example; the path exists in that command's JSON (issue 31:
no `jq .grads` where there is no `grads`). A small evaluator of the paths the help uses stands in for jq."""

from __future__ import annotations

import json
import re

import pytest

from planted import SQUARE


def jq(doc, path: str) -> list:
    """`.a.b`, `.[].name`, `.a.events[].grads`: the values the path selects (jq's semantics for these)."""
    found = [doc]
    for step in re.findall(r"\.(\[\]|[A-Za-z_]\w*)(\[\])?", path):
        key, each = step
        if key == "[]":
            found = [x for f in found for x in f]
            continue
        found = [f[key] for f in found]
        if each:
            found = [x for f in found for x in f]
    return found


def help_path(vjp, command: str) -> str:
    r = vjp(command, "--help")
    text = " ".join(r.stdout.split())
    paths = re.findall(r"\bjq '?([.\w\[\]]+)'?", text)
    assert paths, text
    return paths


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("run", ["run", "3*a + 2*b*b", "--a", "1,2", "--b", "3,4", "--grad", "ones"]),
        ("run", ["run", "seed000_ex1"]),
        ("explain", ["explain", "seed_3vector"]),
        ("explain", ["explain", "seed000_ex1"]),
        ("examples", ["examples"]),
        ("functions", ["functions"]),
        ("check", ["check", "MODULE:Square", "--x", "1,2", "--grad", "1,1"]),
    ],
)
def test_the_help_json_example_selects_something_in_that_commands_json(vjp, tmp_path, command, argv):
    module = tmp_path / "sq.py"
    module.write_text(SQUARE)
    argv = [a.replace("MODULE", str(module)) for a in argv]
    r = vjp(*argv, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    kind = "snippet" if "snippet" in doc else "program"
    chosen = []
    for path in help_path(vjp, command):
        try:
            chosen.append(jq(doc, path))
        except (KeyError, TypeError):
            continue
    assert any(values and all(v is not None for v in values) for values in chosen), (command, kind)
