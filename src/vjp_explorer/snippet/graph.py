"""The backward graph of one call, with values: what each node received and what it sent along each edge.

Hooks are put on every node of the recorded graph just before the snippet's real backward call and removed
right after it, so the numbers are the ones torch computed for this v. Each node is tied to the statement that
created it through the replay's records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .interp import Interpreter

MAX_VALUES = 10_000  # elements of one cotangent kept for the view and JSON; bigger ones keep shape and norm


class GraphProbe:
    """Watches one backward call: `start()` before it, `finish()` after it gives the nodes as plain dicts."""

    def __init__(self, it: Interpreter, outs: list[Any], name_of: Callable[[Any], str]) -> None:
        self.it = it
        self.name_of = name_of
        self.nodes: list[Any] = []
        self.seen: dict[int, int] = {}
        self.got: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.handles: list[Any] = []
        self.roots = [o.grad_fn for o in outs if o.grad_fn is not None]

    def start(self) -> None:
        stack = list(self.roots)
        while stack:
            node = stack.pop()
            if id(node) in self.seen:
                continue
            self.seen[id(node)] = len(self.nodes)
            self.nodes.append(node)

            def hook(grad_inputs: Any, grad_outputs: Any, key: int = id(node)) -> None:
                self.got[key] = (tuple(grad_inputs), tuple(grad_outputs))

            self.handles.append(node.register_hook(hook))
            stack.extend(n for n, _ in node.next_functions if n is not None)

    def finish(self) -> list[dict[str, Any]]:
        for h in self.handles:
            h.remove()
        out = []
        for node in self.nodes:
            sent, arriving = self.got.get(id(node), ((), ()))
            edges = []
            for k, (child, _) in enumerate(node.next_functions):
                value = sent[k] if k < len(sent) else None
                edges.append({"to": None if child is None else self.seen.get(id(child)), "value": _summary(value)})
            leaf = getattr(node, "variable", None)
            line, source = statement(self.it, node)
            made = _made(self.it, node)
            out.append(
                {
                    "id": self.seen[id(node)],
                    "name": type(node).__name__,
                    "leaf": None if leaf is None else self.name_of(leaf),
                    "value_of": _bound_name(self.it, made),
                    "line": line,
                    "source": source,
                    "ran": id(node) in self.got,
                    "arriving": _summary(arriving[0]) if arriving else None,
                    "edges": edges,
                }
            )
        return out


def to_dot(events: list[tuple[int, str, list[dict[str, Any]]]]) -> str:
    """Graphviz DOT of the graphs of some events (index, title, nodes): one cluster per event."""
    lines = ["digraph backward {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    for index, title, graph in events:
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f"    label={_quote(title)};")
        for node in graph:
            label = node["name"] + (f"\n→ {node['leaf']}" if node["leaf"] else "")
            label += f"\nmakes {node['value_of']}" if node["value_of"] else ""
            if node["line"]:
                label += f"\nline {node['line']}"
            if node["arriving"] is not None:
                label += f"\nreceives {short(node['arriving'])}"
            lines.append(f"    e{index}n{node['id']} [label={_quote(label)}];")
        for node in graph:
            for edge in node["edges"]:
                if edge["to"] is not None:
                    lines.append(
                        f"    e{index}n{node['id']} -> e{index}n{edge['to']} [label={_quote(short(edge['value']))}];"
                    )
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def short(summary: Any, n: int = 4) -> str:
    if summary is None:
        return "None"
    values = summary.get("values")
    if values is None:
        return f"shape {summary['shape']}, norm {summary['norm']:.4g}"
    flat = _flatten(values)
    text = ", ".join(f"{x:.4g}" for x in flat[:n]) + (", …" if len(flat) > n else "")
    return f"[{text}]" if isinstance(values, list) else text


def _flatten(x: Any) -> list[float]:
    if isinstance(x, list):
        return [v for item in x for v in _flatten(item)]
    return [float(x)]


def _quote(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, line breaks as DOT's \\n, other controls as spaces."""
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else "\\n" if c == "\n" else " " for c in body) + '"'


def _summary(t: Any) -> Any:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    t = t.detach()
    data = {"shape": list(t.shape), "norm": float(t.double().norm()) if t.numel() else 0.0}
    if t.numel() <= MAX_VALUES:
        data["values"] = t.double().tolist() if t.is_floating_point() else t.tolist()
    return data


def _made(it: Interpreter, node: Any) -> Any:
    """The tensor whose grad_fn is `node`, among those the snippet recorded."""
    trace = it.replay
    for key in trace.made_by if trace is not None else ():
        t = trace.alive.get(key[0])
        if t is not None and t.grad_fn is node:
            return t
    return None


def _bound_name(it: Interpreter, t: Any) -> str | None:
    """The snippet's global name for a tensor, if one is bound to it."""
    if t is None:
        return None
    return next((name for name, value in it.globals.vars.items() if value is t), None)


def statement(it: Interpreter, node: Any) -> tuple[int | None, str | None]:
    trace = it.replay
    if trace is None:
        return None, None
    for key, rec in trace.made_by.items():
        t = trace.alive.get(key[0])
        if t is not None and t.grad_fn is node and rec.line:
            lines = it.src.original.split("\n")
            return rec.line, (lines[rec.line - 1].strip() if 0 < rec.line <= len(lines) else None)
    return None, None


def paths(graph: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For every node reached along more than one edge: the contribution of each edge, which add up."""
    incoming: dict[int, list[tuple[int, Any]]] = {}
    for node in graph:
        for edge in node["edges"]:
            if edge["to"] is not None:
                incoming.setdefault(edge["to"], []).append((node["id"], edge["value"]))
    out = []
    for target, parts in incoming.items():
        if len(parts) > 1:
            node = graph[target]
            out.append(
                {
                    "node": target,
                    "name": node["name"],
                    "leaf": node["leaf"],
                    "value_of": node["value_of"],
                    "parts": [{"from": src, "name": graph[src]["name"], "value": value} for src, value in parts],
                }
            )
    return out
