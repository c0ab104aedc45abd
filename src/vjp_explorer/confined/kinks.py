"""Piecewise ATen operations held on the branch they took at the point, as autograd differentiates them.

Autograd differentiates relu, max, clamp, sort and their kin at the point: the branch each element took
there. A finite difference of the plain replay steps across a kink (a pre-activation near 0 that a step of
all the parameters moves over) and measures another function. So once the replay has run at the point
(`Replay.hold`), each operation below runs as the smooth branch it took there: relu(x) as `x` where x was
positive and `0` elsewhere, sort as a gather at the recorded indices, max's ties shared as autograd shares
them. Each rule takes the operation's arguments now (`a`) and at the point (`at`, with the results there)
and gives the results; its tie conventions are those of autograd's backward formula for the op, so the
held replay's derivative at the point is autograd's.

`UNHELD` names the operations with a kink no rule holds: where one is in the replay, a finite difference
that disagrees may have crossed it, and the check says so instead of `disagree`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Point:
    """One operation as it ran at the point: its arguments by schema name, and its tensor results."""

    args: dict[str, Any]
    results: list[torch.Tensor]


def bind(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """An ATen call's arguments by their schema names, defaults filled in."""
    out: dict[str, Any] = {}
    for k, a in enumerate(func._schema.arguments):
        if not a.kwarg_only and k < len(args):
            out[a.name] = args[k]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
    return out


def _pos(at: Any, x: torch.Tensor, pos: Any, neg: Any) -> torch.Tensor:
    """`pos` where the point's operand was positive, else `neg` (relu's convention: 0 counts as negative)."""
    return torch.where(at > 0, pos, neg)


def _zero(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=x.dtype)


def _abs(d: torch.Tensor, d0: torch.Tensor) -> torch.Tensor:
    """|d| held at the point's sign: sgn(0) = 0, as abs's backward has it."""
    return torch.where(d0 > 0, d, torch.where(d0 < 0, -d, d * 0))


def _gather(x: torch.Tensor, dim: int, idx: torch.Tensor, keepdim: bool = True) -> torch.Tensor:
    """The values at the recorded indices along `dim` (the indices a reduction or a sort returned)."""
    if x.dim() == 0:
        return x.clone()
    index = idx if keepdim else idx.unsqueeze(dim)
    got = x.gather(dim, index)
    return got if keepdim else got.squeeze(dim)


def _indexed(dim_key: str = "dim", keep_key: str | None = "keepdim", default_dim: int = -1) -> Callable[..., Any]:
    """A reduction or sort that returns (values, indices): the values gathered at the point's indices."""

    def rule(a: dict[str, Any], at: Point) -> tuple[torch.Tensor, torch.Tensor]:
        dim = a.get(dim_key, default_dim)
        keep = True if keep_key is None else bool(a.get(keep_key, False))
        idx = at.results[1]
        return _gather(a["self"], dim, idx, keep), idx

    return rule


def _shared(a: dict[str, Any], at: Point) -> torch.Tensor:
    """amax/amin and max()/min() over all: ties share the gradient evenly, as autograd's backward does."""
    x, x0, r0 = a["self"], at.args["self"], at.results[0]
    dims = a.get("dim", [])
    dims = list(range(x.dim())) if dims in ([], None) else [dims] if isinstance(dims, int) else list(dims)
    keep = bool(a.get("keepdim", False))
    r = r0
    if not keep and x.dim():
        for d in sorted(k % x.dim() for k in dims):
            r = r.unsqueeze(d)
    m = x0 == r
    total = torch.where(m, x, _zero(x)).sum(dims, keepdim=keep) if x.dim() else x.clone()
    count = m.sum(dims, keepdim=keep).to(x.dtype) if x.dim() else torch.ones((), dtype=x.dtype)
    return total / count


def _pair(a: dict[str, Any], at: Point) -> torch.Tensor:
    """maximum/minimum (fmax/fmin): the argument that won at the point; a tie takes half of each."""
    x, y, x0, y0, r0 = a["self"], a["other"], at.args["self"], at.args["other"], at.results[0]
    x_won, y_won = (x0 == r0) & (y0 != r0), (y0 == r0) & (x0 != r0)
    return torch.where(x_won, x, torch.where(y_won, y, (x + y) / 2))


def _clamp(a: dict[str, Any], at: Point) -> torch.Tensor:
    """clamp with scalar or tensor bounds: the bound where the point was outside it (grad 1 on the bound)."""
    x, x0 = a["self"], at.args["self"]
    lo, hi = a.get("min"), a.get("max")
    lo0, hi0 = at.args.get("min"), at.args.get("max")
    out = x
    if hi is not None:
        out = torch.where(x0 > hi0, hi if isinstance(hi, torch.Tensor) else torch.full_like(x, hi), out)
    if lo is not None:
        out = torch.where(x0 < lo0, lo if isinstance(lo, torch.Tensor) else torch.full_like(x, lo), out)
    return out


def _hardtanh(a: dict[str, Any], at: Point) -> torch.Tensor:
    """hardtanh (relu6): the slope is 1 strictly inside (min_val, max_val), as hardtanh_backward has it."""
    x, x0 = a["self"], at.args["self"]
    lo, hi = a.get("min_val", -1.0), a.get("max_val", 1.0)
    return torch.where(x0 <= lo, torch.full_like(x, lo), torch.where(x0 >= hi, torch.full_like(x, hi), x))


def _elu(a: dict[str, Any], at: Point) -> torch.Tensor:
    x, alpha, scale, inner = a["self"], a.get("alpha", 1.0), a.get("scale", 1.0), a.get("input_scale", 1.0)
    return _pos(at.args["self"], x, scale * x, scale * alpha * torch.expm1(x * inner))


def _hardswish(a: dict[str, Any], at: Point) -> torch.Tensor:
    x, x0 = a["self"], at.args["self"]
    return torch.where(x0 < -3, x * 0, torch.where(x0 <= 3, x * (x + 3) / 6, x))


def _hardsigmoid(a: dict[str, Any], at: Point) -> torch.Tensor:
    x, x0 = a["self"], at.args["self"]
    return torch.where(x0 <= -3, x * 0, torch.where(x0 >= 3, x * 0 + 1, x / 6 + 0.5))


def _shrink(soft: bool) -> Callable[..., torch.Tensor]:
    def rule(a: dict[str, Any], at: Point) -> torch.Tensor:
        x, x0, lam = a["self"], at.args["self"], a.get("lambd", 0.5)
        if soft:
            return torch.where(x0 > lam, x - lam, torch.where(x0 < -lam, x + lam, x * 0))
        return torch.where((x0 > lam) | (x0 < -lam), x, x * 0)

    return rule


def _reduce(loss: torch.Tensor, reduction: int) -> torch.Tensor:
    return loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()


def _smooth_l1(huber: bool) -> Callable[..., torch.Tensor]:
    """smooth_l1_loss and huber_loss: quadratic where |d| <= beta at the point, linear (|d| held) beyond."""

    def rule(a: dict[str, Any], at: Point) -> torch.Tensor:
        d = a["self"] - a["target"]
        d0 = at.args["self"] - at.args["target"]
        b = float(a.get("delta" if huber else "beta", 1.0))
        ad = _abs(d, d0)
        if huber:
            loss = torch.where(d0.abs() <= b, 0.5 * d * d, b * (ad - 0.5 * b))
        elif b == 0:
            loss = ad
        else:
            loss = torch.where(d0.abs() <= b, 0.5 * d * d / b, ad - 0.5 * b)
        return _reduce(loss, int(a.get("reduction", 1)))

    return rule


def _steps(a: dict[str, Any], at: Point) -> torch.Tensor:
    """sign, floor, round and kin: constant between their jumps, derivative 0: the value at the point."""
    return at.results[0].to(a["self"].dtype, copy=True)


def _remainder(trunc: bool) -> Callable[..., torch.Tensor]:
    """x mod y = x − y·q with the quotient q held at the point (floor for remainder, trunc for fmod)."""

    def rule(a: dict[str, Any], at: Point) -> torch.Tensor:
        x, y, x0, y0 = a["self"], a["other"], at.args["self"], at.args["other"]
        q = torch.div(x0, y0, rounding_mode="trunc" if trunc else "floor")
        return x - y * q

    return rule


def _pool(k: int) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """max pooling with indices: each window's maximum gathered at the point's flat index in its plane."""

    def rule(a: dict[str, Any], at: Point) -> tuple[torch.Tensor, torch.Tensor]:
        x, idx = a["self"], at.results[1]
        got = x.flatten(-k).gather(-1, idx.flatten(-k))
        return got.reshape(idx.shape), idx

    return rule


Rule = Callable[[dict[str, Any], Point], Any]

# overload packet name -> the rule that holds its branch (an in-place `name_` follows `name`)
RULES: dict[str, Rule] = {
    "relu": lambda a, at: _pos(at.args["self"], a["self"], a["self"], _zero(a["self"])),
    "leaky_relu": lambda a, at: _pos(at.args["self"], a["self"], a["self"], a["self"] * a.get("negative_slope", 0.01)),
    "_prelu_kernel": lambda a, at: _pos(at.args["self"], a["self"], a["self"], a["self"] * a["weight"]),
    "threshold": lambda a, at: torch.where(
        at.args["self"] > a["threshold"], a["self"], torch.full_like(a["self"], float(a["value"]))
    ),
    "abs": lambda a, at: _abs(a["self"], at.args["self"]),
    "hardtanh": _hardtanh,
    "clamp": _clamp,
    "clip": _clamp,
    "clamp_min": _clamp,
    "clamp_max": _clamp,
    "elu": _elu,
    "hardswish": _hardswish,
    "hardsigmoid": _hardsigmoid,
    "softshrink": _shrink(True),
    "hardshrink": _shrink(False),
    "smooth_l1_loss": _smooth_l1(False),
    "huber_loss": _smooth_l1(True),
    "maximum": _pair,
    "minimum": _pair,
    "fmax": _pair,
    "fmin": _pair,
    "amax": _shared,
    "amin": _shared,
    "sign": _steps,
    "sgn": _steps,
    "floor": _steps,
    "ceil": _steps,
    "round": _steps,
    "trunc": _steps,
    "fix": _steps,
    "frac": lambda a, at: a["self"] - torch.trunc(at.args["self"]),
    "remainder": _remainder(False),
    "fmod": _remainder(True),
    "sort": _indexed(keep_key=None),
    "topk": _indexed(keep_key=None),
    "kthvalue": _indexed(),
    "mode": _indexed(),
    "cummax": _indexed(keep_key=None, default_dim=0),
    "cummin": _indexed(keep_key=None, default_dim=0),
    "max_pool1d_with_indices": _pool(1),
    "max_pool2d_with_indices": _pool(2),
    "max_pool3d_with_indices": _pool(3),
    "adaptive_max_pool2d": _pool(2),
    "adaptive_max_pool3d": _pool(3),
}
# max, min, median and nanmedian: over a dim they return indices (gathered); over all, ties share (max/min)
_BY_OVERLOAD: dict[tuple[str, str], Rule] = {
    ("max", "dim"): _indexed(),
    ("min", "dim"): _indexed(),
    ("median", "dim"): _indexed(),
    ("nanmedian", "dim"): _indexed(),
    ("max", "default"): _shared,
    ("min", "default"): _shared,
    ("max", "other"): _pair,
    ("min", "other"): _pair,
}

# operations with a kink no rule above holds (a norm at 0, a median over all, distances at 0)
UNHELD = frozenset(
    {
        "linalg_vector_norm",
        "norm",
        "median",
        "nanmedian",
        "_cdist_forward",
        "dist",
        "nan_to_num",
        "_pdist_forward",
        "softplus",  # x itself past beta*x = threshold: a jump of about exp(-threshold)
    }
)


def piecewise(op: str) -> bool:
    """Whether an operator of a recorded forward ("aten::relu.default") has a kink: a rule above holds its
    branch, or UNHELD names it."""
    name, _, overload = op.partition("::")[2].partition(".")
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]
    return name in RULES or name in UNHELD or name in ("max", "min") or (name, overload or "default") in _BY_OVERLOAD


def rule_for(func: Any) -> Rule | None:
    """The rule that holds this ATen overload's branch, or None (a smooth operation, or one not held)."""
    name = func.overloadpacket.__name__
    found = _BY_OVERLOAD.get((name, func._overloadname))
    if found is not None:
        return found
    if name in ("max", "min", "median", "nanmedian"):
        return None  # another overload (max.dim_max, an out= form): not held
    return RULES.get(name) or (RULES.get(name[:-1]) if name.endswith("_") and not name.startswith("_") else None)


def point(func: Any, args: Any, kwargs: Any, res: Any) -> Point:
    """What a rule needs of the call at the point: its arguments and results, detached."""

    def fixed(t: Any) -> Any:
        return t.detach() if isinstance(t, torch.Tensor) else t

    results = [fixed(r) for r in (res if isinstance(res, (tuple, list)) else (res,)) if isinstance(r, torch.Tensor)]
    return Point({k: fixed(v) for k, v in bind(func, args, kwargs).items()}, results)


def held(func: Any, rule: Rule, args: Any, kwargs: Any, at: Point) -> Any:
    """The operation run as the branch it took at the point; an in-place one gives its result as a new tensor
    (the replay keys it as the input's next version): written into its input, it would change a value the
    replay's own autograd saved to compute it."""
    return rule(bind(func, args, kwargs), at)
