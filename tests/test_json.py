"""The JSON contract: keys and types pinned, strict JSON (non-finite as strings), streamed when big."""

from __future__ import annotations

import json

import pytest
import torch

from documents import event, inputs, per_leaf
from vjp_explorer import explore
from vjp_explorer.render import json_out

FRAME = {"schema", "kind", "torch", "events", "notes", "exit_code"}
# a program's own keys, at the top level beside the frame
RUN = {
    "title",
    "description",
    "source",
    "program",
    "dtype",
    "device",
    "seed",
    "intermediates",
    "control",
    "probe",
    "explain",
}
CHECK = {
    "name",
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
    "independent",
}
JAC = {"shape", "value", "method", "structure", "diagonal", "reason", "why", "same_pass"}


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
    assert set(d) == FRAME | RUN
    assert d["schema"] == 5 and d["kind"] == "program"
    w = inputs(d)["W"]
    assert (w["shape"], w["value"], w["requires_grad"], w["grad"], w["jacobian"]) == (
        [2, 2],
        [[1.0, 2.0], [3.0, 4.0]],
        False,
        None,
        None,
    )
    assert inputs(d)["x"]["requires_grad"] is True
    assert event(d)["outputs"][0] == {"name": "y", "shape": [2], "dtype": "float32", "value": [5.5, 11.5]}
    assert event(d)["v"][0] == {"name": "y", "shape": [2], "dtype": "float32", "value": [1.0, 1.0]}
    assert event(d)["v_origin"] == "given"
    assert event(d)["grads"] == {"x": [4.0, 6.0], "b": 2.0}
    assert set(per_leaf(d, "jacobian")["x"]) == JAC
    assert per_leaf(d, "jacobian")["x"]["shape"] == [2, 2] and per_leaf(d, "jacobian")["x"]["value"] == [
        [1.0, 2.0],
        [3.0, 4.0],
    ]
    assert per_leaf(d, "jacobian")["b"]["shape"] == [2] and per_leaf(d, "jacobian")["b"]["structure"] == "dense"
    assert per_leaf(d, "jtv") == {"x": [4.0, 6.0], "b": 2.0}
    assert per_leaf(d, "symbolic")["x"] == [4.0, 6.0]
    for c in event(d)["checks"].values():
        assert set(c) == CHECK
        assert c["status"] in ("agree", "disagree", "skipped")
    assert set(event(d)["checks"]) >= {"jtv", "symbolic", "jacobian"}
    assert event(d)["checks"]["symbolic"]["tolerance"] == {"rtol": 1e-4, "atol": 1e-7, "rule": None}
    assert d["intermediates"]["y"]["grad"] == [1.0, 1.0]
    assert d["exit_code"] == 0
    assert d["seed"] is None


def test_json_is_strict_with_non_finite_values(vjp):
    r = vjp("run", "torch.log(x) / x", "--x", "0,1", "--grad", "ones", "--json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert event(d)["outputs"][0]["value"][0] == "-inf"
    assert event(d)["grads"]["x"][0] in ("nan", "inf", "-inf")


def test_json_of_a_value_with_more_dimensions_than_a_memoryview_holds(vjp):
    # a 40-d input gives an 80-d Jacobian: past memoryview's 64 dimensions, the nesting is built by hand
    deep = "[" * 40 + "1.5" + "]" * 40
    r = vjp("run", "x*2", "--x", deep, "--grad", "ones", "--limit", "value_depth=64", "--json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    g, j = event(d)["grads"]["x"], per_leaf(d, "jacobian")["x"]
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
    r = vjp("run", "x * 3", "--x", "linspace(0, 1, 200000)", "--grad", "ones", "--json", "--full", "--no-symbolic")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(event(d)["grads"]["x"]) == 200_000 and event(d)["grads"]["x"][-1] == 3.0


# --- JSON that scales: summaries past SUMMARY_ABOVE elements, --full, --save (docs/json.md) ---

SUMMARY = {"summary", "shape", "dtype", "numel", "min", "max", "norm", "nan", "inf", "first", "last"}


def test_the_summary_threshold_is_the_documented_one():
    from pathlib import Path

    from vjp_explorer.result_json import SUMMARY_ABOVE, SUMMARY_EDGE

    assert SUMMARY_ABOVE == 100_000 and SUMMARY_EDGE == 5
    doc = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    assert "100,000 elements" in doc and "`--save FILE.npz`" in doc


def test_an_array_past_the_threshold_is_a_summary_and_one_at_it_is_whole(vjp):
    from vjp_explorer.result_json import SUMMARY_ABOVE

    n = SUMMARY_ABOVE + 1
    argv = ["run", "x * 3 + c", "--x", f"linspace(1, 2, {n})", "--c", "0.5", "--grad", "ones", "--json"]
    d = json.loads(ok_stdout(vjp(*argv)))
    assert set(d) == FRAME | RUN and d["schema"] == 5
    x = torch.linspace(1, 2, n)
    s = inputs(d)["x"]["value"]
    assert set(s) == SUMMARY and s["summary"] is True
    assert (s["shape"], s["dtype"], s["numel"], s["nan"], s["inf"]) == ([n], "float32", n, 0, 0)
    assert (s["min"], s["max"]) == (1.0, 2.0)
    assert s["norm"] == pytest.approx(float(x.double().norm()), rel=1e-6)  # a float32 dot product
    assert s["first"] == x[:5].tolist() and s["last"] == x[-5:].tolist()
    y = event(d)["outputs"][0]["value"]
    assert y["first"] == (x[:5] * 3 + 0.5).tolist() and y["last"] == (x[-5:] * 3 + 0.5).tolist()
    assert event(d)["grads"]["x"]["min"] == event(d)["grads"]["x"]["max"] == 3.0
    assert event(d)["grads"]["c"] == float(n)  # a 0-d grad stays a number
    assert per_leaf(d, "symbolic")["x"]["summary"] is True and per_leaf(d, "symbolic")["x"]["dtype"] == "float64"
    assert per_leaf(d, "jacobian")["x"]["diagonal"]["summary"] is True
    # at the threshold: every number, as before
    whole = json.loads(ok_stdout(vjp(*argv[:3], f"linspace(1, 2, {SUMMARY_ABOVE})", *argv[4:])))
    assert event(whole)["grads"]["x"] == [3.0] * SUMMARY_ABOVE


def test_a_summary_counts_non_finite_elements_and_leaves_them_out_of_min_max_norm(vjp):
    n = 100_003
    d = json.loads(ok_stdout(vjp("run", "torch.log(x)", "--x", f"linspace(0, 1, {n})", "--grad", "ones", "--json")))
    s = event(d)["outputs"][0]["value"]
    assert (s["inf"], s["nan"], s["first"][0], s["max"]) == (1, 0, "-inf", 0.0)
    assert s["min"] == float(torch.log(torch.linspace(0, 1, n)[1]))


def test_full_writes_every_number(vjp):
    n = 100_001
    argv = ["run", "x * 3", "--x", f"linspace(1, 2, {n})", "--grad", "ones", "--json", "--full", "--no-symbolic"]
    d = json.loads(ok_stdout(vjp(*argv)))
    assert inputs(d)["x"]["value"] == torch.linspace(1, 2, n).tolist()
    assert event(d)["grads"]["x"] == [3.0] * n


def ok_stdout(r) -> str:
    assert r.exit_code == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
@pytest.mark.parametrize(
    ("program", "argv"),
    [
        ("3*a+2*b*b+log(c)", ["--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]),
        ("h = W @ x; y = torch.tanh(h)", ["--x", "1,2", "--const", "W=[[1,2],[3,4]]", "--grad", "1,-1"]),
        ("x * 2 + s", ["--x", "linspace(0, 1, 100001)", "--s", "2", "--grad", "ones", "--no-symbolic"]),
    ],
)
def test_save_round_trips_the_numbers_of_the_full_json(vjp, tmp_path, suffix, program, argv):
    path = tmp_path / f"arrays{suffix}"
    d = json.loads(ok_stdout(vjp("run", program, *argv, "--json", "--full", "--save", str(path))))
    if suffix == ".npz":
        import numpy as np

        with np.load(path) as f:
            saved = {k: f[k].tolist() for k in f.files}
    else:
        saved = {k: v.tolist() for k, v in torch.load(path, weights_only=True).items()}
    want = {f"inputs/{n}": i["value"] for n, i in inputs(d).items()}
    want |= {"output": event(d)["outputs"][0]["value"], "grad": event(d)["v"][0]["value"]}
    want |= {f"grads/{n}": g for n, g in event(d)["grads"].items()}
    want |= {f"jtv/{n}": t for n, t in per_leaf(d, "jtv").items() if t is not None}
    want |= {f"symbolic/{n}": t for n, t in per_leaf(d, "symbolic").items() if t is not None}
    for n, j in per_leaf(d, "jacobian").items():
        want |= {f"jacobian/{n}": j["value"]} if j["value"] is not None else {}
        want |= {f"jacobian_diagonal/{n}": j["diagonal"]} if j["diagonal"] is not None else {}
    for n, m in d["intermediates"].items():
        want[f"intermediates/{n}"] = m["value"]
        want |= {f"intermediate_grads/{n}": m["grad"]} if m["grad"] is not None else {}
    assert saved.keys() == want.keys()
    for k, v in want.items():
        assert saved[k] == v, k


def test_save_without_json_still_shows_the_tables(vjp, tmp_path):
    path = tmp_path / "a.npz"
    r = vjp("run", "x * x", "--x", "1,2", "--grad", "ones", "--save", str(path))
    assert r.exit_code == 0, r.stderr
    assert "checks" in r.stdout and path.stat().st_size > 0


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("a.csv", ".npz (numpy) or .pt (torch)"),
        ("a", ".npz (numpy) or .pt (torch)"),
        ("no/such/a.npz", "does not exist"),
    ],
)
def test_save_to_a_file_it_cannot_write_is_bad_input(vjp, tmp_path, name, words):
    r = vjp("run", "x * x", "--x", "1,2", "--grad", "ones", "--save", str(tmp_path / name))
    assert r.exit_code == 2 and r.stdout == ""
    assert words in r.stderr and "Traceback" not in r.stderr


def test_save_is_refused_for_a_snippet(vjp, tmp_path):
    r = vjp(
        "run", "--snippet", "import torch\nx = torch.ones(2, requires_grad=True)\n", "--save", str(tmp_path / "a.npz")
    )
    assert r.exit_code == 2 and "--save" in r.stderr
