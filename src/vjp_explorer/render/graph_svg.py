"""A backward graph (engine/backward_graph.py's plain nodes) -> an SVG picture, drawn here: no Graphviz binary.

What a notebook shows for `r.graph` (display.Graph), as torchviz's make_dot shows a graph: one box per node,
the output at the top and the leaves below, each box with the cotangent the node received; an arrow along
each edge backward ran. The colours are torchviz's (the leaves light blue, the output light green).
"""

from __future__ import annotations

from html import escape
from typing import Any

from .graph_view import SOURCE_CHARS, short

CHAR = 7.2  # px per character of the 12px monospace font
LINE = 16  # px per line of text in a box
PAD = 8  # px inside a box, around its text
GAP_X, GAP_Y = 24, 36  # px between boxes side by side, between levels
FILL = {"output": "#caff70", "leaf": "#add8e6", "node": "#f2f2f2"}  # darkolivegreen1, lightblue, grey


def _levels(nodes: list[dict[str, Any]]) -> dict[int, int]:
    """Each node's level: the longest path from an output to it, so that every arrow points down."""
    ids = [n["id"] for n in nodes]
    children = {n["id"]: [e["to"] for e in n["edges"] if e["to"] is not None] for n in nodes}
    incoming = dict.fromkeys(ids, 0)
    for kids in children.values():
        for k in kids:
            incoming[k] = incoming.get(k, 0) + 1
    level = dict.fromkeys(ids, 0)
    ready = [i for i in ids if incoming[i] == 0]
    while ready:  # Kahn's order: a node is placed after all the nodes that send to it
        i = ready.pop(0)
        for k in children[i]:
            level[k] = max(level[k], level[i] + 1)
            incoming[k] -= 1
            if incoming[k] == 0:
                ready.append(k)
    return level


def _lines(node: dict[str, Any], root: bool) -> list[str]:
    title = node["name"]
    if node.get("leaf"):
        title += f" → {node['leaf']}.grad"
    elif root and node.get("value_of"):
        title += f" (output {node['value_of']})"
    elif node.get("value_of"):
        title += f" ({node['value_of']})"
    made = [_cut(node["source"])] if node.get("span") and node.get("source") else []  # a program's text
    if not node.get("ran", True):
        return [title, *made, "did not run"]
    return [title, *made, f"receives {short(node.get('arriving'))}"]


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SOURCE_CHARS else text[: SOURCE_CHARS - 1] + "…"


def svg(nodes: list[dict[str, Any]], title: str | None = None) -> str:
    """The graph as a standalone SVG document."""
    if not nodes:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="30"><text x="4" y="20">no nodes</text></svg>'
        )
    level = _levels(nodes)
    incoming = {e["to"] for n in nodes for e in n["edges"] if e["to"] is not None}
    boxes: dict[int, tuple[list[str], float, float]] = {}  # id -> (lines, width, height)
    for n in nodes:
        lines = _lines(n, n["id"] not in incoming)
        boxes[n["id"]] = (lines, max(len(s) for s in lines) * CHAR + 2 * PAD, len(lines) * LINE + 2 * PAD)
    rows: dict[int, list[int]] = {}
    for n in nodes:
        rows.setdefault(level[n["id"]], []).append(n["id"])
    row_width = {r: sum(boxes[i][1] for i in ids) + GAP_X * (len(ids) - 1) for r, ids in rows.items()}
    width = max(row_width.values()) + 2 * GAP_X
    top = 30.0 if title else 10.0
    at: dict[int, tuple[float, float, float, float]] = {}  # id -> (x, y, w, h)
    y = top
    for r in sorted(rows):
        x = (width - row_width[r]) / 2
        height = max(boxes[i][2] for i in rows[r])
        for i in rows[r]:
            _, w, h = boxes[i]
            at[i] = (x, y, w, h)
            x += w + GAP_X
        y += height + GAP_Y
    height_all = y - GAP_Y + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height_all:.0f}" '
        f'viewBox="0 0 {width:.0f} {height_all:.0f}" font-family="Menlo, DejaVu Sans Mono, monospace" '
        'font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
    ]
    if title:
        out.append(f'<text x="{GAP_X}" y="18" font-weight="bold">{escape(title)}</text>')
    for n in nodes:  # the arrows first, under the boxes
        x, y0, w, h = at[n["id"]]
        for e in n["edges"]:
            if e["to"] is None:
                continue
            cx, cy, cw, _ = at[e["to"]]
            out.append(
                f'<line x1="{x + w / 2:.1f}" y1="{y0 + h:.1f}" x2="{cx + cw / 2:.1f}" y2="{cy:.1f}" '
                'stroke="#555" marker-end="url(#arrow)"/>'
            )
    for n in nodes:
        lines, _, _ = boxes[n["id"]]
        x, y0, w, h = at[n["id"]]
        kind = "leaf" if n.get("leaf") else "output" if n["id"] not in incoming else "node"
        out.append(
            f'<g class="node {kind}"><rect x="{x:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
            f'fill="{FILL[kind]}" stroke="#333"/>'
        )
        for k, text in enumerate(lines):
            weight = ' font-weight="bold"' if k == 0 else ""
            out.append(f'<text x="{x + PAD:.1f}" y="{y0 + PAD + (k + 1) * LINE - 4:.1f}"{weight}>{escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
