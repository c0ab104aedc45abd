"""sympy array and matrix expressions -> float64 tensors with einsum, never a per-element formula.

Contractions and diagonals become einsum labels (an identity or a diagonal matrix is a pair of labels made
equal, never materialised), and a product of factors is contracted pairwise, smallest result first.
"""

from __future__ import annotations

import itertools
import math
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
)

from .elementwise_route import evaluate
from .matrix_expr import to_array
from .sizing import absolute_terms
from .symbolic import Unsupported

MAX_PRODUCTS = 256  # terms of the expanded Jᵀv expression; beyond it the route gives up


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
            return self.dense(self.values[expr.name], shape)
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
        if isinstance(expr, ArrayTensorProduct | ArrayContraction | ArrayDiagonal | PermuteDims):
            return self._index_term(expr, shape)
        if isinstance(expr, ArrayAdd | sp.MatAdd):
            prods = [p for a in expr.args for p in self.term(a).products]
            if len(prods) > MAX_PRODUCTS:
                raise Unsupported(f"the derivative expands into more than {MAX_PRODUCTS} terms")
            return Term(shape, prods)
        if isinstance(expr, sp.MatMul):
            scalars = [a for a in expr.args if not getattr(a, "is_Matrix", False)]
            mats = [a for a in expr.args if getattr(a, "is_Matrix", False)]
            coeff = float(sp.Mul(*scalars)) if scalars else 1.0
            t = self.term(to_array(sp.MatMul(*mats)) if len(mats) > 1 else mats[0])
            for p in t.products:
                p.coeff *= coeff
            return Term(shape, t.products)
        if isinstance(expr, sp.Transpose | sp.HadamardProduct | sp.Trace | sp.MatPow):
            return self.term(to_array(expr))
        if isinstance(expr, ElementwiseApplyFunction | ArrayElementwiseApplyFunc | sp.HadamardPower):
            value, scale = self._apply(expr)
            return self.dense(value, shape, scale)
        raise Unsupported(f"evaluating {type(expr).__name__}")

    def _index_term(self, expr: Any, shape: tuple[int, ...]) -> Term:
        """The array operations that only combine or relabel indices: a tensor product, a contraction, a
        diagonal, else a permutation (PermuteDims)."""
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
        inner = self.term(expr.expr)
        perm = expr.permutation.array_form
        for p in inner.products:
            p.out = tuple(p.out[perm[i]] for i in range(len(perm)))
        return Term(shape, inner.products)

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

    def dense(self, t: Any, shape: tuple[int, ...], scale: Any = None) -> Term:
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
