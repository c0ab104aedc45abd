"""Number formatting for people: correctly rounded, same width rules everywhere."""

from __future__ import annotations

import math

DEFAULT_DIGITS = {"float32": 6, "float64": 10}


def fmt(x: float, digits: int = 6) -> str:
    """A number with `digits` significant digits; nan/inf spelled out; -0 shown as 0."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    s = f"{x:.{digits}g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp):+03d}"
    return s


def fmt_shape(shape: tuple[int, ...]) -> str:
    """[3], [2, 2], [] for a scalar."""
    return "[" + ", ".join(map(str, shape)) + "]"
