"""The elementwise functions of one tensor: one entry each, every fact in one place.

An exact rule is `(sympy, x, **params) -> expression`; a kinks function is `(torch, x, **params) -> [tensors]`
whose change between two points means a step crossed a kink (finite differences leave those out).
"""

from __future__ import annotations

from typing import Any

from .spec import OpSpec, Param, spellings

# torch.nn.functional.selu's constants (torch/nn/functional.py and the SELU paper), to 30 digits
SELU_ALPHA = "1.67326324235437728481704299167"
SELU_SCALE = "1.05070098735548049341933498529"


def _steps(sp: Any) -> Any:
    from . import steps  # imports sympy: only when an exact rule runs

    return steps


def _direct(name: str, sympy_name: str = "", doc: str = "", example: str = "", **kw: Any) -> OpSpec:
    """A function sympy knows by name (sympy_name, default the same) and torch computes as torch.<name>."""
    sname = sympy_name or name
    return OpSpec(
        name,
        1,
        torch=kw.pop("torch", f"torch.{name}"),
        exact=lambda sp, x: getattr(sp, sname)(x),
        evaluates=(kw.pop("evaluates", sname),),
        doc=doc,
        example=example or f"{name}(x)",
        names=kw.pop("names", None) or spellings(name, **kw),
    )


def _sign(torch: Any, x: Any, **_: Any) -> list[Any]:
    return [torch.sign(x)]


def _threshold(torch: Any, x: Any, beta: Any = 1.0, threshold: Any = 20.0, **_: Any) -> list[Any]:
    """softplus becomes x itself past beta*x = threshold: a jump of about exp(-threshold) there."""
    return [torch.sign(x * float(beta) - float(threshold))]


def _at(*points: str) -> Any:
    """Kinks at fixed points ("6") or at parameters ("min"): the sign of x minus each that is given."""

    def kinks(torch: Any, x: Any, **p: Any) -> list[Any]:
        at = [float(k) if k[0].isdigit() else p.get(k) for k in points]
        return [torch.sign(x - float(a)) for a in at if a is not None]

    return kinks


def _value(name: str) -> Any:
    """Kinks of a step function: its own value changes exactly where a step is crossed."""
    return lambda torch, x, **_: [getattr(torch, name)(x)]


def _flat(name: str, doc: str, special: str = "") -> OpSpec:
    return OpSpec(
        name,
        1,
        torch=f"torch.{name}",
        exact=lambda sp, x: getattr(_steps(sp), name)(x),
        evaluates=(name,),
        kink=f"{name}'(x) is taken as 0 by torch everywhere, at the steps too",
        kinks=_value(name),
        doc=doc,
        example=f"{name}(x) * x",
        names=spellings(name, special=special),
    )


def _f(name: str) -> tuple[str, ...]:
    """Only in torch.nn.functional (and our bare name)."""
    return spellings(name, torch=False, method=False, functional=True)


def _softplus(sp: Any, x: Any, beta: Any, threshold: Any) -> Any:
    if beta == 0:  # torch divides by beta: its value is inf, its gradient a formula with no limit behind it
        raise ValueError("softplus with beta=0 has no finite value to differentiate")
    # torch reverts to x where beta*x > threshold (documented): the rule says so, exactly
    return sp.Piecewise((x, beta * x > threshold), (sp.log(1 + sp.exp(beta * x)) / beta, True))


def _clamp(sp: Any, x: Any, min: Any = None, max: Any = None) -> Any:  # (torch's parameter names)
    if min is not None and max is not None and min.is_number and max.is_number and min > max:
        return max + 0 * x  # torch gives max everywhere, with derivative 0
    # torch's clamp backward passes the gradient where min <= x <= max: the bounds themselves included
    cases = [(min, x < min)] if min is not None else []
    cases += [(max, x > max)] if max is not None else []
    return sp.Piecewise(*cases, (x, True))


def _elu(sp: Any, x: Any, alpha: Any) -> Any:
    return sp.Piecewise((x, x > 0), (alpha * (sp.exp(x) - 1), True))


ENTRIES = [
    _direct("log", doc="natural logarithm", example="log(x)"),
    _direct("exp", doc="e**x"),
    _direct("sin", doc="sine"),
    _direct("cos", doc="cosine"),
    _direct("tan", doc="tangent"),
    _direct("tanh", doc="hyperbolic tangent", functional=True),
    OpSpec(
        "sigmoid",
        1,
        torch="torch.sigmoid",
        exact=lambda sp, x: 1 / (1 + sp.exp(-x)),
        doc="1/(1+exp(-x))",
        example="sigmoid(x)",
        names=spellings("sigmoid", functional=True, special="expit"),
    ),
    OpSpec(
        "relu",
        1,
        torch="torch.relu",
        exact=lambda sp, x: sp.Piecewise((x, x > 0), (0, True)),
        kink="relu'(0) is taken as 0 by torch",
        kinks=_sign,
        doc="max(x, 0); derivative 0 at 0, as in torch",
        example="relu(x)",
        names=spellings("relu", functional=True),
    ),
    _direct("sqrt", doc="square root"),
    OpSpec(
        "abs",
        1,
        torch="torch.abs",
        exact=lambda sp, x: sp.Abs(x),
        evaluates=("Abs",),
        kink="abs'(0) is taken as 0 by torch (sign(0))",
        kinks=_sign,
        doc="|x|; derivative sign(x), 0 at 0, as in torch",
        example="abs(x)",
        names=spellings("abs"),
    ),
    OpSpec(
        "exp2",
        1,
        torch="torch.exp2",
        exact=lambda sp, x: 2**x,
        doc="2**x",
        example="exp2(x)",
        names=spellings("exp2", special="exp2"),
    ),
    OpSpec(
        "expm1",
        1,
        torch="torch.expm1",
        exact=lambda sp, x: sp.exp(x) - 1,
        doc="exp(x) - 1, accurate near 0",
        example="expm1(x)",
        names=spellings("expm1", special="expm1"),
    ),
    OpSpec(
        "log2",
        1,
        torch="torch.log2",
        exact=lambda sp, x: sp.log(x, 2),
        doc="base-2 logarithm",
        example="log2(x)",
        names=spellings("log2"),
    ),
    OpSpec(
        "log10",
        1,
        torch="torch.log10",
        exact=lambda sp, x: sp.log(x, 10),
        doc="base-10 logarithm",
        example="log10(x)",
        names=spellings("log10"),
    ),
    OpSpec(
        "log1p",
        1,
        torch="torch.log1p",
        exact=lambda sp, x: sp.log(1 + x),
        doc="log(1 + x), accurate near 0",
        example="log1p(x)",
        names=spellings("log1p", special="log1p"),
    ),
    OpSpec(
        "rsqrt",
        1,
        torch="torch.rsqrt",
        exact=lambda sp, x: 1 / sp.sqrt(x),
        doc="1/sqrt(x)",
        example="rsqrt(x)",
        names=spellings("rsqrt"),
    ),
    OpSpec(
        "square",
        1,
        torch="torch.square",
        exact=lambda sp, x: x**2,
        doc="x**2",
        example="square(x)",
        names=spellings("square"),
    ),
    OpSpec(
        "reciprocal",
        1,
        torch="torch.reciprocal",
        exact=lambda sp, x: 1 / x,
        doc="1/x",
        example="reciprocal(x)",
        names=spellings("reciprocal"),
    ),
    OpSpec("neg", 1, torch="torch.neg", exact=lambda sp, x: -x, doc="-x", example="neg(x)", names=spellings("neg")),
    OpSpec(
        "sign",
        1,
        torch="torch.sign",
        exact=lambda sp, x: _steps(sp).sign(x),
        evaluates=("sign",),
        kink="sign'(x) is taken as 0 by torch everywhere, at 0 too",
        kinks=_sign,
        doc="-1, 0 or 1",
        example="sign(x) * x",
        names=spellings("sign"),
    ),
    _direct("asin", doc="inverse sine, on [-1, 1]"),
    _direct("acos", doc="inverse cosine, on [-1, 1]"),
    _direct("atan", doc="inverse tangent"),
    _direct("sinh", doc="hyperbolic sine"),
    _direct("cosh", doc="hyperbolic cosine"),
    _direct("asinh", doc="inverse hyperbolic sine"),
    _direct("acosh", doc="inverse hyperbolic cosine, for x >= 1"),
    _direct("atanh", doc="inverse hyperbolic tangent, on (-1, 1)"),
    _direct("erf", doc="the error function", special="erf"),
    _direct("erfc", doc="1 - erf(x)", special="erfc"),
    OpSpec(
        "logit",
        1,
        torch="torch.logit",
        exact=lambda sp, x: sp.log(x / (1 - x)),
        doc="log(x/(1-x)), on (0, 1)",
        example="logit(x)",
        names=spellings("logit", special="logit"),
    ),
    OpSpec(
        "relu6",
        1,
        torch="torch.nn.functional.relu6",
        exact=lambda sp, x: sp.Piecewise((0, x <= 0), (x, x < 6), (6, True)),
        kink="relu6'(0) and relu6'(6) are taken as 0 by torch",
        kinks=_at("0", "6"),
        doc="min(max(x, 0), 6)",
        example="relu6(x)",
        names=_f("relu6"),
    ),
    OpSpec(
        "gelu",
        1,
        torch="torch.nn.functional.gelu",
        exact=lambda sp, x: x / 2 * (1 + sp.erf(x / sp.sqrt(2))),
        doc="x*Phi(x), the exact erf form (torch's default approximate='none')",
        example="gelu(x)",
        names=_f("gelu"),
    ),
    OpSpec(
        "silu",
        1,
        torch="torch.nn.functional.silu",
        exact=lambda sp, x: x / (1 + sp.exp(-x)),
        doc="x*sigmoid(x)",
        example="silu(x)",
        names=_f("silu"),
    ),
    OpSpec(
        "softplus",
        1,
        (Param("beta", "number", default=1.0), Param("threshold", "number", default=20.0)),
        torch="torch.nn.functional.softplus",
        exact=_softplus,
        kink="x itself where beta*x > threshold, as torch documents",
        kinks=_threshold,
        doc="log(1 + exp(beta*x))/beta",
        example="softplus(x, beta=2)",
        names=_f("softplus"),
    ),
    OpSpec(
        "elu",
        1,
        (Param("alpha", "number", default=1.0),),
        torch="torch.nn.functional.elu",
        exact=_elu,
        kink="elu'(0) is taken as alpha by torch (the left side)",
        kinks=_sign,
        doc="x for x > 0, alpha*(exp(x) - 1) otherwise",
        example="elu(x, alpha=0.5)",
        names=_f("elu"),
    ),
    OpSpec(
        "selu",
        1,
        torch="torch.selu",
        exact=lambda sp, x: sp.Float(SELU_SCALE, 30) * _elu(sp, x, sp.Float(SELU_ALPHA, 30)),
        kink="selu'(0) is taken as scale*alpha by torch (the left side)",
        kinks=_sign,
        doc="scale*elu(x, alpha) with torch's fixed constants",
        example="selu(x)",
        names=spellings("selu", method=False, functional=True),
    ),
    OpSpec(
        "leaky_relu",
        1,
        (Param("negative_slope", "number", default=0.01),),
        torch="torch.nn.functional.leaky_relu",
        exact=lambda sp, x, negative_slope: sp.Piecewise((x, x > 0), (negative_slope * x, True)),
        kink="leaky_relu'(0) is taken as negative_slope by torch",
        kinks=_sign,
        doc="x for x > 0, negative_slope*x otherwise",
        example="leaky_relu(x, 0.1)",
        names=_f("leaky_relu"),
    ),
    OpSpec(
        "hardtanh",
        1,
        (Param("min_val", "number", default=-1.0), Param("max_val", "number", default=1.0)),
        torch="torch.nn.functional.hardtanh",
        exact=lambda sp, x, min_val, max_val: sp.Piecewise((min_val, x <= min_val), (x, x < max_val), (max_val, True)),
        kink="hardtanh' is taken as 0 by torch at min_val and max_val",
        kinks=_at("min_val", "max_val"),
        doc="x clamped to [min_val, max_val]",
        example="hardtanh(x)",
        names=_f("hardtanh"),
    ),
    OpSpec(
        "logsigmoid",
        1,
        torch="torch.nn.functional.logsigmoid",
        exact=lambda sp, x: -sp.log(1 + sp.exp(-x)),
        doc="log(sigmoid(x))",
        example="logsigmoid(x)",
        names=_f("logsigmoid"),
    ),
    OpSpec(
        "mish",
        1,
        torch="torch.nn.functional.mish",
        exact=lambda sp, x: x * sp.tanh(sp.log(1 + sp.exp(x))),
        doc="x*tanh(softplus(x))",
        example="mish(x)",
        names=_f("mish"),
    ),
    _flat("floor", "the largest integer <= x"),
    _flat("ceil", "the smallest integer >= x"),
    _flat("round", "the nearest integer, halves to even", special="round"),
    _flat("trunc", "x rounded towards 0"),
    OpSpec(
        "frac",
        1,
        torch="torch.frac",
        exact=lambda sp, x: x - _steps(sp).trunc(x),
        kink="frac'(x) is taken as 1 by torch everywhere, at the steps too",
        kinks=_value("trunc"),
        doc="x - trunc(x)",
        example="frac(x)",
        names=spellings("frac"),
    ),
    OpSpec(
        "clamp",
        1,
        (Param("min", "number"), Param("max", "number")),
        torch="torch.clamp",
        exact=_clamp,
        kink="clamp' is taken as 1 by torch at the bounds (min <= x <= max)",
        kinks=_at("min", "max"),
        doc="x limited to [min, max] (either may be left out); clip is the same",
        example="clamp(x, min=0, max=1)",
        names=spellings("clamp") + spellings("clip"),
    ),
    OpSpec(
        "clamp_min",
        1,
        (Param("min", "number", True),),
        torch="torch.clamp_min",
        exact=lambda sp, x, min: _clamp(sp, x, min=min),
        kink="clamp_min' is taken as 1 by torch at the bound (x >= min)",
        kinks=_at("min"),
        doc="x, at least min",
        example="clamp_min(x, 0)",
        names=spellings("clamp_min"),
    ),
    OpSpec(
        "clamp_max",
        1,
        (Param("max", "number", True),),
        torch="torch.clamp_max",
        exact=lambda sp, x, max: _clamp(sp, x, max=max),
        kink="clamp_max' is taken as 1 by torch at the bound (x <= max)",
        kinks=_at("max"),
        doc="x, at most max",
        example="clamp_max(x, 1)",
        names=spellings("clamp_max"),
    ),
]
