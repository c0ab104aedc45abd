"""The options of `vjp run` and `vjp explain` (and `vjp check`), each with its help text and an example.

Shared by the commands in cli.py, so that a help text is written once.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Annotated, Any

import typer

FileOpt = Annotated[
    Path | None,
    typer.Option(
        "--file",
        "-f",
        metavar="FILE",
        help="Run an expression file (TOML); command-line options override it, "
        "e.g. --file expressions/seed_3vector.toml.",
    ),
]
VarOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--var",
        metavar="NAME=VALUE",
        help="NAME=VALUE for a leaf (requires grad), for a name that clashes with an option; repeatable, "
        "e.g. --var grad=1,2.",
    ),
]
ConstOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--const",
        metavar="NAME=VALUE",
        help="NAME=VALUE for a constant (no grad, no Jacobian); repeatable, e.g. --const 'W=randn(3,3)'.",
    ),
]
GradOpt = Annotated[
    str | None,
    typer.Option(
        "--grad",
        "--gradient",
        metavar="V",
        help="v, the gradient of y.backward(gradient) (not a leaf's .grad): same forms as values, or 'ones', "
        "e.g. --grad 0.5,1,2. Default 1 for a scalar output.",
    ),
]
GradsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--grad",
        "--gradient",
        metavar="V",
        help="v, the gradient of y.backward(gradient) (not a leaf's .grad), e.g. --grad 0.1,1,0.0001: "
        "same forms as values, or 'ones'; or a probe: e3 / e[1,2] "
        "(one-hot), basis "
        "(every row of J), random (seeded by --seed). Repeat it to check linearity (--grad 1,0 --grad 0,1). "
        "Default 1 for a scalar output.",
    ),
]
UpstreamOpt = Annotated[
    str | None,
    typer.Option(
        "--upstream",
        metavar="EXPR",
        help="v = dL/dy for a downstream loss written in y, e.g. --upstream 'sum(y**2)' (vjp docs probes).",
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output", metavar="NAME", help="The variable to differentiate (default: the last one), e.g. --output h."
    ),
]
# --dtype as PyTorch users spell it: torch.float64, double, ... (checked before torch is imported)
DTYPE_SPELLINGS = {
    **dict.fromkeys(("float32", "float", "single", "torch.float32", "torch.float"), "float32"),
    **dict.fromkeys(("float64", "double", "torch.float64", "torch.double"), "float64"),
}
DEVICES = ("cpu", "cuda")


def _complete_dtype(incomplete: str) -> list[str]:
    return [d for d in ("float32", "float64") if d.startswith(incomplete)]


def _complete_device(incomplete: str) -> list[str]:
    return [d for d in DEVICES if d.startswith(incomplete)]


def complete_example(incomplete: str) -> list[str]:
    """Shell completion of PROGRAM|FILE: the bundled examples' names, and the files and folders here."""
    from ..language.files import bundled_examples

    names = [i.name for i in bundled_examples() if i.name.startswith(incomplete)]
    try:
        paths = sorted(str(p) + ("/" if p.is_dir() else "") for p in Path().glob(glob.escape(incomplete) + "*"))
    except (OSError, ValueError):
        paths = []
    return names + paths


def check_settings(o: dict[str, Any]) -> None:
    """--dtype and --device, checked before torch is imported; --dtype double (or torch.float64) is float64."""
    from ..errors import UsageError
    from ..language.unicode import visible

    dtype = o.get("dtype")
    if dtype is not None:
        if dtype.strip() not in DTYPE_SPELLINGS:
            raise UsageError(
                f"--dtype: must be float32 or float64 (or double, torch.float64, ...), not {visible(dtype)!r}."
            )
        o["dtype"] = DTYPE_SPELLINGS[dtype.strip()]
    device = o.get("device")
    if device is not None and device not in DEVICES:
        raise UsageError(f"--device: must be cpu or cuda, not {visible(device)!r}.")


Expression = Annotated[
    str | None,
    typer.Argument(
        metavar="PROGRAM|FILE|NAME",
        help="A program, an expression file (.toml), a snippet (.py), a bundled example's name (vjp examples), "
        "or '-' (a program or a snippet from stdin), e.g. '3*a + 2*b*b + log(c)' or seed_3vector.",
        show_default=False,
        autocompletion=complete_example,
    ),
]
DtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        metavar="float32|float64",
        help="float32 (torch's default) or float64 (also double, torch.float64), e.g. --dtype float64.",
        autocompletion=_complete_dtype,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option("--seed", metavar="N", help="Seed for rand(...)/randn(...) values and --grad random, e.g. --seed 0."),
]
CallsOpt = Annotated[
    int | None,
    typer.Option(
        "--backward-calls",
        metavar="N",
        help="Call backward N times without zeroing .grad (it accumulates), e.g. --backward-calls 2.",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print only JSON on stdout (vjp docs json), e.g. --json | jq '.events[].grads' (each call's "
        "grads, for a program and a snippet alike).",
    ),
]
CheckJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print only JSON on stdout (vjp docs json), e.g. --json | jq .summary.")
]
PagerOpt = Annotated[
    bool,
    typer.Option(
        "--pager/--no-pager",
        help="On a terminal, show long output through a pager ($PAGER, else less); --no-pager prints it "
        "straight, as PAGER=cat does, e.g. vjp docs json --no-pager.",
    ),
]
ListJsonOpt = Annotated[bool, typer.Option("--json", help="Print the list as JSON, e.g. --json | jq '.[].name'.")]
FullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Show every element and every Jacobian entry (up to 10,000 a table; with --json every number of "
        "every array), e.g. --x 'arange(30)' --full.",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also show how each Jacobian was computed, and the timings, e.g. -v.")
]
DigitsOpt = Annotated[
    int | None,
    typer.Option(
        "--digits", metavar="N", help="Significant digits shown (default 6; 10 for float64), e.g. --digits 3."
    ),
]
SymOpt = Annotated[
    bool,
    typer.Option(
        "--symbolic/--no-symbolic",
        help="Run the sympy cross-check (default); e.g. --no-symbolic skips it for a big program.",
    ),
]
RetainOpt = Annotated[
    bool,
    typer.Option(
        "--retain-graph/--no-retain-graph",
        help="With --backward-calls N, pass retain_graph=True to calls 1 to N-1 (without it torch raises on call 2), "
        "e.g. --backward-calls 2 --no-retain-graph shows torch's error.",
    ),
]
MaxJacOpt = Annotated[
    int | None,
    typer.Option(
        "--max-jacobian", metavar="N", help="Most entries of one materialised Jacobian, e.g. --max-jacobian 1000000."
    ),
]
LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--limit",
        metavar="NAME=VALUE",
        help="NAME=VALUE to change a limit (vjp docs limits), e.g. --limit steps=100000.",
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        metavar="cpu|cuda",
        help="cpu or cuda, e.g. --device cuda where torch sees a GPU.",
        autocompletion=_complete_device,
    ),
]
DebugOpt = Annotated[
    bool, typer.Option("--debug", help="Show a traceback for internal errors (exit 1), e.g. for a bug report: --debug.")
]
GraphOpt = Annotated[
    bool,
    typer.Option(
        "--graph",
        help="Show the backward graph torch ran, each node with the cotangent it received, "
        "e.g. vjp run 'h = sin(x); h*h + h' --x 1,2 --grad ones --graph.",
    ),
]
DotOpt = Annotated[
    Path | None,
    typer.Option(
        "--dot",
        metavar="FILE",
        help="Write the backward graph as Graphviz DOT to FILE, e.g. --dot graph.dot (then dot -Tsvg graph.dot).",
    ),
]
CodeOpt = Annotated[
    Path | None,
    typer.Option(
        "--code",
        metavar="DIR",
        help="Write each backward call as a runnable script DIR/callN.py (one statement per graph node, no "
        "autograd; tensors in callN.pt), run it and compare with .grad, e.g. --code out/ (vjp docs code).",
    ),
]
SvgOpt = Annotated[
    Path | None,
    typer.Option("--svg", metavar="FILE", help="Also save what the terminal shows as SVG to FILE, e.g. --svg run.svg."),
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option(
        "--html", metavar="FILE", help="Also save what the terminal shows as HTML to FILE, e.g. --html run.html."
    ),
]
SaveOpt = Annotated[
    Path | None,
    typer.Option(
        "--save",
        metavar="FILE.npz|FILE.pt",
        help="Also write every array (inputs, output, v, grads, Jᵀv, J, sympy's) in binary (vjp docs json), "
        "e.g. --save run.npz (numpy.load) or --save run.pt (torch.load).",
    ),
]
SnippetOpt = Annotated[
    str | None,
    typer.Option(
        "--snippet",
        metavar="TEXT|-",
        help="Run pasted PyTorch code as a snippet ('-' reads stdin), e.g. pbpaste | vjp run --snippet -; "
        "a PROGRAM ending in .py is one too.",
    ),
]


def _set_colour(value: str) -> str:
    from .output import COLOUR

    if value not in ("auto", "always", "never"):
        raise typer.BadParameter(f"must be auto, always or never, not {value!r}.")
    COLOUR[0] = value
    from ..render import status  # the status line on stderr is drawn by its own console: tell it too

    status.PLAIN[0] = value == "never"
    return value


def _complete_colour(incomplete: str) -> list[str]:
    return [c for c in ("auto", "always", "never") if c.startswith(incomplete)]


ColorOpt = Annotated[
    str,
    typer.Option(
        "--color",
        metavar="auto|always|never",
        help="Styles and colours: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces them), "
        "always or never, e.g. --color never.",
        callback=_set_colour,
        autocompletion=_complete_colour,
        is_eager=True,
    ),
]
TrustOpt = Annotated[
    bool,
    typer.Option(
        "--trust",
        help="Run a snippet unconfined, with your own rights (files, network, GPU), as python FILE.py would; "
        "only for code you trust, e.g. vjp run train.py --trust.",
    ),
]
AllowReadOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--allow-read",
        metavar="DIR",
        help="Let a confined snippet read this folder (repeatable), e.g. --allow-read data/.",
    ),
]
