"""Issue 38: a training loop's CPU time under the snippet observer against plain Python, in one process.

    OMP_NUM_THREADS=1 .venv/bin/python bench/loop_cpu.py bench/vjpbench/loops/mlp3000.py:1000 ...

Each LOOP.py:STEPS runs its loop for STEPS steps, plain (exec, statement by statement, as the runner does)
and observed (`tests/test_confined_observe.observe`: the child's observer without the confinement and the
channel), interleaved, two rounds. Process CPU time is reported beside wall time: on a loaded shared machine
it is the steadier of the two.
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_confined_observe import observe  # noqa: E402


def plain(src: str) -> None:
    ns: dict = {"__name__": "__main__"}
    for stmt in ast.parse(src).body:
        exec(compile(ast.Module([stmt], []), "<plain>", "exec"), ns)  # the benchmark's own loop files


def timed(run: object, src: str) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        run(src)  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    for arg in sys.argv[1:]:
        path, steps = arg.rsplit(":", 1)
        src = Path(path).read_text()
        for word in ("range(3000)", "range(500)", "range(600)"):
            src = src.replace(word, f"range({steps})")
        timed(plain, src.replace(f"range({steps})", "range(5)"))  # warm both paths
        timed(observe, src.replace(f"range({steps})", "range(5)"))
        for _ in range(2):
            (a, ac), (b, bc) = timed(plain, src), timed(observe, src)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(
                f"{Path(path).name} {steps} steps: plain {a:.2f} s (CPU {ac:.2f} s), observed {b:.2f} s "
                f"(CPU {bc:.2f} s): × {bc / ac:.2f} CPU, × {b / a:.2f} wall; load {load}",
                flush=True,
            )


if __name__ == "__main__":
    main()
