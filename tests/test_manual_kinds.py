"""The verdict and the kind of a hand-written gradient (snippet/manual_kinds.py) on hand-made arrays, where
the right answer is known by construction; the pairing read from source (confined/manual_source.py); and the
parent's reading of the child's "manual" frames (snippet/manual.py), forged ones included."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from vjp_explorer.confined.manual_source import pairs
from vjp_explorer.snippet import manual_kinds as k
from vjp_explorer.snippet.checked import Malformed
from vjp_explorer.snippet.manual import judge
from vjp_explorer.snippet.manual_formula import expression
from vjp_explorer.snippet.source import read_source

RNG = np.random.default_rng(0)
G = RNG.standard_normal((4, 5))  # autograd's gradient of a [4, 5] tensor
ALLOWED = k.bound(G, "float32")


def kind(written, truth=G, **kw):
    return k.kind(np.asarray(written, dtype=np.float64), truth, k.bound(truth, "float32"), **kw)


def test_bound_is_the_float32_rule_scaled_by_the_largest_entry():
    assert ALLOWED == pytest.approx(1e-7 + 1e-4 * np.abs(G).max())
    assert k.bound(np.zeros(3), "float32", "float64") == pytest.approx(1e-7)  # the coarser dtype's rule


def test_rounding_agrees_and_both_zero_agree():
    noisy = G * (1 + 1e-6 * RNG.standard_normal(G.shape))
    assert k.verdict(noisy, G, ALLOWED) == "agree"
    tiny = np.full(3, 1e-9)
    assert k.verdict(-tiny, tiny, k.bound(tiny, "float32")) == "agree"  # both zero up to rounding
    assert k.verdict(G + 1e-2, G, ALLOWED) == "disagree"


def test_a_lost_dimension_is_shape_keepdim():
    truth = G[:1]  # [1, 5]
    written = truth.reshape(5)
    assert k.verdict(written, truth, k.bound(truth, "float32")) == "shape"
    assert kind(written, truth) == "keepdim"


def test_a_broadcast_not_summed_is_missing_sum():
    bias = G.sum(0)  # the gradient of a [5] bias broadcast over 4 rows
    assert kind(G, bias) == "missing_sum"
    col = G.sum(1, keepdims=True)  # a [4, 1] tensor broadcast over columns
    assert kind(G, col) == "missing_sum"
    assert k.verdict(G, bias, k.bound(bias, "float32")) == "disagree"


def test_transposed_sign_factor():
    assert kind(G.T) == "transposed"  # [5, 4] for [4, 5]
    square = RNG.standard_normal((3, 3))
    assert kind(square.T, square) == "transposed"
    assert kind(-G) == "sign"
    assert kind(G / 32) == "factor"
    assert k.factor_of(G / 32, G) == pytest.approx(1 / 32)


def test_right_values_at_wrong_positions_are_wrong_index():
    onehot = np.zeros((4, 5))
    onehot[np.arange(4), [1, 3, 0, 2]] = -0.25
    shifted = np.zeros((4, 5))
    shifted[np.arange(4), [2, 4, 1, 3]] = -0.25
    assert kind(shifted, onehot) == "wrong_index"
    every_column = np.zeros((4, 5))
    every_column[:, [1, 3, 0, 2]] = -0.25  # `d[:, Yb]` where `d[range(n), Yb]` was meant
    assert kind(every_column, onehot) == "wrong_index"


def test_a_value_used_twice_needs_both_terms():
    part = G * 0.7 + 0.1 * RNG.standard_normal(G.shape)  # one use's term only: no constant factor
    assert kind(part, uses=2) == "missing_accumulation"
    assert kind(part, uses=2, accumulated=True) == "other"  # added to, yet wrong: not that
    assert kind(part, uses=1) == "other"
    assert kind(np.array(3.0), np.array(5.0), uses=2) == "missing_accumulation"  # a scalar: not "factor"


def test_cmp_is_the_learners():
    truth = G[:1]
    got = k.cmp(truth.reshape(5), truth)  # broadcasts [5] against [1, 5]: cmp passes a missing keepdim
    assert got == {"exact": True, "approximate": True, "max_abs_diff": 0.0}
    assert k.cmp(G.T, G)["max_abs_diff"] is None  # shapes cmp cannot broadcast


CHAIN = """\
import torch
x = torch.randn(3, requires_grad=True)
dt = 0.1
y = (x * dt).sum()
y.backward()
dx = x.grad
dy = 1.0
x_grad = dt * torch.ones(3) * dy  # one
g = dt * dy  # grad of y
grad_x = torch.zeros(3)
for i in range(3):
    grad_x[i] += dt
"""


def test_pairing_by_name_and_comment_after_backward():
    found = {p.name: (p.of, p.line, p.reads, p.accumulated) for p in pairs(CHAIN)}
    assert found == {
        "dy": ("y", 7, [], False),
        "x_grad": ("x", 8, ["dy"], False),
        "g": ("y", 9, ["dy"], False),
        "grad_x": ("x", 12, [], True),  # last written inside the loop, which runs again whole
    }
    # `dt` is a forward value (before backward); `dx = x.grad` is autograd's own gradient


def test_no_snippet_of_the_corpora_writes_gradients_by_hand():
    """So none of them runs any differently: the child is never asked to watch (test_manual.py)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    files = sorted((root / "tests" / "snippet_corpus").glob("*.py"))
    files += sorted((root / "src" / "vjp_explorer" / "examples" / "snippets").glob("*.py"))
    assert len(files) > 50
    assert [f.name for f in files if pairs(read_source(f.read_text(), f.name).code)] == []


# logprobs = probs.log(), as the child describes the one node that reads probs
LOG = {
    "node": "LogBackward0",
    "edge": 0,
    "grad": "dlogprobs",
    "saved": {"self": {"tensor": "probs"}},
    "edges": [{"shape": [4, 5], "dtype": "float32"}],
    "received": [[4, 5]],
}
# probs = counts * counts_sum_inv: counts_sum_inv ([4, 1]) is broadcast over the columns
MUL = {
    "node": "MulBackward0",
    "edge": 1,
    "grad": "dprobs",
    "saved": {"self": {"tensor": "counts"}, "other": {"tensor": "counts_sum_inv"}},
    "edges": [{"shape": [], "dtype": None}, {"shape": [4, 1], "dtype": "float32"}],
    "received": [[4, 5]],
}


def test_the_right_expression_from_the_formula_table():
    assert expression(LOG, [4, 5]) == "dlogprobs / probs"  # d log(p) / dp = 1 / p
    assert expression(MUL, [4, 1]) == "(dprobs * counts).sum_to_size((4, 1))"  # d(a·b)/db = a, summed back
    assert expression({**LOG, "saved": {"self": {"tensor": None}}}, [4, 5]) is None  # a saved tensor unnamed
    assert expression({**LOG, "node": "NoSuchBackward0"}, [4, 5]) is None
    assert expression(None, [4, 5]) is None


def _array(a):
    if isinstance(a, dict):  # a forged one, as given
        return a
    a = np.asarray(a, dtype=np.float64)
    return {"shape": list(a.shape), "dtype": "float32", "values": a.reshape(-1).tolist()}


def _frame(name="dx", of="x", written=(1.0, 2.0), truth=(1.0, 2.0), **kw):
    frame = {
        "name": name,
        "of": of,
        "line": 5,
        "reads": [],
        "accumulated": False,
        "uses": 1,
        "written": _array(written),
        "autograd": _array(truth),
        "again": None,
        "formula": None,
    }
    return {**frame, **kw}


def test_judge_reads_only_what_the_parent_expects():
    manual = judge([_frame(), _frame(name="dz", of="z"), _frame(written=(9.0, 9.0))], {("dx", "x")})
    assert [(m.name, m.verdict) for m in manual.lines] == [("dx", "agree")]  # unexpected and repeated dropped
    assert judge([_frame(written=(1.0, 2.0, 3.0))], {("dx", "x")}).lines == []  # no broadcast, other size


@pytest.mark.parametrize(
    "forged",
    [
        _frame(line="5"),
        _frame(name="__import__('os')"),
        {**_frame(), "extra": 1},
        _frame(written={"shape": [3], "dtype": "float32", "values": [1.0, 2.0]}),
        _frame(written={"shape": [2], "dtype": "float32", "values": ["1", 2.0]}),
        _frame(written={"shape": [-2], "dtype": "float32", "values": []}),
        "not an object",
        _frame(formula={"node": "LogBackward0"}),
        _frame(formula={**LOG, "saved": {"self": {"tensor": "os.system('x')"}}}),
        _frame(formula={**LOG, "grad": "1 + 1"}),
    ],
)
def test_forged_frames_are_malformed(forged):
    with pytest.raises(Malformed):
        judge([forged], {("dx", "x")})


TRAINING_LOOP = """\
import torch
w = torch.randn(3, requires_grad=True)
for step in range(5):
    C = w * 1.0
    loss = (C * C).sum()
    w.grad = None
    loss.backward()
    dC = torch.zeros(3)
    for i in range(3):
        dC[i] += 2 * C[i]
    with torch.no_grad():
        w -= 0.1 * dC
"""


def test_a_training_loop_pairs_its_lines_not_the_whole_loop():
    """Inside a loop that calls backward, each gradient's own statement runs again (not the training loop,
    which calls backward); a loop that starts after backward runs again whole."""
    found = {p.name: (p.of, p.line, [(type(s).__name__, s.lineno) for s in p.stmts]) for p in pairs(TRAINING_LOOP)}
    assert found == {"dC": ("C", 10, [("Assign", 8), ("For", 9)])}


def test_the_closing_line_counts_the_hand_written_gradients_and_names_the_first_wrong():
    from vjp_explorer.render.manual_view import summary

    right = judge([_frame(), _frame(name="dy", of="y", line=6)], {("dx", "x"), ("dy", "y")})
    assert summary(right) == "; 2 of 2 hand-written gradients agree"
    wrong = judge([_frame(), _frame(name="dy", of="y", line=6, written=(-1.0, -2.0))], {("dx", "x"), ("dy", "y")})
    assert summary(wrong) == "; 1 of 2 hand-written gradients agree (first wrong: line 6, dy)"
    assert summary(None) == ""  # a snippet with none: the closing line as before
