"""--graph and --dot: the nodes torch ran for one backward call, with the cotangents, against hand-derived values."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from vjp_explorer.engine.backward_graph import paths
from vjp_explorer.render.graph_view import to_dot
from vjp_explorer.snippet import run_snippet

ROOT = Path(__file__).resolve().parents[1]
TWICE = """import torch
x = torch.tensor([1.0, 2.0], requires_grad=True)
h = x * x
y = torch.sin(h) + h
y.backward(torch.tensor([1.0, 0.5]))
"""


def _by_name(graph):
    out = {}
    for node in graph:
        out.setdefault(node["name"], []).append(node)
    return out


def test_seed_graph_nodes_and_cotangents():
    r = run_snippet((ROOT / "expressions/snippets/seed000_ex1.py").read_text(), seed=0, graph=True)
    g = r.events[0].graph
    names = _by_name(g)
    assert {n["leaf"] for n in names["AccumulateGrad"]} == {"a", "b", "c"}
    assert names["LogBackward0"][0]["arriving"]["values"] == pytest.approx([0.1, 1.0, 1e-4])
    leaf = {n["leaf"]: n["arriving"]["values"] for n in names["AccumulateGrad"]}
    assert leaf["a"] == pytest.approx([0.3, 3.0, 3e-4])
    assert leaf["b"] == pytest.approx([1.2, 16.0, 2e-3], rel=1e-6)
    assert leaf["c"] == pytest.approx([1 / 60, 1 / 7, 1.25e-5], rel=1e-6)
    root = g[0]
    assert root["name"] == "AddBackward0" and root["value_of"] == "y"


def test_graph_nodes_name_the_statement_that_made_them():
    r = run_snippet(TWICE, seed=0, graph=True)
    lines = {n["name"]: n["line"] for n in r.events[0].graph}
    assert lines["SinBackward0"] == 4 and lines["MulBackward0"] == 3


def test_a_value_used_twice_is_a_sum_of_paths():
    r = run_snippet(TWICE, seed=0, graph=True)
    g = r.events[0].graph
    merges = {m["value_of"] or m["leaf"]: m for m in paths(g)}
    h = merges["h"]  # d/dh = v (through + h) + v·cos(h) (through sin(h))
    parts = sorted((p["name"], p["value"]["values"]) for p in h["parts"])
    assert parts[0][0] == "AddBackward0" and parts[0][1] == pytest.approx([1.0, 0.5])
    assert parts[1][0] == "SinBackward0" and parts[1][1] == pytest.approx(
        [math.cos(1.0), 0.5 * math.cos(4.0)], rel=1e-6
    )
    x = merges["x"]  # h = x*x: each factor's path sends d/dh · x
    dh = [1 + math.cos(1.0), 0.5 + 0.5 * math.cos(4.0)]
    for p in x["parts"]:
        assert p["value"]["values"] == pytest.approx([dh[0] * 1.0, dh[1] * 2.0], rel=1e-6)


SEVERAL = """import torch
S = torch.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
L, V = torch.linalg.eigh(S)
(L[-1] + V[0, -1] + L.sum()).backward()
"""


def test_a_node_of_several_outputs_adds_up_each_output_on_its_own(vjp, tmp_path):
    """eigh's node gets L's cotangent at output 0 and V's at output 1: they are not one sum (it was an
    internal error for svd and an LSTM, and `1 + 1 = 1` for eigh). L's two paths add: [0, 1] + [1, 1]."""
    r = run_snippet(SEVERAL, seed=0, graph=True)
    g = r.events[0].graph
    (merge,) = paths(g)
    assert merge["name"] == "LinalgEighBackward0" and (merge["output"], merge["outputs"]) == (0, 2)
    assert sorted(p["value"]["values"] for p in merge["parts"]) == [[0.0, 1.0], [1.0, 1.0]]
    eigh = next(n for n in g if n["name"] == "LinalgEighBackward0")
    assert eigh["arriving"]["values"] == [1.0, 2.0]  # the first output's: L's sum
    into = [e for n in g for e in n["edges"] if e["to"] == eigh["id"]]
    assert sorted(e["input_nr"] for e in into) == [0, 0, 1]
    assert all(e["local"] is None for e in eigh["edges"])  # no one factor: two cotangents made what it sent
    path = tmp_path / "eigh.py"
    path.write_text(SEVERAL)
    shown = vjp("run", str(path), "--graph")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert "LinalgEighBackward0 (node" in text and ", output 0) = via" in text
    assert "at its output 1 here" in text and "1 + 1 = 1" not in text


def test_dot_parses_back_to_the_same_graph(tmp_path):
    r = run_snippet(TWICE, seed=0, graph=True)
    g = r.events[0].graph
    text = to_dot([(1, 'a "title" with \\ and\nbreak', g)])
    nodes = dict(re.findall(r'^\s+(e1n\d+) \[label="((?:[^"\\]|\\.)*)"(?:, [^\]]*)?\];$', text, re.M))
    edges = re.findall(r"^\s+(e1n\d+) -> (e1n\d+) ", text, re.M)
    assert len(nodes) == len(g)
    assert all(nodes[f"e1n{n['id']}"].startswith(n["name"]) for n in g)
    want = sorted((f"e1n{n['id']}", f"e1n{e['to']}") for n in g for e in n["edges"] if e["to"] is not None)
    assert sorted(edges) == want
    assert text.count("{") == text.count("}")
    assert 'label="a \\"title\\" with \\\\ and\\nbreak";' in text  # escaped, and one line


def test_cli_graph_tree_and_dot_file(vjp, tmp_path):
    path = tmp_path / "twice.py"
    path.write_text(TWICE)
    dot = tmp_path / "g.dot"
    res = vjp("run", str(path), "--seed", "0", "--graph", "--dot", str(dot))
    assert res.exit_code == 0, res.output
    assert "backward graph of #1" in res.stdout and "SinBackward0" in res.stdout
    assert "gradients add where a value is used more than once" in res.stdout
    assert dot.read_text().startswith("digraph backward {")
    res = vjp("run", str(path), "--seed", "0", "--dot", str(dot), "--json")
    assert '"graph": null' in res.stdout  # only the file was asked for
    res = vjp("run", "3*a", "--a", "1", "--graph")  # a program has its graph too (tests/test_program_graph.py)
    assert res.exit_code == 0 and "MulBackward0 (output)  y = 3*a" in res.stdout


def test_svg_and_html_save_what_the_terminal_shows(vjp, tmp_path):
    import xml.etree.ElementTree as ET

    svg, html = tmp_path / "run.svg", tmp_path / "run.html"
    res = vjp("run", "seed000_ex1", "--seed", "0", "--svg", str(svg), "--html", str(html))
    assert res.exit_code == 0
    ET.fromstring(svg.read_text())  # well-formed XML
    page = html.read_text()
    assert page.lstrip().startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for number in ("0.0166667", "1.25e-05", "tensor([3.0000e-01, 3.0000e+00, 3.0000e-04])"):
        assert number in res.stdout and number in page
        assert number.replace(" ", "&#160;") in svg.read_text() or number in svg.read_text()
    res = vjp("run", "3*a", "--a", "1,2", "--grad", "1,1", "--svg", str(svg))
    assert res.exit_code == 0 and "Jᵀv" in svg.read_text().replace("&#7488;", "ᵀ")


def test_version(vjp):
    res = vjp("--version")
    assert res.exit_code == 0 and res.stdout.startswith("vjp-explorer ")


@pytest.mark.parametrize(
    ("args", "snapshot"),
    [
        (["run", "seed000_ex1", "--seed", "0"], "seed000_ex1_run_80.txt"),
        (["run", "seed000_ex4", "--seed", "0", "--graph"], "seed000_ex4_graph_80.txt"),
    ],
)
def test_pinned_console_at_80_columns(args, snapshot, monkeypatch):
    """The transcript, tables and graph tree exactly as an 80-column terminal shows them (checked by eye)."""
    from typer.testing import CliRunner

    from vjp_explorer.cli import app

    monkeypatch.setenv("COLUMNS", "80")
    res = CliRunner().invoke(app, args)
    got = res.stdout.replace(str(ROOT) + "/", "").replace(f"torch {torch_version()}", "torch VERSION")
    want = (Path(__file__).parent / "snapshots" / snapshot).read_text()
    assert got == want.replace(f"torch {torch_version()}", "torch VERSION")


def torch_version() -> str:
    import torch

    return torch.__version__
