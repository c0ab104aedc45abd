"""--graph and --dot for programs: torch's nodes, their spans and cotangents, against hand-derived values."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import pytest

from documents import event
from vjp_explorer.api import explore
from vjp_explorer.engine.backward_graph import paths

SNAPSHOTS = Path(__file__).parent / "snapshots"
SEED = ("3*a+2*b*b+log(c)", {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, "0.1,1,0.0001")
TWICE = "h = sin(x); y = h*h + h"


def _seed():
    program, values, grad = SEED
    return explore(program, values, grad=grad, graph=True, symbolic=False)


def _by_source(graph):
    return {n["source"]: n for n in graph if n["source"] is not None}


def test_seed_nodes_spans_and_cotangents():
    g = _seed().graph
    nodes = _by_source(g)
    v = [0.1, 1.0, 1e-4]
    # every node tied to the span that made it, with torch's name
    assert {s: n["name"] for s, n in nodes.items()} == {
        "3*a+2*b*b+log(c)": "AddBackward0",
        "3*a+2*b*b": "AddBackward0",
        "3*a": "MulBackward0",
        "2*b*b": "MulBackward0",
        "2*b": "MulBackward0",
        "log(c)": "LogBackward0",
    }
    root = g[0]
    assert root["source"] == "3*a+2*b*b+log(c)" and root["value_of"] == "y" and root["span"] == [0, 16]
    for s in ("3*a+2*b*b+log(c)", "3*a+2*b*b", "3*a", "2*b*b", "log(c)"):
        assert nodes[s]["arriving"]["values"] == pytest.approx(v, rel=1e-6)
    # (2*b)*b sends v*b to 2*b and v*(2*b) to b; 2*b sends 2*(v*b) to b
    b = [3.0, 4.0, 5.0]
    assert nodes["2*b"]["arriving"]["values"] == pytest.approx([vi * bi for vi, bi in zip(v, b, strict=True)], rel=1e-6)
    log = nodes["log(c)"]
    assert log["edges"][0]["value"]["values"] == pytest.approx([0.1 / 6, 1 / 7, 1e-4 / 8], rel=1e-6)
    leaves = {n["leaf"]: n for n in g if n["name"] == "AccumulateGrad"}
    assert set(leaves) == {"a", "b", "c"}
    assert leaves["a"]["arriving"]["values"] == pytest.approx([0.3, 3.0, 3e-4], rel=1e-6)
    four_vb = [4 * vi * bi for vi, bi in zip(v, b, strict=True)]
    assert leaves["b"]["arriving"]["values"] == pytest.approx(four_vb, rel=1e-6)
    # b is used twice: its grad is the sum of the two paths, 2·v·b each
    (merge,) = paths(g)
    assert merge["leaf"] == "b"
    assert sorted(p["source"] for p in merge["parts"]) == ["2*b", "2*b*b"]
    for p in merge["parts"]:
        assert p["value"]["values"] == pytest.approx([2 * vi * bi for vi, bi in zip(v, b, strict=True)], rel=1e-6)


def test_a_value_used_twice_is_a_sum_of_paths():
    x, v = [0.5, 1.0], [1.0, 2.0]
    r = explore(TWICE, {"x": "0.5,1"}, grad="1,2", graph=True, symbolic=False)
    g = r.graph
    h = [math.sin(t) for t in x]
    sin = next(n for n in g if n["name"] == "SinBackward0")
    assert sin["value_of"] == "h" and sin["source"] == "sin(x)" and sin["line"] == 1
    # dL/dh = v (through + h) + v·h + v·h (through each factor of h*h)
    dh = [vi * (2 * hi + 1) for vi, hi in zip(v, h, strict=True)]
    assert sin["arriving"]["values"] == pytest.approx(dh, rel=1e-6)
    merges = {m["value_of"] or m["leaf"]: m for m in paths(g)}
    parts = sorted((p["source"], p["value"]["values"]) for p in merges["h"]["parts"])
    assert [s for s, _ in parts] == ["h*h", "h*h", "h*h + h"]
    assert parts[0][1] == pytest.approx([vi * hi for vi, hi in zip(v, h, strict=True)], rel=1e-6)
    assert parts[2][1] == pytest.approx(v)
    leaf = next(n for n in g if n["name"] == "AccumulateGrad")
    assert leaf["leaf"] == "x"
    assert leaf["arriving"]["values"] == pytest.approx([math.cos(t) * d for t, d in zip(x, dh, strict=True)], rel=1e-6)
    assert r.grads["x"].tolist() == pytest.approx(leaf["arriving"]["values"], rel=1e-6)


def test_cli_graph_tree_json_and_dot(vjp, tmp_path):
    dot = tmp_path / "g.dot"
    res = vjp("run", TWICE, "--x", "0.5,1", "--grad", "1,2", "--graph", "--dot", str(dot))
    assert res.exit_code == 0, res.output
    assert "SinBackward0  h = sin(x)" in res.stdout and "AccumulateGrad → x.grad" in res.stdout
    assert "gradients add where a value is used more than once" in res.stdout
    text = dot.read_text()
    nodes = dict(re.findall(r'^\s+(e1n\d+) \[label="((?:[^"\\]|\\.)*)"(?:, [^\]]*)?\];$', text, re.M))
    edges = re.findall(r"^\s+(e1n\d+) -> (e1n\d+) ", text, re.M)
    g = explore(TWICE, {"x": "0.5,1"}, grad="1,2", graph=True, symbolic=False).graph
    assert sorted(nodes) == sorted(f"e1n{n['id']}" for n in g)
    assert all(nodes[f"e1n{n['id']}"].startswith(n["name"]) for n in g)
    want = sorted((f"e1n{n['id']}", f"e1n{e['to']}") for n in g for e in n["edges"] if e["to"] is not None)
    assert sorted(edges) == want
    assert text.count("{") == text.count("}")

    doc = json.loads(vjp("run", TWICE, "--x", "0.5,1", "--grad", "1,2", "--graph", "--json").stdout)
    assert [n["name"] for n in event(doc)["graph"]] == [n["name"] for n in g]
    assert "graph" not in json.loads(vjp("run", TWICE, "--x", "0.5,1", "--grad", "1,2", "--json").stdout)
    only_file = vjp("run", TWICE, "--x", "0.5,1", "--grad", "1,2", "--dot", str(dot), "--json")
    assert "graph" not in json.loads(only_file.stdout)  # only the file was asked for
    res = vjp("explain", TWICE, "--x", "0.5,1", "--grad", "1,2", "--graph")
    assert res.exit_code == 0 and "SinBackward0" in res.stdout


def test_dot_file_that_cannot_be_written(vjp, tmp_path):
    res = vjp("run", "3*a", "--a", "1", "--dot", str(tmp_path / "no" / "such" / "dir.dot"))
    assert res.exit_code == 2 and "--dot" in res.stderr and "Traceback" not in res.output


def test_graph_tree_pinned_at_80_columns():
    """The tree and the sums over paths exactly as an 80-column terminal shows them (checked by eye)."""
    from rich.console import Console

    from vjp_explorer.render.text import graph_section

    for result, snapshot in (
        (_seed(), "seed_program_graph_80.txt"),
        (explore(TWICE, {"x": "0.5,1"}, grad="1,2", graph=True, symbolic=False), "twice_program_graph_80.txt"),
    ):
        console = Console(file=io.StringIO(), width=80, no_color=True, color_system=None)
        console.print(graph_section(result))
        got = console.file.getvalue()
        assert all(len(line) <= 80 for line in got.splitlines())
        assert got == (SNAPSHOTS / snapshot).read_text()


def test_a_long_loop_keeps_the_tree_and_the_sums_short(vjp, tmp_path):
    """1500 passes make a chain deeper than Python's recursion limit: the view is cut, the DOT file is whole."""
    program = "h = x\nfor i in range(1500):\n    h = h * 1.0001 + x\nsum(h)"
    dot = tmp_path / "loop.dot"
    res = vjp("run", program, "--x", "1,2", "--graph", "--no-symbolic", "--dot", str(dot))
    assert res.exit_code == 0, res.output
    graph = res.stdout[res.stdout.index("backward graph") : res.stdout.index("\nchecks")]
    assert len(graph.splitlines()) < 60
    words = " ".join(graph.replace("│", " ").split())  # as read, whatever the terminal's width wrapped
    assert "deeper: --dot FILE and --json have the whole graph" in words
    assert "(1501 paths in all)" in words  # x: once before the loop, once in each pass
    assert dot.read_text().count("AccumulateGrad") == 1 and dot.read_text().count("MulBackward0") == 1500


def test_each_edge_carries_the_local_derivative_by_hand():
    """sent = received × d along an elementwise edge: d(2b·b)/d(2b) = b, d log(c)/dc = 1/c, d(3a)/da = 3."""
    graph = _seed().graph
    by_source = {n["source"]: n for n in graph if n["source"]}
    mul_bb = by_source["2*b*b"]
    to_2b = next(e for e in mul_bb["edges"] if graph[e["to"]]["source"] == "2*b")
    assert to_2b["local"]["values"] == pytest.approx([3.0, 4.0, 5.0], rel=1e-6)
    log = by_source["log(c)"]
    assert log["edges"][0]["local"]["values"] == pytest.approx([1 / 6, 1 / 7, 1 / 8], rel=1e-6)
    times_3 = by_source["3*a"]
    to_a = next(e for e in times_3["edges"] if e["to"] is not None)
    assert to_a["local"]["values"] == pytest.approx([3.0, 3.0, 3.0], rel=1e-6)


def test_no_local_derivative_where_shapes_differ_or_the_cotangent_has_a_zero():
    r = explore("(W @ x).sum() * 0 + (x * x).sum()", {"W": "ones(2,3)", "x": "1,2,3"}, graph=True, symbolic=False)
    for node in r.graph:
        for edge in node["edges"]:
            if edge["local"] is not None:
                assert edge["value"]["shape"] == node["arriving"]["shape"]
    r = explore("x * y", {"x": "1,2", "y": "3,4"}, grad="0,1", graph=True, symbolic=False)
    assert all(e["local"] is None for n in r.graph for e in n["edges"])  # v has a 0: nothing to divide by
