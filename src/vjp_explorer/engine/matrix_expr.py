"""Program -> one sympy matrix expression: MatrixSymbols for leaves and constants, fused elementwise formulas.

A vector is an n x 1 column and a 0-d value a 1 x 1 matrix; matrix products, elementwise functions, sums
and transposes become sympy's matrix operations. Two sympy 1.14 bugs are worked around here: the
derivative of an elementwise function (`_function_fdiff`) and the conversion of a power of a transpose
(`to_array`); `MVal` fuses elementwise formulas around a third.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sympy as sp
import torch
from sympy.matrices.expressions.applyfunc import ElementwiseApplyFunction
from sympy.tensor.array.expressions import ArrayElementwiseApplyFunc, convert_matrix_to_array

from ..language import program as P
from ..ops import REGISTRY
from .interpreter import Step
from .symbolic import BINARY, UNARY, Unsupported


def _function_fdiff(self: Any) -> Any:
    """The derivative of an elementwise function, as a function.

    sympy 1.14's own version returns the bare class whenever the derivative is one function call, dropping
    its argument: d/dt exp(t + 1) came back as `exp`, d/dt Heaviside(t - 0.5) as `Heaviside`. This one keeps
    the class only when the call is on the variable itself.
    """
    d = sp.Dummy("d")
    fdiff = self.function(d).diff(d)
    if isinstance(fdiff, sp.Function) and fdiff.args == (d,):
        return type(fdiff)
    return sp.Lambda(d, fdiff)


# the two classes whose derivatives array_derive and MatrixExpr.diff take from this method; a correction of a
# sympy bug, not a change of behaviour elsewhere (the result is the same wherever sympy's was right)
ElementwiseApplyFunction._get_function_fdiff = _function_fdiff  # type: ignore[method-assign]
ArrayElementwiseApplyFunc._get_function_fdiff = _function_fdiff  # type: ignore[method-assign]


# ---------------------------------------------------------------------------- program -> matrix expression
_T = sp.Dummy("t", real=True)  # the placeholder of an elementwise formula


@dataclass(frozen=True)
class MVal:
    """A program value for sympy's matrix calculus; `shape` is the torch shape it stands for.

    Either a plain number (a literal, or a 0-d constant folded in), or the elementwise product of
    fn(base) over `factors`, each fn a formula in _T. Elementwise work on one base is fused into one
    formula (1/(1 + x*x) is a single function of x): sympy 1.14's array calculus cannot differentiate
    a function applied to a Hadamard product, nor some nested Hadamard products of columns.
    """

    shape: tuple[int, ...]
    number: Any = None
    factors: tuple[tuple[Any, Any], ...] = ()

    @property
    def scalar(self) -> bool:
        return self.number is not None

    @property
    def is_symbol(self) -> bool:
        """A bare MatrixSymbol: already a symbol of its own, nothing to cut."""
        return len(self.factors) == 1 and self.factors[0][1] == _T and isinstance(self.factors[0][0], sp.MatrixSymbol)

    @property
    def expr(self) -> Any:
        if self.scalar:
            return self.number
        parts = [base if fn == _T else ElementwiseApplyFunction(sp.Lambda(_T, fn), base) for base, fn in self.factors]
        return parts[0] if len(parts) == 1 else sp.HadamardProduct(*parts)


def matrix(expr: Any, shape: tuple[int, ...]) -> MVal:
    return MVal(shape, factors=((expr, _T),))


def number(x: Any) -> MVal:
    return MVal((), number=x)


def rows_cols(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], 1
    if len(shape) == 2:
        return shape
    raise Unsupported(f"a {len(shape)}-d value (matrix calculus covers 0-d, 1-d and 2-d)")


class MatrixProgram:
    """Evaluates a straight-line trace with sympy matrix expressions."""

    def __init__(self, env: dict[str, MVal], detached: Any, cut: Any = None) -> None:
        self.env = dict(env)
        self.detached = detached  # MVal -> a constant MatrixSymbol with that value
        self.cut = cut or (lambda x: x)  # MVal -> the same value as a symbol of its own (the step-by-step pass)

    def run(self, steps: list[Step], output: str) -> MVal:
        for s in steps:
            self.env[s.target] = self.cut(self.value_of(s.expr))
        return self.env[output]

    def cut_product(self, x: MVal) -> MVal:
        """sympy cannot differentiate a function of a Hadamard product: in the step-by-step pass, cut it first."""
        return self.cut(x) if not x.scalar and len(x.factors) > 1 else x

    def value_of(self, e: P.Expr) -> MVal:
        if isinstance(e, P.Num):
            return number(sp.Integer(int(e.value)) if e.integral else sp.Float(e.value, 30))
        if isinstance(e, P.Name):
            return self.env[e.id]
        if isinstance(e, P.UnaryOp):
            return scale(self.value_of(e.operand), sp.Integer(-1))
        if isinstance(e, P.BinOp):
            a, b = self.value_of(e.left), self.value_of(e.right)
            if e.op == "**":
                a, b = self.cut_product(a), self.cut_product(b)
            return matmul(a, b) if e.op == "@" else binary(e.op, a, b)
        if isinstance(e, P.Call):
            return self.call(e, [self.value_of(a) for a in e.args])
        raise Unsupported(f"{type(e).__name__} in an assignment")

    def call(self, e: P.Call, args: list[MVal]) -> MVal:
        f, x = e.func, args[0]
        if f in UNARY:
            if x.scalar:
                return number(UNARY[f](x.number))
            return self.cut(apply(_matrix_rule(f), self.cut_product(x)))
        if REGISTRY[f].operator == "**":
            return binary("**", self.cut_product(x), self.cut_product(args[1]))
        if f in ("matmul", "mm"):
            return matmul(x, args[1])
        if f in ("sum", "mean"):
            return reduce_sum(x, e.param("dim"), bool(e.param("keepdim")), mean=f == "mean")
        if f == "norm":
            p = e.param("p")
            pv = sp.Integer(2) if p is None or p == "fro" else sp.nsimplify(float(p))  # type: ignore[arg-type]
            if not (pv.is_finite and pv > 0):
                raise Unsupported(f"norm with p={p}")
            powered = apply((lambda t: t**2) if pv == 2 else (lambda t: sp.Abs(t) ** pv), self.cut_product(x))
            total = reduce_sum(self.cut(powered), e.param("dim"), bool(e.param("keepdim")), mean=False)
            return self.cut(apply(lambda t: t ** (1 / pv), total))
        if f == "t" or f == "transpose":
            nd = max(len(x.shape), 1)
            if f == "transpose" and len({int(e.param(k)) % nd for k in ("dim0", "dim1")}) == 1:  # type: ignore[arg-type]
                return x  # transpose(d, d): a no-op
            if len(x.shape) < 2:
                return x
            return MVal(x.shape[::-1], factors=tuple((base.T, fn) for base, fn in x.factors))
        if f == "detach":
            return x if x.scalar else self.detached(x)
        raise Unsupported(f"the function {f} in matrix calculus")


# sympy's array calculus cannot rebuild a Piecewise: relu is Max(x, 0), whose derivative Heaviside(x) is given
# torch's value at the kink (0) before it is evaluated
_MATRIX_UNARY = {"relu": lambda d: sp.Max(d, 0)}


def _matrix_rule(f: str) -> Any:
    """The registry's rule of a unary function, where sympy's array calculus can follow it."""
    if f in _MATRIX_UNARY:
        return _MATRIX_UNARY[f]
    probe = UNARY[f](sp.Symbol("x", real=True))
    steps = any(not type(g).__module__.startswith("sympy") for g in probe.atoms(sp.Function))  # floor, sign
    if probe.has(sp.Piecewise) or steps:
        raise Unsupported(f"the piecewise function {f} in matrix calculus")
    return UNARY[f]


def apply(g: Any, x: MVal) -> MVal:
    """g applied to every element: fused into the formula of a single factor."""
    if len(x.factors) == 1:
        ((base, fn),) = x.factors
        return MVal(x.shape, factors=((base, g(fn)),))
    return MVal(x.shape, factors=((x.expr, g(_T)),))


def scale(x: MVal, c: Any) -> MVal:
    if x.scalar:
        return number(c * x.number)
    (base, fn), *rest = x.factors
    if fn == _T:  # a coefficient of a plain matrix stays one (2*W, not an elementwise function of W)
        return MVal(x.shape, factors=((c * base, fn), *rest))
    return MVal(x.shape, factors=((base, c * fn), *rest))


def _hadamard(a: MVal, b: MVal, shape: tuple[int, ...]) -> MVal:
    merged: dict[Any, Any] = {}
    for base, fn in (*a.factors, *b.factors):
        merged[base] = merged[base] * fn if base in merged else fn
    return MVal(shape, factors=tuple(merged.items()))


def _ones(r: int, c: int) -> Any:
    return sp.OneMatrix(r, c)


def _repeat(expr: Any, old: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """A matrix expression of torch shape `old` repeated to `shape` (column form) with products of ones."""
    r, c = rows_cols(shape)
    xr, xc = rows_cols(old)
    if len(old) == 1 and len(shape) == 2:  # a (n,) row repeated down the rows of (m, n)
        expr, xr, xc = expr.T, 1, xr
    if (xr, xc) == (r, c):
        return expr
    if xr == 1 and xc == 1:
        return _ones(r, 1) * expr * _ones(1, c)
    if xr == 1 and xc == c:
        return _ones(r, 1) * expr
    if xc == 1 and xr == r:
        return expr * _ones(1, c)
    raise Unsupported(f"broadcasting {list(old)} to {list(shape)}")


def broadcast_to(x: MVal, shape: tuple[int, ...]) -> MVal:
    """x repeated to `shape`; repetition commutes with elementwise formulas, so each base is repeated."""
    if x.shape == shape or x.scalar:
        return x
    return MVal(shape, factors=tuple((_repeat(base, x.shape, shape), fn) for base, fn in x.factors))


def binary(op: str, a: MVal, b: MVal) -> MVal:
    """An elementwise binary op with torch broadcasting, in fused elementwise formulas and Hadamard products."""
    if a.scalar and b.scalar:
        return number(BINARY[op](a.number, b.number))
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    rows_cols(shape)
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    if op == "**":
        if b.scalar:
            k = b.number
            if len(a.factors) > 1 and k.is_Integer:  # (pq)**k = p**k q**k
                return MVal(shape, factors=tuple((base, fn**k) for base, fn in a.factors))
            return apply(lambda t: t**k, a)
        if a.scalar:
            return apply(lambda t: a.number**t, b)
        raise Unsupported("a tensor raised to a tensor power")
    if op == "/":
        if b.scalar:
            return scale(a, 1 / b.number)
        b = MVal(shape, factors=tuple((base, 1 / fn) for base, fn in b.factors))
        op = "*"
    if op == "*":
        if a.scalar or b.scalar:
            return scale(b, a.number) if a.scalar else scale(a, b.number)
        return _hadamard(a, b, shape)
    if op == "-":
        b, op = scale(b, sp.Integer(-1)), "+"
    if op == "+":
        if a.scalar or b.scalar:
            c, x = (a.number, b) if a.scalar else (b.number, a)
            if len(x.factors) == 1:
                return apply(lambda t: c + t, x)
            r, cols = rows_cols(shape)
            return matrix(x.expr + c * _ones(r, cols), shape)
        if len(a.factors) == 1 and len(b.factors) == 1 and a.factors[0][0] == b.factors[0][0]:
            base = a.factors[0][0]
            return MVal(shape, factors=((base, a.factors[0][1] + b.factors[0][1]),))
        return matrix(a.expr + b.expr, shape)
    raise Unsupported(f"the operator {op}")


def matmul(a: MVal, b: MVal) -> MVal:
    """torch.matmul for 1-d and 2-d operands; vectors are columns."""
    if a.scalar or b.scalar or not a.shape or not b.shape:
        raise Unsupported("matmul with a 0-d operand")
    if len(a.shape) > 2 or len(b.shape) > 2:
        raise Unsupported("batched matmul in matrix calculus")
    x, y = a.expr, b.expr
    if len(a.shape) == 1 and len(b.shape) == 1:
        return matrix(x.T * y, ())
    if len(a.shape) == 1:  # (k,) @ (k, m) -> (m,): as a column, yᵀ x
        return matrix(y.T * x, (b.shape[1],))
    if len(b.shape) == 1:
        return matrix(x * y, (a.shape[0],))
    return matrix(x * y, (a.shape[0], b.shape[1]))


def reduce_sum(x: MVal, dim: Any, keepdim: bool, mean: bool) -> MVal:
    """sum/mean over all, or over dim 0 or 1, with ones vectors."""
    if x.scalar or not x.shape:
        return x
    nd = len(x.shape)
    dims = set(range(nd)) if dim is None else {d % max(nd, 1) for d in (dim if isinstance(dim, tuple) else (dim,))}
    r, c = rows_cols(x.shape)
    count = math.prod(x.shape[d] for d in dims) if nd else 1
    e = x.expr
    if dims == set(range(nd)):
        out = _ones(1, r) * e * _ones(c, 1)
        shape = (1,) * nd if keepdim else ()
    elif nd == 2 and dims == {0}:  # column sums: (n,) as a column is eᵀ 1; keepdim (1, n) is 1ᵀ e
        out, shape = (_ones(1, r) * e, (1, c)) if keepdim else (e.T * _ones(r, 1), (c,))
    else:  # nd == 2, dims == {1}: row sums
        out, shape = e * _ones(c, 1), ((r, 1) if keepdim else (r,))
    if mean:
        out = out / count
    return matrix(out, shape)


def to_array(expr: Any) -> Any:
    """sympy's conversion of a matrix expression to an array expression, with (Bᵀ)**k written (B**k)ᵀ first:
    sympy 1.14 fails to convert a power of a transpose (x@W@W gives (W**2) and, transposed, (Wᵀ)**2)."""
    fixed = expr.replace(
        lambda e: isinstance(e, sp.MatPow) and isinstance(e.base, sp.Transpose),
        lambda e: sp.Transpose(sp.MatPow(e.base.arg, e.exp)),
    )
    return convert_matrix_to_array(fixed)
