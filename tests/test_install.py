"""What users install: a wheel built from this tree, in a fresh virtual environment, with no source tree in sight.

Every other test runs the editable checkout, whose import hook serves any module of `src/`, shipped or not.
Here the wheel is installed into a new venv whose only path to this project is the wheel itself; torch,
numpy, typer, rich and sympy come from the running environment's site-packages through a `.pth` line (a
plain path: the editable install's own `.pth` hooks there are not run), so the test stays fast and offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from documents import event
from planted import SQUARE

ROOT = Path(__file__).resolve().parents[1]

SEED = ["run", "3*a+2*b*b+log(c)", "--a", "1,2,3", "--b", "3,4,5", "--c", "6,7,8", "--grad", "0.1,1,0.0001"]
SEED_GRADS = {"a": [0.3, 3.0, 3e-4], "b": [1.2, 16.0, 2e-3], "c": [0.1 / 6, 1 / 7, 1e-4 / 8]}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build the wheel from this tree and install it alone into a fresh venv; returns its paths."""
    work = tmp_path_factory.mktemp("install")
    dist = work / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    noise = "is ignored: it is neither a file nor a directory"  # pip's own words on this machine's index config
    said = [line for line in (build.stdout + build.stderr).splitlines() if noise not in line]
    assert not [line for line in said if "warn" in line.lower()], said  # no packaging warning
    (wheel,) = dist.glob("vjp_explorer-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the dependencies, from the running environment: one plain path line, no import hook
    (site / "_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert inst.returncode == 0, inst.stderr
    return {"python": python, "vjp": env_dir / "bin" / "vjp", "site": site, "cwd": work}


def _env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(NO_COLOR="1", COLUMNS="120")
    return env


def _run(installed: dict[str, Path], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed["vjp"]), *args],
        cwd=cwd or installed["cwd"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )


def _close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(abs(g - w) <= 1e-5 * max(1.0, abs(w)) for g, w in zip(got, want, strict=True))


def test_the_package_is_imported_from_the_wheel(installed):
    code = "import vjp_explorer, sys; print(vjp_explorer.__file__)"
    out = subprocess.run([str(installed["python"]), "-I", "-c", code], capture_output=True, text=True, env=_env())
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(installed["site"]), out.stdout
    assert not Path(out.stdout.strip()).is_relative_to(ROOT / "src")


def test_every_subpackage_of_the_tree_ships(installed):
    ours = sorted(p.parent.relative_to(ROOT / "src") for p in (ROOT / "src" / "vjp_explorer").rglob("__init__.py"))
    for package in ours:
        assert (installed["site"] / package / "__init__.py").is_file(), f"{package} is missing from the wheel"
    assert len(list((installed["site"] / "vjp_explorer" / "examples" / "snippets").glob("*.py"))) >= 8


def test_the_seed_program_gives_the_seed_numbers(installed):
    r = _run(installed, *SEED, "--json")
    assert r.returncode == 0, r.stderr
    grads = event(json.loads(r.stdout))["grads"]
    for name, want in SEED_GRADS.items():
        assert _close(grads[name], want), (name, grads[name])


def test_the_seed_snippet_explains_its_call(installed):
    r = _run(installed, "explain", "seed000_ex1", "--seed", "0")
    assert r.returncode == 0, r.stderr
    assert "backward #1" in r.stdout and "tensor([3.0000e-01, 3.0000e+00, 3.0000e-04])" in r.stdout


def test_functions_and_examples_list(installed):
    r = _run(installed, "functions", "exp")
    assert r.returncode == 0, r.stderr
    assert "exp(x)" in r.stdout
    r = _run(installed, "examples")
    assert r.returncode == 0, r.stderr
    assert "seed_3vector" in r.stdout and "seed000_ex1" in r.stdout and "site-packages" in r.stdout.replace("\n", "")


def test_the_docs_ship_with_the_package(installed):
    r = _run(installed, "docs", "json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# JSON")


def test_check_of_a_custom_function(installed, tmp_path):
    (tmp_path / "my_ops.py").write_text(SQUARE)
    r = _run(installed, "check", "my_ops.py:Square", "--x", "1,2,3", "--grad", "0.5,1,2", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert json.dumps(doc).count("disagree") == 0
    assert "Square" in r.stdout


def test_the_python_api(installed):
    code = (
        "import vjp_explorer\n"
        "values = {'a': [1, 2, 3], 'b': [3, 4, 5], 'c': [6, 7, 8]}\n"
        "r = vjp_explorer.explore('3*a+2*b*b+log(c)', values, grad=[0.1, 1, 0.0001])\n"
        "import json; print(json.dumps({k: r.grads[k].tolist() for k in 'abc'}))\n"
    )
    out = subprocess.run(
        [str(installed["python"]), "-I", "-c", code], capture_output=True, text=True, env=_env(), cwd=installed["cwd"]
    )
    assert out.returncode == 0, out.stderr
    grads = json.loads(out.stdout)
    assert all(_close(grads[k], SEED_GRADS[k]) for k in "abc"), grads


# A bug planted in a module each command uses: every command ends in the same one-paragraph message, exit 1,
# with the traceback only behind --debug. Run through the console script's own entry point, in a child.
PLANTS = {
    "functions": (["functions", "exp"], "import vjp_explorer.ops.listing as m; m.rows = boom"),
    "examples": (["examples"], "import vjp_explorer.language.files as m; m.bundled_examples = boom"),
    "explain": (["explain", "seed000_ex1"], "import vjp_explorer.cli.snippet as m; m.snippet_command = boom"),
    "run": (["run", "x*2", "--x", "1"], "import vjp_explorer.api as m; m.explore = boom"),
    "check": (["check", "nowhere.py:f", "--x", "1"], "import vjp_explorer.cli.check as m; m.check_command = boom"),
    "missing module": (["run", "x*2", "--x", "1"], "import sys; sys.modules['vjp_explorer.stages'] = None"),
    "cli cannot load": (["functions"], "import sys; sys.modules['vjp_explorer.cli.options'] = None"),
}


@pytest.mark.parametrize("case", sorted(PLANTS))
def test_a_bug_in_any_command_is_one_paragraph(case, tmp_path):
    args, plant = PLANTS[case]
    code = (
        "import sys\n"
        "def boom(*a, **k):\n    raise RuntimeError('planted')\n"
        f"{plant}\n"
        "from vjp_explorer.entry import main\n"
        f"sys.argv = ['vjp', *{args!r}] + sys.argv[1:]\n"
        "main()\n"
    )
    for debug in (False, True):
        extra = ["--debug"] if debug else []
        r = subprocess.run(
            [sys.executable, "-c", code, *extra], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=120
        )
        assert r.returncode == 1, (case, r.returncode, r.stderr)
        if debug:
            assert "Traceback" in r.stderr, r.stderr
        else:
            assert r.stderr.startswith("internal error: ") and "This is a bug in vjp-explorer" in r.stderr, r.stderr
            assert "Traceback" not in r.stderr and r.stdout == "", r.stderr
