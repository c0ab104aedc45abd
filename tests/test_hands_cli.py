"""Issue 42's command-line items: hints first, a typo anywhere in argv, help that says what is true and whose
examples work outside a checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SEED = ["--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8"]


@pytest.mark.parametrize(
    ("program", "near"),
    [("sinn(x)", "sin, sinh, sign"), ("np.sinn(x)", "sin, sinh, sign"), ("torch.ad(x, x)", "torch.add")],
)
def test_an_unknown_function_says_did_you_mean_first_not_after_every_name(vjp, program, near):
    r = vjp("run", program, "--x", "1")
    assert r.exit_code == 2
    first = r.stderr.splitlines()[0]
    assert f"Did you mean {near}?" in first, r.stderr
    assert len(r.stderr) < 400, r.stderr  # not the 1.5 KB of function names
    assert "vjp functions" in r.stderr  # where the whole list is


def test_an_unknown_function_with_no_near_name_still_lists_them(vjp):
    r = vjp("run", "qqqqqq(x)", "--x", "1")
    assert r.exit_code == 2 and "The functions are: " in r.stderr and "sin," in r.stderr


@pytest.mark.parametrize("at", [0, 2, 4, 6])
def test_a_mistyped_option_is_named_wherever_it_stands(vjp, at):
    argv = [*SEED[:at], "--jsn", *SEED[at:]]
    r = vjp("run", "3*a+2*b*b+log(c)", *argv)
    assert r.exit_code == 2, r.stdout
    assert "No such option --jsn; did you mean --json?" in r.stderr, r.stderr
    assert "unexpected extra" not in r.stderr


def test_a_variable_without_its_value_before_another_option_says_so(vjp):
    r = vjp("run", "3*a+2*b*b+log(c)", "--a", "--b", "3,4,5", "--c", "6,7,8")
    assert r.exit_code == 2 and "--a needs a value" in r.stderr, r.stderr


def test_top_level_help_says_what_the_checks_are(vjp):
    text = " ".join(vjp("--help").stdout.split())
    assert "three ways" not in text
    assert "checked against finite differences (and sympy, for programs)" in text


def test_examples_help_speaks_of_names(vjp):
    text = " ".join(vjp("examples", "--help").stdout.split())
    assert "path" not in text and "NAME" in text and "by name" in text


def test_the_explain_help_example_runs_outside_a_checkout(vjp, tmp_path):
    """The epilog's example is run as printed, from an empty folder: a bundled name, not a repository path."""
    text = " ".join(vjp("explain", "--help").stdout.split())
    example = re.search(r"Example: vjp (explain \S+)", text)
    assert example, text
    env = {**os.environ, "COLUMNS": "100"}
    argv = [sys.executable, "-m", "vjp_explorer", *example[1].split()]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Jᵀv" in r.stdout or "J^T v" in r.stdout


def test_a_bundled_snippet_is_headed_by_its_name_not_its_install_path(vjp_at):
    out = vjp_at(80, "run", "seed000_ex1", "--seed", "0")
    assert out.splitlines()[0] == "snippet seed000_ex1", out[:200]
    assert "site-packages" not in out and "/examples/snippets/" not in out


def test_the_bundled_examples_name_their_source_in_words(vjp):
    import json

    listing = json.loads(vjp("examples", "--json").stdout)
    for item in listing:
        text = Path(item["path"]).read_text(encoding="utf-8")
        assert "shared/seeds" not in text, item["name"]
