"""The one JSON document (docs/json.md, schema 5): a program's, a snippet's and a check's `--json` validated
against the JSON Schema written in docs/json.md itself, and the three holding one event and one check shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from planted import SQUARE

DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
WRONG = SQUARE.replace("return 2 * x * g", "return 4 * x * g")  # 4x where 2x is right


def schema() -> dict:
    """The block under `<!-- schema -->` in docs/json.md: the schema the docs give is the one tested."""
    found = re.search(r"<!-- schema -->\n```json\n(.*?)\n```", DOC.read_text(), re.S)
    assert found, "docs/json.md has no schema block"
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """One document per kind, from the command line as a script reads it."""
    from typer.testing import CliRunner

    from vjp_explorer.cli import app

    folder = tmp_path_factory.mktemp("docs")
    (folder / "my_ops.py").write_text(WRONG)
    snippet = folder / "snippet.py"
    snippet.write_text(
        "import torch\nx = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)\n"
        "y = (x * x).sum()\ny.backward()\nprint(x.grad)\n"
    )
    runner = CliRunner()
    env = {"COLUMNS": "100", "NO_COLOR": "1"}
    runs = {
        "program": ["run", "W*W", "--W", "[[1,2],[3,4]]", "--grad", "[[1,0],[0,2]]", "--json"],
        "snippet": ["run", str(snippet), "--json"],
        "check": ["check", f"{folder / 'my_ops.py'}:Square", "--x", "1,2,-1.5", "--json"],
    }
    out = {}
    for kind, argv in runs.items():
        res = runner.invoke(app, argv, env=env)
        out[kind] = (res.exit_code, json.loads(res.stdout))
    return out


@pytest.mark.parametrize("kind", ["program", "snippet", "check"])
def test_each_kind_validates_against_the_documented_schema(documents, kind):
    code, doc = documents[kind]
    jsonschema.validate(doc, schema())
    assert doc["kind"] == kind and doc["schema"] == 5 and doc["exit_code"] == code


def test_the_three_kinds_share_event_input_and_check_keys(documents):
    events = [doc["events"][0] for _, doc in documents.values()]
    assert len({tuple(e) for e in events}) == 1
    assert len({tuple(x) for e in events for x in e["inputs"]}) == 1
    assert len({tuple(c) for e in events for c in e["checks"].values()}) == 1
    assert len({tuple(t) for e in events for t in [*e["outputs"], *e["v"]]}) == 1


def test_the_numbers_are_the_hand_derived_ones_in_every_kind(documents):
    """W*W at W = [[1,2],[3,4]] with v = [[1,0],[0,2]]: Jᵀv = 2·W·v = [[2,0],[0,16]]; the snippet's
    (x*x).sum() gives 2x; the planted Square's backward returns 4x·v where 2x·v is right."""
    _, program = documents["program"]
    (event,) = program["events"]
    assert event["grads"]["W"] == [[2.0, 0.0], [0.0, 16.0]] and event["v"][0]["value"] == [[1.0, 0.0], [0.0, 2.0]]
    assert event["outputs"][0]["value"] == [[1.0, 4.0], [9.0, 16.0]]
    (w,) = event["inputs"]
    assert sum(w["finite_difference"], []) == pytest.approx([2.0, 0.0, 0.0, 16.0], rel=1e-9, abs=1e-9)
    assert program["program"] == "W*W"
    _, snippet = documents["snippet"]
    assert snippet["events"][0]["grads"]["x"] == [[2.0, 4.0], [6.0, 8.0]]
    code, check = documents["check"]
    (x,) = check["events"][0]["inputs"]
    assert code == 3 and check["events"][0]["status"] == "disagree"
    assert x["grad"] == [4.0, 8.0, -6.0] and x["finite_difference"] == pytest.approx([2.0, 4.0, -3.0], rel=1e-9)


def test_element_labels_are_written_one_way(documents):
    """`W[0,1]`, no space, whichever door names the element (the schema refuses `[0, 1` in labels too)."""
    _, check = documents["check"]
    reason = check["events"][0]["checks"]["finite_difference"]["reason"]
    assert re.search(r"x\[\d\]", reason) and not re.search(r"\[\d+, \d", reason)
    from vjp_explorer.events import element_index
    from vjp_explorer.result import element_label

    assert element_index([2, 3], 4) == "[1,1]" and element_label("W", (2, 3), 4) == "W[1,1]"


def test_a_document_with_a_stray_key_or_old_schema_fails_the_schema(documents):
    """The schema is strict enough to catch drift: a schema-4 key at the top, or a check without its name."""
    _, doc = documents["program"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "grads": {}}, schema())
    broken = json.loads(json.dumps(doc))
    del next(iter(broken["events"][0]["checks"].values()))["name"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema())


BACKWARD_TWICE = """\
import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x * x).sum()
y.backward()
y.backward()
"""


def test_the_facts_added_since_the_first_schema_5_sit_where_the_docs_say(tmp_path):
    """--code's script is inside the program's one event (not at the top as in schema 4), and why a snippet
    failed is the snippet's top-level `diagnoses`; both documents still validate. Backward through a freed
    graph is what torch names `backward_twice` (exit 4, as plain Python raises it)."""
    from typer.testing import CliRunner

    from vjp_explorer.cli import app

    runner, env = CliRunner(), {"COLUMNS": "100", "NO_COLOR": "1"}
    (tmp_path / "code").mkdir()
    argv = ["run", "x*x", "--x", "1,2", "--grad", "ones", "--json", "--code", str(tmp_path / "code")]
    program = json.loads(runner.invoke(app, argv, env=env).stdout)
    jsonschema.validate(program, schema())
    (event,) = program["events"]
    assert event["grads"]["x"] == [2.0, 4.0]  # d(x²)/dx = 2x
    assert event["backward_code"]["file"] == "call1.py" and event["backward_code"]["reproduces"] is True
    (tmp_path / "twice.py").write_text(BACKWARD_TWICE)
    res = runner.invoke(app, ["run", str(tmp_path / "twice.py"), "--json"], env=env)
    snippet = json.loads(res.stdout)
    jsonschema.validate(snippet, schema())
    assert res.exit_code == 4 == snippet["exit_code"]
    assert [d["kind"] for d in snippet["diagnoses"]] == ["backward_twice"]
    assert snippet["diagnoses"][0]["line"] == 5 and snippet["events"][0]["backward_code"] is None
