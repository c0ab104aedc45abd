"""One exact derivative and its value at the point: sympy's diff term by term, read as torch would read it.

The value is nan where the formula leaves the reals at the point (torch computes in real arithmetic), and
an infinity with its sign where the derivative grows without bound with one sign.
"""

from __future__ import annotations

import math
from typing import Any

import sympy as sp

DPS = 30  # significant digits of every exact evaluation


def to_float(x: Any) -> float:
    """A sympy number as a float; complex, zoo, nan -> nan; +-oo -> +-inf."""
    if x is sp.zoo or x is sp.nan:
        return math.nan
    if x is sp.oo:
        return math.inf
    if x is sp.S.NegativeInfinity:
        return -math.inf
    try:
        if getattr(x, "is_real", None) is False or (hasattr(x, "as_real_imag") and x.as_real_imag()[1] != 0):
            return math.nan
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def signed_infinity(y: Any, d: Any, s: Any, subs: dict[Any, Any]) -> float:
    """+inf or -inf where the derivative d = dy/ds is infinite at the point with one sign (sympy's zoo, 1/0,
    has none): d grows without bound as s nears its value from each side where y is real, with the same
    sign there (log'(x) = 1/x at 0 from the right, -1/x**2 at 0 from both). nan where it has no such limit."""
    x0 = subs[s]
    signs = set()
    for side in (1, -1):
        near, nearer = (
            (to_float(d.xreplace(at).evalf(DPS)) if real_at(y, at) else math.nan)
            for h in ("1e-12", "1e-16")
            for at in [{**subs, s: x0 + side * sp.Float(h, DPS)}]
        )
        if math.isnan(near) or math.isnan(nearer):
            continue  # y is not real on this side (log, sqrt left of 0)
        if nearer == 0 or abs(nearer) < 10 * abs(near) or (near > 0) != (nearer > 0):
            return math.nan  # bounded (0/0 that tends to 0: atan2 at the origin), or changes sign: no infinite limit
        signs.add(nearer > 0)
    if len(signs) != 1:
        return math.nan
    return math.inf if signs.pop() else -math.inf


def derivative(y: Any, s: Any) -> Any:
    """dy/ds, the expression sympy's diff gives: its diff of each term of a sum that holds s.

    sympy's diff of a sum is the sum of its terms' diffs (Add._eval_derivative); a term without s
    contributes 0, so only the others are differentiated. With a cold cache that skips most of
    diff's cost on a sum of separate leaves (the seed formula). Each term keeps its own diff whole,
    numbers included: pulling a coefficient out, or a node's first-order `_eval_derivative` in place of
    diff, gives a different expression for a product of three factors, in which a term that cancels
    exactly no longer reads 0. test_symbolic_derivative pins the equality with diff.
    """
    return sp.Add(*[diff_term(t, s) for t in (y.args if y.is_Add else (y,)) if t.has(s)])


_ONE = sp.Integer(1)


def diff_term(t: Any, s: Any) -> Any:
    """sympy's diff(t, s), for a symbol s free in t: the object diff's Derivative(t, s) gets from the
    method it dispatches to, t._eval_derivative_n_times(s, 1), taken directly. Where Derivative would do
    more with it (the method leaves a Derivative, or declines), or s is not free in t, diff itself. This
    skips Derivative's bookkeeping on the top node (about a quarter of the seed formula's cold cost); the
    nodes below go through diff as before."""
    if not s.is_Symbol or s not in t.free_symbols:
        return sp.diff(t, s)
    d = t._eval_derivative_n_times(s, _ONE)
    if d is None or d.has(sp.Derivative):
        return sp.diff(t, s)
    return d


def real_at(y: Any, subs: dict[Any, Any]) -> bool:
    """False where computing y in real arithmetic, as torch does, leaves the reals at the point: the log of a
    negative number, or a negative number to a power that is not an integer, anywhere inside y, whatever
    the final value (torch's cos(sqrt(-1)) is nan; sympy's is cosh(1)). Only those subexpressions are evaluated."""
    for e in y.atoms(sp.log, sp.Pow):
        if isinstance(e, sp.log):
            arg = e.args[0].xreplace(subs)
            if arg.is_extended_negative or arg.is_extended_real is False:
                return False
            continue
        base, exp = e.args
        if exp.is_Integer:
            continue
        b = base.xreplace(subs)
        if b.is_extended_real is False:
            return False
        if b.is_extended_negative:
            k = exp.xreplace(subs)
            if not (k.is_Number and k.is_finite and float(k).is_integer()):  # a float exponent may hold one
                return False
    return True
