"""The notes catalogue (stages/notes.py): one entry per code, each documented in docs/json.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vjp_explorer import explore
from vjp_explorer.stages.notes import CATALOGUE

ROOT = Path(__file__).resolve().parents[1]


def test_every_code_is_in_the_catalogue_once_and_documented():
    codes = [k.code for k in CATALOGUE]
    assert len(codes) == len(set(codes))
    assert all(k.when for k in CATALOGUE)
    doc = (ROOT / "docs" / "json.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `notes` |") and "note codes" in line)
    assert re.findall(r"`(\w+)`", row.split(":", 1)[1]) == codes


def test_notes_come_in_the_catalogues_order():
    r = explore("y = x; y += 1; z = y * 3", {"x": "1,2"}, grad="ones", backward_calls=2)
    codes = [n.code for n in r.notes]
    order = [k.code for k in CATALOGUE]
    assert {"accumulated", "retain_graph", "augmented_assignment", "ones_diagonal"} <= set(codes)
    assert codes == sorted(codes, key=order.index)


@pytest.mark.parametrize(
    ("program", "named", "not_named"),
    [
        ("exp(a) * b", ["exp's result", "mul's inputs"], []),
        ("a * b + sin(a)", ["mul's inputs", "sin's inputs"], ["exp"]),
    ],
)
def test_the_retain_graph_note_names_what_this_graph_saved(program, named, not_named):
    # issue 31: the note named "exp's result" for a program with no exp
    r = explore(program, {"a": "1,2", "b": "3,4"}, grad="ones", backward_calls=2)
    (text,) = [n.text for n in r.notes if n.code == "retain_graph"]
    assert all(word in text for word in named) and not any(word in text for word in not_named), text
    assert "a second time" in text


def test_a_graph_that_saves_nothing_is_not_said_to_need_retain_graph():
    import torch

    # the fact, from plain torch: a sum of leaves backs up twice without retain_graph
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (a + 1).sum()
    y.backward()
    y.backward()
    assert a.grad.tolist() == [2.0, 2.0]
    for retain in (True, False):
        r = explore("a + b", {"a": "1,2", "b": "3,4"}, grad="ones", backward_calls=2, retain_graph=retain)
        (text,) = [n.text for n in r.notes if n.code == "retain_graph"]
        assert "a second time" not in text and "saves a tensor" in text, text
        assert ("ran without" in text) is not retain
