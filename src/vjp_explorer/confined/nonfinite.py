"""Where a nan or inf entered a backward pass: the first node that got finite cotangents and sent a non-finite one.

Hooks go on every node of the graph just before the snippet's own call and come off right after it, so they
see exactly what torch computed: the node's name (`ExpBackward0`), the factors (a cotangent of 0 times an
infinite local derivative) and a fix that applies. They only look; the call runs once, as written.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import torch

_INFINITE_SLOPE = {
    "Sqrt": "sqrt′(0) = ∞",
    "Rsqrt": "rsqrt′(0) = ∞",
    "Log": "log′(0) = ∞",
    "Log2": "log2′(0) = ∞",
    "Log10": "log10′(0) = ∞",
    "Log1P": "log1p′(-1) = ∞",
    "Div": "a division by 0",
    "Reciprocal": "1/x at 0",
    "Pow": "a power below 1 at 0",
    "Asin": "asin′(±1) = ∞",
    "Acos": "acos′(±1) = ∞",
    "Atanh": "atanh′(±1) = ∞",
}


class NonfiniteWatch:
    """`start()` before the real backward call, `finish()` after it: a sentence, or None. The sentence is
    written inside the hook, while the node still holds what it saved (the call may free it after)."""

    def __init__(self, outs: list[Any], max_nodes: int = 10_000) -> None:
        self.found: str | None = None
        self.names: set[str] = set()
        self.handles: list[Any] = []
        self.roots = [o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
        self.max_nodes = max_nodes

    def start(self) -> None:
        for node in itertools.islice(graph_nodes(self.roots), self.max_nodes):
            self.names.add(type(node).__name__)
            self.handles.append(node.register_hook(lambda sent, arriving, node=node: self._hook(node, sent, arriving)))

    def _hook(self, node: Any, sent: Any, arriving: Any) -> None:
        if self.found is not None:
            return
        try:
            if all(not isinstance(g, torch.Tensor) or bool(torch.isfinite(g).all()) for g in arriving) and any(
                isinstance(g, torch.Tensor) and not bool(torch.isfinite(g).all()) for g in sent
            ):
                self.found = _describe(node, tuple(arriving), "WhereBackward0" in self.names)
        except RuntimeError:  # only looking: a failure here is never the snippet's
            pass

    def finish(self) -> str | None:
        for h in self.handles:
            h.remove()
        self.handles = []
        return self.found


def _describe(node: Any, arriving: tuple[Any, ...], through_where: bool) -> str:

    name = type(node).__name__
    op = name.removesuffix("Backward0").removesuffix("Backward1")
    zero_in = any(g is not None and bool((g == 0).any()) for g in arriving)
    result = getattr(node, "_saved_result", None)
    overflow = isinstance(result, torch.Tensor) and bool(torch.isinf(result).any())
    text = f"The non-finite value entered the backward pass at {name}: "
    if overflow and isinstance(result, torch.Tensor):
        text += f"the forward {op.lower()} overflowed to inf in {str(result.dtype).removeprefix('torch.')}, "
        text += "and its backward multiplies the arriving cotangent by that inf"
        text += " (0·inf = nan)." if zero_in else "."
        fix = (
            "Compute in float64 (.double(), dtype=torch.float64), or use a stable form (logsumexp, softplus, "
            "log1p, log_softmax) that never forms the huge intermediate."
        )
    elif op in _INFINITE_SLOPE:
        text += f"its local derivative is infinite here ({_INFINITE_SLOPE[op]})"
        text += ", and the cotangent arriving is 0, so the chain rule gives 0·inf = nan." if zero_in else "."
        fix = "Clamp the input away from the singular point first (x.clamp_min(1e-12)), or rewrite the expression."
        if through_where:
            fix = (
                "torch.where differentiates both branches: the branch not taken gets a zero cotangent, and 0·inf "
                "is nan. Use the double-where pattern, which makes the unused branch's input safe: "
                "torch.where(x > 0, torch.log(torch.where(x > 0, x, 1.0)), 0.0). " + fix
            )
    else:
        text += "it received finite cotangents and sent a nan or inf on."
        fix = "Check the values this operation saw in the forward; --seed and a float64 run help narrow it down."
    return f"{text} {fix}"


def graph_nodes(roots: list[Any]) -> Iterator[Any]:
    """Each node of the backward graph below `roots` (grad_fns), once: the one walk of the child's graph."""
    seen: set[int] = set()
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(n for n, _ in node.next_functions if n is not None)


def custom_functions(outs: list[Any]) -> list[str]:
    """The snippet's own autograd Functions on the graph behind `outs` (torch names their nodes NameBackward)."""
    found: list[str] = []
    for node in graph_nodes([o.grad_fn for o in outs]):
        cls = getattr(node, "_forward_cls", None)  # set on the nodes of Python autograd Functions
        if cls is not None and cls.__name__ not in found and not cls.__module__.startswith("torch."):  # torch's own
            found.append(cls.__name__)
    return found
