"""What the forward-mode adjoint check (jvp) costs `vjp run` at 10^7, run on its own:
`python bench/jvp_at_scale.py [RUNS]`.

Issue 29's target: `vjp run` at 10^7 elements within 1.25x of bare torch. Interleaved child processes (the
same helper and baseline as section (a)): bare torch, `vjp run` as it is (jvp skipped past jvp_elements,
where the sympy route compared every element), and `vjp run --limit jvp_elements=1e9` (jvp forced, as
before). Each round's ratio is printed too: on a shared machine a round is the fairest comparison.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vjpbench import process  # noqa: E402
from vjpbench.process import BARE, PYTHON, SEED_PROGRAM, VJP, Case, Command  # noqa: E402

N = 10_000_000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    lin = f"linspace(1,2,{N})"
    run = (VJP, "run", SEED_PROGRAM, "--a", lin, "--b", lin, "--c", lin, "--grad", "ones")
    case = Case(
        "elementwise n=10^7",
        Command("bare torch", (PYTHON, BARE, "linspace", str(N)), runs, 150),
        (
            Command("vjp run", run, runs, 150),
            Command("vjp run, jvp forced", (*run, "--limit", "jvp_elements=1000000000"), runs, 150),
        ),
    )
    process.warm_caches()
    measured = process.measure(case, lambda m: print(m, file=sys.stderr, flush=True))
    walls = {m.command.label: [r["wall_s"] for r in m.runs] for m in measured}
    cpus = {m.command.label: [r["cpu_s"] for r in m.runs] for m in measured}
    base, base_cpu = statistics.median(walls["bare torch"]), statistics.median(cpus["bare torch"])
    for label, w in walls.items():
        c = statistics.median(cpus[label])
        rounds = ", ".join(f"{a / b:.2f}" for a, b in zip(w, walls["bare torch"], strict=False))
        print(
            f"{label:22s} wall {statistics.median(w):.2f} s ({min(w):.2f}-{max(w):.2f}) "
            f"x{statistics.median(w) / base:.2f}, CPU {c:.2f} s x{c / base_cpu:.2f}; per round x [{rounds}]"
        )


if __name__ == "__main__":
    main()
