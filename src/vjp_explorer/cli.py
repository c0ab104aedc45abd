"""The `vjp` command: parse argv, call the library, pick a renderer, map errors to exit codes.

No maths here. Variables are given as `--NAME VALUE`: the run command's parser
takes every `--NAME` that is not one of its own options as a variable (use
`--var NAME=VALUE` for a name that clashes with an option, such as `grad`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from .cli_options import (
    CallsOpt,
    ConstOpt,
    DebugOpt,
    DeviceOpt,
    DigitsOpt,
    DotOpt,
    DtypeOpt,
    Expression,
    FileOpt,
    FullOpt,
    GradOpt,
    GradsOpt,
    GraphOpt,
    HtmlOpt,
    JsonOpt,
    LimitOpt,
    MaxJacOpt,
    OutputOpt,
    RetainOpt,
    SaveOpt,
    SeedOpt,
    SnippetOpt,
    SvgOpt,
    SymOpt,
    UpstreamOpt,
    VarOpt,
    VerboseOpt,
)
from .cli_support import limits_from_options as _limits
from .cli_support import pairs as _pairs
from .errors import ExitCode, OutputError, UsageError, VjpError

app = typer.Typer(
    name="vjp",
    help="See what y.backward(v) computes: Jᵀv, one weighted sum per input element, checked three ways.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (shell completion of commands and options)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: typer's rich help imports rich.markdown and doubles start-up
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from . import __version__

        print(f"vjp-explorer {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = None,
) -> None:
    """See what y.backward(v) computes: Jᵀv, one weighted sum per input element, checked three ways."""


class VariableOptions(TyperCommand):
    """A command that also accepts `--NAME VALUE` for each variable of the program."""

    # Duck-typed on purpose: typer has shipped both real click and a vendored copy of it.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for p in self.get_params(ctx):
            if getattr(p, "param_type_name", "") == "option":
                for o in [*p.opts, *p.secondary_opts]:
                    takes_value[o] = not getattr(p, "is_flag", False) and not getattr(p, "count", False)
        problems: list[str] = []
        rest: list[str] = []
        found: list[tuple[str, str]] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                rest += args[i:]
                break
            if a.startswith("--") and len(a) > 2:
                name, eq, val = a[2:].partition("=")
                opt = "--" + name
                if opt in takes_value:
                    rest.append(a)
                    if takes_value[opt] and not eq and i + 1 < len(args):
                        rest.append(args[i + 1])
                        i += 1
                    i += 1
                    continue
                if not eq:
                    if i + 1 >= len(args):
                        problems.append(f"{a} needs a value: {a} VALUE (or --var {name}=VALUE).")
                        break
                    val = args[i + 1]
                    i += 1
                found.append((name, val))
                i += 1
                continue
            if a.startswith("-") and len(a) > 1 and a[:2] not in takes_value and not a[1:].isalpha():
                # not an option's value (those were taken above): a program that starts with a minus sign
                shown = a if len(a) <= 40 else a[:37] + "..."
                problems.append(
                    f"The program {shown!r} starts with a minus sign, so the command line reads it as an option. "
                    f"Write it in parentheses, '({shown})', or put it last, after --: vjp run --NAME VALUE -- "
                    f"'{shown}'."
                )
                break
            if a.startswith("-") and len(a) > 1 and a[1:2].isalpha() and a[:2] not in takes_value:
                problems.append(f"No such option: {a} (variables are given as --NAME VALUE, with two dashes).")
                break
            rest.append(a)
            i += 1
        ctx.meta["vjp_variables"] = found
        ctx.meta["vjp_problems"] = problems
        ctx.meta["vjp_options"] = sorted(o for o in takes_value if o.startswith("--"))
        return super().parse_args(ctx, rest)


def _build_request(ctx: Any, expression: str | None, file: Path | None, **o: Any) -> Any:
    from .api import Request

    for problem in ctx.meta.get("vjp_problems", []):
        raise UsageError(problem)
    options = ctx.meta.get("vjp_options", [])
    for name, _ in ctx.meta.get("vjp_variables", []):
        if not name.isidentifier() or not name.isascii():
            import difflib

            near = difflib.get_close_matches("--" + name, options, n=1) if len(name) <= 40 else []
            shown = name if len(name) <= 40 else name[:37] + "..."
            minus = " A program that starts with a minus sign goes in parentheses." if name.startswith("-") else ""
            raise UsageError(
                f"--{shown} is neither an option nor a valid variable name.{minus}",
                hint=f"Did you mean {near[0]}?" if near else None,
            )
    variables = list(ctx.meta.get("vjp_variables", [])) + _pairs(o["var"], "--var")
    consts = _pairs(o["const"], "--const")
    seen: set[str] = set()
    for name, _ in variables + consts:
        if name in seen:
            raise UsageError(f"The variable {name!r} is given twice; give each variable once.")
        seen.add(name)
    limits = _limits(o)
    if expression == "-":
        # bounded: one character past the limit is enough for the parser to refuse it (`< /dev/zero` ends)
        try:
            expression = sys.stdin.read(limits.program_chars + 1).rstrip()
        except (AttributeError, OSError, ValueError):  # `vjp run - <&-`: no stdin, or a closed one
            raise UsageError("'-' reads the program from stdin, but stdin is closed or unreadable.") from None
        except UnicodeDecodeError as e:
            raise UsageError(f"'-' reads the program from stdin, which is not UTF-8 text ({e.reason}).") from None
    if file is not None:
        from .language.files import load_request_fields

        if expression is not None:
            raise UsageError("Give either an expression or --file, not both.")
        req = Request(**load_request_fields(file, limits))
        ctx.meta["vjp_file"] = req.source
        ctx.meta["vjp_origins"] = _file_origins(req, o, {name for name, _ in variables + consts})
    else:
        if expression is None:
            raise UsageError("Give a program, e.g. vjp run '3*a + 2*b' --a 1,2 --b 3,4 (or --file FILE).")
        req = Request(expression)
    overridden = bool(variables or consts) or any(
        o.get(k) is not None for k in ("grad", "upstream", "output", "dtype", "seed", "backward_calls")
    )
    if overridden and req.expected is not None:
        # the numbers the file's source printed were for the file's own values, not these
        req.expected = None
        req.expected_dropped = True
    # command-line values override the file's
    for name, value in variables:
        req.consts.pop(name, None)
        req.values[name] = value
    for name, value in consts:
        req.values.pop(name, None)
        req.consts[name] = value
    req.reserved = frozenset(o.removeprefix("--") for o in options)
    if o["grad"] is not None:
        req.grad = o["grad"][0]
        req.more_grads = tuple(o["grad"][1:])
        req.grad_label = "given"
    if o.get("upstream") is not None:
        req.upstream = o["upstream"]
        if o["grad"] is None:
            req.grad = None  # the file's grad gives way to the v the loss makes
    if o["output"] is not None:
        req.output = o["output"]
    if o["dtype"] is not None:
        req.dtype = o["dtype"]
    if o["seed"] is not None:
        req.seed = o["seed"]
    if o["backward_calls"] is not None:
        req.backward_calls = o["backward_calls"]
    req.symbolic = req.symbolic and o["symbolic"]
    req.retain_graph = o["retain_graph"]
    req.device = o["device"]
    req.limits = limits
    return req


# the options whose value an expression file can give, with the file's key and how a message names the value
_FILE_KEYS = {
    "grad": ("--grad", "v"),
    "output": ("--output", "the output"),
    "dtype": ("--dtype", "the dtype"),
    "seed": ("--seed", "the seed"),
    "backward_calls": ("--backward-calls", "the number of calls"),
}


def _file_origins(req: Any, o: dict[str, Any], overridden: set[str]) -> dict[str, tuple[str, str, str]]:
    """What the library's messages call each value that came from the file (and not from the command line).

    Maps the words a message starts with (an option such as --grad, or "the value of 'x'") to
    (file, key, noun): at the CLI edge such a message is rewritten to name the file and the key instead.
    """
    path = req.source
    out: dict[str, tuple[str, str, str]] = {}
    for key, (option, noun) in _FILE_KEYS.items():
        if o[key] is None and getattr(req, key) is not None:
            out[option] = (path, key, noun)
    for table, names in (("inputs", req.values), ("constants", req.consts)):
        for name in names:
            if name not in overridden:
                out[f"the value of {name!r}"] = (path, f"{table}.{name}", "")
                out[f"A value was given for {name!r}"] = (path, f"{table}.{name}", "")
    return out


def _name_the_file(e: VjpError, origins: dict[str, tuple[str, str, str]]) -> bool:
    """Reword an error about a value from the expression file to name the file and the key, not an option.

    The library names the command-line option (`--grad has shape ...`); when the value came from the
    file, the message says `FILE: key 'grad': v has shape ...` instead. Returns whether it did.
    """
    for subject, (path, key, noun) in origins.items():
        if not (e.message.startswith(subject) or e.label == subject):
            continue
        where = f"{path}: key {key!r}"
        if e.message.startswith(subject):
            rest = e.message[len(subject) :]
            if rest.startswith(":"):
                e.message = where + rest
            elif noun:
                e.message = f"{where}: {noun}{rest}"
            else:
                e.message = f"{where}: {e.message[:1].lower()}{e.message[1:]}"
        if e.label == subject:
            e.label = where  # the marker is under the file's value
        elif subject.startswith("--"):
            e.source = None  # a marker under the program would not point at the key
        if e.hint and subject.startswith("--") and subject in e.hint:
            e.hint = (
                f'Give grad in {path} the output\'s shape, or write grad = "ones"; --grad on the command '
                "line overrides the file."
                if subject == "--grad"
                else f"Change {key} in {path}, or override it on the command line with {subject}."
            )
        return True
    return False


def _fail(e: BaseException, debug: bool) -> typer.Exit:
    from .language.unicode import visible

    if isinstance(e, VjpError):
        _write("error: " + visible(e.render()) + "\n", err=True)
        return typer.Exit(int(e.exit_code))
    if isinstance(e, KeyboardInterrupt):
        _write("interrupted\n", err=True)
        return typer.Exit(int(ExitCode.INTERRUPTED))
    if debug or os.environ.get("VJP_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
        raise e
    _write(
        visible(f"internal error: {type(e).__name__}: {e}")
        + "\nThis is a bug in vjp-explorer; please report it with the command you ran. Run again with --debug "
        "(or VJP_DEBUG=1) for the traceback.\n",
        err=True,
    )
    return typer.Exit(int(ExitCode.INTERNAL))


# our symbols, spelled in ASCII for a stream that cannot encode them (PYTHONIOENCODING=ascii, latin-1)
_ASCII_SPELLINGS = {"ᵀ": "^T", "∂": "d", "Σ": "sum", "ᵢ": "_i", "·": "*", "×": "x", "±": "+/-", "Δ": "diff"}
_ASCII_SPELLINGS |= {"δ": "delta", "Π": "prod", "⊙": "(.)", "←": "<-", "•": "*", "★": "*"}


def _ascii_box(c: str) -> str:
    """A table's box-drawing character as |, - or + (a crossing or corner); any other character unchanged."""
    if not "\u2500" <= c <= "\u257f":
        return c
    import unicodedata

    name = unicodedata.name(c)
    return "+" if " AND " in name else "|" if name.endswith("VERTICAL") else "-" if "HORIZONTAL" in name else "+"


def _can_encode(text: str, err: bool = False) -> bool:
    encoding = getattr(sys.stderr if err else sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _write(text: str | list[str], err: bool = False) -> None:
    """Write already rendered output to stdout (or stderr), in what the stream can encode.

    Where the stream cannot take our symbols they are spelled in ASCII (Jᵀv as J^T v), anything else
    as a backslash escape. A reader that went away (`| head`) ends stdout quietly; any other fault
    writing stdout (a full disk) is an OutputError. A fault on stderr leaves nothing to tell it with.
    """
    stream = sys.stderr if err else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    parts = [text] if isinstance(text, str) else text
    try:
        for part in parts:
            if not part.isascii() and not _can_encode(part, err):
                part = re.sub("ᵀ(?=[A-Za-z])", "^T ", part)
                part = "".join(_ASCII_SPELLINGS.get(c) or _ascii_box(c) for c in part)
                part = part.encode(encoding, "backslashreplace").decode(encoding)
            stream.write(part)
        stream.flush()
    except BrokenPipeError:
        if not err:
            _silence_stdout()
    except (OSError, ValueError) as e:
        if err:
            return
        _silence_stdout()
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise OutputError(f"Cannot write the output to stdout: {reason}.") from None


def _render(*renderables: Any) -> str:
    """What Rich would print on stdout, as a string: written in one piece by _write.

    Rich renders into a buffer, never onto stdout itself, so that only _write meets a full disk or
    a closed pipe; colour follows whether stdout is a terminal, as it would.
    """
    import io

    from rich.console import Console

    # NO_COLOR (no-color.org) means no ANSI codes at all, not just no colours: no bold or dim either
    plain = "NO_COLOR" in os.environ and os.environ["NO_COLOR"] != ""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        terminal = False
    console = Console(
        file=io.StringIO(), force_terminal=terminal, highlight=False, color_system=None if plain else "auto"
    )
    # COLUMNS=0 (or a terminal a few columns wide) would print nothing or a column of fragments
    console.width = min(max(console.width, 40), 1000)
    for renderable in renderables:
        console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def _emit(
    result: Any,
    json_: bool,
    full: bool,
    verbose: bool,
    digits: int | None,
    explain: bool = False,
    export: tuple[Path | None, Path | None] = (None, None),
) -> None:
    if json_:
        from .render.json_out import write_json

        parts: list[str] = []  # all of it before the first byte: no truncated JSON if anything fails
        write_json(result, parts.append, full)
        parts.append("\n")
        _write(parts)
        return
    from .render import text

    view = text.View.for_result(result, digits, full, verbose, ascii=not _can_encode("Jᵀv∂Σ"))
    if explain:
        from .render.explain_view import render_explain

        shown = render_explain(result, view)
    else:
        shown = text.render_run(result, view)
    _write(_render(shown))
    from .render.export import export as save_export

    save_export(shown, export, "vjp explain" if explain else "vjp run")


def _keep_freed_memory() -> None:
    """Let glibc's malloc reuse freed large buffers instead of returning them to the kernel.

    glibc serves every allocation above 32 MB with a fresh mmap and unmaps it on free, so each large
    torch temporary is new memory whose pages the kernel must fault in and zero: at 10^7 elements that
    costs about 4x the arithmetic. Raising the mmap and trim thresholds (to 1 GiB) keeps freed buffers in
    the heap for the next tensor. A process-wide setting, so only the command does it, never the library;
    elsewhere (no glibc) this is a no-op.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 1 << 30)
    mallopt(m_trim_threshold, 1 << 30)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more (nor the final flush) fails on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's capture): nothing to do
        pass


def _command(ctx: Any, expression: str | None, file: Path | None, explain: bool, **o: Any) -> None:
    debug = o["debug"]
    if o.get("snippet") is not None or (file is None and _is_snippet_path(expression)):
        from .snippet_cli import snippet_command

        if o.pop("save", None) is not None:
            raise _fail(UsageError("--save writes the arrays of a program's run; a snippet has none yet."), debug)
        try:
            code = snippet_command(ctx, expression, explain, o, _write, _render)
        except (Exception, KeyboardInterrupt) as e:
            raise _fail(e, debug) from None
        raise typer.Exit(code)
    o.pop("snippet", None)
    save = o.pop("save", None)
    o["grad"] = list(o["grad"]) if o.get("grad") else None  # repeatable: none given reads as None
    graph, dot = o.pop("graph", False), o.pop("dot", None)
    _keep_freed_memory()
    try:
        if o["digits"] is not None and not 1 <= o["digits"] <= 17:
            raise UsageError(f"--digits must be between 1 and 17, not {o['digits']}.")
        latex = o.pop("latex", False)
        if save is not None:
            from .save import check_path

            check_path(save)
        req = _build_request(ctx, expression, file, **o)
        req.explain = explain
        req.latex = latex
        req.graph = graph or dot is not None
        from .api import explore

        result = explore(req)
        if dot is not None:
            from .render.graph_view import write_dot

            write_dot(dot, [(1, f"{result.output_name}.backward(v): {result.program}", result.graph or [])])
            result.graph = result.graph if graph else None  # asked only for the file
        if save is not None:
            from .save import save as save_arrays

            save_arrays(result, save)
        _emit(result, o["json_"], o["full"], o["verbose"], o["digits"], explain, (o["svg"], o["html"]))
    except typer.Exit:
        raise
    except (Exception, KeyboardInterrupt) as e:
        from_file = isinstance(e, VjpError) and _name_the_file(e, ctx.meta.get("vjp_origins", {}))
        name = getattr(e, "unknown_name", None)
        if isinstance(e, VjpError) and name is not None and not from_file:
            import difflib

            near = difflib.get_close_matches("--" + name, ctx.meta.get("vjp_options", []), n=1, cutoff=0.75)
            if near and len(name) > 2:
                e.hint = f"--{name} is not an option either; did you mean {near[0]}?"
        path = ctx.meta.get("vjp_file")
        if isinstance(e, VjpError) and path and e.label == "expression":  # the program is the file's
            e.label = f"{path}: key 'program'"
        if isinstance(e, VjpError) and path and o["dtype"] is None and "Use --dtype float64" in (e.hint or ""):
            e.hint = (e.hint or "").replace(
                "Use --dtype float64", f'Use dtype = "float64" in {path} (or --dtype float64)'
            )
        if isinstance(e, VjpError) and path and o["grad"] is None and (e.hint or "").startswith("Add --grad"):
            # the file gives no grad and the output is not a single number
            e.hint = f'{e.hint} In {path}, that is the key grad (an array of that shape, or grad = "ones").'
        raise _fail(e, debug) from None
    code = int(result.exit_code)
    if code:
        if not o["json_"]:
            _write("error: a cross-check disagrees (exit 3); see 'checks' above.\n", err=True)
        raise typer.Exit(code)


@app.command(
    cls=VariableOptions,
    context_settings={"allow_interspersed_args": True},
    epilog="Example: vjp run '3*a+2*b*b+log(c)' --a 1,2,3 --b 3,4,5 --c 6,7,8 --grad 0.1,1,0.0001",
)
def run(
    ctx: typer.Context,
    expression: Expression = None,
    file: FileOpt = None,
    var: VarOpt = None,
    const: ConstOpt = None,
    grad: GradsOpt = None,
    upstream: UpstreamOpt = None,
    output: OutputOpt = None,
    dtype: DtypeOpt = None,
    seed: SeedOpt = None,
    backward_calls: CallsOpt = None,
    json_: JsonOpt = False,
    full: FullOpt = False,
    verbose: VerboseOpt = False,
    digits: DigitsOpt = None,
    symbolic: SymOpt = True,
    retain_graph: RetainOpt = True,
    max_jacobian: MaxJacOpt = None,
    limit: LimitOpt = None,
    device: DeviceOpt = "cpu",
    debug: DebugOpt = False,
    snippet: SnippetOpt = None,
    graph: GraphOpt = False,
    dot: DotOpt = None,
    svg: SvgOpt = None,
    html: HtmlOpt = None,
    save: SaveOpt = None,
) -> None:
    """Run y.backward(v) for real and show .grad, the Jacobian J, Jᵀv from J, and sympy's check side by side.

    Give each input as --NAME VALUE: 0.1, 1,2,3, [[1,2],[3,4]], ones(2,2), randn(3) ...
    """
    _command(ctx, expression, file, False, **_opts(locals()))


def _opts(local: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in local.items() if k not in ("ctx", "expression", "file")}


@app.command(name="explain", cls=VariableOptions, epilog="Example: vjp explain expressions/seed_3vector.toml")
def explain_cmd(
    ctx: typer.Context,
    expression: Annotated[
        str | None,
        typer.Argument(
            metavar="FILE|PROGRAM",
            help="An expression file (.toml) or a bundled example, e.g. seed_3vector; or a program as for 'run'.",
            show_default=False,
        ),
    ] = None,
    file: FileOpt = None,
    var: VarOpt = None,
    const: ConstOpt = None,
    grad: GradsOpt = None,
    upstream: UpstreamOpt = None,
    output: OutputOpt = None,
    dtype: DtypeOpt = None,
    seed: SeedOpt = None,
    backward_calls: CallsOpt = None,
    json_: JsonOpt = False,
    full: FullOpt = False,
    verbose: VerboseOpt = False,
    digits: DigitsOpt = None,
    symbolic: SymOpt = True,
    retain_graph: RetainOpt = True,
    max_jacobian: MaxJacOpt = None,
    limit: LimitOpt = None,
    device: DeviceOpt = "cpu",
    debug: DebugOpt = False,
    latex: Annotated[
        bool, typer.Option("--latex", help="Print formulas as LaTeX, e.g. vjp explain seed_3vector --latex.")
    ] = False,
    snippet: SnippetOpt = None,
    graph: GraphOpt = False,
    dot: DotOpt = None,
    svg: SvgOpt = None,
    html: HtmlOpt = None,
    save: SaveOpt = None,
) -> None:
    """Explain backward(v) for a program: shapes, the symbolic Jacobian, and each grad term by term.

    Accepts an expression file or, like 'run', an inline program with values.
    """
    o = _opts(locals())
    o["latex"] = latex
    if file is None and expression is not None and snippet is None and not _is_snippet_path(expression):
        given = bool(ctx.meta.get("vjp_variables") or var or const)
        if _looks_like_file(expression, given):
            file, expression = Path(expression), None
        elif not given and (problem := _not_a_program(expression)) is not None:
            raise _fail(problem, debug)
    _command(ctx, expression, file, True, **o)


def _is_snippet_path(text: str | None) -> bool:
    """`vjp run seed.py`, or the name of a bundled snippet (`vjp explain seed000_ex1`)."""
    if text is None or "\n" in text or ";" in text or len(text) > 4096:
        return False
    if text.endswith(".py"):
        return True
    from .language.files import resolve_example

    found = resolve_example(text)
    return found is not None and found.suffix == ".py"


def _looks_like_file(text: str, given: bool = False) -> bool:
    """`vjp explain x.toml`, `vjp explain seed_3vector` (a bundled name), or an existing file, rather than a
    program. An existing file without .toml counts only when no variable is given (`vjp explain x --x 1`
    stays a program even next to a file named x)."""
    if "\n" in text or ";" in text:
        return False
    if text.endswith(".toml"):
        return True
    from .language.files import resolve_example

    if resolve_example(text) is not None:
        return True
    return not given and _is_file(text)


def _is_file(text: str) -> bool:
    """An existing path that is not a program: a file, or a directory or device (read_toml says which)."""
    if not text.strip() or len(text) > 4096:  # "" is no path (Path("") is the current directory)
        return False
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # a name too long for the OS, a NUL byte: not a file
        return False


def _not_a_program(text: str) -> UsageError | None:
    """For `vjp explain WORD` with no variables given: WORD meant as a file or an example that does not exist.

    A bare name (`vjp explain seed_scalr`), a path (`vjp explain expressions/nope`) or a file name
    (`notes.txt`) cannot run as a program without values anyway; say that it is neither a file nor a
    bundled example, and which are.
    Anything else (`vjp explain '3*a'`) is left to run as a program, whose error names what is missing.
    """
    import keyword

    from .language.files import not_found_hint
    from .ops import is_function

    shown = text if len(text) <= 200 else text[:197] + "..."
    if is_function(text) or keyword.iskeyword(text) or text == "torch":
        return None  # runs as a program, whose error says what the word is ('sin' is a function)
    if text.isidentifier() and text.isascii():
        return UsageError(
            f"{shown!r} is neither an expression file nor the name of a bundled example.",
            hint=f"{not_found_hint(text)} To explain the program {shown!r} instead, give its value: "
            f"vjp explain {shown} --{shown} VALUE.",
        )
    if "\n" in text:
        return None
    file_name = re.fullmatch(r"[\w.-]+\.(txt|json|ya?ml|py|md|cfg|ini)", text, re.ASCII) is not None
    if not file_name and not any(sep in text for sep in ("/", "\\", os.sep)):
        return None
    # expressions/nope reads as a path; x/2 and a/b stay programs (whose error asks for the values)
    parts = re.split(r"[/\\]", text)
    path_like = re.fullmatch(r"[\w.~/\\-]+", text, re.ASCII) is not None and len(parts) > 1 and len(parts[0]) >= 3
    if file_name or path_like or text.startswith((".", "~", "/", "\\")) or _is_dir(os.path.dirname(text)):
        return UsageError(
            f"{shown}: no such file (nor the name of a bundled example).",
            hint=not_found_hint(Path(text).name),
        )
    return None


def _is_dir(text: str) -> bool:
    try:
        return bool(text) and len(text) <= 4096 and Path(text).is_dir()
    except (OSError, ValueError):
        return False


@app.command(
    name="check",
    cls=VariableOptions,
    context_settings={"allow_interspersed_args": True},
    epilog="Example: vjp check my_ops.py:Square --x 1,2,3 --grad 0.5,1,2",
)
def check_cmd(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            metavar="MODULE.py:NAME",
            help="Your file and the function or autograd.Function in it, e.g. my_ops.py:Square. "
            "This imports (runs) your file.",
        ),
    ],
    grad: GradOpt = None,
    dtype: DtypeOpt = None,
    json_: JsonOpt = False,
    full: FullOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Check your own backward against finite differences of its forward; name the wrong elements.

    The trusted door: it imports and runs MODULE.py, your own code (programs, files and snippets never do).
    Give each input as --NAME VALUE, named as the function's parameters.
    """
    try:
        from .check_cli import check_command

        code = check_command(ctx, target, grad, dtype, json_, full, debug, _write, _render)
    except (Exception, KeyboardInterrupt) as e:
        raise _fail(e, debug) from None
    raise typer.Exit(code)


@app.command()
def examples(
    json_: JsonOpt = False,
) -> None:
    """List the bundled example files with their titles.

    Example: vjp examples; then vjp explain <path shown>
    """
    try:
        from .language.files import bundled_examples

        items = bundled_examples()
        if json_:
            import json

            listing = [{"name": i.name, "path": str(i.path), "title": i.title} for i in items]
            _write(json.dumps(listing, indent=2) + "\n")
            return
        from rich.table import Table
        from rich.text import Text

        t = Table(show_edge=False, header_style="bold")
        t.add_column("name", no_wrap=True)
        t.add_column("title")
        for i in items:
            t.add_row(Text(i.name), Text(i.title))
        shown: list[Any] = [t]
        if items:
            shown.append(
                Text(f"\nfiles in {items[0].path.parent}; run one with: vjp explain NAME, vjp run --file NAME")
            )
        _write(_render(*shown))
    except VjpError as e:
        raise _fail(e, False) from None


@app.command(name="functions")
def functions_cmd(
    word: Annotated[
        str | None, typer.Argument(help="Only the functions whose name, spellings or description hold WORD.")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """List the functions of the program language: spellings, exact route, torch's convention at kinks.

    Example: vjp functions relu
    """
    try:
        from .ops.listing import rows

        items = rows(word)
        if json_:
            import json

            _write(json.dumps(items, indent=2) + "\n")
            return
        from rich.table import Table
        from rich.text import Text

        t = Table(show_edge=False, header_style="bold", show_lines=True)
        for col in ("function", "spellings", "exact route", "at kinks"):
            t.add_column(col, overflow="fold")
        for i in items:
            t.add_row(
                Text(f"{i['signature']}\n{i['doc']}"),
                Text(", ".join(i["spellings"])),
                Text(i["exact"]),
                Text(i["kink"]),
            )
        _write(_render(t, Text(f"\n{len(items)} of the language's functions; the reference is docs/functions.md")))
    except VjpError as e:
        raise _fail(e, False) from None


def main() -> None:
    """Console-script entry point: run the app, flush, and leave without interpreter teardown.

    Tearing down a process that imported torch and sympy (module cleanup, then torch's static
    destructors) takes about 0.5 s on this project's machines, longer than most runs; nothing of ours needs it.
    The output is flushed first, so a redirect or a pipe gets every byte; the exit code is the app's.
    """
    for name in ("stdout", "stderr"):  # started with a descriptor closed (`vjp ... >&-`): write nowhere, quietly
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # lives until os._exit below
    try:
        os.getcwd()
    except OSError:  # deleted under us: torch's MKL would stop the process with a "FATAL ERROR" while loading
        _write("error: The current directory no longer exists (deleted?); cd to one that does and run again.\n", True)
        os._exit(int(ExitCode.BAD_INPUT))
    try:
        app()
        code: object = 0
    except SystemExit as e:
        code = e.code
    if code is not None and not isinstance(code, int):  # sys.exit("message"): print it, exit 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # the reader went away (`| head`), or the stream is closed
            pass
    os._exit(code or 0)
