"""The notes catalogue (stages/notes.py): one entry per code, each documented in docs/json.md."""

from __future__ import annotations

import re
from pathlib import Path

from vjp_explorer import explore
from vjp_explorer.stages.notes import CATALOGUE

ROOT = Path(__file__).resolve().parents[1]


def test_every_code_is_in_the_catalogue_once_and_documented():
    codes = [k.code for k in CATALOGUE]
    assert len(codes) == len(set(codes))
    assert all(k.when for k in CATALOGUE)
    doc = (ROOT / "docs" / "json.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `notes` |"))
    assert re.findall(r"`(\w+)`", row.split(":", 1)[1]) == codes


def test_notes_come_in_the_catalogues_order():
    r = explore("y = x; y += 1; z = y * 3", {"x": "1,2"}, grad="ones", backward_calls=2)
    codes = [n.code for n in r.notes]
    order = [k.code for k in CATALOGUE]
    assert {"accumulated", "retain_graph", "augmented_assignment", "ones_diagonal"} <= set(codes)
    assert codes == sorted(codes, key=order.index)
