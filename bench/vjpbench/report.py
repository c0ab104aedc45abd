"""The Markdown report: machine, target summary, then one section per measurement."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from .common import Section, md_table

REPO = Path(__file__).resolve().parents[2]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    except OSError:
        return platform.processor() or "unknown"


def _mem_total_gib() -> str:
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return f"{kb / 2**20:.1f} GiB"


def _git() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    """The 1-minute load average: other work on the machine shows up here."""
    return f"{os.getloadavg()[0]:.2f}"


def machine(load_at_start: str) -> list[tuple[str, str]]:
    import torch

    return [
        ("CPU", _cpu_model()),
        (
            "cores",
            f"{os.cpu_count()} logical, {len(os.sched_getaffinity(0))} usable; torch threads {torch.get_num_threads()}",
        ),
        ("memory", _mem_total_gib()),
        ("OS", platform.platform()),
        ("python", platform.python_version()),
        ("torch", torch.__version__),
        ("sympy / typer / rich", " / ".join(_version(d) for d in ("sympy", "typer", "rich"))),
        ("vjp-explorer", f"{_version('vjp-explorer')}, commit {_git()}"),
        ("OPENBLAS_CORETYPE", os.environ.get("OPENBLAS_CORETYPE", "(not set)")),
        (
            "PYTHONDONTWRITEBYTECODE",
            os.environ.get("PYTHONDONTWRITEBYTECODE", "(not set)")
            + " (the benchmark first writes vjp_explorer's .pyc files, so an editable install is not"
            " recompiled on every start)",
        ),
        ("load average (1 min)", f"{load_at_start} at start, {load_average()} at end"),
    ]


def render(mode: str, sections: list[Section], elapsed_s: float, load_at_start: str) -> str:
    targets = [t for s in sections for t in s.targets]
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = [
        f"# vjp benchmark ({mode} mode, {now}, {elapsed_s / 60:.1f} min)",
        md_table(["machine", ""], machine(load_at_start)),
        "## Targets\n\nReported, not enforced. n/a: not measured in this mode.\n\n"
        + md_table(
            ["target", "limit", "measured", "verdict"], [[t.name, t.limit, t.measured, t.verdict] for t in targets]
        ),
        *(f"## {s.title}\n\n{s.body}" for s in sections),
    ]
    return "\n\n".join(parts) + "\n"
