"""What --graph adds to the seed example, run on its own: `python bench/graph_overhead.py [RUNS]`.

Issue 21's target: --graph adds at most 10% to the seed example's whole process. Interleaved child
processes (`vjp run` with and without --graph, default output and --json), then the same work in-process
(explore plus the terminal rendering), where the difference is not drowned by start-up noise.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

VJP = str(Path(sys.executable).with_name("vjp"))
SEED = ["3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]


def processes(runs: int) -> None:
    variants = {
        "run": [],
        "run --graph": ["--graph"],
        "run --json": ["--json"],
        "run --graph --json": ["--graph", "--json"],
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(runs):
        for name, extra in variants.items():
            start = time.perf_counter()
            subprocess.run([VJP, "run", *SEED, *extra], stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
    for name, t in times.items():
        print(f"process  vjp {name:<20} median {statistics.median(t) * 1000:6.0f} ms  min {min(t) * 1000:6.0f} ms")
    for base in ("run", "run --json"):
        with_graph = base.replace("run", "run --graph")
        ratio = statistics.median(times[with_graph]) / statistics.median(times[base])
        best = min(times[with_graph]) / min(times[base])
        print(f"process  {with_graph} / {base}: median {ratio:.3f}x, min {best:.3f}x")


def in_process(runs: int) -> None:
    from vjp_explorer.api import explore
    from vjp_explorer.cli.output import render as _render  # the terminal's rendering, into a string
    from vjp_explorer.render import text

    def one(graph: bool) -> float:
        start = time.perf_counter()
        r = explore(SEED[0], {"a": "1,2,3", "b": "3,4,5", "c": "6,7,8"}, grad="0.1,1,0.0001", graph=graph)
        _render(text.render_run(r, text.View.for_result(r, None, False)))
        return time.perf_counter() - start

    for _ in range(3):
        one(False), one(True)
    plain, graph = [], []
    for _ in range(runs):
        plain.append(one(False))
        graph.append(one(True))
    a, b = statistics.median(plain), statistics.median(graph)
    print(f"in-process explore + render: {a * 1000:.1f} ms, with graph {b * 1000:.1f} ms (+{(b - a) * 1000:.1f} ms)")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    processes(n)
    in_process(2 * n)
