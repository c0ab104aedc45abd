"""The symbolic check at any n: sympy's matrix calculus on MatrixSymbols, evaluated with einsum.

A program of matrix products, elementwise functions, sums and transposes is rebuilt as one sympy
matrix expression over a MatrixSymbol per leaf and constant (a vector is an n x 1 column, a 0-d value
a 1 x 1 matrix). The scalar L = Σ v ⊙ y is differentiated by each leaf with sympy's array calculus
(`array_derive`), which gives Jᵀv as an expression of contractions, diagonals and permutations,
never a per-element formula: the sympy work does not grow with n. That expression is evaluated in
float64 with our own walk: contractions and diagonals become einsum labels (an identity or a
diagonal matrix is a pair of labels made equal, never materialised), and a product of factors is
contracted pairwise, smallest result first. No autograd is involved.

Where sympy fails on the whole expression (it does on deep nestings), `Route.stepwise` carries Jᵀv back
piece by piece over cuts at the program's assignments and elementwise functions, each piece still
differentiated by sympy. Three sympy 1.14 bugs are worked around: see `_function_fdiff`, `_to_array` and
`MVal` (fused elementwise formulas).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
import torch
from sympy.matrices.expressions.applyfunc import ElementwiseApplyFunction
from sympy.matrices.expressions.diagonal import DiagMatrix, DiagonalMatrix, DiagonalOf
from sympy.tensor.array.expressions import (
    ArrayAdd,
    ArrayContraction,
    ArrayDiagonal,
    ArrayElementwiseApplyFunc,
    ArrayTensorProduct,
    OneArray,
    PermuteDims,
    ZeroArray,
    convert_matrix_to_array,
)
from sympy.tensor.array.expressions.arrayexpr_derivatives import array_derive

from ..language import program as P
from ..ops import REGISTRY
from .elementwise_route import evaluate
from .interpreter import Step
from .symbolic import _BIN, _UNARY, Unsupported, absolute_terms


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

NOTE = "matrix calculus: each leaf's Jᵀv from sympy's array_derive on MatrixSymbols, evaluated with einsum"
MAX_PRODUCTS = 256  # terms of the expanded Jᵀv expression; beyond it the route gives up


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
    def expr(self) -> Any:
        if self.scalar:
            return self.number
        parts = [base if fn == _T else ElementwiseApplyFunction(sp.Lambda(_T, fn), base) for base, fn in self.factors]
        return parts[0] if len(parts) == 1 else sp.HadamardProduct(*parts)


def matrix(expr: Any, shape: tuple[int, ...]) -> MVal:
    return MVal(shape, factors=((expr, _T),))


def number(x: Any) -> MVal:
    return MVal((), number=x)


def _rows_cols(shape: tuple[int, ...]) -> tuple[int, int]:
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
        if f in _UNARY:
            if x.scalar:
                return number(_UNARY[f](x.number))
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
    probe = _UNARY[f](sp.Symbol("x", real=True))
    steps = any(not type(g).__module__.startswith("sympy") for g in probe.atoms(sp.Function))  # floor, sign
    if probe.has(sp.Piecewise) or steps:
        raise Unsupported(f"the piecewise function {f} in matrix calculus")
    return _UNARY[f]


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
    r, c = _rows_cols(shape)
    xr, xc = _rows_cols(old)
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
        return number(_BIN[op](a.number, b.number))
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    _rows_cols(shape)
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
            r, cols = _rows_cols(shape)
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
    r, c = _rows_cols(x.shape)
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


def _to_array(expr: Any) -> Any:
    """sympy's conversion of a matrix expression to an array expression, with (Bᵀ)**k written (B**k)ᵀ first:
    sympy 1.14 fails to convert a power of a transpose (x@W@W gives (W**2) and, transposed, (Wᵀ)**2)."""
    fixed = expr.replace(
        lambda e: isinstance(e, sp.MatPow) and isinstance(e.base, sp.Transpose),
        lambda e: sp.Transpose(sp.MatPow(e.base.arg, e.exp)),
    )
    return convert_matrix_to_array(fixed)


# ---------------------------------------------------------------------------- einsum evaluation
class Labels:
    """Index labels with sizes; an identity makes two labels one (union-find)."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []

    def new(self, size: int) -> int:
        self.parent.append(len(self.parent))
        self.size.append(int(size))
        return len(self.parent) - 1

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@dataclass
class Product:
    """coeff · Π factors, with the output indexed by `out` (labels; equal labels are a diagonal)."""

    coeff: Any
    factors: list[tuple[Any, tuple[int, ...]]] = field(default_factory=list)
    out: tuple[int, ...] = ()


@dataclass
class Term:
    """A sum of products, all of one shape."""

    shape: tuple[int, ...]
    products: list[Product]


class Evaluator:
    """Evaluates sympy array/matrix expressions to float64 tensors."""

    def __init__(self, values: dict[str, Any], max_elements: int) -> None:
        self.values = values  # MatrixSymbol name -> float64 tensor of its (rows, cols) shape
        self.max_elements = max_elements
        self.labels = Labels()
        # id(factor tensor) -> the scale of its rounding where that exceeds |value|: an elementwise formula
        # evaluated with every term made |term| (1 - tanh(u)**2 is computed from numbers of size 1 + tanh(u)**2,
        # and loses digits where tanh saturates)
        self.scales: dict[int, Any] = {}

    # -- building terms
    def term(self, expr: Any) -> Term:
        if not hasattr(expr, "shape"):  # a number (a coefficient)
            if not expr.is_Number:
                raise Unsupported(f"evaluating the scalar {expr}")
            return Term((), [Product(float(expr))])
        shape = tuple(int(s) for s in expr.shape)
        if isinstance(expr, sp.MatrixSymbol):
            return self._dense(self.values[expr.name], shape)
        if isinstance(expr, sp.Identity):
            a = self.labels.new(shape[0])
            return Term(shape, [Product(1.0, [], (a, a))])
        if isinstance(expr, ZeroArray | sp.ZeroMatrix):
            return Term(shape, [])
        if isinstance(expr, OneArray | sp.OneMatrix):
            out = tuple(self.labels.new(s) for s in shape)
            return Term(shape, [Product(1.0, [(self._ones(self.labels.size[a]), (a,)) for a in out], out)])
        if isinstance(expr, DiagMatrix):  # a vector on the diagonal: diag(u)[i, j] = u[i] δij
            inner = self.term(expr.args[0])  # a column (n, 1) or row (1, n)
            axis = 0 if inner.shape[0] != 1 or inner.shape == (1, 1) else 1
            return Term(shape, [Product(p.coeff, p.factors, (p.out[axis], p.out[axis])) for p in inner.products])
        if isinstance(expr, DiagonalMatrix):  # a square matrix with its off-diagonal entries zeroed
            inner = self.term(expr.args[0])
            for p in inner.products:
                self.labels.union(p.out[0], p.out[1])
            return Term(shape, inner.products)
        if isinstance(expr, DiagonalOf):  # the diagonal of a square matrix, as a column
            inner = self.term(expr.args[0])
            for p in inner.products:
                self.labels.union(p.out[0], p.out[1])
                p.out = (p.out[0], self.labels.new(1))
            return Term(shape, inner.products)
        if isinstance(expr, ArrayTensorProduct):
            parts = [self.term(a) for a in expr.args]
            prods = []
            for combo in itertools.product(*[t.products for t in parts]):
                merged = Product(1.0)
                for p in combo:
                    q = self._fresh(p)
                    merged = Product(merged.coeff * q.coeff, merged.factors + q.factors, merged.out + q.out)
                prods.append(merged)
                if len(prods) > MAX_PRODUCTS:
                    raise Unsupported(f"the derivative expands into more than {MAX_PRODUCTS} terms")
            return Term(shape, prods)
        if isinstance(expr, ArrayContraction):
            inner = self.term(expr.expr)
            drop = {i for g in expr.contraction_indices for i in g}
            find = self.labels.find
            for p in inner.products:
                summed = [p.out[g[0]] for g in expr.contraction_indices]
                for g in expr.contraction_indices:
                    for i in g[1:]:
                        self.labels.union(p.out[g[0]], p.out[i])
                p.out = tuple(a for i, a in enumerate(p.out) if i not in drop)
                # a summed index that no factor carries (the trace of an identity) adds its size: n times 1
                carried = {find(a) for _, labs in p.factors for a in labs} | {find(a) for a in p.out}
                for a in {find(a) for a in summed} - carried:
                    p.coeff *= self.labels.size[a]
            return Term(shape, inner.products)
        if isinstance(expr, ArrayDiagonal):
            inner = self.term(expr.expr)
            groups = expr.diagonal_indices
            drop = {i for g in groups for i in g}
            for p in inner.products:
                for g in groups:
                    for i in g[1:]:
                        self.labels.union(p.out[g[0]], p.out[i])
                p.out = tuple(a for i, a in enumerate(p.out) if i not in drop) + tuple(p.out[g[0]] for g in groups)
            return Term(shape, inner.products)
        if isinstance(expr, PermuteDims):
            inner = self.term(expr.expr)
            perm = expr.permutation.array_form
            for p in inner.products:
                p.out = tuple(p.out[perm[i]] for i in range(len(perm)))
            return Term(shape, inner.products)
        if isinstance(expr, ArrayAdd | sp.MatAdd):
            prods = [p for a in expr.args for p in self.term(a).products]
            if len(prods) > MAX_PRODUCTS:
                raise Unsupported(f"the derivative expands into more than {MAX_PRODUCTS} terms")
            return Term(shape, prods)
        if isinstance(expr, sp.MatMul):
            scalars = [a for a in expr.args if not getattr(a, "is_Matrix", False)]
            mats = [a for a in expr.args if getattr(a, "is_Matrix", False)]
            coeff = float(sp.Mul(*scalars)) if scalars else 1.0
            t = self.term(_to_array(sp.MatMul(*mats)) if len(mats) > 1 else mats[0])
            for p in t.products:
                p.coeff *= coeff
            return Term(shape, t.products)
        if isinstance(expr, sp.Transpose | sp.HadamardProduct | sp.Trace | sp.MatPow):
            return self.term(_to_array(expr))
        if isinstance(expr, ElementwiseApplyFunction | ArrayElementwiseApplyFunc | sp.HadamardPower):
            value, scale = self._apply(expr)
            return self._dense(value, shape, scale)
        raise Unsupported(f"evaluating {type(expr).__name__}")

    def _apply(self, expr: Any) -> tuple[Any, Any]:
        """(the value of an elementwise function of a matrix, the scale of its rounding or None)."""
        if isinstance(expr, sp.HadamardPower):
            base, exp = expr.args
            if getattr(exp, "is_Matrix", False) or not exp.is_Number:
                raise Unsupported("a Hadamard power with a non-constant exponent")
            x = self.tensor(base)
            k = float(exp)
            if k.is_integer() and abs(k) < 2**62:
                return (torch.reciprocal(x) if k == -1 else x * x if k == 2 else torch.pow(x, int(k))), None
            return torch.pow(x, k), None
        fn = expr.function
        arg = sp.Symbol("_x", real=True)
        if isinstance(fn, sp.Lambda) and len(fn.variables) == 1:
            body = fn.expr.xreplace({fn.variables[0]: arg})
        elif isinstance(fn, sp.FunctionClass):
            body = fn(arg)
        else:
            raise Unsupported(f"the elementwise function {fn}")
        if body.has(sp.Derivative):  # the derivative's own dummy has no assumptions: d|x|/dx needs x real
            body = body.doit()
        body = body.replace(sp.Heaviside, lambda x, *h0: sp.Heaviside(x, 0))  # relu'(0) = 0, as in torch
        if body.free_symbols - {arg}:
            raise Unsupported(f"the elementwise function {fn} has free symbols")
        x = self.tensor(expr.expr)
        value = evaluate(body, {"_x": x})  # the whole array at once
        scale = None
        terms = absolute_terms(body)
        if terms != body and terms != sp.Abs(body):
            scale = evaluate(terms, {"_x": x})
            scale = scale if scale.shape == x.shape else scale.expand(x.shape)
        return (value if value.shape == x.shape else value.expand(x.shape)), scale

    def _dense(self, t: Any, shape: tuple[int, ...], scale: Any = None) -> Term:
        t = t.reshape(shape)
        if scale is not None:
            self.scales[id(t)] = scale.reshape(shape)
        out = tuple(self.labels.new(s) for s in shape)
        return Term(shape, [Product(1.0, [(t, out)], out)])

    def _ones(self, n: int) -> Any:
        return torch.ones(n, dtype=torch.float64)

    def _fresh(self, p: Product) -> Product:
        """A copy with labels of its own (a product copied into several terms must not share labels)."""
        mapping: dict[int, int] = {}

        def relabel(a: int) -> int:
            r = self.labels.find(a)
            if r not in mapping:
                mapping[r] = self.labels.new(self.labels.size[r])
            return mapping[r]

        return Product(
            p.coeff,
            [(t, tuple(relabel(a) for a in labs)) for t, labs in p.factors],
            tuple(relabel(a) for a in p.out),
        )

    # -- contracting
    def tensor(self, expr: Any) -> Any:
        """The value of `expr` as a float64 tensor of its shape."""
        t = self.term(expr)
        result = torch.zeros(t.shape, dtype=torch.float64)
        for p in t.products:
            result = result + self.contract(p)
        return result

    def value_and_magnitude(self, expr: Any) -> tuple[Any, Any]:
        """The value of `expr`, and the same sums with every factor made |factor|: the size of the terms that
        each element adds up (for Jᵀv, at least Σᵢ |v[i]·∂y[i]/∂x[j]|), which sets the tolerance."""
        t = self.term(expr)
        value = torch.zeros(t.shape, dtype=torch.float64)
        size = torch.zeros(t.shape, dtype=torch.float64)
        for p in t.products:
            value = value + self.contract(p)
            size = size + self.contract(p, absolute=True)
        return value, size.nan_to_num(0.0, 0.0, 0.0)

    def contract(self, p: Product, absolute: bool = False) -> Any:
        find = self.labels.find
        factors = [
            (self.scales.get(id(t), t.abs()) if absolute else t, tuple(find(a) for a in labs)) for t, labs in p.factors
        ]
        out = tuple(find(a) for a in p.out)
        present = {a for _, labs in factors for a in labs}
        for a in dict.fromkeys(out):
            if a not in present:  # an identity not contracted with anything: a row of ones on that label
                factors.append((self._ones(self.labels.size[a]), (a,)))
        keep = set(out)
        while len(factors) > 1:
            best = None
            for i, j in itertools.combinations(range(len(factors)), 2):
                others = {a for k, (_, labs) in enumerate(factors) if k not in (i, j) for a in labs}
                labs = tuple(dict.fromkeys(a for a in factors[i][1] + factors[j][1] if a in keep or a in others))
                shared = bool(set(factors[i][1]) & set(factors[j][1]))
                cost = (not shared, math.prod(self.labels.size[a] for a in labs))
                if best is None or cost < best[0]:
                    best = (cost, i, j, labs)
            assert best is not None
            _, i, j, labs = best
            self._budget(labs)
            merged = self._einsum([factors[i], factors[j]], labs)
            factors = [f for k, f in enumerate(factors) if k not in (i, j)] + [(merged, labs)]
        coeff = abs(p.coeff) if absolute else p.coeff
        if not factors:
            return torch.tensor(float(coeff), dtype=torch.float64)
        unique = tuple(dict.fromkeys(out))
        result = self._einsum(factors, unique)
        if len(unique) < len(out):  # a label twice in the output: the diagonal of an identity, made explicit
            self._budget(out, positions=True)
            order: list[int] = []
            eyes = []
            for a in out:
                if a in order:
                    b = self.labels.new(self.labels.size[a])
                    eyes.append((torch.eye(self.labels.size[a], dtype=torch.float64), (a, b)))
                    a = b
                order.append(a)
            result = self._einsum([(result, unique), *eyes], tuple(order))
        return coeff * result

    def _budget(self, labs: tuple[int, ...], positions: bool = False) -> None:
        """Refuse an intermediate of more than max_elements: over distinct labels, or over every position."""
        n = math.prod(self.labels.size[a] for a in (labs if positions else dict.fromkeys(labs)))
        if n > self.max_elements:
            raise Unsupported(f"evaluating the derivative would build a {n:,}-element intermediate")

    def _einsum(self, factors: list[tuple[Any, tuple[int, ...]]], out: tuple[int, ...]) -> Any:
        letters: dict[int, str] = {}
        for _, labs in factors:
            for a in labs:
                letters.setdefault(a, _LETTERS[len(letters)])
        for a in out:
            letters.setdefault(a, _LETTERS[len(letters)])
        spec = ",".join("".join(letters[a] for a in labs) for _, labs in factors)
        return torch.einsum(f"{spec}->{''.join(letters[a] for a in out)}", *[t for t, _ in factors])


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


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
        r, c = _rows_cols(tuple(tensor.shape))
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
        if x.scalar or (len(x.factors) == 1 and x.factors[0][1] == _T and isinstance(x.factors[0][0], sp.MatrixSymbol)):
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
            losses = [_to_array(sp.Trace(u.T * term)) for term in terms]
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
        r, c = _rows_cols(tuple(v.shape))
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
