"""What PyTorch's backward does where an input sits on a kink or a tie: one table, measured on torch 2.13.

relu at 0, abs at 0, a tie in max, a norm of zeros: the function has no derivative there, and autograd's
formula picks one (a one-sided derivative, a subgradient, an even share, the element whose index the
forward returned). A snippet whose input lands exactly there gets that choice as its gradient, silently.
Each entry below says which elements of an ATen operation's input sit on its kink or tie (`at`, from the
arguments by schema name and the results) and what autograd passes there (`words`, checked against plain
torch by tests/test_why_kinks.py). kinks.py holds the same operations on their branch for finite
differences; this table only names the choice.

The recorder (record.py) asks `hit` of each operation it logs, so an explained call lists the kinks its
forward met (`Event.kinks`); the diagnosis run asks `of_call` of the operation that sent the first nan.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..events import element_index
from .kinks import bind

MAX_ELEMENTS_NAMED = 4  # elements on a kink named per operation (the count says how many in all)
MAX_CHECKED = 1 << 24  # elements of one input looked at: a larger one is not checked (its cost is the snippet's)
MAX_HITS = 50  # kinks kept per recorder (the latest): a loop over a kink says it once per line anyway


@dataclass(frozen=True)
class Convention:
    """One operation's kink or tie: which elements sit on it, and what autograd passes there."""

    words: str  # "relu at 0: PyTorch passes 0 (the left derivative)", at most 120 characters
    # (arguments, results) -> a reduction's mask of the elements on a tie (`after`), or an elementwise op's
    # distance to its kink, 0 exactly there (x - y is 0 only where x == y: IEEE floats keep subnormals)
    at: Callable[[dict[str, Any], list[torch.Tensor]], torch.Tensor | None]
    after: bool = False  # needs the results (a reduction); else read before the op runs (relu_ overwrites x)


def _self_is(value: Callable[[dict[str, Any]], Any]) -> Callable[..., torch.Tensor]:
    return lambda a, r: a["self"] - value(a)


def _zero(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    return a["self"]


def _bounds(lo: str, hi: str) -> Callable[..., torch.Tensor | None]:
    """The distance to the nearer of a scalar or tensor bound (a tensor bound broadcast as the op does)."""

    def at(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor | None:
        x, found = a["self"], None
        for b in (a.get(lo), a.get(hi)):
            if b is None:
                continue
            d = (x - b).abs()
            found = d if found is None else torch.minimum(found, d)
        return found

    return at


def _tie_pair(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    return a["self"] - a["other"]


def _dims(a: dict[str, Any], x: torch.Tensor) -> list[int]:
    d = a.get("dim")
    if d is None or d == []:
        return list(range(x.dim()))
    return [d % max(x.dim(), 1)] if isinstance(d, int) else [k % max(x.dim(), 1) for k in d]


def _equal_to_result(a: dict[str, Any], r: list[torch.Tensor], keep: bool, ties: int = 2) -> torch.Tensor:
    """Elements equal to the reduction's value in their slice, where at least `ties` of the slice are."""
    x, value = a["self"], r[0]
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.bool)
    dims = _dims(a, x)
    if not keep:
        for d in sorted(dims):
            value = value.unsqueeze(d)
    m = x == value
    return m & (m.sum(dims, keepdim=True) >= ties)


def _shared_tie(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    return _equal_to_result(a, r, bool(a.get("keepdim", False)))


def _indexed_tie(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    """max(dim), median(dim): the dim is one int; the values come first among the results."""
    return _equal_to_result(a, r, bool(a.get("keepdim", False)))


def _norm(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor | None:
    """A vector norm at 0 (every element of a slice 0; for ord 1, each 0), or, for ord=inf, a tie of |x|."""
    x, order = a["self"], float(a.get("ord", 2))
    if x.dim() == 0:
        return x == 0
    dims = _dims(a, x)
    if order == float("inf"):
        return _equal_to_result({"self": x.abs(), "dim": dims}, r, bool(a.get("keepdim", False)))
    if order <= 1:
        return x == 0
    zero = x == 0
    return zero & zero.all(dim=dims, keepdim=True)


def _sorted_ties(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    """sort: elements whose value another element of the slice shares."""
    x = a["self"]
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.bool)
    d = a.get("dim", -1) % x.dim()
    values, idx = r[0], r[1]
    n = values.shape[d]
    same = torch.zeros_like(values, dtype=torch.bool)
    if n > 1:
        eq = values.narrow(d, 1, n - 1) == values.narrow(d, 0, n - 1)
        same.narrow(d, 1, n - 1).copy_(eq)
        same.narrow(d, 0, n - 1).logical_or_(eq)
    return torch.zeros_like(x, dtype=torch.bool).scatter(d, idx, same)


def _topk_ties(a: dict[str, Any], r: list[torch.Tensor]) -> torch.Tensor:
    """topk: elements equal to the last value taken, where more of the slice equal it than were taken."""
    x = a["self"]
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.bool)
    d = a.get("dim", -1) % x.dim()
    values = r[0]
    if values.shape[d] == 0:
        return torch.zeros_like(x, dtype=torch.bool)
    last = values.amin(d, keepdim=True) if a.get("largest", True) else values.amax(d, keepdim=True)
    m = x == last
    return m & (m.sum(d, keepdim=True) > (values == last).sum(d, keepdim=True))


_LEFT = "PyTorch passes {} (the left derivative)"
_BY_INDEX = "PyTorch gives all to the element whose index it returned, 0 to the other tied ones"

# ATen overload packet (or "packet.overload") -> its convention, measured with torch 2.13.0 in float64
CONVENTIONS: dict[str, Convention] = {
    "relu": Convention("relu at 0: " + _LEFT.format("0"), _zero),
    "leaky_relu": Convention("leaky_relu at 0: " + _LEFT.format("negative_slope"), _zero),
    "_prelu_kernel": Convention("prelu at 0: " + _LEFT.format("the weight"), _zero),
    "elu": Convention("elu at 0: " + _LEFT.format("alpha"), _zero),
    "threshold": Convention(
        "threshold at its threshold: PyTorch passes 0 (x must exceed it)", _self_is(lambda a: a["threshold"])
    ),
    "abs": Convention("abs at 0: PyTorch passes 0 (sign(0) = 0: neither one-sided derivative)", _zero),
    "sqrt": Convention(
        "sqrt at 0: the derivative is infinite; PyTorch sends inf (nan where the cotangent is 0)", _zero
    ),
    "hardtanh": Convention(
        "hardtanh (relu6) at a bound: PyTorch passes 0 (the slope is 1 only strictly inside)",
        _bounds("min_val", "max_val"),
    ),
    "clamp": Convention(
        "clamp at a bound: PyTorch passes 1 (a value on a bound counts as inside)", _bounds("min", "max")
    ),
    "clip": Convention(
        "clip at a bound: PyTorch passes 1 (a value on a bound counts as inside)", _bounds("min", "max")
    ),
    "clamp_min": Convention(
        "clamp at its min: PyTorch passes 1 (a value on the bound counts as inside)", _bounds("min", "min")
    ),
    "clamp_max": Convention(
        "clamp at its max: PyTorch passes 1 (a value on the bound counts as inside)", _bounds("max", "max")
    ),
    # torch.max(a, b) and torch.min(a, b) run as maximum and minimum
    "maximum": Convention("maximum at a tie: PyTorch gives each side half the gradient", _tie_pair),
    "minimum": Convention("minimum at a tie: PyTorch gives each side half the gradient", _tie_pair),
    "max.default": Convention(
        "max at a tie: PyTorch shares the gradient evenly among the tied elements", _shared_tie, True
    ),
    "min.default": Convention(
        "min at a tie: PyTorch shares the gradient evenly among the tied elements", _shared_tie, True
    ),
    "amax": Convention("amax at a tie: PyTorch shares the gradient evenly among the tied elements", _shared_tie, True),
    "amin": Convention("amin at a tie: PyTorch shares the gradient evenly among the tied elements", _shared_tie, True),
    "max.dim": Convention("max(dim) at a tie: " + _BY_INDEX, _indexed_tie, True),
    "min.dim": Convention("min(dim) at a tie: " + _BY_INDEX, _indexed_tie, True),
    "median.dim": Convention("median(dim) at a tie: " + _BY_INDEX, _indexed_tie, True),
    "median.default": Convention(
        "median at a tie: PyTorch shares the gradient evenly among the elements equal to the median", _shared_tie, True
    ),
    "linalg_vector_norm": Convention(
        "norm at 0: PyTorch passes 0 (a subgradient); ord=inf at a tie: shared evenly among the tied |x|", _norm, True
    ),
    "sort": Convention(
        "sort at a tie: PyTorch gives each tied element the gradient of the place its returned index took",
        _sorted_ties,
        True,
    ),
    "topk": Convention("topk at a tie: " + _BY_INDEX, _topk_ties, True),
}


def convention_for(func: Any) -> Convention | None:
    """This ATen overload's convention (an in-place `relu_` has relu's), or None: no kink named."""
    try:
        name = func.overloadpacket.__name__
        overload = func._overloadname
    except AttributeError:
        return None
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]
    return CONVENTIONS.get(f"{name}.{overload}") or CONVENTIONS.get(name)


def hit(conv: Convention, func: Any, args: Any, kwargs: Any, results: Any) -> dict[str, Any] | None:
    """The elements of this call's input on the convention's kink: {"op", "elements", "count", "convention"}
    (the caller adds "line"), or None where none is, or where the check itself cannot run."""
    try:
        a = bind(func, args, kwargs)
        x = a.get("self")
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() > MAX_CHECKED:
            return None
        rs = [t for t in (results if isinstance(results, (tuple, list)) else (results,)) if isinstance(t, torch.Tensor)]
        with torch.no_grad():
            mask = conv.at({k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in a.items()}, rs)
            if mask is not None and not conv.after:
                # a float minimum first: a comparison into bools costs 20 relus here, and is rarely needed
                if mask.numel() == 0 or not bool(mask.abs().amin() == 0):
                    return None
                mask = mask == 0
            if mask is None or not bool(mask.any()):
                return None
            flat = mask.reshape(-1).nonzero().reshape(-1)
            count = int(flat.numel())
            named = [element_index(list(mask.shape), int(k)) for k in flat[:MAX_ELEMENTS_NAMED]] if mask.dim() else []
    except Exception:  # noqa: BLE001 - only looking: an unusual argument leaves the kink unnamed, never the op
        return None
    found = {"op": conv.words.split(" at ", 1)[0], "elements": named, "count": count, "convention": conv.words}
    return {**found, "_input": weakref.ref(x)}  # named by the caller, where the snippet has a name for it


class _Capture(TorchDispatchMode):
    """The kinks of the ATen operations one torch call runs (the diagnosis run's first non-finite op)."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[dict[str, Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        conv = convention_for(func)
        found = hit(conv, func, args, kwargs, None) if conv is not None and not conv.after else None
        out = func(*args, **kwargs)
        if conv is not None and conv.after:
            found = hit(conv, func, args, kwargs, out)
        if found is not None:
            self.hits.append(found)
        return out


def of_call(call: tuple[Any, Any, Any] | None, line: int | None, name_of: NameOf | None = None) -> list[dict[str, Any]]:
    """The kinks a torch-level call (func, args, kwargs) meets, run once more without grad, at `line`."""
    if call is None:
        return []
    func, args, kwargs = call
    capture = _Capture()
    try:
        with torch.no_grad(), capture:
            func(*args, **kwargs)
    except Exception:  # noqa: BLE001 - only looking
        return []
    return [_named({**h, "line": line}, name_of) for h in capture.hits[:MAX_ELEMENTS_NAMED]]


def of_entries(entries: list[Any], name_of: NameOf | None = None) -> list[dict[str, Any]]:
    """The kinks a recorded forward met (record.Entry.kink), in the order its operations ran."""
    return [_named(e.kink, name_of) for e in entries if getattr(e, "kink", None) is not None][:MAX_HITS]


NameOf = Callable[[torch.Tensor], str | None]


def _named(kink: dict[str, Any], name_of: NameOf | None) -> dict[str, Any]:
    """A kink as the channel carries it: the input by the snippet's name ("" where it has none, as for a
    module's intermediate value), its elements as `x[0]` then."""
    out = {k: v for k, v in kink.items() if k != "_input"}
    ref = kink.get("_input")
    t = ref() if ref is not None else None
    name = (name_of(t) if t is not None and name_of is not None else None) or ""
    out["input"] = name
    if name:
        out["elements"] = [name + e for e in out["elements"]]
    return out
