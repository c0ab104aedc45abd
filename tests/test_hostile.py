"""The front door under attack: every hostile input is a clear exit-2 error, fast, with no traceback.

The corpus is in tests/hostile_corpus.py. Each run goes through the real CLI (in
process) and must: exit 2; say what is wrong on stderr (a key phrase is checked);
leave stdout empty; never show a traceback; finish within a few seconds (a hang
guard, not a benchmark).
"""

from __future__ import annotations

import json
import re
import time

import pytest
import sympy  # noqa: F401  - imported up front so that no case pays for the first import
import torch  # noqa: F401

from hostile_corpus import BAD_INPUT, FILE_CASES, OK_CASES, STDIN, TERMINAL, TERMINAL_FILES

SECONDS = 20.0  # per case; generous, so a loaded machine (load 15 on 2 cores) does not fail it, but a hang does


def timed(vjp, *args, input=None):
    t0 = time.perf_counter()
    r = vjp(*args, input=input)
    return r, time.perf_counter() - t0


def assert_clean(r, elapsed):
    """No traceback, no exception escaping the CLI, no hang."""
    both = r.stdout + r.stderr
    assert "Traceback" not in both, both
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert elapsed < SECONDS, f"took {elapsed:.1f} s"


def assert_bad_input(r, elapsed, phrase):
    assert_clean(r, elapsed)
    assert r.exit_code == 2, (r.exit_code, r.stdout[-2000:], r.stderr[-2000:])
    assert phrase in r.stderr, r.stderr[-3000:]
    assert r.stdout == "", r.stdout[-2000:]
    if r.stderr.startswith("error:"):
        # one paragraph: message, marker, hint; no blank lines, no terminal escapes
        assert "\n\n" not in r.stderr.strip(), r.stderr
        assert "\x1b" not in r.stderr and "\u202e" not in r.stderr


def test_corpus_is_big_enough():
    from hostile_corpus import ESCAPES, UNICODE

    assert len(BAD_INPUT) + len(FILE_CASES) >= 80
    assert len(ESCAPES) >= 40 and len(UNICODE) >= 20


@pytest.mark.parametrize(("cid", "args", "phrase"), BAD_INPUT)
def test_bad_input_is_a_clear_error(vjp, cid, args, phrase):
    r, elapsed = timed(vjp, "run", *args, input=STDIN.get(cid))
    assert_bad_input(r, elapsed, phrase)


@pytest.mark.parametrize(("args", "phrase"), OK_CASES)
def test_hostile_looking_but_legal_input_runs(vjp, args, phrase):
    r, elapsed = timed(vjp, "run", *args)
    assert_clean(r, elapsed)
    assert r.exit_code == 0, r.stderr
    assert phrase in r.stdout


def test_markup_in_program_is_literal_in_json(vjp):
    prog = "x*2 # [/red] [bold]not bold[/bold]"
    r, elapsed = timed(vjp, "run", prog, "--x", "1", "--json")
    assert_clean(r, elapsed)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["program"] == prog


@pytest.mark.parametrize(
    "args",
    [
        ["__import__('os')", "--x", "1"],
        ["x*2", "--x", "1,2,,3"],
        ["x*2", "--x", "1,2,3", "--grad", "1,2"],
        ["x*y", "--x", "zeros(100000,1)", "--y", "zeros(1,100000)", "--grad", "ones"],
        ["x*2", "--x", "1", "--x", "2"],
    ],
    ids=["escape", "value", "grad-shape", "broadcast", "option"],
)
def test_errors_leave_json_stdout_empty(vjp, args):
    r, elapsed = timed(vjp, "run", *args, "--json")
    assert_bad_input(r, elapsed, "")


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["__import__('os').system('id')", "--x", "1"], "'__import__'"),
        (["x.__class__", "--x", "1"], "'__class__' is not allowed"),
        (["\uff4c\uff4f\uff47(x)", "--x", "1"], "did you mean 'l'?"),
        (["x*y", "--x", "zeros(100000,1)", "--y", "zeros(1,100000)", "--grad", "ones"], "shape [100000, 100000]"),
        (["x*2", "--x", "[/red]"], "[/red]"),
    ],
    ids=["escape", "dunder", "fullwidth", "broadcast", "markup"],
)
def test_explain_refuses_the_same_input(vjp, args, phrase):
    r, elapsed = timed(vjp, "explain", *args)
    assert_bad_input(r, elapsed, phrase)


def _underlined(stderr: str) -> str:
    """The text above the ^^^ marker's carets."""
    lines = stderr.splitlines()
    k = next(i for i, line in enumerate(lines) if re.fullmatch(r"\s*\^+", line))
    m = re.search(r"\^+", lines[k])
    assert m is not None
    return lines[k - 1][m.start() : m.end()]


@pytest.mark.parametrize(
    ("args", "under"),
    [
        (["x \u2212 1", "--x", "1"], "\u2212"),
        (["a + b*\uff4c", "--a", "1", "--b", "1"], "\uff4c"),
        (["x.__class__", "--x", "1"], "x.__class__"),
        (["y = x\nz = y + 'oops'", "--x", "1"], "'oops'"),
        (["x*9**9**9", "--x", "1"], "9**9**9"),
        (["x*2", "--x", "1,2,,3"], ","),
        (["x*2", "--x", "[[1,2],[3]]"], "[3]"),
        (["x*2\x1b[2J", "--x", "1"], "\u241b"),  # ESC shown as the visible symbol, not sent
        (["x*" + "-" * 100 + "x", "--x", "1"], "-"),
    ],
    ids=["minus", "fullwidth", "dunder", "string", "overflow", "double-comma", "ragged", "escape", "unary-chain"],
)
def test_marker_points_at_the_offending_span(vjp, args, under):
    r, elapsed = timed(vjp, "run", *args)
    assert_bad_input(r, elapsed, "")
    assert _underlined(r.stderr) == under, r.stderr


def test_parser_prints_no_python_warnings():
    # CPython warns on stderr about '1if x' and '"\\d"'; the parser turns those into its own errors
    import warnings

    from vjp_explorer.errors import VjpError
    from vjp_explorer.language.parser import parse_program

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for src in ["x*1if x else 2", "y = x\nz = '\\d'", "0x1for"]:
            with pytest.raises(VjpError):
                parse_program(src)
    assert [str(w.message) for w in caught] == []


# ---------------------------------------------------------------------------- expression files
@pytest.mark.parametrize(("content", "phrase"), FILE_CASES.values(), ids=FILE_CASES.keys())
def test_malformed_expression_file(vjp, tmp_path, content, phrase):
    path = tmp_path / "case.toml"
    path.write_bytes(content)
    r, elapsed = timed(vjp, "run", "--file", str(path), "--grad", "ones")
    assert_bad_input(r, elapsed, phrase)


def test_expression_file_is_a_directory(vjp, tmp_path):
    r, elapsed = timed(vjp, "run", "--file", str(tmp_path))
    assert_bad_input(r, elapsed, "is a directory")


def test_expression_file_missing(vjp, tmp_path):
    r, elapsed = timed(vjp, "run", "--file", str(tmp_path / "nope.toml"))
    assert_bad_input(r, elapsed, "no such file")


def test_expression_file_and_program_clash(vjp, tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text('program = "x*2"\n[inputs]\nx = 1\n')
    r, elapsed = timed(vjp, "run", "x*3", "--file", str(path))
    assert_bad_input(r, elapsed, "not both")


# ---------------------------------------------------------------------------- nothing reaches the terminal raw
# C0 controls but the newline, DEL, C1 controls, bidi embeddings/overrides/isolates, line separators
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def assert_nothing_raw(r):
    for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
        m = _RAW.search(text)
        assert m is None, (name, ascii(m.group(0)), text[max(0, m.start() - 60) : m.end() + 60])


@pytest.mark.parametrize(("args", "code"), TERMINAL)
def test_text_from_outside_is_made_visible(vjp, args, code):
    r, elapsed = timed(vjp, *args)
    assert_clean(r, elapsed)
    assert r.exit_code == code, (r.exit_code, r.stderr)
    assert_nothing_raw(r)


@pytest.mark.parametrize(("content", "code"), TERMINAL_FILES.values(), ids=TERMINAL_FILES.keys())
@pytest.mark.parametrize("cmd", ["run", "explain"])
def test_an_expression_files_words_are_made_visible(vjp, tmp_path, content, code, cmd):
    path = tmp_path / "evil.toml"
    path.write_text(content)
    for json_ in ([], ["--json"]):
        r, elapsed = timed(vjp, cmd, *(["--file"] if cmd == "run" else []), str(path), *json_)
        assert_clean(r, elapsed)
        assert r.exit_code == code, (r.exit_code, r.stderr)
        assert_nothing_raw(r)
        if json_ and code == 0:
            assert r.stdout.isascii() and json.loads(r.stdout)["title"].startswith("T\x1b]0;pwned")


def test_title_shows_its_escapes_visibly(vjp, tmp_path):
    path = tmp_path / "evil.toml"
    path.write_text('title = "T\\u001b[2J \\u202eevil"\nprogram = "y = x*2"\n[inputs]\nx = 1\n')
    r = vjp("explain", str(path))
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0] == "T\u241b[2J \ufffdevil"


# ---------------------------------------------------------------------------- nothing user-written is evaluated
SRC = __import__("pathlib").Path(__file__).resolve().parents[1] / "src" / "vjp_explorer"
_DYNAMIC_NAMES = {"eval", "exec", "compile", "__import__", "breakpoint"}
_PARSING_CALLS = {"sympify", "parse_expr", "lambdify", "parse_latex"}


def test_source_never_calls_eval_exec_or_string_parsers():
    # static guard: the only parse of user text is ast.parse; no eval/exec/compile,
    # no sympify/parse_expr/lambdify, no numexpr anywhere in the package
    import ast

    problems = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if "examples/snippets/" in rel or rel.startswith("confined/"):
            continue  # data, and the confined child: the one place a snippet runs as Python (after confinement)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # the trusted door's run_cell (`%%vjp`: the user's own cell, in the user's own kernel) execs, as
        # `vjp check` imports the user's module; only there, only exec and compile
        door = [
            range(f.lineno, (f.end_lineno or f.lineno) + 1)
            for f in ast.walk(tree)
            if rel == "trusted.py" and isinstance(f, ast.FunctionDef) and f.name == "run_cell"
        ]
        for node in ast.walk(tree):
            where = f"{path.relative_to(SRC)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call):
                f = node.func
                trusted = any(node.lineno in r for r in door) and isinstance(f, ast.Name)
                if trusted and f.id in ("exec", "compile"):
                    continue
                if isinstance(f, ast.Name) and f.id in _DYNAMIC_NAMES | _PARSING_CALLS:
                    problems.append(f"{where}: {f.id}()")
                if isinstance(f, ast.Attribute) and f.attr in _PARSING_CALLS:
                    problems.append(f"{where}: .{f.attr}()")
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(m and m.split(".")[0] == "numexpr" for m in mods):
                    problems.append(f"{where}: imports numexpr")
    assert not problems, problems
    runner = (SRC / "confined" / "runner.py").read_text(encoding="utf-8")
    assert "exec(code, namespace)" in runner  # the exec of a snippet lives there, and nowhere else
    trusted = (SRC / "trusted.py").read_text(encoding="utf-8")
    assert trusted.count("exec(") == 1  # and the trusted door's one exec, of a notebook cell (run_cell)


def test_user_text_never_reaches_an_evaluator(vjp, monkeypatch):
    # dynamic guard: every string handed to eval/exec/compile (other than ast.parse's
    # AST-only compile) or to sympy's string parser is checked for the user's names
    import ast
    import builtins

    import sympy.parsing.sympy_parser as sympy_parser

    sentinel = "zqsentinel"
    seen: list[str] = []

    def spy(name, real, ok=lambda *a, **k: False):
        def wrapper(*args, **kwargs):
            if not ok(*args, **kwargs) and any(isinstance(a, str) and sentinel in a for a in args):
                seen.append(name)
            return real(*args, **kwargs)

        return wrapper

    def ast_only(source, filename, mode, flags=0, *a, **k):
        return bool(flags & ast.PyCF_ONLY_AST)

    monkeypatch.setattr(builtins, "eval", spy("eval", builtins.eval))
    monkeypatch.setattr(builtins, "exec", spy("exec", builtins.exec))
    monkeypatch.setattr(builtins, "compile", spy("compile", builtins.compile, ast_only))
    monkeypatch.setattr(sympy_parser, "parse_expr", spy("parse_expr", sympy_parser.parse_expr))
    prog = f"h = 3*{sentinel} + 2*{sentinel}*{sentinel} + log({sentinel})\nout = h.sum()"
    for cmd in ("run", "explain"):
        r, elapsed = timed(vjp, cmd, prog, f"--{sentinel}", "1,2,3")
        assert_clean(r, elapsed)
        assert r.exit_code == 0, r.stderr
    assert seen == []


# ---------------------------------------------------------------------------- a check that must not false-alarm
@pytest.mark.parametrize(
    "args",
    [
        ["exp(x) - exp(x) + x", "--x", "20"],  # per element
        ["exp(x) - exp(x) + x", "--x", "full(30000, 20)", "--grad", "ones"],  # the elementwise route
        ["y = exp(x)\nz = x + y\nout = z - exp(x)", "--x", "20,21", "--grad", "ones"],  # across statements
    ],
    ids=["per-element", "elementwise", "statements"],
)
def test_terms_that_cancel_are_weighed_as_written(vjp, args):
    # sympy cancels exp(x) - exp(x) as it builds; autograd adds both 4.9e8 terms in float32, an error
    # of about 1 in a derivative of 1: the allowance is sized from the program as written
    r, elapsed = timed(vjp, "run", *args)
    assert_clean(r, elapsed)
    assert r.exit_code == 0, r.stdout[-1500:]


def test_sizing_as_written_keeps_the_sympy_budget_and_falls_back():
    import sympy as sp

    from vjp_explorer.engine import symbolic as S
    from vjp_explorer.engine.sizing import chain_size

    def out_of_time():
        raise S.SymbolicTimeout()

    with pytest.raises(S.SymbolicTimeout):  # the budget's alarm is not mistaken for a failed build
        S.as_written(out_of_time, [sp.Integer(1)])()
    assert S.as_written(lambda: 1 / 0, [sp.Integer(1)])() == [1]  # any other failure: the evaluated form
    x = sp.Symbol("x")
    written = S.as_written(lambda: [sp.exp(x) - sp.exp(x) + x], [x])()[0]
    assert written != x and chain_size(written, x).subs(x, 0) == 3  # |exp| + |-exp| + 1 at x = 0
