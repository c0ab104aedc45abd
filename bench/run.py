"""Run the vjp benchmark suite and write bench/results/latest.md (also printed).

    .venv/bin/python bench/run.py            # full: about 4 minutes on 2 cores
    .venv/bin/python bench/run.py --quick    # about a minute, smaller sizes, fewer repeats
    .venv/bin/python bench/run.py --only c,d # some sections: a (+e) whole process, b start-up, c Jacobian,
                                             # d symbolic, m memory estimate, s snippets

Targets are reported PASS/FAIL; the exit code is 0 unless the benchmark itself breaks.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from vjpbench import process, report  # noqa: E402
from vjpbench.plans import PLANS  # noqa: E402

SECTIONS = "abcdms"


def inprocess():  # type: ignore[no-untyped-def]
    """The in-process sections' module, imported only when needed (it imports torch and sympy)."""
    return importlib.import_module("vjpbench.inprocess")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the ~1 minute plan")
    parser.add_argument("--only", default=SECTIONS, help="sections to run, e.g. a,b (default: all)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "latest.md", help="where to write the table")
    args = parser.parse_args()
    plan = PLANS["quick" if args.quick else "full"]
    chosen = [s for s in SECTIONS if s in args.only.lower()]
    if not Path(process.VJP).exists():
        parser.error(f"no vjp next to this python ({process.VJP}); run with the project's .venv/bin/python")

    start, load = time.perf_counter(), report.load_average()
    runners = {
        "a": ("(a)+(e) whole process", lambda: process.run_whole_process(plan, log)),
        "b": ("(b)+(e) start-up", lambda: process.run_help(plan, log)),
        "c": ("(c) Jacobian", lambda: inprocess().run_jacobian(plan, log)),
        "d": ("(d) symbolic", lambda: inprocess().run_symbolic(plan, log)),
        "m": ("(m) memory estimate", lambda: importlib.import_module("vjpbench.memory").run_memory(log)),
        "s": (
            "(s) snippets",
            lambda: importlib.import_module("vjpbench.snippets").run_snippets(plan.seed_repeats, log),
        ),
    }
    sections = []
    # in this order: the whole-process runs first, before this process imports torch
    for key in chosen:
        title, run = runners[key]
        log(title)
        t0 = time.perf_counter()
        sections.append(run())
        log(f"{title}: {time.perf_counter() - t0:.0f} s")

    text = report.render(plan.name, sections, time.perf_counter() - start, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    log(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
