"""Program -> sympy: the same trace, element by element, differentiated exactly.

This is the independent route: no autograd anywhere. Every element of every
value is a sympy expression in per-element symbols (`b[1]`, `W[0,1]`); the
Jacobian is `diff` of each output element by each leaf symbol, evaluated at the
inputs with 30 significant digits.  Only our own program representation is
turned into sympy objects: no user text ever reaches sympify.
"""

from __future__ import annotations

import gc
import itertools
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp
import torch

from ..language import program as P
from ..ops import REGISTRY, OpSpec, bound_params
from ..result import index_label
from . import indexing
from .differentiate import DPS, derivative, real_at, signed_infinity, to_float
from .interpreter import Step
from .sizing import term_size


class SymbolicTimeout(Exception):
    """The sympy work ran out of its time budget."""


class Unsupported(Exception):
    """A construct the symbolic route cannot follow (the check is skipped, with this reason)."""


@dataclass
class SymTensor:
    """A tensor of sympy expressions: shape plus row-major elements."""

    shape: tuple[int, ...]
    items: list[Any]
    kind: str = "float"  # "bool" for a mask, "int" for integer tensors: they can index

    def at(self, idx: tuple[int, ...]) -> Any:
        k = 0
        for i, n in zip(idx, self.shape, strict=True):
            k = k * n + i
        return self.items[k]


def leaf_symbols(name: str, shape: tuple[int, ...]) -> SymTensor:
    """One real symbol per element."""
    idxs = list(itertools.product(*[range(n) for n in shape]))
    return SymTensor(shape, [sp.Symbol(index_label(name, i), real=True) for i in idxs])


def _num(x: float, integral: bool = False) -> Any:
    if integral or (float(x).is_integer() and abs(x) < 2**53):
        return sp.Integer(int(x))
    return sp.Float(x, DPS)


GC_DEFERRALS = 25  # alarms (20 ms apart) that may land in a gc callback before one raises there anyway


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise SymbolicTimeout in this (main) thread after `seconds`; sympy cannot escape it."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield  # no signals off the main thread: the size limits still bound the work
        return

    deferred = [0]

    def on_alarm(signum: int, frame: Any) -> None:
        # inside a gc callback (hypothesis installs one) Python drops the exception and prints "Exception
        # ignored" on stderr: wait there for the next alarm, which lands in the work it bounds (a few
        # times at most: work that spends all its time in gc callbacks is stopped all the same)
        callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
        while frame is not None and deferred[0] < GC_DEFERRALS:
            if frame.f_code in callbacks:
                deferred[0] += 1
                return
            frame = frame.f_back
        raise SymbolicTimeout()

    # The timer repeats after it first fires: an alarm that lands in a gc callback, or in
    # code that swallows exceptions, is lost there, and the next one stops the work.
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-6), 0.02)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, old)


class SymbolicProgram:
    """Evaluates a straight-line trace with SymTensors."""

    def __init__(self, env: dict[str, SymTensor], numeric: Callable[[Any], Any]) -> None:
        self.env = dict(env)
        self.numeric = numeric  # substitutes the input values: used for detach()
        self.fixed: dict[int, Any] = {}  # the current step's masks and made tensors (Step.fixed)

    def run(self, steps: list[Step], output: str) -> SymTensor:
        for s in steps:
            self.fixed = s.fixed
            self.env[s.target] = self.value_of(s.expr)
        return self.env[output]

    def value_of(self, e: P.Expr) -> SymTensor:
        if isinstance(e, P.Num):
            return SymTensor((), [_num(e.value, e.integral)])
        if isinstance(e, P.Name):
            return self.env[e.id]
        if isinstance(e, P.UnaryOp):
            x = self.value_of(e.operand)
            if e.op == "~":
                return SymTensor(x.shape, [1 - a for a in x.items], "bool")
            return SymTensor(x.shape, [-a for a in x.items])
        if isinstance(e, P.BinOp):
            a, b = self.value_of(e.left), self.value_of(e.right)
            if e.op == "@":
                return matmul(a, b)
            out = broadcast(a, b, BINARY[e.op])
            if e.op in ("&", "|"):
                out.kind = "bool"
            return out
        if isinstance(e, P.Compare | P.Const) and id(e) in self.fixed:
            return constant(self.fixed[id(e)])  # a mask, a made tensor: constants at the point, as torch made them
        if isinstance(e, P.Scalar):  # a Python number: a constant to backward, its value at the inputs
            x = self.value_of(e.value)
            if e.what in ("len", "size", "numel", "dim"):
                sizes = {"numel": len(x.items), "dim": len(x.shape)}
                n = sizes.get(e.what, x.shape[0 if e.dim is None else e.dim] if x.shape else 0)
                return SymTensor((), [sp.Integer(n)])
            if len(x.items) != 1:
                raise Unsupported(f"math.{e.what} of {len(x.items)} elements")
            return SymTensor((), [sp.Float(getattr(math, e.what)(to_float(self.numeric(x.items[0]))), DPS)])
        if isinstance(e, P.Index):
            return self.index(e)
        if isinstance(e, P.Update):
            y, value = self.value_of(e.index.value), self.value_of(e.value)
            k = indexing.resolve(e.index.items, self._index_value)

            def write(a: Any, b: Any) -> Any:
                out = a.clone()
                out[k] = b
                return out

            return pick([y, value], write)
        if isinstance(e, P.Call):
            return self.call(e, [self.value_of(a) for a in e.args])
        raise Unsupported(f"{type(e).__name__} in an assignment")

    def index(self, e: P.Index) -> SymTensor:
        """x[...]: torch's own indexing on the element numbers (index_map), with the masks and index tensors
        as they were at the point."""
        x = self.value_of(e.value)
        k = indexing.resolve(e.items, self._index_value)
        return pick([x], lambda n: n[k])

    def _index_value(self, item: P.Expr) -> Any:
        """An index part that is an expression: an int (a loop variable) or a tensor of the values at the point."""
        m = self.value_of(item)
        if m.kind == "float":
            if m.shape == () and m.items[0].is_Integer:  # a loop variable: x[i], x[i:i + 2]
                return int(m.items[0])
            raise Unsupported("an index tensor that is not a mask or integers")
        dtype = torch.bool if m.kind == "bool" else torch.int64
        return torch.tensor([int(v) for v in m.items], dtype=dtype).reshape(m.shape)

    def call(self, e: P.Call, args: list[SymTensor]) -> SymTensor:
        f = e.func
        x = args[0]
        spec = REGISTRY[f]
        if spec.operator == "**":
            return broadcast(x, args[1], BINARY["**"])
        if spec.elementwise:
            fn = exact_rule(spec, e.params)
            if len(args) == 2:
                return broadcast(x, args[1], fn)
            if len(args) > 2:
                return from_array(np.vectorize(fn, otypes=[object])(*(as_array(a) for a in args)))
            return SymTensor(x.shape, [fn(a) for a in x.items])
        if spec.structure == "general":
            if spec.rule is None:
                raise Unsupported(f"{f}: {spec.unsupported}" if spec.unsupported else f"the function {f}")
            out = spec.rule(RuleContext(self.numeric), *(as_array(a) for a in args), **bound_params(spec, e.params))
            return from_array(np.asarray(out, dtype=object))
        if spec.structure == "index":
            return index_map(spec, args, dict(e.params))
        if spec.structure == "matmul":
            return matmul(x, args[1])
        if spec.structure == "detach":
            return SymTensor(x.shape, [self.numeric(a) for a in x.items])
        if f in ("sum", "mean", "prod"):
            combine = {"sum": sp.Add, "prod": sp.Mul, "mean": lambda *xs: sp.Add(*xs) / len(xs)}[f]
            return reduce(x, e.param("dim"), bool(e.param("keepdim")), combine)
        if spec.structure == "softmax":
            return softmax(x, int(e.param("dim")), log=f == "log_softmax")  # type: ignore[arg-type]
        if f == "t":
            if len(x.shape) < 2:
                return x
            return transpose(x, 0, 1)
        if f == "transpose":
            return transpose(x, int(e.param("dim0")), int(e.param("dim1")))  # type: ignore[arg-type]
        raise Unsupported(f"the function {f}")


class RuleContext:
    """What a registry rule may use besides the arrays: sympy, and the value of an expression at the inputs
    (to pick the branch torch takes: the largest element of a max, the sign of a kink)."""

    sp = sp

    def __init__(self, numeric: Callable[[Any], Any]) -> None:
        self._numeric = numeric

    def value(self, expr: Any) -> float:
        return to_float(self._numeric(expr))


def as_array(x: SymTensor) -> Any:
    """The elements as a numpy object array of the tensor's shape."""
    arr = np.empty(len(x.items), dtype=object)
    for k, item in enumerate(x.items):
        arr[k] = item
    return arr.reshape(x.shape)


def from_array(arr: Any) -> SymTensor:
    return SymTensor(tuple(arr.shape), [_basic(a) for a in np.asarray(arr, dtype=object).reshape(-1)])


def _basic(a: Any) -> Any:
    # a rule's array may hold plain numbers where it summed nothing or multiplied by a constant
    if isinstance(a, sp.Basic):
        return a
    if isinstance(a, bool | int | np.integer):
        return sp.Integer(int(a))
    return sp.Float(float(a), DPS)


def index_map(spec: OpSpec, args: list[SymTensor], params: dict[str, Any]) -> SymTensor:
    """An op whose every output element is an input element or 0 (reshape, cat, flip, tril, indexing): run
    the real torch function on element numbers (1, 2, ...; 0 stays a literal 0) and read the elements back."""
    return pick(args, lambda *numbers: spec.call_torch(*numbers, **params), spec.index_args)


def pick(args: list[SymTensor], fn: Callable[..., Any], index_args: tuple[int, ...] = ()) -> SymTensor:
    """fn run on the element numbers of args (1, 2, ... across all of them), its result read as elements;
    the args at index_args are indices (gather's index), given to fn as their values."""
    flat: list[Any] = []
    numbers = []
    for k, a in enumerate(args):
        if k in index_args:
            if a.kind == "float":
                raise Unsupported("an index tensor that is not integers")
            numbers.append(torch.tensor([int(v) for v in a.items], dtype=torch.int64).reshape(a.shape))
            continue
        n = len(a.items)
        numbers.append(torch.arange(len(flat) + 1, len(flat) + n + 1, dtype=torch.int64).reshape(a.shape))
        flat += a.items
    picked = fn(*numbers)
    if isinstance(picked, tuple | list):  # max(x, dim) and the like: the values
        picked = picked[0]
    items = [sp.Integer(0) if k == 0 else flat[k - 1] for k in picked.reshape(-1).long().tolist()]
    kinds = {a.kind for k, a in enumerate(args) if k not in index_args}
    return SymTensor(tuple(picked.shape), items, kinds.pop() if len(kinds) == 1 else "float")


def constant(t: Any) -> SymTensor:
    """A tensor fixed at the point (a mask, a made tensor) as exact numbers: the very values torch used."""
    kind = "bool" if t.dtype == torch.bool else "float" if t.is_floating_point() else "int"
    vals = t.detach().reshape(-1).tolist()
    items = [sp.Integer(int(v)) if kind != "float" else _num(float(v)) for v in vals]
    return SymTensor(tuple(t.shape), items, kind)


def exact_rule(spec: OpSpec, params: tuple[tuple[str, Any], ...] = ()) -> Callable[..., Any]:
    """The registry's exact rule of an elementwise function, its parameters bound as sympy numbers; raises
    Unsupported (the check is skipped with the entry's reason) where it has none."""
    if spec.exact is None:
        raise Unsupported(f"{spec.name}: {spec.unsupported}" if spec.unsupported else f"the function {spec.name}")
    rule = spec.exact
    bound = {k: v if v is None or isinstance(v, str) else _num(float(v)) for k, v in bound_params(spec, params).items()}
    return lambda *xs: rule(sp, *xs, **bound)


# the unary elementwise functions at their default parameters (matrix calculus and tests read these)
UNARY: dict[str, Callable[[Any], Any]] = {
    s.name: exact_rule(s) for s in REGISTRY.values() if s.elementwise and s.tensors == 1 and s.exact is not None
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
    "&": lambda a, b: a * b,  # on masks (0 and 1)
    "|": lambda a, b: a + b - a * b,
}


def _indices(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*[range(n) for n in shape])


def broadcast(a: SymTensor, b: SymTensor, fn: Callable[[Any, Any], Any]) -> SymTensor:
    """Elementwise binary op with numpy/torch broadcasting."""
    nd = max(len(a.shape), len(b.shape))
    sa = (1,) * (nd - len(a.shape)) + a.shape
    sb = (1,) * (nd - len(b.shape)) + b.shape
    shape = tuple(max(x, y) for x, y in zip(sa, sb, strict=True))
    out = []
    for idx in _indices(shape):
        ia = tuple(0 if n == 1 else i for i, n in zip(idx, sa, strict=True))[nd - len(a.shape) :]
        ib = tuple(0 if n == 1 else i for i, n in zip(idx, sb, strict=True))[nd - len(b.shape) :]
        out.append(fn(a.at(ia), b.at(ib)))
    return SymTensor(shape, out)


def reduce(x: SymTensor, dim: Any, keepdim: bool, combine: Callable[..., Any]) -> SymTensor:
    """Reduce over `dim` (None: all, int, or tuple of ints)."""
    nd = len(x.shape)
    if dim is None:
        dims = set(range(nd))
    else:
        dims = {d % max(nd, 1) for d in (dim if isinstance(dim, tuple) else (dim,))}
    if nd == 0:
        return SymTensor((), [combine(x.items[0])])
    kept = [i for i in range(nd) if i not in dims]
    groups: dict[tuple[int, ...], list[Any]] = {}
    for idx in _indices(x.shape):
        groups.setdefault(tuple(idx[i] for i in kept), []).append(x.at(idx))
    shape = tuple(1 if i in dims else x.shape[i] for i in range(nd)) if keepdim else tuple(x.shape[i] for i in kept)
    # over no elements (x[x > 5].sum() with none selected) each result is the empty sum: 0, as torch's
    return SymTensor(shape, [combine(*groups.get(k, [])) for k in _indices(tuple(x.shape[i] for i in kept))])


def transpose(x: SymTensor, d0: int, d1: int) -> SymTensor:
    """Swap two dimensions."""
    nd = len(x.shape)
    if nd == 0:
        return x  # torch allows transpose(0, 0) of a 0-d tensor: a no-op
    d0, d1 = d0 % nd, d1 % nd
    perm = list(range(nd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    shape = tuple(x.shape[p] for p in perm)
    out = []
    for idx in _indices(shape):
        src = [0] * nd
        for k, p in enumerate(perm):
            src[p] = idx[k]
        out.append(x.at(tuple(src)))
    return SymTensor(shape, out)


def matmul(a: SymTensor, b: SymTensor) -> SymTensor:
    """torch.matmul semantics for 1-D, 2-D and batched operands."""
    a2 = SymTensor((1, *a.shape), a.items) if len(a.shape) == 1 else a
    b2 = SymTensor((*b.shape, 1), b.items) if len(b.shape) == 1 else b
    batch_a, batch_b = a2.shape[:-2], b2.shape[:-2]
    nd = max(len(batch_a), len(batch_b))
    ba = (1,) * (nd - len(batch_a)) + batch_a
    bb = (1,) * (nd - len(batch_b)) + batch_b
    batch = tuple(max(x, y) for x, y in zip(ba, bb, strict=True))
    n, k, m = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    out = []
    for bi in _indices(batch):
        ia = tuple(0 if s == 1 else i for i, s in zip(bi, ba, strict=True))[nd - len(batch_a) :]
        ib = tuple(0 if s == 1 else i for i, s in zip(bi, bb, strict=True))[nd - len(batch_b) :]
        for i in range(n):
            for j in range(m):
                out.append(sp.Add(*[a2.at((*ia, i, q)) * b2.at((*ib, q, j)) for q in range(k)]))
    shape = (*batch, n, m)
    if len(a.shape) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b.shape) == 1:
        shape = shape[:-1]
    return SymTensor(shape, out)


def softmax(x: SymTensor, dim: int, log: bool) -> SymTensor:
    """softmax / log_softmax along one dimension."""
    nd = len(x.shape)
    if nd == 0:
        return SymTensor((), [sp.Integer(0) if log else sp.Integer(1)])
    d = dim % nd
    out = []
    for idx in _indices(x.shape):
        row = [x.at(idx[:d] + (j,) + idx[d + 1 :]) for j in range(x.shape[d])]
        z = sp.Add(*[sp.exp(r) for r in row])
        out.append(x.at(idx) - sp.log(z) if log else sp.exp(x.at(idx)) / z)
    return SymTensor(x.shape, out)


@dataclass
class SymbolicJacobian:
    """Per leaf: the exact derivative expressions and their values at the inputs."""

    output: SymTensor
    # leaf -> (out_numel x leaf_numel) nested lists of sympy expressions / floats
    formulas: dict[str, list[list[Any]]]
    values: dict[str, list[list[float]]]
    seconds: float
    # leaf -> {(row, col): (output element, leaf symbol, derivative)} for the entries whose output element
    # reads the leaf element (an exact 0 there may still be terms that cancel), with the values of the
    # symbols: what size_matrix needs, kept so that it costs nothing unless asked for
    entries: dict[str, dict[tuple[int, int], tuple[Any, Any, Any]]] = field(default_factory=dict)
    subs: dict[Any, Any] = field(default_factory=dict)
    # leaf -> entries whose exact value is finite but beyond float64's range (values holds ±inf there)
    huge: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    # the output elements as the program writes them (see as_written), built only if size_matrix is asked
    written: Callable[[], list[Any]] | None = field(default=None, repr=False)
    _sizes: dict[str, Any] = field(default_factory=dict, repr=False)

    def finite_mask(self, leaf: str) -> Any:
        """(out_numel, leaf_numel) bool: where the exact value is finite, though it may read ±inf in values."""
        m = self.matrix(leaf).isfinite()
        for i, j in self.huge.get(leaf, ()):
            m[i, j] = True
        return m

    def matrix(self, leaf: str) -> Any:
        """The values as a float64 tensor of shape (out_numel, leaf_numel)."""
        return torch.tensor(self.values[leaf], dtype=torch.float64)

    def size_matrix(self, leaf: str) -> Any:
        """Per entry, the size of the numbers autograd adds up to get it (term_size: for 1 - tanh(u)**2,
        1 + tanh(u)**2; for the product rule, its terms before they cancel), which sets the scale of its
        rounding; |value| where that is no larger. float64 (out_numel, leaf_numel); None if no entry is
        widened. Costs an exact evaluation per entry: asked for only when a check fails without it, once."""
        if leaf in self._sizes:
            return self._sizes[leaf]
        m = self.matrix(leaf).abs().nan_to_num(0.0, 0.0, 0.0)
        widened = False
        cache: dict[Any, Any] = {}
        written = self.written() if self.written is not None and self.entries.get(leaf) else None
        for (i, j), (y, sym, d) in self.entries.get(leaf, {}).items():
            t = term_size(written[i] if written is not None else y, sym, d, cache)
            if t is None:
                continue
            try:
                size = to_float(t.xreplace(self.subs).evalf(DPS))
            except (TypeError, ValueError, ArithmeticError):  # zoo/nan somewhere inside: no size for it
                continue
            if math.isfinite(size) and size > float(m[i, j]):
                m[i, j], widened = size, True
        self._sizes[leaf] = m if widened else None
        return self._sizes[leaf]


def symbolic_jacobian(
    steps: list[Step],
    output: str,
    leaves: dict[str, tuple[tuple[int, ...], list[float]]],
    consts: dict[str, tuple[tuple[int, ...], list[float] | list[int]]],
    keep_formulas: bool = False,
) -> SymbolicJacobian:
    """Build the program in sympy, differentiate every output element by every leaf element.

    A constant given as Python ints is an integer tensor (indices): its values, not symbols."""
    t0 = time.perf_counter()
    env: dict[str, SymTensor] = {}
    subs: dict[Any, Any] = {}
    integers = {n: c for n, c in consts.items() if c[1] and all(isinstance(v, int) for v in c[1])}
    for name, (shape, ints) in integers.items():
        env[name] = SymTensor(shape, [sp.Integer(v) for v in ints], "int")
    for name, (shape, vals) in {**leaves, **consts}.items():
        if name in integers:
            continue
        st = leaf_symbols(name, shape)
        env[name] = st
        for s, v in zip(st.items, vals, strict=True):
            subs[s] = sp.Float(v, DPS)

    def numeric(a: Any) -> Any:
        return a.xreplace(subs).evalf(DPS)

    prog = SymbolicProgram(env, numeric)
    out = prog.run(steps, output)
    written = as_written(lambda: SymbolicProgram(env, numeric).run(steps, output).items, out.items)
    names: dict[Any, Any] = {}
    if keep_formulas:
        # write derivatives with the program's own names where a subexpression is one of its values:
        # d tanh(u)/du reads 1 - y[0]**2 rather than 1 - tanh(W[0,0]*x[0] + ...)**2
        for target in dict.fromkeys(s.target for s in steps):
            val = prog.env[target]
            for idx, item in zip(_indices(val.shape), val.items, strict=True):
                if not item.is_Atom and item.free_symbols and item not in names:
                    names[item] = sp.Symbol(index_label(target, idx), real=True)
    formulas: dict[str, list[list[Any]]] = {}
    values: dict[str, list[list[float]]] = {}
    entries: dict[str, dict[tuple[int, int], tuple[Any, Any, Any]]] = {}
    huge: dict[str, set[tuple[int, int]]] = {}
    # an output element that leaves the reals at the point has no real derivative there: sympy's are
    # complex-analytic ones, which can read real ((-1)**b differentiates to -pi at b = 1/2) where torch gives nan
    real_at_point = [real_at(y, subs) for y in out.items]
    for name in leaves:
        syms = env[name].items
        f_rows: list[list[Any]] = []
        v_rows: list[list[float]] = []
        nonzero: dict[tuple[int, int], tuple[Any, Any, Any]] = {}
        huge_entries: set[tuple[int, int]] = set()
        for i, y in enumerate(out.items):
            free = y.free_symbols
            f_row: list[Any] = []
            v_row: list[float] = []
            for j, s in enumerate(syms):
                if s not in free:
                    d: Any = sp.Integer(0)
                else:
                    d = derivative(y, s)
                if keep_formulas:
                    # constants stay symbols (A[0,1]) in formulas: the value is in the ledger
                    f_row.append(d.xreplace(names) if names else d)
                exact = d.xreplace(subs).evalf(DPS) if d != 0 else sp.Integer(0)
                v_row.append(to_float(exact) if real_at_point[i] or d == 0 else math.nan)
                if real_at_point[i] and math.isnan(v_row[-1]) and d != 0:  # zoo (1/0): ∞ with its sign, if it has one
                    v_row[-1] = signed_infinity(y, d, s, subs)
                if math.isinf(v_row[-1]) and exact.is_Float:  # finite, beyond float64 (2**(10**10))
                    huge_entries.add((i, j))
                if s in free:  # (an exact 0 may still be a sum of terms that cancel: (x+c)**2 - x**2 - 2*c*x)
                    nonzero[i, j] = (y, s, d)
            f_rows.append(f_row)
            v_rows.append(v_row)
        formulas[name] = f_rows
        values[name] = v_rows
        entries[name] = nonzero
        huge[name] = huge_entries
    return SymbolicJacobian(out, formulas, values, time.perf_counter() - t0, entries, subs, huge, written)


def as_written(build: Callable[[], list[Any]], evaluated: list[Any]) -> Callable[[], list[Any]]:
    """A function giving the program's values as it writes them, for sizing its rounding (term_size).

    sympy combines terms as it builds (exp(x) - exp(x) + x is x at once), but autograd adds up every term
    the program wrote: at x = 20 two terms of 4.9e8 cancel in float32 and leave an error of about 1 in a
    derivative of 1. So `build` runs again with sympy's evaluation off. Built once, when first asked for;
    where that fails (an op needs evaluated arguments), the evaluated values stand in.
    """
    done: list[list[Any]] = []

    def get() -> list[Any]:
        if not done:
            try:
                with sp.evaluate(False):
                    items = build()
                done.append(items if len(items) == len(evaluated) else evaluated)
            except SymbolicTimeout:  # the sympy budget ran out: the caller says so
                raise
            except Exception:  # noqa: BLE001 - any other failure: size from the evaluated form, as before
                done.append(evaluated)
        return done[0]

    return get
