"""The explicit Jacobian of the output with respect to each leaf, by the cheapest sound method.

Strategy, per leaf (reported as `method`):
- zero:      the output does not depend on the leaf: a zero block, no autodiff at all.
- diagonal:  the output depends on the leaf elementwise (known from the program):
             one backward with v = ones gives every dy[k]/dx[k].
- autograd.grad rows: small outputs: one plain autograd.grad per output element
             (cheap, and avoids importing torch._dynamo, which torch.func needs).
- jacrev / jacfwd: bigger dense blocks: vectorised reverse mode when outputs <= inputs,
             forward mode otherwise.
- not materialised: beyond the size budget; Jᵀv then comes from backward(v) alone and
             is checked against a forward-mode JVP with a random u.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ..limits import Limits
from .interpreter import DENSE, DIAG, Forward, replay
from .pointwise import is_elementwise
from .tensors import CHUNK, all_equal_to, all_finite

SMALL_ROWS = 64  # at most this many output elements: a plain loop of autograd.grad is fastest


@contextmanager
def quiet_torch_internals() -> Iterator[None]:
    """torch.func / forward AD may warn about torch's own internals (torch.jit.script): not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@contextmanager
def _plain_forward_ad() -> Iterator[None]:
    """Forward AD without the TorchScript decompositions its first make_dual loads (0.6 s or more): they
    serve forward AD through backward formulas (jacfwd over jacrev), never a plain forward pass like ours.
    torch reads PYTORCH_JIT at that call, so setting it for the duration of ours is enough."""
    before = os.environ.get("PYTORCH_JIT")
    os.environ["PYTORCH_JIT"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTORCH_JIT"]
        else:
            os.environ["PYTORCH_JIT"] = before


@dataclass
class LeafJacobian:
    """The Jacobian block of one leaf, as tensors (converted to TensorData by the api)."""

    structure: str  # zero | diagonal | dense
    method: str
    full: torch.Tensor | None  # out_shape + leaf_shape
    diagonal: torch.Tensor | None
    jtv: torch.Tensor | None
    reason: str | None = None
    why: str = ""  # why this method was chosen, for --verbose and the JSON
    # Jᵀv from J is backward's own pass: J's diagonal came from autograd.grad with v = ones, the v of
    # backward(v), through the same graph, so Jᵀv (= the diagonal · 1) is .grad itself, bit for bit
    same_pass: bool = False


def compute_jacobians(
    fwd: Forward,
    leaves: dict[str, torch.Tensor],
    consts: dict[str, torch.Tensor],
    v: torch.Tensor,
    limits: Limits,
    output_name: str,
) -> dict[str, LeafJacobian]:
    """Every leaf's Jacobian block; graph kept (retain_graph) for the real backward after."""
    out = fwd.output.v
    deps = fwd.output.deps
    budget = _JacobianBudget(limits, out.element_size())
    res = {n: _zero_block(out, leaves[n], n, budget, output_name) for n in leaves if n not in deps}
    diag = [n for n in leaves if deps.get(n) == DIAG]
    if diag:
        res.update(_diagonal_blocks(out, leaves, diag, v, budget, output_name))
    dense = [n for n in leaves if deps.get(n) == DENSE]
    if dense:
        skipped, fits = _dense_fits(fwd, leaves, dense, budget)
        res.update(skipped)
        if fits:
            blocks, method, why = _dense_blocks(fwd, leaves, consts, fits, out, output_name)
            for n, J in zip(fits, blocks, strict=True):
                jtv = torch.tensordot(v, J, dims=out.dim()) if out.dim() else v * J
                res[n] = LeafJacobian("dense", method, J, None, jtv, why=why)
    return {n: res[n] for n in leaves}


class _JacobianBudget:
    """The materialised Jacobians' share of the limits, taken block by block in the order they are built."""

    def __init__(self, limits: Limits, bytes_per: int) -> None:
        self.limits = limits
        self.bytes_per = bytes_per
        self.bytes = limits.jacobian_bytes

    def take(self, entries: int) -> bool:
        """True, and the block's bytes counted, where a block of `entries` still fits."""
        if entries <= self.limits.jacobian_entries and entries * self.bytes_per <= self.bytes:
            self.bytes -= entries * self.bytes_per
            return True
        return False


def _zero_block(
    out: torch.Tensor, leaf: torch.Tensor, n: str, budget: _JacobianBudget, output_name: str
) -> LeafJacobian:
    """A leaf the output does not depend on: zeros, materialised where they fit."""
    full = None
    reason = None
    if budget.take(out.numel() * leaf.numel()):
        full = torch.zeros((*out.shape, *leaf.shape), dtype=out.dtype, device=out.device)
    else:
        reason = "an all-zero block too large to materialise"
    return LeafJacobian(
        "zero",
        "zero",
        full,
        None,
        torch.zeros_like(leaf),
        reason,
        why=f"the program shows {output_name} does not depend on {n}: a zero block, no autodiff",
    )


def _diagonal_blocks(
    out: torch.Tensor,
    leaves: dict[str, torch.Tensor],
    names: list[str],
    v: torch.Tensor,
    budget: _JacobianBudget,
    output_name: str,
) -> dict[str, LeafJacobian]:
    """Leaves the output depends on elementwise: every diagonal from one autograd.grad with v = ones."""
    m = out.numel()
    res: dict[str, LeafJacobian] = {}
    # Jᵀv = v * diagonal; with v = ones that is the diagonal itself (x·1 is exact): no full-size copy
    v_is_ones = all_equal_to(v, 1.0)
    ones = v if v_is_ones else torch.ones_like(out)
    grads = torch.autograd.grad(out, [leaves[n] for n in names], ones, retain_graph=True)
    for n, d in zip(names, grads, strict=True):
        d = constant_view(d)
        full = None
        reason = None
        if budget.take(m * m):
            full = torch.diag_embed(d.reshape(-1)).reshape((*out.shape, *d.shape))
        else:
            reason = f"diagonal: {m:,} x {m:,} entries, only the {m:,} on the diagonal are kept"
        res[n] = LeafJacobian(
            "diagonal",
            "diagonal",
            full,
            d,
            d if v_is_ones else v * d,
            reason,
            why=f"the program shows {output_name} depends on {n} elementwise: one autograd.grad with v = ones "
            f"gives every ∂{output_name}[k]/∂{n}[k]",
            same_pass=v_is_ones,
        )
    return res


def _dense_fits(
    fwd: Forward, leaves: dict[str, torch.Tensor], names: list[str], budget: _JacobianBudget
) -> tuple[dict[str, LeafJacobian], list[str]]:
    """The dense blocks over the size or the arithmetic budget, not materialised; and the names of those that fit."""
    out = fwd.output.v
    m = out.numel()
    limits = budget.limits
    res: dict[str, LeafJacobian] = {}
    fits = []
    for n in names:
        entries = m * leaves[n].numel()
        if budget.take(entries):
            fits.append(n)
        else:
            res[n] = _not_materialised(
                "beyond the budget",
                f"{m:,} x {leaves[n].numel():,} = {entries:,} entries exceed the budget "
                f"({limits.jacobian_entries:,} entries, {limits.jacobian_bytes:,} bytes; "
                f"--max-jacobian N to change it)",
            )
    # each row (or column) of a dense block is one more pass through the program's products: about
    # two thirds of the forward's count, which holds the forward and backward products (x3)
    n_fits = sum(leaves[n].numel() for n in fits)
    passes = m if m <= SMALL_ROWS else min(m, n_fits)
    cost = passes * fwd.work * 2 // 3
    if fits and cost > limits.multiply_adds:
        for n in fits:
            res[n] = _not_materialised(
                "beyond the arithmetic budget",
                f"{passes:,} passes through the program's matrix products, about {cost:.3g} "
                f"multiply-adds, exceed the budget ({limits.multiply_adds:.3g}; --limit multiply_adds=N)",
            )
        fits = []
    return res, fits


def _not_materialised(beyond: str, reason: str) -> LeafJacobian:
    """A dense block over a budget: no J, so Jᵀv comes from the real backward alone."""
    why = f"{beyond}: Jᵀv comes from backward(v) alone, checked by a forward-mode JVP"
    return LeafJacobian("dense", "not materialised", None, None, None, reason, why=why)


def _dense_blocks(
    fwd: Forward,
    leaves: dict[str, torch.Tensor],
    consts: dict[str, torch.Tensor],
    names: list[str],
    out: torch.Tensor,
    output_name: str,
) -> tuple[list[torch.Tensor], str, str]:
    m = out.numel()
    inputs = [leaves[n] for n in names]
    if m <= SMALL_ROWS:
        rows: list[list[torch.Tensor]] = [[] for _ in names]
        for i in range(m):
            # a fresh one-hot each time: autograd may return views of grad_outputs (sum's backward expands it)
            onehot = torch.zeros(m, dtype=out.dtype, device=out.device)
            onehot[i] = 1
            gs = torch.autograd.grad(out, inputs, onehot.reshape(out.shape), retain_graph=True, allow_unused=True)
            for k, g in enumerate(gs):
                rows[k].append(torch.zeros_like(inputs[k]) if g is None else g)
        blocks = [torch.stack(r).reshape((*out.shape, *leaves[n].shape)) for r, n in zip(rows, names, strict=True)]
        why = (
            f"{m} output element(s) <= {SMALL_ROWS}: one plain autograd.grad per row with a one-hot v "
            "(cheapest at this size, and no torch.func import)"
        )
        return blocks, "autograd.grad rows", why
    import torch.func as tf

    env_fixed: dict[str, Any] = {k: t.detach() for k, t in leaves.items() if k not in names}
    env_fixed.update(consts)

    def f(*xs: torch.Tensor) -> torch.Tensor:
        env = dict(env_fixed)
        env.update(zip(names, xs, strict=True))
        return replay(fwd.steps, output_name, env, out.dtype)

    n_total = sum(leaves[n].numel() for n in names)
    argnums = tuple(range(len(names)))
    detached = [t.detach() for t in inputs]
    with quiet_torch_internals():
        if m <= n_total:
            blocks = tf.jacrev(f, argnums=argnums)(*detached)
            method = "jacrev"
            why = f"{m:,} outputs <= {n_total:,} inputs: reverse mode, all rows at once (torch.func.jacrev, vmap)"
        else:
            blocks = tf.jacfwd(f, argnums=argnums)(*detached)
            method = "jacfwd"
            why = f"{n_total:,} inputs < {m:,} outputs: forward mode, all columns at once (torch.func.jacfwd)"
    return list(blocks), method, why


def constant_view(d: torch.Tensor) -> torch.Tensor:
    """d itself, or, where every element is the same finite number (the 3 of 3*a), that number as a stride-0
    view: the copy of the same number n times is freed, and the checks read the view as a constant."""
    if d.numel() < 2 or d.stride() == (0,) * d.dim() or not all_equal_to(d, c := float(d.reshape(-1)[0])):
        return d
    return torch.full((), c, dtype=d.dtype, device=d.device).expand(d.shape) if math.isfinite(c) else d


def random_vjp_check(
    fwd: Forward,
    leaves: dict[str, torch.Tensor],
    consts: dict[str, torch.Tensor],
    names: list[str],
    grads: dict[str, torch.Tensor],
    v: torch.Tensor,
    output_name: str,
    seed: int = 1234,
) -> tuple[float, float, float, dict[str, Any] | None] | None:
    """<u, Jᵀv> from backward and <Ju, v> from a forward-mode JVP, for a random u; Σ|u·Jᵀv| for the scale;
    and u per leaf (float64; None where it was drawn a span at a time), to weigh the terms' size later.

    u is 0 on the elements where backward gave nan or ±inf (the other checks name those): the identity
    holds for any u, and this one keeps both sides finite. None where v itself is not finite.

    A program that computes element by element is replayed a span of CHUNK elements at a time, u drawn span
    by span: the same sums, without the dual numbers of every intermediate (and u) at full size."""
    import torch.autograd.forward_ad as fwad

    if not all_finite(v):
        return None
    g = torch.Generator().manual_seed(seed)
    fixed: dict[str, Any] = {k: t.detach() for k, t in leaves.items()}
    fixed.update(consts)
    shape, n = tuple(v.shape), v.numel()
    # spans of the flat elements where every tensor is the output's shape (or one number, which broadcasts)
    spans = (
        n > CHUNK
        and all(tuple(t.shape) == shape or t.numel() == 1 for t in fixed.values() if isinstance(t, torch.Tensor))
        and all(tuple(leaves[k].shape) == shape for k in names)
        and is_elementwise(fwd.steps, fwd.output.deps)
    )
    bounds = [(s, min(n, s + CHUNK)) for s in range(0, n, CHUNK)] if spans else [(0, n)]

    def part(t: Any, start: int, end: int, copy: bool = False) -> Any:
        if not spans or not isinstance(t, torch.Tensor) or t.numel() == 1:
            return t
        # a copy for forward AD, not a view: it would give a view of a leaf a zero tangent of the whole leaf
        return t.reshape(-1)[start:end].clone() if copy else t.reshape(-1)[start:end]

    def lift(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and not x.is_floating_point():
            return x  # a mask or an index: not a value to differentiate
        t = torch.as_tensor(x, dtype=v.dtype)
        return t if fwad.unpack_dual(t).tangent is not None else fwad.make_dual(t, torch.zeros_like(t))

    jvp: list[float] = []
    vjp: list[float] = []
    size: list[float] = []
    threads = torch.get_num_threads()
    if spans:  # a span's ops are too small to share: on a busy machine each would wait for a second thread
        torch.set_num_threads(1)
    try:
        with quiet_torch_internals(), _plain_forward_ad(), fwad.dual_level():
            for start, end in bounds:
                env = {k: part(t, start, end, copy=True) for k, t in fixed.items()}
                us, masked, got = {}, {}, {}
                for k in names:
                    shape_k = (end - start,) if spans else leaves[k].shape
                    u = torch.randn(shape_k, generator=g, dtype=torch.float64).to(leaves[k])
                    got[k] = part(grads[k], start, end)
                    masked[k] = not all_finite(got[k])
                    us[k] = torch.where(torch.isfinite(got[k]), u, torch.zeros_like(u)) if masked[k] else u
                for k in names:
                    env[k] = fwad.make_dual(env[k], us[k])
                env = {k: lift(t) for k, t in env.items()}
                tangent = fwad.unpack_dual(replay(fwd.steps, output_name, env, v.dtype, lift)).tangent
                if tangent is not None:
                    jvp.append(float((tangent.double() * part(v, start, end).double()).sum()))
                for k, u in us.items():
                    terms = u.double() * got[k].double()
                    if masked[k]:  # where u is 0 for a non-finite grad, its term is 0, not 0·inf
                        terms = torch.where(u != 0, terms, 0.0)
                    vjp.append(float(terms.sum()))
                    size.append(float(terms.abs_().sum()))  # Σ|terms|: the scale for the tolerance
    finally:
        if spans:
            torch.set_num_threads(threads)
    drawn = None if spans else {k: u.detach().double() for k, u in us.items()}
    return math.fsum(vjp), math.fsum(jvp), math.fsum(size), drawn
