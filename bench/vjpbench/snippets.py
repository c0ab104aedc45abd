"""(s): a seed snippet's whole process, `vjp run FILE.py --seed 0`, against plain Python running it."""

from __future__ import annotations

from pathlib import Path

from .common import Section, Target, fmt_ratio, fmt_series_s, md_table, median, ratio
from .process import PYTHON, VJP, Case, Command, Log, measure, warm_caches

HERE = Path(__file__).resolve().parent
SNIPPETS = sorted((HERE.parents[1] / "expressions" / "snippets").glob("*.py"))
LIMIT = 1.15  # the issue's target: within 1.15x of plain python
LOOPS = HERE / "loops"  # training loops, each with the issue's target (wall time, and memory for the MLP)
LOOP_LIMIT = 1.5
# issue 38: (file, wall-time target, peak-RSS target or None)
ISSUE_LOOPS = (
    ("mlp3000.py", 1.3, 1.3),  # the issue's ReLU MLP 20-64-2, cross-entropy, SGD, 3,000 steps
    ("custom500.py", 1.5, None),  # 500 steps through a custom autograd.Function (Adam)
    ("lstm600.py", 1.5, None),  # an LSTM tagger, 600 steps
)


def run_snippets(repeats: int, log: Log) -> Section:
    warm_caches()
    rows = []
    worst = 0.0
    for path in SNIPPETS:
        if "empty" in path.name:
            continue  # raises on a CPU machine, in both
        base = Command("python", (PYTHON, str(HERE / "bare_snippet.py"), str(path)), repeats, 60)
        ours = Command("vjp run", (VJP, "run", str(path), "--seed", "0"), repeats, 60)
        case = Case(path.stem, base, (ours,))
        bare, vjp = measure(case, log)
        r = ratio(median(vjp.wall), median(bare.wall))
        worst = max(worst, r or 0.0)
        rows.append([path.stem, bare.cell(fmt_series_s(bare.wall)), vjp.cell(fmt_series_s(vjp.wall)), fmt_ratio(r)])
    loops, targets = [], []
    for path, limit, repeat in ((LOOPS / "train300.py", LOOP_LIMIT, repeats), (LOOPS / "train3000.py", None, 1)):
        base = Command("python", (PYTHON, str(HERE / "bare_snippet.py"), str(path)), repeat, 600)
        ours = Command("vjp run", (VJP, "run", str(path), "--seed", "0", "--limit", "snippet_seconds=600"), repeat, 600)
        bare, vjp = measure(Case(path.stem, base, (ours,)), log)
        r = ratio(median(vjp.wall), median(bare.wall))
        loops.append([path.stem, bare.cell(fmt_series_s(bare.wall)), vjp.cell(fmt_series_s(vjp.wall)), fmt_ratio(r)])
        if limit is not None:
            targets.append(
                Target(f"{path.stem}: a training loop, folded", f"≤ {limit}×", fmt_ratio(r), (r or 99) <= limit)
            )
    for name, limit, rss_limit in ISSUE_LOOPS:
        path = LOOPS / name
        base = Command("python", (PYTHON, str(HERE / "bare_snippet.py"), str(path)), repeats, 600)
        ours = Command(
            "vjp run", (VJP, "run", str(path), "--seed", "0", "--limit", "snippet_seconds=600"), repeats, 600
        )
        bare, vjp = measure(Case(path.stem, base, (ours,)), log)
        r = ratio(median(vjp.wall), median(bare.wall))
        loops.append([path.stem, bare.cell(fmt_series_s(bare.wall)), vjp.cell(fmt_series_s(vjp.wall)), fmt_ratio(r)])
        targets.append(
            Target(f"{path.stem}: wall time vs plain python", f"≤ {limit}×", fmt_ratio(r), (r or 99) <= limit)
        )
        if rss_limit is not None:
            m = vjp.versus(bare, "rss_mb")
            targets.append(
                Target(
                    f"{path.stem}: peak RSS vs plain python", f"≤ {rss_limit}×", fmt_ratio(m), (m or 99) <= rss_limit
                )
            )
    body = md_table(["snippet", "plain python", "vjp run --seed 0", "× python"], rows + loops)
    target = Target(
        "seed snippets, whole process vs plain python",
        f"≤ {LIMIT}×",
        f"{worst:.2f}× (worst)",
        worst <= LIMIT if rows else None,
    )
    return Section("(s) snippets: whole process", body, [target, *targets])
