"""The independent route for snippets: replay the recorded forward in float64 and take central differences.

While the snippet runs, every tensor operation it performs is recorded (what was called, on which tensors at
which version). For a backward event, the forward that produced the output is replayed from those records
with the leaves perturbed, under no_grad and in float64, so g(x) = Σ v·y(x) is differentiated numerically,
without autograd. Where the replay cannot repeat the forward exactly (an nn module call, a random op, a
tensor from a backward pass without create_graph, an in-place change of a view), the check is skipped and says
why. A second-order forward (autograd.grad with create_graph=True) is replayed with grad on, its inner grad by
autograd on the float64 graph.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.tolerance import tolerance
from .result import Check, element_index
from .runtime import SnippetRaised

if TYPE_CHECKING:
    from .interp import Interpreter
    from .result import Event

Key = tuple[int, int]  # (id of the tensor object, its version counter)

_RANDOM = frozenset(
    {
        "dropout",
        "rrelu",
        "bernoulli",
        "bernoulli_",
        "multinomial",
        "normal_",
        "uniform_",
        "random_",
        "exponential_",
        "rand_like",
        "randn_like",
        "randint_like",
        "alpha_dropout",
    }
)
_TO_DOUBLE = frozenset({"float", "half", "bfloat16"})
FULL_ELEMENTS = 16  # inputs up to this many elements get every Jᵀv element at once; past it, random directions
LOCATE_ELEMENTS = 256  # and where a direction disagrees, every element up to this many, to name the wrong ones
DIRECTIONS = 3
MAX_OP_RUNS = 400_000  # replayed operations per event, all evaluations together


@dataclass(frozen=True)
class Ref:
    """A tensor argument of a recorded operation, as it was when the operation ran."""

    key: Key


@dataclass
class Record:
    kind: str  # call | method | inplace | setitem
    fn: Any  # the callable (call), or the method name (method, inplace)
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outs: list[Key]
    opaque: str | None = None  # why this operation cannot be replayed
    line: int = 0  # the snippet line of the statement that ran it


@dataclass
class Trace:
    """What the snippet computed, operation by operation, keyed by the tensors' identity and version."""

    made_by: dict[Key, Record] = field(default_factory=dict)
    alive: dict[int, Any] = field(default_factory=dict)  # keeps recorded tensors alive, so ids stay unique
    needs_grad: dict[Key, bool] = field(default_factory=dict)
    has_views: set[int] = field(default_factory=set)
    line: int = 0  # the statement running now (set by the interpreter)

    def key(self, t: Any) -> Key:
        self.alive[id(t)] = t
        return (id(t), t._version)

    def wrap(self, x: Any) -> Any:
        import torch

        if isinstance(x, torch.Tensor):
            k = self.key(x)
            self.needs_grad.setdefault(k, x.requires_grad)
            return Ref(k)
        if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
            items = [self.wrap(i) for i in x]
            return items if isinstance(x, list) else tuple(items)
        if isinstance(x, dict):
            return {k: self.wrap(v) for k, v in x.items()}
        if isinstance(x, slice):
            return slice(self.wrap(x.start), self.wrap(x.stop), self.wrap(x.step))
        return x

    def record(
        self, kind: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, opaque: str | None = None
    ) -> None:
        """Note that `fn(*args, **kwargs)` made `out`; `args` and `kwargs` were wrapped before the call ran."""
        import torch

        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        tensors = [o for o in outs if isinstance(o, torch.Tensor)]
        if not any(o.requires_grad for o in tensors):
            return  # a constant: the replay reads its value (at the version it was used at)
        arg_keys = {r.key for r in _refs((args, kwargs))}
        keys = []
        for o in outs:
            if not isinstance(o, torch.Tensor):
                keys.append((0, -1))
                continue
            k = self.key(o)
            keys.append(k)
            self.needs_grad[k] = o.requires_grad
            if o._base is not None:
                self.has_views.add(id(o._base))
        name = fn if isinstance(fn, str) else getattr(fn, "__name__", "")
        if opaque is None and name in _RANDOM:
            opaque = f"{name} draws random numbers, which a replay would draw again"
        if opaque is None and any(callable(a) and not isinstance(a, type) for a in _flat_args((args, kwargs))):
            opaque = f"{name or 'a call'} calls a function of the snippet"
        if kind in ("inplace", "setitem") and args and isinstance(args[0], Ref):
            target = self.alive.get(args[0].key[0])
            if target is not None and (target._base is not None or id(target) in self.has_views):
                opaque = "an in-place change of a tensor that shares memory with a view"
        rec = Record(kind, fn, args, kwargs, keys, opaque, self.line)
        for k in keys:
            if k[1] >= 0 and k not in arg_keys:  # an op that returned its own input (x.float() of a float)
                self.made_by[k] = rec


def _flat_args(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [i for item in x for i in _flat_args(item)]
    if isinstance(x, dict):
        return [i for v in x.values() for i in _flat_args(v)]
    return [x]


def has_tensor(x: Any) -> bool:
    """Whether a call's arguments hold a tensor (only those calls are recorded)."""
    import torch

    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (list, tuple)):
        return any(has_tensor(i) for i in x)
    if isinstance(x, dict):
        return any(has_tensor(v) for v in x.values())
    return False


def _refs(x: Any) -> list[Ref]:
    if isinstance(x, Ref):
        return [x]
    if isinstance(x, (list, tuple)):
        return [r for i in x for r in _refs(i)]
    if isinstance(x, dict):
        return [r for v in x.values() for r in _refs(v)]
    if isinstance(x, slice):
        return _refs((x.start, x.stop, x.step))
    return []


class NotReplayable(Exception):
    pass


class Replay:
    """Evaluates recorded outputs in float64 with some leaves replaced."""

    def __init__(self, trace: Trace, leaves: dict[Key, Any]) -> None:
        self.trace = trace
        self.leaves = leaves
        self.memo: dict[Key, Any] = {}
        self.runs = 0
        self.second_order = False  # the forward holds an autograd.grad(create_graph=True): replay with grad on

    def plan(self, outs: list[Key]) -> int:
        """Check that every output can be replayed; returns how many operations one evaluation runs."""
        seen: set[Key] = set()
        stack = list(outs)
        while stack:
            k = stack.pop()
            if k in seen or k in self.leaves:
                continue
            seen.add(k)
            rec = self.trace.made_by.get(k)
            if self._is_constant(k):
                self._constant(k)
                continue
            if rec is None:
                raise NotReplayable(
                    "part of the forward was not recorded as tensor operations (a tensor that came out of a "
                    "backward pass with create_graph=True, or from a call the replay does not repeat)"
                )
            if rec.opaque:
                raise NotReplayable(rec.opaque)
            self.second_order |= rec.kind == "grad"
            stack.extend(r.key for r in _refs((rec.args, rec.kwargs)))
        return len(seen)

    def _is_constant(self, k: Key) -> bool:
        """A tensor autograd treats as fixed here: no grad, or a leaf that is not one of the perturbed inputs."""
        if not self.trace.needs_grad.get(k, False):
            return True
        t = self.trace.alive.get(k[0])
        return t is not None and t.is_leaf

    def _constant(self, k: Key) -> Any:
        import torch

        t = self.trace.alive.get(k[0])
        if t is None or t._version != k[1]:
            raise NotReplayable("a tensor the forward used was changed in place afterwards")
        value = t.detach().to(torch.float64) if t.is_floating_point() else t.detach()
        if self.second_order and t.is_leaf and t.requires_grad:
            value.requires_grad_(True)  # an inner autograd.grad may differentiate with respect to it
        return value

    def value(self, k: Key) -> Any:
        if k in self.leaves:
            return self.leaves[k]
        if k in self.memo:
            return self.memo[k]
        if self._is_constant(k):
            v = self._constant(k)
            self.memo[k] = v
            return v
        rec = self.trace.made_by[k]
        out = self._run(rec)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for key, o in zip(rec.outs, outs, strict=False):
            self.memo[key] = o
        return self.memo[k]

    def _arg(self, x: Any) -> Any:
        import torch

        if isinstance(x, Ref):
            return self.value(x.key)
        if isinstance(x, list):
            return [self._arg(i) for i in x]
        if isinstance(x, tuple):
            return tuple(self._arg(i) for i in x)
        if isinstance(x, dict):
            return {k: self._arg(v) for k, v in x.items()}
        if isinstance(x, slice):
            return slice(self._arg(x.start), self._arg(x.stop), self._arg(x.step))
        if isinstance(x, torch.dtype) and x.is_floating_point:
            return torch.float64
        return x

    def _run(self, rec: Record) -> Any:
        self.runs += 1
        if self.runs > MAX_OP_RUNS:
            raise NotReplayable(f"the replay would run more than {MAX_OP_RUNS:,} operations")
        args = self._arg(rec.args)
        kwargs = self._arg(rec.kwargs)
        if rec.kind == "call":
            return rec.fn(*args, **kwargs)
        if rec.kind == "grad":  # the inner derivative of a second-order snippet, by autograd on the replay
            import torch

            with torch.enable_grad():
                return rec.fn(*args, **{**kwargs, "create_graph": True, "retain_graph": True})
        if rec.kind == "method":
            name = "double" if rec.fn in _TO_DOUBLE else rec.fn
            return getattr(args[0], name)(*args[1:], **kwargs)
        if rec.kind == "inplace":
            if not hasattr(args[0], "clone"):  # `total += t` with a number on the left: not in place
                return rec.fn(*args)
            target = args[0].clone()
            if isinstance(rec.fn, str):
                getattr(target, rec.fn)(*args[1:], **kwargs)
                return target
            return rec.fn(target, *args[1:])
        if rec.kind == "setitem":
            target = args[0].clone()
            operator.setitem(target, args[1], args[2])
            return target
        raise NotReplayable(f"unknown record {rec.kind}")


def finite_difference_check(
    it: Interpreter,
    event: Event,
    outs: list[Any],
    vs: list[Any],
    leaves: list[Any],
    before: list[Any],
    after: list[Any],
    returned: list[Any] | None,
    trace: Trace,
) -> None:
    """Add the check `finite_difference` to `event`: Jᵀv from central differences of g(x) = Σ v·y(x)."""
    import torch

    compares = ("the returned grads" if returned is not None else "what the call added to .grad") + (
        " vs Jᵀv from central differences of the replayed forward (float64, no autograd)"
    )
    out_keys = [trace.key(o) for o in outs]
    leaf_keys = [trace.key(x) for x in leaves]
    for o, k in zip(outs, out_keys, strict=True):
        trace.needs_grad.setdefault(k, o.requires_grad)
    base = {k: x.detach().to(torch.float64) for k, x in zip(leaf_keys, leaves, strict=True)}
    v64 = [v.detach().to(torch.float64) for v in vs]
    try:
        planner = Replay(trace, base)
        ops = planner.plan(out_keys)
        second_order = planner.second_order
    except NotReplayable as e:
        event.checks.append(Check("finite_difference", "skipped", compares, reason=str(e)))
        return
    n = sum(x.numel() for x in leaves)
    evals = 4 * n + 1 if n <= FULL_ELEMENTS else 4 * DIRECTIONS + 1  # the locating pass keeps to MAX_OP_RUNS too
    if max(ops, 1) * evals > MAX_OP_RUNS:
        event.checks.append(
            Check(
                "finite_difference",
                "skipped",
                compares,
                reason=f"the replay would run {max(ops, 1) * evals:,} operations (more than {MAX_OP_RUNS:,})",
            )
        )
        return

    def y(shift: dict[Key, Any]) -> Any:
        """All outputs, flattened into one float64 vector, with the leaves shifted."""
        leaves64 = {k: base[k] + shift[k] if k in shift else base[k] for k in base}
        if second_order:  # an inner autograd.grad needs the replayed leaves in a graph
            leaves64 = {k: t.detach().requires_grad_(True) for k, t in leaves64.items()}
        rp = Replay(trace, leaves64)
        rp.second_order = second_order
        with torch.set_grad_enabled(second_order):
            return torch.cat([rp.value(k).detach().reshape(-1).to(torch.float64) for k in out_keys])

    try:
        got = [(returned[k] if returned is not None else _delta(before[k], after[k])) for k in range(len(leaves))]
        got64 = [
            torch.zeros(x.numel(), dtype=torch.float64) if t is None else t.detach().reshape(-1).to(torch.float64)
            for t, x in zip(got, leaves, strict=True)
        ]
        v = torch.cat([t.reshape(-1) for t in v64])
        if n <= FULL_ELEMENTS:
            _full(event, compares, y, v, leaf_keys, leaves, base, got64, before, it.hooks > 0)
        else:
            _directions(event, compares, y, v, leaf_keys, leaves, base, got64, it.hooks > 0)
            unclear = event.checks[-1].status in ("disagree", "skipped")
            if unclear and n <= LOCATE_ELEMENTS and max(ops, 1) * (4 * n + 1) <= MAX_OP_RUNS:
                event.checks.pop()  # a direction disagrees or meets a kink: element by element, to name them
                _full(event, compares, y, v, leaf_keys, leaves, base, got64, before, it.hooks > 0)
    except NotReplayable as e:
        event.checks.append(Check("finite_difference", "skipped", compares, reason=str(e)))
    except SnippetRaised as e:
        event.checks.append(
            Check(
                "finite_difference",
                "skipped",
                compares,
                reason=f"the replayed forward raised {type(e.exc).__name__}: {e.exc}",
            )
        )
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        event.checks.append(
            Check("finite_difference", "skipped", compares, reason=f"the replay failed: {str(e).splitlines()[0][:200]}")
        )


def _delta(before: Any, after: Any) -> Any:
    if after is None:
        return None
    return after if before is None else after - before


def _tolerance(dtype: Any) -> tuple[float, float]:
    tol = tolerance(dtype)
    return tol.atol, tol.rtol


def column(y0: Any, ys: dict[int, Any], h: float) -> tuple[Any, Any, Any]:
    """∂y/∂x_j for every output element from y at x + m·h·e_j (m = ±1, ±2), with an error estimate.

    Returns (derivative, error, state): state 0 where the output does not move (derivative 0), 1 where a
    central or one-sided difference stands, 2 where it is undefined (not finite at or around the point).
    """
    import torch

    finite = {m: torch.isfinite(t) for m, t in ys.items()}
    f0 = torch.isfinite(y0)
    still = torch.ones_like(f0)
    for t in ys.values():
        still &= (t == y0) | (torch.isnan(t) & torch.isnan(y0))
    central = f0 & finite[1] & finite[-1] & finite[2] & finite[-2]
    right = f0 & finite[1] & finite[2] & ~central
    left = f0 & finite[-1] & finite[-2] & ~central & ~right
    zero = torch.zeros_like(y0)

    def pick(mask: Any, value: Any) -> Any:
        return torch.where(mask, torch.nan_to_num(value), zero)

    d1 = (
        pick(central, (ys[1] - ys[-1]) / (2 * h))
        + pick(right, (-3 * y0 + 4 * ys[1] - ys[2]) / (2 * h))
        + pick(left, (3 * y0 - 4 * ys[-1] + ys[-2]) / (2 * h))
    )
    d2 = pick(central, (ys[2] - ys[-2]) / (4 * h)) + pick(right, (ys[1] - y0) / h) + pick(left, (y0 - ys[-1]) / h)
    state = torch.full(y0.shape, 2, dtype=torch.int8)
    state[central | right | left] = 1
    state[still & f0] = 0  # an output that does not move: no dependence (an infinite one stays undefined)
    d1[still], d2[still] = 0.0, 0.0
    return d1, (d1 - d2).abs(), state


def _pattern(pairs: list[tuple[float, float]]) -> str | None:
    """What kind of mistake a set of (backward, reference) pairs shows: a factor, a flipped sign, an offset."""
    if len(pairs) < 2:
        return None
    big = [(g, r) for g, r in pairs if abs(r) > 1e-12]
    if big and len(big) == len(pairs):
        ratios = [g / r for g, r in big]
        mid = sorted(ratios)[len(ratios) // 2]
        if mid != 1 and all(abs(q - mid) <= 1e-3 * max(1.0, abs(mid)) for q in ratios):
            return (
                "every element is off by the same factor: the sign is flipped"
                if abs(mid + 1) < 1e-3
                else (f"every element is off by the same factor {mid:.6g}")
            )
    offsets = [g - r for g, r in pairs]
    mid = sorted(offsets)[len(offsets) // 2]
    if mid != 0 and all(abs(o - mid) <= 1e-4 * max(1.0, abs(mid)) for o in offsets):
        return f"every element is off by the same amount {mid:.6g}"
    return None


def _status(bad: list[str], hooked: bool) -> str:
    """A difference is a disagreement, unless a hook of the snippet changes the gradient on purpose."""
    return "agree" if not bad else "skipped" if hooked else "disagree"


def _full(
    event: Event,
    compares: str,
    y: Any,
    v: Any,
    keys: list[Key],
    leaves: list[Any],
    base: dict[Key, Any],
    got64: list[Any],
    before: list[Any],
    hooked: bool,
) -> None:
    import torch

    y0 = y({})
    worst = 0.0
    bad: list[str] = []
    kinks: list[str] = []
    undefined: list[str] = []
    pairs: list[tuple[float, float]] = []
    for k, (key, x) in enumerate(zip(keys, leaves, strict=True)):
        flat = base[key].reshape(-1)
        fd = torch.empty(flat.numel(), dtype=torch.float64)
        atol, rtol = _tolerance(x.dtype)
        prior = before[k].detach().reshape(-1).abs().to(torch.float64) if before[k] is not None else None
        for j in range(flat.numel()):
            h = 1e-5 * max(abs(float(flat[j])), 1e-3)
            ys = {}
            for m in (1, -1, 2, -2):
                e = torch.zeros_like(flat)
                e[j] = m * h
                ys[m] = y({key: e.reshape(base[key].shape)})
            label = f"{event.inputs[k].name}{element_index(x.shape, j)}"
            d, err, state = column(y0, ys, h)
            used = v != 0
            if bool((state[used] == 2).any()):
                fd[j] = math.nan
                undefined.append(label)
                continue
            d1 = float(v @ d)
            fd[j] = d1
            noise = _noise(y0, v, h)
            both = (state == 1) & torch.isfinite(ys[1]) & torch.isfinite(ys[-1])
            if _kink(y0, ys, v, h, both, d1):
                kinks.append(label)
                continue
            fd_err = float((v.abs() * err).sum()) + noise
            got = float(got64[k][j])
            if not math.isfinite(got):
                if fd_err <= 1e-3 * abs(d1) + 10 * noise:
                    bad.append(f"{label} (backward gave {got}, finite differences {d1:.6g})")
                else:
                    undefined.append(label)  # the differences cannot show the derivative is finite here
                continue
            scale = abs(d1) + (float(prior[j]) if prior is not None else 0.0)
            pairs.append((got, d1))
            diff = abs(got - d1)
            worst = max(worst, diff)
            if diff > atol + rtol * scale + 3 * fd_err:
                bad.append(f"{label} ({got:.6g} vs {d1:.6g})")
        event.inputs[k].finite_difference = fd.reshape(x.shape).tolist()
    parts = []
    if bad:
        parts.append("differs at " + ", ".join(bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10 else ""))
        pattern = _pattern(pairs)
        if pattern:
            parts.append(pattern)
    if kinks:
        parts.append(f"not compared at the kinks {', '.join(kinks[:6])}")
        event.notes.append(
            f"At {', '.join(kinks[:6])} the slopes left and right of the point differ (a kink: relu or abs at 0, "
            "a tie of max/min, clamp at a bound, a step): finite differences are no reference there, and torch "
            "picks one subgradient by convention."
        )
    if bad and hooked:
        parts.insert(0, "a hook of the snippet changes the gradient, so .grad is not Jᵀv by design")
    event.checks.append(
        Check(
            "finite_difference",
            _status(bad, hooked),
            compares,
            max_abs_diff=worst,
            tolerance="|Δ| <= atol + rtol·|Jᵀv| + 3·(the differences' own error estimate)",
            reason="; ".join(parts) or None,
            undefined=tuple(undefined),
        )
    )


def _directions(
    event: Event,
    compares: str,
    y: Any,
    v: Any,
    keys: list[Key],
    leaves: list[Any],
    base: dict[Key, Any],
    got64: list[Any],
    hooked: bool,
) -> None:
    import torch

    gen = torch.Generator().manual_seed(12345)  # private: the snippet's own random stream is untouched
    worst = 0.0
    bad: list[str] = []
    skipped: list[str] = []
    atol, rtol = _tolerance(leaves[0].dtype)
    y0 = y({})
    for d in range(DIRECTIONS):
        us = {k: torch.randn(base[k].shape, generator=gen, dtype=torch.float64) for k in keys}
        h = 1e-5 * max(max(float(b.abs().max()) if b.numel() else 0.0 for b in base.values()), 1e-3)
        ys = {m: y({k: m * h * u for k, u in us.items()}) for m in (1, -1, 2, -2)}
        col, err, state = column(y0, ys, h)
        if bool((state[v != 0] == 2).any()):
            skipped.append(f"direction {d + 1}: not finite around the point")
            continue
        finite = torch.isfinite(y0) & torch.isfinite(ys[1]) & torch.isfinite(ys[-1])
        if _kink(y0, ys, v, h, finite & torch.isfinite(ys[2]) & torch.isfinite(ys[-2])):
            skipped.append(f"direction {d + 1}: a kink along it (relu/abs at 0, a tie, a bound)")
            continue
        d1 = float(v @ col)
        dot = sum(float(us[k].reshape(-1) @ got64[i]) for i, k in enumerate(keys))
        scale = sum(float(us[k].reshape(-1).abs() @ got64[i].abs()) for i, k in enumerate(keys))
        diff = abs(dot - d1)
        worst = max(worst, diff if math.isfinite(diff) else worst)
        if not math.isfinite(dot) or diff > atol + rtol * scale + 3 * float((v.abs() * err).sum()):
            bad.append(f"direction {d + 1}: ⟨u, grad⟩ = {dot:.6g}, finite differences {d1:.6g}")
    status = "skipped" if len(skipped) == DIRECTIONS else _status(bad, hooked)
    event.checks.append(
        Check(
            "finite_difference",
            status,
            compares.replace("Jᵀv from", f"⟨u, Jᵀv⟩ along {DIRECTIONS} random directions u from"),
            max_abs_diff=worst,
            tolerance="|Δ| <= atol + rtol·Σ|u·grad| + 3·(error estimate)",
            reason="; ".join(bad + skipped) or None,
        )
    )


def _noise(y0: Any, v: Any, h: float) -> float:
    """The size of float64 rounding in a difference quotient of Σ v·y at step h."""
    return 1e-13 * float((v.abs() * (y0.abs().nan_to_num(0, 0, 0) + 1)).sum()) / h


def _kink(y0: Any, ys: dict[int, Any], v: Any, h: float, mask: Any, d1: float = 0.0) -> bool:
    """Whether the slopes left and right of the point differ (a kink keeps the same jump at h and 2h; a
    smooth function's jump doubles), over the output elements in `mask`."""
    import torch

    s = {m: float((v * torch.where(mask, ys[m] - y0, torch.zeros_like(y0))).sum()) for m in ys}
    jump1, jump2 = (s[1] + s[-1]) / h, (s[2] + s[-2]) / (2 * h)
    return abs(jump1) > 100 * _noise(y0, v, h) + 1e-9 * abs(d1) and abs(jump2 - jump1) < 0.25 * abs(jump1)
