"""The learner's hand-written gradients, read in the child: autograd's gradient of each, and what to judge.

Autograd's own gradient of each paired tensor is copied by a tensor hook at the backward call (no
`retain_grad()`: `.grad` reads stay as the snippet wrote them). After the snippet's last statement, one
"manual" frame per pair carries the numbers the parent judges (snippet/manual.py): the learner's value,
autograd's, and the learner's statements run once more with the upstream hand-written names bound to
autograd's true gradients (the line's own formula, on right inputs).

Nothing is judged here: the snippet shares this process and could change anything it computes.
"""

from __future__ import annotations

import ast
import io
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..engine.backward_capture import id_of, names_by_storage
from . import checks, protocol
from .manual_source import Pair, pairs

Send = Callable[[dict[str, Any]], None]

MAX_NUMBERS = 100_000  # elements of one array sent; a larger gradient is sent without its values


class ManualWatch:
    """Watches the paired tensors at each backward call and, at the end, sends what the parent compares."""

    def __init__(self, send: Send, source: str, filename: str, namespace: dict[str, Any]) -> None:
        self.send, self.filename, self.namespace = send, filename, namespace
        self.pairs: list[Pair] = pairs(source)
        self.register_hook = torch.Tensor.register_hook  # torch's own, held before hooks.py wraps it
        self.hooked: dict[str, Any] = {}  # name -> weakref of the tensor its hook is on
        self.grads: dict[str, torch.Tensor] = {}  # name -> autograd's gradient of it, at its latest call
        self.uses: dict[str, int] = {}  # name -> how many edges of the graph read it (a value used twice: 2)
        self.formulas: dict[str, dict[str, Any] | None] = {}  # name -> the node that read it, as plain data
        self._names: dict[Any, str] | None = None  # the snippet's tensors by storage, at the current call

    def at_backward(self, outs: list[torch.Tensor]) -> None:
        """Before a backward call runs: a copying hook on each paired tensor the snippet's namespace names."""
        counts, leaves, into = _edges_into(outs)
        self._names = None  # read again at each call, if a formula needs it
        for pair in self.pairs:
            t = self.namespace.get(pair.of)
            if not isinstance(t, torch.Tensor) or not t.requires_grad:
                continue
            node = t.grad_fn if t.grad_fn is not None else leaves.get(id(t))
            if node is None or id(node) not in counts:
                continue  # not in this call's graph
            self.uses[pair.of] = counts[id(node)]
            readers = into.get(id(node), [])  # none for the output backward started from
            # one use: the formula of the node that read it gives the right line; read at the first call only
            # (a training loop's steps build the same graph, and dir() of a node on every step costs)
            if len(readers) == 1 and pair.of not in self.formulas:
                self.formulas[pair.of] = self._formula(t, readers[0])
            ref = self.hooked.get(pair.of)
            if ref is not None and ref() is t:
                continue  # hooked at an earlier call: the same hook copies this call's gradient too
            try:
                self.register_hook(t, self._copier(pair.of))
            except RuntimeError:
                continue  # a tensor that takes no hook
            self.hooked[pair.of] = weakref.ref(t)

    def _formula(self, t: torch.Tensor, reader: tuple[Any, int]) -> dict[str, Any] | None:
        """The one node that reads `t` as plain data for the formula table (backward_code/formulas.py), read
        before backward frees what it saved: its name, the edge from `t`, its saved values with each tensor
        named as the snippet names it, and the learner's name for the gradient it receives; None where the
        node's output is not a tensor whose gradient the learner wrote."""
        node, edge = reader
        grad = next((p.name for p in self.pairs if getattr(self.namespace.get(p.of), "grad_fn", None) is node), None)
        out = next((self.namespace[p.of] for p in self.pairs if p.name == grad), None)
        if grad is None or not isinstance(out, torch.Tensor):
            return None
        if self._names is None:
            self._names = names_by_storage(self.namespace)
        names = self._names
        saved: dict[str, Any] = {}
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    saved[attr.removeprefix("_saved_")] = _plain(getattr(node, attr), names)
                except Exception:  # noqa: BLE001 - freed or unreadable: the formula then cannot be written
                    return None
        edges: list[dict[str, Any] | None] = [
            None if n is None else {"shape": [], "dtype": None} for n, _ in node.next_functions
        ]
        edges[edge] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        return {
            "node": type(node).__name__,
            "edge": edge,
            "grad": grad,
            "saved": saved,
            "edges": edges,
            "received": [list(out.shape)],
        }

    def _copier(self, name: str) -> Callable[[torch.Tensor], None]:
        grads = self.grads

        def copy(grad: torch.Tensor) -> None:  # returns None: the gradient goes on unchanged
            with checks.outside_the_log():
                grads[name] = grad.detach().clone()

        return copy

    def finish(self) -> None:
        """After the snippet's last statement: one "manual" frame per pair whose tensor got a gradient."""
        true = dict(self.grads)
        by_name = {p.name: p for p in self.pairs}
        for pair in self.pairs:
            if pair.of not in true:
                continue
            written = _as_tensor(self.namespace.get(pair.name))
            if written is None:
                continue
            shown = _array(written)  # before the statements run again
            upstream = {u: true[by_name[u].of] for u in pair.reads if by_name[u].of in true}
            again = self._again(pair, upstream)
            self._send_one(
                {
                    "type": "manual",
                    "manual": {
                        "name": pair.name,
                        "of": pair.of,
                        "line": pair.line,
                        "reads": list(pair.reads),
                        "accumulated": pair.accumulated,
                        "uses": self.uses.get(pair.of, 1),
                        "written": shown,
                        "autograd": _array(true[pair.of]),
                        "again": None if again is None else _array(again),
                        "formula": self.formulas.get(pair.of),
                    },
                }
            )

    def _send_one(self, frame: dict[str, Any]) -> None:
        """One pair's frame; one past the channel's frame size is sent without its arrays' values."""
        try:
            self.send(frame)
        except protocol.FrameTooLarge:
            for key in ("written", "autograd", "again"):
                if frame["manual"][key] is not None:
                    frame["manual"][key]["values"] = None
            self.send(frame)

    def _again(self, pair: Pair, upstream: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The pair's statements run once more on a copy of the namespace where the upstream hand-written
        gradients are autograd's: what this line gives when its inputs are right (None where it fails)."""
        if not pair.stmts or not isinstance(pair.stmts[0], _FRESH):
            return None
        scope = dict(self.namespace)
        scope.update({u: g.clone() for u, g in upstream.items()})
        quiet = io.StringIO()
        shown = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = quiet  # what the statements print was printed once already
        try:
            with torch.no_grad(), checks.outside_the_log():
                for stmt in pair.stmts:
                    code = compile(ast.Module([stmt], type_ignores=[]), self.filename, "exec")
                    exec(code, scope)  # the snippet's own statement, in the confined child that runs it
        except Exception:  # noqa: BLE001 - a statement that fails again: no second value, nothing more
            return None
        finally:
            sys.stdout, sys.stderr = shown
        return _as_tensor(scope.get(pair.name))


# a first statement that binds the gradient afresh (`dX = ...`): run again on a copy of the namespace, it
# changes nothing the snippet holds; a loop's `dX[i] += ...` first would add to the snippet's own dX
_FRESH = (ast.Assign, ast.AnnAssign)


def _as_tensor(value: Any) -> torch.Tensor | None:
    """A hand-written gradient as a real dense tensor: a Python number or a numpy array too; else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    numpy = sys.modules.get("numpy")  # imported by the snippet, if it uses numpy arrays at all
    if numpy is not None and isinstance(value, numpy.ndarray) and value.dtype.kind in "fiu":
        value = torch.from_numpy(value.astype("float64"))
    if not isinstance(value, torch.Tensor) or value.is_complex() or value.layout != torch.strided:
        return None
    return value.detach()


def _edges_into(outs: list[torch.Tensor]) -> tuple[dict[int, int], dict[int, Any], dict[int, list[Any]]]:
    """id(node) -> how many edges of the backward graph from `outs` lead into it; id(leaf) -> the leaf's
    AccumulateGrad node; id(node) -> the (node, edge) pairs that lead into it, which also hold every node
    alive, so that no id is reused while the caller compares them."""
    counts: dict[int, int] = {}
    leaves: dict[int, Any] = {}
    into: dict[int, list[Any]] = {}
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    for node in stack:
        counts[id(node)] = counts.get(id(node), 0) + 1
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves[id(variable)] = node
        for k, (nxt, _) in enumerate(getattr(node, "next_functions", ())):
            if nxt is not None:
                counts[id(nxt)] = counts.get(id(nxt), 0) + 1
                into.setdefault(id(nxt), []).append((node, k))
                stack.append(nxt)
    return counts, leaves, into


def _plain(value: Any, names: dict[Any, str]) -> Any:
    """A saved value as plain data: a tensor as {"tensor": the snippet's name for it, or None}."""
    if isinstance(value, torch.Tensor):
        return {"tensor": names.get(id_of(value.detach()))}
    if isinstance(value, (list, tuple)):
        return [_plain(v, names) for v in value]
    if value is None or isinstance(value, (bool, float, str)):
        return value
    if isinstance(value, int) or type(value).__name__ == "SymInt":
        n = int(value)
        return n - (1 << 64) if n >= 1 << 63 else n  # autograd hands negative ints back unsigned
    return {"unreadable": type(value).__name__}


def _array(t: torch.Tensor) -> dict[str, Any]:
    """A tensor as the channel carries it: shape, dtype and its values flat (float64), None past MAX_NUMBERS."""
    t = t.detach()
    flat = t.reshape(-1).to(torch.float64).tolist() if t.numel() <= MAX_NUMBERS else None
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "values": flat}
