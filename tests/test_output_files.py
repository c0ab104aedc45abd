"""--svg, --html, --dot and --save (issue 31): their paths are checked before the run (exit 2, nothing
computed), --svg with --json writes its file, and each file written is said on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from documents import event

RUN = ["run", "3*a + 2*b*b", "--a", "1,2", "--b", "3,4", "--grad", "ones"]
OPTIONS = ["--svg", "--html", "--dot", "--save"]


def refused_before_torch(argv: list[str]) -> tuple[str, str]:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from vjp_explorer.cli import app\n"
        f"r = CliRunner().invoke(app, {argv!r})\n"
        "print(r.exit_code, 'torch' in sys.modules, 'sympy' in sys.modules)\n"
        "print(r.stderr, end='')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    first, _, err = out.stdout.partition("\n")
    return first, err


@pytest.mark.parametrize("option", OPTIONS)
def test_a_missing_folder_fails_fast_before_any_computation(tmp_path, option):
    path = tmp_path / "nope" / ("out.npz" if option == "--save" else "out")
    first, err = refused_before_torch([*RUN, option, str(path)])
    assert first == "2 False False", err
    assert err.startswith(f"error: {option} {path}: the folder") and "does not exist" in err


@pytest.mark.parametrize("option", OPTIONS)
def test_a_folder_in_the_files_place_fails_fast(vjp, tmp_path, option):
    folder = tmp_path / "x.npz"
    folder.mkdir()
    r = vjp(*RUN, option, str(folder))
    assert r.exit_code == 2 and "is a folder" in r.stderr and r.stdout == ""


def test_snippet_files_are_checked_before_the_snippet_runs(tmp_path):
    first, err = refused_before_torch(["run", "seed000_ex1", "--dot", str(tmp_path / "nope" / "g.dot")])
    assert first == "2 False False" and "does not exist" in err


def test_every_file_is_written_and_said_on_stderr_with_json_too(vjp, tmp_path):
    files = {opt: tmp_path / name for opt, name in zip(OPTIONS, ["r.svg", "r.html", "r.dot", "r.npz"], strict=True)}
    r = vjp(*RUN, "--json", *[x for opt, p in files.items() for x in (opt, str(p))])
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)  # stdout holds the JSON alone
    said = r.stderr.splitlines()
    for opt, path in files.items():
        assert path.stat().st_size > 0, opt
        assert any(line.startswith(f"wrote {path} (") for line in said), (opt, said)
    assert (
        files["--svg"].read_text().lstrip().startswith("<svg") and "requires_grad=True" in files["--html"].read_text()
    )
    assert "digraph" in files["--dot"].read_text()
    # the saved grads are the JSON's, and 4b·v + 3a's 3 (by hand): d(2b²)/db = 4b
    with np.load(files["--save"]) as saved:
        assert saved["grads/b"].tolist() == event(d)["grads"]["b"] == [12.0, 16.0]


def test_a_snippet_refuses_svg_with_json_clearly(vjp, tmp_path):
    r = vjp("run", "seed000_ex1", "--json", "--svg", str(tmp_path / "s.svg"))
    assert r.exit_code == 2 and "--svg and --html" in r.stderr and "with --json" in r.stderr
    assert not (tmp_path / "s.svg").exists()


def test_a_file_that_cannot_be_made_is_refused_before_any_work_even_for_root(vjp):
    """access() says yes to root in /proc: the JSON went out with exit_code 0, then the run exited 2."""
    res = vjp("run", "x*2", "--x", "1,2", "--grad", "ones", "--json", "--svg", "/proc/vjp-nowhere.svg")
    assert res.exit_code == 2 and res.stdout == "" and "cannot be written" in res.stderr
