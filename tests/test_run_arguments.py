"""`vjp run` reads its one argument as `vjp explain` does (issue 31): an expression file, a bundled example,
a snippet, or `-` (stdin, a snippet or a program by its text); the `vjp examples` footer's advice works for
every listed name."""

from __future__ import annotations

import json
import re

import pytest

from documents import event
from vjp_explorer.language.files import bundled_examples

ROOT_FILE = "expressions/seed_3vector.toml"
SNIPPET = "import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n(x * x).sum().backward()\nprint(x.grad)\n"


def advice(vjp) -> list[str]:
    """The commands the `vjp examples` footer advises, with NAME in them."""
    r = vjp("examples")
    assert r.exit_code == 0, r.stderr
    footer = r.stdout.strip().splitlines()[-1]
    found = re.findall(r"vjp \w+ NAME", footer)
    assert found, footer
    return found


@pytest.mark.parametrize("name", [e.name for e in bundled_examples()])
def test_the_examples_footer_advice_works_for_every_listed_name(vjp, name):
    for command in advice(vjp):
        argv = command.replace("NAME", name).split()[1:]
        r = vjp(*argv)
        if name.endswith("_empty"):  # this snippet raises as plain Python would: explained, exit 4
            assert r.exit_code == 4 and "The snippet stops here" in r.stdout, (argv, r.stderr)
        else:
            assert r.exit_code == 0, (argv, r.stderr)
        assert r.stdout.strip(), argv


def test_run_takes_an_expression_file_as_its_argument_as_explain_and_file_do(vjp):
    runs = [
        vjp("run", ROOT_FILE, "--json"),
        vjp("run", "--file", ROOT_FILE, "--json"),
        vjp("run", "seed_3vector", "--json"),
    ]
    docs = [json.loads(r.stdout) for r in runs]
    assert all(r.exit_code == 0 for r in runs)
    grads = [d["events"][0]["grads"] for d in docs]
    assert grads[0] == grads[1] == grads[2]
    assert grads[0]["b"] == pytest.approx([1.2, 16.0, 0.002], rel=1e-6)  # 4b·v, by hand
    explained = vjp("explain", ROOT_FILE, "--json")
    assert event(json.loads(explained.stdout))["grads"] == grads[0]


@pytest.mark.parametrize("command", ["run", "explain"])
def test_a_snippet_on_stdin_runs_as_a_snippet(vjp, command):
    r = vjp(command, "-", input=SNIPPET)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("snippet ") and "tensor([2., 4.])" in r.stdout  # d(x·x)/dx = 2x
    same = vjp(command, "--snippet", "-", input=SNIPPET)
    assert same.stdout.splitlines()[2:] == r.stdout.splitlines()[2:]


def test_a_program_on_stdin_still_runs_as_a_program(vjp):
    r = vjp("run", "-", "--a", "1,2", "--grad", "ones", "--json", input="3*a\n")
    assert r.exit_code == 0, r.stderr
    assert event(json.loads(r.stdout))["grads"]["a"] == [3.0, 3.0]


def test_run_names_a_missing_file_or_example_as_explain_does(vjp):
    for command in ("run", "explain"):
        r = vjp(command, "seed_scalr")
        assert r.exit_code == 2
        assert "neither an expression file nor the name of a bundled example" in r.stderr
        assert f"vjp {command} seed_scalr --seed_scalr VALUE" in r.stderr
