"""Every registry entry against its independent numpy reference (tests/op_references.py).

For each entry, in float32 and float64, on random in-domain inputs: the torch route's value against
numpy, the grads against central differences of the numpy function, and the tool's own routes
(Jᵀv from the explicit Jacobian, sympy's exact derivatives, finite differences) agreeing. At kinks
and steps the grads are torch's documented convention, and no exact route calls it a disagreement.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from op_references import CONSTS, REFERENCES, SELU_ALPHA, SELU_SCALE, Ref
from oracle_programs import fmt
from vjp_explorer import explore
from vjp_explorer.limits import DEFAULT_LIMITS, Limits
from vjp_explorer.ops import REGISTRY, SPELLINGS
from vjp_explorer.ops.listing import markdown

TOL = {"float64": 1e-6, "float32": 2e-3}
SMALL = Limits(**{**DEFAULT_LIMITS.__dict__, "symbolic_entries": 100})  # the elementwise route from 100 elements
EXAMPLES = int(os.environ.get("OPS_EXAMPLES", "3"))  # a few per entry keeps it fast; raise it to search wider


def test_every_entry_has_a_reference():
    missing = sorted(set(REGISTRY) - set(REFERENCES))
    assert not missing, f"registry entries without a numpy reference in tests/op_references.py: {missing}"
    assert not sorted(set(REFERENCES) - set(REGISTRY)), "references for names the registry does not have"


def _program(name: str, ref: Ref) -> str:
    return ref.program or f"{name}({', '.join('abc'[: _leaves(name, ref)])})"


def _leaves(name: str, ref: Ref) -> int:
    """How many leaves (a, b, c) the reference's program reads."""
    return ref.leaves or min(REGISTRY[name].tensors, 3)


def _arr(td) -> np.ndarray:
    return np.asarray(td.tolist(), dtype=np.float64).reshape(td.shape)


def _vjp(f, env: dict[str, np.ndarray], leaf: str, v: np.ndarray) -> np.ndarray:
    """Central differences of <v, f(x)> by each element of one leaf, in float64."""
    x0 = env[leaf]
    g = np.zeros(x0.shape)
    for k in range(x0.size):
        h = 1e-6 * max(1.0, abs(float(x0.flat[k])))
        hi, lo = x0.copy(), x0.copy()
        hi.flat[k] += h
        lo.flat[k] -= h
        g.flat[k] = (np.sum(v * f({**env, leaf: hi})) - np.sum(v * f({**env, leaf: lo}))) / (2 * h)
    return g


def _inputs(ref: Ref, shape: tuple[int, ...], lo: float, hi: float) -> st.SearchStrategy[np.ndarray]:
    far = (lambda x: ref.kinks(x) > 0.01) if ref.kinks else (lambda x: True)
    element = st.floats(lo, hi, allow_nan=False).filter(far)
    return st.lists(element, min_size=math.prod(shape), max_size=math.prod(shape)).map(
        lambda xs: np.array(xs, dtype=np.float64).reshape(shape)
    )


def _check(name: str, dtype: str, env: dict[str, np.ndarray]) -> None:
    ref = REFERENCES[name]
    program = _program(name, ref)
    if dtype == "float32":  # the reference sees the inputs torch sees
        env = {k: a.astype(np.float32).astype(np.float64) for k, a in env.items()}
    consts = {k: c for k, c in CONSTS.items() if k in program}

    def f(e: dict[str, np.ndarray]) -> np.ndarray:
        if name == "detach":  # detach(a) is a constant to backward: its value at the point
            return env["a"] * e["a"]
        return np.asarray(ref.fn(*(e[k] for k in sorted(e))))

    out = f(env)
    v = np.resize(np.array([0.5, -1.25, 2.0, 1.0]), out.shape)
    r = explore(
        program,
        {k: fmt(a) for k, a in env.items()},
        grad=fmt(v),
        consts={k: fmt(c) for k, c in consts.items()},
        dtype=dtype,
    )
    tol = TOL[dtype]
    got = _arr(r.output)
    assert np.allclose(got, out, rtol=tol, atol=tol * max(1.0, np.abs(out).max())), (program, got, out)
    for leaf in env:
        want = _vjp(f, env, leaf, v)
        grad = _arr(r.grads[leaf])
        assert np.allclose(grad, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max())), (program, leaf, grad, want)
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert r.checks["jtv"].status == "agree", statuses
    assert r.checks["symbolic"].status == "agree", statuses
    assert r.checks["finite_difference"].status in ("agree", "skipped"), statuses


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_entry_against_numpy_and_exact_routes(name: str, dtype: str):
    ref = REFERENCES[name]
    a = _inputs(ref, ref.shape, ref.lo, ref.hi)
    b_shape = ref.b_shape or ref.shape
    b = _inputs(ref, b_shape, ref.lo if ref.b_lo is None else ref.b_lo, ref.hi if ref.b_hi is None else ref.b_hi)
    c = _inputs(ref, ref.c_shape or ref.shape, ref.lo, ref.hi)
    pairs = st.tuples(*(a, b, c)[: _leaves(name, ref)])
    if ref.apart:
        pairs = pairs.filter(lambda xs: bool(np.all(np.abs(xs[0] - xs[1]) > 0.01)))
    if ref.keep:
        pairs = pairs.filter(lambda xs: bool(ref.keep(*xs)))
    if ref.distinct:
        pairs = pairs.filter(lambda xs: all(x.size < 2 or np.diff(np.sort(x, axis=None)).min() > 0.01 for x in xs))

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(pairs)
    def run(xs: tuple[np.ndarray, ...]) -> None:
        _check(name, dtype, dict(zip("abc", xs, strict=False)))

    run()


# torch's documented convention at kinks and steps, derived by hand: (program, a, b, grad of a, grad of b)
KINKS = [
    ("relu(a)", [0.0, 2.0, -1.0], None, [0.0, 1.0, 0.0], None),
    ("abs(a)", [0.0, 2.0, -1.0], None, [0.0, 1.0, -1.0], None),
    ("relu6(a)", [0.0, 6.0, 3.0], None, [0.0, 0.0, 1.0], None),
    ("hardtanh(a)", [-1.0, 1.0, 0.0], None, [0.0, 0.0, 1.0], None),
    ("clamp(a, min=0, max=1)", [0.0, 1.0, 2.0], None, [1.0, 1.0, 0.0], None),
    ("torch.clip(a, 0, 1)", [0.0, 1.0, -2.0], None, [1.0, 1.0, 0.0], None),
    ("clamp_min(a, 1)", [0.0, 1.0, 2.0], None, [0.0, 1.0, 1.0], None),
    ("torch.clamp_max(a, 1)", [0.0, 1.0, 2.0], None, [1.0, 1.0, 0.0], None),
    ("leaky_relu(a, 0.1)", [0.0, 2.0, -1.0], None, [0.1, 1.0, 0.1], None),
    ("F.elu(a)", [0.0, 2.0, -1.0], None, [1.0, 1.0, math.exp(-1.0)], None),
    ("selu(a)", [0.0, 1.0, 0.0], None, [SELU_SCALE * SELU_ALPHA, SELU_SCALE, SELU_SCALE * SELU_ALPHA], None),
    ("sign(a) * a", [0.0, 2.0, -3.0], None, [0.0, 1.0, -1.0], None),
    ("floor(a) * a", [1.0, 2.0, -1.0], None, [1.0, 2.0, -1.0], None),
    ("ceil(a) * a", [1.0, -2.0, 0.0], None, [1.0, -2.0, 0.0], None),
    ("round(a) * a", [0.5, 1.5, 2.5], None, [0.0, 2.0, 2.0], None),
    ("trunc(a) * a", [-1.0, 1.0, 2.0], None, [-1.0, 1.0, 2.0], None),
    ("frac(a)", [1.0, 2.0, -1.0], None, [1.0, 1.0, 1.0], None),
    ("maximum(a, b)", [1.0, 2.0, 0.0], [1.0, 1.0, 0.0], [0.5, 1.0, 0.5], [0.5, 0.0, 0.5]),
    ("minimum(a, b)", [1.0, 2.0, 0.0], [1.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.5, 1.0, 0.5]),
    ("a.max()", [1.0, 3.0, 3.0], None, [0.0, 0.5, 0.5], None),
    ("torch.min(a)", [2.0, 2.0, 3.0], None, [0.5, 0.5, 0.0], None),
    ("amax(a)", [3.0, 3.0, 3.0], None, [1 / 3, 1 / 3, 1 / 3], None),
    ("torch.max(a, b)", [1.0, 2.0, 0.0], [1.0, 1.0, 0.0], [0.5, 1.0, 0.5], [0.5, 0.0, 0.5]),
    ("torch.linalg.vector_norm(a, ord=float('inf'))", [-3.0, 3.0, 1.0], None, [-0.5, 0.5, 0.0], None),
    ("a.argmax() * a", [1.0, 3.0, 3.0], None, [1.0, 1.0, 1.0], None),
    ("F.l1_loss(a, b, reduction='sum')", [1.0, 2.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, -1.0, 0.0]),
    ("a % 2.0", [2.0, -1.0, 4.0], None, [1.0, 1.0, 1.0], None),
    ("torch.div(a, b, rounding_mode='trunc') * a", [2.0, 3.0, -1.0], [1.0, 2.0, 2.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize(("program", "a", "b", "ga", "gb"), KINKS, ids=[k[0] for k in KINKS])
def test_kinks_follow_torch_convention(program, a, b, ga, gb):
    values = {"a": fmt(np.array(a))} | ({"b": fmt(np.array(b))} if b is not None else {})
    r = explore(program, values, grad="ones", dtype="float64")
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert all(c.status != "disagree" for c in r.checks.values()), statuses
    assert r.checks["symbolic"].status == "agree", statuses
    for leaf, want in (("a", ga), ("b", gb)):
        if want is not None:
            assert _arr(r.grads[leaf]).tolist() == pytest.approx(want, rel=1e-15), (leaf, statuses)
            assert _arr(r.symbolic[leaf]).tolist() == pytest.approx(want, rel=1e-15), (leaf, statuses)


@pytest.mark.parametrize(
    "program", ["relu6(a)", "hardtanh(a) + floor(a) * a", "clamp(a, min=1) + round(a)", "maximum(a, a * 0 + 1)"]
)
def test_kinks_on_the_elementwise_route(program: str):
    """At 30,000 elements the exact check is one scalar formula evaluated on arrays: the same convention."""
    r = explore(program, {"a": "full(30000, 1)"}, grad="ones", dtype="float64")
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert r.checks["symbolic"].status == "agree", statuses
    assert all(c.status != "disagree" for c in r.checks.values()), statuses


def test_docs_functions_md_is_current():
    path = Path(__file__).resolve().parents[1] / "docs" / "functions.md"
    assert path.read_text() == markdown(), "regenerate: python -m vjp_explorer.ops.listing > docs/functions.md"


def test_every_spelling_exists_in_torch():
    """A spelling the registry advertises is one torch has: torch.f, Tensor.f, F.f, torch.special.f."""
    import importlib

    import torch

    for spelling, spec in SPELLINGS.items():
        if spelling.startswith("."):
            assert hasattr(torch.Tensor, spelling[1:]), spelling
        elif "." in spelling:
            module, _, attr = spelling.replace("F.", "torch.nn.functional.", 1).rpartition(".")
            assert hasattr(importlib.import_module(module), attr), spelling
        assert spec.torch.startswith("torch."), spec.name


def test_functions_command_lists_the_registry(vjp):
    r = vjp("functions", "relu")
    assert r.exit_code == 0, r.output
    for name in ("relu(x)", "relu6(x)", "leaky_relu(x"):
        assert name in r.stdout
    assert "relu'(0)" in r.stdout
    data = json.loads(vjp("functions", "--json").stdout)
    assert [d["name"] for d in data] == list(REGISTRY)
    assert data[list(REGISTRY).index("relu")]["kink"] == "relu'(0) is taken as 0 by torch"
    bad = vjp("functions", "relux")
    assert bad.exit_code == 2 and "No function matches 'relux'" in bad.stderr and "relu" in bad.stderr


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("torch.gelu(a)", "Write gelu(x), F.gelu(x) or torch.nn.functional.gelu(x)"),
        ("a.relu6()", ".relu6() is not a tensor method in torch"),
        ("np.erf(a)", "np.erf is not available"),
        ("torch.linalg.erf(a)", "torch.linalg.erf is not available"),
    ],
)
def test_spellings_torch_lacks_are_refused_with_the_real_ones(vjp, program: str, message: str):
    r = vjp("run", program, "--a", "1")
    assert r.exit_code == 2
    assert message in " ".join(r.stderr.split()), r.stderr


@pytest.mark.parametrize("name", sorted(n for n, s in REGISTRY.items() if s.elementwise))
def test_entry_on_the_elementwise_route(name: str):
    """Past symbolic_entries the exact check is the entry's rule differentiated once and evaluated on arrays."""
    ref = REFERENCES[name]
    lo, hi = ref.lo + 0.01, ref.hi - 0.01
    b_lo = lo if ref.b_lo is None else ref.b_lo + 0.01
    b_hi = hi if ref.b_hi is None else ref.b_hi - 0.01
    values = {
        "a": f"linspace({lo!r}, {hi!r}, 2000)",
        "b": f"linspace({b_hi!r}, {b_lo!r}, 2000)",
        "c": f"linspace({(lo + hi) / 2!r}, {hi!r}, 2000)",
    }
    program = _program(name, ref)
    if "<" in program or ">" in program:
        pytest.skip("a mask is a constant at the point: the per-element route checks it, not one scalar formula")
    given = {k: v for k, v in values.items() if k in "abc"[: _leaves(name, ref)]}
    r = explore(program, given, grad="ones", limits=SMALL)
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert r.checks["symbolic"].status == "agree", statuses
    assert "elementwise program" in r.checks["symbolic"].compares
    assert all(c.status != "disagree" for c in r.checks.values()), statuses


@pytest.mark.parametrize(
    ("program", "status", "words"),
    [
        ("hardtanh(a, 2, 1)", 2, "hardtanh() failed: min_val cannot be greater than max_val"),
        ("clamp(a)", 2, "clamp() failed"),
        ("softplus(a, beta=0)", 0, "softplus with beta=0 has no finite value"),
    ],
)
def test_degenerate_parameters_are_named_never_a_disagreement(vjp, program: str, status: int, words: str):
    r = vjp("run", program, "--a", "0.5,-1", "--grad", "ones", "--json")
    assert r.exit_code == status, r.output
    assert words in (r.stderr if status else r.stdout)


@pytest.mark.parametrize(
    ("program", "words"),
    [
        ("torch.mse_loss(a, a)", "Write mse_loss(x), F.mse_loss(x) or torch.nn.functional.mse_loss(x)"),
        ("torch.linalg.inverse(a)", "Write torch.inverse(x), x.inverse() or torch.linalg.inv(x)"),
        ("torch.vector_norm(a)", "Write torch.linalg.vector_norm(x)"),
        ("torch.ad(a, a)", "Did you mean torch.add?"),
        ("F.mse_los(a, a)", "Did you mean mse_loss?"),
    ],
)
def test_unknown_names_suggest_spellings_that_exist(vjp, program: str, words: str):
    r = vjp("run", program, "--a", "1,2")
    assert r.exit_code == 2
    assert words in " ".join(r.stderr.split()), r.stderr


def test_torch_user_warnings_do_not_print_raw(vjp):
    """F.kl_div's reduction='mean' makes torch warn on every call; the entry's doc says it in words instead."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = vjp("run", "F.kl_div(x, tg)", "--x", "[[-1.2,-0.5]]", "--const", "tg=[[0.3,0.7]]")
    assert r.exit_code == 0, r.output
    assert not [w for w in caught if "batchmean" in str(w.message)], [str(w.message) for w in caught]
    assert "Warning" not in r.stderr and "Warning" not in r.stdout
