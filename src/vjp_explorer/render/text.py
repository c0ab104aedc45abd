"""Result -> Rich renderables. The only module (with the CLI's console) that touches rich.

Renderers return renderables; the caller prints them. User text (the program,
value sources, names) is always wrapped in Text, never parsed as markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..result import Result, TensorData
from ..result import index_label as label
from ..verdicts import script_route
from ..wording import API, CLI, option
from .checks_view import checks_section
from .fit import NumberTable, ValueGrid
from .numbers import DEFAULT_DIGITS, fmt, fmt_shape

# --full in a terminal stops here: Rich lays out about 1,000 rows a second, so a table of 10^6 rows would
# take many minutes; beyond it the table keeps its head ... tail and says so (--json --full has every number)
FULL_MAX = 10_000


@dataclass(frozen=True)
class View:
    """How much to show: digits, and the screenful caps (lifted by --full)."""

    digits: int = 6
    full: bool = False
    max_rows: int = 24
    max_cols: int = 10
    verbose: bool = False
    ascii: bool = False  # the terminal cannot show Jᵀv: the table headers spell it J^T v, so columns stay aligned

    @classmethod
    def for_result(cls, r: Result, digits: int | None, full: bool, verbose: bool = False, ascii: bool = False) -> View:
        # about a screenful in all: fewer rows per leaf when there are several leaves
        rows = max(6, 24 // max(1, len(r.leaves)))
        return cls(digits or DEFAULT_DIGITS.get(r.dtype, 6), full, max_rows=rows, verbose=verbose, ascii=ascii)

    def shows_all(self, n: int, limit: int | None = None) -> bool:
        """Whether n rows (or n numbers on one line, with its own limit) are shown whole."""
        return n <= (self.max_rows if limit is None else limit) or self.full and n <= FULL_MAX

    def rows(self, n: int) -> list[int | None]:
        """Which element indices to show: all, or head ... tail with None as the gap."""
        if self.shows_all(n):
            return list(range(n))
        tail = max(2, self.max_rows // 4)
        head = self.max_rows - tail - 1
        return [*range(head), None, *range(n - tail, n)]


METHOD_WORDS = {
    "diagonal": "its diagonal from one autograd.grad",
    "zero": "zero: no autodiff needed",
    "autograd.grad rows": "one autograd.grad per row",
    "jacrev": "by torch.func.jacrev",
    "jacfwd": "by torch.func.jacfwd",
    "not materialised": "not materialised (too large)",
}

# why a leaf's table has no column "Jᵀv (from J)": with v = ones, J's diagonal is backward's own pass
SAME_PASS = "no {word} (from J) for {leaves}: J's diagonal came from backward's own pass (v = ones), so it is .grad"


def surface(r: Result) -> str:
    """Who asked for this run (wording.py): the command line, or Python."""
    return str(r.meta.get("surface", API))


def all_of_them(r: Result, where: str) -> str:
    """Where the rest of a cut list is: `--full` on the command line; in Python, the result's `where`."""
    return "--full" if surface(r) == CLI else f"{where} has them all"


def _opt(r: Result, key: str, value: str | None = None) -> str:
    """The option `key` in the words of the front end that asked for r."""
    return option(surface(r), key, value)


def inline(t: TensorData, view: View, limit: int = 12) -> Text:
    """A short one-line form: the values if few, else head ... tail plus stats."""
    n = t.numel
    if n == 0:
        return Text("(empty)")
    if not t.shape:
        return Text(fmt(t.flat[0], view.digits))
    if view.shows_all(n, limit):
        return Text(_nested(t, view))
    head = ", ".join(fmt(t.flat[i], view.digits) for i in range(4))
    tail = ", ".join(fmt(t.flat[i], view.digits) for i in range(n - 2, n))
    s = t.stats
    extra = f"  (min {fmt(s.min, 4)}, max {fmt(s.max, 4)}, norm {fmt(s.norm, 4)}"
    extra += f", {s.nan} nan" if s.nan else ""
    extra += f", {s.inf} inf" if s.inf else ""
    return Text(f"[{head}, ..., {tail}]{extra})")


def _nested(t: TensorData, view: View) -> str:
    flat = [fmt(t.flat[i], view.digits) for i in range(t.numel)]
    for n in reversed(t.shape[1:]):
        flat = ["[" + ", ".join(flat[i : i + n]) + "]" for i in range(0, len(flat), n)]
    return "[" + ", ".join(flat) + "]"


def header(r: Result, view: View) -> RenderableType:
    """The program, the inputs, the output and v."""
    t = ValueGrid(("bold", "", "dim"))
    t.add_row(
        Text("program"),
        Text(r.program),
        Text(f"dtype {r.dtype}" + (f", seed {r.meta['seed']}" if r.meta.get("uses_random") else "")),
    )
    for n, i in r.inputs.items():
        kind = "leaf, requires_grad=True" if i.requires_grad else "constant, requires_grad=False"
        t.add_row(Text(n), inline(i.value, view), Text(f"shape {fmt_shape(i.value.shape)}, {kind}"))
    t.add_row(Text(r.output_name), inline(r.output, view), Text(f"shape {fmt_shape(r.output.shape)}, the output"))
    src = {"given": f"given with {_opt(r, 'grad')}", "ones": "ones"}.get(r.grad_source, r.grad_source)
    if r.probe is not None:
        p = r.probe
        several = f"{_opt(r, 'grad')} values" if surface(r) == CLI else "values (gradient= and more_grads=)"
        src = {
            "one-hot": f"one-hot at {p.element} ({_opt(r, 'grad', ', '.join(p.texts))})",
            "basis": f"ones, the sum of every one-hot v ({_opt(r, 'grad', 'basis')})",
            "random": f"random, standard normal ({_opt(r, 'grad', 'random')})",
            "upstream": f"dL/d{r.output_name} for L = {p.formula} ({_opt(r, 'upstream')})",
            "several": f"v1 of {len(p.vs)} {several}",
        }.get(p.source, src)
    t.add_row(
        Text("v"),
        inline(r.grad, view),
        Text(f"shape {fmt_shape(r.grad.shape)}, {src}; lives in output space: v[i] = dL/d{r.output_name}[i]"),
    )
    calls = f"{r.output_name}.backward(v)" + (f" x {r.backward_calls}" if r.backward_calls > 1 else "")
    lead = Text.assemble(
        (calls, "bold"),
        " leaves Jᵀv in each leaf's .grad: one weighted sum per input element, ",
        (f"x[j].grad = Σᵢ v[i]·∂{r.output_name}[i]/∂x[j]", "italic"),
        "; J itself is never built.",
    )
    return Group(t, Text(""), lead)


def leaf_heading(r: Result, leaf: str, view: View) -> Text:
    """`leaf b  shape [3]  ·  Jacobian: diagonal (method: diagonal)`; with --verbose, why that method."""
    inp = r.inputs[leaf]
    jac = r.jacobians[leaf]
    text = Text.assemble(
        ("leaf ", "bold"),
        (leaf, "bold cyan"),
        f"  shape {fmt_shape(inp.value.shape)}  ·  Jacobian ∂{r.output_name}/∂{leaf}: {jac.structure}, "
        f"shape {fmt_shape(jac.shape)}, {METHOD_WORDS.get(jac.method, 'computed by ' + jac.method)}",
    )
    if view.verbose and jac.why:
        text.append(f"\n  method: {jac.why}", "dim")
    return text


def leaf_table(r: Result, leaf: str, view: View) -> NumberTable:
    """One row per leaf element: value, .grad from backward, Jᵀv from J, symbolic."""
    inp = r.inputs[leaf]
    g = r.grads[leaf]
    jtv = r.jtv.get(leaf)
    sym = r.symbolic.get(leaf) if r.symbolic else None
    mult = f"{r.backward_calls}·" if r.backward_calls > 1 else ""
    word = "J^T v" if view.ascii else "Jᵀv"
    same = r.jacobians[leaf].same_pass  # Jᵀv from J would repeat .grad: no column of its own
    heads = [".grad (backward)", *([] if same else [f"{mult}{word} (from J)"]), f"{mult}{word} (sympy)"]
    t = NumberTable(Text("element"), [Text("value"), *map(Text, heads)])
    for k in view.rows(g.numel):
        if k is None:
            t.add_row(None)
            if view.full:  # under the table: in a cell it would widen the element column past the numbers
                t.caption = (
                    f"{g.numel:,} elements: {_opt(r, 'full')} shows {FULL_MAX:,} rows; {_opt(r, 'json_full')} has all"
                )
            continue
        idx = g.index(k)
        jv = "-" if jtv is None else fmt(jtv.flat[k], view.digits)  # already N·Jᵀv, as .grad
        sv = "-" if sym is None else fmt(sym.flat[k], view.digits)
        cells = [fmt(g.flat[k], view.digits), *([] if same else [jv]), sv]
        t.add_row(Text(label(leaf, idx)), fmt(inp.value.flat[k], view.digits), *cells)
    return t


def jacobian_view(r: Result, leaf: str, view: View) -> RenderableType:
    """The Jacobian as a labelled matrix (rows y[i], columns x[j]), or why it is not shown."""
    jac = r.jacobians[leaf]
    out = r.output_name
    m = r.output.numel
    n = r.inputs[leaf].value.numel
    if jac.value is None:
        lines = [Text(f"J not materialised: {jac.reason}")]
        if jac.diagonal is not None:
            lines.append(Text.assemble(f"diagonal ∂{out}[k]/∂{leaf}[k]: ", inline(jac.diagonal, view)))
        return Group(*lines)
    if not (view.full and m * n <= FULL_MAX) and (m > view.max_rows or n > view.max_cols):
        d = jac.value
        more = (
            f"more than {_opt(r, 'full')} shows in a terminal ({FULL_MAX:,}; {_opt(r, 'json_full')} has them all)"
            if view.full
            else f"more than a screen ({_opt(r, 'full')} {'show' if surface(r) == API else 'shows'} them)"
        )
        summary = Text(
            f"J = ∂{out}/∂{leaf} has {m} x {n} entries, {more}: "
            f"min {fmt(d.stats.min, 4)}, max {fmt(d.stats.max, 4)}, norm {fmt(d.stats.norm, 4)}"
        )
        from .heatmap import heatmap

        return Group(summary, heatmap(jac, out, r.output.shape, r.inputs[leaf].value, view.ascii))
    return _labelled_matrix(f"J = ∂{out}/∂{leaf}", jac.value, r, leaf, view)


def leaf_section(r: Result, leaf: str, view: View) -> RenderableType:
    """Heading, then the per-element table and the Jacobian side by side (stacked if J is wide)."""
    table = leaf_table(r, leaf, view)
    jac = jacobian_view(r, leaf, view)
    # side by side when both fit the terminal, else the Jacobian goes below
    return Group(leaf_heading(r, leaf, view), Columns([table, jac], padding=(1, 4)))


def same_pass_line(r: Result, view: View) -> Text | None:
    """Why the leaves whose J came from backward's own pass have no column Jᵀv (from J), in one line."""
    same = [n for n in r.leaves if r.jacobians[n].same_pass]
    if not same:
        return None
    word = "J^T v" if view.ascii else "Jᵀv"
    return Text(SAME_PASS.format(word=word, leaves=", ".join(same)), style="dim")


def intermediates(r: Result, view: View) -> RenderableType | None:
    """Assigned variables: their value and the upstream gradient (the v) that reached them."""
    rows = [i for n, i in r.intermediates.items() if n != r.output_name]
    if not rows:
        return None
    t = ValueGrid(("bold", "", ""))
    for i in rows:
        grad = inline(i.grad, view) if i.grad is not None else Text("-")
        t.add_row(
            Text(i.name), Text.assemble("value ", inline(i.value, view)), Text.assemble(".grad reaching it ", grad)
        )
    note = Text(
        "intermediates (not leaves: torch keeps their .grad only with .retain_grad()); "
        "their .grad is the v that backward passes through them",
        style="dim",
    )
    return Group(Text("intermediates", style="bold underline"), t, note)


def _matrix(title: str, rows_of: TensorData, r: Result, leaf: str, view: View) -> RenderableType:
    """An m x n matrix (rows the output's elements, columns the leaf's), or its summary past a screen."""
    m = r.output.numel
    leaf_data = r.inputs[leaf].value
    n = leaf_data.numel
    if not (view.full and m * n <= FULL_MAX) and (m > view.max_rows or n > view.max_cols):
        st = rows_of.stats
        return Text(f"{title}: {m} x {n} entries, min {fmt(st.min, 4)}, max {fmt(st.max, 4)}, norm {fmt(st.norm, 4)}")
    return _labelled_matrix(title, rows_of, r, leaf, view)


def _labelled_matrix(title: str, d: TensorData, r: Result, leaf: str, view: View) -> NumberTable:
    """Rows the output's elements, columns the leaf's: split into blocks of columns where it is too wide."""
    m, leaf_data = r.output.numel, r.inputs[leaf].value
    n = leaf_data.numel
    t = NumberTable(Text(title), [Text(label(leaf, leaf_data.index(j))) for j in range(n)])
    for i in range(m):
        row = (fmt(d.flat[i * n + j], view.digits) for j in range(n))
        t.add_row(Text(label(r.output_name, r.output.index(i))), *row)
    return t


def probe_section(r: Result, view: View) -> RenderableType | None:
    """v as a probe: what this v reads off J, and the extra backward passes it ran (docs/probes.md)."""
    p = r.probe
    if p is None:
        return None
    out = r.output_name
    parts: list[RenderableType] = [Text("v as a probe", style="bold underline"), Text(p.note)]
    if p.source == "upstream":
        parts.append(
            Text.assemble(
                ("L = ", "bold"),
                Text(p.formula or ""),
                f" = {fmt(p.loss if p.loss is not None else float('nan'), view.digits)} at {out}; ",
                ("v = ", "bold"),
                f"dL/d{out} = ",
                inline(r.grad, view),
            )
        )
    if p.rows is not None:
        parts.append(Text(f"{out}.shape {fmt_shape(r.output.shape)}: {p.method}", style="dim"))
        for leaf, rows in p.rows.items():
            jac = r.jacobians[leaf]
            side: list[RenderableType] = [_matrix(f"backward(eᵢ) → {leaf}.grad", rows, r, leaf, view)]
            side.append(
                _matrix(f"J = ∂{out}/∂{leaf}", jac.value, r, leaf, view)
                if jac.value is not None
                else Text(f"J not materialised: {jac.reason}")
            )
            parts += [Text.assemble(("leaf ", "bold"), (leaf, "bold cyan")), Columns(side, padding=(1, 4))]
    if p.vs:
        t = Table(show_edge=False, header_style="bold", pad_edge=False)
        t.add_column("v")
        t.add_column("value")
        for leaf in r.leaves:
            t.add_column(Text(f"backward(v) → {leaf}.grad"))
        for k, pv in enumerate(p.vs):
            t.add_row(
                Text(f"v{k + 1} = {pv.text}"), inline(pv.value, view), *(inline(pv.grads[n], view) for n in r.leaves)
            )
        if p.combined is not None and p.combined_grads is not None:
            from ..engine.probe import combo_text

            t.add_row(
                Text(combo_text(p.coefficients)),
                inline(p.combined, view),
                *(inline(p.combined_grads[n], view) for n in r.leaves),
            )
        parts.append(t)
    return Group(*parts)


def checks(r: Result) -> RenderableType:
    """The checks, then the verdict in one line (the one renderer of every door: render/checks_view.py); --code's
    script counts as a route where it reproduced with the table alone (issue 40)."""
    return checks_section(list(r.checks.values()), surface(r), counted=script_route(r.backward_code))


def notes(r: Result) -> list[RenderableType]:
    if not r.notes:
        return []
    items: list[RenderableType] = [Text("notes", style="bold underline")]
    for n in r.notes:
        items.append(Text("• " + n.text))
    return items


def timings(r: Result) -> RenderableType:
    parts = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in r.timings.items())
    return Text("timings: " + parts, style="dim")


def graph_section(r: Result) -> RenderableType | None:
    """With --graph: the backward graph torch recorded, output first, each node with its span and cotangent."""
    if r.graph is None:
        return None
    from .graph_view import tree

    out = r.output_name
    title = f"{out}.backward(v): the nodes torch ran, output first, each with what it received"
    note = Text(
        "each node is named as torch names it (grad_fn), with the part of the program that made it and the "
        "shape of that value; "
        "AccumulateGrad adds what it receives to the leaf's .grad; (× d) is the local derivative of the node above "
        "along that edge, element by element: what it received there = what the node above received × d",
        style="dim",
    )
    return Group(Text("backward graph", style="bold underline"), *tree(r.graph, title, surface(r)), note)


def render_run(r: Result, view: View) -> RenderableType:
    """The whole `vjp run` screen."""
    parts: list[RenderableType] = [header(r, view), Text("")]
    same = same_pass_line(r, view)
    if same is not None:
        parts += [same, Text("")]
    for leaf in r.leaves:
        parts += [leaf_section(r, leaf, view), Text("")]
    inter = intermediates(r, view)
    if inter is not None:
        parts += [inter, Text("")]
    probe = probe_section(r, view)
    if probe is not None:
        parts += [probe, Text("")]
    graph = graph_section(r)
    if graph is not None:
        parts += [graph, Text("")]
    if r.backward_code is not None and "record" not in r.backward_code:
        from .code_view import section

        parts += [*section(r.backward_code), Text("")]
    parts.append(checks(r))
    note_items = notes(r)
    if note_items:
        parts += [Text(""), *note_items]
    if view.verbose:
        parts += [Text(""), timings(r)]
    return Group(*parts)
