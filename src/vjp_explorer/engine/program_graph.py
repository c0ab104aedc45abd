"""--graph for programs: the interpreter, recording which span of the program made each backward node.

Each expression's result carries torch's grad_fn; the nodes reachable from it that no subexpression made (and
that are not a leaf's AccumulateGrad) are this expression's own: `mean` is a sum and a division, `-x` a
NegBackward0. Subexpressions run first, so claiming each node for the first expression that reaches it ties
every node to the smallest span that made it. The real backward call then runs under engine/backward_graph.py's
hooks.
"""

from __future__ import annotations

from typing import Any

from ..language import program as P
from .backward_capture import id_of
from .backward_graph import GraphProbe
from .interpreter import Interpreter, Val


class RecordingInterpreter(Interpreter):
    """The program's interpreter, unchanged, that also notes the span and the assigned name of each node."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spans: dict[int, P.Span] = {}  # id(node) -> the span that made it
        self.by_expr: dict[int, tuple[P.Expr, Any]] = {}  # id(expr) -> (expr, its result's grad_fn)
        self.keep: list[Any] = []  # the nodes, kept alive so that no id above is reused
        self.probe: GraphProbe | None = None
        self.graph: list[dict[str, Any]] | None = None  # the nodes, once finish() ran
        self.capture: Any = None  # --code: engine/backward_capture.py's CodeCapture of the call
        self.code: dict[str, Any] | None = None  # --code: its record and tensors, once finish() ran

    def run(self, env: dict[str, Val]) -> Any:
        self.env = env  # the program's names for its values, read by watch() for --code
        return super().run(env)

    def value_of(self, e: P.Expr, env: dict[str, Val]) -> Val:
        val = super().value_of(e, env)
        fn = getattr(val.v, "grad_fn", None)
        if fn is not None:
            self.by_expr[id(e)] = (e, fn)
            stack = [fn]
            while stack:
                node = stack.pop()
                if node is None or id(node) in self.spans or type(node).__name__ == "AccumulateGrad":
                    continue
                self.spans[id(node)] = e.span
                self.keep.append(node)
                stack.extend(n for n, _ in node.next_functions)
        return val

    def watch(self, out: Any, leaves: dict[str, Any], v: Any = None) -> None:
        """Hooks on every node behind `out`, just before the real backward call; with `v` (--code), the
        graph's saved values too, for the script of the call."""
        source = self.program.source
        made: dict[int, str] = {}
        for step in self.steps:
            got = self.by_expr.get(id(step.expr))
            if got is not None:
                made.setdefault(id(got[1]), step.target)
        names = {id(t): n for n, t in leaves.items()}

        def describe(node: Any) -> dict[str, Any]:
            leaf = getattr(node, "variable", None)
            span = self.spans.get(id(node))
            return {
                "leaf": None if leaf is None else names.get(id(leaf)),
                "value_of": made.get(id(node)),
                "line": None if span is None else source.count("\n", 0, span[0]) + 1,
                "source": None if span is None else source[span[0] : span[1]],
                "span": None if span is None else list(span),
            }

        self.probe = GraphProbe([out], describe)
        self.probe.start()
        if v is not None:
            from .backward_capture import CodeCapture, names_by_storage

            inputs = [t for t in leaves.values() if t.requires_grad]
            values = {n: val.v for n, val in getattr(self, "env", {}).items()}
            named = names_by_storage({**leaves, **{n: t for n, t in values.items() if n not in leaves}})
            self.capture = CodeCapture(
                [out], [v], inputs, [names[id(t)] for t in inputs], describe, lambda t: named.get(id_of(t))
            )
            self.capture.start()

    def finish(self) -> None:
        """After the real backward call: the hooks come off, the nodes are kept in `graph`."""
        if self.probe is not None:
            self.graph = self.probe.finish()
        if self.capture is not None:
            self.capture.stop()
            self.code = self.capture.payload()
            self.capture = None
