"""A backward graph (engine/backward_graph.py's plain nodes) -> a Rich tree, the sums over paths, Graphviz DOT.

Shared by programs and snippets. A program's nodes carry `span` (where in the program the node was made, its
text in `source`); a snippet's carry the `line` of the statement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from ..engine.backward_graph import paths
from ..errors import UsageError
from ..language.unicode import visible as _visible
from ..result import element_label
from ..wording import CLI
from .numbers import fmt_shape

PATH_ELEMENTS = 6  # elements written out as a sum over paths; a bigger tensor shows its first ones
PATH_TERMS = 4  # paths written out in one sum; more (a value used in each pass of a loop) are counted
SOURCE_CHARS = 32  # a node's program text is cut here, so each line of the tree stays short
MAX_DEPTH = 12  # levels of the tree shown: deeper, each line would have little room left at 80 columns
MAX_LINES = 200  # lines of the tree shown; the DOT file and the JSON have every node
# how the output and the leaves are marked, in the colours torchviz users know: its DOT fills a leaf
# lightblue and the output darkolivegreen1; the tree says "(output)" and "(leaf)" in the nearest terminal colours
LEAF_FILL, OUTPUT_FILL = "lightblue", "darkolivegreen1"
LEAF_STYLE, OUTPUT_STYLE = "blue", "green"


def tree(graph: list[dict[str, Any]], title: str, said_to: str = CLI) -> list[RenderableType]:
    """The graph as a tree, output first, with the cotangent each node received; then the sums over paths.
    Where the whole graph is, when the tree is cut, is said in the words of `said_to` (wording.py)."""
    whole = "--dot FILE and --json have" if said_to == CLI else "r.graph has"
    from rich.tree import Tree

    g = {n["id"]: n for n in graph}
    incoming: dict[int, int] = {}
    outputs: dict[int, set[int]] = {}  # which of a node's outputs the edges reach (svd: U, S, Vh)
    for n in graph:
        for edge in n["edges"]:
            if edge["to"] is not None:
                incoming[edge["to"]] = incoming.get(edge["to"], 0) + 1
                outputs.setdefault(edge["to"], set()).add(edge.get("input_nr", 0))
    top = Tree(Text(title, style="bold"))
    shown: set[int] = set()
    roots = set(g) - set(incoming)

    def label(node: dict[str, Any], edge: Any) -> Text:
        edge_value = edge["value"] if edge else None
        text = Text(node["name"], style="bold")
        named = "span" not in node and node["value_of"] and not node["leaf"]  # a snippet's node: "(y)"
        if node["id"] in roots:
            text.append(f" (output {_visible(node['value_of'])})" if named else " (output)", style=OUTPUT_STYLE)
        if node["leaf"]:
            text.append(f" → {_visible(node['leaf'])}.grad", style=LEAF_STYLE)
            text.append(" (leaf)", style=LEAF_STYLE)
        if "span" in node and node["source"]:
            made = f"{node['value_of']} = " if node["value_of"] and not node["leaf"] else ""
            text.append(f"  {_visible(made + _cut(node['source']))}", style="cyan")
        elif named and node["id"] not in roots:
            text.append(f" ({_visible(node['value_of'])})")
        if (shape := shape_of(node)) is not None:
            text.append(f"  {shape}", style="dim")
        merged = incoming.get(node["id"], 0) > 1
        several = len(outputs.get(node["id"], ())) > 1  # what arrives is one cotangent per output, not one sum
        at = f" at its output {edge.get('input_nr', 0)}" if several and edge else ""
        if node["id"] in shown:
            text.append(
                f"  gets {short(edge_value)}{at} here (shown above)" if merged else "  (shown above)", style="dim"
            )
            return text
        if not node["ran"]:
            text.append("  (did not run)")
        elif several:
            text.append(f"  gets {short(edge_value)}{at} here")
        elif merged:
            text.append(f"  gets {short(edge_value)} here, {short(node['arriving'])} in all")
        else:
            text.append(f"  receives {short(node['arriving'])}")
        if edge and edge.get("local") is not None:  # sent = received × the node above's local derivative
            text.append(f"  (× {short(edge['local'])})", style="dim")
        if node["line"] and "span" not in node:
            text.append(f"  line {node['line']}", style="dim")
        return text

    # depth first, children in torch's order; a loop's long chain is cut where it would no longer read well
    stack: list[tuple[Any, int, Any, int]] = [(top, i, None, 0) for i in sorted(set(g) - set(incoming), reverse=True)]
    lines = 0
    while stack:
        parent, node_id, edge, depth = stack.pop()
        lines += 1
        if lines > MAX_LINES:
            top.add(Text(f"... {len(g) - len(shown)} more nodes: {whole} the whole graph", style="dim"))
            break
        node = g[node_id]
        again = node_id in shown
        branch = parent.add(label(node, edge))
        if again:
            continue
        shown.add(node_id)
        children = [(branch, e["to"], e, depth + 1) for e in node["edges"] if e["to"] is not None]
        if children and depth + 1 >= MAX_DEPTH:
            branch.add(Text(f"... deeper: {whole} the whole graph", style="dim"))
            continue
        stack.extend(reversed(children))
    out: list[RenderableType] = [top]
    merges = paths(graph)
    if merges:
        out.append(Text("gradients add where a value is used more than once:", style="bold"))
        for m in merges:
            out.extend(_sum_over_paths(m, g[m["node"]], said_to))
    return out


def _sum_over_paths(m: dict[str, Any], node: dict[str, Any], said_to: str = CLI) -> list[RenderableType]:
    """`b.grad = 2 via MulBackward0 (2*b) + ...`; for a tensor, one line per element: each a sum over paths."""
    several = m.get("outputs", 1) > 1 or m.get("output", 0) != 0  # svd's U, S, Vh: each output on its own
    whom = (
        f"{_visible(m['leaf'])}.grad"
        if m["leaf"]
        else f"d/d{_visible(m['value_of'])}"
        if m["value_of"] and not several
        else f"{m['name']} (node {m['node']}" + (f", output {m['output']})" if several else ")")
    )
    parts = m["parts"][:PATH_TERMS]  # a value used in every pass of a loop: the first paths, and how many
    rest = f" + ... ({len(m['parts'])} paths in all)" if len(m["parts"]) > PATH_TERMS else ""
    vias = [p["name"] + (f" ({_cut(p['source'])})" if p["source"] and "span" in node else "") for p in parts]
    # what arrived is recorded for a node's first output: another output's sum is the parts' own
    total = node["arriving"] if m.get("output", 0) == 0 else _summed([p["value"] for p in m["parts"]])
    got = [_flat(p["value"]) for p in parts]
    values = [v for v in got if v is not None]
    sizes = {len(v) for v in values} | {len(_flat(total) or [])}
    if total is None or "values" not in total or len(values) < len(got) or not total["shape"] or len(sizes) > 1:
        terms = " + ".join(f"{short(p['value'])} via {_visible(via)}" for p, via in zip(parts, vias, strict=True))
        return [Padding(Text(f"{whom} = {terms}{rest} = {short(total)}"), (0, 0, 0, 2), expand=False)]
    head = f"{whom} = " + " + ".join(f"via {_visible(via)}" for via in vias) + rest + ":"
    lines: list[RenderableType] = [Padding(Text(head), (0, 0, 0, 2), expand=False)]
    shape = tuple(total["shape"])
    sums = _flat(total) or []
    for k in range(min(len(sums), PATH_ELEMENTS)):
        label = element_label(whom, shape, k)
        terms = _num(values[0][k]) + "".join(
            f" - {_num(-v[k])}" if v[k] < 0 else f" + {_num(v[k])}" for v in values[1:]
        )
        terms += " + ..." if rest else ""
        lines.append(Padding(Text(f"{label}: {terms} = {_num(sums[k])}"), (0, 0, 0, 4), expand=False))
    if len(sums) > PATH_ELEMENTS:
        where = "--json with --graph has" if said_to == CLI else "r.graph has"
        more = f"... {len(sums) - PATH_ELEMENTS} more elements ({where} them all)"
        lines.append(Padding(Text(more), (0, 0, 0, 4), expand=False))
    return lines


def _summed(values: list[Any]) -> Any:
    """The sum of some cotangents of one shape, as a summary ({shape, norm, values}); None where one has no
    values or the shapes differ."""
    import math

    flat = [_flat(v) for v in values]
    if not flat or any(f is None for f in flat) or len({tuple(v["shape"]) for v in values}) > 1:
        return None
    sums = [math.fsum(column) for column in zip(*flat, strict=True)]
    return {"shape": list(values[0]["shape"]), "norm": math.sqrt(math.fsum(x * x for x in sums)), "values": sums}


def to_dot(events: list[tuple[int, str, list[dict[str, Any]]]]) -> str:
    """Graphviz DOT of some graphs (index, title, nodes): one cluster per graph. Written by us, no Graphviz needed."""
    lines = ["digraph backward {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    for index, title, graph in events:
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f"    label={_quote(title)};")
        pointed_to = {edge["to"] for node in graph for edge in node["edges"]}
        for node in graph:
            label = node["name"] + (f"\n→ {node['leaf']} (leaf)" if node["leaf"] else "")
            label += "\n(output)" if node["id"] not in pointed_to else ""
            label += f"\nmakes {node['value_of']}" if node["value_of"] else ""
            if "span" in node and node["source"]:
                label += f"\n{_cut(node['source'])}"
            elif node["line"]:
                label += f"\nline {node['line']}"
            if (shape := shape_of(node)) is not None:
                label += f"\n{shape}"
            if node["arriving"] is not None:
                label += f"\nreceives {short(node['arriving'])}"
            fill = LEAF_FILL if node["leaf"] else OUTPUT_FILL if node["id"] not in pointed_to else None
            style = f", style=filled, fillcolor={fill}" if fill else ""
            lines.append(f"    e{index}n{node['id']} [label={_quote(label)}{style}];")
        for node in graph:
            for edge in node["edges"]:
                if edge["to"] is not None:
                    lines.append(
                        f"    e{index}n{node['id']} -> e{index}n{edge['to']} [label={_quote(short(edge['value']))}];"
                    )
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_dot(path: Path, events: list[tuple[int, str, list[dict[str, Any]]]]) -> None:
    """--dot FILE: the graphs as DOT; a file that cannot be written is bad input (exit 2)."""
    try:
        path.write_text(to_dot(events), encoding="utf-8")
    except OSError as err:
        raise UsageError(f"--dot {_visible(str(path))}: cannot write the file ({err.strerror}).") from None
    from ..outfiles import wrote

    wrote(path, "the backward graph as Graphviz DOT; dot -Tsvg renders it")


def short(summary: Any, n: int = 4) -> str:
    """A cotangent in a few numbers: `[0.1, 1, 0.0001]`, `[1, 2, 3, 4, …]`, or its shape and norm."""
    if summary is None:
        return "None"
    values = summary.get("values")
    if values is None:
        return f"shape {summary['shape']}, norm {summary['norm']:.4g}"
    flat = _flatten(values)
    text = ", ".join(_g(x, 4) for x in flat[:n]) + (", …" if len(flat) > n else "")
    return f"[{text}]" if isinstance(values, list) else text


def shape_of(node: dict[str, Any]) -> str | None:
    """The shape of the value a node stands for (that of the gradient it received): `[32, 10]`; None for a
    single number, where a shape would only add `[]` to every line."""
    arriving = node.get("arriving")
    if arriving is None or not arriving.get("shape"):
        return None
    return fmt_shape(tuple(arriving["shape"]))


def _num(x: float) -> str:
    return _g(x, 6)


def _g(x: float, digits: int) -> str:
    """x in `digits` significant digits; -0 as 0 (a cotangent's zero has no sign worth reading)."""
    return f"{x + 0.0:.{digits}g}"  # -0.0 + 0.0 is 0.0


def _flat(summary: Any) -> list[float] | None:
    if summary is None or summary.get("values") is None:
        return None
    return _flatten(summary["values"])


def _flatten(x: Any) -> list[float]:
    if isinstance(x, list):
        return [v for item in x for v in _flatten(item)]
    return [float(x)]


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SOURCE_CHARS else text[: SOURCE_CHARS - 1] + "…"


def _quote(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, line breaks as DOT's \\n, other controls as spaces."""
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else "\\n" if c == "\n" else " " for c in body) + '"'
