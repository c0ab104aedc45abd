"""The snippet pipeline: text -> source -> syntax tree -> interpreted run with events -> SnippetResult."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from typing import Any

from ..errors import ProgramSyntaxError
from ..limits import DEFAULT_LIMITS, Limits
from .result import Claim, RaisedError, SnippetResult, Step
from .source import parse, read_source, same_output

_NOTE_IMPLICIT = (
    "The snippet uses {names} without importing {them}; it ran as if `import torch` (and the usual aliases: "
    "torch.nn as nn, torch.nn.functional as F, math, Variable, grad) came first."
)


def run_snippet(
    text: str,
    label: str = "<snippet>",
    seed: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
    graph: bool = False,
) -> SnippetResult:
    """Run a pasted snippet; the snippet's own exceptions end up in `result.error`, ours are raised."""
    src = read_source(text, label)
    tree = parse(src, label, limits.snippet_chars, limits.snippet_nodes)
    _check_depth(tree, label, limits.snippet_depth)
    import torch

    from .events import Explainer, explain_error
    from .interp import Interpreter, SnippetRaised, _Break, _Continue, _Return

    seed_given = seed is not None
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little") % 2**31
    explainer = Explainer(graph=graph)
    it = Interpreter(src, label, limits, explainer)
    explainer.it = it
    from .replay import Trace

    it.replay = Trace()
    steps: list[Step] = []
    error: RaisedError | None = None
    lines = src.code.split("\n")

    def on_statement(stmt: ast.stmt, run: Callable[[], None]) -> None:
        out0, ev0, w0 = len(it.out), len(explainer.events), len(it.warnings)
        step = Step(
            line=src.original_line(stmt.lineno),
            end_line=src.original_line(stmt.end_lineno or stmt.lineno),
            source="\n".join(lines[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)]),
            stdout="",
        )
        steps.append(step)
        try:
            run()
        finally:
            step.stdout = "".join(it.out[out0:])
            step.events = [e.index for e in explainer.events[ev0:]]
            step.warnings = [w for _, w in it.warnings[w0:]]
            claimed = src.claimed.get(stmt.end_lineno or stmt.lineno)
            if claimed is not None:
                step.claim = Claim(
                    claimed, src.claimed_from[stmt.end_lineno or stmt.lineno], same_output(claimed, step.stdout)
                )

    saved = _torch_state(torch)
    try:
        torch.manual_seed(seed)
        try:
            it.run(tree, on_statement)
        except SnippetRaised as raised:
            node = raised.node
            line = it.where(node) if node is not None else (steps[-1].line if steps else 1)
            message = str(raised.exc)
            error = RaisedError(
                line=line,
                source=steps[-1].source if steps else "",
                type=type(raised.exc).__name__,
                message=message,
                explanation=" ".join(t for t in (raised.context, explain_error(message)) if t) or None,
            )
        except (_Break, _Continue, _Return) as flow:
            word = {"_Break": "'break' outside loop", "_Continue": "'continue' not properly in loop"}.get(
                type(flow).__name__, "'return' outside function"
            )
            raise ProgramSyntaxError(f"{label}, line {steps[-1].line if steps else 1}: {word}.") from None
    finally:
        _restore(torch, saved)
    notes = _notes(it, src)
    return SnippetResult(
        label=label,
        seed=seed,
        seed_given=seed_given,
        repl=src.repl,
        torch_version=torch.__version__,
        steps=steps,
        events=explainer.events,
        error=error,
        notes=notes,
        stdout="".join(it.out),
    )


def _notes(it: Any, src: Any) -> list[str]:
    notes = []
    if it.implicit_used:
        names = ", ".join(sorted(it.implicit_used))
        notes.append(_NOTE_IMPLICIT.format(names=names, them="it" if len(it.implicit_used) == 1 else "them"))
    if it.uninitialised:
        where = sorted(set(it.uninitialised))
        lines = ("Line " if len(where) == 1 else "Lines ") + ", ".join(str(n) for n in where)
        notes.append(
            f"{lines} made tensors with uninitialised memory (torch.empty, or torch.Tensor(n) with a size): "
            "its numbers are whatever was in memory, so they differ from run to run and from the source's."
        )
    return notes


def _check_depth(tree: ast.AST, label: str, limit: int) -> None:
    """Refuse syntax nested deeper than `limit` before the recursive interpreter meets it."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            line = getattr(node, "lineno", "?")
            raise ProgramSyntaxError(
                f"{label}, line {line}: the snippet nests deeper than {limit} levels.",
                hint="Raise the limit with --limit snippet_depth=N.",
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _torch_state(torch: Any) -> dict[str, Any]:
    """Process-wide torch settings a snippet may change; restored afterwards (the library may run again)."""
    import copy

    from torch import _tensor_str

    return {
        "print": copy.copy(_tensor_str.PRINT_OPTS),
        "dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(),
        "anomaly": torch.is_anomaly_enabled(),
    }


def _restore(torch: Any, saved: dict[str, Any]) -> None:
    from torch import _tensor_str

    for k, v in vars(saved["print"]).items():
        setattr(_tensor_str.PRINT_OPTS, k, v)
    torch.set_default_dtype(saved["dtype"])
    torch.set_grad_enabled(saved["grad"])
    torch.autograd.set_detect_anomaly(saved["anomaly"])
