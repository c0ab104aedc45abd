"""Where a nan or inf entered a backward pass: the first node that got finite cotangents and sent a non-finite one.

Run on the live graph before the real call, with hooks on every node of it (removed afterwards), so it sees
exactly what torch computes: the node's name (`ExpBackward0`), the statement that created it, the factors
(a cotangent of 0 times an infinite local derivative) and a fix that applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .interp import Interpreter

_INFINITE_SLOPE = {
    "Sqrt": "sqrt′(0) = ∞",
    "Rsqrt": "rsqrt′(0) = ∞",
    "Log": "log′(0) = ∞",
    "Log2": "log2′(0) = ∞",
    "Log10": "log10′(0) = ∞",
    "Log1P": "log1p′(-1) = ∞",
    "Div": "a division by 0",
    "Reciprocal": "1/x at 0",
    "Pow": "a power below 1 at 0",
    "Asin": "asin′(±1) = ∞",
    "Acos": "acos′(±1) = ∞",
    "Atanh": "atanh′(±1) = ∞",
}


def locate(it: Interpreter, outs: list[Any], vs: list[Any], leaves: list[Any]) -> str | None:
    """A sentence naming where a non-finite value entered backward(v), or None if it cannot be found."""
    import torch

    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if o.grad_fn is not None]
    calls: list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]] = []
    handles = []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))

        def hook(grad_inputs: Any, grad_outputs: Any, node: Any = node) -> None:
            calls.append((node, tuple(grad_inputs), tuple(grad_outputs)))

        handles.append(node.register_hook(hook))
        stack.extend(n for n, _ in node.next_functions if n is not None)
    try:
        torch.autograd.grad(outs, leaves, vs, retain_graph=True, allow_unused=True)
    except RuntimeError:
        return None
    finally:
        for h in handles:
            h.remove()
    names = {type(n).__name__ for n, _, _ in calls}
    for node, sent, arriving in calls:
        if all(g is None or bool(torch.isfinite(g).all()) for g in arriving) and any(
            g is not None and not bool(torch.isfinite(g).all()) for g in sent
        ):
            return _describe(it, node, arriving, "WhereBackward0" in names)
    return None


def _describe(it: Interpreter, node: Any, arriving: tuple[Any, ...], through_where: bool) -> str:
    import torch

    name = type(node).__name__
    op = name.removesuffix("Backward0").removesuffix("Backward1")
    where = _statement(it, node)
    zero_in = any(g is not None and bool((g == 0).any()) for g in arriving)
    result = getattr(node, "_saved_result", None)
    overflow = isinstance(result, torch.Tensor) and bool(torch.isinf(result).any())
    text = f"The non-finite value entered the backward pass at {name}{where}: "
    if overflow and isinstance(result, torch.Tensor):
        text += f"the forward {op.lower()} overflowed to inf in {str(result.dtype).removeprefix('torch.')}, "
        text += "and its backward multiplies the arriving cotangent by that inf"
        text += " (0·inf = nan)." if zero_in else "."
        fix = (
            "Compute in float64 (.double(), dtype=torch.float64), or use a stable form (logsumexp, softplus, "
            "log1p, log_softmax) that never forms the huge intermediate."
        )
    elif op in _INFINITE_SLOPE:
        text += f"its local derivative is infinite here ({_INFINITE_SLOPE[op]})"
        text += ", and the cotangent arriving is 0, so the chain rule gives 0·inf = nan." if zero_in else "."
        fix = "Clamp the input away from the singular point first (x.clamp_min(1e-12)), or rewrite the expression."
        if through_where:
            fix = (
                "torch.where differentiates both branches: the branch not taken gets a zero cotangent, and 0·inf "
                "is nan. Use the double-where pattern, which makes the unused branch's input safe: "
                "torch.where(x > 0, torch.log(torch.where(x > 0, x, 1.0)), 0.0). " + fix
            )
    else:
        text += "it received finite cotangents and sent a nan or inf on."
        fix = "Check the values this operation saw in the forward; --seed and a float64 run help narrow it down."
    return f"{text} {fix}"


def _statement(it: Interpreter, node: Any) -> str:
    """`, from `y = torch.exp(x)` (line 3)` for the recorded operation whose result has this grad_fn."""
    from .graph import statement

    line, text = statement(it, node)
    if line is None:
        return ""
    return f", from `{text}` (line {line})" if text else f" (line {line})"
