"""The heat-map of a Jacobian too large for a table: signs, structural and numerical zeros, pinned at 80 columns."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
from rich.console import Console

from documents import event, per_leaf
from vjp_explorer.api import explore
from vjp_explorer.render import text
from vjp_explorer.render.heatmap import NEGATIVE, POSITIVE
from vjp_explorer.result import Jacobian, Stats, TensorData

SNAPSHOTS = Path(__file__).parent / "snapshots"


def _show(renderable, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, no_color=True, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def _map(values: list[float], m: int, n: int, structure: str, ascii: bool = False) -> list[str]:
    """The rows of the map between its borders."""
    from vjp_explorer.render.heatmap import heatmap

    data = TensorData(np.reshape(values, (m, n)), Stats(min(values), max(values), 0.0, 0, 0))
    jac = Jacobian("x", (m, n), "autograd.grad rows", structure, data)
    leaf = TensorData(np.zeros(n), Stats(0, 0, 0, 0, 0))
    shown = _show(heatmap(jac, "y", (m,), leaf, ascii))
    rows = [line.split("│")[1] for line in shown.splitlines() if line.count("│") == 2]
    b = max(-(-m // 24), -(-n // 48))  # entries per cell, down and across
    return [row[::2] for row in rows] if 2 * -(-n // b) <= 48 else rows  # two characters a cell where they fit


def test_signs_sizes_and_the_two_kinds_of_zero():
    # a diagonal J (elementwise program): off-diagonal entries are zero by structure, blank;
    # a diagonal entry that is 0 here (relu off) is a numerical zero, a dot
    rows = _map([4.0, 0, 0, 0, 0.0, 0, 0, 0, -1.5], 3, 3, "diagonal")
    assert rows == [POSITIVE[3] + "  ", " · ", "  " + NEGATIVE[1]]
    # a J that is not elementwise (W @ x): its zeros may be of either kind, and are drawn apart from both
    rows = _map([1.0, 0.0, -2.0, 0.2], 2, 2, "dense")
    assert rows == [POSITIVE[2] + "∘", NEGATIVE[3] + POSITIVE[0]]  # 1 is half of max |J| = 2
    assert _map([1.0, -1.0], 1, 2, "dense", ascii=True) == ["#%"]
    assert _map([math.nan, 1.0], 1, 2, "dense") == ["!" + POSITIVE[3]]


def test_blocks_keep_the_largest_entry_and_its_sign():
    m = n = 100  # past 24 rows: 5 x 5 blocks, each shown by its entry largest in size
    values = [0.0] * (m * n)
    values[0] = 0.1
    values[1] = -5.0  # same block as entry 0: the block shows the negative one
    values[99 * n + 99] = 5.0
    rows = _map(values, m, n, "dense")
    assert len(rows) == 20 and len(rows[0]) == 20
    assert rows[0][0] == NEGATIVE[3] and rows[-1][-1] == POSITIVE[3] and rows[5][5] == "∘"


def test_heatmap_pinned_at_80_columns():
    """relu(sin(x)) at x = 0..29: a diagonal J with positive, negative and numerically zero entries."""
    r = explore("relu(sin(x))", {"x": "arange(30)"}, grad="ones", symbolic=False, surface="cli")  # as vjp run
    view = text.View.for_result(r, None, False)
    got = _show(text.jacobian_view(r, "x", view))
    assert all(len(line) <= 80 for line in got.splitlines())
    assert got == (SNAPSHOTS / "relu_sin_heatmap_80.txt").read_text()


def test_numbers_stay_in_full_and_json(vjp):
    args = ("run", "relu(sin(x))", "--x", "arange(30)", "--grad", "ones", "--no-symbolic")
    assert "heat-map of J" in vjp(*args).stdout
    full = vjp(*args, "--full").stdout
    assert "heat-map of J" not in full and "more than a screen" not in full  # the table of numbers instead
    doc = json.loads(vjp(*args, "--json").stdout)
    assert per_leaf(doc, "jacobian")["x"]["value"][7][7] == float(event(doc)["grads"]["x"][7])
