"""differentiate.derivative: the expression sympy's own diff gives, by a cheaper path.

derivative() differentiates each term of a sum that holds the symbol, instead of the whole sum, and
takes each term's diff from the method sympy's Derivative dispatches to. These tests pin that the
result is the same sympy expression, term for term (the formulas `vjp explain` prints come from it),
over random expressions built from every function and operator the symbolic route knows, and that
the cheaper path is taken at all.
"""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vjp_explorer.engine import differentiate as D
from vjp_explorer.engine import symbolic as S

A, B, C = (sp.Symbol(n, real=True) for n in "abc")
NUMBERS = [sp.Integer(2), sp.Integer(-3), sp.Rational(1, 2), sp.Float(2.5), sp.Float(0.75), sp.pi]


def exprs() -> st.SearchStrategy[sp.Expr]:
    leaf = st.sampled_from([A, B, C, *NUMBERS])

    def extend(inner: st.SearchStrategy[sp.Expr]) -> st.SearchStrategy[sp.Expr]:
        unary = st.builds(lambda f, x: S.UNARY[f](x), st.sampled_from(sorted(S.UNARY)), inner)
        binary = st.builds(lambda op, x, y: S.BINARY[op](x, y), st.sampled_from(sorted(S.BINARY)), inner, inner)
        return unary | binary

    return st.recursive(leaf, extend, max_leaves=6)


@settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(exprs())
def test_derivative_is_sympys_diff(y):
    for s in (A, B, C):
        assert D.derivative(y, s) == sp.diff(y, s), (y, s)


@pytest.mark.parametrize(
    "y",
    [
        (2 * A + 1) * (B + 1) * sp.cos(B),  # a product of three factors: the number stays inside its sum
        (2 * A + 1) * (B + 1) * sp.cos(B) - 2 * A * (B + 1) * sp.cos(B),  # d/da cancels to exactly 0
        sp.Float(0.75) * sp.Float(0.5) ** C * sp.exp(C),
        A * B / sp.Integer(0),  # zoo*a*b
        A * B * sp.oo + C,
    ],
)
def test_derivative_is_sympys_diff_where_a_shortcut_would_not_be(y):
    for s in (A, B, C):
        assert D.derivative(y, s) == sp.diff(y, s), (y, s)
    if y.has(sp.cos) and not y.is_Mul:
        assert D.derivative(y, A) == 0


def test_derivative_of_the_seed_formula_and_its_edges():
    y = 3 * A + 2 * B * B + sp.log(C)
    assert [D.derivative(y, s) for s in (A, B, C)] == [3, 4 * B, 1 / C]
    assert D.derivative(sp.Integer(5), A) == 0
    assert D.derivative(A, A) == 1
    assert D.derivative(-A, A) == -1
    assert D.derivative(A * B, C) == 0
    # a node without a rule of its own: sympy's diff decides (an unevaluated Derivative here)
    f = sp.Function("f")(A)
    assert D.derivative(2 * f, A) == sp.diff(2 * f, A)


def test_derivative_differentiates_only_the_terms_that_hold_the_symbol(monkeypatch):
    """The point of derivative(): the diff of each term that holds s, never of the whole sum."""
    calls = []
    real = D.diff_term
    monkeypatch.setattr(D, "diff_term", lambda *a: calls.append(a) or real(*a))
    y = 3 * A + 2 * B * B + sp.log(C)
    assert D.derivative(y, B) == 4 * B
    assert calls == [(2 * B**2, B)]


def test_a_terms_diff_is_taken_from_the_method_diff_dispatches_to(monkeypatch):
    """diff_term skips Derivative's bookkeeping on the top node (sympy's diff runs only below it), and falls
    back to diff itself where Derivative would do more than return the method's result."""
    tops = []
    real = sp.diff
    monkeypatch.setattr(D.sp, "diff", lambda *a, **k: tops.append(a) or real(*a, **k))
    assert D.diff_term(2 * B**2, B) == 4 * B
    assert (2 * B**2, B) not in tops
    f = sp.Function("f")(A)
    tops.clear()
    assert D.diff_term(2 * f, A) == real(2 * f, A) and (2 * f, A) in tops  # an unevaluated Derivative: diff's own
    tops.clear()
    assert D.diff_term(A * B, C) == 0 and tops == [(A * B, C)]  # not free in the term: diff decides
