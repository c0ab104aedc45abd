"""Independent references for every registry entry, keyed by the registry's names.

numpy and the math module only: nothing here reads the tool's registry, torch or sympy. Each reference
gives the program that calls the function, the numpy function of its inputs, and the domain its random
inputs are drawn from (away from the kinks, where a difference quotient is no reference).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Fn = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Ref:
    """How to call one function, its numpy value, and where its inputs come from."""

    fn: Fn
    program: str = ""  # default: name(a) or name(a, b)
    lo: float = -3.0
    hi: float = 3.0
    shape: tuple[int, ...] = (3,)
    b_shape: tuple[int, ...] | None = None  # the second input (binary functions), its own shape
    b_lo: float | None = None
    b_hi: float | None = None
    kinks: Callable[[float], float] | None = None  # distance to the nearest kink, for drawing inputs
    apart: bool = False  # binary: a kink where a == b (maximum, minimum), so a and b are drawn apart
    leaves: int = 0  # how many of a, b, c the program reads (default: the function's tensor count, at most 3)
    c_shape: tuple[int, ...] | None = None  # the third input, its own shape
    keep: Callable[..., bool] | None = None  # which draws of the inputs (a, b, ...) are away from the kinks
    distinct: bool = False  # ties between elements are kinks (max, amax, argmax): each input's elements drawn apart


_erf = np.vectorize(math.erf, otypes=[float])
_erfc = np.vectorize(math.erfc, otypes=[float])
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _near_int(x: float) -> float:
    return abs(x - round(x))


def _near_half(x: float) -> float:
    return abs(x - math.floor(x) - 0.5)


def _near(*points: float) -> Callable[[float], float]:
    return lambda x: min(abs(x - p) for p in points)


REFERENCES: dict[str, Ref] = {
    "log": Ref(np.log, lo=0.1),
    "exp": Ref(np.exp),
    "sin": Ref(np.sin),
    "cos": Ref(np.cos),
    "tan": Ref(np.tan, lo=-1.2, hi=1.2),
    "tanh": Ref(np.tanh),
    "sigmoid": Ref(lambda x: 1 / (1 + np.exp(-x))),
    "relu": Ref(lambda x: np.maximum(x, 0), kinks=_near(0)),
    "sqrt": Ref(np.sqrt, lo=0.1),
    "abs": Ref(np.abs, kinks=_near(0)),
    "exp2": Ref(np.exp2),
    "expm1": Ref(np.expm1),
    "log2": Ref(np.log2, lo=0.1),
    "log10": Ref(np.log10, lo=0.1),
    "log1p": Ref(np.log1p, lo=-0.9),
    "rsqrt": Ref(lambda x: 1 / np.sqrt(x), lo=0.1),
    "square": Ref(np.square),
    "reciprocal": Ref(np.reciprocal, lo=0.2),
    "neg": Ref(np.negative),
    "sign": Ref(np.sign, kinks=_near(0)),
    "asin": Ref(np.arcsin, lo=-0.9, hi=0.9),
    "acos": Ref(np.arccos, lo=-0.9, hi=0.9),
    "atan": Ref(np.arctan),
    "sinh": Ref(np.sinh),
    "cosh": Ref(np.cosh),
    "asinh": Ref(np.arcsinh),
    "acosh": Ref(np.arccosh, lo=1.1, hi=4.0),
    "atanh": Ref(np.arctanh, lo=-0.9, hi=0.9),
    "erf": Ref(_erf),
    "erfc": Ref(_erfc),
    "logit": Ref(lambda x: np.log(x / (1 - x)), lo=0.05, hi=0.95),
    "relu6": Ref(lambda x: np.clip(x, 0, 6), lo=-2, hi=8, kinks=_near(0, 6)),
    "gelu": Ref(lambda x: x * 0.5 * (1 + _erf(x / math.sqrt(2)))),
    "silu": Ref(lambda x: x / (1 + np.exp(-x))),
    "softplus": Ref(
        lambda x: np.where(2 * x > 20, x, np.log1p(np.exp(2 * x)) / 2), "softplus(a, beta=2)", -3, 12, kinks=_near(10)
    ),
    "elu": Ref(lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), "elu(a, alpha=0.5)", kinks=_near(0)),
    "selu": Ref(lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)), kinks=_near(0)),
    "leaky_relu": Ref(lambda x: np.where(x > 0, x, 0.1 * x), "leaky_relu(a, 0.1)", kinks=_near(0)),
    "hardtanh": Ref(lambda x: np.clip(x, -1, 1), kinks=_near(-1, 1)),
    "logsigmoid": Ref(lambda x: -np.log1p(np.exp(-x))),
    "mish": Ref(lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "floor": Ref(lambda x: np.floor(x) * x, "floor(a) * a", kinks=_near_int),
    "ceil": Ref(lambda x: np.ceil(x) * x, "ceil(a) * a", kinks=_near_int),
    "round": Ref(lambda x: np.round(x) * x, "round(a) * a", kinks=_near_half),
    "trunc": Ref(lambda x: np.trunc(x) * x, "trunc(a) * a", kinks=_near_int),
    "frac": Ref(lambda x: x - np.trunc(x), kinks=_near_int),
    "clamp": Ref(lambda x: np.clip(x, -0.5, 1.5), "clamp(a, min=-0.5, max=1.5)", kinks=_near(-0.5, 1.5)),
    "clamp_min": Ref(lambda x: np.maximum(x, 0.5), "clamp_min(a, 0.5)", kinks=_near(0.5)),
    "clamp_max": Ref(lambda x: np.minimum(x, 0.5), "a.clamp_max(0.5)", kinks=_near(0.5)),
    "pow": Ref(np.power, lo=0.2, b_lo=-2.0, b_hi=2.0),
    "atan2": Ref(np.arctan2, lo=-3, hi=3, b_lo=0.2, b_hi=3.0),
    "maximum": Ref(np.maximum, apart=True),
    "minimum": Ref(np.minimum, apart=True),
    "hypot": Ref(np.hypot, lo=0.2),
    "sum": Ref(lambda x: np.sum(x, axis=0), "sum(a, dim=0)", shape=(2, 3)),
    "mean": Ref(lambda x: np.mean(x, axis=1), "mean(a, dim=1)", shape=(2, 3)),
    "prod": Ref(np.prod, "prod(a)", lo=0.5, hi=2.0),
    "norm": Ref(lambda x: np.sum(np.abs(x) ** 3) ** (1 / 3), "norm(a, p=3)", lo=0.2),
    "matmul": Ref(np.matmul, shape=(2, 3), b_shape=(3, 2)),
    "mm": Ref(np.matmul, shape=(2, 3), b_shape=(3, 2)),
    "transpose": Ref(lambda x: x.T * np.arange(1.0, 7.0).reshape(3, 2), "transpose(a, 0, 1) * y6", shape=(2, 3)),
    "t": Ref(lambda x: x.T * np.arange(1.0, 7.0).reshape(3, 2), "t(a) * y6", shape=(2, 3)),
    "softmax": Ref(lambda x: _softmax(x, 1), "softmax(a, dim=1)", shape=(2, 3)),
    "log_softmax": Ref(lambda x: np.log(_softmax(x, 0)), "log_softmax(a, dim=0)", shape=(2, 3)),
    "detach": Ref(lambda x: x * x, "detach(a) * a"),
    "lerp": Ref(lambda a, b, w: a + w * (b - a)),
    "addcmul": Ref(lambda a, b, c: a + 0.5 * b * c, "addcmul(a, b, c, value=0.5)"),
    "logsumexp": Ref(lambda x: np.log(np.sum(np.exp(x), axis=1)), "logsumexp(a, dim=1)", shape=(2, 3)),
    "cumsum": Ref(lambda x: np.cumsum(x, axis=0), "a.cumsum(dim=0)", shape=(3, 2)),
    "tril": Ref(lambda x: np.tril(x) * x, "tril(a) * a", shape=(3, 3)),
    "triu": Ref(lambda x: np.triu(x, 1) * x, "torch.triu(a, 1) * a", shape=(3, 3)),
}
# constants some programs read (given with --const, not differentiated)
CONSTS = {"y6": np.arange(1.0, 7.0).reshape(3, 2)}

from op_references_shapes import SHAPE_REFERENCES  # noqa: E402 - the shape entries, in their own file

REFERENCES.update(SHAPE_REFERENCES)

from op_references_math import MATH_CONSTS, MATH_REFERENCES  # noqa: E402  (it imports Ref from here)

REFERENCES.update(MATH_REFERENCES)
CONSTS.update(MATH_CONSTS)
