"""Agreement of two routes to the same numbers, within a tolerance stated per dtype."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..result import Check, Tolerance
from ..result import element_label as _label
from . import tensors
from .tolerance import TOLERANCES

__all__ = ["TOLERANCES", "compare_tensors", "inconclusive", "skipped"]


def first_argmax(d: Any, lowest: bool = False) -> int:
    """The first index of the largest (or, with lowest, the smallest) element of a finite 1-d tensor, in
    about one pass: the extreme of each block of 512, then the first block and the first element within it
    that hold it (on CPU, torch.argmax and max-with-index run several times slower than amax)."""
    import torch

    arg, ext = (torch.argmin, torch.amin) if lowest else (torch.argmax, torch.amax)
    block = 512
    rows = d.numel() // block
    if rows < 2:
        return int(arg(d))
    head = d[: rows * block].view(rows, block)
    r = int(arg(ext(head, 1)))
    k = r * block + int(arg(head[r]))
    tail = d[rows * block :]
    if tail.numel():
        t = float(ext(tail))
        if (t < float(d[k])) if lowest else (t > float(d[k])):
            k = rows * block + int(arg(tail))
    return k


def first_argmax_abs(d: Any) -> int:
    """The first index of the largest |element| of a finite 1-d tensor: where that is the largest element
    alone, or the smallest alone, without an abs pass."""
    import torch

    lo, hi = (float(x) for x in torch.aminmax(d))
    if hi > -lo:
        return first_argmax(d)
    if -lo > hi:
        return first_argmax(d, lowest=True)
    return first_argmax(d.abs())  # as large on both sides: the first of either


def _absmax(t: Any) -> float:
    """max |t| of a non-empty tensor in one pass (nan if t holds one)."""
    import torch

    lo, hi = (float(x) for x in torch.aminmax(t))
    return max(-lo, hi) if lo == lo else math.nan


def skipped(name: str, compares: str, reason: str) -> Check:
    """A check that did not run, with the reason."""
    return Check(name=name, status="skipped", compares=compares, reason=reason)


def inconclusive(check: Check, why: str) -> Check:
    """A check that ran but could not decide within its budget (never a disagreement), with why."""
    from dataclasses import replace

    return replace(check, status="inconclusive", reason=why)


def compare_tensors(
    name: str,
    compares: str,
    items: Sequence[tuple[str, Any, Any]],
    tol: Tolerance,
    magnitudes: dict[str, Any] | None = None,
    overflow_at: float = math.inf,
    finite: dict[str, Any] | None = None,
    exact: bool = False,
    autodiff: bool = False,
) -> Check:
    """Compare (label, got, reference) tensors elementwise, in float64 chunks; any size.

    An element passes when |got - ref| <= atol + rtol * max(|ref|, m), with m its magnitude from
    `magnitudes` (Σᵢ |v[i]·∂y[i]/∂x[j]|: the size of the terms whose sum it is, so that cancellation
    is allowed for, element by element). Non-finite values: nan in either route, or the same inf in
    both, is "undefined at this point" (0·inf, 0/0, or a convention at a kink), not a disagreement;
    an inf against a finite reference beyond `overflow_at` is a dtype overflow; an inf against
    an ordinary finite number is a disagreement. `finite` (bool, per label) marks references whose
    exact value is finite though they read ±inf (beyond float64): an inf in both there is an overflow.

    With `exact` (the reference is an exact route: sympy, finite differences), only the reference decides
    what is undefined: a nan or ±inf in `got` where the reference is finite (and within the dtype's range)
    is a wrong gradient, listed in `spurious` and a disagreement; a nan or an infinite reference is undefined,
    whatever `got` holds there (the derivative is no real number to be off from). Without `exact` (two autodiff
    routes, `autodiff`), non-finite values in both are listed in `nonfinite`: neither route can say whether they are
    right. `autodiff` says the check is such a pair.
    """
    import torch

    tally = _Tally(tol, exact, overflow_at)
    for leaf, got_t, want_t in items:
        shape = tuple(got_t.shape)
        g_all = got_t.detach().reshape(-1).cpu()
        w_all = want_t.detach().reshape(-1).cpu()
        constant = isinstance(w_all, torch.Tensor) and w_all.numel() == g_all.numel() > 0 and w_all.stride(0) == 0
        if constant and g_all.is_floating_point():
            # a constant reference (a leaf whose derivative is a number: the 3 of 3*a), as a stride-0 view:
            # where every element of got is that finite number, one pass shows there is nothing to weigh
            # (an inf on both sides is undefined or an overflow: the full path reports it)
            lo, hi = (float(x) for x in torch.aminmax(g_all))
            if lo == hi == float(w_all[0]) and math.isfinite(lo):
                continue
        m_t = (magnitudes or {}).get(leaf)
        m_all = m_t.detach().reshape(-1).cpu() if m_t is not None else None
        f_all = f_t.reshape(-1).cpu() if (f_t := (finite or {}).get(leaf)) is not None else None
        # in chunks: a few cache-sized temporaries instead of many array-sized ones. The same dtype on both
        # sides (backward vs the J route): compare in it; float32 against float64 (vs sympy) promotes to float64
        work = g_all.dtype if g_all.dtype == w_all.dtype and g_all.is_floating_point() else torch.float64
        if not g_all.is_floating_point():
            g_all = g_all.to(work)
        for start in range(0, g_all.numel(), tensors.CHUNK):
            end = start + tensors.CHUNK
            chunk = _Chunk(leaf, shape, start, work)
            tally.add(
                chunk,
                g_all[start:end],
                w_all[start:end].to(work),
                None if m_all is None else m_all[start:end],
                None if f_all is None else f_all[start:end],
            )
    return tally.check(name, compares, autodiff)


@dataclass(frozen=True)
class _Chunk:
    """Where a chunk of elements sits: its leaf, the leaf's shape, its first flat index, the dtype compared in."""

    leaf: str
    shape: tuple[int, ...]
    start: int
    work: Any


@dataclass
class _Tally:
    """What compare_tensors has seen so far, over every chunk of every leaf."""

    tol: Tolerance
    exact: bool
    overflow_at: float
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst: str | None = None
    bad: bool = False
    undefined: list[str] = field(default_factory=list)
    overflow: list[str] = field(default_factory=list)
    spurious: list[str] = field(default_factory=list)
    n_undefined: int = 0
    worst_at: tuple[_Chunk, Any] | None = None  # the chunk of the largest difference, and its diff
    # of a disagreement: where |diff| - rtol·scale is largest (the element that breaks the tolerance the most)
    worst_bad: tuple[float, _Chunk, Any] | None = None
    conv: Any = None  # float32 grads are compared in float64: converted, a chunk at a time, into this buffer
    qbuf: Any = None  # and the relative differences of a chunk go into this one

    def add(self, at: _Chunk, g: Any, w: Any, m: Any, f: Any) -> None:
        """One chunk: got g against reference w, with the magnitudes m and the finite marks f (or None)."""
        import torch

        # signed. float32 - float64 would be computed in float64 by a mixed-dtype loop, several times
        # slower than converting into the buffer and subtracting in place
        if g.dtype == at.work or g.shape != w.shape:  # (a reference may broadcast against got)
            d = torch.sub(g, w)
        else:
            if self.conv is None or self.conv.numel() < g.numel():
                self.conv = torch.empty(g.numel(), dtype=at.work)
            d = self.conv[: g.numel()].copy_(g).sub_(w)
        # float reductions only: on CPU a comparison to a bool tensor and .any() cost several times a
        # float pass, and max-with-index several times amax. One aminmax (nan propagates) gives the
        # finite test and the size of the worst element, without an abs pass
        hi = _absmax(d)
        if not math.isfinite(hi):  # (rare) sort out the non-finite elements
            d, w = self._nonfinite(at, g, w, d, f)
            hi = _absmax(d)
        if hi == 0:  # identical chunk (common: the same arithmetic on both sides): nothing to weigh
            return
        if hi > self.max_abs:  # where the worst element is: found once, at the end, in this d
            if self.conv is not None and d.data_ptr() == self.conv.data_ptr():
                self.conv = None  # kept: the next chunk converts into a new buffer
            self.max_abs, self.worst_at = hi, (at, d)
        self._weigh(at, d, w, m)

    def _nonfinite(self, at: _Chunk, g: Any, w: Any, d: Any, f: Any) -> tuple[Any, Any]:
        """Sort the non-finite elements of a chunk into undefined, overflow, spurious and mismatches; the
        finite rest (d and w with 0 elsewhere) is weighed as usual."""
        import torch

        ok = torch.isfinite(g) & torch.isfinite(w)
        if self.exact:  # only the exact value says what is undefined: where it is itself nan or ±inf (1/x or
            # log at 0), whatever autodiff gives (inf, nan, or a finite number by convention: BCE clamps its log)
            und = ~ok & ~torch.isfinite(w)
        else:
            und = ~ok & (torch.isnan(g) | torch.isnan(w) | (g == w))
        over = ~ok & ~und & torch.isinf(g) & (w.abs() > self.overflow_at)
        if f is not None:  # the same inf where the exact value is finite: both overflowed
            both = und & f & torch.isinf(g) & (g == w)
            und, over = und & ~both, over | both
        mismatch = ~ok & ~und & ~over

        def label(k: Any) -> str:
            return _label(at.leaf, at.shape, int(k) + at.start)

        if self.exact:
            wrong = mismatch & torch.isfinite(w) & ~torch.isfinite(g)
            self.spurious += [label(k) for k in wrong.nonzero().reshape(-1)[:20]]
        if bool(mismatch.any()):
            self.bad = True
            if self.max_abs != math.inf:
                self.max_abs, self.worst = math.inf, label(mismatch.nonzero()[0])
        k_und = und.nonzero().reshape(-1)
        self.n_undefined += int(k_und.numel())
        self.undefined += [label(k) for k in k_und[: max(0, 20 - len(self.undefined))]]
        self.overflow += [label(k) for k in over.nonzero().reshape(-1)[:20]]
        return torch.where(ok, d, 0.0), torch.where(ok, w, 0.0)

    def _weigh(self, at: _Chunk, d: Any, w: Any, m: Any) -> None:
        """The relative differences of a chunk, and each element against its tolerance where needed."""
        import torch

        tol = self.tol
        # signed relative differences; a zero reference gives nan (0/0) or ±inf
        if self.qbuf is None or self.qbuf.numel() < d.numel() or self.qbuf.dtype != d.dtype:
            self.qbuf = torch.empty(d.numel(), dtype=d.dtype)
        q = torch.div(d, w, out=self.qbuf[: d.numel()])
        rel = _absmax(q)
        if rel != rel:  # 0/0 where a reference and its difference are both 0 (zero grads): counts as 0
            rel = _absmax(q.nan_to_num_(0.0, math.inf, -math.inf))
        if rel <= tol.rtol:
            # every element within rtol of its reference (no zero reference with d > 0): within the
            # tolerance, whose scale is never below |reference|. The common case: no second pass.
            self.max_rel = max(self.max_rel, rel)
            return
        # some element is off by more than rtol, or has a zero reference: weigh each one. Relative to
        # nonzero references only (0/0 counts as 0)
        wabs = w.abs()  # not in place: .to() of a tensor already in that dtype is the tensor itself
        q.abs_()
        self.max_rel = max(self.max_rel, float(torch.where(wabs != 0, q, 0.0).amax()))
        d = d.abs()
        scale = wabs
        if m is not None:
            scale = torch.maximum(wabs, m.to(at.work).nan_to_num(0.0, 0.0, 0.0))
        # d > atol + rtol * scale somewhere, as one fused pass and a float reduction
        excess = float(torch.add(d, scale, alpha=-tol.rtol, out=q).amax())
        if excess > tol.atol:
            self.bad = True
            if self.worst_bad is None or excess > self.worst_bad[0]:
                self.worst_bad = (excess, at, q)
                self.qbuf = None  # kept: the next chunk divides into a new buffer

    def check(self, name: str, compares: str, autodiff: bool) -> Check:
        """The verdict, naming the element that fails the most (or the largest difference)."""
        worst = self.worst
        if worst is None and self.worst_bad is not None:  # a disagreement: name an element that fails
            _, at, q = self.worst_bad
            worst = _label(at.leaf, at.shape, at.start + first_argmax(q.nan_to_num(-math.inf)))
        if worst is None and self.worst_at is not None:  # else the largest difference
            at, d = self.worst_at
            worst = _label(at.leaf, at.shape, at.start + first_argmax_abs(d))
        undefined = list(self.undefined)
        if self.n_undefined > len(undefined):
            undefined.append(f"... {self.n_undefined - len(undefined)} more")
        return Check(
            name=name,
            status="disagree" if self.bad else "agree",
            compares=compares,
            max_abs_diff=self.max_abs,
            max_rel_diff=self.max_rel,
            tolerance=self.tol,
            undefined=() if autodiff else tuple(undefined),
            nonfinite=tuple(undefined) if autodiff else (),
            overflow=tuple(self.overflow[:20]),
            spurious=tuple(self.spurious[:20]),
            worst=worst,
        )
