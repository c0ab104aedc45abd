"""What a pasted source claims it printed or raised (snippet/source.py), against what ran.

Pure tests of the reading and comparing first (fast); then two runs through the confined child, rendered.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.confined.words import explain_error
from vjp_explorer.snippet import run_snippet
from vjp_explorer.snippet.source import (
    ClaimedError,
    Verdict,
    claimed_error,
    judge,
    output_like,
    parse,
    read_source,
    same_error,
    same_output,
)

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "<stdin>", line 1, in <module>',
    "RuntimeError: grad can be implicitly created only for scalar outputs",
]


def test_print_format_drift_is_not_a_mismatch():
    assert same_output(["tensor([ 1.,  2.])"], "tensor([1., 2.])\n")  # torch 0.4's spacing
    assert same_output(["tensor([ 0.7311,  0.8808])"], "tensor([0.7311, 0.8808], grad_fn=<MulBackward0>)")
    assert same_output(["tensor(1., grad_fn=<SWhereBackward>)"], "tensor(1., grad_fn=<WhereBackward0>)")
    assert same_output(["0.693"], "0.6931471805599453")  # within half a unit of the last digit shown
    assert same_output(["(tensor(nan),)"], "(tensor(nan),)")
    assert not same_output(["0.693"], "0.6941")
    assert not same_output(["tensor([1., 2.])"], "tensor([1.0000, 2.5000])")  # whole numbers are exact
    assert not same_output(["tensor([1., 2.])"], "tensor([1., 2., 3.])")
    assert not same_output(["tensor([1., 2.])"], "[1.0, 2.0]")  # the text between the numbers counts
    assert not same_output(["tensor([3., 7.])"], "tensor([3., 6.])")


def test_a_comment_is_compared_by_its_numbers():
    def said(claim: str, printed: str) -> bool | None:
        verdict = judge([claim], printed, None, comment=True)
        return None if verdict is None else verdict.same

    assert said("22", "tensor(22.)") and said("(2, 2)", "torch.Size([2, 2])") and said("0.5", "tensor(0.5000)")
    assert said("22", "tensor(21.)") is False and said("True", "False") is False
    assert said("tensor([1., 2.])", "tensor([1., 2., 3.])") is None  # another count: not compared
    assert judge(["22"], "tensor(22.)", None) == Verdict(False, False, "22")  # a transcript shows the text


def test_pre_04_prints_are_not_compared():
    assert judge(["Variable containing:", " 1", "[torch.FloatTensor of size 1]"], "tensor([1.])", None) is None
    assert judge(["", " 1", " 2", "[torch.FloatTensor of size 2]"], "tensor([1., 2.])", None) is None
    assert judge(["tensor(1.00000e-02 *", "       [ 1.0000,  2.0000])"], "tensor([0.0100, 0.0200])", None) is None


def test_a_traceback_is_a_claimed_error():
    assert claimed_error(TRACEBACK) == ClaimedError("RuntimeError", TRACEBACK[-1].split(": ", 1)[1])
    indented = ["    " + line for line in TRACEBACK]  # as in the anomaly-mode docs
    assert claimed_error(indented) == claimed_error(TRACEBACK)
    chained = [*TRACEBACK, "", "During handling of the above exception, another exception occurred:", ""]
    chained += ["Traceback (most recent call last):", '  File "x.py", line 3', "    raise E", "KeyError: 'a'"]
    assert claimed_error(chained) == ClaimedError("KeyError", "'a'")
    ipython = ["-" * 40, "AttributeError                            Traceback (most recent call last)"]
    ipython += ["<ipython-input-4> in <module>", "----> 1 x.foo", "", "AttributeError: 'Tensor' has no foo"]
    assert claimed_error(ipython) == ClaimedError("AttributeError", "'Tensor' has no foo")
    message = "grad can be implicitly created only for scalar outputs"
    same = judge(TRACEBACK, "", ("RuntimeError", message))
    assert same is not None and same.same and same.error
    other = judge(TRACEBACK, "", ("TypeError", message))
    assert other is not None and not other.same and other.shown == TRACEBACK[-1]
    ran = judge(TRACEBACK, "", None)  # it ran without raising
    assert ran is not None and not ran.same and ran.error
    printed = judge(["1", *TRACEBACK], "2\n", ("RuntimeError", message))  # printed, then raised
    assert printed is not None and not printed.same and not printed.error


def test_an_error_message_matches_but_for_spacing_addresses_and_a_longer_version():
    old = ClaimedError("RuntimeError", "one of the variables needed for gradient computation has been modified")
    now = "one of the variables needed for gradient computation has been modified by an inplace operation: [..]"
    assert same_error(old, "RuntimeError", now + "\nHint: ...")
    assert same_error(ClaimedError("TypeError", "bad  object at 0x7f00"), "builtins.TypeError", "bad object at 0x1")
    assert not same_error(old, "RuntimeError", "one of the variables needed for gradient computation has been")
    assert not same_error(old, "RuntimeError", now.replace("modified", "modifiedx"))
    assert not same_error(old, "RuntimeError", "Some error in backward")
    assert same_error(ClaimedError("StopIteration", ""), "StopIteration", "")


@pytest.mark.parametrize(
    "comment",
    ["tensor([2., 4.])", "22", "(tensor(1.), None)", "True", "torch.Size([2, 3])", "[1, 2]", "-0.5", "nan"]
    + ["tensor(1., grad_fn=<MulBackward0>)", "Parameter containing: tensor([1.])", "tensor([1], dtype=torch.int32)"],
)
def test_a_comment_that_reads_like_output_is_a_claim(comment):
    assert output_like(comment)


@pytest.mark.parametrize(
    "comment", ["6a+4 is 6*3+4 = 22", "6*5+4 is 34", "dy/dx is 6x+4", "tensor([2., 4.]) the gradient", "x.grad", ""]
)
def test_prose_in_a_comment_is_no_claim(comment):
    assert not output_like(comment)


def test_comment_claims_of_a_script():
    text = "import torch\nx = torch.ones(2)\nprint(x) # -> tensor([1., 1.])\nprint(x) # 6a+4 is 22\n"
    text += "x  # tensor([1., 1.])\nfor _ in range(2):\n    print(x) # tensor([1., 1.])\n"
    text += 'print("x:", x) # tensor([1., 1.])\n'
    src = read_source(text, "t.py")
    parse(src, "t.py", 10_000, 10_000)
    # a prose comment, a bare expression (a script shows nothing), a print in a loop and one with a label
    # of its own are no claims
    assert src.claimed == {3: ["tensor([1., 1.])"]} and src.claimed_from == {3: "comment"}


def test_an_ipython_transcript_reads_as_a_repl_one_line_for_line():
    text = "In [1]: def f(x):\n   ...:     return x * 2\n   ...: \n\nIn [2]: f(torch.ones(2))\n"
    text += "Out[2]: tensor([2., 2.])\n\nIn [3]: print(1)\n1\n"
    src = read_source(text, "t.py")
    assert src.repl and src.pasted == text
    assert src.original.split("\n")[:5] == [">>> def f(x):", "...     return x * 2", "...", "", ">>> f(torch.ones(2))"]
    assert src.code.split("\n")[:4] == ["def f(x):", "    return x * 2", "", "f(torch.ones(2))"]
    assert [src.original_line(k) for k in (1, 4, 5)] == [1, 5, 8]
    assert src.claimed == {4: ["tensor([2., 2.])"], 5: ["1"]}
    assert read_source("x = 1  # In [1]: no\n", "t.py").original == "x = 1  # In [1]: no\n"


def test_errors_explained_only_where_the_pattern_is_the_real_one():
    pinned = "pin_memory=True requires a CUDA or other accelerator backend; no pinned memory allocator is available"
    assert "accelerator" in (explain_error(pinned) or "")
    overloads = (
        "normal() received an invalid combination of arguments - got (int, float, requires_grad=bool), but "
        "expected one of:\n * (float mean, float std, tuple of ints size, *, bool pin_memory = False)"
    )
    said = explain_error(overloads) or ""
    assert "Pinned" not in said and "None of the forms torch lists" in said


# --- through the confined child (about a second each) ---

confined = pytest.mark.skipif(confinement_available() is not None, reason="this machine cannot confine")


def _screen(text: str) -> str:
    from vjp_explorer.render.snippet_view import render
    from vjp_explorer.snippet.door import run_snippet

    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(render(run_snippet(text, "t.py", seed=0)))
    return console.file.getvalue()  # type: ignore[attr-defined]


@confined
def test_a_transcript_compared_by_value_with_its_error_and_draws():
    text = "\n".join(
        [
            ">>> import torch",
            ">>> x = torch.tensor([1., 2.], requires_grad=True)",
            ">>> x * 1",
            "tensor([ 1.,  2.])",
            ">>> r = torch.rand(2)",
            ">>> x.detach() * 3",
            "tensor([ 3.,  7.])",
            ">>> x.grad",
            "Variable containing:",
            "[torch.FloatTensor of size 2]",
            ">>> (x * 2).backward()",
            *TRACEBACK,
        ]
    )
    screen = _screen(text)
    said = [line.strip() for line in screen.splitlines() if line.strip().startswith(("✓", "≠"))]
    assert said == [
        "✓ the source's transcript shows the same",
        "≠ the source's transcript shows: tensor([ 3.,  7.]) (random draws: the source was not seeded the same way)",
        "✓ the source's transcript shows the same error",
    ]


@confined
def test_an_ipython_transcript_runs_and_an_other_error_is_said():
    text = "In [1]: import torch\n\nIn [2]: x = torch.ones(2)\n\nIn [3]: x.sum()\nOut[3]: tensor(2.)\n\n"
    text += "In [4]: print(x) # tensor([1., 1.])\ntensor([1., 1.])\n\nIn [5]: x.foo\n" + "\n".join(TRACEBACK)
    screen = _screen(text)
    said = [line.strip() for line in screen.splitlines() if line.strip().startswith(("✓", "≠"))]
    assert said == [
        "✓ the source's transcript shows the same",
        "✓ the source's transcript shows the same",
        "≠ the source's transcript shows the error: " + TRACEBACK[-1],
    ]
    assert "AttributeError at line 11" in screen


@confined
def test_the_json_says_what_the_screen_says_of_each_claim():
    """`claim.matches` is the screen's verdict: true for the same error, null where nothing is compared."""
    text = "\n".join(
        [
            ">>> import torch",
            ">>> x = torch.tensor([1., 2.], requires_grad=True)",
            ">>> x.grad",
            "Variable containing:",
            "[torch.FloatTensor of size 2]",
            ">>> x * 1",
            "tensor([ 9.,  2.])",
            ">>> (x * 2).backward()",
            *TRACEBACK,
        ]
    )
    doc = run_snippet(text, seed=0).to_dict()
    assert [s["claim"]["matches"] for s in doc["steps"] if s["claim"]] == [None, False, True]
    shown = str(run_snippet(text, "<transcript>", seed=0))
    assert "In [" not in shown and "≠ the source's transcript shows: tensor([ 9.,  2.])" in shown


def test_a_missing_module_and_a_carried_graph_are_explained():
    assert "vjp's own Python" in explain_error("No module named 'matplotlib'")
    twice = explain_error("Trying to backward through the graph a second time (or directly access saved tensors)")
    assert "retain_graph=True" in twice and "h = h.detach()" in twice


def test_a_long_claimed_error_is_quoted_whole_words_then_an_ellipsis():
    """An older torch's wording of the backward-twice error: ≠, quoted up to 200 characters, cut between words
    (it was cut inside `.backward()`); the transcript goes on after it, as the REPL did."""
    old = (
        "Trying to backward through the graph a second time (or directly access saved tensors after they have "
        "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
        "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time."
    )
    text = (
        ">>> import torch\n>>> x = torch.ones(2, requires_grad=True)\n>>> out = (x * x).sum()\n"
        ">>> out.backward()\n>>> out.backward()\nTraceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        f"RuntimeError: {old}\n>>> x.grad\ntensor([2., 2.])\n"
    )
    r = run_snippet(text, seed=0)
    shown = " ".join(str(r).split())
    assert "≠ the source's transcript shows the error: RuntimeError: Trying to backward" in shown
    quoted = shown[shown.index("≠") : shown.index("RuntimeError at line")]
    assert quoted.endswith("the graph are freed when you call … ") and ".backward()" not in quoted
    assert [s.claim.matches for s in r.steps if s.claim is not None] == [False, True]
