"""The elementwise route: an elementwise program's Jᵀv from one scalar formula, differentiated once per leaf
and evaluated on whole arrays in float64 (no autograd), with the size of its terms for the tolerance.

The per-element route (engine/symbolic.py) holds one formula per output element; an elementwise program
needs only one, so this route stays exact at any size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import sympy as sp
import torch

from ..ops import REGISTRY, resolve
from .interpreter import Step
from .symbolic import SymbolicProgram, SymTensor, Unsupported, as_written, derivative, term_size
from .tensors import CHUNK


def elementwise_vjp(
    steps: list[Step],
    output: str,
    leaves: dict[str, Any],
    consts: dict[str, Any],
    v: Any,
    deps: dict[str, str],
    v_ones: bool = False,
) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
    """Jᵀv of an elementwise program: one scalar formula, differentiated once per leaf, evaluated on arrays.

    The derivative is sympy's; the evaluation is plain float64 arithmetic on the input values: no
    autograd is involved, so this stays an independent route at any size. Also returned, a function
    that gives, for the leaves whose derivative adds up numbers larger than itself (1 - tanh(u)**2,
    sigmoid', the two terms of the product rule in (x + c)*(x - c)), the size of those numbers times |v|:
    the scale of the rounding any float evaluation of it has (see term_size). It costs another pass
    over the arrays, so it is asked for only when the check fails without it.
    """
    env = {name: SymTensor((), [sp.Symbol(name, real=True)]) for name in [*leaves, *consts]}
    y = SymbolicProgram(env, lambda a: (_ for _ in ()).throw(Unsupported("detach"))).run(steps, output).items[0]
    written = as_written(
        lambda: SymbolicProgram(env, lambda a: (_ for _ in ()).throw(Unsupported("detach"))).run(steps, output).items,
        [y],
    )
    shape = tuple(v.shape)
    n = v.numel()
    vflat = v.detach().reshape(-1).cpu()
    formulas = {name: derivative(y, env[name].items[0]) for name in leaves if name in deps}
    used = {name: sorted(s.name for s in f.free_symbols) for name, f in formulas.items()}
    # only the inputs a formula reads: they broadcast to the output's shape; an unused one need not (W in
    # `h = W*2; y = x` may be any shape)
    inputs = {**leaves, **consts}

    def flat_input(name: str) -> Any:
        t = inputs[name].detach()
        return (t.expand(shape).reshape(-1) if tuple(t.shape) != shape else t.reshape(-1)).cpu()

    flat = {name: flat_input(name) for name in sorted({k for names in used.values() for k in names})}
    # where v is 0 the term is exactly 0 where the derivative is finite; where the derivative itself is
    # infinite or undefined (sqrt'(0)), 0·inf stays nan: Jᵀv has no value there, and a nan from backward at
    # such an element is undefined, not a disagreement
    # the common v (--grad ones, a scalar output), which the caller may know (v_ones): Jᵀv is the derivative
    lo, hi = (1.0, 1.0) if v_ones or not n else (float(t) for t in torch.aminmax(vflat))
    v_ones = lo == hi == 1.0
    # a derivative that is a number (the 3 of 3*a) with v = ones: Jᵀv is that number at every element, a
    # stride-0 view that costs no pass to fill, and that the comparison reads as a constant
    constant = {name: f for name, f in formulas.items() if v_ones and n and not f.free_symbols}

    # the rest in spans of CHUNK elements: the float64 copies of the inputs (and v) a span needs stay in
    # cache, and no float64 temporary of the full size is made besides the Jᵀv itself
    grads = {}
    for name, x in leaves.items():
        if name in constant:
            grads[name] = evaluate(constant[name], {}).expand(x.shape)
        elif name in formulas:
            fill = _span_rule(formulas[name], used[name], flat, vflat, v_ones)
            out = torch.empty(n, dtype=torch.float64)
            for start in range(0, n, CHUNK):
                fill(start, min(n, start + CHUNK), out[start : start + CHUNK])
            grads[name] = out.reshape(x.shape)
        else:  # a leaf that does not reach the output: a zero grad of its own shape, whatever the output's
            grads[name] = torch.zeros((), dtype=torch.float64).expand(x.shape)

    done: dict[str, Any] = {}

    def sizes() -> dict[str, Any]:
        if "result" not in done:  # asked by more than one failed check: computed once
            sized = _term_sizes(written()[0], env, formulas, flat, flat_input, None if v_ones else vflat, n)
            done["result"] = {name: t.reshape(leaves[name].shape) for name, t in sized.items()}
        return done["result"]

    return grads, sizes


def _span_rule(
    formula: Any, names: list[str], flat: dict[str, Any], vflat: Any, v_ones: bool
) -> Callable[[int, int, Any], None]:
    """Elements [start, end) of v * formula, in float64: the formula evaluated on float64 copies of the
    inputs it reads (only those), times v."""
    scratch: dict[str, Any] = {}  # float64 copies of a span of each input (and of v), reused span after span

    def widened(key: str, span: Any) -> Any:
        buf = scratch.get(key)
        if buf is None or buf.numel() < span.numel():
            buf = scratch[key] = torch.empty(span.numel(), dtype=torch.float64)
        return buf[: span.numel()].copy_(span)

    def fill(start: int, end: int, out: Any) -> None:
        arrays = {k: widened(k, flat[k][start:end]) for k in names}
        if v_ones:
            evaluate(formula, arrays, out=out)
            return
        # (a 0-d float64 derivative times float32 v would compute in float32)
        vc = widened("", vflat[start:end])
        torch.mul(vc, evaluate(formula, arrays), out=out)

    return fill


def _term_sizes(
    y: Any,
    env: dict[str, SymTensor],
    formulas: dict[str, Any],
    flat: dict[str, Any],
    flat_input: Callable[[str], Any],
    vflat: Any,
    n: int,
) -> dict[str, Any]:
    """For the leaves whose derivative adds up numbers larger than itself, the size of those numbers times
    |v| (flat float64; vflat None for v = ones), in spans of CHUNK elements."""
    scales = {}
    sized: dict[Any, Any] = {}
    for name, f in formulas.items():
        t = term_size(y, env[name].items[0], f, sized)
        if t is not None:
            scales[name] = t
    for t in scales.values():
        for k in t.free_symbols:
            if k.name not in flat:
                flat[k.name] = flat_input(k.name)
    result = {name: torch.empty(n, dtype=torch.float64) for name in scales}
    reads = {name: sorted(s.name for s in terms.free_symbols) for name, terms in scales.items()}
    for start in range(0, n, CHUNK):
        end = min(n, start + CHUNK)
        cache: dict[str, Any] = {}
        av = None if vflat is None else vflat[start:end].double().abs()  # once per chunk, for every leaf
        for name, terms in scales.items():
            for k in reads[name]:  # each input converted once per chunk, for every leaf that reads it
                if k not in cache:
                    cache[k] = flat[k][start:end].double()
            dest = result[name][start:end]
            evaluate(terms, {k: cache[k] for k in reads[name]}, out=dest)
            if av is not None:
                dest.mul_(av)
    return result


def evaluate(expr: Any, arrays: dict[str, Any], out: Any = None) -> Any:
    """A sympy expression evaluated with torch float64 arithmetic (our own walk: no lambdify).

    With `out` (float64, the arrays' shape), the last operation writes into it (no copy of the result).
    """
    if expr.is_Symbol:
        return _give(arrays[expr.name], out)
    if expr is sp.zoo or expr is sp.nan:
        return _give(torch.tensor(math.nan, dtype=torch.float64), out)
    if expr.is_Number or expr.is_NumberSymbol:  # 3, 1/2, pi (erf's derivative holds sqrt(pi))
        return _give(torch.tensor(float(expr), dtype=torch.float64), out)
    args = expr.args
    if expr.is_Add or expr.is_Mul:
        op: Callable[..., Any] = torch.add if expr.is_Add else torch.mul
        acc = evaluate(args[0], arrays)
        for a in args[1:-1]:
            acc = op(acc, evaluate(a, arrays))
        return _call(op, [acc, evaluate(args[-1], arrays)], out)
    if expr.is_Pow:
        base, exp = args
        if exp == sp.Rational(1, 2):
            return _call(torch.sqrt, [evaluate(base, arrays)], out)
        if exp.is_Integer and abs(int(exp)) < 2**62:  # a scalar exponent is cheaper; 1/x, x*x need no pow
            x, k = evaluate(base, arrays), int(exp)
            if k == -1:
                return _call(torch.reciprocal, [x], out)
            if k == 2:
                return _call(torch.mul, [x, x], out)
            return _call(lambda x, **o: torch.pow(x, k, **o), [x], out)
        return _call(torch.pow, [evaluate(base, arrays), evaluate(exp, arrays)], out)
    if isinstance(expr, sp.Heaviside):
        h0 = float(args[1]) if len(args) > 1 else 0.5
        return _call(torch.heaviside, [evaluate(args[0], arrays), torch.tensor(h0, dtype=torch.float64)], out)
    if isinstance(expr, sp.Max | sp.Min):
        op = torch.maximum if isinstance(expr, sp.Max) else torch.minimum
        acc = evaluate(args[0], arrays)
        for a in args[1:-1]:
            acc = op(acc, evaluate(a, arrays))
        return _call(op, [acc, evaluate(args[-1], arrays)], out)
    if isinstance(expr, sp.Piecewise):
        result = torch.tensor(math.nan, dtype=torch.float64)
        for value, cond in reversed(args):
            result = torch.where(_condition(cond, arrays), evaluate(value, arrays), result)
        return _give(result, out)
    fn = _TORCH_FUNCS.get(type(expr).__name__)
    if fn is None:
        raise Unsupported(f"evaluating {type(expr).__name__}")
    return _call(fn, [evaluate(a, arrays) for a in args], out)


def _call(fn: Callable[..., Any], xs: list[Any], out: Any) -> Any:
    """fn(*xs), written into `out` when given: directly where the result has out's shape (some x is an
    array, not a 0-d number), else broadcast into it."""
    if out is not None and any(x.dim() for x in xs):
        return fn(*xs, out=out)
    return _give(fn(*xs), out)


def _give(value: Any, out: Any) -> Any:
    if out is None:
        return value
    out.copy_(value)  # a 0-d value fills it
    return out


def _condition(cond: Any, arrays: dict[str, Any]) -> Any:
    if cond is sp.true:
        return torch.tensor(True)
    if cond is sp.false:
        return torch.tensor(False)
    ops = {
        "StrictGreaterThan": torch.gt,
        "GreaterThan": torch.ge,
        "StrictLessThan": torch.lt,
        "LessThan": torch.le,
        "Equality": torch.eq,
        "Unequality": torch.ne,
    }
    name = type(cond).__name__
    if name in ops:
        return ops[name](evaluate(cond.args[0], arrays), evaluate(cond.args[1], arrays))
    if name in ("And", "Or"):
        parts = [_condition(c, arrays) for c in cond.args]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if name == "And" else (out | p)
        return out
    raise Unsupported(f"the condition {name}")


# the sympy functions the registry's torch functions compute (exp, Abs, atan2, floor, ...)
_TORCH_FUNCS: dict[str, Callable[..., Any]] = {
    name: resolve(s.torch) for s in REGISTRY.values() for name in s.evaluates
}
