"""The checks of one call from its record, as the judge makes them (judge.py runs this, confined).

The recorded forward is rebuilt from data (oplog.rebuild: torch's own operators only) and replayed in
float64 with no mode or patch of the snippet's; its Jacobian and its finite differences are compared with
the grads the call gave (checks.py). Where the record contradicts itself (the replay does not give the
recorded output; an input got a gradient the log never reads) the call is `unverified`, with why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ..engine.finite_diff import finite_differences_of
from ..engine.tolerance import roundoff_as_size, tolerance
from ..events import Event, LeafGrad
from ..verdicts import Check
from . import checks, oplog, payload
from .record import NotReplayable
from .record_parts import differs


def verdict(event: dict[str, Any]) -> dict[str, Any]:
    """The checks of one call from its record, and the arrays the view shows beside its grads."""
    view, reference, unverified = judged(event)
    payload.fit(view, used=payload.numbers(event))  # with the child's arrays, within one budget
    return {
        "call": event["index"],
        "checks": [_plain_check(c) for c in view.checks],
        "jtv": [x.jtv for x in view.inputs],
        "jacobian": [x.jacobian for x in view.inputs],
        "finite_difference": [x.finite_difference for x in view.inputs],
        "omitted": [x.omitted for x in view.inputs],
        "reference": reference,
        "notes": view.notes,
        "unverified": unverified,
    }


def judged(event: dict[str, Any]) -> tuple[Event, list[Any], str | None]:
    """The judge on one call's record (the event's "index", "line", "call" and "record"): the view of the
    call with the checks and the arrays beside each input, the reference of a Ju, and why the call is
    unverified (None where it is not). Every door's call goes through here: a snippet's in the judge's own
    process, `vjp check`'s in this one (trusted_judge.py)."""
    record = event["record"]
    out: dict[str, Any] = {"reference": []}
    unverified = None
    view = _event(event)
    try:
        _judge(view, record, out)
    except _Unverified as e:
        unverified = str(e)
        view.checks = [Check("finite_difference", "skipped", checks.FD, reason=f"unverified: {e}")]
    except Exception as e:  # noqa: BLE001 - the judge's own failure is a skipped check, said so
        why = f"the check itself failed ({type(e).__name__}: {str(e)[:200]})"
        view.checks = [Check("finite_difference", "skipped", checks.FD, reason=why)]
    return view, out["reference"], unverified


class _Unverified(Exception):
    """The record contradicts itself: no check of it means anything."""


def _judge(event: Event, record: dict[str, Any], out: dict[str, Any]) -> None:
    if record["forward"] is None:
        if record["unreplayable"]:  # "": nothing to check (no input, or a v torch refused), so no check at all
            event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=record["unreplayable"]))
        return
    try:
        replay = oplog.rebuild(record["forward"])
    except oplog.Foreign as e:
        why = (
            f"the forward runs {e}, an operator the snippet registered: the judge replays torch's own "
            "operators only, never the snippet's code"
        )
        event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=why))
        return
    except oplog.OverBudget as e:
        event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=str(e)))
        return
    except NotReplayable as e:
        raise _Unverified(f"the recorded forward is not a forward ({e})") from None
    at = [oplog.tensor(a) for a in record["at"]]
    leaves = [torch.empty(0, dtype=a.dtype).new_zeros(a.shape) for a in at]  # dtype and shape, for the tolerances
    got = [None if g is None else oplog.tensor(g) for g in record["grads"]]
    before = [None if b is None else oplog.tensor(b) for b in record["before"]]
    vs = [oplog.tensor(v) for v in record["v"]]
    outputs = [oplog.tensor(o) for o in record["outputs"]]
    if any(t.is_complex() for t in [*at, *outputs]):
        why = "complex tensors: the references here are real; torch's conjugate convention is not checked"
        event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=why))
        return
    x0 = replay.leaf_values()
    read = replay.reads()
    for k, x in enumerate(x0):
        if x is not None:
            continue
        unread = replay.leaves[k] not in read and replay.leaves[k] not in {o[0] for o in replay.outs}
        if unread and got[k] is not None and bool(got[k].ne(0).any()):
            raise _Unverified(f"{record['names'][k]} got a gradient, yet the recorded forward never read it")
        x0[k] = at[k].to(torch.float64) if at[k].is_floating_point() else at[k]
    try:
        reproduces(replay, x0, leaves, outputs)
    except NotReplayable as e:
        raise _Unverified(str(e)) from None
    try:
        replay.hold(x0, [leaf.dtype for leaf in leaves])  # relu, max, sort...: differentiated at the point
    except (NotReplayable, RuntimeError) as e:
        why = str(e) if isinstance(e, NotReplayable) else f"the replay failed ({str(e).splitlines()[0][:200]})"
        event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=why))
        return
    if record["tangent"] is not None:  # Ju by forward mode: central differences of the replay along u
        us = [oplog.tensor(u) for u in record["tangent"]["u"]]
        results = [oplog.tensor(r) for r in record["tangent"]["result"]]
        names = [f"jvp[{k}]" if len(results) > 1 else "jvp" for k in range(len(results))]  # as the results
        check, out["reference"] = checks.tangent(replay, x0, us, results, names)
        return event.checks.append(check)
    if record["second"] is not None:  # a second derivative: second differences of the replay
        second = oplog.tensor(record["second"]["result"])
        z, joined = checks.joined(replay, x0)
        dtype = max((x.dtype for x in leaves), key=lambda d: torch.finfo(d).eps if d.is_floating_point else 0.0)
        return event.checks.append(checks.second(joined, z, dtype, second, event.line))
    cheap = record["cheap"]
    v = torch.cat([x.reshape(-1).to(torch.float64) for x in vs]) if vs else torch.zeros(0, dtype=torch.float64)
    try:
        jac = checks.jacobian(replay, x0) if v.numel() <= record["jacobian_rows"] and not cheap else None
        fd = finite_differences_of(checks.flat(replay), x0, v, 1 if cheap else checks.FD_EVALS)
    except (NotReplayable, RuntimeError) as e:
        why = str(e) if isinstance(e, NotReplayable) else f"the replay failed ({str(e).splitlines()[0][:200]})"
        event.checks.append(Check("finite_difference", "skipped", checks.FD, reason=why))
        return
    terms = None if cheap else checks.term_sizes_of(replay, x0, v)
    wide = checks.vjp_of(replay, x0, v)  # Jᵀv of the replay in float64: the rounding's baseline, and jtv past J
    rounding = checks.forward_rounding(replay, x0, leaves, v, wide)
    # a custom backward rounds by its own formula, not autograd's: against autograd's Jᵀv, that rounding
    # counts leaf-wide (the differences keep it per element, beside their own error)
    leafwide = [r.max().expand_as(r) if r.numel() else r for r in rounding] if record["customs"] else rounding
    g64 = [
        torch.zeros(x.numel(), dtype=torch.float64) if g is None else g.reshape(-1).to(torch.float64)
        for x, g in zip(leaves, got, strict=True)
    ]
    before_sizes = [None if b is None else b.reshape(-1).abs().to(torch.float64) for b in before]
    sizes = [Jk.abs().T @ v.abs() for Jk in jac] if jac is not None else None
    if terms is not None:  # the size of what backward added up: its rounding is at that size
        sizes = terms if sizes is None else [torch.maximum(a, b) for a, b in zip(sizes, terms, strict=True)]
    sizes, prior = _as_roundoff(sizes, leaves), _as_roundoff(before_sizes, leaves)
    first = _jtv(event, wide, v, jac, leaves, g64, sizes, prior, leafwide, cheap)
    check = _finite_differences(event, fd, leaves, g64, sizes, prior, rounding)
    if check.status == "disagree" and (sym := _symmetric(replay, x0)):  # cholesky of a symmetric leaf: its convention
        check = _along_symmetric(event, replay, x0, v, sym, (leaves, g64, sizes, prior, rounding), check, cheap)
    if "disagree" in (first.status, check.status) and replay.points and not cheap:  # a branch was held
        first, check = _at_kinks(event, record["forward"], x0, v, jac, wide, (leaves, g64, sizes, prior, rounding)) or (
            first,
            check,
        )
    event.checks.append(first)
    if replay.narrowed:  # finite differences of a float32 op are at its rounding's scale: no evidence
        why = (
            f"{', '.join(replay.narrowed)} has no float64 kernel (LSTM's on CPU): the replay runs it in float32, "
            "too coarse for finite differences; the jtv check used it"
        )
        check = Check("finite_difference", "skipped", checks.FD, reason=why)
    if check.status == "disagree" and (design := _by_design(replay)):  # torch's gradient is not the derivative
        check = Check("finite_difference", "skipped", checks.FD, reason=f"{design}; {check.reason}")
    event.checks.append(checks.unheld_kinks(check, replay.unheld()))


def _as_roundoff(sizes: list[Any] | None, leaves: list[torch.Tensor]) -> list[Any] | None:
    """The size of the terms a grad element sums (Σ|v·J|, backward's own terms, the .grad it accumulated
    onto), allowed ROUNDOFF_UNITS units of roundoff of it, not rtol of it: rtol (840 units in float32) let a
    custom backward 10x wrong pass where v·J's terms cancel by 1e5 (W ≈ 1000, v = [1, −1]). How far the
    forward's own rounding moves a grad is measured (checks.forward_rounding) and allowed beside it. Never more
    than rtol of it: float16's and bfloat16's rtol are 10 and 6 units of their roundoff."""
    if sizes is None:
        return None
    return [
        None if s is None else torch.minimum(s, roundoff_as_size(s, leaf.dtype, tolerance(leaf.dtype)))
        for s, leaf in zip(sizes, leaves, strict=True)
    ]


def _by_design(replay: Any) -> str | None:
    """Why torch's gradient of this forward is, by its documented design, not the derivative the differences
    measure (an embedding's padding row gets none; scale_grad_by_freq divides each row by its count); None."""
    for e in replay.entries:
        if e.func.overloadpacket.__name__ not in ("embedding", "_embedding_bag", "embedding_bag"):
            continue
        names = [a.name for a in e.func._schema.arguments]
        given = {**dict(zip(names, e.args, strict=False)), **e.kwargs}
        if given.get("padding_idx") not in (None, -1):
            return (
                "an embedding with padding_idx: torch gives its padding row no gradient by design, though the "
                "output depends on it, so finite differences of the forward are not the reference there"
            )
        if given.get("scale_grad_by_freq"):
            return (
                "an embedding with scale_grad_by_freq=True: torch divides each row's gradient by how often the "
                "batch uses it, by design, so finite differences of the forward are not the reference"
            )
    return None


# operations that read a symmetric matrix from one triangle: torch's gradient of their input is symmetric
_SYMMETRIC = ("linalg_cholesky_ex", "cholesky", "_linalg_eigh", "linalg_eigh", "linalg_eigvalsh")


def _symmetric(replay: Any, x0: list[torch.Tensor]) -> list[int]:
    """The inputs that are symmetric matrices and reach an operation that reads one triangle."""
    made = {k: e for e in replay.entries for k in e.outs}
    todo = [r for e in replay.entries if e.func.overloadpacket.__name__ in _SYMMETRIC for r in oplog.refs_of(e)]
    reached: set[int] = set()
    while todo:  # back from those operations' inputs to the leaves they come from
        r = todo.pop()
        if r.serial in reached:
            continue
        reached.add(r.serial)
        if r.made and tuple(r.key[:2]) in made:
            todo.extend(oplog.refs_of(made[tuple(r.key[:2])]))
    return [
        k
        for k, x in enumerate(x0)
        if replay.leaves[k] in reached
        and x.dim() >= 2
        and x.shape[-1] == x.shape[-2] > 1
        and torch.equal(x, x.transpose(-1, -2))
    ]


def _along_symmetric(
    event: Event,
    replay: Any,
    x0: list[torch.Tensor],
    v: torch.Tensor,
    sym: list[int],
    at: tuple[Any, ...],
    was: Check,
    cheap: bool,
) -> Check:
    """The differences along symmetric perturbations of the symmetric inputs (S + h·(E + Eᵀ)/2), the convention
    torch's gradient follows for cholesky and eigh: where the grads agree with those, the check says so;
    else the first check stands."""

    def f(*xs: torch.Tensor) -> torch.Tensor:
        return checks.flat(replay)(*[(x + x.transpose(-1, -2)) / 2 if k in sym else x for k, x in enumerate(xs)])

    try:
        fd = finite_differences_of(f, x0, v, 1 if cheap else checks.FD_EVALS)
    except (NotReplayable, RuntimeError):
        return was
    shown = [x.finite_difference for x in event.inputs]
    check = _finite_differences(event, fd, *at)
    if check.status == "disagree":
        for x, values in zip(event.inputs, shown, strict=True):
            x.finite_difference = values
        return was
    names = ", ".join(event.inputs[k].name for k in sym)
    ops = sorted({e.func.overloadpacket.__name__ for e in replay.entries} & set(_SYMMETRIC))
    why = (
        f"{names} is symmetric and reaches {', '.join(ops)}, "
        "which reads one triangle: torch's gradient is the symmetric one (each off-diagonal pair shares the "
        "derivative), so the differences are taken along symmetric perturbations"
    )
    return replace(check, reason=f"{why}; {check.reason}" if check.reason else why)


def _at_kinks(
    event: Event,
    forward: dict[str, Any],
    x0: list[torch.Tensor],
    v: torch.Tensor,
    jac: list[torch.Tensor] | None,
    wide: list[torch.Tensor] | str,
    at: tuple[Any, ...],
) -> tuple[Check, Check] | None:
    """Where the grads differ from the replay held on the branches the point took only at elements that sit
    on a kink (relu, clamp at the bound, abs at 0), and there lie between the one-sided derivatives: the
    gradient there is a convention (a custom backward's `g * (x > 0)` at 0 is as right as torch's clamp, which
    passes 1). The differences of the forward as it is (no branch held) find the kinks; both checks again
    with those elements left out, named. None otherwise: the first checks stand."""
    from ..engine.finite_diff import KINK

    try:
        f = checks.flat(oplog.rebuild(forward))
        fd = finite_differences_of(f, x0, v, checks.FD_EVALS)
    except (NotReplayable, RuntimeError, oplog.Foreign, oplog.OverBudget):
        return None
    if fd.method != "full":
        return None
    kinks = [{j for j, c in fd.causes.get(f"x{k}", {}).items() if c == KINK} for k in range(len(x0))]
    masks = [fd.left_out[f"x{k}"].reshape(-1) for k in range(len(x0))]
    if not any(kinks) or any(int(m.sum()) != len(j) for m, j in zip(masks, kinks, strict=True)):
        return None  # nothing on a kink, or other elements with no reference (a domain's edge): not this case
    leaves, g64, sizes, prior, rounding = at
    if not _between_sides(f, x0, v, g64, kinks):
        return None
    shown = [(x.jtv, x.finite_difference) for x in event.inputs]
    jtv = _jtv(event, wide, v, jac, leaves, g64, sizes, prior, rounding, False, masks)
    check = _finite_differences(event, fd, *at)
    if "disagree" in (jtv.status, check.status):
        for x, (a, b) in zip(event.inputs, shown, strict=True):
            x.jtv, x.finite_difference = a, b
        return None
    return checks.left_out(event, jtv, fd), check


def _between_sides(f: Any, x0: list[torch.Tensor], v: torch.Tensor, got: list[torch.Tensor], kinks: list[Any]) -> bool:
    """Whether each grad element on a kink lies between the one-sided derivatives of v·f there (a
    subgradient's range: [3, 4] for relu(x) + 3x at 0), at most 200 of them."""
    if sum(len(j) for j in kinks) > 200:
        return False

    def g(xs: list[torch.Tensor]) -> float:
        with torch.no_grad():
            return float((f(*xs).reshape(-1) * v).sum())

    base = g(x0)
    for k, elements in enumerate(kinks):
        for j in elements:
            h = 1e-7 * max(1.0, abs(float(x0[k].reshape(-1)[j])))
            sides = []
            for sign in (1.0, -1.0):
                xs = [x.clone() for x in x0]
                xs[k].view(-1)[j] += sign * h
                sides.append(sign * (g(xs) - base) / h)
            low, high = min(sides), max(sides)
            room = 1e-4 * max(1.0, abs(low), abs(high))
            value = float(got[k][j])
            if not low - room <= value <= high + room:
                return False
    return True


def _jtv(
    event: Event,
    wide: list[torch.Tensor] | str,
    v: torch.Tensor,
    jac: list[torch.Tensor] | None,
    leaves: list[torch.Tensor],
    g64: list[torch.Tensor],
    sizes: Any,
    prior: Any,
    rounding: Any,
    cheap: bool,
    masks: list[torch.Tensor] | None = None,
) -> Check:
    """The grads against Jᵀv by autograd of the replay: from J where it was built, else one vjp of the replay
    (any number of rows); a folded call gets the finite differences alone. `masks`: elements left out."""
    if cheap:
        return Check(
            "jtv", "skipped", checks.JTV, reason="a folded call: finite differences along random directions only"
        )
    refs = [Jk.T @ v for Jk in jac] if jac is not None else wide
    if isinstance(refs, str):
        return Check("jtv", "skipped", checks.JTV_VJP, reason=refs)
    for k, ref in enumerate(refs):
        event.inputs[k].jtv = ref.reshape(leaves[k].shape).tolist()
        if jac is not None:
            event.inputs[k].jacobian = jac[k].tolist()
    masks = masks or [torch.zeros(r.shape, dtype=torch.bool) for r in refs]
    compares = checks.JTV if jac is not None else checks.JTV_VJP
    return checks.compare("jtv", compares, event, leaves, g64, refs, list(rounding or []), masks, sizes, prior)


def _finite_differences(
    event: Event, fd: Any, leaves: list[torch.Tensor], g64: list[torch.Tensor], sizes: Any, prior: Any, rounding: Any
) -> Check:
    """The grads against the differences: element by element where every column was built, else along the
    random directions."""
    if fd.method == "full":
        refs = [fd.jtv[f"x{k}"].reshape(-1) for k in range(len(leaves))]
        for k, ref in enumerate(refs):
            shown = ref.clone()
            shown[fd.left_out[f"x{k}"].reshape(-1)] = float("nan")
            event.inputs[k].finite_difference = shown.reshape(leaves[k].shape).tolist()
        errs = [fd.error[f"x{k}"].reshape(-1) + (rounding[k] if rounding else 0) for k in range(len(leaves))]
        masks = [fd.left_out[f"x{k}"].reshape(-1) for k in range(len(leaves))]
        return checks.left_out(
            event,
            checks.compare("finite_difference", checks.FD, event, leaves, g64, refs, errs, masks, sizes, prior),
            fd,
        )
    return checks.directions(fd, leaves, g64, rounding)


def reproduces(replay: Any, x0: list[torch.Tensor], leaves: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    """The replay in the forward's own dtypes, at the point, gives the outputs the call began with (within
    rounding: another process may sum in another order, on other threads: batch norm's float32 variance at
    an offset of 1e3 by 5%, so each of the snippet's thread counts is tried); NotReplayable naming the first
    output that does not, on the judge's own thread count."""
    native = replay.in_native_dtypes()
    xs = [x.to(leaf.dtype) if x.is_floating_point() else x for x, leaf in zip(x0, leaves, strict=True)]
    first = None
    for n in checks.thread_counts():
        try:
            with checks.on_threads(n), torch.no_grad():
                ys = native(*xs)
        except (NotReplayable, RuntimeError, NotImplementedError):
            return  # an op with no kernel here in that dtype (a GPU's half precision on the CPU): nothing to compare
        why = _mismatch(ys, outputs)
        if why is None:
            return
        first = first or why
    raise NotReplayable(first)


def _mismatch(ys: list[torch.Tensor], outputs: list[torch.Tensor]) -> str | None:
    """How the replayed outputs `ys` are not the recorded ones, or None where they are."""
    if len(ys) != len(outputs):
        return f"the replayed forward gives {len(ys)} outputs, the record {len(outputs)}"
    for k, (y, want) in enumerate(zip(ys, outputs, strict=True)):
        if tuple(y.shape) != tuple(want.shape):
            return f"the replayed forward gives output {k} of shape {list(y.shape)}, not {list(want.shape)}"
        if differs(y, want):
            a, b = y.detach().to(torch.float64), want.to(torch.float64)
            return (
                f"the replayed forward does not reproduce the recorded output {k} "
                f"(max |Δ| = {float((a - b).abs().nan_to_num(0.0).max()):.3g})"
            )
    return None


def _event(event: dict[str, Any]) -> Event:
    """The view of the call the checks word their elements with (names and shapes only)."""
    record = event["record"]
    inputs = [
        LeafGrad(name, list(a["shape"]), a["dtype"], None, None, None, None)
        for name, a in zip(record["names"], record["at"], strict=True)
    ]
    return Event(event["index"], event["line"], "", event["call"], [], [], "", False, False, inputs)


def _plain_check(c: Check) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(c)
    d["tolerance"] = None if c.tolerance is None else str(c.tolerance)
    for name in ("undefined", "overflow", "spurious", "nonfinite"):
        d[name] = list(d[name])
    return d
