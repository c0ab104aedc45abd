"""Run a Program with torch tensors: the forward pass, with a record of the path taken.

The interpreter evaluates our own nodes only. Shapes are checked before every
op that can grow a tensor, so `(100000,1) * (1,100000)` is refused before it
allocates. Alongside each value it tracks, per leaf, whether the value depends
on it elementwise ("diag") or in any other way ("dense"): that is how the
Jacobian engine knows a diagonal block without computing it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import LimitError, ProgramError, ShapeError
from ..language import program as P
from ..limits import Limits
from ..ops import REGISTRY, OpSpec
from . import budget, constructors, indexing, masks, sizes
from .vals import DENSE, DIAG, Val, dense, first_line, grow, merge

__all__ = ["DENSE", "DIAG", "Forward", "Interpreter", "Step", "Val", "replay"]


@dataclass
class Step:
    """One executed assignment, loop variables replaced by their values at that point."""

    target: str
    expr: P.Expr
    # what this step fixed when it ran, by id of the node: the masks its comparisons gave and the tensors its
    # constructors made (random draws included). Every route replays them: a mask is a constant to backward
    fixed: dict[int, Any] = field(default_factory=dict)


@dataclass
class ControlRecord:
    """How many times a loop ran, or which branch an if took."""

    kind: str
    span: P.Span
    count: int


@dataclass
class Forward:
    """The forward pass: final environment, the straight-line trace and the control path."""

    env: dict[str, Val]
    steps: list[Step]
    control: list[ControlRecord]
    output: Val
    work: int = 0  # multiply-adds of the matrix products, backward included (the multiply_adds budget)


class Interpreter:
    """Evaluates a Program; one instance per run."""

    def __init__(self, program: P.Program, limits: Limits, dtype: torch.dtype = torch.float32, gen: Any = None) -> None:
        self.program = program
        self.limits = limits
        self.dtype = dtype
        self.gen = gen  # draws of rand/randn made in the program (seeded by --seed)
        self.fixed: dict[int, Any] = {}  # the current step's masks and made tensors (Step.fixed)
        self.replaying = False  # True: read made tensors back from `fixed` instead of making them
        self.replay_masks = False  # True: read masks back from `fixed` too (finite differences recompute them)
        self.steps: list[Step] = []
        self.control: list[ControlRecord] = []
        self.iterations = 0
        self.loop_values: dict[str, int] = {}
        self.memory = 0  # the run's memory estimate so far, in bytes (see budget.charge)
        # applied to each operand of + - * / and of the functions of several tensors (see replay)
        self.lift: Callable[[Any], Any] | None = None
        self.work = 0  # multiply-adds of the matrix products so far, backward included

    def err(self, cls: type[Exception], message: str, span: P.Span, hint: str | None = None) -> Exception:
        return cls(message, self.program.source, span[0], span[1], hint)  # type: ignore[call-arg]

    # ------------------------------------------------------------------ statements
    def run(self, env: dict[str, Val]) -> Forward:
        for val in env.values():  # the inputs count too: a leaf twice (its value and its .grad)
            if isinstance(val.v, torch.Tensor):
                self.memory += val.v.numel() * self.dtype.itemsize * (2 if val.v.requires_grad else 1)
        self._block(self.program.body, env)
        out = env.get(self.program.output)
        if out is None:
            raise ProgramError(
                f"The output variable {self.program.output!r} was never assigned on the path taken at these inputs."
            )
        t = out.v
        if isinstance(t, torch.Tensor) and t.numel() == 0:
            raise ProgramError(
                f"The output {self.program.output!r} has no elements (shape {list(t.shape)}): there is nothing "
                "to differentiate. An index or a mask selected nothing here."
            )
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != self.dtype:
            # x.double() in a float32 run: computed as torch does, then given back in the run's dtype, so
            # that v, the Jacobians and the checks all read one dtype
            out = Val(t.to(self.dtype), out.deps, out.size)
        return Forward(env, self.steps, self.control, out, self.work)

    def _in_place(self, s: P.Assign, env: dict[str, Val]) -> None:
        """`h += 1` writes into h's tensor in torch, so every other name of that tensor (g = h, a view of h)
        changes with it; vjp runs it out of place, as h = h + 1: refused where another name shares it."""
        old = env.get(s.target)
        t = old.v if old is not None else None
        if (
            not isinstance(t, torch.Tensor)
            or not t.is_floating_point()
            or (t.is_leaf and t.requires_grad)
            or not t.numel()
        ):
            return  # a leaf that requires grad: torch refuses the write itself (the augmented_assignment note)
        shared = sorted(
            n
            for n, val in env.items()
            if n != s.target
            and isinstance(val.v, torch.Tensor)
            and val.v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        )
        if shared:
            raise self.err(
                ProgramError,
                f"'{s.target} += ...' writes into the tensor {s.target} names, in place, in torch, and "
                f"{', '.join(shared)} names the same tensor (or a view of it), so it would change too; vjp runs "
                f"the update out of place ({s.target} = {s.target} + ...), which would give other numbers than "
                "torch here.",
                s.span,
                f"Write {s.target} = {s.target} + ... (a new tensor: what vjp computes), or make the other name a "
                f"copy ({shared[0]} = {s.target}.clone()).",
            )

    def _block(self, body: tuple[P.Stmt, ...], env: dict[str, Val]) -> None:
        for s in body:
            if isinstance(s, P.Assign):
                if len(self.steps) >= self.limits.steps:
                    raise self.err(
                        LimitError,
                        f"The program ran more than {self.limits.steps:,} assignments (--limit steps=N to raise it).",
                        s.span,
                    )
                if s.augmented and not isinstance(s.value, P.Update):
                    self._in_place(s, env)
                expr = _bind(s.value, self.loop_values) if self.loop_values else s.value
                expr = sizes.resolve(self, expr, env)  # the trace records the sizes as read now
                self.fixed = {}
                env[s.target] = self.value_of(expr, env)
                self.steps.append(Step(s.target, expr, self.fixed))
            elif isinstance(s, P.If):
                taken = self.condition(s.test, env)
                self.control.append(ControlRecord("if", s.span, 1 if taken else 0))
                self._block(s.body if taken else s.orelse, env)
            elif isinstance(s, P.While):
                rec = ControlRecord("while", s.span, 0)
                self.control.append(rec)
                while self.condition(s.test, env):
                    self._tick(s.span)
                    rec.count += 1
                    self._block(s.body, env)
            elif isinstance(s, P.For):
                rec = ControlRecord("for", s.span, 0)
                self.control.append(rec)
                for i in range(s.start, s.stop, s.step):
                    self._tick(s.span)
                    rec.count += 1
                    self.loop_values[s.var] = i
                    self._block(s.body, env)
            else:  # pragma: no cover - the parser lowers ExprStmt
                raise AssertionError(s)

    def _tick(self, span: P.Span) -> None:
        self.iterations += 1
        if self.iterations > self.limits.iterations:
            raise self.err(
                LimitError,
                f"The loop ran more than {self.limits.iterations:,} iterations and was stopped "
                f"(--limit iterations=N to raise it).",
                span,
                "Check that the loop's condition can become false.",
            )

    def condition(self, expr: P.Expr, env: dict[str, Val]) -> bool:
        val = self.value_of(expr, env).v
        if isinstance(val, torch.Tensor):
            if val.numel() != 1:
                raise self.err(
                    ProgramError,
                    f"A condition must be a single number, but this one has shape {list(val.shape)} "
                    "(torch: 'Boolean value of Tensor with more than one value is ambiguous').",
                    _span(expr),
                    "Reduce it first, e.g. y.norm() < 1000 or y.sum() > 0.",
                )
            val = bool(val.item())
        if isinstance(val, float) and math.isnan(val):
            return False
        return bool(val)

    # ------------------------------------------------------------------ expressions
    def value_of(self, e: P.Expr, env: dict[str, Val]) -> Val:
        if isinstance(e, P.Num):
            return Val(e.value)
        if isinstance(e, P.Name):
            if e.id in self.loop_values:
                return Val(float(self.loop_values[e.id]))
            got = env.get(e.id)
            if got is None:
                raise self.err(ProgramError, f"{e.id!r} is used before it is assigned on this path.", e.span)
            got.reads += 1
            return got
        if isinstance(e, P.BinOp):
            return self._binop(e, self.value_of(e.left, env), self.value_of(e.right, env))
        if isinstance(e, P.UnaryOp):
            x = self.value_of(e.operand, env)
            if e.op == "-":
                if isinstance(x.v, torch.Tensor):
                    self._charge(tuple(x.v.shape), e.span)
                return Val(-x.v, dict(x.deps), grow(x.size))
            if e.op == "~":
                return masks.invert(self, e, x)
            return Val(not self._truth(x, e))
        if isinstance(e, P.Compare):
            return masks.compare(self, e, [self.value_of(o, env) for o in e.operands])
        if isinstance(e, P.Scalar):
            return Val(self.scalar(e, self.value_of(e.value, env)))
        if isinstance(e, P.Index):
            return indexing.index(self, e, env)
        if isinstance(e, P.Update):
            return indexing.update(self, e, env)
        if isinstance(e, P.Const):
            if e.sizes is not None:  # in a condition: assignments were resolved before they ran
                e = sizes.made(self, e, env)
            return constructors.make(self, e, env)
        if isinstance(e, P.BoolOp):
            if e.op == "and":
                return Val(all(self._truth(self.value_of(v, env), e) for v in e.values))
            return Val(any(self._truth(self.value_of(v, env), e) for v in e.values))
        if isinstance(e, P.Call):
            if e.sized:  # in a condition: assignments were resolved before they ran
                resolved = sizes.resolve(self, e, env)
                assert isinstance(resolved, P.Call)
                e = resolved
            return self._call(e, [self.value_of(a, env) for a in e.args])
        raise AssertionError(e)  # pragma: no cover

    def on_mask(self, mask: torch.Tensor) -> None:
        """A comparison made this mask (finite differences watch them flip)."""

    def scalar(self, e: P.Scalar, x: Val) -> float:
        """len(x), x.size(d), x.numel(), x.dim() or math.f(x): the Python number PyTorch code gets."""
        v = x.v
        if e.what in ("len", "size", "numel", "dim"):
            if not isinstance(v, torch.Tensor):
                raise self.err(ProgramError, f"{e.what}() reads a tensor's sizes; this is a number.", e.span)
            shape = tuple(v.shape)
            if e.count is not None and e.count != len(shape):  # Python's own check of a, b = x.size()
                many = "too many" if len(shape) > e.count else "not enough"
                raise self.err(
                    ProgramError,
                    f"{many} values to unpack (expected {e.count}, got {len(shape)}): the tensor has shape "
                    f"{list(shape)}.",
                    e.span,
                )
            if e.what == "numel":
                return float(v.numel())
            if e.what == "dim":
                return float(len(shape))
            if e.what == "len" and not shape:
                raise self.err(ProgramError, "len() of a 0-d tensor (torch's TypeError).", e.span)
            d = 0 if e.dim is None else e.dim
            if not -len(shape) <= d < len(shape):
                raise self.err(
                    ProgramError,
                    f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                    f"but got {d}): the tensor has shape {list(shape)}.",
                    e.span,
                )
            return float(shape[d])
        if isinstance(v, torch.Tensor) and v.numel() != 1:
            raise self.err(
                ProgramError,
                f"math.{e.what}() takes one number; this tensor has shape {list(v.shape)} (torch: 'only one "
                "element tensors can be converted to Python scalars').",
                e.span,
                f"Use torch.{e.what}(x) for every element." if e.what != "fabs" else "Use torch.abs(x).",
            )
        number = self._scalar(x, e)  # one element, as float(x) needs
        try:
            return float(getattr(math, e.what)(number))
        except (ValueError, OverflowError) as err:
            raise self.err(ProgramError, f"math.{e.what}({number:g}) failed: {err}.", e.span) from None

    def _scalar(self, x: Val, e: P.Expr) -> float:
        v = x.v
        if isinstance(v, torch.Tensor):
            if v.numel() != 1:
                raise self.err(
                    ProgramError,
                    f"Comparisons need single numbers, but a side has shape {list(v.shape)}.",
                    _span(e),
                    "Reduce it first, e.g. y.norm() or y.sum().",
                )
            return float(v.item())
        return float(v)

    def _truth(self, x: Val, e: P.Expr) -> bool:
        return bool(x.v) if isinstance(x.v, bool) else self._scalar(x, e) != 0

    def _charge(self, shape: tuple[int, ...], span: P.Span, work: int = 0, transient: int = 0) -> None:
        """Check an operation against the run's budgets before it runs, then count it (see budget.charge)."""
        budget.charge(self, shape, span, work, transient)

    def _binop(self, e: P.BinOp, a: Val, b: Val) -> Val:
        op = e.op
        if op == "@":
            return self._matmul(e.span, a, b)
        if op in ("&", "|"):
            return masks.logical(self, e, a, b)
        sa, sb = a.shape, b.shape
        try:
            shape = tuple(torch.broadcast_shapes(sa, sb))
        except RecursionError:
            raise
        except RuntimeError:
            raise self.err(
                ShapeError,
                f"Shapes {list(sa)} and {list(sb)} do not broadcast for '{op}'.",
                e.span,
                "Broadcasting matches trailing dimensions; each pair must be equal or 1.",
            ) from None
        x, y = a.v, b.v
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            self._charge(shape, e.span)
            if self.lift is not None:  # a power keeps a number exponent a number
                x, y = self.lift(x), y if op == "**" and not isinstance(y, torch.Tensor) else self.lift(y)
        if not isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor):
            v: Any = _python_op(op, float(x), float(y))
        else:
            try:
                v = _tensor_op(op, x, y)
            except RuntimeError as err:  # a bool mask in arithmetic torch refuses (1 - mask): torch's words
                raise self.err(ProgramError, f"'{op}' failed: {first_line(err)}", e.span) from None
        deps = merge(a, b, shape=shape)
        return Val(v, deps, grow(a.size, b.size))

    def _matmul(self, span: P.Span, a: Val, b: Val) -> Val:
        x, y = a.v, b.v
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() == 0 or y.dim() == 0:
            raise self.err(
                ShapeError, "'@' (matmul) needs two tensors of at least 1 dimension; use '*' for scalars.", span
            )
        shape = budget.matmul_shape(tuple(x.shape), tuple(y.shape))
        if shape is None:
            raise self.err(
                ShapeError,
                f"matmul: shapes {list(x.shape)} and {list(y.shape)} do not fit "
                f"(the last dim of the left, {x.shape[-1]}, must equal the "
                f"{'only' if y.dim() == 1 else 'second-to-last'} dim of the right, "
                f"{y.shape[0] if y.dim() == 1 else y.shape[-2]}).",
                span,
            )
        k = int(x.shape[-1])
        # operands with batch dimensions that broadcast are expanded to the batch shape while it runs
        batch = shape[:-2] if x.dim() > 1 and y.dim() > 1 else ()
        wider = [batch + tuple(t.shape[-2:]) for t in (x, y) if t.dim() > 1 and tuple(t.shape[:-2]) != batch]
        for operand in wider:  # a materialised intermediate like any other
            budget.check_numel(self, operand, span)
        expanded = sum(math.prod(operand) for operand in wider)
        self._charge(shape, span, work=math.prod(shape) * k, transient=expanded * self.dtype.itemsize)
        try:
            out = torch.matmul(x, y)
        except RuntimeError as err:  # a mask or an integer tensor on one side: torch's words
            raise self.err(ProgramError, f"'@' (matmul) failed: {first_line(err)}", span) from None
        return Val(out, dense(a, b), grow(a.size, b.size, times=k))

    def _call(self, e: P.Call, args: list[Val]) -> Val:
        f = e.func
        spec = REGISTRY[f]
        x = args[0]
        t = x.v
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(float(t), dtype=self.dtype)
        try:
            if spec.operator == "**":
                return self._binop(P.BinOp("**", P.Num(0, e.span), P.Num(0, e.span), e.span), x, args[1])
            if spec.elementwise and len(args) >= 2:
                return self._broadcasting(e, spec, args)
            if spec.structure in ("general", "index"):
                return self._generic(e, spec, args)
            if spec.elementwise:
                self._charge(tuple(t.shape), e.span)
                return Val(spec.call_torch(t, **dict(e.params)), dict(x.deps), grow(x.size))
            if spec.structure == "matmul":
                if f == "mm" and (t.dim() != 2 or getattr(args[1].v, "ndim", 0) != 2):
                    raise self.err(ShapeError, "mm() multiplies two 2-D matrices; use matmul or @ otherwise.", e.span)
                return self._matmul(e.span, x, args[1])
            if spec.structure == "detach":
                return Val(t.detach(), {})
            if spec.structure == "reduction":
                r = self._reduce(e, t)
                return Val(r, dense(x), grow(x.size, times=max(1, t.numel() // max(1, r.numel()))))
            if spec.structure == "softmax":
                self._charge(tuple(t.shape), e.span)
                dim = self._dim(e, t, e.param("dim"))
                width = int(t.shape[dim]) if t.dim() else 1
                return Val(spec.call_torch(t, dim=dim), dense(x), grow(x.size, times=2 * width))
            if f == "t":
                if t.dim() > 2:
                    raise self.err(
                        ShapeError,
                        f".T / t() transposes tensors of at most 2 dims; this one has shape {list(t.shape)}.",
                        e.span,
                        "Use transpose(x, dim0, dim1).",
                    )
                return Val(t.t() if t.dim() == 2 else t, dict(x.deps) if t.dim() < 2 else dense(x), x.size)
            if f == "transpose":
                d0 = self._dim(e, t, e.param("dim0"))
                d1 = self._dim(e, t, e.param("dim1"))
                return Val(t.transpose(d0, d1), dict(x.deps) if d0 == d1 else dense(x), x.size)
        except RecursionError:
            raise
        except (RuntimeError, ValueError, IndexError, TypeError) as err:  # F checks some arguments with ValueError
            raise self.err(ProgramError, f"{spec.shown}() failed: {first_line(err)}", e.span) from None
        raise AssertionError(f)  # pragma: no cover

    def _broadcasting(self, e: P.Call, spec: OpSpec, args: list[Val]) -> Val:
        """An elementwise function of several operands, broadcast as torch does (maximum, atan2, lerp, ...)."""
        try:
            shape = tuple(torch.broadcast_shapes(*(a.shape for a in args)))
        except RuntimeError:
            shapes = " and ".join(str(list(a.shape)) for a in args)
            raise self.err(
                ShapeError,
                f"{e.func}(): shapes {shapes} do not broadcast.",
                e.span,
                "Broadcasting matches trailing dimensions; each pair must be equal or 1.",
            ) from None
        self._charge(shape, e.span)
        out = spec.call_torch(*self._tensors(args), **dict(e.params))
        return Val(out, merge(*args, shape=shape), grow(*(a.size for a in args)))

    def _tensors(self, args: list[Val]) -> list[torch.Tensor]:
        xs = [a.v if isinstance(a.v, torch.Tensor) else torch.as_tensor(float(a.v), dtype=self.dtype) for a in args]
        return xs if self.lift is None else [self.lift(x) for x in xs]

    def _generic(self, e: P.Call, spec: OpSpec, args: list[Val]) -> Val:
        """A registry function whose result shape torch itself computes first, on meta tensors (no data,
        no arithmetic), so the budgets hold before the real call allocates anything."""
        xs = self._tensors(args)
        params = dict(e.params)
        # first the entry's own check of its arguments (an einsum equation) and its work, before torch sees them
        work = spec.work(*(tuple(x.shape) for x in xs), **params) if spec.work else 0
        # torch's UserWarnings (kl_div's reduction='mean') would print raw, once per evaluation; the entry's
        # doc says the same in words
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self._charge(budget.meta_shape(spec, xs, params), e.span, work=work)
            out = spec.call_torch(*xs, **params)
        n_in = sum(x.numel() for x in xs)
        deps = dense(*args) if out.is_floating_point() else {}  # an index (argmax) carries no gradient
        return Val(out, deps, grow(*(a.size for a in args), times=max(1, n_in // max(1, out.numel()))))

    def _dim(self, e: P.Call, t: torch.Tensor, d: Any) -> Any:
        nd = max(t.dim(), 1)
        dims = d if isinstance(d, tuple) else (d,)
        for k in dims:
            if not -nd <= k < nd:
                raise self.err(
                    ShapeError,
                    f"{e.func}(): dim={k} is out of range for a tensor of shape {list(t.shape)} "
                    f"(valid: {-nd} to {nd - 1}).",
                    e.span,
                )
        if isinstance(d, tuple) and len({k % nd for k in d}) != len(d):
            raise self.err(ShapeError, f"{e.func}(): dim={d} repeats a dimension.", e.span)
        return d

    def _reduce(self, e: P.Call, t: torch.Tensor) -> torch.Tensor:
        dim = e.param("dim")
        keep = bool(e.param("keepdim"))
        if dim is not None:
            dim = self._dim(e, t, dim)
        f = e.func
        if f == "prod":
            if dim is None:
                r = torch.prod(t)
                return r.reshape((1,) * t.dim()) if keep else r
            return torch.prod(t, dim=dim, keepdim=keep)
        fn = torch.sum if f == "sum" else torch.mean
        if dim is None:
            r = fn(t)
            return r.reshape((1,) * t.dim()) if keep else r
        return fn(t, dim=dim, keepdim=keep)


def _span(e: P.Expr) -> P.Span:
    return e.span


def _python_op(op: str, a: float, b: float) -> float:
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b if b else math.copysign(math.inf, a) if a else math.nan
        r = a**b
        return r if isinstance(r, float) else math.nan
    except (OverflowError, ZeroDivisionError):
        return math.inf


def _tensor_op(op: str, x: Any, y: Any) -> Any:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return x / y
    return torch.pow(x, y) if isinstance(x, torch.Tensor) else torch.pow(torch.as_tensor(x, dtype=y.dtype), y)


def _bind(expr: P.Expr, values: dict[str, int]) -> P.Expr:
    """The expression with loop variables replaced by their current values."""

    def bind(e: P.Expr) -> P.Expr:
        if isinstance(e, P.Name) and e.id in values:
            return P.Num(float(values[e.id]), e.span, integral=True)
        return e

    return P.transform(expr, bind)


def replay(
    steps: list[Step], output: str, env: dict[str, Any], dtype: torch.dtype, lift: Callable[[Any], Any] | None = None
) -> Any:
    """Run the straight-line trace again on new leaf tensors (for torch.func transforms and forward mode).

    `lift` turns each operand of + - * / and of the functions of several tensors into what it needs to be
    (forward mode: a dual number; a plain number or tensor next to a dual one sends torch through Python
    code that imports torch._dynamo, 1.5 s)."""
    vals = {k: Val(v) for k, v in env.items()}
    it = _ReplayInterpreter()
    it.dtype = dtype
    it.lift = lift
    for s in steps:
        it.fixed = s.fixed
        vals[s.target] = it.value_of(s.expr, vals)
    return vals[output].v


class _ReplayInterpreter(Interpreter):
    """The interpreter without limits or program bookkeeping: the trace was already checked."""

    def __init__(self) -> None:  # noqa: D107 - no program: steps are pre-checked
        self.limits = Limits(elements=2**62, memory_bytes=2**62, multiply_adds=2**62)
        self.lift = None
        self.loop_values = {}
        self.memory = self.work = 0
        self.dtype = torch.float32
        self.fixed = {}
        self.replaying = self.replay_masks = True  # masks and made tensors come from the recorded trace
        self.gen = None

    def err(self, cls: type[Exception], message: str, span: P.Span, hint: str | None = None) -> Exception:
        return cls(message)
