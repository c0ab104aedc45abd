"""--grad basis at n = 1000 against the Jacobian route it mirrors (issue 21: it may cost no more).

The basis is one backward per one-hot v, all output rows; the Jacobian route that does the same is the
per-row reverse mode (jacrev: vjp under vmap over the one-hot vs). Both are timed here on the same forward
pass, warm, alternating, median of 7, in ms; and the run's own steps (timings of explore) once, where the
first torch.func use of the process pays its warm-up.
Run: .venv/bin/python bench/probe_basis.py
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from vjp_explorer.api import Request, explore
from vjp_explorer.engine import probe as PR
from vjp_explorer.engine.interpreter import replay
from vjp_explorer.engine.jacobian import _dense_blocks

CASES = [
    ("tanh(W @ x)", {"x": "randn(1000)"}, {"W": "randn(1000, 1000)"}),
    ("3*a + 2*b*b + log(c)", {"a": "rand(1000)", "b": "rand(1000)", "c": "full(1000, 2)"}, {}),
    ("sum(x)*x", {"x": "randn(1000)"}, {}),
]


def main() -> None:
    seen: dict[str, Any] = {}
    basis_rows = PR.basis_rows

    def spy(
        out: Any, leaves: Any, fwd: Any = None, consts: Any = None, output: str = "y", use_func: bool = True
    ) -> Any:
        seen.update(out=out, leaves=leaves, fwd=fwd, consts=consts, output=output, use_func=use_func)
        return basis_rows(out, leaves, fwd, consts, output, use_func)

    PR.basis_rows = spy  # type: ignore[assignment]
    for program, values, consts in CASES:
        r = explore(Request(program, dict(values), dict(consts), grad="basis", seed=0, symbolic=False))
        assert r.checks["basis"].status == "agree", r.checks["basis"]
        c = dict(seen)
        # the run's last backward freed its graph: record it once more (basis_rows keeps it, retain_graph)
        c["out"] = replay(c["fwd"].steps, c["output"], {**c["consts"], **c["leaves"]}, c["out"].dtype)
        route, basis = [], []
        for _ in range(7):
            t = time.perf_counter()
            _dense_blocks(c["fwd"], c["leaves"], c["consts"], list(c["leaves"]), c["out"], c["output"])
            route.append(time.perf_counter() - t)
            t = time.perf_counter()
            basis_rows(c["out"], c["leaves"], c["fwd"], c["consts"], c["output"], c["use_func"])
            basis.append(time.perf_counter() - t)
        methods = ", ".join(sorted({j.method for j in r.jacobians.values()}))
        print(
            f"{program:22} per-row J route (jacrev) {1000 * statistics.median(route):6.1f} ms, "
            f"basis {1000 * statistics.median(basis):6.1f} ms; in the run: J step ({methods}) "
            f"{1000 * r.timings['jacobian']:6.1f} ms, basis rows {1000 * r.timings['basis rows']:6.1f} ms "
            f"(+ check: {1000 * r.timings['probe']:6.1f} ms)"
        )


if __name__ == "__main__":
    main()
