"""The snippet door: a pasted snippet run as real Python in the confined child, read back as a SnippetResult.

The text is parsed here only to refuse what Python would refuse and to read what the source claims it
printed; it runs in the child (confined/), which observes each backward/grad call and sends it back as an
event. Everything the child sends is untrusted text: events are rebuilt field by field, and every string is
made safe for a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..display import Graph
from ..errors import ProgramError
from ..limits import DEFAULT_LIMITS, Limits
from .result import AtExit, Check, Claim, Event, LeafGrad, RaisedError, SnippetResult, Step, TensorInfo
from .source import Source, parse, read_source, verdict_of


def run_snippet(
    text: str,
    label: str = "<snippet>",
    seed: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
    graph: bool = False,
    allow_read: Iterable[str] = (),
    trust: bool = False,
    keep_partial: bool = False,
    code: bool = False,
    meanwhile: Callable[[], object] | None = None,
) -> SnippetResult:
    """Run a pasted snippet as `python FILE.py` would (a REPL transcript as the REPL did), confined.

    The snippet's own exception ends up in `result.error`; the tool's errors (bad input, a limit, a machine
    that cannot confine without `trust`) are raised; with `keep_partial`, a limit that stopped the snippet is
    `result.stopped` instead, beside the statements and events that ran before it. With `graph`, each
    explained event carries the backward graph with the cotangent every node received; with `code`, what its
    backward script is written from; `meanwhile` runs while the child imports torch (launch.run_confined).
    """
    import functools
    import os

    from ..confined.launch import run_confined
    from ..confined.protocol import safe_text

    drawn = seed if seed is not None else int.from_bytes(os.urandom(4), "little") % 2**31  # --seed repeats it
    src = read_source(text, label)
    parse(src, label, limits.snippet_chars, limits.snippet_nodes)  # Python's refusal, pointed, before a child
    again = functools.partial(
        run_confined,
        src.original if src.repl else src.code,
        limits=limits,
        allow_read=allow_read,
        trust=trust,
        mode="repl" if src.repl else "script",
        filename=label,
        seed=drawn,
    )
    written = _hand_written(src.code)  # gradients the learner writes by hand (docs/manual.md): usually none
    outcome = again(observe=True, graph=graph, code=code, manual=bool(written), meanwhile=meanwhile)
    if outcome.unverified and outcome.stopped is None:  # never exit 0 on a verdict the judge cannot vouch for
        outcome.stopped = _unverified(outcome.unverified)
    if outcome.stopped is not None and not keep_partial:
        raise outcome.stopped
    lines = (src.pasted or src.original).split("\n")  # as pasted: an IPython transcript keeps its prompts
    code_line = {orig: k + 1 for k, orig in enumerate(src.line_map)}
    events: list[Event] = []
    steps: list[Step] = []
    by_statement: dict[int, list[int]] = {}
    for i, (at, _raw) in enumerate(outcome.events):
        by_statement.setdefault(at, []).append(i)
    for k, st in enumerate(outcome.statements):
        step = Step(
            line=st.line,
            end_line=st.end_line,
            source="\n".join(lines[st.line - 1 : st.end_line]),
            stdout=st.stdout,  # exactly as printed: each view makes it visible (the JSON escapes it as JSON does)
            warnings=[safe_text(w) for w in st.stderr.splitlines() if w.strip()],
            raised=None if st.raised is None else _error_of(st.raised, outcome, st.line, lines),
        )
        for i in by_statement.get(k, []):
            events.append(_event(outcome.events[i][1], len(events) + 1, safe_text))
            outcome.events[i] = (k, {})  # the child's dict is rebuilt: let it go (docs/confinement.md, memory)
            step.events.append(len(events))
        steps.append(step)
    error = _raised(outcome, steps, lines)
    raised = (error.type, error.message) if error is not None else None
    for k, step in enumerate(steps):
        said = (step.raised.type, step.raised.message) if step.raised is not None else None
        said = said or (raised if k == len(steps) - 1 else None)
        _claim(src, step, code_line.get(step.end_line, step.end_line), said)
    at_exit = None
    if outcome.at_exit is not None:
        done = outcome.at_exit
        at_exit = AtExit(done.stdout, [safe_text(w) for w in done.stderr.splitlines() if w.strip()])
    diagnoses = _diagnoses(outcome, events, src, lines, again, safe_text)
    from importlib.metadata import version

    return SnippetResult(
        label=label,
        seed=drawn,
        seed_given=seed is not None,
        repl=src.repl,
        torch_version=version("torch"),  # the child's: the same interpreter and packages, not imported here
        steps=steps,
        events=events,
        error=error,
        stdout="".join(s.stdout for s in steps) + (at_exit.stdout if at_exit is not None else ""),
        stopped=outcome.stopped,
        at_exit=at_exit,
        notes=_session_note(src) + _refused_notes(outcome, error),
        diagnoses=diagnoses,
        manual=_manual(outcome.manual, written) if written else None,
    )


def _hand_written(code: str) -> set[tuple[str, str]]:
    """The (gradient, tensor) pairs the text writes by hand, read with ast (confined/manual_source.py)."""
    from ..confined.manual_source import pairs

    return {(p.name, p.of) for p in pairs(code)}


def _manual(frames: list[dict[str, Any]], written: set[tuple[str, str]]) -> Any:
    """The hand-written gradients judged against autograd's (snippet/manual.py); a forged frame is a broken
    channel, as a forged event is."""
    from .checked import Malformed
    from .manual import judge

    try:
        return judge(frames, written)
    except Malformed as e:
        raise ProgramError(
            f"the snippet broke the channel vjp reads its results from ({str(e)[:200]}); it was stopped",
            hint="A snippet that writes to the tool's channel (file descriptor 3) forges its messages.",
        ) from None


def _diagnoses(outcome: Any, events: list[Event], src: Source, lines: list[str], again: Any, safe: Any) -> list[Any]:
    """Why it failed (docs/why.md): a second confined run with autograd's instruments, only where the first
    run failed in a way they explain; a run the tool stopped (a limit) gets none."""
    from .why import consistent, find, needs_diagnosis

    exc = outcome.exception
    message = exc.message if exc is not None else None
    if outcome.stopped is not None or not needs_diagnosis(message, events, outcome.stdout, outcome.stderr, src.code):
        return []
    return consistent(find(again, lines, safe), message, exc.line if exc is not None else None, events)


def _unverified(why: list[str]) -> ProgramError:
    """The run's error where the judge found calls it cannot vouch for (confined/judging.py)."""
    from ..confined.protocol import safe_text

    said = "; ".join(safe_text(w) for w in why[:5]) + (f"; and {len(why) - 5} more" if len(why) > 5 else "")
    return ProgramError(
        f"vjp cannot vouch for this run's verdicts: {said}",
        hint="the snippet's own process changed what vjp observes or reports; see `vjp docs confinement`",
    )


def _refused_notes(outcome: Any, error: RaisedError | None) -> list[str]:
    """An attempt the confinement refused, where the snippet's own code went on past it (os.system returns a
    status, a try/except swallows the error): said once per line, unless the snippet's error already says it."""
    from ..confined.words import explain_refusal

    said = outcome.exception.refusal if outcome.exception is not None and error is not None else None
    notes = []
    for r in outcome.refused:
        if r.kind == said and error is not None and r.line == error.line:
            continue
        notes.append(f"Line {r.line}: " + explain_refusal(r.kind, what=r.what))
    raw = outcome.raw_output.strip("\n")
    if raw:  # os.write(1, ...), a C library's printf: outside sys.stdout, so its place among the prints is lost
        from ..confined.protocol import safe_text

        shown = raw if len(raw) <= 2000 else raw[:2000] + " [...]"
        notes.append(
            "Written to file descriptor 1 or 2 directly, not through sys.stdout (os.write, a C library, torch's own "
            f"C++ warnings), so not placed among the prints above: {safe_text(shown)}"
        )
    return notes


def _session_note(src: Source) -> list[str]:
    """A transcript that reads torch (or nn, F, np, math, Variable) without importing it ran after the
    imports its session made before the copied lines: say which."""
    if not src.repl:
        return []
    import ast

    from ..confined.runner import session_imports

    try:
        found = session_imports(ast.parse(src.code))
    except SyntaxError:
        return []
    if not found:
        return []
    names = ", ".join(name for name, _ in found)
    lines = "; ".join(line for _, line in found)
    return [
        f"The transcript uses {names} without importing {'it' if len(found) == 1 else 'them'}: its session "
        f"imported {'it' if len(found) == 1 else 'them'} earlier, so it ran after `{lines}`."
    ]


def _claim(src: Source, step: Step, line: int, raised: tuple[str, str] | None) -> None:
    """What the source claims this statement printed or raised, judged as the transcript shows it."""
    claimed = src.claimed.get(line)
    if claimed is not None:
        verdict = verdict_of(claimed, src.claimed_from[line], step.stdout, raised)
        step.claim = Claim(claimed, src.claimed_from[line], None if verdict is None else verdict.same)


def _raised(outcome: Any, steps: list[Step], lines: list[str]) -> RaisedError | None:
    """Where the snippet raised (or called sys.exit with a status), as plain Python would, or None; in a
    transcript that went on past exceptions, the first (or the one it stopped at)."""
    error = None
    if outcome.exception is not None:
        exc = outcome.exception
        went_on = [step.raised for step, st in zip(steps, outcome.statements, strict=False) if st.raised is exc]
        error = went_on[0] if went_on else _error_of(exc, outcome, steps[-1].line if steps else 1, lines)
    elif outcome.exited is not None and outcome.exited[1] != 0:  # sys.exit(5): python ends with status 5
        line, status, message = outcome.exited
        error = RaisedError(
            line=line,
            source=lines[line - 1] if 0 < line <= len(lines) else "",
            type="SystemExit",
            message=message or str(status),
            explanation=f"sys.exit ends the snippet here: python exits with status {status}"
            + (", printing the message on stderr" if message else "")
            + "; the lines after it do not run.",
        )
    return error


def _error_of(exc: Any, outcome: Any, at: int, lines: list[str]) -> RaisedError:
    """The snippet's exception (confined/outcome.SnippetException) as the views show it; `at`: the line of the
    statement it raised in, where its traceback names none of the snippet's own."""
    from ..confined.protocol import safe_text
    from ..confined.words import explain_error, explain_refusal

    # a relative path not found where the working directory mirrors the user's is Python's own story
    refusal = None if exc.refusal == "cwd" and outcome.mirrored else exc.refusal
    line = exc.line or at
    return RaisedError(
        line=line,
        source=lines[line - 1] if 0 < line <= len(lines) else "",
        type=safe_text(exc.type),
        message=safe_text(exc.message),
        explanation=explain_refusal(refusal, exc.via) if refusal else explain_error(exc.message),
    )


def _event(raw: dict[str, Any], index: int, safe: Any) -> Event:
    """An event dict from the child (its checks the judge's: confined/judging.py), rebuilt as the dataclasses;
    a malformed one is a broken channel."""
    from . import checked

    try:
        d = _safe(raw, safe)
        event = Event(
            index=index,
            line=int(d["line"]),
            source=str(d["source"]),
            call=str(d["call"]),
            outputs=[TensorInfo(**checked.record(TensorInfo, t, "outputs")) for t in d["outputs"]],
            v=[TensorInfo(**checked.record(TensorInfo, t, "v")) for t in d["v"]],
            v_origin=str(d["v_origin"]),
            retain_graph=bool(d["retain_graph"]),
            create_graph=bool(d["create_graph"]),
            inputs=[LeafGrad(**checked.record(LeafGrad, x, "inputs")) for x in d["inputs"]],
            checks=[Check(**checked.record(Check, c, "checks")) for c in d["checks"]],
            notes=[str(n) for n in d["notes"]],
            diagnosis=None if d.get("diagnosis") is None else str(d["diagnosis"]),
            graph=_graph(checked.graph(d.get("graph"), "graph")),
            results=[TensorInfo(**checked.record(TensorInfo, t, "results")) for t in d.get("results") or []],
            reference=[TensorInfo(**checked.record(TensorInfo, t, "reference")) for t in d.get("reference") or []],
            backward_code=d["backward_code"] if isinstance(d.get("backward_code"), dict) else None,
            kinks=[dict(k) for k in d.get("kinks") or []],
        )
        return event
    except Exception as e:  # anything the snippet forged: whatever it raises while read, it is no event
        what = str(e)[:200] if isinstance(e, checked.Malformed) else type(e).__name__
        raise ProgramError(
            f"the snippet broke the channel vjp reads its results from (an event that is not one: {what}); "
            "it was stopped",
            hint="A snippet that writes to the tool's channel (file descriptor 3) forges its messages.",
        ) from None


def _graph(nodes: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The graph's nodes, checked, as a list that a notebook draws (display.Graph)."""
    return None if nodes is None else Graph(nodes)


_NUMBERS = (int, float, bool)


def _safe(x: Any, safe: Any) -> Any:
    if isinstance(x, str):
        return safe(x)
    if isinstance(x, dict):
        return {str(k): _safe(v, safe) for k, v in x.items()}
    if isinstance(x, list):
        if all(type(v) in _NUMBERS for v in x):  # a row of values: no text in it to make safe
            return x
        return [_safe(v, safe) for v in x]
    return x
