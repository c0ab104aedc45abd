"""THE table of backward formulas, keyed by the names autograd gives its nodes (`MulBackward0`, ...).

Each entry turns one node into Python text: given the names of the cotangents the node received (`at.g`) and
of the tensors it saved (`at.t("other")`), it gives one expression per edge of the node (per entry of
`next_functions`), in plain tensor arithmetic: no autograd. The formulas are ours, written from the
mathematics (pytorch's derivatives.yaml says the same in its own words), so a script built only from this
table is a route to Jᵀv independent of autograd's kernels. `broadcasts` marks the nodes whose inputs may have
been broadcast: their edge is summed back to the input's shape, as autograd's engine does after every node.

A node with no entry here but one in ATEN is written as a call to the ATen backward op it maps to (the same
kernel autograd ran: not independent); a node in neither loads the result autograd recorded (backward_code/
script.py says which in each statement's comment). Helpers used by a few formulas are plain functions written
into the script where used (helpers.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class At:
    """One node as a formula sees it: the names of its cotangents and saved tensors, its plain saved values."""

    grads: list[str | None]  # the cotangent of each output of the node (None: that output got none)
    saved: dict[str, Any]  # plain values: ints, floats, lists; a tensor is {"tensor": key}
    names: dict[str, str]  # a saved tensor's key -> its variable in the script
    edges: list[dict[str, Any]]  # per edge: "shape" and "dtype" of what autograd sent along it (None: nothing)
    received: list[list[int] | None]  # the shape of each cotangent the node received

    @property
    def g(self) -> str:
        if self.grads and self.grads[0] is not None:
            return self.grads[0]
        raise Unwritable("the node received no cotangent on its first output")

    @property
    def like(self) -> str:
        """A cotangent the node received (any output's): what a zero block takes its dtype from."""
        for g in self.grads:
            if g is not None:
                return g
        raise Unwritable("the node received no cotangent")

    def t(self, attr: str) -> str:
        """The variable holding a saved tensor."""
        value = self.saved.get(attr)
        if not (isinstance(value, dict) and "tensor" in value):
            raise Unwritable(f"the node saved no tensor {attr!r}")
        return self.names[value["tensor"]]

    def has(self, attr: str) -> bool:
        value = self.saved.get(attr)
        return isinstance(value, dict) and "tensor" in value

    def v(self, attr: str) -> Any:
        """A plain saved value (an int, a float, a list of ints, None)."""
        if attr not in self.saved:
            raise Unwritable(f"the node saved no value {attr!r}")
        return self.saved[attr]

    def lit(self, attr: str) -> str:
        return lit(self.v(attr))

    def shape(self, k: int) -> list[int] | None:
        return self.edges[k]["shape"] if k < len(self.edges) else None


class Unwritable(Exception):
    """A node the table has an entry for, in a form the entry does not handle: its recorded result is used."""


Rule = Callable[[At], list[str | None]]


@dataclass(frozen=True)
class Formula:
    """One node's backward: `rule` gives one expression per edge; `helpers` it calls (HELPERS)."""

    rule: Rule
    broadcasts: bool | tuple[int, ...] = False  # True: every edge; a tuple: those edges only
    helpers: tuple[str, ...] = field(default=())


def lit(value: Any) -> str:
    """A plain value as Python source: ints, floats (inf and nan too), bools, None, lists as tuples."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(lit(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise Unwritable(f"a saved value of kind {type(value).__name__}")


def _dims(at: At, n: int) -> list[int]:
    """The saved `dim` of a reduction as a sorted list of non-negative dims (None or [] means all)."""
    dim = at.saved.get("dim")
    if dim is None or dim == []:
        return list(range(n))
    dims = dim if isinstance(dim, list) else [dim]
    return sorted(d % n if n else 0 for d in dims)


def _kept(at: At, expr: str, n: int) -> str:
    """A reduction's cotangent with its reduced dims put back (size 1), so it broadcasts over the input."""
    if at.saved.get("keepdim", False) or n == 0 or "dim" not in at.saved:  # a full reduction: 0-d broadcasts
        return expr
    for d in _dims(at, n):
        expr = f"{expr}.unsqueeze({d})"
    return expr


def _sizes(at: At) -> list[int]:
    return list(at.v("self_sym_sizes"))


def _scale(expr: str, alpha: Any) -> str:
    return expr if alpha in (1, 1.0) else f"{expr} * {lit(alpha)}"


def _zeros(at: At, sizes: str) -> str:
    return f"torch.zeros({sizes}, dtype={at.like}.dtype)"


# ---------------------------------------------------------------- arithmetic (they broadcast)

ARITHMETIC: dict[str, Formula] = {
    "AddBackward0": Formula(lambda at: [at.g, _scale(at.g, at.v("alpha"))], broadcasts=True),
    "AddBackward1": Formula(lambda at: [at.g], broadcasts=True),
    "SubBackward0": Formula(lambda at: [at.g, _scale(f"-{at.g}", at.v("alpha"))], broadcasts=True),
    "SubBackward1": Formula(lambda at: [at.g], broadcasts=True),
    "RsubBackward0": Formula(lambda at: [_scale(f"-{at.g}", at.v("alpha")), at.g], broadcasts=True),
    "RsubBackward1": Formula(lambda at: [_scale(f"-{at.g}", at.v("alpha"))], broadcasts=True),
    "MulBackward0": Formula(
        lambda at: [
            f"{at.g} * {at.t('other')}" if at.shape(0) is not None else None,
            f"{at.g} * {at.t('self')}" if at.shape(1) is not None else None,
        ],
        broadcasts=True,
    ),
    "MulBackward1": Formula(lambda at: [f"{at.g} * {at.lit('other')}"], broadcasts=True),
    "DivBackward0": Formula(
        lambda at: [
            f"{at.g} / {at.t('other')}" if at.shape(0) is not None else None,
            f"-{at.g} * {at.t('self')} / ({at.t('other')} * {at.t('other')})" if at.shape(1) is not None else None,
        ],
        broadcasts=True,
    ),
    "DivBackward1": Formula(lambda at: [f"{at.g} / {at.lit('other')}"], broadcasts=True),
    "NegBackward0": Formula(lambda at: [f"-{at.g}"]),
    "PowBackward0": Formula(
        lambda at: [
            f"torch.zeros_like({at.t('self')})"
            if at.v("exponent") == 0
            else f"{at.g} * {at.lit('exponent')} * {at.t('self')} ** {lit(at.v('exponent') - 1)}"
        ]
    ),
    "PowBackward1": Formula(
        lambda at: [
            f"{at.g} * {at.t('exponent')} * {at.t('self')} ** ({at.t('exponent')} - 1)"
            if at.shape(0) is not None
            else None,
            # 0 ** e has derivative 0 in e where e >= 0 (log 0 = -inf would give nan): torch's rule
            f"{at.g} * torch.where(({at.t('self')} == 0) & ({at.t('exponent')} >= 0), 0.0, "
            f"{at.t('result')} * torch.log({at.t('self')}))"
            if at.shape(1) is not None
            else None,
        ],
        broadcasts=True,
    ),
    "PowBackward2": Formula(lambda at: [f"{at.g} * {at.t('result')} * math.log({at.lit('self')})"]),
}

# ---------------------------------------------------------------- elementwise functions of one tensor

ELEMENTWISE: dict[str, Formula] = {
    "ExpBackward0": Formula(lambda at: [f"{at.g} * {at.t('result')}"]),
    "LogBackward0": Formula(lambda at: [f"{at.g} / {at.t('self')}"]),
    "Log1PBackward0": Formula(lambda at: [f"{at.g} / (1 + {at.t('self')})"]),
    "Log2Backward0": Formula(lambda at: [f"{at.g} / ({at.t('self')} * math.log(2))"]),
    "Log10Backward0": Formula(lambda at: [f"{at.g} / ({at.t('self')} * math.log(10))"]),
    "SqrtBackward0": Formula(lambda at: [f"{at.g} / (2 * {at.t('result')})"]),
    "RsqrtBackward0": Formula(lambda at: [f"-0.5 * {at.g} * {at.t('result')} ** 3"]),
    "SinBackward0": Formula(lambda at: [f"{at.g} * torch.cos({at.t('self')})"]),
    "CosBackward0": Formula(lambda at: [f"-{at.g} * torch.sin({at.t('self')})"]),
    "TanhBackward0": Formula(lambda at: [f"{at.g} * (1 - {at.t('result')} ** 2)"]),
    "SigmoidBackward0": Formula(lambda at: [f"{at.g} * {at.t('result')} * (1 - {at.t('result')})"]),
    "AbsBackward0": Formula(lambda at: [f"{at.g} * torch.sign({at.t('self')})"]),
    "ReluBackward0": Formula(lambda at: [f"torch.where({at.t('result')} > 0, {at.g}, 0.0)"]),
    "LeakyReluBackward0": Formula(
        lambda at: [f"torch.where({at.t('self')} > 0, {at.g}, {at.g} * {at.lit('negative_slope')})"]
    ),
    "SiluBackward0": Formula(
        lambda at: [
            f"{at.g} * torch.sigmoid({at.t('self')}) * (1 + {at.t('self')} * (1 - torch.sigmoid({at.t('self')})))"
        ]
    ),
    "SoftplusBackward0": Formula(
        lambda at: [
            f"torch.where({at.t('self')} * {at.lit('beta')} > {at.lit('threshold')}, {at.g}, "
            f"{at.g} * torch.sigmoid({at.t('self')} * {at.lit('beta')}))"
        ]
    ),
    "GeluBackward0": Formula(lambda at: [_gelu(at)], helpers=("gelu_grad", "gelu_tanh_grad")),
    # clamp passes the cotangent where the input lies within the bounds (ends included), else 0
    "ClampBackward1": Formula(lambda at: [f"torch.where({_within(at)}, {at.g}, 0.0)"]),
    "ClampMinBackward0": Formula(lambda at: [f"torch.where({at.t('self')} >= {at.lit('min')}, {at.g}, 0.0)"]),
    "ClampMaxBackward0": Formula(lambda at: [f"torch.where({at.t('self')} <= {at.lit('max')}, {at.g}, 0.0)"]),
    "ToCopyBackward0": Formula(lambda at: [f"{at.g}.to(torch.{at.edges[0]['dtype']})"]),
    "CloneBackward0": Formula(lambda at: [at.g]),
    "AliasBackward0": Formula(lambda at: [at.g]),
    "WhereBackward0": Formula(
        lambda at: [
            f"torch.where({at.t('condition')}, {at.g}, 0.0)" if at.shape(0) is not None else None,
            f"torch.where({at.t('condition')}, 0.0, {at.g})" if at.shape(1) is not None else None,
        ],
        broadcasts=True,
    ),
    "NanToNumBackward0": Formula(lambda at: [f"{at.g} * torch.isfinite({at.t('self')})"]),
    "MaskedFillBackward0": Formula(lambda at: [f"torch.where({at.t('mask')}, 0.0, {at.g})"]),
    "NativeDropoutBackward0": Formula(lambda at: [f"{at.g} * {at.t('result1')} * {at.lit('scale')}"]),
}


def _within(at: At) -> str:
    low, high = at.v("min"), at.v("max")
    parts = ([f"({at.t('self')} >= {lit(low)})"] if low is not None else []) + (
        [f"({at.t('self')} <= {lit(high)})"] if high is not None else []
    )
    return " & ".join(parts) or f"torch.ones_like({at.t('self')}, dtype=torch.bool)"


def _gelu(at: At) -> str:
    form = {"none": "gelu_grad", "tanh": "gelu_tanh_grad"}.get(at.v("approximate"))
    if form is None:
        raise Unwritable("a gelu approximation the table does not know")
    return f"{at.g} * {form}({at.t('self')})"


# ---------------------------------------------------------------- reductions


def _sum(at: At) -> list[str | None]:
    sizes = _sizes(at)
    return [f"{_kept(at, at.g, len(sizes))}.expand({lit(sizes)})"]


def _mean(at: At) -> list[str | None]:
    sizes = _sizes(at)
    count = math.prod(sizes[d] for d in _dims(at, len(sizes))) if sizes else 1
    return [f"{_kept(at, at.g, len(sizes))}.expand({lit(sizes)}) / {count}"]


def _max_all(at: At) -> list[str | None]:
    # ties share the cotangent evenly, as torch's rule for a full max/min does
    hit = f"({at.t('self')} == {at.t('result')})"
    return [f"{at.g} * {hit} / {hit}.sum()"]


def _max_dim(at: At) -> list[str | None]:
    sizes, dim = _sizes(at), at.v("dim")
    n = len(sizes)
    g, idx = at.g, at.t("indices")
    if not at.v("keepdim") and n:
        g, idx = f"{g}.unsqueeze({dim % n})", f"{idx}.unsqueeze({dim % n})"
    return [f"{_zeros(at, lit(sizes))}.scatter({dim}, {idx}, {g})"]


def _amax(at: At) -> list[str | None]:
    n = len(at.received[0] or []) + (0 if at.v("keepdim") else len(at.v("dim") or [1]))
    hit = f"({at.t('self')} == {_kept(at, at.t('result'), n)})"
    dims = lit(_dims(at, n))
    return [f"{_kept(at, at.g, n)} * {hit} / {hit}.sum({dims}, keepdim=True)"]


def _logsumexp(at: At) -> list[str | None]:
    n = len(at.edges[0]["shape"] or [])
    return [f"{_kept(at, at.g, n)} * torch.exp({at.t('self')} - {_kept(at, at.t('result'), n)})"]


def _norm(at: At) -> list[str | None]:
    if at.v("ord") not in (2, 2.0):
        raise Unwritable("a norm other than the 2-norm")
    n = len(at.edges[0]["shape"] or [])
    r = _kept(at, at.t("result"), n)
    return [f"torch.where({r} == 0, 0.0, {at.t('self')} * {_kept(at, at.g, n)} / {r})"]


def _var(at: At, std: bool) -> list[str | None]:
    x = at.t("self")
    n = len(at.edges[0]["shape"] or [])
    dims = lit(_dims(at, n))
    correction = at.v("correction")
    correction = 1 if correction is None else correction
    count = f"({x}[0].numel() * 0 + {x}.numel() // {x}.mean({dims}, keepdim=True).numel() - {lit(correction)})"
    grad = f"{_kept(at, at.g, n)} * 2 * ({x} - {x}.mean({dims}, keepdim=True)) / {count}"
    return [f"{grad} / (2 * {_kept(at, at.t('result'), n)})" if std else grad]


REDUCTIONS: dict[str, Formula] = {
    "SumBackward0": Formula(_sum),
    "SumBackward1": Formula(_sum),
    "MeanBackward0": Formula(_mean),
    "MeanBackward1": Formula(_mean),
    "MaxBackward1": Formula(_max_all),
    "MinBackward1": Formula(_max_all),
    "MaxBackward0": Formula(_max_dim),
    "MinBackward0": Formula(_max_dim),
    "AmaxBackward0": Formula(_amax),
    "AminBackward0": Formula(_amax),
    "LogsumexpBackward0": Formula(_logsumexp),
    "LinalgVectorNormBackward0": Formula(_norm),
    "VarBackward0": Formula(lambda at: _var(at, std=False)),
    "StdBackward0": Formula(lambda at: _var(at, std=True)),
    "ProdBackward0": Formula(lambda at: [f"prod_grad({at.g}, {at.t('self')}, None, False)"], helpers=("prod_grad",)),
    "ProdBackward1": Formula(
        lambda at: [f"prod_grad({at.g}, {at.t('self')}, {at.v('dim')}, {at.lit('keepdim')})"], helpers=("prod_grad",)
    ),
    "CumsumBackward0": Formula(lambda at: [f"{at.g}.flip({at.v('dim')}).cumsum({at.v('dim')}).flip({at.v('dim')})"]),
}

# ---------------------------------------------------------------- views, indexing, joining


def _permute(at: At) -> list[str | None]:
    dims = [d % len(at.v("dims")) for d in at.v("dims")]
    inverse = sorted(range(len(dims)), key=lambda k: dims[k])
    return [f"{at.g}.permute({lit(inverse)})"]


def _index(at: At) -> list[str | None]:
    parts = [("None" if i is None else at.names[i["tensor"]]) for i in at.v("indices")]
    return [f"torch.ops.aten.index_put({_zeros(at, lit(_sizes(at)))}, [{', '.join(parts)}], {at.g}, True)"]


def _cat(at: At) -> list[str | None]:
    full = at.received[0]
    if full is None:
        raise Unwritable("no cotangent")
    dim = at.v("dim") % len(full)
    sizes = [None if e["shape"] is None else e["shape"][dim] for e in at.edges]
    unknown = [k for k, s in enumerate(sizes) if s is None]
    if len(unknown) > 1:
        raise Unwritable("two inputs of cat sent nothing: their sizes are not known")
    if unknown:  # one constant among the pieces: its size is what the others leave
        sizes[unknown[0]] = full[dim] - sum(s for s in sizes if s is not None)
    out: list[str | None] = []
    start = 0
    for k, size in enumerate(sizes):
        out.append(None if at.shape(k) is None else f"{at.g}.narrow({dim}, {start}, {size})")
        start += int(size or 0)
    return out


def _split(at: At) -> list[str | None]:
    sizes, dim = _sizes(at), at.v("dim") % len(_sizes(at))
    if "split_sizes" in at.saved:
        pieces = list(at.v("split_sizes"))
    else:
        step = at.v("split_size")
        pieces = [min(step, sizes[dim] - s) for s in range(0, sizes[dim], step)]
    parts = []
    for k, size in enumerate(pieces):
        grad = at.grads[k] if k < len(at.grads) else None
        shape = [*sizes[:dim], size, *sizes[dim + 1 :]]
        parts.append(grad if grad is not None else _zeros(at, lit(shape)))
    return [f"torch.cat([{', '.join(parts)}], {dim})"]


def _unbind(at: At) -> list[str | None]:
    like = next((g for g in at.grads if g is not None), None)
    if like is None:
        raise Unwritable("no cotangent")
    parts = [g if g is not None else f"torch.zeros_like({like})" for g in at.grads]
    return [f"torch.stack([{', '.join(parts)}], {at.v('dim')})"]


VIEWS: dict[str, Formula] = {
    "ViewBackward0": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "UnsafeViewBackward0": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "ReshapeAliasBackward0": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "SqueezeBackward0": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "SqueezeBackward1": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "SqueezeBackward2": Formula(lambda at: [f"{at.g}.reshape({lit(_sizes(at))})"]),
    "UnsqueezeBackward0": Formula(lambda at: [f"{at.g}.squeeze({at.v('dim')})"]),
    "ExpandBackward0": Formula(lambda at: [f"{at.g}.sum_to_size({lit(_sizes(at))})"]),
    "TBackward0": Formula(lambda at: [f"{at.g}.t()"]),
    "TransposeBackward0": Formula(lambda at: [f"{at.g}.transpose({at.v('dim0')}, {at.v('dim1')})"]),
    "PermuteBackward0": Formula(_permute),
    "RepeatBackward0": Formula(
        lambda at: [f"repeat_grad({at.g}, {lit(_sizes(at))}, {at.lit('repeats')})"], helpers=("repeat_grad",)
    ),
    "SelectBackward0": Formula(
        lambda at: [f"{_zeros(at, lit(_sizes(at)))}.select_scatter({at.g}, {at.v('dim')}, {at.v('index')})"]
    ),
    "SliceBackward0": Formula(
        lambda at: [
            f"{_zeros(at, lit(_sizes(at)))}.slice_scatter({at.g}, {at.v('dim')}, {at.lit('start')}, "
            f"{at.lit('end')}, {at.v('step')})"
        ]
    ),
    "IndexBackward0": Formula(_index),
    "IndexSelectBackward0": Formula(
        lambda at: [f"{_zeros(at, lit(_sizes(at)))}.index_add({at.v('dim')}, {at.t('index')}, {at.g})"]
    ),
    "GatherBackward0": Formula(
        lambda at: [f"torch.zeros_like({at.t('self')}).scatter_add({at.v('dim')}, {at.t('index')}, {at.g})"]
    ),
    "CatBackward0": Formula(_cat),
    "StackBackward0": Formula(
        lambda at: [None if at.shape(k) is None else f"{at.g}.select({at.v('dim')}, {k})" for k in range(len(at.edges))]
    ),
    "SplitBackward0": Formula(_split),
    "SplitWithSizesBackward0": Formula(_split),
    "UnbindBackward0": Formula(_unbind),
}

# ---------------------------------------------------------------- the matmul family


def _mm(at: At, t: str) -> list[str | None]:
    return [
        f"{at.g} @ {at.t('mat2')}.{t}" if at.shape(0) is not None else None,
        f"{at.t('self')}.{t} @ {at.g}" if at.shape(1) is not None else None,
    ]


def _addmm(at: At) -> list[str | None]:
    g = at.g
    return [
        _scale(g, at.v("beta")) if at.shape(0) is not None else None,
        _scale(f"{g} @ {at.t('mat2')}.t()", at.v("alpha")) if at.shape(1) is not None else None,
        _scale(f"{at.t('mat1')}.t() @ {g}", at.v("alpha")) if at.shape(2) is not None else None,
    ]


MATMUL: dict[str, Formula] = {
    "MmBackward0": Formula(lambda at: _mm(at, "t()")),
    "BmmBackward0": Formula(lambda at: _mm(at, "transpose(1, 2)")),
    "AddmmBackward0": Formula(_addmm, broadcasts=(0,)),  # the bias (its first edge) is broadcast over rows
    "MvBackward0": Formula(
        lambda at: [
            f"torch.outer({at.g}, {at.t('vec')})" if at.shape(0) is not None else None,
            f"{at.t('self')}.t() @ {at.g}" if at.shape(1) is not None else None,
        ]
    ),
    "DotBackward0": Formula(
        lambda at: [
            f"{at.g} * {at.t('tensor')}" if at.shape(0) is not None else None,
            f"{at.g} * {at.t('self')}" if at.shape(1) is not None else None,
        ]
    ),
}

# ---------------------------------------------------------------- softmax, losses, normalization, conv, pooling


def _nll(at: At) -> list[str | None]:
    reduction = {0: "none", 1: "mean", 2: "sum"}[at.v("reduction")]
    weight = at.t("weight") if at.has("weight") else "None"
    total = at.t("total_weight")
    args = f"{at.g}, {at.t('self')}, {at.t('target')}, {weight}, {reduction!r}, {at.v('ignore_index')}, {total}"
    return [f"nll_loss_grad({args})"]


def _mse(at: At) -> list[str | None]:
    mean = at.v("reduction") == 1
    diff = f"2 * ({at.t('self')} - {at.t('target')}) * {at.g}" + (f" / {at.t('self')}.numel()" if mean else "")
    return [diff if at.shape(0) is not None else None, f"-({diff})" if at.shape(1) is not None else None]


def _bce_logits(at: At) -> list[str | None]:
    if at.has("pos_weight"):
        raise Unwritable("pos_weight")
    x, y = at.t("self"), at.t("target")
    scale = (f" * {at.t('weight')}" if at.has("weight") else "") + (f" / {x}.numel()" if at.v("reduction") == 1 else "")
    # loss = max(x, 0) - x·y + log(1 + exp(-|x|)): d/dx = sigmoid(x) - y, d/dy = -x
    return [
        f"(torch.sigmoid({x}) - {y}) * {at.g}{scale}" if at.shape(0) is not None else None,
        f"-{x} * {at.g}{scale}" if at.shape(1) is not None else None,
    ]


def _layer_norm(at: At) -> list[str | None]:
    w = at.t("weight") if at.has("weight") else "None"
    args = f"{at.g}, {at.t('input')}, {at.lit('normalized_shape')}, {at.t('result1')}, {at.t('result2')}, {w}"
    return _pick(at, f"layer_norm_grad({args})", 3)


def _batch_norm(at: At) -> list[str | None]:
    w = at.t("weight") if at.has("weight") else "None"
    if not at.v("training"):  # eval mode: the running statistics are constants, so the map is affine
        args = f"{at.g}, {at.t('input')}, {at.t('running_mean')}, {at.t('running_var')}, {at.lit('eps')}, {w}"
        return _pick(at, f"batch_norm_eval_grad({args})", 3)
    args = f"{at.g}, {at.t('input')}, {at.t('result1')}, {at.t('result2')}, {w}"
    return _pick(at, f"batch_norm_grad({args})", 3)


def _conv(at: At) -> list[str | None]:
    weight_shape = at.edges[1]["shape"] if len(at.edges) > 1 and at.edges[1]["shape"] else None
    if at.v("transposed") or at.v("groups") != 1 or len(at.v("stride")) != 2:
        raise Unwritable("a convolution other than a plain 2-d one")
    args = f"{at.g}, {at.t('input')}, {at.t('weight')}, {at.lit('stride')}, {at.lit('padding')}, {at.lit('dilation')}"
    del weight_shape
    return _pick(at, f"conv2d_grad({args})", 3)


def _group_norm(at: At) -> list[str | None]:
    w = at.t("weight") if at.has("weight") else "None"
    args = f"{at.g}, {at.t('input')}, {at.t('result1')}, {at.t('result2')}, {w}, {at.lit('group')}"
    return _pick(at, f"group_norm_grad({args})", 3)


def _avg_pool(at: At) -> list[str | None]:
    padded = any(at.v("padding"))
    if at.v("ceil_mode") or (padded and not at.v("count_include_pad")):
        raise Unwritable("avg_pool2d with ceil_mode, or not counting its padding")
    kernel = at.v("kernel_size")
    kernel = list(kernel) * 2 if len(kernel) == 1 else kernel
    stride = at.v("stride") or kernel  # () means the kernel's size
    stride = list(stride) * 2 if len(stride) == 1 else stride
    divisor = at.v("divisor_override") or math.prod(kernel)
    args = f"{at.g}, {at.t('self')}, {lit(kernel)}, {lit(stride)}, {at.lit('padding')}, {lit(divisor)}"
    return [f"avg_pool_grad({args})"]


def _max_pool(at: At) -> list[str | None]:
    return [f"max_pool_grad({at.g}, {at.t('self')}, {at.t('result1')})"]


def _embedding(at: At) -> list[str | None]:
    if at.v("scale_grad_by_freq") or at.v("sparse"):
        raise Unwritable("scale_grad_by_freq or sparse")
    pad = at.v("padding_idx")
    return [f"embedding_grad({at.g}, {at.t('indices')}, {at.v('weight_sym_argsize_0')}, {pad})"]


def _pick(at: At, call: str, n: int) -> list[str | None]:
    """A helper that returns a tuple (one per edge): the script unpacks it, edges with nothing sent left out."""
    return [f"{call}[{k}]" if at.shape(k) is not None else None for k in range(min(n, len(at.edges)))]


NETWORKS: dict[str, Formula] = {
    "SoftmaxBackward0": Formula(
        lambda at: [f"{at.t('result')} * ({at.g} - ({at.g} * {at.t('result')}).sum({at.v('dim')}, keepdim=True))"]
    ),
    "LogSoftmaxBackward0": Formula(
        lambda at: [f"{at.g} - torch.exp({at.t('result')}) * {at.g}.sum({at.v('dim')}, keepdim=True)"]
    ),
    "NllLossBackward0": Formula(_nll, helpers=("nll_loss_grad",)),
    "MseLossBackward0": Formula(_mse, broadcasts=True),
    "BinaryCrossEntropyWithLogitsBackward0": Formula(_bce_logits),
    "NativeLayerNormBackward0": Formula(_layer_norm, helpers=("layer_norm_grad",)),
    "NativeBatchNormBackward0": Formula(_batch_norm, helpers=("batch_norm_grad", "batch_norm_eval_grad")),
    "NativeGroupNormBackward0": Formula(_group_norm, helpers=("group_norm_grad",)),
    "AvgPool2DBackward0": Formula(_avg_pool, helpers=("avg_pool_grad",)),
    "ConvolutionBackward0": Formula(_conv, helpers=("conv2d_grad",)),
    "MaxPool2DWithIndicesBackward0": Formula(_max_pool, helpers=("max_pool_grad",)),
    "EmbeddingBackward0": Formula(_embedding, helpers=("embedding_grad",)),
}


def _zeros_at(at: At, size: str, index: str) -> str:
    """g put back where the node took it from (topk, sort): zeros of the input's size, g scattered in."""
    return f"torch.zeros({at.lit(size)}, dtype={at.g}.dtype).scatter({at.v('dim')}, {at.t(index)}, {at.g})"


def _elu(at: At) -> str:
    x, a, s, i = at.t("self"), at.v("alpha"), at.v("scale"), at.v("input_scale")
    return f"{at.g} * torch.where({x} > 0, {lit(s)}, {lit(a * s * i)} * torch.exp({x} * {lit(i)}))"


# nodes that move or clip elements: each element's cotangent goes back to where it came from, or stops
PICKS: dict[str, Formula] = {
    "ConstantPadNdBackward0": Formula(
        lambda at: [f"torch.nn.functional.pad({at.g}, {lit([-p for p in at.v('pad')])})"]
    ),
    "TopkBackward0": Formula(lambda at: [_zeros_at(at, "self_sym_sizes", "indices")]),
    "SortBackward0": Formula(lambda at: [_zeros_at(at, "self_sym_sizes", "indices")]),
    "MaskedSelectBackward0": Formula(
        lambda at: [
            f"torch.zeros(torch.broadcast_shapes({at.t('self')}.shape, {at.t('mask')}.shape), dtype={at.g}.dtype)"
            f".masked_scatter({at.t('mask')}, {at.g})"
        ],
        broadcasts=True,
    ),
    "ScatterBackward0": Formula(
        lambda at: [
            f"{at.g}.scatter({at.v('dim')}, {at.t('index')}, 0.0)",
            f"{at.g}.gather({at.v('dim')}, {at.t('index')})",
        ]
    ),
    "HardtanhBackward0": Formula(
        lambda at: [f"{at.g} * (({at.t('self')} > {at.lit('min_val')}) & ({at.t('self')} < {at.lit('max_val')}))"]
    ),
    "EluBackward0": Formula(lambda at: [_elu(at)]),
}

FORMULAS: dict[str, Formula] = {**ARITHMETIC, **ELEMENTWISE, **REDUCTIONS, **VIEWS, **MATMUL, **NETWORKS, **PICKS}


def _aten_conv(at: At) -> list[str | None]:
    mask = [at.shape(k) is not None for k in range(3)]
    bias = at.v("bias_sym_sizes_opt")
    args = ", ".join(
        [
            at.g,
            at.t("input"),
            at.t("weight"),
            lit(bias) if bias is not None else "None",
            *(at.lit(a) for a in ("stride", "padding", "dilation", "transposed", "output_padding", "groups")),
            lit(mask),
        ]
    )
    return _pick(at, f"torch.ops.aten.convolution_backward({args})", 3)


# Nodes written as a call to the ATen backward op autograd itself ran: runnable and readable, not independent.
ATEN: dict[str, Rule] = {
    "ConvolutionBackward0": _aten_conv,
    "GeluBackward0": lambda at: [
        f"torch.ops.aten.gelu_backward({at.g}, {at.t('self')}, approximate={at.lit('approximate')!s})"
    ],
    "AvgPool2DBackward0": lambda at: [
        "torch.ops.aten.avg_pool2d_backward("
        + ", ".join(
            [at.g, at.t("self")]
            + [at.lit(a) for a in ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")]
            + [at.lit("divisor_override")]
        )
        + ")"
    ],
    "EluBackward0": lambda at: [
        f"torch.ops.aten.elu_backward({at.g}, {at.lit('alpha')}, {at.lit('scale')}, {at.lit('input_scale')}, "
        f"False, {at.t('self')})"
    ],
    "HardtanhBackward0": lambda at: [
        f"torch.ops.aten.hardtanh_backward({at.g}, {at.t('self')}, {at.lit('min_val')}, {at.lit('max_val')})"
    ],
}


def keeps_result(name: str, saved: dict[str, Any], sent: list[Any], received: list[Any]) -> bool:
    """Whether a capture keeps what a node sent: a node outside the table, or one in a form neither its entry
    nor its ATen call writes (batch norm in eval mode), whose script then loads it. `saved` is the node's
    saved values as the capture keeps them, `sent` and `received` the shapes of its cotangents (None: none)."""
    if name == "AccumulateGrad":
        return False
    at = At(
        grads=[None if r is None else "g" for r in received] or [None],
        saved=saved,
        names=_Echo(),
        edges=[{"shape": s, "dtype": None} for s in sent],
        received=received,
    )
    entry = FORMULAS.get(name)
    for rule in (entry.rule if entry is not None else None, ATEN.get(name)):
        if rule is None:
            continue
        try:
            rule(at)
            return False
        except (Unwritable, KeyError, TypeError, IndexError, ValueError, ZeroDivisionError):
            continue
    return True


class _Echo(dict):  # type: ignore[type-arg]
    """A saved tensor's key as its own name: enough to try a formula (keeps_result)."""

    def __missing__(self, key: str) -> str:
        return str(key)
