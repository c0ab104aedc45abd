"""What issue 39's diagnosis costs: `python bench/why_overhead.py BASE_SRC [RUNS]`.

A snippet that does not fail must run as fast as before: the diagnosis is a second confined run, made only
when the first one failed. Each bundled seed snippet (but the empty one) runs as a whole process, `vjp run
FILE.py --seed 0`, interleaved: "before" with the package of BASE_SRC first on the path (a checkout of the
commit before the diagnosis: `git archive 6676053 src | tar -x -C /tmp/base`, then BASE_SRC=/tmp/base/src),
"after" with this tree. The confined child runs this tree's code in both (`python -I` ignores PYTHONPATH);
there the diagnosis adds one dictionary lookup to a run that does not fail. Then, for scale, what a failing
snippet pays: the issue's in-place example, whose second run is the diagnosis.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VJP = str(Path(sys.executable).with_name("vjp"))
SNIPPETS = Path(__file__).resolve().parents[1] / "src/vjp_explorer/examples/snippets"
FAILING = """\
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.sigmoid(a)
c = b * 3
b.add_(1)
(c.sum() + b.sum()).backward()
"""


def timed(path: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([VJP, "run", str(path), "--seed", "0"], stdout=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def main(base: str, runs: int) -> None:
    before = {**os.environ, "PYTHONPATH": base}
    after = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as tmp:
        failing = Path(tmp) / "inplace.py"
        failing.write_text(FAILING)
        cases = [p for p in sorted(SNIPPETS.glob("*.py")) if "empty" not in p.name] + [failing]
        for path in cases:
            times: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(runs):
                times["before"].append(timed(path, before))
                times["after"].append(timed(path, after))
            b, a = statistics.median(times["before"]), statistics.median(times["after"])
            print(f"{path.name:<22} before {b * 1000:6.0f} ms  after {a * 1000:6.0f} ms  after/before {a / b:.3f}x")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
