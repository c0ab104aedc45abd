"""Independent numpy references for the arithmetic, reduction, linear-algebra and torch.nn.functional entries
(issue 18), merged into op_references.REFERENCES. numpy only: nothing here reads the registry, torch or sympy."""

from __future__ import annotations

import numpy as np

from op_references import Ref, _near

MATH_CONSTS: dict[str, np.ndarray] = {}


def _off_steps(a: np.ndarray, b: np.ndarray) -> bool:
    """a/b away from the integers, where remainder, fmod and a rounded quotient jump."""
    q = a / b
    return bool(np.all(np.abs(q - np.round(q)) > 0.01))


MATH_REFERENCES: dict[str, Ref] = {
    # binary and ternary
    "add": Ref(lambda a, b: a + 2 * b, "torch.add(a, b, alpha=2)"),
    "sub": Ref(lambda a, b: a - 0.5 * b, "a.sub(b, alpha=0.5)"),
    "mul": Ref(np.multiply, "torch.mul(a, b)"),
    "div": Ref(
        lambda a, b: a / b + np.floor(a / b) * a,
        "torch.div(a, b) + torch.div(a, b, rounding_mode='floor') * a",
        b_lo=0.5,
        b_hi=3.0,
        keep=_off_steps,
    ),
    "remainder": Ref(np.remainder, "a % b", b_lo=0.5, b_hi=3.0, keep=_off_steps),
    "fmod": Ref(np.fmod, "fmod(a, b)", b_lo=0.5, b_hi=3.0, keep=_off_steps),
    "addcdiv": Ref(lambda a, b, c: a + 0.5 * b / c, "addcdiv(a, b, c, value=0.5)", lo=0.5),
    # reductions
    "max": Ref(
        lambda a, b: np.max(a) + np.maximum(a, b), "a.max() + torch.max(a, b)", apart=True, distinct=True, leaves=2
    ),
    "min": Ref(
        lambda a, b: np.min(a) * np.minimum(a, b), "torch.min(a) * min(a, b)", apart=True, distinct=True, leaves=2
    ),
    "amax": Ref(lambda x: np.max(x, axis=1), "amax(a, dim=1)", shape=(2, 3), distinct=True),
    "amin": Ref(
        lambda x: np.min(x, axis=0, keepdims=True), "torch.amin(a, dim=0, keepdim=True)", shape=(2, 3), distinct=True
    ),
    "argmax": Ref(lambda x: x * np.argmax(x), "a * argmax(a)", distinct=True),
    "argmin": Ref(lambda x: x * np.argmin(x, axis=0), "a * a.argmin(dim=0)", shape=(2, 3), distinct=True),
    "var": Ref(lambda x: np.var(x, axis=1, ddof=1), "a.var(dim=1)", shape=(2, 3)),
    "std": Ref(lambda x: np.std(x), "torch.std(a, correction=0)", shape=(2, 3)),
    "cumprod": Ref(lambda x: np.cumprod(x, axis=1), "cumprod(a, dim=1)", shape=(2, 3)),
    "trace": Ref(np.trace, "torch.trace(a)", shape=(3, 3)),
    "vector_norm": Ref(lambda x: np.sum(np.abs(x)), "torch.linalg.vector_norm(a, ord=1)", kinks=_near(0)),
    "linalg_norm": Ref(
        lambda x: np.max(np.sum(np.abs(x), axis=1)),
        "torch.linalg.norm(a, ord=float('inf'))",
        shape=(2, 3),
        kinks=_near(0),
        distinct=True,
    ),
}
