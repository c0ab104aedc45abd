"""The learner's own backward, line by line (docs/manual.md): whole chains in the learners' style
(tests/manual_chains.py), correct as written and with planted mistakes of every kind at different depths.

The oracle is the learners' own route, run by plain Python: retain_grad() on every paired tensor and their
`cmp` after the chain (manual_chains.oracle); the kind of each planted mistake, the first wrong line and the
lines that only inherit it are known by construction (what was planted, and where).
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from manual_chains import MAKEMORE, MICROGRAD, TWO_LAYER, line_of, oracle, plant
from vjp_explorer.confined.manual_source import pairs
from vjp_explorer.errors import ProgramError
from vjp_explorer.render import snippet_view
from vjp_explorer.snippet import run_snippet

MAKEMORE_PAIRS = {p.name: p.of for p in pairs(MAKEMORE)}
TWO_LAYER_PAIRS = {"g": "out", "W2_grad": "W2", "grad_b2": "b2", "dh": "h", "dh_pre": "h_pre", "dW1": "W1", "db1": "b1"}
MICROGRAD_PAIRS = {n: n[1:] for n in ("dL", "dx", "dd", "df", "de", "dc", "db", "da")}


def by_name(result):
    return {m.name: m for m in result.manual.lines}


def assert_cmp_as_learners(result, text, pairs_, backward="loss.backward()"):
    """Every line's exact / approximate / max diff is what the learners' cmp prints, and the snippet printed
    what plain Python prints: the tool changed nothing the snippet sees."""
    printed, cmps = oracle(text, pairs_, backward)
    assert result.stdout == printed
    got = by_name(result)
    assert set(got) == set(pairs_)
    for name, (exact, approximate, maxdiff) in cmps.items():
        assert (got[name].exact, got[name].approximate) == (exact, approximate), name
        if maxdiff is None:
            assert got[name].max_abs_diff is None, name
        else:
            assert got[name].max_abs_diff == pytest.approx(maxdiff, rel=1e-12, abs=1e-15), name


def assert_planted(result, text, planted, first):
    """`planted`: line text -> kind. Each planted line has its kind, `first` is the first wrong line, and every
    other line agrees or inherits from a planted line above it that it reads."""
    assert result.error is None
    lines = {line_of(text, line): kind for line, kind in planted.items()}
    first_line = line_of(text, first)
    assert set(lines) <= {m.line for m in result.manual.lines}
    for m in result.manual.lines:
        if m.line in lines:
            assert m.kind == lines[m.line], (m.name, m.kind, m.why)
            assert m.verdict != "agree"
        else:
            assert m.verdict == "agree" or (m.kind == "inherits" and m.inherits_from in lines), (m.name, m.kind)
    wrong = result.manual.first_wrong
    assert wrong is not None and wrong.line == first_line and wrong.kind == planted[first]
    document = result.to_dict()
    assert document["manual_first_wrong"] == first_line
    assert [m["line"] for m in document["manual"]] == sorted(m["line"] for m in document["manual"])


def test_makemore_correct_chain_agrees_line_by_line():
    r = run_snippet(MAKEMORE, "makemore.py", seed=0)
    assert r.error is None
    assert len(MAKEMORE_PAIRS) == 26
    assert all(m.verdict == "agree" and m.kind is None for m in r.manual.lines)
    assert r.manual.first_wrong is None
    # makemore's own cmp calls some right lines "exact: False" (rounding); the whole-gradient rule agrees
    assert any(not m.exact for m in r.manual.lines)
    assert_cmp_as_learners(r, MAKEMORE, MAKEMORE_PAIRS)
    assert r.to_dict()["manual_first_wrong"] is None


def test_makemore_missing_keepdim_that_cmp_passes_is_shape_keepdim():
    line = "dbnmeani = (-dbndiff).sum(0, keepdim=True)"
    text = plant(MAKEMORE, line, "dbnmeani = (-dbndiff).sum(0)")
    r = run_snippet(text, "makemore.py", seed=0)
    m = by_name(r)["dbnmeani"]
    assert (m.verdict, m.kind, m.shape, m.expected_shape) == ("shape", "keepdim", [64], [1, 64])
    # bndiff = hprebn - bnmeani broadcasts bnmeani over the batch: minus the gradient, summed back to [1, 64]
    assert m.expected == "dbnmeani = (-dbndiff).sum_to_size((1, 64))"
    assert m.approximate  # the learners' cmp passes it: broadcasting [64] against [1, 64]
    assert_cmp_as_learners(r, text, MAKEMORE_PAIRS)
    assert_planted(r, text, {"dbnmeani = (-dbndiff).sum(0)": "keepdim"}, "dbnmeani = (-dbndiff).sum(0)")
    shown = _screen(r)
    assert "first wrong line 67: dbnmeani (keepdim)" in shown
    assert "keepdim=True" in shown


def test_makemore_sign_early_then_own_mistakes_deeper():
    planted = {
        "dprobs = -(1.0/probs) * dlogprobs": "sign",
        "dbnvar_inv = (bndiff * dbnraw).sum(0)": "keepdim",
        "db2 = dlogits": "missing_sum",
        "dW1 = dhprebn.T @ embcat": "transposed",
    }
    text = MAKEMORE
    for right, wrong in [
        ("dprobs = (1.0/probs) * dlogprobs", "dprobs = -(1.0/probs) * dlogprobs"),
        ("dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)", "dbnvar_inv = (bndiff * dbnraw).sum(0)"),
        ("db2 = dlogits.sum(0)", "db2 = dlogits"),
        ("dW1 = embcat.T @ dhprebn", "dW1 = dhprebn.T @ embcat"),
    ]:
        text = plant(text, right, wrong)
    r = run_snippet(text, "makemore.py", seed=0)
    assert_planted(r, text, planted, "dprobs = -(1.0/probs) * dlogprobs")
    got = by_name(r)
    assert got["dlogprobs"].verdict == "agree"
    assert got["dprobs"].expected == "dprobs = dlogprobs / probs"  # d log(p) / dp = 1 / p
    assert "autograd's formula: dprobs = dlogprobs / probs" in _screen(r)
    # everything below dprobs reads it: each line whose own formula is right inherits line 45's error
    assert (got["dh"].kind, got["dh"].inherits_from) == ("inherits", line_of(text, "dprobs = -(1.0/probs) * dlogprobs"))
    assert_cmp_as_learners(r, text, MAKEMORE_PAIRS)


def test_makemore_wrong_index_missing_accumulation_and_factor():
    text = plant(MAKEMORE, "dlogprobs[range(n), Yb] = -1.0/n", "dlogprobs[range(n), (Yb + 1) % vocab_size] = -1.0/n")
    text = plant(text, "dcounts += torch.ones_like(counts) * dcounts_sum", None)
    text = plant(
        text,
        "dbngain = (bnraw * dhpreact).sum(0, keepdim=True)",
        "dbngain = 2 * (bnraw * dhpreact).sum(0, keepdim=True)",
    )
    r = run_snippet(text, "makemore.py", seed=0)
    planted = {
        "dlogprobs[range(n), (Yb + 1) % vocab_size] = -1.0/n": "wrong_index",
        "dcounts = counts_sum_inv * dprobs": "missing_accumulation",
        "dbngain = 2 * (bnraw * dhpreact).sum(0, keepdim=True)": "factor",
    }
    assert_planted(r, text, planted, "dlogprobs[range(n), (Yb + 1) % vocab_size] = -1.0/n")
    assert by_name(r)["dbngain"].factor == pytest.approx(2.0)
    assert_cmp_as_learners(r, text, MAKEMORE_PAIRS)


def test_two_layer_net_all_namings_agree_and_planted_kinds():
    r = run_snippet(TWO_LAYER, "two_layer.py", seed=0)
    assert all(m.verdict == "agree" for m in r.manual.lines)
    assert_cmp_as_learners(r, TWO_LAYER, TWO_LAYER_PAIRS)
    text = plant(TWO_LAYER, "g = 2 * (out - y) / out.numel()  # grad of out", "g = 2 * (out - y)  # grad of out")
    text = plant(text, "W2_grad = h.T @ g", "W2_grad = g.T @ h")
    text = plant(text, "dW1 = x.T @ dh_pre", "dW1 = -(x.T @ dh_pre)")
    text = plant(text, "db1 = dh_pre.sum(0)", "db1 = dh_pre")
    r = run_snippet(text, "two_layer.py", seed=0)
    planted = {
        "g = 2 * (out - y)  # grad of out": "factor",
        "W2_grad = g.T @ h": "transposed",
        "dW1 = -(x.T @ dh_pre)": "sign",
        "db1 = dh_pre": "missing_sum",
    }
    assert_planted(r, text, planted, "g = 2 * (out - y)  # grad of out")
    assert by_name(r)["g"].factor == pytest.approx(24.0)  # the mean over 8 × 3 outputs forgotten
    assert_cmp_as_learners(r, text, TWO_LAYER_PAIRS)
    assert r.exit_code == 0  # autograd's backward agrees; the learner's lines are read from `manual` (manual.md)


def test_micrograd_scalars_value_used_twice():
    r = run_snippet(MICROGRAD, "micrograd.py", seed=0)
    assert all(m.verdict == "agree" for m in r.manual.lines)
    assert_cmp_as_learners(r, MICROGRAD, MICROGRAD_PAIRS, backward="L.backward()")
    text = plant(MICROGRAD, "da += dL", None)
    text = plant(text, "dd = f.item() * dx", "dd = -f.item() * dx")
    r = run_snippet(text, "micrograd.py", seed=0)
    planted = {"dd = -f.item() * dx": "sign", "da = b.item() * de": "missing_accumulation"}
    assert_planted(r, text, planted, "dd = -f.item() * dx")
    assert {by_name(r)[n].kind for n in ("de", "dc", "db")} == {"inherits"}
    assert_cmp_as_learners(r, text, MICROGRAD_PAIRS, backward="L.backward()")


NO_MANUAL = """\
import sys
import torch
w = torch.tensor([1.0, 2.0], requires_grad=True)
loss = (w * w).sum()
loss.backward()
dw = w.grad
print(w.grad, "vjp_explorer.confined.manual" in sys.modules)
"""


def test_no_hand_written_gradient_runs_as_before():
    """No gradient written by hand (a `.grad` read is autograd's): the child never even imports the module
    that watches them, and the document's manual list is empty; with one, it is not."""
    r = run_snippet(NO_MANUAL, "plain.py", seed=0)
    assert r.stdout == "tensor([2., 4.]) False\n"
    assert r.manual is None
    assert r.to_dict()["manual"] == [] and r.to_dict()["manual_first_wrong"] is None
    r = run_snippet(NO_MANUAL.replace("dw = w.grad", "dw = 2 * w"), "plain.py", seed=0)
    assert r.stdout == "tensor([2., 4.]) True\n"
    assert [(m.name, m.verdict) for m in r.manual.lines] == [("dw", "agree")]


def _screen(r) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(snippet_view.render(r))
    return console.file.getvalue()


FORGED = """\
import json, os, struct
import torch
import vjp_explorer.confined.protocol as protocol
real_write = protocol.write_frame
held = {}
def grab(fd, message):
    held["fd"] = fd
    real_write(fd, message)
protocol.write_frame = grab
x = torch.tensor([1.0, 2.0], requires_grad=True)
(x * x).sum().backward()
dx = 2 * x
body = json.dumps({"type": "manual", "manual": {"name": "dx", "of": "x", "line": "6"}}).encode()
os.write(held["fd"], struct.pack(">I", len(body)) + body)
"""


def test_a_forged_manual_frame_is_a_broken_channel():
    """The snippet shares the child's process and can write on its channel: a "manual" frame that is not
    what confined/manual.py sends stops the run with exit 2, never an exception in the parent."""
    with pytest.raises(ProgramError, match="broke the channel"):
        run_snippet(FORGED, "forged.py", seed=0)
