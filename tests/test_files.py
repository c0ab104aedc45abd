"""Expression files: every bundled file runs through `run --file` and `explain`; format errors name the key."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from documents import event, inputs
from vjp_explorer.language.files import bundled_examples

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "expressions").glob("*.toml"))


def test_the_seed_examples_are_all_there():
    names = {f.stem for f in FILES}
    seeds = {n for n in names if n.startswith("seed_")}
    assert len(seeds) >= 12, seeds
    for f in FILES:
        if f.stem.startswith("seed_"):
            text = f.read_text()
            source = tomllib.loads(text)["source"]
            # says which document it comes from, in words: not a path of this repository a pip user lacks
            assert "shared/" not in source and ".txt" not in source and len(source.split()) >= 4, f
            assert "[expect]" in text, f  # and the numbers it printed


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_file_runs_and_agrees(vjp, path):
    r = vjp("run", "--file", str(path), "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    for name, check in event(d)["checks"].items():
        # finite differences have no reference where the output itself is infinite (log at 0): skipped, saying so
        fd_skipped = name == "finite_difference" and check["status"] == "skipped" and "the output is" in check["reason"]
        # nor the adjoint identity, whose sums are not finite there
        jvp_skipped = name == "jvp" and check["status"] == "skipped" and "not finite" in check["reason"]
        assert check["status"] == "agree" or fd_skipped or jvp_skipped, (name, check)
    if "[expect]" in path.read_text():
        assert event(d)["checks"]["expected"]["status"] == "agree"


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_file_explains(vjp, path):
    r = vjp("explain", str(path), "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    ex = d["explain"]
    assert ex["ledger_source"] == "sympy"
    # the ledger's sums are the grads, element by element
    for leaf, entries in ex["ledger"].items():
        flat = _flat(event(d)["grads"][leaf])
        assert len(entries) == len(flat)
        for e, g in zip(entries, flat, strict=True):
            if isinstance(g, str) or isinstance(e["sum"], str):
                continue  # non-finite: compared by the symbolic check
            assert e["sum"] == pytest.approx(g, rel=1e-4, abs=1e-5), (leaf, e["element"])
    r = vjp("explain", str(path))
    assert r.exit_code == 0, r.stderr
    assert "ledger" in r.stdout


def _flat(x):
    if isinstance(x, list):
        return [y for item in x for y in _flat(item)]
    return [x]


def test_the_loop_example_reports_its_iterations(vjp):
    d = json.loads(vjp("run", "--file", str(ROOT / "expressions/seed_loop.toml"), "--json").stdout)
    assert d["control"][0]["kind"] == "while" and d["control"][0]["count"] == 10
    k = d["control"][0]["count"] + 1
    assert event(d)["grads"]["x"] == pytest.approx([2**k * 0.1, 2**k * 1.0, 2**k * 0.0001], rel=1e-6)
    assert any(n["code"] == "control_flow" and "10 times" in n["text"] for n in event(d)["notes"])


def test_command_line_overrides_the_file(vjp):
    path = str(ROOT / "expressions/seed_3vector.toml")
    d = json.loads(vjp("run", "--file", path, "--grad", "1,0,0", "--json").stdout)
    assert event(d)["grads"]["a"] == [3.0, 0.0, 0.0]
    # the file's printed numbers were for its own v: not checked, and said so
    assert "expected" not in event(d)["checks"] and d["exit_code"] == 0
    assert any(n["code"] == "expect_skipped" for n in event(d)["notes"])
    d = json.loads(vjp("run", "--file", path, "--b", "0,0,0", "--grad", "1,1,1", "--json").stdout)
    assert event(d)["grads"]["b"] == [0.0, 0.0, 0.0]


def test_examples_lists_bundled_files(vjp):
    r = vjp("examples", "--json")
    assert r.exit_code == 0, r.stderr
    items = json.loads(r.stdout)
    snippets = sorted((ROOT / "expressions" / "snippets").glob("*.py"))
    assert {i["name"] for i in items} == {f.stem for f in FILES} | {f.stem for f in snippets}
    assert all(i["title"] and i["title"] != "(unreadable)" for i in items)
    assert all(i["title"].startswith("snippet: ") for i in items if i["path"].endswith(".py"))
    assert len(bundled_examples()) == len(FILES) + len(snippets) == len(FILES) + 8


def test_bundled_name_resolves(vjp):
    r = vjp("explain", "seed_scalar", "--json")
    assert r.exit_code == 0, r.stderr
    assert event(json.loads(r.stdout))["grads"] == {"a": 3.0, "b": 4.0, "c": 10.0}


def write(tmp_path, text, name="f.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


BASE = 'program = "x * 2"\ngrad = [1, 1]\n[inputs]\nx = [1, 2]\n'


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("colour = 1\n" + BASE, ["unknown key 'colour'"]),
        ("programme = 'x'\n" + BASE, ["unknown key 'programme'", "'program'"]),
        ("grad = [1, 1]\n[inputs]\nx = [1, 2]\n", ["'program' is missing"]),
        ("program = 3\n[inputs]\nx = 1\n", ["key 'program'", "got an integer"]),
        ('program = "x"\n', ["[inputs]"]),
        ('program = "x*2"\n[inputs]\nx = true\n', ["inputs.x", "boolean"]),
        ('program = "x*2"\n[inputs]\nx = "1,,2"\n', ["inputs.x", "missing"]),
        ('program = "x*2"\ndtype = "float16"\n[inputs]\nx = 1\n', ["key 'dtype'"]),
        ('program = "x*2"\nseed = "s"\n[inputs]\nx = 1\n', ["key 'seed'"]),
        ('program = "x*2"\n[inputs]\nx = 1\n[expect]\ngradz = 1\n', ["expect.gradz"]),
        ('program = "x*2\n', ["not valid TOML"]),
        ('program = "().__class__"\n[inputs]\nx = 1\n', ["__class__"]),
        (BASE + "[expect]\nloops = [1234567890123456789012345678901]\n", ["expect.loops", "2**53", "f.toml"]),
        (BASE + "[expect]\nloops = [-1]\n", ["expect.loops", "got -1"]),
    ],
)
def test_file_errors_name_the_key(vjp, tmp_path, text, phrases):
    path = write(tmp_path, text)
    r = vjp("run", "--file", path)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    for p in phrases:
        assert p in r.stderr, r.stderr


def test_file_that_is_missing_a_directory_or_not_utf8(vjp, tmp_path):
    r = vjp("run", "--file", str(tmp_path / "nope.toml"))
    assert r.exit_code == 2 and "no such file" in r.stderr
    r = vjp("run", "--file", str(tmp_path))
    assert r.exit_code == 2 and "directory" in r.stderr
    p = tmp_path / "latin1.toml"
    p.write_bytes(b'program = "x"  # caf\xe9\n')
    r = vjp("run", "--file", str(p))
    assert r.exit_code == 2 and "UTF-8" in r.stderr


def test_file_too_large_and_too_deep(vjp, tmp_path):
    p = tmp_path / "big.toml"
    p.write_text(BASE + "# " + "x" * 1_100_000 + "\n")
    r = vjp("run", "--file", str(p))
    assert r.exit_code == 2 and "bytes" in r.stderr
    deep = write(tmp_path, 'program = "x"\n[inputs]\nx = ' + "[" * 5000 + "]" * 5000 + "\n", "deep.toml")
    r = vjp("run", "--file", deep)
    assert r.exit_code == 2 and "nested too deeply" in r.stderr, r.stderr


def test_a_utf8_byte_order_mark_is_accepted(vjp, tmp_path):
    p = tmp_path / "bom.toml"
    p.write_bytes(b'\xef\xbb\xbfprogram = "x*2"\ngrad = "ones"\n[inputs]\nx = [1, 2]\n')
    r = vjp("run", "--file", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert event(json.loads(r.stdout))["grads"]["x"] == [2.0, 2.0]


def test_bad_expect_values_and_file_limits(vjp, tmp_path):
    path = write(tmp_path, BASE + '[expect]\ngrads.x = "abc"\n')
    r = vjp("run", "--file", path)
    assert r.exit_code == 2 and "expect.grads.x" in r.stderr and "f.toml" in r.stderr, r.stderr
    path = write(tmp_path, BASE + "[expect]\ngrads.x = [1, 2, 3]\n")
    r = vjp("run", "--file", path)
    assert r.exit_code == 2 and "f.toml" in r.stderr and "3 number(s)" in r.stderr, r.stderr
    big = tmp_path / "big.toml"
    big.write_text(BASE + "# " + "x" * 1_100_000 + "\n")
    assert vjp("run", "--file", str(big)).exit_code == 2
    r = vjp("run", "--file", str(big), "--limit", "file_bytes=2000000", "--json")
    assert r.exit_code == 0, r.stderr


def test_random_grad_is_reproducible_from_the_seed_shown(vjp):
    a = json.loads(vjp("run", "x*2", "--x", "randn(3)", "--grad", "randn(3)", "--json").stdout)
    b = json.loads(
        vjp("run", "x*2", "--x", "randn(3)", "--grad", "randn(3)", "--seed", str(a["seed"]), "--json").stdout
    )
    assert event(a)["v"][0]["value"] == event(b)["v"][0]["value"] and inputs(a) == inputs(b)
    c = json.loads(vjp("run", "x*2", "--x", "1,2,3", "--grad", "randn(3)", "--json").stdout)
    assert c["seed"] is not None
