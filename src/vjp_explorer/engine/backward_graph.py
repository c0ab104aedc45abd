"""The backward graph of one call, with values: what each node received and what it sent along each edge.

Hooks are put on every node of the recorded graph just before the real backward call and removed right after
it, so the numbers are the ones torch computed for this v. Programs and snippets share this; each says where a
node came from through its own `describe(node)` (the program's span, the snippet's line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_VALUES = 10_000  # elements of one cotangent kept for the view and JSON; bigger ones keep shape and norm


class GraphProbe:
    """Watches one backward call: `start()` before it, `finish()` after it gives the nodes as plain dicts.

    `describe(node)` gives each node's origin: the keys `leaf` (the leaf's name, for an AccumulateGrad),
    `value_of` (the name bound to the tensor the node made), `line` and `source`, and any more it likes.
    """

    def __init__(self, outs: list[Any], describe: Callable[[Any], dict[str, Any]]) -> None:
        self.describe = describe
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
        self.handles = []
        out = []
        for node in self.nodes:
            sent, arriving = self.got.get(id(node), ((), ()))
            edges = []
            # a node of several outputs (svd, eigh, an LSTM) sends what all its cotangents make: no one factor
            one = arriving[0] if len(arriving) == 1 else None
            for k, (child, nr) in enumerate(node.next_functions):
                value = sent[k] if k < len(sent) else None
                edges.append(
                    {
                        "to": None if child is None else self.seen.get(id(child)),
                        "input_nr": int(nr),  # which output of that node it is the cotangent of
                        "value": summary(value),
                        "local": summary(local_derivative(one, value)),
                    }
                )
            where = {"leaf": None, "value_of": None, "line": None, "source": None, **self.describe(node)}
            out.append(
                {
                    "id": self.seen[id(node)],
                    "name": type(node).__name__,
                    **where,
                    "ran": id(node) in self.got,
                    "arriving": summary(arriving[0]) if arriving else None,
                    "edges": edges,
                }
            )
        return out


def local_derivative(arriving: Any, sent: Any) -> Any:
    """What the node multiplied its cotangent by along one edge, element by element (sent = arriving × local):
    only where the two have one shape (an elementwise step) and the cotangent has no zero to divide by."""
    import torch

    if not isinstance(arriving, torch.Tensor) or not isinstance(sent, torch.Tensor):
        return None
    if arriving.shape != sent.shape or not arriving.is_floating_point() or bool((arriving == 0).any()):
        return None
    return (sent.double() / arriving.double()).to(sent.dtype)


def summary(t: Any) -> Any:
    """A cotangent as plain data: {shape, norm, values}; values left out past MAX_VALUES elements."""
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    t = t.detach()
    data = {"shape": list(t.shape), "norm": float(t.abs().double().norm()) if t.numel() else 0.0}
    if t.numel() <= MAX_VALUES and not t.is_complex():  # a complex cotangent: its shape and norm only
        data["values"] = t.double().tolist() if t.is_floating_point() else t.tolist()
    return data


def paths(graph: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For every output of a node reached along more than one edge: the contribution of each edge, which add
    up (a node of several outputs, svd's U, S and Vh, adds up each output's on its own). `output`: which output
    of the node, `outputs`: how many of its outputs the graph reaches."""
    incoming: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    for node in graph:
        for edge in node["edges"]:
            if edge["to"] is not None:
                incoming.setdefault((edge["to"], edge["input_nr"]), []).append((node["id"], edge["value"]))
    out = []
    for (target, nr), parts in incoming.items():
        if len(parts) > 1:
            node = graph[target]
            out.append(
                {
                    "node": target,
                    "output": nr,
                    "outputs": len({k for t, k in incoming if t == target}),
                    "name": node["name"],
                    "leaf": node["leaf"],
                    "value_of": node["value_of"],
                    "parts": [
                        {"from": src, "name": graph[src]["name"], "source": graph[src]["source"], "value": value}
                        for src, value in parts
                    ],
                }
            )
    return out
