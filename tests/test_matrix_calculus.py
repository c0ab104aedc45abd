"""The matrix-calculus route of the symbolic check: sympy's array_derive on MatrixSymbols, evaluated with einsum.

Its numbers are checked against the independent oracles of test_oracle (hand-written numpy evaluators
differentiated by finite differences, and closed forms), and its einsum evaluator against sympy's own
explicit, element-by-element expansion of the same array expressions.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch
from sympy.matrices.expressions.applyfunc import ElementwiseApplyFunction
from sympy.tensor.array.expressions import convert_matrix_to_array
from sympy.tensor.array.expressions.arrayexpr_derivatives import array_derive

from documents import event
from oracle_programs import CASES, Case
from test_oracle import RTOL64, arr, assert_close, case_fn, fd_vjp, magnitude, run_case
from vjp_explorer import explore
from vjp_explorer.engine.matrix_einsum import Evaluator
from vjp_explorer.limits import Limits

# per-element sympy turned off (a budget of one derivative): every program that is not elementwise goes
# to matrix calculus, whatever its size
FORCE = Limits(symbolic_entries=1)

# oracle programs matrix calculus must follow (0-d, 1-d and 2-d values; matmul, transposes, sums and means,
# broadcasting, detach, elementwise functions and their products)
MATRIX_IDS = {
    "broadcast_row_times_column", "broadcast_scalar_times_matrix", "broadcast_matrix_plus_vector",
    "matmul_matrix_vector", "matmul_vector_matrix", "matmul_matrix_matrix", "matmul_functions",
    "matmul_vector_vector", "tanh_layer_W_leaf", "tanh_layer_W_const", "transpose_T_matmul",
    "transpose_functions", "transpose_direct_output", "sum_dim_direct_output", "sum_dim0_keepdim_direct_output",
    "sum_dim1", "sum_keepdim_broadcast", "sum_all_keepdim", "mean_all_and_dim", "mean_keepdim", "detach_method",
    "data_attribute", "detach_other_leaf", "multi_statement", "output_intermediate",
    "output_intermediate_loss_default_v", "output_middle_of_three", "gen_ones_eye", "gen_eye3",
    "jacrev_big_output", "dot_broadcast", "abs_sum_scalar", "scalar_leaf_with_vector", "jacfwd_outer_product",
    "norm_p2_default", "norm_p1", "norm_p3", "norm_dim", "norm_dim_keepdim_p1",
    "random_inputs_in_program_order", "gen_eye_rect_arange_step", "keepdim_leaf_shape_1",
}  # fmt: skip


def test_matrix_ids_are_oracle_cases():
    assert MATRIX_IDS <= {c.id for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_forced_matrix_route_against_the_oracle(case: Case):
    r, env, consts, out0, v = run_case(case, "float64", limits=FORCE)
    sym = r.checks["symbolic"]
    routed = "matrix calculus" in sym.compares
    if case.id in MATRIX_IDS:
        assert routed and sym.status == "agree", (sym.status, sym.reason)
    if not routed:
        # elementwise programs keep their own route; the rest say why matrix calculus could not follow them
        assert "elementwise" in sym.compares or "matrix calculus cannot follow" in (sym.reason or ""), sym.reason
        return
    full_env = {**env, **consts}
    f = case_fn(case, full_env)
    vv = np.ones(np.shape(out0)) if v is None else v
    mag = 1e-9 * magnitude(f, full_env, vv)
    assert r.symbolic is not None
    for leaf in env:
        want = fd_vjp(lambda e: f({**full_env, **e}), env, leaf, vv)
        assert_close(
            arr(r.symbolic[leaf]), want, RTOL64, f"{case.id}: matrix calculus [{leaf}] vs finite differences", mag
        )


HARD = [
    # (program, a numpy evaluator of it); x is a leaf (4,), W a leaf (4, 4)
    ("W@x/(1+x*x) - 2**x", lambda W, x: W @ x / (1 + x * x) - 2**x),
    ("tanh(W@x) * exp(W@x) + x*x*x", lambda W, x: np.tanh(W @ x) * np.exp(W @ x) + x**3),
    ("x*(W@x)*x - 1/x", lambda W, x: x * (W @ x) * x - 1 / x),
    ("relu(W.t()@x - 0.5) ** 3 + abs(W@x)", lambda W, x: np.maximum(W.T @ x - 0.5, 0) ** 3 + np.abs(W @ x)),
    ("sigmoid(W@x) * (1 - sigmoid(W@x))", lambda W, x: 1 / (1 + np.exp(-W @ x)) * (1 - 1 / (1 + np.exp(-W @ x)))),
    ("exp(W@tanh(W@x) + x).mean(dim=0)", lambda W, x: np.exp(W @ np.tanh(W @ x) + x).mean(axis=0)),
    ("x@W@x * (W*W).sum(dim=1)", lambda W, x: (x @ W @ x) * (W * W).sum(axis=1)),
    # a constant added inside a function: sympy 1.14 dropped the shift from d/dt exp(t + 1) (patched)
    ("relu(W@x - 0.5) + exp(W@x + 1)", lambda W, x: np.maximum(W @ x - 0.5, 0) + np.exp(W @ x + 1)),
    ("sin(2*x + 1) @ W + exp(W + 1) @ x", lambda W, x: np.sin(2 * x + 1) @ W + np.exp(W + 1) @ x),
    # chained products of one matrix: sympy writes W@W as a power, and fails to convert a power of a transpose
    ("x@W@W + (W@W).T@x + W.T@W.T@x", lambda W, x: x @ W @ W + (W @ W).T @ x + W.T @ W.T @ x),
    # too deep for sympy as one expression: differentiated step by step
    ("tanh(W@tanh(W@tanh(W@x)))", lambda W, x: np.tanh(W @ np.tanh(W @ np.tanh(W @ x)))),
    ("tanh(x*(W@x)) + (x*exp(W@x))**0.5", lambda W, x: np.tanh(x * (W @ x)) + (x * np.exp(W @ x)) ** 0.5),
    (
        "norm(W@x) * x + W.norm(dim=1, p=3)",
        lambda W, x: np.sqrt(np.sum((W @ x) ** 2)) * x + np.sum(np.abs(W) ** 3, 1) ** (1 / 3),
    ),
    (
        "(W/x) @ (x**2.5) + W.sum(dim=0, keepdim=True) @ x",
        lambda W, x: (W / x) @ (x**2.5) + W.sum(0, keepdims=True) @ x,
    ),
]
X4 = np.array([0.6, 1.3, 0.45, 2.1])
W44 = np.array([[0.3, -0.8, 0.5, 0.1], [1.1, 0.2, -0.4, 0.7], [-0.6, 0.9, 0.25, -0.3], [0.4, -0.1, 0.8, 0.55]])


@pytest.mark.parametrize(("program", "fn"), HARD, ids=[p for p, _ in HARD])
def test_programs_sympy_alone_cannot_differentiate(program, fn):
    """Products and quotients of elementwise functions, fused into one formula per base and split over sums."""
    out = np.asarray(fn(W44, X4))
    v = np.linspace(-1, 1, out.size).reshape(out.shape) + 0.3
    r = explore(
        program,
        {"x": str(X4.tolist()), "W": str(W44.tolist())},
        grad=str(v.tolist()),
        dtype="float64",
        limits=FORCE,
    )
    sym = r.checks["symbolic"]
    assert "matrix calculus" in sym.compares and sym.status == "agree", (sym.status, sym.reason)
    env = {"x": X4, "W": W44}
    for leaf in env:
        want = fd_vjp(lambda e: fn(e["W"], e["x"]), env, leaf, v)
        assert_close(arr(r.symbolic[leaf]), want, RTOL64, f"{program}: [{leaf}] vs finite differences")


def test_evaluator_matches_sympys_explicit_expansion():
    """The einsum evaluation of array_derive's output (identities as equal labels, diagonals, permutations)
    against sympy's own element-by-element expansion of the same expression, with the values substituted."""
    rng = np.random.default_rng(7)
    x, v = sp.MatrixSymbol("x", 3, 1), sp.MatrixSymbol("v", 3, 1)
    W, A = sp.MatrixSymbol("W", 3, 2), sp.MatrixSymbol("A", 2, 3)
    t = sp.Dummy("t", real=True)

    def f(fn, m):
        return ElementwiseApplyFunction(sp.Lambda(t, fn(t)), m)

    values = {"x": rng.normal(size=(3, 1)), "v": rng.normal(size=(3, 1)), "W": rng.normal(size=(3, 2))}
    values["A"] = rng.normal(size=(2, 3))
    programs = [  # single terms: the route differentiates a sum term by term
        f(sp.tanh, W * A * x),
        sp.HadamardProduct(f(sp.exp, W * A * x), x),
        W * (A * x),
        (W * A).T * f(sp.sin, x),
        sp.HadamardProduct(f(sp.tanh, W * A * x), f(sp.cos, W * A * x)),
        W * f(sp.exp, A * x),
        sp.HadamardProduct(f(sp.exp, W * A * x), W * A * x),
    ]
    subs = {
        sp.MatrixSymbol(n, *a.shape)[i, j]: sp.Float(a[i, j], 30)
        for n, a in values.items()
        for i, j in np.ndindex(a.shape)
    }
    tensors = {n: torch.tensor(a, dtype=torch.float64) for n, a in values.items()}
    checked = 0
    for y in programs:
        loss = convert_matrix_to_array(sp.Trace(v.T * y))
        for leaf in (x, W, A):
            d = array_derive(loss, leaf)
            got = Evaluator(tensors, 10**6).tensor(d).reshape(leaf.shape).numpy()
            explicit = sp.Array(d.as_explicit()).reshape(*leaf.shape)
            want = np.array(
                [[float(explicit[i, j].xreplace(subs)) for j in range(leaf.shape[1])] for i in range(leaf.shape[0])]
            )
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            checked += 1
    assert checked == 21


def test_a_loop_of_layers_is_carried_back_step_by_step():
    prog = "h = x\nfor i in range(4):\n    h = tanh(W @ h + 0.1 * i)"
    r = explore(prog, {"x": str(X4.tolist()), "W": str(W44.tolist())}, grad="ones", dtype="float64", limits=FORCE)
    sym = r.checks["symbolic"]
    assert sym.status == "agree" and "step by step" in sym.compares, (sym.status, sym.reason)

    def f(W, x):
        h = x
        for i in range(4):
            h = np.tanh(W @ h + 0.1 * i)
        return h

    env = {"x": X4, "W": W44}
    for leaf in env:
        want = fd_vjp(lambda e: f(e["W"], e["x"]), env, leaf, np.ones(4))
        assert_close(arr(r.symbolic[leaf]), want, RTOL64, f"loop: [{leaf}] vs finite differences")


@pytest.mark.parametrize(
    "program",
    [
        "(x@W@W).detach()*x + W@x",
        "((W@x)/0).detach() + W@x",
        "x + (1/(2+tanh(exp(x.sum())))).data",
        "1/(1.5+tanh(sigmoid(x.sum()**2)))",  # sympy cannot write a function of this 1 x 1 value out
    ],
)
def test_what_sympy_cannot_build_is_a_skip_not_a_crash(vjp, program):
    import json

    args = ["--x", "1,-2,3", "--grad", "ones", "--dtype", "float64", "--limit", "symbolic_entries=1", "--json"]
    if "W" in program:
        args += ["--W", "[[1,2,0.5],[0.3,-1,2],[0.1,0.2,-0.7]]"]
    res = vjp("run", program, *args)
    assert res.exit_code == 0, res.stderr
    assert event(json.loads(res.stdout))["checks"]["symbolic"]["status"] in ("agree", "skipped")
    assert "Warning" not in res.stderr


def test_evaluator_counts_an_identity_summed_over():
    from sympy.tensor.array.expressions import ArrayContraction, ArrayTensorProduct

    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    i3 = sp.Identity(3)
    A = sp.MatrixSymbol("A", 2, 2)
    assert float(Evaluator({}, 100).tensor(ArrayContraction(i3, (0, 1)))) == 3.0
    got = Evaluator({"A": a}, 100).tensor(ArrayContraction(ArrayTensorProduct(i3, A), (0, 1)))
    assert torch.equal(got, 3 * a)


def test_dense_layer_past_the_per_element_budget_float32():
    """At n = 1500 per-element sympy is far out of budget and J is not built: matrix calculus checks Jᵀv,
    with the size of its terms as the float32 scale, and matches the closed form."""
    n = 1500
    r = explore(
        "tanh(W @ x + b)",
        {"x": f"linspace(-1, 1, {n})", "b": f"linspace(0, 0.5, {n})"},
        consts={"W": f"randn({n}, {n})"},
        grad="ones",
        seed=3,
        limits=Limits(jacobian_entries=1000),
    )
    sym = r.checks["symbolic"]
    assert r.jacobians["x"].value is None
    assert "matrix calculus" in sym.compares and sym.status == "agree", (sym.status, sym.reason)
    W = arr(r.inputs["W"].value)
    x, b = arr(r.inputs["x"].value), arr(r.inputs["b"].value)
    s = 1 - np.tanh(W @ x + b) ** 2
    np.testing.assert_allclose(arr(r.symbolic["x"]), W.T @ s, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(arr(r.symbolic["b"]), s, rtol=1e-9, atol=1e-12)


def test_what_matrix_calculus_cannot_follow_is_skipped_with_both_reasons():
    r = explore(
        "softmax(W @ x, dim=0)", {"x": "linspace(0, 1, 300)"}, consts={"W": "randn(300, 300)"}, seed=0, grad="ones"
    )
    sym = r.checks["symbolic"]
    assert sym.status == "skipped"
    assert "too large" in (sym.reason or "") and "matrix calculus cannot follow this program: the function softmax" in (
        sym.reason or ""
    )
    assert r.exit_code == 0


def test_cli_reports_the_route(vjp):
    import json

    res = vjp(
        "run", "tanh(W@x)", "--x", "linspace(-1,1,400)", "--const", "W=randn(400,400)", "--grad", "ones", "--json"
    )
    assert res.exit_code == 0, res.stderr
    sym = event(json.loads(res.stdout))["checks"]["symbolic"]
    assert sym["status"] == "agree" and "matrix calculus" in sym["compares"]


def test_a_shift_inside_a_kink_keeps_its_place():
    """relu(W@x - 0.5): the first row sits at 0.2 - 0.5 < 0, so its derivative is 0 (sympy 1.14 alone gave 1)."""
    r = explore("relu(W@x - 0.5)", {"W": "[[0.1,0.1],[1,1]]", "x": "1,1"}, grad="1,1", dtype="float64", limits=FORCE)
    assert r.checks["symbolic"].status == "agree"
    assert arr(r.symbolic["W"]).tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert arr(r.symbolic["x"]).tolist() == [1.0, 1.0]


def test_a_long_loop_with_reuse_goes_straight_to_step_by_step():
    """h used twice per iteration: one expression would grow as 2**10; step by step it is 30 small pieces."""
    prog = "h = x\nfor i in range(10):\n    h = tanh(W@h)*h + sin(W@h)"
    W3 = [[0.3, 0.2, 0.5], [0.3, -0.1, 0.2], [0.1, 0.2, -0.7]]
    r = explore(prog, {"x": "1,-2,3", "W": str(W3)}, grad="0.1,1,0.0001", dtype="float64", limits=FORCE)
    sym = r.checks["symbolic"]
    assert sym.status == "agree" and "step by step" in sym.compares, (sym.status, sym.reason)
    assert r.timings["symbolic"] < 8


def test_saturated_tanh_is_checked_at_the_scale_of_its_rounding():
    """1 - tanh(u)**2 where tanh saturates is computed from numbers of size 1 + tanh(u)**2, in autograd and in
    the route alike: the tolerance takes that scale, so a deep random residual net agrees in float64."""
    prog = "h = x\nfor i in range(4):\n    h = tanh(W@h)*h + h"
    r = explore(prog, {"x": "randn(200)", "W": "randn(200,200)"}, seed=1, grad="ones", dtype="float64")
    sym = r.checks["symbolic"]
    assert "matrix calculus" in sym.compares
    assert sym.status == "agree", (sym.max_rel_diff, sym.worst)


def test_saturated_sigmoid_is_checked_at_the_scale_of_its_rounding():
    """torch computes sigmoid'(u) as s*(1 - s); where s saturates at 1 that rounds at the size of s. A random
    150-wide sigmoid layer (|x@W| up to about 40) used to give a false exit 3 in float32."""
    r = explore(
        "sigmoid(x@W)*x + b", {"x": "randn(150)", "W": "randn(150,150)", "b": "randn(150)"}, seed=11, grad="ones"
    )
    sym = r.checks["symbolic"]
    assert "matrix calculus" in sym.compares
    assert sym.status == "agree", (sym.max_rel_diff, sym.worst)
