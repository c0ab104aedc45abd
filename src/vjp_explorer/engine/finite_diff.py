"""Finite differences: a route to Jᵀv that uses no autograd at all.

The program's own trace is run again in float64 under no_grad with perturbed leaves. Each derivative is a
central difference taken at two steps, h and h/2: their Richardson extrapolation (4·D(h/2) − D(h))/3 is the
reference, and |D(h) − D(h/2)| plus the rounding of the evaluations (a few eps·|f|/h) is its error estimate,
so the tolerance it is checked at is honest. Within `finite_difference_evals` program evaluations the route
builds every column of J and so Jᵀv element by element; past it, a few random directions u give
⟨u, Jᵀv⟩ against (f(x + hu) − f(x − hu))/2h · v.

Where a step crosses a kink of the program (relu or abs at 0, a norm of zeros) or leaves the function's
domain, or the two steps disagree (the derivative is infinite or the function is not smooth there), finite
differences are no reference: those elements (or directions) are left out and named, never a disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..language import program as P
from ..ops import REGISTRY, bound_params
from ..result import Tolerance, element_label
from .interpreter import Step, Val, _ReplayInterpreter
from .tolerance import with_error

EPS = float(torch.finfo(torch.float64).eps)
STEP = EPS ** (1 / 3)  # the central difference's best step, relative to the size of x
DIRECTIONS = 2  # random directions past the budget
STEP_2 = EPS**0.2  # second differences with Richardson: truncation h⁴ against rounding eps/h²


def every_column(n: int, max_evals: int) -> bool:
    """THE budget rule of every door: every column of J (4 evaluations per input element: h and h/2, both
    sides) when n input elements fit in max_evals evaluations, else DIRECTIONS random directions.
    engine/tolerance.py's FD_BUDGETS gives each door its max_evals."""
    return 4 * n <= max_evals


class FDUnavailable(Exception):
    """The route cannot run here (an evaluation failed); the message says why."""


@dataclass
class FDResult:
    """Jᵀv per leaf (full route) or directional pairs, with error estimates and what was left out."""

    method: str  # "full" | "directional"
    evals: int
    jtv: dict[str, Any] = field(default_factory=dict)  # leaf -> float64 tensor (full route)
    error: dict[str, Any] = field(default_factory=dict)  # leaf -> float64 error estimate of jtv
    left_out: dict[str, Any] = field(default_factory=dict)  # leaf -> bool mask: no reference there
    directions: list[tuple[float, float, float]] = field(default_factory=list)  # (⟨u, Jᵀv⟩ ref, error, Σ|u|)
    us: list[dict[str, Any]] = field(default_factory=list)
    kink_reason: str = ""  # what made directions unusable
    causes: dict[str, dict[int, str]] = field(default_factory=dict)  # leaf -> flat index -> why left out
    # with columns=True (full route): J itself per leaf (m × n, float64) and each entry's error estimate
    columns: dict[str, Any] = field(default_factory=dict)
    column_error: dict[str, Any] = field(default_factory=dict)

    def nothing_compared(self) -> bool:
        """The full route left every element out (a kink or an unsettled difference everywhere, as a float32
        forward's rounding gives): its check compared nothing, so it is no evidence either way."""
        masks = [m for m in self.left_out.values() if m.numel()]
        return self.method == "full" and bool(masks) and all(bool(m.all()) for m in masks)


JUMPED = "the steps jump over a pole or a spike narrower than they are (both sides a thousandth of the value)"
KINK = "a step crosses a kink of the program (relu or abs at 0, a norm at 0, a mask such as x > 0 that flips)"
DOMAIN = "a step leaves the function's domain or meets an infinite value"
UNSETTLED = "the differences at h and h/2 disagree (an infinite derivative, or no smooth function there)"


class _Evaluator(_ReplayInterpreter):
    """The replay interpreter in float64, remembering the sign of each kink's operand."""

    def __init__(self, detached: list[Any] | None = None) -> None:
        super().__init__()
        self.dtype = torch.float64
        self.kinks: list[Any] = []
        # detach() is a constant to backward: it keeps its value at the point (recorded by the first
        # evaluation, read back in the same order by the perturbed ones, which run the same trace)
        self.detached: list[Any] = [] if detached is None else detached
        self.replaying_detach = detached is not None
        self.k = 0  # detach() calls read back so far
        self.replay_masks = False  # a comparison is computed afresh: a mask that flips under a step is a kink

    def on_mask(self, mask: Any) -> None:
        self.kinks.append(mask)

    def scalar(self, e: P.Scalar, x: Val) -> float:
        # math.sqrt(d) is a Python number, a constant to backward as detach() is: kept at its value at the point
        if e.what in ("len", "size", "numel", "dim"):
            return super().scalar(e, x)
        if self.replaying_detach:
            self.k += 1
            return float(self.detached[self.k - 1])
        value = super().scalar(e, x)
        self.detached.append(value)
        return value

    def _call(self, e: P.Call, args: list[Val]) -> Val:
        if e.func == "detach":
            if self.replaying_detach:
                self.k += 1
                return Val(self.detached[self.k - 1], {})
            val = super()._call(e, args)
            self.detached.append(val.v)
            return val
        if e.func == "float" and isinstance(args[0].v, torch.Tensor):
            # .float() (or .to(torch.float32)) is the identity to backward; in this float64 evaluation it must
            # not round the values back to float32, or the differences measure that rounding
            return Val(args[0].v.to(self.dtype), dict(args[0].deps))
        spec = REGISTRY[e.func]
        if spec.kinks is not None and any(isinstance(a.v, torch.Tensor) for a in args):
            xs = [a.v if isinstance(a.v, torch.Tensor) else torch.tensor(float(a.v), dtype=self.dtype) for a in args]
            # the registry says where each function has its kinks and steps (relu at 0, clamp at its bounds)
            self.kinks.extend(spec.kinks(torch, *xs, **bound_params(spec, e.params)))
        return super()._call(e, args)


def largest_finite(ts: Any) -> float:
    """max |t| over the finite elements of the real floating tensors among ts (0 where none), without a
    temporary of a tensor's size where every element is finite."""
    found = 0.0
    for t in ts:
        # values only: a meta tensor (a shape worked out ahead) has none, a sparse one is read densely elsewhere
        real = isinstance(t, torch.Tensor) and t.is_floating_point() and not t.is_complex() and not t.is_meta
        if real and t.layout == torch.strided and t.numel():
            m = float(torch.linalg.vector_norm(t.detach(), ord=math.inf))
            found = max(found, m if math.isfinite(m) else float(t.detach().abs().nan_to_num(0.0, 0.0, 0.0).max()))
    return found


class _Largest(TorchDispatchMode):
    """Sees every operation of one evaluation at the point: the largest finite |value| the forward computes on
    the way, the scale of the differences' rounding where a sum cancels ((x + 1e7)**2 - 1e14 is small, its
    terms are not; E[x²] − E[x]² at a mean of 1e4 rounds at 1e8). Programs, replays and user functions alike."""

    def __init__(self) -> None:
        super().__init__()
        self.found = 0.0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # torch would import torch._dynamo (1.2 s) to wrap __torch_dispatch__; nothing compiles here

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.found = max(self.found, largest_finite(out if isinstance(out, (tuple, list)) else (out,)))
        return out


class Function64:
    """The program as a function of its leaves, in float64 under no_grad: its value and kink signatures at
    the point (`f0`, `kinks0`), and at the point with some leaves changed (a call)."""

    def __init__(self, steps: list[Step], output: str, env: dict[str, Any]) -> None:
        self.steps, self.output, self.env = steps, output, env
        self.detached: list[Any] = []
        with _Largest() as seen:
            self.f0, self.kinks0 = self._run(env, _Evaluator())
        self.detached = self._last.detached
        self.scale = max(seen.found, largest_finite(env.values()))  # the rounding's scale (_sizes)

    def __call__(self, changes: dict[str, Any]) -> tuple[Any, list[Any]]:
        return self._run({**self.env, **changes}, _Evaluator(self.detached))

    def _run(self, env: dict[str, Any], it: _Evaluator) -> tuple[Any, list[Any]]:
        self._last = it
        vals = {k: Val(x) for k, x in env.items()}
        with torch.no_grad():
            for s in self.steps:
                it.fixed = s.fixed
                vals[s.target] = it.value_of(s.expr, vals)
        out = vals[self.output].v
        if not isinstance(out, torch.Tensor):
            out = torch.tensor(float(out), dtype=torch.float64)
        return out.double(), it.kinks


class CallableFunction:
    """Any `f(*float64 tensors) -> tensor` as the drivers below take it (the snippet child's replay of an
    ATen log, a user's function): inputs named x0, x1, ... in order, no kink signatures (so a kink shows
    only as differences at h and h/2 that disagree)."""

    def __init__(self, f: Any, xs: list[Any]) -> None:
        self.f = f
        self.env = {f"x{k}": x.detach().to(torch.float64) for k, x in enumerate(xs)}
        with _Largest() as seen:
            self.f0, self.kinks0 = self({})
        self.scale = max(seen.found, largest_finite(self.env.values()))  # the rounding's scale (_sizes)

    def __call__(self, changes: dict[str, Any]) -> tuple[Any, list[Any]]:
        with torch.no_grad():
            out = self.f(*({**self.env, **changes}.values()))
        return torch.as_tensor(out).detach().to(torch.float64), []


def finite_differences_of(
    f: Any, xs: list[Any], v: Any, max_evals: int, seed: int = 1234, columns: bool = False
) -> FDResult:
    """The one finite-difference driver for a plain callable f(*float64 tensors) -> tensor: Jᵀv for every
    column within max_evals evaluations (`every_column`), else DIRECTIONS random directions u
    (⟨u, Jᵀv⟩ against v·(f(x + hu) − f(x − hu))/2h, 4 evaluations each). The result's keys are x0, x1, ...;
    the step rule and the error estimate are those of the program door (STEP, Richardson with h and h/2).
    With `columns`, the full route also keeps J (and each entry's error estimate): `vjp check` reads its
    rows and columns to name a mistake."""
    fn = CallableFunction(f, xs)
    vf = v.detach().double().cpu().reshape(-1)
    n = sum(t.numel() for t in fn.env.values())
    if every_column(n, max_evals):
        res = _full(fn, fn.env, vf, [], columns)
    else:
        res = _directional(fn, fn.env, vf, [], seed)
    if bool(((vf != 0) & ~torch.isfinite(fn.f0.reshape(-1))).any()):
        # an infinite output that v weighs hides how it moves (inf - inf): its differences are no reference
        if res.method == "full":
            for name, mask in res.left_out.items():
                for j in (~mask.reshape(-1)).nonzero().reshape(-1).tolist():
                    res.causes.setdefault(name, {})[j] = DOMAIN
                mask.fill_(True)
        else:
            res.directions, res.kink_reason = [], DOMAIN
    return res


def jacobian_of(f: Any, xs: list[Any], max_evals: int) -> tuple[list[Any], list[Any]] | None:
    """Every column of J of a plain callable f(*float64 tensors) -> tensor by the same rule as the drivers
    above (STEP, Richardson with h and h/2): per input an (m × n_k) block and its error estimate; None past
    max_evals evaluations (`every_column`). An entry at a kink (relu at 0: the slopes either side differ, at
    h and h/2 alike) is nan: central differences average the two slopes, no reference there."""
    fn = CallableFunction(f, xs)
    if not every_column(sum(t.numel() for t in fn.env.values()), max_evals):
        return None
    f0, scale = _sizes(fn)
    m = f0.numel()
    blocks = {name: torch.zeros(m, x.numel(), dtype=torch.float64) for name, x in fn.env.items()}
    errors = {name: torch.zeros(m, x.numel(), dtype=torch.float64) for name, x in fn.env.items()}
    for name, j, h, a in _columns(fn, fn.env, []):
        rounding = a.rounding(f0, scale, h)
        blocks[name][:, j] = torch.where(_kinks(a.bends, h, rounding), float("nan"), a.richardson)
        errors[name][:, j] = a.spread + rounding
    return list(blocks.values()), list(errors.values())


def derivative_along(f: Callable[..., Any], xs: list[Any], us: list[Any]) -> tuple[Any, Any]:
    """Ju, the derivative of f(*xs) (float64 tensors to one tensor) along the tangents us, by the rule of
    every column: f(x + t·s·u) at t = ±h, ±h/2, Richardson-extrapolated, where s scales u so that the step
    moves no input with a tangent by more than STEP·max(|x|, 1) (an input with none does not set it). Per
    output element, flat: the value and its error estimate; the value is nan where the differences are no
    reference (a kink, a step off the domain, differences at h and h/2 that do not settle: a pole)."""
    moving = [(x, u) for x, u in zip(xs, us, strict=True) if u.numel() and bool(u.ne(0).any())]
    if not moving:  # no direction: Ju is 0 exactly
        y = f(*xs).reshape(-1)
        return torch.zeros_like(y), torch.zeros_like(y)
    s = min(max(float(x.abs().max()) if x.numel() else 0.0, 1.0) / float(u.abs().max()) for x, u in moving)
    fn = CallableFunction(lambda t: f(*[x + (t * s) * u for x, u in zip(xs, us, strict=True)]), [torch.zeros(())])
    f0, scale = _sizes(fn)
    a = _along(fn, lambda step: {"x0": torch.tensor(step, dtype=torch.float64)}, STEP, [])
    rounding = a.rounding(f0, scale, STEP)
    ref = a.richardson
    unsettled = a.spread > 1e-3 * ref.abs().clamp(min=1.0) + rounding
    none = _kinks(a.bends, STEP, rounding) | ~torch.isfinite(ref) | ~torch.isfinite(fn.f0.reshape(-1)) | unsettled
    return torch.where(none, float("nan"), ref) / s, (a.spread + rounding) / s


def step_rule() -> str:
    """The step rule, as docs/checks.md and `vjp tolerances` state it."""
    return (
        "central differences in float64 at h = eps^(1/3)·max(|x_j|, 1) (about 6.1e-6·max(|x_j|, 1)) and at h/2; "
        "the reference is their Richardson extrapolation (4·D(h/2) − D(h))/3, its error estimate |D(h) − D(h/2)| "
        "plus 16·eps·(|f| + max|f|)/(h/2), which the tolerance takes on top of the dtype's"
    )


def _crosses(base: list[Any], other: list[Any]) -> bool:
    """Whether an evaluation is on another side of a kink than the base point, or moved off one it was on."""
    return any(bool((a != b).any()) for a, b in zip(base, other, strict=True))


def finite_differences(
    steps: list[Step],
    output: str,
    leaves: dict[str, Any],
    consts: dict[str, Any],
    v: Any,
    max_evals: int,
    seed: int = 1234,
) -> FDResult:
    """Jᵀv by central differences (full within max_evals evaluations, directional otherwise)."""
    x0 = {n: t.detach().double().cpu() for n, t in leaves.items()}
    # integer constants (indices, class targets) stay integers, as in the run
    env = {**x0, **{n: (c.double() if c.is_floating_point() else c).detach().cpu() for n, c in consts.items()}}
    vf = v.detach().double().cpu().reshape(-1)
    try:
        fn = Function64(steps, output, env)
    except (RuntimeError, ValueError, ZeroDivisionError) as e:  # pragma: no cover - the trace ran once already
        raise FDUnavailable(f"the program could not be evaluated in float64 ({type(e).__name__})") from None
    f0, k0 = fn.f0, fn.kinks0
    bad = ((vf != 0) & ~torch.isfinite(f0.reshape(-1))).nonzero().reshape(-1)
    if bad.numel():
        k = int(bad[0])
        raise FDUnavailable(
            f"the output is {float(f0.reshape(-1)[k])} at {element_label(output, tuple(f0.shape), k)} in float64, "
            "where differences of its values mean nothing"
        )
    if every_column(sum(t.numel() for t in x0.values()), max_evals):
        return _full(fn, x0, vf, k0)
    return _directional(fn, x0, vf, k0, seed)


@dataclass
class _Along:
    """Central differences of f along one direction, at the steps h and h/2, every output element flattened."""

    d_h: Any  # (f(x + hu) − f(x − hu))/2h
    d_h2: Any  # the same at h/2
    bends: list[Any]  # f(x + su) + f(x − su) − 2·f(x) at s = h and h/2: h²·f'' where f is smooth
    crossed: bool  # a kink signature (relu's sign, a mask) differs from the point's on either side
    jumped: bool = False  # both sides a thousandth of the point's value somewhere: a pole or spike between
    reach: Any = 0.0  # max |f| at the four stepped points: where it is far above |f(x)|, the rounding's scale

    def rounding(self, f0: Any, scale: float, h: float) -> Any:
        """The evaluations' rounding in a difference at h/2, 16·eps·(|f| + max|f|)/(h/2), |f| the larger of
        the point's and the stepped points': (1e10·x)² at x = 1e-20 is 1e-20 there and 3.6e9 a step away,
        whose difference of 2.4e-5 rounds by 2% (an `agree` on a right grad read `disagree`)."""
        return 16 * EPS * (torch.maximum(torch.as_tensor(f0), torch.as_tensor(self.reach)) + scale) / (h / 2)

    @property
    def richardson(self) -> Any:
        return (4 * self.d_h2 - self.d_h) / 3  # the h² term cancels

    @property
    def spread(self) -> Any:
        return (self.d_h - self.d_h2).abs()


def _along(
    fn: Function64 | CallableFunction, shifted: Callable[[float], dict[str, Any]], h: float, k0: list[Any]
) -> _Along:
    """f's central differences along one direction at h and h/2 (4 evaluations): `shifted(s)` is the point
    moved by s along it."""
    from ..errors import ProgramError

    ds, bends, crossed = [], [], False
    nan = torch.full((fn.f0.numel(),), math.nan, dtype=torch.float64)
    jumped = torch.zeros(fn.f0.numel(), dtype=torch.bool)
    reach = torch.zeros(fn.f0.numel(), dtype=torch.float64)
    for step in (h, h / 2):
        try:
            hi, k_hi = fn(shifted(step))
            lo, k_lo = fn(shifted(-step))
        except (ProgramError, RuntimeError):  # torch refuses the stepped input (BCE of p = 0 - h): off the domain
            return _Along(nan, nan, [nan, nan], False)
        if hi.shape != fn.f0.shape or lo.shape != fn.f0.shape:  # a mask selects another count of elements
            return _Along(nan, nan, [nan, nan], True)
        crossed = crossed or _crosses(k0, k_hi) or _crosses(k0, k_lo)
        # an output element that did not change differs by 0, even where it is infinite (1/x at 0: inf - inf)
        ds.append(torch.where(hi == lo, 0.0, hi - lo).reshape(-1) / (2 * step))
        bends.append(torch.where((hi == fn.f0) & (lo == fn.f0), 0.0, hi + lo - 2 * fn.f0).reshape(-1))
        # both sides a thousandth of the point's value: the steps jump over a pole or a spike narrower than
        # they are (1/x at 1e-30, a Gaussian of width 1e-7), and their differences say nothing of f' there
        jumped |= (fn.f0.abs() > 1e3 * torch.maximum(hi.abs(), lo.abs())).reshape(-1)
        reach = torch.maximum(reach, torch.maximum(hi.abs(), lo.abs()).reshape(-1).nan_to_num(0.0, 0.0, 0.0))
    if bool(jumped.any()):
        ds = [torch.where(jumped, math.nan, d) for d in ds]
    return _Along(ds[0], ds[1], bends, crossed, bool(jumped.any()), reach)


def _columns(
    fn: Function64 | CallableFunction, x0: dict[str, Any], k0: list[Any]
) -> Iterator[tuple[str, int, float, _Along]]:
    """THE column loop: every input element j of every leaf, moved alone by h = STEP·max(|x_j|, 1) and h/2;
    each column of J with its leaf, index and step (the full route and J itself both read it)."""
    for name, x in x0.items():
        flat = x.reshape(-1)
        for j in range(flat.numel()):

            def shifted(s: float, name: str = name, x: Any = x, j: int = j) -> dict[str, Any]:
                delta = torch.zeros(x.numel(), dtype=x.dtype)
                delta[j] = s
                return {name: x + delta.reshape(x.shape)}

            h = STEP * max(abs(float(flat[j])), 1.0)
            yield name, j, h, _along(fn, shifted, h, k0)


def _sizes(fn: Function64 | CallableFunction) -> tuple[Any, float]:
    """|f| at the point per output element (non-finite ones as 0) and its largest, or the largest value the
    forward computed on the way where that is larger (a sum that cancels): the rounding's scale."""
    f0 = fn.f0.reshape(-1).abs().nan_to_num(0.0, 0.0, 0.0)
    return f0, max(float(f0.max()) if f0.numel() else 0.0, fn.scale)


def _kinks(bends: list[Any], h: float, rounding: Any) -> Any:
    """Per output element, whether the slopes right and left of the point differ, seen from the values alone
    (a function with no kink signatures: a snippet's replay). (f(x+h) + f(x−h) − 2f(x))/h is h·f'' where f is
    smooth, so it halves with h; at a kink it is the jump of the slope, the same at h and h/2."""
    s_h, s_h2 = bends[0] / h, bends[1] / (h / 2)
    return (s_h.abs() > 64 * rounding) & ((s_h2 - s_h).abs() < 0.25 * s_h.abs())


def _kinked(bends: list[Any], h: float, rounding: Any) -> bool:
    """Whether any output element shows a kink (`_kinks`)."""
    return bool(_kinks(bends, h, rounding).any())


def _full(
    fn: Function64 | CallableFunction,
    x0: dict[str, Any],
    vf: Any,
    k0: list[Any],
    keep: bool = False,
) -> FDResult:
    res = FDResult("full", 1)
    f0, scale = _sizes(fn)
    used = vf != 0
    for name, x in x0.items():
        res.jtv[name] = torch.zeros(x.shape, dtype=torch.float64)
        res.error[name] = torch.zeros(x.shape, dtype=torch.float64)
        res.left_out[name] = torch.zeros(x.shape, dtype=torch.bool)
        if keep:
            res.columns[name] = torch.zeros(f0.numel(), x.numel(), dtype=torch.float64)
            res.column_error[name] = torch.zeros(f0.numel(), x.numel(), dtype=torch.float64)
    for name, j, h, a in _columns(fn, x0, k0):
        res.evals += 4
        col = a.richardson
        # each entry of the column: converged where its differences at h and h/2 agree up to their
        # rounding (a few eps·|f|/h). Every row counts, also those v weighs by 0: an infinite derivative
        # there makes Jᵀv undefined (0·inf), which finite differences cannot show
        rounding = a.rounding(f0, scale, h)
        weighed = [torch.where(used, b, 0.0) for b in a.bends]  # a kink in a row v weighs by 0 is not in Jᵀv
        kinked = a.crossed or _kinked(weighed, h, rounding)
        unsettled = bool((a.spread > 1e-3 * col.abs().clamp(min=1.0) + rounding).any())
        if keep:
            res.columns[name][:, j] = col
            res.column_error[name][:, j] = a.spread + rounding
        if kinked or not bool(torch.isfinite(col).all()) or unsettled:
            res.left_out[name].view(-1)[j] = True
            finite = bool(torch.isfinite(col).all())
            why = KINK if kinked else JUMPED if a.jumped else DOMAIN if not finite else UNSETTLED
            res.causes.setdefault(name, {})[j] = why
            continue
        res.jtv[name].view(-1)[j] = float((vf * col)[used].sum())
        res.error[name].view(-1)[j] = float((vf.abs() * (a.spread + rounding))[used].sum())
    return res


def _directional(fn: Function64 | CallableFunction, x0: dict[str, Any], vf: Any, k0: list[Any], seed: int) -> FDResult:
    res = FDResult("directional", 1)
    f0, scale = _sizes(fn)
    used = vf != 0
    gen = torch.Generator().manual_seed(seed)
    size = max((float(x.abs().max()) for x in x0.values() if x.numel()), default=1.0)
    for _ in range(DIRECTIONS):
        u = {n: torch.randn(x.shape, generator=gen, dtype=torch.float64) for n, x in x0.items()}
        unorm = max(float(t.abs().max()) for t in u.values() if t.numel())
        h = STEP * max(size, 1.0) / unorm

        def shifted(s: float, u: dict[str, Any] = u) -> dict[str, Any]:
            return {n: x0[n] + s * u[n] for n in x0}

        a = _along(fn, shifted, h, k0)
        res.evals += 4
        # a non-finite difference counts also where v is 0 (see _full); a kink only in rows v weighs
        kinked = a.crossed or not bool(torch.isfinite(a.d_h).all() and torch.isfinite(a.d_h2).all())
        kinked = kinked or _kinked([torch.where(used, b, 0.0) for b in a.bends], h, a.rounding(f0, scale, h))
        d_h, d_h2 = (float(torch.where(used, vf * d, 0.0).sum()) for d in (a.d_h, a.d_h2))
        ref = (4 * d_h2 - d_h) / 3
        trunc = abs(d_h - d_h2)
        if kinked or not math.isfinite(ref) or trunc > 1e-3 * max(1.0, abs(ref)):
            res.kink_reason = (
                "a random direction crossed a kink of the program (relu or abs at 0, a norm at 0) or left the "
                "function's domain, or its differences at h and h/2 disagreed; it was left out"
            )
            continue
        reach = torch.as_tensor(a.reach)
        rounding = 8 * EPS * max(scale, float(reach.max()) if reach.numel() else 0.0) / (h / 2)
        rounding *= float(vf.abs().sum())
        res.directions.append((ref, trunc + rounding, 0.0))
        res.us.append(u)
    return res


def directional_pairs(
    fd: FDResult, grads: dict[str, Any], mags: dict[str, Any], tol: Tolerance, calls: int = 1
) -> tuple[list[tuple[str, Any, Any]], dict[str, Any]]:
    """The directional route's comparisons, as every door makes them: per random direction u, the label
    `<uk, Jᵀv>`, ⟨u, .grad⟩ and the differences' ⟨u, Jᵀv⟩ (times calls), and the size each is weighed at:
    the larger of Σ_j |u_j|·mags_j (mags: Σᵢ|v[i]·J[i, j]| where known, else |u·grad|) and the differences'
    error estimate / rtol. `grads` and `mags` are keyed as the driver's leaves (fd.us)."""
    pairs: list[tuple[str, Any, Any]] = []
    scales: dict[str, Any] = {}
    for k, ((ref, err, _), u) in enumerate(zip(fd.directions, fd.us, strict=True)):
        products = [u[name] * grads[name].detach().double().cpu() for name in u]
        got = math.fsum(float(t.sum()) for t in products)
        size = math.fsum(
            float((u[name].abs() * mags[name].double().cpu()).sum())
            if name in mags
            else float(t.abs().nan_to_num(0.0, 0.0, 0.0).sum())
            for name, t in zip(u, products, strict=True)
        )
        label = f"<u{k + 1}, Jᵀv>"
        pairs.append((label, torch.tensor(got, dtype=torch.float64), torch.tensor(ref * calls, dtype=torch.float64)))
        scales[label] = torch.tensor(with_error(size, err * calls, tol), dtype=torch.float64)
    return pairs, scales


def second_directional(f: Callable[..., Any], x0: Any, u: Any, w: Any) -> tuple[float, float] | str:
    """uᵀ(∂²f/∂x²)w of a one-number function f at x0 by central second differences along u and w, never
    autograd: (f(x + pu + qw) − f(x + pu − qw) − f(x − pu + qw) + f(x − pu − qw)) / 4pq at steps h and h/2,
    their Richardson value (4·D(h/2) − D(h))/3 the reference, and |D(h) − D(h/2)| plus the rounding of the
    evaluations, 16·eps·2|f|/(pq/4), its error estimate. Where a step leaves the domain, or the two steps
    disagree (a kink: relu at 0), why there is no reference, in words."""
    size = max(float(x0.abs().max()) if x0.numel() else 0.0, 1.0)
    p0 = STEP_2 * size / max(float(u.abs().max()), EPS)
    q0 = STEP_2 * size / max(float(w.abs().max()), EPS)

    def at(p: float, q: float) -> float:
        y = f(x0 + p * u + q * w)
        if y.numel() != 1:
            raise FDUnavailable(f"the function gives {y.numel()} numbers, not one")
        return float(y.reshape(()))

    f0 = abs(at(0.0, 0.0))
    ds = []
    for s in (1.0, 0.5):
        p, q = s * p0, s * q0
        ds.append((at(p, q) - at(p, -q) - at(-p, q) + at(-p, -q)) / (4 * p * q))
    if not (math.isfinite(f0) and all(math.isfinite(d) for d in ds)):
        return DOMAIN
    gap, noise = abs(ds[0] - ds[1]), 16 * EPS * 2 * f0 / (p0 * q0 / 4)
    if gap > 0.1 * abs(ds[1]) and gap > 100 * noise:
        return f"{UNSETTLED}; or {KINK}"
    return (4 * ds[1] - ds[0]) / 3, gap + noise


__all__ = [
    "FDResult",
    "every_column",
    "FDUnavailable",
    "derivative_along",
    "directional_pairs",
    "finite_differences",
    "finite_differences_of",
    "jacobian_of",
    "second_directional",
    "step_rule",
]
