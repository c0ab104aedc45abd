"""Independent numpy references for the arithmetic, reduction, linear-algebra and torch.nn.functional entries
(issue 18), merged into op_references.REFERENCES. numpy only: nothing here reads the registry, torch or sympy."""

from __future__ import annotations

import numpy as np

from op_references import Ref, _near, _softmax

# constants the programs read (given with --const): a well-conditioned shift for inverse
MATH_CONSTS = {"I5x3": 5 * np.eye(3)}


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return np.log(_softmax(x, axis))


def _smooth_l1(a: np.ndarray, b: np.ndarray, beta: float) -> np.ndarray:
    d = np.abs(a - b)
    return np.where(d < beta, 0.5 * d**2 / beta, d - 0.5 * beta)


def _huber(a: np.ndarray, b: np.ndarray, delta: float) -> np.ndarray:
    d = np.abs(a - b)
    return np.where(d < delta, 0.5 * d**2, delta * (d - 0.5 * delta))


def _cosine(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    return np.sum(a * b, axis) / (np.linalg.norm(a, axis=axis) * np.linalg.norm(b, axis=axis))


def _layer_norm(x: np.ndarray) -> np.ndarray:
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)


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
    "nll_loss": Ref(lambda x: -(x[0, 0] + x[1, 2]) / 2, "F.nll_loss(a, torch.tensor([0, 2]))", shape=(2, 3), leaves=1),
    "one_hot": Ref(lambda x: x * np.eye(3)[[0, 2, 1]], "a * F.one_hot(torch.tensor([0, 2, 1]), 3)", shape=(3, 3)),
    "max_dim": Ref(lambda x: np.max(x, axis=1), "a.max(dim=1).values", shape=(2, 3), distinct=True),
    "min_dim": Ref(lambda x: np.min(x, axis=0) * 2, "v, i = torch.min(a, 0); v * 2", shape=(2, 3), distinct=True),
    "amin": Ref(
        lambda x: np.min(x, axis=0, keepdims=True), "torch.amin(a, dim=0, keepdim=True)", shape=(2, 3), distinct=True
    ),
    "argmax": Ref(lambda x: x * np.argmax(x), "a * argmax(a)", distinct=True),
    "argmin": Ref(lambda x: x * np.argmin(x, axis=0), "a * a.argmin(dim=0)", shape=(2, 3), distinct=True),
    "var": Ref(lambda x: np.var(x, axis=1, ddof=1), "a.var(dim=1)", shape=(2, 3)),
    "std": Ref(lambda x: np.std(x), "torch.std(a, correction=0)", shape=(2, 3), distinct=True),  # sqrt's kink at 0
    # torch's cumprod backward divides by the input: a tiny one (5e-324, or products below float32's range)
    # loses the gradient's digits
    "cumprod": Ref(
        lambda x: np.cumprod(x, axis=1),
        "cumprod(a, dim=1)",
        shape=(2, 3),
        keep=lambda x: bool(np.all((x == 0) | (np.abs(x) > 1e-6))),
    ),
    "trace": Ref(np.trace, "torch.trace(a)", shape=(3, 3)),
    "vector_norm": Ref(lambda x: np.sum(np.abs(x)), "torch.linalg.vector_norm(a, ord=1)", kinks=_near(0)),
    "linalg_norm": Ref(
        lambda x: np.max(np.sum(np.abs(x), axis=1)),
        "torch.linalg.norm(a, ord=float('inf'))",
        shape=(2, 3),
        kinks=_near(0),
        distinct=True,
    ),
    # linear algebra
    "dot": Ref(np.dot, "torch.dot(a, b)"),
    "inner": Ref(np.inner, "torch.inner(a, b)", shape=(2, 3), b_shape=(4, 3)),
    "outer": Ref(np.outer, "torch.outer(a, b)", b_shape=(2,)),
    "mv": Ref(np.dot, "torch.mv(a, b)", shape=(2, 3), b_shape=(3,)),
    "bmm": Ref(np.matmul, "torch.bmm(a, b)", shape=(2, 2, 3), b_shape=(2, 3, 2)),
    "einsum": Ref(
        lambda a, b: np.einsum("...j,kj->...k", a, b),
        "torch.einsum('...j,kj->...k', a, b)",
        leaves=2,
        shape=(2, 3),
        b_shape=(4, 3),
    ),
    # at singular matrices torch's backward gives zeros, not the cofactors (pytorch#104675): the checks say so
    "det": Ref(np.linalg.det, "torch.det(a)", shape=(3, 3), keep=lambda x: abs(np.linalg.det(x)) > 0.1),
    "inverse": Ref(lambda x: np.linalg.inv(x + 5 * np.eye(3)), "torch.linalg.inv(a + I5x3)", -1, 1, shape=(3, 3)),
    "diag": Ref(lambda x: np.diag(x, 1), "torch.diag(a, 1)", shape=(3, 3)),
    "diagonal": Ref(lambda x: np.diagonal(x, 0, 1, 2), "a.diagonal(0, 1, 2)", shape=(2, 3, 3)),
    # torch.nn.functional
    "mse_loss": Ref(lambda a, b: np.mean((a - b) ** 2), "F.mse_loss(a, b)"),
    "l1_loss": Ref(lambda a, b: np.sum(np.abs(a - b)), "F.l1_loss(a, b, reduction='sum')", apart=True),
    "smooth_l1_loss": Ref(
        lambda a, b: _smooth_l1(a, b, 0.5), "F.smooth_l1_loss(a, b, reduction='none', beta=0.5)", apart=True
    ),
    "huber_loss": Ref(lambda a, b: np.mean(_huber(a, b, 2.0)), "torch.nn.functional.huber_loss(a, b, delta=2.0)"),
    "binary_cross_entropy": Ref(
        lambda a, b: np.mean(-(b * np.log(a) + (1 - b) * np.log(1 - a))), "F.binary_cross_entropy(a, b)", 0.05, 0.95
    ),
    "binary_cross_entropy_with_logits": Ref(
        lambda a, b: np.sum(np.log1p(np.exp(-a)) + (1 - b) * a),
        "F.binary_cross_entropy_with_logits(a, b, reduction='sum')",
        b_lo=0.0,
        b_hi=1.0,
    ),
    "cross_entropy": Ref(
        lambda a, b: -np.sum(b * _log_softmax(a, 1)) / 2, "F.cross_entropy(a, b)", shape=(2, 3), b_lo=0.0, b_hi=1.0
    ),
    "kl_div": Ref(
        lambda a, b: np.sum(b * (np.log(b) - a)) / 2,
        "F.kl_div(a, b, reduction='batchmean')",
        shape=(2, 3),
        b_lo=0.1,
        b_hi=1.0,
    ),
    "cosine_similarity": Ref(lambda a, b: _cosine(a, b, 1), "torch.cosine_similarity(a, b)", 0.2, 3.0, shape=(2, 3)),
    "normalize": Ref(lambda x: x / np.linalg.norm(x, axis=1, keepdims=True), "F.normalize(a)", 0.2, 3.0, shape=(2, 3)),
    "linear": Ref(
        lambda x, w, b: x @ w.T + b, "F.linear(a, b, c)", shape=(2, 3), b_shape=(4, 3), c_shape=(4,), leaves=3
    ),
    "layer_norm": Ref(_layer_norm, "F.layer_norm(a, (3,))", shape=(2, 3)),
    "dropout": Ref(lambda x: x * x, "F.dropout(a, 0.5, training=False) * a"),
}
