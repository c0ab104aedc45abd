"""The program corpus of issue 18: real autograd code pasted unchanged into `vjp run`.

Each case of tests/program_corpus/cases.toml is a forward computation as a tutorial, a book, a Q&A thread,
a repository or a PyTorch issue writes it (SOURCES.md says where from). The test runs

    vjp run PROGRAM --NAME VALUE ... --const NAME=VALUE ... [--grad V] [--output O] --json --seed 0

in-process and compares its `grads` with the same computation run by plain torch here (the case's `torch`
text, run with exec: this is our own test data, never user input), at the same float32 values.

A case that does not paste yet is listed in EXPECTED_TO_FAIL with the constructs that block it; it runs
as xfail(strict=True), so the list must shrink as the language grows: a case that starts to pass fails the
run until its entry is removed. tests/program_corpus/README.md ranks the blockers.
"""

from __future__ import annotations

import ast
import json
import math
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import typer.main

from documents import event
from vjp_explorer.cli import app

HERE = Path(__file__).parent / "program_corpus"
CASES: list[dict[str, Any]] = tomllib.loads((HERE / "cases.toml").read_text(encoding="utf-8"))["case"]

# case id -> the constructs that stop it today, the first one the parser meets first. Keep current: a case
# that starts to pass makes its xfail(strict=True) fail.
EXPECTED_TO_FAIL: dict[str, tuple[str, ...]] = {}

RTOL = 1e-5
ATOL = 1e-6  # scaled by the size of the reference grad (at least 1)

KEYS = {
    "id",
    "source",
    "origin",
    "what",
    "program",
    "trimmed",
    "call",
    "inputs",
    "consts",
    "integer",
    "grad",
    "output",
    "torch",
    "values",
    "exit_code",
}
REQUIRED = {"id", "source", "origin", "what", "program", "trimmed", "call", "inputs", "torch"}


def _run_options() -> set[str]:
    """The option names of `vjp run` (a leaf with one of these names is given as --var NAME=VALUE)."""
    command = typer.main.get_command(app)
    run = command.commands["run"]  # type: ignore[attr-defined]
    return {name.removeprefix("--") for p in run.params for name in (*p.opts, *p.secondary_opts)}


RUN_OPTIONS = _run_options()


# ---------------------------------------------------------------- values, independently of vjp's parser

_GENERATOR = re.compile(r"^\s*(ones|zeros|arange|linspace|eye|full)\((.*)\)\s*$")


def tensor_of(text: str, integer: bool = False) -> torch.Tensor:
    """A value in the CLI's syntax (`1,2,3`, `[[1,2],[3,4]]`, `ones(2,2)`, ...) as a float32 tensor."""
    dtype = torch.int64 if integer else torch.float32
    m = _GENERATOR.match(text)
    if m:
        name, args = m.group(1), ast.literal_eval(f"[{m.group(2)}]")
        if name == "full":
            return torch.full(tuple(args[:-1]), float(args[-1]), dtype=dtype)
        if name == "linspace":
            return torch.linspace(*args, dtype=dtype)
        if name == "arange":
            return torch.arange(*args, dtype=dtype)
        return getattr(torch, name)(*args, dtype=dtype)
    text = text.strip()
    value = ast.literal_eval(text if text.startswith("[") or "," not in text else f"[{text}]")
    return torch.tensor(value, dtype=dtype)


def _out_name(tree: ast.Module) -> str | None:
    """The output as vjp names it: the last statement's target, or for a loop or `if` at the end, the last
    variable assigned inside it; None for a bare final expression."""
    last = tree.body[-1]
    if isinstance(last, (ast.If, ast.While, ast.For)):
        assigned = [n for n in ast.walk(last) if isinstance(n, (ast.Assign, ast.AugAssign))]
        assigned.sort(key=lambda n: (n.lineno, n.col_offset))
        target = assigned[-1].targets[0] if isinstance(assigned[-1], ast.Assign) else assigned[-1].target
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name):
        return last.targets[0].id
    if isinstance(last, ast.AugAssign) and isinstance(last.target, ast.Name):
        return last.target.id
    return None


def reference(case: dict[str, Any]) -> dict[str, torch.Tensor | None]:
    """Plain torch: bind the leaves and constants, exec the case's `torch` text, call backward(v)."""
    integer = set(case.get("integer", ()))
    leaves = {name: tensor_of(value).requires_grad_(True) for name, value in case["inputs"].items()}
    ns: dict[str, Any] = {"torch": torch, "F": F, "math": math}
    ns.update({n: tensor_of(v, n in integer) for n, v in case.get("consts", {}).items()})
    ns.update(leaves)
    tree = ast.parse(case["torch"].strip())
    name = case.get("output") or _out_name(tree)
    if name is None:  # a bare final expression: name it
        last = tree.body[-1]
        assert isinstance(last, ast.Expr), f"{case['id']}: the reference must end in an assignment or an expression"
        assign = ast.Assign(targets=[ast.Name("__out__", ast.Store())], value=last.value)
        tree.body[-1] = ast.fix_missing_locations(ast.copy_location(assign, last))
        name = "__out__"
    exec(compile(tree, f"<reference {case['id']}>", "exec"), ns)  # our own test data, never user input
    out = ns[name]
    grad = case.get("grad")
    if grad is None:
        v = None
    elif grad == "ones":
        v = torch.ones_like(out)
    else:
        v = tensor_of(grad).reshape(out.shape)
    out.backward(v)
    return {n: t.grad for n, t in leaves.items()}


# ---------------------------------------------------------------- the command line


def argv(case: dict[str, Any]) -> list[str]:
    """`vjp run` as a user would type it for this case; a program that starts with a minus sign goes last,
    after `--`, as docs/language.md says (else the command line reads it as an option)."""
    program = case["program"]
    args = ["run"] if program.lstrip().startswith("-") else ["run", program]
    for name, value in case["inputs"].items():
        if name in RUN_OPTIONS or value.startswith("-"):
            args += ["--var", f"{name}={value}"]
        else:
            args += [f"--{name}", value]
    for name, value in case.get("consts", {}).items():
        args += ["--const", f"{name}={value}"]
    if "grad" in case:
        args += ["--grad", case["grad"]]
    if "output" in case:
        args += ["--output", case["output"]]
    args += ["--json", "--seed", "0"]
    return [*args, "--", program] if program.lstrip().startswith("-") else args


def _as_tensor(value: Any) -> torch.Tensor:
    def fix(v: Any) -> Any:
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, str):  # the JSON spells non-finite numbers "nan", "inf", "-inf"
            return float(v)
        return math.nan if v is None else v

    return torch.tensor(fix(value), dtype=torch.float64)


def _param(case: dict[str, Any]) -> Any:
    blockers = EXPECTED_TO_FAIL.get(case["id"])
    marks = [pytest.mark.xfail(strict=True, reason="blocked by " + ", ".join(blockers))] if blockers else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_pastes_unchanged_and_grads_match_torch(case: dict[str, Any], vjp) -> None:
    result = vjp(*argv(case))
    expected_exit = case.get("exit_code", 0)
    assert result.exit_code == expected_exit, (
        f"exit {result.exit_code} (want {expected_exit})\nstderr: {result.stderr}\nstdout: {result.stdout[-2000:]}"
    )
    grads = event(json.loads(result.stdout))["grads"]
    want = reference(case)
    assert set(grads) == set(want), f"grads for {sorted(grads)}, torch has {sorted(want)}"
    for name, ref in want.items():
        ref64 = torch.zeros(()) if ref is None else ref.to(torch.float64)
        got = _as_tensor(grads[name])
        finite = ref64[torch.isfinite(ref64)]
        scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
        torch.testing.assert_close(
            got, ref64, rtol=RTOL, atol=ATOL * scale, equal_nan=True, msg=lambda m, n=name: f"grad of {n}: {m}"
        )


# ---------------------------------------------------------------- the corpus itself


def test_every_case_is_complete_and_has_a_source() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    sources = (HERE / "SOURCES.md").read_text(encoding="utf-8")
    for case in CASES:
        assert REQUIRED <= set(case), f"{case['id']}: missing {sorted(REQUIRED - set(case))}"
        assert set(case) <= KEYS, f"{case['id']}: unknown keys {sorted(set(case) - KEYS)}"
        assert case["source"].strip(), f"{case['id']}: no source"
        assert f"`{case['id']}`" in sources, f"{case['id']}: not in SOURCES.md"
        origin = case["origin"]
        assert origin == "new" or (Path(__file__).parent / origin).is_file(), (
            f"{case['id']}: origin {origin!r} is neither 'new' nor a file of tests/snippet_corpus"
        )
        assert set(case.get("integer", ())) <= set(case.get("consts", {})), (
            f"{case['id']}: integer names a non-constant"
        )


def test_corpus_size() -> None:
    """The issue asks for at least 60 real snippets; at least 30 not already in tests/snippet_corpus."""
    assert len(CASES) >= 60
    assert sum(c["origin"] == "new" for c in CASES) >= 30


def test_expected_to_fail_names_real_cases_and_blockers() -> None:
    ids = {c["id"] for c in CASES}
    assert set(EXPECTED_TO_FAIL) <= ids, sorted(set(EXPECTED_TO_FAIL) - ids)
    for cid, blockers in EXPECTED_TO_FAIL.items():
        assert blockers and all(b.strip() for b in blockers), f"{cid}: name what blocks it"


def test_readme_ranking_is_current() -> None:
    """tests/program_corpus/README.md's table counts EXPECTED_TO_FAIL; regenerate it when the list changes."""
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    for construct, (cases, alone) in blocker_ranking().items():
        assert f"| `{construct}` | {cases} | {alone} |" in readme, f"README.md: row of {construct!r} out of date"
    assert f"{len(CASES) - len(EXPECTED_TO_FAIL)} of {len(CASES)}" in readme


def blocker_ranking() -> dict[str, tuple[int, int]]:
    """construct -> (cases it blocks, cases it alone blocks), most cases first."""
    counts = Counter(b for blockers in EXPECTED_TO_FAIL.values() for b in set(blockers))
    alone = Counter(blockers[0] for blockers in EXPECTED_TO_FAIL.values() if len(set(blockers)) == 1)
    return {b: (n, alone[b]) for b, n in sorted(counts.items(), key=lambda kv: (-kv[1], -alone[kv[0]], kv[0]))}
