"""SnippetResult -> the terminal transcript (Rich) or JSON. Everything from the snippet is shown escaped."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..events import Event, LeafGrad, element_index
from ..snippet.result import SnippetResult, Step
from ..snippet.source import verdict_of, visible
from ..wording import API, CLI, SNIPPET, option
from . import manual_view, why_view
from .checks_view import check_rows, verdict_line
from .fit import NumberTable, ValueGrid
from .numbers import fmt, fmt_shape

INLINE = 8  # elements shown inline; past that the first and last ones with an ellipsis
LEDGER = 12  # elements and terms written out term by term in explain


def write_json(result: SnippetResult, write: Callable[[str], Any]) -> None:
    """The whole result as one JSON document, written in one piece (ASCII, so any encoding reads it)."""
    write(json.dumps(result.to_dict(), ensure_ascii=True, allow_nan=False) + "\n")


def render(r: SnippetResult, explain: bool = False, full: bool = False, surface: str = CLI) -> RenderableType:
    """The snippet's transcript with its events; options are named in the words of `surface` (wording.py)."""
    parts: list[RenderableType] = [_header(r, surface)]
    events = {e.index: e for e in r.events}
    if r.kind == "check":
        parts.extend(Padding(_event(e, explain, full), (0, 0, 0, 2)) for e in r.events)
    for step in r.steps:
        parts.append(_source_lines(step.line, step.source))
        if step.stdout:
            parts.append(Padding(Text(visible(step.stdout.rstrip("\n")), style="green"), (0, 0, 0, 7)))
        if step.warnings:
            parts.append(_stderr([w.split(" (Triggered internally")[0] for w in step.warnings]))
        if step.claim is not None and (said := _claim(r, step)) is not None:
            parts.append(Padding(said, (0, 0, 0, 7)))
        for shown in _fold([events[index] for index in step.events], full):
            parts.append(Padding(shown if isinstance(shown, Group) else _event(shown, explain, full), (0, 0, 0, 7)))
        if step.raised is not None:  # a transcript: the REPL printed the traceback and read the next line
            parts.extend(_raised(step.raised, step))
            parts.append(Text("The REPL goes on to the next line, as the session did.", style="dim"))
            if step.raised is r.error:
                parts.extend(why_view.render(r.diagnoses))  # why it failed (docs/why.md), after PyTorch's words
    inline = r.error is not None and any(step.raised is r.error for step in r.steps)
    if r.error is not None and not inline:
        parts.extend(_raised(r.error, r.steps[-1] if r.steps else None))
        ends = "as Python would (exit 4)" if r.exit_code == 4 else f"past a limit (exit {r.exit_code}, said below)"
        parts.append(Text(f"The snippet stops here, {ends}.", style="dim"))
    if not inline:
        parts.extend(why_view.render(r.diagnoses))  # why it failed (docs/why.md), after PyTorch's own words
    parts.extend(manual_view.render(r.manual))  # the hand-written gradients (docs/manual.md)
    if r.at_exit is not None:
        parts.append(Text("at exit (functions registered with atexit):", style="dim"))
        if r.at_exit.stdout:
            parts.append(Padding(Text(visible(r.at_exit.stdout.rstrip("\n")), style="green"), (0, 0, 0, 7)))
        if r.at_exit.warnings:
            parts.append(_stderr(r.at_exit.warnings))
    for n in r.notes:
        parts.append(Text("note: " + n, style="dim"))
    parts.append(_summary(r))
    return Group(*parts)


def _raised(e: Any, step: Step | None) -> list[RenderableType]:
    """The exception a statement raised, where (naming the statement where it raised in code the statement
    called: a custom backward, a function), and what it means."""
    inside = step is not None and not step.line <= e.line <= step.end_line
    at = f"line {e.line}, inside the statement at line {step.line}" if inside and step else f"line {e.line}"
    parts: list[RenderableType] = [Text(f"\n{e.type} at {at}: {visible(e.message)}", style="bold red")]
    if e.explanation:
        parts.append(Text(e.explanation))
    return parts


def _claim(r: SnippetResult, step: Step) -> Text | None:
    """What the source claims this statement printed (or raised), against the run: ✓, ≠ with the claim, or
    nothing where the two cannot be compared (a pre-0.4 print; a comment on a statement that printed nothing)."""
    claim = step.claim
    if claim is None:
        return None
    raised = (r.error.type, r.error.message) if r.error is not None and r.steps and step is r.steps[-1] else None
    if step.raised is not None:
        raised = (step.raised.type, step.raised.message)
    verdict = verdict_of(claim.text, claim.origin, step.stdout, raised)
    if verdict is None:
        return None
    where = "transcript" if claim.origin == "transcript" else "comment"
    if verdict.same:
        return Text(f"✓ the source's {where} shows the same{' error' if verdict.error else ''}", style="dim")
    # a draw can explain other numbers, never another exception
    why = " (random draws: the source was not seeded the same way)" if not verdict.error and _random(r, step) else ""
    shows = "shows the error" if verdict.error else "shows"
    said = visible(verdict.shown)
    said = said if len(said) <= 200 else said[:199].rsplit(" ", 1)[0] + " …"  # a long message: cut between words
    return Text(f"≠ the source's {where} {shows}: " + said + why, style="yellow")


def _stderr(lines: list[str]) -> RenderableType:
    """What a statement wrote to stderr (Python's warnings, the snippet's own prints there), as one block."""
    grid = Table.grid(padding=(0, 1))
    grid.add_row(Text("stderr:", style="yellow bold"), Text("\n".join(visible(line) for line in lines), style="yellow"))
    return Padding(grid, (0, 0, 0, 7))


FOLD_AFTER = 3  # events of one line shown in full before the rest fold into one table
_SHORT = {"finite_difference": "fin. diff."}


def _fold(events: list[Event], full: bool) -> list[Any]:
    """A loop's events: the first FOLD_AFTER of each line in full, then one table of the rest (step, loss,
    grad norms, each check's verdict); a later event whose checks disagree is shown in full after it."""
    if full:
        return list(events)
    by_line: dict[int, list[Event]] = {}
    for e in events:
        by_line.setdefault(e.line, []).append(e)
    out: list[Any] = []
    for line_events in by_line.values():
        out.extend(line_events[:FOLD_AFTER])
        rest = line_events[FOLD_AFTER:]
        if rest:
            out.append(_folded_table(rest))
            out.extend(e for e in rest if e.status == "disagree")
    return out


def _folded_table(rest: list[Event]) -> Group:
    """The folded calls of one line: one row each, numbers never cut (render/fit.py)."""
    first = rest[0]
    names = [x.name for x in first.inputs][:4]
    checks = list(dict.fromkeys(c.name for e in rest for c in e.checks))
    heads = ["output", *[f"‖{visible(n)}.grad‖" for n in names], *[_SHORT.get(c, c) for c in checks]]
    table = NumberTable("call", heads)
    for e in rest:
        out = e.outputs[0].values if e.outputs else None
        row = [fmt(float(out)) if isinstance(out, (int, float)) else "…"]
        for n in names:
            x = next((i for i in e.inputs if i.name == n), None)
            row.append("" if x is None or x.grad_norm is None else fmt(x.grad_norm))
        for c in checks:
            check = next((k for k in e.checks if k.name == c), None)
            row.append("" if check is None else check.status)
        table.add_row(f"#{e.index}", *row)
    more = f" (the first {len(names)} of {len(first.inputs)} inputs)" if len(first.inputs) > len(names) else ""
    title = Text(f"… {len(rest)} more calls from line {first.line}{more}; --full shows each", style="bold cyan")
    return Group(title, table)


def _folded(e: Event) -> bool:
    return any("every" in (c.reason or "") and "is checked" in (c.reason or "") for c in e.checks)


# what in a snippet's source draws from torch's random generator: rand*, normal_, dropout, the initial
# weights of nn layers, torch.nn.init, ... Read from the source: the run does not report its draws
DRAWS = re.compile(
    r"\b(rand\w*|normal_?|uniform_|bernoulli_?|multinomial|poisson|exponential_|cauchy_|geometric_|random_|"
    r"[Dd]ropout\w*|init\s*\.\s*\w+|Linear|Bilinear|LazyLinear|Conv\w*|Embedding\w*|RNN\w*|LSTM\w*|GRU\w*|"
    r"MultiheadAttention|Transformer\w*|PReLU)\b"
)
SEEDS_ITSELF = re.compile(r"\bmanual_seed\s*\(")


def _random(r: SnippetResult, upto: Step | None = None) -> bool:
    """Whether the snippet draws random numbers (read from its code: comments and strings left out); with
    `upto`, whether a statement up to that one draws and none seeds the generator itself (manual_seed): what
    a claim about that statement's output can differ by."""
    steps = r.steps if upto is None else r.steps[: 1 + next(k for k, s in enumerate(r.steps) if s is upto)]
    codes = [_code(s.source) for s in steps]
    if upto is not None and any(SEEDS_ITSELF.search(c) for c in codes):
        return False
    return any(DRAWS.search(c) for c in codes)


def _code(source: str) -> str:
    """A statement's tokens without its comments and string literals (`# random init` draws nothing)."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return source
    return " ".join(t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING))


def seed_banner(r: SnippetResult, surface: str = CLI) -> str | None:
    """What the header says of the seed, only what is true of this snippet: the seed given, that the snippet
    seeds itself, the seed drawn for it, or nothing where it draws no random number."""
    if r.seed_given:
        return f"seed {r.seed} ({option(surface, 'seed', str(r.seed) if surface == API else None)})"
    if any(SEEDS_ITSELF.search(_code(s.source)) for s in r.steps):
        return "seeded by the snippet itself (manual_seed)"
    if not _random(r):
        return None
    return f"seed {r.seed} (drawn; pass {option(surface, 'seed', 'N')} to repeat it)"


def _header(r: SnippetResult, surface: str = CLI) -> Text:
    if r.kind == "check":
        return Text(f"check {visible(r.label)} · torch {r.torch_version} (your own code, imported)\n", style="bold")
    seed = seed_banner(r, surface)
    kind = "REPL transcript" if r.repl else "snippet"
    return Text(f"{kind} {visible(r.label)}\ntorch {r.torch_version}{f' · {seed}' if seed else ''}\n", style="bold")


def _source_lines(first: int, source: str) -> Text:
    out = Text()
    for k, line in enumerate(source.split("\n")):
        if k:
            out.append("\n")
        out.append(f"{first + k:>4} │ ", style="dim")
        out.append(visible(line))
    return out


def _inline(values: Any, shape: list[int], full: bool) -> str:
    if values is None:  # left out for size (confined/payload.py)
        return "(values not kept)"
    flat = _flat(values)
    if not isinstance(values, list):
        return fmt(float(values)) if isinstance(values, (int, float)) else visible(str(values))
    shown = flat if full or len(flat) <= INLINE else flat[: INLINE // 2] + ["…"] + flat[-INLINE // 2 :]
    body = ", ".join(x if isinstance(x, str) else fmt(float(x)) for x in shown)
    return f"[{body}]" if len(shape) == 1 else f"{fmt_shape(tuple(shape))} [{body}]"


def _flat(x: Any) -> list[Any]:
    if isinstance(x, list):
        return [v for item in x for v in _flat(item)]
    return [x]


def _event(e: Event, explain: bool, full: bool) -> RenderableType:
    parts: list[RenderableType] = []
    kind = (
        "check"
        if e.call == "check"
        else "jvp"
        if e.call.endswith("unpack_dual")
        else e.call.split(" ", 1)[0].rsplit(".", 1)[-1]
        if "functional" in e.call or e.call.startswith("torch.func.")
        else "grad"
        if e.call.endswith("grad")
        else "backward"
    )
    head = Text(f"╰ {kind} #{e.index}  ", style="bold cyan")
    head.append(visible(e.source), style="cyan")
    parts.append(head)
    meta = ValueGrid(("", "", ""))
    for o in e.outputs:
        meta.add_row(
            Text(f"output {visible(o.name)}"),
            Text(f"shape {fmt_shape(tuple(o.shape))}"),
            Text(_inline(o.values, o.shape, full)),
        )
    for v in e.v:
        meta.add_row(
            Text("v"),
            Text(f"shape {fmt_shape(tuple(v.shape))}"),
            Text(_inline(v.values, v.shape, full) + f"  ({e.v_origin})"),
        )
    parts.append(meta)
    if e.inputs:
        parts.append(_grad_table(e, full))
    if e.results:
        parts.append(_results_table(e, full))
    if e.checks:
        # the one renderer of check rows and the verdict line (checks_view.py); run is brief, explain says all
        # --code's script counts in the verdict where it reproduced with the table alone (verdicts.script_route)
        parts += [check_rows(e.checks, SNIPPET, brief=not explain), verdict_line([*e.checks, *_script_checks(e)])]
    if e.diagnosis:
        parts.append(Text(("diagnosis: " if e.call == "check" else "") + visible(e.diagnosis), style="yellow"))
    parts.extend(why_view.kinks(e.kinks))
    if e.graph is not None:
        parts.extend(_graph(e))
    if e.backward_code is not None:
        from .code_view import section

        parts.extend(section(e.backward_code))
    if explain:
        for x in e.inputs:
            parts.extend(_ledger(e, x))
        for n in e.notes:
            parts.append(Text("note: " + n, style="dim"))
    return Group(*parts)


def _script_checks(e: Event) -> list[Any]:
    """--code's script as a check, where it reproduced with the table alone (verdicts.script_route); else none."""
    from ..verdicts import script_route

    return script_route(e.backward_code)


def _independently_agrees(e: Event) -> bool:
    """An independent check agrees, --code's script included where it counts (verdicts.script_route)."""
    return any(c.independent and c.status == "agree" for c in [*e.checks, *_script_checks(e)])


def _by_script_alone(events: list[Event]) -> str:
    """The calls whose one independent route is --code's script, and which scripts (verdicts.script_route)."""
    from ..verdicts import script_route

    files = [
        str(e.backward_code.get("file"))
        for e in events
        if isinstance(e.backward_code, dict)
        and script_route(e.backward_code)
        and not any(c.independent and c.status == "agree" for c in e.checks)
    ]
    if not files:
        return ""
    return (
        f"; {len(files)} checked by {'its' if len(files) == 1 else 'their'} backward script alone ({', '.join(files)})"
    )


def _grad_table(e: Event, full: bool) -> NumberTable:
    """One row per input element: its value, .grad before and after, what the call gave, and the references.

    Where every .grad was None before the call, the call's grads are all of .grad: one column shows them.
    """
    is_grad = e.call.endswith("grad") or e.call == "check"
    fresh = not is_grad and all(x.grad_before is None and "grad_before" not in x.omitted for x in e.inputs)
    names: list[tuple[str, str]] = [("value", "value")]
    if is_grad:
        names.append(("returned", "grad"))
    elif fresh:
        names.append((".grad (was None)", "grad_after"))
    else:
        names += [(".grad before", "grad_before"), (".grad after", "grad_after"), ("added", "grad")]
    for title, name in (("Jᵀv (J)", "jtv"), ("Jᵀv (FD)", "finite_difference")):
        if any(getattr(x, name) is not None or name in x.omitted for x in e.inputs):
            names.append((title, name))
    t = NumberTable("element", [title for title, _ in names])  # never a cut number: blocks of columns
    for x in e.inputs:
        # an array left out for size (confined/payload.py) shows as —, one that is None as None
        fields = [_shown(x, name, fresh) for _, name in names]
        flat = [None if (c := getattr(x, name)) is None else _flat(c) for name in fields]
        gone = [name in x.omitted for name in fields]
        n = math.prod(x.shape) if x.shape else 1
        if all(gone):  # nothing of this input travelled (confined/payload.py): one row says so
            norm = "" if x.grad_norm is None else f"; ‖grad‖ = {fmt(x.grad_norm)}"
            said = f"{n:,} elements, not kept{norm}"
            t.add_row(Text(visible(x.name)), *[said if k == 0 else "" for k in range(len(names))])
            continue
        rows = range(n) if full or n <= INLINE else [*range(INLINE // 2), -1, *range(n - INLINE // 2, n)]
        for j in rows:
            if j == -1:
                t.add_row(Text("…"), *["…" for _ in names])
                continue
            cells = ("—" if out else "None" if c is None else _cell(c[j]) for c, out in zip(flat, gone, strict=True))
            t.add_row(Text(visible(x.name) + element_index(x.shape, j)), *cells)
    return t


def _shown(x: LeafGrad, name: str, fresh: bool) -> str:
    """The field a column shows for `x`: where .grad was None, what it holds after is what the call added,
    which may have been kept where the other was left out for size."""
    return "grad" if fresh and name == "grad_after" and name in x.omitted and x.grad is not None else name


def _results_table(e: Event, full: bool) -> NumberTable:
    """A functional call's result entry by entry, next to its finite-difference reference."""
    t = NumberTable("entry", ["result", "fin. diff."])
    refs = {r.name: r for r in e.reference}
    for res in e.results:
        got = _flat(res.values)
        ref = _flat(refs[res.name].values) if res.name in refs else None
        n = len(got)
        rows = range(n) if full or n <= 2 * INLINE else [*range(INLINE), -1, *range(n - INLINE, n)]
        for j in rows:
            if j == -1:
                t.add_row(Text("…"), "…", "…")
                continue
            t.add_row(
                Text(res.name + element_index(res.shape, j)),
                _cell(got[j]),
                _cell(ref[j]) if ref is not None and j < len(ref) else "—",
            )
    return t


def _cell(x: Any) -> str:
    return fmt(float(x)) if isinstance(x, (int, float)) else visible(str(x))


def _graph(e: Event) -> list[RenderableType]:
    """The backward graph as a tree, output first, with the cotangent arriving at each node; then the sums."""
    from .graph_view import tree

    title = (
        f"backward graph of #{e.index}: the nodes torch ran, output first; each receives the cotangent shown, "
        "(× d) the local derivative of the node above that made it"
    )
    return tree(e.graph or [], title)


def _ledger(e: Event, x: LeafGrad) -> list[RenderableType]:
    """Each grad element as the weighted sum Σᵢ v[i]·∂y[i]/∂x[j], written out (small inputs only)."""
    if x.jacobian is None or not e.v:
        return []
    v = [float(a) for v in e.v for a in _flat(v.values)]
    rows = x.jacobian
    n = len(rows[0]) if rows else 0
    out: list[RenderableType] = []
    if n > LEDGER:
        return [
            Text(f"{visible(x.name)}: {n} elements; the ledger is written for inputs of at most {LEDGER}.", style="dim")
        ]
    y = visible(e.outputs[0].name) if len(e.outputs) == 1 else "y"
    shape = x.shape
    for j in range(n):
        idx = element_index(shape, j)
        terms = [(v[i], rows[i][j]) for i in range(len(rows)) if rows[i][j] != 0 and v[i] != 0]
        total = sum(a * b for a, b in terms)
        written = " + ".join(f"{fmt(a, 4)}·{fmt(b, 6)}" for a, b in terms[:LEDGER]) or "0"
        if len(terms) > LEDGER:
            written += f" + … ({len(terms) - LEDGER} more)"
        name = f"{visible(x.name)}{idx}"
        out.append(Text(f"{name}: Σᵢ v[i]·∂{y}[i]/∂{name} = {written} = {fmt(total)}"))
    return out


_MEMORY_WORDS = ("MemoryError", "can't allocate memory", "out of memory")


def _short_of_memory(e: Event) -> bool:
    """A call whose checks were skipped because the child ran out of memory reading or checking it."""
    return any(
        c.status == "skipped" and c.reason is not None and any(w in c.reason for w in _MEMORY_WORDS) for c in e.checks
    )


def _summary(r: SnippetResult) -> Text:
    if r.kind == "check":  # one call of the user's own function: no snippet's backward/grad calls
        from ..check_result import summary

        return Text("\n" + summary(r), style="bold red" if r.exit_code == 3 else "bold")
    n = len(r.events)
    bad = sum(1 for e in r.events if e.status == "disagree")
    text = f"\n{n} backward/grad call{'s' if n != 1 else ''} explained"
    if bad:
        text += f"; {bad} with a check that disagrees"
    elif n:
        # only independent checks count as evidence; where none ran, say so, and why
        sampled = [e for e in r.events if e.checks and all(c.status == "skipped" for c in e.checks) and _folded(e)]
        folded = {id(e) for e in sampled}  # by identity: an event's == compares every field, deeply
        unchecked = [e for e in r.events if id(e) not in folded and not _independently_agrees(e)]
        consistent = sum(1 for e in unchecked if any(c.status == "agree" for c in e.checks))
        if not unchecked:
            text += "; every independent check agrees"
        if consistent:
            text += f"; {consistent} with only a consistency check agreeing (no independent check ran)"
        # the one reason a user can act on at once is said in the line itself
        short = sum(1 for e in unchecked if _short_of_memory(e) and not any(c.status == "agree" for c in e.checks))
        if len(unchecked) - consistent - short > 0:
            text += f"; {len(unchecked) - consistent - short} not checked (each says why)"
        if short:
            text += f"; {short} not checked for lack of memory (--limit snippet_memory_bytes=N gives more)"
        if sampled:
            text += f"; {len(sampled)} folded calls of a loop not checked (every 10th is, every 100th past 100)"
        text += _by_script_alone(r.events)
    text += manual_view.summary(r.manual)
    went_on = [s.line for s in r.steps if s.raised is not None]
    if went_on:
        at = ", ".join(str(line) for line in went_on[:5]) + (", ..." if len(went_on) > 5 else "")
        many = "s" if len(went_on) != 1 else ""
        text += f"; {len(went_on)} statement{many} raised (line{many} {at}) and the REPL went on"
    return Text(text, style="bold red" if bad else "bold")
