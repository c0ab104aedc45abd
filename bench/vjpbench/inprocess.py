"""(c) the explicit Jacobian, our engine vs torch.func, and (d) the sympy cross-check as n grows.

In-process. Our engine is timed by the library itself: Result.timings["jacobian"] / ["symbolic"]
(seconds). Jacobians are timed warm (one untimed call first) and interleaved with torch.func;
the symbolic check is timed with a cold sympy cache, as every `vjp run` has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import sympy
import torch
import torch.func

from vjp_explorer import Result, explore

from .common import Section, Series, Target, fmt_ratio, fmt_s, fmt_series_s, md_table, median, ratio
from .plans import Plan
from .process import SEED_PROGRAM, Log

SEED = 0  # --seed for randn(...): W is then torch.randn((n, n), generator=Generator().manual_seed(0)), as below
TARGET_N = 3000  # the n of the Jacobian targets
SYMBOLIC_TARGET_N = 1_000_000
MIN_TOTAL_S = 1.0  # quick calls are repeated (up to MAX_REPEATS) until this much time has passed
MAX_REPEATS = 50


def release(results: list[Result]) -> None:
    """Drop the previous run's Result before the next run, as torch.func's results are dropped between its
    calls: every contender then starts from the same allocator state, instead of ours alone holding the
    previous run's arrays."""
    results.clear()


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    """A sampler: the wall time of one fn() call."""

    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def interleaved(samplers: dict[str, Callable[[], float]], repeats: int) -> dict[str, Series]:
    """Each sampler once untimed (warm-up), then round-robin: at least `repeats` rounds, more while cheap.

    Round-robin, so that load from elsewhere on the machine hits every contender alike.
    """
    for fn in samplers.values():
        fn()
    out: dict[str, list[float]] = {k: [] for k in samplers}
    start = time.perf_counter()
    rounds = 0
    while rounds < repeats or (time.perf_counter() - start < MIN_TOTAL_S and rounds < MAX_REPEATS):
        for k, fn in samplers.items():
            out[k].append(fn())
        rounds += 1
    return {k: Series(tuple(v)) for k, v in out.items()}


class EngineCrash(Exception):
    """explore() itself raised: a bug (or a limit) in vjp, not in the benchmark."""


def _error(e: Exception) -> str:
    return f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


# ---------------------------------------------------------------------------- (c) Jacobian
@dataclass(frozen=True)
class JacProgram:
    kind: str
    program: str
    uses_w: bool  # W is a constant randn(n, n)
    torch_fn: Callable[..., torch.Tensor]  # (x, W) -> y: the same program in plain torch

    def request(self, n: int) -> tuple[dict[str, str], dict[str, str]]:
        return {"x": f"linspace(-1,1,{n})"}, ({"W": f"randn({n},{n})"} if self.uses_w else {})


JAC_PROGRAMS = (
    JacProgram("elementwise", "tanh(x)*x", False, lambda x, W: torch.tanh(x) * x),
    JacProgram("dense", "tanh(W@x)", True, lambda x, W: torch.tanh(W @ x)),
    JacProgram("mixed (reduction)", "x*x.sum()", False, lambda x, W: x * x.sum()),
    JacProgram("mixed (softmax)", "softmax(W@x, dim=0)", True, lambda x, W: torch.softmax(W @ x, dim=0)),
)


@dataclass
class JacRow:
    prog: JacProgram
    n: int
    method: str = "—"
    ours: Series | None = None
    explore_total: Series | None = None
    jacrev: Series | None = None
    jacfwd: Series | None = None
    error: str | None = None

    def versus(self, other: Series | None) -> float | None:
        return ratio(median(self.ours), median(other))

    @property
    def best(self) -> Series | None:
        found = [s for s in (self.jacrev, self.jacfwd) if s is not None]
        return min(found, key=lambda s: s.median) if found else None


def torch_func_sampler(prog: JacProgram, n: int, transform: Callable) -> Callable[[], float]:
    x = torch.linspace(-1, 1, n)
    W = torch.randn((n, n), generator=torch.Generator().manual_seed(SEED)) if prog.uses_w else None
    jac = transform(lambda x: prog.torch_fn(x, W))
    return timed(lambda: jac(x))


def jacobian_row(prog: JacProgram, n: int, repeats: int) -> JacRow:
    row = JacRow(prog, n)
    values, consts = prog.request(n)
    last: list[Result] = []  # only the latest Result is kept: see release()
    totals: list[float] = []

    def ours() -> float:
        release(last)
        try:
            last.append(explore(prog.program, values, consts=consts, grad="ones", symbolic=False, seed=SEED))
        except Exception as e:
            raise EngineCrash(_error(e)) from e
        totals.append(last[0].timings["total"])
        return last[0].timings["jacobian"]

    samplers = {
        "ours": ours,
        "jacrev": torch_func_sampler(prog, n, torch.func.jacrev),
        "jacfwd": torch_func_sampler(prog, n, torch.func.jacfwd),
    }
    try:
        found = interleaved(samplers, repeats)
    except EngineCrash as e:  # a crash in vjp itself: report it, and time torch.func alone
        row.error = str(e)
        del samplers["ours"]
        found = interleaved(samplers, repeats)
    row.ours, row.jacrev, row.jacfwd = found.get("ours"), found["jacrev"], found["jacfwd"]
    if row.ours is not None:
        row.method = last[0].jacobians["x"].method
        row.explore_total = Series(tuple(totals[1:]))  # not the warm-up
    release(last)
    return row


def _jacobian_target(
    name: str, limit: str, row: JacRow | None, value: Callable[[JacRow], float | None], ok: Callable[[float], bool]
) -> Target:
    if row is None:
        return Target(name, limit, "not run in this mode", None)
    if row.error:
        return Target(name, limit, row.error, False)
    r = value(row)
    return Target(name, limit, f"{fmt_ratio(r)} (method: {row.method})", None if r is None else ok(r))


def _jacobian_targets(rows: list[JacRow]) -> list[Target]:
    def at(kind: str) -> JacRow | None:
        return next((r for r in rows if r.prog.kind == kind and r.n == TARGET_N), None)

    return [
        _jacobian_target(
            f"dense Jacobian `tanh(W@x)`, n={TARGET_N}: ours / faster of jacrev, jacfwd",
            "≤ 1.10×",
            at("dense"),
            lambda r: r.versus(r.best),
            lambda x: x <= 1.10,
        ),
        _jacobian_target(
            f"elementwise Jacobian `tanh(x)*x`, n={TARGET_N}: speed-up over jacrev (jacrev / ours)",
            "≥ 5×",
            at("elementwise"),
            lambda r: ratio(median(r.jacrev), median(r.ours)),
            lambda x: x >= 5,
        ),
    ]


def run_jacobian(plan: Plan, log: Log) -> Section:
    rows = []
    for prog in JAC_PROGRAMS:
        for n in plan.jacobian_sizes:
            row = jacobian_row(prog, n, plan.jacobian_repeats)
            rows.append(row)
            log(
                f"  jacobian {prog.program} n={n}: ours {fmt_s(median(row.ours))} ({row.method}), "
                f"jacrev {fmt_s(median(row.jacrev))}, jacfwd {fmt_s(median(row.jacfwd))} {row.error or ''}"
            )
    headers = [
        "kind",
        "program",
        "n",
        "our method",
        "runs ours/rev/fwd",
        "ours: median (min–max)",
        "jacrev",
        "jacfwd",
        "ours / jacrev",
        "ours / jacfwd",
        "ours / best",
        "whole explore() (context)",
    ]
    table = md_table(
        headers,
        [
            [
                r.prog.kind,
                f"`{r.prog.program}`",
                f"{r.n:,}",
                r.method,
                "/".join(str(s.n if s else 0) for s in (r.ours, r.jacrev, r.jacfwd)),
                r.error or fmt_series_s(r.ours),
                fmt_series_s(r.jacrev),
                fmt_series_s(r.jacfwd),
                fmt_ratio(r.versus(r.jacrev)),
                fmt_ratio(r.versus(r.jacfwd)),
                fmt_ratio(r.versus(r.best)),
                fmt_series_s(r.explore_total),
            ]
            for r in rows
        ],
    )
    body = (
        f"x = `linspace(-1,1,n)`, W = `randn(n,n)` given with `--const` (seed {SEED}), v = ones, float32. "
        f"Ours = `Result.timings['jacobian']` of `explore(..., symbolic=False)`; jacrev/jacfwd = "
        f"`torch.func.jacrev/jacfwd` of the same function in plain torch. Warm: one untimed run each, then "
        f"round-robin, at least {plan.jacobian_repeats} rounds (more, up to {MAX_REPEATS}, until {MIN_TOTAL_S} s have "
        f"passed). Ratios are of medians; below 1 means ours is faster.\n\n" + table
    )
    return Section("(c) Jacobian in-process: our engine vs torch.func", body, _jacobian_targets(rows))


# ---------------------------------------------------------------------------- (d) symbolic
class SymCase(NamedTuple):
    label: str
    program: str
    n: int
    leaves: int  # each of n elements
    uses_w: bool  # x and a constant W = randn(n, n), instead of a, b, c
    repeats: int


@dataclass
class SymRow:
    label: str
    program: str
    n: int
    entries: int  # outputs x inputs: the per-element derivatives the check would compute
    time: Series | None = None
    explore_total: Series | None = None
    status: str = "—"
    route: str = "—"
    reason: str = ""
    jacobian_check: str = "—"


def symbolic_row(case: SymCase) -> SymRow:
    n = case.n
    if case.uses_w:
        values, consts = {"x": f"linspace(-1,1,{n})"}, {"W": f"randn({n},{n})"}
    else:
        values, consts = dict.fromkeys("abc", f"linspace(1,2,{n})"), {}
    row = SymRow(case.label, case.program, n, n * n * case.leaves)
    checks: dict | None = None  # of the first run: plain Check objects, no tensors
    times, totals = [], []
    try:
        for _ in range(case.repeats):
            sympy.core.cache.clear_cache()  # every `vjp run` starts with a cold sympy cache
            # the previous run's Result is already gone (`del r`): see release()
            r = explore(case.program, values, consts=consts, grad="ones", seed=SEED)
            times.append(r.timings["symbolic"])
            totals.append(r.timings["total"])
            checks = r.checks if checks is None else checks
            del r
    except Exception as e:  # a crash in vjp itself: report it and carry on
        row.status = _error(e)
        return row
    assert checks is not None
    check = checks["symbolic"]
    row.status, row.reason = check.status, check.reason or ""
    if check.status != "skipped":
        route = check.compares
        row.route = (
            "matrix calculus"
            if "matrix calculus" in route
            else "elementwise"
            if "elementwise" in route
            else "per element"
        )
    row.jacobian_check = checks["jacobian"].status if "jacobian" in checks else "—"
    row.time = Series(tuple(times))
    row.explore_total = Series(tuple(totals))
    return row


def time_forward_backward(n: int, repeats: int) -> Series:
    """Plain torch: forward and y.backward(ones) of the seed formula at n elements (leaf creation not timed)."""

    def once() -> float:
        a, b, c = (torch.linspace(1, 2, n).requires_grad_(True) for _ in range(3))
        start = time.perf_counter()
        y = 3 * a + 2 * b * b + torch.log(c)
        y.backward(torch.ones_like(y))
        return time.perf_counter() - start

    return interleaved({"torch": once}, repeats)["torch"]


def _symbolic_target(big: SymRow, torch_time: Series) -> Target:
    name = "symbolic check, elementwise program at n=10^6, vs torch forward+backward"
    if big.n != SYMBOLIC_TARGET_N:
        return Target(name, "≤ 2×", f"not run in this mode (n={big.n:,} here)", None)
    if big.time is None:
        return Target(name, "≤ 2×", big.status, False)
    r = ratio(big.time.median, torch_time.median)
    if big.status == "skipped":
        return Target(name, "≤ 2×", f"skipped ({big.reason}); {fmt_s(big.time.median)} spent", False)
    return Target(name, "≤ 2×", f"{fmt_ratio(r)} ({big.status})", r is not None and r <= 2)


def run_symbolic(plan: Plan, log: Log) -> Section:
    explore(SEED_PROGRAM, dict.fromkeys("abc", "1,2"), grad="ones")  # import sympy before timing anything
    cases = [
        SymCase("elementwise", SEED_PROGRAM, n, 3, False, plan.symbolic_repeats) for n in plan.symbolic_elementwise
    ]
    cases += [SymCase("dense", "tanh(W@x)", n, 1, True, plan.symbolic_repeats) for n in plan.symbolic_dense]
    # the target row: a median of 15 (each run about 50 ms), so that one slow moment of a shared VM does not decide it
    cases.append(SymCase("elementwise (target)", SEED_PROGRAM, plan.symbolic_big, 3, False, 15))
    rows = []
    for case in cases:
        rows.append(symbolic_row(case))
        r = rows[-1]
        log(f"  symbolic {r.program} n={r.n:,}: {fmt_s(median(r.time))} {r.status} {r.reason[:60]}")
    torch_time = time_forward_backward(plan.symbolic_big, 5)
    headers = [
        "kind",
        "program",
        "n",
        "outputs × inputs",
        "runs",
        "symbolic: median (min–max)",
        "status",
        "route",
        "reason",
        "jacobian check",
        "whole explore() (context)",
    ]
    table = md_table(
        headers,
        [
            [
                r.label,
                f"`{r.program}`",
                f"{r.n:,}",
                f"{r.entries:,}",
                str(r.time.n if r.time else 0),
                fmt_series_s(r.time),
                r.status,
                r.route,
                r.reason,
                r.jacobian_check,
                fmt_series_s(r.explore_total),
            ]
            for r in rows
        ],
    )
    body = (
        "`explore(...)` with the default limits (symbolic on), v = ones; elementwise: a=b=c=`linspace(1,2,n)`; "
        f"dense: x=`linspace(-1,1,n)`, W=`randn(n,n)` constant. Time = `Result.timings['symbolic']`, sympy's cache "
        f"cleared before each run (sympy itself already imported). For the target: plain torch forward + "
        f"backward of the same program at n={plan.symbolic_big:,} takes {fmt_series_s(torch_time)} "
        f"(median of {torch_time.n}).\n\n" + table
    )
    return Section("(d) Symbolic check as n grows", body, [_symbolic_target(rows[-1], torch_time)])
