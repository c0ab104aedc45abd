"""One vocabulary (issue 31): v is PyTorch's `gradient` (the option --grad or --gradient, the keyword
gradient=, the JSON key `grad`), `.grad` is the leaf gradient (the JSON key `grads`); docs/json.md maps them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

import vjp_explorer as vx
from documents import event

DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
ARGV = ["run", "h = a*a; y = 3*h", "--a", "1,2"]
V = [0.5, 2.0]


def test_the_json_keeps_v_and_the_leaf_gradient_apart(vjp):
    # plain torch, the independent route: a.grad after y.backward(gradient=v)
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    (3 * a * a).backward(gradient=torch.tensor(V))
    for option in ("--grad", "--gradient"):
        d = json.loads(vjp(*ARGV, option, "0.5,2", "--json").stdout)
        assert event(d)["v"][0]["value"] == V and event(d)["v_origin"] == "given"  # v
        assert event(d)["grads"]["a"] == a.grad.tolist() == [3.0, 24.0]  # the leaf's .grad: 6a·v
        assert d["intermediates"]["h"]["grad"] == [1.5, 6.0]  # what reached h: 3·v
        assert d["schema"] == 5


def test_the_api_says_gradient_for_v(vjp):
    r = vx.explore("h = a*a; y = 3*h", {"a": "1,2"}, gradient=V)
    assert r.gradient is r.grad and r.gradient.tolist() == V
    assert np.asarray(r.grads["a"]).tolist() == [3.0, 24.0]


def test_docs_map_every_word_to_keys_that_exist(vjp, tmp_path):
    text = DOC.read_text()
    section = text.split("## Words: v, `gradient` and `.grad`", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 3
    d = json.loads(vjp(*ARGV, "--grad", "0.5,2", "--json", "--save", str(tmp_path / "r.npz")).stdout)
    with np.load(tmp_path / "r.npz") as saved:
        keys = set(saved.files)
    v_row, leaf_row, kept_row = (row.split(" | ") for row in rows)
    # the JSON column names paths of the one document (every door), the last column the --save keys
    assert "`events[].v`" in v_row[4] and event(d)["v"][0]["value"] == V and "`grad`" in v_row[5] and "grad" in keys
    assert "`events[].inputs[].grad`" in leaf_row[4] and event(d)["inputs"][0]["grad"] == [3.0, 24.0]
    assert "`grads/LEAF`" in leaf_row[5] and "grads/a" in keys
    assert "`intermediates.NAME.grad`" in kept_row[4] and d["intermediates"]["h"]["grad"] is not None
    assert "intermediate_grads/NAME" in kept_row[5] and "intermediate_grads/h" in keys
