"""The size of the terms backward adds up, per input element: an absolute backward, for the tolerance.

backward(v) sums, for each input element, the products of local derivatives along every path of the graph.
Where equal terms cancel (`exp(x) - exp(x)`, `W@x*1e8 - W@x*1e8`), the sum is small but its rounding is at
the size of the terms. This runs the same backward with |v| and every node's local derivative made
non-negative, so each element gets Σ|terms|: the scale of its rounding (engine/tolerance.py weighs it).

It needs only a callable `f(*tensors) -> tensor` that autograd can run through (the program's trace, the
snippet child's ATen replay, the user's function in `vjp check`): nothing here knows a door. Nodes whose
local Jacobian has at most one nonzero per row and column (elementwise functions, sums, indexing, views,
adds and subtractions) are made non-negative by |local Jᵀ·g| with g >= 0; contractions (matrix products)
take the absolute values of their saved operands, where |Wᵀg| would let W's signs cancel. A few local
derivatives that themselves cancel count at the size of their terms: tanh′ = 1 − t² as 1 + t², sigmoid′ =
s·(1 − s) as s (torch computes it so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _mm(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    a, b = _saved(node, "_saved_self"), _saved(node, "_saved_mat2")
    return (_or(old[0], lambda: g @ b.abs().mT, b), _or(old[1], lambda: a.abs().mT @ g, a))


def _mv(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    a, x = _saved(node, "_saved_self"), _saved(node, "_saved_vec")
    return (_or(old[0], lambda: g[:, None] * x.abs()[None, :], x), _or(old[1], lambda: a.abs().mT @ g, a))


def _addmm(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    a, b = _saved(node, "_saved_mat1"), _saved(node, "_saved_mat2")
    first = None if old[0] is None else old[0].abs()
    return (first, _or(old[1], lambda: g @ b.abs().mT, b), _or(old[2], lambda: a.abs().mT @ g, a))


def _dot(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    a, b = _saved(node, "_saved_self"), _saved(node, "_saved_tensor")
    return (_or(old[0], lambda: g * b.abs(), b), _or(old[1], lambda: g * a.abs(), a))


def _tanh(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    t = _saved(node, "_saved_result")
    return (_or(old[0], lambda: g * (1 + t * t), t),)


def _sigmoid(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    s = _saved(node, "_saved_result")
    return (_or(old[0], lambda: g * s.abs(), s),)


def _det(node: Any, g: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    """det's gradient is the cofactor matrix: entry (i, j) a sum of products of one entry from each other row,
    which cancel to 0 where the minor is singular. Their size is bounded by the product of the other rows'
    norms (Hadamard), the scale at which LU rounds it."""
    a = _saved(node, "_saved_A")

    def sizes() -> Any:
        rows = a.abs().norm(dim=-1)  # (..., n)
        n = rows.shape[-1]
        others = rows.unsqueeze(-2).expand(*rows.shape[:-1], n, n).clone()
        others.diagonal(dim1=-2, dim2=-1).fill_(1.0)  # row i left out of its own product
        return g.abs()[..., None, None] * others.prod(-1)[..., :, None].expand(a.shape)

    return (_or(old[0], sizes, a),)


# grad_fn name -> |local Jᵀ|·g from the node's saved tensors; every other node: |local Jᵀ·g|
RULES: dict[str, Callable[[Any, Any, tuple[Any, ...]], tuple[Any, ...]]] = {
    "MmBackward0": _mm,
    "MvBackward0": _mv,
    "AddmmBackward0": _addmm,
    "DotBackward0": _dot,
    "TanhBackward0": _tanh,
    "SigmoidBackward0": _sigmoid,
    "LinalgDetBackward0": _det,
}


def _saved(node: Any, name: str) -> Any:
    try:
        return getattr(node, name)
    except (AttributeError, RuntimeError):  # not saved (that input needs no grad), or freed
        return None


def _or(old: Any, make: Callable[[], Any], operand: Any) -> Any:
    """The rule's value where its operand was saved and a grad is wanted there; else |old| (or None)."""
    if old is None:
        return None
    if operand is None:
        return old.abs()
    new = make()
    return new.reshape(old.shape) if new.numel() == old.numel() else old.abs()


def _hook(node: Any) -> Callable[..., Any]:
    rule = RULES.get(type(node).__name__)

    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if rule is not None and grad_outputs and grad_outputs[0] is not None:
            try:
                return tuple(rule(node, grad_outputs[0], grad_inputs))
            except RuntimeError:  # shapes the rule does not know (batched, broadcast): the plain way
                pass
        return tuple(None if g is None else g.abs() for g in grad_inputs)

    return hook


def absolute_backward(out: Any, inputs: Sequence[Any], v: Any, retain: bool = False) -> list[Any]:
    """Σ|terms| per element of each input: backward(|v|) through the graph behind `out` (which must still
    hold its saved tensors), every local derivative made non-negative. Zeros where an input is unused."""
    import torch

    with torch.enable_grad():  # the seed as a scalar root: grad_outputs would import torch.fx and sympy (0.4 s)
        root = (out * v.abs().to(out.dtype)).sum()
    handles, seen, stack = [], set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ != "AccumulateGrad":
            handles.append(node.register_hook(_hook(node)))
        stack += [nf for nf, _ in node.next_functions]
    try:
        got = torch.autograd.grad(root, list(inputs), allow_unused=True, retain_graph=retain)
    finally:
        for h in handles:
            h.remove()
    return [torch.zeros_like(x) if g is None else g.nan_to_num(0.0, 0.0, 0.0) for x, g in zip(inputs, got, strict=True)]


def term_sizes(f: Callable[..., Any], xs: Sequence[Any], v: Any) -> list[Any]:
    """Σ|terms| backward adds up for each element of each input, in float64: f run once more on float64
    copies of xs (that need grad), then absolute_backward. f(*xs) -> tensor, differentiable by autograd."""
    import torch

    xs64 = [x.detach().to(torch.float64).requires_grad_(True) for x in xs]
    with torch.enable_grad():
        out = f(*xs64)
        return [m.detach() for m in absolute_backward(out, xs64, v.detach().to(torch.float64).reshape(out.shape))]


def jacobian_term_sizes(f: Callable[..., Any], xs: Sequence[Any], max_rows: int) -> list[Any] | None:
    """Per input, an (m × n) matrix: the size of the terms of each entry ∂y[i]/∂x[j] as backward forms it, one
    absolute backward per output row (one-hot v); None where the output has more than max_rows elements."""
    import torch

    xs64 = [x.detach().to(torch.float64).requires_grad_(True) for x in xs]
    with torch.enable_grad():
        out = f(*xs64)
        m = out.numel()
        if m > max_rows:
            return None
        rows: list[list[Any]] = [[] for _ in xs64]
        for i in range(m):
            e = torch.zeros(m, dtype=torch.float64)
            e[i] = 1.0
            for k, size in enumerate(absolute_backward(out, xs64, e.reshape(out.shape), retain=True)):
                rows[k].append(size.detach().reshape(-1))
    return [
        torch.stack(r) if r else torch.zeros(0, x.numel(), dtype=torch.float64) for r, x in zip(rows, xs, strict=True)
    ]


__all__ = ["RULES", "absolute_backward", "jacobian_term_sizes", "term_sizes"]
