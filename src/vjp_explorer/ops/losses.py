"""torch.nn.functional: losses, cosine_similarity, normalize, linear, layer_norm, dropout.

Every exact rule is a composition: the per-element loss written in sympy, then the reduction torch's
`reduction=` names ('none', 'sum', 'mean'), on numpy object arrays of the elements."""

from __future__ import annotations

import math
from typing import Any

from .reductions import each, np_, number, total, vector_norm
from .spec import OpSpec, Param, spellings

_REDUCTION = Param("reduction", "choice", default="mean", choices=("none", "mean", "sum"))


def _reduce(sp: Any, loss: Any, reduction: str, n: int | None = None) -> Any:
    if reduction == "none":
        return loss
    s = total(loss)
    return s if reduction == "sum" else s / sp.Integer(n if n is not None else max(1, loss.size))


def _pair(x: Any, t: Any) -> tuple[Any, Any]:
    np = np_()
    a, b = np.broadcast_arrays(x, t)
    return a, b


def _pointwise(fn: Any) -> Any:
    """A loss that is fn(input, target) per element, then reduced."""

    def rule(ctx: Any, x: Any, t: Any, reduction: str = "mean", **p: Any) -> Any:
        sp = ctx.sp
        bound = {k: number(sp, v) for k, v in p.items() if v is not None and not isinstance(v, bool)}
        return _reduce(sp, each(lambda a, b: fn(sp, a, b, **bound), *_pair(x, t)), reduction)

    return rule


def _smooth_l1(sp: Any, a: Any, b: Any, beta: Any) -> Any:
    d = a - b
    if beta == 0:
        return sp.Abs(d)
    return sp.Piecewise((d**2 / (2 * beta), sp.Abs(d) < beta), (sp.Abs(d) - beta / 2, True))


def _huber(sp: Any, a: Any, b: Any, delta: Any) -> Any:
    d = a - b
    return sp.Piecewise((d**2 / 2, sp.Abs(d) < delta), (delta * (sp.Abs(d) - delta / 2), True))


def _cross_entropy(ctx: Any, x: Any, t: Any, reduction: str = "mean", ignore_index: Any = -100, **_: Any) -> Any:
    np = np_()
    sp = ctx.sp
    cls = 1 if x.ndim >= 2 else 0
    lse = total(each(sp.exp, x), cls, True)
    logp = x - each(sp.log, lse)  # log_softmax over the classes
    if t.shape == x.shape:  # class probabilities: -sum_c t_c * log p_c
        loss = -total(t * logp, cls)
        return _reduce(sp, np.asarray(loss, dtype=object), reduction)
    return _nll_loss(ctx, logp, t, reduction, ignore_index)


def _nll_loss(ctx: Any, x: Any, t: Any, reduction: str = "mean", ignore_index: Any = -100, **_: Any) -> Any:
    """-x[target] for class indices (an integer tensor); ignore_index drops an element from sum and mean."""
    np = np_()
    sp = ctx.sp
    moved = np.moveaxis(x, 1 if x.ndim >= 2 else 0, -1)
    loss = np.empty(t.shape, dtype=object)
    kept = 0
    for idx in np.ndindex(t.shape):
        k = round(ctx.value(t[idx]))
        loss[idx] = sp.Integer(0) if k == ignore_index else -moved[idx][k]
        kept += k != ignore_index
    return _reduce(sp, loss, reduction, n=kept)


def _one_hot(ctx: Any, t: Any, num_classes: int = -1, **_: Any) -> Any:
    """1 at each index's class, 0 elsewhere (integers: no gradient flows through them)."""
    np = np_()
    sp = ctx.sp
    ks = [round(ctx.value(e)) for e in t.reshape(-1)]
    n = num_classes if num_classes != -1 else max(ks, default=-1) + 1
    out = np.empty((*t.shape, n), dtype=object)
    for idx in np.ndindex(t.shape):
        k = round(ctx.value(t[idx]))
        for c in range(n):
            out[(*idx, c)] = sp.Integer(int(c == k))
    return out


def _kl_div(ctx: Any, x: Any, t: Any, reduction: str = "mean", log_target: bool = False) -> Any:
    sp = ctx.sp
    if log_target:
        loss = each(lambda a, b: sp.exp(b) * (b - a), *_pair(x, t))
    else:  # torch: xlogy(t, t) - t*x, so a zero target adds 0
        loss = each(lambda a, b: -b * a if ctx.value(b) == 0 else b * (sp.log(b) - a), *_pair(x, t))
    if reduction == "batchmean":
        return _reduce(sp, loss, "sum") / sp.Integer(x.shape[0] if x.ndim else 1)
    return _reduce(sp, loss, reduction)


def _cosine(ctx: Any, a: Any, b: Any, dim: int = 1, eps: Any = 1e-8) -> Any:
    sp = ctx.sp
    a, b = _pair(a, b)
    dot = total(a * b, dim)
    na = total(each(lambda e: e**2, a), dim)
    nb = total(each(lambda e: e**2, b), dim)
    return each(lambda d, p, q: d / (sp.sqrt(p) * sp.sqrt(q)), dot, na, nb)


def _normalize(ctx: Any, x: Any, p: Any = 2.0, dim: int = 1, eps: Any = 1e-12) -> Any:
    norm = vector_norm(ctx, x, p, dim, keepdim=True)
    if any(ctx.value(n) <= eps for n in norm.reshape(-1)):
        raise ValueError(f"a norm is at most eps={eps:g}: torch divides by eps there")
    return x / norm


def _linear(ctx: Any, x: Any, w: Any, *bias: Any) -> Any:
    out = np_().matmul(x, w.T) if w.ndim == 2 else np_().matmul(x, w)
    return out + bias[0] if bias else out


def _layer_norm(ctx: Any, x: Any, normalized_shape: tuple[int, ...], eps: Any = 1e-5) -> Any:
    sp = ctx.sp
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    n = math.prod(normalized_shape)
    mean = total(x, dims, True) / sp.Integer(n)
    centred = x - mean
    var = total(each(lambda e: e**2, centred), dims, True) / sp.Integer(n)
    return centred / each(lambda v: sp.sqrt(v + number(sp, eps)), var)


def _dropout_check(x: tuple[int, ...], p: Any = None, training: Any = None, inplace: Any = None) -> int:
    p = 0.5 if p is None else p
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p:g}")
    if (training is None or training) and p > 0:
        raise ValueError(
            "with training=True (F.dropout's default) and p > 0 it zeroes a random part of the input, which no "
            "exact route can follow; vjp refuses it. Write F.dropout(x, p, training=False) (the identity) or p=0"
        )
    return 0


def _f(name: str, torch: bool = False) -> tuple[str, ...]:
    """torch.nn.functional (and our bare name); torch.name too where torch's own has the same signature."""
    return spellings(name, torch=torch, method=False, functional=True)


def _loss(name: str, fn: Any, doc: str, *params: Param, kink: str = "", kinks: Any = None, lo: str = "") -> OpSpec:
    return OpSpec(
        name,
        2,
        (*params, _REDUCTION),
        "general",
        f"torch.nn.functional.{name}",
        rule=fn,
        kink=kink,
        kinks=kinks,
        doc=doc,
        example=f"F.{name}(y, target)",
        names=_f(name),
    )


def _diff_sign(torch: Any, a: Any, b: Any, **_: Any) -> list[Any]:
    return [torch.sign(a - b)]


ENTRIES = [
    _loss(
        "mse_loss",
        _pointwise(lambda sp, a, b: (a - b) ** 2),
        "mean (or sum, or none) of (input - target)**2",
    ),
    _loss(
        "l1_loss",
        _pointwise(lambda sp, a, b: sp.Abs(a - b)),
        "mean (or sum, or none) of |input - target|",
        kink="|d|'(0) is taken as 0 by torch (input == target)",
        kinks=_diff_sign,
    ),
    _loss(
        "smooth_l1_loss",
        _pointwise(lambda sp, a, b, beta=1: _smooth_l1(sp, a, b, beta)),
        "d**2/(2*beta) where |d| < beta, else |d| - beta/2 (d = input - target)",
        Param("beta", "number", default=1.0),
        kink="at |d| = beta the two pieces meet with equal slopes; at d = 0 with beta=0 the slope is taken as 0",
        kinks=_diff_sign,
    ),
    _loss(
        "huber_loss",
        _pointwise(lambda sp, a, b, delta=1: _huber(sp, a, b, delta)),
        "d**2/2 where |d| < delta, else delta*(|d| - delta/2) (d = input - target)",
        Param("delta", "number", default=1.0),
        kink="at |d| = delta the two pieces meet with equal slopes",
    ),
    _loss(
        "binary_cross_entropy",
        _pointwise(lambda sp, a, b: -(b * sp.log(a) + (1 - b) * sp.log(1 - a))),
        "-(t*log(x) + (1-t)*log(1-x)) for probabilities x in (0, 1) (torch clamps each log at -100)",
    ),
    _loss(
        "binary_cross_entropy_with_logits",
        _pointwise(lambda sp, a, b: (1 - b) * a + sp.log(1 + sp.exp(-a))),
        "binary_cross_entropy(sigmoid(x), t), computed stably from the logits x",
    ),
    OpSpec(
        "cross_entropy",
        2,
        (_REDUCTION, Param("ignore_index", "int", default=-100)),
        "general",
        "torch.nn.functional.cross_entropy",
        rule=_cross_entropy,
        index_args=(1,),
        probabilities=True,
        doc="-sum(t * log_softmax(x)) over the classes (dim 1, or 0 for one sample): t holds probabilities, "
        "or class indices (an integer tensor)",
        example="F.cross_entropy(logits, probs)",
        names=_f("cross_entropy"),
    ),
    OpSpec(
        "nll_loss",
        2,
        (_REDUCTION, Param("ignore_index", "int", default=-100)),
        "general",
        "torch.nn.functional.nll_loss",
        rule=_nll_loss,
        index_args=(1,),
        doc="-x[target] for log-probabilities x (classes along dim 1, or 0 for one sample) and class indices "
        "(an integer tensor, e.g. torch.tensor([0, 2]))",
        example="F.nll_loss(log_softmax(x, dim=1), torch.tensor([0, 2]))",
        names=_f("nll_loss"),
    ),
    OpSpec(
        "one_hot",
        1,
        (Param("num_classes", "int", True),),
        "general",
        "torch.nn.functional.one_hot",
        rule=_one_hot,
        index_args=(0,),
        doc="an integer tensor of class indices as rows of 0 and 1 (an integer tensor: no gradient); "
        "num_classes is required here, so that the size is known before anything runs",
        example="(F.one_hot(torch.tensor([0, 2]), 3) * log_softmax(x, dim=1)).sum()",
        names=_f("one_hot"),
    ),
    OpSpec(
        "kl_div",
        2,
        (
            Param("reduction", "choice", default="mean", choices=("none", "mean", "sum", "batchmean")),
            Param("log_target", "bool", default=False),
        ),
        "general",
        "torch.nn.functional.kl_div",
        rule=_kl_div,
        doc="t*(log(t) - x) for log-probabilities x and probabilities t (exp(t)*(t - x) with log_target=True); "
        "reduction='mean' divides by every element, 'batchmean' by the batch size (the KL divergence)",
        example="F.kl_div(log_softmax(x, dim=0), p, reduction='sum')",
        names=_f("kl_div"),
    ),
    OpSpec(
        "cosine_similarity",
        2,
        (Param("dim", "dim", default=1), Param("eps", "number", default=1e-8)),
        "general",
        "torch.nn.functional.cosine_similarity",
        rule=_cosine,
        doc="sum(a*b) / (|a|*|b|) along dim (torch keeps the denominator above eps)",
        example="F.cosine_similarity(a, b, dim=0)",
        names=_f("cosine_similarity", torch=True),
    ),
    OpSpec(
        "normalize",
        1,
        (Param("p", "number", default=2.0), Param("dim", "dim", default=1), Param("eps", "number", default=1e-12)),
        "general",
        "torch.nn.functional.normalize",
        rule=_normalize,
        kink="where a norm is below eps torch divides by eps instead (the exact check is skipped there)",
        doc="x / max(norm_p(x along dim), eps)",
        example="F.normalize(x, dim=0)",
        names=_f("normalize")[1:],
    ),
    OpSpec(
        "linear",
        2,
        (),
        "general",
        "torch.nn.functional.linear",
        rule=_linear,
        work=lambda x, w, *b: math.prod(x) * (w[0] if len(w) == 2 else 1),
        variadic=True,
        doc="x @ W.T + b: a dense layer (bias optional, as the third tensor)",
        example="F.linear(x, W, b)",
        names=_f("linear")[1:],
    ),
    OpSpec(
        "layer_norm",
        1,
        (Param("normalized_shape", "shape", True), Param("eps", "number", default=1e-5)),
        "general",
        "torch.nn.functional.layer_norm",
        rule=_layer_norm,
        doc="(x - mean) / sqrt(var + eps) over the last dims (normalized_shape); no weight or bias",
        example="F.layer_norm(x, (3,))",
        names=_f("layer_norm")[1:],
    ),
    OpSpec(
        "dropout",
        1,
        (Param("p", "number", default=0.5), Param("training", "bool", default=True), Param("inplace", "bool")),
        "general",
        "torch.nn.functional.dropout",
        rule=lambda ctx, x, **_: x,
        work=_dropout_check,
        doc="the identity with training=False or p=0; a random mask (training=True, the default) is refused",
        example="F.dropout(x, 0.5, training=False)",
        names=_f("dropout")[1:],
    ),
]
