"""The backward graph of a program (issue 31): each value shows its shape (`[32, 10]`), the leaves and the
output are marked in the tree, and in DOT as torchviz draws them (leaves lightblue, output darkolivegreen1)."""

from __future__ import annotations

import re

import torch

ARGV = ["run", "y = (W @ x).tanh().sum()", "--W", "randn(32, 10)", "--x", "randn(10)", "--seed", "0"]


def test_the_tree_shows_shapes_and_marks_leaves_and_output(vjp):
    r = vjp(*ARGV, "--graph")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    start = lines.index("backward graph")
    tree = lines[start + 2 :]
    # the shapes torch gives the same values (an independent route: plain torch)
    W, x = torch.randn(32, 10, requires_grad=True), torch.randn(10, requires_grad=True)
    h = W @ x
    assert list(W.shape) == [32, 10] and list(h.shape) == [32]
    root = tree[0]
    assert "SumBackward0 (output)" in root and "[]" not in root  # a single number: no shape to show
    w_leaf = next(line for line in tree if "→ W.grad" in line)
    x_leaf = next(line for line in tree if "→ x.grad" in line)
    assert "(leaf)" in w_leaf and "[32, 10]" in w_leaf
    assert "(leaf)" in x_leaf and "[10]" in x_leaf
    assert any("MvBackward0" in line and "[32]" in line for line in tree)
    assert sum("(output)" in line for line in tree) == 1


def test_dot_fills_leaves_and_output_as_torchviz_does(vjp, tmp_path):
    path = tmp_path / "g.dot"
    r = vjp(*ARGV, "--dot", str(path))
    assert r.exit_code == 0, r.stderr
    nodes = dict(re.findall(r'^\s*(e\d+n\d+) \[label="(.*)$', path.read_text(), re.M))
    fills = {n: re.search(r"fillcolor=(\w+)", rest) for n, rest in nodes.items()}
    leaves = [n for n, rest in nodes.items() if "(leaf)" in rest]
    outputs = [n for n, rest in nodes.items() if "(output)" in rest]
    assert len(leaves) == 2 and len(outputs) == 1
    assert all(fills[n] and fills[n].group(1) == "lightblue" for n in leaves)
    assert fills[outputs[0]] and fills[outputs[0]].group(1) == "darkolivegreen1"
    assert sum(1 for f in fills.values() if f) == 3  # the other nodes keep Graphviz's default
    assert any("→ W (leaf)\\n[32, 10]" in rest for rest in nodes.values())
