"""Helpers of the forward's log (record.py): argument maps, float64 copies, in-place writes, norms.

Arguments mapped and flattened as the log nests them, float64 copies of a point, and the few operations
whose replay needs a word: an in-place write, a sparse gradient, a 2-norm away from its kink."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import kinks

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def as_wide(at: kinks.Point) -> kinks.Point:
    """The point's tensors in float64 (exact from float32: they are compared, never differentiated)."""
    args = {k: wide(v) if isinstance(v, torch.Tensor) else v for k, v in at.args.items()}
    return kinks.Point(args, [wide(r) for r in at.results])


def same(held: torch.Tensor, now: torch.Tensor) -> bool:
    """Whether a copy still holds a tensor's values (a sparse one compared as the dense tensor it is)."""
    if held.shape != now.shape or held.layout != now.layout:
        return False
    if now.layout != torch.strided:
        return torch.equal(held.to_dense(), now.detach().to_dense())
    return torch.equal(held, now.detach())


NORMS = ("linalg_vector_norm", "norm")


def smooth_norm(func: Any, args: Any, kwargs: Any) -> bool:
    """A 2-norm of a tensor with no zero element: smooth there (its only kink is where its input is 0)."""
    if func.overloadpacket.__name__ not in NORMS or not args or not isinstance(args[0], torch.Tensor):
        return False
    p = kwargs.get("ord", kwargs.get("p", args[1] if len(args) > 1 and not isinstance(args[1], (list, tuple)) else 2))
    return p in (2, 2.0, None) and bool((args[0] != 0).all())


def in_place(name: str, args: Any) -> bool:
    """Whether an operation writes into its first argument, a float tensor (`clamp_`, `mul_`, `copy_`)."""
    return (
        name.endswith("_")
        and not name.startswith("_")
        and bool(args)
        and isinstance(args[0], torch.Tensor)
        and args[0].is_floating_point()
    )


def copy_of(t: Any) -> Any:
    return t.detach().clone() if isinstance(t, torch.Tensor) else t


def narrow_float(t: Any) -> Any:
    return t.to(torch.float32) if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t


def dense_backward(func: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """An op asked for a sparse gradient (embedding, embedding_bag with sparse=True): the replay's own
    autograd wants dense ones; the forward's values are the same either way."""
    names = [a.name for a in func._schema.arguments]
    if "sparse" not in names:
        return args, kwargs
    at = names.index("sparse")
    if "sparse" in kwargs:
        kwargs = {**kwargs, "sparse": False}
    elif at < len(args):
        args = (*args[:at], False, *args[at + 1 :])
    return args, kwargs


def wide(t: torch.Tensor) -> torch.Tensor:
    """float64 for the float dtypes (complex128 for complex); other dtypes as they are."""
    if t.dtype in _FLOATS:
        return t.to(torch.float64)
    if t.dtype in (torch.complex32, torch.complex64):
        return t.to(torch.complex128)
    return t


def leaves(args: Any, kwargs: Any) -> list[Any]:
    """The arguments of an ATen call, one level of lists opened (a TensorList): all an operator's schema
    nests, and much cheaper than a general tree flatten on every operation of a training loop."""
    out: list[Any] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            out.extend(a)
        else:
            out.append(a)
    return out


def map_args(f: Callable[[Any], Any], args: Any, kwargs: Any) -> tuple[Any, Any]:
    """`f` on every argument, one level of lists opened, the structure kept."""

    def one(a: Any) -> Any:
        return type(a)(f(x) for x in a) if isinstance(a, (list, tuple)) else f(a)

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def watch_numbers(rec: Any) -> Callable[[], None]:
    """While a custom Function's forward runs: tolist(), numpy() and __array__ read a tracked tensor's values
    without a dispatch, as .item() reads them with one; each marks what follows (rec.read_number). The undo."""
    names = ("tolist", "numpy", "__array__")
    own = {n: torch.Tensor.__dict__[n] for n in names if n in torch.Tensor.__dict__}

    def watched(real: Any) -> Any:
        def read(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if rec.custom_depth and not rec.paused and rec.tracks(t):
                rec.read_number = True
            return real(t, *args, **kwargs)

        return read

    for n in names:
        setattr(torch.Tensor, n, watched(getattr(torch.Tensor, n)))

    def undo() -> None:
        for n in names:
            if n in own:
                setattr(torch.Tensor, n, own[n])
            else:
                delattr(torch.Tensor, n)

    return undo


VIEW_WRITE = (
    "a tensor this forward reads was written into through an index or a view with values autograd tracks "
    "(`outs[t] = h`): the log does not follow writes through views, so it would hold that tensor constant; "
    "not checked"
)


def read_after_view_write(refs: list[Any], through_view: dict[int, int]) -> bool:
    """Whether an argument is a copy from outside the log of a tensor read after a write through its view."""
    return any(getattr(r, "made", True) is False and r.key[1] >= through_view.get(r.serial, 2**62) for r in refs)


def differs(y: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether a replayed output is another than `want` (same shape), past the rounding of another order of
    summing; the judge's rule (verdict.py), and the child's where it tells a value changed behind autograd
    (observe_parts.py). Here, not in verdict.py, so that the snippet's process never imports the judge."""
    if not want.is_floating_point():
        return False
    a, b = y.detach().to(torch.float64), want.detach().to(torch.float64)
    eps = torch.finfo(want.dtype).eps
    scale = b.abs() + (b.abs().nan_to_num(0.0, 0.0, 0.0).mean() if b.numel() else 0.0)
    off = ~((a - b).abs() <= 1e-6 + 1e3 * eps * scale) & ~(a.isnan() & b.isnan()) & ~(a == b)
    return bool(off.any())
