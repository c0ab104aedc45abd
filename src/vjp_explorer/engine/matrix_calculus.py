"""The symbolic check at any n: sympy's matrix calculus on MatrixSymbols, evaluated with einsum.

A program of matrix products, elementwise functions, sums and transposes is rebuilt as one sympy
matrix expression over a MatrixSymbol per leaf and constant (engine/matrix_expr.py). The scalar
L = Σ v ⊙ y is differentiated by each leaf with sympy's array calculus (`array_derive`), which gives
Jᵀv as an expression of contractions, diagonals and permutations, never a per-element formula: the
sympy work does not grow with n. That expression is evaluated in float64 with einsum
(engine/matrix_einsum.py). No autograd is involved.

Where sympy fails on the whole expression (it does on deep nestings), `Route.stepwise` carries Jᵀv back
piece by piece over cuts at the program's assignments and elementwise functions, each piece still
differentiated by sympy. The sympy 1.14 bugs it works around are in engine/matrix_expr.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import sympy as sp
import torch
from sympy.tensor.array.expressions.arrayexpr_derivatives import array_derive

from .interpreter import Step
from .matrix_einsum import Evaluator
from .matrix_expr import MatrixProgram, MVal, matrix, number, rows_cols, to_array
from .symbolic import Unsupported

NOTE = "matrix calculus: each leaf's Jᵀv from sympy's array_derive on MatrixSymbols, evaluated with einsum"


# ---------------------------------------------------------------------------- the route
def matrix_vjp(*args: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(Jᵀv, the size of its terms, how) per leaf from sympy's matrix calculus, in float64; Unsupported where it
    can't.

    Arguments as `_matrix_vjp`. sympy's deprecation warnings about its own internals (non-Expr arguments in
    Mul, from chained matrix products) are kept off the user's stderr.
    """
    from sympy.utilities.exceptions import SymPyDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymPyDeprecationWarning)
        return _matrix_vjp(*args)


class DerivativeFailed(Unsupported):
    """sympy's array calculus (or our evaluation of its result) failed on an expression it was given."""


def _matrix_vjp(
    steps: list[Step],
    output: str,
    leaves: dict[str, Any],
    consts: dict[str, Any],
    v: Any,
    max_elements: int,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The whole program differentiated at once; where sympy fails on it, step by step (see `Route.stepwise`)."""
    route = Route(leaves, consts, max_elements)
    try:
        if len(steps) > WHOLE_STEPS:
            raise DerivativeFailed(f"not at once ({len(steps)} executed assignments)")
        # a value used several times grows exponentially as one expression, and linearly step by step
        y = route.build(steps, output)
        expr = y.expr
        if _tree_size(expr, WHOLE_NODES) >= WHOLE_NODES:
            raise DerivativeFailed(f"the program is more than {WHOLE_NODES:,} expression nodes as one expression")
        grads, sizes = route.whole(expr, v)
        how = "the whole program at once"
    except (Unsupported, *_SYMPY_FAILURES) as failed:
        whole = failed if isinstance(failed, Unsupported) else f"sympy could not write it out ({_why(failed)})"
        route = Route(leaves, consts, max_elements)
        try:
            grads, sizes, cuts = route.stepwise(steps, output, v)
        except Unsupported as e:
            raise Unsupported(str(e) if str(e) == str(whole) else f"{whole}; step by step, {e}") from None
        except (*_SYMPY_FAILURES, RuntimeError) as e:
            raise Unsupported(f"{whole}; step by step, sympy failed ({_why(e)})") from None
        how = f"step by step, Jᵀv carried back through {cuts} intermediate values"
    shaped = {n: grads[n].reshape(t.shape) for n, t in leaves.items()}
    return shaped, {n: sizes[n].reshape(t.shape) for n, t in leaves.items()}, how


WHOLE_NODES = 5_000  # nodes of the program as one sympy tree beyond which it goes straight to step by step
WHOLE_STEPS = 4  # executed assignments beyond which it goes straight to step by step


def _tree_size(expr: Any, limit: int) -> int:
    """Nodes of expr as a tree, counting stops at `limit`."""
    n = 0
    for _ in sp.preorder_traversal(expr):
        n += 1
        if n >= limit:
            break
    return n


class Route:
    """The symbols of one run of the route, their values, and the derivative steps."""

    def __init__(self, leaves: dict[str, Any], consts: dict[str, Any], max_elements: int) -> None:
        self.values: dict[str, Any] = {}  # MatrixSymbol name -> float64 (rows, cols) tensor
        self.taken = set(leaves) | set(consts)
        self.max_elements = max_elements
        self.leaves = leaves
        self.env: dict[str, MVal] = {}
        for name, t in leaves.items():
            self.env[name] = matrix(self.symbol(name, t), tuple(t.shape))
        for name, t in consts.items():
            if t.dim() == 0:
                self.env[name] = number(sp.Float(float(t), 30))
            else:
                self.env[name] = matrix(self.symbol(name, t), tuple(t.shape))
        self.leaf_symbols = {name: self.env[name].expr for name in leaves}
        self.tape: list[tuple[Any, Any]] = []  # (cut symbol, the expression it stands for), in program order

    def symbol(self, stem: str, tensor: Any) -> Any:
        name = stem
        k = 0
        while name in self.values or (name != stem and name in self.taken):
            k += 1
            name = f"{stem}#{k}"
        r, c = rows_cols(tuple(tensor.shape))
        self.values[name] = tensor.detach().cpu().double().reshape(r, c)
        return sp.MatrixSymbol(name, r, c)

    def evaluate(self, expr: Any) -> Any:
        try:
            return Evaluator(self.values, self.max_elements).tensor(expr)
        except (*_SYMPY_FAILURES, RuntimeError) as e:
            raise Unsupported(f"a value could not be evaluated ({_why(e)})") from None

    def detached(self, x: MVal) -> MVal:
        return matrix(self.symbol("detach", self.evaluate(x.expr)), x.shape)

    def cut(self, x: MVal) -> MVal:
        """x replaced by a symbol of its own, holding its value (for the step-by-step pass)."""
        if x.scalar or x.is_symbol:
            return x
        expr = x.expr
        sym = self.symbol("h", self.evaluate(expr))
        self.tape.append((sym, expr))
        return matrix(sym, x.shape)

    def build(self, steps: list[Step], output: str, cut: bool = False) -> MVal:
        try:
            y = MatrixProgram(self.env, self.detached, self.cut if cut else None).run(steps, output)
        except (*_SYMPY_FAILURES, RuntimeError) as e:
            raise Unsupported(f"sympy could not build the program as matrix expressions ({_why(e)})") from None
        if y.scalar:
            raise Unsupported("an output that does not depend on any leaf")
        return y

    def pull_back(self, expr: Any, cot: Any, size: Any | None, wrt: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """∂ trace(uᵀ expr)/∂z for each symbol z of `wrt` in expr, with u = cot: (Jᵀu, the size of its terms).

        The size is the same sums over |factors| with u = `size` (|cot| when None). L is a trace even for a
        column (sympy 1.14 fails on some Hadamard products of columns written as uᵀ y), split over the terms of
        a sum: its derivative is the sum of theirs, and sympy copes with small expressions more often.
        """
        u = self.symbol("v", cot)
        terms = expr.args if isinstance(expr, sp.MatAdd) else (expr,)
        try:
            losses = [to_array(sp.Trace(u.T * term)) for term in terms]
        except _SYMPY_FAILURES as e:
            raise DerivativeFailed(f"sympy could not write the program as an array expression ({_why(e)})") from None
        out: dict[str, tuple[Any, Any]] = {}
        for name, z in wrt.items():
            total = torch.zeros(z.shape, dtype=torch.float64)
            mag = torch.zeros(z.shape, dtype=torch.float64)
            found = False
            for loss in losses:
                if not loss.has(z):
                    continue
                found = True
                try:
                    d = array_derive(loss, z)
                except _SYMPY_FAILURES as e:
                    raise DerivativeFailed(
                        f"sympy's matrix calculus could not differentiate by {name} ({_why(e)})"
                    ) from None
                try:
                    value, magnitude = Evaluator(self.values, self.max_elements).value_and_magnitude(d)
                    if size is not None:
                        sized = {**self.values, u.name: size}
                        magnitude = Evaluator(sized, self.max_elements).value_and_magnitude(d)[1]
                except (*_SYMPY_FAILURES, RuntimeError) as e:
                    raise DerivativeFailed(f"the derivative by {name} could not be evaluated ({_why(e)})") from None
                total += value.reshape(z.shape)
                mag += magnitude.reshape(z.shape)
            if found:
                out[name] = (total, mag)
        return out

    def whole(self, expr: Any, v: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        pulled = self.pull_back(expr, v, None, self.leaf_symbols)
        zeros = {n: torch.zeros(s.shape, dtype=torch.float64) for n, s in self.leaf_symbols.items()}
        return {n: pulled[n][0] if n in pulled else zeros[n] for n in zeros}, {
            n: pulled[n][1] if n in pulled else zeros[n] for n in zeros
        }

    def stepwise(self, steps: list[Step], output: str, v: Any) -> tuple[dict[str, Any], dict[str, Any], int]:
        """Reverse accumulation over cuts: every assignment and every elementwise function's result becomes a
        symbol of its own (its value computed from the inputs), and Jᵀv is carried back one piece at a time, each
        piece's derivative still sympy's matrix calculus. sympy 1.14 fails on deep nestings such as
        tanh(W@tanh(W@tanh(W@x))) as one expression, but not on their layers."""
        y = self.build(steps, output, cut=True)
        grads = {n: torch.zeros(s.shape, dtype=torch.float64) for n, s in self.leaf_symbols.items()}
        sizes = {n: torch.zeros(s.shape, dtype=torch.float64) for n, s in self.leaf_symbols.items()}
        r, c = rows_cols(tuple(v.shape))
        vv = v.detach().cpu().double().reshape(r, c)
        cots: dict[str, tuple[Any, Any]] = {}
        pieces: list[tuple[Any, Any]] = [(None, y.expr), *reversed(self.tape)]
        cut_symbols = {sym.name: sym for sym, _ in self.tape}
        for sym, expr in pieces:
            if sym is None:
                cot, size = vv, vv.abs()
            elif sym.name in cots:
                cot, size = cots[sym.name]
            else:
                continue  # the output does not depend on this value
            wrt = {**self.leaf_symbols, **{n: s for n, s in cut_symbols.items() if expr.has(s)}}
            for name, (value, mag) in self.pull_back(expr, cot, size, wrt).items():
                if name in grads:
                    grads[name] += value
                    sizes[name] += mag
                else:
                    old = cots.get(name)
                    cots[name] = (value, mag) if old is None else (old[0] + value, old[1] + mag)
        return grads, sizes, len(self.tape)


# what sympy 1.14's array calculus raises on expressions it cannot follow (its own bugs included)
_SYMPY_FAILURES = (NotImplementedError, TypeError, ValueError, AttributeError, IndexError, KeyError, RecursionError)


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
