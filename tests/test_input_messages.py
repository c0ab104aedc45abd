"""Messages about input: file nesting limits, errors that name the file's key, `vjp explain WORD`, output names.

Each group pins one defect an external tester found:
1. `file_depth` bounds what the README says, exactly (and deep hostile files are still refused early);
2. an error about a value from an expression file names the file and the key, not the option;
3. `vjp explain WORD` for a file or example that does not exist says so and names the bundled examples;
4. a bare final expression that cannot be named y is named out (or the next free name), with a note.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from documents import event
from test_cli import bad as _bad
from test_cli import ok
from vjp_explorer.language.files import read_toml

ROOT = Path(__file__).resolve().parents[1]


def bad(r, *phrases, code=2):
    """test_cli's bad(), and the message is one paragraph that starts with 'error: '."""
    _bad(r, *phrases, code=code)
    assert r.stderr.startswith("error: "), r.stderr
    assert "\n\n" not in r.stderr.strip(), r.stderr  # one paragraph
    return r


def write(tmp_path, text, name="f.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def nest(n: int) -> str:
    return "[" * n + "1" + "]" * n


def tables(n: int) -> str:
    """n inline tables, one in the other: {a = {a = ... 1}}."""
    return "{a = " * n + "1" + "}" * n


# ---------------------------------------------------------------------------- 1. file_depth


EXPECT = 'program = "x * 2"\ngrad = "ones"\n[inputs]\nx = [1, 2]\n[expect]\ngrads.x = [2, 2]\n'


def test_file_depth_is_the_nesting_of_tables_and_arrays_around_the_values(vjp, tmp_path):
    # [expect] is level 1 and its grads.x level 2: the file needs file_depth >= 2, exactly
    path = write(tmp_path, EXPECT)
    d = json.loads(ok(vjp("run", "--file", path, "--limit", "file_depth=2", "--json")).stdout)
    assert event(d)["checks"]["expected"]["status"] == "agree"
    r = bad(vjp("run", "--file", path, "--limit", "file_depth=1"), path, "key 'expect.grads'", "more than 1 deep")
    assert "--limit file_depth=N" in r.stderr and "file_depth" in r.stderr


def test_a_value_s_own_lists_do_not_count_toward_file_depth(vjp, tmp_path):
    # [inputs] is level 1; the matrix's two lists are value_depth's, as on the command line
    path = write(tmp_path, 'program = "W * 2"\ngrad = "ones"\n[inputs]\nW = [[1, 2], [3, 4]]\n')
    d = json.loads(ok(vjp("run", "--file", path, "--limit", "file_depth=1", "--json")).stdout)
    assert event(d)["grads"]["W"] == [[2.0, 2.0], [2.0, 2.0]]


@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_the_default_file_depth_refuses_level_17_and_names_the_key(vjp, tmp_path, cmd):
    # inputs is level 1, z level 2, then one level per inline table: 16 tables reach level 17
    deep = write(tmp_path, f'program = "x*2"\n[inputs]\nx = 1\nz = {tables(16)}\n', "deep.toml")
    args = ["--file", deep] if cmd == "run" else [deep]
    r = bad(vjp(cmd, *args), "deep.toml: key 'inputs.z.a", "more than 16 deep", "--limit file_depth=N")
    assert "file_depth" in r.stderr
    # one level less is within the limit: refused for its type, not its depth
    within = write(tmp_path, f'program = "x*2"\n[inputs]\nx = 1\nz = {tables(15)}\n', "within.toml")
    r = bad(vjp("run", "--file", within), "key 'inputs.z'", "got a table")
    assert "deep" not in r.stderr
    # and a raised limit lets the deeper file through to the same type check
    r = bad(vjp("run", "--file", deep, "--limit", "file_depth=17"), "key 'inputs.z'", "got a table")


def test_file_depth_refusal_in_the_library_too(tmp_path):
    from vjp_explorer.errors import LimitError
    from vjp_explorer.limits import DEFAULT_LIMITS

    p = tmp_path / "f.toml"
    p.write_text(f"title = {nest(16)}\n")  # the array title is level 1, its innermost list level 16
    assert read_toml(p)["title"]
    p.write_text(f"title = {nest(17)}\n")
    with pytest.raises(LimitError, match="key 'title"):
        read_toml(p)
    assert read_toml(p, DEFAULT_LIMITS.with_overrides({"file_depth": "17"}))["title"]


def test_value_depth_in_a_file_names_the_key_and_the_limit(vjp, tmp_path):
    path = write(tmp_path, f'program = "x*2"\ngrad = "ones"\n[inputs]\nx = {nest(33)}\n')
    r = bad(vjp("run", "--file", path), "key 'inputs.x'", "nested more than 32 deep", "--limit value_depth=N")
    assert "[0]" not in r.stderr  # the value is named, not its innermost element


def test_brackets_deeper_than_both_limits_are_refused_before_parsing(vjp, tmp_path):
    # 48 = file_depth + value_depth: parsed, then refused by the exact value_depth check
    r = bad(vjp("run", "--file", write(tmp_path, f'program = "x*2"\n[inputs]\nx = {nest(48)}\n')))
    assert "value_depth" in r.stderr and "line 3" not in r.stderr
    # 49: refused by the scan before tomllib, at the bracket, naming both limits
    path = write(tmp_path, f'program = "x*2"\n[inputs]\nx = {nest(49)}\n', "deeper.toml")
    r = bad(vjp("run", "--file", path), "nested too deeply", "more than 48", "line 3", "--limit file_depth=N")
    assert "--limit value_depth=N" in r.stderr
    assert "^" in r.stderr  # the marker points at the bracket


def test_hostile_nesting_past_a_raised_limit_is_still_refused(vjp, tmp_path):
    path = write(tmp_path, 'program = "x*2"\n[inputs]\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    bad(vjp("run", "--file", path), "nested too deeply")
    # with the limit raised past what tomllib can recurse, its RecursionError becomes the same kind of message
    r = bad(vjp("run", "--file", path, "--limit", "file_depth=100000"), "nested too deeply", "tomllib")
    assert "file_depth" in r.stderr


def test_brackets_in_multiline_strings_do_not_count(vjp, tmp_path):
    # an escaped quote in a """string""", and a """string""" that ends in extra quotes: neither ends the
    # string early, so the brackets after them (inside strings) are not nesting
    brackets = "[" * 60
    text = (
        f'description = """x\\""" {brackets} """\n'
        'source = """quoted "word""""\n'
        f'title = "{brackets}"\n'
        'program = "x*2"\ngrad = "ones"\n[inputs]\nx = [1, 2]\n'
    )
    path = write(tmp_path, text)
    assert read_toml(Path(path))["source"] == 'quoted "word"'
    ok(vjp("run", "--file", path, "--json"))


# ---------------------------------------------------------------------------- 2. errors name the file's key

BASE = 'program = "x * 2"\n[inputs]\nx = [1, 2]\n'


@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_a_grad_of_the_wrong_shape_from_the_file_names_the_file_and_key(vjp, tmp_path, cmd):
    path = write(tmp_path, "grad = [1, 2, 3]\n" + BASE)
    args = ["--file", path] if cmd == "run" else [path]
    r = bad(vjp(cmd, *args), f"{path}: key 'grad': v has shape [3] but the output 'y' has shape [2]")
    first, marker = r.stderr.splitlines()[:2]
    assert "--grad" not in first
    assert marker == f"  {path}: key 'grad', column 1:"
    assert 'grad = "ones"' in r.stderr  # the hint says how to fix the file


def test_a_grad_from_the_command_line_still_names_the_option(vjp, tmp_path):
    path = write(tmp_path, "grad = [1, 1]\n" + BASE)
    r = bad(vjp("run", "--file", path, "--grad", "1,2,3"), "--grad: v has shape [3]", "  --grad, column 1:")
    assert "key 'grad'" not in r.stderr


@pytest.mark.parametrize(
    ("line", "phrases"),
    [
        ('grad = "1,,2"', ["key 'grad': an item is missing", "key 'grad', column 3:"]),
        ('grad = [1, "a"]', ["key 'grad': 'a' is not a number"]),
        ('grad = "ones(3)"', ["key 'grad': v has shape [3]"]),
        ('grad = "randn(5)"', ["key 'grad': v has shape [5]"]),
        ("grad = [1e39, 1]", ["key 'grad': element 0 does not fit in float32"]),
        ('output = "z"', ["key 'output': the output 'z' is not a variable of the program"]),
        ("seed = -1", ["key 'seed'", "got -1"]),
        ("seed = 9223372036854775808", ["key 'seed'"]),
        ("backward_calls = 0", ["key 'backward_calls'", "from 1 to 100"]),
        ("backward_calls = 101", ["key 'backward_calls'"]),
    ],
)
@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_file_values_are_named_by_their_key(vjp, tmp_path, cmd, line, phrases):
    path = write(tmp_path, line + "\n" + ("" if "grad" in line else 'grad = "ones"\n') + BASE)
    args = ["--file", path] if cmd == "run" else [path]
    r = bad(vjp(cmd, *args), *[f"{path}: {p}" if p.startswith("key") else p for p in phrases[:1]], *phrases[1:])
    first = r.stderr.splitlines()[0]
    for option in ("--grad", "--output", "--seed", "--backward-calls"):
        assert option not in first, first


def test_the_output_option_still_names_the_option(vjp, tmp_path):
    path = write(tmp_path, 'output = "y"\ngrad = "ones"\n' + BASE)
    r = bad(vjp("run", "--file", path, "--output", "w"), "--output: the output 'w' is not a variable")
    assert "key 'output'" not in r.stderr


def test_inputs_from_the_file_are_named_by_their_key(vjp, tmp_path):
    path = write(tmp_path, 'grad = "ones"\n' + BASE + "z = 1\n")
    r = bad(vjp("run", "--file", path), f"{path}: key 'inputs.z': a value was given for 'z'", "inputs are: x")
    assert "not an option" not in r.stderr  # nobody typed --z
    path = write(tmp_path, 'program = "x * 2"\ngrad = "ones"\n[inputs]\nx = [1e39, 1]\n', "big.toml")
    bad(vjp("run", "--file", path), f"{path}: key 'inputs.x': element 0 does not fit in float32")
    # the same value given on the command line is named as before
    r = bad(vjp("run", "--file", path, "--x", "1e39,1"), "--x: element 0")
    assert "key 'inputs.x'" not in r.stderr


def test_a_file_without_grad_for_a_vector_output_says_where_grad_goes(vjp, tmp_path):
    path = write(tmp_path, BASE)
    bad(vjp("run", "--file", path), f"Add grad = [...] in {path} (or --grad VALUES on the command line) with shape [2]")
    r = bad(vjp("run", "x*2", "--x", "1,2"), "Add --grad VALUES with shape [2]", "or --grad ones")
    assert "grad = " not in r.stderr


# ---------------------------------------------------------------------------- 3. vjp explain WORD


def test_explain_an_unknown_name_lists_the_bundled_examples(vjp):
    r = bad(vjp("explain", "nonexistent_name"), "'nonexistent_name' is neither an expression file nor")
    assert "No value for" not in r.stderr
    for name in ("seed_3vector", "softmax", "branch"):  # no close match: every bundled name is listed
        assert name in r.stderr
    assert "vjp explain nonexistent_name --nonexistent_name VALUE" in r.stderr  # the program reading, too


def test_explain_a_misspelt_example_suggests_the_closest(vjp):
    r = bad(vjp("explain", "seed_scalr"), "Did you mean", "'seed_scalar'")
    assert "softmax" not in r.stderr  # only the close ones
    bad(vjp("explain", "seed_scalr.toml"), "seed_scalr.toml: no such file", "'seed_scalar'")
    bad(vjp("run", "--file", "seed_scalr"), "no such file", "'seed_scalar'")


def test_explain_a_path_that_does_not_exist(vjp, tmp_path):
    missing = str(tmp_path / "nope")
    r = bad(vjp("explain", missing), f"{missing}: no such file", "seed_3vector")
    assert "syntax" not in r.stderr
    bad(vjp("explain", "./nope"), "./nope: no such file")
    bad(vjp("explain", "notes.txt"), "notes.txt: no such file", "seed_3vector")


def test_explain_reads_an_existing_file_without_the_toml_suffix(vjp, tmp_path):
    path = write(tmp_path, 'grad = "ones"\n' + BASE, "example")
    d = json.loads(ok(vjp("explain", path, "--json")).stdout)
    assert event(d)["grads"]["x"] == [2.0, 2.0]


@pytest.mark.parametrize(
    ("args", "grads"),
    [
        (["x", "--x", "1"], {"x": 1.0}),
        (["3*a", "--a", "1,2", "--grad", "ones"], {"a": [3.0, 3.0]}),
        (["x/2", "--x", "1"], {"x": 0.5}),
        (["x.T", "--x", "1,2", "--grad", "ones"], {"x": [1.0, 1.0]}),
        (["seed_scalar"], {"a": 3.0, "b": 4.0, "c": 10.0}),
        ([str(ROOT / "expressions/seed_scalar.toml")], {"a": 3.0, "b": 4.0, "c": 10.0}),
    ],
)
def test_explain_programs_and_examples_still_work(vjp, args, grads):
    d = json.loads(ok(vjp("explain", *args, "--json")).stdout)
    assert event(d)["grads"] == grads


def test_explain_a_program_without_values_is_still_read_as_a_program(vjp):
    bad(vjp("explain", "3*a"), "No value for 'a'")
    bad(vjp("explain", "x/2"), "No value for 'x'")
    bad(vjp("explain", "x.T"), "No value for 'x'")


# ---------------------------------------------------------------------------- 4. the output's name


def notes(d):
    return {n["code"]: n["text"] for n in event(d)["notes"]}


LOOP = "for i in range(2):\n    y = x*2\ny + 1"


@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_a_bare_expression_after_a_loop_that_assigns_y_is_named_out_and_says_so(vjp, cmd):
    d = json.loads(ok(vjp(cmd, LOOP, "--x", "1,2", "--grad", "ones", "--json")).stdout)
    assert event(d)["outputs"][0]["name"] == "out" and event(d)["outputs"][0]["value"] == [3.0, 5.0]
    text = notes(d)["output_named"]
    assert "'y + 1'" in text and "'out'" in text and "'y' is already a variable" in text
    assert event(d)["notes"][0]["code"] == "output_named"  # first: the other notes use the name
    assert d["intermediates"]["y"]["value"] == [2.0, 4.0]  # the loop's y is untouched


def test_the_note_shows_in_the_terminal(vjp):
    r = ok(vjp("run", LOOP, "--x", "1"))
    assert "vjp names it 'out'" in r.stdout


def test_the_same_rule_without_a_loop(vjp):
    d = json.loads(ok(vjp("run", "y = x*2; y + 1", "--x", "1", "--json")).stdout)
    assert event(d)["outputs"][0]["name"] == "out" and "output_named" in notes(d)


def test_all_first_names_taken(vjp):
    args = ["y + out + output + result", "--var", "y=1", "--var", "out=1", "--var", "output=1", "--var", "result=1"]
    d = json.loads(ok(vjp("run", *args, "--json")).stdout)
    assert event(d)["outputs"][0]["name"] == "y1"
    assert "'y', 'out', 'output' and 'result' are already variables" in notes(d)["output_named"]


def test_a_loop_variable_named_y_is_not_reused_for_the_output(vjp):
    d = json.loads(ok(vjp("run", "for y in range(2):\n    z = x*2\nz + 1", "--x", "1", "--json")).stdout)
    assert event(d)["outputs"][0]["name"] == "out" and "output_named" in notes(d)


@pytest.mark.parametrize(
    "args",
    [
        ["3*a", "--a", "1"],  # named y: nothing to say
        ["out = x*2", "--x", "1"],  # named by the program
        ["y = x*2; y + 1", "--x", "1", "--output", "y"],  # named with --output
        ["y = x*2\nout = y + 1", "--x", "1"],
    ],
)
def test_no_note_when_the_name_is_not_a_surprise(vjp, args):
    d = json.loads(ok(vjp("run", *args, "--json")).stdout)
    assert "output_named" not in notes(d)


def test_a_long_dotted_key_is_refused_before_tomllib(vjp, tmp_path):
    # tomllib is quadratic in the parts of a dotted key: 100,000 parts took minutes; refused in one pass
    import time

    path = write(tmp_path, 'program = "x*2"\ngrad = "ones"\n' + "a." * 100_000 + "a = 1\n[inputs]\nx = 1\n")
    start = time.perf_counter()
    bad(vjp("run", "--file", str(path)), "dotted key", "file_depth")
    assert time.perf_counter() - start < 5
    fine = write(tmp_path, 'program = "x*2"\nversion = "1.2.3.4"\n[inputs]\nx = 1.5\n', "fine.toml")
    assert read_toml(Path(fine))["inputs"]["x"] == 1.5  # dots in strings and numbers are no keys


@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_errors_in_a_files_program_name_the_file_and_key(vjp, tmp_path, cmd):
    path = write(tmp_path, 'program = "y = x*z"\ngrad = "ones"\n[inputs]\nx = [1.0]\n')
    r = bad(vjp(cmd, "--file", str(path)), "No value for 'z'", f"add z to [inputs] in {path}")
    assert f"{path}: key 'program', column 7" in r.stderr
    syntax = write(tmp_path, 'program = "y = x*(2"\n[inputs]\nx = 1\n', "syntax.toml")
    assert f"{syntax}: key 'program'" in bad(vjp(cmd, "--file", str(syntax)), "never closed").stderr
    inline = bad(vjp(cmd, "x*z", "--x", "1"), "No value for 'z'")  # no file: the options only
    assert "expression, column" in inline.stderr and "[inputs]" not in inline.stderr


def test_a_dtype_hint_for_a_file_names_its_key(vjp, tmp_path):
    path = write(tmp_path, 'program = "y = x*2"\ndtype = "float32"\ngrad = [1]\n[inputs]\nx = [1e39]\n')
    bad(vjp("run", "--file", str(path)), f'Use dtype = "float64" in {path} (or --dtype float64 on the command line)')
    given = bad(vjp("run", "--file", str(path), "--dtype", "float32"), "Use --dtype float64")  # the option's own
    assert "dtype = " not in given.stderr


@pytest.mark.parametrize("cmd", [["explain", "/dev/zero"], ["run", "--file", "/dev/zero"], ["explain", "/dev/urandom"]])
def test_a_device_without_end_is_refused_not_read_forever(vjp, cmd):
    bad(vjp(*cmd), "is a device, not a regular file")


def test_a_program_from_an_endless_stdin_is_refused(vjp):
    bad(vjp("run", "-", "--x", "1", input="x" * 50_000), "characters long", "program_chars")


def test_explain_of_a_path_or_of_nothing(vjp, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no expressions/ folder here
    bad(vjp("explain", "expressions/nope"), "no such file")
    bad(vjp("explain", ""), "empty")
    bad(vjp("explain", "x/2"), "No value for 'x'")  # a program: its error asks for the value


@pytest.mark.parametrize(
    ("program", "status", "words"),
    [
        ("X_exp = exp(X)\nX_exp / X_exp.sum()  # 这里应用了广播机制", 0, None),  # d2l's Chinese comment
        ("X * 2  # café", 0, None),
        ("X * 2  # a\u202eb", 2, "RIGHT-TO-LEFT OVERRIDE"),  # invisible, even in a comment
        ("X * 2  # a\x1b[31mb", 2, "control character"),
        ("X * é", 2, "LATIN SMALL LETTER E WITH ACUTE"),  # code stays ASCII
        ("Z = X * 2 + sum(X, dim=0)  # ok\nZ * X  # 注", 0, None),
    ],
)
def test_comments_may_hold_any_printable_character(vjp, program, status, words):
    r = vjp("run", program, "--X", "1,2", "--grad", "ones", "--json")
    assert r.exit_code == status, r.stderr
    if words:
        assert words in r.stderr
        assert "\x1b" not in r.stderr and "\u202e" not in r.stderr
