"""Where a nan or inf entered the backward pass, when the exact derivative is finite.

The straight-line trace is run again on fresh copies of the leaves (same dtype, so the same numbers), each
operation's result remembered with the expression that made it. One more backward with a hook on every
node of that graph finds the first node (in the order autograd ran them) whose incoming gradient is finite
but whose outgoing one is not: that is where the non-finite value entered. Calling that node on ones gives
its local derivative, so the product that went wrong (0 × inf) can be named. Runs only after a check found
such an element: its cost does not matter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..language import program as P
from ..result import index_label
from .interpreter import Step, Val, _ReplayInterpreter

WIDER = "--dtype float64"  # the fixes below name it so; text() words it for the front end that asked


@dataclass
class Origin:
    """What the tracer found: the node, the program's operation and the product that went wrong."""

    node: str  # e.g. ExpBackward0
    operation: str  # the program's text of the operation, e.g. exp(x)
    span: tuple[int, int]
    where: str  # the span for people: line 1, columns 5-10
    element: str  # which element of the operation's operand, e.g. exp(x)[2]
    incoming: float | None  # the gradient arriving at the node, at that element
    local: float | None  # the node's local derivative there
    outgoing: float  # what it passed on
    why: str
    fix: str
    overflow: bool = False  # an operation overflowed the dtype: --dtype float64 may be the fix

    def text(self, wider: str = WIDER) -> str:
        """One sentence for people; `wider` is how the front end that asked spells float64 (wording.py)."""
        product = ""
        if self.incoming is not None and self.local is not None:
            product = (
                f": incoming gradient {_f(self.incoming)} × local derivative {_f(self.local)} = {_f(self.outgoing)}"
            )
        summed = ""
        if math.isinf(self.outgoing):
            summed = (
                " Where a later local derivative is 0 (inf × 0, as x*x's 2x at 0 in sqrt(x*x)) or this infinite term "
                "meets one of the opposite sign in the chain rule's sum (inf - inf), the result is nan."
            )
        return (
            f"the non-finite value entered the backward pass at {self.node}, the backward of `{self.operation}` "
            f"({self.where}), at {self.element}{product}. "
            f"{self.why}{summed} Fix: {self.fix.replace(WIDER, wider)}"
        )


def _f(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.6g}"


class _Recorder(_ReplayInterpreter):
    """The replay interpreter, remembering each operation's value with its expression."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self.made: dict[int, tuple[P.Expr, Val]] = {}  # id(expression) -> (expression, value)
        self.by_node: list[tuple[Any, P.Expr]] = []

    def value_of(self, e: P.Expr, env: dict[str, Val]) -> Val:
        val = super().value_of(e, env)
        self.made[id(e)] = (e, val)
        fn = getattr(val.v, "grad_fn", None)
        if fn is not None and isinstance(e, P.BinOp | P.UnaryOp | P.Call | P.Index | P.Update):
            self.by_node.append((fn, e))
        return val


def _operands(e: P.Expr) -> list[P.Expr]:
    return list(e.children())


def find_origin(
    steps: list[Step],
    output: str,
    leaves: dict[str, torch.Tensor],
    consts: dict[str, torch.Tensor],
    v: torch.Tensor,
    source: str,
) -> Origin | None:
    """The first backward node that turned finite gradients into nan or ±inf, or None if there is none
    (the non-finite value was already in v, or it arose when grads were summed into a leaf)."""
    rec = _Recorder(next(iter(leaves.values())).dtype)
    fresh = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
    env = {**{n: Val(x) for n, x in fresh.items()}, **{n: Val(c) for n, c in consts.items()}}
    for s in steps:
        rec.fixed = s.fixed
        env[s.target] = rec.value_of(s.expr, env)
    out = env[output].v
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return None
    out = out.to(v.dtype)
    found: list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]] = []

    def finite(gs: tuple[Any, ...]) -> bool:
        return all(g is None or bool(torch.isfinite(g).all()) for g in gs)

    def hook_for(node: Any) -> Any:
        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            if not found and finite(grad_outputs) and not finite(grad_inputs):
                found.append((node, grad_inputs, grad_outputs))

        return hook

    nodes, stack, seen = [], [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        stack += [nf for nf, _ in node.next_functions]
    handles = [n.register_hook(hook_for(n)) for n in nodes]
    try:
        torch.autograd.grad(out, list(fresh.values()), v, retain_graph=True, allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    if not found:
        return None
    node, grad_inputs, grad_outputs = found[0]
    expr = next((e for fn, e in rec.by_node if fn is node), None)
    k_in = next(i for i, g in enumerate(grad_inputs) if g is not None and not bool(torch.isfinite(g).all()))
    g_bad = grad_inputs[k_in]
    k = int((~torch.isfinite(g_bad)).reshape(-1).nonzero()[0])
    g_out = grad_outputs[0]
    incoming = local = None
    if g_out is not None and g_out.shape == g_bad.shape:
        incoming = float(g_out.reshape(-1)[k])
        with torch.no_grad():
            ones = node(torch.ones_like(g_out))
        ones = ones if isinstance(ones, tuple) else (ones,)
        if k_in < len(ones) and ones[k_in] is not None and ones[k_in].shape == g_bad.shape:
            local = float(ones[k_in].reshape(-1)[k])
    outgoing = float(g_bad.reshape(-1)[k])
    name = type(node).__name__
    if expr is None:
        return Origin(name, "?", (0, 0), "not found", f"element {k}", incoming, local, outgoing, "", _GENERIC_FIX)
    text = source[expr.span[0] : expr.span[1]]
    element = index_label(f"({text})" if not isinstance(expr, P.Call) else text, _unravel(g_bad.shape, k))
    operands = [rec.made.get(id(a)) for a in _operands(expr)]
    values = [
        float(val.v.detach().reshape(-1)[k])
        if isinstance(val.v, torch.Tensor) and val.v.shape == g_bad.shape
        else (float(val.v) if not isinstance(val.v, torch.Tensor) else None)
        for _, val in (o for o in operands if o is not None)
    ]
    made = rec.made.get(id(expr))
    result = None
    if made is not None and isinstance(made[1].v, torch.Tensor) and made[1].v.shape == g_bad.shape:
        result = float(made[1].v.detach().reshape(-1)[k])
    why, fix = _why(expr, values, result, incoming, local, str(g_bad.dtype).replace("torch.", ""))
    line = source.count("\n", 0, expr.span[0]) + 1
    col = expr.span[0] - (source.rfind("\n", 0, expr.span[0]) + 1) + 1
    where = f"line {line}, columns {col}-{col + len(text) - 1}"
    overflow = result is not None and math.isinf(result)
    return Origin(name, text, expr.span, where, element, incoming, local, outgoing, why, fix, overflow)


def _unravel(shape: Any, k: int) -> tuple[int, ...]:
    idx = []
    for n in reversed(tuple(shape)):
        idx.append(k % n)
        k //= n
    return tuple(reversed(idx))


_GENERIC_FIX = (
    "make the operation's input safe where its value does not matter (the double-where pattern, or a clamp "
    "before log/sqrt), or run with --dtype float64 if a value overflowed."
)
_SAFE_INPUT = (
    "keep the input away from the singular point: in PyTorch, a clamp before it "
    "(torch.sqrt(x.clamp(min=eps)), torch.log(x.clamp(min=eps))), or the double-where pattern "
    "(torch.where(mask, f(torch.where(mask, x, 1.0)), 0.0)), so that the branch not taken is computed at a safe "
    "input; log1p(x) for log(1 + x)."
)


def _why(
    e: P.Expr, x: list[float | None], result: float | None, incoming: float | None, local: float | None, dtype: str
) -> tuple[str, str]:
    """Why the local derivative is infinite here, and the fix that applies."""
    zero_in = incoming == 0
    times = (
        " The incoming gradient there is 0 (this value does not change the output: it is multiplied by 0 "
        "further on, or it is the branch not taken), yet the chain rule still multiplies it by the local "
        "derivative, and 0 × inf = nan."
        if zero_in
        else ""
    )
    a = x[0] if x else None
    if isinstance(e, P.Call) and e.func == "exp" and result is not None and math.isinf(result):
        return (
            f"exp({_f(a) if a is not None else 'x'}) overflowed {dtype} (exp(x) is inf past x ≈ "
            f"{'88.7' if dtype == 'float32' else '709.8'}), and exp's derivative is exp(x) itself, inf.{times}",
            "run with --dtype float64 (exp overflows only past 709.8), or use a form that never builds exp(x) alone: "
            "log(exp(x)) is x; log(sum(exp(x))) is logsumexp; log(1 + exp(x)) is softplus.",
        )
    if isinstance(e, P.Call) and e.func == "sqrt" and a == 0:
        return f"sqrt′(0) = 1/(2·sqrt(0)) = inf.{times}", _SAFE_INPUT
    if isinstance(e, P.Call) and e.func == "log" and a == 0:
        return f"log′(0) = 1/0 = inf.{times}", _SAFE_INPUT
    if isinstance(e, P.BinOp) and e.op == "/" and len(x) > 1 and x[1] == 0:
        return f"division by 0: d(a/b)/da = 1/b and d(a/b)/db = -a/b² are infinite at b = 0.{times}", _SAFE_INPUT
    if isinstance(e, P.BinOp | P.Call) and (getattr(e, "op", None) == "**" or getattr(e, "func", None) == "pow"):
        if a == 0:
            return f"d(x**p)/dx = p·x**(p-1) is infinite at x = 0 for p < 1.{times}", _SAFE_INPUT
    bad = [v for v in x if v is not None and not math.isfinite(v)]
    if bad:
        return (
            f"An operand of it is {_f(bad[0])} here (a value that overflowed {dtype} or met a singular point "
            f"upstream), so its local derivative is {_f(local) if local is not None else 'not finite'}.{times}",
            "run with --dtype float64 if a value overflowed; else keep the upstream operation away from its "
            "singular point (a clamp, the double-where pattern).",
        )
    if result is not None and math.isinf(result):
        return (
            f"The operation's value overflowed {dtype} here (inf), so its derivative is inf.{times}",
            "run with --dtype float64, or rescale the computation so that it stays in range.",
        )
    if local is not None and not math.isfinite(local):
        return f"The local derivative of this operation is {_f(local)} here.{times}", _GENERIC_FIX
    return (
        "Its local derivative is finite but the gradient it passed on is not (a sum of infinite terms that the "
        "exact derivative cancels, inf − inf = nan).",
        _GENERIC_FIX,
    )
