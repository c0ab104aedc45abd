"""Bad input at the edges of the contract (exit 2, one paragraph, nothing from outside reaching the terminal),
as an outside hunt found them: the user's code ending the process inside `vjp check`, its warnings, constants
and v that torch itself would refuse, output files that would overwrite the input or each other, limits the
snippet's process cannot start under, and the labels and worst elements every door writes one way."""

from __future__ import annotations

import json
import textwrap

import pytest

OPS = textwrap.dedent(
    """
    import sys
    import warnings

    import torch


    def exits(x):
        sys.exit(0)


    def exits3(x):
        sys.exit(3)


    class ExitsInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            sys.exit("bye \\x1b[31m")


    def warns(x):
        warnings.warn("\\x1b[31mwarned\\x07")
        sys.stderr.write("\\x1b[32mraw\\n")
        return x * 2


    def square(x):
        return x * x


    def powr(x, n):
        return x ** n


    class Five(torch.autograd.Function):  # y = 2x; its backward says 5
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 5
    """
)


@pytest.fixture
def ops(tmp_path):
    path = tmp_path / "edge_ops.py"
    path.write_text(OPS)
    return path


@pytest.mark.parametrize("name", ["exits", "exits3", "ExitsInBackward"])
def test_the_users_code_ending_the_process_is_a_usage_error(vjp, ops, name):
    for extra in ([], ["--json"]):
        r = vjp("check", f"{ops}:{name}", "--x", "1,2", *extra)
        assert r.exit_code == 2 and "called sys.exit(" in r.stderr and "nothing was checked" in r.stderr
        assert "\x1b" not in r.stderr and "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.filterwarnings("ignore::UserWarning")  # pytest records warnings; the process prints them to stderr
def test_warnings_and_stderr_of_the_users_code_are_shown_made_visible(vjp, ops):
    r = vjp("check", f"{ops}:warns", "--x", "1,2")
    assert r.exit_code == 0 and "␛[32mraw" in r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_constant_must_be_a_finite_number(vjp, ops, value):
    r = vjp("check", f"{ops}:powr", "--x", "1,2", "--const", f"n={value}")
    assert r.exit_code == 2 and "not a finite number" in r.stderr


def test_v_of_another_shape_is_refused_as_torch_refuses_it(vjp, ops):
    r = vjp("check", f"{ops}:square", "--x", "[[1,2],[3,4]]", "--grad", "1,2,3,4")
    assert r.exit_code == 2 and "shape [4]" in r.stderr and "[2, 2]" in r.stderr
    assert vjp("check", f"{ops}:square", "--x", "[[1,2],[3,4]]", "--grad", "[[1,2],[3,4]]").exit_code == 0


def test_check_names_no_option_it_lacks(vjp, ops):
    r = vjp("check", f"{ops}:square", "--x", "ones(100000,1000)")
    assert r.exit_code == 2 and "--limit" in r.stderr and "takes no --limit" in r.stderr


def test_worst_and_jacobian_labels_are_written_one_way(vjp, ops):
    doc = json.loads(vjp("check", f"{ops}:Five", "--x", "1,2,3", "--json").stdout)
    checks = doc["events"][0]["checks"]
    # grads 5 against 2 everywhere: each element is as far past its tolerance; the first is named
    assert checks["jtv"]["worst"] == "x[0]" and checks["finite_difference"]["worst"] == "x[0]"
    assert checks["jacobian"]["status"] == "disagree" and checks["jacobian"]["worst"].startswith("dy/dx[")
    (x,) = doc["events"][0]["inputs"]
    assert x["jacobian"]["value"] == [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    assert "replayed forward" in x["jacobian"]["method"]  # J of the forward, not the custom backward's rows


def test_an_output_file_is_never_the_input_nor_named_twice(vjp, tmp_path):
    prog = tmp_path / "prog.toml"
    prog.write_text('program = "x*2"\n[inputs]\nx = "1,2"\n')
    before = prog.read_text()
    r = vjp("run", str(prog), "--svg", str(prog))
    assert r.exit_code == 2 and "the file being run" in r.stderr and prog.read_text() == before
    out = tmp_path / "a.svg"
    r = vjp("run", "x*2", "--x", "1,2", "--grad", "ones", "--svg", str(out), "--html", str(out))
    assert r.exit_code == 2 and "also given to --svg" in r.stderr and not out.exists()


@pytest.mark.parametrize(
    ("limit", "floor"), [("snippet_memory_bytes=1", "250,000,000 or more"), ("snippet_open_files=1", "16 or more")]
)
def test_a_limit_the_snippets_process_cannot_start_under_is_refused(vjp, tmp_path, limit, floor):
    snippet = tmp_path / "s.py"
    snippet.write_text("print(1)\n")
    r = vjp("run", str(snippet), "--limit", limit)
    assert r.exit_code == 2 and floor in r.stderr and "Traceback" not in r.stdout + r.stderr


def test_an_option_given_as_a_variable_is_named_as_the_option(vjp):
    r = vjp("run", "x*2", "--x", "1", "--var", "seed=1")
    assert r.exit_code == 2 and "--seed is an option of its own" in r.stderr and "did you mean" not in r.stderr


def test_a_long_loop_costs_its_differences_by_its_steps(vjp):
    # 4 steps a pass, 2,000 passes: 8,000 steps of Python per evaluation; the differences would take minutes
    program = "for i in range(2000):\n    a = x * 1.0\n    b = a + 0.0\n    c = b * 1.0\n    x = c - 0.0\n"
    doc = json.loads(vjp("run", program, "--x", "1,2,3", "--grad", "ones", "--json", "--no-symbolic").stdout)
    fd = doc["events"][0]["checks"]["finite_difference"]
    assert fd["status"] == "skipped" and "steps" in fd["reason"]


def test_a_folder_to_read_that_is_not_there_is_refused(vjp, tmp_path):
    snippet = tmp_path / "s.py"
    snippet.write_text("print(1)\n")
    r = vjp("run", str(snippet), "--allow-read", str(tmp_path / "missing"))
    assert r.exit_code == 2 and "not a folder" in r.stderr


@pytest.mark.parametrize(("flag", "kept"), [((), True), (("--no-retain-graph",), False)])
def test_the_json_says_whether_the_calls_kept_the_graph(vjp, flag, kept):
    """json.md: retain_graph as the calls passed it; --no-retain-graph's calls did not (x + 1 saves nothing,
    so its second call runs: torch gives [2, 2])."""
    r = vjp("run", "x + 1", "--x", "1,2", "--grad", "ones", "--backward-calls", "2", *flag, "--json")
    assert r.exit_code == 0, r.output
    (event,) = json.loads(r.stdout)["events"]
    assert event["retain_graph"] is kept and event["grads"]["x"] == [2.0, 2.0]
    one = json.loads(vjp("run", "x + 1", "--x", "1,2", "--grad", "ones", "--json").stdout)["events"][0]
    assert one["retain_graph"] is False


def test_vjp_check_differences_a_sum_that_cancels_at_its_terms_size(vjp, tmp_path):
    """The door's own differences (its jacobian check) round at the size of x² in E[x²] − E[x]², as the
    judge's: the plain function read 'the custom backward is wrong: jacobian disagrees' (exit 3)."""
    path = tmp_path / "var.py"
    path.write_text("def var(x):\n    return (x ** 2).mean() - x.mean() ** 2\n")
    r = vjp("check", f"{path}:var", "--x", "10000,10001,10003", "--dtype", "float64")
    assert r.exit_code == 0, r.output
