"""Independent numpy references for the arithmetic, reduction, linear-algebra and torch.nn.functional entries
(issue 18), merged into op_references.REFERENCES. numpy only: nothing here reads the registry, torch or sympy."""

from __future__ import annotations

import numpy as np

from op_references import Ref

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
}
