"""The `vjp` command: parse argv, call the library, pick a renderer, map errors to exit codes.

No maths here. Variables are given as `--NAME VALUE`: the run command's parser
takes every `--NAME` that is not one of its own options as a variable (use
`--var NAME=VALUE` for a name that clashes with an option, such as `grad`).
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import ExitCode, UsageError, VjpError
from .options import (
    AllowReadOpt,
    CallsOpt,
    CheckJsonOpt,
    CodeOpt,
    ColorOpt,
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
    ListJsonOpt,
    MaxJacOpt,
    OutputOpt,
    PagerOpt,
    RetainOpt,
    SaveOpt,
    SeedOpt,
    SnippetOpt,
    SvgOpt,
    SymOpt,
    TrustOpt,
    UpstreamOpt,
    VarOpt,
    VerboseOpt,
    check_settings,
)
from .output import emit, fail, on_terminal, paged, render, write
from .parse import VariableOptions
from .paths import is_snippet_path, is_snippet_text, looks_like_file, not_a_program
from .request import build_request, read_stdin
from .support import distinct_files, limits_from_options

# what the checks are today: finite differences for every door, sympy for programs (not "three ways")
TAGLINE = (
    "See what y.backward(v) computes: Jᵀv, one weighted sum per input element, checked against finite "
    "differences (and sympy, for programs)."
)

app = typer.Typer(
    name="vjp",
    help=TAGLINE,
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (shell completion of commands and options)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: typer's rich help imports rich.markdown and doubles start-up
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"vjp-explorer {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = None,
) -> None:
    """See what y.backward(v) computes: Jᵀv, one weighted sum per input element, checked against finite
    differences (and sympy, for programs)."""


def _argument(ctx: Any, expression: str | None, file: Path | None, o: dict[str, Any], explain: bool) -> Any:
    """What the one argument of `run` and `explain` names, read the same way by both: an expression file or
    a bundled example (-> file), a snippet, `-` (stdin: a snippet or a program, by its text) or a program."""
    if file is not None or expression is None or o.get("snippet") is not None:
        return expression, file
    if expression == "-":
        text = read_stdin(limits_from_options(o).snippet_chars)
        if is_snippet_text(text):
            o["snippet"] = text
            return None, None
        return text, None
    if is_snippet_path(expression):
        return expression, None
    given = bool(ctx.meta.get("vjp_variables") or o.get("var") or o.get("const"))
    if looks_like_file(expression, given):
        return None, Path(expression)
    if not given and (problem := not_a_program(expression, "explain" if explain else "run")) is not None:
        raise fail(problem, o["debug"])
    return expression, None


def check_files(o: dict[str, Any]) -> None:
    """The files asked for beside the output, checked before any work (outfiles.py)."""
    from ..outfiles import check_writable

    for key in ("svg", "html", "dot"):
        if o.get(key) is not None:
            check_writable(f"--{key}", Path(o[key]))
    if o.get("code") is not None:
        from ..backward_code.files import check_dir

        check_dir(Path(o["code"]))
    if o.get("save") is not None:
        from ..save import check_path

        check_path(Path(o["save"]))


def _command(ctx: Any, expression: str | None, file: Path | None, explain: bool, **o: Any) -> None:
    debug = o["debug"]
    try:
        check_settings(o)
        check_files(o)
        expression, file = _argument(ctx, expression, file, o, explain)
        distinct_files(o, [file, expression])
    except VjpError as e:
        raise fail(e, debug) from None
    from ..render.status import Status

    if o.get("snippet") is not None or (file is None and is_snippet_path(expression)):
        from .snippet import snippet_command

        if o.pop("save", None) is not None:
            raise fail(UsageError("--save writes the arrays of a program's run; a snippet has none yet."), debug)
        if o.get("json_") and (o.get("svg") or o.get("html")):
            problem = UsageError(
                "--svg and --html save the screen a snippet shows, and with --json it shows none.",
                hint="Run it twice: once with --json, once with --svg FILE (or --html FILE).",
            )
            raise fail(problem, debug)
        status = Status.for_command(o["json_"], "running the snippet (torch, then each statement)")

        def write_after_status(*args: Any, **kwargs: Any) -> None:
            status.stop()  # the line is cleared before the first output
            write(*args, **kwargs)

        try:
            code = snippet_command(ctx, expression, explain, o, write_after_status, render)
        except (Exception, KeyboardInterrupt) as e:
            status.stop()
            raise fail(e, debug) from None
        finally:
            status.stop()
        raise typer.Exit(code)
    o.pop("snippet", None)
    for key, flag in (("trust", "--trust"), ("allow_read", "--allow-read")):
        if o.pop(key, None):
            raise fail(
                UsageError(f"{flag} applies to a snippet (a .py file or --snippet); a program runs no code."), debug
            )
    save = o.pop("save", None)
    code_dir = o.pop("code", None)
    o["grad"] = list(o["grad"]) if o.get("grad") else None  # repeatable: none given reads as None
    graph, dot = o.pop("graph", False), o.pop("dot", None)
    status = Status.for_command(o["json_"], "parsing the program")
    try:
        if o["digits"] is not None and not 1 <= o["digits"] <= 17:
            raise UsageError(f"--digits must be between 1 and 17, not {o['digits']}.")
        latex = o.pop("latex", False)
        req = build_request(ctx, expression, file, **o)
        req.explain = explain
        req.latex = latex
        req.graph = graph or dot is not None
        req.code = code_dir is not None
        req.progress = status.say
        from ..api import explore

        result = explore(req)
        status.stop()
        if dot is not None:
            from ..render.graph_view import write_dot

            write_dot(dot, [(1, f"{result.output_name}.backward(v): {result.program}", result.graph or [])])
            result.graph = result.graph if graph else None  # asked only for the file
        if code_dir is not None:
            from ..backward_code.files import for_program

            for_program(result, code_dir)
        if save is not None:
            from ..save import save as save_arrays

            save_arrays(result, save)
        emit(result, o["json_"], o["full"], o["verbose"], o["digits"], explain, (o["svg"], o["html"]))
    except typer.Exit:
        raise
    except (Exception, KeyboardInterrupt) as e:
        status.stop()
        name = getattr(e, "unknown_name", None)
        typed = isinstance(e, VjpError) and e.origin is not None and e.origin.path is None
        if isinstance(e, VjpError) and name is not None and typed:  # a --NAME nobody meant as a variable?
            import difflib

            options = ctx.meta.get("vjp_options", [])
            near = difflib.get_close_matches("--" + name, options, n=1, cutoff=0.75)
            if "--" + name in options:  # given as --var seed=1: the option itself is meant
                e.hint = f"--{name} is an option of its own (see --help), not a variable of the program."
            elif near and len(name) > 2:
                e.hint = f"--{name} is not an option either; did you mean {near[0]}?"
        raise fail(e, debug) from None
    finally:
        status.stop()
    code = int(result.exit_code)
    if code:
        if not o["json_"]:
            write("error: a cross-check disagrees (exit 3); see 'checks' above.\n", err=True)
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
    code: CodeOpt = None,
    svg: SvgOpt = None,
    html: HtmlOpt = None,
    save: SaveOpt = None,
    trust: TrustOpt = False,
    allow_read: AllowReadOpt = None,
    color: ColorOpt = "auto",
) -> None:
    """Run y.backward(v) for real and show .grad, the Jacobian J, Jᵀv from J, and sympy's check side by side.

    Give each input as --NAME VALUE: 0.1, 1,2,3, [[1,2],[3,4]], ones(2,2), randn(3) ...
    """
    _command(ctx, expression, file, False, **_opts(locals()))


def _opts(local: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in local.items() if k not in ("ctx", "expression", "file", "color")}


def live_cmd(ctx: typer.Context, **o: Any) -> None:
    """Explore y.backward(v) full-screen: change v and watch Jᵀv, .grad, the ledger and the checks follow.

    Takes the arguments of 'run' (a program, --file, or a snippet FILE.py); keys: ? in the app.
    """
    expression, file = o.pop("expression"), o.pop("file")
    try:
        if o.pop("code", None) is not None:
            raise UsageError(
                "--code DIR writes the scripts of a printed run; vjp live shows each call's script node by node "
                "with the key n, and writes none.",
                hint="Use vjp run ... --code DIR for the files.",
            )
        check_settings(o)
        from .live import live_command

        command = live_command(ctx, expression, file, o)
    except (Exception, KeyboardInterrupt) as e:
        raise fail(e, o["debug"]) from None
    if command:
        write(command + "\n")


# the same arguments as `run`, from its own signature: an option added to run is an option of live
live_cmd.__signature__ = inspect.signature(run, eval_str=True)  # type: ignore[attr-defined]
app.command(
    name="live",
    cls=VariableOptions,
    context_settings={"allow_interspersed_args": True},
    epilog="Example: vjp live '3*a+2*b*b+log(c)' --a 1,2,3 --b 3,4,5 --c 6,7,8 --grad 0.1,1,0.0001",
)(live_cmd)


def explain_cmd(ctx: typer.Context, **o: Any) -> None:
    """Explain backward(v) for a program: shapes, the symbolic Jacobian, and each grad term by term.

    Takes what 'run' takes: a program with its values, an expression file, a snippet or an example's name.
    """
    expression, file = o.pop("expression"), o.pop("file")
    o.pop("color", None)  # read by its own callback, as for run
    _command(ctx, expression, file, True, **o)


# One option set for `run` and `explain`: run's own signature, and --latex, which only explain has. An option
# added to run is an option of explain (and of live), with the same help.
_LATEX = inspect.Parameter(
    "latex",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    default=False,
    annotation=Annotated[
        bool, typer.Option("--latex", help="Print formulas as LaTeX, e.g. vjp explain seed_3vector --latex.")
    ],
)
_RUN = list(inspect.signature(run, eval_str=True).parameters.values())
_AT = [p.name for p in _RUN].index("snippet")  # where explain's help has always listed --latex
explain_cmd.__signature__ = inspect.Signature([*_RUN[:_AT], _LATEX, *_RUN[_AT:]])  # type: ignore[attr-defined]
app.command(
    name="explain",
    cls=VariableOptions,
    epilog="Example: vjp explain seed_3vector (a bundled example: vjp examples lists them)",
)(explain_cmd)


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
    const: ConstOpt = None,
    json_: CheckJsonOpt = False,
    full: FullOpt = False,
    debug: DebugOpt = False,
    color: ColorOpt = "auto",
) -> None:
    """Check your own backward against finite differences of its forward; name the wrong elements.

    The trusted door: it imports and runs MODULE.py, your own code (programs, files and snippets never do).
    Give each input as --NAME VALUE, named as the function's parameters.
    """
    from ..render.status import Status

    status = Status.for_command(json_, "checking your function (importing it, torch, then the checks)")

    def write_after_status(*args: Any, **kwargs: Any) -> None:
        status.stop()  # the line is cleared before the first output
        write(*args, **kwargs)

    try:
        settings = {"dtype": dtype}
        check_settings(settings)
        dtype = settings["dtype"]
        from .check import check_command

        code = check_command(ctx, target, grad, dtype, json_, full, debug, write_after_status, render, const)
    except (Exception, KeyboardInterrupt) as e:
        status.stop()
        raise fail(e, debug) from None
    finally:
        status.stop()
    raise typer.Exit(code)


@app.command()
def examples(
    json_: ListJsonOpt = False,
    color: ColorOpt = "auto",
    debug: DebugOpt = False,
) -> None:
    """List the bundled examples by name, with their titles.

    Example: vjp examples; then vjp explain NAME (a name from the table, e.g. seed_3vector)
    """
    try:
        from ..language.files import bundled_examples

        items = bundled_examples()
        if json_:
            import json

            listing = [{"name": i.name, "path": str(i.path), "title": i.title} for i in items]
            write(json.dumps(listing, indent=2) + "\n")
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
            shown.append(Text(f"\nfiles in {items[0].path.parent}; run one with: vjp run NAME, or vjp explain NAME"))
        write(render(*shown))
    except Exception as e:
        raise fail(e, debug) from None


@app.command(name="tolerances")
def tolerances_cmd() -> None:
    """Print the one tolerance table (per dtype) and the finite-difference step rule every check uses.

    Example: vjp tolerances
    """
    from ..engine.tolerance import ROUNDOFF_UNITS, table

    lines = ["dtype     rtol     atol     eps"]
    lines += [f"{r.dtype:<9} {r.rtol:<8g} {r.atol:<8g} {r.eps:.3g}" for r in table()]
    lines += [
        "",
        "first weighing:  |got - ref| <= atol + rtol·max(|ref|, m), m the size of the terms the route summed",
        f"second weighing: also <= {ROUNDOFF_UNITS}·eps·M, M the size of the terms backward added (absolute backward)",
        "finite differences: central, in float64, h = eps64^(1/3)·max(|x_j|, 1) and h/2, Richardson-extrapolated;",
        "their own error estimate is added to the tolerance (docs/checks.md)",
    ]
    write("\n".join(lines) + "\n")


@app.command(name="functions")
def functions_cmd(
    word: Annotated[
        str | None, typer.Argument(help="Only the functions whose name, spellings or description hold WORD.")
    ] = None,
    json_: ListJsonOpt = False,
    color: ColorOpt = "auto",
    debug: DebugOpt = False,
    pager: PagerOpt = True,
) -> None:
    """List the functions of the program language: spellings, exact route, torch's convention at kinks.

    Example: vjp functions relu
    """
    try:
        from ..ops.listing import rows

        items = rows(word)
        if json_:
            import json

            write(json.dumps(items, indent=2) + "\n")
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
        paged([t, Text(f"\n{len(items)} of the language's functions; the reference: vjp docs functions")], pager)
    except Exception as e:
        raise fail(e, debug) from None


def _complete_topic(incomplete: str) -> list[str]:
    from ..doc_pages import topics

    return [t for t in topics() if t.startswith(incomplete)]


@app.command(name="docs")
def docs_cmd(
    topic: Annotated[
        str | None,
        typer.Argument(
            help="A page: language, snippets, checks, json, api, probes, limits, functions ...",
            autocompletion=_complete_topic,
        ),
    ] = None,
    pager: PagerOpt = True,
    color: ColorOpt = "auto",
) -> None:
    """Print a page of the documentation that ships with vjp (Markdown); without TOPIC, list the pages.

    Example: vjp docs json
    """
    from ..doc_pages import page, pages

    try:
        if topic is None:
            listing = "".join(f"{name:<14}{title}\n" for name, title in pages())
            write(listing + "\nread one with: vjp docs TOPIC\n")
            return
        text = page(topic)
        if not on_terminal():  # a pipe or a file: the Markdown as it is
            write(text)
            return
        from rich.markdown import Markdown

        paged([Markdown(text, hyperlinks=False)], pager)  # rendered, on a terminal
    except VjpError as e:
        raise fail(e, False) from None


def _output_failed(e: OSError) -> int:
    """Writing typer's own output failed: a reader that went away ends quietly, anything else in one line."""
    from .output import silence_stdout

    silence_stdout()
    if isinstance(e, BrokenPipeError):
        return 0
    write(f"error: Cannot write the output to stdout: {e.strerror or e}.\n", err=True)
    return int(ExitCode.INTERNAL)


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
        write("error: The current directory no longer exists (deleted?); cd to one that does and run again.\n", True)
        os._exit(int(ExitCode.BAD_INPUT))
    try:
        app()
        code: object = 0
    except SystemExit as e:
        code = e.code
    except OSError as e:  # what typer itself prints (--help, --version, a usage error) met a full disk or a closed pipe
        code = _output_failed(e)
    except Exception as e:  # a bug anywhere, in any command (a module missing from an install, say): one paragraph
        code = fail(e, "--debug" in sys.argv[1:]).exit_code  # --debug (or VJP_DEBUG=1): the traceback
    if code is not None and not isinstance(code, int):  # sys.exit("message"): print it, exit 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # the reader went away (`| head`), or the stream is closed
            pass
    os._exit(code or 0)
