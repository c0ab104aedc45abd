"""v as a probe: one-hot, basis, random, several v at once (linearity) and v from a downstream loss.

`--grad e3`, `--grad e[1,2]`, `--grad basis`, `--grad random`, several `--grad`, and `--upstream EXPR`:
each is a way to choose the v of backward(v) that reads something particular off J (docs/probes.md).
Text is parsed here with a regular expression (the kinds) or the project's own program parser (the
loss of --upstream): nothing is evaluated. torch is imported inside the functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import Origin, ProgramError, ShapeError, UsageError, VjpError

# --grad basis runs one backward per output element (one row of J each): at most this many rows, and at most
# jacobian_entries entries in all (the budget of a materialised Jacobian, --max-jacobian N)
BASIS_ROWS = 4096
# at most this many --grad values in one run (one backward each, plus one for their combination)
MAX_GRADS = 8
# up to this many rows the basis runs one plain autograd.grad per one-hot v, as the demonstration reads;
# beyond, the one-hot vs go through backward as one batch (is_grads_batched: vmap over the backward pass),
# which is what autograd.functional.jacobian(vectorize=True) does
LOOP_ROWS = 64

_FLAT = re.compile(r"e(-?\d+)")
_MULTI = re.compile(r"e\[\s*(-?\d+\s*(?:,\s*-?\d+\s*)*),?\s*\]")

NOTES = {
    "one-hot": "v = e_{k}, one-hot at {el}: Jᵀv is row {k} of J, so each x[j].grad is ∂{el}/∂x[j], the "
    "derivatives of that one output element (every other output weighs 0).",
    "basis": "--grad basis: one backward per one-hot v = e_i, i over every output element; the grads stacked "
    "are the rows of J, J[i, :] = ∂{out}[i]/∂x. That is how autograd.functional.jacobian builds J (one "
    "autograd.grad per row; vectorize=True batches them). The run itself uses v = ones, the sum of all e_i: "
    "column sums of J.",
    "random": "v is random (standard normal, from its own generator seeded by --seed: the inputs' random values "
    "do not change): Jᵀv = Σᵢ v[i]·J[i, :], a random combination of the rows of J. Unlike one-hot v (0s and "
    "1s), it also tests a backward at scaled weights: a wrong custom backward that squares its incoming gradient "
    "passes with one-hot v only.",
    "upstream": "v = dL/d{out} for the downstream loss L = {formula}: backward(v) leaves dL/dx in .grad, the chain "
    "rule x.grad = Jᵀ·∇L, what L.backward() would leave. This is where v comes from in practice.",
    "several": "several v: backward is linear in v, Jᵀ(αv + βw) = αJᵀv + βJᵀw; checked with the combination "
    "{combo} through one more backward.",
}


@dataclass(frozen=True)
class ProbeSpec:
    """A kind of --grad that is not a value: one-hot (with its index), basis or random."""

    kind: str  # one-hot | basis | random
    text: str
    flat: int | None = None  # e3
    index: tuple[int, ...] | None = None  # e[1,2]


def parse_probe(text: str, origin: Origin) -> ProbeSpec | None:
    """The probe kind of a text of v, or None for a value (parsed as values are); errors name `origin`."""
    t = text.strip()
    if t in ("basis", "random"):
        return ProbeSpec(t, t)
    if len(t) > 200:
        return None
    if m := _FLAT.fullmatch(t):
        return ProbeSpec("one-hot", t, flat=int(m.group(1)))
    if m := _MULTI.fullmatch(t):
        return ProbeSpec("one-hot", t, index=tuple(int(p) for p in m.group(1).split(",") if p.strip()))
    if re.fullmatch(r"e\s*[\[\d-].*", t):
        raise UsageError(
            f"{t!r} is not a one-hot v: write e3 (flat index 3, row-major) or e[1,2] (one index per "
            "dimension of the output), with indices counted from 0.",
            origin=origin,
        )
    return None


def _shape_words(name: str, shape: tuple[int, ...]) -> str:
    n = 1
    for d in shape:
        n *= d
    return f"the output {name!r} has shape {list(shape)} ({n} element{'s' if n != 1 else ''})"


def one_hot_index(spec: ProbeSpec, shape: tuple[int, ...], name: str, origin: Origin) -> int:
    """The flat (row-major) index of a one-hot --grad, or a UsageError that names the output's shape."""
    n = 1
    for d in shape:
        n *= d
    where = _shape_words(name, shape)
    if spec.flat is not None:
        k = spec.flat
        if 0 <= k < n:
            return k
        why = "indices count from 0, and negative ones are not taken" if k < 0 else "it is past the last element"
        raise UsageError(
            f"{spec.text}: {k} is not an index of the output ({why}): {where}, so a one-hot v is "
            f"e0 to e{n - 1} (flat, row-major)"
            + (
                f", or e[{', '.join('i' + str(d) for d in range(len(shape)))}] with one index per dimension."
                if shape
                else "."
            ),
            origin=origin,
        )
    idx = spec.index or ()
    if len(idx) != len(shape) or any(not 0 <= i < d for i, d in zip(idx, shape, strict=False)):
        bounds = ", ".join(f"0 <= i{d} < {s}" for d, s in enumerate(shape)) or "none: it is a single number, use e0"
        raise UsageError(
            f"{spec.text}: {list(idx)} is not an index of the output: {where}, so e[...] takes "
            f"{len(shape)} index(es) ({bounds}); or give a flat index, e0 to e{n - 1}.",
            origin=origin,
        )
    k = 0
    for i, d in zip(idx, shape, strict=True):
        k = k * d + i
    return k


def check_basis_budget(m: int, n: int, name: str, entries: int, origin: Origin) -> None:
    """Refuse v = basis past its budget (BASIS_ROWS rows, jacobian_entries entries)."""
    if m > BASIS_ROWS or m * n > entries:
        past = (
            f"more than the budget of {BASIS_ROWS:,} rows"
            if m > BASIS_ROWS
            else f"{m * n:,} entries, more than the budget of {entries:,} (--max-jacobian N)"
        )
        raise UsageError(
            f"basis runs one backward per output element and keeps every row: {name!r} has {m:,} elements, "
            f"so {m:,} rows of {n:,} (the leaves' elements), {past}. Use {origin.give_text('eK')} to read "
            "one row, or a smaller output.",
            origin=origin,
        )


def random_v(shape: tuple[int, ...], dtype: Any, device: str, seed: int, draws: int = 1) -> list[Any]:
    """`draws` standard-normal v of this shape from a private generator: the inputs' draws are untouched."""
    import torch

    # a seed of its own, derived from --seed: v is not the same numbers as a randn(...) input drawn with it
    gen = torch.Generator().manual_seed((seed + 0x9E3779B97F4A7C15) % 2**63)
    return [torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device) for _ in range(draws)]


def basis_rows(
    out: Any,
    leaves: dict[str, Any],
    fwd: Any = None,
    consts: dict[str, Any] | None = None,
    output: str = "y",
    use_func: bool = True,
) -> tuple[dict[str, Any], str]:
    """Per leaf, the grads of backward(e_i) for every output element i, stacked: shape (m, *leaf_shape).

    Up to LOOP_ROWS rows: one autograd.grad per one-hot v through the run's own graph. Beyond: the one-hot
    vs in one batch, torch.func.vjp of the program's replay under vmap (jacobian(vectorize=True)'s way, and
    jacrev's), so that the basis costs what the Jacobian route it mirrors costs; where that route took no
    torch.func (use_func False), autograd.grad with is_grads_batched through the run's own graph."""
    import torch

    m = out.numel()
    names = list(leaves)
    inputs = [leaves[n] for n in names]
    if m <= LOOP_ROWS or fwd is None:
        rows: list[list[Any]] = [[] for _ in names]
        for i in range(m):
            e = torch.zeros(m, dtype=out.dtype, device=out.device)
            e[i] = 1
            gs = torch.autograd.grad(out, inputs, e.reshape(out.shape), retain_graph=True, allow_unused=True)
            for k, g in enumerate(gs):
                rows[k].append(torch.zeros_like(inputs[k]) if g is None else g.detach())
        method = f"{m} autograd.grad calls, one per one-hot v"
        return {n: torch.stack(r) for n, r in zip(names, rows, strict=True)}, method
    eye = torch.eye(m, dtype=out.dtype, device=out.device).reshape(m, *out.shape)
    if not use_func:
        # the Jacobian route took no torch.func (a diagonal or zero J): batch through the run's own graph, which
        # spares the process torch.func's import and warm-up (about a second)
        gs = torch.autograd.grad(out, inputs, eye, retain_graph=True, allow_unused=True, is_grads_batched=True)
        method = f"{m} one-hot v through the run's graph in one batch (autograd.grad, is_grads_batched)"
        return {
            n: (torch.zeros((m, *leaves[n].shape), dtype=out.dtype, device=out.device) if g is None else g.detach())
            for n, g in zip(names, gs, strict=True)
        }, method
    import torch.func as tf

    from .interpreter import replay
    from .jacobian import quiet_torch_internals

    fixed: dict[str, Any] = dict(consts or {})

    def f(*xs: Any) -> Any:
        env = dict(fixed)
        env.update(zip(names, xs, strict=True))
        return replay(fwd.steps, output, env, out.dtype)

    with quiet_torch_internals():
        pullback = tf.vjp(f, *(x.detach() for x in inputs))[1]
        gs = tf.vmap(pullback)(eye)
    method = f"{m} one-hot v through backward in one batch (torch.func.vjp under vmap, as jacobian(vectorize=True))"
    return {n: g.detach() for n, g in zip(names, gs, strict=True)}, method


def grads_for(out: Any, leaves: dict[str, Any], v: Any) -> dict[str, Any]:
    """Jᵀv per leaf by one autograd.grad (the graph kept), zeros for a leaf the output does not use."""
    import torch

    names = list(leaves)
    gs = torch.autograd.grad(out, [leaves[n] for n in names], v, retain_graph=True, allow_unused=True)
    return {n: (torch.zeros_like(leaves[n]) if g is None else g.detach()) for n, g in zip(names, gs, strict=True)}


def coefficients(k: int) -> list[float]:
    """α, β, ... for the linearity check: 2, -1, 0.5, -0.25 (exact in binary; not all 1, so that a backward
    that squares its incoming gradient fails even with one-hot v)."""
    return [2.0 * (-0.5) ** i for i in range(k)]


def linearity_items(
    backward: Any, vs: list[Any], coeffs: list[float]
) -> tuple[Any, dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(Σ c_k v_k, backward of it, Σ c_k backward(v_k), each backward(v_k), Σ|c_k backward(v_k)| per leaf).

    `backward` maps a v to {leaf: grad}; the check compares the second and third."""
    combo = sum(c * v for c, v in zip(coeffs, vs, strict=True))
    each = [backward(v) for v in vs]
    together = backward(combo)
    summed = {n: sum(c * g[n] for c, g in zip(coeffs, each, strict=True)) for n in together}
    sizes = {n: sum(abs(c) * g[n].abs() for c, g in zip(coeffs, each, strict=True)) for n in together}
    return combo, together, summed, each, sizes


def combo_text(coeffs: list[float]) -> str:
    """2·v1 − 1·v2 + 0.5·v3 ..."""
    parts = []
    for k, c in enumerate(coeffs):
        sign = "-" if c < 0 else "+"
        mag = f"{abs(c):g}"
        parts.append(("" if k == 0 and sign == "+" else f" {sign} " if k else "-") + f"{mag}·v{k + 1}")
    return "".join(parts)


def upstream_program(text: str, output: str, limits: Any, origin: Origin) -> Any:
    """Parse the upstream loss with the program parser; its only free name is y (or the output's own name)."""
    from ..language.parser import parse_program

    example = origin.give("'sum(y**2)'", '"sum(y**2)"')
    try:
        prog = parse_program(text, None, limits)
    except VjpError as e:  # the marker under the loss, named as where it came from
        e.came_from(origin)
        if not text.strip():
            e.hint = f"Write the loss in y, the program's output, e.g. {example}."
        raise
    allowed = {"y", output}
    unknown = [n for n in prog.free if n not in allowed]
    if unknown:
        raise UsageError(
            f"{text!r} uses {', '.join(repr(n) for n in unknown)}, but a downstream loss reads only the "
            f"program's output, named y there{f' (or {output!r})' if output != 'y' else ''}: write it in y, "
            f"e.g. {example}.",
            origin=origin,
        )
    if not prog.free:
        raise UsageError(
            f"{text!r} does not use y, the program's output: a loss that does not depend on y gives "
            f"v = 0. Write it in y, e.g. {example}.",
            origin=origin,
        )
    return prog


def upstream_loss(prog: Any, y: Any, output: str, limits: Any, dtype: Any, origin: Origin) -> Any:
    """L(y) by the program interpreter, y as given (a leaf for v, or the output itself for the chain check)."""
    import torch

    from .interpreter import DIAG, Interpreter, Val

    env = {n: Val(y, {"y": DIAG}, (1, 1)) for n in prog.free}
    loss = Interpreter(prog, limits, dtype).run(env).output.v
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = list(loss.shape) if isinstance(loss, torch.Tensor) else []
        raise ShapeError(
            f"{prog.source.strip()!r} gives shape {shape}, not a single number: a loss L is a scalar, and v = dL/dy "
            f"needs one. Reduce it, e.g. sum({prog.source.strip()}).",
            origin=origin,
        )
    if not loss.requires_grad:
        raise ProgramError(
            f"{prog.source.strip()!r} does not depend on y: v = dL/dy would be all zeros.", origin=origin
        )
    return loss.reshape(())


def upstream_v(prog: Any, out: Any, output: str, limits: Any, origin: Origin) -> tuple[Any, float]:
    """v = dL/dy at the output's value, and L there."""
    import torch

    y = out.detach().clone().requires_grad_(True)
    loss = upstream_loss(prog, y, output, limits, out.dtype, origin)
    (v,) = torch.autograd.grad(loss, [y], allow_unused=True)
    return (torch.zeros_like(y) if v is None else v.detach()), float(loss.detach())
