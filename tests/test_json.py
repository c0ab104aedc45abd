"""The JSON contract: keys and types pinned, strict JSON (non-finite as strings), streamed when big."""

from __future__ import annotations

import json

import pytest

from vjp_explorer import explore
from vjp_explorer.render import json_out

TOP = {
    "schema",
    "title",
    "description",
    "source",
    "program",
    "dtype",
    "device",
    "seed",
    "inputs",
    "output",
    "grad",
    "backward_calls",
    "grads",
    "jacobian",
    "jtv",
    "symbolic",
    "checks",
    "intermediates",
    "control",
    "notes",
    "exit_code",
}
CHECK = {
    "status",
    "compares",
    "max_abs_diff",
    "max_rel_diff",
    "tolerance",
    "reason",
    "undefined",
    "overflow",
    "spurious",
    "nonfinite",
    "worst",
}
JAC = {"shape", "value", "method", "structure", "diagonal", "reason", "why"}


def test_schema_is_pinned(vjp):
    r = vjp(
        "run",
        "y = W @ x + b; z = y.sum()",
        "--x",
        "1,2",
        "--b",
        "0.5",
        "--const",
        "W=[[1,2],[3,4]]",
        "--output",
        "y",
        "--grad",
        "1,1",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) == TOP
    assert d["schema"] == 2
    assert d["inputs"]["W"] == {"shape": [2, 2], "value": [[1.0, 2.0], [3.0, 4.0]], "requires_grad": False}
    assert d["inputs"]["x"]["requires_grad"] is True
    assert d["output"] == {"name": "y", "shape": [2], "value": [5.5, 11.5]}
    assert d["grad"] == {"shape": [2], "value": [1.0, 1.0], "source": "given"}
    assert d["grads"] == {"x": [4.0, 6.0], "b": 2.0}
    assert set(d["jacobian"]["x"]) == JAC
    assert d["jacobian"]["x"]["shape"] == [2, 2] and d["jacobian"]["x"]["value"] == [[1.0, 2.0], [3.0, 4.0]]
    assert d["jacobian"]["b"]["shape"] == [2] and d["jacobian"]["b"]["structure"] == "dense"
    assert d["jtv"] == {"x": [4.0, 6.0], "b": 2.0}
    assert d["symbolic"]["x"] == [4.0, 6.0]
    for c in d["checks"].values():
        assert set(c) == CHECK
        assert c["status"] in ("agree", "disagree", "skipped")
    assert set(d["checks"]) >= {"jtv", "symbolic", "jacobian"}
    assert d["checks"]["symbolic"]["tolerance"] == {"rtol": 1e-4, "atol": 1e-7}
    assert d["intermediates"]["y"]["grad"] == [1.0, 1.0]
    assert d["exit_code"] == 0
    assert d["seed"] is None


def test_json_is_strict_with_non_finite_values(vjp):
    r = vjp("run", "torch.log(x) / x", "--x", "0,1", "--grad", "ones", "--json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert d["output"]["value"][0] == "-inf"
    assert d["grads"]["x"][0] in ("nan", "inf", "-inf")


def test_json_of_a_value_with_more_dimensions_than_a_memoryview_holds(vjp):
    # a 40-d input gives an 80-d Jacobian: past memoryview's 64 dimensions, the nesting is built by hand
    deep = "[" * 40 + "1.5" + "]" * 40
    r = vjp("run", "x*2", "--x", deep, "--grad", "ones", "--limit", "value_depth=64", "--json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    g, j = d["grads"]["x"], d["jacobian"]["x"]
    assert j["shape"] == [1] * 80
    j = j["value"]
    for _ in range(40):
        (g,) = g
    for _ in range(80):
        (j,) = j
    assert g == 2.0 and j == 2.0


@pytest.mark.parametrize(
    ("program", "values"),
    [
        ("x * 2", {"x": "linspace(0, 1, 7)"}),
        ("torch.log(x) * y", {"x": "[[0, 1, 2], [3, 4, 5]]", "y": "ones(2, 3)"}),
        ("x.sum(dim=2) * 3", {"x": "arange(24)"}),
        ("x * x", {"x": "0.5"}),
    ],
)
def test_streamed_json_equals_the_pretty_one(monkeypatch, program, values):
    if program.startswith("x.sum"):
        values = {"x": "[[[0,1,2,3],[4,5,6,7],[8,9,10,11]],[[12,13,14,15],[16,17,18,19],[20,21,22,23]]]"}
    r = explore(program, values, grad="ones" if program != "x * x" else None)
    pretty = json_out.dumps(r)
    monkeypatch.setattr(json_out, "PRETTY_LIMIT", 0)
    monkeypatch.setattr(json_out, "CHUNK", 2)
    streamed = json_out.dumps(r)
    assert "\n" not in streamed
    assert json.loads(streamed) == json.loads(pretty)


def test_big_json_is_compact(vjp):
    r = vjp("run", "x * 3", "--x", "linspace(0, 1, 200000)", "--grad", "ones", "--json", "--no-symbolic")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["grads"]["x"]) == 200_000 and d["grads"]["x"][-1] == 3.0
