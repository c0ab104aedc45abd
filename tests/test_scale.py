"""Sizes: the Jacobian strategy, budgets that degrade gracefully, the structure-aware symbolic route, devices."""

from __future__ import annotations

import json
import math

import pytest
import torch

from documents import per_leaf
from vjp_explorer import explore
from vjp_explorer.engine.compare import TOLERANCES
from vjp_explorer.limits import Limits
from vjp_explorer.render import json_out


def test_strategy_is_chosen_by_structure_then_size():
    r = explore(
        "y = 3*a + W @ b + 0*c.sum()",
        {"a": "ones(3)", "b": "ones(2)", "c": "ones(2)"},
        consts={"W": "ones(3,2)"},
        grad="ones",
    )
    assert r.jacobians["a"].method == "diagonal"
    assert r.jacobians["b"].method == "autograd.grad rows"
    assert r.jacobians["c"].structure == "dense"  # 0*c.sum() still depends on c in the graph
    assert all(c.status == "agree" for c in r.checks.values())
    z = explore("u = c * 2; y = a * a", {"a": "1,2", "c": "1,2"}, grad="ones")
    assert z.jacobians["c"].method == "zero" and z.grads["c"].tolist() == [0.0, 0.0]


def test_large_dense_uses_torch_func_reverse_and_forward():
    r = explore(
        "torch.tanh(W @ x)",
        {"x": "linspace(0, 1, 100)"},
        consts={"W": "randn(80, 100)"},
        seed=1,
        grad="ones",
        dtype="float64",
        symbolic=False,
    )
    assert r.jacobians["x"].method == "jacrev"
    assert r.checks["jtv"].status == "agree"
    r = explore(
        "torch.tanh(W @ x)",
        {"x": "linspace(0, 1, 70)"},
        consts={"W": "randn(100, 70)"},
        seed=1,
        grad="ones",
        dtype="float64",
        symbolic=False,
    )
    assert r.jacobians["x"].method == "jacfwd"
    assert r.checks["jtv"].status == "agree"


def test_beyond_the_budget_j_is_null_and_jvp_checks_backward():
    r = explore(
        "torch.tanh(W @ x)",
        {"x": "linspace(0, 1, 100)"},
        consts={"W": "randn(100, 100)"},
        seed=2,
        grad="ones",
        limits=Limits(jacobian_entries=1000),
    )
    j = r.jacobians["x"]
    assert j.value is None and j.method == "not materialised" and "budget" in (j.reason or "")
    assert r.jtv["x"] is None
    assert r.checks["jvp"].status == "agree"
    d = r.to_dict()
    assert per_leaf(d, "jacobian")["x"]["value"] is None and per_leaf(d, "jacobian")["x"]["reason"]
    json.dumps(d, allow_nan=False)


def test_big_elementwise_keeps_the_diagonal_and_checks_symbolically():
    n = 200_000
    r = explore("3*a + 2*b*b + torch.log(c)", dict.fromkeys("abc", f"linspace(1, 2, {n})"), grad="ones")
    for leaf in "abc":
        j = r.jacobians[leaf]
        assert j.structure == "diagonal" and j.value is None and j.diagonal is not None
    sym = r.checks["symbolic"]
    assert sym.status == "agree" and "elementwise" in sym.compares
    assert r.symbolic is not None and r.symbolic["c"].shape == (n,)
    assert r.checks["jtv"].status == "agree"
    # d/da = 3 at every element (a constant, never evaluated element by element): the values and the summary
    a = r.symbolic["a"]
    assert list(a.flat) == [3.0] * n and (a.stats.min, a.stats.max) == (3.0, 3.0)
    assert a.stats.norm == pytest.approx(3 * math.sqrt(n), rel=1e-15)
    assert (
        per_leaf(json.loads(json_out.dumps(r, full=True)), "symbolic")["a"] == [3.0] * n
    )  # streamed in chunks: the same list


@pytest.mark.parametrize("calls", [1, 2])
def test_the_elementwise_routes_jtv_reads_as_the_closed_form(calls):
    """Past the per-element budget Jᵀv is evaluated chunk by chunk into one float64 array per leaf: its
    values, its summary and its JSON are those of the closed form (4b and 1/c, from the float32 inputs
    widened exactly), times the number of backward calls."""
    n = 300_001
    r = explore(
        "3*a + 2*b*b + torch.log(c)", dict.fromkeys("abc", f"linspace(1, 2, {n})"), grad="ones", backward_calls=calls
    )
    assert "elementwise" in r.checks["symbolic"].compares and r.checks["symbolic"].status == "agree"
    x = torch.linspace(1, 2, n).double()
    want = {"b": 4 * x * calls, "c": calls / x}
    assert r.symbolic is not None
    for leaf, w in want.items():
        td = r.symbolic[leaf]
        assert td.shape == (n,)
        assert (td.flat[0], td.flat[n // 2], td.flat[-1]) == (float(w[0]), float(w[n // 2]), float(w[-1]))
        assert torch.equal(torch.tensor(list(td.flat), dtype=torch.float64), w)
        assert (td.stats.min, td.stats.max) == (float(w.min()), float(w.max()))
        assert td.stats.norm == pytest.approx(float(w.norm()), rel=1e-13)
    assert per_leaf(json.loads(json_out.dumps(r, full=True)), "symbolic")["c"] == want["c"].tolist()


def test_a_constant_derivative_that_autograd_misses_is_a_disagreement_even_on_the_shortcut(monkeypatch):
    """The constant route's shortcut (one pass over the grad) must still see a grad that is off."""
    from vjp_explorer.stages import exact

    n = 200_000
    real = exact.symbolic_route

    def shifted(*args):  # the exact Jᵀv of a made 3.5 at one element: the grad (3) is off there
        sym, grads, reason, sizes = real(*args)
        grads["a"] = grads["a"].clone()
        grads["a"][123_456] = 3.5
        return sym, grads, reason, sizes

    monkeypatch.setattr(exact, "symbolic_route", shifted)
    r = explore("3*a + 2*b*b + torch.log(c)", dict.fromkeys("abc", f"linspace(1, 2, {n})"), grad="ones")
    check = r.checks["symbolic"]
    assert check.status == "disagree" and check.worst == "a[123456]" and check.max_abs_diff == 0.5


def test_a_wrong_grad_at_one_element_of_a_large_input_is_caught_and_named(monkeypatch):
    """Whatever the result keeps at scale, every check compares every element: backward made wrong at one
    element of 10^6 is a disagreement of the symbolic and jtv checks, which name that element."""
    from vjp_explorer.stages import call

    real = call.backward

    def off_by_one_element(*args):
        before, grads, none = real(*args)
        grads["c"][654_321] += 1e-3
        return before, grads, none

    monkeypatch.setattr(call, "backward", off_by_one_element)
    n = 1_000_000
    r = explore("3*a + 2*b*b + torch.log(c)", dict.fromkeys("abc", f"linspace(1, 2, {n})"), grad="ones")
    for name in ("symbolic", "jtv"):
        check = r.checks[name]
        assert (check.status, check.worst) == ("disagree", "c[654321]"), name
    assert r.exit_code == 3


def test_equal_arrays_are_held_once_and_a_constant_diagonal_as_one_number():
    """At scale the Jacobian's diagonal of 3*a is 3 n times: held as one number. With v = ones the diagonal
    of b, its Jᵀv and b's grad are the same numbers from the same autograd pass, held in one buffer once the
    jtv check has compared them; so are v and the output's grad."""

    def buffer(td):
        return td.ctypes.data

    n = 300_000
    r = explore("y = 3*a + 2*b*b + torch.log(c)", dict.fromkeys("abc", f"linspace(1, 2, {n})"), grad="ones")
    a = r.jacobians["a"].diagonal
    assert a is not None and a.strides == (0,) and a[0] == 3.0 and a.shape == (n,)
    b, jtv = r.jacobians["b"].diagonal, r.jtv["b"]
    assert b is not None and jtv is not None
    assert buffer(b) == buffer(jtv) == buffer(r.grads["b"])
    y = r.intermediates["y"].grad
    assert y is not None and buffer(y) == buffer(r.grad)
    assert r.checks["jtv"].status == "agree"
    x = torch.linspace(1, 2, n)
    assert torch.equal(torch.as_tensor(b), 4 * x) and list(y.flat[:3]) == [1.0] * 3


def test_the_adjoint_check_of_an_elementwise_program_replays_a_span_at_a_time(monkeypatch):
    """At scale the forward-mode replay of an elementwise program sees CHUNK elements at a time (no dual
    numbers of the full size), and the identity still tells a right backward from a wrong one."""
    from vjp_explorer.engine import jacobian
    from vjp_explorer.engine.tensors import CHUNK

    seen = []
    real = jacobian.replay

    def replay(steps, output, env, dtype, lift=None):
        seen.append(max(t.numel() for t in env.values() if isinstance(t, torch.Tensor)))
        return real(steps, output, env, dtype, lift)

    monkeypatch.setattr(jacobian, "replay", replay)
    n = 2 * CHUNK + 1001
    r = explore("y = a * 0.5 + torch.exp(b) * a", dict.fromkeys("ab", f"linspace(-1, 1, {n})"), grad="ones")
    assert r.checks["jvp"].status == "agree"
    assert len(seen) == 3 and max(seen) == CHUNK

    from vjp_explorer.stages import call

    real_backward = call.backward

    def flipped(*args):  # b's grads of the wrong sign (a sum of random terms checks nothing finer at scale)
        before, grads, none = real_backward(*args)
        grads["b"].neg_()
        return before, grads, none

    monkeypatch.setattr(call, "backward", flipped)
    r = explore("y = a * 0.5 + torch.exp(b) * a", dict.fromkeys("ab", f"linspace(-1, 1, {n})"), grad="ones")
    assert r.checks["jvp"].status == "disagree"


def test_large_dense_is_checked_by_matrix_calculus():
    r = explore("torch.tanh(W @ x)", {"x": "linspace(0, 1, 300)"}, consts={"W": "randn(300, 300)"}, seed=0, grad="ones")
    sym = r.checks["symbolic"]
    assert sym.status == "agree" and "matrix calculus" in sym.compares
    assert r.exit_code == 0


def test_symbolic_time_budget_is_enforced():
    # a harmless-looking program whose exact derivatives are slow to evaluate at 30 digits
    prog = "y = x\nfor i in range(40):\n    y = torch.sin(y * y + x)"
    r = explore(prog, {"x": "linspace(0.1, 0.9, 40)"}, grad="ones", limits=Limits(symbolic_seconds=0.5))
    s = r.checks["symbolic"]
    assert s.status in ("skipped", "agree")
    if s.status == "skipped":
        assert "within" in (s.reason or "") or "elementwise" in (s.reason or "")
    assert r.timings["symbolic"] < 5


@pytest.fixture
def slow_symbolic_comparison(monkeypatch):
    """compare_tensors sleeps 5 s before the symbolic check (the budget's alarm interrupts the sleep)."""
    import time

    from vjp_explorer.engine import compare

    real = compare.compare_tensors

    def slow(name, *args, **kwargs):
        if name == "symbolic":
            time.sleep(5)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(compare, "compare_tensors", slow)


def test_the_elementwise_comparison_keeps_to_the_sympy_budget(slow_symbolic_comparison):
    """The elementwise route's Jᵀv is evaluated inside the comparison: that comparison counts against
    symbolic_seconds, as the evaluation did when it was a step of the route; past it the check is skipped."""
    import time

    n = 30_000
    started = time.perf_counter()
    r = explore("x*x", {"x": f"linspace(1, 2, {n})"}, grad="ones", limits=Limits(symbolic_seconds=0.5))
    assert time.perf_counter() - started < 4
    check = r.checks["symbolic"]
    assert check.status == "skipped" and "within 0.5 s" in (check.reason or "")
    assert r.symbolic is None and r.checks["jtv"].status == "agree" and r.exit_code == 0


def test_cuda_device(vjp):
    if torch.cuda.is_available():
        r = vjp("run", "x*x", "--x", "1,2", "--grad", "ones", "--device", "cuda", "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["device"] == "cuda"
    else:
        r = vjp("run", "x*x", "--x", "1,2", "--grad", "ones", "--device", "cuda")
        assert r.exit_code == 2 and "not available" in r.stderr
    r = vjp("run", "x*x", "--x", "1,2", "--grad", "ones", "--device", "tpu")
    assert r.exit_code == 2 and "cpu or cuda" in r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_matches_cpu():
    a = explore("torch.tanh(W @ x)", {"x": "1,2"}, consts={"W": "[[1,2],[3,4]]"}, grad="ones", device="cpu")
    b = explore("torch.tanh(W @ x)", {"x": "1,2"}, consts={"W": "[[1,2],[3,4]]"}, grad="ones", device="cuda")
    assert a.grads["x"].tolist() == pytest.approx(b.grads["x"].tolist(), rel=1e-5)


def test_elementwise_route_values_match_the_closed_form_and_zero_v_keeps_inf_undefined():
    # past the per-element budget: one sympy derivative per leaf, evaluated on arrays in float64
    n = 50_001
    r = explore("a*b + torch.sqrt(c)", dict.fromkeys("abc", f"linspace(0, 1, {n})"), grad=f"linspace(0, 1, {n})")
    assert "elementwise" in r.checks["symbolic"].compares
    x32 = torch.linspace(0, 1, n).double()  # a = b = c = v: the float32 values, widened exactly
    sym = {k: torch.tensor(list(r.symbolic[k].flat), dtype=torch.float64) for k in "abc"}
    assert torch.equal(sym["a"], x32 * x32) and torch.equal(sym["b"], x32 * x32)
    # d sqrt(c)/dc = 1/(2 sqrt c) is infinite at c = 0, where v = 0: torch's backward gives 0·inf = nan,
    # and so does the sympy route (the derivative does not exist there): the check counts it as undefined
    assert math.isnan(sym["c"][0]) and math.isnan(r.grads["c"].flat[0])
    assert r.checks["symbolic"].undefined == ("c[0]",)
    want = x32[1:] / (2 * torch.sqrt(x32[1:]))
    assert torch.allclose(sym["c"][1:], want, rtol=1e-12, atol=0)
    assert r.checks["symbolic"].status == "agree"


def test_elementwise_route_handles_huge_integer_exponents():
    # an exponent beyond int64 must not break the scalar-exponent fast path of the evaluator
    r = explore("a**(2**70)", {"a": [1.0, -1.0, 0.5] * 70}, grad="ones")
    assert "elementwise" in r.checks["symbolic"].compares
    assert r.checks["symbolic"].status == "agree"


def test_elementwise_route_ignores_a_leaf_of_another_shape_that_does_not_reach_the_output():
    # past the per-element budget the elementwise route runs; W (300 x 300) cannot broadcast to y's [300]
    r = explore("h = W * 2\ny = x * 2", {"x": "linspace(0, 1, 300)", "W": "randn(300, 300)"}, grad="ones", seed=1)
    sym = r.checks["symbolic"]
    assert sym.status == "agree" and "elementwise" in sym.compares
    assert r.symbolic is not None and r.symbolic["W"].shape == (300, 300)
    assert not any(r.symbolic["W"].tolist()[0])


@pytest.mark.parametrize(
    "program, x",
    [
        ("tanh(x)*1e6", "full(30000, 9)"),
        ("sigmoid(x)*1e3", "full(30000, 14)"),
        ("tanh(x)*1e6", "linspace(-12,12,30000)"),
    ],
)
def test_elementwise_route_allows_for_torch_rounding_where_tanh_or_sigmoid_saturate(program, x):
    # torch computes 1 - tanh(x)**2 and s*(1 - s) from numbers near 1: where they saturate, float32 keeps no
    # digit of the (tiny) exact derivative. That is rounding, not a wrong gradient: the check must not fail
    for dtype in ("float32", "float64"):
        r = explore(program, {"x": x}, grad="ones", dtype=dtype)
        check = r.checks["symbolic"]
        assert "elementwise" in check.compares and check.status == "agree", (dtype, check)
    exact = explore("x*2", {"x": "full(30000, 9)"}, grad="ones")  # no cancelling terms: no widened scale
    assert exact.checks["symbolic"].status == "agree" and exact.checks["symbolic"].max_abs_diff == 0


def _sigmoid(x):
    """The registry's exact rule for sigmoid, as the routes build it."""
    import sympy as sp

    from vjp_explorer.ops import REGISTRY

    return REGISTRY["sigmoid"].exact(sp, x)


def test_absolute_terms_counts_tanh_and_sigmoid_derivatives_at_the_size_torch_rounds_at():
    import sympy as sp

    from vjp_explorer.engine.sizing import absolute_terms

    u, w = sp.symbols("u w", real=True)
    assert absolute_terms(sp.diff(sp.tanh(u), u)) == 1 + sp.tanh(u) ** 2
    assert absolute_terms(sp.diff(_sigmoid(u), u)) == 1 / (1 + sp.exp(-u))
    assert absolute_terms(sp.diff(3 * _sigmoid(w * u), u)) == 3 * sp.Abs(w) / (1 + sp.exp(-w * u))
    for f in (4 * u, 1 / u, sp.Integer(3)):  # nothing to widen: the size is |f| itself
        assert absolute_terms(f) in (f, sp.Abs(f))


@pytest.mark.parametrize(
    ("program", "x"),
    [("tanh(x)*1e6", "8,9,10"), ("sigmoid(x)*1e3", "12,14,16")],
)
def test_per_element_route_allows_for_torch_rounding_where_tanh_or_sigmoid_saturate(program, x):
    # the same rounding on the small-n route, which evaluates each entry exactly: the entry checks (symbolic
    # Jᵀv and the explicit J entry by entry) weigh a cancelling derivative at the size of its terms
    for dtype in ("float32", "float64"):
        r = explore(program, {"x": x}, grad="ones", dtype=dtype)
        for name in ("symbolic", "jacobian"):
            check = r.checks[name]
            assert "elementwise" not in check.compares and check.status == "agree", (dtype, check)
        if dtype == "float32" or program.startswith("tanh"):  # here the allowance is needed (sigmoid in
            # float64 rounds within rtol at these points)
            assert r.checks["symbolic"].max_rel_diff > TOLERANCES[dtype].rtol
            assert "rounding_allowance" in [n.code for n in r.notes]
    plain = explore("x*2", {"x": x}, grad="ones")
    assert "rounding_allowance" not in [n.code for n in plain.notes]


def test_per_element_sizes_are_the_value_of_the_derivatives_terms(monkeypatch):
    from vjp_explorer.engine import symbolic as S

    made = []
    real = S.symbolic_jacobian
    monkeypatch.setattr(S, "symbolic_jacobian", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    explore("tanh(x)*1e6", {"x": "8,9,10"}, grad="ones", dtype="float64")
    big, exact = made[-1].size_matrix("x"), made[-1].matrix("x")
    for k, x in enumerate((8.0, 9.0, 10.0)):
        assert float(big[k, k]) == pytest.approx(1e6 * (1 + math.tanh(x) ** 2), rel=1e-12)
        assert float(exact[k, k]) == pytest.approx(1e6 / math.cosh(x) ** 2, rel=1e-9)
    assert float(big[0, 1]) == 0
    explore("3*x*x", {"x": "1,2"}, grad="ones")  # no cancelling terms: every entry is its own size
    assert made[-1].size_matrix("x") is None


def test_dense_per_element_jacobian_check_allows_for_saturated_tanh():
    r = explore("tanh(W@x)", {"x": "full(20, 0.45)"}, consts={"W": "full(20,20,1)"}, grad="ones")
    assert r.checks["symbolic"].status == "agree"
    assert r.checks["jacobian"].status == "agree", r.checks["jacobian"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_exact_derivative_beyond_float64_is_an_overflow_not_undefined(dtype):
    # d/dx x**(10**10) at 2 is finite (about 10**(3*10**9)) but beyond every dtype: both routes read inf
    r = explore("x**(10**10)", {"x": "2,0.5"}, grad="ones", dtype=dtype)
    for name in ("symbolic", "jacobian"):
        check = r.checks[name]
        assert (
            check.status == "agree"
            and check.undefined == ()
            and check.overflow == (("x[0]",) if name == "symbolic" else ("dy/dx[0,0]",))
        ), check
    (note,) = [n for n in r.notes if n.code == "nonfinite_grad"]
    assert "overflowed" in note.text and ('dtype="float64"' in note.text) == (dtype == "float32")
    pole = explore("1/x", {"x": "0,1"}, grad="ones", dtype=dtype)  # a true infinity stays undefined
    assert pole.checks["symbolic"].overflow == () and pole.checks["symbolic"].undefined


def test_a_float32_disagreement_names_the_range_and_float64():
    # torch's float32 norm squares 1e-30 below float32's range: a real float32 failure, reported as such
    r = explore("x.norm()", {"x": "1e-30,2e-30"})
    assert r.checks["symbolic"].status == "disagree"
    (note,) = [n for n in r.notes if n.code == "float32_disagrees"]
    assert "1e-30" in note.text and 'dtype="float64"' in note.text
    r64 = explore("x.norm()", {"x": "1e-30,2e-30"}, dtype="float64")
    assert r64.checks["symbolic"].status == "agree" and "float32_disagrees" not in [n.code for n in r64.notes]


@pytest.mark.parametrize("x", ["0.1,0.3", "full(30000, 0.1)"])  # the per-element and the elementwise route
def test_product_rule_terms_that_cancel_are_allowed_for(x):
    # d/dx (x + 1e7)*(x - 1e7): autograd adds (x - 1e7) and (x + 1e7), two numbers of size 1e7 whose sum
    # is 0.2; sympy's derivative reads 2*x, with no large terms. Torch's rounding is at the size 2e7
    for dtype in ("float32", "float64"):
        r = explore("(x + 1e7)*(x - 1e7)", {"x": x}, grad="ones", dtype=dtype)
        assert r.checks["symbolic"].status == "agree", (dtype, r.checks["symbolic"])
        assert r.checks["symbolic"].max_rel_diff > TOLERANCES[dtype].rtol
        assert "rounding_allowance" in [n.code for n in r.notes]


def test_chain_size_is_the_product_rules_terms_before_they_cancel():
    import sympy as sp

    from vjp_explorer.engine.sizing import chain_size, term_size

    x, c = sp.symbols("x c", real=True)

    def at(e, **vals):
        return float(e.xreplace({x: vals["x"], c: vals.get("c", 0)}).evalf(30))

    cases = [  # (expression, its chain size as a plain function, points)
        ((x + c) * (x - c), lambda x, c: abs(x - c) + abs(x + c), [(0.1, 1e7), (-3.0, 2.0)]),
        (sp.tanh(3 * x), lambda x, c: 3 * (1 + math.tanh(3 * x) ** 2), [(9.0, 0), (-0.2, 0)]),
        (sp.exp(x) * 2, lambda x, c: 2 * math.exp(x), [(1.5, 0)]),
        (_sigmoid(x), lambda x, c: 1 / (1 + math.exp(-x)), [(14.0, 0), (-2.0, 0)]),  # torch's s*(1 - s)
        ((x + 1) ** 20, lambda x, c: 20 * abs(x + 1) ** 19, [(-0.5, 0), (2.0, 0)]),  # linear in the base
        (sp.sqrt(x) * c, lambda x, c: abs(c) * 0.5 / math.sqrt(x), [(4.0, 3.0)]),
    ]
    for e, size, points in cases:
        for px, pc in points:
            assert at(chain_size(e, x), x=px, c=pc) == pytest.approx(size(px, pc), rel=1e-12), (e, px)
    y = 3 * x + 2 * x * x + sp.log(x)
    assert term_size(y, x, sp.diff(y, x)) is not None  # 3 + 4|x| + 1/|x| against 3 + 4x + 1/x
    for f in (3 * c * x, sp.log(x), sp.exp(2 * x)):  # nothing cancels: the size is |derivative| itself
        t = term_size(f, x, sp.diff(f, x))
        assert t is None or at(t, x=1.7, c=-2.0) == pytest.approx(abs(at(sp.diff(f, x), x=1.7, c=-2.0)), rel=1e-12)


def test_the_sizes_are_computed_only_after_a_disagreement(monkeypatch):
    from vjp_explorer.engine import symbolic as S

    def boom(*a, **k):
        raise AssertionError("term_size on a run that agrees")

    monkeypatch.setattr(S, "term_size", boom)
    for x in ("1,2,3", "linspace(1,2,30000)"):
        r = explore("tanh(x)*x + (x + 1)*(x - 1)", {"x": x}, grad="ones", dtype="float64")
        assert r.checks["symbolic"].status == "agree"


class _WrongMul(torch.autograd.Function):
    """a * b whose backward is off by a relative `error` on a's side: a planted autograd bug."""

    error = 0.0

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _REAL_MUL(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b * (1 + _WrongMul.error), g * a


_REAL_MUL = torch.Tensor.__mul__


@pytest.mark.parametrize("x", ["0.1,0.3", "full(30000, 0.1)"])
def test_the_allowance_for_rounding_does_not_hide_a_wrong_gradient(monkeypatch, x):
    # (x + 1e9)*(x - 1e9): terms of size 2e9. A backward off by 1e-9 of one term moves the grad by 2, ten times
    # the exact value: far more than float64's rounding of those terms (~1e-6), so the check must still fail
    def mul(a, b):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.requires_grad and b.requires_grad:
            return _WrongMul.apply(a, b)
        return _REAL_MUL(a, b)

    monkeypatch.setattr(torch.Tensor, "__mul__", mul)
    monkeypatch.setattr(_WrongMul, "error", 1e-9)
    r = explore("(x + 1e9)*(x - 1e9)", {"x": x}, grad="ones", dtype="float64")
    assert r.checks["symbolic"].status == "disagree", r.checks["symbolic"]
    assert "rounding_allowance" not in [n.code for n in r.notes]
    monkeypatch.setattr(_WrongMul, "error", 0.0)  # the same program, honest: agrees within the allowance
    r = explore("(x + 1e9)*(x - 1e9)", {"x": x}, grad="ones", dtype="float64")
    assert r.checks["symbolic"].status == "agree"


def test_a_disagreement_stands_when_its_second_weighing_is_slow(monkeypatch):
    """Only the first comparison keeps to the sympy budget: a check that has failed is not turned into
    'skipped' (exit 0) because weighing it again took long."""
    import time

    from vjp_explorer.stages import checks

    def mul(a, b):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.requires_grad and b.requires_grad:
            return _WrongMul.apply(a, b)
        return _REAL_MUL(a, b)

    real = checks.later_sizes

    def slow(*args):
        time.sleep(1.0)  # past the whole budget
        return real(*args)

    monkeypatch.setattr(torch.Tensor, "__mul__", mul)
    monkeypatch.setattr(_WrongMul, "error", 1e-9)
    monkeypatch.setattr(checks, "later_sizes", slow)
    r = explore(
        "(x + 1e9)*(x - 1e9)",
        {"x": "full(30000, 0.1)"},
        grad="ones",
        dtype="float64",
        limits=Limits(symbolic_seconds=0.5),
    )
    assert r.checks["symbolic"].status == "disagree" and r.exit_code == 3


def test_a_symbolic_check_out_of_time_leaves_the_jtv_checks_allowance(slow_symbolic_comparison):
    """The jtv check's second weighing needs only the route's sizes of the terms: it runs whether or not the
    symbolic comparison finished in time (here it does not: no false jtv disagreement, exit 0)."""
    r = explore(
        "(x+1e7)*(x-1e7)",
        {"x": "linspace(0.1, 3, 30000)"},
        grad="full(30000, 0.1)",
        limits=Limits(symbolic_seconds=0.5),
    )
    assert r.checks["symbolic"].status == "skipped"
    assert r.checks["jtv"].status == "agree" and r.exit_code == 0


@pytest.mark.parametrize(
    "program",
    ["tanh(x)*1e6 + sqrt(x-8)", "tanh(x)*1e6 + log(x-8)", "tanh(x)*1e6 + (x-9)**(-1)", "tanh(x)*1e6 + (x-8)**(10**10)"],
)
def test_a_singular_or_huge_entry_keeps_the_allowance_elsewhere(program):
    # one entry whose size is zoo, nan or inf must neither crash the reweighing nor drop it for the others
    for limits in ({}, {"jacobian_entries": 1}):
        r = explore(program, {"x": "8,9,10"}, grad="ones", limits=Limits(**limits))
        assert r.checks["symbolic"].status == "agree", (limits, r.checks["symbolic"])


def test_an_exact_zero_that_is_a_sum_of_cancelling_terms_is_allowed_for():
    r = explore("(x+1e4)*(x+1e4) - x*x - 2e4*x", {"x": "0.1,0.3,8"}, grad="ones")
    assert r.checks["symbolic"].status == "agree" and r.checks["jacobian"].status == "agree"


def test_the_rounding_note_only_when_the_reweighing_decided():
    # passes on Σ|v·J| (cancellation between outputs), not on the second weighing: no rounding note
    r = explore("x*c", {"x": "1.37"}, consts={"c": "10000.1,10000.3"}, grad="1.1,-1.1")
    assert r.checks["symbolic"].status == "agree"
    assert "rounding_allowance" not in [n.code for n in r.notes]


@pytest.mark.parametrize(
    ("x", "grad", "dtype"),
    [("1,2,3", "0.1,0.1,0.1", "float32"), ("randn(30000)", "full(30000, 3.3333e-5)", "float32")],
)
def test_the_jtv_check_allows_for_the_product_rules_rounding_too(x, grad, dtype):
    # backward(v) adds v·(x - 1e7) + v·(x + 1e7); the J route multiplies v by their rounded sum: both right
    r = explore("(x+1e7)*(x-1e7)", {"x": x}, grad=grad, dtype=dtype, seed=3)
    assert r.checks["jtv"].status == "agree", r.checks["jtv"]
    assert r.checks["jtv"].max_rel_diff > TOLERANCES[dtype].rtol  # the reweighing decided it
    r64 = explore("(x+1e15)*(x-1e15)", {"x": "1,2,3"}, grad="0.1,0.3,0.7", dtype="float64")
    assert r64.checks["jtv"].status == "agree"
