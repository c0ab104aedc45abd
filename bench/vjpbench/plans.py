"""How much to measure: the --quick plan (about a minute) and the full plan (about ten minutes on 2 cores)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Elementwise:
    """One whole-process elementwise size: repeats of the bare script, of each vjp run (of `vjp run --json`,
    json_repeats), and a per-run timeout."""

    n: int
    bare_repeats: int
    vjp_repeats: int
    json_repeats: int
    timeout_s: float


@dataclass(frozen=True)
class Plan:
    name: str
    seed_repeats: int
    seed_diagnostic: bool  # also run `vjp run --json --no-symbolic` on the seed example
    elementwise: tuple[Elementwise, ...]
    help_repeats: int
    jacobian_sizes: tuple[int, ...]
    jacobian_repeats: int
    symbolic_elementwise: tuple[int, ...]
    symbolic_dense: tuple[int, ...]
    symbolic_repeats: int
    symbolic_big: int  # the n of the "symbolic check at n = 10^6" target


QUICK = Plan(
    name="quick",
    seed_repeats=3,
    seed_diagnostic=False,
    elementwise=(Elementwise(100_000, 1, 1, 1, 60),),
    help_repeats=5,
    jacobian_sizes=(100, 1000),
    jacobian_repeats=3,
    symbolic_elementwise=(3, 10),
    symbolic_dense=(3, 5, 300),  # past the per-element budget: matrix calculus
    symbolic_repeats=1,
    symbolic_big=100_000,
)

FULL = Plan(
    name="full",
    seed_repeats=7,
    seed_diagnostic=True,
    # at 10^7, `vjp run` and `vjp run --json` (big arrays summarised) take a few seconds and run 3 times
    elementwise=(Elementwise(1_000_000, 3, 3, 3, 120), Elementwise(10_000_000, 3, 3, 3, 150)),
    help_repeats=10,
    jacobian_sizes=(100, 1000, 3000),
    jacobian_repeats=5,
    symbolic_elementwise=(3, 10, 30, 100),
    symbolic_dense=(3, 5, 10, 300, 3000),  # 300 and 3000: matrix calculus
    symbolic_repeats=3,
    symbolic_big=1_000_000,
)

PLANS = {"quick": QUICK, "full": FULL}
