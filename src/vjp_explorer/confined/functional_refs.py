"""The finite-difference references a functional call is shown beside (confined/functional.py), in the
snippet's process: J by central differences (engine/finite_diff.jacobian_of), contracted as the call
contracts it, and second derivatives by central second differences. Never autograd. The verdict on a
first derivative and on a one-input second derivative is the judge's (functional_judged.py); these are
the view's, and the check of the forms the judge has no record of.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Any

import torch

EPS = float(torch.finfo(torch.float64).eps)


def hessian_reference(func: Any, xs: list[torch.Tensor], budget: int) -> list[tuple[Any, Any]] | str:
    """torch.autograd.functional.hessian's blocks H[i][j], in its order, by second differences."""
    n = len(xs)
    found: list[Any] = [second_block(func, xs, i, j, budget // n**2) for i in range(n) for j in range(n)]
    return next((f for f in found if isinstance(f, str)), None) or [block for f in found for block in f]


def muted(func: Any, shape: list[Any]) -> Any:
    """func called quietly under no_grad, its output flat in float64 (its shape kept in `shape`)."""

    def f(*x64: torch.Tensor) -> torch.Tensor:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with torch.no_grad():
                out = func(*x64)
        if not isinstance(out, torch.Tensor):
            raise TypeError("the function returns more than one tensor")
        shape[:] = [tuple(out.shape)]
        return out.detach().to(torch.float64).reshape(-1)

    return f


def reference(kind: str, func: Any, xs: list[torch.Tensor], vs: list[Any], budget: int) -> list[tuple[Any, Any]] | str:
    """(reference, error estimate) per block, from J by central differences; or why there is none."""
    from ..engine.finite_diff import jacobian_of

    shape: list[Any] = []
    try:
        found = jacobian_of(muted(func, shape), [x.detach() for x in xs], budget)
    except TypeError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - the function raised at a perturbed input: no reference there
        return f"the function raised {type(e).__name__} in float64: {' '.join(str(e).split())[:120]}"
    if found is None:
        return f"more than {budget:,} calls of the function would be needed"
    blocks, errors = found
    return contract(kind, blocks, errors, xs, vs, shape[0] if shape else ())


def contract(kind: str, blocks: list[Any], errors: list[Any], xs: list[Any], vs: list[Any], out_shape: Any) -> Any:
    """From J's blocks (m × n_k) and their error estimates: J itself, Jᵀv or Jv, each with its error."""
    if kind in ("jacobian", "jacrev", "jacfwd", "grad"):
        return [
            (J.reshape((*out_shape, *x.shape)), E.reshape((*out_shape, *x.shape)))
            for J, E, x in zip(blocks, errors, xs, strict=True)
        ]
    v = [t.detach().to(torch.float64).reshape(-1) for t in vs]
    if kind == "vjp":
        return [(J.T @ v[0], E.T @ v[0].abs()) for J, E in zip(blocks, errors, strict=True)]
    jv = sum((J @ vk for J, vk in zip(blocks, v, strict=True)), torch.zeros(blocks[0].shape[0], dtype=torch.float64))
    err = sum((E @ vk.abs() for E, vk in zip(errors, v, strict=True)), torch.zeros_like(jv))
    return [(jv.reshape(out_shape), err.reshape(out_shape))]


def second_block(func: Any, xs: list[torch.Tensor], a: int, b: int, budget: int) -> list[tuple[Any, Any]] | str:
    """∂²f/∂x_a∂x_b (shape: f's, x_a's, x_b's) by central second differences, never autograd:
    (f(x + hᵢeᵢ + hⱼeⱼ) − f(x + hᵢeᵢ − hⱼeⱼ) − f(x − hᵢeᵢ + hⱼeⱼ) + f(x − hᵢeᵢ − hⱼeⱼ)) / 4hᵢhⱼ at steps h and
    h/2, their Richardson extrapolation the reference; the error estimate is their difference plus the
    rounding of the evaluations, 16·eps·(|f| + max|f|)/(hᵢhⱼ/4), as engine/finite_diff.jacobian_of's."""
    from ..engine.finite_diff import STEP_2

    x64 = [x.detach().to(torch.float64).clone(memory_format=torch.contiguous_format) for x in xs]
    na, nb = x64[a].numel(), x64[b].numel()
    pairs = [(i, j) for i in range(na) for j in range(nb) if a != b or i <= j]
    if 8 * len(pairs) + 1 > budget:
        return f"more than {budget:,} calls of the function would be needed (8 per second derivative)"
    shape: list[Any] = []
    f = muted(func, shape)

    def at(i: int, di: float, j: int, dj: float) -> torch.Tensor:
        ys = [y.clone() if k in (a, b) else y for k, y in enumerate(x64)]
        ys[a].view(-1)[i] += di
        ys[b].view(-1)[j] += dj
        return f(*ys)

    try:
        f0 = f(*x64)
        size = f0.abs().nan_to_num(0.0, 0.0, 0.0)
        size = size + (float(size.max()) if size.numel() else 0.0)  # |f| + max|f|
        ref, err = torch.zeros(2, f0.numel(), na, nb, dtype=torch.float64)
        for i, j in pairs:
            hi = STEP_2 * max(abs(float(x64[a].view(-1)[i])), 1.0)
            hj = STEP_2 * max(abs(float(x64[b].view(-1)[j])), 1.0)
            ds = []
            for s in (1.0, 0.5):
                p, q = s * hi, s * hj
                ds.append((at(i, p, j, q) - at(i, p, j, -q) - at(i, -p, j, q) + at(i, -p, j, -q)) / (4 * p * q))
            gap, noise = (ds[0] - ds[1]).abs(), 16 * EPS * size / (hi * hj / 4)
            # h and h/2 far apart (a kink, as relu's at 0): no reference there (nan), never a disagreement
            unsettled = (gap > 0.1 * ds[1].abs()) & (gap > 100 * noise)
            ref[:, i, j] = torch.where(unsettled, float("nan"), (4 * ds[1] - ds[0]) / 3)
            err[:, i, j] = gap + noise
            if a == b:
                ref[:, j, i], err[:, j, i] = ref[:, i, j], err[:, i, j]
    except TypeError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - the function raised at a perturbed input: no reference there
        return f"the function raised {type(e).__name__} in float64: {' '.join(str(e).split())[:120]}"
    full = (*shape[0], *x64[a].shape, *x64[b].shape)
    return [(ref.reshape(full), err.reshape(full))]


def dual_reference(observer: Any, out: torch.Tensor, inputs: list[Any]) -> list[tuple[Any, Any]] | str:
    """Ju of forward_ad's duals (inputs: (dual, u, primal)) by central differences of the replayed forward
    along u: the view's reference, this process's own (the judge's is confined/checks.tangent)."""
    from ..engine.finite_diff import derivative_along
    from . import checks
    from .record import NotReplayable

    leaves = [d for d, _, _ in inputs]
    try:
        replay = observer.recorder.replay([out], leaves, "it was not computed from the dual tensors seen")
        x0 = [
            x if x is not None else d.detach().to(torch.float64)
            for x, d in zip(replay.leaf_values(), leaves, strict=True)
        ]
        replay.hold(x0, [d.dtype for d in leaves])
        J, E = derivative_along(checks.flat(replay), x0, [u.to(torch.float64) for _, u, _ in inputs])
    except (NotReplayable, RuntimeError) as e:
        return str(e)
    return [(J.reshape(out.shape), E.reshape(out.shape))]


@dataclass
class Batched:
    """One autograd.grad call inside vmap: its outputs and inputs (unbatched, the snippet's own tensors), and
    its v and grads with the batch dimension first."""

    outs: list[torch.Tensor]
    inputs: list[torch.Tensor]
    vs: list[torch.Tensor]
    grads: list[Any]


def unbatched(outs: list[Any], vs: list[Any], inputs: Any, value: Any) -> Batched:
    """The batched v and grads of an autograd.grad call inside vmap, as plain tensors (batch dimension 0)."""
    from torch._C import _functorch as F

    def plain(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or not F.is_batchedtensor(t):
            return t.detach().clone() if isinstance(t, torch.Tensor) else t
        inner, dim = F._unwrap_batched(t, F.maybe_get_level(t))
        return plain(inner.movedim(dim, 0) if dim is not None else inner)

    if any(isinstance(t, torch.Tensor) and F.is_batchedtensor(t) for t in [*outs, *(inputs or [])]):
        raise ValueError("the outputs or inputs are batched themselves")
    return Batched(list(outs), list(inputs or []), [plain(v) for v in vs], [plain(g) for g in value])


def batched_reference(observer: Any, call: Batched, size: int, evals: int) -> list[tuple[Any, Any]] | str:
    """Per sample b, Jᵀv[b] with J by central differences of the replayed forward (within `evals` calls),
    and its error estimate; or why there is none."""
    from ..engine.finite_diff import jacobian_of
    from . import checks
    from .record import NotReplayable

    try:
        replay = observer.recorder.replay(call.outs, call.inputs)
        x0 = [
            x if x is not None else leaf.detach().to(torch.float64)
            for x, leaf in zip(replay.leaf_values(), call.inputs, strict=True)
        ]
        replay.hold(x0, [leaf.dtype for leaf in call.inputs])
        found = jacobian_of(checks.flat(replay), x0, evals)
    except (NotReplayable, RuntimeError) as e:
        return str(e)
    if found is None:
        return f"more than {evals:,} evaluations of the replay would be needed"
    blocks, errors = found
    v = torch.cat([t.reshape(size, -1).to(torch.float64) for t in call.vs], dim=1)  # B × m
    return [
        ((v @ J).reshape(size, *x.shape), (v.abs() @ E).reshape(size, *x.shape))
        for J, E, x in zip(blocks, errors, call.inputs, strict=True)
    ]
