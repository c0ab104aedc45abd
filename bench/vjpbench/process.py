"""(a), (b), (e): whole-process wall time and peak RSS of `vjp` against bare torch / bare imports.

Every run goes through child.py, a fresh helper process, so ru_maxrss is per run. The commands
of one case run interleaved (bare, vjp, vjp --json, bare, ...) so that drift hits them alike.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .common import Section, Series, Target, fmt_ratio, fmt_series_mb, fmt_series_s, md_table, median, ratio
from .plans import Elementwise, Plan

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
VJP = str(Path(sys.executable).with_name("vjp"))
HELPER = str(HERE / "child.py")
BARE = str(HERE / "bare_torch.py")
SEED_PROGRAM = "3*a+2*b*b+log(c)"
BIG_N = 10_000_000  # the n of the "10^7-element elementwise" target
BIG_TIME_LIMIT = 1.30  # issue 16: `vjp run --json` at 10^7 within 1.3x of the bare script (the summary JSON)
BIG_RSS_LIMIT = 1.25  # issue 16: peak memory at 10^7 within 1.25x; smaller cases keep 1.15x
SHORT_NAMES = {PYTHON: "python", VJP: "vjp", BARE: "bench/vjpbench/bare_torch.py"}

Log = Callable[[str], None]


@dataclass(frozen=True)
class Command:
    label: str
    argv: tuple[str, ...]
    repeats: int
    timeout_s: float
    diagnostic: bool = False  # shown for insight, checked against no target

    @property
    def display(self) -> str:
        return shlex.join(SHORT_NAMES.get(a, a) for a in self.argv)


def _ok(run: dict) -> bool:
    return run["returncode"] == 0 and not run["killed"]


def _why(run: dict) -> str:
    if run["killed"]:
        return f"{run['killed']} (peak RSS {run['max_rss_kb'] / 1024:,.0f} MB)"
    last = (run["stderr_tail"].strip().splitlines() or ["(no stderr)"])[-1]
    return f"exit code {run['returncode']}: {last}"


@dataclass
class Measured:
    """The runs of one command."""

    command: Command
    runs: list[dict] = field(default_factory=list)

    @property
    def failure(self) -> str | None:
        """Why the first failed run failed (None if every run succeeded)."""
        return next((_why(r) for r in self.runs if not _ok(r)), None)

    def _series(self, key: str, scale: float = 1.0) -> Series | None:
        ok = [r[key] * scale for r in self.runs if _ok(r)]
        return Series(tuple(ok)) if ok else None

    @property
    def wall(self) -> Series | None:
        return self._series("wall_s")

    @property
    def cpu(self) -> Series | None:
        return self._series("cpu_s")

    @property
    def rss_mb(self) -> Series | None:
        return self._series("max_rss_kb", 1 / 1024)

    def versus(self, base: Measured, what: str) -> float | None:
        """Ratio of medians of one quantity ('wall', 'cpu' or 'rss_mb') against the baseline's."""
        a, b = getattr(self, what), getattr(base, what)
        return ratio(median(a), median(b))

    def cell(self, text: str) -> str:
        """A measured value, with the failure appended when some run failed."""
        if not self.failure:
            return text
        if self.wall is None:
            return self.failure
        failed = sum(not _ok(r) for r in self.runs)
        return f"{text}; {failed} of {len(self.runs)} runs failed: {self.failure}"


@dataclass(frozen=True)
class Case:
    name: str
    baseline: Command
    variants: tuple[Command, ...]
    time_limit: float | None = None  # the wall-time target, vjp / baseline
    n: int | None = None  # elements per input, for the elementwise cases


def rss_cap_kb() -> int:
    """A safety cap for one child: 60% of RAM, at most 12 GiB."""
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return min(12 * 2**20, int(total * 0.6))


def run_once(cmd: Command) -> dict:
    # VJP_DEBUG only changes vjp's error path: an internal error then ends in a traceback we can quote
    out = subprocess.run(
        [PYTHON, HELPER, str(cmd.timeout_s), str(rss_cap_kb()), *cmd.argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "VJP_DEBUG": "1"},
    )
    return json.loads(out.stdout)


def measure(case: Case, log: Log) -> list[Measured]:
    """Run the case's commands interleaved; a command that fails is not repeated."""
    results = [Measured(c) for c in (case.baseline, *case.variants)]
    for rnd in range(max(c.repeats for c in (case.baseline, *case.variants))):
        for m in results:
            if len(m.runs) > rnd or len(m.runs) >= m.command.repeats or m.failure:
                continue
            m.runs.append(run_once(m.command))
            r = m.runs[-1]
            status = (
                f"{r['wall_s']:.2f} s (CPU {r['cpu_s']:.2f} s), {r['max_rss_kb'] / 1024:,.0f} MB" if _ok(r) else _why(r)
            )
            log(f"  {case.name} · {m.command.label} ({len(m.runs)}/{m.command.repeats}): {status}")
    return results


def precompile() -> None:
    """Write vjp_explorer's .pyc files, as any installation has after its first run.

    site-packages (torch, sympy, ...) got theirs from pip at install time; an editable install's modules
    have none, and with PYTHONDONTWRITEBYTECODE set (as on this project's machines) they would be compiled
    again on every start, a cost the bare torch script does not have. compileall writes them explicitly.
    """
    code = (
        "import compileall, pathlib, vjp_explorer;"
        "compileall.compile_dir(pathlib.Path(vjp_explorer.__file__).parent, quiet=1)"
    )
    subprocess.run([PYTHON, "-c", code], check=True)


def warm_caches() -> None:
    """One untimed import of everything, so the first measured run does not pay for a cold disk cache."""
    precompile()
    run_once(Command("warm-up", (PYTHON, "-c", "import torch, sympy, typer, rich"), 1, 120))


# ---------------------------------------------------------------------------- the cases
def _vjp_variants(
    run_args: list[str],
    bare: tuple[str, ...],
    repeats: int,
    timeout_s: float,
    diagnostic: bool = False,
    json_repeats: int | None = None,
) -> tuple[Command, ...]:
    base = (VJP, "run", SEED_PROGRAM, *run_args)
    variants = [
        # vjp ends with os._exit (no interpreter teardown, ~0.5 s with torch and sympy loaded); the bare
        # script doing the same shows how much of vjp's ratio that accounts for
        Command("bare torch, same fast exit", (*bare, "--fast-exit"), repeats, timeout_s, True),
        Command("vjp run", base, repeats, timeout_s),
        Command("vjp run --json", (*base, "--json"), repeats if json_repeats is None else json_repeats, timeout_s),
    ]
    if diagnostic:
        variants.append(
            Command("vjp run --json --no-symbolic", (*base, "--json", "--no-symbolic"), repeats, timeout_s, True)
        )
    return tuple(variants)


def seed_case(plan: Plan) -> Case:
    args = ["--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]
    return Case(
        "seed (3-vectors)",
        Command("bare torch", (PYTHON, BARE, "seed"), plan.seed_repeats, 60),
        _vjp_variants(args, (PYTHON, BARE, "seed"), plan.seed_repeats, 60, diagnostic=plan.seed_diagnostic),
        time_limit=1.10,
    )


def elementwise_case(e: Elementwise) -> Case:
    lin = f"linspace(1,2,{e.n})"
    args = ["--a", lin, "--b", lin, "--c", lin, "--grad", "ones"]
    return Case(
        f"elementwise n={e.n:,}",
        Command("bare torch", (PYTHON, BARE, "linspace", str(e.n)), e.bare_repeats, e.timeout_s),
        _vjp_variants(
            args, (PYTHON, BARE, "linspace", str(e.n)), e.vjp_repeats, e.timeout_s, json_repeats=e.json_repeats
        ),
        time_limit=BIG_TIME_LIMIT if e.n == BIG_N else None,
        n=e.n,
    )


def help_case(plan: Plan) -> Case:
    return Case(
        "help",
        Command('python -c "import typer, rich"', (PYTHON, "-c", "import typer, rich"), plan.help_repeats, 30),
        (Command("vjp --help", (VJP, "--help"), plan.help_repeats, 30),),
    )


# ---------------------------------------------------------------------------- report
def _table(measured: dict[str, list[Measured]]) -> str:
    rows = []
    for name, ms in measured.items():
        base = ms[0]
        for m in ms:
            rows.append(
                [
                    name,
                    m.command.label,
                    str(len(m.runs)),
                    m.cell(fmt_series_s(m.wall)),
                    fmt_ratio(m.versus(base, "wall")),
                    fmt_series_s(m.cpu),
                    fmt_ratio(m.versus(base, "cpu")),
                    fmt_series_mb(m.rss_mb),
                    fmt_ratio(m.versus(base, "rss_mb")),
                ]
            )
    headers = [
        "case",
        "command",
        "runs",
        "wall: median (min–max)",
        "wall × base",
        "CPU user+sys",
        "CPU × base",
        "peak RSS: median (min–max)",
        "RSS × base",
    ]
    commands = "\n".join(f"- `{m.command.display}`" for ms in measured.values() for m in ms)
    return md_table(headers, rows) + "\n\nCommands (stdout to /dev/null):\n\n" + commands


def _ratio_target(name: str, limit: float, m: Measured | None, base: Measured | None, what: str) -> Target:
    """A 'vjp / baseline <= limit' target on wall time (what='wall', CPU time shown too) or peak RSS ('rss_mb')."""
    if m is None or base is None:
        return Target(name, f"≤ {limit:.2f}×", "not run in this mode", None)
    r = m.versus(base, what)
    text = fmt_ratio(r) + (f" (CPU time {fmt_ratio(m.versus(base, 'cpu'))})" if what == "wall" and r else "")
    passed = None if r is None else r <= limit
    return Target(name, f"≤ {limit:.2f}×", m.cell(text), False if m.failure else passed)


def _targets(cases: list[Case], measured: dict[str, list[Measured]]) -> list[Target]:
    timed, memory = [], []
    for case in cases:
        base, *variants = measured[case.name]
        fast = next((m for m in variants if m.command.label == "bare torch, same fast exit"), None)
        for m in (m for m in variants if not m.command.diagnostic):
            label = f"{case.name}: `{m.command.label}`"
            if case.time_limit is not None:
                timed.append(_ratio_target(f"{label} wall time vs bare torch", case.time_limit, m, base, "wall"))
                timed.append(
                    _ratio_target(
                        f"{label} wall time vs bare torch with the same fast exit (vjp's own overhead)",
                        case.time_limit,
                        m,
                        fast,
                        "wall",
                    )
                )
            rss_limit = BIG_RSS_LIMIT if case.n == BIG_N else 1.15
            memory.append(_ratio_target(f"{label} peak RSS vs bare torch", rss_limit, m, base, "rss_mb"))
    if not any(c.n == BIG_N for c in cases):
        timed += [
            _ratio_target(f"elementwise n={BIG_N:,}: `{v}` wall time vs bare torch", BIG_TIME_LIMIT, None, None, "wall")
            for v in ("vjp run", "vjp run --json")
        ]
    return timed + memory


def run_whole_process(plan: Plan, log: Log) -> Section:
    """(a) + (e): vjp run against the bare torch script."""
    warm_caches()
    cases = [seed_case(plan), *(elementwise_case(e) for e in plan.elementwise)]
    measured = {c.name: measure(c, log) for c in cases}
    body = (
        "Program `3*a+2*b*b+log(c)`; the seed uses a=1,2,3 b=3,4,5 c=6,7,8 v=0.1,1,0.0001; the elementwise cases "
        "use a=b=c=`linspace(1,2,n)` and v=ones. Baseline: `bare_torch.py`, the same forward and "
        "`y.backward(v)` in plain torch. Peak RSS is the child's `ru_maxrss`.\n\n" + _table(measured)
    )
    return Section("(a) + (e) Whole process: `vjp run` vs bare torch", body, _targets(cases, measured))


def run_help(plan: Plan, log: Log) -> Section:
    """(b) + (e): `vjp --help` against importing its two UI libraries."""
    precompile()
    case = help_case(plan)
    ms = measure(case, log)
    target = _ratio_target("`vjp --help` wall time vs `import typer, rich`", 2.0, ms[1], ms[0], "wall")
    return Section("(b) + (e) Start-up: `vjp --help` vs `import typer, rich`", _table({case.name: ms}), [target])
