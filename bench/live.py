"""What `vjp live` costs, run on its own: `python bench/live.py [RUNS]`.

Issue 32's targets: opening `vjp live` on the seed example within 1.3x of `vjp run` on it (whole processes,
interleaved; live drawn headless at 80x24 and timed to its first paint, see live_child.py), and a change of v
on a materialised J of 10^6 entries answered within 50 ms in process (the Frame from J, then the main view
rendered by Rich into a string at 80 columns; then the app itself, under Textual's test harness, until its
screen is painted, wall time and CPU time).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = ["3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]


def processes(runs: int) -> None:
    import resource

    def cpu() -> float:  # user + system time of the waited-for children: less swayed by a busy machine
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    child = [sys.executable, str(HERE / "live_child.py")]
    variants = {"run": [*child, "run", *SEED], "live": [*child, "live", *SEED]}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    used: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(runs):
        for name, argv in variants.items():
            start, start_cpu = time.perf_counter(), cpu()
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
            wall[name].append(time.perf_counter() - start)
            used[name].append(cpu() - start_cpu)
    for name in variants:
        w, c = wall[name], used[name]
        print(
            f"process  vjp {name:<5} wall median {statistics.median(w) * 1000:6.0f} ms (min {min(w) * 1000:6.0f}), "
            f"CPU median {statistics.median(c) * 1000:6.0f} ms"
        )
    ratio = statistics.median(wall["live"]) / statistics.median(wall["run"])
    best = min(wall["live"]) / min(wall["run"])
    cpu_ratio = statistics.median(used["live"]) / statistics.median(used["run"])
    print(f"process  live (to first paint) / run: wall median {ratio:.3f}x, min {best:.3f}x, CPU {cpu_ratio:.3f}x")
    print("         (target <= 1.3x)")


def reweigh(runs: int) -> None:
    import asyncio

    import numpy as np

    from vjp_explorer.cli.output import render  # the terminal's rendering into a string (80 columns, see main)
    from vjp_explorer.live import ProgramSession
    from vjp_explorer.render import live_view
    from vjp_explorer.render.live_app import LiveApp
    from vjp_explorer.request import Request

    n = 1000  # J of n x n = 10^6 entries, dense
    req = Request("tanh(W @ x)", {"x": "linspace(-1, 1, 1000)"}, consts={"W": "randn(1000, 1000)"}, grad="ones")
    req.seed, req.symbolic = 0, False
    session = ProgramSession(req, [])
    (leaf,) = session.frame.leaves
    assert leaf.jacobian is not None and leaf.jacobian.size == n * n
    session.recompute = lambda v, label: None  # type: ignore[method-assign]  # the background run is not timed
    rng = np.random.default_rng(0)
    model, drawn, shown, cpu = [], [], [], []
    for k in range(runs):
        v = rng.standard_normal(n)
        start = time.perf_counter()
        frame = session.set_v(v, f"random {k}")
        mid = time.perf_counter()
        render(live_view.main_view(frame, ("x", k % n)))
        drawn.append(time.perf_counter() - start)
        model.append(mid - start)
        np.testing.assert_allclose(frame.leaf("x").jtv, leaf.jacobian.T @ v)

    async def in_app() -> None:  # the app itself: the new frame, every widget updated, laid out and painted
        app = LiveApp(session)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for k in range(runs):
                v = rng.standard_normal(n)
                start, start_cpu = time.perf_counter(), time.process_time()
                app.apply_v(v, f"random {k}")
                await pilot.pause()
                shown.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)

    asyncio.run(in_app())

    def ms(t: list[float]) -> str:
        return f"median {statistics.median(t) * 1000:.1f} ms, max {max(t) * 1000:.1f} ms"

    print(f"in-process  J {n}x{n}, a new v: the Frame (Jᵀv from J) {ms(model)}")
    print(f"            the Frame and the main view rendered by Rich: {ms(drawn)}")
    print(f"            in the app (run_test, 80x24), until painted: {ms(shown)};")
    print(f"            of it, CPU time (the rest is Textual's event loop waiting for its next frame): {ms(cpu)}")
    print("            (target: <= 50 ms)")


if __name__ == "__main__":
    os.environ["COLUMNS"] = "80"
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    processes(runs)
    reweigh(3 * runs)
