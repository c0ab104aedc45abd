"""The size of the terms autograd adds up to get one derivative: the scale of its rounding, for the tolerance."""

from __future__ import annotations

from typing import Any

import sympy as sp


def term_size(y: Any, s: Any, derivative: Any, cache: dict[Any, Any] | None = None) -> Any:
    """The size of the numbers autograd adds up to get dy/ds, as one non-negative sympy expression
    (chain_size), or None where that is |dy/ds| itself."""
    t = chain_size(y, s, {} if cache is None else cache)
    return None if t == 0 or t == derivative or t == _abs(derivative) else t


def chain_size(e: Any, s: Any, cache: dict[Any, Any] | None = None) -> Any:
    """Σ|terms| of de/ds as reverse mode forms them: the product rule's terms, each factor and local
    derivative made non-negative; a local derivative that itself cancels (1 - tanh(u)**2) counts at the
    size of its terms, sigmoid'(u) at the size of sigmoid(u) (torch computes it as s*(1 - s), which rounds
    at the size of s). It reads e as given: the routes give the program as written (as_written), where
    sympy's evaluated form has already combined some terms (x*x is x**2, exp(x) - exp(x) is 0). A bound
    on the rounding of the terms, not of every float operation torch makes. Memoised per subexpression in
    `cache` (a value used twice is sized once)."""
    cache = {} if cache is None else cache
    key = (e, s)
    if key not in cache:
        cache[key] = _chain_size(e, s, cache)
    return cache[key]


def _chain_size(e: Any, s: Any, cache: dict[Any, Any]) -> Any:
    if not e.has(s):
        return sp.Integer(0)
    if e == s:
        return sp.Integer(1)
    if e.is_Add:
        return sp.Add(*[chain_size(a, s, cache) for a in e.args])
    if e.is_Mul:
        terms = []
        for k, f in enumerate(e.args):
            df = chain_size(f, s, cache)
            if df != 0:
                terms.append(df * sp.Mul(*[_abs(g) for i, g in enumerate(e.args) if i != k]))
        return sp.Add(*terms)
    if e.is_Pow:
        base, exp = e.args
        if exp == -1 and base.is_Add and len(base.args) == 2 and sp.S.One in base.args:
            other = base.args[0] if base.args[1] is sp.S.One else base.args[1]
            if isinstance(other, sp.exp):  # sigmoid(u) = 1/(1 + exp(-u)): torch's s*(1 - s) rounds at s
                return e * chain_size(-other.args[0], s, cache)
        if not exp.has(s):
            return _abs(exp) * _abs(base) ** (exp - 1) * chain_size(base, s, cache)
        return _abs(e) * (
            chain_size(exp, s, cache) * _abs(sp.log(base)) + _abs(exp) * chain_size(base, s, cache) / _abs(base)
        )
    if isinstance(e, sp.Function) and len(e.args) == 1 and not isinstance(e, sp.Piecewise):
        u = sp.Dummy("u", real=True)
        local = absolute_terms(sp.diff(e.func(u), u)).xreplace({u: e.args[0]})
        return local * chain_size(e.args[0], s, cache)
    return _abs(sp.diff(e, s))  # Piecewise, Max, Heaviside...: sympy's derivative is its own size


def _abs(e: Any) -> Any:
    """|e| without sympy's simplification of Abs (which costs more than the rest on a big expression)."""
    if e.is_Number:
        return abs(e)
    return sp.Abs(e, evaluate=False)


def absolute_terms(expr: Any) -> Any:
    """expr with every term of a sum and every factor made non-negative: the size of the numbers its float
    evaluation adds up, which bounds the scale of its rounding (for 1 - tanh(u)**2: 1 + tanh(u)**2).

    sigmoid'(u), which sympy writes exp(-u)/(1 + exp(-u))**2, counts at the size of sigmoid(u): torch computes
    it as s*(1 - s) from s = sigmoid(u), whose rounding is of that size where s saturates at 1.
    """
    if expr.is_Number:
        return abs(expr)
    if expr.is_Mul:
        factors = list(expr.args)
        for i, f in enumerate(factors):
            base = f.base if f.is_Pow and f.exp == -2 else None
            if base is not None and base.is_Add and len(base.args) == 2 and sp.S.One in base.args:
                e = base.args[0] if base.args[1] is sp.S.One else base.args[1]
                if isinstance(e, sp.exp) and e in factors:
                    rest = [g for j, g in enumerate(factors) if j != i and j != factors.index(e)]
                    return sp.Mul(*[absolute_terms(g) for g in rest], 1 / base)
        return expr.func(*[absolute_terms(a) for a in expr.args])
    if expr.is_Add:
        return expr.func(*[absolute_terms(a) for a in expr.args])
    if expr.is_Pow and expr.exp.is_Number:
        return absolute_terms(expr.base) ** expr.exp
    return sp.Abs(expr)
