"""(m): the forward's memory estimate (the `memory_bytes` limit) against the peak RSS a real run reaches.

The estimate is what the interpreter adds up before each operation (inputs, and every result three
times its size: the value, what autograd saves, its grad). It should bound the run's data from above
without being far off; the peak RSS is the child's, less that of a scalar run (imports, the
interpreter, torch's own buffers), so both sides count the data only.
"""

from __future__ import annotations

from collections.abc import Callable

from .common import Section, md_table
from .process import VJP, Command, run_once

Log = Callable[[str], None]

# (program, the --NAME VALUE options): a loop that saves every step for backward, a loop of cheap
# steps, the elementwise seed formula at 10^7, and a dense product whose data is mostly its input
CASES = [
    ("y = x\nfor i in range(200):\n    y = sin(y)", ("--x", "randn(1000000)")),
    ("y = x\nfor i in range(50):\n    y = y*1.01 + 1", ("--x", "randn(1000000)")),
    ("3*x+2*x*x+log(x*x+1)", ("--x", "rand(10000000)")),
    ("tanh(W@x)", ("--W", "randn(3000,3000)", "--x", "randn(3000)")),
]


def estimate(program: str, options: tuple[str, ...]) -> int:
    """The interpreter's memory estimate at the end of the forward, in bytes."""
    import torch

    from vjp_explorer.engine.interpreter import Interpreter, Val
    from vjp_explorer.engine.tensors import make_tensor
    from vjp_explorer.errors import Origin
    from vjp_explorer.language.parser import parse_program
    from vjp_explorer.language.values import parse_value
    from vjp_explorer.limits import Limits

    gen = torch.Generator().manual_seed(1)
    env = {}
    for name, text in zip(options[::2], options[1::2], strict=True):
        origin = Origin(name, name)
        t = make_tensor(parse_value(text, origin), origin, torch.float32, gen).requires_grad_(True)
        env[name.removeprefix("--")] = Val(t)
    it = Interpreter(parse_program(program), Limits(memory_bytes=2**62))
    it.run(env)
    return it.memory


def run_memory(log: Log) -> Section:
    argv = ("run", "--grad", "ones", "--seed", "1", "--no-symbolic")
    base_kb = run_once(Command("scalar", (VJP, "run", "x*2", "--x", "1", *argv[3:]), 1, 120))["max_rss_kb"]
    rows = []
    for program, options in CASES:
        log(f"  {program!r}")
        got = run_once(Command(program, (VJP, "run", program, *options, *argv[1:]), 1, 300))
        data = (got["max_rss_kb"] - base_kb) * 1024
        est = estimate(program, options)
        rows.append(
            [
                f"`{program}`".replace("\n", "; "),
                " ".join(options),
                f"{est / 1e6:,.0f} MB",
                f"{data / 1e6:,.0f} MB",
                f"{est / data:.2f}×" if data > 0 else "—",
            ]
        )
    body = (
        f"Peak RSS above a scalar run's ({base_kb / 1024:,.0f} MB), each case once, with `--no-symbolic`. "
        "The estimate is checked before each operation against `memory_bytes`; a ratio above 1 is a "
        "bound with room to spare.\n\n"
        + md_table(["program", "inputs", "estimate", "measured (peak RSS − scalar run)", "estimate / measured"], rows)
    )
    return Section("(m) Memory estimate vs measured peak", body, [])
