"""The record of a functional call for the judge: a first derivative by reverse mode (a vjp, a grad) or J
itself (jacobian, jacrev, jacfwd), which the judge checks out of the snippet's reach as it checks a backward
call (confined/judging.JUDGED). Called from functional.py while it makes the call's event.

The snippet's function runs once more at the call's inputs, recorded (quietly, its state put back as its
finite differences always did), and goes with v, the inputs and the call's result as a record
(observe.Observer._record's fields). J goes as Jᵀv for a random v, seeded by the call's line.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import torch

from .functional_state import untouched


def judged(
    observer: Any,
    event: Any,
    func: Any,
    xs: list[torch.Tensor],
    vs: list[Any] | None,
    got: list[torch.Tensor],
    whole: bool,
    skip: str,
    cheap: bool,
    owner: Any,
    second: torch.Tensor | None = None,
    tangent: tuple[list[Any], list[torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """The record of a first derivative by reverse mode (Jᵀv: a vjp, a grad) for the judge, which checks it
    out of the snippet's reach as it checks a backward call: the function's forward recorded once more at the
    call's inputs (run quietly, the state of `owner`, the snippet's own function, put back), v, the inputs
    and the call's result as the grads. The parent takes this call's checks from the judge only
    (judging.JUDGED). `skip`: why the call is not checked (functional._SKIP); `cheap`: past the calls
    explained in full. `func` None: a derivative of a derivative, which the
    judge has no reference for yet (calls.CHECKED_IN_CHILD). `whole`: the result is J itself (jacobian,
    jacrev, jacfwd), which goes to the judge as Jᵀv for a random v (seeded by the call's line): a wrong entry
    of J shows in it but for a set of v of measure zero. `second`: the call's result is ∂²f/∂x² of a
    one-number `func` of its one input (a hessian, jacrev(jacrev(f)), grad(grad(f))), which the judge checks
    by second differences of the recorded forward; of several inputs, the blocks joined (`joined_hessian`);
    `got` is then empty. `tangent`: the call's result is Ju by
    forward mode (a jvp), given as (u per input, Ju per output), which the judge checks by central
    differences of the recorded forward along u; `vs` and `got` are then empty."""
    from ..calls import CHECKED_IN_CHILD

    if func is None:
        return _without(observer, cheap, CHECKED_IN_CHILD)
    if skip:
        return _without(observer, cheap, skip)
    try:
        return _recorded(observer, event, func, xs, vs, got, whole, cheap, owner, second, tangent)
    except Exception as e:  # noqa: BLE001 - the log's own failure: the check is skipped, saying why
        return _without(observer, cheap, _failed(e))


def _without(observer: Any, cheap: bool, why: str) -> dict[str, Any]:
    """A record with no forward, and why (a check the judge then skips, saying so)."""
    empty: dict[str, Any] = {"outputs": [], "v": [], "at": [], "grads": [], "before": [], "names": []}
    more = {"cheap": cheap, "jacobian_rows": observer.jacobian_rows, "hook": None, "customs": []}
    return {"forward": None, "unreplayable": why, **empty, **more, "second": None, "tangent": None}


def _failed(e: Exception) -> str:
    """Why recording failed, in one line."""
    why = str(e) if type(e).__name__ == "NotReplayable" else f"the recorded forward could not be written down ({e})"
    return why.splitlines()[0][:300] if why else "the function could not be recorded"


def _recorded(
    observer: Any,
    event: Any,
    func: Any,
    xs: list[torch.Tensor],
    vs: list[Any] | None,
    got: list[torch.Tensor],
    whole: bool,
    cheap: bool,
    owner: Any,
    second: torch.Tensor | None,
    tangent: tuple[list[Any], list[torch.Tensor]] | None,
) -> dict[str, Any]:
    from .nonfinite import custom_functions
    from .observe_record import forward_of
    from .record import NotReplayable

    grads: list[torch.Tensor | None] = list(got)
    if second is not None or tangent is not None:
        grads = [None] * len(xs)  # no Jᵀv: the judge checks the second derivative, or Ju
    if tangent is not None:
        us = _tangents(tangent[0], xs)
    elif second is None and (
        len(got) != len(xs) or not whole and any(g.shape != x.shape for g, x in zip(got, xs, strict=True))
    ):
        raise NotReplayable("the call's result does not have its inputs' shapes")
    leaves = [x.detach().clone().requires_grad_(True) for x in xs]
    rec = observer.recorder
    was_on = rec.on
    observer.depth += 1  # the function's own autograd calls are not events
    try:
        with untouched(owner), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if observer.rng_before is not None:  # the draws the call made (dropout's mask), made again
                torch.set_rng_state(observer.rng_before)
            rec.switch(True)
            # forward mode carries tangents through torch.no_grad(); autograd.functional.jvp's Ju is reverse
            # mode's (the double-backward trick), which no_grad cuts
            forward = tangent is not None and event.call != "torch.autograd.functional.jvp"
            rec.through_no_grad += forward
            try:
                with torch.enable_grad():
                    out = func(*leaves)
            finally:
                rec.through_no_grad -= forward
            rec.switch(was_on)
        outs = _outputs(out, tangent is not None)
        if why := _constant(rec, outs):
            raise NotReplayable(why)
        out = outs[0]
        if second is not None and out.dim() != 0:
            raise NotReplayable("a second derivative of a function of more than one number")
        v = [out.new_ones(())] if vs is None else [t.detach() for t in vs]
        if tangent is not None:
            v = []
            if [tuple(r.shape) for r in tangent[1]] != [tuple(o.shape) for o in outs]:
                raise NotReplayable("the call's Ju does not have the function's output shapes")
        elif whole:
            v, contracted = _contracted(out, xs, got, event.line)
            grads = list(contracted)
            event.notes.append(
                "The judge checks J through Jᵀv for a random v (seeded by the line): a wrong entry of J shows there."
            )
        if tangent is None and (len(v) != 1 or not isinstance(v[0], torch.Tensor) or v[0].shape != out.shape):
            raise NotReplayable("v does not have the output's shape")
        forward = forward_of(observer, event, outs, leaves, grads)
        customs = custom_functions(outs)
    finally:
        observer.depth -= 1
        rec.switch(was_on)
        with contextlib.suppress(Exception):
            rec.forget(rec.slice_for(outs, leaves))
    tangents = None if tangent is None else (us, tangent[1])
    return _record(observer, forward, xs, xs, v, grads, customs, cheap, second, tangents)


def _record(
    observer: Any,
    forward: dict[str, Any],
    at: list[torch.Tensor],
    named: list[torch.Tensor],
    v: list[torch.Tensor],
    grads: list[torch.Tensor | None],
    customs: Any,
    cheap: bool,
    second: torch.Tensor | None = None,
    tangent: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """The record the judge reads (calls.RECORD) of a forward observe_record.forward_of wrote: its outputs
    as made, v, the inputs' values (`at`) and names (those of the snippet's tensors `named`), the grads
    (None: no gradient), and a second derivative's result or a derivative along tangents' (u per input, Ju
    per output)."""
    from . import checks, oplog

    made = forward.pop("made")
    with checks.outside_the_log(), torch._C.DisableTorchFunction():
        return {
            "forward": forward,
            "unreplayable": None,
            "outputs": [oplog.array(m) for m in made],
            "v": [oplog.array(t) for t in v],
            "at": [oplog.array(x.detach()) for x in at],
            "grads": [None if g is None else oplog.array(g.detach()) for g in grads],
            "before": [None for _ in at],
            "names": [observer.name_of(x) for x in named],
            "cheap": cheap,
            "jacobian_rows": observer.jacobian_rows,
            "hook": None,
            "customs": list(customs),
            "second": None if second is None else {"result": oplog.array(second.detach())},
            "tangent": None
            if tangent is None
            else {
                "u": [oplog.array(u.detach()) for u in tangent[0]],
                "result": [oplog.array(r.detach()) for r in tangent[1]],
            },
        }


def joined_hessian(xs: list[torch.Tensor], blocks: list[torch.Tensor]) -> torch.Tensor | None:
    """The blocks ∂²f/∂x_a∂x_b of a hessian of several inputs (a-major, each shaped (*x_a.shape, *x_b.shape))
    as one N × N matrix over the inputs' elements joined in order; None where they are not that."""
    k = len(xs)
    if k < 2 or len(blocks) != k * k:
        return None
    rows = []
    for a, xa in enumerate(xs):
        row = []
        for b, xb in enumerate(xs):
            h = blocks[a * k + b]
            if tuple(h.shape) != (*xa.shape, *xb.shape):
                return None
            row.append(h.detach().reshape(xa.numel(), xb.numel()).to(torch.float64))
        rows.append(torch.cat(row, dim=1))
    return torch.cat(rows, dim=0)


def _constant(rec: Any, outs: list[torch.Tensor]) -> str:
    """Why no output depends on the inputs (each made without reading them, or an integer), or ""."""
    from .record import key

    if any(o.requires_grad or key(o) in rec.made for o in outs):
        return ""
    if not any(o.is_floating_point() or o.is_complex() for o in outs):
        return "the function's output is an integer tensor: it has no derivative (torch gives zeros), nothing to check"
    return (
        "the function's output does not depend on its inputs (it is made without reading them): its "
        "derivative is 0, with nothing to difference"
    )


def _contracted(
    out: torch.Tensor, xs: list[torch.Tensor], blocks: list[torch.Tensor], line: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """J's blocks (shape: the output's, then the input's) as Jᵀv for a random v: ([v], one Jᵀv per input)."""
    from .record import NotReplayable

    for J, x in zip(blocks, xs, strict=True):
        if tuple(J.shape) != (*out.shape, *x.shape):
            raise NotReplayable("the call's J does not have the output's and the inputs' shapes")
    gen = torch.Generator().manual_seed(line)  # not the snippet's generator: its random state is its own
    v = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.dtype)  # as the record carries it
    v64 = v.to(torch.float64)
    jtv = [
        torch.tensordot(v64, J.detach().to(torch.float64), dims=out.dim()).to(x.dtype)
        for J, x in zip(blocks, xs, strict=True)
    ]
    return [v], jtv


MAX_BATCH_J = 1_000_000  # entries of vmap(jacrev(f))'s block-diagonal J a record is made from, at most


def vmap_record(
    observer: Any,
    event: Any,
    plain: bool,
    spec: Any,
    dims: tuple[Any, ...],
    xs: tuple[Any, ...],
    kw: Any,
    nums: tuple[int, ...],
    got: list[torch.Tensor],
    skip: str,
    cheap: bool,
) -> dict[str, Any]:
    """The record of vmap(grad(f)), vmap(jacrev(f)) or vmap(jacfwd(f)) (`spec`: the transform's function,
    kind and has_aux; `plain`: f is no derivative itself) in one batched argument xs[nums[0]]: the samples'
    forwards as one function of the whole batch, summed for grad, stacked for J (whose J is then
    block-diagonal), so that its Jᵀv is the call's per-sample results. Any other form (a derivative of a
    derivative, several arguments, one not batched along dimension 0, a hessian) is checked in the child
    still (calls.CHECKED_IN_CHILD)."""
    import math

    a, func = nums[0], spec.func
    x = xs[a]
    first = plain and spec.kind in ("grad", "jacrev", "jacfwd") and len(nums) == 1 and len(got) == 1
    if not first or dims[a] != 0 or not isinstance(x, torch.Tensor):
        return judged(observer, event, None, [], None, [], False, skip, cheap, None)
    size = x.shape[0]

    def sample(b: int, xb: torch.Tensor) -> Any:
        args = [t[b] if d == 0 else t for t, d in zip(xs, dims, strict=True)]
        args[a] = xb
        out = func(*args, **kw)
        return out[0] if spec.has_aux else out

    def stacked(X: torch.Tensor) -> torch.Tensor:
        return torch.stack([sample(b, X[b]) for b in range(size)])

    if spec.kind == "grad":
        return judged(observer, event, lambda X: stacked(X).sum(), [x], None, got, False, skip, cheap, func)
    inner = tuple(got[0].shape[1 : got[0].dim() - x.dim() + 1])  # one sample's output shape
    if size * size * math.prod(inner) * math.prod(x.shape[1:]) > MAX_BATCH_J:  # the child's check, then
        return judged(observer, event, None, [], None, [], False, skip, cheap, None)
    whole = torch.zeros((size, *inner, *x.shape), dtype=got[0].dtype)
    for b in range(size):  # block-diagonal: sample b's output depends on sample b alone
        whole.select(0, b).select(len(inner), b).copy_(got[0][b])
    return judged(observer, event, stacked, [x], None, [whole], True, skip, cheap, func)


def batch_record(
    observer: Any,
    event: Any,
    outs: list[torch.Tensor],
    leaves: list[torch.Tensor],
    vs: list[torch.Tensor],
    grads: list[torch.Tensor],
    skip: str,
    cheap: bool,
) -> dict[str, Any]:
    """The record of autograd.grad inside the snippet's vmap (a batch of v, vs and grads with the batch
    dimension first): the forward from `leaves` to `outs` as the snippet ran it, with the batch contracted
    by random weights c (seeded by the call's line): v = Σ_b c_b·v[b], grads = Σ_b c_b·grads[b], which is
    Jᵀv again. A wrong sample shows in it but for a set of c of measure zero."""
    from .nonfinite import custom_functions
    from .observe_record import forward_of

    if skip:
        return _without(observer, cheap, skip)
    try:
        size = vs[0].shape[0]
        c = torch.randn(size, generator=torch.Generator().manual_seed(event.line), dtype=torch.float64)

        def contract(t: torch.Tensor) -> torch.Tensor:
            return torch.tensordot(c, t.detach().to(torch.float64), dims=1).to(t.dtype)

        v, g = [contract(t) for t in vs], [contract(t) for t in grads]
        forward = forward_of(observer, event, outs, leaves, list(g))
        event.notes.append(
            "The judge checks the batch as Σ_b c_b·grads[b] against Jᵀ(Σ_b c_b·v[b]) for random c (seeded by "
            "the line): a wrong sample shows there."
        )
        return _record(observer, forward, leaves, leaves, v, list(g), custom_functions(outs), cheap)
    except Exception as e:  # noqa: BLE001 - the log's own failure: the check is skipped, saying why
        return _without(observer, cheap, _failed(e))


def tangent_record(
    observer: Any,
    event: Any,
    outs: list[torch.Tensor],
    leaves: list[torch.Tensor],
    at: list[torch.Tensor],
    us: list[torch.Tensor],
    results: list[torch.Tensor],
    skip: str,
    cheap: bool,
) -> dict[str, Any]:
    """The record of forward_ad's unpack_dual: the forward from the dual tensors (`leaves`, roots of the log,
    whose primal values are `at`) to the unpacked outputs, recorded as the snippet ran it, with the tangents u
    of the duals and each output's tangent Ju."""
    from . import checks
    from .nonfinite import custom_functions
    from .observe_record import forward_of
    from .record import NotReplayable

    if skip:
        return _without(observer, cheap, skip)
    try:
        if [tuple(u.shape) for u in us] != [tuple(x.shape) for x in leaves]:
            raise NotReplayable("the tangents do not have the dual tensors' shapes")
        with checks.outside_the_log():
            changed = [observer.name_of(d) for d, p in zip(leaves, at, strict=True) if not torch.equal(d.detach(), p)]
        if changed:
            raise NotReplayable(
                f"{', '.join(changed)} changed in place after make_dual: the recorded forward starts from the "
                "value make_dual was given, not the one the forward read"
            )
        forward = forward_of(observer, event, outs, leaves, [None] * len(leaves))
        grads: list[torch.Tensor | None] = [None] * len(leaves)
        return _record(observer, forward, at, leaves, [], grads, custom_functions(outs), cheap, tangent=(us, results))
    except Exception as e:  # noqa: BLE001 - the log's own failure: the check is skipped, saying why
        return _without(observer, cheap, _failed(e))


def _tangents(given: list[Any], xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tangent u of each input, as the call took them (None for a one-element input: 1, as
    torch.autograd.functional.jvp takes it)."""
    from .record import NotReplayable

    if not given and all(x.numel() == 1 for x in xs):
        given = [None] * len(xs)
    if len(given) != len(xs):
        raise NotReplayable("the tangents do not line up with the inputs")
    us = [torch.ones_like(x) if u is None else u for u, x in zip(given, xs, strict=True)]
    if any(not isinstance(u, torch.Tensor) or u.shape != x.shape for u, x in zip(us, xs, strict=True)):
        raise NotReplayable("the tangents do not have the inputs' shapes")
    return [u.detach() for u in us]


def _outputs(out: Any, several: bool) -> list[torch.Tensor]:
    """The function's output tensors: one, or (for a derivative along tangents) a tuple or list of them."""
    from .record import NotReplayable

    if isinstance(out, torch.Tensor):
        return [out]
    if several and isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise NotReplayable("the function returns more than one tensor")
