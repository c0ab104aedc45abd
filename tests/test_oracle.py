"""The tool's numbers against an independent oracle.

The oracle is a hand-written numpy evaluator per program (tests/oracle_programs.py,
and an expression-tree evaluator for the property test), differentiated by central
finite differences in float64, plus hand-derived closed forms for a few cases.
Nothing in the oracle uses the tool's parser, interpreter, torch autograd or sympy,
and no expected number comes from an earlier run of the tool.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from documents import event
from oracle_programs import CASES, FLOAT32_IDS, Case, Env, fmt, log_softmax, pnorm, sigmoid, softmax
from vjp_explorer import explore
from vjp_explorer.limits import DEFAULT_LIMITS, Limits

H = 1e-6  # finite-difference step (relative to max(1, |x|))
RTOL64 = 1e-6
RTOL32 = 1e-4

CASE_BY_ID = {c.id: c for c in CASES}


# ----------------------------------------------------------------------------- oracle machinery
def arr(td) -> np.ndarray:
    """TensorData -> numpy float64 array of the same shape."""
    return np.asarray(td.tolist(), dtype=np.float64).reshape(td.shape)


def fd_vjp(f: Callable[[Env], np.ndarray], env: Env, leaf: str, v: np.ndarray) -> np.ndarray:
    """Central differences of <v, f(x)> with respect to every element of one leaf."""
    x0 = env[leaf]
    g = np.zeros(x0.shape)
    for k in range(x0.size):
        h = H * max(1.0, abs(float(x0.flat[k])))
        plus, minus = x0.copy(), x0.copy()
        plus.flat[k] += h
        minus.flat[k] -= h
        fp = np.sum(v * f({**env, leaf: plus}))
        fm = np.sum(v * f({**env, leaf: minus}))
        g.flat[k] = (fp - fm) / (2 * h)
    return g


def fd_jacobian(f: Callable[[Env], np.ndarray], env: Env, leaf: str) -> np.ndarray:
    """Central differences of f itself: shape out_shape + leaf_shape."""
    x0 = env[leaf]
    out_shape = np.shape(f(env))
    cols = []
    for k in range(x0.size):
        h = H * max(1.0, abs(float(x0.flat[k])))
        plus, minus = x0.copy(), x0.copy()
        plus.flat[k] += h
        minus.flat[k] -= h
        cols.append((np.asarray(f({**env, leaf: plus})) - np.asarray(f({**env, leaf: minus}))) / (2 * h))
    return np.stack(cols, axis=-1).reshape((*out_shape, *x0.shape))


def magnitude(f: Callable[[Env], np.ndarray], env: Env, v: np.ndarray) -> float:
    """sum |v * f|: the size of the terms whose rounding the finite differences amplify by 1/h."""
    return float(np.sum(np.abs(v * f(env))))


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, what: str, extra_atol: float = 0.0) -> None:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    atol = rtol * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0) + extra_atol
    diff = np.abs(got - want)
    bad = ~(diff <= atol + rtol * np.abs(want))
    assert not bad.any(), (
        f"{what}: max |diff| {float(np.max(diff)):.3g} (atol {atol:.3g}, rtol {rtol:g})\n"
        f"got      {got.tolist()}\nexpected {want.tolist()}"
    )


def case_fn(case: Case, frozen: Env) -> Callable[[Env], np.ndarray]:
    if case.frozen:
        return lambda e: np.asarray(case.fn(e, frozen), dtype=np.float64)
    return lambda e: np.asarray(case.fn(e), dtype=np.float64)


def choose_v(case_id: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """A fixed random v (seeded by the case id) of the output shape; None (default v) for one-element outputs."""
    if math.prod(shape) == 1:
        return None
    rng = np.random.default_rng(zlib.crc32(case_id.encode()))
    v = np.round(rng.normal(size=shape), 4)
    v[v == 0] = 0.5
    return v


def run_case(case: Case, dtype: str, **options):
    env = {n: a for n, (_, a) in case.values.items()}
    consts = {n: a for n, (_, a) in case.consts.items()}
    out0 = case_fn(case, {**env, **consts})({**env, **consts})
    v = choose_v(case.id, np.shape(out0))
    r = explore(
        case.program,
        {n: text for n, (text, _) in case.values.items()},
        grad=None if v is None else fmt(v),
        consts={n: text for n, (text, _) in case.consts.items()},
        output=case.output,
        dtype=dtype,
        seed=case.seed,
        **options,
    )
    return r, env, consts, out0, v


def check_statuses(r, allow_skip: bool = False) -> None:
    statuses = {k: (c.status, c.worst, c.max_abs_diff, c.reason) for k, c in r.checks.items()}
    assert "jtv" in r.checks or "jvp" in r.checks, statuses
    if "jtv" in r.checks:
        assert r.checks["jtv"].status == "agree", statuses
    if "jvp" in r.checks:
        assert r.checks["jvp"].status == "agree", statuses
    sym = r.checks["symbolic"]
    if allow_skip and sym.status == "skipped":
        assert sym.reason, statuses
    else:
        assert sym.status == "agree", statuses
        assert r.symbolic is not None
    if "jacobian" in r.checks:
        assert r.checks["jacobian"].status == "agree", statuses


# ----------------------------------------------------------------------------- the table, float64
def test_table_size_and_coverage():
    assert len(CASES) >= 30
    programs = " ".join(c.program for c in CASES)
    for word in [
        "log",
        "exp",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "relu",
        "sqrt",
        "abs",
        "pow",
        "sum",
        "mean",
        "prod",
        "norm",
        "matmul",
        "mm",
        "transpose",
        ".t()",
        "softmax",
        "log_softmax",
        "detach",
        ".data",
        ".T",
        "@",
        "/",
        "**",
        "while",
        "for",
        "if",
        "else",
        "+=",
        "keepdim",
        "dim=(",
        "p=1",
    ]:
        assert word in programs, word
    assert any(c.consts for c in CASES) and any(c.output for c in CASES) and any(c.zero_grads for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_program_against_oracle_float64(case: Case):
    r, env, consts, out0, v = run_case(case, "float64")
    full_env = {**env, **consts}
    f = case_fn(case, full_env)
    out_shape = np.shape(out0)
    vv = np.ones(out_shape) if v is None else v

    # the inputs, v and the output are what the oracle thinks they are
    for n, a in full_env.items():
        assert np.array_equal(arr(r.inputs[n].value), a), f"input {n}: {r.inputs[n].value.tolist()} != {a.tolist()}"
        assert r.inputs[n].requires_grad == (n in env)
    assert sorted(r.leaves) == sorted(env)
    assert np.array_equal(arr(r.grad), vv)
    assert r.grad_source.startswith("default") == (v is None)
    assert_close(arr(r.output), out0, 1e-12, "output")

    mag = 1e-9 * magnitude(f, full_env, vv)
    closed = case.closed_grads(full_env, vv) if case.closed_grads else {}
    closed_j = case.closed_jac(full_env) if case.closed_jac else {}
    for leaf in env:
        want = fd_vjp(lambda e: f({**full_env, **e}), env, leaf, vv)
        got = arr(r.grads[leaf])
        assert_close(got, want, RTOL64, f"{case.id}: grad[{leaf}] (backward) vs finite differences", mag)
        assert r.symbolic is not None
        assert_close(arr(r.symbolic[leaf]), want, RTOL64, f"{case.id}: symbolic[{leaf}] vs finite differences", mag)
        if r.jtv[leaf] is not None:
            assert_close(arr(r.jtv[leaf]), want, RTOL64, f"{case.id}: jtv[{leaf}] vs finite differences", mag)
        if leaf in closed:
            assert_close(got, closed[leaf], 1e-9, f"{case.id}: grad[{leaf}] vs closed form")
        jac = r.jacobians[leaf]
        assert jac.shape == (*out_shape, *env[leaf].shape)
        if jac.value is not None:
            J = arr(jac.value)
            assert J.shape == jac.shape
            Jfd = fd_jacobian(lambda e: f({**full_env, **e}), env, leaf)
            assert_close(
                J,
                Jfd,
                RTOL64,
                f"{case.id}: Jacobian d{r.output_name}/d{leaf} vs finite differences",
                1e-9 * max(1.0, float(np.max(np.abs(out0)))),
            )
            if leaf in closed_j:
                assert_close(J, closed_j[leaf], 1e-9, f"{case.id}: Jacobian d/d{leaf} vs closed form")
        if leaf in case.zero_grads:
            assert np.array_equal(got, np.zeros(env[leaf].shape))
            assert jac.structure == "zero"
            if jac.value is not None:
                assert not arr(jac.value).any()
    for leaf in closed_j:
        assert leaf in env, f"closed-form Jacobian for a non-leaf {leaf}"
        assert r.jacobians[leaf].value is not None, f"{case.id}: Jacobian of {leaf} not materialised"
    assert set(r.jacobians) == set(env)  # --const inputs get no Jacobian
    # the JSON form carries the same (oracle-checked) numbers
    d = r.to_dict()
    for leaf in env:
        assert np.array_equal(np.asarray(event(d)["grads"][leaf], dtype=np.float64), arr(r.grads[leaf]))
    # last, so that a wrong number is reported against the oracle first: the tool's own checks agree
    check_statuses(r)


@pytest.mark.parametrize("calls", [1, 2])
def test_intermediate_grads_simple_chain(calls: int):
    """h = 2a, z = 3h with v = 1: the gradient reaching h is 3 per call, reaching z is v = 1 per call."""
    r = explore("h = a * 2\nz = h * 3", {"a": "1,2"}, grad="1,1", dtype="float64", backward_calls=calls)
    check_statuses(r)
    assert arr(r.grads["a"]).tolist() == [6.0 * calls, 6.0 * calls]
    assert arr(r.intermediates["h"].grad).tolist() == [3.0 * calls, 3.0 * calls]
    assert arr(r.intermediates["z"].grad).tolist() == [1.0 * calls, 1.0 * calls]


def test_intermediate_grads_closed_form_multi_statement():
    """The v that reaches an intermediate: d(output)/d(intermediate) contracted with v."""
    case = CASE_BY_ID["multi_statement"]
    r, env, _, _, _ = run_case(case, "float64")
    check_statuses(r)
    h = np.tanh(env["W"] @ env["x"] + env["b"])
    assert_close(arr(r.intermediates["h"].value), h, 1e-12, "h")
    # loss = z + mean(h*h), z = 2 sum(h): dloss/dh = 2 + 2h/3, dloss/dz = dloss/dloss = 1
    assert_close(arr(r.intermediates["h"].grad), 2 + 2 * h / 3, 1e-12, "h.grad")
    assert arr(r.intermediates["z"].grad).tolist() == 1.0
    assert arr(r.intermediates["loss"].grad).tolist() == 1.0


def test_intermediate_grads_closed_form_output_in_the_middle():
    case = CASE_BY_ID["output_middle_of_three"]
    r, env, _, _, v = run_case(case, "float64")
    check_statuses(r)
    h = np.exp(env["a"]) * env["b"]
    assert_close(arr(r.intermediates["h"].grad), 2 * h * v, 1e-12, "h.grad")  # z = h*h, output z
    assert_close(arr(r.intermediates["z"].grad), v, 0, "z.grad")
    assert r.intermediates["w"].grad is None  # computed after the output: no gradient reaches it


@pytest.mark.parametrize(("program", "want"), [("relu(x) * 3", [0.0, 3.0, 0.0]), ("abs(x) * 3", [0.0, 3.0, -3.0])])
def test_kinks_follow_torch_convention(program: str, want: list[float]):
    """Finite differences cannot decide a kink; the documented convention (derivative 0 at 0) can."""
    r = explore(program, {"x": "0,2,-1"}, grad="1,1,1", dtype="float64")
    check_statuses(r)
    assert arr(r.grads["x"]).tolist() == want
    assert arr(r.symbolic["x"]).tolist() == want


@pytest.mark.parametrize("n", [2, 30_000])  # the per-element route (sympy's numbers) and the elementwise one
def test_no_real_derivative_where_the_output_is_not_real(n: int):
    """(-1)**0.5 is not a real number: torch's forward gives nan, and so must the exact derivatives. sympy's
    complex-analytic ones read real at some of those points: d/db (-1)**b = (-1)**b * log(-1) = i * i*pi = -pi."""
    a = "-1,2" if n == 2 else f"full({n}, -1)"
    r = explore("a**b", {"a": a, "b": "0.5,0.5" if n == 2 else f"full({n}, 0.5)"}, grad="ones", dtype="float64")
    assert r.checks["symbolic"].status == "agree"
    assert r.checks["symbolic"].undefined[:2] == (("a[0]", "b[0]") if n == 2 else ("a[0]", "a[1]"))
    assert math.isnan(arr(r.symbolic["b"])[0]) and math.isnan(arr(r.symbolic["a"])[0])
    if n == 2:  # and where the output is real, the exact values stand
        assert arr(r.symbolic["b"])[1] == pytest.approx(2**0.5 * math.log(2), rel=1e-15)
        assert arr(r.symbolic["a"])[1] == pytest.approx(0.5 * 2**-0.5, rel=1e-15)


def test_real_domain_decides_where_sympy_may_answer():
    """log(-1) has no real derivative (sympy's 1/x reads -1 there); a negative base to an integer-valued float
    power is real (torch: (-1)**2.0 = 1, and d/da = b*a**(b-1) = -2), its derivative in the exponent is not."""
    r = explore("log(x)", {"x": "-1,2"}, grad="ones", dtype="float64")
    assert math.isnan(arr(r.symbolic["x"])[0]) and arr(r.symbolic["x"])[1] == 0.5
    assert arr(r.grads["x"]).tolist() == [-1.0, 0.5]  # torch's backward does not look at log(-1) = nan
    (note,) = [n for n in r.notes if n.code == "nan_output"]
    assert note.text.startswith("y[0] is nan (1 nan element(s) in y)")
    assert "nan_output" not in [n.code for n in explore("log(x)", {"x": "1,2"}, grad="ones").notes]
    r = explore("pow(a, b)", {"a": "-1", "b": "2"}, dtype="float64")
    assert float(arr(r.symbolic["a"])) == -2.0 == float(arr(r.grads["a"]))
    assert math.isnan(float(arr(r.symbolic["b"]))) and math.isnan(float(arr(r.grads["b"])))
    assert r.checks["symbolic"].status == "agree"


# ----------------------------------------------------------------------------- forward-mode routes
# torch's first forward-mode AD use in a process (torch.func.jacfwd, forward_ad.make_dual) imports
# decompositions that call the deprecated torch.jit.script: a DeprecationWarning, which this project's
# pytest config (filterwarnings=error) turns into an error. The strict table test above keeps that
# visible; the tests below check the numbers of those routes with only that one warning silenced.
JIT_WARNING = r".*torch\.jit\.script.* is deprecated"


def quiet_jit():
    cm = warnings.catch_warnings()
    cm.__enter__()
    warnings.filterwarnings("ignore", message=JIT_WARNING, category=DeprecationWarning)
    return cm


def check_against_fd(case: Case, r, env: Env, consts: Env, out0: np.ndarray, v: np.ndarray | None) -> None:
    full = {**env, **consts}
    f = case_fn(case, full)
    vv = np.ones(np.shape(out0)) if v is None else v
    mag = 1e-9 * magnitude(f, full, vv)
    for leaf in env:
        want = fd_vjp(lambda e: f({**full, **e}), env, leaf, vv)
        assert_close(arr(r.grads[leaf]), want, RTOL64, f"{case.id}: grad[{leaf}]", mag)
        assert_close(arr(r.symbolic[leaf]), want, RTOL64, f"{case.id}: symbolic[{leaf}]", mag)
        if r.jtv[leaf] is not None:
            assert_close(arr(r.jtv[leaf]), want, RTOL64, f"{case.id}: jtv[{leaf}]", mag)
        if r.jacobians[leaf].value is not None:
            Jfd = fd_jacobian(lambda e: f({**full, **e}), env, leaf)
            assert_close(
                arr(r.jacobians[leaf].value),
                Jfd,
                RTOL64,
                f"{case.id}: Jacobian d/d{leaf}",
                1e-9 * max(1.0, float(np.max(np.abs(out0)))),
            )
    check_statuses(r)


@pytest.mark.parametrize("case_id", ["jacfwd_outer_product", "jacrev_big_output"])
def test_torch_func_jacobian_numbers(case_id: str):
    case = CASE_BY_ID[case_id]
    cm = quiet_jit()
    try:
        r, env, consts, out0, v = run_case(case, "float64")
    finally:
        cm.__exit__(None, None, None)
    assert r.jacobians[next(iter(env))].method == ("jacfwd" if "jacfwd" in case_id else "jacrev")
    check_against_fd(case, r, env, consts, out0, v)


@pytest.mark.parametrize(
    "case_id",
    ["tanh_layer_W_leaf", "softmax_rows", "seed_formula", "multi_statement", "detach_other_leaf", "while_loop_randn"],
)
def test_not_materialised_jacobian_uses_jvp_check(case_id: str):
    """With a tiny Jacobian budget, dense blocks are not built: Jᵀv is checked by <u, Jᵀv> = <Ju, v>."""
    case = CASE_BY_ID[case_id]
    limits = Limits(**{**DEFAULT_LIMITS.__dict__, "jacobian_entries": 2})
    cm = quiet_jit()
    try:
        r, env, consts, out0, v = run_case(case, "float64", limits=limits)
    finally:
        cm.__exit__(None, None, None)
    dense = [n for n, j in r.jacobians.items() if j.structure == "dense"]
    for n in env:
        if r.jacobians[n].structure != "zero":
            assert r.jacobians[n].value is None
    if dense:
        assert "jvp" in r.checks and all(r.jtv[n] is None for n in dense)
    check_against_fd(case, r, env, consts, out0, v)


_FRESH_SCRIPT = r"""
import json, warnings
warnings.simplefilter("error")  # as this project's pytest config does (filterwarnings = error)
from vjp_explorer import explore
from vjp_explorer.limits import DEFAULT_LIMITS, Limits
route = %r
try:
    if route == "jvp":
        tiny = Limits(**{**DEFAULT_LIMITS.__dict__, "jacobian_entries": 2})
        r = explore("tanh(W @ x + b)", {"W": "[[0.2,-0.5],[0.7,0.1]]", "x": "0.5,-1", "b": "0.1,-0.2"},
                    grad="1,-2", dtype="float64", limits=tiny)
        print(json.dumps({"ok": True, "status": r.checks["jvp"].status}))
    else:
        r = explore("tanh(r * col)", {"r": "linspace(-1,1,10)", "col": "[[0.5],[1],[2],[3],[4],[5],[6],[7],[8],[9]]"},
                    grad="ones", dtype="float64")
        print(json.dumps({"ok": True, "status": r.checks["jtv"].status, "method": r.jacobians["r"].method}))
except Exception as e:
    print(json.dumps({"ok": False, "error": type(e).__name__ + ": " + str(e)}))
"""


@pytest.mark.parametrize("route", ["jvp", "jacfwd"])
def test_forward_mode_routes_raise_no_warning_in_a_fresh_process(route: str):
    """The first forward-mode use in a process must not surface torch's internal DeprecationWarning.

    Run in a fresh interpreter: inside this test session an earlier test may already have loaded
    torch's jvp decompositions, which hides the problem.
    """
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FRESH_SCRIPT % route], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"], f"route {route}: explore raised {got['error']}"
    assert got["status"] == "agree"


# ----------------------------------------------------------------------------- the oracle checks itself
@pytest.mark.parametrize("case", [c for c in CASES if c.closed_grads or c.closed_jac], ids=lambda c: c.id)
def test_closed_forms_match_finite_differences(case: Case):
    """No tool here: the hand-derived formulas and the finite differences are the same oracle twice."""
    env = {n: a for n, (_, a) in case.values.items()}
    full = {**env, **{n: a for n, (_, a) in case.consts.items()}}
    f = case_fn(case, full)
    out0 = f(full)
    v = choose_v(case.id, np.shape(out0))
    vv = np.ones(np.shape(out0)) if v is None else v
    for leaf, g in (case.closed_grads(full, vv) if case.closed_grads else {}).items():
        assert_close(g, fd_vjp(lambda e: f({**full, **e}), env, leaf, vv), RTOL64, f"closed grad {leaf}")
    for leaf, J in (case.closed_jac(full) if case.closed_jac else {}).items():
        assert_close(J, fd_jacobian(lambda e: f({**full, **e}), env, leaf), RTOL64, f"closed Jacobian {leaf}")


# ----------------------------------------------------------------------------- float32
@pytest.mark.parametrize("case_id", FLOAT32_IDS)
def test_program_against_oracle_float32(case_id: str):
    case = CASE_BY_ID[case_id]
    r, env, consts, out0, v = run_case(case, "float32")
    assert r.dtype == "float32"
    # the oracle runs in float64 at the float32-rounded inputs and v the tool actually used
    env32 = {n: arr(r.inputs[n].value) for n in env}
    full = {**env32, **{n: arr(r.inputs[n].value) for n in consts}}
    for n, a in {**env, **consts}.items():
        assert np.array_equal(full[n], a.astype(np.float32).astype(np.float64))
    vv = arr(r.grad)
    f = case_fn(case, full)
    check_statuses(r)
    assert_close(arr(r.output), f(full), RTOL32, f"{case_id}: float32 output")
    for leaf in env:
        want = fd_vjp(lambda e: f({**full, **e}), env32, leaf, vv)
        assert_close(arr(r.grads[leaf]), want, RTOL32, f"{case_id}: float32 grad[{leaf}] vs finite differences")
        assert_close(arr(r.symbolic[leaf]), want, RTOL32, f"{case_id}: float32 symbolic[{leaf}]")
        jac = r.jacobians[leaf]
        if jac.value is not None:
            Jfd = fd_jacobian(lambda e: f({**full, **e}), env32, leaf)
            assert_close(arr(jac.value), Jfd, RTOL32, f"{case_id}: float32 Jacobian d/d{leaf}")


# ----------------------------------------------------------------------------- backward_calls
def test_backward_calls_2_seed_example_4():
    r = explore("3*a + 2*b*b + torch.log(c)", {"a": "1", "b": "1", "c": "1"}, backward_calls=2, dtype="float64")
    # d/da = 3, d/db = 4b = 4, d/dc = 1/c = 1; two calls without zeroing accumulate twice that
    assert arr(r.grads["a"]).tolist() == 6.0
    assert arr(r.grads["b"]).tolist() == 8.0
    assert arr(r.grads["c"]).tolist() == 2.0
    assert r.backward_calls == 2
    assert any(n.code == "accumulated" for n in r.notes)
    check_statuses(r)


@pytest.mark.parametrize("case_id", ["seed_formula", "tanh_layer_W_leaf", "softmax_rows", "for_loop_power"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_backward_calls_2_is_exactly_twice(case_id: str, dtype: str):
    case = CASE_BY_ID[case_id]
    env = {n: a for n, (_, a) in case.values.items()}
    out0 = case_fn(case, env)(env)
    v = choose_v(case.id, np.shape(out0))
    kw = {"grad": None if v is None else fmt(v), "output": case.output, "dtype": dtype, "seed": case.seed}
    values = {n: text for n, (text, _) in case.values.items()}
    one = explore(case.program, values, backward_calls=1, **kw)
    two = explore(case.program, values, backward_calls=2, **kw)
    check_statuses(one)
    check_statuses(two)
    vv = np.ones(np.shape(out0)) if v is None else v
    f = case_fn(case, env)
    for leaf in env:
        g1, g2 = arr(one.grads[leaf]), arr(two.grads[leaf])
        assert np.array_equal(g2, 2 * g1), (leaf, g1.tolist(), g2.tolist())
        if dtype == "float64":
            assert_close(g2, 2 * fd_vjp(f, env, leaf, vv), RTOL64, f"2 calls: grad[{leaf}] vs 2 x finite differences")
            assert_close(arr(two.symbolic[leaf]), 2 * fd_vjp(f, env, leaf, vv), RTOL64, f"2 calls: symbolic[{leaf}]")
        # the Jacobian itself does not change with the number of calls
        if one.jacobians[leaf].value is not None:
            assert np.array_equal(arr(one.jacobians[leaf].value), arr(two.jacobians[leaf].value))


# ----------------------------------------------------------------------------- property test
SHAPES = {"s": (), "v3": (3,), "v2": (2,), "m": (2, 3), "k": (2, 1)}
LEAF_SHAPES = {"a": (3,), "b": (3,), "c": (2, 3)}
NUMBERS = [2, 3, 0.5, 1.5, -0.75, 0.25]
SAFE_UNARY = ["exp", "sin", "cos", "tanh", "sigmoid", "atan", "asinh", "erf"]  # smooth on all reals

style = st.integers(0, 2)
hoist = st.booleans()


@st.composite
def pos_expr(draw, shape: str, depth: int):
    """An expression that is positive (and so safe for log, sqrt, /, fractional powers)."""
    return ("pos", draw(st.sampled_from(["sq1", "exp", "sig"])), draw(expr(shape, depth)), draw(style), False)


@st.composite
def terminal(draw, shape: str):
    if shape == "v3":
        return ("leaf", draw(st.sampled_from(["a", "b"])))
    if shape == "m":
        return ("leaf", "c")
    if shape == "v2":
        if draw(st.booleans()):
            return ("matmul", ("leaf", "c"), ("leaf", draw(st.sampled_from(["a", "b"]))), draw(style), False)
        return (
            "red",
            draw(st.sampled_from(["sum", "mean"])),
            ("leaf", "c"),
            draw(st.sampled_from([1, -1])),
            False,
            draw(style),
            False,
        )
    if shape == "k":
        return (
            "red",
            draw(st.sampled_from(["sum", "mean"])),
            ("leaf", "c"),
            draw(st.sampled_from([1, -1])),
            True,
            draw(style),
            False,
        )
    # scalar
    leaf = draw(st.sampled_from(["a", "b", "c"]))
    return ("red", draw(st.sampled_from(["sum", "mean"])), ("leaf", leaf), None, False, draw(style), False)


@st.composite
def expr(draw, shape: str, depth: int):
    if depth <= 0 or shape == "k" or draw(st.integers(0, 3)) == 0:
        if shape == "k" and depth > 0 and draw(st.booleans()):
            return (
                "red",
                draw(st.sampled_from(["sum", "mean"])),
                draw(expr("m", depth - 1)),
                draw(st.sampled_from([1, -1])),
                True,
                draw(style),
                draw(hoist),
            )
        return draw(terminal(shape))
    d = depth - 1
    kinds = ["bin", "num", "div", "unary", "logsqrt", "powc", "powt", "neg"]
    kinds += {
        "m": ["bcast_v3", "bcast_s", "bcast_k", "softmax"],
        "v3": ["red_m", "bcast_s", "softmax", "vecmat", "tmat"],
        "v2": ["red_m", "matvec"],
        "s": ["red_any", "norm", "dot"],
    }[shape]
    kind = draw(st.sampled_from(kinds))
    h = draw(hoist)
    if kind == "bin":
        return ("bin", draw(st.sampled_from("+-*")), draw(expr(shape, d)), draw(expr(shape, d)), h)
    if kind == "num":
        n = ("num", draw(st.sampled_from(NUMBERS)))
        x = draw(expr(shape, d))
        op = draw(st.sampled_from("+-*"))
        return ("bin", op, n, x, h) if draw(st.booleans()) else ("bin", op, x, n, h)
    if kind == "div":
        if draw(st.booleans()):
            return ("bin", "/", draw(expr(shape, d)), draw(pos_expr(shape, d)), h)
        return ("bin", "/", ("num", draw(st.sampled_from([1, 2.5]))), draw(pos_expr(shape, d)), h)
    if kind == "unary":
        return ("un", draw(st.sampled_from(SAFE_UNARY)), draw(expr(shape, d)), draw(style), h)
    if kind == "logsqrt":
        return ("un", draw(st.sampled_from(["log", "sqrt"])), draw(pos_expr(shape, d)), draw(style), h)
    if kind == "powc":
        k = draw(st.sampled_from([2, 3, 0.5, -1, 1.5]))
        base = draw(expr(shape, d)) if k in (2, 3) else draw(pos_expr(shape, d))
        return ("powc", base, k, draw(style), h)
    if kind == "powt":
        return ("powt", draw(pos_expr(shape, d)), draw(expr(shape, d)), draw(st.booleans()), h)
    if kind == "neg":
        return ("neg", draw(expr(shape, d)), h)
    if kind == "bcast_v3":
        x, y = draw(expr("m", d)), draw(expr("v3", d))
        return ("bin", draw(st.sampled_from("+-*")), *((x, y) if draw(st.booleans()) else (y, x)), h)
    if kind == "bcast_s":
        x, y = draw(expr(shape, d)), draw(expr("s", d))
        return ("bin", draw(st.sampled_from("+-*")), *((x, y) if draw(st.booleans()) else (y, x)), h)
    if kind == "bcast_k":
        return ("bin", draw(st.sampled_from("+-*")), draw(expr("m", d)), draw(expr("k", d)), h)
    if kind == "softmax":
        dims = [0, 1, -1] if shape == "m" else [0, -1]
        return (
            "softmax",
            draw(st.sampled_from(["softmax", "log_softmax"])),
            draw(expr(shape, d)),
            draw(st.sampled_from(dims)),
            draw(style),
            h,
        )
    if kind == "red_m":
        dims = [0, -2] if shape == "v3" else [1, -1]
        return (
            "red",
            draw(st.sampled_from(["sum", "mean"])),
            draw(expr("m", d)),
            draw(st.sampled_from(dims)),
            False,
            draw(style),
            h,
        )
    if kind == "vecmat":  # (2,) @ (2,3)
        return ("matmul", draw(expr("v2", d)), draw(expr("m", d)), draw(style), h)
    if kind == "tmat":  # (2,3).T @ (2,)
        return ("matmul", ("T", draw(expr("m", d)), draw(style)), draw(expr("v2", d)), draw(style), h)
    if kind == "matvec":  # (2,3) @ (3,)
        return ("matmul", draw(expr("m", d)), draw(expr("v3", d)), draw(style), h)
    if kind == "red_any":
        src = draw(st.sampled_from(["v3", "m", "v2"]))
        f = draw(st.sampled_from(["sum", "mean", "prod"] if src != "m" else ["sum", "mean"]))
        return ("red", f, draw(expr(src, d)), None, False, draw(style), h)
    if kind == "norm":
        return (
            "norm",
            draw(pos_expr(draw(st.sampled_from(["v3", "m"])), d)),
            draw(st.sampled_from([None, 1, 2, 3])),
            draw(style),
            h,
        )
    if kind == "dot":
        return ("matmul", draw(expr("v3", d)), draw(expr("v3", d)), draw(style), h)
    raise AssertionError(kind)


def np_eval(node, env: Env) -> np.ndarray:
    """The oracle: evaluate a tree with numpy."""
    t = node[0]
    if t == "leaf":
        return env[node[1]]
    if t == "num":
        return np.float64(node[1])
    if t == "bin":
        a, b = np_eval(node[2], env), np_eval(node[3], env)
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[node[1]](a, b)
    if t == "neg":
        return -np_eval(node[1], env)
    if t == "pos":
        x = np_eval(node[2], env)
        return {"sq1": lambda: x * x + 1, "exp": lambda: np.exp(x), "sig": lambda: sigmoid(x) + 0.5}[node[1]]()
    if t == "un":
        x = np_eval(node[2], env)
        return {
            "exp": np.exp,
            "sin": np.sin,
            "cos": np.cos,
            "tanh": np.tanh,
            "sigmoid": sigmoid,
            "atan": np.arctan,
            "asinh": np.arcsinh,
            "erf": np.vectorize(math.erf, otypes=[float]),
            "log": np.log,
            "sqrt": np.sqrt,
        }[node[1]](x)
    if t == "powc":
        return np_eval(node[1], env) ** float(node[2])
    if t == "powt":
        return np_eval(node[1], env) ** np_eval(node[2], env)
    if t == "red":
        x = np_eval(node[2], env)
        fn = {"sum": np.sum, "mean": np.mean, "prod": np.prod}[node[1]]
        return fn(x, axis=node[3], keepdims=node[4])
    if t == "norm":
        return pnorm(np_eval(node[1], env), 2.0 if node[2] is None else float(node[2]))
    if t == "softmax":
        x = np_eval(node[2], env)
        return (softmax if node[1] == "softmax" else log_softmax)(x, node[3])
    if t == "matmul":
        return np_eval(node[1], env) @ np_eval(node[2], env)
    if t == "T":
        return np_eval(node[1], env).T
    raise AssertionError(t)


def render(node, stmts: list[str]) -> str:
    """Program text for a tree; hoisted nodes become assignments `tK = ...`."""
    t = node[0]
    if t == "leaf":
        return node[1]
    if t == "num":
        return repr(node[1]) if node[1] >= 0 else f"({node[1]!r})"
    if t == "T":
        x = render(node[1], stmts)
        return [f"{x}.T", f"{x}.t()", f"transpose({x}, 0, 1)"][node[2]]
    if t == "pos":
        x = render(node[2], stmts)
        text = {"sq1": f"({x} * {x} + 1)", "exp": f"exp({x})", "sig": f"(sigmoid({x}) + 0.5)"}[node[1]]
        return text
    if t == "bin":
        text = f"({render(node[2], stmts)} {node[1]} {render(node[3], stmts)})"
    elif t == "neg":
        text = f"(-{render(node[1], stmts)})"
    elif t == "un":
        x = render(node[2], stmts)
        text = [f"{node[1]}({x})", f"torch.{node[1]}({x})", f"{x}.{node[1]}()"][node[3]]
    elif t == "powc":
        x, k = render(node[1], stmts), node[2]
        text = [f"({x} ** ({k!r}))", f"pow({x}, {k!r})", f"{x}.pow({k!r})"][node[3]]
    elif t == "powt":
        x, y = render(node[1], stmts), render(node[2], stmts)
        text = f"torch.pow({x}, {y})" if node[3] else f"({x} ** {y})"
    elif t == "red":
        x = render(node[2], stmts)
        args = [] if node[3] is None else [f"dim={node[3]}"]
        if node[4]:
            args.append("keepdim=True")
        a = ", ".join(args)
        full = ", ".join([x, *args])
        text = [f"{x}.{node[1]}({a})", f"{node[1]}({full})", f"torch.{node[1]}({full})"][node[5]]
    elif t == "norm":
        x = render(node[1], stmts)
        p = "" if node[2] is None else f"p={node[2]}"
        text = [
            f"{x}.norm({p})",
            f"norm({', '.join([x] + ([p] if p else []))})",
            f"torch.norm({', '.join([x] + ([p] if p else []))})",
        ][node[3]]
    elif t == "softmax":
        x = render(node[2], stmts)
        text = [
            f"{node[1]}({x}, dim={node[3]})",
            f"{x}.{node[1]}(dim={node[3]})",
            f"torch.{node[1]}({x}, dim={node[3]})",
        ][node[4]]
    elif t == "matmul":
        x, y = render(node[1], stmts), render(node[2], stmts)
        text = [f"({x} @ {y})", f"matmul({x}, {y})", f"{x}.matmul({y})"][node[3]]
    else:
        raise AssertionError(t)
    if node[-1] is True:  # hoist into an intermediate
        name = f"t{len(stmts)}"
        stmts.append(f"{name} = {text}")
        return name
    return text


def leaves_of(node) -> set[str]:
    if node[0] == "leaf":
        return {node[1]}
    out: set[str] = set()
    for x in node[1:]:
        if isinstance(x, tuple):
            out |= leaves_of(x)
    return out


@st.composite
def programs(draw):
    shape = draw(st.sampled_from(["v3", "m", "s", "v2"]))
    tree = draw(expr(shape, draw(st.integers(1, 3))))
    stmts: list[str] = []
    final = render(tree, stmts)
    last = draw(st.sampled_from(["bare", "assign"]))
    stmts.append(final if last == "bare" else f"y = {final}")
    sep = draw(st.sampled_from(["\n", "; "]))
    seed = draw(st.integers(0, 2**32 - 1))
    return tree, sep.join(stmts), SHAPES[shape], seed


# derandomize: the same 60 programs every run (no flaky CI); the explicit examples are regressions found by
# the random search (a reduction or transpose of a leaf straight to the output: aliased one-hot Jacobian rows)
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
@example((("red", "sum", ("leaf", "c"), 1, False, 0, False), "c.sum(dim=1)", (2,), 0))
@example((("T", ("leaf", "c"), 0), "c.T", (3, 2), 1))
@example(
    (
        ("bin", "*", ("leaf", "a"), ("red", "mean", ("leaf", "c"), 0, False, 1, True), False),
        "t0 = mean(c, dim=0)\ny = (a * t0)",
        (3,),
        2,
    )
)
def test_random_programs_against_oracle(prog):
    tree, text, out_shape, seed = prog
    rng = np.random.default_rng(seed)
    names = sorted(leaves_of(tree))
    env = {n: np.round(rng.uniform(-1, 1, size=LEAF_SHAPES[n]), 3) for n in names}
    f = lambda e: np.asarray(np_eval(tree, e), dtype=np.float64)  # noqa: E731
    try:
        with np.errstate(all="raise"):
            out0 = f(env)
    except FloatingPointError:  # overflow in the generated values: not a program to test
        return
    assert np.shape(out0) == out_shape, (text, np.shape(out0))
    if not np.all(np.isfinite(out0)) or np.max(np.abs(out0)) > 1e8:
        return
    v = np.round(rng.normal(size=out_shape), 3) if math.prod(out_shape) > 1 else None
    r = explore(text, {n: fmt(a) for n, a in env.items()}, grad=None if v is None else fmt(v), dtype="float64")
    vv = np.ones(out_shape) if v is None else v
    ctx = f"\nprogram:\n{text}\nvalues: { {n: a.tolist() for n, a in env.items()} }\nv: {vv.tolist()}"
    assert_close(arr(r.output), out0, 1e-10, "output" + ctx)
    mag = 1e-9 * magnitude(f, env, vv)
    for leaf in names:
        want = fd_vjp(f, env, leaf, vv)
        assert_close(arr(r.grads[leaf]), want, RTOL64, f"grad[{leaf}] vs finite differences" + ctx, mag)
        assert_close(arr(r.symbolic[leaf]), want, RTOL64, f"symbolic[{leaf}] vs finite differences" + ctx, mag)
        if r.jtv[leaf] is not None:
            assert_close(arr(r.jtv[leaf]), want, RTOL64, f"jtv[{leaf}] vs finite differences" + ctx, mag)
        if r.jacobians[leaf].value is not None:
            J = arr(r.jacobians[leaf].value)
            Jfd = fd_jacobian(f, env, leaf)
            assert_close(
                J,
                Jfd,
                RTOL64,
                f"Jacobian d/d{leaf} vs finite differences" + ctx,
                1e-9 * max(1.0, float(np.max(np.abs(out0)))),
            )
    check_statuses(r)
