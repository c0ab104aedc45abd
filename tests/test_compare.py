"""The agreement check and the array evaluator, against plain-Python oracles.

compare_tensors works in chunks with float reductions and shortcuts (an identical chunk, a chunk
within rtol everywhere, the worst element located once at the end); the oracle below applies the
documented rule element by element with the math module, so any shortcut that changes a verdict,
a statistic or the worst element's label shows up here.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import sympy as sp
import torch

from vjp_explorer.engine import compare as C
from vjp_explorer.engine import tensors as T
from vjp_explorer.engine.elementwise_route import evaluate
from vjp_explorer.engine.tensors import to_data
from vjp_explorer.result import Tolerance, element_label


def oracle(items, tol: Tolerance, magnitudes=None, overflow_at=math.inf):
    """(status, max_abs, max_rel, worst, undefined count, overflow labels): the rule of compare_tensors'
    docstring, one element at a time."""
    bad, max_abs, max_rel, worst, n_und, over = False, 0.0, 0.0, None, 0, []
    mismatch, failing, excess = None, None, -math.inf  # a disagreement names the element that fails the most
    for leaf, got, want in items:
        shape = tuple(got.shape)
        g, w = got.reshape(-1).tolist(), want.reshape(-1).double().reshape(-1).tolist()
        m = (magnitudes or {}).get(leaf)
        m = m.reshape(-1).tolist() if m is not None else None
        for k, (a, b) in enumerate(zip(g, w, strict=True)):
            if not (math.isfinite(a) and math.isfinite(b)):
                if math.isnan(a) or math.isnan(b) or a == b:
                    n_und += 1
                elif math.isinf(a) and abs(b) > overflow_at:
                    over.append(element_label(leaf, shape, k))
                else:
                    bad = True
                    if max_abs != math.inf:
                        max_abs, mismatch = math.inf, element_label(leaf, shape, k)
                continue
            d = abs(a - b)
            if d > max_abs:
                max_abs, worst = d, element_label(leaf, shape, k)
            if b != 0:
                max_rel = max(max_rel, d / abs(b))
            scale = abs(b) if m is None else max(abs(b), m[k] if math.isfinite(m[k]) else 0.0)
            if d > tol.atol + tol.rtol * scale:
                bad = True
                if d - tol.rtol * scale > excess:
                    failing, excess = element_label(leaf, shape, k), d - tol.rtol * scale
    worst = mismatch or failing or worst
    return ("disagree" if bad else "agree"), max_abs, max_rel, worst, n_und, over


def case(rng: random.Random, n: int, dtype: torch.dtype):
    """References of mixed sizes (zeros, tiny, huge), got = ref plus errors within the tolerance, and in
    some cases one element off by more than it: a relative error, or noise on a zero reference."""
    ref = []
    mixed = rng.random() < 0.5  # else ordinary sizes only: chunks within rtol take the shortcut
    for _ in range(n):
        r = rng.random() if mixed else 1.0
        ref.append(
            0.0
            if r < 0.1
            else rng.uniform(-1e-6, 1e-6)
            if r < 0.2
            else rng.uniform(-1e6, 1e6)
            if r < 0.3
            else rng.uniform(-3, 3)
        )
    want = torch.tensor(ref, dtype=torch.float64)
    small = 1e-6 if dtype == torch.float32 else 1e-12
    rel = torch.tensor([rng.choice([0.0, 0.0, small / 10, small]) for _ in range(n)], dtype=torch.float64)
    noise = torch.tensor([rng.choice([0.0, 0.0, small / 100]) for _ in range(n)], dtype=torch.float64)
    got = want * (1 + rel) + noise
    if rng.random() < 0.6:
        k = rng.randrange(n)
        if rng.random() < 0.6:  # just inside or outside rtol, or far out
            got[k] = want[k] * (
                1 + rng.choice([-1, 1]) * rng.choice([3e-5, 2e-4, 5e-4, 1e-2]) * (1e-5 if dtype == torch.float64 else 1)
            )
        else:  # noise where the reference may be 0
            got[k] = want[k] + rng.choice([1e-8, 1e-6, 1e-3])
    return got.to(dtype), want


@pytest.mark.parametrize("seed", range(60))
def test_compare_matches_the_elementwise_rule(seed, monkeypatch):
    monkeypatch.setattr(T, "CHUNK", 700)  # many chunks, each several blocks of the located maximum plus a tail
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float64])
    tol = C.TOLERANCES["float32" if dtype == torch.float32 else "float64"]
    items, mags = [], {}
    for leaf in "ab"[: rng.choice([1, 2])]:
        n = rng.choice([1, 5, 699, 700, 701, 2500])
        got, want = case(rng, n, dtype)
        if rng.random() < 0.3:  # a few non-finite elements: undefined, overflow or a mismatch
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(n)
                got[k], want[k] = rng.choice(
                    [(math.nan, 1.0), (math.inf, math.inf), (math.inf, 1e300), (math.inf, 2.0), (1.0, math.nan)]
                )
        if rng.random() < 0.3:  # sizes of cancelling terms: a larger scale than |ref|
            mags[leaf] = want.abs() * rng.choice([1.0, 10.0, 1e4]) + rng.random()
        if rng.random() < 0.5 and leaf == "a":
            got, want = got.reshape(-1, 1), want.reshape(-1, 1)  # 2-d labels
        items.append((leaf, got, want))
    overflow_at = 1e38 if dtype == torch.float32 else math.inf
    check = C.compare_tensors("t", "t", items, tol, mags or None, overflow_at)
    status, max_abs, max_rel, worst, n_und, over = oracle(items, tol, mags or None, overflow_at)
    assert check.status == status
    assert check.max_abs_diff == pytest.approx(max_abs, rel=1e-12, abs=0)
    assert check.max_rel_diff == pytest.approx(max_rel, rel=1e-12, abs=0)
    if max_abs > 0:
        assert check.worst == worst
    n_listed = sum(1 for u in check.undefined if not u.startswith("..."))
    extra = next((int(u.split()[1]) for u in check.undefined if u.startswith("...")), 0)
    assert n_listed + extra == n_und
    assert list(check.overflow) == over[:20]


def test_a_zero_reference_is_judged_by_atol_alone():
    tol = C.TOLERANCES["float32"]
    for got, status in ((5e-8, "agree"), (1e-3, "disagree")):
        check = C.compare_tensors(
            "t", "t", [("x", torch.tensor([1.0, got]), torch.tensor([1.0, 0.0], dtype=torch.float64))], tol
        )
        assert check.status == status, got
        assert check.max_rel_diff == 0.0  # relative only to nonzero references


@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 1025, 5000, 70000])
def test_argmax_finds_the_first_largest_element(n):
    g = torch.Generator().manual_seed(n)
    for ties in (False, True):
        d = torch.rand(n, generator=g, dtype=torch.float64)
        if ties:
            d = torch.round(d * 3)
        want = max(range(n), key=lambda k: (d[k].item(), -k))
        assert C.first_argmax(d) == want
        assert C.first_argmax(d, lowest=True) == min(range(n), key=lambda k: (d[k].item(), k))


@pytest.mark.parametrize("n", [1, 3, 513, 1025, 5000])
def test_argmax_abs_finds_the_first_largest_magnitude_on_either_side(n):
    g = torch.Generator().manual_seed(n)
    for kind in ("positive wins", "negative wins", "tie"):
        d = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
        k, j = (n * 2) // 3, n // 3
        d[k] = 5.0 if kind == "positive wins" else -5.0
        if kind == "tie":
            d[j] = 5.0
        want = max(range(n), key=lambda i: (abs(d[i].item()), -i))
        assert C.first_argmax_abs(d) == want, kind


x, y = sp.symbols("x y", real=True)
EXPRS = [
    x,
    sp.Integer(3),
    sp.Rational(1, 3),
    sp.exp(2) * 3,  # a product of numbers that sympy keeps unevaluated: a 0-d result filling out
    4 * x,
    3 * x + 2 * y + 1,
    x * y * y,
    1 / x,
    x**2,
    x**5,
    sp.sqrt(x),
    x**y,
    2**x,
    sp.log(x) * sp.exp(-x),
    sp.tanh(x) + sp.cosh(y),
    sp.Abs(x - 1.5),
    sp.sign(x - 1.5),
    sp.Heaviside(x - 1.5),
    sp.Max(x, y, 1.2),
    sp.Min(x, 1.7),
    sp.Piecewise((x, x > 1.5), (2 * y, True)),
]


@pytest.mark.parametrize("expr", EXPRS, ids=str)
def test_evaluate_into_out_equals_the_plain_evaluation(expr):
    arrays = {"x": torch.linspace(1, 2, 11, dtype=torch.float64), "y": torch.linspace(0.5, 3, 11, dtype=torch.float64)}
    plain = evaluate(expr, arrays).expand(11)
    out = torch.full((11,), -123.0, dtype=torch.float64)
    got = evaluate(expr, arrays, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(out, plain)
    want = [float(expr.subs({x: a, y: b})) for a, b in zip(arrays["x"].tolist(), arrays["y"].tolist(), strict=True)]
    assert out.tolist() == pytest.approx(want, rel=1e-13)
    assert arrays["x"].tolist() == torch.linspace(1, 2, 11, dtype=torch.float64).tolist()  # inputs untouched


@pytest.mark.parametrize(
    ("dtype", "scale"),
    [(torch.float32, s) for s in (0.0, 1e-30, 1e-20, 1.0, 1e20, 1e30)]
    + [(torch.float64, s) for s in (0.0, 1e-300, 1e-200, 1e-30, 1.0, 1e30, 1e200, 1e300)],
)
def test_summary_norm_matches_math_at_any_scale(dtype, scale):

    rng = random.Random(int(scale > 1) + 7)
    vals = [rng.uniform(-1, 1) * scale for _ in range(1000)]
    t = torch.tensor(vals, dtype=dtype)
    exact = math.sqrt(math.fsum((float(x) / scale) ** 2 for x in t)) * scale if scale else 0.0
    got = to_data(t).stats.norm
    assert got == pytest.approx(exact, rel=1e-5 if dtype == torch.float32 else 1e-12, abs=0.0)


@pytest.mark.parametrize("change", ["none", "one off", "nan", "inf", "float64"])
def test_a_constant_reference_is_judged_as_its_full_copy(change, monkeypatch):
    """A stride-0 reference (the elementwise route's constant derivative) takes a shortcut where every
    element of got is that constant; anything else is weighed like the materialised copy."""
    monkeypatch.setattr(T, "CHUNK", 700)
    n = 2500
    got = torch.full((n,), 3.0, dtype=torch.float64 if change == "float64" else torch.float32)
    if change in ("one off", "float64"):
        got[1800] = 3.0001 if change == "one off" else 3.5
    elif change in ("nan", "inf"):
        got[42] = math.nan if change == "nan" else math.inf
    want = torch.tensor(3.0, dtype=torch.float64).expand(n)
    tol = C.TOLERANCES["float32"]
    check = C.compare_tensors("t", "t", [("a", got, want)], tol)
    assert check == C.compare_tensors("t", "t", [("a", got, want.contiguous())], tol)
    status, max_abs, _, worst, n_und, _ = oracle([("a", got, want.contiguous())], tol)
    assert (check.status, check.max_abs_diff) == (status, max_abs)
    if max_abs > 0:
        assert check.worst == worst


@pytest.mark.parametrize("where", [100, 1500, 2900])
def test_the_worst_element_is_named_when_a_later_chunk_reuses_the_buffer(monkeypatch, where):
    """float32 against float64 is subtracted in a buffer that later chunks would overwrite: the element
    named must still be the one in the chunk with the largest difference, whichever chunk that is, and a
    disagreement's too."""
    monkeypatch.setattr(T, "CHUNK", 700)
    want = torch.linspace(1, 2, 3000, dtype=torch.float64)
    for size, status in ((1e-5, "agree"), (1e-3, "disagree")):
        got = want.float()
        got[where] -= size  # the largest difference (below the reference: the smallest signed one)
        for k in (50, 800, 2500):
            if k != where:
                got[k] += size / 10
        check = C.compare_tensors("t", "t", [("x", got, want)], C.TOLERANCES["float32"])
        assert (check.status, check.worst) == (status, f"x[{where}]")
        assert check.max_abs_diff == abs(float(got[where]) - float(want[where]))


def test_the_result_holds_numbers_not_rules():
    """Item 3 of issue 16: the result is plain data. Past the per-element budget the symbolic Jᵀv is an
    array like any other (no lazily computed sequence or statistics), so a view reads numbers only."""
    from vjp_explorer import explore
    from vjp_explorer import result as R

    assert not hasattr(R, "OnDemand") and not hasattr(R, "PendingStats")
    n = 200_001
    r = explore("2*b*b + torch.log(c)", dict.fromkeys("bc", f"linspace(1, 2, {n})"), grad="ones")
    assert "elementwise" in r.checks["symbolic"].compares and r.symbolic is not None
    for td in r.symbolic.values():
        assert isinstance(td, np.ndarray) and type(td.stats) is R.Stats
        assert td.dtype == "float64"


@pytest.mark.parametrize("c", [3.0, -2.5, 0.0, 1e300, math.nan, math.inf])
@pytest.mark.parametrize("shape", [(2,), (1000,), (4, 250)])
def test_the_summary_of_a_constant_view_is_that_of_its_copy(c, shape):

    view = torch.tensor(c, dtype=torch.float64).expand(shape)
    got, want = to_data(view), to_data(view.contiguous())
    assert got.shape == want.shape and list(got.flat) == pytest.approx(list(want.flat), nan_ok=True)
    a, b = got.stats, want.stats
    assert (a.nan, a.inf) == (b.nan, b.inf)
    assert [a.min, a.max] == pytest.approx([b.min, b.max], nan_ok=True)
    assert a.norm == pytest.approx(b.norm, rel=1e-15, nan_ok=True)


def test_a_constant_is_one_number_seen_as_an_array_of_them():
    t = to_data(torch.tensor(-1.5, dtype=torch.float64).expand(2, 3))
    assert t.strides == (0, 0) and t.tolist() == [[-1.5] * 3] * 2
    assert list(t.flat) == [-1.5] * 6 and t[1, 2] == -1.5 and np.asarray(t).sum() == -9.0


def test_a_constant_reference_that_is_inf_on_both_sides_is_reported_not_skipped():
    n = 10
    got = torch.full((n,), math.inf)
    check = C.compare_tensors(
        "t", "t", [("a", got, torch.tensor(math.inf, dtype=torch.float64).expand(n))], C.TOLERANCES["float32"]
    )
    full = C.compare_tensors(
        "t", "t", [("a", got, torch.full((n,), math.inf, dtype=torch.float64))], C.TOLERANCES["float32"]
    )
    assert check == full and len(check.undefined) == n


def test_a_constant_reference_of_another_size_takes_no_shortcut():
    tol = C.TOLERANCES["float32"]
    empty = C.compare_tensors("t", "t", [("a", torch.zeros(0), torch.tensor(3.0, dtype=torch.float64).expand(0))], tol)
    assert empty.status == "agree"
    with pytest.raises(RuntimeError):  # got (3,) against a reference of 5 elements: not broadcastable
        C.compare_tensors(
            "t", "t", [("a", torch.full((3,), 3.0), torch.tensor(3.0, dtype=torch.float64).expand(5))], tol
        )


@pytest.mark.parametrize(
    ("values", "want"),
    [([], True), ([1.0], True), ([1.0] * 1000, True), ([1.0, 2.0], False), ([1.0, math.nan], False), ([-1.0], False)],
)
def test_all_equal_to_is_the_bool_mask_test_without_a_mask(values, want):
    from vjp_explorer.engine.tensors import all_equal_to

    t = torch.tensor(values, dtype=torch.float32)
    assert all_equal_to(t, 1.0) is want is bool((t == 1).all())
